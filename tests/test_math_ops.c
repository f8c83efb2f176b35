/* tests/test_math_ops.c: the math library of the op table
 * (include/uopjit_ops.h) beyond the first ops.
 *
 *  - Accuracy: every float unary op in f32, on every configuration of
 *    oracle.h, over 2^20 bit patterns spread over all of f32 (every 4096th,
 *    so every binade of both signs, subnormals, infinities and NaNs) plus
 *    the special values, against the op's reference computed in double and
 *    rounded once (the interpreter's value): within the op's bound in ulps
 *    (ms_bound below, the figures docs/LANGUAGE.md states), NaN where the
 *    reference is NaN, infinities and signed zeros exactly. The binary
 *    function ops the same over 2^20 random pairs and the special pairs.
 *    erf also over every float around the C engine's switch and clamp.
 *  - Gradients: every new unary and binary op against central finite
 *    differences in f64 (tests/grad_check.h), on inputs inside its domain
 *    and away from its kinks.
 *  - The language: each function parses, numbers fold to the reference,
 *    % and // follow NumPy on i32 and f32, / on i32 is true division (f64),
 *    & | ~ are logical, softplus and clamp match torch's on special values,
 *    ones_like, zeros_like and prod; an unknown function's message lists
 *    the new functions. */
#include "grad_check.h"

/* ---- accuracy ---------------------------------------------------------------------- */

/* The largest error allowed per unary op, in f32 ulps against the
 * reference rounded once: 0 where every engine computes the reference in
 * double and rounds once (MIR; the C engine's builtins for the exact ops),
 * else the C library's float functions' documented worst case. */
/* lgamma on the C engine is the C library's float function: glibc
 * documents 7 ulps for it on x86-64, and the sweep below measured 4 (near
 * x = -3.17, where the result is small); MIR and CUDA are tighter. */
#define LGAMMA_ULPS 7

static double unary_bound(uj_unary_op_t op) {
  switch (op) {
    case UJ_UNARY_FLOOR:
    case UJ_UNARY_CEIL:
    case UJ_UNARY_ROUND:
    case UJ_UNARY_SIGN:
    case UJ_UNARY_TRUNC:
    case UJ_UNARY_NEG:
    case UJ_UNARY_ABS:
    case UJ_UNARY_SQRT: return 0;
    case UJ_UNARY_EXP:
    case UJ_UNARY_LOG:
    case UJ_UNARY_TANH:
    case UJ_UNARY_SIGMOID:
    case UJ_UNARY_RSQRT:
    case UJ_UNARY_RECIP: return -1; /* held by tests/test_engines_math.c and the oracle tests */
    case UJ_UNARY_LGAMMA: return LGAMMA_ULPS;
    default: return 2;
  }
}

static double f32_ulps(double a, double b) { return or_ulps(UJ_F32, a, b); }

static const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, 0.5f, -0.5f, 2.0f, -2.0f,
                                 1e-45f, -1e-45f, 1.17549435e-38f, -1.17549435e-38f, 3.40282347e38f,
                                 -3.40282347e38f, 0.99999994f, 1.00000012f, -0.99999994f, 88.7228394f, -103.972076f,
                                 9.0f, 10.0f, 3.14159274f, 1.57079637f, 1e-7f, -1e-7f, 0.7f, 2.5f, -2.5f, 3.5f};
#define NSPECIALS ((int64_t)(sizeof specials / sizeof specials[0]))
#define SWEEP ((int64_t)1 << 20)

static void fill_sweep(uj_tensor_t* x) {
  float* v = x->data;
  for (int64_t i = 0; i < SWEEP; i++) {
    uint32_t bits = (uint32_t)i << 12 | (uint32_t)(i * 2654435761u) >> 20; /* every binade, varied low bits */
    memcpy(&v[i], &bits, 4);
  }
  for (int64_t k = 0; k < NSPECIALS; k++) v[SWEEP + k] = specials[k];
}

