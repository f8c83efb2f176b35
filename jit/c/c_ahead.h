/* jit/c/c_ahead.h: the C engine's flat elementwise loops in groups with
 * software prefetch ahead of every stream (jit/c/c_ahead.c). */
#ifndef UJ_JIT_C_AHEAD_H
#define UJ_JIT_C_AHEAD_H

#include "../c_like.h"

/* 1 when b's only loop has independent iterations and accesses some
 * tensor in memory at exactly [i]: the loop is printed in groups with
 * prefetch ahead, across into the next piece of a multi-tensor call. */
int jit_c_ahead_block(const ir_func_t* f, const ir_block_t* b);
/* The same for loop k of b (0 when k is not the block's loop). */
int jit_c_ahead_fits(const jit_cx_t* E, const ir_block_t* b, int k);

/* At the top of such a block's function: the next piece's elements
 * (uj_nx, JIT_NEXT_SLOT) and, when there is one, its data of each tensor
 * the loop streams (uj_n<t>, from buf[ntensors + t]). */
void jit_c_ahead_next_decls(jit_cx_t* E, const ir_block_t* b);

/* Prints loop k of b in groups with prefetch ahead, at indentation depth
 * (in place of the loop): from `from` (a C expression; NULL: on from the
 * variable uj_g already declared) to `end`, only for a loop
 * jit_c_ahead_fits accepts. The loop's statements are printed by
 * jit_cx_iteration with inner and inner_ctx. */
void jit_c_emit_ahead(jit_cx_t* E, const ir_block_t* b, int k, int depth, const char* from, const char* end,
                      jit_cx_loop_fn inner, void* inner_ctx);

/* After a group of `group` iterations from uj_g of b's only loop, at
 * indentation depth: the prefetch ahead of every tensor it streams but
 * skip (-1: none), when the loop runs on that far before `end`; else in
 * the next piece, when there is one. */
void jit_c_ahead_prefetch(jit_cx_t* E, const ir_block_t* b, int depth, int group, int skip, const char* end);

#endif
