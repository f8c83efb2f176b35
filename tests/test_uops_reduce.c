/* tests/test_uops_reduce.c: oracle tests of reductions and of the
 * compositions built on them, against naive loops in double, on the
 * interpreter, on AUTO and on the emitted IR with the passes off: sum, prod,
 * max, min, mean over random axis sets (negative and unordered axes too) in
 * f32, f64 and i32 (mean with floor division), max/min ignoring NaN,
 * argmax/argmin (first flat index over the reduced axes, ties, rows of
 * infinities), matmul as reindex-broadcast + mul + reduce, a broadcast row
 * add, softmax over the last axis, a layer-norm style chain, and gather with
 * uj_select (out-of-range and negative indices give 0). Shapes are random
 * (fixed seeds). */
#include "oracle.h"

static const char* reduce_name(uj_reduce_op_t op) {
  static const char* n[] = {"sum", "prod", "max", "min", "mean", "argmax", "argmin"};
  return (int)op >= 0 && (int)op < 7 ? n[op] : "?";
}

/* The reference reduction of x over the axes flagged in red[]; out has x's
 * shape with those axes set to 1. */
static void ref_reduce(uj_reduce_op_t op, const uj_tensor_t* x, const int* red, double* out) {
  int r = x->ndim;
  int64_t odims[UJ_MAX_DIMS], rdims[UJ_MAX_DIMS];
  int nr = 0;
  for (int k = 0; k < r; k++) {
    odims[k] = red[k] ? 1 : x->dims[k];
    if (red[k]) rdims[nr++] = x->dims[k];
  }
  int64_t no = or_numel(r, odims), n = or_tnumel(x), count = n / (no ? no : 1);
  double* best = or_alloc_ref(no);
  int64_t* seen = calloc((size_t)no, sizeof(int64_t));
  for (int64_t o = 0; o < no; o++) {
    switch (op) {
      case UJ_REDUCE_PROD: out[o] = 1; break;
      case UJ_REDUCE_MAX: out[o] = -INFINITY; break;
      case UJ_REDUCE_MIN: out[o] = INFINITY; break;
      default: out[o] = 0; break;
    }
  }
  for (int64_t f = 0; f < n; f++) {
    int64_t idx[UJ_MAX_DIMS], ridx[UJ_MAX_DIMS];
    or_unravel(f, r, x->dims, idx);
    int q = 0;
    for (int k = 0; k < r; k++)
      if (red[k]) ridx[q++] = idx[k], idx[k] = 0;
    int64_t o = or_ravel(r, odims, idx);
    double v = or_get(x, f);
    switch (op) {
      case UJ_REDUCE_SUM:
      case UJ_REDUCE_MEAN: out[o] += v; break;
      case UJ_REDUCE_PROD: out[o] *= v; break;
      case UJ_REDUCE_MAX: out[o] = v > out[o] ? v : out[o]; break;
      case UJ_REDUCE_MIN: out[o] = v < out[o] ? v : out[o]; break;
      case UJ_REDUCE_ARGMAX:
      case UJ_REDUCE_ARGMIN:
        if (!seen[o] || (op == UJ_REDUCE_ARGMAX ? v > best[o] : v < best[o])) {
          seen[o] = 1;
          best[o] = v;
          out[o] = (double)or_ravel(nr, rdims, ridx);
        }
        break;
    }
  }
  if (op == UJ_REDUCE_MEAN)
    for (int64_t o = 0; o < no; o++)
      out[o] = x->dtype == UJ_I32 ? (double)or_floordiv((int64_t)out[o], count) : out[o] / (double)count;
  free(best);
  free(seen);
}

/* One random reduction: rank 1..4, a random non-empty axis set passed in
 * random order and sign (arg ops: ascending order). */
