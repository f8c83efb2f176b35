/* jit/run.c: runs programs through the engine table (jit/engine.h). It
 * takes the call's row (jit_engine_for_call: AUTO is CUDA for tensors on
 * the GPU, else tiered or the best CPU engine), checks every argument and binds sizes
 * before anything runs (so a failing call writes nothing), allocates the
 * temporaries where the engine runs (host memory, or stream-ordered device
 * memory), gets the engine's kernel through the program's memo
 * (jit/memo.c) and runs it on the row that serves it (a choosing row, tiered
 * AUTO, names that row call by call), noting which for
 * uj_program_last_run. Dumps and the CUDA compile-only entry go
 * through the table too. It never asks which engine it holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../rt/cuda.h"
#include "../lang/parse.h"
#include "memo.h"

uj_status_t uj_ctx_set_passes(uj_ctx_t* ctx, int enabled) {
  if (!ctx) return rt_error(UJ_ERR_INVALID, "uj_ctx_set_passes: ctx is NULL");
  ctx->raw_ir = !enabled;
  return UJ_OK;
}

/* Checks the inputs and params and computes every tensor's sizes into buf. */
static uj_status_t bind_inputs(const ir_func_t* f, const uj_program_t* p, uj_pass_t pass, uj_device_t dev,
                               const uj_tensor_t* const* inputs, int input_count, const int64_t* params,
                               int param_count, ir_buffer_t* buf) {
  uj_status_t counts = uop_program_check_counts(p, pass, input_count, param_count, -1);
  if (counts != UJ_OK) return counts;
  if (input_count && !inputs) return rt_error(UJ_ERR_INVALID, "inputs is NULL");
  if (param_count && !params) return rt_error(UJ_ERR_INVALID, "params is NULL");
  for (int t = 0; t < f->ntensors; t++) {
    const ir_tensor_t* tt = &f->tensors[t];
    if (tt->role != IR_TENSOR_INPUT) continue;
    const uj_tensor_t* in = inputs[tt->io_index];
    if (!rt_tensor_ok_on(in, dev, tt->ndim, tt->dtype, NULL)) {
      char what[32];
      snprintf(what, sizeof what, "input %d", tt->io_index);
      uj_status_t s = rt_tensor_check_on(what, in, dev, tt->ndim, tt->dtype, NULL);
      if (s != UJ_OK) return s;
    }
    memcpy(buf[t].dims, in->dims, sizeof in->dims[0] * (size_t)tt->ndim);
    buf[t].data = in->data;
  }
  return ir_func_sizes(f, params, buf);
}

static uj_status_t check_outputs(const ir_func_t* f, uj_device_t dev, uj_tensor_t* const* outputs,
                                 int output_count, int noutputs, ir_buffer_t* buf) {
  if (output_count != noutputs)
    return rt_error(UJ_ERR_INVALID, "the program has %d outputs, got %d", noutputs, output_count);
  if (output_count && !outputs) return rt_error(UJ_ERR_INVALID, "outputs is NULL");
  for (int t = 0; t < f->ntensors; t++) {
    const ir_tensor_t* tt = &f->tensors[t];
    if (tt->role != IR_TENSOR_OUTPUT) continue;
    if (!rt_tensor_ok_on(outputs[tt->io_index], dev, tt->ndim, tt->dtype, buf[t].dims)) {
      char what[32];
      snprintf(what, sizeof what, "output %d", tt->io_index);
      uj_status_t s = rt_tensor_check_on(what, outputs[tt->io_index], dev, tt->ndim, tt->dtype, buf[t].dims);
      if (s != UJ_OK) return s;
    }
    buf[t].data = outputs[tt->io_index]->data;
  }
  return UJ_OK;
}

/* A parsed program runs as the uop program built for its pass and
 * inputs, held in *held until the caller's pn_release(*held): another
 * thread may evict it from the parsed program's cache meanwhile. *held is
 * NULL for a uop program and on failure. input_count < 0: as many inputs
 * as the pass takes (for the calls that take no count). */
static uj_status_t resolve_parsed(uj_program_t** p, uj_pass_t pass, const uj_tensor_t* const* inputs,
                                  int input_count, pn_special_t** held) {
  *held = NULL;
  if (pass != UJ_FORWARD && pass != UJ_BACKWARD)
    return rt_error(UJ_ERR_INVALID, "pass %d is neither UJ_FORWARD nor UJ_BACKWARD", (int)pass);
  if (input_count < 0) input_count = (*p)->ninputs[pass];
  if (!(*p)->parsed) return UJ_OK;
  uj_status_t s = pn_specialize((*p)->parsed, pass, inputs, input_count, held);
  if (s == UJ_OK) *p = (*held)->program;
  return s;
}

