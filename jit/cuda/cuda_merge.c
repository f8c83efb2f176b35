/* jit/cuda/cuda_merge.c: merging the partial results of a reduction across
 * the threads of a CUDA block, for the engine's reduction kernels
 * (cuda_emit.c) and its multi-tensor kernels (cuda_groups.c).
 *
 * Two partials merge as the serial loop combines a value with its running
 * result (jit_cu_merge). A block merge needs no shared-memory tree: each
 * warp merges its 32 values in registers by shuffles, lane 0 of each warp
 * leaves the warp's value in a small shared array, and the first warp
 * merges those the same way; lane 0 hands the result to every thread
 * through the array (jit_cu_block_merge). Values stay in the reduction's
 * own dtype, as each thread's serial sum is: a pairwise tree of depth 8
 * over the 256 threads. Invariant: the order is fixed, so the same inputs
 * and launch give the same bits; sums differ from the serial loop's by
 * rounding only, and arg ops not at all. */
#include <stdarg.h>
#include <stdio.h>

#include "cuda_emit.h"

static void cx_line(jit_cx_t* E, int depth, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static void cx_line(jit_cx_t* E, int depth, const char* fmt, ...) {
  char text[256]; /* the lines here name a few short identifiers */
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text - 1, fmt, ap);
  va_end(ap);
  jit_cx_indent(E, depth);
  if (n < 0 || n >= (int)sizeof text - 1) {
    E->out->failed = 1; /* never cut a line of code */
    return;
  }
  text[n] = '\n';
  rt_buf_append(E->out, text, (size_t)n + 1);
}

/* + or * (i32 wrapping), the extremum taking the new value first (so NaN
 * propagates as in the loop), and for argmax/argmin the better value with,
 * on a tie, the lower index (the first element). A thread's partial covers
 * elements t, t + 256, ..., not a contiguous run, so a float max or min
 * over +0 and -0 may return either zero (the serial loop returns the
 * first). */
void jit_cu_merge(jit_cx_t* E, uj_reduce_op_t op, uj_dtype_t dt, const char* a, const char* ai, const char* b,
                  const char* bi, int depth) {
  int i32 = dt == UJ_I32;
  switch (op) {
    case UJ_REDUCE_SUM:
    case UJ_REDUCE_MEAN:
    case UJ_REDUCE_PROD: {
      const char* o = op == UJ_REDUCE_PROD ? "*" : "+";
      if (i32) cx_line(E, depth, "%s = uj_wrap((uj_i64)%s %s (uj_i64)%s);", a, a, o, b);
      else cx_line(E, depth, "%s = %s %s %s;", a, a, o, b);
      return;
    }
    case UJ_REDUCE_MAX:
    case UJ_REDUCE_MIN:
      /* i32 max is symmetric; the float one takes the new value first */
      if (i32) cx_line(E, depth, "%s = %s(%s, %s);", a, jit_cx_extremum(op, dt), a, b);
      else cx_line(E, depth, "%s = %s(%s, %s);", a, jit_cx_extremum(op, dt), b, a);
      return;
    default: {
      const char* better = ir_reduce_keeps_greater(op) ? ">" : "<";
      cx_line(E, depth, "if (%s %s %s || (%s == %s && %s < %s)) { %s = %s; %s = %s; }", b, better, a, b, a, bi, ai, a,
              b, ai, bi);
    }
  }
}

/* Shuffles at offsets 16, 8, 4, 2, 1 (lane l takes lane l + o); the first
 * warp's lanes past the warp count hold the identity. Two __syncthreads per
 * merge, plus one so that the array may be reused. */
void jit_cu_block_merge(jit_cx_t* E, const ir_carried_t* c, int n, int depth) {
  enum { WARPS = JIT_CU_THREADS_PER_BLOCK / 32 };
  int arg = ir_reduce_is_arg(c->op);
  const char* t = jit_cx_ctype(c->dtype);
  char v[32], vi[32];
  snprintf(v, sizeof v, "c%d", c->id);
  snprintf(vi, sizeof vi, "c%da", c->id);
  cx_line(E, depth, "__shared__ %s uj_sw%d[%d];", t, n, WARPS);
  if (arg) cx_line(E, depth, "__shared__ long long uj_swi%d[%d];", n, WARPS);
  for (int stage = 0; stage < 2; stage++) {
    cx_line(E, depth, "for (int uj_o = %d; uj_o > 0; uj_o >>= 1) {", stage ? WARPS / 2 : 16);
    cx_line(E, depth + 1, "%s uj_b = __shfl_down_sync(0xffffffffu, %s, uj_o);", t, v);
    if (arg) cx_line(E, depth + 1, "long long uj_bi = __shfl_down_sync(0xffffffffu, %s, uj_o);", vi);
    jit_cu_merge(E, c->op, c->dtype, v, vi, "uj_b", "uj_bi", depth + 1);
    cx_line(E, depth, "}");
    if (stage == 1) break;
    cx_line(E, depth, "if ((threadIdx.x & 31) == 0) {");
    cx_line(E, depth + 1, "uj_sw%d[threadIdx.x >> 5] = %s;", n, v);
    if (arg) cx_line(E, depth + 1, "uj_swi%d[threadIdx.x >> 5] = %s;", n, vi);
    cx_line(E, depth, "}");
    cx_line(E, depth, "__syncthreads();");
    cx_line(E, depth, "if (threadIdx.x < 32) {");
    depth++;
    /* the first warp takes the warps' values; its other lanes the identity */
    jit_cx_indent(E, depth);
    rt_buf_printf(E->out, "%s = threadIdx.x < %d ? uj_sw%d[threadIdx.x] : ", v, WARPS, n);
    jit_cx_identity(E, c->op, c->dtype);
    rt_buf_printf(E->out, ";\n");
    if (arg) cx_line(E, depth, "%s = threadIdx.x < %d ? uj_swi%d[threadIdx.x] : 0;", vi, WARPS, n);
  }
  cx_line(E, depth, "if (threadIdx.x == 0) {");
  cx_line(E, depth + 1, "uj_sw%d[0] = %s;", n, v);
  if (arg) cx_line(E, depth + 1, "uj_swi%d[0] = %s;", n, vi);
  cx_line(E, depth, "}");
  depth--;
  cx_line(E, depth, "}");
  cx_line(E, depth, "__syncthreads();");
  cx_line(E, depth, "%s = uj_sw%d[0];", v, n);
  if (arg) cx_line(E, depth, "%s = uj_swi%d[0];", vi, n);
  cx_line(E, depth, "__syncthreads();");
}