static void reduce_case(uj_reduce_op_t op, uj_dtype_t dt, uint64_t* st) {
  int arg = op == UJ_REDUCE_ARGMAX || op == UJ_REDUCE_ARGMIN;
  int dmax = dt == UJ_I32 && op == UJ_REDUCE_PROD ? 3 : 5;
  int64_t dims[UJ_MAX_DIMS];
  int r = or_rand_shape(st, 1, 4, dmax, dims);
  int red[UJ_MAX_DIMS] = {0}, axes[UJ_MAX_DIMS], na = 0;
  while (na == 0)
    for (int k = 0; k < r; k++) red[k] = (int)harness_int(st, 0, 1), na += red[k];
  na = 0;
  for (int k = 0; k < r; k++)
    if (red[k]) axes[na++] = harness_int(st, 0, 1) ? k - r : k;
  if (!arg)
    for (int k = na - 1; k > 0; k--) {
      int j = (int)harness_int(st, 0, k), t = axes[k];
      axes[k] = axes[j], axes[j] = t;
    }
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, r, dt);
  uj_io_t y = uj_reduce(g, op, na, axes, x);
  CHECK(y >= 0);
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &y);
  uj_graph_free(g);
  int64_t odims[UJ_MAX_DIMS];
  for (int k = 0; k < r; k++) odims[k] = red[k] ? 1 : dims[k];
  uj_tensor_t tx = or_tensor(dt, r, dims), ty = or_tensor(arg ? UJ_I32 : dt, r, odims);
  if (arg)
    or_fill_int(st, &tx, -2, 2); /* ties */
  else if (op == UJ_REDUCE_PROD && dt == UJ_I32)
    or_fill_int(st, &tx, -2, 2);
  else if (op == UJ_REDUCE_PROD)
    or_fill_real(st, &tx, 0.8, 1.25);
  else if (dt == UJ_I32)
    or_fill_int(st, &tx, -1000, 1000);
  else
    or_fill_real(st, &tx, -3, 3);
  int64_t no = or_tnumel(&ty);
  double* ref = or_alloc_ref(no);
  ref_reduce(op, &tx, red, ref);
  /* Floats: the length-aware bound. A sum of n terms in another order than
   * the reference's is off by at most gamma_n * sum|terms| (a mean: that
   * over n), a product by gamma_n * |product|; max and min are exact. The
   * fixed part, tol, covers the final rounding. */
  double* sum_abs = or_alloc_ref(no);
  int64_t terms = 1;
  for (int k = 0; k < r; k++)
    if (red[k]) terms *= dims[k];
  if (op == UJ_REDUCE_SUM || op == UJ_REDUCE_MEAN) {
    uj_tensor_t ax = or_tensor(dt, r, dims);
    for (int64_t i = 0; i < or_tnumel(&tx); i++) or_set(&ax, i, fabs(or_get(&tx, i)));
    ref_reduce(op, &ax, red, sum_abs);
    or_tensor_free(&ax);
  } else if (op == UJ_REDUCE_PROD) {
    for (int64_t o = 0; o < no; o++) sum_abs[o] = fabs(ref[o]);
  }
  double tol = arg || dt == UJ_I32 ? 0 : dt == UJ_F32 ? OR_TOL_F32 : OR_TOL_F64;
  const uj_tensor_t* in[] = {&tx};
  uj_tensor_t* outs[] = {&ty};
  const double* refs[] = {ref};
  const double* sums[] = {sum_abs};
  int bounded = !arg && dt != UJ_I32;
  if (bounded ? OR_RUN_CHECK_SUM(p, in, 1, NULL, 0, outs, refs, sums, &terms, 1, tol)
              : OR_RUN_CHECK1(p, &tx, &ty, ref, tol)) {
    fprintf(stderr, "  (%s %s rank %d dims", reduce_name(op), uj_dtype_name(dt), r);
    for (int k = 0; k < r; k++) fprintf(stderr, " %lld", (long long)dims[k]);
    fprintf(stderr, " axes");
    for (int k = 0; k < na; k++) fprintf(stderr, " %d", axes[k]);
    fprintf(stderr, ")\n");
  }
  free(ref);
  free(sum_abs);
  or_tensor_free(&tx);
  or_tensor_free(&ty);
  uj_program_free(p);
}

