/* tests/test_uops.c: oracle tests of the elementwise uops against naive
 * loops in double, on the interpreter, on AUTO and on the emitted IR with
 * the passes off: every unary op and every binary op in f32 and f64 (also
 * with a 0-d second operand), the i32 ops (floor division, division by zero,
 * comparisons, neg/abs/floor, 32-bit wraparound), NaN operands (max/min
 * ignore them like fmax/fmin), each compound op as a divisor, where, 0-d
 * inputs and outputs, reindex index arithmetic
 * (floor division and modulo, min/max, leading minus, $params, out-of-range
 * reads) and transposes. Graph shapes (diamonds, shared and repeated
 * outputs) are in test_uops_graph.c, casts and constants in
 * test_uops_casts.c, reductions in test_uops_reduce.c,
 * convolution in test_uops_conv.c. Shapes are random (fixed seeds). */
#include "oracle.h"

static const char* unary_name(uj_unary_op_t op) { return uj_unary_name(op); }
static const char* binary_name(uj_binary_op_t op) { return uj_binary_name(op); }

static double ref_unary(uj_unary_op_t op, double x) {
  switch (op) {
    case UJ_UNARY_NEG: return -x;
    case UJ_UNARY_ABS: return fabs(x);
    case UJ_UNARY_EXP: return exp(x);
    case UJ_UNARY_LOG: return log(x);
    case UJ_UNARY_SQRT: return sqrt(x);
    case UJ_UNARY_RSQRT: return 1.0 / sqrt(x);
    case UJ_UNARY_RECIP: return 1.0 / x;
    case UJ_UNARY_SIN: return sin(x);
    case UJ_UNARY_COS: return cos(x);
    case UJ_UNARY_TANH: return tanh(x);
    case UJ_UNARY_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case UJ_UNARY_FLOOR: return floor(x);
    case UJ_UNARY_TAN: return tan(x);
    case UJ_UNARY_ERF: return erf(x);
    case UJ_UNARY_ERFC: return erfc(x);
    case UJ_UNARY_LOG1P: return log1p(x);
    case UJ_UNARY_EXPM1: return expm1(x);
    case UJ_UNARY_LOG2: return log2(x);
    case UJ_UNARY_LOG10: return log10(x);
    case UJ_UNARY_EXP2: return exp2(x);
    case UJ_UNARY_SINH: return sinh(x);
    case UJ_UNARY_COSH: return cosh(x);
    case UJ_UNARY_ASIN: return asin(x);
    case UJ_UNARY_ACOS: return acos(x);
    case UJ_UNARY_ATAN: return atan(x);
    case UJ_UNARY_ASINH: return asinh(x);
    case UJ_UNARY_ACOSH: return acosh(x);
    case UJ_UNARY_ATANH: return atanh(x);
    case UJ_UNARY_CBRT: return cbrt(x);
    case UJ_UNARY_ROUND: return nearbyint(x);
    case UJ_UNARY_SIGN: return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
    case UJ_UNARY_CEIL: return ceil(x);
    default: break; /* an op added later: tests/test_math_ops.c holds it */
  }
  return NAN;
}


static double ref_binary(uj_binary_op_t op, double a, double b, uj_dtype_t dt) {
  switch (op) {
    case UJ_BINARY_ADD: return a + b;
    case UJ_BINARY_SUB: return a - b;
    case UJ_BINARY_MUL: return a * b;
    case UJ_BINARY_DIV: return dt == UJ_I32 ? (double)or_floordiv((int64_t)a, (int64_t)b) : a / b;
    case UJ_BINARY_POW: return pow(a, b);
    case UJ_BINARY_MAX: return a > b ? a : b;
    case UJ_BINARY_MIN: return a < b ? a : b;
    case UJ_BINARY_EQ: return a == b;
    case UJ_BINARY_NE: return a != b;
    case UJ_BINARY_LT: return a < b;
    case UJ_BINARY_LE: return a <= b;
    case UJ_BINARY_GT: return a > b;
    case UJ_BINARY_GE: return a >= b;
    case UJ_BINARY_ATAN2: return atan2(a, b);
    case UJ_BINARY_HYPOT: return hypot(a, b);
    case UJ_BINARY_COPYSIGN: return copysign(a, b);
    case UJ_BINARY_MOD: {
      if (dt == UJ_I32) return (double)or_floormod((int64_t)a, (int64_t)b);
      double r = fmod(a, b);
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r == 0 ? copysign(0.0, b) : r;
    }
    case UJ_BINARY_FMOD:
      if (dt == UJ_I32) return b == 0 || b == -1 ? 0 : (double)((int64_t)a % (int64_t)b);
      return fmod(a, b);
    default: break;
  }
  return NAN;
}


