/* tests/test_errors.c: every bad input through the public API returns a
 * status (or a negative id / NULL) instead of aborting, and uj_last_error()
 * then holds a fresh message naming the culprit: NULL handles, bad builder
 * arguments (ranks, dtypes, unknown ids, axes, index expressions), bad
 * program descriptions ($params, inputs), and at run time wrong counts,
 * ranks, sizes, dtypes, failed [=] assertions, overflowing and negative
 * sizes. Each run-time failure must leave the output buffers untouched.
 * Also uj_program_shape, uj_program_dump and the small name/size helpers.
 * Calls that would touch memory they must not are run in a child process so
 * that a crash is reported as a failure instead of ending the run. */
#include <sys/wait.h>
#include <unistd.h>

#include "oracle.h"

/* ---- fresh error messages ---------------------------------------------------------------- */

/* Leaves a known message behind, so a check can tell that the call under
 * test wrote its own. Two different primes for tests of the priming calls. */
static char primed[1024];
static void prime_with(int which) {
  if (which == 0) {
    uj_ctx_set_engine(NULL, UJ_ENGINE_INTERP);
  } else {
    uj_graph_t* g = uj_graph_new();
    uj_input(g, -77, UJ_F32);
    uj_graph_free(g);
  }
  snprintf(primed, sizeof primed, "%s", uj_last_error());
}
static void prime(void) { prime_with(0); }
static int fresh_error(void) {
  const char* e = uj_last_error();
  return e && e[0] && strcmp(e, primed) != 0;
}
static int error_has(const char* s) {
  const char* e = uj_last_error();
  return e && strstr(e, s) != NULL;
}
static void show_error(void) { fprintf(stderr, "    last error: \"%s\"\n", uj_last_error()); }

/* A builder call must return a negative id with a fresh message. */
#define EXPECT_BAD_ID(expr)                          \
  do {                                               \
    prime();                                         \
    uj_io_t bad_id_ = (expr);                        \
    CHECK(bad_id_ < 0);                              \
    CHECK(bad_id_ >= 0 || fresh_error());            \
  } while (0)
/* ... and the message must contain s (it names the culprit). */
#define EXPECT_BAD_ID_HAS(expr, s)                                        \
  do {                                                                    \
    EXPECT_BAD_ID(expr);                                                  \
    CHECK(error_has(s));                                                  \
    if (!error_has(s)) fprintf(stderr, "    want \"%s\" in it\n", (s)), show_error(); \
  } while (0)
#define EXPECT_STATUS(expr, want)                                                  \
  do {                                                                             \
    prime();                                                                       \
    uj_status_t st_ = (expr);                                                      \
    CHECK(st_ == (want));                                                          \
    CHECK(st_ == UJ_OK || fresh_error());                                          \
    if (st_ != (want)) fprintf(stderr, "    got %s\n", uj_status_str(st_)), show_error(); \
  } while (0)

/* Runs fn in a child process; 0 when it finished with no failed check. */
static int run_guarded(void (*fn)(void)) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    alarm(30);
    harness_failed_checks = 0;
    fn();
    fflush(stdout);
    fflush(stderr);
    _exit(harness_failed_checks ? 1 : 0);
  }
  int st = 0;
  if (waitpid(pid, &st, 0) < 0) return -1;
  if (WIFSIGNALED(st)) {
    fprintf(stderr, "  child died with signal %d\n", WTERMSIG(st));
    return 128 + WTERMSIG(st);
  }
  return WEXITSTATUS(st);
}

/* ---- tensors whose buffers must stay untouched ------------------------------------------- */

#define PATTERN 0x5A
static uj_tensor_t tens(uj_dtype_t dt, int ndim, const int64_t* dims) {
  uj_tensor_t t = or_tensor(dt, ndim, dims);
  memset(t.data, PATTERN, (size_t)(or_tnumel(&t) > 0 ? or_tnumel(&t) : 1) * or_dsize(dt));
  return t;
}
static int untouched(const uj_tensor_t* t) {
  int64_t n = or_tnumel(t);
  size_t bytes = (size_t)(n > 0 ? n : 1) * or_dsize(t->dtype);
  for (size_t i = 0; i < bytes; i++)
    if (((const unsigned char*)t->data)[i] != PATTERN) return 0;
  return 1;
}

/* ---- helpers, names ------------------------------------------------------------------------- */

TEST(names_sizes_and_free_null) {
  for (int s = UJ_OK; s <= UJ_ERR_IO; s++) CHECK(uj_status_str((uj_status_t)s) != NULL);
  CHECK(uj_status_str((uj_status_t)99) != NULL);
  CHECK(uj_status_str((uj_status_t)-1) != NULL);
  CHECK(strcmp(uj_status_str(UJ_ERR_SHAPE), "UJ_ERR_SHAPE") == 0);
  CHECK(uj_dtype_size(UJ_F32) == 4 && uj_dtype_size(UJ_F64) == 8 && uj_dtype_size(UJ_I32) == 4);
  CHECK(uj_dtype_size((uj_dtype_t)9) == 0);
  CHECK(strcmp(uj_dtype_name(UJ_F64), "f64") == 0 && strcmp(uj_dtype_name((uj_dtype_t)9), "?") == 0);
  CHECK(strcmp(uj_engine_name(UJ_ENGINE_INTERP), "interp") == 0);
  CHECK(strcmp(uj_engine_name((uj_engine_t)42), "?") == 0);
  uj_graph_free(NULL);
  uj_program_free(NULL);
  uj_ctx_free(NULL);
}

