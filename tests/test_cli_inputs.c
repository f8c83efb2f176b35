/* tests/test_cli_inputs.c: the command-line tool's per-input shapes and
 * dtypes (--shape NAME=DIMS, --dtype NAME=DT, broadcasting from the command
 * line, aot's list of inputs and outputs) and the checks that fit what is
 * computed (reductions judged by their length, the bound named on failure,
 * the magnitude form of a program, the oracle's sum bound), run as a
 * separate process through tests/cli_check.h. */
#include "cli_check.h"
#include "oracle.h"

/* The magnitude rewrite of `run --check`, tested on its own below. */
#include "../tools/cli_magnitude.c"

/* ---- per-input shapes and dtypes ---------------------------------------------------------- */

/* The CPU engines this build and machine have, by name. */
static int cpu_engines(const char* names[3]) {
  static const uj_engine_t engines[3] = {UJ_ENGINE_INTERP, UJ_ENGINE_MIR, UJ_ENGINE_C};
  uj_ctx_t* ctx = uj_ctx_new();
  int n = 0;
  for (int i = 0; i < 3; i++)
    if (ctx && uj_engine_available(ctx, engines[i])) names[n++] = uj_engine_name(engines[i]);
  uj_ctx_free(ctx);
  return n;
}

TEST(run_broadcasts_per_input_shapes) {
  NEED_CLI();
  const char* engines[3];
  int n = cpu_engines(engines);
  CHECK(n >= 1);
  for (int e = 0; e < n; e++) {
    /* a row vector and a scalar */
    result_t r = run_cli("run", "y = max(x + b, 0) * s", "--shape", "x=64,130", "--shape", "b=130", "--scalar", "s",
                         "--check", "--engine", engines[e], NULL);
    if (r.status != 0 || !strstr(r.out, "check: ok")) result_show(engines[e], &r);
    CHECK(r.status == 0 && strstr(r.out, "check: ok") != NULL);
    CHECK(strstr(r.out, "inputs x[64,130] b[130] s[], outputs y[64,130]") != NULL);
    result_free(&r);
    /* a column beside the default shape for the others, in the = form */
    r = run_cli("run", "y = x * c - z", "--shape=c=64,1", "--shape", "64,130", "--check", "--engine", engines[e], NULL);
    if (r.status != 0 || !strstr(r.out, "check: ok")) result_show(engines[e], &r);
    CHECK(r.status == 0 && strstr(r.out, "check: ok") != NULL);
    CHECK(strstr(r.out, "inputs x[64,130] c[64,1] z[64,130], outputs y[64,130]") != NULL);
    result_free(&r);
  }
  /* a per-input dtype beside the default one, which the header shows */
  result_t r = run_cli("run", "y = x * 3 + z", "--dtype", "x=f64", "--shape", "5", "--check", "--engine", "interp", NULL);
  if (r.status != 0) result_show("--dtype x=f64", &r);
  CHECK(r.status == 0 && strstr(r.out, "check: ok") != NULL);
  CHECK(strstr(r.out, "engine interp, f32, inputs x:f64[5] z[5], outputs y:f64[5]") != NULL);
  result_free(&r);
  /* the same spec twice is no conflict; sizes that do not broadcast are the
   * library's shape error, naming both */
  r = run_cli("run", "y = x + b", "--shape", "b=4", "--shape", "b=4", "--shape", "x=3,4", "--check", NULL);
  CHECK(r.status == 0);
  result_free(&r);
  r = run_cli("run", "y = x + b", "--shape", "x=4", "--shape", "b=5", "--check", NULL);
  CHECK(r.status == 1);
  CHECK(strstr(r.err, "UJ_ERR_SHAPE") != NULL && strstr(r.err, "'b'") != NULL);
  result_free(&r);
}