/* ---- unary ------------------------------------------------------------------------ */

static void unary_case(uj_unary_op_t op, uj_dtype_t dt, uint64_t* st) {
  double tol = dt == UJ_F32 ? OR_TOL_F32 : dt == UJ_F64 ? OR_TOL_F64 : 0;
  for (int it = 0; it < 5; it++) {
    int64_t dims[UJ_MAX_DIMS];
    int r = or_rand_shape(st, 0, 4, 5, dims);
    uj_graph_t* g = uj_graph_new();
    uj_io_t x = uj_input(g, r, dt);
    uj_io_t y = uj_unary(g, op, x);
    CHECK(y >= 0);
    uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &y);
    uj_graph_free(g);
    uj_tensor_t tx = or_tensor(dt, r, dims), ty = or_tensor(dt, r, dims);
    int64_t n = or_tnumel(&tx);
    for (int64_t i = 0; i < n; i++) {
      double v;
      if (dt == UJ_I32)
        v = (double)harness_int(st, -1000, 1000);
      else if (op == UJ_UNARY_LOG || op == UJ_UNARY_SQRT || op == UJ_UNARY_RSQRT)
        v = harness_real(st, 0.05, 9.0);
      else if (op == UJ_UNARY_RECIP)
        v = harness_real(st, 0.25, 4.0) * (harness_int(st, 0, 1) ? 1 : -1);
      else
        v = harness_real(st, -4.0, 4.0);
      or_set(&tx, i, v);
    }
    double* ref = or_alloc_ref(n);
    for (int64_t i = 0; i < n; i++) ref[i] = ref_unary(op, or_get(&tx, i));
    if (OR_RUN_CHECK1(p, &tx, &ty, ref, tol))
      fprintf(stderr, "  (op %s, %s, rank %d)\n", unary_name(op), uj_dtype_name(dt), r);
    free(ref);
    or_tensor_free(&tx);
    or_tensor_free(&ty);
    uj_program_free(p);
    if (harness_failed_checks) return;
  }
}

TEST(unary_f32) {
  HARNESS_SEED(201);
  uint64_t st = 201;
  for (int op = UJ_UNARY_NEG; op <= UJ_UNARY_CEIL; op++) unary_case((uj_unary_op_t)op, UJ_F32, &st);
}
TEST(unary_f64) {
  HARNESS_SEED(202);
  uint64_t st = 202;
  for (int op = UJ_UNARY_NEG; op <= UJ_UNARY_CEIL; op++) unary_case((uj_unary_op_t)op, UJ_F64, &st);
}
TEST(unary_i32) {
  HARNESS_SEED(203);
  uint64_t st = 203;
  unary_case(UJ_UNARY_NEG, UJ_I32, &st);
  unary_case(UJ_UNARY_ABS, UJ_I32, &st);
  unary_case(UJ_UNARY_FLOOR, UJ_I32, &st);
  unary_case(UJ_UNARY_CEIL, UJ_I32, &st);
  unary_case(UJ_UNARY_ROUND, UJ_I32, &st);
  unary_case(UJ_UNARY_SIGN, UJ_I32, &st);
}

/* Each op as the divisor, c / op(x): the engines that print C must bracket
 * an op's whole value (f64 sigmoid was printed `1.0 / (1.0 + exp(-x))` and
 * recip `1.0 / x`, so `c / op(x)` divided c by 1.0 and then by the rest). */
static void divisor_case(uj_unary_op_t op, uj_dtype_t dt, uint64_t* st) {
  double tol = dt == UJ_F32 ? OR_TOL_F32 : OR_TOL_F64;
  int64_t dims[1] = {harness_int(st, 1, 40)};
  uj_graph_t* g = uj_graph_new();
  uj_io_t c = uj_input(g, 1, dt), x = uj_input(g, 1, dt);
  uj_io_t y = uj_binary(g, UJ_BINARY_DIV, c, uj_unary(g, op, x));
  CHECK(y >= 0);
  uj_io_t ins[] = {c, x};
  uj_program_t* p = OR_PROGRAM(g, 2, ins, 0, NULL, 1, &y);
  uj_graph_free(g);
  uj_tensor_t tc = or_tensor(dt, 1, dims), tx = or_tensor(dt, 1, dims), ty = or_tensor(dt, 1, dims);
  double* ref = or_alloc_ref(dims[0]);
  for (int64_t i = 0; i < dims[0]; i++) {
    or_set(&tc, i, harness_real(st, 0.5, 2.0));
    or_set(&tx, i, harness_real(st, 0.25, 4.0)); /* positive: every op below is defined and away from 0 */
    ref[i] = or_get(&tc, i) / ref_unary(op, or_get(&tx, i));
  }
  const uj_tensor_t* in[] = {&tc, &tx};
  uj_tensor_t* out[] = {&ty};
  const double* refs[] = {ref};
  if (OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 1, tol))
    fprintf(stderr, "  (c / %s(x), %s)\n", unary_name(op), uj_dtype_name(dt));
  free(ref);
  or_tensor_free(&tc), or_tensor_free(&tx), or_tensor_free(&ty);
  uj_program_free(p);
}

