/* tests/test_parse_inplace.c: in-place updates in the expression language:
 * an input passed again as the output of the same name. The Adam update
 * over p, m and v as shared buffers against naive Adam in double (and its
 * IR being one block), and programs whose outputs read other elements of
 * the inputs they overwrite, which must behave as if every read came
 * before the write (softmax among them, whose output holds its exp values
 * between two blocks). */
#include "parse_check.h"

#define ADAM_SRC "m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; p = p - lr*m/(sqrt(v)+eps)"

/* The update in place: p, m and v are passed as the same buffers for input
 * and output, against naive Adam in double. */
static void check_adam(uj_dtype_t dt, int slot) {
  const int64_t n = 1000;
  uj_tensor_t p = or_tensor(dt, 1, &n), g = or_tensor(dt, 1, &n), m = or_tensor(dt, 1, &n), v = or_tensor(dt, 1, &n);
  uj_tensor_t lr = or_tensor(dt, 0, NULL), b1 = or_tensor(dt, 0, NULL), b2 = or_tensor(dt, 0, NULL),
              eps = or_tensor(dt, 0, NULL);
  uint64_t st = 808;
  or_fill_real(&st, &p, -1, 1);
  or_fill_real(&st, &g, -1, 1);
  or_fill_real(&st, &m, -0.1, 0.1);
  or_fill_real(&st, &v, 0, 0.01);
  or_set(&lr, 0, 1e-3);
  or_set(&b1, 0, 0.9);
  or_set(&b2, 0, 0.999);
  or_set(&eps, 0, 1e-8);
  double *rp = or_alloc_ref(n), *rm = or_alloc_ref(n), *rv = or_alloc_ref(n);
  for (int64_t i = 0; i < n; i++) {
    double B1 = or_get(&b1, 0), B2 = or_get(&b2, 0), gi = or_get(&g, i);
    rm[i] = B1 * or_get(&m, i) + (1 - B1) * gi;
    rv[i] = B2 * or_get(&v, i) + (1 - B2) * gi * gi;
    rp[i] = or_get(&p, i) - or_get(&lr, 0) * rm[i] / (sqrt(rv[i]) + or_get(&eps, 0));
  }
  uj_program_t* prog = NULL;
  CHECK(uj_program_parse(ADAM_SRC, &prog) == UJ_OK);
  static const char* const ins[] = {"b1", "m", "g", "b2", "v", "p", "lr", "eps"};
  static const char* const outs[] = {"m", "v", "p"};
  if (prog) {
    CHECK(io_names_are(prog, 0, 8, ins));
    CHECK(io_names_are(prog, 1, 3, outs));
    const uj_tensor_t* in[8] = {&b1, &m, &g, &b2, &v, &p, &lr, &eps};
    uj_tensor_t* out[3] = {&m, &v, &p};
    uj_status_t s = or_program_run(slot, prog, UJ_FORWARD, in, 8, NULL, 0, out, 3);
    if (s != UJ_OK) fprintf(stderr, "  %s\n", uj_last_error());
    CHECK(s == UJ_OK);
    double tol = dt == UJ_F64 ? OR_TOL_F64 : OR_TOL_F32;
    expect_close("adam m", or_configs[slot].name, &m, rm, tol);
    expect_close("adam v", or_configs[slot].name, &v, rv, tol);
    expect_close("adam p", or_configs[slot].name, &p, rp, tol);
  }
  uj_program_free(prog);
  free(rp), free(rm), free(rv);
  uj_tensor_t* all[] = {&p, &g, &m, &v, &lr, &b1, &b2, &eps};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) or_tensor_free(all[i]);
}

TEST(adam_in_place) {
  HARNESS_SEED(808);
  OR_FOR_ENGINES(e) {
    check_adam(UJ_F32, e);
    check_adam(UJ_F64, e);
  }
}

/* After the passes Adam is one block: one line of the dump starts with
 * "block". */
