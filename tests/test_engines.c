/* tests/test_engines.c: elementwise chains on every available CPU engine
 * (C, MIR) against the interpreter, over randomized data.
 *
 * Chains come from the expression language (uj_program_parse) and from the
 * uop C API, in f32, f64 and i32, at 1-D sizes 0, 1, primes, sizes around the
 * vector widths and around the thread split (engines_check.h), and at 2-D
 * shapes 1xN, Nx1, 3x1021, 17x33 and more, with a row broadcast. One program
 * (so one compiled kernel per engine) serves every size: sizes are run-time
 * arguments. Engines must agree with the interpreter within 1e-5 relative
 * (f32), 1e-12 (f64) or exactly (i32); the interpreter itself is checked
 * against a double reference for the parsed chain. Companion files:
 * test_engines_reduce.c (reductions), test_engines_math.c (inline exp, log,
 * tanh, sigmoid), test_engines_cache.c ($params and the disk cache). */
#include "engines_check.h"

static double tol_for(uj_dtype_t dt) { return dt == UJ_F64 ? OR_TOL_F64 : dt == UJ_F32 ? OR_TOL_F32 : 0; }

static void fill(uint64_t* st, uj_tensor_t* t) {
  if (t->dtype == UJ_I32) or_fill_int(st, t, -100, 100);
  else or_fill_real(st, t, -2.0, 2.0);
}

/* Runs p on the interpreter, then on every available engine, comparing every
 * output with the interpreter's. refs (may be NULL) check the interpreter. */
static void check_engines(const char* what, uj_program_t* p, const uj_tensor_t* const* in, int nin,
                          const int64_t* params, int np, uj_tensor_t* const* outs, int nout,
                          const double* const* refs, double tol) {
  uj_ctx_t* ictx = en_interp();
  CHECK(ictx != NULL);
  if (!ictx || !EN_RUN(what, "interp", ictx, p, in, nin, params, np, outs, nout)) return;
  double* want[8];
  for (int k = 0; k < nout; k++) {
    if (refs && refs[k]) EN_EXPECT_CLOSE(what, "interp (vs double reference)", outs[k], refs[k], tol);
    want[k] = or_to_double(outs[k]);
  }
  for (int e = 0; e < EN_NENGINES; e++) {
    uj_ctx_t* ctx = en_ctx(e);
    if (!ctx) continue;
    if (!EN_RUN(what, en_engines[e].name, ctx, p, in, nin, params, np, outs, nout)) continue;
    for (int k = 0; k < nout; k++) EN_EXPECT_CLOSE(what, en_engines[e].name, outs[k], want[k], tol);
  }
  for (int k = 0; k < nout; k++) free(want[k]);
}

/* ---- the expression language ------------------------------------------------------------ */

static const char chain_src[] =
    "# a plain elementwise chain: two outputs, a broadcast operand b\n"
    "y = (x*a + b) / (abs(a) + 1) - x*x*3\n"
    "z = max(x, b) - min(a, 2) + where(x > a, x, b); _t = x - b; w = _t * _t + relu(a)\n";

/* On i32 inputs `/` is true division, as NumPy's: y is f64. */
static double chain_y(double x, double a, double b) { return (x * a + b) / (fabs(a) + 1) - x * x * 3; }
static double chain_z(double x, double a, double b) {
  return (x > b ? x : b) - (a < 2 ? a : 2) + (x > a ? x : b);
}
static double chain_w(double x, double a, double b) { return (x - b) * (x - b) + (a > 0 ? a : 0); }

/* One run of the parsed chain: x and a of shape dims, b of shape bdims
 * (dims, or its last axis only: a row broadcast). */
