/* jit/batch_math.c: square roots over whole buffers, for MIR code that
 * batches them (jit/mir/mir_batch.c explains why).
 *
 * The Makefile compiles this file with -O3 -fno-math-errno: without errno to
 * set, gcc turns each loop into vector square-root instructions, which are
 * correctly rounded like the scalar ones, so a batched root equals the one a
 * call per element gives, bit for bit (a negative input gives NaN either
 * way). */
#include "jit.h"

void jit_batch_sqrtf(float* restrict root, const float* restrict x, int64_t n) {
  for (int64_t i = 0; i < n; i++) root[i] = __builtin_sqrtf(x[i]);
}

void jit_batch_sqrt(double* restrict root, const double* restrict x, int64_t n) {
  for (int64_t i = 0; i < n; i++) root[i] = __builtin_sqrt(x[i]);
}
