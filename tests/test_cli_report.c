/* tests/test_cli_report.c: the uopjit tool names the engine that served,
 * and says why an engine cannot, run as a separate process the way a user
 * runs it:
 *   - `run -v --check` reports the engine that ran the program, not the
 *     interpreter that ran --check's reference (which it names apart);
 *   - `optim` names the engine that served its steps, which under auto is
 *     C once C kernels are there (from the disk cache, here), not MIR;
 *   - `info` says what auto does rather than the one engine it starts on,
 *     and why an engine is not available;
 *   - a TMPDIR the C engine cannot use is named as such, never as a
 *     missing compiler;
 *   - `--file` reads the program from a file or stdin and refuses a NUL
 *     byte with its line and column, where the text would otherwise end.
 * The harness is tests/cli_check.h. */
#include "cli_check.h"

static int engine_available(uj_engine_t e) {
  uj_ctx_t* ctx = uj_ctx_new();
  int ok = ctx && uj_engine_available(ctx, e);
  uj_ctx_free(ctx);
  return ok;
}

/* A TMPDIR that is not there (a buffer of its own: temp_path's are reused). */
static const char* missing_tmpdir(void) {
  static char path[PATH_MAX];
  snprintf(path, sizeof path, "%s", temp_path("no-such-tmpdir"));
  return path;
}

/* ---- run -v --check ------------------------------------------------------------------------ */

TEST(run_check_verbose_names_the_engine_that_ran) {
  NEED_CLI();
  static const uj_engine_t engines[] = {UJ_ENGINE_MIR, UJ_ENGINE_C, UJ_ENGINE_AUTO};
  for (size_t i = 0; i < sizeof engines / sizeof engines[0]; i++) {
    if (engines[i] != UJ_ENGINE_AUTO && !engine_available(engines[i])) continue;
    const char* name = uj_engine_name(engines[i]);
    result_t r = run_cli("run", "-v", "--check", "--engine", name, "y = x * 2 + 1", "--shape", "1000", NULL);
    if (r.status != 0 || strstr(r.out, "last run: engine interp")) result_show(name, &r);
    CHECK(r.status == 0);
    if (engines[i] == UJ_ENGINE_AUTO) {
      /* whichever tier served; never the reference's interpreter */
      CHECK(strstr(r.out, "last run: engine mir") || strstr(r.out, "last run: engine c"));
    } else {
      char want[64];
      snprintf(want, sizeof want, "last run: engine %s\n", name);
      CHECK(strstr(r.out, want) != NULL);
    }
    CHECK(strstr(r.out, "last run: engine interp") == NULL);
    CHECK(strstr(r.out, "check: the reference ran on interp, in f64\n") != NULL);
    result_free(&r);
  }
  /* the interpreter asked for is the interpreter reported */
  result_t r = run_cli("run", "-v", "--check", "--engine", "interp", "y = x * 2", "--shape", "100", NULL);
  CHECK(r.status == 0 && strstr(r.out, "last run: engine interp\n"));
  result_free(&r);
}

/* ---- optim ------------------------------------------------------------------------------------- */

/* Runs `optim` with these arguments and a cache of its own (cache), and
 * checks that its report starts with `want` ("c: adamw"). */
static void expect_optim(const char* cache, const char* want, const char* a, const char* b, const char* c,
                         const char* d) {
  setenv("UOPJIT_CACHE_DIR", cache, 1);
  result_t r = run_cli("optim", "--updater", "adamw", "--groups", "4", "--sizes", "100..300", "--steps", "3", a, b, c,
                       d, NULL);
  if (r.status != 0 || strncmp(r.out, want, strlen(want)) != 0) {
    printf("  wanted \"%s...\"\n", want);
    result_show("optim", &r);
  }
  CHECK(r.status == 0 && strncmp(r.out, want, strlen(want)) == 0);
  result_free(&r);
  setenv("UOPJIT_CACHE_DIR", cache_dir, 1);
}