TEST(reduce_f32) {
  HARNESS_SEED(301);
  uint64_t st = 301;
  for (int op = UJ_REDUCE_SUM; op <= UJ_REDUCE_MEAN; op++)
    for (int it = 0; it < 8 && !harness_failed_checks; it++) reduce_case((uj_reduce_op_t)op, UJ_F32, &st);
}
TEST(reduce_f64) {
  HARNESS_SEED(302);
  uint64_t st = 302;
  for (int op = UJ_REDUCE_SUM; op <= UJ_REDUCE_MEAN; op++)
    for (int it = 0; it < 8 && !harness_failed_checks; it++) reduce_case((uj_reduce_op_t)op, UJ_F64, &st);
}
TEST(reduce_i32) {
  HARNESS_SEED(303);
  uint64_t st = 303;
  for (int op = UJ_REDUCE_SUM; op <= UJ_REDUCE_MEAN; op++)
    for (int it = 0; it < 8 && !harness_failed_checks; it++) reduce_case((uj_reduce_op_t)op, UJ_I32, &st);
}
TEST(argmax_argmin_random) {
  HARNESS_SEED(304);
  uint64_t st = 304;
  for (int d = UJ_F32; d <= UJ_I32; d++)
    for (int op = UJ_REDUCE_ARGMAX; op <= UJ_REDUCE_ARGMIN; op++)
      for (int it = 0; it < 8 && !harness_failed_checks; it++)
        reduce_case((uj_reduce_op_t)op, (uj_dtype_t)d, &st);
}

/* Hand-checked: ties resolve to the first index; over two axes the result
 * is the flat index over both. */
TEST(argmax_argmin_fixed) {
  static const float xv[] = {1, 3, 3, 2, 2, 0};
  int64_t dims[2] = {2, 3};
  int ax1[] = {1}, ax01[] = {0, 1};
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 2, UJ_F32);
  uj_io_t outs[] = {uj_reduce(g, UJ_REDUCE_ARGMAX, 1, ax1, x), uj_reduce(g, UJ_REDUCE_ARGMIN, 1, ax1, x),
                    uj_reduce(g, UJ_REDUCE_ARGMAX, 2, ax01, x), uj_reduce(g, UJ_REDUCE_ARGMIN, 2, ax01, x)};
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 4, outs);
  uj_graph_free(g);
  uj_tensor_t tx = or_tensor(UJ_F32, 2, dims);
  memcpy(tx.data, xv, sizeof xv);
  int64_t d21[2] = {2, 1}, d11[2] = {1, 1};
  uj_tensor_t t0 = or_tensor(UJ_I32, 2, d21), t1 = or_tensor(UJ_I32, 2, d21);
  uj_tensor_t t2 = or_tensor(UJ_I32, 2, d11), t3 = or_tensor(UJ_I32, 2, d11);
  double r0[] = {1, 0}, r1[] = {0, 2}, r2[] = {1}, r3[] = {5};
  const uj_tensor_t* in[] = {&tx};
  uj_tensor_t* out[] = {&t0, &t1, &t2, &t3};
  const double* refs[] = {r0, r1, r2, r3};
  OR_RUN_CHECK(p, in, 1, NULL, 0, out, refs, 4, 0);
  or_tensor_free(&tx);
  or_tensor_free(&t0);
  or_tensor_free(&t1);
  or_tensor_free(&t2);
  or_tensor_free(&t3);
  uj_program_free(p);
}

/* Rows made only of the reduction's identity still give the first index:
 * argmax of all -inf and argmin of all +inf are 0; a later strict winner
 * moves it. */