TEST(unary_as_divisor) {
  HARNESS_SEED(204);
  uint64_t st = 204;
  static const uj_unary_op_t ops[] = {UJ_UNARY_RECIP, UJ_UNARY_SIGMOID, UJ_UNARY_RSQRT, UJ_UNARY_SQRT,
                                      UJ_UNARY_EXP, UJ_UNARY_TANH};
  for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
    divisor_case(ops[k], UJ_F32, &st);
    divisor_case(ops[k], UJ_F64, &st);
  }
}

/* Extreme arguments: exp overflows to inf and underflows to 0, sigmoid and
 * tanh saturate, log(0) is -inf, sqrt of 0 is 0. */
TEST(unary_extremes) {
  static const uj_unary_op_t ops[] = {UJ_UNARY_EXP, UJ_UNARY_SIGMOID, UJ_UNARY_TANH, UJ_UNARY_LOG,
                                      UJ_UNARY_SQRT};
  static const double vals[] = {-200.0, -50.0, 0.0, 50.0, 200.0, 1e-30};
  for (int d = 0; d < 2; d++) {
    uj_dtype_t dt = d ? UJ_F64 : UJ_F32;
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
      int64_t n = 6;
      uj_graph_t* g = uj_graph_new();
      uj_io_t x = uj_input(g, 1, dt);
      uj_io_t y = uj_unary(g, ops[o], x);
      uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &y);
      uj_graph_free(g);
      uj_tensor_t tx = or_tensor(dt, 1, &n), ty = or_tensor(dt, 1, &n);
      double ref[6];
      for (int i = 0; i < 6; i++) {
        double v = vals[i];
        if (ops[o] == UJ_UNARY_LOG || ops[o] == UJ_UNARY_SQRT) v = fabs(v);
        or_set(&tx, i, v);
        ref[i] = or_in_dtype(dt, ref_unary(ops[o], or_get(&tx, i)));
      }
      if (OR_RUN_CHECK1(p, &tx, &ty, ref, d ? OR_TOL_F64 : OR_TOL_F32))
        fprintf(stderr, "  (op %s, %s)\n", unary_name(ops[o]), uj_dtype_name(dt));
      or_tensor_free(&tx);
      or_tensor_free(&ty);
      uj_program_free(p);
    }
  }
}

/* ---- binary ------------------------------------------------------------------------ */

static double binary_value(uj_binary_op_t op, uj_dtype_t dt, int second, uint64_t* st) {
  int cmp = op >= UJ_BINARY_MAX; /* max, min, comparisons (and the function ops): quantized values give ties */
  if (dt == UJ_I32) {
    if (cmp) return (double)harness_int(st, -3, 3);
    if (op == UJ_BINARY_MUL) return (double)harness_int(st, -1000, 1000);
    if (op == UJ_BINARY_DIV) return (double)(second ? harness_int(st, -5, 5) : harness_int(st, -60, 60));
    return (double)harness_int(st, -1000000, 1000000);
  }
  if (cmp) return 0.5 * (double)harness_int(st, -3, 3);
  if (op == UJ_BINARY_POW) return second ? harness_real(st, -2.5, 2.5) : harness_real(st, 0.2, 3.0);
  if (op == UJ_BINARY_DIV && second)
    return harness_real(st, 0.5, 3.0) * (harness_int(st, 0, 1) ? 1 : -1);
  return harness_real(st, -3.0, 3.0);
}

