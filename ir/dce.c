/* ir/dce.c: dead code elimination by liveness from the outputs.
 *
 * Algorithm: walk the blocks backwards with the set of live tensors, which
 * starts as the outputs. In each block, a store or scatter-add to a tensor
 * that is not live is dropped; then, repeatedly until nothing changes, an
 * accumulation into a carried variable that no remaining statement reads is
 * dropped, and so is the variable. Innermost loops left with no statements
 * and no carried variables are cut from the chain, and a block with no
 * statements at all is removed. What the remaining statements read becomes
 * live. Writes never kill liveness (a later write may be partial, as a
 * gather after its zero-fill is). Finally every temporary that no block
 * touches is marked no-alloc.
 *
 * Assumes the blocks run in order (no reordering here). Invalidates deps. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static int expr_reads_carried(const ir_expr_t* e, int id) {
  if (!e) return 0;
  if (e->kind == IR_EX_CARRIED && e->carried == id) return 1;
  return expr_reads_carried(e->a, id) || expr_reads_carried(e->b, id) || expr_reads_carried(e->c, id);
}

static int carried_is_read(const ir_block_t* b, int id) {
  for (int k = 0; k < b->nloops; k++)
    for (int s = 0; s < b->loops[k].nstmts; s++)
      if (expr_reads_carried(b->loops[k].stmts[s].value, id)) return 1;
  return 0;
}

static void mark_read(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt);

/* Drops dead statements and carried variables; returns the statement count.
 * A tensor read by a remaining statement of the block itself stays live
 * (conservatively, whether the read comes before or after the store), so
 * the pruning repeats until nothing more goes. On return *reads_known says
 * whether local holds live plus everything the remaining statements read
 * (it does unless an accumulation was dropped after the last walk), which
 * saves the caller a walk of its own. */
static int prune_block(ir_block_t* b, const unsigned char* live, unsigned char* local, int ntensors,
                       int* reads_known) {
  int total = 0;
  *reads_known = 1;
  for (int removed = 1; removed;) {
    removed = 0;
    memcpy(local, live, (size_t)ntensors);
    ir_walk_accesses(b, mark_read, local);
    for (int k = 0; k < b->nloops; k++) {
      ir_loop_t* l = &b->loops[k];
      int w = 0;
      for (int s = 0; s < l->nstmts; s++) {
        ir_stmt_t* st = &l->stmts[s];
        if (st->kind != IR_ST_ACCUM && !local[st->target.tensor]) {
          removed = 1;
          continue;
        }
        l->stmts[w++] = *st;
      }
      l->nstmts = w;
    }
  }
  for (int changed = 1; changed;) {
    changed = 0;
    for (int k = 0; k < b->nloops; k++) {
      ir_loop_t* l = &b->loops[k];
      int w = 0;
      for (int c = 0; c < l->ncarried; c++) {
        if (carried_is_read(b, l->carried[c].id)) {
          l->carried[w++] = l->carried[c];
          continue;
        }
        changed = 1;
        *reads_known = 0;
        for (int j = 0; j < b->nloops; j++) { /* its accumulations go with it */
          ir_loop_t* lj = &b->loops[j];
          int ws = 0;
          for (int s = 0; s < lj->nstmts; s++)
            if (!(lj->stmts[s].kind == IR_ST_ACCUM && lj->stmts[s].carried == l->carried[c].id))
              lj->stmts[ws++] = lj->stmts[s];
          lj->nstmts = ws;
        }
      }
      l->ncarried = w;
    }
  }
  while (b->nloops > 0 && b->loops[b->nloops - 1].nstmts == 0 && b->loops[b->nloops - 1].ncarried == 0) b->nloops--;
  for (int k = 0; k < b->nloops; k++) total += b->loops[k].nstmts;
  return total;
}

static void mark_read(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)level;
  (void)stmt;
  if (!is_write) ((unsigned char*)ctx)[acc->tensor] = 1;
}

static void mark_touched(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)is_write;
  (void)level;
  (void)stmt;
  ((unsigned char*)ctx)[acc->tensor] = 1;
}

uj_status_t ir_pass_dce(ir_func_t* f) {
  unsigned char* live = calloc((size_t)f->ntensors + 1, 1);
  unsigned char* local = calloc((size_t)f->ntensors + 1, 1);
  if (!live || !local) {
    free(live);
    free(local);
    return rt_error(UJ_ERR_OOM, "dce: out of memory allocating two tables of %d tensors (%zu bytes)", f->ntensors,
                    2 * ((size_t)f->ntensors + 1));
  }
  for (int t = 0; t < f->ntensors; t++) live[t] = f->tensors[t].role == IR_TENSOR_OUTPUT;
  for (int b = f->nblocks - 1; b >= 0; b--) {
    int reads_known;
    if (prune_block(&f->blocks[b], live, local, f->ntensors, &reads_known) == 0) {
      memmove(&f->blocks[b], &f->blocks[b + 1], (size_t)(f->nblocks - b - 1) * sizeof *f->blocks);
      f->nblocks--;
      continue;
    }
    if (reads_known) memcpy(live, local, (size_t)f->ntensors);
    else ir_walk_accesses(&f->blocks[b], mark_read, live);
  }
  memset(live, 0, (size_t)f->ntensors);
  for (int b = 0; b < f->nblocks; b++) ir_walk_accesses(&f->blocks[b], mark_touched, live);
  for (int t = 0; t < f->ntensors; t++)
    if (f->tensors[t].role == IR_TENSOR_TEMP && !live[t]) f->tensors[t].noalloc = 1;
  free(live);
  free(local);
  return UJ_OK;
}