TEST(per_input_spec_errors) {
  NEED_CLI();
  static const struct {
    const char* args[6];
    const char* message; /* a part of what stderr must say */
  } cases[] = {
      /* a name that is not an input: named, with the inputs listed */
      {{"y = x + b", "--shape", "q=4"}, "--shape names \"q\", which is not an input of the program (inputs: x b)"},
      {{"y = x + b", "--dtype", "zz=f64"}, "--dtype names \"zz\", which is not an input of the program (inputs: x b)"},
      {{"y = x + b", "--scalar", "b,w"}, "--scalar names \"w\", which is not an input of the program (inputs: x b)"},
      /* malformed NAME=DIMS */
      {{"y = x + b", "--shape", "x="}, "--shape wants DIMS or NAME=DIMS"},
      {{"y = x + b", "--shape", "=4"}, "wants an input's name"},
      {{"y = x + b", "--shape", "1x=4"}, "wants an input's name"},
      {{"y = x + b", "--shape", "x=4,,5"}, "got \"x=4,,5\""},
      {{"y = x + b", "--shape", "x=0"}, "got \"x=0\""},
      {{"y = x + b", "--shape", "x=1,2,3,4,5,6,7,8,9"}, "1 to 8 sizes"},
      {{"y = x + b", "--dtype", "x=f8"}, "--dtype wants f32, f64, bf16 or f16, plain or as NAME=DTYPE, got \"x=f8\""},
      {{"y = x + b", "--scalar", "b,"}, "--scalar wants input names"},
      /* conflicting specs */
      {{"y = x + b", "--shape", "x=4", "--shape", "x=5"}, "conflicting --shape for input x: 4, then 5"},
      {{"y = x + b", "--shape", "4", "--shape", "5"}, "conflicting plain --shape: 4, then 5"},
      {{"y = x + b", "--scalar", "b", "--shape", "b=5"}, "conflicting shapes for input b: 0-d (--scalar), then 5"},
      {{"y = x + b", "--dtype", "b=f32", "--dtype", "b=f64"}, "conflicting --dtype for input b: f32, then f64"},
      {{"x: f64; y = x + b", "--dtype", "x=f32"}, "the program declares x: f64, --dtype says f32"},
  };
  static const char* const commands[] = {"run", "dump", "aot"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int c = 0; c < 3; c++) {
      const char* const* a = cases[i].args;
      const char* out = temp_path("spec.c");
      result_t r = c == 2 ? run_cli(commands[c], "-o", out, a[0], a[1], a[2], a[3], a[4], a[5], NULL)
                          : run_cli(commands[c], a[0], a[1], a[2], a[3], a[4], a[5], NULL);
      if (r.status != 2 || !strstr(r.err, cases[i].message)) {
        printf("  expected \"%s\"\n", cases[i].message);
        result_show(commands[c], &r);
      }
      CHECK(r.status == 2);
      CHECK(strstr(r.err, cases[i].message) != NULL);
      CHECK(!file_exists(out));
      result_free(&r);
    }
}

TEST(aot_names_inputs_and_outputs_in_order) {
  NEED_CLI();
  const char* out = temp_path("named.c");
  result_t r = run_cli("aot", "y = max(x + b, 0) * s; _t = sum(x, -1); m = _t * 2", "--shape", "x=64,130", "--shape",
                       "b=130", "--scalar", "s", "--dtype", "b=f64", "-o", out, NULL);
  if (r.status != 0) result_show("aot", &r);
  CHECK(r.status == 0);
  char* text = read_whole(out);
  const char* expected =
      " * inputs:\n"
      " *   0 x  f32, rank 2 [n, n]\n"
      " *   1 b  f64, rank 1 [n]\n"
      " *   2 s  f32, 0-d\n"
      " * outputs:\n"
      " *   0 y  f64, rank 2 [n, n]\n"
      " *   1 m  f32, rank 2 [n, 1]\n"
      " */\n";
  if (!strstr(text, expected)) printf("  got:\n%.600s\n", text);
  CHECK(strncmp(text, "/* uopjit aot: ", 15) == 0);
  CHECK(strstr(text, expected) != NULL);
  CHECK(strstr(text, "int uopjit_kernel_run(") != NULL);
  free(text);
  result_free(&r);
}

/* ---- checks that fit what is computed ------------------------------------------------------ */

/* A file of the source tree (bench/sumsq.uj), found above the binary's
 * directory (build/ or build/debug/); NULL when it is not there. */