/* Runs src (y = f(x) or y = f(a, b)) on every configuration and holds each
 * result to the reference ref within bound ulps. The reference is worked
 * out once for all configurations: the C library's double functions on
 * the whole range (fmod of far-apart binades, tan of huge arguments) were
 * most of this test's own time when each configuration called them. */
static void check_sweep(const char* src, int nargs, double (*ref1)(double), double (*ref2)(double, double), double bound,
                        uint64_t seed) {
  uj_program_t* p = NULL;
  CHECK(uj_program_parse(src, &p) == UJ_OK);
  if (!p) return;
  int64_t count = SWEEP + NSPECIALS * (nargs == 2 ? NSPECIALS : 1);
  uj_tensor_t a = or_tensor(UJ_F32, 1, &count), b = or_tensor(UJ_F32, 1, &count), y = or_tensor(UJ_F32, 1, &count);
  float* av = a.data;
  float* bv = b.data;
  if (nargs == 1) {
    fill_sweep(&a);
  } else {
    uint64_t st = seed;
    for (int64_t i = 0; i < SWEEP; i++) {
      uint32_t ab = (uint32_t)harness_next(&st), bb = (uint32_t)harness_next(&st);
      if (i % 2) bb = (bb & 0x807fffffu) | ((ab & 0x7f800000u) + (uint32_t)harness_int(&st, -8, 8) * 0x800000u); /* near a's binade */
      memcpy(&av[i], &ab, 4), memcpy(&bv[i], &bb, 4);
    }
    for (int64_t i = 0; i < NSPECIALS; i++)
      for (int64_t j = 0; j < NSPECIALS; j++) av[SWEEP + i * NSPECIALS + j] = specials[i], bv[SWEEP + i * NSPECIALS + j] = specials[j];
  }
  float* want = malloc((size_t)count * sizeof *want);
  CHECK(want != NULL);
  if (!want) goto done;
  for (int64_t i = 0; i < count; i++) want[i] = (float)(nargs == 1 ? ref1(av[i]) : ref2(av[i], bv[i]));
  const uj_tensor_t* in[] = {&a, &b};
  uj_tensor_t* out[] = {&y};
  const float* got = y.data;
  for (int slot = 0; slot < OR_NENGINES; slot++) {
    or_fill_sentinel(&y);
    uj_status_t s = or_program_run(slot, p, UJ_FORWARD, in, nargs, NULL, 0, out, 1);
    CHECK(s == UJ_OK);
    int bad = 0;
    double worst = 0, worst_at = 0;
    for (int64_t i = 0; i < count && s == UJ_OK; i++) {
      double d = f32_ulps(got[i], want[i]);
      if (d > worst) worst = d, worst_at = av[i];
      if ((d < 0 || d > bound) && bad++ < 3)
        fprintf(stderr, "  %s on %s: x = %a, %a: got %a, meant %a (%g ulp, bound %g)\n", src, or_configs[slot].name,
                (double)av[i], nargs == 2 ? (double)bv[i] : 0.0, (double)got[i], (double)want[i], d, bound);
    }
    CHECK(bad == 0);
    printf("  %-24s %-10s worst %g ulp at %a (bound %g, %lld values)\n", src, or_configs[slot].name, worst, worst_at,
           bound, (long long)count);
  }
done:
  free(want);
  or_tensor_free(&a), or_tensor_free(&b), or_tensor_free(&y);
  uj_program_free(p);
}

typedef struct {
  uj_unary_op_t op;
  const char* name;
  double (*ref)(double);
} unary_case_t;

static double sign_ref(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; }