/* b_scalar: b is a 0-d input. */
static void binary_case(uj_binary_op_t op, uj_dtype_t dt, int b_scalar, uint64_t* st) {
  double tol = dt == UJ_F32 ? OR_TOL_F32 : dt == UJ_F64 ? OR_TOL_F64 : 0;
  for (int it = 0; it < 4; it++) {
    int64_t dims[UJ_MAX_DIMS];
    int r = or_rand_shape(st, 0, 4, 5, dims);
    uj_graph_t* g = uj_graph_new();
    uj_io_t a = uj_input(g, r, dt), b = uj_input(g, b_scalar ? 0 : r, dt);
    uj_io_t y = uj_binary(g, op, a, b);
    CHECK(y >= 0);
    uj_io_t ins[] = {a, b};
    uj_program_t* p = OR_PROGRAM(g, 2, ins, 0, NULL, 1, &y);
    uj_graph_free(g);
    uj_tensor_t ta = or_tensor(dt, r, dims), tb = or_tensor(dt, b_scalar ? 0 : r, dims);
    uj_tensor_t ty = or_tensor(dt, r, dims);
    int64_t n = or_tnumel(&ta), nb = or_tnumel(&tb);
    for (int64_t i = 0; i < n; i++) or_set(&ta, i, binary_value(op, dt, 0, st));
    for (int64_t i = 0; i < nb; i++) or_set(&tb, i, binary_value(op, dt, 1, st));
    double* ref = or_alloc_ref(n);
    for (int64_t i = 0; i < n; i++)
      ref[i] = ref_binary(op, or_get(&ta, i), or_get(&tb, b_scalar ? 0 : i), dt);
    const uj_tensor_t* in[] = {&ta, &tb};
    uj_tensor_t* out[] = {&ty};
    const double* refs[] = {ref};
    if (OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 1, tol))
      fprintf(stderr, "  (op %s, %s, rank %d, b %s)\n", binary_name(op), uj_dtype_name(dt), r,
              b_scalar ? "0-d" : "full");
    free(ref);
    or_tensor_free(&ta);
    or_tensor_free(&tb);
    or_tensor_free(&ty);
    uj_program_free(p);
    if (harness_failed_checks) return;
  }
}

TEST(binary_f32) {
  HARNESS_SEED(211);
  uint64_t st = 211;
  for (int op = UJ_BINARY_ADD; op <= UJ_BINARY_FMOD; op++) binary_case((uj_binary_op_t)op, UJ_F32, 0, &st);
}
TEST(binary_f64) {
  HARNESS_SEED(212);
  uint64_t st = 212;
  for (int op = UJ_BINARY_ADD; op <= UJ_BINARY_FMOD; op++) binary_case((uj_binary_op_t)op, UJ_F64, 0, &st);
}
TEST(binary_scalar_operand) {
  HARNESS_SEED(213);
  uint64_t st = 213;
  for (int op = UJ_BINARY_ADD; op <= UJ_BINARY_FMOD; op++) {
    binary_case((uj_binary_op_t)op, UJ_F32, 1, &st);
    binary_case((uj_binary_op_t)op, UJ_F64, 1, &st);
    if (op <= UJ_BINARY_GE ? op != UJ_BINARY_POW : op >= UJ_BINARY_MOD) binary_case((uj_binary_op_t)op, UJ_I32, 1, &st);
  }
}
TEST(binary_i32) {
  HARNESS_SEED(214);
  uint64_t st = 214;
  for (int op = UJ_BINARY_ADD; op <= UJ_BINARY_GE; op++)
    if (op != UJ_BINARY_POW) binary_case((uj_binary_op_t)op, UJ_I32, 0, &st);
}

/* i32 division rounds toward negative infinity; by zero it gives 0. */
TEST(i32_floor_division_table) {
  static const int32_t a[] = {7, -7, 7, -7, 6, -6, 0, 5, -5, 1, -1, 2147483647, -2147483647, 3};
  static const int32_t b[] = {2, 2, -2, -2, 3, 3, 4, 0, 0, -7, 7, 2, 2, 1};
  int64_t n = (int64_t)(sizeof a / sizeof a[0]);
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_I32), y = uj_input(g, 1, UJ_I32);
  uj_io_t q = uj_binary(g, UJ_BINARY_DIV, x, y);
  uj_io_t ins[] = {x, y};
  uj_program_t* p = OR_PROGRAM(g, 2, ins, 0, NULL, 1, &q);
  uj_graph_free(g);
  uj_tensor_t ta = or_tensor(UJ_I32, 1, &n), tb = or_tensor(UJ_I32, 1, &n), tq = or_tensor(UJ_I32, 1, &n);
  double ref[16];
  for (int64_t i = 0; i < n; i++) {
    or_set(&ta, i, a[i]);
    or_set(&tb, i, b[i]);
    ref[i] = (double)or_floordiv(a[i], b[i]);
  }
  CHECK(ref[0] == 3 && ref[1] == -4 && ref[2] == -4 && ref[3] == 3 && ref[7] == 0);
  const uj_tensor_t* in[] = {&ta, &tb};
  uj_tensor_t* out[] = {&tq};
  const double* refs[] = {ref};
  OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 1, 0);
  or_tensor_free(&ta);
  or_tensor_free(&tb);
  or_tensor_free(&tq);
  uj_program_free(p);
}

