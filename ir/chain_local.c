/* ir/chain_local.c: temporaries that live within one row of a chain, so
 * that the CPU runner (jit/blocks.c), which takes a chain (ir/chains.c) a
 * chunk of rows at a time through every block, can give them a few rows of
 * scratch per thread instead of memory as large as the whole tensor.
 *
 * The rule, for a temporary T (not a local, not no-alloc): every access to
 * T lies in the blocks of one chain of ir_block_chains, at the block's own
 * outermost loop variable, bare, on axis 0; one covering store
 * (ir_store_covers) in a block A writes T; every read lies in a later block
 * of the chain. Then every read sees what A stored in the same row and
 * chunk, whatever memory holds the other rows, and threads' rows are
 * disjoint (ir/chains.c). Where the chain does not run in chunks
 * (chain_bytes 0, a chain longer than the runner takes at once, another
 * engine, the interpreter), T gets full-size memory as any temporary does. */
#include <stdlib.h>

#include "ir.h"

typedef struct {
  int T, row_id, block;
  int touches;            /* accesses to T seen so far */
  int writes, bad;        /* bad: an access not at the row on axis 0, or a write not a target */
  int write_block;
  const ir_stmt_t* write_stmt;
  int read_not_after;     /* a read in a block not after the write's */
} walk_t;

static void note_access(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)level;
  walk_t* w = ctx;
  if (acc->tensor != w->T) return;
  w->touches++;
  if (acc->nidx < 1 || acc->idx[0]->kind != IR_IX_LOOP || acc->idx[0]->id != w->row_id) w->bad = 1;
  if (is_write) {
    if (w->writes++ == 0) w->write_block = w->block, w->write_stmt = stmt;
    if (acc != &stmt->target) w->bad = 1;
    return;
  }
  if (!w->writes || w->write_block >= w->block) w->read_not_after = 1;
}

/* Row i of T touched only at row i means a chunk needs only its own rows:
 * once a chunk is done no one reads them again. The covering store writes
 * each row whole before anything else in that row reads it. */
int ir_temp_chain_local(const ir_func_t* f, int T, const int* length) {
  const ir_tensor_t* tt = &f->tensors[T];
  if (tt->role != IR_TENSOR_TEMP || tt->local || tt->noalloc || tt->ndim < 1) return 0;
  walk_t w = {T, -1, -1, 0, 0, 0, -1, NULL, 0};
  int chain_first = -1, first = 0;
  for (int b = 0; b < f->nblocks; b++) {
    if (length[b]) first = b;
    const ir_block_t* blk = &f->blocks[b];
    int before = w.touches;
    w.block = b;
    w.row_id = blk->nloops ? blk->loops[0].id : -1; /* no loops: any access is not at a row */
    ir_walk_accesses((ir_block_t*)blk, note_access, &w);
    if (w.touches == before) continue;
    if (chain_first < 0) chain_first = first;
    if (first != chain_first || b >= chain_first + length[chain_first]) return 0;
  }
  if (w.bad || w.read_not_after || w.writes != 1 || w.touches < 2) return 0;
  return ir_store_covers(f, &f->blocks[w.write_block], w.write_stmt);
}

uj_status_t ir_pass_chain_local(ir_func_t* f) {
  int* length = malloc(((size_t)f->nblocks + 1) * sizeof *length);
  if (!length)
    return rt_error(UJ_ERR_OOM, "chain_local: out of memory over %d blocks", f->nblocks);
  uj_status_t s = ir_block_chains(f, length);
  for (int t = 0; t < f->ntensors && s == UJ_OK; t++) f->tensors[t].chain_local = ir_temp_chain_local(f, t, length);
  free(length);
  return s;
}
