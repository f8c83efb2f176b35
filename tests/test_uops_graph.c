/* tests/test_uops_graph.c: oracle tests of how uops combine into programs,
 * against naive loops in double, on the interpreter, on AUTO and on the
 * emitted IR with the passes off: diamonds and shared subgraphs, several
 * outputs, an output that is an input (a copy), the same node listed as two
 * outputs, an input listed but not needed, nodes the outputs do not need,
 * consumers that read a producer at another index, consumers of reads out of
 * range (which see 0), a graph reused after a program was made from it,
 * rank-8 tensors, and tensors with a zero-size axis. Shapes are random
 * (fixed seeds). */
#include "oracle.h"

/* ---- graph shapes ------------------------------------------------------------------------ */

/* Diamond (x -> exp, x -> x*x, added), a shared subgraph feeding two outputs
 * (u = sin(x): u + x and u * u), u itself as an output, the user-written
 * sigmoid 1 / (1 + exp(-x)), and an output that is directly an input. */
TEST(graph_diamond_shared_outputs) {
  HARNESS_SEED(271);
  uint64_t st = 271;
  for (int d = 0; d < 2; d++) {
    uj_dtype_t dt = d ? UJ_F64 : UJ_F32;
    uj_graph_t* g = uj_graph_new();
    uj_io_t x = uj_input(g, 2, dt), y = uj_input(g, 2, dt);
    uj_io_t dia = uj_binary(g, UJ_BINARY_ADD, uj_unary(g, UJ_UNARY_EXP, x), uj_binary(g, UJ_BINARY_MUL, x, x));
    uj_io_t u = uj_unary(g, UJ_UNARY_SIN, x);
    uj_io_t o1 = uj_binary(g, UJ_BINARY_ADD, u, y);
    uj_io_t o2 = uj_binary(g, UJ_BINARY_MUL, u, u);
    uj_io_t sg = uj_binary(g, UJ_BINARY_DIV, uj_const(g, 1.0),
                           uj_binary(g, UJ_BINARY_ADD, uj_unary(g, UJ_UNARY_EXP, uj_unary(g, UJ_UNARY_NEG, x)),
                                     uj_const(g, 1.0)));
    uj_io_t ins[] = {x, y}, outs[] = {dia, o1, o2, u, sg, y};
    for (int k = 0; k < 6; k++) CHECK(outs[k] >= 0);
    uj_program_t* p = OR_PROGRAM(g, 2, ins, 0, NULL, 6, outs);
    uj_graph_free(g);
    for (int it = 0; it < 6; it++) {
      int64_t dims[2];
      or_rand_shape(&st, 2, 2, 7, dims);
      uj_tensor_t tx = or_tensor(dt, 2, dims), ty = or_tensor(dt, 2, dims);
      or_fill_real(&st, &tx, -2, 2);
      or_fill_real(&st, &ty, -2, 2);
      int64_t n = or_tnumel(&tx);
      uj_tensor_t t[6];
      double* r[6];
      for (int k = 0; k < 6; k++) t[k] = or_tensor(dt, 2, dims), r[k] = or_alloc_ref(n);
      for (int64_t i = 0; i < n; i++) {
        double v = or_get(&tx, i), w = or_get(&ty, i);
        r[0][i] = exp(v) + v * v;
        r[1][i] = sin(v) + w;
        r[2][i] = sin(v) * sin(v);
        r[3][i] = sin(v);
        r[4][i] = 1.0 / (1.0 + exp(-v));
        r[5][i] = w;
      }
      const uj_tensor_t* in[] = {&tx, &ty};
      uj_tensor_t* out[] = {&t[0], &t[1], &t[2], &t[3], &t[4], &t[5]};
      const double* refs[] = {r[0], r[1], r[2], r[3], r[4], r[5]};
      OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 6, d ? OR_TOL_F64 : OR_TOL_F32);
      for (int k = 0; k < 6; k++) or_tensor_free(&t[k]), free(r[k]);
      or_tensor_free(&tx);
      or_tensor_free(&ty);
    }
    uj_program_free(p);
  }
}

