/* tests/test_grad_composite.c: gradients of whole programs built from uops
 * against central finite differences of the forward program, in f64
 * (tests/grad_check.h), with the passes on and off: 2-D NHWC convolution
 * (the graph of tests/oracle.h: sizes from the filter, $kh/$kw params,
 * literal zero padding, $pad padding, stride 2) for both x and w; matmul; a
 * two-layer perceptron; log-softmax over the last axis; the sigmoid chain
 * 1/(1+exp(-(x*a+b))) with 0-d a and b; relu as where(x > 0, x, 0); a mean
 * squared error; layer normalization; and an embedding lookup (gather by
 * select over a broadcast table, repeated ids accumulating). Shapes are
 * random, seeds fixed. */
#include "grad_check.h"

static const char* const sh2[] = {"dA0", "dA1"};

/* ---- convolution ------------------------------------------------------------------ */

static void conv_grad_case(or_conv_kind_t kind, const char* name, uint64_t* st) {
  for (int it = 0; it < 3; it++) {
    int64_t kh = harness_int(st, 1, 3), kw = harness_int(st, 1, 3);
    int64_t xd[4] = {harness_int(st, 1, 2), kh + harness_int(st, 0, 3), kw + harness_int(st, 0, 3),
                     harness_int(st, 1, 3)};
    int64_t wd[4] = {harness_int(st, 1, 3), kh, kw, xd[3]};
    gc_case_t c;
    char what[96];
    snprintf(what, sizeof what, "conv %s x [%lld,%lld,%lld,%lld] w [%lld,%lld,%lld,%lld]", name,
             (long long)xd[0], (long long)xd[1], (long long)xd[2], (long long)xd[3], (long long)wd[0],
             (long long)wd[1], (long long)wd[2], (long long)wd[3]);
    gc_init(&c, what);
    uj_io_t x, w;
    uj_io_t y = or_conv_graph(c.g, kind, UJ_F64, &x, &w);
    gc_adopt(&c, x, UJ_F64, 4, xd, 1);
    gc_adopt(&c, w, UJ_F64, 4, wd, 1);
    gc_fill(st, gc_t(&c, x), -2.0, 2.0);
    gc_fill(st, gc_t(&c, w), -2.0, 2.0);
    if (kind == OR_CONV_PARAMS) {
      c.np = 2;
      c.pnames[0] = "$kh", c.pvals[0] = kh;
      c.pnames[1] = "$kw", c.pvals[1] = kw;
    } else if (kind == OR_CONV_PAD) {
      c.np = 1;
      c.pnames[0] = "$pad", c.pvals[0] = harness_int(st, 1, 2);
    }
    gc_output(&c, y);
    GC_CHECK(&c, st);
  }
}

TEST(grad_conv2d) {
  HARNESS_SEED(601);
  uint64_t st = 601;
  conv_grad_case(OR_CONV_DIMS, "valid", &st);
}
TEST(grad_conv2d_pad1) {
  HARNESS_SEED(602);
  uint64_t st = 602;
  conv_grad_case(OR_CONV_PAD1, "zero padding 1", &st);
}
TEST(grad_conv2d_params) {
  HARNESS_SEED(603);
  uint64_t st = 603;
  conv_grad_case(OR_CONV_PARAMS, "$kh $kw", &st);
  conv_grad_case(OR_CONV_PAD, "$pad", &st);
}
TEST(grad_conv2d_stride2) {
  HARNESS_SEED(604);
  uint64_t st = 604;
  conv_grad_case(OR_CONV_STRIDE2, "stride 2", &st);
}

/* ---- matmul and a small perceptron ------------------------------------------------ */

