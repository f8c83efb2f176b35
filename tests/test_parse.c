/* tests/test_parse.c: the expression language (uj_program_parse) checked
 * numerically. Every construct of the language (numbers, operators with
 * their precedence and associativity, comparisons, every function, the
 * reductions with and without an axis, comments, separators, dtype hints,
 * temporaries, in-place names, io names and order), NumPy broadcasting, a
 * long elementwise chain and softmax are run on
 * every engine configuration of oracle.h and compared with naive C loops in
 * double. The error paths (parser errors, size mismatches, hostile sources) live in
 * test_parse_errors.c, in-place updates in test_parse_inplace.c. */
#include "parse_check.h"

/* ---- every elementwise construct --------------------------------------------------- */

typedef double (*ew_fn)(double x, double y);
#define EW(name, expr)                                  \
  static double name(double x, double y) {              \
    (void)x;                                            \
    (void)y;                                            \
    return (expr);                                      \
  }

static double sigmoid(double v) { return 1.0 / (1.0 + exp(-v)); }

EW(ew_int, x * 1 + 2)
EW(ew_frac, x + 1.5)
EW(ew_lead_dot, x + .5)
EW(ew_exp_small, x + 1e-8)
EW(ew_exp_big, x * 1E2 + 2.5e+1)
EW(ew_exp_neg, x * 25e-1)
EW(ew_prec_mul, x + y * 2 - x / y)
EW(ew_paren, (x + y) * 2)
EW(ew_left_sub, x - y - 1)
EW(ew_left_div, x / y / 2)
EW(ew_mixed, x - y * x + y / x * 3)
EW(ew_pow, pow(x, y))
EW(ew_pow_right, pow(x, pow(2, 1.5)))
EW(ew_pow_const, x * 0 + 512)
EW(ew_neg_pow, -(x * x))
EW(ew_pow_neg_exp, pow(2, -x))
EW(ew_neg_neg, x)
EW(ew_plus, x + y)
EW(ew_neg_paren, -(x - y) * -y)
EW(ew_lt, x < y)
EW(ew_le, x <= y)
EW(ew_gt, x > y)
EW(ew_ge, x >= y)
EW(ew_eq_self, 1)
EW(ew_ne_self, 0)
EW(ew_eq, x == y)
EW(ew_ne, x != y)
EW(ew_cmp_prec, x < y + 0.25)
EW(ew_cmp_sum, (x < y) + 1)
EW(ew_exp, exp(x))
EW(ew_log, log(x))
EW(ew_sqrt, sqrt(x))
EW(ew_rsqrt, 1 / sqrt(x))
EW(ew_abs, fabs(x - y))
EW(ew_sin, sin(x * 3))
EW(ew_cos, cos(x * 3))
EW(ew_tanh, tanh(x - y))
EW(ew_sigmoid, sigmoid(x - y))
EW(ew_relu, x - y > 0 ? x - y : 0)
EW(ew_floor, floor(x * 3))
EW(ew_floor_neg, floor(-x * 3))
EW(ew_min, fmin(x, y))
EW(ew_max, fmax(x, y))
EW(ew_pow_fn, pow(x, y))
EW(ew_where, x < y ? x : y * 2)
EW(ew_where_const, x > 1 ? 1 : -1)
EW(ew_nested, exp(-fabs(x - y)) * sqrt(x + y))
EW(ew_neg_number, x * -0.1)
EW(ew_number_sum, x + (1 + 2))
EW(ew_fn_of_number, x * exp(0.1))

