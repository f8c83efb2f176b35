/* tests/test_groups_fast.c: multi-tensor execution's one pass over all
 * groups (jit/groups/cpu.c) against one uj_program_run per group, on every
 * CPU engine and AUTO: random group counts and sizes (0 and 1 elements,
 * groups longer than a piece, matrices beside vectors), shared and
 * per-group scalars, full reductions; elementwise outputs bit for bit,
 * reductions within a sum's rounding; the same bits with 1 and 2 threads;
 * a thousand steps of changing sizes and scalars compile nothing new; bad
 * groups and groups that overlap fail the call naming them and write
 * nothing; programs the pass does not take still give the per-group
 * results. */
#include "../jit/groups/groups.h"
#include "../jit/jit.h"
#include "groups_world.h"
#include "harness.h"

#define ADAMW                                                                                  \
  "m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; "                                               \
  "p = p*(1 - lr*wd) - (lr/bc1)*m/(sqrt(v)/sqrt(bc2) + eps)"
#define ADAMW_SHARED "b1,b2,lr,wd,bc1,bc2,eps"
#define NORMED "m = b*m + (1-b)*g; p = p - lr*m; n = sum(p*p); hi = amax(g); lo = amin(g)"

/* Random shapes: mostly vectors of 0..3000 elements, some 0 and 1, some
 * longer than a piece, some matrices. */
static void random_shapes(uint64_t* st, int n, int* ndim, int64_t* dims) {
  for (int g = 0; g < n; g++) {
    int64_t* d = &dims[g * UJ_MAX_DIMS];
    int pick = (int)harness_int(st, 0, 9);
    ndim[g] = pick == 9 ? 2 : 1;
    if (pick == 9) d[0] = harness_int(st, 1, 40), d[1] = harness_int(st, 1, 300);
    else if (pick == 8) d[0] = harness_int(st, GROUPS_PIECE, 3 * GROUPS_PIECE);
    else if (pick == 7) d[0] = harness_int(st, 0, 1);
    else d[0] = harness_int(st, 2, 3000);
  }
}

static int same_bits(const uj_tensor_t* a, const uj_tensor_t* b) {
  return a->ndim == b->ndim && !memcmp(a->data, b->data, (size_t)or_tnumel(a) * 4);
}

/* The outputs of every group of a and b: reduced ones (one element from
 * more) within tol of b's (a group longer than a piece adds its pieces'
 * partial sums), the others bit for bit. */
static void compare(const gw_t* a, const gw_t* b, double tol, const char* what) {
  int bad = 0;
  for (int g = 0; g < a->ngroups && bad < 3; g++)
    for (int o = 0; o < a->nout; o++) {
      const uj_tensor_t *x = gw_out(a, g, o), *y = gw_out(b, g, o);
      if (a->out_in[o] < 0) {
        double want = or_get(y, 0), got = or_get(x, 0);
        if (got == want) continue; /* infinities too: the max of no elements */
        CHECK_NEAR(got, want, tol);
        bad += !(fabs(got - want) <= tol * (fabs(want) > 1 ? fabs(want) : 1));
      } else if (!same_bits(x, y)) {
        fprintf(stderr, "  %s: group %d output %d differs\n", what, g, o);
        CHECK(same_bits(x, y));
        bad++;
      }
    }
}

static uj_ctx_t* engine_ctx(uj_engine_t e, int threads) {
  uj_ctx_t* ctx = uj_ctx_new();
  if (ctx && (uj_ctx_set_engine(ctx, e) != UJ_OK || uj_ctx_set_threads(ctx, threads) != UJ_OK)) {
    uj_ctx_free(ctx);
    return NULL;
  }
  return ctx;
}

static const uj_engine_t cpu_engines[] = {UJ_ENGINE_INTERP, UJ_ENGINE_MIR, UJ_ENGINE_C, UJ_ENGINE_AUTO};

static void oracle_round(const char* src, const char* shared, const char* per_group, uint64_t seed) {
  uint64_t st = seed;
  int n = (int)harness_int(&st, 1, 60);
  int ndim[64];
  int64_t dims[64 * UJ_MAX_DIMS] = {0};
  random_shapes(&st, n, ndim, dims);
  for (size_t e = 0; e < sizeof cpu_engines / sizeof *cpu_engines; e++) {
    uj_ctx_t* probe = uj_ctx_new();
    int available = probe && uj_engine_available(probe, cpu_engines[e]);
    uj_ctx_free(probe);
    if (!available) continue;
    uj_ctx_t* ctx = engine_ctx(cpu_engines[e], 2);
    uint64_t fill = seed + 1;
    gw_t* w = gw_new(src, n, ndim, dims, shared, per_group, &fill);
    CHECK(ctx && w);
    if (!ctx || !w) return;
    gw_t* one = gw_clone(w);
    CHECK(jit_groups_fast(ctx, w->prog, w->groups, n, NULL) == 1);
    uj_status_t s = uj_program_run_groups(ctx, w->prog, w->groups, n, w->nin, NULL, 0, w->nout);
    CHECK(s == UJ_OK);
    if (s != UJ_OK) fprintf(stderr, "  %s: %s\n", uj_engine_name(cpu_engines[e]), uj_last_error());
    CHECK(gw_run_one_by_one(ctx, w->prog, one) == UJ_OK);
    compare(w, one, 1e-4, uj_engine_name(cpu_engines[e]));
    gw_free(one);
    gw_free(w);
    uj_ctx_free(ctx);
  }
}

