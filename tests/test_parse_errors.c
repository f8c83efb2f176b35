/* tests/test_parse_errors.c: the error paths of the expression language.
 * Every parser error is UJ_ERR_PARSE with "line L, column C" at the right
 * place and says what was expected; hostile sources (a megabyte of
 * parentheses, over 1 MiB, non-ASCII bytes) fail quickly and cleanly; run
 * time errors (an axis out of range, operands whose sizes differ) are
 * UJ_ERR_SHAPE and write nothing; NULL arguments are refused; and no user
 * identifier reaches generated code. */
#include "oracle.h"

/* Parses src expecting UJ_ERR_PARSE at line:column with `what` in the
 * message, and *out left alone. */
static void expect_parse_error(const char* src, int line, int column, const char* what) {
  uj_program_t* sentinel = (uj_program_t*)&sentinel;
  uj_program_t* p = sentinel;
  uj_status_t s = uj_program_parse(src, &p);
  char where[64];
  snprintf(where, sizeof where, "line %d, column %d:", line, column);
  const char* msg = uj_last_error();
  int ok = s == UJ_ERR_PARSE && strstr(msg, where) && strstr(msg, what) && p == sentinel;
  if (!ok) {
    char m[512];
    snprintf(m, sizeof m, "\"%.60s\": got %s \"%s\", expected UJ_ERR_PARSE at %s with \"%s\"", src, uj_status_str(s),
             msg, where, what);
    harness_fail(__FILE__, __LINE__, m);
  }
  if (p != sentinel) uj_program_free(p);
}