TEST(optim_names_the_engine_that_served_the_steps) {
  NEED_CLI();
  SKIP_IF(!engine_available(UJ_ENGINE_MIR) || !engine_available(UJ_ENGINE_C), "needs MIR and a C compiler");
  char cache[PATH_MAX];
  snprintf(cache, sizeof cache, "%s", temp_path("optim-cache"));
  /* C compiles the kernels into the disk cache, and remembers the compiler */
  expect_optim(cache, "c: adamw", "--engine", "c", NULL, NULL);
  /* auto then finds them from the first step: C served every step (it used
   * to say "mir", the engine auto starts a new kernel on) */
  expect_optim(cache, "c: adamw", NULL, NULL, NULL, NULL);
  expect_optim(cache, "c: check: ok", "--check", "adamw", "--engine", "auto");
  /* without tiering auto is MIR alone */
  setenv("UOPJIT_TIER", "0", 1);
  expect_optim(cache, "mir: adamw", NULL, NULL, NULL, NULL);
  unsetenv("UOPJIT_TIER");
  /* an engine asked for is the engine named */
  expect_optim(cache, "mir: adamw", "--engine", "mir", NULL, NULL);
  setenv("UOPJIT_ENGINE", "c", 1);
  expect_optim(cache, "c: adamw", NULL, NULL, NULL, NULL);
  unsetenv("UOPJIT_ENGINE");
}

/* ---- info -------------------------------------------------------------------------------------- */

TEST(info_says_what_auto_does_and_why_an_engine_is_not_available) {
  NEED_CLI();
  result_t r = run_cli("info", NULL);
  CHECK(r.status == 0);
  CHECK(strstr(r.out, "\n  auto     available: ") != NULL);
  CHECK(strstr(r.out, "this context runs on") == NULL);
  /* CI's check (.ci/run) that MIR is listed keeps working */
  if (engine_available(UJ_ENGINE_MIR)) CHECK(strstr(r.out, "\n  mir      available\n") != NULL);
  int tiered = engine_available(UJ_ENGINE_MIR) && engine_available(UJ_ENGINE_C);
  if (tiered) CHECK(strstr(r.out, "auto     available: mir, then c once a kernel is compiled in the background"));
  if (!engine_available(UJ_ENGINE_CUDA)) CHECK(strstr(r.out, "\n  cuda     not available: ") != NULL);
  result_free(&r);
  if (!tiered) return;

  setenv("UOPJIT_TIER", "0", 1);
  r = run_cli("info", NULL);
  CHECK(r.status == 0 && strstr(r.out, "auto     available: mir alone (UOPJIT_TIER=0)"));
  result_free(&r);
  setenv("UOPJIT_TIER", "5", 1);
  r = run_cli("info", NULL);
  CHECK(r.status == 0 && strstr(r.out, "the compile starts after 5 calls: UOPJIT_TIER"));
  result_free(&r);
  unsetenv("UOPJIT_TIER");

  /* a C engine that cannot compile says why, and auto does without it */
  setenv("TMPDIR", missing_tmpdir(), 1);
  setenv("UOPJIT_CACHE", "0", 1);
  r = run_cli("info", NULL);
  char want[PATH_MAX + 128];
  snprintf(want, sizeof want, "\n  c        not available: cannot create a temporary directory in %s (TMPDIR): ",
           missing_tmpdir());
  if (!strstr(r.out, want)) result_show("info, TMPDIR missing", &r);
  CHECK(r.status == 0 && strstr(r.out, want));
  CHECK(strstr(r.out, "auto     available: mir alone (c is not available)") != NULL);
  result_free(&r);
  unsetenv("UOPJIT_CACHE");
  unsetenv("TMPDIR");
}

/* ---- TMPDIR ------------------------------------------------------------------------------------- */

TEST(a_tmpdir_the_c_engine_cannot_use_is_named) {
  NEED_CLI();
  SKIP_IF(!have_cc(), "no C compiler named cc");
  char want[PATH_MAX + 128];
  snprintf(want, sizeof want, "cannot create a temporary directory in %s (TMPDIR): No such file or directory",
           missing_tmpdir());
  /* no disk cache: the compiler's probe is what cannot run */
  setenv("UOPJIT_CACHE", "0", 1);
  setenv("TMPDIR", missing_tmpdir(), 1);
  result_t r = run_cli("run", "--engine", "c", "y = x * 3", "--shape", "100", NULL);
  if (r.status != 1 || !strstr(r.err, want)) result_show("run --engine c, no cache", &r);
  CHECK(r.status == 1);
  CHECK(strstr(r.err, "engine c is not available: ") && strstr(r.err, want));
  CHECK(strstr(r.err, "working C compiler") == NULL);
  result_free(&r);
  unsetenv("UOPJIT_CACHE");
  unsetenv("TMPDIR");

  /* a cache that remembers the compiler: the compile is what cannot run */
  r = run_cli("run", "--engine", "c", "y = x * 4", "--shape", "100", NULL);
  CHECK(r.status == 0);
  result_free(&r);
  setenv("TMPDIR", missing_tmpdir(), 1);
  r = run_cli("run", "--engine", "c", "y = x * 5 + 0.25", "--shape", "100", NULL);
  if (r.status != 1 || !strstr(r.err, want)) result_show("run --engine c, remembered compiler", &r);
  CHECK(r.status == 1 && strstr(r.err, "UJ_ERR_IO") && strstr(r.err, want));
  result_free(&r);
  /* auto runs anyway, on MIR */
  if (engine_available(UJ_ENGINE_MIR)) {
    r = run_cli("run", "y = x * 6", "--shape", "100", "--check", NULL);
    CHECK(r.status == 0 && strstr(r.out, "check: ok"));
    result_free(&r);
  }
  unsetenv("TMPDIR");
}

