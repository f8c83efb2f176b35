/* tests/test_uops_casts.c: oracle tests of casts and constants against
 * naive loops in double, on the interpreter, on AUTO and on the emitted IR
 * with the passes off: casts between f32, f64 and i32 (truncation, NaN,
 * saturation) and uj_const adopting its partner's dtype (also as the first
 * operand, 1 - x). The other elementwise uops are in test_uops.c. */
#include "oracle.h"

/* ---- casts ------------------------------------------------------------------------- */

static double ref_to_i32(double v) {
  if (isnan(v)) return 0;
  if (v >= 2147483647.0) return 2147483647.0;
  if (v <= -2147483648.0) return -2147483648.0;
  return trunc(v);
}

static void cast_values(uj_dtype_t from, uj_dtype_t to, const double* vals, int64_t n) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, from);
  uj_io_t y = uj_cast(g, to, x);
  CHECK(y >= 0);
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &y);
  uj_graph_free(g);
  uj_tensor_t tx = or_tensor(from, 1, &n), ty = or_tensor(to, 1, &n);
  double* ref = or_alloc_ref(n);
  for (int64_t i = 0; i < n; i++) {
    if (from == UJ_I32)
      ((int32_t*)tx.data)[i] = (int32_t)vals[i];
    else
      or_set(&tx, i, vals[i]);
    double v = or_get(&tx, i);
    ref[i] = to == UJ_I32 ? ref_to_i32(v) : or_in_dtype(to, v);
  }
  if (OR_RUN_CHECK1(p, &tx, &ty, ref, 0))
    fprintf(stderr, "  (cast %s -> %s)\n", uj_dtype_name(from), uj_dtype_name(to));
  free(ref);
  or_tensor_free(&tx);
  or_tensor_free(&ty);
  uj_program_free(p);
}

TEST(cast_float_to_i32) {
  static const double v[] = {-2.7, -2.5, -0.5, -0.0, 0.5, 2.5, 2.7, 123456.9, -123456.9,
                             NAN, -NAN, 3e9, -3e9, INFINITY, -INFINITY, 1e10, -1e10,
                             2147483520.0, -2147483648.0, 2147483647.9, -2147483648.9};
  int64_t n = (int64_t)(sizeof v / sizeof v[0]);
  cast_values(UJ_F32, UJ_I32, v, n);
  cast_values(UJ_F64, UJ_I32, v, n);
}

TEST(cast_between_floats_and_from_i32) {
  static const double f[] = {0.1, -0.1, 1e-3, 3.14159265358979, 1e39, -1e39, 1e-50, NAN, INFINITY, 0.0};
  cast_values(UJ_F64, UJ_F32, f, 10);
  cast_values(UJ_F32, UJ_F64, f, 10);
  cast_values(UJ_F32, UJ_F32, f, 10);
  cast_values(UJ_F64, UJ_F64, f, 10);
  static const double i[] = {0, 1, -1, 16777217, -16777217, 2147483647, -2147483648.0, 123456789};
  cast_values(UJ_I32, UJ_F32, i, 8);
  cast_values(UJ_I32, UJ_F64, i, 8);
  cast_values(UJ_I32, UJ_I32, i, 8);
}

/* Random round trips through every pair of dtypes. */
TEST(cast_random_pairs) {
  HARNESS_SEED(221);
  uint64_t st = 221;
  for (int from = UJ_F32; from <= UJ_I32; from++)
    for (int to = UJ_F32; to <= UJ_I32; to++) {
      double v[40];
      for (int i = 0; i < 40; i++)
        v[i] = from == UJ_I32 ? (double)harness_int(&st, -100000000, 100000000)
                              : harness_real(&st, -1e6, 1e6);
      cast_values((uj_dtype_t)from, (uj_dtype_t)to, v, 40);
    }
}

/* ---- constants ---------------------------------------------------------------------- */