/* The simplest program: its one output is its one input (a copy), i32. */
TEST(graph_output_is_input) {
  HARNESS_SEED(272);
  uint64_t st = 272;
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 3, UJ_I32);
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &x);
  uj_graph_free(g);
  for (int it = 0; it < 5; it++) {
    int64_t dims[3];
    or_rand_shape(&st, 3, 3, 6, dims);
    uj_tensor_t tx = or_tensor(UJ_I32, 3, dims), ty = or_tensor(UJ_I32, 3, dims);
    or_fill_int(&st, &tx, -2147483647 - 1, 2147483647);
    double* ref = or_to_double(&tx);
    OR_RUN_CHECK1(p, &tx, &ty, ref, 0);
    free(ref);
    or_tensor_free(&tx);
    or_tensor_free(&ty);
  }
  uj_program_free(p);
}

/* A graph with more nodes than the program needs: unused branches (one
 * that would fail at run time if it ran: a reindex to a negative size) are
 * not part of the program. */
TEST(graph_unused_nodes_ignored) {
  HARNESS_SEED(273);
  uint64_t st = 273;
  static const char* const sh[] = {"dA0-100"}, *ix[] = {"i0"};
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_F32);
  uj_io_t other = uj_input(g, 1, UJ_F32);
  uj_io_t dead = uj_reindex(g, x, 1, sh, 1, &x, 1, ix);
  uj_io_t dead2 = uj_binary(g, UJ_BINARY_ADD, other, other);
  CHECK(dead >= 0 && dead2 >= 0);
  uj_io_t y = uj_unary(g, UJ_UNARY_ABS, x);
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &y);
  uj_graph_free(g);
  int64_t n = 5;
  uj_tensor_t tx = or_tensor(UJ_F32, 1, &n), ty = or_tensor(UJ_F32, 1, &n);
  or_fill_real(&st, &tx, -3, 3);
  double ref[5];
  for (int i = 0; i < 5; i++) ref[i] = fabs(or_get(&tx, i));
  OR_RUN_CHECK1(p, &tx, &ty, ref, 0);
  or_tensor_free(&tx);
  or_tensor_free(&ty);
  uj_program_free(p);
}

/* A consumer that reads its producer at another index (reversed columns,
 * rows rolled by one) must see the whole producer, not a fused partial:
 * z = e + e[:, ::-1] + e[(i0+1) % n, :] with e = exp(x). */
TEST(graph_read_at_other_index) {
  HARNESS_SEED(274);
  uint64_t st = 274;
  static const char* const sh[] = {"dA0", "dA1"};
  static const char* const rev[] = {"i0", "dA1-1-i1"}, *roll[] = {"(i0+1)%dA0", "i1"};
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 2, UJ_F64);
  uj_io_t e = uj_unary(g, UJ_UNARY_EXP, x);
  uj_io_t er = uj_reindex(g, e, 2, sh, 1, &e, 2, rev);
  uj_io_t eo = uj_reindex(g, e, 2, sh, 1, &e, 2, roll);
  uj_io_t z = uj_binary(g, UJ_BINARY_ADD, uj_binary(g, UJ_BINARY_ADD, e, er), eo);
  CHECK(z >= 0);
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &z);
  uj_graph_free(g);
  for (int it = 0; it < 8; it++) {
    int64_t d[2] = {harness_int(&st, 1, 6), harness_int(&st, 1, 6)};
    uj_tensor_t tx = or_tensor(UJ_F64, 2, d), tz = or_tensor(UJ_F64, 2, d);
    or_fill_real(&st, &tx, -2, 2);
    double* ref = or_alloc_ref(d[0] * d[1]);
    for (int64_t i = 0; i < d[0]; i++)
      for (int64_t j = 0; j < d[1]; j++)
        ref[i * d[1] + j] = exp(or_get(&tx, i * d[1] + j)) + exp(or_get(&tx, i * d[1] + d[1] - 1 - j)) +
                            exp(or_get(&tx, ((i + 1) % d[0]) * d[1] + j));
    OR_RUN_CHECK1(p, &tx, &tz, ref, OR_TOL_F64);
    free(ref);
    or_tensor_free(&tx);
    or_tensor_free(&tz);
  }
  uj_program_free(p);
}

/* The same node listed as two outputs (and an input listed as two outputs
 * around it): each listed tensor gets the full result. */
