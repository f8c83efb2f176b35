/* optim/optim.h: what the files of the optimizer library share. An updater's
 * text (optim/updaters.c) is read by optim/spec.c into a spec: its programs
 * and the role of every name they use. optim/optim.c runs a spec over
 * parameter groups (uj_optim_step); optim/amp.c is the pass over the
 * gradients that finds non-finite values and the global norm; optim/cells.c
 * keeps the small values a step binds on the step's device. */
#ifndef UJ_OPTIM_OPTIM_H
#define UJ_OPTIM_OPTIM_H

#include "../include/uopjit.h"

/* ---- built-in updaters (updaters.c) -------------------------------------------- */

typedef struct {
  const char* name;
  const char* text; /* in the updater text format */
} optim_builtin_t;

int optim_builtin_count(void);
const optim_builtin_t* optim_builtin_at(int i);
const optim_builtin_t* optim_builtin_find(const char* name);

/* ---- a parsed updater (spec.c) ---------------------------------------------------- */

/* What a name in a program stands for. */
typedef enum {
  OPTIM_PARAM,  /* p: the parameter tensor */
  OPTIM_GRAD,   /* g: the gradient, read only */
  OPTIM_STATE,  /* a tensor of p's shape per group: the caller's (m, v, a bf16 copy) */
  OPTIM_SCALAR, /* a 0-d value: a hyperparameter, t, gscale or a [scalars] output */
  OPTIM_SUM     /* a per-group sum an [update] pass writes and [apply] reads */
} optim_role_t;

typedef struct {
  optim_role_t role;
  int index; /* into the spec's states, scalars or sums */
} optim_slot_t;

typedef struct {
  uj_program_t* program;
  int input_count, output_count;
  optim_slot_t* inputs;
  optim_slot_t* outputs;
  /* The pass that writes p last also has a variant per half dtype (bf16,
   * f16) that writes the half copy as one more output, after the others:
   * the section's text plus "p_half: bf16; p_half = p". NULL elsewhere. */
  uj_program_t* half_program[2];
  /* Every pass also has a variant per half dtype for parameters of that
   * dtype stepped directly (no f32 master): the section's text after
   * "p: bf16; g: bf16; m: bf16 ...", a hint for each tensor it reads or
   * writes, so that it computes in f32 (scalars are weak, and bf16 values
   * are f32 once loaded) and rounds once where it stores. NULL when the
   * rule declares a dtype of its own for one of them. */
  uj_program_t* direct_program[2];
} optim_pass_t;

/* The output the half variants add, a name updaters may not use. */
#define OPTIM_HALF_NAME "p_half"
/* half_program's index for bf16 or f16; -1 for another dtype. */
static inline int optim_half_index(uj_dtype_t dtype) { return dtype == UJ_BF16 ? 0 : dtype == UJ_F16 ? 1 : -1; }

typedef enum {
  OPTIM_HPARAM,  /* set by the caller, or its default */
  OPTIM_STEP,    /* t */
  OPTIM_GSCALE,  /* gscale */
  OPTIM_DERIVED  /* an output of [scalars] */
} optim_scalar_kind_t;

typedef struct {
  char* name;
  optim_scalar_kind_t kind;
  int has_default;
  double default_value;
  int default_line, default_column; /* where [defaults] gave it: a second value is an error naming both */
} optim_scalar_t;

#define OPTIM_MAX_PASSES 2

typedef struct {
  char* text;                   /* the updater text, as given */
  uj_program_t* scalars;        /* [scalars], or NULL */
  optim_slot_t* scalars_inputs; /* every one an OPTIM_SCALAR */
  optim_slot_t* scalars_outputs;
  int scalars_input_count, scalars_output_count;
  optim_pass_t passes[OPTIM_MAX_PASSES]; /* [update], then [apply] */
  int pass_count;
  int half_pass; /* the last pass that writes p: the one with half variants */
  char** states;
  int state_count;
  optim_scalar_t* scalar_list;
  int scalar_count;
  char** sums;
  int* sum_wide; /* 1: the sum is f64 for f32 tensors (its terms are f64: names declared f64) */
  int sum_count;
} optim_spec_t;

/* Reads an updater text into *spec (zeroed first). Errors: UJ_ERR_PARSE
 * naming the section and line, or the program's own message; UJ_ERR_INVALID
 * for names in roles they cannot have (g assigned, p never written, a sum
 * read before the pass that makes it, a default for a name no program
 * reads). On failure *spec holds nothing to free. */
uj_status_t optim_spec_parse(const char* text, optim_spec_t* spec);
void optim_spec_release(optim_spec_t* spec);
/* The index of scalar `name`, or -1. */
int optim_spec_scalar(const optim_spec_t* spec, const char* name);

/* ---- small values on the step's device (cells.c) ------------------------------------- */

