/* jit/groups/groups.c: multi-tensor execution (uj_program_run_groups; DESIGN
 * section 7, "Multi-tensor execution").
 *
 * A call checks every group before anything is written. When the program
 * and the groups fit the fast path (jit/groups/plan.c), the checks read
 * what one walk over the groups' tensors gathered (jit/groups/gather.c) and
 * the whole list runs as one pass over its elements: on the CPU one
 * threaded pass through the flat build's compiled kernel (jit/groups/cpu.c),
 * on CUDA one launch over a table of chunks (jit/cuda/cuda_groups.c). The
 * kernel is the program's one build for every size, group count and scalar
 * value, so nothing compiles after the first call. Otherwise each group is
 * checked and run as uj_program_run would. Either way outputs of different
 * groups must not overlap one another or another group's inputs (checked
 * on every call: sorted by address). */
#include <string.h>

#include "../../rt/cuda.h"
#include "groups.h"
#include "../memo.h"

static uj_status_t check_group(uj_program_t* p, const uj_group_t* g, int input_count, const int64_t* params,
                               int output_count) {
  if (input_count && !g->inputs) return rt_error(UJ_ERR_INVALID, "inputs is NULL");
  if (output_count && !g->outputs) return rt_error(UJ_ERR_INVALID, "outputs is NULL");
  uj_status_t s = uop_program_check_counts(p, UJ_FORWARD, input_count, -1, output_count);
  if (s != UJ_OK) return s;
  for (int o = 0; o < output_count; o++) {
    const uj_tensor_t* t = g->outputs[o];
    if (!t) return rt_error(UJ_ERR_INVALID, "output %d is NULL", o);
    int ndim = 0;
    int64_t dims[UJ_MAX_DIMS];
    uj_dtype_t dtype;
    uj_status_t s = uj_program_shape(p, UJ_FORWARD, g->inputs, params, o, &ndim, dims);
    if (s == UJ_OK) s = uj_program_output_dtype(p, UJ_FORWARD, g->inputs, o, &dtype);
    if (s != UJ_OK) return s;
    if (t->dtype != dtype)
      return rt_error(UJ_ERR_INVALID, "output %d: expected dtype %s, got %s", o, uj_dtype_name(dtype),
                      uj_dtype_name(t->dtype));
    if (t->ndim != ndim)
      return rt_error(UJ_ERR_SHAPE, "output %d: expected rank %d, got %d", o, ndim, t->ndim);
    for (int a = 0; a < ndim; a++)
      if (t->dims[a] != dims[a])
        return rt_error(UJ_ERR_SHAPE, "output %d, axis %d: expected size %lld, got %lld", o, a,
                        (long long)dims[a], (long long)t->dims[a]);
  }
  return UJ_OK;
}

static uj_status_t check_all(uj_program_t* p, const uj_group_t* groups, int group_count, int input_count,
                             const int64_t* params, int output_count) {
  for (int i = 0; i < group_count; i++) {
    uj_status_t s = check_group(p, &groups[i], input_count, params, output_count);
    if (s != UJ_OK) {
      rt_error_prefix("group %d: ", i);
      return s;
    }
  }
  return UJ_OK;
}

/* The per-group path: another kind of program, broadcasting between a
 * group's tensors, dtypes that differ between groups, an output sharing
 * part of an input, the interpreter. uj_program_run shares the program's
 * compiled kernels between groups of the same build. */
static uj_status_t run_one_by_one(uj_ctx_t* ctx, uj_program_t* p, const uj_group_t* groups, int group_count,
                                  int input_count, const int64_t* params, int param_count, int output_count) {
  for (int i = 0; i < group_count; i++) {
    uj_status_t s = uj_program_run(ctx, p, UJ_FORWARD, groups[i].inputs, input_count, params, param_count,
                                   groups[i].outputs, output_count);
    if (s != UJ_OK) {
      rt_error_prefix("group %d: ", i);
      return s;
    }
  }
  return UJ_OK;
}

/* The CPU fast path through engine row e: *ran 0 when the row serves this
 * call without a compiled kernel (the interpreter, or tiered AUTO's pick
 * of it), for the caller to run the groups one by one. */
static uj_status_t run_cpu(uj_ctx_t* ctx, const jit_engine_t* e, uj_program_t* given, groups_plan_t* plan,
                           const uj_group_t* groups, int group_count, const int64_t* params, int* ran) {
  *ran = 0;
  if (!e->get && !e->chooser) return UJ_OK;
  jit_state_t* js = jit_state(ctx);
  if (!js) return UJ_ERR_OOM;
  const ir_func_t* f = plan->f;
  ir_buffer_t buf[GROUPS_MAX_TENSORS];
  int64_t total = plan->total;
  for (int t = 0; t < f->ntensors; t++) {
    buf[t] = (ir_buffer_t){{0}, 1, NULL};
    if (f->tensors[t].ndim == 1) buf[t].dims[0] = buf[t].numel = plan->t_kind[t] == GK_REDUCED ? 1 : total;
  }
  jit_served_t served;
  uj_status_t s = jit_memo_kernel(ctx, e, plan->flat, UJ_FORWARD, f, params, buf, js, &served);
  if (s != UJ_OK || !served.kernel) return s;
  s = groups_cpu_run(js, jit_blocks_of(served.kernel), plan, groups, group_count, params);
  jit_cache_release(js->cache, served.kernel);
  served.kernel = NULL;
  if (s != UJ_OK) return s;
  *ran = 1;
  if (served.after_run) e->chooser->after_run(ctx, js, f, params, &served);
  jit_memo_note_run(given, UJ_FORWARD, ctx->id, &served);
  if (plan->flat != given) jit_memo_note_run(plan->flat, UJ_FORWARD, ctx->id, &served);
  return UJ_OK;
}