TEST(argmax_argmin_infinities) {
  static const double xv[] = {-INFINITY, -INFINITY, -INFINITY, INFINITY, INFINITY, INFINITY,
                              -INFINITY, -INFINITY, 5.0, INFINITY, -1.0, -1.0};
  int64_t dims[2] = {4, 3}, rd[2] = {4, 1};
  int ax[] = {1};
  for (int d = 0; d < 2; d++) {
    uj_dtype_t dt = d ? UJ_F64 : UJ_F32;
    uj_graph_t* g = uj_graph_new();
    uj_io_t x = uj_input(g, 2, dt);
    uj_io_t outs[] = {uj_reduce(g, UJ_REDUCE_ARGMAX, 1, ax, x), uj_reduce(g, UJ_REDUCE_ARGMIN, 1, ax, x)};
    uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 2, outs);
    uj_graph_free(g);
    if (!p) continue;
    uj_tensor_t tx = or_tensor(dt, 2, dims), t0 = or_tensor(UJ_I32, 2, rd), t1 = or_tensor(UJ_I32, 2, rd);
    for (int i = 0; i < 12; i++) or_set(&tx, i, xv[i]);
    double r0[] = {0, 0, 2, 0}, r1[] = {0, 0, 0, 1};
    const uj_tensor_t* in[] = {&tx};
    uj_tensor_t* out[] = {&t0, &t1};
    const double* refs[] = {r0, r1};
    if (OR_RUN_CHECK(p, in, 1, NULL, 0, out, refs, 2, 0)) fprintf(stderr, "  (%s)\n", uj_dtype_name(dt));
    or_tensor_free(&tx);
    or_tensor_free(&t0);
    or_tensor_free(&t1);
    uj_program_free(p);
  }
}

/* The max and min reductions ignore NaN, like a fold with fmax/fmin: rows
 * with NaN first, in the middle and last, reduced along the last axis and
 * over both axes; sum still propagates it. */
TEST(reduce_max_min_nan) {
  static const double xv[] = {NAN, 1.0, -2.0, 4.0, -1.0, NAN, 7.0, 0.5, 2.0, -3.0, 6.0, NAN};
  int64_t dims[2] = {3, 4}, rd[2] = {3, 1}, one[2] = {1, 1};
  int ax1[] = {-1}, ax01[] = {0, 1};
  for (int d = 0; d < 2; d++) {
    uj_dtype_t dt = d ? UJ_F64 : UJ_F32;
    uj_graph_t* g = uj_graph_new();
    uj_io_t x = uj_input(g, 2, dt);
    uj_io_t outs[] = {uj_reduce(g, UJ_REDUCE_MAX, 1, ax1, x), uj_reduce(g, UJ_REDUCE_MIN, 1, ax1, x),
                      uj_reduce(g, UJ_REDUCE_MAX, 2, ax01, x), uj_reduce(g, UJ_REDUCE_MIN, 2, ax01, x),
                      uj_reduce(g, UJ_REDUCE_SUM, 1, ax1, x)};
    uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 5, outs);
    uj_graph_free(g);
    if (!p) continue;
    uj_tensor_t tx = or_tensor(dt, 2, dims);
    for (int i = 0; i < 12; i++) or_set(&tx, i, xv[i]);
    uj_tensor_t t0 = or_tensor(dt, 2, rd), t1 = or_tensor(dt, 2, rd), t4 = or_tensor(dt, 2, rd);
    uj_tensor_t t2 = or_tensor(dt, 2, one), t3 = or_tensor(dt, 2, one);
    double r0[] = {4, 7, 6}, r1[] = {-2, -1, -3}, r2[] = {7}, r3[] = {-3}, r4[] = {NAN, NAN, NAN};
    const uj_tensor_t* in[] = {&tx};
    uj_tensor_t* out[] = {&t0, &t1, &t2, &t3, &t4};
    const double* refs[] = {r0, r1, r2, r3, r4};
    if (OR_RUN_CHECK(p, in, 1, NULL, 0, out, refs, 5, 0)) fprintf(stderr, "  (%s)\n", uj_dtype_name(dt));
    or_tensor_free(&tx);
    or_tensor_free(&t0);
    or_tensor_free(&t1);
    or_tensor_free(&t2);
    or_tensor_free(&t3);
    or_tensor_free(&t4);
    uj_program_free(p);
  }
}

