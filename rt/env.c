/* rt/env.c: reading UOPJIT_* variables, and the settings a context takes
 * from them (docs/DESIGN.md section 12).
 *
 * Every variable goes through one of the readers here, so that they all
 * treat values alike: unset or empty means "not set" (the caller keeps its
 * default); anything else must be one of the accepted values, and a value
 * that is not is reported, never ignored (rt_env_invalid), so that a typo
 * shows up at once instead of as a program that silently runs with the
 * default. A context reads its settings once, at uj_ctx_new
 * (rt_settings_from_env). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

/* One message shape for every variable, naming it, the value as given (cut
 * at 100 characters) and what is accepted:
 *   UOPJIT_THREADS="abc" is not valid: expected a whole number of threads from 1 to 1024 */
uj_status_t rt_env_invalid(const char* var, const char* value, const char* accepted) {
  return rt_error(UJ_ERR_INVALID, "%s=\"%.100s%s\" is not valid: expected %s", var, value,
                  strlen(value) > 100 ? "..." : "", accepted);
}

/* The variable's value, or NULL when it is unset or empty. */
static const char* env_value(const char* var) {
  const char* v = getenv(var);
  return v && *v ? v : NULL;
}

int rt_parse_size(const char* text, int64_t* out) {
  if (!text || !*text) return 0;
  int64_t v = 0;
  const char* p = text;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (v > (INT64_MAX - (*p - '0')) / 10) return 0;
    v = v * 10 + (*p - '0');
  }
  if (p == text) return 0;
  int shift = 0;
  switch (*p) {
    case '\0': break;
    case 'k': case 'K': shift = 10, p++; break;
    case 'm': case 'M': shift = 20, p++; break;
    case 'g': case 'G': shift = 30, p++; break;
    default: return 0;
  }
  if (*p || v > (INT64_MAX >> shift)) return 0;
  *out = v << shift;
  return 1;
}

uj_status_t rt_env_int(const char* var, int64_t lo, int64_t hi, const char* accepted, int64_t* out, int* set) {
  *set = 0;
  const char* v = env_value(var);
  if (!v) return UJ_OK;
  char* end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  /* digits only: strtoll would also take leading blanks and a sign */
  if (v[0] < '0' || v[0] > '9' || errno || *end || n < lo || n > hi) return rt_env_invalid(var, v, accepted);
  *out = n;
  *set = 1;
  return UJ_OK;
}

uj_status_t rt_env_size(const char* var, int64_t min, const char* accepted, int64_t* out, int* set) {
  *set = 0;
  const char* v = env_value(var);
  if (!v) return UJ_OK;
  int64_t n;
  if (!rt_parse_size(v, &n) || n < min) return rt_env_invalid(var, v, accepted);
  *out = n;
  *set = 1;
  return UJ_OK;
}

uj_status_t rt_env_choice(const char* var, const char* const* names, int count, const char* accepted, int* index,
                          int* set) {
  *set = 0;
  const char* v = env_value(var);
  if (!v) return UJ_OK;
  for (int i = 0; i < count; i++)
    if (strcmp(v, names[i]) == 0) {
      *index = i;
      *set = 1;
      return UJ_OK;
    }
  return rt_env_invalid(var, v, accepted);
}

uj_status_t rt_env_words(const char* var, const char* const* words, int count, const char* accepted,
                         unsigned* mask) {
  *mask = 0;
  const char* v = env_value(var);
  if (!v) return UJ_OK;
  for (const char* p = v; *p;) {
    size_t len = strcspn(p, ", ");
    if (len) {
      int found = -1;
      for (int i = 0; i < count && found < 0; i++)
        if (strlen(words[i]) == len && strncmp(p, words[i], len) == 0) found = i;
      if (found < 0) return rt_env_invalid(var, v, accepted);
      *mask |= 1u << found;
    }
    p += len;
    if (*p) p++;
  }
  return UJ_OK;
}

/* ---- a context's settings --------------------------------------------------------------- */

/* The engines' names, the one list of them: uj_engine_name, UOPJIT_ENGINE
 * and the CLI's --engine spell each engine so. */
static const char* const engine_names[RT_ENGINE_COUNT] = {
    [UJ_ENGINE_AUTO] = "auto", [UJ_ENGINE_INTERP] = "interp", [UJ_ENGINE_MIR] = "mir",
    [UJ_ENGINE_C] = "c",       [UJ_ENGINE_CUDA] = "cuda",
};

const char* uj_engine_name(uj_engine_t e) { return (unsigned)e < RT_ENGINE_COUNT ? engine_names[e] : "?"; }

void rt_engine_list(char* out, size_t cap) {
  size_t used = 0;
  if (cap) out[0] = 0;
  for (int e = 0; e < RT_ENGINE_COUNT; e++) {
    const char* sep = e == 0 ? "" : e == RT_ENGINE_COUNT - 1 ? " or " : ", ";
    used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, "%s%s", sep, engine_names[e]);
  }
}