static const struct {
  const char* src;
  ew_fn ref;
} ew_cases[] = {
    {"z = x * 1 + 2", ew_int},
    {"z = x + 1.5", ew_frac},
    {"z = x + .5", ew_lead_dot},
    {"z = x + 1e-8", ew_exp_small},
    {"z = x * 1E2 + 2.5e+1", ew_exp_big},
    {"z = x * 25e-1", ew_exp_neg},
    {"z = x + y * 2 - x / y", ew_prec_mul},
    {"z = (x + y) * 2", ew_paren},
    {"z = x - y - 1", ew_left_sub},
    {"z = x / y / 2", ew_left_div},
    {"z = x - y * x + y / x * 3", ew_mixed},
    {"z = x ** y", ew_pow},
    {"z = x ** 2 ** 1.5", ew_pow_right},
    {"z = x * 0 + 2 ** 3 ** 2", ew_pow_const},
    {"z = -x**2", ew_neg_pow},
    {"z = 2 ** -x", ew_pow_neg_exp},
    {"z = - -x", ew_neg_neg},
    {"z = +x + +y", ew_plus},
    {"z = -(x - y) * -y", ew_neg_paren},
    {"z = x < y", ew_lt},
    {"z = x <= y", ew_le},
    {"z = x > y", ew_gt},
    {"z = x >= y", ew_ge},
    {"z = x == x", ew_eq_self},
    {"z = x != x", ew_ne_self},
    {"z = x == y", ew_eq},
    {"z = x != y", ew_ne},
    {"z = x < y + 0.25", ew_cmp_prec},
    {"z = (x < y) + 1", ew_cmp_sum},
    {"z = exp(x)", ew_exp},
    {"z = log(x)", ew_log},
    {"z = sqrt(x)", ew_sqrt},
    {"z = rsqrt(x)", ew_rsqrt},
    {"z = abs(x - y)", ew_abs},
    {"z = sin(x * 3)", ew_sin},
    {"z = cos(x * 3)", ew_cos},
    {"z = tanh(x - y)", ew_tanh},
    {"z = sigmoid(x - y)", ew_sigmoid},
    {"z = relu(x - y)", ew_relu},
    {"z = floor(x * 3)", ew_floor},
    {"z = floor(-x * 3)", ew_floor_neg},
    {"z = min(x, y)", ew_min},
    {"z = max(x, y)", ew_max},
    {"z = pow(x, y)", ew_pow_fn},
    {"z = where(x < y, x, y * 2)", ew_where},
    {"z = where(x > 1, 1, -1)", ew_where_const},
    {"z = exp(-abs(x - y)) * sqrt(x + y)", ew_nested},
    /* Numbers and expressions of numbers take the dtype of what they
     * combine with: in f64 these are exact to double precision. */
    {"z = x * -0.1", ew_neg_number},
    {"z = x + (1 + 2)", ew_number_sum},
    {"z = x * exp(0.1)", ew_fn_of_number},
};

/* Runs one elementwise case for x, y of n elements of dtype dt; y == x on
 * every third element so that == and != see both answers. */
static void run_ew_case(const char* src, ew_fn ref_fn, uj_dtype_t dt, uint64_t seed) {
  const int64_t n = 37;
  uj_tensor_t x = or_tensor(dt, 1, &n), y = or_tensor(dt, 1, &n);
  uint64_t st = seed;
  or_fill_real(&st, &x, 0.5, 1.5);
  or_fill_real(&st, &y, 0.5, 1.5);
  for (int64_t i = 0; i < n; i += 3) or_set(&y, i, or_get(&x, i));
  double* ref = or_alloc_ref(n);
  for (int64_t i = 0; i < n; i++) ref[i] = ref_fn(or_get(&x, i), or_get(&y, i));
  pr_t r;
  if (pr_parse(&r, src)) {
    named_t named[] = {{"x", &x}, {"y", &y}};
    OR_FOR_ENGINES(e) {
      uj_status_t s = pr_run(&r, e, 2, named);
      if (s != UJ_OK) {
        fprintf(stderr, "  \"%s\" on %s: %s: %s\n", src, or_configs[e].name, uj_status_str(s), uj_last_error());
        CHECK(s == UJ_OK);
        continue;
      }
      uj_tensor_t* z = pr_out(&r, "z");
      CHECK(z != NULL);
      if (!z) continue;
      if (z->dtype != dt)
        fprintf(stderr, "  \"%s\" on %s: output dtype %s, expected %s\n", src, or_configs[e].name,
                uj_dtype_name(z->dtype), uj_dtype_name(dt));
      CHECK(z->dtype == dt);
      CHECK(same_dims(z, 1, &n));
      expect_close(src, or_configs[e].name, z, ref, tol_of(dt));
    }
  }
  pr_free(&r);
  free(ref);
  or_tensor_free(&x);
  or_tensor_free(&y);
}

