/* tests/test_optim_half.c: bf16/f16 parameters, with f32 master weights
 * and stepped directly (every_updater_steps_half_parameters_directly).
 * Every built-in updater on the interpreter, MIR and C (C on a quarter of
 * the cases: every_updater), for bf16 and for
 * f16: 37 groups of random ranks and sizes whose gradients are half tensors
 * (read and widened) and whose parameters have a half copy that the step
 * writes in the same pass as the f32 master. Against the f64 rule
 * (tests/optim_ref.h) stepped from the values the engine left:
 *   - the master agrees as in test_optim_rules.c (a few f32 roundings plus
 *     1e-5 of the change the step made);
 *   - the half copy is the engine's own master rounded to the half dtype,
 *     bit for bit (one rounding, nearest even: tests/half_ref.h), and within
 *     one unit of the half dtype of the f64 rule's result rounded to it.
 * Found-inf: with a loss scale set, one infinite half gradient makes the step
 * write nothing: masters, states and half copies keep their bits.
 * Bad input: a half copy of another dtype, or in some groups only, and an
 * updater that uses the half copy's name, fail with UJ_ERR_INVALID. */
#include "oracle.h"
#include "harness.h"
#include "optim_ref.h"

#define NGROUPS 37
#define STEPS 3
#define MAX_STATE 3

typedef struct {
  uj_tensor_t p, g, p_half, state[MAX_STATE];
  uj_tensor_t* state_ptr[MAX_STATE];
  int64_t n;
} group_t;

static const ref_hparams_t base = {.lr = 0.01, .wd = 0.125, .momentum = 0.8, .dampening = 0.2, .nesterov = 0,
                                   .b1 = 0.85, .b2 = 0.99, .eps = 1e-6, .lr_decay = 0.05, .alpha = 0.95};

/* NGROUPS groups of random ranks and sizes: with `direct`, parameter,
 * gradient and states of dtype half and no half copy; else an f32
 * parameter and states, with a half gradient and half copy. */
static void make_groups(uint64_t* rng, group_t* gr, uj_optim_group_t* groups, int nstate, uj_dtype_t half, int direct) {
  uj_dtype_t pd = direct ? half : UJ_F32;
  for (int i = 0; i < NGROUPS; i++) {
    int64_t dims[2];
    int ndim = (int)harness_int(rng, 1, 2);
    if (ndim == 1) dims[0] = i % 9 == 0 ? 1 : harness_int(rng, 1, 3000);
    else dims[0] = harness_int(rng, 1, 50), dims[1] = harness_int(rng, 1, 50);
    gr[i].p = or_tensor(pd, ndim, dims);
    gr[i].g = or_tensor(half, ndim, dims);
    gr[i].p_half = or_tensor(half, ndim, dims);
    gr[i].n = or_tnumel(&gr[i].p);
    or_fill_real(rng, &gr[i].p, -1, 1);
    for (int k = 0; k < nstate; k++) gr[i].state[k] = or_tensor(pd, ndim, dims), gr[i].state_ptr[k] = &gr[i].state[k];
    groups[i] = (uj_optim_group_t){&gr[i].p, &gr[i].g, gr[i].state_ptr, direct ? NULL : &gr[i].p_half};
  }
}

static void free_groups(group_t* gr, int nstate) {
  for (int i = 0; i < NGROUPS; i++) {
    or_tensor_free(&gr[i].p), or_tensor_free(&gr[i].g), or_tensor_free(&gr[i].p_half);
    for (int k = 0; k < nstate; k++) or_tensor_free(&gr[i].state[k]);
  }
}

/* Sets every hyperparameter the updater has from `base`. */
static void set_hparams(uj_optim_t* opt) {
  for (int k = 0; k < uj_optim_hparam_count(opt); k++) {
    ref_hparams_t h = base;
    const double* field = ref_hparam(&h, uj_optim_hparam_name(opt, k));
    CHECK(field != NULL);
    if (field) CHECK(uj_optim_set(opt, uj_optim_hparam_name(opt, k), *field) == UJ_OK);
  }
}

/* A half value's place on a line where neighbours differ by 1 (+0 and -0
 * both 0), so that two values' distance in units is a difference. */
static int32_t half_rank(uint16_t bits) { return bits & 0x8000u ? -(int32_t)(bits & 0x7fffu) : (int32_t)bits; }

/* Within one unit of ref rounded; where the master's own tolerance tol
 * exceeds half a unit (a result that cancels to near 0, where tol is
 * relative to the change), of the rounding of some value within tol. */
