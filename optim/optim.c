/* optim/optim.c: the optimizer API (include/uopjit_optim.h). An
 * optimizer is a parsed updater (optim/spec.c) plus the values of its
 * hyperparameters and its step count. A step (uj_optim_step):
 *   1. checks every group (shapes, dtypes, hyperparameter values) before
 *      anything is written;
 *   2. with a loss scale or a clip norm set, makes the gradient pass
 *      (optim/amp.c) and stops, writing nothing, when a gradient is not
 *      finite; else gscale = clip coefficient / loss scale;
 *   3. computes the step scalars in f64 (scalar_values);
 *   4. runs each pass over all groups in one uj_program_run_groups call
 *      (run_pass), on what optim/bindings.c binds; with half copies
 *      (bf16/f16 parameters with f32 masters) the pass that writes p last
 *      runs its variant that also writes them.
 * Scalars are run-time inputs, so nothing recompiles as t, the learning rate
 * or the groups change. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../rt/rt.h"
#include "optim.h"

struct uj_optim {
  char* name;
  optim_spec_t spec;
  /* per scalar of the spec: a shared value, or per-group values */
  double* value;
  int* has_value;
  double** per_group;
  int* per_group_count;
  int64_t step;
  double grad_scale, max_norm;
  uj_ctx_t* host_ctx; /* the interpreter, for [scalars] */
  uj_program_t* grad_program;
  optim_bindings_t* kept; /* the last CPU step's bindings (optim/bindings.c) */
};

int uj_optim_builtin_count(void) { return optim_builtin_count(); }

const char* uj_optim_builtin_name(int i) {
  const optim_builtin_t* b = optim_builtin_at(i);
  return b ? b->name : NULL;
}

const char* uj_optim_builtin_text(const char* name) {
  const optim_builtin_t* b = optim_builtin_find(name);
  return b ? b->text : NULL;
}

void uj_optim_free(uj_optim_t* opt) {
  if (!opt) return;
  for (int i = 0; i < opt->spec.scalar_count; i++) free(opt->per_group ? opt->per_group[i] : NULL);
  free(opt->per_group), free(opt->per_group_count), free(opt->value), free(opt->has_value);
  optim_spec_release(&opt->spec);
  uj_program_free(opt->grad_program);
  optim_bind_forget(&opt->kept);
  uj_ctx_free(opt->host_ctx);
  free(opt->name);
  free(opt);
}

uj_status_t uj_optim_new_source(const char* name, const char* text, uj_optim_t** out) {
  if (!out) return rt_error(UJ_ERR_INVALID, "uj_optim_new_source: out is NULL");
  *out = NULL;
  if (!name || !text) return rt_error(UJ_ERR_INVALID, "uj_optim_new_source: name and text must not be NULL");
  uj_optim_t* opt = calloc(1, sizeof *opt);
  if (!opt) return rt_error(UJ_ERR_OOM, "out of memory making optimizer %s", name);
  uj_status_t s = optim_spec_parse(text, &opt->spec);
  if (s != UJ_OK) {
    rt_error_prefix("updater %s: ", name);
    free(opt);
    return s;
  }
  int n = opt->spec.scalar_count;
  opt->name = strdup(name);
  opt->value = calloc((size_t)n + 1, sizeof(double));
  opt->has_value = calloc((size_t)n + 1, sizeof(int));
  opt->per_group = calloc((size_t)n + 1, sizeof(double*));
  opt->per_group_count = calloc((size_t)n + 1, sizeof(int));
  opt->host_ctx = uj_ctx_new();
  if (!opt->name || !opt->value || !opt->has_value || !opt->per_group || !opt->per_group_count || !opt->host_ctx) {
    uj_optim_free(opt);
    return rt_error(UJ_ERR_OOM, "out of memory making optimizer %s", name);
  }
  if ((s = uj_ctx_set_engine(opt->host_ctx, UJ_ENGINE_INTERP)) != UJ_OK) {
    uj_optim_free(opt);
    return s;
  }
  for (int i = 0; i < n; i++) {
    opt->value[i] = opt->spec.scalar_list[i].default_value;
    opt->has_value[i] = opt->spec.scalar_list[i].has_default;
  }
  *out = opt;
  return UJ_OK;
}