TEST(elementwise_constructs_f64) {
  HARNESS_SEED(101);
  for (size_t i = 0; i < sizeof ew_cases / sizeof ew_cases[0]; i++)
    run_ew_case(ew_cases[i].src, ew_cases[i].ref, UJ_F64, 101 + i);
}

TEST(elementwise_constructs_f32) {
  HARNESS_SEED(202);
  for (size_t i = 0; i < sizeof ew_cases / sizeof ew_cases[0]; i++)
    run_ew_case(ew_cases[i].src, ew_cases[i].ref, UJ_F32, 202 + i);
}

/* A program with no inputs: its output is 0-d and takes the f32 default. */
TEST(constants_only) {
  pr_t r;
  if (pr_parse(&r, "z = 2 ** 3 ** 2 - -1")) {
    CHECK(r.nin == 0);
    CHECK(pr_run(&r, 0, 0, NULL) == UJ_OK);
    CHECK(r.out[0].ndim == 0);
    CHECK(r.out[0].dtype == UJ_F32);
    CHECK_NEAR(or_get(&r.out[0], 0), 513.0, 0);
  }
  pr_free(&r);
}

/* ---- reductions ------------------------------------------------------------------ */

enum { RED_SUM, RED_MEAN, RED_MAX, RED_MIN };

/* Reduces x [rows, cols] (row-major) over axis (0, 1) or both (-1 here
 * meaning "no axis"), keeping the reduced axes with size 1. */
static void reduce_ref(int op, const uj_tensor_t* x, int axis, double* out) {
  int64_t rows = x->dims[0], cols = x->dims[1];
  int64_t orow = axis == 1 ? rows : 1, ocol = axis == 0 ? cols : 1;
  for (int64_t i = 0; i < orow; i++)
    for (int64_t j = 0; j < ocol; j++) {
      double acc = op == RED_MAX ? -INFINITY : op == RED_MIN ? INFINITY : 0;
      int64_t count = 0;
      for (int64_t a = 0; a < rows; a++)
        for (int64_t b = 0; b < cols; b++) {
          if ((axis == 1 && a != i) || (axis == 0 && b != j)) continue;
          double v = or_get(x, a * cols + b);
          acc = op == RED_MAX ? fmax(acc, v) : op == RED_MIN ? fmin(acc, v) : acc + v;
          count++;
        }
      out[i * ocol + j] = op == RED_MEAN ? acc / (double)count : acc;
    }
}

TEST(reductions_every_axis) {
  HARNESS_SEED(303);
  static const char* const fname[] = {"sum", "mean", "amax", "amin"};
  /* The axis as written, and which axis it means for rank 2 (-1: all). */
  static const struct {
    const char* text;
    int axis;
  } axes[] = {{"", -1}, {", 0", 0}, {", 1", 1}, {", -1", 1}, {", -2", 0}};
  const int64_t dims[2] = {5, 7};
  for (int d = 0; d < 2; d++) {
    uj_dtype_t dt = d ? UJ_F64 : UJ_F32;
    uj_tensor_t x = or_tensor(dt, 2, dims);
    uint64_t st = 303 + (uint64_t)d;
    or_fill_real(&st, &x, -2, 2);
    named_t named[] = {{"x", &x}};
    for (int op = 0; op < 4; op++)
      for (size_t a = 0; a < sizeof axes / sizeof axes[0]; a++) {
        char src[64];
        snprintf(src, sizeof src, "y = %s(x%s)", fname[op], axes[a].text);
        int64_t want[2] = {axes[a].axis == 1 ? 5 : 1, axes[a].axis == 0 ? 7 : 1};
        double ref[35];
        reduce_ref(op, &x, axes[a].axis, ref);
        pr_t r;
        if (pr_parse(&r, src))
          OR_FOR_ENGINES(e) {
            uj_status_t s = pr_run(&r, e, 1, named);
            CHECK(s == UJ_OK);
            if (s != UJ_OK) continue;
            CHECK(same_dims(&r.out[0], 2, want));
            if (same_dims(&r.out[0], 2, want))
              expect_close(src, or_configs[e].name, &r.out[0], ref, dt == UJ_F64 ? OR_TOL_F64 : OR_TOL_F32_SUM);
          }
        pr_free(&r);
      }
    or_tensor_free(&x);
  }
}

