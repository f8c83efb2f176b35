/* tests/math_sweep.h: the f32 inputs and the error measure with which
 * tests/test_engines_math.c holds the engines' inline exp, log, tanh and
 * sigmoid to their documented error over the whole f32 range.
 *
 * Inputs (ms_input): every stride-th bit pattern of the 2^32, so that each
 * binade of both signs is sampled (subnormals, +-inf and NaN patterns
 * included), then every float within MS_WINDOW steps of each point where a
 * function changes regime (overflow and underflow thresholds, the first
 * subnormal result, the polynomial's switch, the algorithm's own branch
 * points), on both signs, optionally every subnormal, then the special
 * values. With stride 1 (and no windows) it is every float there is.
 *
 * The measure (ms_classify): v = f(x) in double is the reference (the
 * interpreter's result is v rounded to float). The range is "subnormal in"
 * for a nonzero subnormal x, else "subnormal out" when 0 < |v| < FLT_MIN,
 * else "normal". Where |v| >= FLT_MIN the error is relative, |got - v| / |v|,
 * with an infinite result counted as 2^128 (one step past FLT_MAX), so that
 * rounding to +inf just past the overflow threshold is a small error and
 * overflowing early a large one; where |v| < FLT_MIN it is absolute, in
 * units of 2^-149 (the subnormals' spacing). A NaN v needs a NaN, an
 * infinite v (x = +-inf) and the special inputs (+-0, +-inf, NaN, log's 1)
 * need the rounded reference bit for bit, and a zero result needs v's sign.
 * Past the overflow threshold, where the interpreter gives +-inf, the same
 * infinity is no error however far v is. */
#ifndef UJ_TESTS_MATH_SWEEP_H
#define UJ_TESTS_MATH_SWEEP_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

enum { MS_EXP, MS_LOG, MS_TANH, MS_SIGMOID, MS_NF };
enum { MS_NORMAL, MS_SUB_IN, MS_SUB_OUT, MS_NR };
static const char* const ms_fname[MS_NF] = {"exp", "log", "tanh", "sigmoid"};
static const char* const ms_range[MS_NR] = {"normal", "subnormal in", "subnormal out"};

#define MS_WINDOW 2048

static inline double ms_ref(int f, double x) {
  switch (f) {
    case MS_EXP: return exp(x);
    case MS_LOG: return log(x);
    case MS_TANH: return tanh(x);
    default: return 1.0 / (1.0 + exp(-x));
  }
}

static inline float ms_float(uint32_t bits) {
  float x;
  memcpy(&x, &bits, sizeof x);
  return x;
}
static inline uint32_t ms_bits(float x) {
  uint32_t b;
  memcpy(&b, &x, sizeof b);
  return b;
}

/* Where each function changes regime; windows go around +-each. */
static const float ms_exp_points[] = {88.7228394f, 88.3762589f, 87.3365479f, 87.6832838f, 103.972076f, 0.0f, 1.0f,
                                      0.346573591f};
static const float ms_log_points[] = {FLT_MIN, 1.0f, 1.41421356f, 0.707106781f, FLT_MAX, 1.4e-45f, 2.0f};
static const float ms_tanh_points[] = {0.625f, FLT_MIN, 9.01091290f, 44.3614197f, 0.0f, 1.0f};
static const float ms_sigmoid_points[] = {80.0f, 87.3365479f, 88.7228394f, 103.972076f, 0.0f, 16.6355324f, 1.0f};
static const float ms_specials[] = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MIN, -FLT_MIN,
                                    FLT_MAX, -FLT_MAX, 1.4e-45f, -1.4e-45f};
#define MS_NSPECIALS ((int64_t)(sizeof ms_specials / sizeof ms_specials[0]))

static inline int ms_points(int f, const float** points) {
  switch (f) {
    case MS_EXP: *points = ms_exp_points; return (int)(sizeof ms_exp_points / sizeof *ms_exp_points);
    case MS_LOG: *points = ms_log_points; return (int)(sizeof ms_log_points / sizeof *ms_log_points);
    case MS_TANH: *points = ms_tanh_points; return (int)(sizeof ms_tanh_points / sizeof *ms_tanh_points);
    default: *points = ms_sigmoid_points; return (int)(sizeof ms_sigmoid_points / sizeof *ms_sigmoid_points);
  }
}

