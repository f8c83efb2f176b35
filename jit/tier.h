/* jit/tier.h: tiered execution of AUTO on host tensors (the policy and the
 * algorithm are in jit/tier.c's opening comment). It is a choosing row of
 * the engine table's kind (jit/engine.h): jit/engine.c picks it for AUTO
 * on host tensors when jit_tier_applies, and the runner and the program's
 * memo call its choose, still and after_run like any row's functions. Its
 * state is the JIT state's tier slot, made on the first tiered call and
 * freed through the slot's own function. */
#ifndef UJ_JIT_TIER_H
#define UJ_JIT_TIER_H

#include "engine.h"

/* The tiered row: name "auto", host tensors, the settings of both tiers
 * and UOPJIT_TIER. */
extern const jit_engine_t jit_engine_tiered;

/* 1 when a call of ctx on host tensors is tiered: tiering on
 * (uj_ctx_set_tier), and a C compiler not known to be missing or a state
 * that tiers already (jit_c_known: this never runs the compiler). The
 * caller has checked that ctx's engine is AUTO. */
/* Holds the background compiles: returns once none is running, and none
 * starts until the matching jit_tier_resume. Around a change the compiles
 * must not see half done (the disk cache's directory). No-ops without
 * tiering state. */
void jit_tier_pause(jit_state_t* js);
void jit_tier_resume(jit_state_t* js);
int jit_tier_applies(uj_ctx_t* ctx);

/* What served ctx's tiered calls so far: *mir and *interp, the calls the
 * quick tier served on each; *c, the times a C kernel was picked (its later
 * calls are memo hits that never reach the row, so a call that moved
 * neither quick count ran C). Returns 0, every count 0, when ctx has made
 * no tiered call. For callers that have no program to ask
 * uj_program_last_run about: the tool's `optim`, whose programs the
 * optimizer keeps, compares the counts before and after each step. */
int jit_tier_served(uj_ctx_t* ctx, int64_t* mir, int64_t* interp, int64_t* c);

#endif