TEST(adamw_over_random_groups_matches_one_run_per_group_on_every_engine) {
  for (uint64_t round = 0; round < 4; round++) {
    HARNESS_SEED(1000 + round);
    oracle_round(ADAMW, ADAMW_SHARED, NULL, 1000 + round);
  }
}

TEST(per_group_scalars_and_reductions_match_one_run_per_group) {
  for (uint64_t round = 0; round < 4; round++) {
    HARNESS_SEED(2000 + round);
    oracle_round(NORMED, "b", "lr", 2000 + round);
  }
}

/* The partial sums of a group's pieces combine in a fixed order: the
 * same bits whatever the threads. */
TEST(reductions_are_the_same_bits_with_one_and_two_threads) {
  HARNESS_SEED(3000);
  uint64_t st = 3000;
  int ndim[12];
  int64_t dims[12 * UJ_MAX_DIMS] = {0};
  random_shapes(&st, 12, ndim, dims);
  dims[0] = 5 * GROUPS_PIECE + 17;
  ndim[0] = 1;
  gw_t* w[2] = {NULL, NULL};
  for (int k = 0; k < 2; k++) {
    uj_ctx_t* ctx = engine_ctx(UJ_ENGINE_C, k + 1);
    if (!ctx) ctx = engine_ctx(UJ_ENGINE_MIR, k + 1);
    SKIP_IF(!ctx, "no compiling engine");
    uint64_t fill = 3001;
    w[k] = gw_new(NORMED, 12, ndim, dims, "b", "lr", &fill);
    CHECK(uj_program_run_groups(ctx, w[k]->prog, w[k]->groups, 12, w[k]->nin, NULL, 0, w[k]->nout) == UJ_OK);
    uj_ctx_free(ctx);
  }
  for (int g = 0; g < 12; g++)
    for (int o = 0; o < w[0]->nout; o++) CHECK(same_bits(gw_out(w[0], g, o), gw_out(w[1], g, o)));
  gw_free(w[0]);
  gw_free(w[1]);
}

static int64_t memory_misses(uj_ctx_t* ctx) {
  jit_state_t* js = jit_state(ctx);
  jit_cache_counts_t c;
  jit_cache_counts(js->cache, &c);
  return c.memory_misses;
}

/* Sizes, the number of groups and the scalars' values change every step;
 * the kernel is the one the first step got. */
TEST(a_thousand_steps_of_changing_sizes_compile_nothing_new) {
  HARNESS_SEED(4000);
  uint64_t st = 4000;
  for (int e = 1; e < 3; e++) {
    uj_ctx_t* ctx = engine_ctx(cpu_engines[e], 2);
    if (!ctx) continue;
    uj_program_t* prog = NULL;
    CHECK(uj_program_parse(NORMED, &prog) == UJ_OK);
    int64_t misses_after_first = -1;
    for (int step = 0; step < 1000; step++) {
      int n = (int)harness_int(&st, 1, 8);
      int ndim[8];
      int64_t dims[8 * UJ_MAX_DIMS] = {0};
      for (int g = 0; g < n; g++) ndim[g] = 1, dims[g * UJ_MAX_DIMS] = harness_int(&st, 0, 200);
      uint64_t fill = st;
      gw_t* w = gw_new(NORMED, n, ndim, dims, "b", "lr", &fill);
      uj_status_t s = uj_program_run_groups(ctx, prog, w->groups, n, w->nin, NULL, 0, w->nout);
      CHECK(s == UJ_OK);
      gw_free(w);
      if (step == 0) misses_after_first = memory_misses(ctx);
      if (s != UJ_OK) break;
    }
    CHECK(misses_after_first >= 1);
    CHECK(memory_misses(ctx) == misses_after_first);
    uj_program_free(prog);
    uj_ctx_free(ctx);
  }
}

static int first_bits_kept(const gw_t* w, const gw_t* before) {
  for (int g = 0; g < w->ngroups; g++)
    for (int o = 0; o < w->nout; o++)
      if (!same_bits(gw_out(w, g, o), gw_out(before, g, o))) return 0;
  return 1;
}

