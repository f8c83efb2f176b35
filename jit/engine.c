/* jit/engine.c: the engine table (jit/engine.h), the interpreter's row, the
 * public engine queries and choice, and the context's JIT state (DESIGN
 * section 7, "Choice" and "The seam").
 *
 * The table is indexed by uj_engine_t; each compiled engine's row lives
 * beside its engine. Everything here reads the rows and never names an
 * engine's functions: adding an engine is a row and a slot in the enum.
 * AUTO is a choice among the rows, not a row (jit_engine_for_call).
 *
 * The JIT state is made on a context's first use: the kernel cache, the
 * thread pool, and each engine's own slot (state_new), all freed together
 * by the context through the function it is given. In a forked child the
 * parent's state is abandoned, never freed or locked (state_here; DESIGN
 * section 11, "fork()"). */
#include <stdio.h>
#include <stdlib.h>

#include "engine.h"
#include "tier.h"

/* ---- the interpreter: runs the IR itself, nothing to compile ---- */

static int interp_available(uj_ctx_t* ctx) {
  (void)ctx;
  return 1;
}

static uj_status_t interp_check(uj_ctx_t* ctx) {
  (void)ctx;
  return UJ_OK;
}

static uj_status_t interp_run(uj_ctx_t* ctx, jit_state_t* js, const void* kernel, const ir_func_t* f,
                              ir_buffer_t* buf, const int64_t* params) {
  (void)ctx, (void)js, (void)kernel;
  return ir_interp_run(f, buf, params);
}

const jit_engine_t jit_engine_interp = {
    .device = UJ_CPU,
    .available = interp_available,
    .check = interp_check,
    .run = interp_run,
};

/* ---- the table ---- */

const jit_engine_t* const jit_engines[RT_ENGINE_COUNT] = {
    [UJ_ENGINE_INTERP] = &jit_engine_interp,
    [UJ_ENGINE_MIR] = &jit_engine_mir,
    [UJ_ENGINE_C] = &jit_engine_c,
    [UJ_ENGINE_CUDA] = &jit_engine_cuda,
};

/* AUTO on CPU tensors: the fastest to start first (MIR compiles in well
 * under a millisecond, the C compiler in about 100), the interpreter last. */
static const uj_engine_t auto_cpu_order[] = {UJ_ENGINE_MIR, UJ_ENGINE_C, UJ_ENGINE_INTERP};

const jit_engine_t* jit_engine(uj_engine_t e) {
  return (unsigned)e < RT_ENGINE_COUNT ? jit_engines[e] : NULL;
}

uj_status_t jit_engine_run_blocks(uj_ctx_t* ctx, jit_state_t* js, const void* kernel, const ir_func_t* f,
                                  ir_buffer_t* buf, const int64_t* params) {
  (void)ctx;
  return jit_blocks_run(js, kernel, f, buf, params);
}

int uj_engine_available(uj_ctx_t* ctx, uj_engine_t e) {
  if (e == UJ_ENGINE_AUTO) return 1;
  const jit_engine_t* row = jit_engine(e);
  return row && row->available(ctx);
}

uj_status_t uj_ctx_set_engine(uj_ctx_t* ctx, uj_engine_t e) {
  if (!ctx) return rt_error(UJ_ERR_INVALID, "uj_ctx_set_engine: ctx is NULL");
  const jit_engine_t* row = jit_engine(e);
  if (!row && e != UJ_ENGINE_AUTO) return rt_error(UJ_ERR_INVALID, "uj_ctx_set_engine: unknown engine %d", (int)e);
  uj_status_t s = row ? row->check(ctx) : UJ_OK;
  if (s == UJ_ERR_OOM) return s;
  if (s != UJ_OK) {
    char reason[512];
    snprintf(reason, sizeof reason, "%s", uj_last_error());
    return rt_error(UJ_ERR_UNSUPPORTED, "engine %s is not available: %s", uj_engine_name(e), reason);
  }
  ctx->set.engine = e;
  rt_ctx_setting_fixed(ctx, RT_SETTING_ENGINE);
  return UJ_OK;
}

uj_engine_t uj_ctx_engine(uj_ctx_t* ctx) {
  if (!ctx) return UJ_ENGINE_INTERP;
  if (ctx->set.engine != UJ_ENGINE_AUTO)
    return uj_engine_available(ctx, ctx->set.engine) ? ctx->set.engine : UJ_ENGINE_INTERP;
  for (size_t i = 0; i < sizeof auto_cpu_order / sizeof *auto_cpu_order; i++)
    if (uj_engine_available(ctx, auto_cpu_order[i])) return auto_cpu_order[i];
  return UJ_ENGINE_INTERP;
}

uj_engine_t jit_engine_id(const jit_engine_t* row) {
  for (int i = 0; i < RT_ENGINE_COUNT; i++)
    if (jit_engines[i] == row) return (uj_engine_t)i;
  return UJ_ENGINE_AUTO;
}