/* a [n,k] @ b [k,m] by broadcast, multiply and a sum over k. */
static uj_io_t matmul(uj_graph_t* g, uj_io_t a, uj_io_t b) {
  static const char* const sh[] = {"dA0", "dB1", "dA1[=dB0]"};
  static const char* const ia[] = {"i0", "i2"};
  static const char* const ib[] = {"i2", "i1"};
  static const char* const ix[] = {"i0", "i1", "0"};
  uj_io_t ss[] = {a, b};
  uj_io_t ar = uj_reindex(g, a, 3, sh, 2, ss, 2, ia);
  uj_io_t br = uj_reindex(g, b, 3, sh, 2, ss, 2, ib);
  int ax = 2;
  uj_io_t s = uj_reduce(g, UJ_REDUCE_SUM, 1, &ax, uj_binary(g, UJ_BINARY_MUL, ar, br));
  return uj_reindex(g, s, 2, sh2, 1, &s, 3, ix);
}
/* x [n,m] + row vector b [m]. */
static uj_io_t add_row(uj_graph_t* g, uj_io_t x, uj_io_t b) {
  static const char* const sh[] = {"dA0", "dA1[=dB0]"};
  static const char* const ix[] = {"i1"};
  uj_io_t ss[] = {x, b};
  return uj_binary(g, UJ_BINARY_ADD, x, uj_reindex(g, b, 2, sh, 2, ss, 1, ix));
}
/* A size-1 column [n,1] broadcast to x's [n,m]. */
static uj_io_t bcast_col(uj_graph_t* g, uj_io_t col, uj_io_t x) {
  static const char* const ix[] = {"i0", "0"};
  uj_io_t ss[] = {x};
  return uj_reindex(g, col, 2, sh2, 1, ss, 2, ix);
}

TEST(grad_matmul) {
  HARNESS_SEED(611);
  uint64_t st = 611;
  for (int it = 0; it < 5; it++) {
    int64_t n = harness_int(&st, 1, 5), k = harness_int(&st, 1, 5), m = harness_int(&st, 1, 5);
    int64_t ad[2] = {n, k}, bd[2] = {k, m};
    gc_case_t c;
    gc_init(&c, "matmul");
    uj_io_t a = gc_input(&c, UJ_F64, 2, ad, 1), b = gc_input(&c, UJ_F64, 2, bd, 1);
    gc_fill(&st, gc_t(&c, a), -2.0, 2.0);
    gc_fill(&st, gc_t(&c, b), -2.0, 2.0);
    gc_output(&c, matmul(c.g, a, b));
    GC_CHECK(&c, &st);
  }
}

/* y = tanh(x @ w1 + b1) @ w2 + b2. */
TEST(grad_mlp) {
  HARNESS_SEED(612);
  uint64_t st = 612;
  for (int it = 0; it < 3; it++) {
    int64_t n = harness_int(&st, 1, 4), d = harness_int(&st, 1, 4), h = harness_int(&st, 1, 4),
            o = harness_int(&st, 1, 3);
    int64_t xd[2] = {n, d}, w1d[2] = {d, h}, w2d[2] = {h, o};
    gc_case_t c;
    gc_init(&c, "tanh(x @ w1 + b1) @ w2 + b2");
    uj_io_t x = gc_input(&c, UJ_F64, 2, xd, 1), w1 = gc_input(&c, UJ_F64, 2, w1d, 1);
    uj_io_t b1 = gc_input(&c, UJ_F64, 1, &h, 1), w2 = gc_input(&c, UJ_F64, 2, w2d, 1);
    uj_io_t b2 = gc_input(&c, UJ_F64, 1, &o, 1);
    for (int i = 0; i < c.nin; i++) gc_fill(&st, &c.t[i], -1.0, 1.0);
    uj_io_t hid = uj_unary(c.g, UJ_UNARY_TANH, add_row(c.g, matmul(c.g, x, w1), b1));
    gc_output(&c, add_row(c.g, matmul(c.g, hid, w2), b2));
    GC_CHECK(&c, &st);
  }
}

/* ---- softmax, sigmoid, relu, mse, layer norm --------------------------------------- */

/* log(softmax(x)) over the last axis of x [n,m], the max subtracted first. */
TEST(grad_log_softmax) {
  HARNESS_SEED(621);
  uint64_t st = 621;
  for (int it = 0; it < 5; it++) {
    int64_t xd[2] = {harness_int(&st, 1, 5), harness_int(&st, 1, 5)};
    gc_case_t c;
    gc_init(&c, "log(softmax(x))");
    uj_io_t x = gc_input(&c, UJ_F64, 2, xd, 1);
    gc_fill_distinct(&st, gc_t(&c, x));
    int ax = 1;
    uj_io_t mx = uj_reduce(c.g, UJ_REDUCE_MAX, 1, &ax, x);
    uj_io_t e = uj_unary(c.g, UJ_UNARY_EXP, uj_binary(c.g, UJ_BINARY_SUB, x, bcast_col(c.g, mx, x)));
    uj_io_t s = uj_reduce(c.g, UJ_REDUCE_SUM, 1, &ax, e);
    uj_io_t p = uj_binary(c.g, UJ_BINARY_DIV, e, bcast_col(c.g, s, x));
    gc_output(&c, uj_unary(c.g, UJ_UNARY_LOG, p));
    GC_CHECK(&c, &st);
  }
}

