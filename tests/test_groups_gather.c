/* tests/test_groups_gather.c: the fast path's decisions that depend on the
 * whole list of groups, which jit/groups/gather.c folds into one walk: a
 * slot's kind comes from every group (an input 0-d in one group and a
 * vector in another is of the group's shape), a group's shape from its
 * first input that is not 0-d, a reduced output's rank from each group's
 * rank. Each list runs as the per-group path runs it: the same results,
 * the same error naming the same group. A walk split over threads gathers
 * exactly what one walk gathers, on good lists and on broken ones. */
#include "../jit/groups/groups.h"
#include "../jit/jit.h"
#include "groups_world.h"
#include "harness.h"

static int same_bits(const uj_tensor_t* a, const uj_tensor_t* b) {
  return a->ndim == b->ndim && !memcmp(a->data, b->data, (size_t)or_tnumel(a) * 4);
}

/* Runs w's groups in one call and one by one on a clone: the same bits. */
static void same_as_one_by_one(uj_ctx_t* ctx, gw_t* w) {
  gw_t* one = gw_clone(w);
  uj_status_t s = uj_program_run_groups(ctx, w->prog, w->groups, w->ngroups, w->nin, NULL, 0, w->nout);
  CHECK(s == UJ_OK);
  if (s != UJ_OK) fprintf(stderr, "  %s\n", uj_last_error());
  CHECK(gw_run_one_by_one(ctx, w->prog, one) == UJ_OK);
  for (int g = 0; g < w->ngroups; g++)
    for (int o = 0; o < w->nout; o++) CHECK(same_bits(gw_out(w, g, o), gw_out(one, g, o)));
  gw_free(one);
}

TEST(a_group_of_scalars_among_vectors_runs_on_the_fast_path) {
  uj_ctx_t* ctx = gw_compiling_ctx(1);
  SKIP_IF(!ctx, "no compiling engine");
  HARNESS_SEED(7100);
  uint64_t st = 7100;
  /* group 0's x is 0-d: x is still of the group's shape, its y 0-d too */
  int ndim[4] = {0, 1, 1, 1};
  int64_t dims[4 * UJ_MAX_DIMS] = {0};
  for (int g = 1; g < 4; g++) dims[g * UJ_MAX_DIMS] = 10 * g;
  gw_t* w = gw_new("y = x * a + x", 4, ndim, dims, "a", NULL, &st);
  CHECK(w != NULL);
  if (w) {
    CHECK(jit_groups_fast(ctx, w->prog, w->groups, 4, NULL) == 1);
    same_as_one_by_one(ctx, w);
  }
  gw_free(w);
  uj_ctx_free(ctx);
}

TEST(a_scalar_beside_a_vector_in_one_group_leaves_the_fast_path) {
  uj_ctx_t* ctx = gw_compiling_ctx(1);
  SKIP_IF(!ctx, "no compiling engine");
  HARNESS_SEED(7200);
  uint64_t st = 7200;
  int ndim[3] = {1, 1, 1};
  int64_t dims[3 * UJ_MAX_DIMS] = {0};
  for (int g = 0; g < 3; g++) dims[g * UJ_MAX_DIMS] = 5 + g;
  gw_t* w = gw_new("y = x * w", 3, ndim, dims, NULL, NULL, &st);
  CHECK(w != NULL);
  if (w) {
    CHECK(jit_groups_fast(ctx, w->prog, w->groups, 3, NULL) == 1);
    /* group 2's x is 0-d, its w a vector: it broadcasts, which only the per-group path does */
    uj_tensor_t* x = &w->in[2 * w->nin + 0];
    x->ndim = 0;
    CHECK(jit_groups_fast(ctx, w->prog, w->groups, 3, NULL) == 0);
    same_as_one_by_one(ctx, w);
    x->ndim = 1;
  }
  gw_free(w);
  uj_ctx_free(ctx);
}

TEST(reductions_of_groups_of_different_ranks_and_a_bad_one) {
  uj_ctx_t* ctx = gw_compiling_ctx(1);
  SKIP_IF(!ctx, "no compiling engine");
  HARNESS_SEED(7300);
  uint64_t st = 7300;
  int ndim[3] = {1, 2, 1};
  int64_t dims[3 * UJ_MAX_DIMS] = {0};
  dims[0] = 7, dims[UJ_MAX_DIMS] = 3, dims[UJ_MAX_DIMS + 1] = 4, dims[2 * UJ_MAX_DIMS] = 9;
  gw_t* w = gw_new("y = x + 1; s = sum(x)", 3, ndim, dims, NULL, NULL, &st);
  CHECK(w != NULL);
  if (w) {
    CHECK(jit_groups_fast(ctx, w->prog, w->groups, 3, NULL) == 1);
    same_as_one_by_one(ctx, w);
    /* group 1's sum given a rank of its own: the call fails naming it, and writes nothing */
    uj_tensor_t* s = w->outp[1 * w->nout + 1];
    int rank = s->ndim;
    s->ndim = rank + 1, s->dims[rank] = 1;
    CHECK(jit_groups_fast(ctx, w->prog, w->groups, 3, NULL) == 0);
    gw_t* before = gw_clone(w);
    CHECK(uj_program_run_groups(ctx, w->prog, w->groups, 3, w->nin, NULL, 0, w->nout) == UJ_ERR_SHAPE);
    CHECK(strstr(uj_last_error(), "group 1") != NULL);
    for (int g = 0; g < 3; g++) CHECK(same_bits(gw_out(w, g, 0), gw_out(before, g, 0)));
    gw_free(before);
    s->ndim = rank;
  }
  gw_free(w);
  uj_ctx_free(ctx);
}