static const unary_case_t unary_cases[] = {
    {UJ_UNARY_TAN, "tan", tan},
    {UJ_UNARY_ERF, "erf", erf},
    {UJ_UNARY_ERFC, "erfc", erfc},
    {UJ_UNARY_LOG1P, "log1p", log1p},
    {UJ_UNARY_EXPM1, "expm1", expm1},
    {UJ_UNARY_LOG2, "log2", log2},
    {UJ_UNARY_LOG10, "log10", log10},
    {UJ_UNARY_EXP2, "exp2", exp2},
    {UJ_UNARY_SINH, "sinh", sinh},
    {UJ_UNARY_COSH, "cosh", cosh},
    {UJ_UNARY_ASIN, "asin", asin},
    {UJ_UNARY_ACOS, "acos", acos},
    {UJ_UNARY_ATAN, "atan", atan},
    {UJ_UNARY_ASINH, "asinh", asinh},
    {UJ_UNARY_ACOSH, "acosh", acosh},
    {UJ_UNARY_ATANH, "atanh", atanh},
    {UJ_UNARY_CBRT, "cbrt", cbrt},
    {UJ_UNARY_ROUND, "round", rint},
    {UJ_UNARY_SIGN, "sign", sign_ref},
    {UJ_UNARY_CEIL, "ceil", ceil},
    {UJ_UNARY_SIN, "sin", sin},
    {UJ_UNARY_COS, "cos", cos},
    {UJ_UNARY_FLOOR, "floor", floor},
    {UJ_UNARY_SQRT, "sqrt", sqrt},
    {UJ_UNARY_ABS, "abs", fabs},
    {UJ_UNARY_TRUNC, "trunc", trunc},
    {UJ_UNARY_LGAMMA, "lgamma", lgamma},
};
#define NUNARY ((int)(sizeof unary_cases / sizeof unary_cases[0]))

TEST(every_unary_function_within_its_bound_over_the_f32_range) {
  HARNESS_SEED(3301);
  for (int k = 0; k < NUNARY; k++) {
    char src[64];
    snprintf(src, sizeof src, "y = %s(x)", unary_cases[k].name);
    check_sweep(src, 1, unary_cases[k].ref, NULL, unary_bound(unary_cases[k].op), 3301);
  }
}

/* Every float around the places where the C engine's inline erf switches
 * from one polynomial to the other (0.921875) and clamps (4), both signs. */
TEST(erf_within_its_bound_around_its_switch_and_clamp) {
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("y = erf(x)", &p) == UJ_OK);
  if (!p) return;
  static const float lo[] = {0.875f, 3.875f}, hi[] = {1.0f, 4.125f};
  for (int r = 0; r < 2; r++) {
    uint32_t b0, b1;
    memcpy(&b0, &lo[r], 4), memcpy(&b1, &hi[r], 4);
    int64_t n = 2 * (int64_t)(b1 - b0);
    uj_tensor_t x = or_tensor(UJ_F32, 1, &n), y = or_tensor(UJ_F32, 1, &n);
    float* xv = x.data;
    for (int64_t i = 0; i < n / 2; i++) {
      uint32_t b = b0 + (uint32_t)i;
      memcpy(&xv[i], &b, 4);
      xv[n / 2 + i] = -xv[i];
    }
    float* want = malloc((size_t)n * sizeof *want);
    CHECK(want != NULL);
    for (int64_t i = 0; want && i < n; i++) want[i] = (float)erf((double)xv[i]);
    const uj_tensor_t* in[] = {&x};
    uj_tensor_t* out[] = {&y};
    const float* got = y.data;
    for (int slot = 0; want && slot < OR_NENGINES; slot++) {
      CHECK(or_program_run(slot, p, UJ_FORWARD, in, 1, NULL, 0, out, 1) == UJ_OK);
      double worst = 0;
      for (int64_t i = 0; i < n; i++) {
        double d = f32_ulps(got[i], want[i]);
        if (d < 0 || d > worst) worst = d < 0 ? 1e9 : d;
      }
      printf("  erf on [%g, %g] and its negatives, %-10s worst %g ulp (bound 2, %lld values)\n", lo[r], hi[r],
             or_configs[slot].name, worst, (long long)n);
      CHECK(worst <= 2);
    }
    free(want);
    or_tensor_free(&x), or_tensor_free(&y);
  }
  uj_program_free(p);
}

