/* optim/bindings.c: what a step's passes bind, made once and kept while a
 * step's groups stay the same (DESIGN section 7, "Multi-tensor execution").
 *
 * Each pass runs as one uj_program_run_groups call over a list of groups of
 * its own: per group its inputs then its outputs, the caller's parameters,
 * gradients and states, and the step scalars and per-group sums the
 * optimizer owns, all in one block of cells (optim/cells.c), mirrored on
 * the GPU for a step on GPU tensors. Kept: a step over the same groups as
 * the step before (same_groups) reuses the bindings and only writes the
 * scalars' new values. Besides the walk and the allocations this saves,
 * each pass then brings the very list it brought before, which the
 * context's memo of lists (jit/groups/memo.c) recognizes without walking
 * it again (docs/ENGINES.md, "Measured"). Only on the CPU: a step on the
 * GPU holds device memory of its context, which the caller may free before
 * the optimizer, so those bindings go with their step. */
#include <stdlib.h>
#include <string.h>

#include "../rt/rt.h"
#include "optim.h"

static void bindings_free(optim_bindings_t* b) {
  if (!b) return;
  optim_cells_release(&b->cells);
  free(b->scalar_tensors), free(b->sum_outputs), free(b->sum_inputs);
  for (int k = 0; k < OPTIM_MAX_PASSES; k++) free(b->in[k]), free(b->out[k]), free(b->groups[k]);
  free(b->key), free(b->sig), free(b->varies);
  free(b);
}

static uj_tensor_t* slot_tensor(const uj_optim_group_t* g, optim_bindings_t* b, optim_slot_t slot, int i,
                                const int* varies, int is_output) {
  size_t at = (size_t)slot.index * b->G + (slot.role == OPTIM_SCALAR && !varies[slot.index] ? 0 : i);
  switch (slot.role) {
    case OPTIM_PARAM: return g->param;
    case OPTIM_GRAD: return (uj_tensor_t*)g->grad; /* only ever an input */
    case OPTIM_STATE: return g->state[slot.index];
    case OPTIM_SCALAR: return &b->scalar_tensors[at];
    case OPTIM_SUM: return is_output ? &b->sum_outputs[at] : &b->sum_inputs[at];
  }
  return NULL;
}

/* Fills pass k's list (the pass that writes p last writes the half copies
 * too, as the extra last output of its variant for their dtype). */
static void bind_pass(const optim_spec_t* sp, int k, const uj_optim_group_t* groups, optim_bindings_t* b,
                      const int* varies) {
  const optim_pass_t* pass = &sp->passes[k];
  int half = k == sp->half_pass && groups[0].param_half ? optim_half_index(groups[0].param_half->dtype) : -1;
  int direct = optim_half_index(groups[0].param->dtype); /* bf16/f16 parameters without a master */
  b->program[k] = half >= 0 ? pass->half_program[half] : direct >= 0 ? pass->direct_program[direct] : pass->program;
  b->output_count[k] = pass->output_count + (half >= 0);
  for (int i = 0; i < b->G; i++) {
    const uj_tensor_t** in = b->in[k] + (size_t)i * pass->input_count;
    uj_tensor_t** out = b->out[k] + (size_t)i * b->output_count[k];
    for (int j = 0; j < pass->input_count; j++) in[j] = slot_tensor(&groups[i], b, pass->inputs[j], i, varies, 0);
    for (int o = 0; o < pass->output_count; o++) out[o] = slot_tensor(&groups[i], b, pass->outputs[o], i, varies, 1);
    if (half >= 0) out[pass->output_count] = groups[i].param_half;
    b->groups[k][i] = (uj_group_t){in, out};
  }
}

static optim_sig_t sig_of(const uj_tensor_t* t) {
  return t ? (optim_sig_t){(int)t->dtype, (int)t->device, t->ndim} : (optim_sig_t){-1, -1, -1};
}

static int same_sig(optim_sig_t a, optim_sig_t b) { return a.dtype == b.dtype && a.device == b.device && a.ndim == b.ndim; }