uj_status_t uj_optim_new(const char* name, uj_optim_t** out) {
  if (!out) return rt_error(UJ_ERR_INVALID, "uj_optim_new: out is NULL");
  *out = NULL;
  const optim_builtin_t* b = optim_builtin_find(name);
  if (!b) {
    rt_buf_t known = {0};
    for (int i = 0; i < optim_builtin_count(); i++) rt_buf_printf(&known, "%s%s", i ? ", " : "", optim_builtin_at(i)->name);
    char* list = rt_buf_take(&known);
    uj_status_t s = rt_error(UJ_ERR_INVALID, "unknown updater \"%s\"; the built-in ones are %s", name ? name : "(null)",
                             list ? list : "");
    free(list);
    return s;
  }
  return uj_optim_new_source(b->name, b->text, out);
}

const char* uj_optim_name(const uj_optim_t* opt) { return opt ? opt->name : NULL; }
const char* uj_optim_text(const uj_optim_t* opt) { return opt ? opt->spec.text : NULL; }
int uj_optim_state_count(const uj_optim_t* opt) { return opt ? opt->spec.state_count : -1; }

const char* uj_optim_state_name(const uj_optim_t* opt, int i) {
  return opt && i >= 0 && i < opt->spec.state_count ? opt->spec.states[i] : NULL;
}

/* The index in the spec's scalars of hyperparameter i, or -1. */
static int hparam_scalar(const uj_optim_t* opt, int i) {
  for (int k = 0, seen = 0; opt && k < opt->spec.scalar_count; k++)
    if (opt->spec.scalar_list[k].kind == OPTIM_HPARAM && seen++ == i) return k;
  return -1;
}

int uj_optim_hparam_count(const uj_optim_t* opt) {
  if (!opt) return -1;
  int n = 0;
  while (hparam_scalar(opt, n) >= 0) n++;
  return n;
}

const char* uj_optim_hparam_name(const uj_optim_t* opt, int i) {
  int k = i >= 0 ? hparam_scalar(opt, i) : -1;
  return k >= 0 ? opt->spec.scalar_list[k].name : NULL;
}

static uj_status_t find_hparam(const uj_optim_t* opt, const char* name, int* index) {
  if (!opt || !name) return rt_error(UJ_ERR_INVALID, "the optimizer and the hyperparameter's name must not be NULL");
  int k = optim_spec_scalar(&opt->spec, name);
  if (k >= 0 && opt->spec.scalar_list[k].kind == OPTIM_HPARAM) return *index = k, UJ_OK;
  rt_buf_t known = {0};
  for (int i = 0; uj_optim_hparam_name(opt, i); i++) rt_buf_printf(&known, "%s%s", i ? ", " : "", uj_optim_hparam_name(opt, i));
  char* list = rt_buf_take(&known);
  uj_status_t s = rt_error(UJ_ERR_INVALID, "updater %s has no hyperparameter \"%s\"; it has %s", opt->name, name,
                           list && *list ? list : "none");
  free(list);
  return s;
}

uj_status_t uj_optim_set(uj_optim_t* opt, const char* name, double value) {
  int k;
  uj_status_t s = find_hparam(opt, name, &k);
  if (s != UJ_OK) return s;
  free(opt->per_group[k]);
  opt->per_group[k] = NULL, opt->per_group_count[k] = 0;
  opt->value[k] = value, opt->has_value[k] = 1;
  return UJ_OK;
}