TEST(ctx_engine_choice) {
  uj_ctx_t* ctx = uj_ctx_new();
  CHECK(ctx != NULL);
  if (!ctx) return;
  CHECK(uj_engine_available(ctx, UJ_ENGINE_AUTO) && uj_engine_available(ctx, UJ_ENGINE_INTERP));
  CHECK(uj_ctx_set_engine(ctx, UJ_ENGINE_INTERP) == UJ_OK);
  CHECK(uj_ctx_engine(ctx) == UJ_ENGINE_INTERP);
  EXPECT_STATUS(uj_ctx_set_engine(ctx, (uj_engine_t)42), UJ_ERR_INVALID);
  EXPECT_STATUS(uj_ctx_set_engine(ctx, (uj_engine_t)-1), UJ_ERR_INVALID);
  CHECK(uj_ctx_engine(ctx) == UJ_ENGINE_INTERP);
  for (int e = UJ_ENGINE_MIR; e <= UJ_ENGINE_CUDA; e++)
    if (!uj_engine_available(ctx, (uj_engine_t)e)) {
      EXPECT_STATUS(uj_ctx_set_engine(ctx, (uj_engine_t)e), UJ_ERR_UNSUPPORTED);
      CHECK(uj_ctx_engine(ctx) == UJ_ENGINE_INTERP); /* unchanged */
    }
  prime_with(1);
  CHECK(uj_ctx_set_engine(NULL, UJ_ENGINE_INTERP) == UJ_ERR_INVALID);
  CHECK(fresh_error());
  uj_ctx_free(ctx);
}

/* ---- builders ------------------------------------------------------------------------------ */

TEST(builders_null_graph) {
  static const char* const sh[] = {"dA0"}, *ix[] = {"i0"};
  uj_io_t x = 0;
  int ax[] = {0};
  prime_with(1);
  CHECK(uj_input(NULL, 1, UJ_F32) < 0);
  CHECK(fresh_error());
  EXPECT_BAD_ID(uj_const(NULL, 1.0));
  EXPECT_BAD_ID(uj_reindex(NULL, 0, 1, sh, 1, &x, 1, ix));
  EXPECT_BAD_ID(uj_unary(NULL, UJ_UNARY_NEG, 0));
  EXPECT_BAD_ID(uj_binary(NULL, UJ_BINARY_ADD, 0, 0));
  EXPECT_BAD_ID(uj_where(NULL, 0, 0, 0));
  EXPECT_BAD_ID(uj_reduce(NULL, UJ_REDUCE_SUM, 1, ax, 0));
  EXPECT_BAD_ID(uj_select(NULL, 0, 0, 0));
  EXPECT_BAD_ID(uj_cast(NULL, UJ_F64, 0));
  EXPECT_BAD_ID(uj_grad(NULL, 0));
}

TEST(input_bad_rank_and_dtype) {
  uj_graph_t* g = uj_graph_new();
  EXPECT_BAD_ID(uj_input(g, -1, UJ_F32));
  EXPECT_BAD_ID_HAS(uj_input(g, 9, UJ_F32), "9");
  EXPECT_BAD_ID(uj_input(g, 1000, UJ_F64));
  EXPECT_BAD_ID_HAS(uj_input(g, 2, (uj_dtype_t)7), "7");
  EXPECT_BAD_ID(uj_input(g, 2, (uj_dtype_t)-1));
  CHECK(uj_input(g, 0, UJ_I32) >= 0);
  CHECK(uj_input(g, 8, UJ_F32) >= 0);
  uj_graph_free(g);
}

TEST(builders_unknown_ids) {
  static const char* const sh[] = {"dA0"}, *ix[] = {"i0"};
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_F32), xi = uj_input(g, 1, UJ_I32);
  int ax[] = {0};
  const uj_io_t bad[] = {-1, 9999, x + 1000};
  for (int k = 0; k < 3; k++) {
    uj_io_t b = bad[k];
    uj_io_t ssb[] = {b};
    EXPECT_BAD_ID(uj_unary(g, UJ_UNARY_EXP, b));
    EXPECT_BAD_ID(uj_binary(g, UJ_BINARY_ADD, b, x));
    EXPECT_BAD_ID(uj_binary(g, UJ_BINARY_ADD, x, b));
    EXPECT_BAD_ID(uj_where(g, b, x, x));
    EXPECT_BAD_ID(uj_where(g, x, b, x));
    EXPECT_BAD_ID(uj_where(g, x, x, b));
    EXPECT_BAD_ID(uj_reduce(g, UJ_REDUCE_SUM, 1, ax, b));
    EXPECT_BAD_ID(uj_select(g, 0, b, xi));
    EXPECT_BAD_ID(uj_select(g, 0, x, b));
    EXPECT_BAD_ID(uj_cast(g, UJ_F64, b));
    EXPECT_BAD_ID(uj_reindex(g, b, 1, sh, 1, &x, 1, ix));
    EXPECT_BAD_ID(uj_reindex(g, x, 1, sh, 1, ssb, 1, ix));
    EXPECT_BAD_ID(uj_grad(g, b));
  }
  EXPECT_BAD_ID_HAS(uj_unary(g, UJ_UNARY_EXP, 9999), "9999");
  EXPECT_BAD_ID_HAS(uj_binary(g, UJ_BINARY_ADD, x, 4242), "4242");
  /* ids of another graph are not nodes of this one */
  uj_graph_t* g2 = uj_graph_new();
  uj_io_t y2 = uj_input(g2, 1, UJ_F32);
  for (int i = 0; i < 5; i++) uj_input(g2, 1, UJ_F32);
  uj_io_t y6 = uj_unary(g2, UJ_UNARY_NEG, y2);
  EXPECT_BAD_ID(uj_unary(g, UJ_UNARY_NEG, y6));
  uj_graph_free(g2);
  /* op, dtype and enum values out of range */
  EXPECT_BAD_ID(uj_unary(g, (uj_unary_op_t)99, x));
  EXPECT_BAD_ID(uj_binary(g, (uj_binary_op_t)99, x, x));
  EXPECT_BAD_ID(uj_reduce(g, (uj_reduce_op_t)99, 1, ax, x));
  EXPECT_BAD_ID(uj_cast(g, (uj_dtype_t)9, x));
  uj_graph_free(g);
}

