/* jit/c/c_reduce.h: the C engine's reduction loops in lanes (jit/c/c_reduce.c):
 * several partial results per carried variable, folded in a fixed order. */
#ifndef UJ_JIT_C_REDUCE_H
#define UJ_JIT_C_REDUCE_H

#include "../c_like.h"

/* Prints loop k of b in lanes, at indentation k (in place of the loop);
 * only for a loop ir_lanes_fit accepts. */
void jit_c_emit_lanes(jit_cx_t* E, const ir_block_t* b, int k);

#endif