/* i32 mean rounds toward negative infinity: mean(-7, 0) = -4. */
TEST(mean_i32_floor) {
  static const int32_t xv[] = {-7, 0, 7, 0, -1, 0, 5, 4, -3, -3};
  int64_t dims[2] = {5, 2};
  int ax[] = {-1};
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 2, UJ_I32);
  uj_io_t y = uj_reduce(g, UJ_REDUCE_MEAN, 1, ax, x);
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &y);
  uj_graph_free(g);
  uj_tensor_t tx = or_tensor(UJ_I32, 2, dims);
  memcpy(tx.data, xv, sizeof xv);
  int64_t od[2] = {5, 1};
  uj_tensor_t ty = or_tensor(UJ_I32, 2, od);
  double ref[] = {-4, 3, -1, 4, -3};
  OR_RUN_CHECK1(p, &tx, &ty, ref, 0);
  or_tensor_free(&tx);
  or_tensor_free(&ty);
  uj_program_free(p);
}

/* ---- compositions ----------------------------------------------------------------------- */

/* C[M,N] = A[M,K] B[K,N]: both broadcast to [M,N,K] (K tied by [=]), multiplied,
 * summed over axis 2 and reindexed to 2-D. */
TEST(matmul) {
  HARNESS_SEED(311);
  uint64_t st = 311;
  static const char* const shape[] = {"dA0", "dB1", "dA1[=dB0]"};
  static const char* const ia[] = {"i0", "i2"}, *ib[] = {"i2", "i1"};
  static const char* const s2[] = {"dA0", "dA1"}, *i2[] = {"i0", "i1", "0"};
  for (int d = 0; d < 2; d++) {
    uj_dtype_t dt = d ? UJ_F64 : UJ_F32;
    uj_graph_t* g = uj_graph_new();
    uj_io_t a = uj_input(g, 2, dt), b = uj_input(g, 2, dt);
    uj_io_t ss[] = {a, b};
    uj_io_t ar = uj_reindex(g, a, 3, shape, 2, ss, 2, ia);
    uj_io_t br = uj_reindex(g, b, 3, shape, 2, ss, 2, ib);
    int ax[] = {2};
    uj_io_t s = uj_reduce(g, UJ_REDUCE_SUM, 1, ax, uj_binary(g, UJ_BINARY_MUL, ar, br));
    uj_io_t c = uj_reindex(g, s, 2, s2, 1, &s, 3, i2);
    CHECK(c >= 0);
    uj_io_t ins[] = {a, b};
    uj_program_t* p = OR_PROGRAM(g, 2, ins, 0, NULL, 1, &c);
    uj_graph_free(g);
    for (int it = 0; it < 10; it++) {
      int64_t M = harness_int(&st, 1, 7), N = harness_int(&st, 1, 7), K = harness_int(&st, 1, 7);
      int64_t ad[2] = {M, K}, bd[2] = {K, N}, cd[2] = {M, N};
      uj_tensor_t ta = or_tensor(dt, 2, ad), tb = or_tensor(dt, 2, bd), tc = or_tensor(dt, 2, cd);
      or_fill_real(&st, &ta, -1, 1);
      or_fill_real(&st, &tb, -1, 1);
      double* ref = or_alloc_ref(M * N);
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++)
          for (int64_t k = 0; k < K; k++) ref[i * N + j] += or_get(&ta, i * K + k) * or_get(&tb, k * N + j);
      /* a sum of K products: each rounds once more than a plain term */
      double* sum_abs = or_alloc_ref(M * N);
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++)
          for (int64_t k = 0; k < K; k++) sum_abs[i * N + j] += fabs(or_get(&ta, i * K + k) * or_get(&tb, k * N + j));
      const uj_tensor_t* in[] = {&ta, &tb};
      uj_tensor_t* out[] = {&tc};
      const double* refs[] = {ref};
      const double* sums[] = {sum_abs};
      int64_t terms = K + 1;
      OR_RUN_CHECK_SUM(p, in, 2, NULL, 0, out, refs, sums, &terms, 1, d ? OR_TOL_F64 : OR_TOL_F32);
      free(ref);
      free(sum_abs);
      or_tensor_free(&ta);
      or_tensor_free(&tb);
      or_tensor_free(&tc);
    }
    uj_program_free(p);
  }
}