/* max and min ignore a NaN operand, like fmax/fmin: NaN only when both are.
 * Comparisons with NaN are false except ne. */
TEST(binary_nan_operands) {
  static const double av[] = {NAN, 1.0, NAN, -2.0, 3.0, -INFINITY};
  static const double bv[] = {2.0, NAN, NAN, -3.0, INFINITY, NAN};
  static const uj_binary_op_t ops[] = {UJ_BINARY_MAX, UJ_BINARY_MIN, UJ_BINARY_EQ, UJ_BINARY_NE,
                                       UJ_BINARY_LT, UJ_BINARY_GE};
  int64_t n = 6;
  for (int d = 0; d < 2; d++) {
    uj_dtype_t dt = d ? UJ_F64 : UJ_F32;
    uj_graph_t* g = uj_graph_new();
    uj_io_t a = uj_input(g, 1, dt), b = uj_input(g, 1, dt);
    uj_io_t outs[6];
    for (int k = 0; k < 6; k++) outs[k] = uj_binary(g, ops[k], a, b);
    uj_io_t ins[] = {a, b};
    uj_program_t* p = OR_PROGRAM(g, 2, ins, 0, NULL, 6, outs);
    uj_graph_free(g);
    uj_tensor_t ta = or_tensor(dt, 1, &n), tb = or_tensor(dt, 1, &n), t[6];
    double r[6][6];
    for (int i = 0; i < 6; i++) {
      or_set(&ta, i, av[i]);
      or_set(&tb, i, bv[i]);
      r[0][i] = fmax(av[i], bv[i]);
      r[1][i] = fmin(av[i], bv[i]);
      for (int k = 2; k < 6; k++) r[k][i] = ref_binary(ops[k], av[i], bv[i], dt);
    }
    for (int k = 0; k < 6; k++) t[k] = or_tensor(dt, 1, &n);
    const uj_tensor_t* in[] = {&ta, &tb};
    uj_tensor_t* out[] = {&t[0], &t[1], &t[2], &t[3], &t[4], &t[5]};
    const double* refs[] = {r[0], r[1], r[2], r[3], r[4], r[5]};
    if (OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 6, 0)) fprintf(stderr, "  (%s)\n", uj_dtype_name(dt));
    for (int k = 0; k < 6; k++) or_tensor_free(&t[k]);
    or_tensor_free(&ta);
    or_tensor_free(&tb);
    uj_program_free(p);
  }
}

/* i32 arithmetic wraps to 32 bits (the interpreter's rule, ir/interp.c):
 * INT_MAX + 1, 65536 * 65536, INT_MIN / -1, -INT_MIN and |INT_MIN| never trap. */
TEST(i32_wraparound) {
  static const int32_t av[] = {2147483647, 65536, -2147483647 - 1, -2147483647 - 1, 5};
  static const int32_t bv[] = {1, 65536, -1, 1, -1};
  int64_t n = 5;
  uj_graph_t* g = uj_graph_new();
  uj_io_t a = uj_input(g, 1, UJ_I32), b = uj_input(g, 1, UJ_I32);
  uj_io_t outs[] = {uj_binary(g, UJ_BINARY_ADD, a, b), uj_binary(g, UJ_BINARY_MUL, a, b),
                    uj_binary(g, UJ_BINARY_DIV, a, b), uj_unary(g, UJ_UNARY_NEG, a),
                    uj_unary(g, UJ_UNARY_ABS, a)};
  uj_io_t ins[] = {a, b};
  uj_program_t* p = OR_PROGRAM(g, 2, ins, 0, NULL, 5, outs);
  uj_graph_free(g);
  uj_tensor_t ta = or_tensor(UJ_I32, 1, &n), tb = or_tensor(UJ_I32, 1, &n);
  memcpy(ta.data, av, sizeof av);
  memcpy(tb.data, bv, sizeof bv);
  uj_tensor_t t[5];
  double r[5][5];
  for (int k = 0; k < 5; k++) t[k] = or_tensor(UJ_I32, 1, &n);
  for (int i = 0; i < 5; i++) {
    int64_t x = av[i], y = bv[i];
    r[0][i] = (int32_t)(uint32_t)(uint64_t)(x + y);
    r[1][i] = (int32_t)(uint32_t)(uint64_t)(x * y);
    r[2][i] = (int32_t)(uint32_t)(uint64_t)or_floordiv(x, y);
    r[3][i] = (int32_t)(uint32_t)(uint64_t)(-x);
    r[4][i] = (int32_t)(uint32_t)(uint64_t)(x < 0 ? -x : x);
  }
  CHECK(r[0][0] == -2147483648.0 && r[1][1] == 0 && r[2][2] == -2147483648.0);
  const uj_tensor_t* in[] = {&ta, &tb};
  uj_tensor_t* out[] = {&t[0], &t[1], &t[2], &t[3], &t[4]};
  const double* refs[] = {r[0], r[1], r[2], r[3], r[4]};
  OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 5, 0);
  for (int k = 0; k < 5; k++) or_tensor_free(&t[k]);
  or_tensor_free(&ta);
  or_tensor_free(&tb);
  uj_program_free(p);
}

