/* jit/mir/mir_scalars.c: scalar operations computed once per call.
 *
 * An operation on 0-d inputs and constants alone (ir_expr_scalar), in f32
 * or f64 throughout, has the same value at every element: what an
 * optimizer computes from its hyperparameters (1 - b2, lr/bc1), in f64 and
 * rounded once (lang/build.c). MIR's optimizer moves nothing out of
 * loops, so the lowering does: the first time such an expression is met,
 * its instructions go into the function's prologue (before prologue_end,
 * after the loads emit_at_entry places, before the loops), and its register
 * is kept by the expression's address for every later use (docs/ENGINES.md, "Measured"). */
#ifdef UJ_HAVE_MIR
#include "mir_lower.h"

static int has_sqrt(const ir_expr_t* e) {
  if (!e) return 0;
  if (e->kind == IR_EX_UNARY && (e->op == UJ_UNARY_SQRT || e->op == UJ_UNARY_RSQRT)) return 1;
  return has_sqrt(e->a) || has_sqrt(e->b) || has_sqrt(e->c);
}

MIR_reg_t jit_mir_scalar(lower_t* L, const ir_expr_t* e) {
  if (L->in_prologue || !L->prologue_end || e->kind == IR_EX_CONST || e->kind == IR_EX_LOAD ||
      !ir_expr_scalar(L->f, e, 1))
    return 0;
  /* a block run in strips imports no sqrt: its roots are batched there */
  if (L->batch && has_sqrt(e)) return 0;
  for (int i = 0; i < L->nscalars; i++)
    if (L->scalars[i].e == e) return L->scalars[i].reg;
  if (L->nscalars == MAX_HOISTED) return 0;
  L->in_prologue = 1;
  MIR_reg_t r = jit_mir_expr(L, e);
  L->in_prologue = 0;
  L->scalars[L->nscalars].e = e, L->scalars[L->nscalars++].reg = r;
  return r;
}
#endif