TEST(binary_dtype_mismatch) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t f = uj_input(g, 2, UJ_F32), d = uj_input(g, 2, UJ_F64), i = uj_input(g, 2, UJ_I32);
  EXPECT_BAD_ID_HAS(uj_binary(g, UJ_BINARY_ADD, f, d), "f64");
  CHECK(error_has("f32"));
  EXPECT_BAD_ID(uj_binary(g, UJ_BINARY_MUL, d, i));
  EXPECT_BAD_ID(uj_binary(g, UJ_BINARY_LT, i, f));
  EXPECT_BAD_ID(uj_where(g, f, f, d)); /* a and b differ */
  /* constants adopt the other side's dtype */
  CHECK(uj_binary(g, UJ_BINARY_ADD, d, uj_const(g, 1.0)) >= 0);
  CHECK(uj_binary(g, UJ_BINARY_ADD, i, uj_const(g, 1.0)) >= 0);
  CHECK(uj_binary(g, UJ_BINARY_ADD, f, d) < 0);
  uj_graph_free(g);
}

TEST(float_only_ops_refuse_i32) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t i = uj_input(g, 1, UJ_I32);
  static const uj_unary_op_t fl[] = {UJ_UNARY_EXP,  UJ_UNARY_LOG, UJ_UNARY_SQRT,
                                     UJ_UNARY_RSQRT, UJ_UNARY_RECIP, UJ_UNARY_SIN,
                                     UJ_UNARY_COS,  UJ_UNARY_TANH, UJ_UNARY_SIGMOID};
  for (size_t k = 0; k < sizeof fl / sizeof fl[0]; k++) EXPECT_BAD_ID_HAS(uj_unary(g, fl[k], i), "i32");
  CHECK(uj_unary(g, UJ_UNARY_NEG, i) >= 0);
  CHECK(uj_unary(g, UJ_UNARY_ABS, i) >= 0);
  CHECK(uj_unary(g, UJ_UNARY_FLOOR, i) >= 0);
  EXPECT_BAD_ID(uj_binary(g, UJ_BINARY_POW, i, i));
  uj_graph_free(g);
}

TEST(reduce_bad_axes) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 2, UJ_F32);
  int a2[] = {2}, am3[] = {-3}, dup[] = {1, 1}, dupneg[] = {1, -1}, ok[] = {-1, 0};
  EXPECT_BAD_ID_HAS(uj_reduce(g, UJ_REDUCE_SUM, 1, a2, x), "axis");
  EXPECT_BAD_ID(uj_reduce(g, UJ_REDUCE_MAX, 1, am3, x));
  EXPECT_BAD_ID_HAS(uj_reduce(g, UJ_REDUCE_SUM, 2, dup, x), "axis");
  EXPECT_BAD_ID(uj_reduce(g, UJ_REDUCE_ARGMAX, 2, dupneg, x));
  EXPECT_BAD_ID(uj_reduce(g, UJ_REDUCE_SUM, 1, NULL, x));
  EXPECT_BAD_ID(uj_reduce(g, UJ_REDUCE_SUM, -1, ok, x));
  EXPECT_BAD_ID(uj_reduce(g, UJ_REDUCE_SUM, 9, ok, x));
  CHECK(uj_reduce(g, UJ_REDUCE_SUM, 2, ok, x) >= 0);
  uj_graph_free(g);
}

TEST(select_bad_args) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 2, UJ_F32);
  uj_io_t fi = uj_input(g, 2, UJ_F32), i1 = uj_input(g, 1, UJ_I32), i2 = uj_input(g, 2, UJ_I32);
  EXPECT_BAD_ID_HAS(uj_select(g, 1, x, fi), "i32"); /* index not i32 */
  EXPECT_BAD_ID_HAS(uj_select(g, 1, x, i1), "rank"); /* index of another rank */
  EXPECT_BAD_ID(uj_select(g, 2, x, i2)); /* axis out of range */
  EXPECT_BAD_ID(uj_select(g, -3, x, i2));
  CHECK(uj_select(g, 1, x, i2) >= 0);
  uj_graph_free(g);
}

TEST(reindex_bad_args) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 2, UJ_F32);
  static const char* const sh2[] = {"dA0", "dA1"};
  static const char* const ix2[] = {"i0", "i1"}, *ix1[] = {"i0"};
  static const char* const ix_trail[] = {"i0 + ", "i1"};
  static const char* const sh_bad[] = {"dA0 *", "dA1"};
  static const char* const ix_hi[] = {"i0", "i2"};
  static const char* const ix_b[] = {"i0", "dB0"};
  static const char* const ix_ax[] = {"i0", "dA5"};
  static const char* const sh_assert[] = {"dA0[=dA7]", "dA1"};
  static const char* const ix_paren[] = {"(i0", "i1"};
  static const char* const ix_junk[] = {"i0)", "i1"};
  static const char* const ix_empty[] = {"", "i1"};
  static const char* const ix_char[] = {"i0 # 2", "i1"};
  static const char* const ix_null[] = {"i0", NULL};
  EXPECT_BAD_ID_HAS(uj_reindex(g, x, 2, sh2, 1, &x, 1, ix1), "rank"); /* index_count != rank of x */
  EXPECT_BAD_ID(uj_reindex(g, x, 2, sh2, 1, &x, 3, sh2));
  prime();
  CHECK(uj_reindex(g, x, 2, sh2, 1, &x, 2, ix_trail) < 0);
  CHECK(fresh_error() && error_has("at column"));
  if (!error_has("at column")) show_error();
  prime();
  CHECK(uj_reindex(g, x, 2, sh_bad, 1, &x, 2, ix2) < 0);
  CHECK(fresh_error() && error_has("at column"));
  if (!error_has("at column")) show_error();
  EXPECT_BAD_ID_HAS(uj_reindex(g, x, 2, sh2, 1, &x, 2, ix_hi), "i2"); /* beyond the output rank */
  EXPECT_BAD_ID_HAS(uj_reindex(g, x, 2, sh2, 1, &x, 2, ix_b), "dB0");  /* no source B */
  EXPECT_BAD_ID_HAS(uj_reindex(g, x, 2, sh2, 1, &x, 2, ix_ax), "dA5"); /* A has no axis 5 */
  EXPECT_BAD_ID(uj_reindex(g, x, 2, sh_assert, 1, &x, 2, ix2));
  EXPECT_BAD_ID(uj_reindex(g, x, 2, sh2, 0, NULL, 2, ix2));   /* dA0 with no sources */
  EXPECT_BAD_ID(uj_reindex(g, x, 2, sh2, 1, &x, 2, ix_paren));
  EXPECT_BAD_ID(uj_reindex(g, x, 2, sh2, 1, &x, 2, ix_junk));
  EXPECT_BAD_ID(uj_reindex(g, x, 2, sh2, 1, &x, 2, ix_empty));
  EXPECT_BAD_ID(uj_reindex(g, x, 2, sh2, 1, &x, 2, ix_char));
  EXPECT_BAD_ID(uj_reindex(g, x, 2, sh2, 1, &x, 2, ix_null));
  EXPECT_BAD_ID(uj_reindex(g, x, 2, NULL, 1, &x, 2, ix2));
  EXPECT_BAD_ID(uj_reindex(g, x, 2, sh2, 1, &x, 2, NULL));
  EXPECT_BAD_ID(uj_reindex(g, x, 2, sh2, 1, NULL, 2, ix2));
  EXPECT_BAD_ID(uj_reindex(g, x, -1, sh2, 1, &x, 2, ix2));
  EXPECT_BAD_ID(uj_reindex(g, x, 9, sh2, 1, &x, 2, ix2));
  /* the message of a parse error carries the column of the fault */
  prime();
  static const char* const ix_col[] = {"i0 + ", "i1"};
  CHECK(uj_reindex(g, x, 2, sh2, 1, &x, 2, ix_col) < 0);
  CHECK(error_has("i0 + ") && error_has("column 6"));
  if (!error_has("column 6")) show_error();
  CHECK(uj_reindex(g, x, 2, sh2, 1, &x, 2, ix2) >= 0);
  uj_graph_free(g);
}

