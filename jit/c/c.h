/* jit/c/c.h: the C engine's entry points beside its row in the engine
 * table: the emitter (the AOT dump uses it too), and the kernel lookups
 * the tiered chooser (jit/tier.c) needs to compile in the background. */
#ifndef UJ_JIT_C_H
#define UJ_JIT_C_H

#include "../jit.h"

enum {
  JIT_C_FOLD_PARAMS = 1,  /* $params become constants (JIT); else read from params[] (AOT) */
  JIT_C_AOT = 2           /* a self-contained file with size inference and an entry point */
};

/* C source for f: one function `uj_block_<N>` per block (see jit_block_fn)
 * plus, with JIT_C_AOT, the entry point described in the file's header.
 * name prefixes the AOT entry point (fixed text chosen by the caller,
 * never user text). NULL on OOM. */
char* jit_c_emit(const ir_func_t* f, const int64_t* params, int flags, const char* name);

/* 1 when a working C compiler is on the PATH (or UOPJIT_CC): the disk
 * cache's remembered answer, else `cc --version` run once per state. */
int jit_c_available(jit_state_t* js);
/* What jit_c_available would say, where that is known without running
 * the compiler or waiting for another thread's probe: the answer, the
 * remembered one (asked once per state), or -1. */
int jit_c_known(jit_state_t* js);
/* UJ_OK when it is; else UJ_ERR_UNSUPPORTED naming the compiler tried
 * (UOPJIT_CC's value when it is set). */
uj_status_t jit_c_check(jit_state_t* js);
/* A reference to the compiled kernel for f with these $params (read it
 * with jit_blocks_of, give it back with jit_cache_release): from the
 * memory cache, the disk cache, or compiled now. Its cost in the memory
 * cache is the loaded object's mapped segments plus the blocks' tables. */
uj_status_t jit_c_get(jit_state_t* js, const ir_func_t* f, const int64_t* params, jit_cache_entry_t** out);
/* jit_c_get serializing its compile on `lock` rather than the state's
 * (jit/tier.c's background compiles: the calls of the context, which take
 * the state's lock for their own compiles, never wait for them). It probes
 * the compiler first when no one has. */
uj_status_t jit_c_build(jit_state_t* js, const ir_func_t* f, const int64_t* params, pthread_mutex_t* lock,
                        jit_cache_entry_t** out);
/* The compiled kernel for f from the memory cache, or (disk set) a verified
 * shared object in the disk cache, never compiled: *out NULL on a miss.
 * The key names the compiler: call it once jit_c_known says 1. */
uj_status_t jit_c_find(jit_state_t* js, const ir_func_t* f, const int64_t* params, int disk,
                       jit_cache_entry_t** out);

#endif