TEST(adam_is_one_block) {
  uj_program_t* p = NULL;
  CHECK(uj_program_parse(ADAM_SRC, &p) == UJ_OK);
  if (!p) return;
  const int64_t n = 16;
  uj_tensor_t t[8];
  const uj_tensor_t* in[8];
  for (int i = 0; i < 8; i++) {
    const char* name = uj_program_io_name(p, 0, i);
    int scalar = !strcmp(name, "b1") || !strcmp(name, "b2") || !strcmp(name, "lr") || !strcmp(name, "eps");
    t[i] = or_tensor(UJ_F32, scalar ? 0 : 1, &n);
    in[i] = &t[i];
  }
  int nd;
  int64_t dims[UJ_MAX_DIMS];
  CHECK(uj_program_shape(p, UJ_FORWARD, in, NULL, 0, &nd, dims) == UJ_OK); /* selects the build */
  uj_ctx_t* ctx = uj_ctx_new();
  char* text = uj_program_dump(ctx, p, UJ_FORWARD, UJ_DUMP_IR, NULL);
  CHECK(text != NULL);
  int blocks = 0;
  for (const char* line = text; line && *line;) {
    if (!strncmp(line, "block", 5)) blocks++;
    const char* nl = strchr(line, '\n');
    line = nl ? nl + 1 : NULL;
  }
  if (blocks != 1) fprintf(stderr, "  %d blocks:\n%s\n", blocks, text ? text : "");
  CHECK(blocks == 1);
  free(text);
  uj_ctx_free(ctx);
  uj_program_free(p);
  for (int i = 0; i < 8; i++) or_tensor_free(&t[i]);
}

/* ---- in-place aliasing -------------------------------------------------------------- */

/* The expected outputs from copies of the original x and y ([rows, cols]). */
typedef void (*alias_ref_fn)(const double* x, const double* y, int rows, int cols, double* rx, double* ry);

static void ref_scale(const double* x, const double* y, int rows, int cols, double* rx, double* ry) {
  (void)y, (void)ry;
  for (int i = 0; i < rows * cols; i++) rx[i] = x[i] * 2 + 1;
}
static void ref_sub_max(const double* x, const double* y, int rows, int cols, double* rx, double* ry) {
  (void)y, (void)ry;
  for (int i = 0; i < rows; i++) {
    double m = -INFINITY;
    for (int j = 0; j < cols; j++) m = fmax(m, x[i * cols + j]);
    for (int j = 0; j < cols; j++) rx[i * cols + j] = x[i * cols + j] - m;
  }
}
static void ref_div_sum_all(const double* x, const double* y, int rows, int cols, double* rx, double* ry) {
  (void)y, (void)ry;
  double s = 0;
  for (int i = 0; i < rows * cols; i++) s += x[i];
  for (int i = 0; i < rows * cols; i++) rx[i] = x[i] / s;
}
static void ref_col_mean(const double* x, const double* y, int rows, int cols, double* rx, double* ry) {
  (void)y, (void)ry;
  for (int j = 0; j < cols; j++) {
    double s = 0;
    for (int i = 0; i < rows; i++) s += x[i * cols + j];
    for (int i = 0; i < rows; i++) rx[i * cols + j] = x[i * cols + j] - s / rows;
  }
}
/* Softmax over each row; with sub, x minus the softmax of y's rows. */
static void ref_softmax_rows(const double* src, const double* x, int sub, int rows, int cols, double* rx) {
  for (int i = 0; i < rows; i++) {
    double m = -INFINITY, s = 0;
    for (int j = 0; j < cols; j++) m = fmax(m, src[i * cols + j]);
    for (int j = 0; j < cols; j++) s += exp(src[i * cols + j] - m);
    for (int j = 0; j < cols; j++)
      rx[i * cols + j] = (sub ? x[i * cols + j] : 0) + (sub ? -1 : 1) * exp(src[i * cols + j] - m) / s;
  }
}
static void ref_softmax(const double* x, const double* y, int rows, int cols, double* rx, double* ry) {
  (void)y, (void)ry;
  ref_softmax_rows(x, x, 0, rows, cols, rx);
}
static void ref_sub_softmax_of_y(const double* x, const double* y, int rows, int cols, double* rx, double* ry) {
  (void)ry;
  ref_softmax_rows(y, x, 1, rows, cols, rx);
}
static void ref_both(const double* x, const double* y, int rows, int cols, double* rx, double* ry) {
  for (int i = 0; i < rows * cols; i++) {
    rx[i] = x[i] + y[i];
    ry[i] = rx[i] * 2;
  }
}
static void ref_cross(const double* x, const double* y, int rows, int cols, double* rx, double* ry) {
  /* x reads y's old row maximum, y reads x's old row sum. */
  for (int i = 0; i < rows; i++) {
    double my = -INFINITY, sx = 0;
    for (int j = 0; j < cols; j++) my = fmax(my, y[i * cols + j]), sx += x[i * cols + j];
    for (int j = 0; j < cols; j++) {
      rx[i * cols + j] = x[i * cols + j] - my;
      ry[i * cols + j] = y[i * cols + j] + sx;
    }
  }
}

