/* tests/test_cache_stress.c: processes sharing one disk cache while it is
 * cleared and damaged under them.
 *
 * Worker processes each run `uopjit run --check --engine c` on a few
 * distinct programs, one after another, all with one UOPJIT_CACHE_DIR, so
 * that they load what the others stored and store what the others load.
 * Meanwhile one process runs `uopjit cache clear` in a loop and another, the
 * corrupter, picks cache files at random and flips a byte in place,
 * truncates, appends, deletes, or replaces a payload or a meta with another
 * entry's (copied in place with the owner's mode, so that the damage passes
 * the ownership checks and must be caught by the checksum or the key text).
 * Every run must exit 0 and say "check: ok" (its answer matches the
 * interpreter's): no failed run, no wrong result, no crash, no hang (a run
 * still going after five minutes is killed and counted).
 *
 * `make test` runs a bounded version (3 processes x 8 runs); tests/stress_cache.sh
 * runs the full one (4 processes x 150 runs). The corrupter's seed is printed
 * on failure, though the interleaving itself cannot be replayed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "uopjit.h"
#include "cli_binary.h"
#include "harness.h"

extern char** environ;

static int option_procs = 3, option_runs = 8;

static const char* const programs[] = {
    "y = x*3 + 0.25",
    "y = tanh(x) * 2 - x",
    "y = sqrt(x*x + 1) / (1 + exp(-x))",
    "y = x - amax(x, 0)",
};
#define NPROGRAMS (int)(sizeof programs / sizeof programs[0])

static char cli[PATH_MAX];
static char cache_dir[64];

static int remove_one(const char* path, const struct stat* st, int type, struct FTW* ftw) {
  (void)st, (void)type, (void)ftw;
  return remove(path);
}


/* A run that takes this long has hung (loaded damaged code that loops):
 * it is killed and counted as failed. Far beyond any compile. */
#define HUNG_SECONDS 300

/* Runs argv with stdout and stderr into out (NUL-terminated, truncated);
 * the wait status, or -1 when it could not start. *hung is set when it was
 * killed after HUNG_SECONDS. */
static int run_captured(char* const* argv, char* out, size_t cap, int* hung) {
  *hung = 0;
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &actions, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  size_t len = 0;
  char sink[512];
  time_t deadline = time(NULL) + HUNG_SECONDS;
  for (;;) {
    struct pollfd pfd = {pipe_fds[0], POLLIN, 0};
    int ready = poll(&pfd, 1, 1000);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) {
      if (rc == 0 && time(NULL) > deadline && !*hung) {
        *hung = 1;
        kill(pid, SIGKILL);
      }
      continue;
    }
    int room = len + 1 < cap;
    ssize_t got = read(pipe_fds[0], room ? out + len : sink, room ? cap - 1 - len : sizeof sink);
    if (got == 0 || (got < 0 && errno != EINTR)) break;
    if (got > 0 && room) len += (size_t)got;
  }
  out[len] = '\0';
  close(pipe_fds[0]);
  if (rc != 0) return -1;
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return status;
}

/* ---- the processes ----------------------------------------------------------------------- */

/* A worker: runs programs in turn; the number of failed runs (each shown). */
static int worker(int id) {
  int failures = 0;
  char out[8192];
  for (int i = 0; i < option_runs; i++) {
    const char* program = programs[(id + i) % NPROGRAMS];
    char* argv[] = {cli, "run", "--check", "--engine", "c", (char*)program, "--shape", "257", NULL};
    int hung;
    int status = run_captured(argv, out, sizeof out, &hung);
    int ok = status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(out, "check: ok");
    if (!ok) {
      failures++;
      fprintf(stderr, "  worker %d run %d, '%s': %s %d\n%s\n", id, i, program,
              hung ? "hung, killed after seconds:" : status >= 0 && WIFSIGNALED(status) ? "killed by signal" : "exit status",
              hung ? HUNG_SECONDS : status < 0 ? -1 : WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), out);
    }
  }
  return failures;
}

/* The clearer: `uopjit cache clear` until killed; exits 1 if one crashed. */
static void clearer(void) {
  char out[4096];
  for (;;) {
    char* argv[] = {cli, "cache", "clear", NULL};
    int hung;
    int status = run_captured(argv, out, sizeof out, &hung);
    if (status >= 0 && WIFSIGNALED(status)) {
      fprintf(stderr, "  cache clear killed by signal %d\n%s\n", WTERMSIG(status), out);
      _exit(1);
    }
    nanosleep(&(struct timespec){0, 15 * 1000000}, NULL);
  }
}

static uint64_t next_random(uint64_t* state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

/* Copies from into a fresh file renamed over to (mode 0600: still trusted). */
static void copy_over(const char* from, const char* to) {
  char temp[PATH_MAX + 8];
  snprintf(temp, sizeof temp, "%s.swap", to);
  int in = open(from, O_RDONLY), out = open(temp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  char buf[8192];
  ssize_t n;
  while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, (size_t)n) != n) break;
  if (in >= 0) close(in);
  if (out >= 0 && close(out) == 0 && rename(temp, to) == 0) return;
  unlink(temp);
}

/* The corrupter: damages a random cache file every few milliseconds until
 * killed. */
