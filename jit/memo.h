/* jit/memo.h: the JIT's per-program memo (jit/memo.c): the last kernel a
 * program got from an engine, and which of its outputs may be written in
 * place. The program keeps it in an opaque slot and frees it through the
 * function stored beside it; only jit/memo.c knows its layout. */
#ifndef UJ_JIT_MEMO_H
#define UJ_JIT_MEMO_H

#include "../uops/uops.h"
#include "engine.h"

/* A reference to p's kernel from engine e (e->get not NULL) for this state
 * and these params: the entry the memo names, while the memory cache still
 * has it, else e->get's (which compiles on a miss), then remembered. The
 * caller releases it once the kernel has run (or, on a device, is queued). */
uj_status_t jit_memo_kernel(uj_ctx_t* ctx, const jit_engine_t* e, uj_program_t* p, uj_pass_t pass,
                            const ir_func_t* f, const int64_t* params, jit_state_t* js, jit_cache_entry_t** out);

/* ir_alias_safe(f, in, out), remembered by p. */
int jit_memo_alias_safe(uj_program_t* p, uj_pass_t pass, const ir_func_t* f, int in, int out);

#endif
