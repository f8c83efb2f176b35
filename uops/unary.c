/* uops/unary.c: out = op(x) elementwise, for the unary ops of the op table
 * (include/uopjit_ops.h). The float-only ops refuse i32 when the graph is
 * built. The gradient multiplies the output gradient g by the derivative,
 * written with the output y where that is cheaper (exp: g*y, tanh:
 * g*(1-y*y), sigmoid: g*y*(1-y), tan: g*(1+y*y), cbrt: g/(3y^2); lgamma:
 * g*digamma(x), by a series); the steps (floor, ceil, round, sign, trunc)
 * have none. */
#include "uops.h"

uj_io_t uj_unary(uj_graph_t* g, uj_unary_op_t op, uj_io_t x) {
  if (!uop_check_id(g, x, "uj_unary", "x")) return -1;
  if (!ir_unary_valid(op))
    return rt_error(UJ_ERR_INVALID, "uj_unary: unknown op %d (there are %d)", (int)op, UJ_UNARY_COUNT), -1;
  const uop_node_t* xn = &g->nodes[x];
  if (xn->kind == UOP_GRAD) return rt_error(UJ_ERR_INVALID, "uj_unary: x (node %d) is a gradient name, not a value", x), -1;
  if (!ir_unary_takes_i32(op) && xn->dtype == UJ_I32)
    return rt_error(UJ_ERR_INVALID, "uj_unary: %s needs a float tensor; x (node %d) is i32", ir_unary_name(op), x), -1;
  uop_node_t n = {.kind = UOP_UNARY, .dtype = xn->dtype, .ndim = xn->ndim, .op = op, .nin = 1, .in = {x}};
  return uop_graph_add(g, &n);
}

uj_status_t uop_unary_emit(uop_emit_t* E, int n) {
  const uop_node_t* node = &E->g->nodes[n];
  int t = E->tensor_of[n];
  uop_nest_t nest;
  uj_status_t s = uop_nest_over(E, t, &nest);
  if (s != UJ_OK) return s;
  ir_expr_t* x = uop_operand(E, node->in[0], &nest, node->dtype);
  return uop_store(E, &nest, t, ir_ex_unary(E->f, (uj_unary_op_t)node->op, x));
}

static ir_expr_t* mul(ir_func_t* f, ir_expr_t* a, ir_expr_t* b) { return ir_ex_binary(f, UJ_BINARY_MUL, a, b); }
static ir_expr_t* add(ir_func_t* f, ir_expr_t* a, ir_expr_t* b) { return ir_ex_binary(f, UJ_BINARY_ADD, a, b); }

/* digamma(z), lgamma's derivative, for z = x (reflect 0) or z = 1 - x
 * (reflect 1), z > 0: the recurrence up to w = z + 6, psi(z) = psi(w) -
 * sum of 1/(z + k) for k < 6, then psi(w)'s asymptotic series to the w^-8
 * term, whose first omitted term is below 1e-10 for w >= 6. Each use of x
 * is an operand of its own (expressions are trees). */
static ir_expr_t* digamma_of(uop_emit_t* E, const uop_node_t* node, const uop_nest_t* nest, uj_dtype_t dt,
                             int reflect) {
  ir_func_t* f = E->f;
#define Z() (reflect ? ir_ex_binary(f, UJ_BINARY_SUB, ir_ex_const(f, dt, 1.0), uop_operand(E, node->in[0], nest, dt)) \
                     : uop_operand(E, node->in[0], nest, dt))
  ir_expr_t* sum = ir_ex_unary(f, UJ_UNARY_RECIP, Z());
  for (int k = 1; k < 6; k++) sum = add(f, sum, ir_ex_unary(f, UJ_UNARY_RECIP, add(f, Z(), ir_ex_const(f, dt, k))));
  ir_expr_t* r = ir_ex_unary(f, UJ_UNARY_RECIP, add(f, Z(), ir_ex_const(f, dt, 6.0)));
  ir_expr_t* r2 = ir_ex_unary(f, UJ_UNARY_RECIP, mul(f, add(f, Z(), ir_ex_const(f, dt, 6.0)), add(f, Z(), ir_ex_const(f, dt, 6.0))));
  /* r2 * (1/12 - r2 (1/120 - r2 (1/252 - r2/240))), with r2 fresh at each level */
  static const double c[] = {1.0 / 240, 1.0 / 252, 1.0 / 120, 1.0 / 12};
  ir_expr_t* series = ir_ex_const(f, dt, c[0]);
  for (int k = 1; k < 4; k++) {
    ir_expr_t* rk = ir_ex_unary(f, UJ_UNARY_RECIP, mul(f, add(f, Z(), ir_ex_const(f, dt, 6.0)), add(f, Z(), ir_ex_const(f, dt, 6.0))));
    series = ir_ex_binary(f, UJ_BINARY_SUB, ir_ex_const(f, dt, c[k]), mul(f, rk, series));
  }
  ir_expr_t* psi_w = ir_ex_binary(f, UJ_BINARY_SUB, ir_ex_unary(f, UJ_UNARY_LOG, add(f, Z(), ir_ex_const(f, dt, 6.0))),
                                  add(f, mul(f, ir_ex_const(f, dt, 0.5), r), mul(f, r2, series)));
