/* tests/test_groups_cuda.c: multi-tensor execution on CUDA
 * (jit/cuda/cuda_groups.c). Without a GPU: the chunk table the host
 * uploads covers every group in order, in chunks no longer than asked,
 * with each group's pointers; and every multi-tensor kernel (updates,
 * reductions, both together) compiles with NVRTC for sm_90. With a GPU:
 * one launch over random groups gives what one uj_program_run per group
 * gives on the GPU, elementwise outputs bit for bit. */
#include "../jit/cuda/cuda_groups.h"
#include "groups_world.h"
#include "harness.h"

#define ADAMW                                                                                  \
  "m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; "                                               \
  "p = p*(1 - lr*wd) - (lr/bc1)*m/(sqrt(v)/sqrt(bc2) + eps)"
#define ADAMW_SHARED "b1,b2,lr,wd,bc1,bc2,eps"
#define NORMED "m = b*m + (1-b)*g; p = p - lr*m; n = sum(p*p); hi = amax(g); lo = amin(g)"

static void random_sizes(uint64_t* st, int n, int* ndim, int64_t* dims) {
  for (int g = 0; g < n; g++) {
    int pick = (int)harness_int(st, 0, 9);
    ndim[g] = pick == 9 ? 2 : 1;
    int64_t* d = &dims[g * UJ_MAX_DIMS];
    if (pick == 9) d[0] = harness_int(st, 1, 30), d[1] = harness_int(st, 1, 50);
    else if (pick >= 7) d[0] = harness_int(st, 0, 1);
    else d[0] = harness_int(st, 2, 5000);
  }
}

static void check_table(const gw_t* w, const groups_plan_t* plan, int64_t chunk) {
  groups_table_t t;
  CHECK(groups_table_make(plan, w->groups, w->ngroups, chunk, &t) == UJ_OK);
  CHECK(t.nslots == w->nin + w->nout);
  CHECK(t.first[w->ngroups] == t.nchunks);
  int64_t k = 0;
  for (int g = 0; g < w->ngroups; g++) {
    CHECK(t.first[g] == k);
    int64_t covered = 0;
    for (; k < t.first[g + 1]; k++) {
      CHECK(t.chunks[3 * k] == g);
      CHECK(t.chunks[3 * k + 1] == covered);
      CHECK(t.chunks[3 * k + 2] <= chunk);
      CHECK(t.chunks[3 * k + 2] > 0 || plan->numel[g] == 0);
      covered += t.chunks[3 * k + 2];
    }
    CHECK(covered == plan->numel[g]);
    /* an empty group has one empty chunk exactly when its reductions need their identity */
    if (plan->numel[g] == 0) CHECK(t.first[g + 1] - t.first[g] == (plan->nred > 0));
    for (int i = 0; i < w->nin; i++) CHECK(t.ptrs[g * t.nslots + i] == w->groups[g].inputs[i]->data);
    for (int o = 0; o < w->nout; o++) CHECK(t.ptrs[g * t.nslots + w->nin + o] == w->groups[g].outputs[o]->data);
  }
  CHECK(k == t.nchunks);
  groups_table_release(&t);
}

TEST(the_chunk_table_covers_every_group_in_order) {
  uj_ctx_t* ctx = uj_ctx_new();
  for (uint64_t round = 0; round < 6; round++) {
    HARNESS_SEED(7000 + round);
    uint64_t st = 7000 + round;
    int n = (int)harness_int(&st, 1, 40), ndim[40];
    int64_t dims[40 * UJ_MAX_DIMS] = {0};
    random_sizes(&st, n, ndim, dims);
    gw_t* w = round % 2 ? gw_new(NORMED, n, ndim, dims, "b", "lr", &st) : gw_new(ADAMW, n, ndim, dims, ADAMW_SHARED, NULL, &st);
    CHECK(w != NULL);
    if (!w) continue;
    groups_plan_t plan;
    int fast = 0;
    CHECK(groups_plan_make(ctx, w->prog, w->groups, n, NULL, &plan, &fast) == UJ_OK);
    CHECK(fast && groups_check_fast(&plan, w->groups, n, UJ_CPU));
    if (fast) {
      check_table(w, &plan, 100);
      check_table(w, &plan, 1);
      check_table(w, &plan, GROUPS_CUDA_CHUNK);
    }
    groups_plan_release(&plan);
    gw_free(w);
  }
  uj_ctx_free(ctx);
}

