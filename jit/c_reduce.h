/* jit/c_reduce.h: the C engine's reduction loops in lanes (jit/c_reduce.c):
 * several partial results per carried variable, folded in a fixed order. */
#ifndef UJ_JIT_C_REDUCE_H
#define UJ_JIT_C_REDUCE_H

#include "c_like.h"

/* 1 when loop k of b is printed in lanes: the innermost loop (not the
 * outermost), with no carried variables of its own, accumulating into
 * carried variables of outer loops and reading none. */
int jit_c_lanes_fit(const ir_block_t* b, int k);
/* Prints loop k of b in lanes, at indentation k (in place of the loop). */
void jit_c_emit_lanes(jit_cx_t* E, const ir_block_t* b, int k);

#endif
