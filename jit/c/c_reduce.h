/* jit/c/c_reduce.h: the C engine's reduction loops in lanes (jit/c/c_reduce.c):
 * several partial results per carried variable, folded in a fixed order. */
#ifndef UJ_JIT_C_REDUCE_H
#define UJ_JIT_C_REDUCE_H

#include "../c_like.h"

/* Prints loop k of b in lanes, at indentation k (in place of the loop);
 * only for a loop ir_lanes_fit accepts. */
void jit_c_emit_lanes(jit_cx_t* E, const ir_block_t* b, int k);

/* By tensor (calloc'ed, ntensors + 1 entries; NULL when out of memory): 1
 * when loop k (> 0) of b reads it at [row, column] (loop 0's and loop k's
 * variables, bare, unchecked, not local or chain-local), 2 when it writes
 * it there (3 both). */
unsigned char* jit_c_row_tensors(const ir_func_t* f, const ir_block_t* b, int k);

/* After a group of `group` columns from uj_g of b's innermost loop, at
 * indentation depth: each tensor of mode prefetched (to write where mode
 * has 2) in the row one chunk further on, the lines the group's columns
 * cover. */
void jit_c_prefetch_rows(jit_cx_t* E, const ir_block_t* b, int depth, int group, const unsigned char* mode);

#endif