/* The sweep of f with this stride: the grid, then (stride > 1) the windows
 * and, when with_subnormals, every subnormal of both signs, then the
 * specials. */
typedef struct {
  uint64_t stride;
  int64_t grid, windows, subnormals, total;
  const float* points;
} ms_sweep_t;

static inline ms_sweep_t ms_sweep(int f, uint64_t stride, int with_subnormals) {
  ms_sweep_t w;
  int np = ms_points(f, &w.points);
  w.stride = stride;
  w.grid = (int64_t)((((uint64_t)1 << 32) + stride - 1) / stride);
  w.windows = stride > 1 ? (int64_t)np * 2 * (2 * MS_WINDOW + 1) : 0;
  w.subnormals = stride > 1 && with_subnormals ? (int64_t)1 << 24 : 0;
  w.total = w.grid + w.windows + w.subnormals + MS_NSPECIALS;
  return w;
}

/* Input i of the sweep (0 <= i < total). A window around 0 walks the bit
 * patterns of both zeros upwards: the smallest subnormals. */
static inline float ms_input(const ms_sweep_t* w, int64_t i) {
  if (i < w->grid) return ms_float((uint32_t)((uint64_t)i * w->stride));
  i -= w->grid;
  if (i < w->windows) {
    int64_t per = 2 * MS_WINDOW + 1;
    int point = (int)(i / (2 * per)), negative = (int)(i / per % 2);
    int64_t step = i % per - MS_WINDOW;
    uint32_t b = ms_bits(w->points[point]);
    if (b == 0) b = (uint32_t)(step + MS_WINDOW); /* 0, 2^-149, 2 2^-149, ... */
    else b = (uint32_t)((int64_t)b + step);
    return ms_float(negative ? b | 0x80000000u : b);
  }
  i -= w->windows;
  if (i < w->subnormals) return ms_float((uint32_t)(i >> 1) | (i & 1 ? 0x80000000u : 0));
  return ms_specials[i - w->subnormals];
}

/* The largest errors seen in one range, and where. */
typedef struct {
  int64_t count;
  double rel, rel_at;   /* relative error, normal results */
  double ulps, ulps_at; /* in units of 2^-149, subnormal results */
} ms_stat_t;

static inline int ms_special(int f, float x) {
  return x == 0 || isinf(x) || isnan(x) || (f == MS_LOG && x == 1);
}

/* Classifies got = f(x) (as an engine computed it), records its error in
 * st[range] and holds it to the bounds (relative where |v| >= FLT_MIN, in
 * units of 2^-149 below); returns 0 with the rule broken in why. */
static inline int ms_classify(int f, float x, float got, ms_stat_t* st, double bound_rel, double bound_ulps,
                              const char** why) {
  double v = ms_ref(f, (double)x);
  float want = (float)v;
  int sub_in = x != 0 && fabsf(x) < FLT_MIN;
  int range = sub_in ? MS_SUB_IN : (v != 0 && fabs(v) < FLT_MIN) ? MS_SUB_OUT : MS_NORMAL;
  ms_stat_t* s = &st[range];
  s->count++;
  *why = NULL;
  if (isnan(v) || isnan(got)) {
    if (!(isnan(v) && isnan(got))) *why = isnan(v) ? "NaN" : "a number, not NaN";
  } else if (isinf(v) || ms_special(f, x)) {
    if (!(got == want && signbit(got) == signbit(want))) *why = "the interpreter's value exactly";
  } else if (got == 0 && want == 0 && signbit(got) != signbit(want)) {
    *why = "the sign of the interpreter's zero";
  } else if (!(isinf(want) && got == want)) {
    double g = isinf(got) ? copysign(0x1p128, (double)got) : (double)got;
    if (fabs(v) >= FLT_MIN) {
      double e = fabs(g - v) / fabs(v);
      if (e > s->rel) s->rel = e, s->rel_at = x;
      if (!(e <= bound_rel)) *why = "within the relative bound";
    } else {
      double e = fabs(g - v) / 0x1p-149;
      if (e > s->ulps) s->ulps = e, s->ulps_at = x;
      if (!(e <= bound_ulps)) *why = "within the subnormal bound";
    }
  }
  return *why == NULL;
}

#endif
