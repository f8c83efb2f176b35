/* uopjit_optim.h: the optimizer part of the uopjit API (uj_optim_*):
 * fused optimizer updates, an updater text run over every parameter tensor
 * in one multi-tensor call per pass.
 *
 * Include <uopjit.h>, which includes this header at its end: the two are
 * one API, split only to keep each file readable.
 *
 * Why this header does not include uopjit.h itself: uopjit.h must include
 * it, so that every `#include <uopjit.h>` sees the whole API, and an
 * include in each direction would be a file-level cycle. Moving the types
 * both need (uj_status_t, uj_tensor_t, uj_ctx_t, ...) into a third header
 * would split the core of the API over more files for this part's sake
 * alone. So this header is a continuation of uopjit.h: it is only ever
 * included from the end of it, after every type it uses, and says so
 * clearly when included any other way. */
#ifndef UOPJIT_OPTIM_H
#define UOPJIT_OPTIM_H

#ifndef UOPJIT_H
#error "uopjit_optim.h is part of uopjit.h: #include <uopjit.h> instead (it includes this header)"
#endif

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Fused optimizer updates over many parameter tensors at once. An updater is
 * a short text: its update written in the expression language, run over
 * every parameter group in one multi-tensor call (uj_program_run_groups):
 *
 *   uj_optim_t* opt;
 *   uj_optim_new("adamw", &opt);                 // or uj_optim_new_source
 *   uj_optim_set(opt, "lr", 3e-4);
 *   // per group: p, g, and the state tensors in uj_optim_state_name order
 *   uj_tensor_t* state0[] = {&m0, &v0};
 *   uj_optim_group_t groups[] = {{&p0, &g0, state0, NULL}, ...};
 *   for (...) uj_optim_step(ctx, opt, groups, n, NULL);   // t = 1, 2, ...
 *   uj_optim_free(opt);
 *
 * Built-in updaters (uj_optim_builtin_name lists them; docs/OPTIMIZERS.md gives
 * their rules and hyperparameters): sgd, sgd_momentum, adam, adam_amsgrad,
 * adamw, adamw_amsgrad, adagrad, rmsprop, rmsprop_centered,
 * rmsprop_momentum, rmsprop_centered_momentum, lion, lamb. They follow
 * torch.optim's update rules; state tensors start at zero, as torch makes
 * them (SGD's momentum buffer, which torch starts as a copy of the first
 * gradient, takes that value on step 1 inside the rule).
 *
 * The text of an updater has sections, each opened by a line of its own:
 *
 *   [defaults]   lr = 0.001; b1 = 0.9            hyperparameters' defaults
 *   [scalars]    bc1 = 1 - b1**t                 f64, once per step
 *   [update]     m = b1*m + (1-b1)*gscale*g      over every group
 *                p = p - lr/bc1*m
 *   [apply]      ...                             an optional second pass
 *
 * (a text with no section line is all [update]). Names: p is the parameter,
 * g its gradient (read only), t the step (1 on the first) and gscale the
 * factor the gradient must be multiplied by for unscaling and clipping (1
 * when neither is set). A name a pass assigns is a state tensor of p's shape
 * that the caller keeps (m, v), unless its value reduces every axis
 * (n = sum(p*p)): then it is a per-group sum, kept by the optimizer, that
 * [apply] reads as a scalar (LAMB's norms). A name [scalars] assigns is a
 * scalar computed in f64 each step. Every other name read is a
 * hyperparameter: a scalar the caller sets, shared or one per group. Every
 * scalar reaches the passes in f64, and what a pass computes from scalars
 * alone (1 - b2, lr/bc1) is computed in f64 and rounded once where it meets
 * a tensor, as torch does; a 0-d f64 value does not make an f32 update f64.
 * The built-ins following torch.optim take torch's `maximize` (0 or 1:
 * step up the gradient). Step
 * scalars and hyperparameters are run-time values: nothing recompiles as t,
 * the learning rate or the number or sizes of groups change. */