/* Reductions inside an expression broadcast back: each element over its
 * row sum, plus its column maximum, minus the mean of everything. */
TEST(reduction_in_expression) {
  const char* src = "y = x / sum(x, 1) + amax(x, 0) - mean(x)";
  const int64_t dims[2] = {4, 6};
  uj_tensor_t x = or_tensor(UJ_F64, 2, dims);
  uint64_t st = 404;
  HARNESS_SEED(404);
  or_fill_real(&st, &x, 0.5, 1.5);
  double ref[24], row[4] = {0}, col[6], all = 0;
  for (int j = 0; j < 6; j++) col[j] = -INFINITY;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++) {
      double v = or_get(&x, i * 6 + j);
      row[i] += v;
      col[j] = fmax(col[j], v);
      all += v;
    }
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++) ref[i * 6 + j] = or_get(&x, i * 6 + j) / row[i] + col[j] - all / 24;
  pr_t r;
  named_t named[] = {{"x", &x}};
  if (pr_parse(&r, src))
    OR_FOR_ENGINES(e) {
      CHECK(pr_run(&r, e, 1, named) == UJ_OK);
      CHECK(same_dims(&r.out[0], 2, dims));
      if (same_dims(&r.out[0], 2, dims)) expect_close(src, or_configs[e].name, &r.out[0], ref, OR_TOL_F64);
    }
  pr_free(&r);
  or_tensor_free(&x);
}

/* ---- statements, names and dtypes ----------------------------------------------------- */

/* Inputs in order of first appearance, outputs in order of first
 * assignment; a name read after its assignment reads that value; '_' names
 * are temporaries; a reassigned output is listed once with its last value;
 * comments, ';', blank lines and CRLF line ends all separate statements. */
TEST(statements_names_and_order) {
  const char* src =
      "# a comment on its own line\n"
      "b = y + x   # y is the first input, x the second\r\n"
      "\n"
      "_t = x * 2; a = _t + b ;; c = b * a\n"
      "c = c + w  # reassigned: c is listed once\n"
      "   # trailing comment";
  static const char* const ins[] = {"y", "x", "w"};
  static const char* const outs[] = {"b", "a", "c"};
  const int64_t n = 9;
  uj_tensor_t x = or_tensor(UJ_F64, 1, &n), y = or_tensor(UJ_F64, 1, &n), w = or_tensor(UJ_F64, 1, &n);
  uint64_t st = 505;
  HARNESS_SEED(505);
  or_fill_real(&st, &x, 0.5, 1.5);
  or_fill_real(&st, &y, 0.5, 1.5);
  or_fill_real(&st, &w, 0.5, 1.5);
  double rb[9], ra[9], rc[9];
  for (int i = 0; i < 9; i++) {
    double xv = or_get(&x, i), yv = or_get(&y, i), wv = or_get(&w, i);
    rb[i] = yv + xv;
    ra[i] = xv * 2 + rb[i];
    rc[i] = rb[i] * ra[i] + wv;
  }
  pr_t r;
  if (pr_parse(&r, src)) {
    CHECK(io_names_are(r.p, 0, 3, ins));
    CHECK(io_names_are(r.p, 1, 3, outs));
    named_t named[] = {{"x", &x}, {"y", &y}, {"w", &w}};
    OR_FOR_ENGINES(e) {
      CHECK(pr_run(&r, e, 3, named) == UJ_OK);
      expect_close(src, or_configs[e].name, &r.out[0], rb, OR_TOL_F64);
      expect_close(src, or_configs[e].name, &r.out[1], ra, OR_TOL_F64);
      expect_close(src, or_configs[e].name, &r.out[2], rc, OR_TOL_F64);
    }
  }
  pr_free(&r);
  or_tensor_free(&x);
  or_tensor_free(&y);
  or_tensor_free(&w);
}

