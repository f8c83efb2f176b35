/* tests/test_groups.c: multi-tensor execution (uj_program_run_groups). An
 * update with a per-group scalar and a per-group reduction, run over groups
 * of different sizes on every engine, must give each group exactly what a
 * uj_program_run of that group alone gives; a bad group fails the call
 * before any group is written, and the message names it. */
#include "oracle.h"
#include "harness.h"

#define SRC "m = b*m + (1-b)*g; p = p - lr*m; n = sum(p*p)"
#define NGROUPS 6
static const int64_t sizes[NGROUPS] = {1, 7, 1000, 33, 4096, 2};

typedef struct {
  uj_tensor_t b, m, g, p, lr, n;
} group_t;

/* Inputs in the program's order: b, m, g, p, lr; outputs m, p, n. */
static void bind(group_t* t, const uj_tensor_t* in[5], uj_tensor_t* out[3]) {
  in[0] = &t->b, in[1] = &t->m, in[2] = &t->g, in[3] = &t->p, in[4] = &t->lr;
  out[0] = &t->m, out[1] = &t->p, out[2] = &t->n;
}

static void make(group_t* t, int64_t n, uint64_t* st, uj_tensor_t* shared_b) {
  const int64_t one = 1;
  t->b = *shared_b;
  t->m = or_tensor(UJ_F32, 1, &n), t->g = or_tensor(UJ_F32, 1, &n), t->p = or_tensor(UJ_F32, 1, &n);
  t->lr = or_tensor(UJ_F32, 0, NULL), t->n = or_tensor(UJ_F32, 1, &one);
  or_fill_real(st, &t->m, -1, 1), or_fill_real(st, &t->g, -1, 1), or_fill_real(st, &t->p, -1, 1);
  or_fill_real(st, &t->lr, 1e-3, 1e-1);
  or_set(&t->n, 0, -7);
}

static void copy(group_t* dst, const group_t* src) {
  uj_tensor_t* d[] = {&dst->m, &dst->g, &dst->p, &dst->lr, &dst->n};
  const uj_tensor_t* s[] = {&src->m, &src->g, &src->p, &src->lr, &src->n};
  for (int i = 0; i < 5; i++) memcpy(d[i]->data, s[i]->data, (size_t)or_tnumel(s[i]) * 4);
}

static void drop(group_t* t) {
  or_tensor_free(&t->m), or_tensor_free(&t->g), or_tensor_free(&t->p), or_tensor_free(&t->lr), or_tensor_free(&t->n);
}

static int same_bits(const uj_tensor_t* a, const uj_tensor_t* b) {
  return memcmp(a->data, b->data, (size_t)or_tnumel(a) * 4) == 0;
}

TEST(groups_match_one_run_per_group) {
  HARNESS_SEED(4242);
  for (int slot = 0; slot < OR_NENGINES; slot++) {
    if (or_configs[slot].engine == UJ_ENGINE_CUDA) continue; /* host tensors */
    uj_ctx_t* ctx = or_ctx(slot);
    uj_program_t* prog = NULL;
    CHECK(uj_program_parse(SRC, &prog) == UJ_OK);
    if (!ctx || !prog) continue;
    uint64_t st = 4242;
    uj_tensor_t b = or_tensor(UJ_F32, 0, NULL);
    or_set(&b, 0, 0.9);
    group_t grp[NGROUPS], one[NGROUPS];
    uj_group_t groups[NGROUPS];
    const uj_tensor_t* in[NGROUPS][5];
    uj_tensor_t* out[NGROUPS][3];
    for (int i = 0; i < NGROUPS; i++) {
      make(&grp[i], sizes[i], &st, &b);
      make(&one[i], sizes[i], &st, &b);
      copy(&one[i], &grp[i]);
      bind(&grp[i], in[i], out[i]);
      groups[i] = (uj_group_t){in[i], out[i]};
    }
    uj_status_t s = uj_program_run_groups(ctx, prog, groups, NGROUPS, 5, NULL, 0, 3);
    CHECK(s == UJ_OK);
    if (s != UJ_OK) fprintf(stderr, "  %s: %s\n", or_configs[slot].name, uj_last_error());
    for (int i = 0; i < NGROUPS; i++) {
      const uj_tensor_t* oi[5];
      uj_tensor_t* oo[3];
      bind(&one[i], oi, oo);
      CHECK(uj_program_run(ctx, prog, UJ_FORWARD, oi, 5, NULL, 0, oo, 3) == UJ_OK);
      CHECK(same_bits(&grp[i].m, &one[i].m));
      CHECK(same_bits(&grp[i].p, &one[i].p));
      CHECK_NEAR(or_get(&grp[i].n, 0), or_get(&one[i].n, 0), 1e-6 * fabs(or_get(&one[i].n, 0)));
      drop(&grp[i]), drop(&one[i]);
    }
    or_tensor_free(&b);
    uj_program_free(prog);
  }
}

TEST(a_bad_group_fails_the_call_before_any_write) {
  uj_ctx_t* ctx = or_ctx(0);
  uj_program_t* prog = NULL;
  CHECK(uj_program_parse(SRC, &prog) == UJ_OK);
  if (!ctx || !prog) return;
  uint64_t st = 99;
  uj_tensor_t b = or_tensor(UJ_F32, 0, NULL);
  or_set(&b, 0, 0.5);
  group_t grp[3];
  uj_group_t groups[3];
  const uj_tensor_t* in[3][5];
  uj_tensor_t* out[3][3];
  float before[2];
  for (int i = 0; i < 3; i++) {
    make(&grp[i], 10 + i, &st, &b);
    bind(&grp[i], in[i], out[i]);
    groups[i] = (uj_group_t){in[i], out[i]};
  }
  before[0] = ((float*)grp[0].p.data)[0], before[1] = ((float*)grp[1].p.data)[0];
  grp[2].p.dims[0] = 5; /* the output p of group 2 no longer matches its inputs */
  uj_status_t s = uj_program_run_groups(ctx, prog, groups, 3, 5, NULL, 0, 3);
  CHECK(s == UJ_ERR_SHAPE);
  CHECK(strstr(uj_last_error(), "group 2") != NULL);
  CHECK(((float*)grp[0].p.data)[0] == before[0]);
  CHECK(((float*)grp[1].p.data)[0] == before[1]);
  grp[2].p.dims[0] = 12;
  CHECK(uj_program_run_groups(ctx, prog, groups, 3, 4, NULL, 0, 3) == UJ_ERR_INVALID);
  CHECK(uj_program_run_groups(ctx, prog, NULL, 3, 5, NULL, 0, 3) == UJ_ERR_INVALID);
  CHECK(uj_program_run_groups(ctx, prog, groups, -1, 5, NULL, 0, 3) == UJ_ERR_INVALID);
  CHECK(uj_program_run_groups(ctx, prog, groups, 0, 5, NULL, 0, 3) == UJ_OK);
  for (int i = 0; i < 3; i++) drop(&grp[i]);
  or_tensor_free(&b);
  uj_program_free(prog);
}

TEST_MAIN()