TEST(syntax_errors) {
  static const struct {
    const char* src;
    int line, column;
    const char* what;
  } cases[] = {
      /* unbalanced parentheses, both ways */
      {"y = (x + 1", 1, 11, "expected ')', found the end of the program"},
      {"y = ((x)", 1, 9, "expected ')'"},
      {"y = x + 1)", 1, 10, "expected ';' or the end of the line, found ')'"},
      {"y = ()", 1, 6, "expected an expression, found ')'"},
      /* functions */
      {"y = foo(x)", 1, 5, "unknown function 'foo'"},
      {"y = erff(x)", 1, 5, "unknown function 'erff'; the functions are abs, exp, log, sqrt, rsqrt"},
      {"y = gelu(x)", 1, 5, "erf, erfc, log1p"},
      {"y = gelu(x)", 1, 5, "atan2, hypot, copysign, mod, fmod, relu, softplus, clamp"},
      {"y = gelu(x)", 1, 5, "sum, mean, prod, amax, amin"},
      {"y = x ^ 2", 1, 7, "unexpected character '^'"},
      {"y = x &", 1, 8, "expected"},
      {"y = ~", 1, 6, "expected"},
      {"y = exp(x, x)", 1, 12, "exp takes 1 argument"},
      {"y = min(x)", 1, 10, "min takes 2 arguments"},
      {"y = where(x, x)", 1, 15, "where takes 3 arguments"},
      {"y = sum(x, 9)", 1, 12, "expected an axis"},
      {"y = sum(x, 1.5)", 1, 12, "expected an axis"},
      {"y = sum(x, 1e10)", 1, 12, "expected an axis"},
      {"y = sum(x, -3000000000)", 1, 13, "expected an axis"},
      {"y = sum(x, y)", 1, 12, "expected an axis"},
      /* statements */
      {"3 = x", 1, 1, "expected a name at the start of a statement, found '3'"},
      {"y = x; = 2", 1, 8, "expected a name at the start of a statement"},
      {"y == x", 1, 3, "expected '=' after the name, found '=='"},
      {"", 1, 1, "no statements"},
      {"# only a comment\n  # and another\n", 3, 1, "no statements"},
      {"_t = x", 1, 1, "no outputs"},
      /* operands */
      {"x = 1 +", 1, 8, "expected an expression, found the end of the program"},
      {"y = -", 1, 6, "expected an expression"},
      {"y = x ** ", 1, 10, "expected an expression"},
      {"y = x\nz = (x +\n 1", 2, 9, "expected an expression, found the end of the line"},
      /* trailing tokens */
      {"x = 1 2", 1, 7, "expected ';' or the end of the line, found '2'"},
      {"y = x,", 1, 6, "found ','"},
      {"y = x < y < z", 1, 11, "found '<'"},
      /* characters and bytes */
      {"y = x @ 2", 1, 7, "unexpected character '@'"},
      {"y = x\x01", 1, 6, "unexpected byte 0x01"},
      {"y = x\xff", 1, 6, "byte 0xff is not ASCII"},
      {"y = x \xc2\xb7 2", 1, 7, "byte 0xc2 is not ASCII"},
      {"y = x\n\n  z = \xe2\x88\x9ax", 3, 7, "not ASCII"},
      /* numbers */
      {"y = 1e999 * x", 1, 5, "number out of range"},
      /* dtype hints */
      {"x: f8\ny = x", 1, 4, "expected a dtype (f32, f64, i32, bf16 or f16), found 'f8'"},
      {"y = x\nx: f64", 2, 1, "must come before its first use"},
      {"y = 2\ny: f64\nz = y", 2, 1, "must come before its first use"},
      /* a second hint for a name, even the same dtype, names the second */
      {"x: f32; x: f64\ny = x", 1, 9, "a second dtype hint for 'x' (the first, f32, is at line 1, column 1)"},
      {"x: f32\ny: f64\n  x: f32\nz = x + y", 3, 3, "a second dtype hint for 'x' (the first, f32, is at line 1"},
      {"p: bf16\np: bf16; p = m", 2, 1, "a second dtype hint for 'p'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect_parse_error(cases[i].src, cases[i].line, cases[i].column, cases[i].what);
}

/* A reduction takes one optional axis: sum(x, 0, 1) is an error, not
 * sum(x, 1). */
TEST(reduction_takes_one_axis) {
  expect_parse_error("y = sum(x, 0, 1)", 1, 15, "sum takes");
  expect_parse_error("y = amax(x, -1, -1)", 1, 17, "amax takes");
}

/* Hostile sizes fail quickly with a message, never by running out of
 * stack. */
TEST(deep_and_huge_sources) {
  size_t n = 1000000;
  char* src = malloc(n + 16);
  if (!src) return;
  /* a megabyte of nested parentheses */
  memcpy(src, "y = ", 4);
  memset(src + 4, '(', n);
  src[4 + n] = 0;
  uj_program_t* p = NULL;
  CHECK(uj_program_parse(src, &p) == UJ_ERR_PARSE);
  CHECK(strstr(uj_last_error(), "line 1, column") && strstr(uj_last_error(), "nested deeper"));
  CHECK(p == NULL);
  /* the same with a balanced close */
  memset(src + 4, '(', n / 2);
  src[4 + n / 2] = 'x';
  memset(src + 5 + n / 2, ')', n / 2);
  src[5 + n] = 0;
  CHECK(uj_program_parse(src, &p) == UJ_ERR_PARSE);
  /* a megabyte of unary minus */
  memset(src + 4, '-', n);
  src[4 + n] = 'x';
  src[5 + n] = 0;
  CHECK(uj_program_parse(src, &p) == UJ_ERR_PARSE);
  CHECK(strstr(uj_last_error(), "line 1, column") != NULL);
  /* a megabyte of one operator chain is no nesting: it parses (building
   * it is refused, quickly, past 8192 operations: test_parse_limits.c) */
  size_t k = 4;
  while (k + 4 < n) memcpy(src + k, "x + ", 4), k += 4;
  src[k] = 'x', src[k + 1] = 0;
  CHECK(uj_program_parse(src, &p) == UJ_OK);
  uj_program_free(p);
  p = NULL;
  free(src);
  /* over 1 MiB, even if it would parse */
  size_t big = (1u << 20) + 8;
  src = malloc(big + 1);
  if (!src) return;
  memset(src, ' ', big);
  memcpy(src, "y = x", 5);
  src[big] = 0;
  CHECK(uj_program_parse(src, &p) == UJ_ERR_PARSE);
  CHECK(strstr(uj_last_error(), "line 1, column 1") && strstr(uj_last_error(), "longer than"));
  CHECK(p == NULL);
  free(src);
  /* nesting within the limit is fine */
  char ok[256 + 64];
  strcpy(ok, "y = ");
  for (int i = 0; i < 40; i++) strcat(ok, "(");
  strcat(ok, "x");
  for (int i = 0; i < 40; i++) strcat(ok, ")");
  CHECK(uj_program_parse(ok, &p) == UJ_OK);
  uj_program_free(p);
}

TEST(null_arguments) {
  uj_program_t* p = NULL;
  CHECK(uj_program_parse(NULL, &p) == UJ_ERR_INVALID);
  CHECK(p == NULL);
  CHECK(uj_program_parse("y = x", NULL) == UJ_ERR_INVALID);
  CHECK(uj_program_io_count(NULL, 0) == -1);
  CHECK(uj_program_io_count(NULL, 1) == -1);
  CHECK(uj_program_io_name(NULL, 0, 0) == NULL);
  CHECK(uj_program_parse("y = x * 2", &p) == UJ_OK);
  if (!p) return;
  CHECK(uj_program_io_name(p, 0, 1) == NULL);
  CHECK(uj_program_io_name(p, 1, 1) == NULL);
  CHECK(uj_program_io_name(p, 0, -1) == NULL);
  int nd;
  int64_t dims[UJ_MAX_DIMS];
  uj_dtype_t dt;
  CHECK(uj_program_shape(p, UJ_FORWARD, NULL, NULL, 0, &nd, dims) != UJ_OK);
  const uj_tensor_t* null_in[1] = {NULL};
  CHECK(uj_program_shape(p, UJ_FORWARD, null_in, NULL, 0, &nd, dims) == UJ_ERR_INVALID);
  CHECK(uj_program_output_dtype(p, UJ_FORWARD, null_in, 0, &dt) == UJ_ERR_INVALID);
  uj_ctx_t* ctx = uj_ctx_new();
  const int64_t n = 3;
  uj_tensor_t x = or_tensor(UJ_F32, 1, &n), y = or_tensor(UJ_F32, 1, &n);
  const uj_tensor_t* in[1] = {&x};
  uj_tensor_t* out[1] = {&y};
  CHECK(uj_program_run(ctx, p, UJ_FORWARD, NULL, 1, NULL, 0, out, 1) == UJ_ERR_INVALID);
  CHECK(uj_program_run(ctx, p, UJ_FORWARD, in, 1, NULL, 0, NULL, 1) == UJ_ERR_INVALID);
  CHECK(uj_program_run(ctx, p, UJ_FORWARD, in, 2, NULL, 0, out, 1) == UJ_ERR_INVALID);
  CHECK(uj_program_run(ctx, p, UJ_BACKWARD, in, 1, NULL, 0, out, 1) == UJ_ERR_INVALID);
  CHECK(uj_program_run(NULL, p, UJ_FORWARD, in, 1, NULL, 0, out, 1) == UJ_ERR_INVALID);
  /* a dtype that is none: named with its input, not taken for OOM */
  uj_tensor_t bad = x;
  bad.dtype = (uj_dtype_t)7;
  const uj_tensor_t* bad_in[1] = {&bad};
  CHECK(uj_program_output_dtype(p, UJ_FORWARD, bad_in, 0, &dt) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "input 0 (\"x\"): unknown dtype 7") != NULL);
  CHECK(uj_program_run(ctx, p, UJ_FORWARD, bad_in, 1, NULL, 0, out, 1) == UJ_ERR_INVALID);
  /* a uop program has no io names */
  uj_graph_t* g = uj_graph_new();
  uj_io_t a = uj_input(g, 1, UJ_F32);
  uj_io_t b = uj_unary(g, UJ_UNARY_EXP, a);
  uj_program_desc_t d = {.input_count = 1, .inputs = &a, .output_count = 1, .outputs = &b};
  uj_program_t* q = NULL;
  CHECK(uj_program_new(g, &d, &q) == UJ_OK);
  CHECK(uj_program_io_name(q, 0, 0) == NULL);
  CHECK(uj_program_io_name(q, 1, 0) == NULL);
  CHECK(uj_program_io_count(q, 0) == 1);
  uj_program_free(q);
  uj_graph_free(g);
  uj_ctx_free(ctx);
  or_tensor_free(&x);
  or_tensor_free(&y);
  uj_program_free(p);
}

/* An axis out of range for the input's rank is found when the rank is
 * known, at run time: UJ_ERR_SHAPE with the source position, nothing
 * written. */
TEST(axis_out_of_range_at_run_time) {
  static const char* const srcs[] = {"y = sum(x, 2)", "y = mean(x, -3)", "y = x - amax(x, 5)"};
  const int64_t dims[2] = {3, 4};
  for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
    uj_program_t* p = NULL;
    CHECK(uj_program_parse(srcs[i], &p) == UJ_OK);
    if (!p) continue;
    uj_tensor_t x = or_tensor(UJ_F32, 2, dims), y = or_tensor(UJ_F32, 2, dims);
    or_fill_sentinel(&y);
    const uj_tensor_t* in[1] = {&x};
    uj_tensor_t* out[1] = {&y};
    uj_status_t s = uj_program_run(or_ctx(0), p, UJ_FORWARD, in, 1, NULL, 0, out, 1);
    CHECK(s == UJ_ERR_SHAPE);
    CHECK(strstr(uj_last_error(), "line 1, column") && strstr(uj_last_error(), "axis"));
    CHECK(isnan(or_get(&y, 0)));
    int nd;
    int64_t d[UJ_MAX_DIMS];
    CHECK(uj_program_shape(p, UJ_FORWARD, in, NULL, 0, &nd, d) == UJ_ERR_SHAPE);
    /* the same program is fine for a higher rank */
    const int64_t d6[6] = {2, 2, 1, 2, 2, 3};
    uj_tensor_t x4 = or_tensor(UJ_F32, 6, d6);
    const uj_tensor_t* in4[1] = {&x4};
    CHECK(uj_program_shape(p, UJ_FORWARD, in4, NULL, 0, &nd, d) == UJ_OK);
    or_tensor_free(&x4);
    or_tensor_free(&x);
    or_tensor_free(&y);
    uj_program_free(p);
  }
}