static void corrupter(uint64_t seed) {
  uint64_t st = seed | 1;
  char names[256][300];
  for (;;) {
    int n = 0;
    DIR* d = opendir(cache_dir);
    struct dirent* e;
    while (d && n < 256 && (e = readdir(d)) != NULL)
      if (e->d_name[0] != '.' && strlen(e->d_name) < 200) snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    if (d) closedir(d);
    if (n > 0) {
      char path[PATH_MAX], other[PATH_MAX];
      snprintf(path, sizeof path, "%s/%s", cache_dir, names[next_random(&st) % (uint64_t)n]);
      snprintf(other, sizeof other, "%s/%s", cache_dir, names[next_random(&st) % (uint64_t)n]);
      struct stat s;
      int fd = open(path, O_RDWR);
      if (fd >= 0 && fstat(fd, &s) == 0) {
        off_t size = s.st_size;
        unsigned char byte;
        off_t at = size > 0 ? (off_t)(next_random(&st) % (uint64_t)size) : 0;
        switch (next_random(&st) % 6) {
          case 0: /* a flipped byte, in place */
            if (size > 0 && pread(fd, &byte, 1, at) == 1) {
              byte ^= (unsigned char)(1u << (next_random(&st) % 8));
              if (pwrite(fd, &byte, 1, at) != 1) break;
            }
            break;
          case 1: /* truncated */
            if (ftruncate(fd, at) != 0) break;
            break;
          case 2: /* appended to */
            if (pwrite(fd, "garbage", 7, size) != 7) break;
            break;
          case 3: unlink(path); break;
          default: copy_over(other, path); break; /* another entry's payload or meta */
        }
      }
      if (fd >= 0) close(fd);
    }
    nanosleep(&(struct timespec){0, (long)(next_random(&st) % 8 + 1) * 1000000}, NULL);
  }
}

/* ---- the test ---------------------------------------------------------------------------- */

TEST(processes_share_a_cache_while_it_is_cleared_and_damaged) {
  find_cli(cli, sizeof cli);
  SKIP_IF(!cli[0], "the uopjit binary is not next to this test's directory");
  uj_ctx_t* ctx = uj_ctx_new();
  int have_c = ctx && uj_engine_available(ctx, UJ_ENGINE_C);
  uj_ctx_free(ctx);
  SKIP_IF(!have_c, "the C engine is not available (no system compiler)");
  uint64_t seed = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
  if (getenv("UJ_TEST_SEED")) seed = strtoull(getenv("UJ_TEST_SEED"), NULL, 0); /* as tests/engines_check.h */
  HARNESS_SEED(seed);
  strcpy(cache_dir, "/tmp/uopjit-stress-XXXXXX");
  CHECK(mkdtemp(cache_dir) != NULL);
  setenv("UOPJIT_CACHE_DIR", cache_dir, 1);
  unsetenv("UOPJIT_CACHE");
  setenv("UOPJIT_THREADS", "1", 1);
  fflush(stdout), fflush(stderr);

  pid_t clear_pid = fork();
  if (clear_pid == 0) clearer();
  pid_t corrupt_pid = fork();
  if (corrupt_pid == 0) corrupter(seed);
  pid_t workers[64];
  int nworkers = option_procs < 64 ? option_procs : 64;
  for (int w = 0; w < nworkers; w++)
    if ((workers[w] = fork()) == 0) {
      int failures = worker(w);
      _exit(failures > 100 ? 100 : failures);
    }
  int failed_runs = 0, lost_workers = 0;
  for (int w = 0; w < nworkers; w++) {
    int status = -1;
    if (workers[w] > 0 && waitpid(workers[w], &status, 0) == workers[w] && WIFEXITED(status))
      failed_runs += WEXITSTATUS(status);
    else
      lost_workers++;
  }
  int clear_status = -1, corrupt_status = -1;
  if (clear_pid > 0) kill(clear_pid, SIGKILL), waitpid(clear_pid, &clear_status, 0);
  if (corrupt_pid > 0) kill(corrupt_pid, SIGKILL), waitpid(corrupt_pid, &corrupt_status, 0);
  printf("  %d processes x %d runs: %d failed\n", nworkers, option_runs, failed_runs);
  CHECK(failed_runs == 0);
  CHECK(lost_workers == 0);
  /* the clearer exits 1 only when a cache clear crashed; else it was killed */
  CHECK(clear_pid > 0 && WIFSIGNALED(clear_status));
  CHECK(corrupt_pid > 0 && WIFSIGNALED(corrupt_status));
  nftw(cache_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(int argc, char** argv) {
  int rest = 1;
  while (rest + 1 < argc && (!strcmp(argv[rest], "--procs") || !strcmp(argv[rest], "--runs"))) {
    int value = atoi(argv[rest + 1]);
    if (value < 1) {
      fprintf(stderr, "%s: %s wants a positive number, got '%s'\n", argv[0], argv[rest], argv[rest + 1]);
      return 2;
    }
    *(!strcmp(argv[rest], "--procs") ? &option_procs : &option_runs) = value;
    rest += 2;
  }
  argv[rest - 1] = argv[0];
  return harness_main(argc - rest + 1, argv + rest - 1);
}
