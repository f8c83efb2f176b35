/* uops/reduce.c: reduce the listed axes of x to size 1 with a carried
 * variable.
 *
 * Emitted as one block: loops over the kept axes (one [0,1) loop when none
 * is kept); the innermost of them carries the accumulator; inside it, one
 * loop per reduced axis, the innermost holding `c op= x[...]`; after the
 * reduced loops, the carrier stores c (divided by the element count for
 * mean). argmax/argmin also pass the flat index over the reduced axes, so
 * the first best element wins.
 *
 * Gradient: the output gradient broadcast back over the reduced axes (sum),
 * divided by the count (mean), times y/x (prod, so x must be non-zero), and
 * for max/min routed only to the element the reduction selected, found
 * again with argmax/argmin so that ties send it to the first one. */
#include <stdio.h>
#include <string.h>

#include "uops.h"

uj_io_t uj_reduce(uj_graph_t* g, uj_reduce_op_t op, int axis_count, const int* axis, uj_io_t x) {
  if (!uop_check_id(g, x, "uj_reduce", "x")) return -1;
  if (!uop_is_value(g, x, "uj_reduce", "x")) return -1;
  if ((unsigned)op > UJ_REDUCE_ARGMIN) return rt_error(UJ_ERR_INVALID, "uj_reduce: unknown op %d", (int)op), -1;
  const uop_node_t* xn = &g->nodes[x];
  if (axis_count < 0 || axis_count > xn->ndim)
    return rt_error(UJ_ERR_INVALID, "uj_reduce: axis_count %d for x (node %d) of rank %d", axis_count, x, xn->ndim), -1;
  if (axis_count && !axis) return rt_error(UJ_ERR_INVALID, "uj_reduce: axis is NULL"), -1;
  uint32_t mask = 0;
  for (int i = 0; i < axis_count; i++) {
    int a = axis[i] < 0 ? axis[i] + xn->ndim : axis[i];
    if (a < 0 || a >= xn->ndim)
      return rt_error(UJ_ERR_INVALID, "uj_reduce: axis[%d] = %d is out of range for x (node %d) of rank %d", i,
                      axis[i], x, xn->ndim), -1;
    if (mask & (1u << a)) return rt_error(UJ_ERR_INVALID, "uj_reduce: axis %d is listed twice", a), -1;
    mask |= 1u << a;
  }
  int arg = ir_reduce_is_arg(op);
  uop_node_t n = {.kind = UOP_REDUCE, .dtype = arg ? UJ_I32 : xn->dtype, .ndim = xn->ndim, .op = op,
                  .nin = 1, .in = {x}, .axes = mask};
  return uop_graph_add(g, &n);
}

uj_status_t uop_reduce_shape(uop_emit_t* E, int n) {
  const uop_node_t* node = &E->g->nodes[n];
  ir_tensor_t* out = &E->f->tensors[E->tensor_of[n]];
  const ir_tensor_t* x = &E->f->tensors[E->tensor_of[node->in[0]]];
  for (int k = 0; k < node->ndim; k++) {
    out->dims[k] = (node->axes & (1u << k)) ? ir_ix_const(E->f, 1) : x->dims[k];
    if (!out->dims[k]) return uop_oom();
  }
  return UJ_OK;
}

uj_status_t uop_reduce_emit(uop_emit_t* E, int n) {
  const uop_node_t* node = &E->g->nodes[n];
  return uop_emit_reduce(E, (uj_reduce_op_t)node->op, node->axes, E->tensor_of[node->in[0]], E->tensor_of[n]);
}

