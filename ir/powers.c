/* ir/powers.c: powers by a constant become multiplications and roots.
 *
 * pow(x, n) is a libm (or device library) call at every element, and a
 * trap for anyone writing GELU's tanh form as x**3. For a float constant n:
 *
 *   n = 2, 3, 4      x*x, x*x*x, x*x*x*x (left to right)
 *   n = -1, -2       recip(x), r*r with r = recip(x)
 *   n = 0.5, -0.5    where(x == -inf, +inf or 0, sqrt or rsqrt(x + 0))
 *   n = 1            x
 *
 * Results are within 2 ulp of pow's (tests/test_powers.c) and keep pow's
 * special values exactly, so that no special value depends on whether the
 * passes ran; -3, -4 (3 and 5 ulp this way) and 0 stay pow. A
 * base that is not a leaf is computed once into a 0-d local; runs before
 * cse, which then shares the loads. Invalidates deps. */
#include <math.h>

#include "ir.h"

static int is_leaf(const ir_expr_t* e) {
  return e->kind == IR_EX_LOAD || e->kind == IR_EX_CONST || e->kind == IR_EX_INDEX || e->kind == IR_EX_CARRIED;
}

/* Whether e is a pow this pass rewrites. */
static int rewritable(const ir_expr_t* e) {
  if (e->kind != IR_EX_BINARY || e->op != UJ_BINARY_POW || e->b->kind != IR_EX_CONST) return 0;
  if (e->dtype != UJ_F32 && e->dtype != UJ_F64) return 0;
  double n = e->b->value;
  return n == 0.5 || n == -0.5 || n == 1 || n == 2 || n == 3 || n == 4 || n == -1 || n == -2;
}

/* The first rewritable pow in e, innermost first (so that a rewritten base
 * is final before its power is). */
static ir_expr_t* find(ir_expr_t* e) {
  if (!e) return NULL;
  ir_expr_t* r = find(e->a);
  if (!r) r = find(e->b);
  if (!r) r = find(e->c);
  return r ? r : rewritable(e) ? e : NULL;
}

/* A 0-d local holding v, defined at position *s of loop l (the statement
 * being rewritten moves to *s + 1); a load of it, or NULL on out of memory. */
static ir_expr_t* in_local(ir_func_t* f, ir_loop_t* l, int* s, ir_expr_t* v) {
  int local = ir_add_local(f, v->dtype);
  ir_stmt_t* def = local >= 0 ? ir_insert_stmt(f, l, *s, IR_ST_STORE) : NULL;
  if (!def) return NULL;
  ir_access_init(&def->target, local);
  def->value = v;
  (*s)++;
  ir_access_t acc;
  ir_access_init(&acc, local);
  return ir_ex_load(f, &acc);
}

/* A fresh node reading the same leaf as x. */
static ir_expr_t* again(ir_func_t* f, const ir_expr_t* x) { return ir_expr_copy(f, x); }

/* Rewrites the pow e (in statement *s of l) in place. 0 on out of memory.
 * At most three roundings of half an ulp each; the reciprocal comes first
 * so that 1/x**2 does not pass through an underflowed x**2. Products of x
 * keep its signed zeros, infinities and NaN as pow does for whole
 * exponents. For the half powers x + 0 turns -0 into +0 (pow(-0, 0.5) = +0,
 * pow(-0, -0.5) = +inf) and the select gives pow's values at -inf, where
 * sqrt and rsqrt give NaN. The base (and r) goes into a local defined just
 * before the statement that reads it. */
static int rewrite(ir_func_t* f, ir_loop_t* l, int* s, ir_expr_t* e) {
  double n = e->b->value;
  ir_expr_t* x = e->a;
  ir_expr_t* out;
  if (n == 1) {
    out = x;
  } else if (n == 0.5 || n == -0.5) {
    if (!is_leaf(x)) x = in_local(f, l, s, x);
    ir_expr_t* zero = ir_ex_const(f, e->dtype, 0.0);
    ir_expr_t* plus = x && zero ? ir_ex_binary(f, UJ_BINARY_ADD, x, zero) : NULL;
    ir_expr_t* root = plus ? ir_ex_unary(f, n > 0 ? UJ_UNARY_SQRT : UJ_UNARY_RSQRT, plus) : NULL;
    ir_expr_t* y = x ? again(f, x) : NULL;
    ir_expr_t* minf = ir_ex_const(f, e->dtype, -INFINITY);
    ir_expr_t* is_minf = y && minf ? ir_ex_binary(f, UJ_BINARY_EQ, y, minf) : NULL;
    ir_expr_t* at_minf = ir_ex_const(f, e->dtype, n > 0 ? INFINITY : 0.0);
    out = root && is_minf && at_minf ? ir_ex_where(f, is_minf, at_minf, root) : NULL;
  } else {
    int k = (int)fabs(n);
    if (n < 0) {
      x = ir_ex_unary(f, UJ_UNARY_RECIP, x);
      if (x && k > 1) x = in_local(f, l, s, x);
    } else if (!is_leaf(x)) {
      x = in_local(f, l, s, x);
    }
    out = x;
    for (int i = 1; i < k && out; i++) {
      ir_expr_t* y = x ? again(f, x) : NULL;
      out = y ? ir_ex_binary(f, UJ_BINARY_MUL, out, y) : NULL;
    }
  }
  if (!out) return 0;
  *e = *out; /* the parent keeps pointing at e */
  return 1;
}

uj_status_t ir_pass_powers(ir_func_t* f) {
  for (int b = 0; b < f->nblocks; b++)
    for (int k = 0; k < f->blocks[b].nloops; k++) {
      ir_loop_t* l = &f->blocks[b].loops[k];
      for (int s = 0; s < l->nstmts; s++) {
        ir_expr_t* e;
        while ((e = find(l->stmts[s].value)) != NULL)
          if (!rewrite(f, l, &s, e))
            return rt_error(UJ_ERR_OOM, "powers: out of memory rewriting a power in block %d, loop %d", b, k);
      }
    }
  return UJ_OK;
}
