/* tests/test_optim.c: the optimizer API. A user's updater from source text
 * (Adamax, torch.optim.Adamax's rule, which the library does not ship)
 * follows its rule in f64 on every CPU engine over 37 groups; the names an
 * updater text gives (state, hyperparameters, defaults) come out of the API;
 * every malformed text, unknown name and bad group fails with a message
 * naming it, and a failing step writes nothing; the multi-tensor CUDA
 * kernels of every updater, built-in and custom, compile with NVRTC for
 * sm_90, in f32 and with bf16/f16 gradients and half copies. */
#include "oracle.h"
#include "harness.h"
#include "optim_ref.h"

#define NGROUPS 37

/* torch.optim.Adamax: u = max(b2*u, |g| + eps), p -= lr/(1 - b1^t) * m/u */
static const char adamax_text[] =
    "# Adamax, as torch.optim.Adamax\n"
    "[defaults]\n"
    "lr = 0.002; b1 = 0.9; b2 = 0.999   # eps has none: the caller sets it\n"
    "[scalars]\n"
    "clr = lr/(1 - b1**t)\n"
    "[update]\n"
    "m = b1*m + (1 - b1)*gscale*g\n"
    "u = max(b2*u, abs(gscale*g) + eps)\n"
    "p = p - clr*m/u\n";

static void adamax_ref(double lr, double b1, double b2, double eps, int64_t t, int64_t n, double* p, const double* g,
                       double* m, double* u) {
  double clr = F(lr / (1 - pow(b1, (double)t)));
  b1 = F(b1), b2 = F(b2), eps = F(eps);
  for (int64_t i = 0; i < n; i++) {
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    u[i] = fmax(b2 * u[i], fabs(g[i]) + eps);
    p[i] -= clr * m[i] / u[i];
  }
}

TEST(a_custom_updater_names_its_state_and_hyperparameters) {
  uj_optim_t* opt = NULL;
  CHECK(uj_optim_new_source("adamax", adamax_text, &opt) == UJ_OK);
  if (!opt) return;
  CHECK(strcmp(uj_optim_name(opt), "adamax") == 0);
  CHECK(uj_optim_state_count(opt) == 2);
  CHECK(strcmp(uj_optim_state_name(opt, 0), "m") == 0 && strcmp(uj_optim_state_name(opt, 1), "u") == 0);
  CHECK(uj_optim_state_name(opt, 2) == NULL);
  CHECK(uj_optim_hparam_count(opt) == 4); /* lr b1 (from [scalars]), b2, eps; t and gscale are the step's */
  double v = 0;
  CHECK(uj_optim_get(opt, "lr", &v) == UJ_OK && v == 0.002);
  CHECK(uj_optim_get(opt, "eps", &v) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "eps has no value") != NULL);
  CHECK(uj_optim_set(opt, "beta", 1) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "lr, b1, b2, eps") != NULL);
  CHECK(uj_optim_step_count(opt) == 0);
  uj_optim_free(opt);
}