/* A name read before it is assigned is both an input and an output. */
TEST(in_place_names) {
  pr_t r;
  if (pr_parse(&r, "p = p - 0.5 * g\nq = p * 2")) {
    static const char* const ins[] = {"p", "g"};
    static const char* const outs[] = {"p", "q"};
    CHECK(io_names_are(r.p, 0, 2, ins));
    CHECK(io_names_are(r.p, 1, 2, outs));
  }
  pr_free(&r);
  /* Identifiers are [A-Za-z_][A-Za-z0-9_]*, including names that are words
   * of other languages. */
  if (pr_parse(&r, "int = return_ + _x_0 * A9; _ = int; main = _ + 1")) {
    static const char* const ins[] = {"return_", "_x_0", "A9"};
    static const char* const outs[] = {"int", "main"};
    CHECK(io_names_are(r.p, 0, 3, ins));
    CHECK(io_names_are(r.p, 1, 2, outs));
  }
  pr_free(&r);
}

/* `x: f64` fixes x's dtype; mixed operands promote to the wider dtype. */
TEST(dtype_hints_and_promotion) {
  const int64_t n = 5;
  uj_tensor_t x64 = or_tensor(UJ_F64, 1, &n), y32 = or_tensor(UJ_F32, 1, &n);
  uint64_t st = 606;
  HARNESS_SEED(606);
  or_fill_real(&st, &x64, 0.5, 1.5);
  or_fill_real(&st, &y32, 0.5, 1.5);
  double ref[5];
  for (int i = 0; i < 5; i++) ref[i] = or_get(&x64, i) * 3 + or_get(&y32, i);
  pr_t r;
  if (pr_parse(&r, "x: f64\ny: f32; z = x * 3 + y")) {
    uj_dtype_t dt = UJ_I32;
    CHECK(uj_program_input_dtype(r.p, 0, &dt) == 1 && dt == UJ_F64);
    CHECK(uj_program_input_dtype(r.p, 1, &dt) == 1 && dt == UJ_F32);
    CHECK(uj_program_input_dtype(r.p, 2, &dt) == 0 && uj_program_input_dtype(r.p, -1, NULL) == 0);
    CHECK(uj_program_input_dtype(NULL, 0, &dt) == 0);
    named_t ok[] = {{"x", &x64}, {"y", &y32}};
    OR_FOR_ENGINES(e) {
      CHECK(pr_run(&r, e, 2, ok) == UJ_OK);
      CHECK(r.out[0].dtype == UJ_F64);
      expect_close("z = x * 3 + y", or_configs[e].name, &r.out[0], ref, OR_TOL_F64);
    }
  }
  pr_free(&r);
  /* Without hints, f32 with f64 promotes to f64. */
  if (pr_parse(&r, "z = x * 3 + y")) {
    CHECK(uj_program_input_dtype(r.p, 0, NULL) == 0);
    named_t mixed[] = {{"x", &x64}, {"y", &y32}};
    CHECK(pr_run(&r, 0, 2, mixed) == UJ_OK);
    CHECK(r.out[0].dtype == UJ_F64);
    expect_close("z = x * 3 + y", "interp", &r.out[0], ref, OR_TOL_F64);
  }
  pr_free(&r);
  or_tensor_free(&x64);
  or_tensor_free(&y32);
}

/* ---- broadcasting ------------------------------------------------------------------ */

/* z = a + b * 2 for a and b of the given shapes, checked against NumPy
 * broadcasting done by hand. */
