/* tests/test_optim_cuda.c: uj_optim_step on GPU tensors (skipped without a
 * CUDA device). Every built-in updater, f32 and bf16 with f32 master
 * weights, over 37 groups of random sizes (one of several chunks), with a
 * loss scale and a clip norm so that the gradient pass runs and its sums
 * come back from the GPU: each step is compared, after copying the tensors
 * back, with the f64 rule (tests/optim_ref.h) stepped from the values the
 * step started from and the gscale the step reported, as
 * tests/test_optim_half.c compares the CPU engines; the reported norm with
 * the f64 norm. Then an infinite gradient makes the step write nothing: the
 * tensors copied back keep their bits. Mixing host and GPU tensors in one
 * step fails with UJ_ERR_INVALID naming the group and tensor. */
#include "oracle.h"
#include "harness.h"
#include "optim_ref.h"

#define NGROUPS 37
#define MAX_STATE 3
#define SCALE 256.0

typedef struct {
  uj_tensor_t host[3 + MAX_STATE]; /* p, g, p_half, state...: the host copies */
  uj_tensor_t dev[3 + MAX_STATE];
  uj_tensor_t* dev_state[MAX_STATE];
  int64_t n;
} group_t;

enum { P, G, HALF, STATE0 };

static int make_groups(uj_ctx_t* ctx, uint64_t* rng, group_t* gr, uj_optim_group_t* groups, int ns, uj_dtype_t half) {
  int ok = 1;
  for (int i = 0; i < NGROUPS && ok; i++) {
    int64_t dims[2];
    int ndim = (int)harness_int(rng, 1, 2);
    if (ndim == 1) dims[0] = i == 0 ? 3 * 8192 + 7 : harness_int(rng, 1, 3000);
    else dims[0] = harness_int(rng, 1, 40), dims[1] = harness_int(rng, 1, 40);
    uj_dtype_t grad_dtype = half == UJ_F32 ? UJ_F32 : half;
    gr[i].n = or_numel(ndim, dims);
    for (int k = 0; k < STATE0 + ns; k++) {
      if (k == HALF && half == UJ_F32) continue;
      uj_dtype_t dt = k == G ? grad_dtype : k == HALF ? half : UJ_F32;
      gr[i].host[k] = or_tensor(dt, ndim, dims);
      if (k == P) or_fill_real(rng, &gr[i].host[k], -1, 1);
      ok &= uj_tensor_alloc(ctx, UJ_CUDA, dt, ndim, dims, &gr[i].dev[k]) == UJ_OK &&
            uj_tensor_copy(ctx, &gr[i].dev[k], &gr[i].host[k]) == UJ_OK;
    }
    for (int k = 0; k < ns; k++) gr[i].dev_state[k] = &gr[i].dev[STATE0 + k];
    groups[i] = (uj_optim_group_t){&gr[i].dev[P], &gr[i].dev[G], gr[i].dev_state, half == UJ_F32 ? NULL : &gr[i].dev[HALF]};
  }
  return ok;
}

static void free_groups(uj_ctx_t* ctx, group_t* gr, int ns) {
  for (int i = 0; i < NGROUPS; i++)
    for (int k = 0; k < STATE0 + ns; k++) {
      if (gr[i].dev[k].data) uj_tensor_free(ctx, &gr[i].dev[k]);
      if (gr[i].host[k].data) or_tensor_free(&gr[i].host[k]);
    }
}

/* Copies every tensor but g back to its host copy. */
static void copy_back(uj_ctx_t* ctx, group_t* gr, int ns, uj_dtype_t half) {
  for (int i = 0; i < NGROUPS; i++)
    for (int k = 0; k < STATE0 + ns; k++)
      if (k != G && (k != HALF || half != UJ_F32)) CHECK(uj_tensor_copy(ctx, &gr[i].host[k], &gr[i].dev[k]) == UJ_OK);
}

/* wd = 0: the clip makes gscale no power of two, so a kernel's gscale*g +
 * wd*p would be two roundings where tests/optim_ref.h models one (it says
 * why); weight decay is tested on the CPU engines, which share the rules. */
static const ref_hparams_t base = {.lr = 0.01, .wd = 0, .momentum = 0.8, .dampening = 0.2, .nesterov = 1,
                                   .b1 = 0.85, .b2 = 0.99, .eps = 1e-6, .lr_decay = 0.05, .alpha = 0.95};