/* ---- programs ------------------------------------------------------------------------------ */

static uj_status_t new_program(uj_graph_t* g, int nin, const uj_io_t* ins, int np,
                               const char* const* params, int nout, const uj_io_t* outs,
                               uj_program_t** p) {
  uj_program_desc_t d;
  memset(&d, 0, sizeof d);
  d.input_count = nin, d.inputs = ins, d.param_count = np, d.params = params;
  d.output_count = nout, d.outputs = outs;
  return uj_program_new(g, &d, p);
}

TEST(program_new_errors) {
  static const char* const sh[] = {"dA0-$kh+1"}, *ix[] = {"i0+$kh-1"};
  uj_program_t* const SENT = (uj_program_t*)(uintptr_t)0x1234;
  uj_program_t* p = SENT;
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_F32), y = uj_input(g, 1, UJ_F32);
  uj_io_t s = uj_binary(g, UJ_BINARY_ADD, x, y);
  uj_io_t r = uj_reindex(g, x, 1, sh, 1, &x, 1, ix);
  uj_io_t both[] = {x, y}, twice[] = {x, x}, none[] = {-5};
  uj_program_desc_t d;
  memset(&d, 0, sizeof d);
  d.input_count = 2, d.inputs = both, d.output_count = 1, d.outputs = &s;

  EXPECT_STATUS(uj_program_new(NULL, &d, &p), UJ_ERR_INVALID);
  EXPECT_STATUS(uj_program_new(g, NULL, &p), UJ_ERR_INVALID);
  EXPECT_STATUS(uj_program_new(g, &d, NULL), UJ_ERR_INVALID);
  CHECK(p == SENT);
  /* an unknown $param: the message names it */
  EXPECT_STATUS(new_program(g, 1, &x, 0, NULL, 1, &r, &p), UJ_ERR_INVALID);
  CHECK(error_has("kh"));
  static const char* const other[] = {"$kw"};
  EXPECT_STATUS(new_program(g, 1, &x, 1, other, 1, &r, &p), UJ_ERR_INVALID);
  CHECK(error_has("kh"));
  /* a $param declared twice */
  static const char* const dup[] = {"$kh", "$kh"};
  EXPECT_STATUS(new_program(g, 1, &x, 2, dup, 1, &r, &p), UJ_ERR_INVALID);
  CHECK(error_has("kh"));
  /* a param without '$' (the message names it) */
  static const char* const nodollar[] = {"kh"};
  EXPECT_STATUS(new_program(g, 1, &x, 1, nodollar, 1, &r, &p), UJ_ERR_INVALID);
  CHECK(error_has("kh"));
  static const char* const empty[] = {""}, *bare[] = {"$"};
  EXPECT_STATUS(new_program(g, 1, &x, 1, empty, 1, &x, &p), UJ_ERR_INVALID);
  EXPECT_STATUS(new_program(g, 1, &x, 1, bare, 1, &x, &p), UJ_ERR_INVALID);
  /* an output that needs an input not listed */
  EXPECT_STATUS(new_program(g, 1, &x, 0, NULL, 1, &s, &p), UJ_ERR_INVALID);
  CHECK(error_has("input"));
  /* an input listed twice, a non-node input or output */
  EXPECT_STATUS(new_program(g, 2, twice, 0, NULL, 1, &x, &p), UJ_ERR_INVALID);
  EXPECT_STATUS(new_program(g, 1, none, 0, NULL, 1, &x, &p), UJ_ERR_INVALID);
  EXPECT_STATUS(new_program(g, 2, both, 0, NULL, 1, none, &p), UJ_ERR_INVALID);
  uj_io_t far = 100000;
  EXPECT_STATUS(new_program(g, 2, both, 0, NULL, 1, &far, &p), UJ_ERR_INVALID);
  /* negative counts and NULL arrays with counts */
  EXPECT_STATUS(new_program(g, -1, both, 0, NULL, 1, &s, &p), UJ_ERR_INVALID);
  EXPECT_STATUS(new_program(g, 2, NULL, 0, NULL, 1, &s, &p), UJ_ERR_INVALID);
  EXPECT_STATUS(new_program(g, 2, both, 0, NULL, 1, NULL, &p), UJ_ERR_INVALID);
  EXPECT_STATUS(new_program(g, 1, &x, 1, NULL, 1, &r, &p), UJ_ERR_INVALID);
  CHECK(p == SENT);
  /* and the good ones */
  static const char* const kh[] = {"$kh"};
  CHECK(new_program(g, 1, &x, 1, kh, 1, &r, &p) == UJ_OK && p != SENT);
  if (p != SENT) uj_program_free(p);
  p = SENT;
  CHECK(uj_program_new(g, &d, &p) == UJ_OK && p != SENT);
  if (p != SENT) uj_program_free(p);
  uj_graph_free(g);
}