static ir_buffer_t* buffers_new(const ir_func_t* f) {
  ir_buffer_t* buf = calloc((size_t)f->ntensors + 1, sizeof *buf);
  if (!buf)
    rt_error(UJ_ERR_OOM, "out of memory allocating the buffers of %d tensors (%zu bytes)", f->ntensors,
             ((size_t)f->ntensors + 1) * sizeof *buf);
  return buf;
}

static uj_status_t program_shape(uj_program_t* p, uj_pass_t pass, const uj_tensor_t* const* inputs,
                                 const int64_t* params, int output_index, int* ndim, int64_t* dims) {
  const ir_func_t* f = uop_program_func(p, pass, 0);
  if (!f) return UJ_ERR_INVALID;
  if (output_index < 0 || output_index >= p->noutputs[pass])
    return rt_error(UJ_ERR_INVALID, "uj_program_shape: output %d out of range (the pass has %d)", output_index,
                    p->noutputs[pass]);
  ir_buffer_t* buf = buffers_new(f);
  if (!buf) return UJ_ERR_OOM;
  /* shapes only: any device will do */
  uj_device_t dev = inputs && p->ninputs[pass] > 0 && inputs[0] && inputs[0]->device == UJ_CUDA ? UJ_CUDA : UJ_CPU;
  uj_status_t s = bind_inputs(f, p, pass, dev, inputs, p->ninputs[pass], params, p->nparams, buf);
  for (int t = 0; t < f->ntensors && s == UJ_OK; t++) {
    const ir_tensor_t* tt = &f->tensors[t];
    if (tt->role != IR_TENSOR_OUTPUT || tt->io_index != output_index) continue;
    *ndim = tt->ndim;
    memcpy(dims, buf[t].dims, sizeof buf[t].dims[0] * (size_t)tt->ndim);
  }
  free(buf);
  return s;
}

uj_status_t uj_program_shape(uj_program_t* p, uj_pass_t pass, const uj_tensor_t* const* inputs,
                             const int64_t* params, int output_index, int* ndim, int64_t* dims) {
  if (!p || !ndim || !dims) return rt_error(UJ_ERR_INVALID, "uj_program_shape: p, ndim and dims must not be NULL");
  pn_special_t* held;
  uj_status_t s = resolve_parsed(&p, pass, inputs, -1, &held);
  if (s == UJ_OK) s = program_shape(p, pass, inputs, params, output_index, ndim, dims);
  pn_release(held);
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

/* Where a call's temporaries live: host memory, or (cuda set) device
 * memory ordered on the context's stream, so that freeing it right after
 * queueing the kernels is safe. */
typedef struct {
  rt_cuda_ctx_t* cuda;
} run_memory_t;

/* what: names the tensor for the error */
static uj_status_t memory_alloc(const run_memory_t* m, size_t bytes, void** out, const char* what, int t) {
  if (m->cuda) {
    uj_status_t s = rt_cuda_alloc_temp(m->cuda, bytes, out);
    if (s != UJ_OK) rt_error_prefix("%s%d (%zu bytes on the GPU): ", what, t, bytes);
    return s;
  }
  if (!(*out = malloc(bytes ? bytes : 1)))
    return rt_error(UJ_ERR_OOM, "out of memory allocating %s%d (%zu bytes)", what, t, bytes);
  return UJ_OK;
}

static void memory_free(const run_memory_t* m, void* p) {
  if (!m->cuda) free(p);
  else rt_cuda_free_temp(m->cuda, p);
}

/* An output sharing memory with an input is written in place when the IR
 * reads every element before overwriting it, else computed into memory of
 * its own (aside[t] keeps the caller's buffer to copy into). */
static uj_status_t place_aliased_outputs(uj_program_t* p, uj_pass_t pass, const ir_func_t* f,
                                         const run_memory_t* m, ir_buffer_t* buf, void** aside) {
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
      if (!same || !jit_memo_alias_safe(p, pass, f, t, o)) apart = 1;
    }
    if (!apart) continue;
    void* mem = NULL;
    uj_status_t s = memory_alloc(m, tensor_bytes(f, buf, o), &mem, "a copy of output ", f->tensors[o].io_index);
    if (s != UJ_OK) return s;
    aside[o] = buf[o].data;
    buf[o].data = mem;
  }
  return UJ_OK;
}

static const char* device_words(uj_device_t d) { return d == UJ_CUDA ? "on the GPU" : "in host memory"; }

