/* jit/run.c: the one seam between programs and engines. It chooses the
 * engine, checks every argument and binds sizes before anything runs (so a
 * failing call writes nothing), allocates the temporaries, and hands the
 * function to the engine. Dumps go through here too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../uops/parse.h"
#include "jit.h"

const char* uj_engine_name(uj_engine_t e) {
  switch (e) {
    case UJ_ENGINE_AUTO: return "auto";
    case UJ_ENGINE_INTERP: return "interp";
    case UJ_ENGINE_MIR: return "mir";
    case UJ_ENGINE_C: return "c";
    case UJ_ENGINE_CUDA: return "cuda";
  }
  return "?";
}

static void jit_state_free(void* p) {
  jit_state_t* js = p;
  if (!js) return;
  jit_cache_free(js->cache);
  rt_pool_free(js->pool);
  pthread_mutex_destroy(&js->lock);
  free(js->c_identity);
  free(js->cpu_identity);
  free(js);
}

jit_state_t* jit_state(uj_ctx_t* ctx) {
  /* states are told apart by a process-wide counter, so that a program's
   * memo can never mistake a new context for a freed one at the same address */
  static _Atomic uint64_t next_state_id = 1;
  jit_state_t* js = __atomic_load_n(&ctx->jit_state, __ATOMIC_ACQUIRE);
  if (js) return js;
  js = calloc(1, sizeof *js);
  if (!js || !(js->cache = jit_cache_new())) {
    free(js);
    rt_error(UJ_ERR_OOM, "out of memory creating the JIT state");
    return NULL;
  }
  js->pool = rt_pool_new(0);
  pthread_mutex_init(&js->lock, NULL);
  js->c_probe = -1;
  js->id = next_state_id++;
  /* threads may race to make the first state of a context: one wins */
  void* expected = NULL;
  ctx->jit_state_free = jit_state_free;
  if (!__atomic_compare_exchange_n(&ctx->jit_state, &expected, js, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    jit_state_free(js);
    return expected;
  }
  return js;
}

int uj_engine_available(uj_ctx_t* ctx, uj_engine_t e) {
  switch (e) {
    case UJ_ENGINE_AUTO:
    case UJ_ENGINE_INTERP: return 1;
    case UJ_ENGINE_C: {
      jit_state_t* js = ctx ? jit_state(ctx) : NULL;
      return js && jit_c_available(js);
    }
    case UJ_ENGINE_MIR: return jit_mir_available();
    default: return 0;
  }
}

uj_status_t uj_ctx_set_engine(uj_ctx_t* ctx, uj_engine_t e) {
  if (!ctx) return rt_error(UJ_ERR_INVALID, "uj_ctx_set_engine: ctx is NULL");
  if ((unsigned)e > UJ_ENGINE_CUDA) return rt_error(UJ_ERR_INVALID, "uj_ctx_set_engine: unknown engine %d", (int)e);
  if (!uj_engine_available(ctx, e))
    return rt_error(UJ_ERR_UNSUPPORTED, "engine %s is not available in this build or on this machine",
                    uj_engine_name(e));
  ctx->engine = e;
  return UJ_OK;
}

uj_status_t uj_ctx_set_passes(uj_ctx_t* ctx, int enabled) {
  if (!ctx) return rt_error(UJ_ERR_INVALID, "uj_ctx_set_passes: ctx is NULL");
  ctx->raw_ir = !enabled;
  return UJ_OK;
}

/* AUTO: the best available engine for CPU tensors: MIR, else C, else the
 * interpreter. */
uj_engine_t uj_ctx_engine(uj_ctx_t* ctx) {
  if (!ctx) return UJ_ENGINE_INTERP;
  if (ctx->engine != UJ_ENGINE_AUTO) return uj_engine_available(ctx, ctx->engine) ? ctx->engine : UJ_ENGINE_INTERP;
  if (uj_engine_available(ctx, UJ_ENGINE_MIR)) return UJ_ENGINE_MIR;
  if (uj_engine_available(ctx, UJ_ENGINE_C)) return UJ_ENGINE_C;
  return UJ_ENGINE_INTERP;
}