typedef struct uj_optim uj_optim_t;

/* One parameter group: the parameter (updated in place), its gradient, and
 * the updater's state tensors in uj_optim_state_name order (NULL when the
 * updater has none). All of the parameter's shape and dtype: f32 (f64
 * computes in f64, for references), but for the gradient, which may also be
 * bf16 or f16 (widened to f32 where it is read).
 *
 * bf16 or f16 parameters stepped directly: param, grad and every state of
 * that dtype (torch's layout for such parameters). Each pass computes in
 * f32 from the widened values and rounds each tensor it writes once; it
 * reads a state it has just written as stored (rounded). An updater that
 * declares a dtype for p, g or a state has no such form (UJ_ERR_INVALID).
 * f16 cannot hold a state below 6.1e-5 as a normal (Adam's v of a small
 * gradient): master weights are the remedy.
 *
 * Mixed precision with f32 master weights: param is the f32 master and
 * param_half, when not NULL, a bf16 or f16 tensor of its shape that the same
 * pass writes with the new parameter rounded to its dtype (nearest, ties to
 * even), the copy a model computes with. Either every group of a step has
 * one, all of one dtype, or none does. */
typedef struct {
  uj_tensor_t* param;
  const uj_tensor_t* grad;
  uj_tensor_t* const* state;
  uj_tensor_t* param_half; /* NULL: none */
} uj_optim_group_t;

/* What a step did. */
typedef struct {
  int skipped;      /* 1: a gradient held a NaN or infinity, nothing was written */
  double grad_norm; /* the global 2-norm of the unscaled gradients, when
                       uj_optim_set_grad_scale or uj_optim_set_max_grad_norm
                       asked for the pass over them; else -1 */
  double gscale;    /* the factor the gradients were multiplied by */
  int64_t t;        /* the step count after the call */
} uj_optim_report_t;

/* The built-in updaters: names for i in 0..count-1 (NULL out of range), and
 * the text of one (NULL for an unknown name). */
int uj_optim_builtin_count(void);
const char* uj_optim_builtin_name(int i);
const char* uj_optim_builtin_text(const char* name);
/* An optimizer running the built-in updater `name`. UJ_ERR_INVALID naming
 * the known updaters for an unknown name. */
uj_status_t uj_optim_new(const char* name, uj_optim_t** out);
/* An optimizer running the updater in `text` (format above), called `name`
 * in messages. Errors: UJ_ERR_PARSE with the section and the program's
 * line and column (in [defaults] also a name given twice, or a value that
 * is not a number as the expression language writes one or overflows f64,
 * such as 1e999, inf or nan); UJ_ERR_INVALID for a name in a role it cannot have (g
 * or t assigned, p never assigned, a sum read before the pass that makes
 * it, a default for a name no program reads). */
uj_status_t uj_optim_new_source(const char* name, const char* text, uj_optim_t** out);
void uj_optim_free(uj_optim_t* opt);
/* The updater's name and text (owned by opt). */
const char* uj_optim_name(const uj_optim_t* opt);
const char* uj_optim_text(const uj_optim_t* opt);
/* The state tensors each group passes, in order ("m", "v"); -1 / NULL for
 * a NULL opt or an index out of range. */
int uj_optim_state_count(const uj_optim_t* opt);
const char* uj_optim_state_name(const uj_optim_t* opt, int i);
/* The hyperparameters, in order of first use. */
int uj_optim_hparam_count(const uj_optim_t* opt);
const char* uj_optim_hparam_name(const uj_optim_t* opt, int i);
/* Sets hyperparameter `name` to one value shared by every group (dropping
 * any per-group values). UJ_ERR_INVALID naming the hyperparameters for an
 * unknown name. */
uj_status_t uj_optim_set(uj_optim_t* opt, const char* name, double value);
/* Gives hyperparameter `name` one value per group: values[0..count); a
 * step must then have exactly `count` groups. The values are copied. */