TEST(a_custom_updater_follows_its_rule_on_every_cpu_engine) {
  uint64_t seed = 777;
  HARNESS_SEED(seed);
  for (int slot = 0; slot < OR_NENGINES; slot++) {
    if (or_configs[slot].engine == UJ_ENGINE_CUDA || !or_configs[slot].passes) continue;
    uj_ctx_t* ctx = or_ctx(slot);
    uj_optim_t* opt = NULL;
    CHECK(uj_optim_new_source("adamax", adamax_text, &opt) == UJ_OK);
    if (!ctx || !opt) continue;
    uj_tensor_t p[NGROUPS], g[NGROUPS], m[NGROUPS], u[NGROUPS];
    uj_tensor_t* state[NGROUPS][2];
    uj_optim_group_t groups[NGROUPS];
    uint64_t rng = seed;
    for (int i = 0; i < NGROUPS; i++) {
      /* odd groups small, even ones up to 3000 or 3000 x 7 elements (one of
       * up to 3000 x 3000 made the interpreter's run most of this binary's
       * time, and reached no more of the step's code) */
      int64_t dims[2];
      int ndim = or_rand_shape(&rng, 1, 2, i % 2 ? 60 : 3000, dims);
      if (ndim == 2 && i % 2 == 0) dims[1] = 1 + dims[1] % 7;
      p[i] = or_tensor(UJ_F32, ndim, dims), g[i] = or_tensor(UJ_F32, ndim, dims);
      m[i] = or_tensor(UJ_F32, ndim, dims), u[i] = or_tensor(UJ_F32, ndim, dims);
      or_fill_real(&rng, &p[i], -1, 1);
      state[i][0] = &m[i], state[i][1] = &u[i];
      groups[i] = (uj_optim_group_t){&p[i], &g[i], state[i], NULL};
    }
    /* eps has no default: the step refuses, naming it, and writes nothing */
    float p0 = ((float*)p[0].data)[0];
    CHECK(uj_optim_step(ctx, opt, groups, NGROUPS, NULL) == UJ_ERR_INVALID);
    CHECK(strstr(uj_last_error(), "eps") != NULL);
    CHECK(((float*)p[0].data)[0] == p0 && uj_optim_step_count(opt) == 0);
    CHECK(uj_optim_set(opt, "eps", 1e-7) == UJ_OK);
    int64_t bad = 0;
    for (int step = 1; step <= 3; step++) {
      double *rp[NGROUPS], *rm[NGROUPS], *ru[NGROUPS];
      for (int i = 0; i < NGROUPS; i++) {
        or_fill_real(&rng, &g[i], -1, 1);
        rp[i] = or_to_double(&p[i]), rm[i] = or_to_double(&m[i]), ru[i] = or_to_double(&u[i]);
        double* rg = or_to_double(&g[i]);
        adamax_ref(0.002, 0.9, 0.999, 1e-7, step, or_tnumel(&p[i]), rp[i], rg, rm[i], ru[i]);
        free(rg);
      }
      CHECK(uj_optim_step(ctx, opt, groups, NGROUPS, NULL) == UJ_OK);
      for (int i = 0; i < NGROUPS; i++) {
        int64_t n = or_tnumel(&p[i]);
        bad += or_first_mismatch(rp[i], &p[i], OR_TOL_F32) >= 0;
        bad += or_first_mismatch(rm[i], &m[i], OR_TOL_F32) >= 0;
        bad += or_first_mismatch(ru[i], &u[i], OR_TOL_F32) >= 0;
        (void)n;
        free(rp[i]), free(rm[i]), free(ru[i]);
      }
    }
    CHECK(bad == 0);
    CHECK(uj_optim_step_count(opt) == 3);
    printf("  adamax (custom) %-7s %s\n", or_configs[slot].name, bad ? "FAILED" : "ok");
    for (int i = 0; i < NGROUPS; i++) or_tensor_free(&p[i]), or_tensor_free(&g[i]), or_tensor_free(&m[i]), or_tensor_free(&u[i]);
    uj_optim_free(opt);
  }
}

TEST(malformed_updater_texts_name_the_problem) {
  static const struct {
    const char *text, *message;
    uj_status_t status;
  } cases[] = {
      {"[update]\ng = 2*g\np = p - g", "assigns g", UJ_ERR_INVALID},
      {"[update]\nt = 1\np = p - t*g", "assigns t", UJ_ERR_INVALID},
      {"m = 0.9*m + g", "never assigns the parameter p", UJ_ERR_INVALID},
      {"[update]\np = p - lr*g\n[step]\n", "unknown section [step]", UJ_ERR_PARSE},
      {"p = p - g\n[update]\np = p - g", "in no section", UJ_ERR_PARSE},
      {"[update]\np = p - g\n[update]\np = p - g", "a second [update]", UJ_ERR_PARSE},
      {"[defaults]\nlr = 1\n[scalars]\nx = lr*2", "no [update] section", UJ_ERR_PARSE},
      {"[defaults]\nlr = fast\n[update]\np = p - lr*g", "[defaults] line 2: expected name = number", UJ_ERR_PARSE},
      {"[defaults]\nbeta = 1\n[update]\np = p - g", "beta is not a hyperparameter", UJ_ERR_INVALID},
      {"[update]\np = p - lr*g +\n", "[update], starting at text line 2: program line 1", UJ_ERR_PARSE},
      {"[update]\np = p - n*g\n[apply]\nn = sum(g*g)\np = p - g", "reads the per-group sum n before", UJ_ERR_INVALID},
      {"[scalars]\nbc = 1 - m\n[update]\nm = 0.9*m + g\np = p - bc*m", "[scalars] reads m", UJ_ERR_INVALID},
      {"[update]\nk = lr*2\np = p - k*g", "k reads no tensor", UJ_ERR_INVALID},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uj_optim_t* opt = (uj_optim_t*)&cases; /* must be reset to NULL */
    uj_status_t s = uj_optim_new_source("bad", cases[i].text, &opt);
    CHECK(s == cases[i].status);
    CHECK(opt == NULL);
    int named = strstr(uj_last_error(), cases[i].message) && strstr(uj_last_error(), "updater bad");
    CHECK(named);
    if (!named) fprintf(stderr, "  case %zu: \"%s\" lacks \"%s\"\n", i, uj_last_error(), cases[i].message);
  }
  uj_optim_t* opt = NULL;
  CHECK(uj_optim_new("adamz", &opt) == UJ_ERR_INVALID && opt == NULL);
  CHECK(strstr(uj_last_error(), "\"adamz\"") && strstr(uj_last_error(), "adamw_amsgrad"));
  CHECK(uj_optim_new_source(NULL, "p = p - g", &opt) == UJ_ERR_INVALID);
  CHECK(uj_optim_new(NULL, NULL) == UJ_ERR_INVALID);
  CHECK(uj_optim_builtin_text("lamb") && strstr(uj_optim_builtin_text("lamb"), "[apply]"));
  CHECK(uj_optim_builtin_name(uj_optim_builtin_count()) == NULL && uj_optim_builtin_text("x") == NULL);
}