TEST(every_multi_tensor_kernel_compiles_for_sm_90) {
  SKIP_IF(!or_cuda_nvrtc_(), "no NVRTC: CUDA compile test skipped");
  static const struct {
    const char* src;
    const char *shared, *per_group;
  } programs[] = {{ADAMW, ADAMW_SHARED, NULL},
                  {NORMED, "b", "lr"},
                  {"s = sum(x*x)", NULL, NULL},
                  {"y = where(x > t, x, 0) * k; hi = amax(y); prod_ = x * x", "k", "t"}};
  uj_ctx_t* ctx = uj_ctx_new();
  for (size_t k = 0; k < sizeof programs / sizeof *programs; k++) {
    uint64_t st = 8000 + k;
    int ndim[3] = {1, 2, 1};
    int64_t dims[3 * UJ_MAX_DIMS] = {0};
    dims[0] = 10, dims[UJ_MAX_DIMS] = 3, dims[UJ_MAX_DIMS + 1] = 4, dims[2 * UJ_MAX_DIMS] = 0;
    gw_t* w = gw_new(programs[k].src, 3, ndim, dims, programs[k].shared, programs[k].per_group, &st);
    CHECK(w != NULL);
    if (!w) continue;
    groups_plan_t plan;
    int fast = 0;
    CHECK(groups_plan_make(ctx, w->prog, w->groups, 3, NULL, &plan, &fast) == UJ_OK && fast);
    if (fast) {
      uj_status_t s = jit_cuda_groups_compile_for(ctx, &plan, NULL, "sm_90", NULL);
      CHECK(s == UJ_OK);
      if (s != UJ_OK) fprintf(stderr, "  %s: %s\n", programs[k].src, uj_last_error());
      /* the API's way to the same kernels: one, and one more to combine reductions */
      int kernels = 0;
      s = uj_program_compile_groups_cuda(ctx, w->prog, w->groups, 3, w->nin, NULL, 0, w->nout, "sm_90", &kernels, NULL);
      CHECK(s == UJ_OK && kernels == (plan.nred ? 2 : 1));
      CHECK(uj_program_compile_groups_cuda(ctx, w->prog, w->groups, 3, w->nin + 1, NULL, 0, w->nout, "sm_90", NULL,
                                           NULL) == UJ_ERR_INVALID);
      CHECK(uj_program_compile_groups_cuda(ctx, w->prog, w->groups, 0, w->nin, NULL, 0, w->nout, "sm_90", NULL,
                                           NULL) == UJ_ERR_INVALID);
    }
    groups_plan_release(&plan);
    gw_free(w);
  }
  uj_ctx_free(ctx);
}

/* ---- on a GPU ---- */

/* w's tensors copied to the GPU, bound in the same way. */
typedef struct {
  uj_tensor_t* t; /* [group * (nin + nout) + slot]: inputs, then outputs of their own */
  const uj_tensor_t** in;
  uj_tensor_t** out;
  uj_group_t* groups;
} gpu_world_t;

static int to_gpu(uj_ctx_t* ctx, const gw_t* w, gpu_world_t* d) {
  int ns = w->nin + w->nout, ok = 1;
  d->t = calloc((size_t)(w->ngroups * ns), sizeof *d->t);
  d->in = calloc((size_t)(w->ngroups * w->nin), sizeof *d->in);
  d->out = calloc((size_t)(w->ngroups * w->nout), sizeof *d->out);
  d->groups = calloc((size_t)w->ngroups, sizeof *d->groups);
  for (int g = 0; g < w->ngroups && ok; g++) {
    for (int s = 0; s < ns && ok; s++) {
      const uj_tensor_t* h = s < w->nin ? &w->in[g * w->nin + s] : &w->out[g * w->nout + s - w->nin];
      if (s >= w->nin && w->out_in[s - w->nin] >= 0) continue;
      uj_tensor_t* t = &d->t[g * ns + s];
      ok = uj_tensor_alloc(ctx, UJ_CUDA, h->dtype, h->ndim, h->dims, t) == UJ_OK && uj_tensor_copy(ctx, t, h) == UJ_OK;
    }
    for (int i = 0; i < w->nin; i++) d->in[g * w->nin + i] = &d->t[g * ns + i];
    for (int o = 0; o < w->nout; o++)
      d->out[g * w->nout + o] = &d->t[g * ns + (w->out_in[o] >= 0 ? w->out_in[o] : w->nin + o)];
    d->groups[g] = (uj_group_t){&d->in[g * w->nin], &d->out[g * w->nout]};
  }
  return ok;
}