/* ---- where ------------------------------------------------------------------------ */

/* relu two ways: where(x > 0, x, 0) and max(x, 0); and where with a full b. */
TEST(where_relu) {
  HARNESS_SEED(241);
  uint64_t st = 241;
  for (int d = 0; d < 2; d++) {
    uj_dtype_t dt = d ? UJ_F64 : UJ_F32;
    uj_graph_t* g = uj_graph_new();
    uj_io_t x = uj_input(g, 3, dt), b = uj_input(g, 3, dt);
    uj_io_t zero = uj_const(g, 0.0);
    uj_io_t r1 = uj_where(g, uj_binary(g, UJ_BINARY_GT, x, zero), x, zero);
    uj_io_t r2 = uj_binary(g, UJ_BINARY_MAX, x, uj_const(g, 0.0));
    uj_io_t r3 = uj_where(g, uj_binary(g, UJ_BINARY_LE, x, b), x, b); /* min(x, b) */
    uj_io_t ins[] = {x, b}, outs[] = {r1, r2, r3};
    CHECK(r1 >= 0 && r2 >= 0 && r3 >= 0);
    uj_program_t* p = OR_PROGRAM(g, 2, ins, 0, NULL, 3, outs);
    uj_graph_free(g);
    for (int it = 0; it < 6; it++) {
      int64_t dims[3];
      or_rand_shape(&st, 3, 3, 6, dims);
      uj_tensor_t tx = or_tensor(dt, 3, dims), tb = or_tensor(dt, 3, dims);
      uj_tensor_t t1 = or_tensor(dt, 3, dims), t2 = or_tensor(dt, 3, dims), t3 = or_tensor(dt, 3, dims);
      or_fill_real(&st, &tx, -2, 2);
      or_fill_real(&st, &tb, -2, 2);
      int64_t n = or_tnumel(&tx);
      double *f1 = or_alloc_ref(n), *f3 = or_alloc_ref(n);
      for (int64_t i = 0; i < n; i++) {
        double v = or_get(&tx, i), w = or_get(&tb, i);
        f1[i] = v > 0 ? v : 0;
        f3[i] = v <= w ? v : w;
      }
      const uj_tensor_t* in[] = {&tx, &tb};
      uj_tensor_t* out[] = {&t1, &t2, &t3};
      const double* refs[] = {f1, f1, f3};
      OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 3, 0);
      free(f1);
      free(f3);
      or_tensor_free(&tx);
      or_tensor_free(&tb);
      or_tensor_free(&t1);
      or_tensor_free(&t2);
      or_tensor_free(&t3);
    }
    uj_program_free(p);
  }
}

/* ---- 0-d tensors ----------------------------------------------------------------------- */

