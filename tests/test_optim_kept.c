/* tests/test_optim_kept.c: an optimizer keeps what its passes bind for the
 * next step over the same groups (optim/bindings.c). Whatever changes
 * between steps (a state tensor swapped for another, per-group values of a
 * hyperparameter set or cleared, a parameter given another rank of the
 * same elements, a group dropped, the array moved), each step of one
 * optimizer kept across the steps gives, bit for bit, what a new optimizer
 * at the same step count gives on a copy of the same values. LAMB runs two
 * passes (the norms, then the update), each with its list. */
#include "oracle.h"
#include "harness.h"

enum { G = 40, MAXN = 96 };

typedef struct {
  uj_tensor_t p[G], g[G], s[G][3], spare[G];
  uj_tensor_t* state[G][3];
  uj_optim_group_t groups[G + 1];
} model_t;

static void model_new(model_t* m, const int64_t* n, uint64_t* st, int nstates) {
  for (int i = 0; i < G; i++) {
    m->p[i] = or_tensor(UJ_F32, 1, &n[i]), m->g[i] = or_tensor(UJ_F32, 1, &n[i]);
    m->spare[i] = or_tensor(UJ_F32, 1, &n[i]);
    or_fill_real(st, &m->p[i], -1, 1), or_fill_real(st, &m->g[i], -1, 1), or_fill_real(st, &m->spare[i], 0, 0.5);
    for (int k = 0; k < nstates; k++) {
      m->s[i][k] = or_tensor(UJ_F32, 1, &n[i]);
      or_fill_real(st, &m->s[i][k], 0, 0.5);
      m->state[i][k] = &m->s[i][k];
    }
    m->groups[i] = (uj_optim_group_t){&m->p[i], &m->g[i], m->state[i], NULL};
  }
}

static void model_copy(model_t* to, const model_t* from, int nstates) {
  for (int i = 0; i < G; i++) {
    size_t bytes = (size_t)or_tnumel(&from->p[i]) * 4;
    memcpy(to->p[i].data, from->p[i].data, bytes), memcpy(to->g[i].data, from->g[i].data, bytes);
    memcpy(to->spare[i].data, from->spare[i].data, bytes);
    for (int k = 0; k < nstates; k++) memcpy(to->s[i][k].data, from->s[i][k].data, bytes);
  }
}

static void model_free(model_t* m, int nstates) {
  for (int i = 0; i < G; i++) {
    or_tensor_free(&m->p[i]), or_tensor_free(&m->g[i]), or_tensor_free(&m->spare[i]);
    for (int k = 0; k < nstates; k++) or_tensor_free(&m->s[i][k]);
  }
}

static int same_model(const model_t* a, const model_t* b, int nstates) {
  for (int i = 0; i < G; i++) {
    size_t bytes = (size_t)or_tnumel(&a->p[i]) * 4;
    if (memcmp(a->p[i].data, b->p[i].data, bytes) || memcmp(a->spare[i].data, b->spare[i].data, bytes)) return 0;
    for (int k = 0; k < nstates; k++)
      if (memcmp(a->s[i][k].data, b->s[i][k].data, bytes)) return 0;
  }
  return 1;
}

/* One change to both models before step `step` (the same on each). */
static int change(model_t* m, int step, const int64_t* n, uj_optim_group_t** groups, int* count) {
  int how = step % 6, i = step % G;
  *groups = m->groups, *count = G;
  switch (how) {
    case 1: m->state[i][0] = &m->spare[i]; break;           /* a state tensor swapped for another */
    case 2: m->state[i][0] = &m->s[i][0]; break;            /* and back */
    case 3: /* a parameter of rank 2, the same elements (the sizes are even from group 1 on) */
      i = 1 + step % (G - 1), m->p[i].ndim = 2, m->p[i].dims[0] = 2, m->p[i].dims[1] = n[i] / 2;
      break;
    case 4: /* back to rank 1, and the last group dropped */
      i = 1 + (step - 1) % (G - 1), m->p[i].ndim = 1, m->p[i].dims[0] = n[i], *count = G - 1;
      break;
    case 5: memmove(m->groups + 1, m->groups, G * sizeof *m->groups), *groups = m->groups + 1; break; /* the array moved */
    default: break;
  }
  return how;
}

static void unmove(model_t* m, int how) {
  if (how == 5) memmove(m->groups, m->groups + 1, G * sizeof *m->groups);
}

static void steps_match(const char* updater, int nstates) {
  uint64_t st = 9100;
  int64_t n[G];
  for (int i = 0; i < G; i++) n[i] = i == 0 ? 1 : 2 * harness_int(&st, 1, MAXN / 2);
  model_t* a = calloc(1, sizeof *a);
  model_t* b = calloc(1, sizeof *b);
  model_new(a, n, &st, nstates), model_new(b, n, &st, nstates);
  model_copy(b, a, nstates);
  uj_ctx_t* ctx = uj_ctx_new();
  uj_optim_t* kept = NULL;
  CHECK(uj_optim_new(updater, &kept) == UJ_OK);
  double lr[G];
  for (int i = 0; i < G; i++) lr[i] = 1e-3 * (1 + i % 5);
  for (int step = 0; kept && step < 24; step++) {
    uj_optim_group_t *ga, *gb;
    int ca, cb;
    int how = change(a, step, n, &ga, &ca);
    change(b, step, n, &gb, &cb);
    /* per-group learning rates for a few steps, then shared again */
    if (step == 8) CHECK(uj_optim_set_per_group(kept, "lr", lr, G) == UJ_OK);
    if (step == 12) CHECK(uj_optim_set(kept, "lr", 2e-3) == UJ_OK);
    if (step == 14) CHECK(uj_optim_set_per_group(kept, "lr", lr, G - 1) == UJ_OK);
    if (step == 15) CHECK(uj_optim_set(kept, "lr", 2e-3) == UJ_OK);
    uj_optim_t* fresh = NULL;
    CHECK(uj_optim_new(updater, &fresh) == UJ_OK);
    if (!fresh) break;
    CHECK(uj_optim_set_step_count(fresh, uj_optim_step_count(kept)) == UJ_OK);
    if (step >= 8 && step < 12) CHECK(uj_optim_set_per_group(fresh, "lr", lr, G) == UJ_OK);
    if (step >= 12) CHECK(uj_optim_set(fresh, "lr", 2e-3) == UJ_OK);
    if (step == 14) CHECK(uj_optim_set_per_group(fresh, "lr", lr, G - 1) == UJ_OK);
    uj_status_t sa = uj_optim_step(ctx, kept, ga, ca, NULL);
    uj_status_t sb = uj_optim_step(ctx, fresh, gb, cb, NULL);
    if (sa != sb || !same_model(a, b, nstates)) {
      fprintf(stderr, "  %s step %d (change %d): kept %d, new %d (%s)\n", updater, step, how, sa, sb, uj_last_error());
      CHECK(0);
    }
    uj_optim_free(fresh);
    unmove(a, how), unmove(b, how);
  }
  uj_optim_free(kept);
  uj_ctx_free(ctx);
  model_free(a, nstates), model_free(b, nstates);
  free(a), free(b);
}

TEST(a_kept_optimizer_steps_as_a_new_one_whatever_changes) {
  HARNESS_SEED(9100);
  steps_match("adamw", 2);
  steps_match("lamb", 2);
  steps_match("sgd_momentum", 1);
}

TEST_MAIN()