TEST(a_bad_group_on_the_fast_path_is_named_and_nothing_is_written) {
  uj_ctx_t* ctx = engine_ctx(UJ_ENGINE_C, 2);
  if (!ctx) ctx = engine_ctx(UJ_ENGINE_MIR, 2);
  SKIP_IF(!ctx, "no compiling engine");
  uint64_t st = 5000;
  int ndim[5] = {1, 1, 1, 1, 1};
  int64_t dims[5 * UJ_MAX_DIMS] = {0};
  for (int g = 0; g < 5; g++) dims[g * UJ_MAX_DIMS] = 100 + g;
  gw_t* w = gw_new(ADAMW, 5, ndim, dims, ADAMW_SHARED, NULL, &st);
  gw_t* before = gw_clone(w);
  CHECK(jit_groups_fast(ctx, w->prog, w->groups, 5, NULL) == 1);
  /* group 3's v is shorter than its other tensors */
  w->in[3 * w->nin + 4].dims[0] = 50;
  CHECK(uj_program_run_groups(ctx, w->prog, w->groups, 5, w->nin, NULL, 0, w->nout) == UJ_ERR_SHAPE);
  CHECK(strstr(uj_last_error(), "group 3") != NULL);
  CHECK(first_bits_kept(w, before));
  w->in[3 * w->nin + 4].dims[0] = 103;
  /* group 4's m is the same memory as group 1's m */
  void* own = w->in[4 * w->nin + 1].data;
  w->in[4 * w->nin + 1].data = w->in[1 * w->nin + 1].data;
  uj_status_t s = uj_program_run_groups(ctx, w->prog, w->groups, 5, w->nin, NULL, 0, w->nout);
  CHECK(s == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "group 1") && strstr(uj_last_error(), "group 4"));
  if (s != UJ_ERR_INVALID) fprintf(stderr, "  got %s\n", uj_last_error());
  w->in[4 * w->nin + 1].data = own;
  CHECK(first_bits_kept(w, before));
  /* group 2's p reads the start of group 0's g: another group's input */
  void* p2 = w->in[2 * w->nin + 5].data;
  w->in[2 * w->nin + 5].data = w->in[0 * w->nin + 2].data;
  CHECK(uj_program_run_groups(ctx, w->prog, w->groups, 5, w->nin, NULL, 0, w->nout) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "group 2") && strstr(uj_last_error(), "group 0"));
  w->in[2 * w->nin + 5].data = p2;
  CHECK(first_bits_kept(w, before));
  gw_free(before);
  gw_free(w);
  uj_ctx_free(ctx);
}

/* Broadcasting between a group's tensors, a reduction over one axis and
 * an output over part of an input are not the fast path's: the per-group
 * path gives the results. */
TEST(programs_off_the_fast_path_give_the_per_group_results) {
  uj_ctx_t* ctx = engine_ctx(UJ_ENGINE_C, 2);
  if (!ctx) ctx = engine_ctx(UJ_ENGINE_MIR, 2);
  SKIP_IF(!ctx, "no compiling engine");
  static const char* const srcs[] = {"y = x + b", "s = sum(x, 0)", "y = x - amax(x)"};
  for (int k = 0; k < 3; k++) {
    HARNESS_SEED(6000 + k);
    uint64_t st = 6000 + (uint64_t)k;
    int ndim[4] = {2, 2, 2, 2};
    int64_t dims[4 * UJ_MAX_DIMS] = {0};
    for (int g = 0; g < 4; g++) dims[g * UJ_MAX_DIMS] = 3 + g, dims[g * UJ_MAX_DIMS + 1] = 5;
    gw_t* w = gw_new(srcs[k], 4, ndim, dims, NULL, NULL, &st);
    CHECK(w != NULL);
    if (!w) continue;
    if (k == 0) /* b is a row: [5] beside x [n, 5] */
      for (int g = 0; g < 4; g++) w->in[g * w->nin + 1].ndim = 1, w->in[g * w->nin + 1].dims[0] = 5;
    CHECK(jit_groups_fast(ctx, w->prog, w->groups, 4, NULL) == 0);
    gw_t* one = gw_clone(w);
    uj_status_t s = uj_program_run_groups(ctx, w->prog, w->groups, 4, w->nin, NULL, 0, w->nout);
    CHECK(s == UJ_OK);
    if (s != UJ_OK) fprintf(stderr, "  %s: %s\n", srcs[k], uj_last_error());
    CHECK(gw_run_one_by_one(ctx, w->prog, one) == UJ_OK);
    for (int g = 0; g < 4; g++) CHECK(same_bits(gw_out(w, g, 0), gw_out(one, g, 0)));
    gw_free(one);
    gw_free(w);
  }
  uj_ctx_free(ctx);
}

TEST_MAIN()
