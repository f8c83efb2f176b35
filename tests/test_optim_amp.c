/* tests/test_optim_amp.c: the mixed-precision helpers of uj_optim_step, on
 * every CPU engine and every built-in updater.
 *
 * Found-inf: with a loss scale set, a step whose gradients hold one NaN or
 * infinity (in one element of one of 37 groups) is skipped: every parameter,
 * gradient and state tensor keeps its exact bits and the step count stays;
 * the same step with the value made finite then runs, unscaled inside the
 * update (gscale = 1/scale), and matches the f64 rule (tests/optim_ref.h).
 *
 * Clipping: the global norm the step reports matches the f64 norm of all
 * unscaled gradients within the worst case of an f32 sum of that many
 * squares; the factor applied is min(1, max_norm/(norm + 1e-6)) / scale as
 * computed in f64, and the parameters then match the f64 rule stepped with
 * it. */
#include "oracle.h"
#include "harness.h"
#include "optim_ref.h"

#define NGROUPS 37
#define MAX_STATE 3

typedef struct {
  uj_tensor_t p, g, state[MAX_STATE];
  uj_tensor_t* state_ptr[MAX_STATE];
  int64_t n;
} group_t;

typedef struct {
  group_t gr[NGROUPS];
  uj_optim_group_t groups[NGROUPS];
  int nstate;
} model_t;

static void model_make(model_t* m, uint64_t* rng, int nstate) {
  m->nstate = nstate;
  for (int i = 0; i < NGROUPS; i++) {
    group_t* g = &m->gr[i];
    int64_t dims[2];
    int ndim = i % 3 ? or_rand_shape(rng, 1, 2, 50, dims) : or_rand_shape(rng, 1, 1, 3000, dims);
    g->p = or_tensor(UJ_F32, ndim, dims), g->g = or_tensor(UJ_F32, ndim, dims);
    g->n = or_tnumel(&g->p);
    or_fill_real(rng, &g->p, -1, 1);
    for (int k = 0; k < nstate; k++) g->state[k] = or_tensor(UJ_F32, ndim, dims), g->state_ptr[k] = &g->state[k];
    m->groups[i] = (uj_optim_group_t){&g->p, &g->g, g->state_ptr, NULL};
  }
}

static void model_free(model_t* m) {
  for (int i = 0; i < NGROUPS; i++) {
    or_tensor_free(&m->gr[i].p), or_tensor_free(&m->gr[i].g);
    for (int k = 0; k < m->nstate; k++) or_tensor_free(&m->gr[i].state[k]);
  }
}

/* Gradients in [-1, 1) times scale. */
static void fill_grads(model_t* m, uint64_t* rng, double scale) {
  for (int i = 0; i < NGROUPS; i++)
    for (int64_t e = 0; e < m->gr[i].n; e++) or_set(&m->gr[i].g, e, scale * harness_real(rng, -1, 1));
}

/* Every tensor's bytes, one after the other. */
static size_t snapshot(const model_t* m, char* out) {
  size_t at = 0;
  for (int i = 0; i < NGROUPS; i++) {
    const group_t* g = &m->gr[i];
    size_t bytes = (size_t)g->n * 4;
    const uj_tensor_t* all[2 + MAX_STATE] = {&g->p, &g->g, &g->state[0], &g->state[1], &g->state[2]};
    for (int k = 0; k < 2 + m->nstate; k++) {
      if (out) memcpy(out + at, all[k]->data, bytes);
      at += bytes;
    }
  }
  return at;
}

static void restore(model_t* m, const char* from) {
  size_t at = 0;
  for (int i = 0; i < NGROUPS; i++) {
    group_t* g = &m->gr[i];
    uj_tensor_t* all[2 + MAX_STATE] = {&g->p, &g->g, &g->state[0], &g->state[1], &g->state[2]};
    for (int k = 0; k < 2 + m->nstate; k++) memcpy(all[k]->data, from + at, (size_t)g->n * 4), at += (size_t)g->n * 4;
  }
}

static void set_hparams(uj_optim_t* opt, double wd) {
  for (int k = 0; k < uj_optim_hparam_count(opt); k++)
    if (strcmp(uj_optim_hparam_name(opt, k), "wd") == 0) CHECK(uj_optim_set(opt, "wd", wd) == UJ_OK);
}