uj_status_t uj_optim_set_per_group(uj_optim_t* opt, const char* name, const double* values, int count) {
  int k;
  uj_status_t s = find_hparam(opt, name, &k);
  if (s != UJ_OK) return s;
  if (count < 1 || !values) return rt_error(UJ_ERR_INVALID, "%s: %d per-group values (NULL or fewer than 1)", name, count);
  double* copy = malloc(sizeof(double) * (size_t)count);
  if (!copy) return rt_error(UJ_ERR_OOM, "out of memory keeping %d values of %s", count, name);
  memcpy(copy, values, sizeof(double) * (size_t)count);
  free(opt->per_group[k]);
  opt->per_group[k] = copy, opt->per_group_count[k] = count;
  return UJ_OK;
}

uj_status_t uj_optim_get(const uj_optim_t* opt, const char* name, double* value) {
  int k;
  uj_status_t s = find_hparam(opt, name, &k);
  if (s != UJ_OK) return s;
  if (opt->per_group[k]) return rt_error(UJ_ERR_INVALID, "%s has one value per group", name);
  if (!opt->has_value[k]) return rt_error(UJ_ERR_INVALID, "%s has no value: it has no default and was not set", name);
  if (value) *value = opt->value[k];
  return UJ_OK;
}

int64_t uj_optim_step_count(const uj_optim_t* opt) { return opt ? opt->step : -1; }

/* The next step runs with t = count + 1, computed in int64: a count of
 * INT64_MAX has no next step, and is refused here rather than left to
 * overflow (undefined behaviour) in the step that would compute it. */
static uj_status_t no_next_step(int64_t count) {
  return rt_error(UJ_ERR_INVALID, "the step count is %lld: the next step's t = count + 1 would overflow int64",
                  (long long)count);
}

uj_status_t uj_optim_set_step_count(uj_optim_t* opt, int64_t count) {
  if (!opt) return rt_error(UJ_ERR_INVALID, "uj_optim_set_step_count: opt is NULL");
  if (count < 0) return rt_error(UJ_ERR_INVALID, "the step count is %lld, below 0", (long long)count);
  if (count == INT64_MAX) return no_next_step(count);
  opt->step = count;
  return UJ_OK;
}

uj_status_t uj_optim_set_grad_scale(uj_optim_t* opt, double scale) {
  if (!opt) return rt_error(UJ_ERR_INVALID, "uj_optim_set_grad_scale: opt is NULL");
  if (!(scale >= 0) || !isfinite(scale)) return rt_error(UJ_ERR_INVALID, "the loss scale is %g: expected a finite value >= 0", scale);
  opt->grad_scale = scale;
  return UJ_OK;
}

uj_status_t uj_optim_set_max_grad_norm(uj_optim_t* opt, double max_norm) {
  if (!opt) return rt_error(UJ_ERR_INVALID, "uj_optim_set_max_grad_norm: opt is NULL");
  if (!(max_norm >= 0) || !isfinite(max_norm))
    return rt_error(UJ_ERR_INVALID, "the clip norm is %g: expected a finite value >= 0", max_norm);
  opt->max_norm = max_norm;
  return UJ_OK;
}

/* ---- a step -------------------------------------------------------------------------- */

static int same_shape(const uj_tensor_t* a, const uj_tensor_t* b) {
  if (a->ndim != b->ndim) return 0;
  for (int k = 0; k < a->ndim; k++)
    if (a->dims[k] != b->dims[k]) return 0;
  return 1;
}

static const char* device_name(int device) { return device == UJ_CPU ? "host memory" : "GPU memory"; }

