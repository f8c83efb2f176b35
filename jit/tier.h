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

#endif