/* A host block of `bytes` and, for a device other than the CPU, a mirror of
 * it there. Regions synced must be 8-byte multiples at 8-byte offsets. */
typedef struct {
  uj_ctx_t* ctx;
  uj_device_t device;
  char* host;
  uj_tensor_t mirror; /* device memory (uj_tensor_alloc), unused on the CPU */
  size_t bytes;
} optim_cells_t;

size_t optim_cells_round(size_t bytes); /* up to a multiple of 8 */
uj_status_t optim_cells_make(uj_ctx_t* ctx, uj_device_t device, size_t bytes, optim_cells_t* c);
void optim_cells_release(optim_cells_t* c);
/* A tensor of `ndim` size-1 axes over the cell at host_cell (in c->host),
 * on c's device: the mirror's cell at the same offset. */
uj_tensor_t optim_cells_tensor(const optim_cells_t* c, const void* host_cell, uj_dtype_t dtype, int ndim);
/* Copies bytes at offset between the host block and the mirror; nothing
 * on the CPU. A copy to the host waits for the work queued before it. */
uj_status_t optim_cells_sync(optim_cells_t* c, size_t offset, size_t bytes, int to_device);

/* ---- the gradient pass (amp.c) ------------------------------------------------------ */

/* One pass over every group's gradient g (groups[i] is the gradient of
 * group i), scaled by inv_scale: *finite = 0 when any element is NaN or
 * infinite, and *norm the 2-norm of all scaled gradients together (the
 * per-group sums of squares added in f64). program is made on first use
 * and kept by the caller (*program, freed with uj_program_free). */
uj_status_t optim_grad_pass(uj_ctx_t* ctx, uj_program_t** program, const uj_tensor_t* const* grads, int group_count,
                            double inv_scale, int* finite, double* norm);
/* Makes the gradient pass's program into *program when it is NULL. */
uj_status_t optim_grad_program(uj_program_t** program);
/* ---- what a step's passes bind (bindings.c) ------------------------------------------ */

/* What bindings depend on in one tensor struct besides its address: the
 * programs chosen (a half copy's dtype picks the variant), the cells'
 * dtype and device and the sums' rank follow from them, and a struct the
 * caller rewrites between steps under the same pointer must not reuse
 * bindings made for what it said before. Every field whole, so that a
 * value outside its enum never passes for one inside. {-1, -1, -1}: no
 * tensor (a group without a half copy). Sizes are not here: they are
 * run-time values that each uj_program_run_groups call reads anew. */
typedef struct {
  int dtype, device, ndim;
} optim_sig_t;

typedef struct {
  int G;
  const uj_optim_group_t* groups_at; /* the caller's array they were made for */
  uj_dtype_t dtype;                  /* the parameters': scalars and sums take it */
  optim_cells_t cells;
  size_t at_sums, at_sums_in, sums_bytes, sums_in_bytes;
  uj_tensor_t* scalar_tensors; /* 0-d f64 */
  uj_tensor_t* sum_outputs;    /* rank of the group's parameter, sizes 1 */
  uj_tensor_t* sum_inputs;     /* 0-d f64 */
  /* per pass: its list of groups, the program that runs it and its outputs */
  const uj_tensor_t** in[OPTIM_MAX_PASSES];
  uj_tensor_t** out[OPTIM_MAX_PASSES];
  uj_group_t* groups[OPTIM_MAX_PASSES];
  uj_program_t* program[OPTIM_MAX_PASSES];
  int output_count[OPTIM_MAX_PASSES];
  /* what they were made for: per group its tensor pointers (parameter,
   * gradient, half copy, states) and what each struct said when they were
   * made (optim_sig_t); per scalar, given per group or not */
  const void** key;
  optim_sig_t* sig;
  int* varies;
} optim_bindings_t;

/* The bindings of a step over groups with scalar values[k*G + i] (shared
 * scalars at i = 0, varies[k] 0): *kept when they were made for these
 * groups (only the values written), else new ones, which become *kept on
 * the CPU (the old freed). Release with optim_unbind. */
uj_status_t optim_bind(optim_bindings_t** kept, uj_ctx_t* ctx, const optim_spec_t* sp, const uj_optim_group_t* groups,
                       int G, const double* values, const int* varies, optim_bindings_t** out);
/* Frees b unless it is the kept one. */
void optim_unbind(optim_bindings_t* kept, optim_bindings_t* b);
/* Frees the kept bindings. */
void optim_bind_forget(optim_bindings_t** kept);

/* The clip coefficient torch.nn.utils.clip_grad_norm_ applies:
 * min(1, max_norm / (norm + 1e-6)); 1 when max_norm is 0 (no clipping). */
double optim_clip_coefficient(double norm, double max_norm);

#endif
