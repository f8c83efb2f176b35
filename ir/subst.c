/* ir/subst.c: substitution (store-to-load forwarding), DESIGN section 6.
 *
 * Algorithm: for each store S `t[I] = V` in a loop's statement list, where
 * I is unchecked and names a distinct element per iteration of the
 * enclosing loops, V reads no checked element and does not read t, every
 * later statement of the same list that reads t at exactly I gets V in place
 * of that load, until a statement writes t or something V reads (a tensor
 * or a carried variable): then V would no longer be the stored value. A V
 * worth computing once goes into a local first (`l = V; t[I] = l`). dce then
 * drops the stores nobody reads, so a chain of elementwise ops becomes one
 * expression. Then scalar replacement: a temporary whose every access is in
 * one loop's statement list at one unchecked per-iteration index lives only
 * within an iteration and becomes a local, which keeps a zero-fill followed
 * by a checked gather (padding) out of memory. Invalidates deps. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct {
  int tensor;
  int found;        /* a checked read, or a read of the forwarded tensor */
  const unsigned char* written; /* NULL, or the tensors written so far */
} scan_t;

static int expr_any(const ir_expr_t* e, int (*pred)(const ir_expr_t*, const void*), const void* ctx) {
  if (!e) return 0;
  return pred(e, ctx) || expr_any(e->a, pred, ctx) || expr_any(e->b, pred, ctx) || expr_any(e->c, pred, ctx);
}

static void note_read(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)is_write;
  (void)level;
  (void)stmt;
  scan_t* s = ctx;
  if (acc->check_mask || acc->tensor == s->tensor) s->found = 1;
}

static int reads_carried(const ir_expr_t* e, const void* ctx) {
  return e->kind == IR_EX_CARRIED && e->carried == *(const int*)ctx;
}

/* What forwarding keeps between stores. reads[t] counts the loads of t in
 * the whole function (as ir_walk_accesses sees them), kept exact as loads
 * are replaced, so that asking whether a tensor has readers beyond the
 * forwarded ones costs nothing instead of a walk over the function per
 * store. For the value V being forwarded: its loads, one entry per load
 * (what each copy of it adds to reads), and in_v[t], whether it reads t
 * (what a later write must not touch), made once per store instead of a
 * walk of V per later statement. */
typedef struct {
  ir_func_t* f;
  int* reads;          /* [tensor] */
  unsigned char* in_v; /* [tensor] */
  int cap;             /* of reads and in_v */
  int* v_loads;
  int nv, v_cap;
  int failed;
} subst_t;

/* Room for every tensor of f (locals are added as the pass goes). */
static int fit_tensors(subst_t* S) {
  int n = S->f->ntensors;
  if (n <= S->cap) return 1;
  int cap = n * 2;
  int* reads = realloc(S->reads, (size_t)cap * sizeof *reads);
  if (reads) S->reads = reads;
  unsigned char* in_v = realloc(S->in_v, (size_t)cap);
  if (in_v) S->in_v = in_v;
  if (!reads || !in_v) return 0;
  memset(reads + S->cap, 0, (size_t)(cap - S->cap) * sizeof *reads);
  memset(in_v + S->cap, 0, (size_t)(cap - S->cap));
  S->cap = cap;
  return 1;
}

static void count_read(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)level;
  (void)stmt;
  if (!is_write) ((subst_t*)ctx)->reads[acc->tensor]++;
}

static void uncount_read(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)is_write;
  (void)level;
  (void)stmt;
  ((subst_t*)ctx)->reads[acc->tensor]--;
}

static void note_v_load(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)is_write;
  (void)level;
  (void)stmt;
  subst_t* S = ctx;
  if (!rt_grow((void**)&S->v_loads, &S->v_cap, S->nv + 1, sizeof *S->v_loads)) {
    S->failed = 1;
    return;
  }
  S->v_loads[S->nv++] = acc->tensor;
  S->in_v[acc->tensor] = 1;
}

/* V becomes the value being forwarded. 0 on OOM. */
static int set_value(subst_t* S, ir_expr_t* V) {
  for (int i = 0; i < S->nv; i++) S->in_v[S->v_loads[i]] = 0;
  S->nv = 0;
  ir_walk_expr_loads(V, note_v_load, S, 0, NULL);
  return !S->failed;
}

/* Whether statement w invalidates V (writes t or what V reads). */
static int clobbers(const subst_t* S, const ir_stmt_t* w, ir_expr_t* V, int t) {
  if (w->kind == IR_ST_ACCUM) return expr_any(V, reads_carried, &w->carried);
  return w->target.tensor == t || S->in_v[w->target.tensor];
}

static int same_index(const ir_access_t* a, const ir_access_t* b) {
  if (a->tensor != b->tensor || a->nidx != b->nidx || b->check_mask) return 0;
  for (int k = 0; k < a->nidx; k++)
    if (!ir_ix_equal(a->idx[k], b->idx[k])) return 0;
  return 1;
}