static double py_mod(double a, double b) {
  double r = fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r == 0 ? copysign(0.0, b) : r;
}

TEST(every_binary_function_within_its_bound_over_random_pairs) {
  HARNESS_SEED(3302);
  check_sweep("y = atan2(a, b)", 2, NULL, atan2, 2, 3302);
  check_sweep("y = hypot(a, b)", 2, NULL, hypot, 1, 3303);
  check_sweep("y = copysign(a, b)", 2, NULL, copysign, 0, 3304);
  check_sweep("y = fmod(a, b)", 2, NULL, fmod, 0, 3305);
  check_sweep("y = a % b", 2, NULL, py_mod, 0, 3306);
  check_sweep("y = pow(a, b)", 2, NULL, pow, 2, 3307);
}

/* ---- gradients --------------------------------------------------------------------- */

/* Inputs inside each op's domain, away from poles and kinks. */
static void unary_domain(uj_unary_op_t op, uint64_t* st, uj_tensor_t* x) {
  switch (op) {
    case UJ_UNARY_ASIN:
    case UJ_UNARY_ACOS:
    case UJ_UNARY_ATANH: gc_fill(st, x, -0.8, 0.8); break;
    case UJ_UNARY_ACOSH: gc_fill(st, x, 1.2, 3.0); break;
    case UJ_UNARY_LOG2:
    case UJ_UNARY_LOG10:
    case UJ_UNARY_LOG1P: gc_fill(st, x, 0.2, 3.0); break;
    case UJ_UNARY_TAN: gc_fill(st, x, -1.2, 1.2); break;
    case UJ_UNARY_LGAMMA: /* both sides of the reflection at 1/2, away from the poles */
      for (int64_t i = 0; i < or_tnumel(x); i++)
        or_set(x, i, harness_int(st, 0, 1) ? harness_real(st, 0.1, 4.0) : -harness_real(st, 0.1, 0.9));
      break;
    case UJ_UNARY_CBRT: gc_fill_away(st, x, 0.2, 2.0); break;
    case UJ_UNARY_ROUND: /* away from the half-integers, where it jumps */
    case UJ_UNARY_CEIL:
    case UJ_UNARY_SIGN:
    case UJ_UNARY_TRUNC:
      for (int64_t i = 0; i < or_tnumel(x); i++)
        or_set(x, i, (double)harness_int(st, -3, 2) + harness_real(st, 0.1, 0.4) + (op == UJ_UNARY_ROUND ? 0 : 0.4));
      break;
    default: gc_fill(st, x, -2.0, 2.0); break;
  }
}

TEST(gradients_of_the_new_unary_ops_match_finite_differences) {
  HARNESS_SEED(3310);
  uint64_t st = 3310;
  for (int op = UJ_UNARY_TAN; op < UJ_UNARY_COUNT; op++) {
    for (int it = 0; it < 2; it++) {
      int64_t dims[UJ_MAX_DIMS];
      int r = (int)harness_int(&st, 0, 3);
      gc_dims(&st, r, 5, dims);
      gc_case_t c;
      char what[64];
      snprintf(what, sizeof what, "unary op %d rank %d", op, r);
      gc_init(&c, what);
      uj_io_t x = gc_input(&c, UJ_F64, r, dims, 1);
      gc_output(&c, uj_unary(c.g, (uj_unary_op_t)op, x));
      unary_domain((uj_unary_op_t)op, &st, gc_t(&c, x));
      if (op == UJ_UNARY_ROUND || op == UJ_UNARY_CEIL || op == UJ_UNARY_SIGN || op == UJ_UNARY_TRUNC) c.zero[0] = 1;
      GC_CHECK(&c, &st);
    }
  }
}