/* The header's example: y = relu(x + b) with b a row vector broadcast by reindex. */
TEST(broadcast_row_add_relu) {
  HARNESS_SEED(312);
  uint64_t st = 312;
  static const char* const shape[] = {"dA0", "dA1"}, *index[] = {"i1"};
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 2, UJ_F32), b = uj_input(g, 1, UJ_F32);
  uj_io_t bb = uj_reindex(g, b, 2, shape, 1, &x, 1, index);
  uj_io_t y = uj_binary(g, UJ_BINARY_MAX, uj_binary(g, UJ_BINARY_ADD, x, bb), uj_const(g, 0.0));
  CHECK(y >= 0);
  uj_io_t ins[] = {x, b};
  uj_program_t* p = OR_PROGRAM(g, 2, ins, 0, NULL, 1, &y);
  uj_graph_free(g);
  for (int it = 0; it < 10; it++) {
    int64_t n = harness_int(&st, 1, 7), m = harness_int(&st, 1, 7);
    int64_t xd[2] = {n, m};
    uj_tensor_t tx = or_tensor(UJ_F32, 2, xd), tb = or_tensor(UJ_F32, 1, &m), ty = or_tensor(UJ_F32, 2, xd);
    or_fill_real(&st, &tx, -2, 2);
    or_fill_real(&st, &tb, -2, 2);
    double* ref = or_alloc_ref(n * m);
    for (int64_t i = 0; i < n * m; i++) {
      double v = or_get(&tx, i) + or_get(&tb, i % m);
      ref[i] = v > 0 ? v : 0;
    }
    const uj_tensor_t* in[] = {&tx, &tb};
    uj_tensor_t* out[] = {&ty};
    const double* refs[] = {ref};
    OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 1, OR_TOL_F32);
    free(ref);
    or_tensor_free(&tx);
    or_tensor_free(&tb);
    or_tensor_free(&ty);
  }
  uj_program_free(p);
}

/* softmax over the last axis: x - max, exp, / sum, with the [n,1]
 * reductions broadcast back to [n,m] by reindex {"i0", "0"}. */
TEST(softmax_last_axis) {
  HARNESS_SEED(313);
  uint64_t st = 313;
  static const char* const shape[] = {"dA0", "dA1"}, *index[] = {"i0", "0"};
  for (int d = 0; d < 2; d++) {
    uj_dtype_t dt = d ? UJ_F64 : UJ_F32;
    uj_graph_t* g = uj_graph_new();
    uj_io_t x = uj_input(g, 2, dt);
    int ax[] = {1};
    uj_io_t mx = uj_reduce(g, UJ_REDUCE_MAX, 1, ax, x);
    uj_io_t mb = uj_reindex(g, mx, 2, shape, 1, &x, 2, index);
    uj_io_t e = uj_unary(g, UJ_UNARY_EXP, uj_binary(g, UJ_BINARY_SUB, x, mb));
    uj_io_t s = uj_reduce(g, UJ_REDUCE_SUM, 1, ax, e);
    uj_io_t sb = uj_reindex(g, s, 2, shape, 1, &x, 2, index);
    uj_io_t y = uj_binary(g, UJ_BINARY_DIV, e, sb);
    CHECK(y >= 0);
    uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &y);
    uj_graph_free(g);
    for (int it = 0; it < 10; it++) {
      int64_t xd[2] = {harness_int(&st, 1, 7), harness_int(&st, 1, 7)};
      uj_tensor_t tx = or_tensor(dt, 2, xd), ty = or_tensor(dt, 2, xd);
      or_fill_real(&st, &tx, -30, 30); /* large values: the max subtraction matters */
      double* ref = or_alloc_ref(xd[0] * xd[1]);
      for (int64_t i = 0; i < xd[0]; i++) {
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < xd[1]; j++) m = fmax(m, or_get(&tx, i * xd[1] + j));
        for (int64_t j = 0; j < xd[1]; j++) sum += exp(or_get(&tx, i * xd[1] + j) - m);
        for (int64_t j = 0; j < xd[1]; j++) ref[i * xd[1] + j] = exp(or_get(&tx, i * xd[1] + j) - m) / sum;
      }
      OR_RUN_CHECK1(p, &tx, &ty, ref, d ? OR_TOL_F64 : OR_TOL_F32);
      free(ref);
      or_tensor_free(&tx);
      or_tensor_free(&ty);
    }
    uj_program_free(p);
  }
}