static ref_hparams_t ref_defaults(const uj_optim_t* opt, double wd) {
  ref_hparams_t h = {0};
  for (int k = 0; k < uj_optim_hparam_count(opt); k++) {
    double* field = ref_hparam(&h, uj_optim_hparam_name(opt, k));
    if (field && uj_optim_get(opt, uj_optim_hparam_name(opt, k), field) != UJ_OK) *field = 0;
  }
  h.wd = wd;
  return h;
}

/* Steps the reference with gradient factor gs from the model's values,
 * runs `step` of the library, and counts disagreements. */
static int64_t step_and_compare(uj_ctx_t* ctx, uj_optim_t* opt, model_t* m, const ref_hparams_t* h, double gs,
                                int64_t t, const char* what) {
  double *rp[NGROUPS], *op[NGROUPS], *rs[NGROUPS][MAX_STATE], *os[NGROUPS][MAX_STATE];
  for (int i = 0; i < NGROUPS; i++) {
    double* rg = or_to_double(&m->gr[i].g);
    rp[i] = or_to_double(&m->gr[i].p), op[i] = or_to_double(&m->gr[i].p);
    for (int k = 0; k < m->nstate; k++) rs[i][k] = or_to_double(&m->gr[i].state[k]), os[i][k] = or_to_double(&m->gr[i].state[k]);
    ref_step(uj_optim_name(opt), h, t, gs, m->gr[i].n, rp[i], rg, rs[i]);
    free(rg);
  }
  uj_optim_report_t r;
  CHECK(uj_optim_step(ctx, opt, m->groups, NGROUPS, &r) == UJ_OK && !r.skipped && r.t == t);
  int64_t bad = 0;
  for (int i = 0; i < NGROUPS; i++) {
    for (int64_t e = 0; e < m->gr[i].n; e++) {
      if (!ref_agrees(or_get(&m->gr[i].p, e), rp[i][e], op[i][e], 1e-4) && bad++ < 3)
        fprintf(stderr, "  %s, %s: group %d p[%lld] %.9g, reference %.17g\n", uj_optim_name(opt), what, i, (long long)e,
                or_get(&m->gr[i].p, e), rp[i][e]);
      for (int k = 0; k < m->nstate; k++) bad += !ref_agrees(or_get(&m->gr[i].state[k], e), rs[i][k][e], os[i][k][e], 1e-4);
    }
    free(rp[i]), free(op[i]);
    for (int k = 0; k < m->nstate; k++) free(rs[i][k]), free(os[i][k]);
  }
  return bad;
}

TEST(a_found_inf_step_leaves_every_tensor_bit_identical) {
  uint64_t seed = 4711;
  HARNESS_SEED(seed);
  const double scale = 1024; /* a power of two: g/scale is exact, the one rounding optim_ref.h models */
  static const double poison[] = {NAN, INFINITY, -INFINITY};
  for (int slot = 0; slot < OR_NENGINES; slot++) {
    if (or_configs[slot].engine == UJ_ENGINE_CUDA || !or_configs[slot].passes) continue;
    uj_ctx_t* ctx = or_ctx(slot);
    for (int u = 0; ctx && u < uj_optim_builtin_count(); u++) {
      uj_optim_t* opt = NULL;
      CHECK(uj_optim_new(uj_optim_builtin_name(u), &opt) == UJ_OK);
      if (!opt) continue;
      set_hparams(opt, 0.125);
      ref_hparams_t h = ref_defaults(opt, 0.125);
      uint64_t rng = seed + (uint64_t)u;
      model_t m;
      model_make(&m, &rng, uj_optim_state_count(opt));
      fill_grads(&m, &rng, 1);
      CHECK(uj_optim_step(ctx, opt, m.groups, NGROUPS, NULL) == UJ_OK); /* state away from zero */
      CHECK(uj_optim_set_grad_scale(opt, scale) == UJ_OK);
      size_t bytes = snapshot(&m, NULL);
      char* before = malloc(bytes);
      char* after = malloc(bytes);
      int64_t bad = 0;
      for (int k = 0; k < 3; k++) {
        fill_grads(&m, &rng, scale);
        group_t* victim = &m.gr[(5 + 11 * k) % NGROUPS];
        int64_t at = victim->n - 1;
        float kept = (float)or_get(&victim->g, at);
        or_set(&victim->g, at, poison[k]);
        snapshot(&m, before);
        uj_optim_report_t r = {0};
        CHECK(uj_optim_step(ctx, opt, m.groups, NGROUPS, &r) == UJ_OK);
        CHECK(r.skipped == 1 && r.t == 1 + k && uj_optim_step_count(opt) == 1 + k);
        snapshot(&m, after);
        CHECK(memcmp(before, after, bytes) == 0);
        or_set(&victim->g, at, kept);
        bad += step_and_compare(ctx, opt, &m, &h, 1 / scale, 2 + k, "after a skipped step");
      }
      CHECK(bad == 0);
      printf("  found-inf %-26s %-7s %s\n", uj_optim_name(opt), or_configs[slot].name, bad ? "FAILED" : "ok");
      free(before), free(after);
      model_free(&m);
      uj_optim_free(opt);
    }
  }
}