/* ---- run-time errors ------------------------------------------------------------------------- */

/* The configuration (or_configs slot) under test in the run-time error tests. */
static int run_engine;

/* Runs and expects failure with status want (or any failure for want < 0),
 * a fresh message containing each of need[] (NULL-terminated), and every
 * output left untouched. */
static void expect_run_fail_(const char* file, int line, uj_ctx_t* ctx, uj_program_t* p,
                             const uj_tensor_t* const* in, int nin, const int64_t* params, int np,
                             uj_tensor_t* const* out, int nout, int want, const char* const* need) {
  char msg[1024];
  prime();
  uj_status_t s = uj_program_run(ctx, p, UJ_FORWARD, in, nin, params, np, out, nout);
  if (s == UJ_OK || (want >= 0 && (int)s != want)) {
    snprintf(msg, sizeof msg, "engine %s: got %s, want %s (%s)", or_configs[run_engine].name,
             uj_status_str(s), want >= 0 ? uj_status_str((uj_status_t)want) : "a failure",
             uj_last_error());
    harness_fail(file, line, msg);
  } else if (!fresh_error()) {
    harness_fail(file, line, "no fresh error message");
  }
  for (int k = 0; need && need[k]; k++)
    if (s != UJ_OK && !error_has(need[k])) {
      snprintf(msg, sizeof msg, "message \"%s\" lacks \"%s\"", uj_last_error(), need[k]);
      harness_fail(file, line, msg);
    }
  if (out)
    for (int k = 0; k < nout; k++)
      if (out[k] && out[k]->data && !untouched(out[k])) {
        snprintf(msg, sizeof msg, "output %d written by a failing run", k);
        harness_fail(file, line, msg);
      }
}
#define EXPECT_RUN_FAIL(ctx, p, in, nin, params, np, out, nout, want, need) \
  expect_run_fail_(__FILE__, __LINE__, (ctx), (p), (in), (nin), (params), (np), (out), (nout), (want), (need))

static uj_ctx_t* engine_ctx(void) { return or_ctx_new(run_engine); }

/* y = x + z over [3,6] f32 tensors. */
static uj_program_t* add_program(void) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 2, UJ_F32), z = uj_input(g, 2, UJ_F32);
  uj_io_t y = uj_binary(g, UJ_BINARY_ADD, x, z);
  uj_io_t ins[] = {x, z};
  uj_program_t* p = OR_PROGRAM(g, 2, ins, 0, NULL, 1, &y);
  uj_graph_free(g);
  return p;
}

