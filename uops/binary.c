/* uops/binary.c: out = a op b elementwise. The result takes the shape of
 * the operand that is not 0-d (a 0-d operand, such as a constant or a scalar
 * input, is read at every element); two non-0-d operands must agree in rank
 * now and in sizes at run time. A const adopts the other operand's dtype;
 * otherwise the dtypes must match. Comparisons give 1 or 0 in that dtype.
 *
 * Gradients (g the output gradient, y the output): add g, g; sub g, -g;
 * mul g*b, g*a; div g/b, -g*y/b; pow g*b*a^(b-1), g*y*log(a); max and min
 * route g to the operand they selected (a when a wins or b is NaN, as the
 * interpreter selects); atan2 g b/(a^2+b^2), -g a/(a^2+b^2); hypot g a/y,
 * g b/y; copysign g sign(a) sign(b), none; mod and fmod g, -g (a-y)/b;
 * comparisons have none. A 0-d operand sums its
 * contributions over the output. */
#include "uops.h"

uj_io_t uj_binary(uj_graph_t* g, uj_binary_op_t op, uj_io_t a, uj_io_t b) {
  if (!uop_check_id(g, a, "uj_binary", "a") || !uop_check_id(g, b, "uj_binary", "b")) return -1;
  if (!ir_binary_valid(op))
    return rt_error(UJ_ERR_INVALID, "uj_binary: unknown op %d (there are %d)", (int)op, UJ_BINARY_COUNT), -1;
  if (!uop_is_value(g, a, "uj_binary", "a") || !uop_is_value(g, b, "uj_binary", "b")) return -1;
  uj_dtype_t da = uop_dtype_with(g, a, b), db = uop_dtype_with(g, b, a);
  if (da != db)
    return rt_error(UJ_ERR_INVALID, "uj_binary: a (node %d) is %s but b (node %d) is %s; cast one of them",
                    a, uj_dtype_name(da), b, uj_dtype_name(db)), -1;
  if (!ir_binary_takes_i32(op) && da == UJ_I32)
    return rt_error(UJ_ERR_INVALID, "uj_binary: %s needs float operands; a (node %d) is i32", ir_binary_name(op), a), -1;
  uj_io_t ids[2] = {a, b};
  const char* names[2] = {"a", "b"};
  int ndim;
  if (!uop_ranks_agree(g, "uj_binary", 2, ids, names, &ndim)) return -1;
  uop_node_t n = {.kind = UOP_BINARY, .dtype = da, .ndim = ndim, .op = op, .nin = 2, .in = {a, b}};
  return uop_graph_add(g, &n);
}

uj_status_t uop_binary_emit(uop_emit_t* E, int n) {
  const uop_node_t* node = &E->g->nodes[n];
  int t = E->tensor_of[n];
  uop_nest_t nest;
  uj_status_t s = uop_nest_over(E, t, &nest);
  if (s != UJ_OK) return s;
  ir_expr_t* a = uop_operand(E, node->in[0], &nest, node->dtype);
  ir_expr_t* b = uop_operand(E, node->in[1], &nest, node->dtype);
  return uop_store(E, &nest, t, ir_ex_binary(E->f, (uj_binary_op_t)node->op, a, b));
}

/* 1 where max (or min) selected a: (a > b) or b is NaN. */
static ir_expr_t* selected_a(ir_func_t* f, uj_binary_op_t op, ir_expr_t* a, ir_expr_t* b, ir_expr_t* b2) {
  ir_expr_t* wins = ir_ex_binary(f, op == UJ_BINARY_MAX ? UJ_BINARY_GT : UJ_BINARY_LT, a, b);
  ir_expr_t* nan = ir_ex_binary(f, UJ_BINARY_NE, b2, b2);
  return ir_ex_binary(f, UJ_BINARY_MAX, wins, nan);
}

