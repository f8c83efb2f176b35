/* tests/test_powers.c: powers by a constant (ir/powers.c).
 *
 * After the passes, x**n for n = 2, 3, 4, -1, -2, 0.5, -0.5 and 1 calls no
 * pow (the IR reads multiplies, recip, sqrt, rsqrt), while -3, 2.5 and 0
 * still do. On every configuration of oracle.h (the interpreter with the
 * passes off computes pow itself), over f32 special values (signed zeros,
 * infinities, NaN, the smallest subnormal, the largest float, values near
 * 1) and 100,000 random floats with exponents over the whole range, each
 * result is within 2 ulp of pow computed in double and rounded once (the
 * distance counted in representable floats, so subnormal results count
 * their own spacing), with pow's special values exactly (the rewrite must
 * not make a result depend on the passes). The same in f64 within 2 ulp. A base computed by an expression is computed
 * once, into a local. */
#include "oracle.h"

static const double exponents[] = {2, 3, 4, -1, -2, 0.5, -0.5, 1, -3, 2.5};
#define NEXP ((int)(sizeof exponents / sizeof exponents[0]))


static void fill(uj_tensor_t* x, uint64_t* st) {
  static const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0, 0x1p-149, -0x1p-149, 0x1p-126,
                                    3.4028234663852886e38, -3.4028234663852886e38, 0.99999994, 1.0000001, 2.0, -2.0,
                                    1e-20, -1e-20, 1e19, 1e-30, 7.0, -0.5};
  int64_t n = or_tnumel(x), k = 0;
  for (; k < (int64_t)(sizeof specials / sizeof specials[0]) && k < n; k++) or_set(x, k, specials[k]);
  for (; k < n; k++) {
    double m = harness_real(st, 1.0, 2.0), e = floor(harness_real(st, -150.0, 129.0));
    if (x->dtype == UJ_F64) e = floor(harness_real(st, -1075.0, 1024.0));
    or_set(x, k, (harness_int(st, 0, 1) ? -1 : 1) * ldexp(m, (int)e));
  }
}

static void check_exponent(double n, uj_dtype_t dt, uint64_t seed) {
  char src[64];
  snprintf(src, sizeof src, "y = x**%g", n);
  if (n < 0) snprintf(src, sizeof src, "y = x**(%g)", n);
  uj_program_t* p = NULL;
  CHECK(uj_program_parse(src, &p) == UJ_OK);
  if (!p) return;
  const int64_t count = 100000;
  uj_tensor_t x = or_tensor(dt, 1, &count), y = or_tensor(dt, 1, &count);
  uint64_t st = seed;
  fill(&x, &st);
  const uj_tensor_t* in[] = {&x};
  uj_tensor_t* out[] = {&y};
  for (int slot = 0; slot < OR_NENGINES; slot++) {
    or_fill_sentinel(&y);
    uj_status_t s = or_program_run(slot, p, UJ_FORWARD, in, 1, NULL, 0, out, 1);
    CHECK(s == UJ_OK);
    int bad = 0;
    double worst = 0, bound = 2;
    for (int64_t i = 0; i < count && s == UJ_OK; i++) {
      double xv = or_get(&x, i), want = pow(xv, n);
      want = dt == UJ_F32 ? (double)(float)want : want;
      double got = or_get(&y, i), d = or_ulps(dt, got, want);
      if (d > worst) worst = d;
      if ((d < 0 || d > bound) && bad++ < 3)
        fprintf(stderr, "  %s %s on %s: x = %a: got %a, meant %a (%g ulp)\n", src, uj_dtype_name(dt),
                or_configs[slot].name, xv, got, want, d);
    }
    CHECK(bad == 0);
    printf("  %-14s %-3s %-10s worst %g ulp (bound %g)\n", src, uj_dtype_name(dt), or_configs[slot].name, worst, bound);
  }
  or_tensor_free(&x), or_tensor_free(&y);
  uj_program_free(p);
}

TEST(powers_within_2_ulp_with_the_special_values) {
  HARNESS_SEED(3201);
  for (int e = 0; e < NEXP; e++) {
    check_exponent(exponents[e], UJ_F32, 3201 + (uint64_t)e);
    check_exponent(exponents[e], UJ_F64, 3301 + (uint64_t)e);
  }
}

TEST(powers_leave_pow_and_compute_the_base_once) {
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("y = x**3 + (x + 1)**2 + x**(-2) + x**0.5 + x**(-0.5) + x**1 + x**2.5 + x**0 + x**(-3)", &p) ==
        UJ_OK);
  if (!p) return;
  int64_t n = 8;
  uj_tensor_t x = or_tensor(UJ_F32, 1, &n);
  const uj_tensor_t* in[] = {&x};
  int ndim = 0;
  int64_t dims[UJ_MAX_DIMS];
  CHECK(uj_program_shape(p, UJ_FORWARD, in, NULL, 0, &ndim, dims) == UJ_OK);
  char* ir = uj_program_dump(NULL, p, UJ_FORWARD, UJ_DUMP_IR, NULL);
  CHECK(ir != NULL);
  if (ir) {
    int pows = 0;
    for (const char* at = ir; (at = strstr(at, "pow(")) != NULL; at++) pows++;
    CHECK(pows == 3); /* 2.5, 0 and -3 */
    CHECK(strstr(ir, "pow(t") && strstr(ir, ", 2.5f)") && strstr(ir, ", 0.0f)"));
    CHECK(strstr(ir, "sqrt(") && strstr(ir, "rsqrt(") && strstr(ir, "recip("));
    CHECK(strstr(ir, "+ 1.0f;") != NULL); /* x + 1 into a local, squared from there */
    if (pows != 3) fprintf(stderr, "%s\n", ir);
  }
  free(ir);
  or_tensor_free(&x);
  uj_program_free(p);
}

TEST_MAIN()