/* Operands whose sizes differ (neither is 1) fail at run time with
 * UJ_ERR_SHAPE naming both operands and the axis, and nothing is written.
 * A name operand is named as such, a compound one by its position. */
TEST(broadcast_mismatch) {
  static const struct {
    int na;
    int64_t da[2];
    int nb;
    int64_t db[2];
    const char* axis;
  } cases[] = {{1, {3}, 1, {4}, "axis 0"}, {2, {4, 5}, 2, {4, 6}, "axis 1"}, {2, {2, 5}, 1, {6}, "axis 1"}};
  static const char* const srcs[2] = {"z = alpha + beta", "z = alpha * 2 + beta"};
  static const char* const left[2] = {"'alpha'", "line 1, column"};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int v = 0; v < 2; v++) {
      uj_tensor_t a = or_tensor(UJ_F32, cases[c].na, cases[c].da), b = or_tensor(UJ_F32, cases[c].nb, cases[c].db);
      uj_tensor_t out = or_tensor(UJ_F32, cases[c].na, cases[c].da);
      or_fill_sentinel(&out);
      uj_program_t* p = NULL;
      CHECK(uj_program_parse(srcs[v], &p) == UJ_OK);
      const uj_tensor_t* in[2] = {&a, &b};
      uj_tensor_t* outs[1] = {&out};
      for (int e = 0; p && e < OR_NENGINES; e++) {
        uj_status_t s = or_program_run(e, p, UJ_FORWARD, in, 2, NULL, 0, outs, 1);
        const char* msg = s == UJ_ERR_SHAPE ? uj_last_error() : "";
        if (s != UJ_ERR_SHAPE || !strstr(msg, left[v]) || !strstr(msg, "'beta'") || !strstr(msg, cases[c].axis))
          fprintf(stderr, "  \"%s\" case %d on %s: %s \"%s\"\n", srcs[v], (int)c, or_configs[e].name,
                  uj_status_str(s), msg);
        CHECK(s == UJ_ERR_SHAPE);
        CHECK(strstr(msg, left[v]) != NULL);
        CHECK(strstr(msg, "'beta'") != NULL);
        CHECK(strstr(msg, cases[c].axis) != NULL);
        CHECK(isnan(or_get(&out, 0)));
      }
      int nd;
      int64_t dims[UJ_MAX_DIMS];
      if (p) CHECK(uj_program_shape(p, UJ_FORWARD, in, NULL, 0, &nd, dims) == UJ_ERR_SHAPE);
      uj_program_free(p);
      or_tensor_free(&a);
      or_tensor_free(&b);
      or_tensor_free(&out);
    }
}