TEST(graph_same_node_two_outputs) {
  HARNESS_SEED(275);
  uint64_t st = 275;
  for (int d = 0; d < 2; d++) {
    uj_dtype_t dt = d ? UJ_F64 : UJ_F32;
    uj_graph_t* g = uj_graph_new();
    uj_io_t x = uj_input(g, 2, dt);
    uj_io_t y = uj_unary(g, UJ_UNARY_EXP, x);
    uj_io_t outs[] = {y, x, y, x};
    uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 4, outs);
    uj_graph_free(g);
    for (int it = 0; it < 4 && p; it++) {
      int64_t dims[2] = {harness_int(&st, 1, 6), harness_int(&st, 1, 6)};
      uj_tensor_t tx = or_tensor(dt, 2, dims);
      or_fill_real(&st, &tx, -2, 2);
      int64_t n = or_tnumel(&tx);
      uj_tensor_t t[4];
      for (int k = 0; k < 4; k++) t[k] = or_tensor(dt, 2, dims);
      double* re = or_alloc_ref(n);
      double* rx = or_to_double(&tx);
      for (int64_t i = 0; i < n; i++) re[i] = exp(rx[i]);
      const uj_tensor_t* in[] = {&tx};
      uj_tensor_t* out[] = {&t[0], &t[1], &t[2], &t[3]};
      const double* refs[] = {re, rx, re, rx};
      OR_RUN_CHECK(p, in, 1, NULL, 0, out, refs, 4, d ? OR_TOL_F64 : OR_TOL_F32);
      for (int k = 0; k < 4; k++) or_tensor_free(&t[k]);
      free(re);
      free(rx);
      or_tensor_free(&tx);
    }
    uj_program_free(p);
  }
}

/* An input the outputs do not need may still be listed; it is checked but
 * not read. The output that is an input also feeds another output. */
TEST(graph_unneeded_input_listed) {
  HARNESS_SEED(276);
  uint64_t st = 276;
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_I32), unused = uj_input(g, 3, UJ_F64);
  uj_io_t nx = uj_unary(g, UJ_UNARY_NEG, x);
  uj_io_t ins[] = {x, unused}, outs[] = {x, nx};
  uj_program_t* p = OR_PROGRAM(g, 2, ins, 0, NULL, 2, outs);
  uj_graph_free(g);
  for (int it = 0; it < 4 && p; it++) {
    int64_t n = harness_int(&st, 1, 8), ud[3] = {2, 1, 3};
    uj_tensor_t tx = or_tensor(UJ_I32, 1, &n), tu = or_tensor(UJ_F64, 3, ud);
    or_fill_int(&st, &tx, -100, 100);
    uj_tensor_t t0 = or_tensor(UJ_I32, 1, &n), t1 = or_tensor(UJ_I32, 1, &n);
    double* r0 = or_to_double(&tx);
    double* r1 = or_alloc_ref(n);
    for (int64_t i = 0; i < n; i++) r1[i] = -r0[i];
    const uj_tensor_t* in[] = {&tx, &tu};
    uj_tensor_t* out[] = {&t0, &t1};
    const double* refs[] = {r0, r1};
    OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 2, 0);
    free(r0);
    free(r1);
    or_tensor_free(&tx);
    or_tensor_free(&tu);
    or_tensor_free(&t0);
    or_tensor_free(&t1);
  }
  uj_program_free(p);
}

/* A program keeps what it needs: the graph goes on growing after the first
 * program is made, a second program is made from it, the graph is freed,
 * and both programs still run. */
TEST(graph_reused_after_program) {
  HARNESS_SEED(277);
  uint64_t st = 277;
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_F64);
  uj_io_t y1 = uj_binary(g, UJ_BINARY_MUL, x, uj_const(g, 3.0));
  uj_program_t* p1 = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &y1);
  uj_io_t y2 = uj_binary(g, UJ_BINARY_ADD, y1, uj_unary(g, UJ_UNARY_SQRT, uj_unary(g, UJ_UNARY_ABS, x)));
  uj_program_t* p2 = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &y2);
  uj_graph_free(g);
  for (int it = 0; it < 3 && p1 && p2; it++) {
    int64_t n = harness_int(&st, 1, 9);
    uj_tensor_t tx = or_tensor(UJ_F64, 1, &n), ty = or_tensor(UJ_F64, 1, &n);
    or_fill_real(&st, &tx, -4, 4);
    double* r1 = or_alloc_ref(n);
    double* r2 = or_alloc_ref(n);
    for (int64_t i = 0; i < n; i++) {
      double v = or_get(&tx, i);
      r1[i] = 3 * v;
      r2[i] = 3 * v + sqrt(fabs(v));
    }
    OR_RUN_CHECK1(p1, &tx, &ty, r1, OR_TOL_F64);
    OR_RUN_CHECK1(p2, &tx, &ty, r2, OR_TOL_F64);
    free(r1);
    free(r2);
    or_tensor_free(&tx);
    or_tensor_free(&ty);
  }
  uj_program_free(p1);
  uj_program_free(p2);
}

