/* tests/test_cli_env.c: the uopjit tool's answers to a bad environment and
 * to a run too large for the machine, run as a separate process the way a
 * user runs it: an invalid UOPJIT_* value exits 2 with a message naming the
 * variable; a run whose buffers cannot fit in memory is refused before
 * anything is allocated, naming the bytes needed and available.
 *
 * The binary under test sits next to this test's directory (build/uopjit
 * for build/tests/test_cli_env); every test skips when it is not there.
 * Commands go through /bin/sh, which lets a test lower the process's
 * address-space limit (ulimit -v) to reach the refusal on any machine. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static char cli_path[PATH_MAX]; /* "" when the binary was not found */
static char temp_dir[64];
static int set_up;

static void set_up_once(void) {
  if (set_up) return;
  set_up = 1;
  char exe[PATH_MAX - 16];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    for (int up = 0; up < 2; up++) { /* strip "/test_cli_env", then "/tests" */
      char* slash = strrchr(exe, '/');
      if (slash) *slash = '\0';
    }
    snprintf(cli_path, sizeof cli_path, "%s/uopjit", exe);
    if (access(cli_path, X_OK) != 0) cli_path[0] = '\0';
  }
  strcpy(temp_dir, "/tmp/uopjit-cli-env-XXXXXX");
  if (!mkdtemp(temp_dir)) temp_dir[0] = '\0';
  char cache[sizeof temp_dir + 8];
  snprintf(cache, sizeof cache, "%s/cache", temp_dir);
  setenv("UOPJIT_CACHE_DIR", cache, 1);
}

#define NEED_CLI()                                                                          \
  do {                                                                                      \
    set_up_once();                                                                          \
    SKIP_IF(!cli_path[0] || !temp_dir[0], "the uopjit binary is not next to this test's directory"); \
  } while (0)

/* Runs `<prefix> <cli> <args>` through the shell, stderr into *err (the
 * caller frees it); the exit status, or -1. prefix and args are the
 * tests' own text. */
static int run_cli(const char* prefix, const char* args, char** err) {
  char err_path[128], command[PATH_MAX + 1024];
  snprintf(err_path, sizeof err_path, "%s/stderr.txt", temp_dir);
  snprintf(command, sizeof command, "%s exec '%s' %s >/dev/null 2>'%s'", prefix, cli_path, args, err_path);
  int status = system(command);
  *err = NULL;
  FILE* f = fopen(err_path, "r");
  if (f) {
    char* text = calloc(1, 8192);
    if (text && fread(text, 1, 8191, f) == 0) text[0] = '\0';
    fclose(f);
    *err = text;
  }
  if (!*err) *err = calloc(1, 1);
  return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* MemAvailable in bytes, or 0. */
static unsigned long long mem_available(void) {
  FILE* f = fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
  fclose(f);
  return kb * 1024;
}

TEST(an_invalid_variable_exits_2_naming_it) {
  NEED_CLI();
  static const struct {
    const char* assignment;
    const char* message;
  } cases[] = {
      {"UOPJIT_THREADS=abc", "UOPJIT_THREADS=\"abc\" is not valid: expected a whole number of threads"},
      {"UOPJIT_ENGINE=bogus", "UOPJIT_ENGINE=\"bogus\" is not valid: expected auto, interp, mir, c or cuda"},
      {"UOPJIT_MIR_LEVEL=5", "UOPJIT_MIR_LEVEL=\"5\" is not valid: expected 0, 1, 2 or 3"},
      {"UOPJIT_CACHE=off", "UOPJIT_CACHE=\"off\" is not valid"},
      {"UOPJIT_CACHE_MEMORY_LIMIT=1T", "UOPJIT_CACHE_MEMORY_LIMIT=\"1T\" is not valid"},
      {"UOPJIT_CACHE_DISK_LIMIT=lots", "UOPJIT_CACHE_DISK_LIMIT=\"lots\" is not valid"},
      {"UOPJIT_DEBUG=everything", "UOPJIT_DEBUG=\"everything\" is not valid"},
      {"UOPJIT_CONV_BACKEND=fast", "UOPJIT_CONV_BACKEND=\"fast\" is not valid"},
      {"UOPJIT_CONV_ISA=neon9", "UOPJIT_CONV_ISA=\"neon9\" is not valid"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char* err;
    int status = run_cli(cases[i].assignment, "run 'y = x*2' --shape 10", &err);
    int ok = status == 2 && strstr(err, cases[i].message);
    if (!ok) printf("  %s: exit %d, stderr: %s\n", cases[i].assignment, status, err);
    CHECK(ok);
    free(err);
  }
  char* err;
  CHECK(run_cli("UOPJIT_THREADS=2", "run 'y = x*2' --shape 10", &err) == 0);
  free(err);
}

TEST(the_done_when_shape_is_refused_naming_the_bytes) {
  NEED_CLI();
  /* 10^10 f32 elements in and out: 80000000000 bytes */
  unsigned long long available = mem_available();
  SKIP_IF(!available || available >= 80000000000ull, "this machine has room for 80 GB");
  char* err;
  int status = run_cli("", "run 'y = x*2' --shape 100000,100000", &err);
  int ok = status == 1 && strstr(err, "need 80000000000 bytes (74.5 GiB)") && strstr(err, "MemAvailable");
  if (!ok) printf("  exit %d, stderr: %s\n", status, err);
  CHECK(ok);
  free(err);
}

TEST(a_run_beyond_the_address_space_limit_is_refused) {
  NEED_CLI();
#if HARNESS_ASAN
  SKIP_IF(1, "AddressSanitizer's shadow memory needs more address space than the limit leaves");
#endif
  /* 4e8 f32 elements in and out, and their f64 copies for --check:
   * 3.2e9 + 6.4e9 bytes, far beyond a 1 GiB limit */
  char* err;
  int status = run_cli("ulimit -v 1048576;", "run 'y = x*2' --shape 20000,20000 --check", &err);
  int ok = status == 1 && strstr(err, "need 9600000000 bytes (8.9 GiB)") && strstr(err, "ulimit -v");
  if (!ok) printf("  exit %d, stderr: %s\n", status, err);
  CHECK(ok);
  free(err);
  /* and a run that fits goes on */
  status = run_cli("ulimit -v 4194304;", "run 'y = x*2' --shape 1000 --check", &err);
  CHECK(status == 0);
  free(err);
}

TEST(a_shape_beyond_the_limits_names_them) {
  NEED_CLI();
  const char* shapes[] = {"1,2,3,4,5,6,7,8,9", "300000,300000"}; /* rank 9; 9e10 elements */
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    char args[128], *err;
    snprintf(args, sizeof args, "run 'y = x*2' --shape %s", shapes[i]);
    int status = run_cli("", args, &err);
    int ok = status == 2 && strstr(err, "1 to 8 sizes") && strstr(err, "at most 2^34 elements");
    if (!ok) printf("  --shape %s: exit %d, stderr: %s\n", shapes[i], status, err);
    CHECK(ok);
    free(err);
  }
}

TEST_MAIN()