/* The program's kernel from engine e for this state and these params: the
 * memo, else the engine's caches (which compile on a miss). */
static uj_status_t engine_kernel(uj_ctx_t* ctx, uj_engine_t e, uj_program_t* p, uj_pass_t pass,
                                 const ir_func_t* f, const int64_t* params, jit_state_t** js_out,
                                 const jit_blocks_t** out) {
  jit_state_t* js = jit_state(ctx);
  if (!js) return UJ_ERR_OOM;
  *js_out = js;
  size_t pbytes = (size_t)p->nparams * sizeof *params;
  pthread_mutex_lock(&p->memo_lock);
  int hit = p->memo[pass].state == js->id && p->memo[pass].engine == (int)e && p->memo[pass].func == f &&
            p->memo[pass].kernel && (!pbytes || !memcmp(p->memo[pass].params, params, pbytes));
  *out = hit ? p->memo[pass].kernel : NULL;
  pthread_mutex_unlock(&p->memo_lock);
  if (hit) return UJ_OK;
  uj_status_t s = e == UJ_ENGINE_MIR ? jit_mir_get(js, f, params, out) : jit_c_get(js, f, params, out);
  if (s != UJ_OK) return s;
  pthread_mutex_lock(&p->memo_lock);
  int64_t* copy = pbytes ? malloc(pbytes) : NULL;
  if (!pbytes || copy) {
    if (pbytes) memcpy(copy, params, pbytes);
    free(p->memo[pass].params);
    p->memo[pass].params = copy;
    p->memo[pass].state = js->id;
    p->memo[pass].engine = (int)e;
    p->memo[pass].func = f;
    p->memo[pass].kernel = (void*)*out;
  }
  pthread_mutex_unlock(&p->memo_lock);
  return UJ_OK;
}

/* Checks the inputs and params and computes every tensor's sizes into buf. */
static uj_status_t bind_inputs(const ir_func_t* f, const uj_program_t* p, uj_pass_t pass,
                               const uj_tensor_t* const* inputs, int input_count, const int64_t* params,
                               int param_count, ir_buffer_t* buf) {
  if (input_count != p->ninputs[pass])
    return rt_error(UJ_ERR_INVALID, "the program takes %d inputs, got %d", p->ninputs[pass], input_count);
  if (param_count != p->nparams)
    return rt_error(UJ_ERR_INVALID, "the program takes %d params, got %d", p->nparams, param_count);
  if (input_count && !inputs) return rt_error(UJ_ERR_INVALID, "inputs is NULL");
  if (param_count && !params) return rt_error(UJ_ERR_INVALID, "params is NULL");
  for (int t = 0; t < f->ntensors; t++) {
    const ir_tensor_t* tt = &f->tensors[t];
    if (tt->role != IR_TENSOR_INPUT) continue;
    const uj_tensor_t* in = inputs[tt->io_index];
    if (!rt_tensor_ok(in, tt->ndim, tt->dtype, NULL)) {
      char what[32];
      snprintf(what, sizeof what, "input %d", tt->io_index);
      uj_status_t s = rt_tensor_check(what, in, tt->ndim, tt->dtype, NULL);
      if (s != UJ_OK) return s;
    }
    memcpy(buf[t].dims, in->dims, sizeof in->dims[0] * (size_t)tt->ndim);
    buf[t].data = in->data;
  }
  return ir_func_sizes(f, params, buf);
}

static uj_status_t check_outputs(const ir_func_t* f, uj_tensor_t* const* outputs, int output_count,
                                 int noutputs, ir_buffer_t* buf) {
  if (output_count != noutputs)
    return rt_error(UJ_ERR_INVALID, "the program has %d outputs, got %d", noutputs, output_count);
  if (output_count && !outputs) return rt_error(UJ_ERR_INVALID, "outputs is NULL");
  for (int t = 0; t < f->ntensors; t++) {
    const ir_tensor_t* tt = &f->tensors[t];
    if (tt->role != IR_TENSOR_OUTPUT) continue;
    if (!rt_tensor_ok(outputs[tt->io_index], tt->ndim, tt->dtype, buf[t].dims)) {
      char what[32];
      snprintf(what, sizeof what, "output %d", tt->io_index);
      uj_status_t s = rt_tensor_check(what, outputs[tt->io_index], tt->ndim, tt->dtype, buf[t].dims);
      if (s != UJ_OK) return s;
    }
    buf[t].data = outputs[tt->io_index]->data;
  }
  return UJ_OK;
}

