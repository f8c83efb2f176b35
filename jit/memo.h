/* jit/memo.h: the JIT's per-program memo (jit/memo.c): the last kernel a
 * program got from an engine, and which of its outputs may be written in
 * place. The program keeps it in an opaque slot and frees it through the
 * function stored beside it; only jit/memo.c knows its layout. It also
 * keeps what served each pass's last run (uj_program_last_run). */
#ifndef UJ_JIT_MEMO_H
#define UJ_JIT_MEMO_H

#include "../uops/uops.h"
#include "engine.h"

/* What serves p's call from row e (e->get or e->choose not NULL) for this
 * state and these params, on tensors of the sizes in buf: the kernel the
 * memo names, while the memory cache still has it (and, for a choosing
 * row's unsettled pick, while e->still says so), else e->get's (which
 * compiles on a miss) or e->choose's, then remembered. The caller releases
 * out->kernel once it has run (or, on a device, is queued). */
uj_status_t jit_memo_kernel(uj_ctx_t* ctx, const jit_engine_t* e, uj_program_t* p, uj_pass_t pass,
                            const ir_func_t* f, const int64_t* params, const ir_buffer_t* buf, jit_state_t* js,
                            jit_served_t* out);

/* Records what served p's pass in a successful run on the context with id
 * `ctx_id` (uj_ctx.id; for uj_program_last_run): the row and the choosing
 * row's record. */
void jit_memo_note_run(uj_program_t* p, uj_pass_t pass, uint64_t ctx_id, const jit_served_t* served);
/* What jit_memo_note_run last recorded for p's pass on the context with id
 * `ctx_id`: the row (NULL: never run there, or too long ago) and the record. */
void jit_memo_last_run(const uj_program_t* p, uj_pass_t pass, uint64_t ctx_id, const jit_engine_t** engine,
                       uint64_t* record);

/* ir_alias_safe(f, in, out), remembered by p. */
int jit_memo_alias_safe(uj_program_t* p, uj_pass_t pass, const ir_func_t* f, int in, int out);

#endif
