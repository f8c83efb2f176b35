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
 * left" into "skip the reader", so it is not done. Reads at other depths of
 * the same block see other iterations and are left alone. Invalidates
 * deps. */
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
  int keeps_store = f->tensors[S->target.tensor].role != IR_TENSOR_TEMP;
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

uj_status_t ir_pass_subst(ir_func_t* f) {
  for (int bi = 0; bi < f->nblocks; bi++) {
    ir_block_t* b = &f->blocks[bi];
    for (int k = 0; k < b->nloops; k++)
      for (int s = 0; s < b->loops[k].nstmts; s++)
        if (!forward_store(f, b, k, s)) return rt_error(UJ_ERR_OOM, "subst: out of memory");
  }
  return UJ_OK;
}
