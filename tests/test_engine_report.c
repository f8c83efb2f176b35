/* tests/test_engine_report.c: what the library says about the engine that
 * serves, or cannot serve, a program.
 *
 * The C engine compiles under TMPDIR. A TMPDIR that is missing or is not a
 * directory is reported as such, naming the directory and TMPDIR, by
 * uj_ctx_set_engine(C) and by a C run (with the compiler remembered in the
 * disk cache, so that its probe does not run): never as "no working C
 * compiler". Under AUTO the run succeeds on MIR (or the interpreter) and
 * uj_program_last_run gives the same reason. jit_tier_served, which the
 * uopjit tool reads to name the engine of each optimizer step, counts the
 * calls the quick tier served and the picks of C, so that a call that
 * moved neither count is known to have run C. */
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "uopjit.h"

#include "../jit/tier.h"

enum { N = 4096 };

static int remove_one(const char* path, const struct stat* st, int type, struct FTW* ftw) {
  (void)st, (void)type, (void)ftw;
  return remove(path);
}

static void make_dir(char* out, size_t cap, const char* what) {
  snprintf(out, cap, "/tmp/uj-test-engine-report-%s-XXXXXX", what);
  if (!mkdtemp(out)) {
    perror("mkdtemp");
    exit(2);
  }
}

static int available(uj_engine_t e) {
  uj_ctx_t* ctx = uj_ctx_new();
  int ok = ctx && uj_engine_available(ctx, e);
  uj_ctx_free(ctx);
  return ok;
}

/* A context on engine e whose disk cache is dir (NULL: none). */
static uj_ctx_t* ctx_on(uj_engine_t e, const char* dir, uj_status_t* engine_status) {
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx) return NULL;
  uj_ctx_set_cache_dir(ctx, dir);
  uj_status_t s = e == UJ_ENGINE_AUTO ? UJ_OK : uj_ctx_set_engine(ctx, e);
  if (engine_status) *engine_status = s;
  return ctx;
}

/* y = x * k + 1 on N elements; k makes each a kernel of its own. The
 * program is *keep when that is set (run again: the program's memo), else
 * parsed and left in *keep (freed when keep is NULL). */
static uj_status_t run_scaled(uj_ctx_t* ctx, uj_program_t** keep, int k) {
  static float x[N], y[N];
  uj_program_t* p = keep ? *keep : NULL;
  uj_status_t s = UJ_OK;
  if (!p) {
    char src[64];
    snprintf(src, sizeof src, "y = x * %d + 1", k);
    s = uj_program_parse(src, &p);
  }
  for (int i = 0; i < N; i++) x[i] = (float)i;
  uj_tensor_t tx = {x, UJ_F32, UJ_CPU, 1, {N}}, ty = {y, UJ_F32, UJ_CPU, 1, {N}};
  const uj_tensor_t* in[] = {&tx};
  uj_tensor_t* out[] = {&ty};
  if (s == UJ_OK) s = uj_program_run(ctx, p, UJ_FORWARD, in, 1, NULL, 0, out, 1);
  if (s == UJ_OK && (y[3] != 3.0f * (float)k + 1 || y[N - 1] != (float)(N - 1) * (float)k + 1)) s = UJ_ERR_INVALID;
  if (keep) *keep = p;
  else uj_program_free(p);
  return s;
}

/* 1 when msg names where the C engine wanted its directory, and not the
 * compiler. */
static int names_tmpdir(const char* msg, const char* dir) {
  char where[256];
  snprintf(where, sizeof where, "cannot create a temporary directory in %s (TMPDIR): ", dir);
  int ok = strstr(msg, where) && !strstr(msg, "working C compiler");
  if (!ok) printf("  message: \"%s\"\n  wanted: \"%s...\"\n", msg, where);
  return ok;
}