static void set_hparams(uj_optim_t* opt) {
  static const struct { const char* name; double value; } table[] = {
      {"lr", base.lr}, {"wd", base.wd}, {"momentum", base.momentum}, {"dampening", base.dampening},
      {"nesterov", base.nesterov}, {"b1", base.b1}, {"b2", base.b2}, {"eps", base.eps},
      {"lr_decay", base.lr_decay}, {"alpha", base.alpha}};
  for (int k = 0; k < uj_optim_hparam_count(opt); k++)
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
      if (strcmp(table[i].name, uj_optim_hparam_name(opt, k)) == 0)
        CHECK(uj_optim_set(opt, table[i].name, table[i].value) == UJ_OK);
}

/* A half value's place on a line where neighbours differ by 1. */
static int32_t half_rank(uint16_t bits) { return bits & 0x8000u ? -(int32_t)(bits & 0x7fffu) : (int32_t)bits; }

/* The element of group i against the reference: master and state as
 * test_optim_rules.c compares them, the half copy as the master rounded. */
static int64_t compare_group(const char* name, uj_dtype_t half, int step, int i, group_t* gr, int ns, double* const* ref,
                             double* const* old, const double* g, double gscale) {
  int64_t bad = 0;
  for (int64_t e = 0; e < gr[i].n; e++) {
    int tie = 0;
    if (strcmp(name, "lion") == 0) {
      double b1 = F(base.b1), a = b1 * old[1][e], c = (1 - b1) * F(gscale) * g[e];
      tie = fabs(a + c) < 1e-6 * (fabs(a) + fabs(c));
    }
    for (int k = 0; k <= ns; k++) {
      double got = or_get(&gr[i].host[k ? STATE0 + k - 1 : P], e);
      if (!(k == 0 && tie) && !ref_agrees(got, ref[k][e], old[k][e], 1e-4) && bad++ < 3)
        fprintf(stderr, "  %s %s on the GPU, step %d, group %d, %s[%lld]: %.9g, reference %.17g\n", name,
                uj_dtype_name(half), step, i, k ? "state" : "p", (long long)e, got, ref[k][e]);
    }
    if (half != UJ_F32) {
      uint16_t copy = ((const uint16_t*)gr[i].host[HALF].data)[e];
      double master = or_get(&gr[i].host[P], e);
      int ok = isnan(master) ? isnan(hr_decode(half, copy)) : half_rank(copy) == half_rank(hr_encode(half, master));
      if (!ok && bad++ < 3)
        fprintf(stderr, "  %s %s on the GPU, step %d, group %d, p_half[%lld]: %.9g, master %.9g\n", name,
                uj_dtype_name(half), step, i, (long long)e, hr_decode(half, copy), master);
    }
  }
  return bad;
}

/* Two steps of updater `name` on the GPU against the f64 rule, then a
 * skipped one; the number of disagreeing elements. */