static ir_expr_t* binary_local(uop_emit_t* E, int n, int operand, const uop_nest_t* nest, ir_expr_t* g) {
  const uop_node_t* node = &E->g->nodes[n];
  ir_func_t* f = E->f;
  uj_dtype_t dt = node->dtype;
  ir_expr_t* a = uop_operand(E, node->in[0], nest, dt);
  ir_expr_t* b = uop_operand(E, node->in[1], nest, dt);
  ir_expr_t* zero = ir_ex_const(f, dt, 0.0);
  switch ((uj_binary_op_t)node->op) {
    case UJ_BINARY_ADD: return g;
    case UJ_BINARY_SUB: return operand == 0 ? g : ir_ex_unary(f, UJ_UNARY_NEG, g);
    case UJ_BINARY_MUL: return ir_ex_binary(f, UJ_BINARY_MUL, g, operand == 0 ? b : a);
    case UJ_BINARY_DIV:
      if (operand == 0) return ir_ex_binary(f, UJ_BINARY_DIV, g, b);
      return ir_ex_unary(f, UJ_UNARY_NEG,
                         ir_ex_binary(f, UJ_BINARY_DIV, ir_ex_binary(f, UJ_BINARY_MUL, g, uop_operand(E, n, nest, dt)), b));
    case UJ_BINARY_POW:
      if (operand == 0) {
        ir_expr_t* bm1 = ir_ex_binary(f, UJ_BINARY_SUB, uop_operand(E, node->in[1], nest, dt), ir_ex_const(f, dt, 1.0));
        return ir_ex_binary(f, UJ_BINARY_MUL, ir_ex_binary(f, UJ_BINARY_MUL, g, b), ir_ex_binary(f, UJ_BINARY_POW, a, bm1));
      }
      return ir_ex_binary(f, UJ_BINARY_MUL, ir_ex_binary(f, UJ_BINARY_MUL, g, uop_operand(E, n, nest, dt)),
                          ir_ex_unary(f, UJ_UNARY_LOG, a));
    case UJ_BINARY_MAX:
    case UJ_BINARY_MIN: {
      ir_expr_t* sel = selected_a(f, (uj_binary_op_t)node->op, a, b, uop_operand(E, node->in[1], nest, dt));
      return operand == 0 ? ir_ex_where(f, sel, g, zero) : ir_ex_where(f, sel, zero, g);
    }
    case UJ_BINARY_ATAN2: { /* (g b, -g a) / (a^2 + b^2) */
      ir_expr_t* a2 = ir_ex_binary(f, UJ_BINARY_MUL, a, uop_operand(E, node->in[0], nest, dt));
      ir_expr_t* b2 = ir_ex_binary(f, UJ_BINARY_MUL, b, uop_operand(E, node->in[1], nest, dt));
      ir_expr_t* num = operand == 0 ? ir_ex_binary(f, UJ_BINARY_MUL, g, uop_operand(E, node->in[1], nest, dt))
                                    : ir_ex_unary(f, UJ_UNARY_NEG, ir_ex_binary(f, UJ_BINARY_MUL, g, uop_operand(E, node->in[0], nest, dt)));
      return ir_ex_binary(f, UJ_BINARY_DIV, num, ir_ex_binary(f, UJ_BINARY_ADD, a2, b2));
    }
    case UJ_BINARY_HYPOT: /* g a / y, g b / y */
      return ir_ex_binary(f, UJ_BINARY_DIV, ir_ex_binary(f, UJ_BINARY_MUL, g, operand == 0 ? a : b), uop_operand(E, n, nest, dt));
    case UJ_BINARY_COPYSIGN: { /* g sign(a) sign(b) for a, nothing for b */
      if (operand == 1) return zero;
      ir_expr_t* one = ir_ex_const(f, dt, 1.0);
      ir_expr_t* s = ir_ex_binary(f, UJ_BINARY_MUL, ir_ex_binary(f, UJ_BINARY_COPYSIGN, one, a),
                                  ir_ex_binary(f, UJ_BINARY_COPYSIGN, ir_ex_const(f, dt, 1.0), b));
      return ir_ex_binary(f, UJ_BINARY_MUL, g, s);
    }
    case UJ_BINARY_MOD:
    case UJ_BINARY_FMOD: /* a - q b with q an integer: g, and -g q = -g (a - y) / b */
      if (operand == 0) return g;
      return ir_ex_unary(f, UJ_UNARY_NEG,
                         ir_ex_binary(f, UJ_BINARY_DIV,
                                      ir_ex_binary(f, UJ_BINARY_MUL, g, ir_ex_binary(f, UJ_BINARY_SUB, a, uop_operand(E, n, nest, dt))), b));
    default: return zero; /* comparisons are flat */
  }
}

uj_status_t uop_binary_grad(uop_emit_t* E, int n, int operand, int gout, int dst) {
  return uop_grad_elementwise(E, n, operand, gout, dst, binary_local);
}