/* Layer-norm style: y = (x - mean) * rsqrt(mean((x - mean)^2) + eps), rows of
 * a [n,m] matrix, f64. Two reductions, each broadcast back. */
TEST(layernorm_chain) {
  HARNESS_SEED(314);
  uint64_t st = 314;
  static const char* const shape[] = {"dA0", "dA1"}, *index[] = {"i0", "0"};
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 2, UJ_F64);
  int ax[] = {-1};
  uj_io_t mu = uj_reindex(g, uj_reduce(g, UJ_REDUCE_MEAN, 1, ax, x), 2, shape, 1, &x, 2, index);
  uj_io_t c = uj_binary(g, UJ_BINARY_SUB, x, mu);
  uj_io_t var = uj_reduce(g, UJ_REDUCE_MEAN, 1, ax, uj_binary(g, UJ_BINARY_MUL, c, c));
  uj_io_t inv = uj_unary(g, UJ_UNARY_RSQRT, uj_binary(g, UJ_BINARY_ADD, var, uj_const(g, 0.5)));
  uj_io_t y = uj_binary(g, UJ_BINARY_MUL, c, uj_reindex(g, inv, 2, shape, 1, &x, 2, index));
  CHECK(y >= 0);
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &y);
  uj_graph_free(g);
  for (int it = 0; it < 8; it++) {
    int64_t xd[2] = {harness_int(&st, 1, 7), harness_int(&st, 1, 7)};
    int64_t n = xd[0], m = xd[1];
    uj_tensor_t tx = or_tensor(UJ_F64, 2, xd), ty = or_tensor(UJ_F64, 2, xd);
    or_fill_real(&st, &tx, -3, 3);
    double* ref = or_alloc_ref(n * m);
    for (int64_t i = 0; i < n; i++) {
      double mean = 0, v = 0;
      for (int64_t j = 0; j < m; j++) mean += or_get(&tx, i * m + j);
      mean /= (double)m;
      for (int64_t j = 0; j < m; j++) v += pow(or_get(&tx, i * m + j) - mean, 2);
      v /= (double)m;
      for (int64_t j = 0; j < m; j++) ref[i * m + j] = (or_get(&tx, i * m + j) - mean) / sqrt(v + 0.5);
    }
    OR_RUN_CHECK1(p, &tx, &ty, ref, 1e-11);
    free(ref);
    or_tensor_free(&tx);
    or_tensor_free(&ty);
  }
  uj_program_free(p);
}

/* Gather with uj_select: axis 1 of [n,m] with an [n,1] index, and axis 0 of
 * a 3-D tensor with a [1,b,c] index; indices out of range (negative or >= the
 * axis size) give 0. */