static char* source_file(const char* relative) {
  char dir[PATH_MAX], path[PATH_MAX + 64];
  snprintf(dir, sizeof dir, "%s", cli_path);
  for (int up = 0; up < 4; up++) {
    char* slash = strrchr(dir, '/');
    if (!slash) break;
    *slash = '\0';
    snprintf(path, sizeof path, "%s/%s", dir, relative);
    if (file_exists(path)) return read_whole(path);
  }
  return NULL;
}

#define ROW_VARIANCE "_m = mean(x, -1); v = mean((x - _m)*(x - _m), -1)"

/* sumsq (an f32 sum of 10^6 squares) and a row-wise variance at 4096x1027
 * pass --check on every CPU engine, each judged as a reduction of its own
 * length; both once failed the elementwise bound on every engine. */
TEST(run_check_judges_reductions_by_their_length) {
  NEED_CLI();
  char* sumsq = source_file("bench/sumsq.uj");
  char* args = source_file("bench/sumsq.args");
  CHECK(sumsq != NULL && args != NULL);
  if (!sumsq || !args) {
    free(sumsq);
    free(args);
    return;
  }
  CHECK(strspn(args, " \n") == strlen(args)); /* sumsq takes no arguments: the default shape */
  sumsq[strcspn(sumsq, "\n")] = '\0';
  const char* engines[3];
  int n = cpu_engines(engines);
  for (int e = 0; e < n; e++) {
    result_t r = run_cli("run", "--check", sumsq, "--engine", engines[e], NULL);
    if (r.status != 0 || !strstr(r.out, "check: ok")) result_show(engines[e], &r);
    CHECK(r.status == 0 && strstr(r.out, "check: ok") != NULL);
    CHECK(strstr(r.out, "bound: output s, a reduction: |error| <= 1e-05*max(1,|ref|) + gamma_n*sum|terms| "
                        "(n=1000000 terms, u=2^-24") != NULL);
    result_free(&r);
    r = run_cli("run", "--check", ROW_VARIANCE, "--shape", "4096,1027", "--engine", engines[e], NULL);
    if (r.status != 0 || !strstr(r.out, "check: ok")) result_show(engines[e], &r);
    CHECK(r.status == 0 && strstr(r.out, "check: ok") != NULL);
    CHECK(strstr(r.out, "outputs v[4096,1]") != NULL);
    CHECK(strstr(r.out, "(n=1027 terms, u=2^-24") != NULL);
    result_free(&r);
  }
  /* in f64 the same reductions are held to u = 2^-53 */
  result_t r = run_cli("run", "--check", sumsq, "--dtype", "f64", "--shape", "4096", "--engine", "interp", NULL);
  CHECK(r.status == 0 && strstr(r.out, "(n=4096 terms, u=2^-53") != NULL);
  result_free(&r);
  free(sumsq);
  free(args);
}

TEST(run_check_failure_names_the_bound) {
  NEED_CLI();
  /* f32 overflows to inf in a sum whose f64 reference is finite */
  result_t r = run_cli("run", "--check", "s = sum(exp(x * 100))", "--shape", "8", "--engine", "interp", NULL);
  if (r.status != 1) result_show("sum(exp(x * 100))", &r);
  CHECK(r.status == 1);
  CHECK(strstr(r.out, "check: FAILED output s element 0") != NULL);
  CHECK(strstr(r.out, "1e-05*max(1,|ref|) + gamma_n*sum|terms| (n=8 terms, u=2^-24") != NULL);
  CHECK(strstr(r.out, "sum|terms|=") != NULL);
  result_free(&r);
  /* elementwise: the bound is 1e-5 relative, and says so */
  r = run_cli("run", "--check", "y = exp(x * 100)", "--shape", "8", "--engine", "interp", NULL);
  CHECK(r.status == 1);
  CHECK(strstr(r.out, "> bound inf") == NULL);
  CHECK(strstr(r.out, "= 1e-05*max(1,|ref|))") != NULL);
  result_free(&r);
  /* amax rounds nothing: judged elementwise even though it is smaller */
  r = run_cli("run", "--check", "m = amax(x, -1)", "--shape", "16,64", "--engine", "interp", NULL);
  CHECK(r.status == 0 && strstr(r.out, "check: ok") != NULL && strstr(r.out, "bound:") == NULL);
  result_free(&r);
}

