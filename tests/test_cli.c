/* tests/test_cli.c: the uopjit command-line tool (tools/), run as a separate
 * process the way a user runs it: `uopjit aot` (the C file it writes, its
 * errors, that it never leaves a partial file, that the file compiles) and
 * `uopjit cache stats|list|clear` against the kernels `uopjit run` stores,
 * `uopjit dump --cuda` (no GPU needed), `uopjit run --engine cuda`, and
 * `uopjit run --check` on NaN and infinite results.
 *
 * The binary under test sits next to this test's directory: build/tests/
 * test_cli runs build/uopjit, build/debug/tests/test_cli runs
 * build/debug/uopjit. Every test skips when it is not there. The tool runs
 * with a kernel cache directory of its own (a fresh temporary directory),
 * so the counts below are exact and no other cache is touched. */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "oracle.h"
#include "uopjit.h"

/* The magnitude rewrite of `run --check`, tested on its own below. */
#include "../tools/cli_magnitude.c"

extern char** environ;

#define SIGMOID "1/(1+exp(-(a*x+b)))"
#define ADAM "m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; p = p - lr*m/(sqrt(v)+eps)"

/* ---- the environment: the binary, a temporary directory, a private cache ---------------- */

static char cli_path[PATH_MAX];   /* "" when the binary was not found */
static char temp_root[64];        /* files the tests write */
static char cache_dir[PATH_MAX];  /* UOPJIT_CACHE_DIR of the tool */
static int set_up;

static int remove_one(const char* path, const struct stat* st, int type, struct FTW* ftw) {
  (void)st, (void)type, (void)ftw;
  return remove(path);
}

