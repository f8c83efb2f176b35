/* uops/select.c: gather along one axis. out has x's shape with that axis set
 * to 1, index is an i32 tensor of out's shape (checked at run time), and
 * out[.., 0, ..] = x[.., index[.., 0, ..], ..]. The gathered index cannot be
 * proven in range, so the read is checked and a zero-fill block comes first:
 * an index outside x gives 0.
 *
 * Gradient (for x; the i32 index has none): dx = 0, then
 * dx[.., index[..], ..] += dout[..], skipping indices outside x. */
#include <stdio.h>

#include "uops.h"

uj_io_t uj_select(uj_graph_t* g, int axis, uj_io_t x, uj_io_t index) {
  if (!uop_check_id(g, x, "uj_select", "x") || !uop_check_id(g, index, "uj_select", "index")) return -1;
  if (!uop_is_value(g, x, "uj_select", "x") || !uop_is_value(g, index, "uj_select", "index")) return -1;
  const uop_node_t* xn = &g->nodes[x];
  const uop_node_t* in = &g->nodes[index];
  int a = axis < 0 ? axis + xn->ndim : axis;
  if (a < 0 || a >= xn->ndim)
    return rt_error(UJ_ERR_INVALID, "uj_select: axis %d is out of range for x (node %d) of rank %d", axis, x,
                    xn->ndim), -1;
  if (in->dtype != UJ_I32 || in->kind == UOP_CONST)
    return rt_error(UJ_ERR_INVALID, "uj_select: index (node %d) must be an i32 tensor, it is %s", index,
                    in->kind == UOP_CONST ? "a const" : uj_dtype_name(in->dtype)), -1;
  if (in->ndim != xn->ndim)
    return rt_error(UJ_ERR_SHAPE, "uj_select: index (node %d) has rank %d, x (node %d) has rank %d", index,
                    in->ndim, x, xn->ndim), -1;
  uop_node_t n = {.kind = UOP_SELECT, .dtype = xn->dtype, .ndim = xn->ndim, .op = a, .nin = 2, .in = {x, index}};
  return uop_graph_add(g, &n);
}

uj_status_t uop_select_shape(uop_emit_t* E, int n) {
  const uop_node_t* node = &E->g->nodes[n];
  ir_tensor_t* out = &E->f->tensors[E->tensor_of[n]];
  const ir_tensor_t* x = &E->f->tensors[E->tensor_of[node->in[0]]];
  const ir_tensor_t* ix = &E->f->tensors[E->tensor_of[node->in[1]]];
  for (int k = 0; k < node->ndim; k++) {
    out->dims[k] = k == node->op ? ir_ix_const(E->f, 1) : x->dims[k];
    if (!out->dims[k]) return uop_oom();
    if (ir_ix_equal(out->dims[k], ix->dims[k])) continue;
    char what[160];
    snprintf(what, sizeof what, "select node %d: axis %d of index (node %d) and of the output differ", n, k,
             node->in[1]);
    if (ir_add_assert(E->f, ix->dims[k], out->dims[k], what) < 0) return uop_oom();
  }
  return UJ_OK;
}

/* The access x[.., index[..], ..] over a nest of out's shape. */
static uj_status_t gather_access(uop_emit_t* E, int n, const uop_nest_t* nest, int xt, ir_access_t* acc) {
  const uop_node_t* node = &E->g->nodes[n];
  ir_func_t* f = E->f;
  int it = E->tensor_of[node->in[1]];
  int depth = nest->block->nloops - 1;
  ir_access_t* iacc = rt_arena_alloc(&f->arena, sizeof *iacc);
  ir_ix_t* gathered = rt_arena_alloc(&f->arena, sizeof *gathered);
  if (!iacc || !gathered) return uop_oom();
  uop_access_at(nest, it, node->ndim, iacc, f);
  uop_access_at(nest, xt, node->ndim, acc, f);
  for (int k = 0; k < node->ndim; k++) {
    if (!iacc->idx[k] || !acc->idx[k]) return uop_oom();
    if (!ir_bounds_prove(f, nest->block, depth, iacc->idx[k], f->tensors[it].dims[k])) iacc->check_mask |= 1u << k;
  }
  gathered->kind = IR_IX_LOAD;
  gathered->load = iacc;
  acc->idx[node->op] = gathered;
  acc->check_mask |= 1u << node->op;
  return UJ_OK;
}

uj_status_t uop_select_emit(uop_emit_t* E, int n) {
  const uop_node_t* node = &E->g->nodes[n];
  ir_func_t* f = E->f;
  int t = E->tensor_of[n], xt = E->tensor_of[node->in[0]];
  uj_status_t s = uop_emit_fill(E, t, 0.0);
  if (s != UJ_OK) return s;
  uop_nest_t nest;
  if ((s = uop_nest_over(E, t, &nest)) != UJ_OK) return s;
  ir_access_t acc;
  if ((s = gather_access(E, n, &nest, xt, &acc)) != UJ_OK) return s;
  return uop_store(E, &nest, t, ir_ex_load(f, &acc));
}

uj_status_t uop_select_grad(uop_emit_t* E, int n, int operand, int gout, int dst) {
  (void)operand;
  ir_func_t* f = E->f;
  uj_status_t s = uop_emit_fill(E, dst, 0.0);
  if (s != UJ_OK) return s;
  uop_nest_t nest;
  if ((s = uop_nest_over(E, E->tensor_of[n], &nest)) != UJ_OK) return s;
  ir_access_t acc, g;
  if ((s = gather_access(E, n, &nest, dst, &acc)) != UJ_OK) return s;
  uop_access_at(&nest, gout, f->tensors[gout].ndim, &g, f);
  ir_expr_t* v = ir_ex_load(f, &g);
  ir_stmt_t* st = v ? ir_add_stmt(f, nest.inner, IR_ST_SCATTER_ADD) : NULL;
  if (!st) return uop_oom();
  st->target = acc;
  st->value = v;
  return UJ_OK;
}