/* Tensors with a zero-size axis hold nothing: an elementwise op and a
 * transpose run and write nothing, and a sum over the empty axis gives the
 * identity 0 (max gives -inf) for every remaining element. */
TEST(graph_zero_size_axis) {
  static const char* const sh[] = {"dA1", "dA0"}, *ix[] = {"i1", "i0"};
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 2, UJ_F32);
  int ax1[] = {1};
  uj_io_t outs[] = {uj_unary(g, UJ_UNARY_EXP, x), uj_reindex(g, x, 2, sh, 1, &x, 2, ix),
                    uj_reduce(g, UJ_REDUCE_SUM, 1, ax1, x), uj_reduce(g, UJ_REDUCE_MAX, 1, ax1, x)};
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 4, outs);
  uj_graph_free(g);
  if (!p) return;
  int64_t xd[2] = {3, 0}, td[2] = {0, 3}, rd[2] = {3, 1};
  uj_tensor_t tx = or_tensor(UJ_F32, 2, xd);
  uj_tensor_t t0 = or_tensor(UJ_F32, 2, xd), t1 = or_tensor(UJ_F32, 2, td);
  uj_tensor_t t2 = or_tensor(UJ_F32, 2, rd), t3 = or_tensor(UJ_F32, 2, rd);
  double none[1] = {0}, zeros[3] = {0, 0, 0}, ninf[3] = {-INFINITY, -INFINITY, -INFINITY};
  const uj_tensor_t* in[] = {&tx};
  uj_tensor_t* out[] = {&t0, &t1, &t2, &t3};
  const double* refs[] = {none, none, zeros, ninf};
  OR_RUN_CHECK(p, in, 1, NULL, 0, out, refs, 4, 0);
  or_tensor_free(&tx);
  or_tensor_free(&t0);
  or_tensor_free(&t1);
  or_tensor_free(&t2);
  or_tensor_free(&t3);
  uj_program_free(p);
}

/* Reads out of range give 0 to the reindex's (or select's) output, and its
 * consumers see that 0, whatever the passes fuse or substitute: with
 * xp = x shifted right by one into a longer vector (x[i-1], 0 at both ends),
 * exp(xp) + 1 is 2 at the padding, xp * 3 - 1 is -1 there, and the gather of
 * an out-of-range index feeds exp as 0 too. */
TEST(graph_consumers_of_out_of_range_reads) {
  HARNESS_SEED(278);
  uint64_t st = 278;
  static const char* const sh[] = {"dA0+2"}, *ix[] = {"i0-1"};
  for (int d = 0; d < 2; d++) {
    uj_dtype_t dt = d ? UJ_F64 : UJ_F32;
    uj_graph_t* g = uj_graph_new();
    uj_io_t x = uj_input(g, 1, dt), m = uj_input(g, 2, dt), idx = uj_input(g, 2, UJ_I32);
    uj_io_t xp = uj_reindex(g, x, 1, sh, 1, &x, 1, ix);
    uj_io_t o0 = uj_binary(g, UJ_BINARY_ADD, uj_unary(g, UJ_UNARY_EXP, xp), uj_const(g, 1.0));
    uj_io_t o1 = uj_binary(g, UJ_BINARY_SUB, uj_binary(g, UJ_BINARY_MUL, xp, uj_const(g, 3.0)), uj_const(g, 1.0));
    uj_io_t o2 = uj_unary(g, UJ_UNARY_EXP, uj_select(g, 1, m, idx));
    uj_io_t ins[] = {x, m, idx}, outs[] = {o0, o1, o2};
    for (int k = 0; k < 3; k++) CHECK(outs[k] >= 0);
    uj_program_t* p = OR_PROGRAM(g, 3, ins, 0, NULL, 3, outs);
    uj_graph_free(g);
    for (int it = 0; it < 5 && p; it++) {
      int64_t n = harness_int(&st, 1, 6), np2 = n + 2;
      int64_t md[2] = {harness_int(&st, 1, 5), harness_int(&st, 1, 5)}, id[2] = {md[0], 1};
      uj_tensor_t tx = or_tensor(dt, 1, &n), tm = or_tensor(dt, 2, md), ti = or_tensor(UJ_I32, 2, id);
      or_fill_real(&st, &tx, -2, 2);
      or_fill_real(&st, &tm, -2, 2);
      or_fill_int(&st, &ti, -2, md[1] + 1);
      uj_tensor_t t0 = or_tensor(dt, 1, &np2), t1 = or_tensor(dt, 1, &np2), t2 = or_tensor(dt, 2, id);
      double *r0 = or_alloc_ref(np2), *r1 = or_alloc_ref(np2), *r2 = or_alloc_ref(md[0]);
      for (int64_t i = 0; i < np2; i++) {
        double v = i >= 1 && i <= n ? or_get(&tx, i - 1) : 0.0;
        r0[i] = exp(v) + 1;
        r1[i] = v * 3 - 1;
      }
      for (int64_t i = 0; i < md[0]; i++) {
        int64_t j = (int64_t)or_get(&ti, i);
        r2[i] = exp(j >= 0 && j < md[1] ? or_get(&tm, i * md[1] + j) : 0.0);
      }
      const uj_tensor_t* in[] = {&tx, &tm, &ti};
      uj_tensor_t* out[] = {&t0, &t1, &t2};
      const double* refs[] = {r0, r1, r2};
      if (OR_RUN_CHECK(p, in, 3, NULL, 0, out, refs, 3, d ? OR_TOL_F64 : OR_TOL_F32))
        fprintf(stderr, "  (%s, n %lld)\n", uj_dtype_name(dt), (long long)n);
      free(r0), free(r1), free(r2);
      or_tensor_free(&tx), or_tensor_free(&tm), or_tensor_free(&ti);
      or_tensor_free(&t0), or_tensor_free(&t1), or_tensor_free(&t2);
    }
    uj_program_free(p);
  }
}

