/* tests/test_optim_rules.c: every built-in updater against its rule written
 * plainly in f64 (tests/optim_ref.h), on the interpreter, MIR and C: 37
 * groups of random ranks and sizes, several steps from zero state (so the
 * first step's special cases run), a learning rate per group, Nesterov
 * switched between steps (a run-time scalar), and in one group NaN and
 * infinite gradients, which must propagate as the rule says.
 *
 * wd is a power of two so that the kernels' g + wd*p is one rounding, the
 * one optim_ref.h models (it says why).
 *
 * Each step the reference starts from the values the engine left, so each
 * step is checked on its own: an element agrees when
 *   |got - ref| <= 8u|ref| + tol * |ref - before|
 * u = 2^-24: a few roundings of the new value plus a relative error of the
 * change the step made (tol 1e-5; LAMB's norms are f64 sums). Both NaN, or the same infinity, agree.
 * Lion steps by sign(c): where the reference's c is within rounding of 0
 * (|c| < 1e-6 of its terms) either sign is accepted. */
#include <stddef.h>

#include "oracle.h"
#include "harness.h"
#include "optim_ref.h"

#define NGROUPS 37
#define STEPS 3
#define MAX_STATE 3

typedef struct {
  uj_tensor_t p, g, state[MAX_STATE];
  uj_tensor_t* state_ptr[MAX_STATE];
  int64_t n;
} group_t;

static const ref_hparams_t base = {.lr = 0.01, .wd = 0.125, .momentum = 0.8, .dampening = 0.2, .nesterov = 0,
                                   .b1 = 0.85, .b2 = 0.99, .eps = 1e-6, .lr_decay = 0.05, .alpha = 0.95};

static double hparam_value(const ref_hparams_t* h, const char* name, int* known) {
  ref_hparams_t copy = *h;
  const double* field = ref_hparam(&copy, name);
  *known = field != NULL;
  return field ? *field : 0;
}

static void make_groups(uint64_t* rng, group_t* gr, int nstate) {
  for (int i = 0; i < NGROUPS; i++) {
    int64_t dims[2];
    int ndim = (int)harness_int(rng, 1, 2);
    if (ndim == 1) dims[0] = i % 9 == 0 ? 1 : harness_int(rng, 1, 5000);
    else dims[0] = harness_int(rng, 1, 70), dims[1] = harness_int(rng, 1, 70);
    gr[i].p = or_tensor(UJ_F32, ndim, dims);
    gr[i].g = or_tensor(UJ_F32, ndim, dims);
    gr[i].n = or_tnumel(&gr[i].p);
    or_fill_real(rng, &gr[i].p, -1, 1);
    for (int k = 0; k < nstate; k++) gr[i].state[k] = or_tensor(UJ_F32, ndim, dims), gr[i].state_ptr[k] = &gr[i].state[k];
  }
}

static void free_groups(group_t* gr, int nstate) {
  for (int i = 0; i < NGROUPS; i++) {
    or_tensor_free(&gr[i].p), or_tensor_free(&gr[i].g);
    for (int k = 0; k < nstate; k++) or_tensor_free(&gr[i].state[k]);
  }
}

static int names_match(const uj_optim_t* opt, const char* expected) {
  char joined[128] = "";
  for (int k = 0; k < uj_optim_state_count(opt); k++) {
    if (k) strcat(joined, " ");
    strcat(joined, uj_optim_state_name(opt, k));
  }
  return strcmp(joined, expected) == 0;
}

/* Runs updater `name` on configuration slot; returns the number of
 * disagreeing elements (the first few printed). */
