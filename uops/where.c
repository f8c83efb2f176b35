/* uops/where.c: out = cond != 0 ? a : b elementwise. a and b share a dtype
 * (a const adopts the other's); cond may have any dtype. Shapes follow the
 * binary rule: the first operand that is not 0-d gives the shape. The
 * gradient goes to a where cond holds and to b elsewhere; cond has none. */
#include "uops.h"

uj_io_t uj_where(uj_graph_t* g, uj_io_t cond, uj_io_t a, uj_io_t b) {
  if (!uop_check_id(g, cond, "uj_where", "cond") || !uop_check_id(g, a, "uj_where", "a") ||
      !uop_check_id(g, b, "uj_where", "b"))
    return -1;
  if (!uop_is_value(g, cond, "uj_where", "cond") || !uop_is_value(g, a, "uj_where", "a") ||
      !uop_is_value(g, b, "uj_where", "b"))
    return -1;
  uj_dtype_t da = uop_dtype_with(g, a, b), db = uop_dtype_with(g, b, a);
  if (da != db)
    return rt_error(UJ_ERR_INVALID, "uj_where: a (node %d) is %s but b (node %d) is %s; cast one of them",
                    a, uj_dtype_name(da), b, uj_dtype_name(db)), -1;
  uj_io_t ids[3] = {cond, a, b};
  const char* names[3] = {"cond", "a", "b"};
  int ndim;
  if (!uop_ranks_agree(g, "uj_where", 3, ids, names, &ndim)) return -1;
  uop_node_t n = {.kind = UOP_WHERE, .dtype = da, .ndim = ndim, .nin = 3, .in = {cond, a, b}};
  return uop_graph_add(g, &n);
}

uj_status_t uop_where_emit(uop_emit_t* E, int n) {
  const uop_node_t* node = &E->g->nodes[n];
  int t = E->tensor_of[n];
  uop_nest_t nest;
  uj_status_t s = uop_nest_over(E, t, &nest);
  if (s != UJ_OK) return s;
  uj_dtype_t cdt = uop_dtype_with(E->g, node->in[0], node->in[1]);
  ir_expr_t* c = uop_operand(E, node->in[0], &nest, cdt);
  ir_expr_t* a = uop_operand(E, node->in[1], &nest, node->dtype);
  ir_expr_t* b = uop_operand(E, node->in[2], &nest, node->dtype);
  return uop_store(E, &nest, t, ir_ex_where(E->f, c, a, b));
}

static ir_expr_t* where_local(uop_emit_t* E, int n, int operand, const uop_nest_t* nest, ir_expr_t* g) {
  const uop_node_t* node = &E->g->nodes[n];
  ir_func_t* f = E->f;
  ir_expr_t* zero = ir_ex_const(f, node->dtype, 0.0);
  if (operand == 0) return zero;
  ir_expr_t* c = uop_operand(E, node->in[0], nest, uop_dtype_with(E->g, node->in[0], node->in[1]));
  return operand == 1 ? ir_ex_where(f, c, g, zero) : ir_ex_where(f, c, zero, g);
}

uj_status_t uop_where_grad(uop_emit_t* E, int n, int operand, int gout, int dst) {
  return uop_grad_elementwise(E, n, operand, gout, dst, where_local);
}
