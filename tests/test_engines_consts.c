/* tests/test_engines_consts.c: constants at and beyond the f32 range, and
 * the math at its edges, on every target: the interpreter (which defines an
 * f32 constant as the number rounded to float: 1e39 is +inf, 1e-50 is 0,
 * 1.4e-45 the smallest subnormal), each available CPU engine (C, MIR), the
 * CUDA source compiled with NVRTC (EN_RUN does that for every program), and
 * the AOT C file (UJ_DUMP_C_AOT) compiled with the system cc as a shared
 * object, loaded and run here.
 *
 * The constants must give the interpreter's results bit for bit, in f32
 * and in f64 (where 1e39 stays finite). The math programs (log of a
 * subnormal, exp near its overflow threshold) must agree with the
 * interpreter within 1e-6 relative. Inputs mix ordinary values with +-0,
 * +-inf, NaN, subnormals and FLT_MAX, over 37 elements so that the C
 * engine runs both its vector body and its remainder. */
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engines_check.h"

extern char** environ;

static const char* const const_programs[] = {
    "y = min(x, 1e39)",                         /* +inf in f32 */
    "y = max(x, -1e39)",                        /* -inf */
    "y = x + 1e-50",                            /* rounds to +0 */
    "y = x * 3.4028235e38",                     /* FLT_MAX */
    "y = x * 3.4028236e38 - 1e-46",             /* rounds to FLT_MAX; below half the smallest subnormal: 0 */
    "y = x * 1.4e-45 + 1.17549435e-38",         /* the smallest subnormal, FLT_MIN */
    "y = x * -0.0 + -1e-300",                   /* -0 both */
    "y = where(x > 1, 1e39, -1e39) * 1e-40",    /* infinities and a subnormal in one statement */
    "y = min(max(x, -3.5e38), 3.5e38) + 1e-45", /* beyond FLT_MAX on both sides; a subnormal */
};
#define NCONST ((int)(sizeof const_programs / sizeof const_programs[0]))

static const char* const edge_programs[] = {"y = min(x, 1e39)", "y = log(x*1e-40)", "y = exp(88 + 0.4*x)",
                                            "y = sigmoid(-90*x) + tanh(x*1e-40)"};
#define NEDGE ((int)(sizeof edge_programs / sizeof edge_programs[0]))

#define NX 37

/* Ordinary values in [0.5, 1.5) (as the CLI's --check draws them) among the
 * special ones. */
static void fill_inputs(uj_tensor_t* x, int specials) {
  static const double sp[] = {0, -0.0, INFINITY, -INFINITY, NAN, 1e-40, -1e-40, 3.4028234663852886e38, -1, 2, 1e30};
  for (int64_t i = 0; i < NX; i++) {
    double v = 0.5 + (double)((i * 7) % NX) / NX;
    if (specials && i % 3 == 0) v = sp[(i / 3) % (int64_t)(sizeof sp / sizeof *sp)];
    or_set(x, i, v);
  }
}

/* ---- the AOT C file, compiled with cc and loaded ---------------------------------------------- */

typedef int (*aot_run_t)(void* const* inputs, const int64_t* const* input_dims, void* const* outputs,
                         const int64_t* params);

static char aot_dir[64];