/* y = 1 / (1 + exp(-(x * a + b))) with 0-d a and b (their gradients summed). */
TEST(grad_sigmoid_chain) {
  HARNESS_SEED(622);
  uint64_t st = 622;
  for (int it = 0; it < 5; it++) {
    int64_t dims[UJ_MAX_DIMS];
    int r = (int)harness_int(&st, 0, 4);
    gc_dims(&st, r, 5, dims);
    gc_case_t c;
    gc_init(&c, "1/(1+exp(-(x*a+b)))");
    uj_io_t x = gc_input(&c, UJ_F64, r, dims, 1);
    uj_io_t a = gc_input(&c, UJ_F64, 0, dims, 1), b = gc_input(&c, UJ_F64, 0, dims, 1);
    for (int i = 0; i < c.nin; i++) gc_fill(&st, &c.t[i], -2.0, 2.0);
    uj_io_t z = uj_binary(c.g, UJ_BINARY_ADD, uj_binary(c.g, UJ_BINARY_MUL, x, a), b);
    uj_io_t den = uj_binary(c.g, UJ_BINARY_ADD, uj_const(c.g, 1.0),
                            uj_unary(c.g, UJ_UNARY_EXP, uj_unary(c.g, UJ_UNARY_NEG, z)));
    gc_output(&c, uj_binary(c.g, UJ_BINARY_DIV, uj_const(c.g, 1.0), den));
    GC_CHECK(&c, &st);
  }
}

/* relu(x) = where(x > 0, x, 0), x kept away from 0; then relu(x) * w so
 * that the gradient depends on the values. */
TEST(grad_relu_where) {
  HARNESS_SEED(623);
  uint64_t st = 623;
  for (int it = 0; it < 5; it++) {
    int64_t dims[UJ_MAX_DIMS];
    int r = (int)harness_int(&st, 0, 4);
    gc_dims(&st, r, 5, dims);
    gc_case_t c;
    gc_init(&c, "where(x > 0, x, 0) * w");
    uj_io_t x = gc_input(&c, UJ_F64, r, dims, 1), w = gc_input(&c, UJ_F64, r, dims, 1);
    gc_fill_away(&st, gc_t(&c, x), 0.1, 2.0);
    gc_fill(&st, gc_t(&c, w), -2.0, 2.0);
    uj_io_t zero = uj_const(c.g, 0.0);
    uj_io_t relu = uj_where(c.g, uj_binary(c.g, UJ_BINARY_GT, x, zero), x, zero);
    gc_output(&c, uj_binary(c.g, UJ_BINARY_MUL, relu, w));
    GC_CHECK(&c, &st);
  }
}

/* mean over every axis of (x - t)^2: a size-1 result per case. */
TEST(grad_mse_mean) {
  HARNESS_SEED(624);
  uint64_t st = 624;
  for (int it = 0; it < 5; it++) {
    int64_t dims[UJ_MAX_DIMS];
    int r = (int)harness_int(&st, 1, 4);
    gc_dims(&st, r, 5, dims);
    gc_case_t c;
    gc_init(&c, "mean((x - t)^2)");
    uj_io_t x = gc_input(&c, UJ_F64, r, dims, 1), t = gc_input(&c, UJ_F64, r, dims, 1);
    gc_fill(&st, gc_t(&c, x), -2.0, 2.0);
    gc_fill(&st, gc_t(&c, t), -2.0, 2.0);
    uj_io_t dlt = uj_binary(c.g, UJ_BINARY_SUB, x, t);
    int axes[UJ_MAX_DIMS];
    for (int k = 0; k < r; k++) axes[k] = k;
    gc_output(&c, uj_reduce(c.g, UJ_REDUCE_MEAN, r, axes, uj_binary(c.g, UJ_BINARY_MUL, dlt, dlt)));
    GC_CHECK(&c, &st);
  }
}