TEST(select_gather) {
  HARNESS_SEED(315);
  uint64_t st = 315;
  for (int d = 0; d < 3; d++) {
    uj_dtype_t dt = (uj_dtype_t)d;
    uj_graph_t* g = uj_graph_new();
    uj_io_t x2 = uj_input(g, 2, dt), i2 = uj_input(g, 2, UJ_I32);
    uj_io_t x3 = uj_input(g, 3, dt), i3 = uj_input(g, 3, UJ_I32);
    uj_io_t g2 = uj_select(g, 1, x2, i2), g3 = uj_select(g, 0, x3, i3);
    CHECK(g2 >= 0 && g3 >= 0);
    uj_io_t ins[] = {x2, i2, x3, i3}, outs[] = {g2, g3};
    uj_program_t* p = OR_PROGRAM(g, 4, ins, 0, NULL, 2, outs);
    uj_graph_free(g);
    for (int it = 0; it < 8; it++) {
      int64_t n = harness_int(&st, 1, 7), m = harness_int(&st, 1, 7);
      int64_t a = harness_int(&st, 1, 5), b = harness_int(&st, 1, 5), c = harness_int(&st, 1, 5);
      int64_t xd2[2] = {n, m}, id2[2] = {n, 1}, xd3[3] = {a, b, c}, id3[3] = {1, b, c};
      uj_tensor_t tx2 = or_tensor(dt, 2, xd2), ti2 = or_tensor(UJ_I32, 2, id2);
      uj_tensor_t tx3 = or_tensor(dt, 3, xd3), ti3 = or_tensor(UJ_I32, 3, id3);
      uj_tensor_t to2 = or_tensor(dt, 2, id2), to3 = or_tensor(dt, 3, id3);
      or_fill_int(&st, &tx2, 1, 99); /* nonzero, so 0 means out of range */
      or_fill_int(&st, &tx3, 1, 99);
      or_fill_int(&st, &ti2, -2, m + 1);
      or_fill_int(&st, &ti3, -2, a + 1);
      double* r2 = or_alloc_ref(n);
      double* r3 = or_alloc_ref(b * c);
      for (int64_t i = 0; i < n; i++) {
        int64_t j = (int64_t)or_get(&ti2, i);
        r2[i] = j >= 0 && j < m ? or_get(&tx2, i * m + j) : 0;
      }
      for (int64_t f = 0; f < b * c; f++) {
        int64_t j = (int64_t)or_get(&ti3, f);
        r3[f] = j >= 0 && j < a ? or_get(&tx3, j * b * c + f) : 0;
      }
      const uj_tensor_t* in[] = {&tx2, &ti2, &tx3, &ti3};
      uj_tensor_t* out[] = {&to2, &to3};
      const double* refs[] = {r2, r3};
      OR_RUN_CHECK(p, in, 4, NULL, 0, out, refs, 2, 0);
      free(r2);
      free(r3);
      or_tensor_free(&tx2);
      or_tensor_free(&ti2);
      or_tensor_free(&tx3);
      or_tensor_free(&ti3);
      or_tensor_free(&to2);
      or_tensor_free(&to3);
    }
    uj_program_free(p);
  }
}

/* Two outputs of different shapes from one program: x + y and the sum of
 * x*x over every axis (a [1,1,1] tensor). */
TEST(two_outputs_elementwise_and_reduction) {
  HARNESS_SEED(316);
  uint64_t st = 316;
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 3, UJ_F64), y = uj_input(g, 3, UJ_F64);
  int ax[] = {0, 1, 2};
  uj_io_t o1 = uj_binary(g, UJ_BINARY_ADD, x, y);
  uj_io_t o2 = uj_reduce(g, UJ_REDUCE_SUM, 3, ax, uj_binary(g, UJ_BINARY_MUL, x, x));
  uj_io_t ins[] = {x, y}, outs[] = {o1, o2};
  uj_program_t* p = OR_PROGRAM(g, 2, ins, 0, NULL, 2, outs);
  uj_graph_free(g);
  for (int it = 0; it < 6; it++) {
    int64_t dims[3], one[3] = {1, 1, 1};
    or_rand_shape(&st, 3, 3, 5, dims);
    uj_tensor_t tx = or_tensor(UJ_F64, 3, dims), ty = or_tensor(UJ_F64, 3, dims);
    uj_tensor_t t1 = or_tensor(UJ_F64, 3, dims), t2 = or_tensor(UJ_F64, 3, one);
    or_fill_real(&st, &tx, -2, 2);
    or_fill_real(&st, &ty, -2, 2);
    int64_t n = or_tnumel(&tx);
    double* r1 = or_alloc_ref(n);
    double r2[1] = {0};
    for (int64_t i = 0; i < n; i++) {
      r1[i] = or_get(&tx, i) + or_get(&ty, i);
      r2[0] += or_get(&tx, i) * or_get(&tx, i);
    }
    const uj_tensor_t* in[] = {&tx, &ty};
    uj_tensor_t* out[] = {&t1, &t2};
    const double* refs[] = {r1, r2};
    OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 2, OR_TOL_F64);
    free(r1);
    or_tensor_free(&tx);
    or_tensor_free(&ty);
    or_tensor_free(&t1);
    or_tensor_free(&t2);
  }
  uj_program_free(p);
}

TEST_MAIN()