/* A parsed program runs as the uop program built for its inputs. */
static uj_status_t resolve_parsed(uj_program_t** p, uj_pass_t pass, const uj_tensor_t* const* inputs,
                                  int input_count) {
  if (!(*p)->parsed) return UJ_OK;
  if (pass != UJ_FORWARD) return rt_error(UJ_ERR_INVALID, "a parsed program has only a forward pass");
  return pn_specialize((*p)->parsed, inputs, input_count, p);
}

static ir_buffer_t* buffers_new(const ir_func_t* f) {
  ir_buffer_t* buf = calloc((size_t)f->ntensors + 1, sizeof *buf);
  if (!buf) rt_error(UJ_ERR_OOM, "out of memory");
  return buf;
}

uj_status_t uj_program_shape(uj_program_t* p, uj_pass_t pass, const uj_tensor_t* const* inputs,
                             const int64_t* params, int output_index, int* ndim, int64_t* dims) {
  if (!p || !ndim || !dims) return rt_error(UJ_ERR_INVALID, "uj_program_shape: p, ndim and dims must not be NULL");
  uj_status_t ps = resolve_parsed(&p, pass, inputs, p->ninputs[UJ_FORWARD]);
  if (ps != UJ_OK) return ps;
  const ir_func_t* f = uop_program_func(p, pass, 0);
  if (!f) return UJ_ERR_INVALID;
  if (output_index < 0 || output_index >= p->noutputs[pass])
    return rt_error(UJ_ERR_INVALID, "uj_program_shape: output %d out of range (the pass has %d)", output_index,
                    p->noutputs[pass]);
  ir_buffer_t* buf = buffers_new(f);
  if (!buf) return UJ_ERR_OOM;
  uj_status_t s = bind_inputs(f, p, pass, inputs, p->ninputs[pass], params, p->nparams, buf);
  for (int t = 0; t < f->ntensors && s == UJ_OK; t++) {
    const ir_tensor_t* tt = &f->tensors[t];
    if (tt->role != IR_TENSOR_OUTPUT || tt->io_index != output_index) continue;
    *ndim = tt->ndim;
    memcpy(dims, buf[t].dims, sizeof buf[t].dims[0] * (size_t)tt->ndim);
  }
  free(buf);
  return s;
}

static size_t tensor_bytes(const ir_func_t* f, const ir_buffer_t* buf, int t) {
  return (size_t)buf[t].numel * (size_t)uj_dtype_size(f->tensors[t].dtype);
}

static int overlap(const ir_func_t* f, const ir_buffer_t* buf, int a, int b) {
  size_t na = tensor_bytes(f, buf, a), nb = tensor_bytes(f, buf, b);
  const char *pa = buf[a].data, *pb = buf[b].data;
  return na && nb && pa < pb + nb && pb < pa + na;
}

/* ir_alias_safe(f, in, out), remembered by the program. */
static int alias_safe(uj_program_t* p, uj_pass_t pass, const ir_func_t* f, int in, int out) {
  pthread_mutex_lock(&p->memo_lock);
  size_t n = (size_t)f->ntensors * (size_t)f->ntensors;
  if (p->alias[pass].func != f) {
    free(p->alias[pass].safe);
    p->alias[pass].func = f;
    if ((p->alias[pass].safe = malloc(n))) memset(p->alias[pass].safe, -1, n);
  }
  signed char* known = p->alias[pass].safe ? &p->alias[pass].safe[(size_t)in * (size_t)f->ntensors + (size_t)out] : NULL;
  int safe = known && *known >= 0 ? *known : -1;
  pthread_mutex_unlock(&p->memo_lock);
  if (safe >= 0) return safe;
  safe = ir_alias_safe(f, in, out);
  pthread_mutex_lock(&p->memo_lock);
  if (known && p->alias[pass].func == f) *known = (signed char)safe;
  pthread_mutex_unlock(&p->memo_lock);
  return safe;
}