static void run_errors_basic(void) {
  uj_ctx_t* ctx = engine_ctx();
  uj_program_t* p = add_program();
  CHECK(ctx && p);
  if (!ctx || !p) return;
  int64_t d36[2] = {3, 6}, d311[2] = {3, 11}, d18[1] = {18}, d336[3] = {1, 3, 6}, d37[2] = {3, 7};
  uj_tensor_t x = tens(UJ_F32, 2, d36), z = tens(UJ_F32, 2, d36), y = tens(UJ_F32, 2, d36);
  uj_tensor_t xd = tens(UJ_F64, 2, d36), yd = tens(UJ_F64, 2, d36), x3 = tens(UJ_F32, 3, d336);
  uj_tensor_t y11 = tens(UJ_F32, 2, d311), y18 = tens(UJ_F32, 1, d18), z7 = tens(UJ_F32, 2, d37);
  const uj_tensor_t* in[] = {&x, &z};
  uj_tensor_t* out[] = {&y};
  /* a good run first, to show the tensors are right */
  CHECK(uj_program_run(ctx, p, UJ_FORWARD, in, 2, NULL, 0, out, 1) == UJ_OK);
  memset(y.data, PATTERN, 18 * 4);

  EXPECT_RUN_FAIL(NULL, p, in, 2, NULL, 0, out, 1, UJ_ERR_INVALID, NULL);
  EXPECT_RUN_FAIL(ctx, NULL, in, 2, NULL, 0, out, 1, UJ_ERR_INVALID, NULL);
  EXPECT_RUN_FAIL(ctx, p, in, 1, NULL, 0, out, 1, -1, NULL);    /* input count */
  EXPECT_RUN_FAIL(ctx, p, in, 3, NULL, 0, out, 1, -1, NULL);
  EXPECT_RUN_FAIL(ctx, p, in, 2, NULL, 0, out, 0, -1, NULL);    /* output count */
  EXPECT_RUN_FAIL(ctx, p, NULL, 2, NULL, 0, out, 1, -1, NULL);
  EXPECT_RUN_FAIL(ctx, p, in, 2, NULL, 0, NULL, 1, -1, NULL);
  const uj_tensor_t* in_null[] = {&x, NULL};
  EXPECT_RUN_FAIL(ctx, p, in_null, 2, NULL, 0, out, 1, -1, NULL);
  uj_tensor_t* out_null[] = {NULL};
  EXPECT_RUN_FAIL(ctx, p, in, 2, NULL, 0, out_null, 1, -1, NULL);
  int64_t one = 1;
  EXPECT_RUN_FAIL(ctx, p, in, 2, &one, 1, out, 1, -1, NULL);    /* a param it does not have */
  /* input rank */
  static const char* const need_rank[] = {"input", "3", NULL};
  const uj_tensor_t* in_r3[] = {&x3, &z};
  EXPECT_RUN_FAIL(ctx, p, in_r3, 2, NULL, 0, out, 1, UJ_ERR_SHAPE, need_rank);
  /* operand sizes disagree */
  const uj_tensor_t* in_z7[] = {&x, &z7};
  EXPECT_RUN_FAIL(ctx, p, in_z7, 2, NULL, 0, out, 1, UJ_ERR_SHAPE, NULL);
  /* output sizes: the message names the output, the axis, expected and got */
  static const char* const need_out[] = {"output", "axis", "6", "11", NULL};
  uj_tensor_t* out11[] = {&y11};
  EXPECT_RUN_FAIL(ctx, p, in, 2, NULL, 0, out11, 1, UJ_ERR_SHAPE, need_out);
  static const char* const need_out_rank[] = {"output", NULL};
  uj_tensor_t* out18[] = {&y18};
  EXPECT_RUN_FAIL(ctx, p, in, 2, NULL, 0, out18, 1, UJ_ERR_SHAPE, need_out_rank);
  /* dtypes */
  static const char* const need_din[] = {"input", "f64", NULL}, *need_dout[] = {"output", "f64", NULL};
  const uj_tensor_t* in_d[] = {&xd, &z};
  EXPECT_RUN_FAIL(ctx, p, in_d, 2, NULL, 0, out, 1, UJ_ERR_INVALID, need_din);
  uj_tensor_t* out_d[] = {&yd};
  EXPECT_RUN_FAIL(ctx, p, in, 2, NULL, 0, out_d, 1, UJ_ERR_INVALID, need_dout);
  /* GPU tensors: this engine runs on the CPU (AUTO would pick CUDA where it
   * is available, and the buffers here are host memory, so not there) */
  if (!(or_configs[run_engine].engine == UJ_ENGINE_AUTO && uj_engine_available(ctx, UJ_ENGINE_CUDA))) {
    uj_tensor_t xg = x, yg = y;
    xg.device = UJ_CUDA, yg.device = UJ_CUDA;
    const uj_tensor_t* in_g[] = {&xg, &z};
    uj_tensor_t* out_g[] = {&yg};
    for (int k = 0; k < 2; k++) {
      prime();
      uj_status_t sg = k ? uj_program_run(ctx, p, UJ_FORWARD, in, 2, NULL, 0, out_g, 1)
                         : uj_program_run(ctx, p, UJ_FORWARD, in_g, 2, NULL, 0, out, 1);
      CHECK(sg == UJ_ERR_UNSUPPORTED || sg == UJ_ERR_INVALID);
      CHECK(fresh_error());
      CHECK(untouched(&y));
    }
  }
  /* a backward pass the program does not have */
  prime();
  CHECK(uj_program_run(ctx, p, UJ_BACKWARD, in, 2, NULL, 0, out, 1) != UJ_OK);
  CHECK(untouched(&y));
  CHECK(uj_program_run(ctx, p, (uj_pass_t)7, in, 2, NULL, 0, out, 1) != UJ_OK);
  CHECK(untouched(&y));
  /* negative sizes in a tensor */
  int64_t dneg[2] = {-3, -6};
  uj_tensor_t xneg = x;
  xneg.dims[0] = dneg[0], xneg.dims[1] = dneg[1];
  const uj_tensor_t* in_neg[] = {&xneg, &z};
  EXPECT_RUN_FAIL(ctx, p, in_neg, 2, NULL, 0, out, 1, UJ_ERR_SHAPE, NULL);
  /* a tensor with an invalid dtype or device value */
  uj_tensor_t xbad = x;
  xbad.dtype = (uj_dtype_t)9;
  const uj_tensor_t* in_bad[] = {&xbad, &z};
  EXPECT_RUN_FAIL(ctx, p, in_bad, 2, NULL, 0, out, 1, -1, NULL);
  xbad = x;
  xbad.device = (uj_device_t)9;
  EXPECT_RUN_FAIL(ctx, p, in_bad, 2, NULL, 0, out, 1, -1, NULL);
  or_tensor_free(&x), or_tensor_free(&z), or_tensor_free(&y), or_tensor_free(&xd);
  or_tensor_free(&yd), or_tensor_free(&x3), or_tensor_free(&y11), or_tensor_free(&y18);
  or_tensor_free(&z7);
  uj_program_free(p);
  uj_ctx_free(ctx);
}

/* Sizes whose products overflow int64 (inputs of 2^80 elements, an output
 * of 2^66 computed from a 2^22 input) and NULL data: rejected before any
 * data is touched. */
