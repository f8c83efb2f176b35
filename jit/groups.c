/* jit/groups.c: multi-tensor execution (uj_program_run_groups). A call
 * first checks every group as uj_program_run would (the inputs through
 * uj_program_shape, each output's dtype, rank and sizes against what the
 * program gives for that group), so that a bad group fails the call before
 * any group is written; then it runs the groups in order, each through
 * uj_program_run, which shares the program's compiled kernels between
 * groups of the same build. */
#include <string.h>

#include "../rt/rt.h"

static uj_status_t check_group(uj_program_t* p, const uj_group_t* g, int input_count, const int64_t* params,
                               int output_count) {
  if (input_count && !g->inputs) return rt_error(UJ_ERR_INVALID, "inputs is NULL");
  if (output_count && !g->outputs) return rt_error(UJ_ERR_INVALID, "outputs is NULL");
  if (input_count != uj_program_io_count(p, 0))
    return rt_error(UJ_ERR_INVALID, "the program takes %d inputs, got %d", uj_program_io_count(p, 0), input_count);
  if (output_count != uj_program_io_count(p, 1))
    return rt_error(UJ_ERR_INVALID, "the program has %d outputs, got %d", uj_program_io_count(p, 1), output_count);
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

uj_status_t uj_program_run_groups(uj_ctx_t* ctx, uj_program_t* p, const uj_group_t* groups, int group_count,
                                  int input_count, const int64_t* params, int param_count, int output_count) {
  if (!ctx || !p) return rt_error(UJ_ERR_INVALID, "uj_program_run_groups: ctx and p must not be NULL");
  if (group_count < 0) return rt_error(UJ_ERR_INVALID, "group_count is %d, below 0", group_count);
  if (group_count && !groups) return rt_error(UJ_ERR_INVALID, "groups is NULL for %d groups", group_count);
  for (int i = 0; i < group_count; i++) {
    uj_status_t s = check_group(p, &groups[i], input_count, params, output_count);
    if (s != UJ_OK) {
      rt_error_prefix("group %d: ", i);
      return s;
    }
  }
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
