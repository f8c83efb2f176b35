/* jit/settings.c: the context setters of what the environment sets by
 * default (docs/DESIGN.md section 12): threads, the disk cache's directory
 * (or none), the cache limits, MIR's optimization level, the tiering policy
 * and the size from which outputs are streamed; the engine's setter is in
 * jit/engine.c beside the engine table.
 *
 * Each setter checks its value first and changes nothing when it is bad
 * (UJ_ERR_INVALID naming the parameter). A valid value is stored in the
 * context's settings, which the JIT state is made from on first use, and
 * applied at once to a JIT state that already exists; it also clears the
 * problem an invalid environment value left for that setting, so a program
 * can recover from a bad variable. Nothing here makes a JIT state. */
#include <stdio.h>
#include <string.h>

#include "jit.h"
#include "tier.h"

/* The context's JIT state if it has one yet; never makes it. */
static jit_state_t* existing_state(uj_ctx_t* ctx) { return jit_state_existing(ctx); }

#define STR_(x) #x
#define STR(x) STR_(x)

/* UJ_OK when ctx is set; else UJ_ERR_INVALID naming the setter. */
static uj_status_t check_ctx(const uj_ctx_t* ctx, const char* setter) {
  return ctx ? UJ_OK : rt_error(UJ_ERR_INVALID, "%s: ctx is NULL", setter);
}

/* check_ctx, then UJ_ERR_INVALID unless lo <= value <= hi:
 * "<setter>: <name> is <value>; expected <expected>". */
static uj_status_t check_int(const uj_ctx_t* ctx, const char* setter, const char* name, int value, int lo, int hi,
                             const char* expected) {
  uj_status_t s = check_ctx(ctx, setter);
  if (s == UJ_OK && (value < lo || value > hi))
    s = rt_error(UJ_ERR_INVALID, "%s: %s is %d; expected %s", setter, name, value, expected);
  return s;
}

/* A setter's end: once its value is stored (s UJ_OK), the setting is the
 * caller's, and the environment's problem with it is cleared. */
static uj_status_t settled(uj_ctx_t* ctx, rt_setting_t setting, uj_status_t s) {
  if (s == UJ_OK) rt_ctx_setting_fixed(ctx, setting);
  return s;
}

uj_status_t uj_ctx_set_threads(uj_ctx_t* ctx, int threads) {
  uj_status_t s = check_int(ctx, __func__, "threads", threads, 0, RT_MAX_THREADS,
                            "1 to " STR(RT_MAX_THREADS) ", or 0 for one per online core");
  jit_state_t* js = s == UJ_OK ? existing_state(ctx) : NULL;
  if (js && rt_pool_size(js->pool) != threads) {
    rt_pool_t* pool = rt_pool_new(threads);
    if (!pool) return UJ_ERR_OOM; /* the old pool stays */
    rt_pool_free(js->pool);
    js->pool = pool;
  }
  if (s == UJ_OK) ctx->set.threads = threads;
  return settled(ctx, RT_SETTING_THREADS, s);
}

uj_status_t uj_ctx_set_cache_dir(uj_ctx_t* ctx, const char* path) {
  uj_status_t s = check_ctx(ctx, __func__);
  if (s != UJ_OK) return s;
  rt_settings_t next = ctx->set;
  if (path) {
    if (!*path)
      return rt_error(UJ_ERR_INVALID, "uj_ctx_set_cache_dir: path is empty; expected a directory, or NULL for no "
                                      "disk cache");
    size_t n = strlen(path);
    if (n >= sizeof next.cache_dir)
      return rt_error(UJ_ERR_INVALID, "uj_ctx_set_cache_dir: path is %zu characters long; expected at most %zu", n,
                      sizeof next.cache_dir - 1);
    memcpy(next.cache_dir, path, n + 1);
  }
  next.cache_off = !path;
  jit_state_t* js = existing_state(ctx);
  if (js) {
    jit_tier_pause(js); /* a background compile reads the directory's name */
    s = jit_disk_set_dir(js->cache, &next);
    jit_tier_resume(js);
  }
  if (s == UJ_OK) ctx->set = next;
  return settled(ctx, RT_SETTING_CACHE, s);
}

uj_status_t uj_ctx_set_mir_level(uj_ctx_t* ctx, int level) {
  uj_status_t s = check_int(ctx, __func__, "level", level, 0, 3, "0, 1, 2 or 3");
  if (s == UJ_OK) ctx->set.mir_level = level; /* read by each MIR compile: nothing to apply */
  return settled(ctx, RT_SETTING_MIR_LEVEL, s);
}

uj_status_t uj_ctx_set_memory_cache_limit(uj_ctx_t* ctx, int64_t bytes) {
  uj_status_t s = check_ctx(ctx, __func__);
  if (s == UJ_OK && bytes < 0)
    s = rt_error(UJ_ERR_INVALID, "uj_ctx_set_memory_cache_limit: %lld bytes: the limit must be 0 or more",
                 (long long)bytes);
  jit_state_t* js = s == UJ_OK ? existing_state(ctx) : NULL;
  if (js) s = jit_cache_set_memory_limit(js->cache, bytes);
  if (s == UJ_OK) ctx->set.memory_cache_limit = bytes;
  return settled(ctx, RT_SETTING_MEMORY_CACHE_LIMIT, s);
}

uj_status_t uj_ctx_set_disk_cache_limit(uj_ctx_t* ctx, int64_t bytes) {
  uj_status_t s = check_ctx(ctx, __func__);
  if (s == UJ_OK && bytes <= 0)
    s = rt_error(UJ_ERR_INVALID,
                 "uj_ctx_set_disk_cache_limit: the limit must be a positive number of bytes, got %lld",
                 (long long)bytes);
  jit_state_t* js = s == UJ_OK ? existing_state(ctx) : NULL;
  if (js) s = jit_disk_set_limit(js->cache, bytes);
  if (s == UJ_OK) {
    ctx->set.disk_cache_limit = bytes;
    ctx->set.disk_cache_limit_from = "uj_ctx_set_disk_cache_limit";
  }
  return settled(ctx, RT_SETTING_DISK_CACHE_LIMIT, s);
}

uj_status_t uj_ctx_set_tier(uj_ctx_t* ctx, int calls) {
  uj_status_t s = check_int(ctx, __func__, "calls", calls, 0, RT_MAX_TIER_CALLS,
                            "0 (tiering off) or 1 to " STR(RT_MAX_TIER_CALLS) " calls before the C compile");
  if (s == UJ_OK) ctx->set.tier_calls = calls; /* read by each tiered call: nothing to apply */
  return settled(ctx, RT_SETTING_TIER, s);
}

uj_status_t uj_ctx_set_stream_bytes(uj_ctx_t* ctx, int64_t bytes) {
  uj_status_t s = check_ctx(ctx, __func__);
  if (s == UJ_OK && bytes < 0)
    s = rt_error(UJ_ERR_INVALID,
                 "uj_ctx_set_stream_bytes: %lld bytes: expected 0 (stream every output that may be) or more",
                 (long long)bytes);
  jit_state_t* js = s == UJ_OK ? existing_state(ctx) : NULL;
  if (js) __atomic_store_n(&js->stream_bytes, bytes, __ATOMIC_RELAXED);
  if (s == UJ_OK) ctx->set.stream_bytes = bytes;
  return settled(ctx, RT_SETTING_STREAM, s);
}
