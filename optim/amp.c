/* optim/amp.c: the pass over the gradients that mixed precision needs
 * before an update, made in one multi-tensor call over all groups:
 *
 *   bad = sum(g*0 + inv*0)           0 when every element is finite
 *   n = sum((g*inv)*(g*inv))         the squared norm of the unscaled gradient
 *
 * inf*0 and NaN*0 are NaN, and a NaN term makes the sum NaN. The gradient
 * is unscaled before it is squared, so that the squares of a loss-scaled
 * gradient do not overflow. The per-group sums are added in f64 here. A
 * step that finds a non-finite gradient writes nothing (optim/optim.c);
 * otherwise the unscaling and the clip coefficient go into the update as
 * one scalar, gscale, so the gradients are read once more and never
 * written. */
#include <math.h>
#include <stdlib.h>

#include "../rt/rt.h"
#include "optim.h"

/* inv*0, always 0, makes bad's sum f32 for a bf16 or f16 gradient: a
 * reduction stored in the dtype it accumulates in is one the multi-tensor
 * path takes. */
#define GRAD_PASS_SOURCE "bad = sum(g*0 + inv*0); n = sum((g*inv)*(g*inv))"

uj_status_t optim_grad_program(uj_program_t** program) {
  if (*program) return UJ_OK;
  return uj_program_parse(GRAD_PASS_SOURCE, program);
}

double optim_clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  double c = max_norm / (norm + 1e-6);
  return c < 1.0 ? c : 1.0;
}

/* A 1-element sum of dtype `dtype` (f32 or f64) as a double. */
static double cell_value(uj_dtype_t dtype, const void* cell) {
  return dtype == UJ_F64 ? *(const double*)cell : *(const float*)cell;
}

uj_status_t optim_grad_pass(uj_ctx_t* ctx, uj_program_t** program, const uj_tensor_t* const* grads, int group_count,
                            double inv_scale, int* finite, double* norm) {
  uj_status_t s = optim_grad_program(program);
  if (s != UJ_OK) return s;
  int G = group_count;
  /* The sums take the dtype the program gives them, the gradient's
   * promoted with inv's: f32, or f64 for an f64 reference (a bf16 or f16
   * gradient's squares are summed in f32, where they cannot overflow as in
   * f16). Each
   * cell has room for an f64; after the 2G sums come inv in f32 and in f64.
   * On the GPU the cells are mirrored there (optim/cells.c): inv goes up,
   * the sums come back. */
  optim_cells_t cells;
  size_t sums_bytes = sizeof(double) * 2 * (size_t)G;
  uj_tensor_t* outs = calloc((size_t)2 * G + 1, sizeof(uj_tensor_t));
  const uj_tensor_t** in = calloc((size_t)2 * G + 1, sizeof(uj_tensor_t*));
  uj_tensor_t** out = calloc((size_t)2 * G + 1, sizeof(uj_tensor_t*));
  uj_group_t* groups = calloc((size_t)G + 1, sizeof(uj_group_t));
  s = outs && in && out && groups ? UJ_OK : rt_error(UJ_ERR_OOM, "out of memory for the gradient pass over %d groups", G);
  if (s == UJ_OK) s = optim_cells_make(ctx, G ? (uj_device_t)grads[0]->device : UJ_CPU, sums_bytes + 16, &cells);
  if (s != UJ_OK) {
    free(outs), free(in), free(out), free(groups);
    return s;
  }
  double* sums = (double*)cells.host;
  float* inv_narrow_cell = (float*)(cells.host + sums_bytes);
  double* inv_wide_cell = (double*)(cells.host + sums_bytes + 8);
  *inv_narrow_cell = (float)inv_scale, *inv_wide_cell = inv_scale;
  uj_tensor_t inv_narrow = optim_cells_tensor(&cells, inv_narrow_cell, UJ_F32, 0);
  uj_tensor_t inv_wide = optim_cells_tensor(&cells, inv_wide_cell, UJ_F64, 0);
  for (int i = 0; i < G; i++) {
    int wide = grads[i]->dtype == UJ_F64;
    for (int k = 0; k < 2; k++) {
      outs[2 * i + k] = optim_cells_tensor(&cells, &sums[2 * i + k], wide ? UJ_F64 : UJ_F32, grads[i]->ndim);
      out[2 * i + k] = &outs[2 * i + k];
    }
    in[2 * i] = grads[i], in[2 * i + 1] = wide ? &inv_wide : &inv_narrow;
    groups[i] = (uj_group_t){&in[2 * i], &out[2 * i]};
  }
  s = optim_cells_sync(&cells, sums_bytes, 16, 1);
  if (s == UJ_OK) {
    s = uj_program_run_groups(ctx, *program, groups, G, 2, NULL, 0, 2);
    if (s != UJ_OK) rt_error_prefix("the gradient pass: ");
  }
  if (s == UJ_OK) s = optim_cells_sync(&cells, 0, sums_bytes, 0);
  double total = 0;
  int all_finite = 1;
  for (int i = 0; i < G && s == UJ_OK; i++) {
    all_finite &= cell_value(outs[2 * i].dtype, &sums[2 * i]) == 0.0;
    total += cell_value(outs[2 * i + 1].dtype, &sums[2 * i + 1]);
  }
  /* a sum of squares can overflow f32 for finite gradients; that is no
   * reason to skip, but the norm is then infinite and clips to 0 */
  *finite = all_finite;
  *norm = sqrt(total);
  optim_cells_release(&cells);
  free(outs), free(in), free(out), free(groups);
  return s;
}