/* device: group 0's parameter's; every tensor of a step must be there. */
static uj_status_t check_tensor(const uj_tensor_t* t, const uj_tensor_t* param, uj_dtype_t dtype, int device,
                                const char* what) {
  if (!t) return rt_error(UJ_ERR_INVALID, "%s is NULL", what);
  if (t->dtype != dtype)
    return rt_error(UJ_ERR_INVALID, "%s has dtype %s, expected %s", what, uj_dtype_name(t->dtype), uj_dtype_name(dtype));
  if ((int)t->device != device)
    return rt_error(UJ_ERR_INVALID, "%s is in %s, group 0's parameter in %s: a step's tensors are all on one device",
                    what, device_name(t->device), device_name(device));
  if (t->ndim < 0 || t->ndim > UJ_MAX_DIMS) return rt_error(UJ_ERR_INVALID, "%s has rank %d", what, t->ndim);
  if (param && !same_shape(t, param)) return rt_error(UJ_ERR_SHAPE, "%s's shape differs from the parameter's", what);
  /* Sizes and bytes must fit int64 with zeros left out: an empty tensor
   * of {0, INT64_MAX, INT64_MAX} has no elements, but the passes' kernels
   * multiply its other sizes all the same (strides, offsets). Refused
   * here, before anything is written, naming the group's tensor. */
  int64_t n = uj_dtype_size(t->dtype);
  for (int a = 0; a < t->ndim; a++) {
    if (t->dims[a] < 0)
      return rt_error(UJ_ERR_SHAPE, "%s: axis %d has negative size %lld", what, a, (long long)t->dims[a]);
    if (t->dims[a] && __builtin_mul_overflow(n, t->dims[a], &n))
      return rt_error(UJ_ERR_SHAPE,
                      "%s: axis %d of size %lld: its sizes (zeros left out) times %d bytes overflow int64", what, a,
                      (long long)t->dims[a], uj_dtype_size(t->dtype));
  }
  return UJ_OK;
}

static int is_half(uj_dtype_t dtype) { return dtype == UJ_BF16 || dtype == UJ_F16; }

/* dtype: the first group's parameter's, f32, f64, bf16 or f16 (checked by
 * the caller; a bf16 or f16 parameter has gradients and states of its
 * dtype, which the passes compute in f32 and round once, where stored);
 * half: the first group's half copy's dtype, or -1 for none. */
static uj_status_t check_group(const uj_optim_t* opt, const uj_optim_group_t* g, uj_dtype_t dtype, int half,
                               int device) {
  uj_status_t s = check_tensor(g->param, NULL, dtype, device, "the parameter");
  /* a bf16/f16 gradient is widened where it is read; with f32 parameters
   * only (an f64 reference reads f64 gradients) */
  uj_dtype_t grad_dtype = g->grad && dtype == UJ_F32 && is_half(g->grad->dtype) ? g->grad->dtype : dtype;
  if (s == UJ_OK) s = check_tensor(g->grad, g->param, grad_dtype, device, "the gradient g");
  if (s == UJ_OK && opt->spec.state_count && !g->state)
    s = rt_error(UJ_ERR_INVALID, "state is NULL: updater %s needs %d state tensors", opt->name, opt->spec.state_count);
  for (int k = 0; k < opt->spec.state_count && s == UJ_OK; k++) {
    char what[96];
    snprintf(what, sizeof what, "state %s", opt->spec.states[k]);
    s = check_tensor(g->state[k], g->param, dtype, device, what);
  }
  if (s == UJ_OK && (half < 0) != !g->param_half)
    s = rt_error(UJ_ERR_INVALID, "%s a half copy param_half and group 0 %s: every group has one or none does",
                 g->param_half ? "has" : "has no", half < 0 ? "has none" : "has one");
  if (s == UJ_OK && half >= 0) s = check_tensor(g->param_half, g->param, (uj_dtype_t)half, device, "the half copy param_half");
  return s;
}

static uj_status_t check_values(const uj_optim_t* opt, int group_count) {
  for (int k = 0; k < opt->spec.scalar_count; k++) {
    if (opt->spec.scalar_list[k].kind != OPTIM_HPARAM) continue;
    const char* name = opt->spec.scalar_list[k].name;
    if (opt->per_group[k] && opt->per_group_count[k] != group_count)
      return rt_error(UJ_ERR_INVALID, "%s has %d per-group values, the step has %d groups", name, opt->per_group_count[k],
                      group_count);
    if (!opt->per_group[k] && !opt->has_value[k])
      return rt_error(UJ_ERR_INVALID, "hyperparameter %s has no value: set it with uj_optim_set", name);
  }
  return UJ_OK;
}

