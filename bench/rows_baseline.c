/* bench/rows_baseline.c: softmax and layernorm over the rows of a matrix,
 * written by hand as an ahead-of-time C kernel would be: one row at a time,
 * each row read from memory once and written once, its reductions and its
 * elementwise work done while the row (16 KB at 4096 columns) is in the
 * first-level cache.
 *
 *   softmax    max of the row; e = exp(x - max) stored in y while summed;
 *              y *= 1/sum
 *   layernorm  mean; the mean of the squared deviations (two passes, the
 *              accurate form); y = (x - mean) * rsqrt(var + 1e-5) * w + b
 *
 * The Makefile compiles this file as bench/baseline.c is compiled,
 * -O3 -march=native -ffast-math: -ffast-math is what lets gcc reassociate
 * the sums and the max into SIMD lanes and vectorize expf (glibc's libmvec),
 * as a programmer writing an AOT kernel for speed would allow. One thread. */
#include <math.h>

#include "bench.h"

static void softmax_row(const float* restrict x, float* restrict y, int64_t n) {
  float max = x[0];
  for (int64_t i = 1; i < n; i++) max = fmaxf(max, x[i]);
  float sum = 0;
  for (int64_t i = 0; i < n; i++) {
    float e = expf(x[i] - max);
    y[i] = e;
    sum += e;
  }
  float inverse = 1.0f / sum;
  for (int64_t i = 0; i < n; i++) y[i] *= inverse;
}

void hand_softmax_rows(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols) {
  (void)w, (void)b;
  for (int64_t r = 0; r < rows; r++) softmax_row(x + r * cols, y + r * cols, cols);
}

static void layernorm_row(const float* restrict x, const float* restrict w, const float* restrict b,
                          float* restrict y, int64_t n) {
  float sum = 0;
  for (int64_t i = 0; i < n; i++) sum += x[i];
  float mean = sum / (float)n;
  float squares = 0;
  for (int64_t i = 0; i < n; i++) {
    float d = x[i] - mean;
    squares += d * d;
  }
  float scale = 1.0f / sqrtf(squares / (float)n + 1e-5f);
  for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mean) * scale * w[i] + b[i];
}

void hand_layernorm_rows(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; r++) layernorm_row(x + r * cols, w, b, y + r * cols, cols);
}