/* Rank 8, the most a tensor has: exp, all eight axes reversed, and a sum
 * over the first and last axes. */
TEST(graph_rank8) {
  HARNESS_SEED(279);
  uint64_t st = 279;
  static const char* const sh[] = {"dA7", "dA6", "dA5", "dA4", "dA3", "dA2", "dA1", "dA0"};
  static const char* const ix[] = {"i7", "i6", "i5", "i4", "i3", "i2", "i1", "i0"};
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 8, UJ_F64);
  int ax[] = {0, -1};
  uj_io_t outs[] = {uj_unary(g, UJ_UNARY_EXP, x), uj_reindex(g, x, 8, sh, 1, &x, 8, ix),
                    uj_reduce(g, UJ_REDUCE_SUM, 2, ax, x)};
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 3, outs);
  uj_graph_free(g);
  for (int it = 0; it < 3 && p; it++) {
    int64_t d[8], rd[8], sd[8];
    or_rand_shape(&st, 8, 8, 3, d);
    for (int k = 0; k < 8; k++) rd[k] = d[7 - k], sd[k] = k == 0 || k == 7 ? 1 : d[k];
    uj_tensor_t tx = or_tensor(UJ_F64, 8, d);
    or_fill_real(&st, &tx, -1, 1);
    int64_t n = or_tnumel(&tx);
    uj_tensor_t t0 = or_tensor(UJ_F64, 8, d), t1 = or_tensor(UJ_F64, 8, rd), t2 = or_tensor(UJ_F64, 8, sd);
    double *r0 = or_alloc_ref(n), *r1 = or_alloc_ref(n), *r2 = or_alloc_ref(or_tnumel(&t2));
    for (int64_t f = 0; f < n; f++) {
      int64_t i[8], j[8];
      or_unravel(f, 8, d, i);
      double v = or_get(&tx, f);
      r0[f] = exp(v);
      for (int k = 0; k < 8; k++) j[k] = i[7 - k];
      r1[or_ravel(8, rd, j)] = v;
      i[0] = i[7] = 0;
      r2[or_ravel(8, sd, i)] += v;
    }
    const uj_tensor_t* in[] = {&tx};
    uj_tensor_t* out[] = {&t0, &t1, &t2};
    const double* refs[] = {r0, r1, r2};
    OR_RUN_CHECK(p, in, 1, NULL, 0, out, refs, 3, OR_TOL_F64);
    free(r0), free(r1), free(r2);
    or_tensor_free(&tx), or_tensor_free(&t0), or_tensor_free(&t1), or_tensor_free(&t2);
  }
  uj_program_free(p);
}

TEST_MAIN()
