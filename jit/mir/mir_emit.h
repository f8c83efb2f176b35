/* jit/mir/mir_emit.h: the MIR lowering's interface, shared by jit/mir/mir.c (the
 * engine) and jit/mir/mir_emit.c (IR -> MIR instructions). Only built with MIR. */
#ifndef UJ_JIT_MIR_EMIT_H
#define UJ_JIT_MIR_EMIT_H

#ifdef UJ_HAVE_MIR
#include <mir.h>

#include "../jit.h"

/* What jit_mir_lower makes of a block that has loops: one function b<N>
 * with the jit_block_fn signature, or, for a block run in strips
 * (jit/mir/mir_batch.c), its two halves a<N> and b<N> with the jit_strip_fn
 * signature and its roots' count and types. */
typedef struct {
  MIR_item_t fn, args; /* b<N>; a<N> or NULL */
  int nroots;
  unsigned char f64[JIT_STRIP_MAX_ROOTS];
} jit_mir_block_t;

/* Builds module `module_name` in ctx, filling blocks[b] for each block that
 * has loops (all zero for one without). params NULL: $params are read from the
 * params argument; else folded in as immediates. The module is finished
 * but not loaded. MIR errors go to the context's error function (the caller
 * installs one that does not return). Returns NULL on out of memory, before
 * anything is added to ctx. */
MIR_module_t jit_mir_lower(MIR_context_t ctx, const ir_func_t* f, const int64_t* params, const char* module_name,
                           jit_mir_block_t* blocks);

/* The allocator of the engine's MIR contexts (jit/mir/mir_alloc.c): one pool
 * per context, given to MIR_init2 and freed after MIR_finish. NULL on out
 * of memory. */
typedef struct jit_mir_pool jit_mir_pool_t;
jit_mir_pool_t* jit_mir_pool_new(void);
MIR_alloc_t jit_mir_pool_alloc(jit_mir_pool_t* pool);
void jit_mir_pool_free(jit_mir_pool_t* pool);
/* The bytes the pool holds from the C library (in use by MIR, or kept for
 * reuse), block headers included: what jit_mir_pool_free gives back. */
size_t jit_mir_pool_held(const jit_mir_pool_t* pool);

/* The address of a libm function the lowering imports, or NULL. */
void* jit_mir_resolve(const char* name);
#endif

#endif