TEST(in_place_aliasing) {
  static const struct {
    const char* src;
    alias_ref_fn ref;
    int outputs_y;
  } cases[] = {
      {"x = x * 2 + 1", ref_scale, 0},
      {"x = x - amax(x, -1)", ref_sub_max, 0},
      {"x = x / sum(x)", ref_div_sum_all, 0},
      {"x = x - mean(x, 0)", ref_col_mean, 0},
      {"x = x + y; y = x * 2", ref_both, 1},
      {"_my = amax(y, 1); _sx = sum(x, 1); x = x - _my; y = y + _sx", ref_cross, 1},
      /* the exp values staged in the output (ir/into_output.c), which is
       * then not written over x; and left out where x could be */
      {"_e = exp(x - amax(x, -1)); x = _e / sum(_e, -1)", ref_softmax, 0},
      {"_e = exp(y - amax(y, -1)); x = x - _e / sum(_e, -1)", ref_sub_softmax_of_y, 0},
  };
  enum { ROWS = 5, COLS = 8 };
  const int64_t dims[2] = {ROWS, COLS};
  HARNESS_SEED(1111);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    OR_FOR_ENGINES(e) {
      uj_tensor_t x = or_tensor(UJ_F64, 2, dims), y = or_tensor(UJ_F64, 2, dims);
      uint64_t st = 1111 + c;
      or_fill_real(&st, &x, 0.5, 1.5);
      or_fill_real(&st, &y, 0.5, 1.5);
      double *x0 = or_to_double(&x), *y0 = or_to_double(&y);
      double rx[ROWS * COLS], ry[ROWS * COLS];
      cases[c].ref(x0, y0, ROWS, COLS, rx, ry);
      uj_program_t* p = NULL;
      CHECK(uj_program_parse(cases[c].src, &p) == UJ_OK);
      if (p) {
        /* Inputs and outputs by name, the same tensor for a shared name. */
        const uj_tensor_t* in[2];
        uj_tensor_t* out[2];
        int nin = uj_program_io_count(p, 0), nout = uj_program_io_count(p, 1);
        for (int i = 0; i < nin; i++) in[i] = strcmp(uj_program_io_name(p, 0, i), "x") ? &y : &x;
        for (int i = 0; i < nout; i++) out[i] = strcmp(uj_program_io_name(p, 1, i), "x") ? &y : &x;
        uj_status_t s = or_program_run(e, p, UJ_FORWARD, in, nin, NULL, 0, out, nout);
        if (s != UJ_OK) fprintf(stderr, "  \"%s\": %s\n", cases[c].src, uj_last_error());
        CHECK(s == UJ_OK);
        CHECK(nout == 1 + cases[c].outputs_y);
        expect_close(cases[c].src, or_configs[e].name, &x, rx, OR_TOL_F64);
        if (cases[c].outputs_y) expect_close(cases[c].src, or_configs[e].name, &y, ry, OR_TOL_F64);
        else expect_close(cases[c].src, or_configs[e].name, &y, y0, 0);
      }
      uj_program_free(p);
      free(x0);
      free(y0);
      or_tensor_free(&x);
      or_tensor_free(&y);
    }
}

TEST_MAIN()