TEST(a_bad_group_fails_the_step_before_any_write) {
  uj_ctx_t* ctx = or_ctx(0);
  uj_optim_t* opt = NULL;
  CHECK(uj_optim_new("adam", &opt) == UJ_OK);
  if (!ctx || !opt) return;
  int64_t n = 8;
  uj_tensor_t p[2], g[2], m[2], v[2];
  uj_tensor_t* st[2][2];
  uj_optim_group_t groups[2];
  for (int i = 0; i < 2; i++) {
    p[i] = or_tensor(UJ_F32, 1, &n), g[i] = or_tensor(UJ_F32, 1, &n), m[i] = or_tensor(UJ_F32, 1, &n);
    v[i] = or_tensor(UJ_F32, 1, &n);
    or_set(&p[i], 0, 0.5), or_set(&g[i], 0, 1);
    st[i][0] = &m[i], st[i][1] = &v[i];
    groups[i] = (uj_optim_group_t){&p[i], &g[i], st[i], NULL};
  }
  v[1].dims[0] = 7; /* group 1's v is shorter than its parameter */
  CHECK(uj_optim_step(ctx, opt, groups, 2, NULL) == UJ_ERR_SHAPE);
  CHECK(strstr(uj_last_error(), "group 1: state v") != NULL);
  CHECK(or_get(&p[0], 0) == 0.5 && uj_optim_step_count(opt) == 0);
  v[1].dims[0] = 8, g[1].dtype = UJ_F64;
  CHECK(uj_optim_step(ctx, opt, groups, 2, NULL) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "group 1: the gradient g has dtype f64") != NULL);
  g[1].dtype = UJ_F32;
  groups[1].state = NULL;
  CHECK(uj_optim_step(ctx, opt, groups, 2, NULL) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "group 1: state is NULL") != NULL);
  groups[1].state = st[1];
  double lrs[3] = {0.1, 0.2, 0.3};
  CHECK(uj_optim_set_per_group(opt, "lr", lrs, 3) == UJ_OK);
  CHECK(uj_optim_step(ctx, opt, groups, 2, NULL) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "lr has 3 per-group values, the step has 2 groups") != NULL);
  CHECK(or_get(&p[0], 0) == 0.5);
  CHECK(uj_optim_set_per_group(opt, "lr", lrs, 2) == UJ_OK);
  CHECK(uj_optim_get(opt, "lr", NULL) == UJ_ERR_INVALID);
  CHECK(uj_optim_step(ctx, opt, groups, 2, NULL) == UJ_OK);
  CHECK(or_get(&p[0], 0) < 0.5 && uj_optim_step_count(opt) == 1);
  CHECK(uj_optim_step(ctx, opt, groups, -1, NULL) == UJ_ERR_INVALID);
  CHECK(uj_optim_step(ctx, opt, NULL, 2, NULL) == UJ_ERR_INVALID);
  CHECK(uj_optim_step(NULL, opt, groups, 2, NULL) == UJ_ERR_INVALID);
  CHECK(uj_optim_set_step_count(opt, -1) == UJ_ERR_INVALID);
  CHECK(uj_optim_set_grad_scale(opt, NAN) == UJ_ERR_INVALID && uj_optim_set_max_grad_norm(opt, -1) == UJ_ERR_INVALID);
  for (int i = 0; i < 2; i++) or_tensor_free(&p[i]), or_tensor_free(&g[i]), or_tensor_free(&m[i]), or_tensor_free(&v[i]);
  uj_optim_free(opt);
}

TEST(cuda_kernels_of_every_updater_compile_for_sm_90) {
  SKIP_IF(!or_cuda_nvrtc_(), "no NVRTC: CUDA compile test skipped");
  uj_ctx_t* ctx = uj_ctx_new();
  for (int u = 0; u <= uj_optim_builtin_count(); u++) {
    uj_optim_t* opt = NULL;
    const char* name = u < uj_optim_builtin_count() ? uj_optim_builtin_name(u) : "adamax (custom)";
    CHECK((u < uj_optim_builtin_count() ? uj_optim_new(name, &opt) : uj_optim_new_source(name, adamax_text, &opt)) ==
          UJ_OK);
    int kernels = 0;
    uj_status_t s = opt ? uj_optim_compile_cuda(ctx, opt, "sm_90", &kernels) : UJ_ERR_INVALID;
    CHECK(s == UJ_OK);
    /* the multi-tensor kernels of each pass and of the gradient pass (two:
     * it reduces), for f32, for bf16 and f16 gradients with half copies,
     * and for bf16 and f16 parameters stepped directly */
    CHECK(kernels >= 15);
    printf("  %-26s %d kernels %s\n", name, kernels, s == UJ_OK ? "ok" : uj_last_error());
    uj_optim_free(opt);
  }
  uj_ctx_free(ctx);
}

TEST_MAIN()
