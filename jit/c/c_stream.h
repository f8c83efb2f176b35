/* jit/c/c_stream.h: the C engine's streaming stores for outputs written once
 * and never read (jit/c/c_stream.c). */
#ifndef UJ_JIT_C_STREAM_H
#define UJ_JIT_C_STREAM_H

#include "../c_like.h"

/* Which outputs of f stream (ir_output_streamable), by tensor: the block
 * of their statement, -1 for those that do not. NULL on OOM. */
int* jit_c_stream_blocks(const ir_func_t* f);
/* At the top of block bi's function: for each output it streams, the
 * run-time test of its size against the threshold (uj_nt<t>). */
void jit_c_stream_tests(jit_cx_t* E, int bi);
/* At the end of block bi's function: the fence after streaming stores. */
void jit_c_stream_fence(jit_cx_t* E, int bi);
/* Prints loop k of b (its innermost, not in lanes) with its streamed
 * output's stores gathered into lines, at indentation k, and returns 1;
 * 0, printing nothing, when no statement of loop k stores a streamed output. */
int jit_c_stream_loop(jit_cx_t* E, const ir_block_t* b, int k);

#endif
