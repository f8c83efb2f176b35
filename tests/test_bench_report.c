/* tests/test_bench_report.c: `uopjit bench`, run as a separate process the
 * way `make run` runs it (--quick), on one small workload (sumsq at 2^10, one
 * thread, the C engine and the hand-written loop, no plots): it exits 0
 * and writes results.json and report.md; results.json validates against
 * bench/results.schema.json with bench/check_results.py, through the
 * jsonschema package when it is importable and through the script's own
 * validator always, and a copy with one field made invalid fails both;
 * the JSON holds the C row and its traffic-matched copy row. Bad options
 * are usage errors (status 2).
 *
 * The binary under test sits next to this test's directory; every test
 * skips when it is not there, and the validation skips without a python3.
 * The figures themselves are not checked: tests never assert on time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_binary.h"
#include "harness.h"

#ifndef BENCH_SOURCE_DIR
#define BENCH_SOURCE_DIR "bench"
#endif

static char tool[PATH_MAX];
static char out_dir[64];
static int ran_status = -1;

/* The exit status of a shell command, or -1. */
static int shell(const char* command) {
  int status = system(command);
  return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static char* read_all(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* text = size >= 0 ? malloc((size_t)size + 1) : NULL;
  if (text && fread(text, 1, (size_t)size, f) != (size_t)size) {
    free(text);
    text = NULL;
  }
  if (text) text[size] = '\0';
  fclose(f);
  return text;
}

/* Runs the small bench once for every test. */
static int run_bench(void) {
  if (ran_status >= 0) return ran_status;
  find_cli(tool, sizeof tool);
  if (!tool[0]) return ran_status = 0;
  snprintf(out_dir, sizeof out_dir, "/tmp/uopjit-test-bench-XXXXXX");
  if (!mkdtemp(out_dir)) return ran_status = 0;
  char command[PATH_MAX + 512];
  snprintf(command, sizeof command,
           "'%s' bench --quick --filter sumsq --sizes 10 --threads 1 --engines c,hand --no-plots --out '%s/report' "
           ">'%s/stdout' 2>'%s/stderr'",
           tool, out_dir, out_dir, out_dir);
  int status = shell(command);
  ran_status = 1;
  return status == 0 ? 1 : 2;
}

static const char* python(void) {
  const char* chosen = getenv("UOPJIT_BENCH_PYTHON");
  if (chosen && *chosen) return chosen;
  return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

static int have_python(void) {
  char command[512];
  snprintf(command, sizeof command, "'%s' -c 'import json' >/dev/null 2>&1", python());
  return shell(command) == 0;
}

/* check_results.py's status on path (own: its own validator). */
static int validate(const char* path, int own) {
  char command[PATH_MAX * 2];
  snprintf(command, sizeof command, "'%s' '%s/check_results.py' %s '%s/results.schema.json' '%s' >/dev/null 2>&1",
           python(), BENCH_SOURCE_DIR, own ? "--own" : "", BENCH_SOURCE_DIR, path);
  return shell(command);
}

TEST(bench_writes_the_report) {
  SKIP_IF(run_bench() == 0, "no uopjit binary next to the tests");
  CHECK(ran_status == 1);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/report/results.json", out_dir);
  char* json = read_all(path);
  snprintf(path, sizeof path, "%s/report/report.md", out_dir);
  char* md = read_all(path);
  CHECK(json != NULL);
  CHECK(md != NULL);
  if (json) {
    CHECK(strstr(json, "\"workload\": \"sumsq\", \"runner\": \"c\", \"kind\": \"jit\"") != NULL);
    CHECK(strstr(json, "\"workload\": \"sumsq\", \"runner\": \"copy\", \"kind\": \"limit\"") != NULL);
    CHECK(strstr(json, "\"triad_bytes_counted\": 24") != NULL);
  }
  if (md) CHECK(strstr(md, "no plots: --no-plots") != NULL);
  free(json);
  free(md);
}

TEST(results_validate_against_the_schema) {
  SKIP_IF(run_bench() == 0, "no uopjit binary next to the tests");
  SKIP_IF(!have_python(), "no python3 to run bench/check_results.py");
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/report/results.json", out_dir);
  CHECK(validate(path, 0) == 0);
  CHECK(validate(path, 1) == 0);
}

TEST(an_invalid_field_fails_validation) {
  SKIP_IF(run_bench() == 0, "no uopjit binary next to the tests");
  SKIP_IF(!have_python(), "no python3 to run bench/check_results.py");
  char path[PATH_MAX], bad[PATH_MAX];
  snprintf(path, sizeof path, "%s/report/results.json", out_dir);
  snprintf(bad, sizeof bad, "%s/bad.json", out_dir);
  char* json = read_all(path);
  CHECK(json != NULL);
  char* field = json ? strstr(json, "\"dtype\": \"f32\"") : NULL;
  CHECK(field != NULL);
  if (!field) {
    free(json);
    return;
  }
  memcpy(field, "\"dtype\": \"f99\"", 14); /* not in the schema's enum */
  FILE* f = fopen(bad, "w");
  CHECK(f != NULL);
  if (f) fputs(json, f), fclose(f);
  CHECK(validate(bad, 0) == 1);
  CHECK(validate(bad, 1) == 1);
  free(json);
}

TEST(bad_options_are_usage_errors) {
  SKIP_IF(run_bench() == 0, "no uopjit binary next to the tests");
  static const char* const bad[] = {"--sizes 99", "--engines gpu9", "--threads 0", "--bogus", "--out"};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    char command[PATH_MAX + 256];
    snprintf(command, sizeof command, "'%s' bench %s >/dev/null 2>&1", tool, bad[k]);
    int status = shell(command);
    if (status != 2) printf("  `uopjit bench %s` exited %d\n", bad[k], status);
    CHECK(status == 2);
  }
}

TEST(cleanup) {
  if (out_dir[0]) {
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", out_dir);
    CHECK(shell(command) == 0);
  }
}

TEST_MAIN()
