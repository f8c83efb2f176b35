/* ir/subst.c: substitution (store-to-load forwarding).
 *
 * Algorithm: for each store S `t[I] = V` in a loop's statement list, where
 * I is unchecked and names a distinct element per iteration of the
 * enclosing loops, V reads no checked element and does not read t, every
 * later statement of the same list that reads t at exactly I gets V in place
 * of that load, until a statement writes t or something V reads (a tensor
 * or a carried variable); then V would no longer be the stored value. When
 * V is more than a load, constant or variable and has several readers, or
 * the store must stay (an output), V goes into a local first (a 0-d
 * scalar private to the iteration, `l = V; t[I] = l`) and the readers read
 * the local, so nothing is computed twice. Afterwards dce drops
 * the stores to temporaries that nobody reads and marks them no-alloc: an
 * intermediate written once and read only in the same loop at the same
 * index disappears, and a chain of elementwise ops becomes one expression.
 *
 * Forwarding V with a checked read would turn "read what the zero-fill
 * left" into "skip the reader", so it is not done. Instead, scalar
 * replacement: a temporary whose every access (stores and loads) is in one
 * loop's statement list, at one unchecked index that names a distinct
 * element per iteration, lives only within an iteration, so it becomes a
 * local. That keeps a zero-fill followed by a checked gather (padding) out
 * of memory: `l = 0; l = x[?(..)]; c += l * w`. Reads at other depths of
 * the same block see other iterations and are left alone. Invalidates
 * deps. */
#include <stdlib.h>

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

typedef struct {
  int tensor;
  int hit;
} reads_t;

static void note_tensor(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)is_write;
  (void)level;
  (void)stmt;
  reads_t* r = ctx;
  if (acc->tensor == r->tensor) r->hit = 1;
}

static int expr_reads_tensor(ir_expr_t* e, int t) {
  reads_t r = {t, 0};
  ir_walk_expr_loads(e, note_tensor, &r, 0, NULL);
  return r.hit;
}

/* Whether statement w invalidates V (writes t or what V reads). */
static int clobbers(const ir_stmt_t* w, ir_expr_t* V, int t) {
  if (w->kind == IR_ST_ACCUM) return expr_any(V, reads_carried, &w->carried);
  return w->target.tensor == t || expr_reads_tensor(V, w->target.tensor);
}

static int same_index(const ir_access_t* a, const ir_access_t* b) {
  if (a->tensor != b->tensor || a->nidx != b->nidx || b->check_mask) return 0;
  for (int k = 0; k < a->nidx; k++)
    if (!ir_ix_equal(a->idx[k], b->idx[k])) return 0;
  return 1;
}

/* Counts (replace == NULL) or replaces the loads of target in e. */
static int forward_into(ir_func_t* f, ir_expr_t** slot, const ir_access_t* target, const ir_expr_t* V, int replace,
                        int* oom) {
  ir_expr_t* e = *slot;
  if (!e) return 0;
  if (e->kind == IR_EX_LOAD && same_index(target, &e->access)) {
    if (replace) {
      ir_expr_t* c = ir_expr_copy(f, V);
      if (!c) *oom = 1;
      else *slot = c;
    }
    return 1;
  }
  return forward_into(f, &e->a, target, V, replace, oom) + forward_into(f, &e->b, target, V, replace, oom) +
         forward_into(f, &e->c, target, V, replace, oom);
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

static void count_read(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)level;
  (void)stmt;
  reads_t* r = ctx;
  if (!is_write && acc->tensor == r->tensor) r->hit++;
}

static int count_reads(ir_func_t* f, int t) {
  reads_t r = {t, 0};
  for (int b = 0; b < f->nblocks; b++) ir_walk_accesses(&f->blocks[b], count_read, &r);
  return r.hit;
}

/* Rewrites statement s `t[I] = V` into `l = V; t[I] = l` with a new local. */
static int into_local(ir_func_t* f, ir_loop_t* l, int s) {
  int local = ir_add_local(f, f->tensors[l->stmts[s].target.tensor].dtype);
  if (local < 0) return 0;
  ir_stmt_t* def = ir_insert_stmt(f, l, s, IR_ST_STORE);
  if (!def) return 0;
  ir_stmt_t* S = &l->stmts[s + 1];
  ir_access_init(&def->target, local);
  def->value = S->value;
  ir_access_t acc;
  ir_access_init(&acc, local);
  return (S->value = ir_ex_load(f, &acc)) != NULL;
}

/* Forwards statement s of loop k; returns 0 on OOM. */
static int forward_store(ir_func_t* f, ir_block_t* b, int k, int s) {
  ir_loop_t* l = &b->loops[k];
  ir_stmt_t* S = &l->stmts[s];
  if (S->kind != IR_ST_STORE || S->target.check_mask || f->tensors[S->target.tensor].role == IR_TENSOR_INPUT)
    return 1;
  if (!distinct_per_iteration(b, k, &S->target)) return 1;
  scan_t scan = {S->target.tensor, 0, NULL};
  ir_walk_expr_loads(S->value, note_read, &scan, k, S);
  if (scan.found) return 1;
  int oom = 0, readers = 0;
  for (int j = s + 1; j < l->nstmts; j++) { /* count */
    readers += forward_into(f, &l->stmts[j].value, &S->target, S->value, 0, &oom);
    if (clobbers(&l->stmts[j], S->value, S->target.tensor)) break;
  }
  if (readers == 0) return 1;
  /* the store stays when the tensor is an output or is read elsewhere */
  int keeps_store = f->tensors[S->target.tensor].role != IR_TENSOR_TEMP || count_reads(f, S->target.tensor) > readers;
  if (!trivial(S->value) && (readers > 1 || keeps_store)) {
    if (!into_local(f, l, s)) return 0;
    s++; /* now `t[I] = l`, whose value is trivial */
  }
  for (int j = s + 1; j < l->nstmts; j++) { /* replace */
    S = &l->stmts[s];
    forward_into(f, &l->stmts[j].value, &S->target, S->value, 1, &oom);
    if (clobbers(&l->stmts[j], S->value, S->target.tensor)) break;
  }
  return !oom;
}

/* ---- scalar replacement ---- */

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
    return rt_error(UJ_ERR_OOM, "subst: out of memory");
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
    if ((local_of[t] = ir_add_local(f, tt->dtype)) < 0) s = rt_error(UJ_ERR_OOM, "subst: out of memory");
    else f->tensors[t].noalloc = 1;
  }
  for (int b = 0; b < f->nblocks && s == UJ_OK; b++) ir_walk_accesses(&f->blocks[b], to_local, &c);
  free(uses);
  free(local_of);
  return s;
}

uj_status_t ir_pass_subst(ir_func_t* f) {
  for (int bi = 0; bi < f->nblocks; bi++) {
    ir_block_t* b = &f->blocks[bi];
    for (int k = 0; k < b->nloops; k++)
      for (int s = 0; s < b->loops[k].nstmts; s++)
        if (!forward_store(f, b, k, s)) return rt_error(UJ_ERR_OOM, "subst: out of memory");
  }
  return scalar_replace(f);
}