/* A dtype hint is binding: a tensor of another dtype is refused by name. */
TEST(hint_mismatch) {
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("x: f64\ny = x * 2", &p) == UJ_OK);
  if (!p) return;
  const int64_t n = 4;
  uj_tensor_t x = or_tensor(UJ_F32, 1, &n), y = or_tensor(UJ_F64, 1, &n);
  const uj_tensor_t* in[1] = {&x};
  uj_tensor_t* out[1] = {&y};
  CHECK(uj_program_run(or_ctx(0), p, UJ_FORWARD, in, 1, NULL, 0, out, 1) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "\"x\"") && strstr(uj_last_error(), "f64"));
  or_tensor_free(&x);
  or_tensor_free(&y);
  uj_program_free(p);
}

/* Names become slots and numbers become doubles: none of the source's
 * identifiers appears in generated code. Only testable where an engine
 * that dumps code exists. */
TEST(identifiers_never_reach_generated_code) {
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("evil_out_qz = sneaky_in_qz * 2 + system_qz; _tmp_qz = evil_out_qz", &p) == UJ_OK);
  if (!p) return;
  uj_ctx_t* ctx = uj_ctx_new();
  static const uj_dump_t kinds[] = {UJ_DUMP_C, UJ_DUMP_MIR, UJ_DUMP_CUDA};
  int dumped = 0;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    char* text = uj_program_dump(ctx, p, UJ_FORWARD, kinds[i], NULL);
    if (!text) continue;
    dumped++;
    CHECK(strstr(text, "_qz") == NULL);
    free(text);
  }
  uj_ctx_free(ctx);
  uj_program_free(p);
  SKIP_IF(!dumped, "no engine dumps generated code in this build");
}

TEST_MAIN()