/* Counts (replace 0) or replaces the loads of target in e, keeping
 * S->reads up to date. */
static int forward_into(subst_t* S, ir_expr_t** slot, const ir_access_t* target, const ir_expr_t* V, int replace,
                        int* oom) {
  ir_expr_t* e = *slot;
  if (!e) return 0;
  if (e->kind == IR_EX_LOAD && same_index(target, &e->access)) {
    if (replace) {
      ir_expr_t* c = ir_expr_copy(S->f, V);
      if (!c) {
        *oom = 1;
      } else {
        ir_walk_expr_loads(e, uncount_read, S, 0, NULL);
        for (int i = 0; i < S->nv; i++) S->reads[S->v_loads[i]]++;
        *slot = c;
      }
    }
    return 1;
  }
  return forward_into(S, &e->a, target, V, replace, oom) + forward_into(S, &e->b, target, V, replace, oom) +
         forward_into(S, &e->c, target, V, replace, oom);
}

/* The largest value copied into its readers. A larger V goes into a local
 * first: copied into its reader, which may be forwarded in turn, a chain of
 * n statements would grow one expression of n levels, copied whole at every
 * step (n^2 nodes, and recursion n deep in every walk of it after).
 * Statements of the expression language are at most 256 levels deep, so
 * every expression stays within a few hundred levels. */
#define FORWARD_MAX_NODES 256

/* The nodes of e, counted up to limit + 1. */
static int expr_nodes_upto(const ir_expr_t* e, int limit) {
  if (!e || limit < 0) return 0;
  int n = 1;
  n += expr_nodes_upto(e->a, limit - n);
  n += expr_nodes_upto(e->b, limit - n);
  n += expr_nodes_upto(e->c, limit - n);
  return n;
}

static int trivial(const ir_expr_t* V) {
  return V->kind == IR_EX_CONST || V->kind == IR_EX_LOAD || V->kind == IR_EX_CARRIED || V->kind == IR_EX_INDEX;
}

static int distinct_per_iteration(const ir_block_t* b, int level, const ir_access_t* acc) {
  for (int k = 0; k <= level; k++) {
    const ir_loop_t* l = &b->loops[k];
    if (l->start->kind == IR_IX_CONST && l->end->kind == IR_IX_CONST && l->end->value - l->start->value <= 1)
      continue;
    int seen = 0;
    for (int i = 0; i < acc->nidx && !seen; i++) seen = acc->idx[i]->kind == IR_IX_LOOP && acc->idx[i]->id == l->id;
    if (!seen) return 0;
  }
  return 1;
}

/* Rewrites statement s `t[I] = V` into `l = V; t[I] = l` with a new local. */
static int into_local(subst_t* S, ir_loop_t* l, int s) {
  ir_func_t* f = S->f;
  int local = ir_add_local(f, f->tensors[l->stmts[s].target.tensor].dtype);
  if (local < 0 || !fit_tensors(S)) return 0;
  ir_stmt_t* def = ir_insert_stmt(f, l, s, IR_ST_STORE);
  if (!def) return 0;
  ir_stmt_t* st = &l->stmts[s + 1];
  ir_access_init(&def->target, local);
  def->value = st->value;
  ir_access_t acc;
  ir_access_init(&acc, local);
  S->reads[local]++;
  return (st->value = ir_ex_load(f, &acc)) != NULL;
}

/* Forwards statement s of loop k; returns 0 on OOM. A V with a checked
 * read is never forwarded: that would turn "read what the zero-fill left"
 * into "skip the reader". A V that is more than a load, constant or
 * variable goes into a local (a 0-d scalar private to the iteration) when
 * it has several readers, so that nothing is computed twice, or when the
 * store must stay (an output, or read elsewhere). */
static int forward_store(subst_t* S, ir_block_t* b, int k, int s) {
  ir_func_t* f = S->f;
  ir_loop_t* l = &b->loops[k];
  ir_stmt_t* st = &l->stmts[s];
  /* a bf16/f16 tensor holds the value rounded: forwarding V would skip that */
  if (st->kind != IR_ST_STORE || st->target.check_mask || f->tensors[st->target.tensor].role == IR_TENSOR_INPUT ||
      ir_dtype_is_half(f->tensors[st->target.tensor].dtype))
    return 1;
  if (!distinct_per_iteration(b, k, &st->target)) return 1;
  scan_t scan = {st->target.tensor, 0, NULL};
  ir_walk_expr_loads(st->value, note_read, &scan, k, st);
  if (scan.found) return 1;
  if (!set_value(S, st->value)) return 0;
  int oom = 0, readers = 0, t = st->target.tensor;
  /* the scans stop at the last load of t there is (reads[t]): in a block
   * of n statements, scanning to the end for each made n^2 steps */
  for (int j = s + 1; j < l->nstmts; j++) { /* count */
    readers += forward_into(S, &l->stmts[j].value, &st->target, st->value, 0, &oom);
    if (readers == S->reads[t] || clobbers(S, &l->stmts[j], st->value, t)) break;
  }
  if (readers == 0) return 1;
  /* the store stays when the tensor is an output or is read elsewhere */
  int keeps_store = f->tensors[t].role != IR_TENSOR_TEMP || S->reads[t] > readers;
  if (!trivial(st->value) &&
      (readers > 1 || keeps_store || expr_nodes_upto(st->value, FORWARD_MAX_NODES) > FORWARD_MAX_NODES)) {
    if (!into_local(S, l, s)) return 0;
    s++; /* now `t[I] = l`, whose value is trivial */
    if (!set_value(S, l->stmts[s].value)) return 0;
  }
  for (int j = s + 1, left = readers; j < l->nstmts && left > 0; j++) { /* replace */
    st = &l->stmts[s];
    left -= forward_into(S, &l->stmts[j].value, &st->target, st->value, 1, &oom);
    if (clobbers(S, &l->stmts[j], st->value, t)) break;
  }
  return !oom;
}