static void check_broadcast(int na, const int64_t* da, int nb, const int64_t* db, int nz, const int64_t* dz,
                            uint64_t seed) {
  const char* src = "z = a + b * 2";
  uj_tensor_t a = or_tensor(UJ_F64, na, da), b = or_tensor(UJ_F64, nb, db);
  uint64_t st = seed;
  or_fill_real(&st, &a, -1, 1);
  or_fill_real(&st, &b, -1, 1);
  int64_t count = or_numel(nz, dz);
  double* ref = or_alloc_ref(count);
  for (int64_t f = 0; f < count; f++) {
    int64_t idx[UJ_MAX_DIMS], ia[UJ_MAX_DIMS], ib[UJ_MAX_DIMS];
    or_unravel(f, nz, dz, idx);
    for (int k = 0; k < na; k++) ia[k] = da[k] == 1 ? 0 : idx[k + nz - na];
    for (int k = 0; k < nb; k++) ib[k] = db[k] == 1 ? 0 : idx[k + nz - nb];
    ref[f] = or_get(&a, or_ravel(na, da, ia)) + 2 * or_get(&b, or_ravel(nb, db, ib));
  }
  pr_t r;
  named_t named[] = {{"a", &a}, {"b", &b}};
  if (pr_parse(&r, src))
    OR_FOR_ENGINES(e) {
      uj_status_t s = pr_run(&r, e, 2, named);
      if (s != UJ_OK) fprintf(stderr, "  %s: %s\n", or_configs[e].name, uj_last_error());
      CHECK(s == UJ_OK);
      CHECK(same_dims(&r.out[0], nz, dz));
      if (s == UJ_OK && same_dims(&r.out[0], nz, dz)) expect_close(src, or_configs[e].name, &r.out[0], ref, OR_TOL_F64);
    }
  pr_free(&r);
  free(ref);
  or_tensor_free(&a);
  or_tensor_free(&b);
}

TEST(broadcasting) {
  HARNESS_SEED(707);
  const int64_t row[1] = {5}, row2[2] = {1, 5}, col[2] = {4, 1}, mat[2] = {4, 5};
  check_broadcast(1, row, 2, col, 2, mat, 1);    /* row + column -> matrix */
  check_broadcast(2, col, 1, row, 2, mat, 2);
  check_broadcast(2, row2, 2, col, 2, mat, 3);   /* [1,5] + [4,1] */
  check_broadcast(2, mat, 2, row2, 2, mat, 4);   /* size-1 axes in an input */
  check_broadcast(2, mat, 2, col, 2, mat, 5);
  check_broadcast(2, mat, 0, NULL, 2, mat, 6);   /* a 0-d scalar */
  check_broadcast(0, NULL, 2, mat, 2, mat, 7);
  check_broadcast(0, NULL, 0, NULL, 0, NULL, 8); /* scalars only */
  const int64_t t3[3] = {3, 1, 5}, t3b[3] = {1, 4, 1}, t3z[3] = {3, 4, 5};
  check_broadcast(3, t3, 3, t3b, 3, t3z, 9);
  check_broadcast(3, t3, 1, row, 3, (const int64_t[]){3, 1, 5}, 10);
  const int64_t one[1] = {1};
  check_broadcast(1, one, 1, one, 1, one, 11);   /* every axis of size 1 */
  check_broadcast(1, one, 2, mat, 2, mat, 12);
  /* A different size-1 pattern reuses nothing wrong: run the same program
   * on two signatures in turn. */
  check_broadcast(2, mat, 2, mat, 2, mat, 13);
}

/* ---- Adam, a long chain, softmax ------------------------------------------------------ */

static double chain_ref(double x, double y) {
  double a = x * 2 + y;                    /* 2 ops */
  double b = exp(-a / 4);                  /* 3 */
  double c = sqrt(b + x) * tanh(y - 0.5);  /* 5 */
  return sigmoid(c) - fabs(log(x) * 0.25); /* 5 */
}

/* A chain of fifteen operations over temporaries. */
TEST(chain_of_twelve_ops) {
  const char* src = "_a = x * 2 + y\n_b = exp(-_a / 4)\n_c = sqrt(_b + x) * tanh(y - 0.5)\n"
                    "z = sigmoid(_c) - abs(log(x) * 0.25)";
  HARNESS_SEED(909);
  run_ew_case(src, chain_ref, UJ_F32, 909);
  run_ew_case(src, chain_ref, UJ_F64, 910);
  pr_t r;
  if (pr_parse(&r, src)) CHECK(r.nout == 1 && r.nin == 2);
  pr_free(&r);
}

/* src: `pieces` statements, each "<name> = <prev> + 1 + ... + 1" with
 * `ones` ones, the first reading x and the last named y. The caller frees. */
