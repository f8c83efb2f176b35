/* jit/c/c_ahead.h: the C engine's flat elementwise loops in groups with
 * software prefetch ahead of every stream (jit/c/c_ahead.c). */
#ifndef UJ_JIT_C_AHEAD_H
#define UJ_JIT_C_AHEAD_H

#include "../c_like.h"

/* 1 when loop k of b is a block's only loop, its iterations independent,
 * and it accesses some tensor in memory at exactly [i]. */
int jit_c_ahead_fits(const jit_cx_t* E, const ir_block_t* b, int k);

/* Prints loop k of b in groups with prefetch ahead, at indentation k (in
 * place of the loop); only for a loop jit_c_ahead_fits accepts. The loop's
 * statements are printed by jit_cx_iteration with inner and inner_ctx. */
void jit_c_emit_ahead(jit_cx_t* E, const ir_block_t* b, int k, jit_cx_loop_fn inner, void* inner_ctx);

#endif
