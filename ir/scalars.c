/* ir/scalars.c: scalar inlining.
 *
 * Algorithm: a 0-d temporary written once, by a block whose loops all run
 * once, from an expression that reads only 0-d inputs and constants (such
 * as Adam's 1 - b1), is loop-invariant: every load of it, in any later
 * block, is replaced by a copy of that expression, and dce removes the
 * block. Processing blocks in order lets chains of such scalars collapse.
 * Without this, the scalar's own one-iteration block would sit between
 * the elementwise blocks, whose loops it can never pair with, and keep an
 * otherwise fusable update in two blocks. Engines hoist the repeated
 * scalar arithmetic out of the loop.
 *
 * Inputs are never written, so the copied expression reads the same values
 * wherever it lands. Runs before fuse. Invalidates deps. */
#include "ir.h"

static int single_iteration(const ir_block_t* b) {
  for (int k = 0; k < b->nloops; k++) {
    const ir_loop_t* l = &b->loops[k];
    if (l->start->kind != IR_IX_CONST || l->end->kind != IR_IX_CONST || l->end->value - l->start->value != 1) return 0;
  }
  return 1;
}

int ir_expr_scalar(const ir_func_t* f, const ir_expr_t* e, int float_ops_only) {
  if (!e) return 1;
  switch (e->kind) {
    case IR_EX_CONST: return 1;
    case IR_EX_LOAD: return e->access.nidx == 0 && f->tensors[e->access.tensor].role == IR_TENSOR_INPUT;
    case IR_EX_CARRIED:
    case IR_EX_INDEX: return 0;
    default:
      return (!float_ops_only || e->dtype == UJ_F32 || e->dtype == UJ_F64) &&
             ir_expr_scalar(f, e->a, float_ops_only) && ir_expr_scalar(f, e->b, float_ops_only) &&
             ir_expr_scalar(f, e->c, float_ops_only);
  }
}

typedef struct {
  int tensor;
  int writes;
} writes_t;

static void count_writes(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)level;
  (void)stmt;
  writes_t* w = ctx;
  if (is_write && acc->tensor == w->tensor) w->writes++;
}

static int replace(ir_func_t* f, ir_expr_t** slot, int t, const ir_expr_t* v) {
  ir_expr_t* e = *slot;
  if (!e) return 1;
  if (e->kind == IR_EX_LOAD && e->access.tensor == t) {
    ir_expr_t* c = ir_expr_copy(f, v);
    if (!c) return 0;
    *slot = c;
    return 1;
  }
  return replace(f, &e->a, t, v) && replace(f, &e->b, t, v) && replace(f, &e->c, t, v);
}

uj_status_t ir_pass_scalars(ir_func_t* f) {
  for (int bi = 0; bi < f->nblocks; bi++) {
    ir_block_t* b = &f->blocks[bi];
    if (!single_iteration(b)) continue;
    for (int k = 0; k < b->nloops; k++)
      for (int s = 0; s < b->loops[k].nstmts; s++) {
        const ir_stmt_t* st = &b->loops[k].stmts[s];
        int t = st->target.tensor;
        if (st->kind != IR_ST_STORE || st->target.nidx != 0 || f->tensors[t].role != IR_TENSOR_TEMP ||
            !ir_expr_scalar(f, st->value, 0))
          continue;
        writes_t w = {t, 0};
        for (int j = 0; j < f->nblocks; j++) ir_walk_accesses(&f->blocks[j], count_writes, &w);
        if (w.writes != 1) continue;
        for (int j = bi + 1; j < f->nblocks; j++)
          for (int kk = 0; kk < f->blocks[j].nloops; kk++)
            for (int ss = 0; ss < f->blocks[j].loops[kk].nstmts; ss++)
              if (!replace(f, &f->blocks[j].loops[kk].stmts[ss].value, t, st->value))
                return rt_error(UJ_ERR_OOM, "scalars: out of memory copying an expression (a few hundred bytes)");
      }
  }
  return UJ_OK;
}