static void parse_case(uj_program_t* p, uint64_t* st, uj_dtype_t dt, int nd, const int64_t* dims, int bnd,
                       const int64_t* bdims) {
  uj_tensor_t x = or_tensor(dt, nd, dims), a = or_tensor(dt, nd, dims), b = or_tensor(dt, bnd, bdims);
  fill(st, &x), fill(st, &a), fill(st, &b);
  uj_dtype_t ydt = dt == UJ_I32 ? UJ_F64 : dt;
  uj_tensor_t y = or_tensor(ydt, nd, dims), z = or_tensor(dt, nd, dims), w = or_tensor(dt, nd, dims);
  int64_t n = or_tnumel(&x), bn = or_tnumel(&b);
  double *ry = or_alloc_ref(n), *rz = or_alloc_ref(n), *rw = or_alloc_ref(n);
  for (int64_t i = 0; i < n; i++) {
    double xv = or_get(&x, i), av = or_get(&a, i), bv = or_get(&b, bn == n ? i : i % (bn ? bn : 1));
    ry[i] = chain_y(xv, av, bv), rz[i] = chain_z(xv, av, bv), rw[i] = chain_w(xv, av, bv);
  }
  char what[160], shp[64], bshp[64];
  or_shape_str(shp, sizeof shp, &x);
  or_shape_str(bshp, sizeof bshp, &b);
  snprintf(what, sizeof what, "parsed chain %s x%s b%s", uj_dtype_name(dt), shp, bshp);
  const uj_tensor_t* in[] = {&x, &a, &b};
  uj_tensor_t* out[] = {&y, &z, &w};
  const double* refs[] = {ry, rz, rw};
  uj_dtype_t odt = (uj_dtype_t)-1;
  CHECK(uj_program_output_dtype(p, UJ_FORWARD, in, 0, &odt) == UJ_OK && odt == ydt);
  check_engines(what, p, in, 3, NULL, 0, out, 3, refs, tol_for(dt));
  or_tensor_free(&x), or_tensor_free(&a), or_tensor_free(&b);
  or_tensor_free(&y), or_tensor_free(&z), or_tensor_free(&w);
  free(ry), free(rz), free(rw);
}

static uj_program_t* parse_chain(void) {
  uj_program_t* p = NULL;
  uj_status_t s = uj_program_parse(chain_src, &p);
  if (s != UJ_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "uj_program_parse: %s: %s", uj_status_str(s), uj_last_error());
    harness_fail(__FILE__, __LINE__, msg);
  }
  CHECK(uj_program_io_count(p, 0) == 3 && uj_program_io_count(p, 1) == 3);
  return p;
}

TEST(parse_chain_1d_sizes) {
  uint64_t seed = en_seed(7001), st = seed;
  HARNESS_SEED(seed);
  SKIP_IF(en_count() == 0, "no JIT engine available");
  uj_program_t* p = parse_chain();
  if (!p) return;
  static const uj_dtype_t dts[] = {UJ_F32, UJ_F64, UJ_I32};
  for (int d = 0; d < 3; d++)
    for (int i = 0; i < EN_NSIZES; i++) parse_case(p, &st, dts[d], 1, &en_sizes[i], 1, &en_sizes[i]);
  uj_program_free(p);
}

TEST(parse_chain_2d_shapes) {
  uint64_t seed = en_seed(7002), st = seed;
  HARNESS_SEED(seed);
  SKIP_IF(en_count() == 0, "no JIT engine available");
  uj_program_t* p = parse_chain();
  if (!p) return;
  static const uj_dtype_t dts[] = {UJ_F32, UJ_F64, UJ_I32};
  for (int d = 0; d < 3; d++)
    for (int i = 0; i < EN_NSHAPES2; i++) {
      parse_case(p, &st, dts[d], 2, en_shapes2[i], 2, en_shapes2[i]);     /* b of x's shape */
      parse_case(p, &st, dts[d], 2, en_shapes2[i], 1, &en_shapes2[i][1]); /* b a row, broadcast */
    }
  uj_program_free(p);
}

/* ---- uops ------------------------------------------------------------------------------- */

/* The uop chain over inputs x, a of rank nd (1 or 2) and a row r (rank 1,
 * x's last axis, broadcast over rows):
 *   y0 = x / (|a| + 1) * rr + where(x >= a, x - a, -a) + (max(x, rr) - min(a, rr)) * (x >= a)
 *   y1 = |floor(x * 2.5)| - (-x) + (x == a) + (x != rr) * 7 - (x < a) + (x <= rr) - (x > 1)
 *   y2 (floats) = sqrt(|x| + 1) + 1/(|a| + 1) + rsqrt(|a| + 0.5) + sin(x) * cos(a)
 *                 + pow(|x| + 0.5, a) + cast(cast(x * 4, i32), dt)
 * where rr is r reindexed to x's shape. */