/* The tensor in slot j of group g's key: parameter, gradient, half copy,
 * then the states. */
static const uj_tensor_t* key_tensor(const uj_optim_group_t* g, int j) {
  return j == 0 ? g->param : j == 1 ? g->grad : j == 2 ? g->param_half : g->state[j - 3];
}

/* Group g's key (nkey slots): each tensor's address and its struct's
 * optim_sig_t. */
static void key_of(const uj_optim_group_t* g, int nkey, const void** key, optim_sig_t* sig) {
  for (int j = 0; j < nkey; j++) {
    const uj_tensor_t* t = key_tensor(g, j);
    key[j] = t, sig[j] = sig_of(t);
  }
}

/* Writes the step's scalar values into the cells and sends them up. */
static uj_status_t write_scalars(const optim_spec_t* sp, optim_bindings_t* b, const double* values) {
  double* cells = (double*)(void*)b->cells.host;
  for (int k = 0; k < sp->scalar_count; k++)
    for (int i = 0; i < (b->varies[k] ? b->G : 1); i++) cells[(size_t)k * b->G + i] = values[(size_t)k * b->G + i];
  return optim_cells_sync(&b->cells, 0, b->at_sums, 1);
}

/* The block's regions, each a multiple of 8 bytes:
 *   scalars   [scalar][group] in f64
 *   sums      [sum][group], 8 bytes each, used as the output's dtype
 *   sums_in   the sums in f64, for later passes
 * Scalars are f64 whatever the parameters' dtype: a pass computes what
 * depends on scalars alone in f64 and rounds it once where it meets a
 * tensor (lang/build.c), as torch computes 1 - b2 or lr / bc1 in double; a
 * 0-d f64 value does not make the tensor arithmetic f64. */
static uj_status_t bindings_make(uj_ctx_t* ctx, const optim_spec_t* sp, const uj_optim_group_t* groups, int G,
                                 const int* varies, optim_bindings_t** out) {
  int nkey = 3 + sp->state_count;
  size_t sg = (size_t)sp->scalar_count * G + 1, ug = (size_t)sp->sum_count * G + 1;
  optim_bindings_t* b = calloc(1, sizeof *b);
  if (!b) return rt_error(UJ_ERR_OOM, "out of memory binding %d groups", G);
  b->G = G;
  b->groups_at = groups;
  b->dtype = groups[0].param->dtype;
  b->at_sums = sg * sizeof(double);
  b->sums_bytes = ug * sizeof(double);
  b->at_sums_in = b->at_sums + b->sums_bytes;
  b->sums_in_bytes = ug * sizeof(double);
  uj_status_t s =
      optim_cells_make(ctx, (uj_device_t)groups[0].param->device, b->at_sums_in + b->sums_in_bytes, &b->cells);
  if (s != UJ_OK) {
    free(b);
    return s;
  }
  b->scalar_tensors = calloc(sg, sizeof(uj_tensor_t));
  b->sum_outputs = calloc(ug, sizeof(uj_tensor_t));
  b->sum_inputs = calloc(ug, sizeof(uj_tensor_t));
  b->key = calloc((size_t)G * nkey + 1, sizeof *b->key);
  b->sig = calloc((size_t)G * nkey + 1, sizeof *b->sig);
  b->varies = calloc((size_t)sp->scalar_count + 1, sizeof *b->varies);
  int lists = 1;
  for (int k = 0; k < sp->pass_count; k++) {
    b->in[k] = calloc((size_t)G * sp->passes[k].input_count + 1, sizeof(uj_tensor_t*));
    b->out[k] = calloc((size_t)G * (sp->passes[k].output_count + 1) + 1, sizeof(uj_tensor_t*)); /* + the half copy */
    b->groups[k] = calloc((size_t)G + 1, sizeof(uj_group_t));
    lists &= b->in[k] && b->out[k] && b->groups[k];
  }
  if (!b->scalar_tensors || !b->sum_outputs || !b->sum_inputs || !b->key || !b->sig ||
      !b->varies || !lists) {
    bindings_free(b);
    return rt_error(UJ_ERR_OOM, "out of memory binding %d groups", G);
  }
  memcpy(b->varies, varies, (size_t)sp->scalar_count * sizeof *varies);
  for (int i = 0; i < G; i++) key_of(&groups[i], nkey, b->key + (size_t)i * nkey, b->sig + (size_t)i * nkey);
  char* host = b->cells.host;
  double* scalars = (double*)(void*)host;
  for (int k = 0; k < sp->scalar_count; k++)
    for (int i = 0; i < (varies[k] ? G : 1); i++) {
      size_t at = (size_t)k * G + i;
      b->scalar_tensors[at] = optim_cells_tensor(&b->cells, &scalars[at], UJ_F64, 0);
    }
  double* sums = (double*)(void*)(host + b->at_sums);
  double* sums_in = (double*)(void*)(host + b->at_sums_in);
  for (int k = 0; k < sp->sum_count; k++)
    for (int i = 0; i < G; i++) {
      size_t at = (size_t)k * G + i;
      uj_dtype_t dtype = sp->sum_wide[k] ? UJ_F64 : b->dtype;
      b->sum_outputs[at] = optim_cells_tensor(&b->cells, &sums[at], dtype, groups[i].param->ndim);
      b->sum_inputs[at] = optim_cells_tensor(&b->cells, &sums_in[at], UJ_F64, 0);
    }
  for (int k = 0; k < sp->pass_count; k++) bind_pass(sp, k, groups, b, varies);
  *out = b;
  return UJ_OK;
}

