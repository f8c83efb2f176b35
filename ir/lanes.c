/* ir/lanes.c: which reduction loops may keep several partial results.
 *
 * A loop's accumulations into the carried variables of an outer loop may
 * go to several partial results ("lanes", one per iteration modulo their
 * count) folded afterwards, instead of to the variable itself, when
 * nothing else sees the variable in between: the loop is the innermost of
 * its block (so one pass of it sits between the variable's reset and its
 * readers), not the outermost (whose range the engines split across
 * threads), holds no carried variables of its own, and no statement in it
 * reads a carried variable (a partial result read inside the loop would
 * not be the interpreter's). The iterations themselves still run in their
 * order; only the accumulations are regrouped, which changes a float sum
 * or product by rounding alone (an engine's fold order is fixed, so its
 * result depends on the trip count only). The C engine
 * (jit/c/c_reduce.c) and the MIR engine (jit/mir/mir_emit.c) both ask here. */
#include "ir.h"

static int reads_carried(const ir_expr_t* e) {
  if (!e) return 0;
  if (e->kind == IR_EX_CARRIED) return 1;
  return reads_carried(e->a) || reads_carried(e->b) || reads_carried(e->c);
}

const ir_carried_t* ir_outer_carried(const ir_block_t* b, int k, int id) {
  for (int o = 0; o < k; o++)
    for (int c = 0; c < b->loops[o].ncarried; c++)
      if (b->loops[o].carried[c].id == id) return &b->loops[o].carried[c];
  return NULL;
}

int ir_lanes_fit(const ir_block_t* b, int k) {
  const ir_loop_t* l = &b->loops[k];
  if (k == 0 || k != b->nloops - 1 || l->ncarried) return 0;
  int accums = 0;
  for (int s = 0; s < l->nstmts; s++) {
    const ir_stmt_t* st = &l->stmts[s];
    if (reads_carried(st->value)) return 0;
    if (st->kind != IR_ST_ACCUM) continue;
    if (!ir_outer_carried(b, k, st->carried)) return 0;
    accums++;
  }
  return accums > 0;
}
