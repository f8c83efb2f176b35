/* bench/hand.c: the hand-written fused C baselines of the 1-D workloads:
 * one loop per program, every operation of an element done while it is in
 * registers, as a careful C programmer writes it without a JIT. The
 * Makefile compiles this file with -O3 -march=native -ffast-math, the flags
 * such a programmer would pick (expf, tanhf and erff vectorized through
 * glibc's libmvec, the sum's additions reassociated into vector lanes).
 * Single-threaded. The tensors come by name, as for the unfused baselines
 * (baseline.c). */
#include <math.h>

#include "bench.h"

/* y = 1/(1+exp(-(a*x+b))) */
static void hand_sigmoid(float* const* t, int64_t n, float* const* scratch) {
  (void)scratch;
  const float a = t[0][0], *x = t[1], b = t[2][0];
  float* y = t[3];
  for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-(a * x[i] + b)));
}
const unfused_baseline_t hand_fused_sigmoid = {4, {"a", "x", "b", "y"}, hand_sigmoid};

/* GELU, tanh form: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
static void hand_gelu(float* const* t, int64_t n, float* const* scratch) {
  (void)scratch;
  const float* x = t[0];
  float* y = t[1];
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
}
const unfused_baseline_t hand_fused_gelu = {2, {"x", "y"}, hand_gelu};

/* GELU, erf form (GPT-2's and BERT's exact one): y = 0.5 x (1 + erf(x / sqrt(2))) */
static void hand_gelu_erf(float* const* t, int64_t n, float* const* scratch) {
  (void)scratch;
  const float* x = t[0];
  float* y = t[1];
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(0.7071067812f * v));
  }
}
const unfused_baseline_t hand_fused_gelu_erf = {2, {"x", "y"}, hand_gelu_erf};

/* Adam in place: m, v and p updated in one pass */
static void hand_adam(float* const* t, int64_t n, float* const* scratch) {
  (void)scratch;
  const float b1 = t[0][0], b2 = t[1][0], lr = t[2][0], eps = t[3][0];
  float *m = t[4], *v = t[6], *p = t[7];
  const float* g = t[5];
  for (int64_t i = 0; i < n; i++) {
    float mi = b1 * m[i] + (1.0f - b1) * g[i];
    float vi = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * mi / (sqrtf(vi) + eps);
  }
}
const unfused_baseline_t hand_fused_adam = {8, {"b1", "b2", "lr", "eps", "m", "g", "v", "p"}, hand_adam};

/* s = sum(x*x), in eight independent partial sums (vector lanes) */
static void hand_sumsq(float* const* t, int64_t n, float* const* scratch) {
  (void)scratch;
  const float* x = t[0];
  double total = 0;
  /* blocks of 4096 summed in f32 lanes, the blocks in f64: accurate to
   * about 1e-7 at any n, which the check against the interpreter needs */
  for (int64_t start = 0; start < n; start += 4096) {
    int64_t end = start + 4096 < n ? start + 4096 : n;
    float s = 0;
    for (int64_t i = start; i < end; i++) s += x[i] * x[i];
    total += s;
  }
  t[1][0] = (float)total;
}
const unfused_baseline_t hand_fused_sumsq = {2, {"x", "s"}, hand_sumsq};

void hand_adamw_step(float* m, const float* g, float* v, float* p, int64_t n, const float* hyper) {
  const float b1 = hyper[0], b2 = hyper[1], lr = hyper[2], eps = hyper[3], wd = hyper[4];
  for (int64_t i = 0; i < n; i++) {
    float mi = b1 * m[i] + (1.0f - b1) * g[i];
    float vi = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * (mi / (sqrtf(vi) + eps) + wd * p[i]);
  }
}