/* A private directory for the generated files; NULL when none can be made. */
static const char* aot_workdir(void) {
  if (!aot_dir[0]) {
    const char* tmp = getenv("TMPDIR");
    snprintf(aot_dir, sizeof aot_dir, "%s/uj-consts-XXXXXX", tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    if (!mkdtemp(aot_dir)) aot_dir[0] = 0;
  }
  return aot_dir[0] ? aot_dir : NULL;
}

/* Runs argv (found on PATH) with its stdout discarded (its stderr, where a
 * compiler reports, stays); its exit status, or -1 when it did not start. */
static int run_command(char* const* argv) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int spawned = posix_spawnp(&pid, argv[0], &actions, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Writes p's AOT C (its build for the inputs last run), after the line
 * `head` when it is not NULL, compiles it with `cc` into a shared object
 * with warnings as errors, loads it and runs it on in[0..nin) into y. 1 on
 * success; 0 after reporting the failure. */
static int aot_run(const char* what, uj_ctx_t* ctx, uj_program_t* p, const uj_tensor_t* const* in, int nin,
                   uj_tensor_t* y, int serial, const char* head) {
  const char* dir = aot_workdir();
  char src[128], so[128], msg[1024];
  if (!dir) {
    harness_fail(__FILE__, __LINE__, "cannot make a temporary directory for the AOT files");
    return 0;
  }
  snprintf(src, sizeof src, "%s/k%d.c", dir, serial);
  snprintf(so, sizeof so, "%s/k%d.so", dir, serial);
  char* text = uj_program_dump(ctx, p, UJ_FORWARD, UJ_DUMP_C_AOT, NULL);
  FILE* f = text ? fopen(src, "w") : NULL;
  if (!f || (head && fprintf(f, "%s\n", head) < 0) || fputs(text, f) < 0 || fclose(f) != 0) {
    snprintf(msg, sizeof msg, "%s: cannot write the AOT C: %s", what, text ? src : uj_last_error());
    harness_fail(__FILE__, __LINE__, msg);
    free(text);
    return 0;
  }
  free(text);
  /* with the compiler the tests were built with (make passes it), so that
   * make test CC=clang holds the AOT C to clang's warnings too */
  const char* compiler = getenv("UJ_TEST_CC");
  char* cc[] = {(char*)(compiler && *compiler ? compiler : "cc"), "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror",
                "-fPIC", "-shared", "-o", so, src, "-lm", NULL};
  int status = run_command(cc);
  if (status != 0) {
    snprintf(msg, sizeof msg, "%s: cc %s failed (status %d)", what, src, status);
    harness_fail(__FILE__, __LINE__, msg);
    return 0;
  }
  void* lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  aot_run_t run = lib ? (aot_run_t)(uintptr_t)dlsym(lib, "uopjit_kernel_run") : NULL;
  if (!run) {
    snprintf(msg, sizeof msg, "%s: cannot load %s: %s", what, so, dlerror());
    harness_fail(__FILE__, __LINE__, msg);
    if (lib) dlclose(lib);
    return 0;
  }
  void* inputs[4];
  const int64_t* dims[4];
  for (int i = 0; i < nin && i < 4; i++) inputs[i] = in[i]->data, dims[i] = in[i]->dims;
  void* outputs[] = {y->data};
  or_fill_sentinel(y);
  int rc = run(inputs, dims, outputs, NULL);
  dlclose(lib);
  remove(so), remove(src);
  if (rc != 0) {
    snprintf(msg, sizeof msg, "%s: uopjit_kernel_run returned %d", what, rc);
    harness_fail(__FILE__, __LINE__, msg);
  }
  return rc == 0;
}

static int have_cc(void) {
  char* argv[] = {"cc", "--version", NULL};
  static int known = -1;
  if (known < 0) known = run_command(argv) == 0;
  return known;
}

/* ---- the tests ------------------------------------------------------------------------------- */

/* Runs program source on every target for dtype dt; constants bit for bit
 * (tol < 0), math within tol relative to max(1, |interpreter|). */
static void check_everywhere(const char* source, uj_dtype_t dt, int specials, double tol, int* serial) {
  uj_program_t* p = NULL;
  if (uj_program_parse(source, &p) != UJ_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "parse %s: %s", source, uj_last_error());
    harness_fail(__FILE__, __LINE__, msg);
    return;
  }
  int64_t n = NX;
  uj_tensor_t x = or_tensor(dt, 1, &n), want = or_tensor(dt, 1, &n), got = or_tensor(dt, 1, &n);
  fill_inputs(&x, specials);
  const uj_tensor_t* in[] = {&x};
  uj_tensor_t* wout[] = {&want};
  uj_tensor_t* gout[] = {&got};
  char what[160];
  snprintf(what, sizeof what, "%s %s%s", dt == UJ_F32 ? "f32" : "f64", source, specials ? " (special inputs)" : "");
  if (EN_RUN(what, "interp", en_interp(), p, in, 1, NULL, 0, wout, 1)) {
    double* ref = or_to_double(&want);
    for (int e = 0; e < EN_NENGINES; e++) {
      uj_ctx_t* ctx = en_ctx(e);
      if (!ctx || !EN_RUN(what, en_engines[e].name, ctx, p, in, 1, NULL, 0, gout, 1)) continue;
      if (tol < 0) EN_EXPECT_SAME(what, en_engines[e].name, &got, &want);
      else EN_EXPECT_CLOSE(what, en_engines[e].name, &got, ref, tol);
    }
    /* the dump is the build the interpreter ran last: this dtype's */
    if (have_cc() && aot_run(what, en_interp(), p, in, 1, &got, (*serial)++, NULL)) {
      if (tol < 0) EN_EXPECT_SAME(what, "aot c", &got, &want);
      else EN_EXPECT_CLOSE(what, "aot c", &got, ref, tol);
    }
    free(ref);
  }
  or_tensor_free(&x), or_tensor_free(&want), or_tensor_free(&got);
  uj_program_free(p);
}

TEST(constants_at_and_beyond_the_f32_range) {
  if (!have_cc()) printf("  skip: no cc on PATH for the AOT C (the engines still run)\n");
  int serial = 0;
  for (int i = 0; i < NCONST; i++)
    for (int specials = 0; specials <= 1; specials++) {
      check_everywhere(const_programs[i], UJ_F32, specials, -1, &serial);
      check_everywhere(const_programs[i], UJ_F64, specials, -1, &serial);
    }
}

/* The reproducers, as `uopjit run --check` runs them (inputs in
 * [0.5, 1.5)): log of subnormals, exp up to and past its overflow
 * threshold, sigmoid's subnormal results, tanh of subnormals. */
TEST(math_at_the_f32_edges) {
  int serial = 100;
  for (int i = 0; i < NEDGE; i++) check_everywhere(edge_programs[i], UJ_F32, 0, 1e-6, &serial);
}

/* The C engine's division by a row's sum (jit/c/c_divide.c) in both of
 * its forms, whichever this machine's compiler would pick: the multiplies
 * in double (UJ_FDIV_BY_FMA 1) and the f32 divide (0), each the AOT C of
 * y = x / sum(w, -1) compiled with the choice forced, bit for bit against
 * the interpreter on signed zeros, infinities, NaN, zero and infinite
 * divisors, overflow, subnormal quotients, a quotient halfway between two
 * subnormals (147 2^-149 / 98), and floats of random bits. */
TEST(both_forms_of_the_division_by_a_row_sum_round_as_division) {
  SKIP_IF(!have_cc(), "no cc on PATH for the AOT C");
  uint64_t seed = en_seed(7011), st = seed;
  HARNESS_SEED(seed);
  enum { COLS = 1001 };
  int64_t xd[2] = {EN_NDIVISORS, COLS}, wd[2] = {EN_NDIVISORS, 1};
  uj_tensor_t x = or_tensor(UJ_F32, 2, xd), w = or_tensor(UJ_F32, 2, wd);
  uj_tensor_t want = or_tensor(UJ_F32, 2, xd), got = or_tensor(UJ_F32, 2, xd);
  en_fill_division(&x, &w, COLS, &st);
  const char* source = "y = x / sum(w, -1)";
  uj_program_t* p = NULL;
  CHECK(uj_program_parse(source, &p) == UJ_OK);
  const uj_tensor_t* in[] = {&x, &w};
  uj_tensor_t* out[] = {&want};
  if (p && EN_RUN(source, "interp", en_interp(), p, in, 2, NULL, 0, out, 1)) {
    char* text = uj_program_dump(en_interp(), p, UJ_FORWARD, UJ_DUMP_C_AOT, NULL);
    CHECK(text && strstr(text, "= uj_fdiv_r(") != NULL);
    free(text);
    static const char* const heads[] = {"#define UJ_FDIV_BY_FMA 1", "#define UJ_FDIV_BY_FMA 0"};
    for (int h = 0; h < 2; h++)
      if (aot_run(heads[h], en_interp(), p, in, 2, &got, 200 + h, heads[h])) EN_EXPECT_SAME(heads[h], "aot c", &got, &want);
  }
  uj_program_free(p);
  or_tensor_free(&x), or_tensor_free(&w), or_tensor_free(&want), or_tensor_free(&got);
}

static void remove_workdir(void) {
  if (aot_dir[0]) rmdir(aot_dir);
}

int main(int argc, char** argv) {
  setenv("UOPJIT_THREADS", "3", 0);
  atexit(remove_workdir);
  return harness_main(argc, argv);
}