/* ---- --file -------------------------------------------------------------------------------------- */

static void write_bytes(const char* path, const char* bytes, size_t n) {
  FILE* f = fopen(path, "wb");
  CHECK(f != NULL);
  if (!f) return;
  CHECK(fwrite(bytes, 1, n, f) == n);
  fclose(f);
}

TEST(file_sources_refuse_a_nul_byte_with_its_place) {
  NEED_CLI();
  char good[PATH_MAX], bad[PATH_MAX], none[PATH_MAX]; /* temp_path's buffers are reused */
  snprintf(good, sizeof good, "%s", temp_path("good.uj"));
  snprintf(bad, sizeof bad, "%s", temp_path("nul.uj"));
  snprintf(none, sizeof none, "%s", temp_path("none.uj"));
  static const char text[] = "y = x * 2\n# a comment\nz = y + 1\n";
  write_bytes(good, text, sizeof text - 1);
  result_t r = run_cli("run", "--file", good, "--shape", "10", "--check", NULL);
  CHECK(r.status == 0 && strstr(r.out, "outputs y[10] z[10]") && strstr(r.out, "check: ok"));
  result_free(&r);
  /* a bare expression in a file is y = EXPR too */
  write_bytes(good, "1/(1+exp(-x))\n", 14);
  r = run_cli("dump", "--file", good, NULL);
  CHECK(r.status == 0 && strstr(r.out, "tensors"));
  result_free(&r);

  /* the NUL at line 3, column 5 (offset 26): what follows would be lost */
  static const char with_nul[] = "y = x * 2\n# a comment\nz = \0y + 1\n";
  write_bytes(bad, with_nul, sizeof with_nul - 1);
  static const char* const commands[] = {"run", "dump", "aot"};
  for (int i = 0; i < 3; i++) {
    char out[PATH_MAX];
    snprintf(out, sizeof out, "%s", temp_path("nul.c"));
    r = i == 2 ? run_cli("aot", "--file", bad, "-o", out, NULL) : run_cli(commands[i], "--file", bad, NULL);
    if (r.status != 1 || !strstr(r.err, "program line 3, column 5: a NUL byte (offset 26 of "))
      result_show(commands[i], &r);
    CHECK(r.status == 1);
    CHECK(strstr(r.err, "UJ_ERR_PARSE: program line 3, column 5: a NUL byte (offset 26 of ") != NULL);
    CHECK(strstr(r.err, bad) != NULL);
    if (i == 2) CHECK(!file_exists(out));
    result_free(&r);
  }

  /* from standard input, through the shell */
  char* argv[] = {"sh", "-c", "printf 'y = x\\000 * 2' | \"$0\" run --file -", cli_path, NULL};
  r = run_program("sh", 1, argv);
  CHECK(r.status == 1 && strstr(r.err, "program line 1, column 6: a NUL byte (offset 5 of standard input)"));
  result_free(&r);
  char* argv_ok[] = {"sh", "-c", "printf 'y = x * 2' | \"$0\" run --file - --shape 10 --check", cli_path, NULL};
  r = run_program("sh", 1, argv_ok);
  CHECK(r.status == 0 && strstr(r.out, "check: ok"));
  result_free(&r);

  /* usage: a file that is not there, a source and a file */
  r = run_cli("run", "--file", none, NULL);
  CHECK(r.status == 2 && strstr(r.err, "cannot open --file"));
  result_free(&r);
  r = run_cli("run", "y = x", "--file", good, NULL);
  CHECK(r.status == 2 && strstr(r.err, "not both"));
  result_free(&r);
}

TEST_MAIN()