/* 1 when a and b gathered the same: every summary field, the ranges in
 * order, the elements and the data pointers of every group. */
static int same_gather(const groups_gather_t* a, const groups_gather_t* b, int ngroups, int slots) {
  groups_gather_t x = *a, y = *b;
  x.ranges = y.ranges = NULL, x.numel = y.numel = NULL, x.data = y.data = NULL;
  if (memcmp(&x, &y, sizeof x) != 0) return 0;
  if (a->nranges && memcmp(a->ranges, b->ranges, a->nranges * sizeof *a->ranges) != 0) return 0;
  if (!a->numel != !b->numel || !a->data != !b->data) return 0;
  if (a->numel && memcmp(a->numel, b->numel, (size_t)ngroups * sizeof *a->numel) != 0) return 0;
  return !a->data || a->missing || !memcmp(a->data, b->data, (size_t)ngroups * (size_t)slots * sizeof *a->data);
}

TEST(a_walk_split_over_threads_gathers_what_one_walk_gathers) {
  uint64_t seed = 7400;
  const char* env = getenv("UJ_TEST_SEED");
  if (env) seed = strtoull(env, NULL, 0) | 1;
  HARNESS_SEED(seed);
  uint64_t st = seed;
  enum { N = 9000 }; /* enough groups for up to four parts */
  static int ndim[N];
  static int64_t dims[N * UJ_MAX_DIMS];
  for (int g = 0; g < N; g++) {
    ndim[g] = (int)harness_int(&st, 0, 3); /* 0-d groups too */
    for (int a = 0; a < ndim[g]; a++) dims[g * UJ_MAX_DIMS + a] = harness_int(&st, 1, 5);
  }
  gw_t* w = gw_new("m = b * m + g; p = p - lr * m; n = sum(g * g)", N, ndim, dims, "b", "lr", &st);
  CHECK(w != NULL);
  rt_pool_t* pools[3] = {rt_pool_new(2), rt_pool_new(3), rt_pool_new(4)};
  int slots = w ? w->nin + w->nout : 0;
  /* the list as it is, then broken one way at a random group each time */
  for (int round = 0; w && round < 12; round++) {
    int g = (int)harness_int(&st, 0, N - 1), i = (int)harness_int(&st, 0, w->nin - 1);
    uj_tensor_t* t = (uj_tensor_t*)w->inp[g * w->nin + i];
    uj_tensor_t saved = *t;
    const uj_tensor_t* saved_ptr = w->inp[g * w->nin + i];
    int how = round == 0 ? -1 : round % 6;
    if (how == 0) w->inp[g * w->nin + i] = NULL;             /* a tensor missing */
    if (how == 1) t->dtype = UJ_F64;                         /* a dtype unlike group 0's */
    if (how == 2) t->data = NULL;                            /* no data */
    if (how == 3) t->ndim = UJ_MAX_DIMS + 3;                 /* a rank out of range */
    if (how == 4) t->data = w->outp[((g + 1) % N) * w->nout]->data; /* another group's output */
    if (how == 5) t->ndim = 2, t->dims[0] = 3, t->dims[1] = 5; /* a shape of its own */
    groups_gather_t one, split;
    memset(&one, 0, sizeof one);
    CHECK(groups_gather(&one, w->groups, N, w->nin, w->nout, 1, NULL) == UJ_OK);
    for (int k = 0; k < 3; k++) {
      memset(&split, 0, sizeof split);
      CHECK(pools[k] && groups_gather(&split, w->groups, N, w->nin, w->nout, 1, pools[k]) == UJ_OK);
      if (!same_gather(&one, &split, N, slots)) {
        fprintf(stderr, "  round %d (break %d at group %d, input %d), %d threads: the split walk differs\n", round,
                how, g, i, rt_pool_size(pools[k]));
        CHECK(0);
      }
      groups_gather_release(&split);
    }
    groups_gather_release(&one);
    *t = saved;
    w->inp[g * w->nin + i] = saved_ptr;
  }
  for (int k = 0; k < 3; k++) rt_pool_free(pools[k]);
  gw_free(w);
}

TEST_MAIN()
