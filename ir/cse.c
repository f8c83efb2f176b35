/* ir/cse.c: one load per element per iteration.
 *
 * Algorithm: in each loop's statement list, a load T[I] without run-time
 * checks that appears more than once before the next statement writing T
 * is read once into a local (`l = T[I]`, inserted before the first
 * statement that reads it) and every occurrence in that window reads the
 * local instead. So a fused Adam step reads p, g, m and v once each, as
 * an engine must for the update to run at memory speed, and the
 * interpreter, the printer and every emitter see the same single read.
 *
 * Checked loads are left alone: moving one into its own statement would
 * change which statement an out-of-range read skips. Locals themselves
 * are registers already. Runs after subst. Invalidates deps. */
#include "ir.h"

static int same_load(const ir_access_t* a, const ir_access_t* b) {
  if (a->tensor != b->tensor || a->nidx != b->nidx || a->check_mask || b->check_mask) return 0;
  for (int k = 0; k < a->nidx; k++)
    if (!ir_ix_equal(a->idx[k], b->idx[k])) return 0;
  return 1;
}

/* Counts (local < 0) or replaces with loads of `local` the loads like acc. */
static int visit(ir_func_t* f, ir_expr_t* e, const ir_access_t* acc, int local) {
  if (!e) return 0;
  if (e->kind == IR_EX_LOAD && same_load(&e->access, acc)) {
    if (local >= 0) ir_access_init(&e->access, local);
    return 1;
  }
  return visit(f, e->a, acc, local) + visit(f, e->b, acc, local) + visit(f, e->c, acc, local);
}

static int writes(const ir_stmt_t* s, int tensor) { return s->kind != IR_ST_ACCUM && s->target.tensor == tensor; }

/* Finds the first load in e worth sharing from statement s on; returns it. */
static const ir_access_t* candidate(ir_func_t* f, ir_loop_t* l, int s, const ir_expr_t* e) {
  if (!e) return NULL;
  if (e->kind == IR_EX_LOAD && !e->access.check_mask && !f->tensors[e->access.tensor].local) {
    int count = 0;
    for (int j = s; j < l->nstmts; j++) {
      count += visit(f, l->stmts[j].value, &e->access, -1);
      if (writes(&l->stmts[j], e->access.tensor)) break;
    }
    if (count > 1) return &e->access;
  }
  const ir_access_t* r = candidate(f, l, s, e->a);
  if (!r) r = candidate(f, l, s, e->b);
  if (!r) r = candidate(f, l, s, e->c);
  return r;
}

static int share_loads(ir_func_t* f, ir_loop_t* l) {
  for (int s = 0; s < l->nstmts; s++) {
    const ir_access_t* found;
    while ((found = candidate(f, l, s, l->stmts[s].value)) != NULL) {
      ir_access_t acc = *found; /* copy: the statement list moves below */
      int local = ir_add_local(f, f->tensors[acc.tensor].dtype);
      if (local < 0) return 0;
      ir_stmt_t* def = ir_insert_stmt(f, l, s, IR_ST_STORE);
      ir_expr_t* v = def ? ir_ex_load(f, &acc) : NULL;
      if (!v) return 0;
      ir_access_init(&def->target, local);
      def->value = v;
      for (int j = s + 1; j < l->nstmts; j++) {
        visit(f, l->stmts[j].value, &acc, local);
        if (writes(&l->stmts[j], acc.tensor)) break;
      }
      s++; /* continue with the statement that had the loads */
    }
  }
  return 1;
}

uj_status_t ir_pass_cse(ir_func_t* f) {
  for (int b = 0; b < f->nblocks; b++)
    for (int k = 0; k < f->blocks[b].nloops; k++)
      if (!share_loads(f, &f->blocks[b].loops[k]))
        return rt_error(UJ_ERR_OOM, "cse: out of memory allocating the loads of block %d, loop %d (%d statements)", b, k,
                        f->blocks[b].loops[k].nstmts);
  return UJ_OK;
}