TEST(global_norm_clipping_matches_the_f64_reference) {
  uint64_t seed = 99;
  HARNESS_SEED(seed);
  const double scale = 300; /* not a power of two: wd = 0 keeps the gradient one rounding */
  for (int slot = 0; slot < OR_NENGINES; slot++) {
    if (or_configs[slot].engine == UJ_ENGINE_CUDA || !or_configs[slot].passes) continue;
    uj_ctx_t* ctx = or_ctx(slot);
    for (int u = 0; ctx && u < uj_optim_builtin_count(); u++) {
      uj_optim_t* opt = NULL;
      CHECK(uj_optim_new(uj_optim_builtin_name(u), &opt) == UJ_OK);
      if (!opt) continue;
      set_hparams(opt, 0);
      ref_hparams_t h = ref_defaults(opt, 0);
      uint64_t rng = seed + (uint64_t)u;
      model_t m;
      model_make(&m, &rng, uj_optim_state_count(opt));
      int64_t bad = 0, most = 0;
      for (int t = 1; t <= 2; t++) {
        fill_grads(&m, &rng, scale);
        double sum = 0;
        for (int i = 0; i < NGROUPS; i++) {
          for (int64_t e = 0; e < m.gr[i].n; e++) sum += pow(or_get(&m.gr[i].g, e) / scale, 2);
          if (m.gr[i].n > most) most = m.gr[i].n;
        }
        double norm = sqrt(sum);
        /* step 1 clips to half the norm; step 2's limit is above it: no clipping */
        double max_norm = t == 1 ? norm / 2 : norm * 2;
        CHECK(uj_optim_set_grad_scale(opt, scale) == UJ_OK && uj_optim_set_max_grad_norm(opt, max_norm) == UJ_OK);
        double coef = fmin(1.0, max_norm / (norm + 1e-6));
        /* each group's f32 sum of squares is within gamma_n of it; the norm within half that */
        double norm_tol = or_sum_gamma(most, UJ_F32) / 2 + 1e-7;
        /* a step for its report, undone (values and step count), so that the
         * reference can then step from the same values with the factor used */
        char* keep = malloc(snapshot(&m, NULL));
        snapshot(&m, keep);
        uj_optim_report_t r = {0};
        CHECK(uj_optim_step(ctx, opt, m.groups, NGROUPS, &r) == UJ_OK);
        restore(&m, keep);
        free(keep);
        CHECK(uj_optim_set_step_count(opt, t - 1) == UJ_OK);
        CHECK(fabs(r.grad_norm - norm) <= norm_tol * norm);
        CHECK(fabs(r.gscale - coef / scale) <= 2 * norm_tol * coef / scale);
        if (t == 2) CHECK(r.gscale == 1 / scale);
        double gs_used = r.gscale;
        bad += step_and_compare(ctx, opt, &m, &h, gs_used, t, t == 1 ? "clipped" : "not clipped");
      }
      CHECK(bad == 0);
      printf("  clip      %-26s %-7s %s\n", uj_optim_name(opt), or_configs[slot].name, bad ? "FAILED" : "ok");
      model_free(&m);
      uj_optim_free(opt);
    }
  }
}

TEST_MAIN()