uj_status_t uj_program_run_groups(uj_ctx_t* ctx, uj_program_t* p, const uj_group_t* groups, int group_count,
                                  int input_count, const int64_t* params, int param_count, int output_count) {
  if (!ctx || !p) return rt_error(UJ_ERR_INVALID, "uj_program_run_groups: ctx and p must not be NULL");
  if (group_count < 0) return rt_error(UJ_ERR_INVALID, "group_count is %d, below 0", group_count);
  if (group_count && !groups) return rt_error(UJ_ERR_INVALID, "groups is NULL for %d groups", group_count);
  if (group_count == 0) return UJ_OK;
  uj_status_t s = uop_program_check_counts(p, UJ_FORWARD, input_count, -1, output_count);
  if (s != UJ_OK) return s;
  groups_plan_t plan;
  int fast = 0;
  s = groups_plan_make(ctx, p, groups, group_count, params, &plan, &fast);
  uj_device_t dev = fast ? (uj_device_t)groups[0].inputs[0]->device : UJ_CPU;
  const jit_engine_t* engine = NULL;
  if (s == UJ_OK && fast && (param_count != plan.flat->nparams || (param_count && !params))) fast = 0;
  if (s == UJ_OK && fast) fast = groups_check_fast(&plan, groups, group_count, dev);
  if (s == UJ_OK && !fast) s = check_all(p, groups, group_count, input_count, params, output_count);
  if (s == UJ_OK) s = groups_check_overlap(&plan.gather, groups, group_count, input_count, output_count);
  if (s == UJ_OK && fast) s = rt_ctx_settings_check(ctx, 1u << RT_SETTING_ENGINE);
  if (s == UJ_OK && fast) s = jit_engine_for_call(ctx, dev, &engine);
  if (s == UJ_OK && fast) s = rt_ctx_settings_check(ctx, engine->settings);
  /* an engine for the other device: the per-group path says why it cannot run */
  if (s == UJ_OK && fast && engine->device != dev) fast = 0;
  int ran = 0;
  if (s == UJ_OK && fast && engine->run_groups)
    s = engine->run_groups(ctx, &plan, groups, group_count, params, &ran);
  else if (s == UJ_OK && fast && dev == UJ_CPU)
    s = run_cpu(ctx, engine, p, &plan, groups, group_count, params, &ran);
  jit_state_t* js = s == UJ_OK && ran ? jit_state_existing(ctx) : NULL;
  if (js) groups_memo_keep(&js->groups_memo, &js->groups_memo_free, groups, group_count, input_count, output_count,
                           &plan.gather);
  groups_plan_release(&plan);
  if (s == UJ_OK && !ran)
    s = run_one_by_one(ctx, p, groups, group_count, input_count, params, param_count, output_count);
  return s;
}

int jit_groups_fast(uj_ctx_t* ctx, uj_program_t* p, const uj_group_t* groups, int group_count,
                    const int64_t* params) {
  int fast = 0;
  groups_plan_t plan;
  if (group_count < 1 || groups_plan_make(ctx, p, groups, group_count, params, &plan, &fast) != UJ_OK)
    return 0;
  if (fast) fast = groups_check_fast(&plan, groups, group_count, groups[0].inputs[0]->device);
  groups_plan_release(&plan);
  return fast;
}

uj_status_t uj_program_compile_groups_cuda(uj_ctx_t* ctx, uj_program_t* p, const uj_group_t* groups,
                                           int group_count, int input_count, const int64_t* params,
                                           int param_count, int output_count, const char* arch, int* kernels,
                                           int* reused) {
  if (kernels) *kernels = 0;
  if (reused) *reused = 0;
  if (!ctx || !p || !arch) return rt_error(UJ_ERR_INVALID, "uj_program_compile_groups_cuda: ctx, p and arch must not be NULL");
  if (group_count < 1 || !groups) return rt_error(UJ_ERR_INVALID, "%d groups (NULL or fewer than 1)", group_count);
  uj_status_t s = uop_program_check_counts(p, UJ_FORWARD, input_count, -1, output_count);
  if (s != UJ_OK) return s;
  groups_plan_t plan;
  int fast = 0;
  s = groups_plan_make(ctx, p, groups, group_count, params, &plan, &fast);
  if (s == UJ_OK && fast && (param_count != plan.flat->nparams || (param_count && !params))) fast = 0;
  if (s == UJ_OK && fast) fast = groups_check_fast(&plan, groups, group_count, groups[0].inputs[0]->device);
  if (s == UJ_OK && !fast) s = check_all(p, groups, group_count, input_count, params, output_count);
  if (s == UJ_OK && !fast)
    s = rt_error(UJ_ERR_UNSUPPORTED, "these groups do not take the multi-tensor path (they would run one by one)");
  const jit_engine_t* cuda = jit_engine(UJ_ENGINE_CUDA);
  if (s == UJ_OK && !cuda->compile_groups_for)
    s = rt_error(UJ_ERR_UNSUPPORTED, "the CUDA engine compiles no multi-tensor kernels in this build");
  if (s == UJ_OK) s = cuda->compile_groups_for(ctx, &plan, params, arch, reused);
  if (s == UJ_OK && kernels) *kernels = plan.nred ? 2 : 1;
  groups_plan_release(&plan);
  return s;
}