/* An output sharing memory with an input is written in place when the IR
 * reads every element before overwriting it, else computed into memory of
 * its own (aside[t] keeps the caller's buffer to copy into). */
static uj_status_t place_aliased_outputs(uj_program_t* p, uj_pass_t pass, const ir_func_t* f, ir_buffer_t* buf,
                                         void** aside) {
  for (int o = 0; o < f->ntensors; o++) {
    if (f->tensors[o].role != IR_TENSOR_OUTPUT) continue;
    int apart = 0;
    for (int t = 0; t < f->ntensors; t++) {
      if (t == o || f->tensors[t].role == IR_TENSOR_TEMP || !overlap(f, buf, o, t)) continue;
      if (f->tensors[t].role == IR_TENSOR_OUTPUT)
        return rt_error(UJ_ERR_INVALID, "outputs %d and %d share memory", f->tensors[t].io_index,
                        f->tensors[o].io_index);
      int same = buf[t].data == buf[o].data && tensor_bytes(f, buf, t) == tensor_bytes(f, buf, o) &&
                 f->tensors[t].dtype == f->tensors[o].dtype;
      if (!same || !alias_safe(p, pass, f, t, o)) apart = 1;
    }
    if (!apart) continue;
    size_t bytes = tensor_bytes(f, buf, o);
    void* mem = malloc(bytes ? bytes : 1);
    if (!mem) return rt_error(UJ_ERR_OOM, "out of memory for a copy of output %d", f->tensors[o].io_index);
    aside[o] = buf[o].data;
    buf[o].data = mem;
  }
  return UJ_OK;
}

uj_status_t uj_program_run(uj_ctx_t* ctx, uj_program_t* p, uj_pass_t pass, const uj_tensor_t* const* inputs,
                           int input_count, const int64_t* params, int param_count, uj_tensor_t* const* outputs,
                           int output_count) {
  if (!ctx || !p) return rt_error(UJ_ERR_INVALID, "uj_program_run: ctx and p must not be NULL");
  uj_status_t ps = resolve_parsed(&p, pass, inputs, input_count);
  if (ps != UJ_OK) return ps;
  const ir_func_t* f = uop_program_func(p, pass, !ctx->raw_ir);
  if (!f) return UJ_ERR_INVALID;
  /* a call's bookkeeping lives on the stack when the function is small:
   * dispatching a cached kernel should cost little more than the kernel */
  enum { ON_STACK = 32 };
  ir_buffer_t stack_buf[ON_STACK];
  void* stack_aside[ON_STACK];
  int small = f->ntensors <= ON_STACK;
  ir_buffer_t* buf = small ? memset(stack_buf, 0, sizeof stack_buf[0] * (size_t)f->ntensors) : buffers_new(f);
  if (!buf) return UJ_ERR_OOM;
  uj_status_t s = bind_inputs(f, p, pass, inputs, input_count, params, param_count, buf);
  if (s == UJ_OK) s = check_outputs(f, outputs, output_count, p->noutputs[pass], buf);
  for (int t = 0; t < f->ntensors && s == UJ_OK; t++) {
    const ir_tensor_t* tt = &f->tensors[t];
    if (tt->role != IR_TENSOR_TEMP || tt->noalloc) continue;
    size_t bytes = (size_t)buf[t].numel * (size_t)uj_dtype_size(tt->dtype);
    if (!(buf[t].data = malloc(bytes ? bytes : 1)))
      s = rt_error(UJ_ERR_OOM, "out of memory allocating tensor t%d (%zu bytes)", t, bytes);
  }
  void** aside = s != UJ_OK ? NULL
                : small ? memset(stack_aside, 0, sizeof stack_aside[0] * (size_t)f->ntensors)
                        : calloc((size_t)f->ntensors + 1, sizeof *aside);
  if (s == UJ_OK && !aside) s = rt_error(UJ_ERR_OOM, "out of memory");
  if (s == UJ_OK) s = place_aliased_outputs(p, pass, f, buf, aside);
  if (s == UJ_OK) {
    uj_engine_t e = uj_ctx_engine(ctx);
    if (e == UJ_ENGINE_C || e == UJ_ENGINE_MIR) {
      jit_state_t* js;
      const jit_blocks_t* k;
      if ((s = engine_kernel(ctx, e, p, pass, f, params, &js, &k)) == UJ_OK) s = jit_blocks_run(js, k, f, buf, params);
    } else {
      s = ir_interp_run(f, buf, params);
    }
  }
  for (int t = 0; aside && t < f->ntensors; t++) {
    if (!aside[t]) continue;
    if (s == UJ_OK) memcpy(aside[t], buf[t].data, tensor_bytes(f, buf, t));
    free(buf[t].data);
  }
  if (!small) free(aside);
  for (int t = 0; t < f->ntensors; t++)
    if (f->tensors[t].role == IR_TENSOR_TEMP) free(buf[t].data);
  if (!small) free(buf);
  return s;
}