static int64_t check_updater(const char* name, int slot, uint64_t seed) {
  uj_ctx_t* ctx = or_ctx(slot);
  uj_optim_t* opt = NULL;
  CHECK(uj_optim_new(name, &opt) == UJ_OK);
  if (!ctx || !opt) return 1;
  const char* expected = ref_state_names(name);
  CHECK(expected && names_match(opt, expected));
  int nstate = uj_optim_state_count(opt);
  ref_hparams_t h[NGROUPS];
  double lr[NGROUPS];
  for (int i = 0; i < NGROUPS; i++) h[i] = base, lr[i] = h[i].lr = base.lr * (0.5 + i / (double)NGROUPS);
  for (int k = 0; k < uj_optim_hparam_count(opt); k++) {
    int known = 0;
    const char* hp = uj_optim_hparam_name(opt, k);
    double v = hparam_value(&base, hp, &known);
    CHECK(known);
    CHECK(uj_optim_set(opt, hp, v) == UJ_OK);
  }
  CHECK(uj_optim_set_per_group(opt, "lr", lr, NGROUPS) == UJ_OK);
  uint64_t rng = seed;
  group_t gr[NGROUPS];
  make_groups(&rng, gr, nstate);
  uj_optim_group_t groups[NGROUPS];
  for (int i = 0; i < NGROUPS; i++) groups[i] = (uj_optim_group_t){&gr[i].p, &gr[i].g, gr[i].state_ptr, NULL};
  double tol = 1e-5;
  int64_t bad = 0;
  for (int step = 1; step <= STEPS; step++) {
    double nesterov = step % 2 == 0;
    if (uj_optim_hparam_count(opt) && uj_optim_get(opt, "nesterov", NULL) == UJ_OK)
      CHECK(uj_optim_set(opt, "nesterov", nesterov) == UJ_OK);
    /* maximize on the third step: the factor (1 - 2*maximize)*gscale */
    double maximize = step == 3;
    int has_maximize = uj_optim_get(opt, "maximize", NULL) == UJ_OK;
    if (has_maximize) CHECK(uj_optim_set(opt, "maximize", maximize) == UJ_OK);
    for (int i = 0; i < NGROUPS; i++) {
      h[i].nesterov = nesterov;
      h[i].maximize = has_maximize ? maximize : 0;
      or_fill_real(&rng, &gr[i].g, -1, 1);
    }
    if (step == 2 && gr[3].n >= 3) or_set(&gr[3].g, 0, NAN), or_set(&gr[3].g, 1, INFINITY), or_set(&gr[3].g, 2, -INFINITY);
    double *rp[NGROUPS], *old_p[NGROUPS], *rs[NGROUPS][MAX_STATE], *old_s[NGROUPS][MAX_STATE], *rg[NGROUPS];
    for (int i = 0; i < NGROUPS; i++) {
      rp[i] = or_to_double(&gr[i].p), old_p[i] = or_to_double(&gr[i].p), rg[i] = or_to_double(&gr[i].g);
      for (int k = 0; k < nstate; k++) rs[i][k] = or_to_double(&gr[i].state[k]), old_s[i][k] = or_to_double(&gr[i].state[k]);
      CHECK(ref_step(name, &h[i], step, 1.0, gr[i].n, rp[i], rg[i], rs[i]));
    }
    uj_optim_report_t report;
    uj_status_t s = uj_optim_step(ctx, opt, groups, NGROUPS, &report);
    CHECK(s == UJ_OK);
    if (s != UJ_OK) fprintf(stderr, "  %s on %s: %s\n", name, or_configs[slot].name, uj_last_error());
    CHECK(report.t == step && !report.skipped);
    for (int i = 0; i < NGROUPS; i++) {
      for (int64_t e = 0; e < gr[i].n; e++) {
        double got = or_get(&gr[i].p, e);
        int tie = 0;
        if (strcmp(name, "lion") == 0) {
          double b1 = F(base.b1), a = b1 * old_s[i][0][e], b = (1 - b1) * rg[i][e];
          tie = fabs(a + b) < 1e-6 * (fabs(a) + fabs(b));
        }
        if (!tie && !ref_agrees(got, rp[i][e], old_p[i][e], tol) && bad++ < 5)
          fprintf(stderr, "  %s on %s, step %d, group %d, p[%lld]: %.9g, reference %.17g (before %.9g)\n", name,
                  or_configs[slot].name, step, i, (long long)e, got, rp[i][e], old_p[i][e]);
        for (int k = 0; k < nstate; k++) {
          double gs = or_get(&gr[i].state[k], e);
          if (!ref_agrees(gs, rs[i][k][e], old_s[i][k][e], tol) && bad++ < 5)
            fprintf(stderr, "  %s on %s, step %d, group %d, %s[%lld]: %.9g, reference %.17g\n", name,
                    or_configs[slot].name, step, i, uj_optim_state_name(opt, k), (long long)e, gs, rs[i][k][e]);
        }
      }
      free(rp[i]), free(old_p[i]), free(rg[i]);
      for (int k = 0; k < nstate; k++) free(rs[i][k]), free(old_s[i][k]);
    }
  }
  free_groups(gr, nstate);
  uj_optim_free(opt);
  return bad;
}

TEST(every_updater_follows_its_rule_on_every_cpu_engine) {
  uint64_t seed = 20240611;
  HARNESS_SEED(seed);
  for (int slot = 0; slot < OR_NENGINES; slot++) {
    if (or_configs[slot].engine == UJ_ENGINE_CUDA || !or_configs[slot].passes) continue;
    for (int u = 0; u < uj_optim_builtin_count(); u++) {
      const char* name = uj_optim_builtin_name(u);
      int64_t bad = check_updater(name, slot, seed + (uint64_t)u);
      CHECK(bad == 0);
      printf("  %-26s %-7s %s\n", name, or_configs[slot].name, bad ? "FAILED" : "ok");
    }
  }
}

TEST_MAIN()
