/* jit/engine.h: the seam between the runner (jit/run.c) and the engines.
 *
 * An engine is one row of a table of functions: whether it can run here
 * (quietly, or with the reason), where its tensors live, which of the
 * context's settings it depends on, get-or-compile a kernel for a loop-IR
 * function (through the context's kernel cache), run a kernel, dump its
 * code, the part of its cache key that comes from the context's settings,
 * its own slot of the context's JIT state, and, optionally, compiles for a
 * device architecture and multi-tensor calls. The runner indexes
 * the table (jit_engines, by uj_engine_t) or loops over it and never asks
 * which engine it holds. Each row is defined beside its engine (jit/c/c.c,
 * jit/mir/mir.c, jit/cuda/cuda.c; the interpreter's in jit/engine.c), the way
 * backends/conv/registry.c lists the convolution backends. */
#ifndef UJ_JIT_ENGINE_H
#define UJ_JIT_ENGINE_H

#include "jit.h"

struct jit_engine;
struct groups_plan; /* jit/groups/groups.h */

/* What serves one call: a reference to the kernel (given back with
 * jit_cache_release once it has run; NULL for a row that runs the IR
 * itself) and the row that runs it. A choosing row (below) says more:
 * whether its pick stays (settled) or a memo hit on it asks the row again,
 * its own record of the kernel (for uj_program_last_run), and whether its
 * after_run step has work for this call. */
typedef struct {
  jit_cache_entry_t* kernel;
  const struct jit_engine* engine;
  int settled;       /* 1: a memo hit on this kernel serves as it is */
  uint64_t record;   /* the choosing row's record of the kernel; 0 none */
  int after_run;     /* 1: call the choosing row's after_run once the kernel has run */
} jit_served_t;

typedef struct jit_engine {
  uj_device_t device; /* where the tensors of a call it runs must be */
  unsigned settings;  /* the RT_SETTING_* bits it reads: a call fails on a bad environment value only then */
  unsigned dumps;     /* the uj_dump_t kinds its dump writes, a bit each */
  /* 1 when its run gives the chain-local temporaries (ir_tensor_t.chain_local)
   * their memory itself (jit_blocks_run: rows of scratch when their chain
   * runs in chunks, full size otherwise): the runner leaves them unallocated */
  int chain_scratch;
  /* 1 when it can run in this build and on this machine, setting no error
   * (ctx may be NULL: then an engine that needs the context's state says 0). */
  int (*available)(uj_ctx_t* ctx);
  /* UJ_OK when it can run; else the status and the reason, as a sentence
   * that follows "engine <name> is not available: ". */
  uj_status_t (*check)(uj_ctx_t* ctx);
  /* The part of its kernel cache key that comes from the context's settings
   * (MIR: its optimization level), beside the IR and the $params: a
   * program's memo of its last kernel compares it, so that a changed
   * setting is a miss. NULL: nothing. */
  int (*key_setting)(const uj_ctx_t* ctx);
  /* A reference to the kernel for f with these $params: from the memory
   * cache, the disk cache, or compiled now; jit_cache_release gives it back.
   * NULL for an engine that runs the IR itself (the interpreter). */
  uj_status_t (*get)(uj_ctx_t* ctx, jit_state_t* js, const ir_func_t* f, const int64_t* params,
                     jit_cache_entry_t** out);
  /* Runs f on buf (or, on a device, queues it) with the kernel's value
   * (NULL, and js NULL, when get is). */
  uj_status_t (*run)(uj_ctx_t* ctx, jit_state_t* js, const void* kernel, const ir_func_t* f, ir_buffer_t* buf,
                     const int64_t* params);
  /* Its code for f (one of the kinds in dumps): a malloc'ed string, or NULL
   * with the error set. params NULL: read from the params argument. */
  char* (*dump)(const ir_func_t* f, const int64_t* params, uj_dump_t what);
  /* Compiles f for the device architecture `arch` without a device, into
   * the disk cache (uj_program_compile_cuda); NULL when it has no such step. */
  uj_status_t (*compile_for)(jit_state_t* js, const ir_func_t* f, const int64_t* params, const char* arch,
                             int* kernels, int* reused);
  /* Its slot of the JIT state (jit_engine_state): made with the state (NULL
   * from state_new is out of memory), freed with it. Both NULL: no slot. */
  void* (*state_new)(void);
  void (*state_free)(void* state);
  /* Multi-tensor calls (jit/groups/): the plan's groups in one launch on
   * the row's device, *ran 1 once queued; and the same kernels compiled
   * for `arch` without a device, into the disk cache (*reused 1 when a
   * verified image was there). NULL: the groups run on the CPU path of
   * jit/groups/cpu.c with the row's kernel, and there is nothing to
   * compile ahead. */
  uj_status_t (*run_groups)(uj_ctx_t* ctx, const struct groups_plan* plan, const uj_group_t* groups,
                            int group_count, const int64_t* params, int* ran);
  uj_status_t (*compile_groups_for)(uj_ctx_t* ctx, const struct groups_plan* plan, const int64_t* params,
                                    const char* arch, int* reused);
  /* NULL for an engine. A row that chooses among engines call by call
   * rather than being one (tiered AUTO, jit/tier.c) has a chooser instead
   * of get and run; it is not in the table, so it has no available, check
   * or dump either. */
  const struct jit_chooser* chooser;
} jit_engine_t;

