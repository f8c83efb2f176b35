/* jit/mir_emit.h: the MIR lowering's interface, shared by jit/mir.c (the
 * engine) and jit/mir_emit.c (IR -> MIR instructions). Only built with MIR. */
#ifndef UJ_JIT_MIR_EMIT_H
#define UJ_JIT_MIR_EMIT_H

#ifdef UJ_HAVE_MIR
#include <mir.h>

#include "jit.h"

/* Builds module `module_name` in ctx: one function per block that has loops,
 * named b<N>, with the jit_block_fn signature; funcs[b] receives its item
 * (NULL for a block without loops). params NULL: $params are read from the
 * params argument; else folded in as immediates. The module is finished
 * but not loaded. MIR errors go to the context's error function (the caller
 * installs one that does not return). Returns NULL on out of memory, before
 * anything is added to ctx. */
MIR_module_t jit_mir_lower(MIR_context_t ctx, const ir_func_t* f, const int64_t* params, const char* module_name,
                           MIR_item_t* funcs);

/* The address of a libm function the lowering imports, or NULL. */
void* jit_mir_resolve(const char* name);
#endif

#endif