TEST(gradients_of_the_new_binary_ops_match_finite_differences) {
  HARNESS_SEED(3311);
  uint64_t st = 3311;
  static const uj_binary_op_t ops[] = {UJ_BINARY_ATAN2, UJ_BINARY_HYPOT, UJ_BINARY_COPYSIGN, UJ_BINARY_MOD,
                                       UJ_BINARY_FMOD};
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
    for (int scalar_b = 0; scalar_b < 2; scalar_b++) {
      int64_t dims[UJ_MAX_DIMS];
      int r = (int)harness_int(&st, 1, 3);
      gc_dims(&st, r, 5, dims);
      gc_case_t c;
      char what[64];
      snprintf(what, sizeof what, "binary op %d%s rank %d", (int)ops[k], scalar_b ? ", 0-d b" : "", r);
      gc_init(&c, what);
      uj_io_t a = gc_input(&c, UJ_F64, r, dims, 1), b = gc_input(&c, UJ_F64, scalar_b ? 0 : r, dims, 1);
      gc_output(&c, uj_binary(c.g, ops[k], a, b));
      uj_tensor_t *ta = gc_t(&c, a), *tb = gc_t(&c, b);
      gc_fill_away(&st, ta, 0.2, 2.0);
      gc_fill_away(&st, tb, 0.3, 2.0);
      if (ops[k] == UJ_BINARY_MOD || ops[k] == UJ_BINARY_FMOD) /* a/b away from the integers, where a jump is */
        for (int64_t i = 0; i < or_tnumel(ta); i++) {
          double bv = or_get(tb, scalar_b ? 0 : i);
          or_set(ta, i, bv * ((double)harness_int(&st, -3, 2) + harness_real(&st, 0.2, 0.8)));
        }
      if (ops[k] == UJ_BINARY_COPYSIGN) c.zero[1] = 1;
      GC_CHECK(&c, &st);
    }
  }
}

/* ---- the language ------------------------------------------------------------------ */

/* Runs src on x (f32 or i32 values) on every configuration; y gets the
 * output's values on the interpreter, checked on the others within ulps
 * (0: bit for bit, NaN to NaN). Returns the output dtype; *count its
 * elements. */
static uj_dtype_t run_all(const char* src, uj_dtype_t in_dt, const double* xv, int64_t n, double* y, double ulps,
                          int64_t* count) {
  uj_program_t* p = NULL;
  CHECK(uj_program_parse(src, &p) == UJ_OK);
  if (!p) return UJ_F32;
  uj_tensor_t x = or_tensor(in_dt, 1, &n);
  for (int64_t i = 0; i < n; i++) or_set(&x, i, xv[i]);
  const uj_tensor_t* in[] = {&x};
  uj_dtype_t dt = UJ_F32;
  int ndim = 0;
  int64_t dims[UJ_MAX_DIMS];
  CHECK(uj_program_shape(p, UJ_FORWARD, in, NULL, 0, &ndim, dims) == UJ_OK);
  CHECK(uj_program_output_dtype(p, UJ_FORWARD, in, 0, &dt) == UJ_OK);
  uj_tensor_t out = or_tensor(dt, ndim, dims);
  *count = or_tnumel(&out);
  uj_tensor_t* outs[] = {&out};
  for (int slot = 0; slot < OR_NENGINES; slot++) {
    or_fill_sentinel(&out);
    CHECK(or_program_run(slot, p, UJ_FORWARD, in, 1, NULL, 0, outs, 1) == UJ_OK);
    for (int64_t i = 0; i < or_tnumel(&out); i++) {
      double v = or_get(&out, i);
      if (slot == 0) y[i] = v;
      else if (!(v == y[i] && signbit(v) == signbit(y[i])) && !(isnan(v) && isnan(y[i])) &&
               !(ulps > 0 && f32_ulps(v, y[i]) >= 0 && f32_ulps(v, y[i]) <= ulps)) {
        fprintf(stderr, "  %s on %s: element %lld is %a, the interpreter's %a\n", src, or_configs[slot].name,
                (long long)i, v, y[i]);
        CHECK(0);
        break;
      }
    }
  }
  or_tensor_free(&x), or_tensor_free(&out);
  uj_program_free(p);
  return dt;
}

