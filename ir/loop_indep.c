/* ir/loop_indep.c: whether a loop's iterations are independent, so that an
 * engine may run them in parallel (the C and MIR runner's threads over a
 * block's outermost loop, the CUDA engine's threads over a loop nest,
 * vectorizing hints for the innermost loop).
 *
 * Algorithm: two conditions, both conservative.
 * 1. No statement at or inside loop k accumulates into a carried variable
 *    declared outside k: such a sum runs through every iteration in order.
 * 2. Every tensor the block writes (non-local, not exempt) is touched, by
 *    every access of the block, with loop k's variable as the plain index
 *    of one axis, the same axis for every access of that tensor: then
 *    different iterations touch disjoint elements. An index that depends
 *    on k only through arithmetic (i * 2, i + 1) fails it.
 * Condition 2 alone (ir_loop_accesses_disjoint) serves a reduction in lanes
 * (jit/c/c_reduce.c): the iterations of a group then share nothing else. */
#include <stdint.h>
#include <stdlib.h>

#include "ir.h"

typedef struct {
  const ir_func_t* f;
  int loop_id;
  int ok;
  uint64_t* axes; /* [tensor]: 0 not written; else the axes still holding loop k's variable in every access */
  const unsigned char* exempt;
  int from_level; /* accesses of statements in loops shallower than this are left out */
} indep_t;

static void note_written(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)stmt;
  indep_t* d = ctx;
  if (is_write && level >= d->from_level) d->axes[acc->tensor] = ~(uint64_t)0;
}

/* Keeps, per written tensor (marked by note_written), the axes that hold
 * loop k's variable in every access seen so far. The same axis for every
 * access, not one per access: t[i, j] and t[j, i] under loop i both hold i,
 * yet iteration 0 writes t[0, 1] and iteration 1 reaches it as t[j, i]. */
static void check_distinct(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)is_write;
  (void)stmt;
  indep_t* d = ctx;
  if (level < d->from_level || !d->axes[acc->tensor] || d->f->tensors[acc->tensor].local) return;
  if (d->exempt && d->exempt[acc->tensor]) return;
  uint64_t here = 0;
  for (int k = 0; k < acc->nidx && k < 64; k++)
    if (acc->idx[k]->kind == IR_IX_LOOP && acc->idx[k]->id == d->loop_id) here |= (uint64_t)1 << k;
  d->axes[acc->tensor] &= here;
  if (!d->axes[acc->tensor]) d->ok = 0;
}

/* Condition 2 over the accesses of statements at depth from_level or
 * deeper: 0 takes every access of the block (the whole block is run by
 * whoever runs loop k's iterations apart), k only those inside loop k
 * (the iterations of one pass of it, which is all the lane loop of
 * jit/c/c_reduce.c runs side by side). */
static int disjoint(const ir_func_t* f, const ir_block_t* b, int k, const unsigned char* exempt, int from_level) {
  uint64_t* axes = calloc((size_t)f->ntensors + 1, sizeof *axes);
  if (!axes) return 0;
  indep_t d = {f, b->loops[k].id, 1, axes, exempt, from_level};
  ir_walk_accesses((ir_block_t*)b, note_written, &d);
  ir_walk_accesses((ir_block_t*)b, check_distinct, &d);
  free(axes);
  return d.ok;
}

int ir_loop_independent(const ir_func_t* f, const ir_block_t* b, int k, const unsigned char* exempt) {
  for (int j = k; j < b->nloops; j++)
    for (int s = 0; s < b->loops[j].nstmts; s++) {
      const ir_stmt_t* st = &b->loops[j].stmts[s];
      if (st->kind != IR_ST_ACCUM) continue;
      for (int o = 0; o < k; o++)
        for (int c = 0; c < b->loops[o].ncarried; c++)
          if (b->loops[o].carried[c].id == st->carried) return 0;
    }
  return disjoint(f, b, k, exempt, 0);
}

int ir_loop_accesses_disjoint(const ir_func_t* f, const ir_block_t* b, int k, const unsigned char* exempt) {
  return disjoint(f, b, k, exempt, k);
}