/* x op const, with the constant taking x's dtype: f64 arithmetic stays
 * f64, i32 arithmetic stays integral. */
TEST(const_adopts_dtype) {
  HARNESS_SEED(231);
  uint64_t st = 231;
  for (int d = UJ_F32; d <= UJ_I32; d++) {
    uj_dtype_t dt = (uj_dtype_t)d;
    uj_graph_t* g = uj_graph_new();
    uj_io_t x = uj_input(g, 2, dt);
    /* y = (x * 3 + (-2)) > 4 ? x - 0.5 : 0.25 (i32: x - 0, 0 for the constants that
     * are not integers are avoided). */
    uj_io_t t = uj_binary(g, UJ_BINARY_MUL, x, uj_const(g, 3.0));
    t = uj_binary(g, UJ_BINARY_ADD, t, uj_const(g, -2.0));
    uj_io_t c = uj_binary(g, UJ_BINARY_GT, t, uj_const(g, 4.0));
    uj_io_t a = uj_binary(g, UJ_BINARY_SUB, x, uj_const(g, dt == UJ_I32 ? 7.0 : 0.5));
    uj_io_t y = uj_where(g, c, a, uj_const(g, dt == UJ_I32 ? -9.0 : 0.25));
    CHECK(y >= 0);
    uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &y);
    uj_graph_free(g);
    int64_t dims[2] = {harness_int(&st, 1, 6), harness_int(&st, 1, 6)};
    uj_tensor_t tx = or_tensor(dt, 2, dims), ty = or_tensor(dt, 2, dims);
    if (dt == UJ_I32)
      or_fill_int(&st, &tx, -20, 20);
    else
      or_fill_real(&st, &tx, -5, 5);
    int64_t n = or_tnumel(&tx);
    double* ref = or_alloc_ref(n);
    for (int64_t i = 0; i < n; i++) {
      double v = or_get(&tx, i);
      double tt = or_in_dtype(dt, or_in_dtype(dt, v * 3.0) - 2.0);
      ref[i] = tt > 4.0 ? or_in_dtype(dt, v - (dt == UJ_I32 ? 7.0 : 0.5)) : (dt == UJ_I32 ? -9.0 : 0.25);
    }
    OR_RUN_CHECK1(p, &tx, &ty, ref, dt == UJ_F32 ? OR_TOL_F32 : dt == UJ_F64 ? OR_TOL_F64 : 0);
    free(ref);
    or_tensor_free(&tx);
    or_tensor_free(&ty);
    uj_program_free(p);
  }
}

/* A constant combined with an f64 operand keeps the double value it was
 * given (0.1 is not rounded through f32). */
TEST(const_f64_precision) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_F64);
  uj_io_t y = uj_binary(g, UJ_BINARY_ADD, x, uj_const(g, 0.1));
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &y);
  uj_graph_free(g);
  int64_t n = 3;
  uj_tensor_t tx = or_tensor(UJ_F64, 1, &n), ty = or_tensor(UJ_F64, 1, &n);
  double ref[3];
  for (int i = 0; i < 3; i++) or_set(&tx, i, i * 1.25), ref[i] = i * 1.25 + 0.1;
  OR_RUN_CHECK1(p, &tx, &ty, ref, 1e-15);
  or_tensor_free(&tx);
  or_tensor_free(&ty);
  uj_program_free(p);
}

/* A constant alone is a 0-d f32 output. */
TEST(const_as_output) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t c = uj_const(g, 2.5);
  CHECK(c >= 0);
  uj_program_t* p = OR_PROGRAM(g, 0, NULL, 0, NULL, 1, &c);
  uj_graph_free(g);
  uj_tensor_t ty = or_tensor(UJ_F32, 0, NULL);
  uj_tensor_t* out[] = {&ty};
  double ref[1] = {2.5};
  const double* refs[] = {ref};
  OR_RUN_CHECK(p, NULL, 0, NULL, 0, out, refs, 1, 0);
  or_tensor_free(&ty);
  uj_program_free(p);
}