uj_status_t uop_emit_reduce(uop_emit_t* E, uj_reduce_op_t op, uint32_t axes, int xt, int t) {
  ir_func_t* f = E->f;
  const ir_tensor_t* x = &f->tensors[xt];
  int ndim = x->ndim;
  /* a bf16/f16 input is summed (compared, ...) in f32 */
  uj_dtype_t out_dtype = ir_dtype_compute(f->tensors[t].dtype);
  uj_dtype_t xdt = ir_dtype_compute(x->dtype);
  ir_block_t* b = ir_add_block(f);
  ir_ix_t* zero = ir_ix_const(f, 0);
  if (!b || !zero) return uop_oom();
  int loop_of_axis[UJ_MAX_DIMS];
  for (int k = 0; k < ndim; k++) {
    if (axes & (1u << k)) continue;
    ir_loop_t* l = ir_add_loop(f, b, zero, x->dims[k]);
    if (!l) return uop_oom();
    loop_of_axis[k] = l->id;
  }
  if (b->nloops == 0 && !ir_add_loop(f, b, zero, ir_ix_const(f, 1))) return uop_oom();
  int carrier = b->nloops - 1;
  int c = ir_add_carried(f, &b->loops[carrier], op == UJ_REDUCE_MEAN ? UJ_REDUCE_SUM : op, xdt);
  if (c < 0) return uop_oom();
  ir_ix_t* flat = zero;   /* flat index over the reduced axes, for arg ops */
  ir_ix_t* count = ir_ix_const(f, 1);
  for (int k = 0; k < ndim; k++) {
    if (!(axes & (1u << k))) continue;
    ir_loop_t* l = ir_add_loop(f, b, zero, x->dims[k]);
    if (!l) return uop_oom();
    loop_of_axis[k] = l->id;
    flat = ir_ix_bin(f, IR_IX_ADD, ir_ix_bin(f, IR_IX_MUL, flat, x->dims[k]), ir_ix_loop(f, l->id));
    count = ir_ix_bin(f, IR_IX_MUL, count, x->dims[k]);
  }
  if (!flat || !count) return uop_oom();
  ir_access_t acc;
  ir_access_init(&acc, xt);
  acc.nidx = ndim;
  for (int k = 0; k < ndim; k++)
    if (!(acc.idx[k] = ir_ix_loop(f, loop_of_axis[k]))) return uop_oom();
  ir_stmt_t* s = ir_add_stmt(f, &b->loops[b->nloops - 1], IR_ST_ACCUM);
  if (!s) return uop_oom();
  s->carried = c;
  s->value = ir_ex_load(f, &acc);
  if (ir_reduce_is_arg(op)) s->arg_index = flat;
  /* the store sits on the carrier, after the reduced loops have run */
  ir_stmt_t* st = ir_add_stmt(f, &b->loops[carrier], IR_ST_STORE);
  if (!st || !s->value) return uop_oom();
  ir_access_init(&st->target, t);
  st->target.nidx = ndim;
  for (int k = 0; k < ndim; k++) {
    st->target.idx[k] = (axes & (1u << k)) ? ir_ix_const(f, 0) : ir_ix_loop(f, loop_of_axis[k]);
    if (!st->target.idx[k]) return uop_oom();
  }
  ir_expr_t* v = ir_ex_carried(f, c, out_dtype);
  if (op == UJ_REDUCE_MEAN) v = ir_ex_binary(f, UJ_BINARY_DIV, v, ir_ex_index(f, count, xdt));
  if (!v) return uop_oom();
  st->value = v;
  return UJ_OK;
}

uj_status_t uop_reduce_grad(uop_emit_t* E, int n, int operand, int gout, int dst) {
  (void)operand;
  const uop_node_t* node = &E->g->nodes[n];
  ir_func_t* f = E->f;
  uj_reduce_op_t op = (uj_reduce_op_t)node->op;
  int xt = E->tensor_of[node->in[0]], yt = E->tensor_of[n];
  uj_dtype_t dt = f->tensors[dst].dtype;
  int ndim = f->tensors[xt].ndim;
  if (ir_reduce_is_arg(op)) return uop_emit_fill(E, dst, 0.0);
  int at = -1; /* the selected flat index, for max and min */
  if (op == UJ_REDUCE_MAX || op == UJ_REDUCE_MIN) {
    if ((at = ir_add_tensor(f, UJ_I32, ndim, IR_TENSOR_TEMP, -1)) < 0) return uop_oom();
    memcpy(f->tensors[at].dims, f->tensors[yt].dims, sizeof f->tensors[yt].dims);
    uj_status_t s = uop_emit_reduce(E, op == UJ_REDUCE_MAX ? UJ_REDUCE_ARGMAX : UJ_REDUCE_ARGMIN, node->axes, xt, at);
    if (s != UJ_OK) return s;
  }
  uop_nest_t nest;
  uj_status_t s = uop_nest_over(E, xt, &nest);
  if (s != UJ_OK) return s;
  ir_access_t kept; /* y-shaped tensors at this element: reduced axes at 0 */
  ir_access_init(&kept, gout);
  kept.nidx = ndim;
  ir_ix_t* flat = ir_ix_const(f, 0);
  ir_ix_t* count = ir_ix_const(f, 1);
  for (int k = 0; k < ndim; k++) {
    int reduced = (node->axes >> k) & 1u;
    kept.idx[k] = reduced ? ir_ix_const(f, 0) : ir_ix_loop(f, nest.loop_ids[k]);
    if (reduced) {
      flat = ir_ix_bin(f, IR_IX_ADD, ir_ix_bin(f, IR_IX_MUL, flat, f->tensors[xt].dims[k]), ir_ix_loop(f, nest.loop_ids[k]));
      count = ir_ix_bin(f, IR_IX_MUL, count, f->tensors[xt].dims[k]);
    }
    if (!kept.idx[k]) return uop_oom();
  }
  if (!flat || !count) return uop_oom();
  ir_expr_t* g = ir_ex_load(f, &kept);
  ir_expr_t* v = NULL;
  switch (op) {
    case UJ_REDUCE_SUM: v = g; break;
    case UJ_REDUCE_MEAN: v = ir_ex_binary(f, UJ_BINARY_DIV, g, ir_ex_index(f, count, dt)); break;
    case UJ_REDUCE_PROD: {
      kept.tensor = yt;
      ir_expr_t* y = ir_ex_load(f, &kept);
      v = ir_ex_binary(f, UJ_BINARY_DIV, ir_ex_binary(f, UJ_BINARY_MUL, g, y), uop_operand(E, node->in[0], &nest, dt));
      break;
    }
    default: {
      kept.tensor = at;
      ir_expr_t* hit = ir_ex_binary(f, UJ_BINARY_EQ, ir_ex_index(f, flat, UJ_I32), ir_ex_load(f, &kept));
      v = ir_ex_where(f, hit, g, ir_ex_const(f, dt, 0.0));
      break;
    }
  }
  return uop_store(E, &nest, dst, v);
}
