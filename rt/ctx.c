/* rt/ctx.c: creating and destroying a context. The context is deliberately
 * thin here: rt knows nothing of kernels, so everything the JIT keeps per
 * context (caches, compiled modules) hangs from an opaque slot that jit/
 * fills and that uj_ctx_free hands back to jit/ to release; backends/ has a
 * slot of its own the same way. Engine queries and selection live in
 * jit/run.c, next to the engines themselves. The context's GPU side
 * (rt/cuda.c) is made on first use and released here. */
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "rt.h"

/* The engine named by UOPJIT_ENGINE, or AUTO for an unset or unknown value:
 * a typo in the environment must not stop a program from running. */
static uj_engine_t engine_from_env(void) {
  static const struct {
    const char* name;
    uj_engine_t engine;
  } names[] = {
      {"auto", UJ_ENGINE_AUTO}, {"interp", UJ_ENGINE_INTERP}, {"mir", UJ_ENGINE_MIR},
      {"c", UJ_ENGINE_C},       {"cuda", UJ_ENGINE_CUDA},
  };
  const char* value = getenv("UOPJIT_ENGINE");
  if (!value) return UJ_ENGINE_AUTO;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(value, names[i].name) == 0) return names[i].engine;
  return UJ_ENGINE_AUTO;
}

uj_ctx_t* uj_ctx_new(void) {
  uj_ctx_t* ctx = calloc(1, sizeof *ctx);
  if (!ctx) {
    rt_error(UJ_ERR_OOM, "uj_ctx_new: out of memory");
    return NULL;
  }
  ctx->engine = engine_from_env();
  return ctx;
}

void uj_ctx_free(uj_ctx_t* ctx) {
  if (!ctx) return;
  /* the backends first (their programs' kernels live in the JIT's), then
   * the JIT state (its CUDA modules live in the context's device state) */
  if (ctx->backend_state && ctx->backend_state_free) ctx->backend_state_free(ctx->backend_state);
  if (ctx->jit_state && ctx->jit_state_free) ctx->jit_state_free(ctx->jit_state);
  rt_cuda_ctx_free(ctx->cuda);
  free(ctx);
}