uj_status_t uj_optim_set_per_group(uj_optim_t* opt, const char* name, const double* values, int count);
/* The shared value of `name` (its default, or what uj_optim_set gave).
 * UJ_ERR_INVALID for an unknown name, or one that has neither (a custom
 * updater's hyperparameter without a default, never set) or is per group. */
uj_status_t uj_optim_get(const uj_optim_t* opt, const char* name, double* value);
/* The step count: steps taken (skipped ones not counted); the next step
 * runs with t = count + 1. Set it to resume a run. UJ_ERR_INVALID for a
 * count below 0 or of INT64_MAX (t would overflow); a step at a count of
 * INT64_MAX fails the same way and writes nothing. */
int64_t uj_optim_step_count(const uj_optim_t* opt);
uj_status_t uj_optim_set_step_count(uj_optim_t* opt, int64_t count);
/* Mixed precision. scale: the loss scale the gradients carry (they are
 * divided by it inside the update, never rewritten); 0 or 1 for none.
 * max_norm: clip the gradients, after unscaling, by their 2-norm over all
 * groups together as torch.nn.utils.clip_grad_norm_ does (multiply by
 * min(1, max_norm / (norm + 1e-6))); 0 for none. With either set, a step
 * first makes one pass over the gradients for the norm and for non-finite
 * values: when any gradient holds a NaN or an infinity, the step writes
 * nothing, leaves t as it was and reports skipped = 1 (what a gradient
 * scaler does). Otherwise the update multiplies each gradient by gscale =
 * clip coefficient / scale. UJ_ERR_INVALID for a negative or non-finite
 * value. */
uj_status_t uj_optim_set_grad_scale(uj_optim_t* opt, double scale);
uj_status_t uj_optim_set_max_grad_norm(uj_optim_t* opt, double max_norm);
/* One step over group_count groups with t = step count + 1, on ctx's
 * engine: host tensors on interp, mir, c or auto; GPU tensors (every tensor
 * of the step on the GPU) on cuda or auto, each pass one launch over a
 * chunk table. On the GPU the step returns once its kernels are queued on
 * ctx's stream, except that it reads back what the host must see, a few
 * values per group (the gradient pass's found-inf and norm sums with a
 * loss scale or clip norm set, and per-group sums such as LAMB's norms),
 * which waits for the work queued before. Every group is checked
 * before anything is written: a NULL tensor, a dtype other than f32 (bf16
 * or f16 for a gradient or a half copy; the parameter's for a bf16 or f16
 * parameter stepped directly), a half copy in some groups only or with a
 * half parameter,
 * a gradient, state or half copy of another shape than its parameter, a
 * tensor on another device than group 0's parameter, or a hyperparameter
 * without a value fails with UJ_ERR_INVALID or UJ_ERR_SHAPE naming the
 * group and the tensor. report may be NULL. An updater with [apply] makes
 * two passes; a failure inside the second (out of memory, a compile error)
 * leaves the first pass's state written. */
uj_status_t uj_optim_step(uj_ctx_t* ctx, uj_optim_t* opt, const uj_optim_group_t* groups, int group_count,
                          uj_optim_report_t* report);
/* Compiles, without a GPU, the multi-tensor CUDA kernels a step on GPU
 * tensors launches (uj_program_compile_groups_cuda) for every pass of the
 * updater and for the gradient pass, with NVRTC for `arch` ("sm_90"): for
 * f32 parameters and gradients, and for bf16 and for f16 gradients and half
 * copies, and for bf16 and f16 parameters stepped directly; *kernels (may
 * be NULL) receives how many kernels. Errors as
 * uj_program_compile_groups_cuda's. */
uj_status_t uj_optim_compile_cuda(uj_ctx_t* ctx, uj_optim_t* opt, const char* arch, int* kernels);

#ifdef __cplusplus
}
#endif
#endif