/* The device of the call's tensors: that of the first one given. A tensor
 * on the other device is UJ_ERR_INVALID naming both; missing or malformed
 * tensors are left to the checks that follow. */
static uj_status_t call_device(const uj_program_t* p, uj_pass_t pass, const uj_tensor_t* const* inputs,
                               int input_count, uj_tensor_t* const* outputs, int output_count, uj_device_t* dev) {
  const char* first = NULL;
  int first_index = 0;
  *dev = UJ_CPU;
  for (int side = 0; side < 2; side++) {
    const uj_tensor_t* const* list = side ? (const uj_tensor_t* const*)outputs : inputs;
    /* no further than the program's count: a wrong count is reported later, and the array may be that short */
    int n = side ? output_count : input_count, declared = side ? p->noutputs[pass] : p->ninputs[pass];
    for (int i = 0; list && i < n && i < declared; i++) {
      const uj_tensor_t* t = list[i];
      if (!t || (t->device != UJ_CPU && t->device != UJ_CUDA)) continue;
      if (!first) {
        first = side ? "output" : "input";
        first_index = i;
        *dev = t->device;
      } else if (t->device != *dev) {
        return rt_error(UJ_ERR_INVALID, "%s %d is %s but %s %d is %s: the tensors of one call must share a device",
                        side ? "output" : "input", i, device_words(t->device), first, first_index,
                        device_words(*dev));
      }
    }
  }
  return UJ_OK;
}

/* Memory for the temporaries: those not chain-local (chain_local 0), or
 * those that are (1), which only an engine whose run does not place them
 * itself gets (jit_engine_t.chain_scratch). A 0-d local lives in a
 * register of the kernels that use it; it gets memory on the host only,
 * where the interpreter may run the IR itself (on the GPU, a pair of
 * driver calls each, per call, for nothing). */
static uj_status_t alloc_temporaries(const ir_func_t* f, const run_memory_t* mem, ir_buffer_t* buf, int chain_local) {
  for (int t = 0; t < f->ntensors; t++) {
    const ir_tensor_t* tt = &f->tensors[t];
    if (tt->role != IR_TENSOR_TEMP || tt->noalloc || !tt->chain_local != !chain_local) continue;
    if (tt->local && mem->cuda) continue;
    size_t bytes = (size_t)buf[t].numel * (size_t)uj_dtype_size(tt->dtype);
    uj_status_t s = memory_alloc(mem, bytes, &buf[t].data, "tensor t", t);
    if (s != UJ_OK) return s;
  }
  return UJ_OK;
}

/* 1 when every output of f has no element: the run has nothing to write.
 * An empty tensor's other sizes may still be huge ({2^40, 0}), and the
 * loops over them would run for nothing (rows of zero elements each). */
static int writes_nothing(const ir_func_t* f, const ir_buffer_t* buf) {
  for (int t = 0; t < f->ntensors; t++)
    if (f->tensors[t].role == IR_TENSOR_OUTPUT && buf[t].numel != 0) return 0;
  return 1;
}