/* y = (x - mean(x)) * rsqrt(var(x) + 1e-3) * gamma + beta over the last axis. */
TEST(grad_layer_norm) {
  HARNESS_SEED(625);
  uint64_t st = 625;
  for (int it = 0; it < 5; it++) {
    int64_t xd[2] = {harness_int(&st, 1, 4), harness_int(&st, 2, 5)};
    gc_case_t c;
    gc_init(&c, "layer norm");
    uj_io_t x = gc_input(&c, UJ_F64, 2, xd, 1);
    uj_io_t gamma = gc_input(&c, UJ_F64, 1, xd + 1, 1), beta = gc_input(&c, UJ_F64, 1, xd + 1, 1);
    gc_fill_distinct(&st, gc_t(&c, x)); /* a row of equal values has no variance */
    gc_fill(&st, gc_t(&c, gamma), 0.5, 1.5);
    gc_fill(&st, gc_t(&c, beta), -1.0, 1.0);
    int ax = 1;
    uj_io_t mu = uj_reduce(c.g, UJ_REDUCE_MEAN, 1, &ax, x);
    uj_io_t xc = uj_binary(c.g, UJ_BINARY_SUB, x, bcast_col(c.g, mu, x));
    uj_io_t var = uj_reduce(c.g, UJ_REDUCE_MEAN, 1, &ax, uj_binary(c.g, UJ_BINARY_MUL, xc, xc));
    uj_io_t inv = uj_unary(c.g, UJ_UNARY_RSQRT, uj_binary(c.g, UJ_BINARY_ADD, var, uj_const(c.g, 1e-3)));
    uj_io_t nrm = uj_binary(c.g, UJ_BINARY_MUL, xc, bcast_col(c.g, inv, x));
    static const char* const sh[] = {"dA0", "dA1[=dB0]"};
    static const char* const ix[] = {"i1"};
    uj_io_t ssg[] = {x, gamma}, ssb[] = {x, beta};
    uj_io_t gb = uj_reindex(c.g, gamma, 2, sh, 2, ssg, 1, ix);
    uj_io_t bb = uj_reindex(c.g, beta, 2, sh, 2, ssb, 1, ix);
    gc_output(&c, uj_binary(c.g, UJ_BINARY_ADD, uj_binary(c.g, UJ_BINARY_MUL, nrm, gb), bb));
    GC_CHECK(&c, &st);
  }
}

/* ---- gather ------------------------------------------------------------------------ */

/* out[b, d] = table[ids[b], d]: the table broadcast to [B, V, D], the ids to
 * an i32 [B, 1, D], select along axis 1; ids repeat, so rows of the table
 * gradient accumulate; then tanh so the gradient depends on the values. */
TEST(grad_gather_embedding) {
  HARNESS_SEED(631);
  uint64_t st = 631;
  for (int it = 0; it < 5; it++) {
    int64_t v = harness_int(&st, 1, 4), d = harness_int(&st, 1, 4), nb = harness_int(&st, 2, 6);
    int64_t td[2] = {v, d};
    gc_case_t c;
    gc_init(&c, "embedding lookup");
    uj_io_t table = gc_input(&c, UJ_F64, 2, td, 1);
    uj_io_t ids = gc_input(&c, UJ_I32, 1, &nb, 0);
    gc_fill(&st, gc_t(&c, table), -2.0, 2.0);
    uj_tensor_t* ti = gc_t(&c, ids);
    for (int64_t i = 0; i < nb; i++) or_set(ti, i, (double)harness_int(&st, 0, v - 1));
    static const char* const sh_t[] = {"dB0", "dA0", "dA1"};
    static const char* const ix_t[] = {"i1", "i2"};
    static const char* const sh_i[] = {"dA0", "1", "dB1"};
    static const char* const ix_i[] = {"i0"};
    static const char* const sh_o[] = {"dA0", "dA2"};
    static const char* const ix_o[] = {"i0", "0", "i1"};
    uj_io_t ss_t[] = {table, ids}, ss_i[] = {ids, table};
    uj_io_t tb = uj_reindex(c.g, table, 3, sh_t, 2, ss_t, 2, ix_t);
    uj_io_t ib = uj_reindex(c.g, ids, 3, sh_i, 2, ss_i, 1, ix_i);
    uj_io_t sel = uj_select(c.g, 1, tb, ib);
    uj_io_t out = uj_reindex(c.g, sel, 2, sh_o, 1, &sel, 3, ix_o);
    gc_output(&c, uj_unary(c.g, UJ_UNARY_TANH, out));
    GC_CHECK(&c, &st);
  }
}

TEST_MAIN()