/* Copies the GPU outputs back over w's. */
static void from_gpu(uj_ctx_t* ctx, gw_t* w, gpu_world_t* d) {
  for (int g = 0; g < w->ngroups; g++)
    for (int o = 0; o < w->nout; o++) CHECK(uj_tensor_copy(ctx, w->outp[g * w->nout + o], d->out[g * w->nout + o]) == UJ_OK);
}

static void gpu_free(uj_ctx_t* ctx, const gw_t* w, gpu_world_t* d) {
  for (int k = 0; k < w->ngroups * (w->nin + w->nout); k++) uj_tensor_free(ctx, &d->t[k]);
  free(d->t), free(d->in), free(d->out), free(d->groups);
}

TEST(groups_on_the_gpu_match_one_run_per_group) {
  SKIP_IF(!or_engine_available(UJ_ENGINE_CUDA), "no CUDA device: GPU test skipped");
  uj_ctx_t* ctx = uj_ctx_new();
  CHECK(uj_ctx_set_engine(ctx, UJ_ENGINE_CUDA) == UJ_OK);
  for (uint64_t round = 0; round < 4; round++) {
    HARNESS_SEED(9000 + round);
    uint64_t st = 9000 + round;
    int n = (int)harness_int(&st, 1, 40), ndim[40];
    int64_t dims[40 * UJ_MAX_DIMS] = {0};
    random_sizes(&st, n, ndim, dims);
    dims[0] = 3 * GROUPS_CUDA_CHUNK + 5, ndim[0] = 1; /* several chunks */
    gw_t* w = round % 2 ? gw_new(NORMED, n, ndim, dims, "b", "lr", &st) : gw_new(ADAMW, n, ndim, dims, ADAMW_SHARED, NULL, &st);
    gw_t* one = gw_clone(w);
    gpu_world_t dw = {0}, done = {0};
    CHECK(to_gpu(ctx, w, &dw) && to_gpu(ctx, one, &done));
    uj_status_t s = uj_program_run_groups(ctx, w->prog, dw.groups, n, w->nin, NULL, 0, w->nout);
    CHECK(s == UJ_OK);
    if (s != UJ_OK) fprintf(stderr, "  %s\n", uj_last_error());
    for (int g = 0; g < n; g++)
      CHECK(uj_program_run(ctx, w->prog, UJ_FORWARD, done.groups[g].inputs, w->nin, NULL, 0, done.groups[g].outputs,
                           w->nout) == UJ_OK);
    CHECK(uj_ctx_synchronize(ctx) == UJ_OK);
    from_gpu(ctx, w, &dw);
    from_gpu(ctx, one, &done);
    for (int g = 0; g < n; g++)
      for (int o = 0; o < w->nout; o++) {
        const uj_tensor_t *a = gw_out(w, g, o), *b = gw_out(one, g, o);
        if (w->out_in[o] >= 0) {
          CHECK(!memcmp(a->data, b->data, (size_t)or_tnumel(a) * 4));
        } else if (or_get(a, 0) != or_get(b, 0)) {
          CHECK_NEAR(or_get(a, 0), or_get(b, 0), 1e-4);
        }
      }
    gpu_free(ctx, w, &dw), gpu_free(ctx, one, &done);
    gw_free(one), gw_free(w);
  }
  uj_ctx_free(ctx);
}

TEST_MAIN()
