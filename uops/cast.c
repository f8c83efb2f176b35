/* uops/cast.c: out = (dtype)x elementwise. Float to i32 truncates toward zero,
 * saturates at the i32 range and maps NaN to 0 (the interpreter's rule).
 * A cast to bf16/f16 rounds to it (ties to even); the value goes on as an
 * f32, as every bf16/f16 value does until stored: CAST(f32, CAST(bf16, x))
 * in the IR (ir/half.c).
 * The gradient is the output gradient cast back. */
#include "uops.h"

uj_io_t uj_cast(uj_graph_t* g, uj_dtype_t dtype, uj_io_t x) {
  if (!uop_check_id(g, x, "uj_cast", "x")) return -1;
  if (uj_dtype_size(dtype) == 0)
    return rt_error(UJ_ERR_INVALID, "uj_cast: unknown dtype %d", (int)dtype), -1;
  const uop_node_t* xn = &g->nodes[x];
  if (xn->kind == UOP_GRAD) return rt_error(UJ_ERR_INVALID, "uj_cast: x (node %d) is a gradient name, not a value", x), -1;
  uop_node_t n = {.kind = UOP_CAST, .dtype = dtype, .ndim = xn->ndim, .nin = 1, .in = {x}};
  return uop_graph_add(g, &n);
}

uj_status_t uop_cast_emit(uop_emit_t* E, int n) {
  const uop_node_t* node = &E->g->nodes[n];
  int t = E->tensor_of[n];
  uop_nest_t nest;
  uj_status_t s = uop_nest_over(E, t, &nest);
  if (s != UJ_OK) return s;
  ir_expr_t* x = uop_operand(E, node->in[0], &nest, E->g->nodes[node->in[0]].dtype);
  ir_expr_t* v = ir_ex_cast(E->f, node->dtype, x);
  if (ir_dtype_is_half(node->dtype)) v = ir_ex_cast(E->f, UJ_F32, v);
  return uop_store(E, &nest, t, v);
}

static ir_expr_t* cast_local(uop_emit_t* E, int n, int operand, const uop_nest_t* nest, ir_expr_t* g) {
  (void)nest;
  int x = E->g->nodes[n].in[operand];
  return ir_ex_cast(E->f, uop_dtype_with(E->g, x, n), g);
}

uj_status_t uop_cast_grad(uop_emit_t* E, int n, int operand, int gout, int dst) {
  return uop_grad_elementwise(E, n, operand, gout, dst, cast_local);
}