static uj_program_t* uop_chain(uj_dtype_t dt, int nd, int* nout) {
  static const char* const sh1[] = {"dA0[=dB0]"}, *ix1[] = {"i0"};
  static const char* const sh2[] = {"dA0", "dA1[=dB0]"}, *ix2[] = {"i1"};
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, nd, dt), a = uj_input(g, nd, dt), r = uj_input(g, 1, dt);
  uj_io_t ss[] = {x, r};
  uj_io_t rr = uj_reindex(g, r, nd, nd == 1 ? sh1 : sh2, 2, ss, 1, nd == 1 ? ix1 : ix2);
  uj_io_t one = uj_const(g, 1.0);
  uj_io_t den = uj_binary(g, UJ_BINARY_ADD, uj_unary(g, UJ_UNARY_ABS, a), one);
  uj_io_t q = uj_binary(g, UJ_BINARY_MUL, uj_binary(g, UJ_BINARY_DIV, x, den), rr);
  uj_io_t ge = uj_binary(g, UJ_BINARY_GE, x, a);
  uj_io_t w = uj_where(g, ge, uj_binary(g, UJ_BINARY_SUB, x, a), uj_unary(g, UJ_UNARY_NEG, a));
  uj_io_t m = uj_binary(g, UJ_BINARY_SUB, uj_binary(g, UJ_BINARY_MAX, x, rr), uj_binary(g, UJ_BINARY_MIN, a, rr));
  uj_io_t y0 = uj_binary(g, UJ_BINARY_ADD, uj_binary(g, UJ_BINARY_ADD, q, w), uj_binary(g, UJ_BINARY_MUL, m, ge));
  uj_io_t f = uj_unary(g, UJ_UNARY_ABS, uj_unary(g, UJ_UNARY_FLOOR, uj_binary(g, UJ_BINARY_MUL, x, uj_const(g, 2.5))));
  uj_io_t y1 = uj_binary(g, UJ_BINARY_SUB, f, uj_unary(g, UJ_UNARY_NEG, x));
  y1 = uj_binary(g, UJ_BINARY_ADD, y1, uj_binary(g, UJ_BINARY_EQ, x, a));
  y1 = uj_binary(g, UJ_BINARY_ADD, y1, uj_binary(g, UJ_BINARY_MUL, uj_binary(g, UJ_BINARY_NE, x, rr), uj_const(g, 7)));
  y1 = uj_binary(g, UJ_BINARY_SUB, y1, uj_binary(g, UJ_BINARY_LT, x, a));
  y1 = uj_binary(g, UJ_BINARY_ADD, y1, uj_binary(g, UJ_BINARY_LE, x, rr));
  y1 = uj_binary(g, UJ_BINARY_SUB, y1, uj_binary(g, UJ_BINARY_GT, x, one));
  uj_io_t outs[3] = {y0, y1, -1};
  *nout = 2;
  if (dt != UJ_I32) {
    uj_io_t ax1 = uj_binary(g, UJ_BINARY_ADD, uj_unary(g, UJ_UNARY_ABS, x), one);
    uj_io_t y2 = uj_unary(g, UJ_UNARY_SQRT, ax1);
    y2 = uj_binary(g, UJ_BINARY_ADD, y2, uj_unary(g, UJ_UNARY_RECIP, den));
    uj_io_t ah = uj_binary(g, UJ_BINARY_ADD, uj_unary(g, UJ_UNARY_ABS, a), uj_const(g, 0.5));
    y2 = uj_binary(g, UJ_BINARY_ADD, y2, uj_unary(g, UJ_UNARY_RSQRT, ah));
    uj_io_t sc = uj_binary(g, UJ_BINARY_MUL, uj_unary(g, UJ_UNARY_SIN, x), uj_unary(g, UJ_UNARY_COS, a));
    y2 = uj_binary(g, UJ_BINARY_ADD, y2, sc);
    uj_io_t xh = uj_binary(g, UJ_BINARY_ADD, uj_unary(g, UJ_UNARY_ABS, x), uj_const(g, 0.5));
    y2 = uj_binary(g, UJ_BINARY_ADD, y2, uj_binary(g, UJ_BINARY_POW, xh, a));
    uj_io_t c = uj_cast(g, dt, uj_cast(g, UJ_I32, uj_binary(g, UJ_BINARY_MUL, x, uj_const(g, 4))));
    y2 = uj_binary(g, UJ_BINARY_ADD, y2, c);
    outs[2] = y2;
    *nout = 3;
  }
  uj_io_t ins[] = {x, a, r};
  uj_program_t* p = OR_PROGRAM(g, 3, ins, 0, NULL, *nout, outs);
  uj_graph_free(g);
  return p;
}