/* AUTO: for CPU tensors the tiered row of jit/tier.c when tiering is on and
 * a C compiler works (MIR, or the interpreter, until the C kernel is
 * compiled: a choice made call by call), else the first available engine
 * of auto_cpu_order; for tensors on a device the first row that runs
 * there. */
uj_status_t jit_engine_for_call(uj_ctx_t* ctx, uj_device_t dev, const jit_engine_t** e) {
  if (ctx->set.engine == UJ_ENGINE_AUTO && dev == UJ_CPU && jit_tier_applies(ctx)) {
    *e = &jit_engine_tiered;
    return UJ_OK;
  }
  if (ctx->set.engine != UJ_ENGINE_AUTO || dev == UJ_CPU) {
    *e = jit_engine(uj_ctx_engine(ctx));
    return UJ_OK;
  }
  for (int i = 0; i < RT_ENGINE_COUNT; i++) {
    const jit_engine_t* row = jit_engines[i];
    if (!row || row->device != dev) continue;
    if (row->check(ctx) != UJ_OK) {
      char reason[512];
      snprintf(reason, sizeof reason, "%s", uj_last_error());
      return rt_error(UJ_ERR_UNSUPPORTED, "the tensors are on the GPU but the %s engine is not available: %s",
                      uj_engine_name((uj_engine_t)i), reason);
    }
    *e = row;
    return UJ_OK;
  }
  return rt_error(UJ_ERR_UNSUPPORTED, "the tensors are on the GPU but no engine runs there");
}

/* ---- the context's JIT state ---- */

/* fork(): a state remembers the fork generation it was made in
 * (rt_fork_generation). In a child, the parent's state is abandoned, never
 * freed or locked: its locks (the cache's, the compiles', tiered AUTO's)
 * may have been held by threads that do not exist in the child, and its
 * background compile threads cannot be joined. jit_state makes the child a
 * new one, so the child's first call compiles afresh (or loads from the
 * disk cache); jit_state_existing does not see the old one, and freeing the
 * context leaves it alone. Its memory stays allocated in the child, which
 * is the price of never waiting on a lock nobody will release. */
static int state_here(const jit_state_t* js) { return js && js->fork_generation == rt_fork_generation(); }

static void jit_state_free(void* p) {
  jit_state_t* js = p;
  if (!state_here(js)) return; /* none, or the parent's in a forked child: abandoned (state_here) */
  if (js->tier) js->tier_free(js->tier);
  if (js->groups_memo) js->groups_memo_free(js->groups_memo);
  jit_cache_free(js->cache);
  rt_pool_free(js->pool);
  pthread_mutex_destroy(&js->lock);
  for (int i = 0; i < RT_ENGINE_COUNT; i++)
    if (jit_engines[i] && jit_engines[i]->state_free) jit_engines[i]->state_free(js->engine_state[i]);
  free(js);
}

/* Each engine's slot; 0 when one is out of memory. */
static int engine_states_new(jit_state_t* js) {
  for (int i = 0; i < RT_ENGINE_COUNT; i++)
    if (jit_engines[i] && jit_engines[i]->state_new && !(js->engine_state[i] = jit_engines[i]->state_new()))
      return 0;
  return 1;
}

jit_state_t* jit_state(uj_ctx_t* ctx) {
  /* states are told apart by a process-wide counter, so that a program's
   * memo can never mistake a new context for a freed one at the same address */
  static _Atomic uint64_t next_state_id = 1;
  jit_state_t* const old = __atomic_load_n(&ctx->jit_state, __ATOMIC_ACQUIRE);
  if (state_here(old)) return old;
  jit_state_t* js = calloc(1, sizeof *js);
  if (!js || !(js->cache = jit_cache_new_with(&ctx->set))) {
    free(js);
    rt_error(UJ_ERR_OOM, "out of memory creating the JIT state (%zu bytes and the kernel cache)", sizeof *js);
    return NULL;
  }
  js->pool = rt_pool_new(ctx->set.threads);
  js->chain_bytes = JIT_CHAIN_BYTES;
  js->stream_bytes = ctx->set.stream_bytes;
  pthread_mutex_init(&js->lock, NULL);
  js->id = next_state_id++;
  js->fork_generation = rt_fork_generation();
  if (!engine_states_new(js)) {
    jit_state_free(js);
    rt_error(UJ_ERR_OOM, "out of memory creating the engines' parts of the JIT state");
    return NULL;
  }
  /* threads may race to make the first state of a context (or the child's
   * replacement of the parent's): one wins */
  void* expected = old;
  __atomic_store_n(&ctx->jit_state_free, jit_state_free, __ATOMIC_RELAXED); /* the same value from every racer */
  if (!__atomic_compare_exchange_n(&ctx->jit_state, &expected, js, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    jit_state_free(js);
    return expected;
  }
  return js;
}

jit_state_t* jit_state_existing(uj_ctx_t* ctx) {
  jit_state_t* js = __atomic_load_n(&ctx->jit_state, __ATOMIC_ACQUIRE);
  return state_here(js) ? js : NULL;
}