static void remove_temp_root(void) {
  if (temp_root[0]) nftw(temp_root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Finds the binary (<dir of this test>/../uopjit) and makes the temporary
 * directory, once. */
static void set_up_once(void) {
  if (set_up) return;
  set_up = 1;
  char exe[PATH_MAX - 16]; /* room for "/uopjit" in cli_path */
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    for (int up = 0; up < 2; up++) { /* strip "/test_cli", then "/tests" */
      char* slash = strrchr(exe, '/');
      if (slash) *slash = '\0';
    }
    snprintf(cli_path, sizeof cli_path, "%s/uopjit", exe);
    if (access(cli_path, X_OK) != 0) cli_path[0] = '\0';
  }
  strcpy(temp_root, "/tmp/uopjit-cli-XXXXXX");
  if (!mkdtemp(temp_root)) {
    perror("mkdtemp");
    exit(2);
  }
  atexit(remove_temp_root);
  snprintf(cache_dir, sizeof cache_dir, "%s/cache", temp_root);
  setenv("UOPJIT_CACHE_DIR", cache_dir, 1);
  unsetenv("UOPJIT_CACHE");
}

#define NEED_CLI()                                                                   \
  do {                                                                               \
    set_up_once();                                                                   \
    SKIP_IF(!cli_path[0], "the uopjit binary is not next to this test's directory"); \
  } while (0)

/* A path in the temporary directory. */
static const char* temp_path(const char* name) {
  static char paths[8][PATH_MAX];
  static int next;
  char* p = paths[next++ % 8];
  snprintf(p, PATH_MAX, "%s/%s", temp_root, name);
  return p;
}

/* ---- running a program ---------------------------------------------------------------------- */

typedef struct {
  int status; /* exit status; 128 + signal when killed; -1 when it did not start */
  char* out;  /* everything it wrote to stdout, stderr */
  char* err;
} result_t;

static char* read_whole(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) return strdup("");
  size_t cap = 4096, len = 0;
  char* text = malloc(cap);
  size_t got;
  while (text && (got = fread(text + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (cap - len == 1) text = realloc(text, cap *= 2);
  }
  fclose(f);
  if (text) text[len] = '\0';
  return text ? text : strdup("");
}

/* Runs file (a path, or a name looked up in PATH when search is set) with
 * argv (argv[0] included, NULL-terminated) in this process's environment,
 * its stdout and stderr going to files that are read back. */
static result_t run_program(const char* file, int search, char* const* argv) {
  result_t r = {-1, NULL, NULL};
  const char* out_path = temp_path("stdout.txt");
  const char* err_path = temp_path("stderr.txt");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  int spawned = search ? posix_spawnp(&pid, file, &actions, NULL, argv, environ)
                       : posix_spawn(&pid, file, &actions, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned == 0) {
    int wstatus;
    if (waitpid(pid, &wstatus, 0) == pid)
      r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  }
  r.out = read_whole(out_path);
  r.err = read_whole(err_path);
  return r;
}

/* Runs the tool: run_cli("aot", SOURCE, "-o", FILE, NULL). On an
 * unexpected status the test's output shows what the tool said. */
static result_t run_cli(const char* first, ...) {
  char* argv[32];
  int argc = 0;
  argv[argc++] = cli_path;
  va_list ap;
  va_start(ap, first);
  for (const char* a = first; a && argc < 31; a = va_arg(ap, const char*)) argv[argc++] = (char*)a;
  va_end(ap);
  argv[argc] = NULL;
  return run_program(cli_path, 0, argv);
}

static void result_free(result_t* r) {
  free(r->out);
  free(r->err);
}

/* Prints what the tool said, for a failing check to be understood. */
static void result_show(const char* what, const result_t* r) {
  printf("  %s: status %d\n  stdout: %s\n  stderr: %s\n", what, r->status, r->out, r->err);
}

static int count_lines(const char* text) {
  int n = 0;
  for (; *text; text++) n += *text == '\n';
  return n;
}

static int file_exists(const char* path) { return access(path, F_OK) == 0; }

/* 1 when the temporary directory holds a leftover of an interrupted write
 * ("<name>.tmp-XXXXXX"). */
static int temp_files_left(void) {
  DIR* d = opendir(temp_root);
  int found = 0;
  for (struct dirent* e; d && (e = readdir(d));) found |= strstr(e->d_name, ".tmp-") != NULL;
  if (d) closedir(d);
  return found;
}

/* 1 when a C compiler named cc is on PATH. */
static int have_cc(void) {
  const char* path = getenv("PATH");
  char dir[PATH_MAX];
  for (const char* s = path; s && *s;) {
    const char* end = strchr(s, ':');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    snprintf(dir, sizeof dir, "%.*s/cc", (int)len, s);
    if (len && access(dir, X_OK) == 0) return 1;
    s = end ? end + 1 : NULL;
  }
  return 0;
}

/* ---- aot ---------------------------------------------------------------------------------------- */

TEST(aot_writes_the_entry_points) {
  NEED_CLI();
  const char* out = temp_path("sigmoid.c");
  result_t r = run_cli("aot", SIGMOID, "--scalar", "a,b", "-o", out, NULL);
  if (r.status != 0) result_show("aot", &r);
  CHECK(r.status == 0);
  char* text = read_whole(out);
  CHECK(strstr(text, "int uopjit_kernel_run(") != NULL);
  CHECK(strstr(text, "int uopjit_kernel_output_dims(") != NULL);
  CHECK(!temp_files_left());
  free(text);
  result_free(&r);
}

TEST(aot_writes_through_a_link) {
  NEED_CLI();
  /* the link stays a link, and the file it names gets the text */
  const char* target = temp_path("named.c");
  const char* link = temp_path("link.c");
  CHECK(symlink("named.c", link) == 0);
  result_t r = run_cli("aot", "x * 2", "-o", link, NULL);
  if (r.status != 0) result_show("aot -o link", &r);
  CHECK(r.status == 0);
  struct stat st;
  CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
  char* text = read_whole(target);
  CHECK(text && strstr(text, "int uopjit_kernel_run(") != NULL);
  CHECK(!temp_files_left());
  free(text);
  result_free(&r);
}

TEST(aot_parse_error_names_the_position_and_writes_nothing) {
  NEED_CLI();
  const char* out = temp_path("bad.c");
  result_t r = run_cli("aot", "y = a\nz = (b +", "-o", out, NULL);
  CHECK(r.status == 1);
  CHECK(strstr(r.err, "UJ_ERR_PARSE") != NULL);
  CHECK(strstr(r.err, "line 2, column") != NULL);
  CHECK(!file_exists(out));
  CHECK(!temp_files_left());
  result_free(&r);

  /* A bare expression's error points into the expression as written. */
  r = run_cli("aot", "1/(1+", "-o", out, NULL);
  CHECK(r.status == 1);
  CHECK(strstr(r.err, "line 1, column 6") != NULL);
  CHECK(!file_exists(out));
  result_free(&r);

  /* A failing run leaves an existing file as it was. */
  FILE* f = fopen(out, "w");
  CHECK(f != NULL);
  if (f) {
    fputs("kept\n", f);
    fclose(f);
  }
  r = run_cli("aot", "x * (", "-o", out, NULL);
  CHECK(r.status == 1);
  char* text = read_whole(out);
  CHECK(strcmp(text, "kept\n") == 0);
  free(text);
  result_free(&r);
}

TEST(aot_unwritable_path_fails_cleanly) {
  NEED_CLI();
  /* A path under a regular file cannot be created, even by root. */
  const char* blocker = temp_path("not_a_directory");
  FILE* f = fopen(blocker, "w");
  CHECK(f != NULL);
  if (f) fclose(f);
  char out[PATH_MAX];
  snprintf(out, sizeof out, "%s/y.c", blocker);
  result_t r = run_cli("aot", "x * 2", "-o", out, NULL);
  CHECK(r.status == 1);
  CHECK(strstr(r.err, "cannot write") != NULL);
  CHECK(strstr(r.err, out) != NULL);
  CHECK(!temp_files_left());
  result_free(&r);

  /* A directory is no file to replace. */
  r = run_cli("aot", "x * 2", "-o", temp_root, NULL);
  CHECK(r.status == 1);
  CHECK(strstr(r.err, "cannot write") != NULL);
  CHECK(!temp_files_left());
  result_free(&r);
}

TEST(aot_usage_errors) {
  NEED_CLI();
  result_t r = run_cli("aot", "x * 2", NULL);
  CHECK(r.status == 2);
  CHECK(strstr(r.err, "-o") != NULL);
  result_free(&r);
  r = run_cli("aot", "x * 2", "-o", temp_path("q.c"), "--scalar", "q", NULL);
  CHECK(r.status == 2);
  CHECK(strstr(r.err, "\"q\"") != NULL);
  CHECK(!file_exists(temp_path("q.c")));
  result_free(&r);
  r = run_cli("aot", "x * 2", "-o", temp_path("q.c"), "--engine", "c", NULL);
  CHECK(r.status == 2);
  result_free(&r);
}

TEST(aot_output_compiles) {
  NEED_CLI();
  SKIP_IF(!have_cc(), "no cc on PATH");
  static const struct {
    const char* name;
    const char* source;
    const char* scalars;
  } programs[] = {{"sigmoid", SIGMOID, "a,b"}, {"adam", ADAM, "b1,b2,lr,eps"}, {"sum", "y = sum(x*x)", NULL}};
  for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) {
    char c_name[64], o_name[64];
    snprintf(c_name, sizeof c_name, "%s.c", programs[i].name);
    snprintf(o_name, sizeof o_name, "%s.o", programs[i].name);
    char c_path[PATH_MAX], o_path[PATH_MAX];
    snprintf(c_path, sizeof c_path, "%s", temp_path(c_name));
    snprintf(o_path, sizeof o_path, "%s", temp_path(o_name));
    result_t r = programs[i].scalars
                     ? run_cli("aot", programs[i].source, "--scalar", programs[i].scalars, "-o", c_path, NULL)
                     : run_cli("aot", programs[i].source, "-o", c_path, NULL);
    if (r.status != 0) result_show(programs[i].name, &r);
    CHECK(r.status == 0);
    result_free(&r);
    char* cc_argv[] = {"cc", "-O3", "-std=c11", "-Wall", "-Werror", "-c", c_path, "-o", o_path, NULL};
    r = run_program("cc", 1, cc_argv);
    if (r.status != 0) result_show("cc", &r);
    CHECK(r.status == 0);
    CHECK(file_exists(o_path));
    result_free(&r);
  }
}

/* ---- cache ------------------------------------------------------------------------------------- */

TEST(cache_clear_then_list_is_empty) {
  NEED_CLI();
  result_t r = run_cli("cache", "clear", NULL);
  if (r.status != 0) result_show("cache clear", &r);
  CHECK(r.status == 0);
  CHECK(strstr(r.out, "removed") != NULL);
  result_free(&r);
  r = run_cli("cache", "list", NULL);
  CHECK(r.status == 0);
  CHECK(r.out[0] == '\0');
  result_free(&r);
  r = run_cli("cache", "stats", NULL);
  CHECK(r.status == 0);
  CHECK(strstr(r.out, cache_dir) != NULL);
  CHECK(strstr(r.out, "usable: yes") != NULL);
  CHECK(strstr(r.out, "entries: 0\n") != NULL);
  result_free(&r);
}

TEST(cache_counts_what_run_compiles) {
  NEED_CLI();
  uj_ctx_t* ctx = uj_ctx_new();
  int have_c = ctx && uj_engine_available(ctx, UJ_ENGINE_C);
  uj_ctx_free(ctx);
  SKIP_IF(!have_c, "the C engine is not available (no system compiler)");

  result_t r = run_cli("cache", "list", NULL);
  CHECK(r.status == 0);
  int before = count_lines(r.out);
  result_free(&r);

  /* A program no other test compiles, so it is one new entry. */
  r = run_cli("run", "y = x*3 + 0.25", "--engine", "c", "--shape", "64", "--repeat", "1", NULL);
  if (r.status != 0) result_show("run", &r);
  CHECK(r.status == 0);
  result_free(&r);

  r = run_cli("cache", "list", NULL);
  CHECK(r.status == 0);
  CHECK(count_lines(r.out) == before + 1);
  CHECK(strstr(r.out, " so ") != NULL);
  result_free(&r);

  char expected[64];
  r = run_cli("cache", "stats", NULL);
  CHECK(r.status == 0);
  snprintf(expected, sizeof expected, "entries: %d\n", before + 1);
  CHECK(strstr(r.out, expected) != NULL);
  snprintf(expected, sizeof expected, "so: %d entr", before + 1);
  CHECK(strstr(r.out, expected) != NULL);
  if (!strstr(r.out, expected)) result_show("cache stats", &r);
  result_free(&r);

  r = run_cli("cache", "clear", NULL);
  CHECK(r.status == 0);
  snprintf(expected, sizeof expected, "removed %d entr", before + 1);
  CHECK(strstr(r.out, expected) != NULL);
  result_free(&r);
  r = run_cli("cache", "list", NULL);
  CHECK(r.status == 0);
  CHECK(r.out[0] == '\0');
  result_free(&r);
}

TEST(cache_unknown_subcommand_fails) {
  NEED_CLI();
  result_t r = run_cli("cache", "bogus", NULL);
  CHECK(r.status == 2);
  CHECK(strstr(r.err, "stats, list or clear") != NULL);
  result_free(&r);
  r = run_cli("cache", NULL);
  CHECK(r.status == 2);
  result_free(&r);
}

TEST(cache_switched_off) {
  NEED_CLI();
  setenv("UOPJIT_CACHE", "0", 1);
  result_t r = run_cli("cache", "stats", NULL);
  CHECK(r.status == 0);
  CHECK(strstr(r.out, "usable: no") != NULL);
  result_free(&r);
  r = run_cli("cache", "clear", NULL);
  CHECK(r.status == 1);
  CHECK(strstr(r.err, "UOPJIT_CACHE=0") != NULL);
  result_free(&r);
  unsetenv("UOPJIT_CACHE");
}

/* ---- run ----------------------------------------------------------------------------------- */

TEST(run_check_with_declared_dtypes) {
  NEED_CLI();
  /* inputs that declare a dtype keep it in the run and in the f64
   * reference (which once shared, then freed twice, the run's output) */
  static const char* const programs[] = {"x: f32; y = x + 1", "x: i32; y = x * 3", "x: f64\ny: f32; z = x * 3 + y"};
  for (int i = 0; i < 3; i++) {
    result_t r = run_cli("run", "--check", "--engine", "interp", "--shape", "3", programs[i], NULL);
    if (r.status != 0 || !strstr(r.out, "check: ok")) result_show(programs[i], &r);
    CHECK(r.status == 0 && strstr(r.out, "check: ok") != NULL);
    result_free(&r);
  }
}

TEST(run_check_special_values) {
  NEED_CLI();
  /* both sides compute NaN, +inf, -inf, or both infinities: they agree */
  static const char* const agree[] = {"y = log(x - 2)", "y = x / 0", "y = -x / 0", "y = where(x > 1, x / 0, -x / 0)"};
  static const char* const engines[] = {"interp", "auto"};
  for (int e = 0; e < 2; e++)
    for (int i = 0; i < 4; i++) {
      result_t r = run_cli("run", "--check", "--engine", engines[e], "--shape", "64", agree[i], NULL);
      if (r.status != 0 || !strstr(r.out, "check: ok")) result_show(agree[i], &r);
      CHECK(r.status == 0 && strstr(r.out, "check: ok") != NULL);
      result_free(&r);
    }
  /* f32 overflows to inf where the f64 reference is finite (e^50 to e^150):
   * still a failure */
  result_t r = run_cli("run", "--check", "--engine", "interp", "--shape", "8", "y = exp(x * 100)", NULL);
  if (r.status != 1 || !strstr(r.out, "check: FAILED")) result_show("exp(x * 100)", &r);
  CHECK(r.status == 1 && strstr(r.out, "check: FAILED") != NULL && strstr(r.out, "inf") != NULL);
  result_free(&r);
}

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
      {{"y = x + b", "--dtype", "x=f16"}, "--dtype wants f32, f64, NAME=f32 or NAME=f64, got \"x=f16\""},
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

/* ---- help, version and usage errors ------------------------------------------------------- */

/* Every environment variable the library or the tool reads (grep getenv). */
static const char* const env_names[] = {
    "UOPJIT_ENGINE",      "UOPJIT_THREADS",      "UOPJIT_CACHE",         "UOPJIT_CACHE_DIR",
    "XDG_CACHE_HOME",     "UOPJIT_MIR_LEVEL",    "UOPJIT_CC",            "TMPDIR",
    "UOPJIT_DEBUG",       "UOPJIT_NVRTC",        "UOPJIT_CUDA_DEVICE",   "UOPJIT_CONV_ISA",
    "UOPJIT_CONV_BACKEND", "UOPJIT_CACHE_MEMORY_LIMIT", "UOPJIT_CACHE_DISK_LIMIT"};

static const char* const command_names[] = {"info", "demo", "run", "dump", "aot", "cache", "conv"};

TEST(help_lists_commands_and_every_variable) {
  NEED_CLI();
  static const char* const forms[][2] = {{"--help", NULL}, {"-h", NULL}, {"help", NULL}, {"help", "--help"}};
  for (int f = 0; f < 4; f++) {
    result_t r = run_cli(forms[f][0], forms[f][1], NULL);
    if (r.status != 0) result_show(forms[f][0], &r);
    CHECK(r.status == 0);
    for (size_t i = 0; i < sizeof command_names / sizeof command_names[0]; i++) {
      char line[32];
      snprintf(line, sizeof line, "\n  %s ", command_names[i]);
      CHECK(strstr(r.out, line) != NULL);
    }
    for (size_t i = 0; i < sizeof env_names / sizeof env_names[0]; i++) {
      if (!strstr(r.out, env_names[i])) printf("  %s: %s is not documented\n", forms[f][0], env_names[i]);
      CHECK(strstr(r.out, env_names[i]) != NULL);
    }
    result_free(&r);
  }
}

TEST(version_is_the_library_version) {
  NEED_CLI();
  result_t r = run_cli("--version", NULL);
  CHECK(r.status == 0);
  char expected[64];
  snprintf(expected, sizeof expected, "uopjit %s\n", UJ_VERSION);
  CHECK(strcmp(r.out, expected) == 0);
  result_free(&r);
  r = run_cli("info", NULL);
  CHECK(r.status == 0);
  CHECK(strncmp(r.out, expected, strlen(expected)) == 0);
  result_free(&r);
}

/* `help CMD` and `CMD --help` print the same text: the command's usage,
 * each option it takes and the variables that affect it. */
TEST(help_of_every_command) {
  NEED_CLI();
  static const struct {
    const char* command;
    const char* options;   /* space-separated, each must be in the help */
    const char* variables; /* space-separated */
  } expect[] = {
      {"info", "", "UOPJIT_ENGINE UOPJIT_CC UOPJIT_NVRTC UOPJIT_CUDA_DEVICE"},
      {"demo", "", "UOPJIT_DEBUG"},
      {"run", "--shape --dtype --scalar --engine --repeat --seed --check",
       "UOPJIT_ENGINE UOPJIT_THREADS UOPJIT_CACHE UOPJIT_CACHE_DIR UOPJIT_CACHE_MEMORY_LIMIT UOPJIT_CACHE_DISK_LIMIT "
       "UOPJIT_MIR_LEVEL UOPJIT_CC UOPJIT_DEBUG UOPJIT_NVRTC UOPJIT_CUDA_DEVICE"},
      {"dump", "--ir-raw --ir --c --mir --cuda --shape --dtype --scalar", "UOPJIT_DEBUG"},
      {"aot", "-o --output --shape --dtype --scalar", "UOPJIT_DEBUG"},
      {"cache", "stats list clear", "UOPJIT_CACHE UOPJIT_CACHE_DIR UOPJIT_CACHE_DISK_LIMIT"},
      {"conv",
       "--n --hw --h --w --c --k --kernel --stride --pad --bias --backend --op --dtype --engine --cache-filter "
       "--repeat --seed --check",
       "UOPJIT_ENGINE UOPJIT_THREADS UOPJIT_CONV_BACKEND UOPJIT_CONV_ISA UOPJIT_CACHE_DIR"},
  };
  CHECK(sizeof expect / sizeof expect[0] == sizeof command_names / sizeof command_names[0]);
  for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
    result_t by_help = run_cli("help", expect[i].command, NULL);
    result_t by_flag = run_cli(expect[i].command, "--help", NULL);
    if (by_help.status != 0 || by_flag.status != 0) {
      result_show("help CMD", &by_help);
      result_show("CMD --help", &by_flag);
    }
    CHECK(by_help.status == 0 && by_flag.status == 0);
    CHECK(strcmp(by_help.out, by_flag.out) == 0);
    char usage[64];
    snprintf(usage, sizeof usage, "usage: uopjit %s", expect[i].command);
    CHECK(strncmp(by_help.out, usage, strlen(usage)) == 0);
    CHECK(strstr(by_help.out, "\nenvironment:\n") != NULL);
    const char* lists[2] = {expect[i].options, expect[i].variables};
    for (int l = 0; l < 2; l++)
      for (const char* w = lists[l]; *w;) {
        size_t len = strcspn(w, " ");
        char word[48];
        snprintf(word, sizeof word, "%.*s", (int)len, w);
        if (!strstr(by_help.out, word)) printf("  help %s lacks %s\n", expect[i].command, word);
        CHECK(strstr(by_help.out, word) != NULL);
        w += len + (w[len] == ' ');
      }
    result_free(&by_help);
    result_free(&by_flag);
  }
  /* --help wins wherever it stands, even after a program */
  result_t r = run_cli("run", "y = x * 2", "--shape", "4", "--help", NULL);
  CHECK(r.status == 0 && strncmp(r.out, "usage: uopjit run", 17) == 0);
  result_free(&r);
}