static void run_errors_overflow(void) {
  uj_ctx_t* ctx = engine_ctx();
  uj_program_t* p = add_program();
  CHECK(ctx && p);
  if (!ctx || !p) return;
  float small[16];
  unsigned char ybuf[64];
  memset(ybuf, PATTERN, sizeof ybuf);
  uj_tensor_t x = {small, UJ_F32, UJ_CPU, 2, {(int64_t)1 << 40, (int64_t)1 << 40}};
  uj_tensor_t xn = {NULL, UJ_F32, UJ_CPU, 2, {(int64_t)1 << 40, (int64_t)1 << 40}};
  uj_tensor_t y = {ybuf, UJ_F32, UJ_CPU, 2, {(int64_t)1 << 40, (int64_t)1 << 40}};
  const uj_tensor_t* in[] = {&x, &x};
  const uj_tensor_t* inn[] = {&xn, &xn};
  uj_tensor_t* out[] = {&y};
  prime();
  CHECK(uj_program_run(ctx, p, UJ_FORWARD, in, 2, NULL, 0, out, 1) == UJ_ERR_SHAPE);
  CHECK(fresh_error());
  CHECK(uj_program_run(ctx, p, UJ_FORWARD, inn, 2, NULL, 0, out, 1) == UJ_ERR_SHAPE);
  for (size_t i = 0; i < sizeof ybuf; i++) CHECK(ybuf[i] == PATTERN);
  /* NULL data on tensors of ordinary size */
  uj_tensor_t a = {NULL, UJ_F32, UJ_CPU, 2, {3, 4}};
  uj_tensor_t b = {small, UJ_F32, UJ_CPU, 2, {3, 4}};
  uj_tensor_t c = {ybuf, UJ_F32, UJ_CPU, 2, {3, 4}};
  uj_tensor_t cn = {NULL, UJ_F32, UJ_CPU, 2, {3, 4}};
  const uj_tensor_t* in2[] = {&a, &b};
  const uj_tensor_t* in3[] = {&b, &b};
  uj_tensor_t* out2[] = {&c};
  uj_tensor_t* out3[] = {&cn};
  CHECK(uj_program_run(ctx, p, UJ_FORWARD, in2, 2, NULL, 0, out2, 1) != UJ_OK);
  CHECK(uj_program_run(ctx, p, UJ_FORWARD, in3, 2, NULL, 0, out3, 1) != UJ_OK);
  for (size_t i = 0; i < sizeof ybuf; i++) CHECK(ybuf[i] == PATTERN);
  uj_program_free(p);

  /* an output of 2^66 elements from a 2^22-element input */
  static const char* const sh[] = {"dA0", "dA0", "dA0"}, *ix[] = {"i0"};
  uj_graph_t* g = uj_graph_new();
  uj_io_t v = uj_input(g, 1, UJ_F32);
  uj_io_t cube = uj_reindex(g, v, 3, sh, 1, &v, 1, ix);
  p = OR_PROGRAM(g, 1, &v, 0, NULL, 1, &cube);
  uj_graph_free(g);
  if (p) {
    int64_t n = (int64_t)1 << 22;
    float* vbuf = calloc((size_t)n, sizeof(float));
    uj_tensor_t tv = {vbuf, UJ_F32, UJ_CPU, 1, {n}};
    uj_tensor_t ty = {ybuf, UJ_F32, UJ_CPU, 3, {n, n, n}};
    const uj_tensor_t* vin[] = {&tv};
    uj_tensor_t* vout[] = {&ty};
    CHECK(uj_program_run(ctx, p, UJ_FORWARD, vin, 1, NULL, 0, vout, 1) == UJ_ERR_SHAPE);
    int ndim = -1;
    int64_t dims[UJ_MAX_DIMS];
    CHECK(uj_program_shape(p, UJ_FORWARD, vin, NULL, 0, &ndim, dims) == UJ_ERR_SHAPE);
    for (size_t i = 0; i < sizeof ybuf; i++) CHECK(ybuf[i] == PATTERN);
    free(vbuf);
    uj_program_free(p);
  }
  uj_ctx_free(ctx);
}

/* conv: a failed [=] assertion, a filter bigger than the input, params. */
static void run_errors_conv(void) {
  uj_ctx_t* ctx = engine_ctx();
  uj_program_t* p = or_conv_program(OR_CONV_DIMS, UJ_F32);
  uj_program_t* pk = or_conv_program(OR_CONV_PARAMS, UJ_F32);
  CHECK(ctx && p && pk);
  if (!ctx || !p || !pk) return;
  int64_t xd[4] = {1, 4, 4, 13}, wd[4] = {2, 2, 2, 17}, wd_ok[4] = {2, 2, 2, 13}, od[4] = {1, 3, 3, 2};
  int64_t wbig[4] = {2, 5, 2, 13};
  uj_tensor_t x = tens(UJ_F32, 4, xd), w = tens(UJ_F32, 4, wd), wok = tens(UJ_F32, 4, wd_ok);
  uj_tensor_t wb = tens(UJ_F32, 4, wbig), y = tens(UJ_F32, 4, od);
  uj_tensor_t* out[] = {&y};
  static const char* const need_eq[] = {"13", "17", NULL};
  const uj_tensor_t* in_bad[] = {&x, &w};
  EXPECT_RUN_FAIL(ctx, p, in_bad, 2, NULL, 0, out, 1, UJ_ERR_SHAPE, need_eq);
  const uj_tensor_t* in_big[] = {&x, &wb};
  EXPECT_RUN_FAIL(ctx, p, in_big, 2, NULL, 0, out, 1, UJ_ERR_SHAPE, NULL);
  const uj_tensor_t* in_ok[] = {&x, &wok};
  int64_t k22[2] = {2, 2}, k52[2] = {5, 2};
  EXPECT_RUN_FAIL(ctx, pk, in_ok, 2, k22, 1, out, 1, -1, NULL);  /* one param of two */
  EXPECT_RUN_FAIL(ctx, pk, in_ok, 2, k22, 3, out, 1, -1, NULL);
  EXPECT_RUN_FAIL(ctx, pk, in_ok, 2, NULL, 2, out, 1, -1, NULL);
  EXPECT_RUN_FAIL(ctx, pk, in_ok, 2, NULL, 0, out, 1, -1, NULL);
  EXPECT_RUN_FAIL(ctx, pk, in_ok, 2, k52, 2, out, 1, UJ_ERR_SHAPE, NULL); /* 4 - 5 + 1 = 0: out has 3 */
  int64_t kneg[2] = {7, 2};                                               /* 4 - 7 + 1 < 0 */
  EXPECT_RUN_FAIL(ctx, pk, in_ok, 2, kneg, 2, out, 1, UJ_ERR_SHAPE, NULL);
  /* and the good runs */
  memset(x.data, 0, 4 * 4 * 13 * 4);
  memset(wok.data, 0, 2 * 2 * 2 * 13 * 4);
  CHECK(uj_program_run(ctx, p, UJ_FORWARD, in_ok, 2, NULL, 0, out, 1) == UJ_OK);
  CHECK(uj_program_run(ctx, pk, UJ_FORWARD, in_ok, 2, k22, 2, out, 1) == UJ_OK);
  or_tensor_free(&x), or_tensor_free(&w), or_tensor_free(&wok), or_tensor_free(&wb);
  or_tensor_free(&y);
  uj_program_free(p);
  uj_program_free(pk);
  uj_ctx_free(ctx);
}

TEST(run_errors_interp) {
  run_engine = 0;
  CHECK(run_guarded(run_errors_basic) == 0);
  CHECK(run_guarded(run_errors_conv) == 0);
  CHECK(run_guarded(run_errors_overflow) == 0);
}
TEST(run_errors_auto) {
  run_engine = 1;
  CHECK(run_guarded(run_errors_basic) == 0);
  CHECK(run_guarded(run_errors_conv) == 0);
  CHECK(run_guarded(run_errors_overflow) == 0);
}
TEST(run_errors_raw_ir) {
  run_engine = 2;
  CHECK(run_guarded(run_errors_basic) == 0);
  CHECK(run_guarded(run_errors_conv) == 0);
  CHECK(run_guarded(run_errors_overflow) == 0);
}