/* uj_program_run on a uop program (a parsed one resolved) with engine e. */
static uj_status_t run_on(uj_ctx_t* ctx, const jit_engine_t* e, uj_program_t* p, uj_pass_t pass,
                          const uj_tensor_t* const* inputs, int input_count, const int64_t* params, int param_count,
                          uj_tensor_t* const* outputs, int output_count, jit_served_t* served) {
  *served = (jit_served_t){NULL, e, 1, 0, 0};
  const ir_func_t* f = uop_program_func(p, pass, !ctx->raw_ir);
  if (!f) return UJ_ERR_INVALID;
  /* the engine decides where the tensors must be; the checks say so */
  uj_device_t need = e->device;
  run_memory_t mem = {NULL};
  uj_status_t ps;
  if (need == UJ_CUDA && (ps = rt_cuda_ctx_get(ctx, &mem.cuda)) != UJ_OK) return ps;
  /* a call's bookkeeping lives on the stack when the function is small:
   * dispatching a cached kernel should cost little more than the kernel */
  enum { ON_STACK = 32 };
  ir_buffer_t stack_buf[ON_STACK];
  void* stack_aside[ON_STACK];
  int small = f->ntensors <= ON_STACK;
  ir_buffer_t* buf = small ? memset(stack_buf, 0, sizeof stack_buf[0] * (size_t)f->ntensors) : buffers_new(f);
  if (!buf) return UJ_ERR_OOM;
  uj_status_t s = bind_inputs(f, p, pass, need, inputs, input_count, params, param_count, buf);
  if (s == UJ_OK) s = check_outputs(f, need, outputs, output_count, p->noutputs[pass], buf);
  if (s == UJ_OK && writes_nothing(f, buf)) {
    if (!small) free(buf);
    return UJ_OK;
  }
  if (s == UJ_OK) s = alloc_temporaries(f, &mem, buf, 0);
  void** aside = s != UJ_OK ? NULL
                : small ? memset(stack_aside, 0, sizeof stack_aside[0] * (size_t)f->ntensors)
                        : calloc((size_t)f->ntensors + 1, sizeof *aside);
  if (s == UJ_OK && !aside)
    s = rt_error(UJ_ERR_OOM, "out of memory allocating the aside table of %d tensors (%zu bytes)", f->ntensors,
                 ((size_t)f->ntensors + 1) * sizeof *aside);
  if (s == UJ_OK) s = place_aliased_outputs(p, pass, f, &mem, buf, aside);
  if (s == UJ_OK && !e->get && !e->chooser) {
    s = alloc_temporaries(f, &mem, buf, 1);
    if (s == UJ_OK) s = e->run(ctx, NULL, NULL, f, buf, params); /* it runs the IR itself */
  } else if (s == UJ_OK) {
    jit_state_t* js = jit_state(ctx);
    if (!js) s = UJ_ERR_OOM;
    else if ((s = jit_memo_kernel(ctx, e, p, pass, f, params, buf, js, served)) == UJ_OK) {
      /* the row that runs it: e, or the one a choosing row picked (with no
       * kernel when that one runs the IR itself) */
      if (!served->engine->chain_scratch) s = alloc_temporaries(f, &mem, buf, 1);
      if (s == UJ_OK)
        s = served->engine->run(ctx, js, served->kernel ? jit_cache_value(served->kernel) : NULL, f, buf, params);
      jit_cache_release(js->cache, served->kernel); /* the cache may evict it now */
      served->kernel = NULL;
      if (served->after_run) e->chooser->after_run(ctx, js, f, params, served);
    }
  }
  for (int t = 0; aside && t < f->ntensors; t++) {
    if (!aside[t]) continue;
    size_t bytes = tensor_bytes(f, buf, t);
    if (s == UJ_OK && mem.cuda) s = rt_cuda_copy(mem.cuda, aside[t], 1, buf[t].data, 1, bytes);
    else if (s == UJ_OK) memcpy(aside[t], buf[t].data, bytes);
    memory_free(&mem, buf[t].data);
  }
  if (!small) free(aside);
  for (int t = 0; t < f->ntensors; t++)
    if (f->tensors[t].role == IR_TENSOR_TEMP) memory_free(&mem, buf[t].data);
  if (!small) free(buf);
  return s;
}

uj_status_t uj_program_run(uj_ctx_t* ctx, uj_program_t* p, uj_pass_t pass, const uj_tensor_t* const* inputs,
                           int input_count, const int64_t* params, int param_count, uj_tensor_t* const* outputs,
                           int output_count) {
  if (!ctx || !p) return rt_error(UJ_ERR_INVALID, "uj_program_run: ctx and p must not be NULL");
  if (pass != UJ_FORWARD && pass != UJ_BACKWARD)
    return rt_error(UJ_ERR_INVALID, "pass %d is neither UJ_FORWARD nor UJ_BACKWARD", (int)pass);
  uj_device_t dev = UJ_CPU;
  const jit_engine_t* engine = NULL;
  pn_special_t* held = NULL;
  uj_program_t* given = p;
  jit_served_t served = {NULL, NULL, 1, 0, 0};
  uj_status_t s = call_device(p, pass, inputs, input_count, outputs, output_count, &dev);
  if (s == UJ_OK) s = rt_ctx_settings_check(ctx, 1u << RT_SETTING_ENGINE);
  if (s == UJ_OK) s = jit_engine_for_call(ctx, dev, &engine);
  if (s == UJ_OK) s = rt_ctx_settings_check(ctx, engine->settings);
  if (s == UJ_OK) s = resolve_parsed(&p, pass, inputs, input_count, &held);
  if (s == UJ_OK)
    s = run_on(ctx, engine, p, pass, inputs, input_count, params, param_count, outputs, output_count, &served);
  /* for uj_program_last_run: on the program the caller holds and, for a
   * parsed one, the program built for these inputs */
  if (s == UJ_OK) jit_memo_note_run(given, pass, ctx->id, &served);
  if (s == UJ_OK && p != given) jit_memo_note_run(p, pass, ctx->id, &served);
  pn_release(held);
  return s;
}