TEST(unknown_command_or_option_points_to_help) {
  NEED_CLI();
  static const char* const cases[][3] = {{"bogus", NULL, NULL},          {"--bogus", NULL, NULL},
                                         {"help", "bogus", NULL},        {"run", "y = x", "--bogus"},
                                         {"dump", "--bogus", "y = x"},   {"aot", "y = x", "--engine=c"},
                                         {"conv", "--bogus", NULL},      {"info", "extra", NULL},
                                         {"demo", "extra", NULL},        {"cache", "stats", "extra"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    result_t r = run_cli(cases[i][0], cases[i][1], cases[i][2], NULL);
    if (r.status != 2 || !strstr(r.err, "--help")) result_show(cases[i][0], &r);
    CHECK(r.status == 2);
    CHECK(strstr(r.err, "--help") != NULL);
    CHECK(r.out[0] == '\0');
    result_free(&r);
  }
  /* no arguments: the usage, on stderr, and bad usage */
  result_t r = run_cli(NULL);
  CHECK(r.status == 2);
  CHECK(strstr(r.err, "usage: uopjit") != NULL);
  result_free(&r);
}

TEST(run_engine_defaults_to_the_environment) {
  NEED_CLI();
  setenv("UOPJIT_ENGINE", "interp", 1);
  result_t r = run_cli("run", "y = x * 2", "--shape", "16", "--repeat", "1", NULL);
  CHECK(r.status == 0);
  CHECK(strncmp(r.out, "engine interp,", 14) == 0);
  result_free(&r);
  unsetenv("UOPJIT_ENGINE");
  /* --engine overrides it: auto is what a context picks by itself */
  uj_ctx_t* ctx = uj_ctx_new();
  char expected[64];
  snprintf(expected, sizeof expected, "engine %s,", ctx ? uj_engine_name(uj_ctx_engine(ctx)) : "?");
  uj_ctx_free(ctx);
  setenv("UOPJIT_ENGINE", "interp", 1);
  r = run_cli("run", "y = x * 2", "--shape", "16", "--repeat", "1", "--engine", "auto", NULL);
  CHECK(r.status == 0);
  CHECK(strncmp(r.out, expected, strlen(expected)) == 0);
  result_free(&r);
  unsetenv("UOPJIT_ENGINE");
}

/* ---- the GPU side ------------------------------------------------------------------------ */

TEST(dump_cuda_needs_no_gpu) {
  NEED_CLI();
  result_t r = run_cli("dump", "--cuda", SIGMOID, "--scalar", "a,b", NULL);
  if (r.status != 0) result_show("dump --cuda", &r);
  CHECK(r.status == 0);
  CHECK(strstr(r.out, "extern \"C\" __global__") != NULL);
  CHECK(strstr(r.out, "uj_block_0(") != NULL);
  CHECK(strstr(r.out, "#include") == NULL);
  CHECK(strstr(r.out, "float4") != NULL);
  result_free(&r);
}

TEST(run_and_info_on_cuda) {
  NEED_CLI();
  uj_ctx_t* ctx = uj_ctx_new();
  int gpu = uj_engine_available(ctx, UJ_ENGINE_CUDA);
  uj_ctx_free(ctx);
  result_t r = run_cli("info", NULL);
  CHECK(r.status == 0);
  CHECK(strstr(r.out, "  cuda     ") != NULL);
  result_free(&r);
  r = run_cli("run", "--engine", "cuda", "--check", SIGMOID, "--scalar", "a,b", "--shape", "1000", NULL);
  if (gpu) {
    if (r.status != 0) result_show("run --engine cuda", &r);
    CHECK(r.status == 0);
    CHECK(strstr(r.out, "check: ok") != NULL);
  } else {
    CHECK(r.status == 1);
    CHECK(strstr(r.err, "engine cuda is not available") != NULL);
  }
  result_free(&r);
}

TEST_MAIN()