static void uop_case(uj_program_t* p, int nout, uint64_t* st, uj_dtype_t dt, int nd, const int64_t* dims) {
  uj_tensor_t x = or_tensor(dt, nd, dims), a = or_tensor(dt, nd, dims), r = or_tensor(dt, 1, &dims[nd - 1]);
  fill(st, &x), fill(st, &a), fill(st, &r);
  /* some equal elements, so that eq/ne/le/ge see ties */
  int64_t n = or_tnumel(&x);
  for (int64_t i = 0; i < n; i += 5) or_set(&a, i, or_get(&x, i));
  uj_tensor_t y[3];
  uj_tensor_t* out[3];
  for (int k = 0; k < nout; k++) y[k] = or_tensor(dt, nd, dims), out[k] = &y[k];
  char what[160], shp[64];
  or_shape_str(shp, sizeof shp, &x);
  snprintf(what, sizeof what, "uop chain %s %s", uj_dtype_name(dt), shp);
  const uj_tensor_t* in[] = {&x, &a, &r};
  /* y2's sin, cos and pow go through each engine's libm: a few ulps */
  check_engines(what, p, in, 3, NULL, 0, out, nout, NULL, dt == UJ_F32 ? OR_TOL_F32 : dt == UJ_F64 ? 1e-12 : 0);
  for (int k = 0; k < nout; k++) or_tensor_free(&y[k]);
  or_tensor_free(&x), or_tensor_free(&a), or_tensor_free(&r);
}

TEST(uop_chain_sizes_and_shapes) {
  uint64_t seed = en_seed(7003), st = seed;
  HARNESS_SEED(seed);
  SKIP_IF(en_count() == 0, "no JIT engine available");
  static const uj_dtype_t dts[] = {UJ_F32, UJ_F64, UJ_I32};
  for (int d = 0; d < 3; d++) {
    int nout = 0;
    uj_program_t* p1 = uop_chain(dts[d], 1, &nout);
    for (int i = 0; p1 && i < EN_NSIZES; i++) uop_case(p1, nout, &st, dts[d], 1, &en_sizes[i]);
    uj_program_free(p1);
    uj_program_t* p2 = uop_chain(dts[d], 2, &nout);
    for (int i = 0; p2 && i < EN_NSHAPES2; i++) uop_case(p2, nout, &st, dts[d], 2, en_shapes2[i]);
    uj_program_free(p2);
  }
}

/* In place: p = p - lr * g (the output shares the input's memory), at every
 * size; the answer must be the interpreter's, written into the same buffer. */
TEST(parse_in_place_sizes) {
  uint64_t seed = en_seed(7004), st = seed;
  HARNESS_SEED(seed);
  SKIP_IF(en_count() == 0, "no JIT engine available");
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("p = p - lr * g; m = 0.9 * m + 0.1 * g", &p) == UJ_OK);
  if (!p) return;
  for (int i = 0; i < EN_NSIZES; i++) {
    int64_t n = en_sizes[i];
    uj_tensor_t p0 = or_tensor(UJ_F32, 1, &n), g = or_tensor(UJ_F32, 1, &n), m0 = or_tensor(UJ_F32, 1, &n);
    uj_tensor_t lr = or_tensor(UJ_F32, 0, NULL);
    or_fill_real(&st, &p0, -1, 1), or_fill_real(&st, &g, -1, 1), or_fill_real(&st, &m0, -1, 1);
    or_set(&lr, 0, 0.01);
    double *want_p = NULL, *want_m = NULL;
    for (int e = -1; e < EN_NENGINES; e++) {
      uj_ctx_t* ctx = e < 0 ? en_interp() : en_ctx(e);
      if (!ctx) continue;
      uj_tensor_t pp = en_like(&p0), mm = en_like(&m0);
      memcpy(pp.data, p0.data, (size_t)n * 4), memcpy(mm.data, m0.data, (size_t)n * 4);
      const uj_tensor_t* in[] = {&pp, &lr, &g, &mm};
      uj_tensor_t* out[] = {&pp, &mm};
      uj_status_t s = uj_program_run(ctx, p, UJ_FORWARD, in, 4, NULL, 0, out, 2);
      char what[96];
      snprintf(what, sizeof what, "in-place update [%lld]", (long long)n);
      const char* name = e < 0 ? "interp" : en_engines[e].name;
      if (s != UJ_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s on %s: %s: %s", what, name, uj_status_str(s), uj_last_error());
        harness_fail(__FILE__, __LINE__, msg);
      } else if (e < 0) {
        want_p = or_to_double(&pp), want_m = or_to_double(&mm);
      } else if (want_p) {
        EN_EXPECT_CLOSE(what, name, &pp, want_p, OR_TOL_F32);
        EN_EXPECT_CLOSE(what, name, &mm, want_m, OR_TOL_F32);
      }
      or_tensor_free(&pp), or_tensor_free(&mm);
    }
    free(want_p), free(want_m);
    or_tensor_free(&p0), or_tensor_free(&g), or_tensor_free(&m0), or_tensor_free(&lr);
  }
  uj_program_free(p);
}