static int half_within_one_unit(uj_dtype_t dt, uint16_t got, double ref, double tol) {
  if (isnan(ref)) return isnan(hr_decode(dt, got));
  if (isinf(ref)) return hr_decode(dt, got) == ref;
  int32_t rank = half_rank(got);
  return rank >= half_rank(hr_encode(dt, ref - tol)) - 1 && rank <= half_rank(hr_encode(dt, ref + tol)) + 1;
}

/* Updater `name` with every hyperparameter set, and its groups (see
 * make_groups); NULL (a failed check) when it cannot be made. */
static uj_optim_t* start(const char* name, uint64_t* rng, group_t* gr, uj_optim_group_t* groups, uj_dtype_t half,
                         int direct, int* nstate) {
  uj_optim_t* opt = NULL;
  CHECK(uj_optim_new(name, &opt) == UJ_OK);
  if (!opt) return NULL;
  *nstate = uj_optim_state_count(opt);
  set_hparams(opt);
  make_groups(rng, gr, groups, *nstate, half, direct);
  return opt;
}

/* Runs updater `name` with half dtype `half` on configuration slot; returns
 * the number of disagreeing elements (the first few printed). */
static int64_t check_updater(const char* name, uj_dtype_t half, int slot, uint64_t seed) {
  uj_ctx_t* ctx = or_ctx(slot);
  uint64_t rng = seed;
  group_t gr[NGROUPS];
  uj_optim_group_t groups[NGROUPS];
  int nstate = 0;
  uj_optim_t* opt = ctx ? start(name, &rng, gr, groups, half, 0, &nstate) : NULL;
  if (!opt) return 1;
  int64_t bad = 0;
  const char* where = or_configs[slot].name;
  for (int step = 1; step <= STEPS; step++) {
    for (int i = 0; i < NGROUPS; i++) or_fill_real(&rng, &gr[i].g, -1, 1);
    if (step == 2 && gr[3].n >= 2) or_set(&gr[3].g, 0, NAN), or_set(&gr[3].g, 1, INFINITY);
    double *rp[NGROUPS], *old_p[NGROUPS], *rs[NGROUPS][MAX_STATE], *old_s[NGROUPS][MAX_STATE], *rg[NGROUPS];
    for (int i = 0; i < NGROUPS; i++) {
      rp[i] = or_to_double(&gr[i].p), old_p[i] = or_to_double(&gr[i].p), rg[i] = or_to_double(&gr[i].g);
      for (int k = 0; k < nstate; k++) rs[i][k] = or_to_double(&gr[i].state[k]), old_s[i][k] = or_to_double(&gr[i].state[k]);
      ref_hparams_t h = base;
      CHECK(ref_step(name, &h, step, 1.0, gr[i].n, rp[i], rg[i], rs[i]));
    }
    uj_optim_report_t report;
    uj_status_t s = uj_optim_step(ctx, opt, groups, NGROUPS, &report);
    CHECK(s == UJ_OK);
    if (s != UJ_OK) fprintf(stderr, "  %s %s on %s: %s\n", name, uj_dtype_name(half), where, uj_last_error());
    for (int i = 0; i < NGROUPS; i++) {
      for (int64_t e = 0; e < gr[i].n; e++) {
        double got = or_get(&gr[i].p, e);
        uint16_t copy = ((const uint16_t*)gr[i].p_half.data)[e];
        int tie = 0;
        if (strcmp(name, "lion") == 0) {
          double b1 = F(base.b1), a = b1 * old_s[i][0][e], b = (1 - b1) * rg[i][e];
          tie = fabs(a + b) < 1e-6 * (fabs(a) + fabs(b));
        }
        if (!tie && !ref_agrees(got, rp[i][e], old_p[i][e], 1e-5) && bad++ < 5)
          fprintf(stderr, "  %s %s on %s, step %d, group %d, p[%lld]: %.9g, reference %.17g\n", name,
                  uj_dtype_name(half), where, step, i, (long long)e, got, rp[i][e]);
        int rounded = isnan(got) ? isnan(hr_decode(half, copy)) : copy == hr_encode(half, got);
        double tol = 8 * 0x1p-24 * fabs(rp[i][e]) + 1e-5 * fabs(rp[i][e] - old_p[i][e]); /* ref_agrees' */
        if ((!rounded || (!tie && !half_within_one_unit(half, copy, rp[i][e], tol))) && bad++ < 5)
          fprintf(stderr, "  %s %s on %s, step %d, group %d, p_half[%lld]: %.9g (bits %04x), master %.9g, reference %.17g\n",
                  name, uj_dtype_name(half), where, step, i, (long long)e, hr_decode(half, copy), copy, got, rp[i][e]);
        for (int k = 0; k < nstate; k++) {
          double gs = or_get(&gr[i].state[k], e);
          if (!ref_agrees(gs, rs[i][k][e], old_s[i][k][e], 1e-5) && bad++ < 5)
            fprintf(stderr, "  %s %s on %s, step %d, group %d, %s[%lld]: %.9g, reference %.17g\n", name,
                    uj_dtype_name(half), where, step, i, uj_optim_state_name(opt, k), (long long)e, gs, rs[i][k][e]);
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

/* check(name, half, slot, seed) for every built-in, bf16 and f16, on every
 * CPU engine with the passes on. The C engine, whose compiles cost most of
 * this test, takes a quarter of them (oracle.h's sampling; UJ_TEST_C_EVERY=1
 * runs all): each updater once, in turn bf16 and f16 with a master
 * (`mode` 0) and bf16 and f16 stepped directly (`mode` 1). */
static void every_updater(int64_t (*check)(const char*, uj_dtype_t, int, uint64_t), uint64_t seed, const char* how,
                          int mode) {
  static const uj_dtype_t halves[2] = {UJ_BF16, UJ_F16};
  for (int slot = 0; slot < OR_NENGINES; slot++) {
    if (or_configs[slot].engine == UJ_ENGINE_CUDA || !or_configs[slot].passes) continue;
    for (int d = 0; d < 2; d++)
      for (int u = 0; u < uj_optim_builtin_count(); u++) {
        if (or_configs[slot].engine == UJ_ENGINE_C && or_c_every() > 1 && (u % 4 != 2 * mode + d)) continue;
        const char* name = uj_optim_builtin_name(u);
        int64_t bad = check(name, halves[d], slot, seed + (uint64_t)u);
        CHECK(bad == 0);
        printf("  %-26s %-7s %-5s %s %s\n", name, or_configs[slot].name, uj_dtype_name(halves[d]), how,
               bad ? "FAILED" : "ok");
      }
  }
}

TEST(every_updater_writes_master_and_half_copy_on_every_cpu_engine) {
  HARNESS_SEED(20240612);
  every_updater(check_updater, 20240612, "master", 0);
}

/* bf16/f16 parameters stepped directly, without a master: parameter,
 * gradient and states all of the half dtype. Each output is the f64 rule
 * stepped from the values the engine left, rounded once: within one unit
 * of the half dtype (the passes compute in f32 and round where they
 * store), widened by what reading rounded states can move it: 4 unit
 * roundoffs of the half dtype times the change this step and the one
 * before made (the rule reads the m and v it has just rounded, as torch's
 * does, and momentum carries the last step's rounding; the f64 reference
 * reads them unrounded). An element whose reference state is below the
 * half dtype's smallest normal is not compared: the format cannot hold
 * the state (f16 Adam's v of a small gradient flushes toward 0, and the
 * update with it), which is why master weights exist; nor, for LAMB, whose
 * trust ratio is a norm over the whole tensor, any element of its group. */
static int64_t check_direct(const char* name, uj_dtype_t half, int slot, uint64_t seed) {
  uj_ctx_t* ctx = or_ctx(slot);
  uint64_t rng = seed;
  group_t gr[NGROUPS];
  uj_optim_group_t groups[NGROUPS];
  int nstate = 0;
  uj_optim_t* opt = ctx ? start(name, &rng, gr, groups, half, 1, &nstate) : NULL;
  if (!opt) return 1;
  int64_t bad = 0;
  const char* where = or_configs[slot].name;
  double* last_change[NGROUPS];
  for (int i = 0; i < NGROUPS; i++) last_change[i] = calloc((size_t)gr[i].n, sizeof(double));
  double tiny = half == UJ_BF16 ? 0x1p-126 : 0x1p-14;
  for (int step = 1; step <= STEPS; step++) {
    for (int i = 0; i < NGROUPS; i++) or_fill_real(&rng, &gr[i].g, -1, 1);
    double *rp[NGROUPS], *old_p[NGROUPS], *rs[NGROUPS][MAX_STATE], *rg[NGROUPS], *old_s[NGROUPS][MAX_STATE];
    double u4 = 4 * (half == UJ_BF16 ? 0x1p-9 : 0x1p-11);
    for (int i = 0; i < NGROUPS; i++) {
      rp[i] = or_to_double(&gr[i].p), old_p[i] = or_to_double(&gr[i].p), rg[i] = or_to_double(&gr[i].g);
      for (int k = 0; k < nstate; k++) rs[i][k] = or_to_double(&gr[i].state[k]), old_s[i][k] = or_to_double(&gr[i].state[k]);
      ref_hparams_t h = base;
      CHECK(ref_step(name, &h, step, 1.0, gr[i].n, rp[i], rg[i], rs[i]));
    }
    uj_optim_report_t report;
    uj_status_t s = uj_optim_step(ctx, opt, groups, NGROUPS, &report);
    CHECK(s == UJ_OK);
    if (s != UJ_OK) fprintf(stderr, "  %s %s on %s: %s\n", name, uj_dtype_name(half), where, uj_last_error());
    for (int i = 0; i < NGROUPS && s == UJ_OK; i++) {
      int group_lost = 0;
      for (int64_t e = 0; e < gr[i].n && strcmp(name, "lamb") == 0; e++)
        for (int k = 0; k < nstate; k++) group_lost |= rs[i][k][e] != 0 && fabs(rs[i][k][e]) < tiny;
      for (int64_t e = 0; e < gr[i].n && !group_lost; e++) {
        int tie = 0;
        if (strcmp(name, "lion") == 0) {
          double b1 = F(base.b1), a = b1 * old_s[i][0][e], b = (1 - b1) * rg[i][e];
          tie = fabs(a + b) < 1e-6 * (fabs(a) + fabs(b));
        }
        for (int k = 0; k < nstate; k++) tie |= rs[i][k][e] != 0 && fabs(rs[i][k][e]) < tiny;
        uint16_t got = ((const uint16_t*)gr[i].p.data)[e];
        double change = fabs(rp[i][e] - old_p[i][e]);
        double tol = 1e-6 * fabs(rp[i][e]) + u4 * (change + last_change[i][e]);
        last_change[i][e] = change;
        if (!tie && !half_within_one_unit(half, got, rp[i][e], tol) && bad++ < 5)
          fprintf(stderr, "  %s %s direct on %s, step %d, group %d, p[%lld]: %.9g, reference %.17g\n", name,
                  uj_dtype_name(half), where, step, i, (long long)e, hr_decode(half, got), rp[i][e]);
        for (int k = 0; k < nstate && !tie; k++) {
          uint16_t gs = ((const uint16_t*)gr[i].state[k].data)[e];
          double stol = 1e-6 * fabs(rs[i][k][e]) + u4 * fabs(rs[i][k][e] - old_s[i][k][e]);
          if (!half_within_one_unit(half, gs, rs[i][k][e], stol) && bad++ < 5)
            fprintf(stderr, "  %s %s direct on %s, step %d, group %d, %s[%lld]: %.9g, reference %.17g\n", name,
                    uj_dtype_name(half), where, step, i, uj_optim_state_name(opt, k), (long long)e,
                    hr_decode(half, gs), rs[i][k][e]);
        }
      }
    }
    for (int i = 0; i < NGROUPS; i++) {
      free(rp[i]), free(old_p[i]), free(rg[i]);
      for (int k = 0; k < nstate; k++) free(rs[i][k]), free(old_s[i][k]);
    }
  }
  for (int i = 0; i < NGROUPS; i++) free(last_change[i]);
  free_groups(gr, nstate);
  uj_optim_free(opt);
  return bad;
}

TEST(every_updater_steps_half_parameters_directly) {
  HARNESS_SEED(20261129);
  every_updater(check_direct, 20261129, "direct", 1);
}

/* The bytes of every tensor a step may write, one after another. */
static unsigned char* snapshot(const group_t* gr, int nstate, size_t* size) {
  size_t total = 0;
  for (int i = 0; i < NGROUPS; i++) total += (size_t)gr[i].n * (4 + 2 + 4 * (size_t)nstate);
  unsigned char* bytes = malloc(total + 1);
  unsigned char* at = bytes;
  for (int i = 0; bytes && i < NGROUPS; i++) {
    memcpy(at, gr[i].p.data, (size_t)gr[i].n * 4), at += gr[i].n * 4;
    memcpy(at, gr[i].p_half.data, (size_t)gr[i].n * 2), at += gr[i].n * 2;
    for (int k = 0; k < nstate; k++) memcpy(at, gr[i].state[k].data, (size_t)gr[i].n * 4), at += gr[i].n * 4;
  }
  *size = total;
  return bytes;
}

TEST(found_inf_leaves_half_copies_bit_identical) {
  uint64_t seed = 77;
  HARNESS_SEED(seed);
  static const uj_dtype_t halves[2] = {UJ_BF16, UJ_F16};
  for (int slot = 0; slot < OR_NENGINES; slot++) {
    if (or_configs[slot].engine == UJ_ENGINE_CUDA || !or_configs[slot].passes) continue;
    for (int d = 0; d < 2; d++) {
      uj_optim_t* opt = NULL;
      CHECK(uj_optim_new("adamw", &opt) == UJ_OK);
      CHECK(uj_optim_set_grad_scale(opt, 1024) == UJ_OK);
      uint64_t rng = seed;
      group_t gr[NGROUPS];
      uj_optim_group_t groups[NGROUPS];
      make_groups(&rng, gr, groups, 2, halves[d], 0);
      for (int i = 0; i < NGROUPS; i++) or_fill_real(&rng, &gr[i].g, -100, 100);
      uj_optim_report_t report;
      CHECK(uj_optim_step(or_ctx(slot), opt, groups, NGROUPS, &report) == UJ_OK && !report.skipped);
      int victim = (int)harness_int(&rng, 0, NGROUPS - 1);
      or_set(&gr[victim].g, gr[victim].n - 1, -INFINITY);
      size_t before_size, after_size;
      unsigned char* before = snapshot(gr, 2, &before_size);
      CHECK(uj_optim_step(or_ctx(slot), opt, groups, NGROUPS, &report) == UJ_OK);
      unsigned char* after = snapshot(gr, 2, &after_size);
      CHECK(report.skipped == 1 && uj_optim_step_count(opt) == 1);
      CHECK(before && after && before_size == after_size && memcmp(before, after, before_size) == 0);
      free(before), free(after);
      free_groups(gr, 2);
      uj_optim_free(opt);
    }
  }
}

TEST(bad_half_copies_fail_with_a_message) {
  uint64_t rng = 5;
  group_t gr[NGROUPS];
  uj_optim_group_t groups[NGROUPS];
  make_groups(&rng, gr, groups, 2, UJ_BF16, 0);
  uj_optim_t* opt = NULL;
  CHECK(uj_optim_new("adam", &opt) == UJ_OK);
  uj_ctx_t* ctx = or_ctx(0);
  groups[5].param_half = NULL; /* some groups only */
  CHECK(uj_optim_step(ctx, opt, groups, NGROUPS, NULL) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "group 5") != NULL);
  groups[5].param_half = &gr[4].p_half; /* another shape */
  uj_status_t s = uj_optim_step(ctx, opt, groups, NGROUPS, NULL);
  CHECK(s == UJ_ERR_SHAPE || (gr[4].n == gr[5].n && s == UJ_OK));
  groups[5].param_half = &gr[5].p_half;
  groups[0].param_half = &gr[0].p; /* f32 */
  CHECK(uj_optim_step(ctx, opt, groups, NGROUPS, NULL) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "bf16 or f16") != NULL);
  uj_optim_free(opt);
  free_groups(gr, 2);
  uj_optim_t* clash = NULL;
  CHECK(uj_optim_new_source("clash", "p_half = p*2\np = p - g", &clash) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "p_half") != NULL);
  CHECK(clash == NULL);
  /* a bf16 parameter with a half copy too; a rule that declares g's dtype
   * has no variant for bf16 parameters */
  int64_t n = 4;
  uj_tensor_t p = or_tensor(UJ_BF16, 1, &n), g = or_tensor(UJ_BF16, 1, &n), h = or_tensor(UJ_BF16, 1, &n);
  uj_optim_group_t one = {&p, &g, NULL, &h};
  uj_optim_t* sgd = NULL;
  CHECK(uj_optim_new("sgd", &sgd) == UJ_OK);
  CHECK(uj_optim_set(sgd, "lr", 0.5) == UJ_OK);
  CHECK(uj_optim_step(ctx, sgd, &one, 1, NULL) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "goes with an f32 master") != NULL);
  uj_optim_free(sgd);
  uj_optim_t* declared = NULL;
  CHECK(uj_optim_new_source("declared", "g: f32\np = p - lr*g", &declared) == UJ_OK);
  if (declared) CHECK(uj_optim_set(declared, "lr", 0.5) == UJ_OK);
  one.param_half = NULL;
  CHECK(uj_optim_step(ctx, declared, &one, 1, NULL) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "declares a dtype of its own") != NULL);
  uj_optim_free(declared);
  or_tensor_free(&p), or_tensor_free(&g), or_tensor_free(&h);
}

TEST_MAIN()