/* Fills values[k*G + i] for every scalar k and group i (shared scalars: at
 * i = 0 only, per_group[k] = 0). [scalars] runs in f64 on 0-d tensors,
 * once, or once per group when it reads a per-group hyperparameter. */
static uj_status_t scalar_values(uj_optim_t* opt, int G, int64_t t, double gscale, double* values, int* varies) {
  const optim_spec_t* sp = &opt->spec;
  int per_group_scalars = 0;
  for (int k = 0; k < sp->scalar_count; k++) {
    varies[k] = opt->per_group[k] != NULL;
    for (int i = 0; i < (varies[k] ? G : 1); i++) {
      double v = 0;
      switch (sp->scalar_list[k].kind) {
        case OPTIM_HPARAM: v = varies[k] ? opt->per_group[k][i] : opt->value[k]; break;
        case OPTIM_STEP: v = (double)t; break;
        case OPTIM_GSCALE: v = gscale; break;
        case OPTIM_DERIVED: break;
      }
      values[(size_t)k * G + i] = v;
    }
  }
  if (!sp->scalars) return UJ_OK;
  for (int i = 0; i < sp->scalars_input_count; i++) per_group_scalars |= varies[sp->scalars_inputs[i].index];
  for (int o = 0; o < sp->scalars_output_count; o++) varies[sp->scalars_outputs[o].index] = per_group_scalars;
  int nin = sp->scalars_input_count, nout = sp->scalars_output_count;
  uj_tensor_t* tensors = calloc((size_t)(nin + nout) + 1, sizeof(uj_tensor_t));
  void** ptrs = calloc((size_t)(nin + nout) + 1, sizeof(void*));
  double* cells = calloc((size_t)(nin + nout) + 1, sizeof(double));
  if (!tensors || !ptrs || !cells) {
    free(tensors), free(ptrs), free(cells);
    return rt_error(UJ_ERR_OOM, "out of memory computing the step scalars");
  }
  for (int j = 0; j < nin + nout; j++) {
    tensors[j] = (uj_tensor_t){&cells[j], UJ_F64, UJ_CPU, 0, {0}};
    ptrs[j] = &tensors[j];
  }
  uj_status_t s = UJ_OK;
  for (int i = 0; i < (per_group_scalars ? G : 1) && s == UJ_OK; i++) {
    for (int j = 0; j < nin; j++) {
      int k = sp->scalars_inputs[j].index;
      cells[j] = values[(size_t)k * G + (varies[k] ? i : 0)];
    }
    s = uj_program_run(opt->host_ctx, sp->scalars, UJ_FORWARD, (const uj_tensor_t* const*)ptrs, nin, NULL, 0,
                       (uj_tensor_t* const*)(ptrs + nin), nout);
    for (int o = 0; o < nout && s == UJ_OK; o++) values[(size_t)sp->scalars_outputs[o].index * G + i] = cells[nin + o];
  }
  if (s != UJ_OK) rt_error_prefix("updater %s, [scalars]: ", opt->name);
  free(tensors), free(ptrs), free(cells);
  return s;
}

/* Scalars go in as 0-d f64 tensors (one tensor for all groups when shared,
 * so that the multi-tensor execution sees one value), per-group sums as
 * small tensors the optimizer owns, all in one block of cells that is
 * mirrored on the GPU for a step on GPU tensors (optim/cells.c). */