/* ---- scalar replacement ----
 * `l = 0; l = x[?(..)]; c += l * w`: the padded read stays checked and
 * skips its store, but out of memory. Reads at other depths of the same
 * block see other iterations, so they leave the temporary alone. */

typedef struct {
  int block, level;        /* -1: not seen yet */
  const ir_access_t* first;
  int bad;
} use_t;

typedef struct {
  ir_func_t* f;
  use_t* uses;
  int block;
  int* local_of;           /* tensor -> its local, or -1 (rewrite walk) */
} scalar_t;

static void note_use(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  scalar_t* c = ctx;
  use_t* u = &c->uses[acc->tensor];
  if (acc->check_mask || (is_write && stmt->kind != IR_ST_STORE)) u->bad = 1;
  if (u->block < 0) {
    u->block = c->block;
    u->level = level;
    u->first = acc;
    return;
  }
  if (u->block != c->block || u->level != level || !same_index(u->first, acc)) u->bad = 1;
}

static void to_local(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)is_write;
  (void)level;
  (void)stmt;
  scalar_t* c = ctx;
  int local = c->local_of[acc->tensor];
  if (local >= 0) ir_access_init(acc, local);
}

static uj_status_t scalar_replace(ir_func_t* f) {
  int n = f->ntensors;
  use_t* uses = malloc(((size_t)n + 1) * sizeof *uses);
  int* local_of = malloc(((size_t)n + 1) * sizeof *local_of);
  if (!uses || !local_of) {
    free(uses);
    free(local_of);
    return rt_error(UJ_ERR_OOM, "subst: out of memory allocating two tables of %d tensors (%zu bytes)", n,
                    ((size_t)n + 1) * (sizeof *uses + sizeof *local_of));
  }
  for (int t = 0; t < n; t++) uses[t] = (use_t){-1, -1, NULL, 0};
  scalar_t c = {f, uses, 0, local_of};
  for (c.block = 0; c.block < f->nblocks; c.block++) ir_walk_accesses(&f->blocks[c.block], note_use, &c);
  uj_status_t s = UJ_OK;
  for (int t = 0; t < n && s == UJ_OK; t++) {
    local_of[t] = -1;
    const ir_tensor_t* tt = &f->tensors[t];
    if (tt->role != IR_TENSOR_TEMP || tt->local || tt->noalloc || uses[t].block < 0 || uses[t].bad) continue;
    if (!distinct_per_iteration(&f->blocks[uses[t].block], uses[t].level, uses[t].first)) continue;
    if ((local_of[t] = ir_add_local(f, tt->dtype)) < 0)
      s = rt_error(UJ_ERR_OOM, "subst: out of memory adding a local to %d tensors (%zu bytes each)", f->ntensors,
                   sizeof(ir_tensor_t));
    else f->tensors[t].noalloc = 1;
  }
  for (int b = 0; b < f->nblocks && s == UJ_OK; b++) ir_walk_accesses(&f->blocks[b], to_local, &c);
  free(uses);
  free(local_of);
  return s;
}

uj_status_t ir_pass_subst(ir_func_t* f) {
  subst_t S = {.f = f};
  int ok = fit_tensors(&S);
  for (int b = 0; b < f->nblocks && ok; b++) ir_walk_accesses(&f->blocks[b], count_read, &S);
  for (int bi = 0; bi < f->nblocks && ok; bi++) {
    ir_block_t* b = &f->blocks[bi];
    for (int k = 0; k < b->nloops && ok; k++)
      for (int s = 0; s < b->loops[k].nstmts && ok; s++) ok = forward_store(&S, b, k, s);
  }
  free(S.reads);
  free(S.in_v);
  free(S.v_loads);
  if (!ok) return rt_error(UJ_ERR_OOM, "subst: out of memory recording the stores of %d blocks", f->nblocks);
  return scalar_replace(f);
}