TEST(zero_dim_in_and_out) {
  HARNESS_SEED(251);
  uint64_t st = 251;
  static const char* const none[1] = {""};
  const char* const last[] = {"dA0-1"};
  const char* const bshape[] = {"dA0"};
  uj_graph_t* g = uj_graph_new();
  uj_io_t s = uj_input(g, 0, UJ_F64);  /* a scalar */
  uj_io_t v = uj_input(g, 1, UJ_F64);  /* a vector */
  uj_io_t es = uj_unary(g, UJ_UNARY_EXP, s);                           /* 0-d -> 0-d */
  uj_io_t lastv = uj_reindex(g, v, 0, none, 1, &v, 1, last);           /* [n] -> 0-d */
  uj_io_t bs = uj_reindex(g, s, 1, bshape, 1, &v, 0, none);            /* 0-d -> [n] */
  uj_io_t vs = uj_binary(g, UJ_BINARY_MUL, v, s);                      /* [n] * 0-d */
  uj_io_t mix = uj_binary(g, UJ_BINARY_SUB, es, lastv);                /* 0-d - 0-d */
  CHECK(es >= 0 && lastv >= 0 && bs >= 0 && vs >= 0 && mix >= 0);
  uj_io_t ins[] = {s, v}, outs[] = {es, lastv, bs, vs, mix};
  uj_program_t* p = OR_PROGRAM(g, 2, ins, 0, NULL, 5, outs);
  uj_graph_free(g);
  for (int it = 0; it < 5; it++) {
    int64_t n = harness_int(&st, 1, 7);
    uj_tensor_t ts = or_tensor(UJ_F64, 0, NULL), tv = or_tensor(UJ_F64, 1, &n);
    or_fill_real(&st, &ts, -2, 2);
    or_fill_real(&st, &tv, -2, 2);
    uj_tensor_t o0 = or_tensor(UJ_F64, 0, NULL), o1 = or_tensor(UJ_F64, 0, NULL);
    uj_tensor_t o2 = or_tensor(UJ_F64, 1, &n), o3 = or_tensor(UJ_F64, 1, &n);
    uj_tensor_t o4 = or_tensor(UJ_F64, 0, NULL);
    double sv = or_get(&ts, 0);
    double r0[1] = {exp(sv)}, r1[1] = {or_get(&tv, n - 1)}, r4[1] = {exp(sv) - or_get(&tv, n - 1)};
    double r2[8], r3[8];
    for (int64_t i = 0; i < n; i++) r2[i] = sv, r3[i] = or_get(&tv, i) * sv;
    const uj_tensor_t* in[] = {&ts, &tv};
    uj_tensor_t* out[] = {&o0, &o1, &o2, &o3, &o4};
    const double* refs[] = {r0, r1, r2, r3, r4};
    OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 5, OR_TOL_F64);
    or_tensor_free(&ts);
    or_tensor_free(&tv);
    or_tensor_free(&o0);
    or_tensor_free(&o1);
    or_tensor_free(&o2);
    or_tensor_free(&o3);
    or_tensor_free(&o4);
  }
  uj_program_free(p);
}

/* ---- reindex index arithmetic ------------------------------------------------------------- */

/* out[i] = x[index(i)] for several index expressions over a vector, with
 * out-of-range reads giving 0: floor modulo (a roll by 2), floor division of
 * a negative value (reads x[-1] = 0 at i = 0), a leading minus (reverse),
 * min/max clamping, a $param shift, and a larger output (zero tail). */
TEST(reindex_index_arithmetic) {
  HARNESS_SEED(261);
  uint64_t st = 261;
  static const char* const ix[] = {"(i0-2)%dA0", "(i0-1)/2", "-i0+dA0-1", "min(max(i0-1, 0), dA0-1)",
                                   "i0+$s",      "i0",       "i0 - 2*(i0/2) + (i0 % 3) * 0"};
  static const char* const sh[] = {"dA0", "dA0", "dA0", "dA0", "dA0", "dA0+3", "dA0"};
  const int nix = 7;
  static const char* const params[] = {"$s"};
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_I32);
  uj_io_t outs[7];
  for (int k = 0; k < nix; k++) {
    outs[k] = uj_reindex(g, x, 1, &sh[k], 1, &x, 1, &ix[k]);
    CHECK(outs[k] >= 0);
  }
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 1, params, nix, outs);
  uj_graph_free(g);
  for (int it = 0; it < 8; it++) {
    int64_t n = harness_int(&st, 1, 7), shift = harness_int(&st, -3, 3);
    uj_tensor_t tx = or_tensor(UJ_I32, 1, &n);
    or_fill_int(&st, &tx, 1, 1000); /* nonzero, so a read of 0 means out of range */
    uj_tensor_t t[7];
    double* r[7];
    for (int k = 0; k < nix; k++) {
      int64_t m = k == 5 ? n + 3 : n;
      t[k] = or_tensor(UJ_I32, 1, &m);
      r[k] = or_alloc_ref(m);
      for (int64_t i = 0; i < m; i++) {
        int64_t j = 0;
        switch (k) {
          case 0: j = or_floormod(i - 2, n); break;
          case 1: j = or_floordiv(i - 1, 2); break;
          case 2: j = n - 1 - i; break;
          case 3: j = i - 1 < 0 ? 0 : i - 1 > n - 1 ? n - 1 : i - 1; break;
          case 4: j = i + shift; break;
          case 5: j = i; break;
          case 6: j = i - 2 * or_floordiv(i, 2); break;
        }
        r[k][i] = j >= 0 && j < n ? or_get(&tx, j) : 0;
      }
    }
    const uj_tensor_t* in[] = {&tx};
    uj_tensor_t* out[] = {&t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6]};
    const double* refs[] = {r[0], r[1], r[2], r[3], r[4], r[5], r[6]};
    int64_t pv[1] = {shift};
    OR_RUN_CHECK(p, in, 1, pv, 1, out, refs, nix, 0);
    for (int k = 0; k < nix; k++) or_tensor_free(&t[k]), free(r[k]);
    or_tensor_free(&tx);
  }
  uj_program_free(p);
}

