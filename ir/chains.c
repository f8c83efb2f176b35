/* ir/chains.c: which consecutive blocks may run chunk by chunk of their
 * outermost loop, so that what one chunk of rows touches stays in cache from
 * one block of the chain to the next (the CPU runner, jit/blocks.c; DESIGN
 * section 7, "A runner").
 *
 * Rule. Blocks s..e form a chain when
 * 1. each has loops, and the outermost loops' [start, end) are the same
 *    index trees, with no tensor load in them;
 * 2. for every tensor T that some block of the chain writes, there is one
 *    axis a such that every access to T in every block of the chain has as
 *    its index on axis a the block's own outermost loop variable, bare.
 * Then iterations of different rows touch disjoint elements of every
 * written tensor, so chunking and threads leave results the same, bit for
 * bit (why, above ir_block_chains). One greedy sweep over the blocks finds
 * the chains, each access seen once. */
#include <stdlib.h>

#include "ir.h"

enum { ALL_AXES = (1u << UJ_MAX_DIMS) - 1 };

typedef struct {
  const ir_func_t* f;
  int row_loop;          /* the outermost loop id of the block being walked */
  uint32_t* block_mask;  /* per tensor: axes naming the row in every access of this block */
  unsigned char* block_touched;
  unsigned char* block_written;
  int* touched_list;     /* the tensors this block touched, in order first touched */
  int ntouched;
} walk_t;

static void note_access(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)level;
  (void)stmt;
  walk_t* w = ctx;
  int t = acc->tensor;
  if (w->f->tensors[t].local) return;
  uint32_t axes = 0;
  for (int k = 0; k < acc->nidx && k < UJ_MAX_DIMS; k++)
    if (acc->idx[k]->kind == IR_IX_LOOP && acc->idx[k]->id == w->row_loop) axes |= 1u << k;
  if (!w->block_touched[t]) {
    w->block_touched[t] = 1;
    w->block_mask[t] = ALL_AXES;
    w->touched_list[w->ntouched++] = t;
  }
  w->block_mask[t] &= axes;
  if (is_write) w->block_written[t] = 1;
}

static int ix_has_load(const ir_ix_t* ix) {
  return ix && (ix->kind == IR_IX_LOAD || ix_has_load(ix->a) || ix_has_load(ix->b));
}

static int same_range(const ir_block_t* a, const ir_block_t* b) {
  return ir_ix_equal(a->loops[0].start, b->loops[0].start) && ir_ix_equal(a->loops[0].end, b->loops[0].end);
}

/* Why the rule keeps results. Unchunked, blocks b < c run every iteration
 * of b before any of c. Run in chunks [r0, r1), [r1, r2), ... with each
 * chunk going through b then c, the order changes only for pairs (b at
 * iteration i, c at iteration i') with i' in an earlier chunk than i: c(i')
 * now runs before b(i). With threads, each thread takes a range of rows
 * through the whole chain, so any iterations of different rows may also
 * run at the same time, in any order. The results are the same, bit for
 * bit, when iterations of different rows never conflict: no element written
 * by one is touched by the other.
 *
 * In condition 1, a range read from data the chain writes could change
 * between the blocks. In condition 2, the writes are statement targets and
 * scatter-add targets (a 0-d local lives in one iteration and is left out),
 * and the accesses are reads, writes and i32 loads inside index
 * expressions, checked or not. Then iteration i of any block of the chain
 * touches only elements of T whose index on axis a is i (a checked access
 * out of range touches nothing), so iterations of different rows, of the
 * same block or of two blocks, touch disjoint elements of every written
 * tensor and only read the others: they commute, and the order within one
 * iteration of one block (what decides rounding) is unchanged. Condition 2
 * also makes each block's outermost iterations independent
 * (ir_loop_independent at depth 0: no carried variable spans outermost
 * iterations, since they are reset on each one). Reads of tensors nobody in
 * the chain writes need nothing. An output written into the memory of an
 * input (ir_alias_safe) has both touched in one block only, so no other
 * block of the chain sees that memory. An index that reaches the row
 * through arithmetic (i + 1, i / 2) or a load does not count: such a chain
 * is not formed (conservative).
 *
 * The sweep: the open chain keeps, per tensor, whether it is written and
 * the mask of axes at which every access so far names the row bare. A
 * block joins when its ranges match and, for each tensor it touches, the
 * masks of the chain and the block still share an axis wherever the tensor
 * is written by either; tensors it does not touch keep what the chain
 * proved. Else it opens the next chain, alone when it fails condition 2 by
 * itself. */
uj_status_t ir_block_chains(const ir_func_t* f, int* length) {
  size_t n = (size_t)f->ntensors + 1;
  uint32_t* chain_mask = malloc(n * sizeof *chain_mask);
  uint32_t* block_mask = malloc(n * sizeof *block_mask);
  unsigned char* flags = calloc(4 * n, 1);
  int* touched_list = malloc(n * sizeof *touched_list);
  int* chain_list = malloc(n * sizeof *chain_list);
  if (!chain_mask || !block_mask || !flags || !touched_list || !chain_list) {
    free(chain_mask), free(block_mask), free(flags), free(touched_list), free(chain_list);
    return rt_error(UJ_ERR_OOM, "out of memory finding the chains of %d blocks over %d tensors (%zu bytes)",
                    f->nblocks, f->ntensors, n * (2 * sizeof(uint32_t) + 4 + 2 * sizeof(int)));
  }
  unsigned char *chain_touched = flags, *chain_written = flags + n;
  walk_t w = {f, 0, block_mask, flags + 2 * n, flags + 3 * n, touched_list, 0};
  int first = -1, nchain = 0; /* the open chain: blocks first.., its tensors chain_list[0..nchain) */
  for (int b = 0; b < f->nblocks; b++) {
    length[b] = 1;
    ir_block_t* blk = &f->blocks[b];
    int usable = blk->nloops > 0 && !ix_has_load(blk->loops[0].start) && !ix_has_load(blk->loops[0].end);
    int joins = 0, alone_ok = 0;
    if (usable) {
      w.row_loop = blk->loops[0].id;
      w.ntouched = 0;
      ir_walk_accesses(blk, note_access, &w);
      joins = first >= 0 && same_range(&f->blocks[first], blk);
      alone_ok = 1;
      for (int i = 0; i < w.ntouched; i++) {
        int t = touched_list[i];
        if (w.block_written[t] && !block_mask[t]) alone_ok = 0;
        uint32_t both = block_mask[t] & (chain_touched[t] ? chain_mask[t] : ALL_AXES);
        if ((w.block_written[t] || chain_written[t]) && !both) joins = 0;
      }
      joins = joins && alone_ok;
    }
    if (!joins) { /* close the open chain */
      for (int i = 0; i < nchain; i++) chain_touched[chain_list[i]] = chain_written[chain_list[i]] = 0;
      nchain = 0;
      first = usable && alone_ok ? b : -1;
    } else {
      length[first]++;
      length[b] = 0;
    }
    for (int i = 0; i < w.ntouched && first >= 0; i++) {
      int t = touched_list[i];
      if (!chain_touched[t]) {
        chain_touched[t] = 1;
        chain_mask[t] = ALL_AXES;
        chain_list[nchain++] = t;
      }
      chain_mask[t] &= block_mask[t];
      chain_written[t] |= w.block_written[t];
    }
    for (int i = 0; i < w.ntouched; i++) w.block_touched[touched_list[i]] = w.block_written[touched_list[i]] = 0;
    w.ntouched = 0;
  }
  free(chain_mask), free(block_mask), free(flags), free(touched_list), free(chain_list);
  return UJ_OK;
}
