/* bench/baseline.c: the unfused baseline, the programs evaluated the way
 * NumPy evaluates an expression: one pass over memory per operation, each
 * writing a whole temporary array that the next operation reads back.
 *
 * Each operation is its own non-inlined loop so the compiler cannot fuse
 * them. The Makefile compiles this file with -O3 -march=native -ffast-math:
 * NumPy's ufuncs are SIMD, exp included, and -ffast-math is what lets gcc
 * vectorize these loops the same way (expf through glibc's vector libmvec,
 * the pairwise sum's eight accumulators). The temporaries are allocated and
 * touched once before timing, which is kinder than NumPy (a fresh large
 * temporary there is page-faulted on every evaluation). Single-threaded, as
 * NumPy is. */
#include <math.h>

#include "bench.h"

#define NOINLINE __attribute__((noinline))

/* out = s * x */
static NOINLINE void scale(float* out, float s, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = s * x[i];
}
/* out = x + s */
static NOINLINE void add_scalar(float* out, const float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = x[i] + s;
}
static NOINLINE void add(float* out, const float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = x[i] + y[i];
}
static NOINLINE void subtract(float* out, const float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = x[i] - y[i];
}
static NOINLINE void multiply(float* out, const float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = x[i] * y[i];
}
static NOINLINE void divide(float* out, const float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = x[i] / y[i];
}
/* out = s / x */
static NOINLINE void scalar_divide(float* out, float s, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = s / x[i];
}
static NOINLINE void negate(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = -x[i];
}
static NOINLINE void exponential(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = expf(x[i]);
}
static NOINLINE void square_root(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = sqrtf(x[i]);
}

/* Pairwise summation with eight accumulators per leaf, as NumPy sums. */
static float pairwise_sum(const float* x, int64_t n) {
  if (n <= 128) {
    float lanes[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int k = 0; k < 8; k++) lanes[k] += x[i + k];
    float s = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    for (; i < n; i++) s += x[i];
    return s;
  }
  int64_t half = n / 2;
  half -= half % 8;
  return pairwise_sum(x, half) + pairwise_sum(x + half, n - half);
}
static NOINLINE void sum(float* out, const float* x, int64_t n) { out[0] = pairwise_sum(x, n); }

/* y = 1/(1+exp(-(a*x+b))): six passes. */
static void run_sigmoid(float* const* t, int64_t n, float* const* scratch) {
  const float a = t[0][0], *x = t[1], b = t[2][0];
  float *y = t[3], *t0 = scratch[0], *t1 = scratch[1];
  scale(t0, a, x, n);
  add_scalar(t1, t0, b, n);
  negate(t0, t1, n);
  exponential(t1, t0, n);
  add_scalar(t0, t1, 1.0f, n);
  scalar_divide(y, 1.0f, t0, n);
}
const unfused_baseline_t unfused_sigmoid = {4, {"a", "x", "b", "y"}, run_sigmoid};

/* m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; p = p - lr*m/(sqrt(v)+eps),
 * in place: twelve passes (the scalar expressions 1-b1, 1-b2 are computed
 * once, as NumPy does for Python floats). */
static void run_adam(float* const* t, int64_t n, float* const* scratch) {
  const float b1 = t[0][0], b2 = t[1][0], lr = t[2][0], eps = t[3][0];
  float *m = t[4], *g = t[5], *v = t[6], *p = t[7];
  float *t0 = scratch[0], *t1 = scratch[1], *t2 = scratch[2];
  scale(t0, b1, m, n);
  scale(t1, 1.0f - b1, g, n);
  add(m, t0, t1, n);
  scale(t0, b2, v, n);
  scale(t1, 1.0f - b2, g, n);
  multiply(t2, t1, g, n);
  add(v, t0, t2, n);
  scale(t0, lr, m, n);
  square_root(t1, v, n);
  add_scalar(t2, t1, eps, n);
  divide(t1, t0, t2, n);
  subtract(p, p, t1, n);
}
const unfused_baseline_t unfused_adam = {8, {"b1", "b2", "lr", "eps", "m", "g", "v", "p"}, run_adam};

/* s = sum(x*x): two passes. */
static void run_sumsq(float* const* t, int64_t n, float* const* scratch) {
  multiply(scratch[0], t[0], t[0], n);
  sum(t[1], scratch[0], n);
}
const unfused_baseline_t unfused_sumsq = {2, {"x", "s"}, run_sumsq};