TEST(run_time_of_a_reduction_is_per_input_element) {
  NEED_CLI();
  result_t r = run_cli("run", "s = sum(x*x)", "--shape", "4096", "--repeat", "1", NULL);
  CHECK(r.status == 0);
  CHECK(strstr(r.out, " ns/element of input x[4096], ") != NULL);
  result_free(&r);
  r = run_cli("run", "y = x + b", "--shape", "x=64,32", "--shape", "b=32", "--repeat", "1", NULL);
  CHECK(r.status == 0);
  CHECK(strstr(r.out, " ns/element of output y[64,32], ") != NULL);
  result_free(&r);
}

TEST(magnitude_form_wraps_the_terms_of_sums_and_means) {
  static const char* const cases[][2] = {
      {"s = sum(x*x)", "s = sum(abs(x*x))"},
      {"y = sum(x*x - 1, -1) / mean(z)", "y = sum(abs(x*x - 1), -1) / mean(abs(z))"},
      {"v = mean((x - mean(x, -1))*(x - mean(x, -1)), -1)",
       "v = mean(abs((x - mean(abs(x), -1))*(x - mean(abs(x), -1))), -1)"},
      {"y = sum (f(a, b) + 1e5, 0)", "y = sum (abs(f(a, b) + 1e5), 0)"},
      /* other names, comments and amax stay */
      {"y = summary(x) + mysum(x) + amax(x) # sum(x)\nz = x_sum", "y = summary(x) + mysum(x) + amax(x) # sum(x)\nz = x_sum"},
      {"y = sum(x # sum(q), (\n)", "y = sum(abs(x # sum(q), (\n))"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int reductions = -1;
    char* got = cli_magnitude_source(cases[i][0], &reductions);
    CHECK(got != NULL);
    if (got && strcmp(got, cases[i][1]) != 0) printf("  %s\n  gave %s\n  want %s\n", cases[i][0], got, cases[i][1]);
    CHECK(got && strcmp(got, cases[i][1]) == 0);
    CHECK((reductions == 0) == (i >= 4 && i < 5));
    free(got);
  }
}

/* The oracle's reduction bound: a long f32 sum through the API passes it
 * on every engine; a result just past it fails, just inside passes. */
TEST(oracle_sum_bound_grows_with_the_reduction) {
  enum { N = 1 << 20 };
  uint64_t seed = 20261125;
  HARNESS_SEED(seed);
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("s = sum(x*x - 1)", &p) == UJ_OK);
  int64_t dims[1] = {N}, one[1] = {1};
  uj_tensor_t x = or_tensor(UJ_F32, 1, dims), s = or_tensor(UJ_F32, 1, one);
  or_fill_real(&seed, &x, -1.5, 1.5);
  double ref = 0, sum_abs = 0;
  for (int64_t i = 0; i < N; i++) {
    double v = or_get(&x, i), term = v * v - 1;
    ref += term;
    sum_abs += fabs(term);
  }
  const uj_tensor_t* in[] = {&x};
  uj_tensor_t* out[] = {&s};
  const double* refs[] = {&ref};
  const double* sums[] = {&sum_abs};
  const int64_t terms[] = {N};
  CHECK(OR_RUN_CHECK_SUM(p, in, 1, NULL, 0, out, refs, sums, terms, 1, OR_TOL_F32) == 0);

  double bound = or_sum_bound(ref, sum_abs, N, UJ_F32, OR_TOL_F32);
  CHECK(bound > OR_TOL_F32 * fmax(1, fabs(ref)));
  or_set(&s, 0, ref + 0.99 * bound);
  int64_t inside = or_first_mismatch_sum(refs[0], sums[0], N, &s, OR_TOL_F32);
  or_set(&s, 0, ref - 1.01 * bound);
  int64_t outside = or_first_mismatch_sum(refs[0], sums[0], N, &s, OR_TOL_F32);
  CHECK(inside == -1 && outside == 0);
  /* the worst case says nothing from 2^24 terms in f32 */
  CHECK(isinf(or_sum_gamma((int64_t)1 << 24, UJ_F32)) && or_sum_gamma((int64_t)1 << 24, UJ_F64) < 1e-8);
  or_tensor_free(&x);
  or_tensor_free(&s);
  uj_program_free(p);
}


TEST_MAIN()