static uj_status_t run_pass(uj_ctx_t* ctx, const uj_optim_t* opt, int k, optim_bindings_t* b) {
  const optim_pass_t* pass = &opt->spec.passes[k];
  int makes_sums = 0;
  uj_status_t s = uj_program_run_groups(ctx, b->program[k], b->groups[k], b->G, pass->input_count, NULL, 0,
                                        b->output_count[k]);
  if (s != UJ_OK) rt_error_prefix("updater %s, [%s]: ", opt->name, k == 0 ? "update" : "apply");
  for (int o = 0; o < pass->output_count; o++) makes_sums |= pass->outputs[o].role == OPTIM_SUM;
  if (s != UJ_OK || !makes_sums) return s;
  /* the sums as later passes read them: f64 scalars (from the GPU and
   * back there: a few values per group) */
  if ((s = optim_cells_sync(&b->cells, b->at_sums, b->sums_bytes, 0)) != UJ_OK) return s;
  const double* sums = (const double*)(b->cells.host + b->at_sums);
  double* sums_in = (double*)(b->cells.host + b->at_sums_in);
  for (int o = 0; o < pass->output_count; o++) {
    if (pass->outputs[o].role != OPTIM_SUM) continue;
    for (int i = 0; i < b->G; i++) {
      size_t at = (size_t)pass->outputs[o].index * b->G + i;
      float narrow;
      memcpy(&narrow, &sums[at], sizeof narrow);
      sums_in[at] = b->sum_outputs[at].dtype == UJ_F64 ? sums[at] : (double)narrow;
    }
  }
  return optim_cells_sync(&b->cells, b->at_sums_in, b->sums_in_bytes, 1);
}

uj_status_t uj_optim_step(uj_ctx_t* ctx, uj_optim_t* opt, const uj_optim_group_t* groups, int group_count,
                          uj_optim_report_t* report) {
  if (!ctx || !opt) return rt_error(UJ_ERR_INVALID, "uj_optim_step: ctx and opt must not be NULL");
  /* reached by stepping from INT64_MAX - 1: nothing is written */
  if (opt->step == INT64_MAX) return no_next_step(opt->step);
  if (group_count < 0) return rt_error(UJ_ERR_INVALID, "group_count is %d, below 0", group_count);
  if (group_count && !groups) return rt_error(UJ_ERR_INVALID, "groups is NULL for %d groups", group_count);
  uj_dtype_t dtype = group_count && groups[0].param ? groups[0].param->dtype : UJ_F32;
  if (dtype != UJ_F32 && dtype != UJ_F64 && !is_half(dtype))
    return rt_error(UJ_ERR_INVALID, "group 0: the parameter has dtype %s, expected f32, f64, bf16 or f16",
                    uj_dtype_name(dtype));
  int half = group_count && groups[0].param_half ? (int)groups[0].param_half->dtype : -1;
  if (half >= 0 && !is_half((uj_dtype_t)half))
    return rt_error(UJ_ERR_INVALID, "group 0: the half copy param_half has dtype %s, expected bf16 or f16",
                    uj_dtype_name((uj_dtype_t)half));
  if (half >= 0 && dtype != UJ_F32)
    return rt_error(UJ_ERR_INVALID, "group 0: a half copy param_half goes with an f32 master parameter; the "
                    "parameter is %s", uj_dtype_name(dtype));
  for (int k = 0; k < opt->spec.pass_count && is_half(dtype); k++)
    if (!opt->spec.passes[k].direct_program[optim_half_index(dtype)])
      return rt_error(UJ_ERR_INVALID, "group 0: the parameter is %s, and updater %s declares a dtype of its own for "
                      "p, g or a state; step f32 parameters (with a half copy param_half)", uj_dtype_name(dtype),
                      opt->name);
  int device = group_count && groups[0].param ? (int)groups[0].param->device : UJ_CPU;
  if (device != UJ_CPU && device != UJ_CUDA)
    return rt_error(UJ_ERR_INVALID, "group 0: the parameter's device is %d, not UJ_CPU or UJ_CUDA", device);
  for (int i = 0; i < group_count; i++) {
    uj_status_t s = check_group(opt, &groups[i], dtype, half, device);
    if (s != UJ_OK) {
      rt_error_prefix("group %d: ", i);
      return s;
    }
  }
  uj_status_t s = check_values(opt, group_count);
  if (s != UJ_OK) return s;
  uj_optim_report_t r = {0, -1, 1, opt->step};
  int G = group_count;
  if (opt->grad_scale > 0 || opt->max_norm > 0) {
    double inv = opt->grad_scale > 0 ? 1.0 / opt->grad_scale : 1.0;
    const uj_tensor_t** grads = calloc((size_t)G + 1, sizeof(uj_tensor_t*));
    if (!grads) return rt_error(UJ_ERR_OOM, "out of memory listing %d gradients", G);
    for (int i = 0; i < G; i++) grads[i] = groups[i].grad;
    int finite = 1;
    s = optim_grad_pass(ctx, &opt->grad_program, grads, G, inv, &finite, &r.grad_norm);
    free(grads);
    if (s != UJ_OK) return s;
    if (!finite) {
      r.skipped = 1;
      if (report) *report = r;
      return UJ_OK;
    }
    r.gscale = inv * optim_clip_coefficient(r.grad_norm, opt->max_norm);
  }
  int64_t t = opt->step + 1;
  int S = opt->spec.scalar_count;
  double* values = calloc((size_t)S * G + 1, sizeof(double));
  int* varies = calloc((size_t)S + 1, sizeof(int));
  if (!values || !varies) {
    free(values), free(varies);
    return rt_error(UJ_ERR_OOM, "out of memory for the step scalars of %d groups", G);
  }
  optim_bindings_t* b = NULL;
  s = G ? scalar_values(opt, G, t, r.gscale, values, varies) : UJ_OK;
  if (s == UJ_OK && G) s = optim_bind(&opt->kept, ctx, &opt->spec, groups, G, values, varies, &b);
  if (s == UJ_OK && G) {
    for (int k = 0; k < opt->spec.pass_count && s == UJ_OK; k++) s = run_pass(ctx, opt, k, b);
    optim_unbind(opt->kept, b);
  }
  free(values), free(varies);
  if (s != UJ_OK) return s;
  opt->step = t;
  r.t = t;
  if (report) *report = r;
  return UJ_OK;
}