/* Whether b was made for these groups (the same array of uj_optim_group_t
 * holding the same tensor pointers): the key kept bindings are reused
 * by. Every tensor's address and its struct's dtype, device and rank (a
 * caller may rewrite a struct between steps: a bf16 half copy made f16
 * must get the f16 variant of the pass, not fail every later step), the
 * presence of each optional tensor (a NULL half copy keys as NULL), and
 * which scalars are per group. b->dtype and the cells' device follow from
 * group 0's parameter, compared with the rest. */
static int same_groups(const optim_bindings_t* b, const optim_spec_t* sp, const uj_optim_group_t* groups, int G,
                       const int* varies) {
  if (b->groups_at != groups || b->G != G || b->cells.device != UJ_CPU ||
      memcmp(b->varies, varies, (size_t)sp->scalar_count * sizeof *varies) != 0)
    return 0;
  int nkey = 3 + sp->state_count;
  for (int i = 0; i < G; i++) {
    const uj_optim_group_t* g = &groups[i];
    const void* const* key = b->key + (size_t)i * nkey;
    const optim_sig_t* sig = b->sig + (size_t)i * nkey;
    for (int j = 0; j < nkey; j++) {
      const uj_tensor_t* t = key_tensor(g, j);
      if (key[j] != t || !same_sig(sig[j], sig_of(t))) return 0;
    }
  }
  return 1;
}

uj_status_t optim_bind(optim_bindings_t** kept, uj_ctx_t* ctx, const optim_spec_t* sp, const uj_optim_group_t* groups,
                       int G, const double* values, const int* varies, optim_bindings_t** out) {
  *out = NULL;
  optim_bindings_t* b = *kept && same_groups(*kept, sp, groups, G, varies) ? *kept : NULL;
  uj_status_t s = UJ_OK;
  if (!b) {
    optim_bind_forget(kept);
    s = bindings_make(ctx, sp, groups, G, varies, &b);
  }
  if (s == UJ_OK) s = write_scalars(sp, b, values);
  if (s != UJ_OK) {
    if (b != *kept) bindings_free(b);
    return s;
  }
  if (b->cells.device == UJ_CPU) *kept = b;
  *out = b;
  return UJ_OK;
}

void optim_unbind(optim_bindings_t* kept, optim_bindings_t* b) {
  if (b != kept) bindings_free(b);
}

void optim_bind_forget(optim_bindings_t** kept) {
  bindings_free(*kept);
  *kept = NULL;
}
