/* jit/settings.c: the context setters of what the environment sets by
 * default (docs/DESIGN.md section 12): threads, the disk cache's directory
 * (or none), the cache limits, MIR's optimization level, the tiering
 * policy and the size from which outputs are streamed; the engine's setter is in jit/engine.c beside the engine table.
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

uj_status_t uj_ctx_set_threads(uj_ctx_t* ctx, int threads) {
  if (!ctx) return rt_error(UJ_ERR_INVALID, "uj_ctx_set_threads: ctx is NULL");
  if (threads < 0 || threads > RT_MAX_THREADS)
    return rt_error(UJ_ERR_INVALID,
                    "uj_ctx_set_threads: threads is %d; expected 1 to %d, or 0 for one per online core", threads,
                    RT_MAX_THREADS);
  jit_state_t* js = existing_state(ctx);
  if (js && rt_pool_size(js->pool) != threads) {
    rt_pool_t* pool = rt_pool_new(threads);
    if (!pool) return UJ_ERR_OOM; /* the old pool stays */
    rt_pool_free(js->pool);
    js->pool = pool;
  }
  ctx->set.threads = threads;
  rt_ctx_setting_fixed(ctx, RT_SETTING_THREADS);
  return UJ_OK;
}

uj_status_t uj_ctx_set_cache_dir(uj_ctx_t* ctx, const char* path) {
  if (!ctx) return rt_error(UJ_ERR_INVALID, "uj_ctx_set_cache_dir: ctx is NULL");
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
    uj_status_t s = jit_disk_set_dir(js->cache, &next);
    jit_tier_resume(js);
    if (s != UJ_OK) return s;
  }
  ctx->set = next;
  rt_ctx_setting_fixed(ctx, RT_SETTING_CACHE);
  return UJ_OK;
}

uj_status_t uj_ctx_set_mir_level(uj_ctx_t* ctx, int level) {
  if (!ctx) return rt_error(UJ_ERR_INVALID, "uj_ctx_set_mir_level: ctx is NULL");
  if (level < 0 || level > 3)
    return rt_error(UJ_ERR_INVALID, "uj_ctx_set_mir_level: level is %d; expected 0, 1, 2 or 3", level);
  ctx->set.mir_level = level; /* read by each MIR compile: nothing to apply */
  rt_ctx_setting_fixed(ctx, RT_SETTING_MIR_LEVEL);
  return UJ_OK;
}

uj_status_t uj_ctx_set_memory_cache_limit(uj_ctx_t* ctx, int64_t bytes) {
  if (!ctx) return rt_error(UJ_ERR_INVALID, "uj_ctx_set_memory_cache_limit: ctx is NULL");
  if (bytes < 0)
    return rt_error(UJ_ERR_INVALID, "uj_ctx_set_memory_cache_limit: %lld bytes: the limit must be 0 or more",
                    (long long)bytes);
  jit_state_t* js = existing_state(ctx);
  if (js) {
    uj_status_t s = jit_cache_set_memory_limit(js->cache, bytes);
    if (s != UJ_OK) return s;
  }
  ctx->set.memory_cache_limit = bytes;
  rt_ctx_setting_fixed(ctx, RT_SETTING_MEMORY_CACHE_LIMIT);
  return UJ_OK;
}

uj_status_t uj_ctx_set_disk_cache_limit(uj_ctx_t* ctx, int64_t bytes) {
  if (!ctx) return rt_error(UJ_ERR_INVALID, "uj_ctx_set_disk_cache_limit: ctx is NULL");
  if (bytes <= 0)
    return rt_error(UJ_ERR_INVALID,
                    "uj_ctx_set_disk_cache_limit: the limit must be a positive number of bytes, got %lld",
                    (long long)bytes);
  jit_state_t* js = existing_state(ctx);
  if (js) {
    uj_status_t s = jit_disk_set_limit(js->cache, bytes);
    if (s != UJ_OK) return s;
  }
  ctx->set.disk_cache_limit = bytes;
  ctx->set.disk_cache_limit_from = "uj_ctx_set_disk_cache_limit";
  rt_ctx_setting_fixed(ctx, RT_SETTING_DISK_CACHE_LIMIT);
  return UJ_OK;
}

uj_status_t uj_ctx_set_tier(uj_ctx_t* ctx, int calls) {
  if (!ctx) return rt_error(UJ_ERR_INVALID, "uj_ctx_set_tier: ctx is NULL");
  if (calls < 0 || calls > RT_MAX_TIER_CALLS)
    return rt_error(UJ_ERR_INVALID,
                    "uj_ctx_set_tier: calls is %d; expected 0 (tiering off) or 1 to %d calls before the C compile",
                    calls, RT_MAX_TIER_CALLS);
  ctx->set.tier_calls = calls; /* read by each tiered call: nothing to apply */
  rt_ctx_setting_fixed(ctx, RT_SETTING_TIER);
  return UJ_OK;
}

uj_status_t uj_ctx_set_stream_bytes(uj_ctx_t* ctx, int64_t bytes) {
  if (!ctx) return rt_error(UJ_ERR_INVALID, "uj_ctx_set_stream_bytes: ctx is NULL");
  if (bytes < 0)
    return rt_error(UJ_ERR_INVALID,
                    "uj_ctx_set_stream_bytes: %lld bytes: expected 0 (stream every output that may be) or more",
                    (long long)bytes);
  jit_state_t* js = existing_state(ctx);
  if (js) __atomic_store_n(&js->stream_bytes, bytes, __ATOMIC_RELAXED);
  ctx->set.stream_bytes = bytes;
  rt_ctx_setting_fixed(ctx, RT_SETTING_STREAM);
  return UJ_OK;
}