/* ---- shapes and dumps ------------------------------------------------------------------------ */

TEST(program_shape) {
  uj_program_t* p = or_conv_program(OR_CONV_PAD, UJ_F64);
  CHECK(p != NULL);
  if (!p) return;
  int64_t xd[4] = {2, 6, 5, 3}, wd[4] = {4, 3, 2, 3}, wbad[4] = {4, 3, 2, 5};
  uj_tensor_t x = tens(UJ_F64, 4, xd), w = tens(UJ_F64, 4, wd), wb = tens(UJ_F64, 4, wbad);
  const uj_tensor_t* in[] = {&x, &w};
  const uj_tensor_t* in_bad[] = {&x, &wb};
  int64_t pad = 1;
  int ndim = -1;
  int64_t dims[UJ_MAX_DIMS] = {0};
  CHECK(uj_program_shape(p, UJ_FORWARD, in, &pad, 0, &ndim, dims) == UJ_OK);
  CHECK(ndim == 4 && dims[0] == 2 && dims[1] == 6 && dims[2] == 6 && dims[3] == 4);
  ndim = -7;
  dims[0] = -7;
  EXPECT_STATUS(uj_program_shape(NULL, UJ_FORWARD, in, &pad, 0, &ndim, dims), UJ_ERR_INVALID);
  EXPECT_STATUS(uj_program_shape(p, UJ_FORWARD, in, &pad, 1, &ndim, dims), UJ_ERR_INVALID);
  EXPECT_STATUS(uj_program_shape(p, UJ_FORWARD, in, &pad, -1, &ndim, dims), UJ_ERR_INVALID);
  EXPECT_STATUS(uj_program_shape(p, UJ_FORWARD, in, &pad, 0, NULL, dims), UJ_ERR_INVALID);
  EXPECT_STATUS(uj_program_shape(p, UJ_FORWARD, in, &pad, 0, &ndim, NULL), UJ_ERR_INVALID);
  prime();
  CHECK(uj_program_shape(p, UJ_FORWARD, NULL, &pad, 0, &ndim, dims) != UJ_OK);
  CHECK(fresh_error());
  prime();
  CHECK(uj_program_shape(p, UJ_FORWARD, in, NULL, 0, &ndim, dims) != UJ_OK); /* $pad missing */
  CHECK(fresh_error());
  EXPECT_STATUS(uj_program_shape(p, UJ_FORWARD, in_bad, &pad, 0, &ndim, dims), UJ_ERR_SHAPE);
  CHECK(ndim == -7 && dims[0] == -7); /* untouched by the failures */
  or_tensor_free(&x), or_tensor_free(&w), or_tensor_free(&wb);
  uj_program_free(p);
}

static int count_block_lines(const char* s) {
  int n = 0;
  for (const char* l = s; l && *l;) {
    if (strncmp(l, "block", 5) == 0) n++;
    const char* nl = strchr(l, '\n');
    l = nl ? nl + 1 : NULL;
  }
  return n;
}

TEST(program_dump) {
  uj_ctx_t* ctx = uj_ctx_new();
  uj_program_t* p = or_conv_program(OR_CONV_DIMS, UJ_F32);
  uj_program_t* pk = or_conv_program(OR_CONV_PARAMS, UJ_F32);
  CHECK(ctx && p && pk);
  if (!ctx || !p || !pk) return;
  for (int w = UJ_DUMP_IR_RAW; w <= UJ_DUMP_IR; w++) {
    char* s = uj_program_dump(ctx, p, UJ_FORWARD, (uj_dump_t)w, NULL);
    CHECK(s != NULL);
    if (s) {
      CHECK(count_block_lines(s) >= 1);
      CHECK(strstr(s, "for (") != NULL);
      free(s);
    }
  }
  /* with and without $param values */
  int64_t k[2] = {3, 2};
  char* s1 = uj_program_dump(ctx, pk, UJ_FORWARD, UJ_DUMP_IR, NULL);
  char* s2 = uj_program_dump(ctx, pk, UJ_FORWARD, UJ_DUMP_IR, k);
  CHECK(s1 && s2);
  if (s1) CHECK(strstr(s1, "kh") != NULL && count_block_lines(s1) >= 1);
  if (s2) CHECK(count_block_lines(s2) >= 1);
  free(s1);
  free(s2);
  /* code dumps: C and CUDA source need no compiler (nor GPU) to be written;
   * MIR's text form needs MIR in the build: a string, or NULL with a message */
  static const uj_dump_t what[] = {UJ_DUMP_C, UJ_DUMP_C_AOT, UJ_DUMP_MIR, UJ_DUMP_CUDA};
  static const uj_engine_t eng[] = {UJ_ENGINE_INTERP, UJ_ENGINE_INTERP, UJ_ENGINE_MIR, UJ_ENGINE_INTERP};
  for (int i = 0; i < 4; i++) {
    prime();
    char* s = uj_program_dump(ctx, p, UJ_FORWARD, what[i], NULL);
    if (!uj_engine_available(ctx, eng[i])) CHECK(s == NULL); /* needs its engine */
    if (eng[i] == UJ_ENGINE_INTERP) CHECK(s != NULL);
    if (!s) {
      CHECK(fresh_error());
    } else {
      CHECK(s[0] != '\0');
      free(s);
    }
  }
  prime();
  CHECK(uj_program_dump(ctx, NULL, UJ_FORWARD, UJ_DUMP_IR, NULL) == NULL);
  CHECK(fresh_error());
  prime();
  CHECK(uj_program_dump(ctx, p, UJ_FORWARD, (uj_dump_t)42, NULL) == NULL);
  CHECK(fresh_error());
  uj_program_free(p);
  uj_program_free(pk);
  uj_ctx_free(ctx);
}

TEST_MAIN()