TEST(a_tmpdir_that_cannot_be_used_is_named_by_the_c_engine) {
  SKIP_IF(!available(UJ_ENGINE_C), "no C compiler");
  char base[96], cache[96], not_dir[128], missing[128];
  make_dir(base, sizeof base, "tmp");
  make_dir(cache, sizeof cache, "cache");
  snprintf(missing, sizeof missing, "%s/no-such-dir", base);
  snprintf(not_dir, sizeof not_dir, "%s/a-file", base);
  FILE* f = fopen(not_dir, "w");
  CHECK(f != NULL);
  if (f) fclose(f);
  const char* const dirs[] = {missing, not_dir};
  const char* const errors[] = {"No such file or directory", "Not a directory"};
  for (int d = 0; d < 2; d++) {
    /* no disk cache: the compiler's probe runs, and cannot */
    setenv("TMPDIR", dirs[d], 1);
    uj_status_t s = UJ_OK;
    uj_ctx_t* ctx = ctx_on(UJ_ENGINE_C, NULL, &s);
    CHECK(s == UJ_ERR_UNSUPPORTED);
    CHECK(names_tmpdir(uj_last_error(), dirs[d]) && strstr(uj_last_error(), errors[d]));
    CHECK(strstr(uj_last_error(), "engine c is not available: ") != NULL);
    CHECK(!uj_engine_available(ctx, UJ_ENGINE_C));
    uj_ctx_free(ctx);
    unsetenv("TMPDIR");
  }
  /* a cache that remembers the compiler: the probe is not run, the
   * compile of a kernel new to the cache is what fails */
  uj_ctx_t* warm = ctx_on(UJ_ENGINE_C, cache, NULL);
  CHECK(warm && run_scaled(warm, NULL, 2) == UJ_OK);
  uj_ctx_free(warm);
  setenv("TMPDIR", missing, 1);
  uj_status_t s = UJ_ERR_OOM;
  uj_ctx_t* ctx = ctx_on(UJ_ENGINE_C, cache, &s);
  CHECK(s == UJ_OK);
  CHECK(ctx && run_scaled(ctx, NULL, 2) == UJ_OK); /* in the cache: no compile */
  s = ctx ? run_scaled(ctx, NULL, 3) : UJ_ERR_OOM;
  CHECK(s == UJ_ERR_IO);
  CHECK(names_tmpdir(uj_last_error(), missing));
  uj_ctx_free(ctx);
  unsetenv("TMPDIR");
  nftw(base, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  nftw(cache, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* AUTO stays on its quick tier, and says why C never came. */
TEST(under_auto_the_reason_is_reported_by_the_last_run) {
  SKIP_IF(!available(UJ_ENGINE_C), "no C compiler");
  char base[96], missing[128];
  make_dir(base, sizeof base, "tmp");
  snprintf(missing, sizeof missing, "%s/no-such-dir", base);
  setenv("TMPDIR", missing, 1);
  uj_ctx_t* ctx = ctx_on(UJ_ENGINE_AUTO, NULL, NULL);
  uj_program_t* p = NULL;
  uj_run_info_t info;
  memset(&info, 0, sizeof info);
  /* the probe runs in the background: run until it has answered (a bound
   * against a hang; it takes milliseconds) */
  for (int runs = 0; ctx && runs < 20000 && info.tier != UJ_TIER_FAILED; runs++) {
    CHECK(run_scaled(ctx, &p, 5) == UJ_OK);
    CHECK(p && uj_program_last_run(ctx, p, UJ_FORWARD, &info) == UJ_OK);
    if (info.tier != UJ_TIER_FAILED) usleep(1000);
  }
  CHECK(info.tier == UJ_TIER_FAILED);
  CHECK(info.engine == (available(UJ_ENGINE_MIR) ? UJ_ENGINE_MIR : UJ_ENGINE_INTERP));
  CHECK(names_tmpdir(info.c_error, missing));
  uj_program_free(p);
  uj_ctx_free(ctx);
  unsetenv("TMPDIR");
  nftw(base, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The counts move with the tier that serves: MIR while C compiles, then a
 * pick of C, then nothing (memo hits on C); nothing at all without
 * tiering. */
TEST(tier_served_counts_tell_which_tier_served) {
  SKIP_IF(!available(UJ_ENGINE_C) || !available(UJ_ENGINE_MIR), "needs both MIR and a C compiler");
  int64_t mir, interp, c;
  uj_ctx_t* fixed = ctx_on(UJ_ENGINE_MIR, NULL, NULL);
  CHECK(fixed && run_scaled(fixed, NULL, 7) == UJ_OK);
  CHECK(jit_tier_served(fixed, &mir, &interp, &c) == 0 && mir == 0 && interp == 0 && c == 0);
  uj_ctx_free(fixed);

  char cache[96];
  make_dir(cache, sizeof cache, "cache");
  uj_ctx_t* ctx = ctx_on(UJ_ENGINE_AUTO, cache, NULL);
  uj_program_t* p = NULL;
  uj_run_info_t info;
  memset(&info, 0, sizeof info);
  int64_t mir_calls = 0;
  for (int runs = 0; ctx && runs < 20000 && info.engine != UJ_ENGINE_C; runs++) {
    CHECK(run_scaled(ctx, &p, 11) == UJ_OK); /* one program: memo hits on MIR, then C */
    CHECK(uj_program_last_run(ctx, p, UJ_FORWARD, &info) == UJ_OK);
    if (info.engine == UJ_ENGINE_MIR) mir_calls++;
    if (info.engine != UJ_ENGINE_C) usleep(1000);
  }
  CHECK(info.engine == UJ_ENGINE_C);
  CHECK(jit_tier_served(ctx, &mir, &interp, &c) == 1);
  CHECK(mir == mir_calls && interp == 0 && c >= 1);
  /* from here C serves through the program's memo: no count moves */
  int64_t mir0 = mir, c0 = c;
  for (int i = 0; i < 3; i++) CHECK(run_scaled(ctx, &p, 11) == UJ_OK);
  CHECK(jit_tier_served(ctx, &mir, &interp, &c) == 1 && mir == mir0 && c == c0);
  CHECK(run_scaled(ctx, NULL, 11) == UJ_OK); /* a new program of that kernel: one more pick of C */
  CHECK(jit_tier_served(ctx, &mir, &interp, &c) == 1 && mir == mir0 && c == c0 + 1);
  uj_program_free(p);
  uj_ctx_free(ctx);
  nftw(cache, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Threads share programs, each with its own context: each context learns
 * of its own last run of a program, never another's (uj_program_last_run
 * answers per context; before, it gave whichever context ran last). */
TEST(the_last_run_is_the_asking_contexts) {
  uj_ctx_t* interp = ctx_on(UJ_ENGINE_INTERP, NULL, NULL);
  uj_ctx_t* other = ctx_on(available(UJ_ENGINE_MIR) ? UJ_ENGINE_MIR : UJ_ENGINE_INTERP, NULL, NULL);
  uj_ctx_t* idle = ctx_on(UJ_ENGINE_INTERP, NULL, NULL);
  uj_program_t* p = NULL;
  CHECK(interp && other && idle);
  CHECK(run_scaled(interp, &p, 3) == UJ_OK);
  CHECK(p && run_scaled(other, &p, 3) == UJ_OK);
  uj_run_info_t a, b, c;
  CHECK(p && uj_program_last_run(interp, p, UJ_FORWARD, &a) == UJ_OK);
  CHECK(p && uj_program_last_run(other, p, UJ_FORWARD, &b) == UJ_OK);
  CHECK(p && uj_program_last_run(idle, p, UJ_FORWARD, &c) == UJ_OK);
  CHECK(a.engine == UJ_ENGINE_INTERP);
  CHECK(b.engine == uj_ctx_engine(other));
  CHECK(c.engine == UJ_ENGINE_AUTO && c.tier == UJ_TIER_NONE); /* never ran it */
  /* more contexts than are remembered: the oldest is forgotten, never
   * confused with another */
  uj_ctx_t* many[9];
  for (int i = 0; i < 9; i++) {
    many[i] = ctx_on(UJ_ENGINE_INTERP, NULL, NULL);
    CHECK(many[i] && p && run_scaled(many[i], &p, 3) == UJ_OK);
  }
  CHECK(p && uj_program_last_run(interp, p, UJ_FORWARD, &a) == UJ_OK && a.engine == UJ_ENGINE_AUTO);
  CHECK(p && uj_program_last_run(many[8], p, UJ_FORWARD, &a) == UJ_OK && a.engine == UJ_ENGINE_INTERP);
  for (int i = 0; i < 9; i++) uj_ctx_free(many[i]);
  uj_program_free(p);
  uj_ctx_free(interp);
  uj_ctx_free(other);
  uj_ctx_free(idle);
}

TEST_MAIN()
