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
#include "uopjit.h"

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
