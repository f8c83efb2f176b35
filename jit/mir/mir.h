/* jit/mir/mir.h: the MIR engine's entry points beside its row in the
 * engine table, for its tests: its kernels, its text form, and counts of
 * MIR's contexts. */
#ifndef UJ_JIT_MIR_H
#define UJ_JIT_MIR_H

#include "../jit.h"

/* 1 when the build has MIR. */
int jit_mir_available(void);
/* A reference to the kernel for f with these $params (jit_blocks_of;
 * jit_cache_release), from the memory cache or generated now at MIR
 * optimization level `level` (0..3, the context's setting). Its cost
 * in the memory cache is what MIR's context grew by to generate it plus a
 * share of the context's own setup (jit/mir/mir.c). */
uj_status_t jit_mir_get(jit_state_t* js, const ir_func_t* f, const int64_t* params, int level,
                        jit_cache_entry_t** out);
/* MIR's text form of the module the engine builds for f (params NULL: read
 * from the params argument). NULL with the error set. */
char* jit_mir_dump(const ir_func_t* f, const int64_t* params);
/* How many MIR contexts the process has made so far (for tests of recycling). */
int jit_mir_generations(void);
/* How many of them still hold memory: not finished yet, because they take
 * modules still or a kernel generated in them is still in use or cached
 * (for tests that evicting kernels gives memory back). */
int jit_mir_generations_live(void);
/* For tests of the error path: asks MIR, in a context of its own, for
 * something it rejects (a function outside any module) and returns what
 * that error becomes: UJ_ERR_COMPILE with MIR's message, the process alive. */
uj_status_t jit_mir_provoke_error(void);

#endif