/* Runs p on the interpreter and on every engine; every engine must give
 * the interpreter's bits. */
static void check_same_bits(const char* what, uj_program_t* p, const uj_tensor_t* const* in, int nin, uj_tensor_t* y,
                            uj_tensor_t* want) {
  uj_tensor_t* out[] = {want};
  uj_ctx_t* ictx = en_interp();
  if (!ictx || !EN_RUN(what, "interp", ictx, p, in, nin, NULL, 0, out, 1)) return;
  out[0] = y;
  for (int e = 0; e < EN_NENGINES; e++) {
    uj_ctx_t* ctx = en_ctx(e);
    if (ctx && EN_RUN(what, en_engines[e].name, ctx, p, in, nin, NULL, 0, out, 1))
      EN_EXPECT_SAME(what, en_engines[e].name, y, want);
  }
}

/* Division by a divisor that is the same along the inner loop (a row's
 * sum, a scalar, an expression of them): the C engine takes its reciprocal
 * once and multiplies in double (jit/c/c_divide.c), which must round every
 * quotient as the f32 division does, so every engine must match the
 * interpreter bit for bit: signed zeros, infinities, NaN, zero and
 * infinite divisors, overflow, subnormal quotients, and quotients exactly
 * halfway between two subnormals (147 2^-149 / 98 = 1.5 2^-149 goes to
 * the even 2^-148, where a multiply by 1/98 alone lands below the tie and
 * gives 2^-149). Where the loop's divider has other work the division
 * stays one. */
TEST(division_by_an_invariant_divisor_rounds_as_division) {
  uint64_t seed = en_seed(7005), st = seed;
  HARNESS_SEED(seed);
  SKIP_IF(en_count() == 0, "no JIT engine available");
  static const char* const sources[] = {"y = x / sum(w, -1)", "y = x / s", "y = x / (sum(w, -1) * s + s)"};
  enum { ND = EN_NDIVISORS, COLS = 67 };
  int64_t xd[2] = {ND, COLS}, wd[2] = {ND, 1};
  uj_tensor_t x = or_tensor(UJ_F32, 2, xd), w = or_tensor(UJ_F32, 2, wd), s = or_tensor(UJ_F32, 0, NULL);
  uj_tensor_t want = or_tensor(UJ_F32, 2, xd), y = or_tensor(UJ_F32, 2, xd);
  en_fill_division(&x, &w, COLS, &st);
  for (int i = 0; i < 3; i++) {
    uj_program_t* p = NULL;
    CHECK(uj_program_parse(sources[i], &p) == UJ_OK);
    if (!p) continue;
    /* inputs in the order the program names them */
    const uj_tensor_t* in[3] = {&x, i == 1 ? &s : &w, &s};
    int nin = i == 2 ? 3 : 2;
    for (int k = 0; k < (i == 0 ? 1 : ND); k++) {
      or_set(&s, 0, en_divisor(k));
      char what[96];
      snprintf(what, sizeof what, "%s, s = %g", sources[i], en_divisor(k));
      check_same_bits(what, p, in, nin, &y, &want);
    }
    /* the C engine does take the multiply here */
    char* text = uj_program_dump(NULL, p, UJ_FORWARD, UJ_DUMP_C, NULL);
    CHECK(text && strstr(text, "= uj_fdiv_r(") != NULL);
    free(text);
    uj_program_free(p);
  }
  /* but not in a loop whose divider has other work: a square root, a
   * division by what varies (jit/c/c_divide.c says why) */
  static const char* const busy[] = {"y = sqrt(x) / s", "y = x / s + s / (x + 1)", "y = x / s - 1 / x",
                                     "y = x / (sqrt(x) / s + 1)"};
  or_set(&s, 0, 3);
  for (int i = 0; i < 4; i++) {
    uj_program_t* p = NULL;
    CHECK(uj_program_parse(busy[i], &p) == UJ_OK);
    if (!p) continue;
    const uj_tensor_t* in[2] = {&x, &s};
    check_same_bits(busy[i], p, in, 2, &y, &want);
    /* the build just run: s 0-d, the same along the loop */
    char* text = uj_program_dump(NULL, p, UJ_FORWARD, UJ_DUMP_C, NULL);
    CHECK(text && strstr(text, "uj_d0") == NULL && strstr(text, "uj_fdiv_r(t") == NULL);
    free(text);
    uj_program_free(p);
  }
  or_tensor_free(&x), or_tensor_free(&w), or_tensor_free(&s), or_tensor_free(&want), or_tensor_free(&y);
}

EN_TEST_MAIN()
