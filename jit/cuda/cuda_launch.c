/* jit/cuda/cuda_launch.c: which kernels of a module a run launches, and
 * how, for the sizes of that run. A pure function of the sizes and the
 * device's SM count, so that tests read it without a GPU.
 *
 * Per block with loops, in order:
 *  - a block that starts a row chain (jit_cu_kernel_t.chain) with enough
 *    rows, long enough, launches uj_chain_<b> once, one CUDA block per row,
 *    and the chain's other blocks launch nothing; else they launch one by
 *    one, as below;
 *  - THREADS: a thread per iteration of the flattened loops (per vector of
 *    them on the vector path), the grid capped at 32 blocks per SM;
 *  - REDUCE: mode 2 for a single long reduction (the whole grid, partials
 *    merged by the last CUDA block), mode 1 for fewer than 65536 long ones
 *    (a CUDA block each), else mode 0 (a thread each);
 *  - SERIAL: one CUDA block; a block that runs no iteration, nothing. */
#include "cuda_emit.h"

enum { THREADS = JIT_CU_THREADS_PER_BLOCK, ROW_MIN = 64 };
#define CHAIN_SCRATCH ((int64_t)64 << 20)

/* The bytes of one row of every chain-local temporary the row kernel of
 * kk uses (0: none). */
static int64_t scratch_row_bytes(const jit_cu_kernel_t* kk, const ir_env_t* env) {
  int64_t total = 0;
  for (int a = 0; a < kk->chain_nargs; a++) {
    if (kk->chain_args[a].kind != JIT_CU_ARG_TENSOR) continue;
    int t = kk->chain_args[a].index;
    const ir_tensor_t* tt = &env->f->tensors[t];
    if (!tt->chain_local) continue;
    int64_t row = uj_dtype_size(tt->dtype);
    for (int k = 1; k < tt->ndim; k++) row *= env->buf[t].dims[k];
    total += row;
  }
  return total;
}

/* The product of the extents of loops [from, to), 0 when one is empty;
 * UJ_ERR_SHAPE when it overflows. */
static uj_status_t extent(const ir_env_t* env, const ir_block_t* b, int from, int to, int64_t* out) {
  int64_t n = 1;
  for (int k = from; k < to; k++) {
    int oob = 0;
    int64_t e = ir_ix_eval(env, b->loops[k].end, &oob) - ir_ix_eval(env, b->loops[k].start, &oob);
    if (e <= 0) {
      *out = 0;
      return UJ_OK;
    }
    if (!rt_mul_i64(n, e, &n) || n > (INT64_C(1) << 62))
      return rt_error(UJ_ERR_SHAPE, "cuda: the loops of a kernel run more than 2^62 iterations");
  }
  *out = n;
  return UJ_OK;
}

static int64_t blocks_for(int64_t work, int64_t per_block, int64_t cap) {
  int64_t n = (work + per_block - 1) / per_block;
  return n < 1 ? 1 : n > cap ? cap : n;
}

/* A row chain needs at least as many rows as the device has SMs, each at
 * least ROW_MIN long (the loops inside the first block's row loop): shorter
 * rows would leave most of a CUDA block's 256 threads idle, and fewer rows
 * than SMs most of the device, where a few long reductions spread over the
 * grid do better. Its grid is capped at 8 blocks per SM (grid-stride over
 * the rows), as many as can be resident at once (2048 threads per SM), and
 * further so that the rows of chain-local scratch it needs, one per CUDA
 * block, take at most CHAIN_SCRATCH bytes (never below one block per SM):
 * the context keeps that scratch between calls. */
uj_status_t jit_cu_launches(const jit_cu_module_t* m, const ir_func_t* f, const ir_env_t* env, int64_t sms,
                            jit_cu_launch_t* out, int* count) {
  *count = 0;
  if (sms < 1) sms = 1;
  uj_status_t s = UJ_OK;
  for (int bi = 0; bi < f->nblocks && s == UJ_OK; bi++) {
    const jit_cu_kernel_t* kk = &m->kernels[bi];
    const jit_cu_plan_t* plan = &kk->plan;
    if (plan->strategy == JIT_CU_NONE) continue;
    const ir_block_t* b = &f->blocks[bi];
    int64_t outer = 1, inner = 1;
    if (kk->chain >= 2) {
      if ((s = extent(env, b, 0, 1, &outer)) != UJ_OK || (s = extent(env, b, 1, b->nloops, &inner)) != UJ_OK) break;
      if (outer >= sms && inner >= ROW_MIN) {
        int64_t grid = outer < 8 * sms ? outer : 8 * sms, row = scratch_row_bytes(kk, env);
        if (row > 0 && grid > CHAIN_SCRATCH / row) grid = CHAIN_SCRATCH / row > sms ? CHAIN_SCRATCH / row : sms;
        out[(*count)++] = (jit_cu_launch_t){bi, kk->chain, grid, 0, 0};
        bi += kk->chain - 1;
        continue;
      }
    }
    jit_cu_launch_t l = {bi, 0, 1, 0, 0};
    if (plan->strategy != JIT_CU_SERIAL && (s = extent(env, b, 0, plan->nouter, &outer)) != UJ_OK) break;
    if (plan->strategy == JIT_CU_REDUCE && (s = extent(env, b, plan->nouter, b->nloops, &inner)) != UJ_OK) break;
    if (plan->strategy != JIT_CU_SERIAL && outer == 0) continue; /* no iteration: nothing to launch */
    if (plan->strategy == JIT_CU_THREADS || plan->strategy == JIT_CU_REDUCE) {
      int64_t work = plan->vector ? (outer + plan->vector - 1) / plan->vector : outer;
      l.grid = blocks_for(work, THREADS, 32 * sms);
    }
    if (plan->strategy == JIT_CU_REDUCE) {
      /* a single long reduction: the whole grid; few long ones: a CUDA
       * block each; else a thread each, the reduction inside it */
      if (outer == 1 && inner >= 4 * THREADS) {
        l.mode = 2;
        l.grid = blocks_for(inner, 8 * THREADS, 4 * sms);
        l.scratch = (size_t)plan->ncarried * (size_t)l.grid * 16;
      } else if (outer < 64 * 1024 && inner >= 64) {
        l.mode = 1;
        l.grid = outer < 32 * sms ? outer : 32 * sms;
      }
    }
    out[(*count)++] = l;
  }
  return s;
}
