/* ir/semantics.c: the parts of the loop IR's meaning that every target
 * states alike, written once so that the interpreter (ir/interp.c), which
 * runs them, and the emitters (jit/c_like.c, jit/c/c_emit.c, c_reduce.c,
 * jit/cuda/cuda_emit.c, jit/mir/mir_emit.c), which print them, cannot drift
 * apart: reduction identities and kinds; the loop-nest walk of one
 * iteration; which operations are transcendental calls (the op table's,
 * ir/ops.c), whose cost the passes weigh against memory; the range-check
 * walk; the covering store. Each walk says its order below.
 *
 * How each target spells a value, a loop or a comparison stays with it. */
#include <math.h>

#include "ir.h"

double ir_reduce_identity(uj_reduce_op_t op, uj_dtype_t dtype) {
  int fl = dtype != UJ_I32;
  switch (op) {
    case UJ_REDUCE_SUM:
    case UJ_REDUCE_MEAN: return 0.0;
    case UJ_REDUCE_PROD: return 1.0;
    case UJ_REDUCE_MAX:
    case UJ_REDUCE_ARGMAX: return fl ? -INFINITY : (double)INT32_MIN;
    case UJ_REDUCE_MIN:
    case UJ_REDUCE_ARGMIN: return fl ? INFINITY : (double)INT32_MAX;
  }
  return 0.0;
}

int ir_reduce_is_arg(uj_reduce_op_t op) { return op == UJ_REDUCE_ARGMAX || op == UJ_REDUCE_ARGMIN; }

int ir_reduce_is_arithmetic(uj_reduce_op_t op) {
  return op == UJ_REDUCE_SUM || op == UJ_REDUCE_MEAN || op == UJ_REDUCE_PROD;
}

int ir_reduce_keeps_greater(uj_reduce_op_t op) { return op == UJ_REDUCE_MAX || op == UJ_REDUCE_ARGMAX; }

int ir_expr_op_is_transcendental(const ir_expr_t* e) {
  if (e->kind == IR_EX_BINARY) return ir_binary_is_transcendental((uj_binary_op_t)e->op);
  return e->kind == IR_EX_UNARY && ir_unary_is_transcendental((uj_unary_op_t)e->op);
}

/* ---- the loop-nest walk ----
 * One iteration of loop k resets the loop's carried variables, runs the
 * loops inside it, then the loop's statements, in that order. */

void ir_walk_iteration(const ir_block_t* b, int k, const ir_iteration_visitor_t* v, void* ctx) {
  const ir_loop_t* l = &b->loops[k];
  for (int c = 0; c < l->ncarried; c++) v->reset(ctx, &l->carried[c], k);
  if (v->locals) v->locals(ctx, l, k);
  if (k + 1 < b->nloops) v->inner(ctx, b, k + 1);
  for (int s = 0; s < l->nstmts; s++) v->stmt(ctx, &l->stmts[s], k);
}

/* ---- the range-check walk ----
 * The axes that guard a statement: the run-time checked ones of everything
 * it reads and writes, in the order they must be tested. */

int ir_stmt_has_checks(const ir_stmt_t* s) {
  return ir_expr_has_checks(s->value) || ir_ix_has_checks(s->arg_index) ||
         (s->kind != IR_ST_ACCUM && ir_access_has_checks(&s->target));
}

static void checks_ix(const ir_ix_t* ix, ir_check_fn fn, void* ctx);

/* The accesses inside the index trees first (an i32 read used as an index
 * must be in range before its value means anything), then the access's
 * own checked axes. */
static void checks_access(const ir_access_t* acc, ir_check_fn fn, void* ctx) {
  for (int k = 0; k < acc->nidx; k++) checks_ix(acc->idx[k], fn, ctx);
  for (int k = 0; k < acc->nidx; k++)
    if (acc->check_mask & (1u << k)) fn(ctx, acc, k);
}

static void checks_ix(const ir_ix_t* ix, ir_check_fn fn, void* ctx) {
  if (!ix) return;
  if (ix->kind == IR_IX_LOAD) {
    checks_access(ix->load, fn, ctx);
    return;
  }
  checks_ix(ix->a, fn, ctx);
  checks_ix(ix->b, fn, ctx);
}

static void checks_expr(const ir_expr_t* e, ir_check_fn fn, void* ctx) {
  if (!e) return;
  if (e->kind == IR_EX_LOAD) checks_access(&e->access, fn, ctx);
  checks_ix(e->ix, fn, ctx);
  checks_expr(e->a, fn, ctx);
  checks_expr(e->b, fn, ctx);
  checks_expr(e->c, fn, ctx);
}

void ir_walk_checks(const ir_stmt_t* s, ir_check_fn fn, void* ctx) {
  checks_expr(s->value, fn, ctx);
  checks_ix(s->arg_index, fn, ctx);
  if (s->kind != IR_ST_ACCUM) checks_access(&s->target, fn, ctx);
}

/* The loop of b with this id, or NULL. */
static const ir_loop_t* loop_of(const ir_block_t* b, int id) {
  for (int m = 0; m < b->nloops; m++)
    if (b->loops[m].id == id) return &b->loops[m];
  return NULL;
}

/* A covering store, the shape into_output, recompute, stream and
 * chain_local all ask for: stated once here. A plain unchecked store whose
 * every index is a distinct loop of its block over the whole axis. */
int ir_store_covers(const ir_func_t* f, const ir_block_t* b, const ir_stmt_t* s) {
  const ir_access_t* target = &s->target;
  const ir_tensor_t* t = &f->tensors[target->tensor];
  if (s->kind != IR_ST_STORE || ir_stmt_has_checks(s) || target->nidx != t->ndim) return 0;
  for (int k = 0; k < target->nidx; k++) {
    const ir_ix_t* ix = target->idx[k];
    if (ix->kind != IR_IX_LOOP) return 0;
    for (int j = 0; j < k; j++)
      if (target->idx[j]->id == ix->id) return 0;
    const ir_loop_t* l = loop_of(b, ix->id);
    if (!l || l->start->kind != IR_IX_CONST || l->start->value != 0 || !ir_ix_equal(l->end, t->dims[k])) return 0;
  }
  return 1;
}