/* Transpose of a matrix and a permutation of a 4-D tensor. */
TEST(reindex_transpose) {
  HARNESS_SEED(262);
  uint64_t st = 262;
  static const char* const sh2[] = {"dA1", "dA0"}, *ix2[] = {"i1", "i0"};
  static const char* const sh4[] = {"dA2", "dA0", "dA3", "dA1"}, *ix4[] = {"i1", "i3", "i0", "i2"};
  uj_graph_t* g = uj_graph_new();
  uj_io_t a = uj_input(g, 2, UJ_F32), b = uj_input(g, 4, UJ_F32);
  uj_io_t at = uj_reindex(g, a, 2, sh2, 1, &a, 2, ix2);
  uj_io_t bt = uj_reindex(g, b, 4, sh4, 1, &b, 4, ix4);
  uj_io_t ins[] = {a, b}, outs[] = {at, bt};
  uj_program_t* p = OR_PROGRAM(g, 2, ins, 0, NULL, 2, outs);
  uj_graph_free(g);
  for (int it = 0; it < 8; it++) {
    int64_t ad[2], bd[4];
    or_rand_shape(&st, 2, 2, 7, ad);
    or_rand_shape(&st, 4, 4, 4, bd);
    int64_t atd[2] = {ad[1], ad[0]}, btd[4] = {bd[2], bd[0], bd[3], bd[1]};
    uj_tensor_t ta = or_tensor(UJ_F32, 2, ad), tb = or_tensor(UJ_F32, 4, bd);
    uj_tensor_t ta2 = or_tensor(UJ_F32, 2, atd), tb2 = or_tensor(UJ_F32, 4, btd);
    or_fill_real(&st, &ta, -1, 1);
    or_fill_real(&st, &tb, -1, 1);
    double* ra = or_alloc_ref(or_tnumel(&ta));
    double* rb = or_alloc_ref(or_tnumel(&tb));
    for (int64_t f = 0; f < or_tnumel(&ta2); f++) {
      int64_t o[2];
      or_unravel(f, 2, atd, o);
      int64_t s[2] = {o[1], o[0]};
      ra[f] = or_get(&ta, or_ravel(2, ad, s));
    }
    for (int64_t f = 0; f < or_tnumel(&tb2); f++) {
      int64_t o[4];
      or_unravel(f, 4, btd, o);
      int64_t s[4] = {o[1], o[3], o[0], o[2]};
      rb[f] = or_get(&tb, or_ravel(4, bd, s));
    }
    const uj_tensor_t* in[] = {&ta, &tb};
    uj_tensor_t* out[] = {&ta2, &tb2};
    const double* refs[] = {ra, rb};
    OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 2, 0);
    free(ra);
    free(rb);
    or_tensor_free(&ta);
    or_tensor_free(&tb);
    or_tensor_free(&ta2);
    or_tensor_free(&tb2);
  }
  uj_program_free(p);
}

/* where with a 0-d condition (an input) and full a, b. */
TEST(where_scalar_condition) {
  HARNESS_SEED(242);
  uint64_t st = 242;
  uj_graph_t* g = uj_graph_new();
  uj_io_t c = uj_input(g, 0, UJ_F32), a = uj_input(g, 2, UJ_F32), b = uj_input(g, 2, UJ_F32);
  uj_io_t y = uj_where(g, c, a, b);
  CHECK(y >= 0);
  uj_io_t ins[] = {c, a, b};
  uj_program_t* p = OR_PROGRAM(g, 3, ins, 0, NULL, 1, &y);
  uj_graph_free(g);
  for (int it = 0; it < 4; it++) {
    int64_t d[2] = {harness_int(&st, 1, 5), harness_int(&st, 1, 5)};
    uj_tensor_t tc = or_tensor(UJ_F32, 0, NULL), ta = or_tensor(UJ_F32, 2, d), tb = or_tensor(UJ_F32, 2, d);
    uj_tensor_t ty = or_tensor(UJ_F32, 2, d);
    or_set(&tc, 0, it & 1 ? 0.0 : -0.5); /* any nonzero is true */
    or_fill_real(&st, &ta, -1, 1);
    or_fill_real(&st, &tb, -1, 1);
    double* ref = or_to_double(it & 1 ? &tb : &ta);
    const uj_tensor_t* in[] = {&tc, &ta, &tb};
    uj_tensor_t* out[] = {&ty};
    const double* refs[] = {ref};
    OR_RUN_CHECK(p, in, 3, NULL, 0, out, refs, 1, 0);
    free(ref);
    or_tensor_free(&tc);
    or_tensor_free(&ta);
    or_tensor_free(&tb);
    or_tensor_free(&ty);
  }
  uj_program_free(p);
}

TEST_MAIN()