/* UOPJIT_ENGINE: one of the engines' names. */
static uj_status_t engine_from_env(int* engine, int* set) {
  char accepted[128];
  rt_engine_list(accepted, sizeof accepted);
  return rt_env_choice("UOPJIT_ENGINE", engine_names, RT_ENGINE_COUNT, accepted, engine, set);
}

/* Keeps the message a reader left for `setting` (when it failed). */
static void note(char problems[RT_SETTING_COUNT][RT_PROBLEM_CAP], rt_setting_t setting, uj_status_t s) {
  if (s != UJ_OK) snprintf(problems[setting], RT_PROBLEM_CAP, "%s", uj_last_error());
}

/* A setting whose variable is invalid keeps its default and keeps the
 * message; the calls that use the setting return it as UJ_ERR_INVALID
 * until the setting's uj_ctx_set_* gives a valid value (rt/ctx.c). */
void rt_settings_from_env(rt_settings_t* out, char problems[RT_SETTING_COUNT][RT_PROBLEM_CAP]) {
  /* the last error is the caller's: reading settings must not change it */
  char saved[RT_PROBLEM_CAP];
  snprintf(saved, sizeof saved, "%s", uj_last_error());
  memset(out, 0, sizeof *out);
  for (int i = 0; i < RT_SETTING_COUNT; i++) problems[i][0] = '\0';
  out->engine = UJ_ENGINE_AUTO;
  out->mir_level = RT_DEFAULT_MIR_LEVEL;
  out->memory_cache_limit = -1;
  out->disk_cache_limit_from = "the default";
  out->tier_calls = RT_DEFAULT_TIER_CALLS;
  out->stream_bytes = RT_DEFAULT_STREAM_BYTES;

  int set, index;
  int64_t n;
  note(problems, RT_SETTING_ENGINE, engine_from_env(&index, &set));
  if (set) out->engine = (uj_engine_t)index;

  char accepted[96];
  snprintf(accepted, sizeof accepted, "a whole number of threads from 1 to %d", RT_MAX_THREADS);
  note(problems, RT_SETTING_THREADS, rt_env_int("UOPJIT_THREADS", 1, RT_MAX_THREADS, accepted, &n, &set));
  if (set) out->threads = (int)n;

  note(problems, RT_SETTING_MIR_LEVEL, rt_env_int("UOPJIT_MIR_LEVEL", 0, 3, "0, 1, 2 or 3", &n, &set));
  if (set) out->mir_level = (int)n;

  static const char* const cache_names[] = {"0", "1"};
  uj_status_t s = rt_env_choice("UOPJIT_CACHE", cache_names, 2, "0 (the disk cache off) or 1 (on)", &index, &set);
  note(problems, RT_SETTING_CACHE, s);
  out->cache_off = set && index == 0;
  /* UOPJIT_CACHE_DIR is any path: jit/cache/disk.c checks the directory
   * itself on first use */
  const char* dir = getenv("UOPJIT_CACHE_DIR");
  if (dir && *dir) snprintf(out->cache_dir, sizeof out->cache_dir, "%s", dir);
  if (dir && strlen(dir) >= sizeof out->cache_dir) {
    out->cache_dir[0] = '\0';
    rt_error(UJ_ERR_INVALID, "UOPJIT_CACHE_DIR is %zu characters long: expected a path of at most %zu", strlen(dir),
             sizeof out->cache_dir - 1);
    note(problems, RT_SETTING_CACHE, UJ_ERR_INVALID);
  }

  note(problems, RT_SETTING_MEMORY_CACHE_LIMIT,
       rt_env_size("UOPJIT_CACHE_MEMORY_LIMIT", 0, RT_SIZE_ACCEPTED, &n, &set));
  if (set) out->memory_cache_limit = n;

  note(problems, RT_SETTING_DISK_CACHE_LIMIT,
       rt_env_size("UOPJIT_CACHE_DISK_LIMIT", 1, "a positive " RT_SIZE_ACCEPTED_TAIL, &n, &set));
  if (set) {
    out->disk_cache_limit = n;
    out->disk_cache_limit_from = "UOPJIT_CACHE_DISK_LIMIT";
  }

  note(problems, RT_SETTING_TIER,
       rt_env_int("UOPJIT_TIER", 0, RT_MAX_TIER_CALLS,
                  "0 (tiering off) or the calls a new kernel makes before its C compile starts, up to 1000000000",
                  &n, &set));
  if (set) out->tier_calls = (int)n;

  note(problems, RT_SETTING_STREAM, rt_env_size("UOPJIT_STREAM_BYTES", 0, RT_SIZE_ACCEPTED, &n, &set));
  if (set) out->stream_bytes = n;
  rt_error(UJ_OK, "%s", saved);
}