/* A choosing row's slots. choose picks the kernel and the row that runs it
 * for f with these params on tensors of the sizes in buf; a memo hit on a
 * pick that is not settled asks still (serial: the memoized kernel's cache
 * serial) whether it still serves, 1 or 0; after_run, on the caller's
 * thread once the kernel has run, does what the pick left for later
 * (served->after_run). */
typedef struct jit_chooser {
  uj_status_t (*choose)(uj_ctx_t* ctx, jit_state_t* js, const ir_func_t* f, const int64_t* params,
                        const ir_buffer_t* buf, jit_served_t* out);
  int (*still)(uj_ctx_t* ctx, jit_state_t* js, uint64_t serial, jit_served_t* served);
  void (*after_run)(uj_ctx_t* ctx, jit_state_t* js, const ir_func_t* f, const int64_t* params,
                    const jit_served_t* served);
} jit_chooser_t;

/* By uj_engine_t; NULL at UJ_ENGINE_AUTO, which is a choice, not an engine. */
extern const jit_engine_t* const jit_engines[RT_ENGINE_COUNT];
extern const jit_engine_t jit_engine_interp, jit_engine_mir, jit_engine_c, jit_engine_cuda;

/* Engine e's row, or NULL for AUTO and values out of range. */
const jit_engine_t* jit_engine(uj_engine_t e);

/* The row for a call on tensors on dev: the context's choice
 * (uj_ctx_engine); for AUTO on host tensors with tiering on and a working
 * C compiler, the tiered row (jit/tier.c); for AUTO on a device the first
 * row that runs there. UJ_ERR_UNSUPPORTED with the reason when that one
 * cannot run. */
uj_status_t jit_engine_for_call(uj_ctx_t* ctx, uj_device_t dev, const jit_engine_t** row);

/* The engine a row is in the table (uj_engine_t), AUTO for a choosing row. */
uj_engine_t jit_engine_id(const jit_engine_t* row);

/* The run of the engines whose kernels are jit_blocks_t (jit_blocks_run). */
uj_status_t jit_engine_run_blocks(uj_ctx_t* ctx, jit_state_t* js, const void* kernel, const ir_func_t* f,
                                  ir_buffer_t* buf, const int64_t* params);

/* Engine e's slot of the JIT state (what its state_new made). */
static inline void* jit_engine_state(const jit_state_t* js, uj_engine_t e) { return js->engine_state[e]; }

#endif