static int64_t check_updater(uj_ctx_t* ctx, const char* name, uj_dtype_t half, uint64_t seed) {
  uj_optim_t* opt = NULL;
  CHECK(uj_optim_new(name, &opt) == UJ_OK);
  if (!opt) return 1;
  set_hparams(opt);
  CHECK(uj_optim_set_grad_scale(opt, SCALE) == UJ_OK && uj_optim_set_max_grad_norm(opt, 5) == UJ_OK);
  int ns = uj_optim_state_count(opt);
  uint64_t rng = seed;
  static group_t gr[NGROUPS];
  uj_optim_group_t groups[NGROUPS];
  memset(gr, 0, sizeof gr);
  int64_t bad = 0;
  if (!make_groups(ctx, &rng, gr, groups, ns, half)) {
    fprintf(stderr, "  %s: could not place the groups on the GPU: %s\n", name, uj_last_error());
    free_groups(ctx, gr, ns);
    uj_optim_free(opt);
    return 1;
  }
  for (int step = 1; step <= 2; step++) {
    double norm2 = 0;
    double *ref[NGROUPS][1 + MAX_STATE], *old[NGROUPS][1 + MAX_STATE], *g[NGROUPS];
    for (int i = 0; i < NGROUPS; i++) {
      or_fill_real(&rng, &gr[i].host[G], -SCALE, SCALE);
      CHECK(uj_tensor_copy(ctx, &gr[i].dev[G], &gr[i].host[G]) == UJ_OK);
      g[i] = or_to_double(&gr[i].host[G]);
      for (int64_t e = 0; e < gr[i].n; e++) norm2 += pow(g[i][e] / SCALE, 2);
      for (int k = 0; k <= ns; k++) {
        ref[i][k] = or_to_double(&gr[i].host[k ? STATE0 + k - 1 : P]);
        old[i][k] = or_to_double(&gr[i].host[k ? STATE0 + k - 1 : P]);
      }
    }
    uj_optim_report_t r = {0};
    uj_status_t s = uj_optim_step(ctx, opt, groups, NGROUPS, &r);
    CHECK(s == UJ_OK && !r.skipped && r.t == step);
    if (s != UJ_OK) fprintf(stderr, "  %s %s: %s\n", name, uj_dtype_name(half), uj_last_error());
    CHECK_NEAR(r.grad_norm, sqrt(norm2), 1e-4 * sqrt(norm2));
    copy_back(ctx, gr, ns, half);
    for (int i = 0; i < NGROUPS; i++) {
      ref_hparams_t h = base;
      CHECK(ref_step(name, &h, step, r.gscale, gr[i].n, ref[i][0], g[i], &ref[i][1]));
      if (s == UJ_OK) bad += compare_group(name, half, step, i, gr, ns, ref[i], old[i], g[i], r.gscale);
      free(g[i]);
      for (int k = 0; k <= ns; k++) free(ref[i][k]), free(old[i][k]);
    }
  }
  /* found-inf: nothing written */
  int victim = (int)harness_int(&rng, 0, NGROUPS - 1);
  or_set(&gr[victim].host[G], gr[victim].n - 1, INFINITY);
  CHECK(uj_tensor_copy(ctx, &gr[victim].dev[G], &gr[victim].host[G]) == UJ_OK);
  unsigned char* kept[NGROUPS][3 + MAX_STATE];
  for (int i = 0; i < NGROUPS; i++)
    for (int k = 0; k < STATE0 + ns; k++) {
      size_t bytes = gr[i].host[k].data ? (size_t)gr[i].n * or_dsize(gr[i].host[k].dtype) : 0;
      kept[i][k] = malloc(bytes + 1);
      if (kept[i][k] && bytes) memcpy(kept[i][k], gr[i].host[k].data, bytes);
    }
  uj_optim_report_t r = {0};
  CHECK(uj_optim_step(ctx, opt, groups, NGROUPS, &r) == UJ_OK && r.skipped == 1 && uj_optim_step_count(opt) == 2);
  copy_back(ctx, gr, ns, half);
  for (int i = 0; i < NGROUPS; i++)
    for (int k = 0; k < STATE0 + ns; k++) {
      size_t bytes = gr[i].host[k].data ? (size_t)gr[i].n * or_dsize(gr[i].host[k].dtype) : 0;
      if (kept[i][k] && bytes && memcmp(kept[i][k], gr[i].host[k].data, bytes) != 0 && bad++ < 3)
        fprintf(stderr, "  %s %s on the GPU: a skipped step changed group %d's tensor %d\n", name, uj_dtype_name(half),
                i, k);
      free(kept[i][k]);
    }
  free_groups(ctx, gr, ns);
  uj_optim_free(opt);
  return bad;
}

TEST(every_updater_steps_gpu_tensors_as_its_rule_says) {
  SKIP_IF(!or_engine_available(UJ_ENGINE_CUDA), "no CUDA device: GPU test skipped");
  uint64_t seed = 4242;
  HARNESS_SEED(seed);
  uj_ctx_t* ctx = uj_ctx_new();
  CHECK(uj_ctx_set_engine(ctx, UJ_ENGINE_CUDA) == UJ_OK);
  static const uj_dtype_t dtypes[2] = {UJ_F32, UJ_BF16};
  for (int d = 0; d < 2; d++)
    for (int u = 0; u < uj_optim_builtin_count(); u++) {
      const char* name = uj_optim_builtin_name(u);
      int64_t bad = check_updater(ctx, name, dtypes[d], seed + (uint64_t)u);
      CHECK(bad == 0);
      printf("  %-26s cuda    %-5s %s\n", name, uj_dtype_name(dtypes[d]), bad ? "FAILED" : "ok");
    }
  uj_ctx_free(ctx);
}

TEST(host_and_gpu_tensors_in_one_step_fail_with_a_message) {
  SKIP_IF(!or_engine_available(UJ_ENGINE_CUDA), "no CUDA device: GPU test skipped");
  uj_ctx_t* ctx = uj_ctx_new();
  uint64_t rng = 3;
  static group_t gr[NGROUPS];
  uj_optim_group_t groups[NGROUPS];
  memset(gr, 0, sizeof gr);
  CHECK(make_groups(ctx, &rng, gr, groups, 2, UJ_F32));
  uj_optim_t* opt = NULL;
  CHECK(uj_optim_new("adam", &opt) == UJ_OK);
  groups[6].grad = &gr[6].host[G];
  CHECK(uj_optim_step(ctx, opt, groups, NGROUPS, NULL) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "group 6") && strstr(uj_last_error(), "the gradient g is in host memory"));
  CHECK(uj_optim_step_count(opt) == 0);
  uj_optim_free(opt);
  free_groups(ctx, gr, 2);
  uj_ctx_free(ctx);
}

TEST_MAIN()