char* uj_program_dump(uj_ctx_t* ctx, uj_program_t* p, uj_pass_t pass, uj_dump_t what, const int64_t* params) {
  (void)ctx;
  if (!p) {
    rt_error(UJ_ERR_INVALID, "uj_program_dump: p is NULL");
    return NULL;
  }
  if (p->parsed && pn_specialize_default(p->parsed, &p) != UJ_OK) return NULL;
  if (what == UJ_DUMP_C || what == UJ_DUMP_C_AOT) {
    /* C source needs no compiler to be written */
    const ir_func_t* f = uop_program_func(p, pass, 1);
    if (!f) return NULL;
    int flags = what == UJ_DUMP_C_AOT ? JIT_C_AOT : params ? JIT_C_FOLD_PARAMS : 0;
    char* text = jit_c_emit(f, params, flags, "uopjit_kernel");
    if (!text) rt_error(UJ_ERR_OOM, "uj_program_dump: out of memory");
    return text;
  }
  if (what == UJ_DUMP_MIR) {
    const ir_func_t* f = uop_program_func(p, pass, 1);
    return f ? jit_mir_dump(f, params) : NULL;
  }
  if (what != UJ_DUMP_IR_RAW && what != UJ_DUMP_IR) {
    rt_error(UJ_ERR_UNSUPPORTED, "uj_program_dump: dump %d needs an engine that is not available", (int)what);
    return NULL;
  }
  const ir_func_t* f = uop_program_func(p, pass, what == UJ_DUMP_IR);
  if (!f) return NULL;
  char* text = ir_print(f, params, 0);
  if (!text) rt_error(UJ_ERR_OOM, "uj_program_dump: out of memory");
  return text;
}

uj_status_t uj_program_output_dtype(uj_program_t* p, uj_pass_t pass, const uj_tensor_t* const* inputs,
                                    int output_index, uj_dtype_t* dtype) {
  if (!p || !dtype) return rt_error(UJ_ERR_INVALID, "uj_program_output_dtype: p and dtype must not be NULL");
  uj_status_t s = resolve_parsed(&p, pass, inputs, p->ninputs[UJ_FORWARD]);
  if (s != UJ_OK) return s;
  const ir_func_t* f = uop_program_func(p, pass, 0);
  if (!f) return UJ_ERR_INVALID;
  for (int t = 0; t < f->ntensors; t++)
    if (f->tensors[t].role == IR_TENSOR_OUTPUT && f->tensors[t].io_index == output_index) {
      *dtype = f->tensors[t].dtype;
      return UJ_OK;
    }
  return rt_error(UJ_ERR_INVALID, "uj_program_output_dtype: output %d out of range", output_index);
}
