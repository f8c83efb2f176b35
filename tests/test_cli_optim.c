/* tests/test_cli_optim.c: `uopjit optim`. --check of a built-in and of an
 * updater text passes on every CPU engine and says so once per engine; a
 * shapes file and the mixed-precision options reach the step, and so do
 * half parameters with f32 master weights (--dtype bf16|f16); a wrong
 * updater (a rule that is not the f64 one: the check must be able to fail)
 * is reported with its step, group and element; bad usage exits 2 with
 * the reason. */
#include "cli_check.h"
#include "harness.h"

/* The number of CPU engines this build has. */
static int cpu_engines(void) {
  uj_ctx_t* c = uj_ctx_new();
  int n = 1 + uj_engine_available(c, UJ_ENGINE_MIR) + uj_engine_available(c, UJ_ENGINE_C);
  uj_ctx_free(c);
  return n;
}

TEST(check_of_a_builtin_and_of_a_text_passes_on_every_cpu_engine) {
  NEED_CLI();
  result_t r = run_cli("optim", "--check", "adamw", "--groups", "9", "--sizes", "1..3000", NULL);
  CHECK(r.status == 0 && count_matches(r.out, "check: ok") == cpu_engines());
  CHECK(strstr(r.out, "interp: check: ok max_rel_err=") && strstr(r.out, "9 groups"));
  if (r.status) result_show("adamw", &r);
  result_free(&r);
  r = run_cli("optim", "--updater", "[update]\nm = 0.9*m + gscale*g\np = p - lr*m", "--scalar", "lr=0.05", "--check",
              "--groups", "5", "--steps", "4", "--grad-scale", "512", "--max-grad-norm", "3", NULL);
  CHECK(r.status == 0 && count_matches(r.out, "check: ok") == cpu_engines() && strstr(r.out, "4 steps"));
  if (r.status) result_show("a text", &r);
  result_free(&r);
}

TEST(half_parameters_with_f32_master_weights_check_on_every_cpu_engine) {
  NEED_CLI();
  result_t r = run_cli("optim", "--check", "lamb", "--dtype", "bf16", "--master", "f32", "--groups", "7", "--sizes",
                       "1..2000", NULL);
  CHECK(r.status == 0 && count_matches(r.out, "check: ok") == cpu_engines() && strstr(r.out, "bf16 with f32 master"));
  if (r.status) result_show("lamb bf16", &r);
  result_free(&r);
  r = run_cli("optim", "--updater", "[update]\nm = 0.9*m + gscale*g\np = p - lr*m", "--scalar", "lr=0.05", "--check",
              "--dtype", "f16", "--groups", "5", "--grad-scale", "512", "--max-grad-norm", "3", NULL);
  CHECK(r.status == 0 && count_matches(r.out, "check: ok") == cpu_engines() && strstr(r.out, "f16 with f32 master"));
  if (r.status) result_show("a text in f16", &r);
  result_free(&r);
  r = run_cli("optim", "--updater", "adamw", "--dtype", "bf16", "--groups", "4", "--engine", "interp", "--steps", "3",
              NULL);
  CHECK(r.status == 0 && strstr(r.out, "adamw, bf16, 4 groups") && strstr(r.out, "median step"));
  if (r.status) result_show("timing bf16", &r);
  result_free(&r);
}

TEST(a_shapes_file_gives_the_groups) {
  NEED_CLI();
  const char* path = temp_path("shapes.txt");
  FILE* f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs("# two tensors\n768\n12,34\n", f);
  fclose(f);
  result_t r = run_cli("optim", "--check", "lamb", "--shapes-file", path, "--engine", "interp", NULL);
  CHECK(r.status == 0 && strstr(r.out, "2 groups, 1176 elements"));
  result_free(&r);
  r = run_cli("optim", "--updater", "sgd", "--shapes-file", path, "--engine", "interp", "--steps", "3", NULL);
  CHECK(r.status == 0 && strstr(r.out, "median step") && strstr(r.out, "GB/s"));
  result_free(&r);
}

TEST(a_wrong_rule_fails_the_check) {
  NEED_CLI();
  /* a text that ignores gscale and branches on it: the engine's step gets
   * gscale 1/4 with the scaled g, the reference the unscaled g with gscale
   * 1, so the two rules differ and the check must say where */
  result_t r = run_cli("optim", "--updater", "[update]\np = p - 0.01*g*where(gscale > 0.5, 1, 2)", "--check",
                       "--engine", "interp", "--grad-scale", "4", "--groups", "2", NULL);
  CHECK(r.status == 1 && strstr(r.out, "check: FAILED step 1, group 0, p element"));
  if (r.status != 1) result_show("wrong rule", &r);
  result_free(&r);
}

TEST(bad_usage_exits_2_with_the_reason) {
  NEED_CLI();
  static const struct { const char* args[6]; const char* message; } cases[] = {
      {{"optim", NULL}, "needs an updater"},
      {{"optim", "--updater", "adamz", NULL}, "no such updater"},
      {{"optim", "--check", "adam", "--steps", "0", NULL}, "--steps wants 1 to 100000"},
      {{"optim", "--check", "adam", "--groups", "x", NULL}, "--groups wants gpt2 or a count"},
      {{"optim", "--check", "adam", "--sizes", "5..2", NULL}, "--sizes wants MIN..MAX"},
      {{"optim", "--check", "adam", "--scalar", "beta=1", NULL}, "no hyperparameter \"beta\""},
      {{"optim", "--check", "adam", "--dtype", "f8", NULL}, "--dtype wants f32, bf16 or f16"},
      {{"optim", "--check", "adam", "--master", "bf16", NULL}, "--master wants f32"},
      {{"optim", "--check", "adam", "--engine", "gpu", NULL}, "--engine wants"},
      {{"optim", "--updater", "p = p - (g", NULL}, "program line 1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char* const* a = cases[i].args;
    result_t r = run_cli(a[0], a[1], a[2], a[3], a[4], a[5], NULL);
    int ok = r.status == 2 && strstr(r.err, cases[i].message);
    CHECK(ok);
    if (!ok) result_show(cases[i].message, &r);
    result_free(&r);
  }
}

TEST_MAIN()
