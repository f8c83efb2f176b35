/* rt/ctx.c: creating and destroying a context. The context is deliberately
 * thin here: rt knows nothing of kernels, so everything the JIT keeps per
 * context (caches, compiled modules) hangs from an opaque slot that jit/
 * fills and that uj_ctx_free hands back to jit/ to release; backends/ has a
 * slot of its own the same way. Engine queries and selection live in
 * jit/run.c, next to the engines themselves. The context's GPU side
 * (rt/cuda.c) is made on first use and released here.
 *
 * A context takes its settings from the environment when it is made
 * (rt/env.c). One whose variable holds an invalid value is still made (a
 * NULL context means out of memory, as it always has): the setting keeps
 * its default, and each call that uses it returns UJ_ERR_INVALID naming
 * the variable until the setting's setter gives it a valid value. */
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "rt.h"

uj_ctx_t* uj_ctx_new(void) {
  uj_ctx_t* ctx = calloc(1, sizeof *ctx);
  if (!ctx) {
    rt_error(UJ_ERR_OOM, "uj_ctx_new: out of memory allocating a context (%zu bytes)", sizeof *ctx);
    return NULL;
  }
  /* what per-context records elsewhere (a program's last runs) are keyed
   * by: a freed context's address may come back, its id never does */
  static _Atomic uint64_t next_id = 1;
  ctx->id = next_id++;
  rt_settings_from_env(&ctx->set, ctx->problem);
  return ctx;
}

uj_status_t rt_ctx_settings_check(const uj_ctx_t* ctx, unsigned settings) {
  for (int i = 0; i < RT_SETTING_COUNT; i++)
    if ((settings >> i & 1u) && ctx->problem[i][0]) return rt_error(UJ_ERR_INVALID, "%s", ctx->problem[i]);
  return UJ_OK;
}

void rt_ctx_setting_fixed(uj_ctx_t* ctx, rt_setting_t setting) { ctx->problem[setting][0] = '\0'; }

void uj_ctx_free(uj_ctx_t* ctx) {
  if (!ctx) return;
  /* the backends first (their programs' kernels live in the JIT's), then
   * the JIT state (its CUDA modules live in the context's device state) */
  if (ctx->backend_state && ctx->backend_state_free) ctx->backend_state_free(ctx->backend_state);
  if (ctx->jit_state && ctx->jit_state_free) ctx->jit_state_free(ctx->jit_state);
  rt_cuda_ctx_free(ctx->cuda);
  free(ctx);
}