#undef Z
  return ir_ex_binary(f, UJ_BINARY_SUB, psi_w, sum);
}

static ir_expr_t* unary_local(uop_emit_t* E, int n, int operand, const uop_nest_t* nest, ir_expr_t* g) {
  (void)operand;
  const uop_node_t* node = &E->g->nodes[n];
  ir_func_t* f = E->f;
  uj_dtype_t dt = node->dtype;
  ir_expr_t* x = uop_operand(E, node->in[0], nest, dt);
  ir_expr_t* y = uop_operand(E, n, nest, dt);
  ir_expr_t* one = ir_ex_const(f, dt, 1.0);
  switch ((uj_unary_op_t)node->op) {
    case UJ_UNARY_NEG: return ir_ex_unary(f, UJ_UNARY_NEG, g);
    case UJ_UNARY_ABS: {
      ir_expr_t* pos = ir_ex_binary(f, UJ_BINARY_GT, x, ir_ex_const(f, dt, 0.0));
      ir_expr_t* neg = ir_ex_binary(f, UJ_BINARY_LT, x, ir_ex_const(f, dt, 0.0));
      ir_expr_t* sign = ir_ex_binary(f, UJ_BINARY_SUB, pos, neg);
      return ir_ex_binary(f, UJ_BINARY_MUL, g, sign);
    }
    case UJ_UNARY_EXP: return ir_ex_binary(f, UJ_BINARY_MUL, g, y);
    case UJ_UNARY_LOG: return ir_ex_binary(f, UJ_BINARY_DIV, g, x);
    case UJ_UNARY_SQRT:
      return ir_ex_binary(f, UJ_BINARY_DIV, ir_ex_binary(f, UJ_BINARY_MUL, g, ir_ex_const(f, dt, 0.5)), y);
    case UJ_UNARY_RSQRT: { /* d/dx x^-1/2 = -1/2 y^3 */
      ir_expr_t* y3 = ir_ex_binary(f, UJ_BINARY_MUL, ir_ex_binary(f, UJ_BINARY_MUL, y, y), uop_operand(E, n, nest, dt));
      return ir_ex_binary(f, UJ_BINARY_MUL, ir_ex_binary(f, UJ_BINARY_MUL, g, ir_ex_const(f, dt, -0.5)), y3);
    }
    case UJ_UNARY_RECIP: /* -y^2 */
      return ir_ex_unary(f, UJ_UNARY_NEG,
                         ir_ex_binary(f, UJ_BINARY_MUL, g, ir_ex_binary(f, UJ_BINARY_MUL, y, uop_operand(E, n, nest, dt))));
    case UJ_UNARY_SIN: return ir_ex_binary(f, UJ_BINARY_MUL, g, ir_ex_unary(f, UJ_UNARY_COS, x));
    case UJ_UNARY_COS: return ir_ex_unary(f, UJ_UNARY_NEG, ir_ex_binary(f, UJ_BINARY_MUL, g, ir_ex_unary(f, UJ_UNARY_SIN, x)));
    case UJ_UNARY_TANH:
      return ir_ex_binary(f, UJ_BINARY_MUL, g,
                          ir_ex_binary(f, UJ_BINARY_SUB, one, ir_ex_binary(f, UJ_BINARY_MUL, y, uop_operand(E, n, nest, dt))));
    case UJ_UNARY_SIGMOID:
      return ir_ex_binary(f, UJ_BINARY_MUL, ir_ex_binary(f, UJ_BINARY_MUL, g, y),
                          ir_ex_binary(f, UJ_BINARY_SUB, one, uop_operand(E, n, nest, dt)));
    case UJ_UNARY_FLOOR:
    case UJ_UNARY_CEIL:
    case UJ_UNARY_ROUND:
    case UJ_UNARY_SIGN:
    case UJ_UNARY_TRUNC: return ir_ex_const(f, dt, 0.0); /* flat almost everywhere */
    case UJ_UNARY_TAN: return mul(f, g, add(f, one, mul(f, y, uop_operand(E, n, nest, dt)))); /* 1 + y^2 */
    case UJ_UNARY_ERF:
    case UJ_UNARY_ERFC: { /* +-2/sqrt(pi) e^(-x^2) */
      double k = node->op == UJ_UNARY_ERF ? 1.1283791670955126 : -1.1283791670955126;
      ir_expr_t* x2 = mul(f, x, uop_operand(E, node->in[0], nest, dt));
      return mul(f, mul(f, g, ir_ex_const(f, dt, k)), ir_ex_unary(f, UJ_UNARY_EXP, ir_ex_unary(f, UJ_UNARY_NEG, x2)));
    }
    case UJ_UNARY_LOG1P: return ir_ex_binary(f, UJ_BINARY_DIV, g, add(f, x, one));
    case UJ_UNARY_EXPM1: return mul(f, g, add(f, y, one));
    case UJ_UNARY_LOG2: return ir_ex_binary(f, UJ_BINARY_DIV, g, mul(f, x, ir_ex_const(f, dt, 0.69314718055994531)));
    case UJ_UNARY_LOG10: return ir_ex_binary(f, UJ_BINARY_DIV, g, mul(f, x, ir_ex_const(f, dt, 2.3025850929940457)));
    case UJ_UNARY_EXP2: return mul(f, mul(f, g, ir_ex_const(f, dt, 0.69314718055994531)), y);
    case UJ_UNARY_SINH: return mul(f, g, ir_ex_unary(f, UJ_UNARY_COSH, x));
    case UJ_UNARY_COSH: return mul(f, g, ir_ex_unary(f, UJ_UNARY_SINH, x));
    case UJ_UNARY_ASIN: /* +-1/sqrt(1 - x^2) */
    case UJ_UNARY_ACOS: {
      ir_expr_t* r = ir_ex_unary(f, UJ_UNARY_RSQRT, ir_ex_binary(f, UJ_BINARY_SUB, one, mul(f, x, uop_operand(E, node->in[0], nest, dt))));
      return node->op == UJ_UNARY_ASIN ? mul(f, g, r) : ir_ex_unary(f, UJ_UNARY_NEG, mul(f, g, r));
    }
    case UJ_UNARY_ATAN: return ir_ex_binary(f, UJ_BINARY_DIV, g, add(f, one, mul(f, x, uop_operand(E, node->in[0], nest, dt))));
    case UJ_UNARY_ASINH: /* 1/sqrt(x^2 +- 1) */
    case UJ_UNARY_ACOSH: {
      ir_expr_t* x2 = mul(f, x, uop_operand(E, node->in[0], nest, dt));
      ir_expr_t* d = node->op == UJ_UNARY_ASINH ? add(f, x2, one) : ir_ex_binary(f, UJ_BINARY_SUB, x2, one);
      return mul(f, g, ir_ex_unary(f, UJ_UNARY_RSQRT, d));
    }
    case UJ_UNARY_ATANH:
      return ir_ex_binary(f, UJ_BINARY_DIV, g, ir_ex_binary(f, UJ_BINARY_SUB, one, mul(f, x, uop_operand(E, node->in[0], nest, dt))));
    case UJ_UNARY_CBRT: /* 1/(3 y^2) */
      return ir_ex_binary(f, UJ_BINARY_DIV, g, mul(f, ir_ex_const(f, dt, 3.0), mul(f, y, uop_operand(E, n, nest, dt))));
    case UJ_UNARY_LGAMMA: { /* digamma(x); below 1/2 by reflection, psi(1 - x) - pi / tan(pi x) */
      ir_expr_t* pix = mul(f, ir_ex_const(f, dt, 3.14159265358979323846), x);
      ir_expr_t* left = ir_ex_binary(f, UJ_BINARY_SUB, digamma_of(E, node, nest, dt, 1),
                                     ir_ex_binary(f, UJ_BINARY_DIV, ir_ex_const(f, dt, 3.14159265358979323846),
                                                  ir_ex_unary(f, UJ_UNARY_TAN, pix)));
      ir_expr_t* low = ir_ex_binary(f, UJ_BINARY_LT, uop_operand(E, node->in[0], nest, dt), ir_ex_const(f, dt, 0.5));
      return mul(f, g, ir_ex_where(f, low, left, digamma_of(E, node, nest, dt, 0)));
    }
    case UJ_UNARY_COUNT: break;
  }
  return NULL;
}

uj_status_t uop_unary_grad(uop_emit_t* E, int n, int operand, int gout, int dst) {
  return uop_grad_elementwise(E, n, operand, gout, dst, unary_local);
}