/* The IR dumps are the runner's; the others are the code of the engine
 * that writes that kind, which needs no compiler or device to write it. */
static char* program_dump(uj_program_t* p, uj_pass_t pass, uj_dump_t what, const int64_t* params) {
  for (int i = 0; (unsigned)what < 32 && i < RT_ENGINE_COUNT; i++) {
    const jit_engine_t* e = jit_engines[i];
    if (!e || !(e->dumps & 1u << what)) continue;
    const ir_func_t* f = uop_program_func(p, pass, 1);
    return f ? e->dump(f, params, what) : NULL;
  }
  if (what != UJ_DUMP_IR_RAW && what != UJ_DUMP_IR) {
    rt_error(UJ_ERR_UNSUPPORTED, "uj_program_dump: dump %d needs an engine that is not available", (int)what);
    return NULL;
  }
  const ir_func_t* f = uop_program_func(p, pass, what == UJ_DUMP_IR);
  if (!f) return NULL;
  char* text = ir_print(f, params, 0);
  if (!text) rt_error(UJ_ERR_OOM, "uj_program_dump: out of memory printing %d blocks", f->nblocks);
  return text;
}

char* uj_program_dump(uj_ctx_t* ctx, uj_program_t* p, uj_pass_t pass, uj_dump_t what, const int64_t* params) {
  (void)ctx;
  if (!p) {
    rt_error(UJ_ERR_INVALID, "uj_program_dump: p is NULL");
    return NULL;
  }
  pn_special_t* held = NULL;
  if (p->parsed) {
    if (pn_specialize_default(p->parsed, pass, &held) != UJ_OK) return NULL;
    p = held->program;
  }
  char* text = program_dump(p, pass, what, params);
  pn_release(held);
  return text;
}

static uj_status_t compile_cuda(uj_ctx_t* ctx, const uj_program_t* p, uj_pass_t pass, int input_count,
                                const int64_t* params, int param_count, const char* arch, int* kernels, int* reused) {
  const ir_func_t* f = uop_program_func(p, pass, !ctx->raw_ir);
  if (!f) return UJ_ERR_INVALID;
  uj_status_t counts = uop_program_check_counts(p, pass, input_count, param_count, -1);
  if (counts != UJ_OK) return counts;
  if (param_count && !params) return rt_error(UJ_ERR_INVALID, "params is NULL");
  const jit_engine_t* e = jit_engine(UJ_ENGINE_CUDA);
  uj_status_t s = rt_ctx_settings_check(ctx, e->settings);
  if (s != UJ_OK) return s;
  jit_state_t* js = jit_state(ctx);
  if (!js) return UJ_ERR_OOM;
  return e->compile_for(js, f, param_count ? params : NULL, arch, kernels, reused);
}

uj_status_t uj_program_compile_cuda(uj_ctx_t* ctx, uj_program_t* p, uj_pass_t pass, const uj_tensor_t* const* inputs,
                                    int input_count, const int64_t* params, int param_count, const char* arch,
                                    int* kernels, int* reused) {
  if (!ctx || !p) return rt_error(UJ_ERR_INVALID, "uj_program_compile_cuda: ctx and p must not be NULL");
  pn_special_t* held;
  uj_status_t s = resolve_parsed(&p, pass, inputs, input_count, &held);
  if (s == UJ_OK) s = compile_cuda(ctx, p, pass, input_count, params, param_count, arch, kernels, reused);
  pn_release(held);
  return s;
}

uj_status_t uj_program_output_dtype(uj_program_t* p, uj_pass_t pass, const uj_tensor_t* const* inputs,
                                    int output_index, uj_dtype_t* dtype) {
  if (!p || !dtype) return rt_error(UJ_ERR_INVALID, "uj_program_output_dtype: p and dtype must not be NULL");
  pn_special_t* held;
  uj_status_t s = resolve_parsed(&p, pass, inputs, -1, &held);
  const ir_func_t* f = s == UJ_OK ? uop_program_func(p, pass, 0) : NULL;
  if (s == UJ_OK && !f) s = UJ_ERR_INVALID;
  int found = 0;
  for (int t = 0; f && t < f->ntensors && !found; t++)
    if (f->tensors[t].role == IR_TENSOR_OUTPUT && f->tensors[t].io_index == output_index) {
      *dtype = f->tensors[t].dtype;
      found = 1;
    }
  pn_release(held);
  if (s == UJ_OK && !found)
    s = rt_error(UJ_ERR_INVALID, "uj_program_output_dtype: output %d out of range", output_index);
  return s;
}