/* A constant as the first operand takes the other side's dtype and the
 * result takes the shape of the non-0-d operand: 1 - x, 7 / x (i32: floor
 * division, x = 0 gives 0), 0 < x, max(0, x), and where(x > 0, 2, x). A 0-d
 * input as the first operand broadcasts the same way: s - x. */
TEST(const_first_operand) {
  HARNESS_SEED(232);
  uint64_t st = 232;
  for (int d = UJ_F32; d <= UJ_I32; d++) {
    uj_dtype_t dt = (uj_dtype_t)d;
    uj_graph_t* g = uj_graph_new();
    uj_io_t x = uj_input(g, 2, dt), s = uj_input(g, 0, dt);
    uj_io_t o[6];
    o[0] = uj_binary(g, UJ_BINARY_SUB, uj_const(g, 1.0), x);
    o[1] = uj_binary(g, UJ_BINARY_DIV, uj_const(g, 7.0), x);
    o[2] = uj_binary(g, UJ_BINARY_LT, uj_const(g, 0.0), x);
    o[3] = uj_binary(g, UJ_BINARY_MAX, uj_const(g, 0.0), x);
    o[4] = uj_where(g, uj_binary(g, UJ_BINARY_GT, x, uj_const(g, 0.0)), uj_const(g, 2.0), x);
    o[5] = uj_binary(g, UJ_BINARY_SUB, s, x);
    for (int k = 0; k < 6; k++) CHECK(o[k] >= 0);
    uj_io_t ins[] = {x, s};
    uj_program_t* p = OR_PROGRAM(g, 2, ins, 0, NULL, 6, o);
    uj_graph_free(g);
    for (int it = 0; it < 5 && p; it++) {
      int64_t dims[2] = {harness_int(&st, 1, 6), harness_int(&st, 1, 6)};
      uj_tensor_t tx = or_tensor(dt, 2, dims), ts = or_tensor(dt, 0, NULL);
      int64_t n = or_tnumel(&tx);
      for (int64_t i = 0; i < n; i++) {
        double v = dt == UJ_I32 ? (double)harness_int(&st, -5, 5) : harness_real(&st, 0.25, 4.0);
        if (dt != UJ_I32 && harness_int(&st, 0, 1)) v = -v;
        or_set(&tx, i, v);
      }
      or_set(&ts, 0, dt == UJ_I32 ? 3.0 : 0.75);
      uj_tensor_t t[6];
      double* r[6];
      for (int k = 0; k < 6; k++) t[k] = or_tensor(dt, 2, dims), r[k] = or_alloc_ref(n);
      for (int64_t i = 0; i < n; i++) {
        double v = or_get(&tx, i);
        r[0][i] = 1.0 - v;
        r[1][i] = dt == UJ_I32 ? (double)or_floordiv(7, (int64_t)v) : 7.0 / v;
        r[2][i] = 0.0 < v;
        r[3][i] = v > 0 ? v : 0;
        r[4][i] = v > 0 ? 2.0 : v;
        r[5][i] = or_get(&ts, 0) - v;
      }
      const uj_tensor_t* in[] = {&tx, &ts};
      uj_tensor_t* out[] = {&t[0], &t[1], &t[2], &t[3], &t[4], &t[5]};
      const double* refs[] = {r[0], r[1], r[2], r[3], r[4], r[5]};
      if (OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 6, dt == UJ_F32 ? OR_TOL_F32 : dt == UJ_F64 ? OR_TOL_F64 : 0))
        fprintf(stderr, "  (%s)\n", uj_dtype_name(dt));
      for (int k = 0; k < 6; k++) or_tensor_free(&t[k]), free(r[k]);
      or_tensor_free(&tx);
      or_tensor_free(&ts);
    }
    uj_program_free(p);
  }
}

TEST_MAIN()