/* ---- CUDA kernels without a GPU ----------------------------------------------------------- */

/* Compiles the multi-tensor kernels of every pass, and of the gradient
 * pass, as a step over two probe groups (ranks 1 and 2) with gradients and
 * half copies of dtype `half` (UJ_F32: f32 gradients and none), or with
 * `direct`, parameters, gradients and states of dtype `half` stepped
 * without a master, would launch them: the same bindings a step makes, in
 * host memory standing in for the GPU's. */
/* A tensor over the next 4 cells at *at: of rank 1 (3 elements) or 2
 * (2 x 2), or with every size 1 (a per-group sum). */
static uj_tensor_t probe_tensor(uj_dtype_t dtype, int ndim, int reduced, double** at) {
  uj_tensor_t t = {*at, dtype, UJ_CPU, ndim, {reduced ? 1 : ndim == 1 ? 3 : 2, reduced ? 1 : 2}};
  *at += 4;
  return t;
}

static uj_status_t compile_variant(uj_ctx_t* ctx, uj_optim_t* opt, uj_dtype_t half, int direct, const char* arch,
                                   int* kernels) {
  enum { PROBES = 2, CELLS = 4 };
  int ns = opt->spec.state_count;
  uj_tensor_t p[PROBES], g[PROBES], h[PROBES], bad[PROBES], norm[PROBES];
  uj_tensor_t* states = calloc((size_t)PROBES * ns + 1, sizeof(uj_tensor_t));
  uj_tensor_t** state_ptr = calloc((size_t)PROBES * ns + 1, sizeof(uj_tensor_t*));
  double* cells = calloc((size_t)PROBES * (ns + 5) * CELLS, sizeof(double)); /* room for f64 too */
  double* values = calloc((size_t)opt->spec.scalar_count * PROBES + 1, sizeof(double));
  int* varies = calloc((size_t)opt->spec.scalar_count + 1, sizeof(int));
  uj_status_t s = states && state_ptr && cells && values && varies ? UJ_OK : rt_error(UJ_ERR_OOM, "out of memory for probes");
  uj_optim_group_t groups[PROBES];
  for (int i = 0; i < PROBES && s == UJ_OK; i++) {
    double* at = cells + (size_t)i * (ns + 5) * CELLS;
    int ndim = i + 1;
    uj_dtype_t pd = direct ? half : UJ_F32;
    p[i] = probe_tensor(pd, ndim, 0, &at), g[i] = probe_tensor(half, ndim, 0, &at);
    h[i] = probe_tensor(half, ndim, 0, &at);
    bad[i] = probe_tensor(UJ_F32, ndim, 1, &at), norm[i] = probe_tensor(UJ_F32, ndim, 1, &at);
    for (int k = 0; k < ns; k++) states[i * ns + k] = probe_tensor(pd, ndim, 0, &at), state_ptr[i * ns + k] = &states[i * ns + k];
    groups[i] = (uj_optim_group_t){&p[i], &g[i], &state_ptr[i * ns], half == UJ_F32 || direct ? NULL : &h[i]};
  }
  optim_bindings_t *probe = NULL, *b = NULL; /* the probes' own, not the optimizer's kept bindings */
  if (s == UJ_OK) s = optim_bind(&probe, ctx, &opt->spec, groups, PROBES, values, varies, &b);
  for (int k = 0; k < opt->spec.pass_count && s == UJ_OK; k++) {
    int n = 0;
    s = uj_program_compile_groups_cuda(ctx, b->program[k], b->groups[k], PROBES, opt->spec.passes[k].input_count, NULL,
                                       0, b->output_count[k], arch, &n, NULL);
    if (s != UJ_OK)
      rt_error_prefix("updater %s, [%s], %s%s: ", opt->name, k ? "apply" : "update", uj_dtype_name(half),
                      direct ? " parameters" : "");
    *kernels += n;
  }
  optim_bind_forget(&probe); /* also when a pass failed to compile */
  if (s == UJ_OK) s = optim_grad_program(&opt->grad_program);
  if (s == UJ_OK) {
    float inv_cell = 1;
    uj_tensor_t inv = {&inv_cell, UJ_F32, UJ_CPU, 0, {0}};
    const uj_tensor_t* in[2 * PROBES];
    uj_tensor_t* out[2 * PROBES];
    uj_group_t grad_groups[PROBES];
    for (int i = 0; i < PROBES; i++) {
      in[2 * i] = &g[i], in[2 * i + 1] = &inv, out[2 * i] = &bad[i], out[2 * i + 1] = &norm[i];
      grad_groups[i] = (uj_group_t){&in[2 * i], &out[2 * i]};
    }
    int n = 0;
    s = uj_program_compile_groups_cuda(ctx, opt->grad_program, grad_groups, PROBES, 2, NULL, 0, 2, arch, &n, NULL);
    if (s != UJ_OK) rt_error_prefix("the gradient pass, %s: ", uj_dtype_name(half));
    *kernels += n;
  }
  free(states), free(state_ptr), free(cells), free(values), free(varies);
  return s;
}

uj_status_t uj_optim_compile_cuda(uj_ctx_t* ctx, uj_optim_t* opt, const char* arch, int* kernels) {
  if (kernels) *kernels = 0;
  if (!ctx || !opt || !arch) return rt_error(UJ_ERR_INVALID, "uj_optim_compile_cuda: ctx, opt and arch must not be NULL");
  static const uj_dtype_t variants[] = {UJ_F32, UJ_BF16, UJ_F16};
  int n = 0;
  uj_status_t s = UJ_OK;
  for (size_t v = 0; v < sizeof variants / sizeof *variants && s == UJ_OK; v++) {
    s = compile_variant(ctx, opt, variants[v], 0, arch, &n);
    int has_direct = variants[v] != UJ_F32;
    for (int k = 0; k < opt->spec.pass_count; k++)
      has_direct &= opt->spec.passes[k].direct_program[optim_half_index(variants[v])] != NULL;
    if (s == UJ_OK && has_direct) s = compile_variant(ctx, opt, variants[v], 1, arch, &n);
  }
  if (kernels) *kernels = n;
  return s;
}
