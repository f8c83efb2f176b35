/* tests/test_cli.c: the uopjit command-line tool (tools/), run as a separate
 * process the way a user runs it: `uopjit aot` (the C file it writes, its
 * errors, that it never leaves a partial file, that the file compiles),
 * `uopjit cache stats|list|clear` against the kernels `uopjit run` stores,
 * `uopjit run --check` on NaN and infinite results, help, version and usage
 * errors, `uopjit dump --cuda` (no GPU needed) and `uopjit run --engine
 * cuda`. Per-input shapes and the checks of reductions are in
 * test_cli_inputs.c; the harness is tests/cli_check.h. */
#include "cli_check.h"

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
  int so_before = count_matches(r.out, " so ");
  result_free(&r);

  /* A program no other test compiles, so it is one new shared object (and,
   * the first time the C engine runs on this cache, the compiler probe's
   * remembered answer: a "ccid" entry). */
  r = run_cli("run", "y = x*3 + 0.25", "--engine", "c", "--shape", "64", "--repeat", "1", NULL);
  if (r.status != 0) result_show("run", &r);
  CHECK(r.status == 0);
  result_free(&r);

  r = run_cli("cache", "list", NULL);
  CHECK(r.status == 0);
  int entries = count_lines(r.out);
  CHECK(count_matches(r.out, " so ") == so_before + 1);
  CHECK(count_matches(r.out, " ccid ") == 1);
  CHECK(entries == so_before + 2);
  result_free(&r);

  char expected[64];
  r = run_cli("cache", "stats", NULL);
  CHECK(r.status == 0);
  snprintf(expected, sizeof expected, "entries: %d\n", entries);
  CHECK(strstr(r.out, expected) != NULL);
  snprintf(expected, sizeof expected, "so: %d entr", so_before + 1);
  CHECK(strstr(r.out, expected) != NULL);
  if (!strstr(r.out, expected)) result_show("cache stats", &r);
  result_free(&r);

  r = run_cli("cache", "clear", NULL);
  CHECK(r.status == 0);
  snprintf(expected, sizeof expected, "removed %d entr", entries);
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
    CHECK(strstr(by_help.out, "\nenvironment: ") != NULL && strstr(by_help.out, "docs/CONFIGURATION.md") != NULL);
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
  /* the help texts end with the variables' names; `help environment`
   * describes every one the general help names */
  result_t general = run_cli("--help", NULL);
  result_t env = run_cli("help", "environment", NULL);
  CHECK(general.status == 0 && env.status == 0);
  const char* names = general.out ? strstr(general.out, "\nenvironment:") : NULL;
  CHECK(names != NULL);
  int described = 0;
  for (const char* w = names ? names + 13 : ""; *w && *w != 'W';) {
    size_t len = strcspn(w, " \n");
    if (len > 0) {
      char word[48];
      snprintf(word, sizeof word, "\n  %.*s\n", (int)len, w);
      if (!strstr(env.out, word)) printf("  help environment lacks%s", word);
      CHECK(strstr(env.out, word) != NULL);
      described++;
    }
    w += len + (w[len] != 0);
  }
  CHECK(described >= 15);
  result_free(&general);
  result_free(&env);
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
  /* --engine overrides it, and auto is named as auto (tiered: -v says
   * which engine served the last run) */
  setenv("UOPJIT_ENGINE", "interp", 1);
  r = run_cli("run", "y = x * 2", "--shape", "16", "--repeat", "1", "--engine", "auto", NULL);
  CHECK(r.status == 0);
  CHECK(strncmp(r.out, "engine auto,", 12) == 0);
  result_free(&r);
  unsetenv("UOPJIT_ENGINE");
  r = run_cli("run", "y = x * 2", "--shape", "16", "--repeat", "1", "-v", NULL);
  CHECK(r.status == 0 && strncmp(r.out, "engine auto,", 12) == 0 && strstr(r.out, "last run: engine ") != NULL);
  result_free(&r);
}

/* --engine takes the names uj_engine_name spells, every one of them, and
 * lists them all when given another */
TEST(engine_option_takes_every_engine_name) {
  NEED_CLI();
  for (int e = 0; e <= (int)UJ_ENGINE_CUDA; e++) {
    const char* name = uj_engine_name((uj_engine_t)e);
    result_t r = run_cli("run", "y = x * 2", "--shape", "16", "--repeat", "1", "--engine", name, NULL);
    /* a known name is never a usage error; an engine missing here fails with 1 */
    if (r.status != 0 && r.status != 1) result_show("run --engine <name>", &r);
    CHECK(r.status == 0 || r.status == 1);
    result_free(&r);
  }
  const char* commands[] = {"run", "conv"};
  for (int i = 0; i < 2; i++) {
    result_t r = i == 0 ? run_cli("run", "y = x * 2", "--shape", "16", "--engine", "bogus", NULL)
                        : run_cli("conv", "--engine", "bogus", NULL);
    if (r.status != 2) result_show(commands[i], &r);
    CHECK(r.status == 2);
    CHECK(strstr(r.err, "--engine wants auto, interp, mir, c or cuda, got \"bogus\"") != NULL);
    result_free(&r);
  }
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

/* bf16 and f16 inputs: random values, --check against the f64 interpreter
 * within a unit of the format, the CUDA source, and an AOT file that
 * compiles without warnings. */
TEST(half_dtypes_run_dump_and_aot) {
  NEED_CLI();
  static const char* const engines[] = {"interp", "c", "mir"};
  static const char* const dtypes[] = {"bf16", "f16", "x=bf16"};
  const char* program = "y = x * w + sigmoid(x) / 3; s = sum(x * w); p: bf16; p = w";
  for (int d = 0; d < 3; d++)
    for (int e = 0; e < 3; e++) {
      result_t r = run_cli("run", "--check", "--engine", engines[e], "--dtype", dtypes[d], "--shape", "257", program, NULL);
      if (r.status != 0 || !strstr(r.out, "check: ok")) result_show(program, &r);
      CHECK(r.status == 0 && strstr(r.out, "check: ok") != NULL);
      result_free(&r);
    }
  result_t r = run_cli("dump", "--cuda", "--dtype", "bf16", "y = x * 2", NULL);
  CHECK(r.status == 0 && strstr(r.out, "uj_f32_to_bf16(") != NULL && strstr(r.out, "#include") == NULL);
  result_free(&r);
  r = run_cli("run", "--dtype", "f8", "y = x", NULL);
  CHECK(r.status != 0 && strstr(r.err, "bf16") != NULL);
  result_free(&r);
  if (!have_cc()) return;
  char c_path[PATH_MAX], o_path[PATH_MAX];
  snprintf(c_path, sizeof c_path, "%s", temp_path("half.c"));
  snprintf(o_path, sizeof o_path, "%s", temp_path("half.o"));
  r = run_cli("aot", "--dtype", "f16", "y = x * w + 1; c: bf16; c = y", "-o", c_path, NULL);
  CHECK(r.status == 0);
  result_free(&r);
  char* cc_argv[] = {"cc", "-O3", "-std=c11", "-Wall", "-Wextra", "-Werror", "-c", c_path, "-o", o_path, NULL};
  r = run_program("cc", 1, cc_argv);
  if (r.status != 0) result_show("cc", &r);
  CHECK(r.status == 0);
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