static void expect_within(const char* src, uj_dtype_t in_dt, const double* x, int64_t n, uj_dtype_t want_dt,
                          const double* want, double ulps) {
  double y[16];
  uj_dtype_t dt = run_all(src, in_dt, x, n, y, ulps, &n);
  if (dt != want_dt) fprintf(stderr, "  %s: dtype %s, meant %s\n", src, uj_dtype_name(dt), uj_dtype_name(want_dt));
  CHECK(dt == want_dt);
  for (int64_t i = 0; i < n; i++) {
    int same = (y[i] == want[i] && signbit(y[i]) == signbit(want[i])) || (isnan(y[i]) && isnan(want[i]));
    if (!same) fprintf(stderr, "  %s: element %lld is %.17g, meant %.17g\n", src, (long long)i, y[i], want[i]);
    CHECK(same);
  }
}

static void expect(const char* src, uj_dtype_t in_dt, const double* x, int64_t n, uj_dtype_t want_dt, const double* want) {
  expect_within(src, in_dt, x, n, want_dt, want, 0);
}

TEST(division_and_remainders_follow_numpy) {
  const double xi[] = {7, -7, 7, -7, 0, 5};
  /* i32 / 2 is f64 true division; // and % floor; fmod truncates; by 0 gives 0 */
  expect("y = x / 2", UJ_I32, xi, 6, UJ_F64, (double[]){3.5, -3.5, 3.5, -3.5, 0, 2.5});
  expect("y = x // 2", UJ_I32, xi, 6, UJ_I32, (double[]){3, -4, 3, -4, 0, 2});
  expect("y = x % 3", UJ_I32, xi, 6, UJ_I32, (double[]){1, 2, 1, 2, 0, 2});
  expect("y = x % (-3)", UJ_I32, xi, 6, UJ_I32, (double[]){-2, -1, -2, -1, 0, -1});
  expect("y = fmod(x, 3)", UJ_I32, xi, 6, UJ_I32, (double[]){1, -1, 1, -1, 0, 2});
  expect("y = x // 0 + x % 0", UJ_I32, xi, 6, UJ_I32, (double[]){0, 0, 0, 0, 0, 0});
  const double xf[] = {7.5, -7.5, -0.0, INFINITY, NAN, 6.0};
  expect("y = x % 2", UJ_F32, xf, 6, UJ_F32, (double[]){1.5, 0.5, 0.0, NAN, NAN, 0.0});
  expect("y = x % (-2)", UJ_F32, xf, 6, UJ_F32, (double[]){-0.5, -1.5, -0.0, NAN, NAN, -0.0});
  expect("y = fmod(x, 2)", UJ_F32, xf, 6, UJ_F32, (double[]){1.5, -1.5, -0.0, NAN, NAN, 0.0});
  expect("y = x // 2", UJ_F32, xf, 6, UJ_F32, (double[]){3, -4, -0.0, INFINITY, NAN, 3});
}

