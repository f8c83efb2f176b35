/* tests/cli_check.h: what the tests of the command-line tool share: the
 * binary under test (next to the test's own directory: build/tests/test_cli
 * runs build/uopjit, build/debug/tests/test_cli runs build/debug/uopjit;
 * every test skips when it is not there), a temporary directory for the
 * files the tests write, a kernel cache directory of the tool's own (so
 * counts are exact and no other cache is touched), and running the tool as
 * a separate process with its output captured. */
#ifndef UJ_TESTS_CLI_CHECK_H
#define UJ_TESTS_CLI_CHECK_H

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

static inline int remove_one(const char* path, const struct stat* st, int type, struct FTW* ftw) {
  (void)st, (void)type, (void)ftw;
  return remove(path);
}

static inline void remove_temp_root(void) {
  if (temp_root[0]) nftw(temp_root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Finds the binary (<dir of this test>/../uopjit) and makes the temporary
 * directory, once. */
static inline void set_up_once(void) {
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
static inline const char* temp_path(const char* name) {
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

static inline char* read_whole(const char* path) {
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
static inline result_t run_program(const char* file, int search, char* const* argv) {
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
static inline result_t run_cli(const char* first, ...) {
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

static inline void result_free(result_t* r) {
  free(r->out);
  free(r->err);
}

/* Prints what the tool said, for a failing check to be understood. */
static inline void result_show(const char* what, const result_t* r) {
  printf("  %s: status %d\n  stdout: %s\n  stderr: %s\n", what, r->status, r->out, r->err);
}

static inline int count_lines(const char* text) {
  int n = 0;
  for (; *text; text++) n += *text == '\n';
  return n;
}

/* How many times needle occurs in text. */
static inline int count_matches(const char* text, const char* needle) {
  int n = 0;
  for (const char* at = text; (at = strstr(at, needle)) != NULL; at += strlen(needle)) n++;
  return n;
}

static inline int file_exists(const char* path) { return access(path, F_OK) == 0; }

/* 1 when the temporary directory holds a leftover of an interrupted write
 * ("<name>.tmp-XXXXXX"). */
static inline int temp_files_left(void) {
  DIR* d = opendir(temp_root);
  int found = 0;
  for (struct dirent* e; d && (e = readdir(d));) found |= strstr(e->d_name, ".tmp-") != NULL;
  if (d) closedir(d);
  return found;
}

/* 1 when a C compiler named cc is on PATH. */
static inline int have_cc(void) {
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


#endif
