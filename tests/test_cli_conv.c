/* tests/test_cli_conv.c: `uopjit conv`, run as a separate process the way a
 * user runs it: --check on auto and on every backend by name (forward with
 * bias, backward data and filter, f32 and f64) ends with "check: ok
 * max_rel_err=<value>" and status 0; the timing line; and its errors: an
 * unknown backend or one outside its capability (status 1, the library's
 * message), malformed options (status 2); and `bench --conv --quick`.
 *
 * The binary under test sits next to this test's directory
 * (build/tests/test_cli_conv runs build/uopjit); every test skips when it is
 * not there. Output goes to files in a fresh temporary directory. */
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

extern char** environ;

static char tool[PATH_MAX]; /* "" when not found */
static char scratch_dir[64];
static int ready;

static int remove_entry(const char* path, const struct stat* st, int type, struct FTW* ftw) {
  (void)st, (void)type, (void)ftw;
  return remove(path);
}

static void remove_scratch(void) {
  if (scratch_dir[0]) nftw(scratch_dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static void find_tool(void) {
  if (ready) return;
  ready = 1;
  char exe[PATH_MAX - 16];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    for (int up = 0; up < 2; up++) { /* drop "/test_cli_conv", then "/tests" */
      char* slash = strrchr(exe, '/');
      if (slash) *slash = '\0';
    }
    snprintf(tool, sizeof tool, "%s/uopjit", exe);
    if (access(tool, X_OK) != 0) tool[0] = '\0';
  }
  strcpy(scratch_dir, "/tmp/uopjit-cli-conv-XXXXXX");
  if (!mkdtemp(scratch_dir)) {
    perror("mkdtemp");
    exit(2);
  }
  atexit(remove_scratch);
  char cache[PATH_MAX];
  snprintf(cache, sizeof cache, "%s/cache", scratch_dir);
  setenv("UOPJIT_CACHE_DIR", cache, 1);
  unsetenv("UOPJIT_CONV_BACKEND");
}

#define NEED_TOOL()                                                                  \
  do {                                                                               \
    find_tool();                                                                     \
    SKIP_IF(!tool[0], "the uopjit binary is not next to this test's directory");     \
  } while (0)

typedef struct {
  int status; /* exit status, 128 + signal when killed, -1 when it did not start */
  char out[8192], err[8192];
} outcome_t;

static void slurp(const char* path, char* text, size_t cap) {
  text[0] = '\0';
  FILE* f = fopen(path, "rb");
  if (!f) return;
  size_t len = fread(text, 1, cap - 1, f);
  text[len] = '\0';
  fclose(f);
}

/* Runs `uopjit COMMAND ARGS...` (NULL-terminated); run_conv for conv. */
static void run_command(outcome_t* o, char* command, ...) {
  char* argv[40];
  int argc = 0;
  argv[argc++] = tool;
  argv[argc++] = command;
  va_list ap;
  va_start(ap, command);
  for (char* a = va_arg(ap, char*); a && argc < 39; a = va_arg(ap, char*)) argv[argc++] = a;
  va_end(ap);
  argv[argc] = NULL;
  char out_path[PATH_MAX], err_path[PATH_MAX];
  snprintf(out_path, sizeof out_path, "%s/out.txt", scratch_dir);
  snprintf(err_path, sizeof err_path, "%s/err.txt", scratch_dir);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  o->status = -1;
  if (posix_spawn(&pid, tool, &actions, NULL, argv, environ) == 0) {
    int w;
    if (waitpid(pid, &w, 0) == pid) o->status = WIFEXITED(w) ? WEXITSTATUS(w) : 128 + WTERMSIG(w);
  }
  posix_spawn_file_actions_destroy(&actions);
  slurp(out_path, o->out, sizeof o->out);
  slurp(err_path, o->err, sizeof o->err);
}

#define run_conv(o, ...) run_command(o, "conv", __VA_ARGS__)

/* The last line of text (without its newline). */
static const char* last_line(char* text) {
  size_t len = strlen(text);
  while (len && text[len - 1] == '\n') text[--len] = '\0';
  char* nl = strrchr(text, '\n');
  return nl ? nl + 1 : text;
}

/* The run ended with "check: ok max_rel_err=<number>" and status 0. */
static void expect_check_ok(const char* what, outcome_t* o) {
  int status = o->status;
  char copy[sizeof o->out];
  memcpy(copy, o->out, sizeof copy);
  const char* last = last_line(copy);
  double value = -1;
  int ok = status == 0 && sscanf(last, "check: ok max_rel_err=%lf", &value) == 1 && value >= 0;
  CHECK(ok);
  if (!ok) printf("  %s: status %d\n  stdout: %s\n  stderr: %s\n", what, status, o->out, o->err);
}

TEST(check_on_auto) {
  NEED_TOOL();
  outcome_t o;
  run_conv(&o, "--n", "2", "--hw", "9", "--c", "5", "--k", "7", "--check", NULL);
  expect_check_ok("auto", &o);
  CHECK(strstr(o.out, "conv2d forward, backend ") != NULL && strstr(o.out, "(auto), f32") != NULL);
}

TEST(check_on_every_backend) {
  NEED_TOOL();
  static char* const backends[] = {"ref", "cpu_direct", "cpu_winograd"};
  for (int b = 0; b < 3; b++) {
    outcome_t o;
    run_conv(&o, "--n", "1", "--hw", "11", "--c", "19", "--k", "70", "--bias", "--backend", backends[b], "--check",
             NULL);
    expect_check_ok(backends[b], &o);
    char named[64];
    snprintf(named, sizeof named, "backend %s (named)", backends[b]);
    CHECK(strstr(o.out, named) != NULL);
  }
  outcome_t o;
  run_conv(&o, "--n", "1", "--h", "12", "--w", "7", "--c", "3", "--k", "8", "--kernel", "5", "--stride", "2",
           "--backend", "cpu_direct", "--check", NULL);
  expect_check_ok("cpu_direct 5x5 stride 2", &o);
  run_conv(&o, "--hw", "6", "--c", "3", "--k", "2", "--dtype", "f64", "--engine", "interp", "--check", NULL);
  expect_check_ok("f64 on the interpreter", &o);
  CHECK(strstr(o.out, "backend ref (auto), f64") != NULL);
}

TEST(check_backward) {
  NEED_TOOL();
  outcome_t o;
  run_conv(&o, "--n", "2", "--hw", "9", "--c", "4", "--k", "3", "--stride", "2", "--op", "backward-data", "--check",
           NULL);
  expect_check_ok("backward data", &o);
  CHECK(strstr(o.out, "conv2d backward data, backend ref") != NULL);
  run_conv(&o, "--n", "2", "--hw", "8", "--c", "4", "--k", "3", "--pad", "0", "--op", "backward-filter", "--check",
           NULL);
  expect_check_ok("backward filter", &o);
}

TEST(timing_line) {
  NEED_TOOL();
  outcome_t o;
  run_conv(&o, "--hw", "10", "--c", "8", "--k", "8", "--repeat", "3", "--cache-filter", NULL);
  CHECK(o.status == 0);
  CHECK(strstr(o.out, "filter kept") != NULL);
  CHECK(strstr(o.out, "time: median ") != NULL && strstr(o.out, " of 3 runs") != NULL && strstr(o.out, "GFLOP/s"));
}

TEST(errors) {
  NEED_TOOL();
  outcome_t o;
  run_conv(&o, "--hw", "8", "--c", "3", "--k", "3", "--backend", "cpu_fast", NULL);
  CHECK(o.status == 1 && strstr(o.err, "unknown convolution backend \"cpu_fast\"") != NULL);
  run_conv(&o, "--hw", "8", "--c", "3", "--k", "3", "--stride", "2", "--backend", "cpu_winograd", "--check", NULL);
  CHECK(o.status == 1 && strstr(o.err, "UJ_ERR_UNSUPPORTED") && strstr(o.err, "takes strides up to 1"));
  CHECK(strstr(o.out, "check:") == NULL);
  run_conv(&o, "--hw", "2", "--c", "3", "--k", "3", "--kernel", "5", "--pad", "0", NULL);
  CHECK(o.status == 1 && strstr(o.err, "the padded input is smaller than the filter") != NULL);
  char* const bad[][2] = {{"--hw", "0"}, {"--pad", "-1"}, {"--op", "sideways"}, {"--dtype", "i32"}, {"--size", "3"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    run_conv(&o, bad[i][0], bad[i][1], NULL);
    CHECK(o.status == 2);
    if (o.status != 2) printf("  %s %s: status %d\n", bad[i][0], bad[i][1], o.status);
  }
  /* sizes within the options' bounds whose tensors cannot be addressed:
   * x from the options, y from a pad that makes it 2^62 floats */
  run_conv(&o, "--n", "1048576", "--hw", "1048576", "--c", "1048576", NULL);
  CHECK(o.status == 1 && strstr(o.err, "too large to address: [1048576,1048576,1048576,1048576] (x, f32)"));
  run_conv(&o, "--hw", "2", "--c", "1", "--k", "1048576", "--pad", "1048576", NULL);
  CHECK(o.status == 1 && strstr(o.err, "too large to address: [1,2097152,2097152,1048576] (y, f32)"));
  run_conv(&o, "--check", "--c", NULL);
  CHECK(o.status == 2 && strstr(o.err, "missing value after") != NULL);
}

/* How many times needle occurs in text. */
static int count_in(const char* text, const char* needle) {
  int n = 0;
  for (const char* at = text; (at = strstr(at, needle)) != NULL; at += strlen(needle)) n++;
  return n;
}

/* `bench --conv --quick`: one table (every core, batch 1) of the four
 * layers, every backend's row checked against ref ("err" at most 1), and
 * its targets; a bad option is a usage error. The full tables are make
 * bench's. */
TEST(bench_conv_quick) {
  NEED_TOOL();
  outcome_t o;
  run_command(&o, "bench", "--conv", "--quick", NULL);
  CHECK(o.status == 0);
  CHECK(strstr(o.out, "(--quick: batch 1, every core") != NULL);
  CHECK(count_in(o.out, "targets, this table:") == 1);
  CHECK(count_in(o.out, "cpu_winograd (no key)") == 4);
  CHECK(count_in(o.out, "(1 run)") == 4); /* ref's rows: batch 1 only, timed by the checking run */
  CHECK(strstr(o.out, "MISMATCH") == NULL && strstr(o.out, "failed") == NULL);
  if (o.status != 0) printf("  stdout: %s\n  stderr: %s\n", o.out, o.err);
  run_command(&o, "bench", "--conv", "--sideways", NULL);
  CHECK(o.status == 2 && strstr(o.err, "usage: bench --conv [--quick] [--threads N]") != NULL);
}

TEST_MAIN()