TEST(logical_operators_softplus_clamp_and_the_like) {
  const double x[] = {-2, -0.25, 0, 0.25, 2, NAN, 30, -INFINITY};
  expect("y = (x > -1) & (x < 1)", UJ_F32, x, 8, UJ_F32, (double[]){0, 1, 1, 1, 0, 0, 0, 0});
  expect("y = (x < -1) | (x > 1)", UJ_F32, x, 8, UJ_F32, (double[]){1, 0, 0, 0, 1, 0, 1, 1});
  expect("y = ~(x > 0)", UJ_F32, x, 8, UJ_F32, (double[]){1, 1, 1, 0, 0, 1, 0, 1});
  expect("y = x & 1 | 0", UJ_F32, x, 8, UJ_F32, (double[]){1, 1, 0, 1, 1, 1, 1, 1}); /* NaN is true, as in C */
  expect("y = clamp(x, -1, 1)", UJ_F32, x, 8, UJ_F32, (double[]){-1, -0.25, 0, 0.25, 1, NAN, 1, -1});
  expect("y = ones_like(x) + 2 * zeros_like(x)", UJ_F32, x, 8, UJ_F32, (double[]){1, 1, 1, 1, 1, 1, 1, 1});
  double sp[8];
  for (int i = 0; i < 8; i++) sp[i] = x[i] > 20 ? x[i] : (double)(float)log1p((double)(float)exp(x[i]));
  sp[5] = NAN;
  expect_within("y = softplus(x)", UJ_F32, x, 8, UJ_F32, sp, 4); /* the engines' own exp */
  const double r[] = {0.5, 1.5, 2.5, -0.5, -2.5, 3.7, -3.7, 0};
  expect("y = round(x)", UJ_F32, r, 8, UJ_F32, (double[]){0, 2, 2, -0.0, -2, 4, -4, 0}); /* half to even */
  expect("y = sign(x) + ceil(x) * 0", UJ_F32, r, 8, UJ_F32, (double[]){1, 1, 1, -1, -1, 1, -1, 0});
  expect("y = trunc(x)", UJ_F32, r, 8, UJ_F32, (double[]){0, 1, 2, -0.0, -2, 3, -3, 0});
  const double p[] = {1.5, 2, -3, 0.5};
  expect("y = prod(x)", UJ_F32, p, 4, UJ_F32, (double[]){-4.5});
  expect("y = prod(x) + erf(0.5) - erf(0.5)", UJ_F32, p, 4, UJ_F32, (double[]){-4.5});
  const double ints[] = {-3, 0, 4};
  expect("y = sign(x)", UJ_I32, ints, 3, UJ_I32, (double[]){-1, 0, 1});
  expect("y = trunc(x) + round(x) - ceil(x)", UJ_I32, ints, 3, UJ_I32, (double[]){-3, 0, 4});
  expect("y = atan2(x, 1) * 0", UJ_I32, ints, 3, UJ_F32, (double[]){-0.0, 0, 0});
}

TEST(every_function_parses_and_numbers_fold_to_the_reference) {
  static const char* const unary[] = {"tan",   "erf",   "erfc",  "log1p", "expm1", "log2",  "log10", "exp2",
                                      "sinh",  "cosh",  "asin",  "acos",  "atan",  "asinh", "acosh", "atanh",
                                      "cbrt",  "round", "sign",  "ceil",  "softplus"};
  for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++) {
    char src[64];
    snprintf(src, sizeof src, "y = %s(x) + %s(0.5) * 0", unary[i], unary[i]);
    uj_program_t* p = NULL;
    uj_status_t s = uj_program_parse(src, &p);
    if (s != UJ_OK) fprintf(stderr, "  %s: %s\n", src, uj_last_error());
    CHECK(s == UJ_OK);
    uj_program_free(p);
  }
  const double one[] = {0.5};
  expect("y = x * 0 + erf(0.5) + atan2(1, 2) + hypot(3, 4) + copysign(2, -0.0) + fmod(7, 3) + 7 % -3 + 7 // 2", UJ_F64,
         one, 1, UJ_F64, (double[]){erf(0.5) + atan2(1, 2) + 5 - 2 + 1 - 2 + 3});
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("y = erff(x)", &p) == UJ_ERR_PARSE);
  const char* msg = uj_last_error();
  CHECK(strstr(msg, "unknown function 'erff'") && strstr(msg, " erf,") && strstr(msg, "atan2") &&
        strstr(msg, "softplus") && strstr(msg, "clamp") && strstr(msg, "prod"));
  CHECK(uj_program_parse("y = atan2(x)", &p) == UJ_ERR_PARSE);
  CHECK(strstr(uj_last_error(), "atan2 takes 2 arguments") != NULL);
  CHECK(uj_program_parse("y = x ^ 2", &p) == UJ_ERR_PARSE);
}

TEST_MAIN()