static char* chain_source(int pieces, int ones) {
  size_t cap = (size_t)pieces * ((size_t)ones * 4 + 16) + 1, len = 0;
  char* src = malloc(cap);
  for (int i = 0; src && i < pieces; i++) {
    len += (size_t)snprintf(src + len, cap - len, "%s = %s", i + 1 == pieces ? "y" : "a", i ? "a" : "x");
    for (int k = 0; k < ones; k++) len += (size_t)snprintf(src + len, cap - len, " + 1");
    len += (size_t)snprintf(src + len, cap - len, "\n");
  }
  return src;
}

/* Long programs: statements that each extend the last compile to a bounded
 * depth (12 of 250 additions once made an expression 3000 deep, and the
 * MIR lowering overflowed the stack), many short ones in linear time, and
 * a program past the compiler's size limit is refused with the reason. */
TEST(long_programs) {
  static const struct {
    int pieces, ones;
  } shapes[] = {{12, 250}, {2000, 1}};
  const int64_t n = 5;
  uj_tensor_t x = or_tensor(UJ_F64, 1, &n);
  uint64_t st = 1111;
  HARNESS_SEED(1111);
  or_fill_real(&st, &x, 0, 1);
  named_t named[] = {{"x", &x}};
  for (int c = 0; c < 2; c++) {
    char* src = chain_source(shapes[c].pieces, shapes[c].ones);
    double ref[5];
    for (int i = 0; i < 5; i++) ref[i] = or_get(&x, i) + shapes[c].pieces * shapes[c].ones;
    pr_t r;
    if (src && pr_parse(&r, src))
      OR_FOR_ENGINES(e) {
        uj_status_t s = pr_run(&r, e, 1, named);
        CHECK(s == UJ_OK);
        if (s != UJ_OK) printf("  %d x %d on %s: %s\n", shapes[c].pieces, shapes[c].ones, or_configs[e].name, uj_last_error());
        else expect_close("a chain", or_configs[e].name, pr_out(&r, "y"), ref, OR_TOL_F64);
      }
    pr_free(&r);
    free(src);
  }
  char* src = chain_source(5000, 1); /* 10000 operations: constants count */
  pr_t r;
  if (src && pr_parse(&r, src)) {
    CHECK(pr_run(&r, 0, 1, named) == UJ_ERR_UNSUPPORTED);
    CHECK(strstr(uj_last_error(), "the program has 10000 operations") != NULL);
  }
  pr_free(&r);
  free(src);
  or_tensor_free(&x);
}

TEST(softmax) {
  const char* src = "e = exp(x - amax(x, -1)); y = e / sum(e, -1)";
  const int64_t dims[2] = {6, 9};
  HARNESS_SEED(1010);
  for (int d = 0; d < 2; d++) {
    uj_dtype_t dt = d ? UJ_F64 : UJ_F32;
    uj_tensor_t x = or_tensor(dt, 2, dims);
    uint64_t st = 1010;
    or_fill_real(&st, &x, -5, 5);
    double re[54], ry[54];
    for (int i = 0; i < 6; i++) {
      double mx = -INFINITY, sum = 0;
      for (int j = 0; j < 9; j++) mx = fmax(mx, or_get(&x, i * 9 + j));
      for (int j = 0; j < 9; j++) sum += re[i * 9 + j] = exp(or_get(&x, i * 9 + j) - mx);
      for (int j = 0; j < 9; j++) ry[i * 9 + j] = re[i * 9 + j] / sum;
    }
    pr_t r;
    named_t named[] = {{"x", &x}};
    if (pr_parse(&r, src))
      OR_FOR_ENGINES(e) {
        CHECK(pr_run(&r, e, 1, named) == UJ_OK);
        uj_tensor_t *te = pr_out(&r, "e"), *ty = pr_out(&r, "y");
        CHECK(te && ty);
        if (te) expect_close("softmax e", or_configs[e].name, te, re, tol_of(dt));
        if (ty) expect_close("softmax y", or_configs[e].name, ty, ry, tol_of(dt));
      }
    pr_free(&r);
    or_tensor_free(&x);
  }
}

TEST_MAIN()
