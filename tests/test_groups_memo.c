/* tests/test_groups_memo.c: the memo of a context's list of groups
 * (jit/groups/memo.c). A call with the list the context ran on before
 * borrows what that list's walk gathered; whatever changed in the list
 * between calls (a size, a dtype, a data pointer, a struct's address, an
 * output moved over another group's memory), the call must do what a
 * context without the memo does: the same status, the same message, the
 * same bits in every tensor. Two copies of one list take the same changes,
 * one run on a context kept from call to call, the other on a new context
 * each call. */
#include "../jit/groups/groups.h"
#include "../jit/jit.h"
#include "groups_world.h"
#include "harness.h"

static int recorded(uj_ctx_t* ctx, const gw_t* w) {
  const jit_state_t* js = ctx->jit_state;
  return js && groups_memo_recorded(js->groups_memo, w->groups, w->ngroups);
}

/* One change to input i of group g of w (a tensor of the group's shape),
 * kept in u to undo. */
typedef struct {
  uj_tensor_t saved;
  const uj_tensor_t* saved_ptr;
  uj_tensor_t copy; /* a struct of the same values at another address */
} undo_t;

static void change(gw_t* w, int how, int g, int i, int g2, undo_t* u) {
  uj_tensor_t* t = &w->in[g * w->nin + i];
  u->saved = *t;
  u->saved_ptr = w->inp[g * w->nin + i];
  switch (how) {
    case 1: if (t->ndim > 0 && t->dims[0] > 1) t->dims[0]--; break; /* a size */
    case 2: t->dtype = UJ_F64; break;                                 /* a dtype */
    case 3: t->data = w->in[g2 * w->nin + i].data; break;             /* another group's memory */
    case 4: u->copy = *t, w->inp[g * w->nin + i] = &u->copy; break;   /* the same values elsewhere */
    case 5: t->data = NULL; break;                                     /* no data */
    default: break;
  }
}

static void undo(gw_t* w, int g, int i, const undo_t* u) {
  w->in[g * w->nin + i] = u->saved;
  w->inp[g * w->nin + i] = u->saved_ptr;
}

static int same_tensors(const gw_t* a, const gw_t* b) {
  for (int k = 0; k < a->ngroups * a->nin; k++)
    if (a->kind[k % a->nin] == 'g' && memcmp(a->in[k].data, b->in[k].data, (size_t)or_tnumel(&a->in[k]) * 4))
      return 0;
  return 1;
}

TEST(a_list_changed_between_calls_runs_as_without_the_memo) {
  uj_ctx_t* probe = gw_compiling_ctx(2);
  SKIP_IF(!probe, "no compiling engine");
  uj_ctx_free(probe);
  uint64_t seed = 7500;
  const char* env = getenv("UJ_TEST_SEED");
  if (env) seed = strtoull(env, NULL, 0) | 1;
  HARNESS_SEED(seed);
  uint64_t st = seed;
  enum { N = 3000 };
  static int ndim[N];
  static int64_t dims[N * UJ_MAX_DIMS];
  for (int g = 0; g < N; g++) {
    ndim[g] = (int)harness_int(&st, 1, 2);
    for (int a = 0; a < ndim[g]; a++) dims[g * UJ_MAX_DIMS + a] = harness_int(&st, 1, 40);
  }
  gw_t* w = gw_new("m = b * m + g; p = p - lr * m", N, ndim, dims, "b", "lr", &st);
  CHECK(w != NULL);
  gw_t* c = w ? gw_clone(w) : NULL;
  /* each change, a few times: on a context that recorded the list (three
   * calls on it as it is), then on the changed list, then on the list as
   * it was again; each call also on a new context, and compared */
  for (int round = 0; w && c && round < 15; round++) {
    int how = 1 + round % 5;
    int g = (int)harness_int(&st, 0, N - 1), g2 = (int)harness_int(&st, 0, N - 1);
    int i = 0;
    do i = (int)harness_int(&st, 0, w->nin - 1);
    while (w->kind[i] != 'g');
    uj_ctx_t* kept = gw_compiling_ctx(2);
    for (int call = 0; kept && call < 5; call++) {
      undo_t uw, uc;
      int now = call == 3 ? how : 0;
      change(w, now, g, i, g2, &uw);
      change(c, now, g, i, g2, &uc);
      if (call == 3) CHECK(recorded(kept, w));
      uj_ctx_t* fresh = gw_compiling_ctx(2);
      uj_status_t sw = uj_program_run_groups(kept, w->prog, w->groups, N, w->nin, NULL, 0, w->nout);
      char mw[512];
      snprintf(mw, sizeof mw, "%s", uj_last_error());
      uj_status_t sc = uj_program_run_groups(fresh, w->prog, c->groups, N, c->nin, NULL, 0, c->nout);
      undo(w, g, i, &uw);
      undo(c, g, i, &uc);
      if (sw != sc || (sw != UJ_OK && strcmp(mw, uj_last_error()) != 0) || !same_tensors(w, c)) {
        fprintf(stderr, "  round %d call %d (change %d at group %d, input %d): kept context %d \"%s\", new one %d \"%s\"\n",
                round, call, now, g, i, sw, mw, sc, uj_last_error());
        CHECK(0);
      }
      uj_ctx_free(fresh);
    }
    uj_ctx_free(kept);
  }
  gw_free(c);
  gw_free(w);
}

/* An optimizer's passes alternate lists (the norms, then the update): each
 * is recorded after its second call, and runs as on a new context. */
TEST(alternating_lists_are_each_recorded) {
  uj_ctx_t* kept = gw_compiling_ctx(2);
  SKIP_IF(!kept, "no compiling engine");
  HARNESS_SEED(7600);
  uint64_t st = 7600;
  enum { N = 500 };
  static int ndim[N];
  static int64_t dims[N * UJ_MAX_DIMS];
  for (int g = 0; g < N; g++) ndim[g] = 1, dims[g * UJ_MAX_DIMS] = harness_int(&st, 1, 300);
  gw_t* a = gw_new("m = b * m + g; p = p - lr * m", N, ndim, dims, "b", "lr", &st);
  gw_t* b = gw_new("s = sum(g * g)", N, ndim, dims, NULL, NULL, &st);
  CHECK(a && b);
  gw_t* ca = a ? gw_clone(a) : NULL;
  gw_t* cb = b ? gw_clone(b) : NULL;
  for (int call = 0; a && b && ca && cb && call < 8; call++) {
    gw_t* w = call % 2 ? b : a;
    gw_t* c = call % 2 ? cb : ca;
    if (call >= 4) CHECK(recorded(kept, w));
    uj_ctx_t* fresh = gw_compiling_ctx(2);
    CHECK(uj_program_run_groups(kept, w->prog, w->groups, N, w->nin, NULL, 0, w->nout) == UJ_OK);
    CHECK(uj_program_run_groups(fresh, w->prog, c->groups, N, c->nin, NULL, 0, c->nout) == UJ_OK);
    CHECK(same_tensors(w, c));
    for (int g = 0; g < N; g++)
      for (int o = 0; o < w->nout; o++)
        if (w->out_in[o] < 0) CHECK(!memcmp(gw_out(w, g, o)->data, gw_out(c, g, o)->data, 4));
    uj_ctx_free(fresh);
  }
  gw_free(ca), gw_free(cb);
  gw_free(a), gw_free(b);
  uj_ctx_free(kept);
}

TEST_MAIN()
