/* jit/c/c_divide.c: f32 divisions by a divisor that stays the same along
 * the innermost loop (softmax's e / sum, x / $scale), done as multiplies
 * in double with the divisor's reciprocal taken once before the loop, and
 * still rounded exactly as the f32 division is (DESIGN section 7, "A
 * runner").
 *
 * Why: a vector divide is the slowest vector instruction, and softmax's
 * last block (y = e / sum) was bound by the divider (docs/ENGINES.md,
 * "Measured"). A plain multiply by 1/sum in f32 would round differently
 * from the division, which the interpreter (the oracle) does; the form
 * here rounds the same (the proof is above hoist_in). Only divisions whose
 * divisor reads nothing that changes along the loop (takes), only in a loop
 * whose divider has no other work (other_divider_work), at most
 * JIT_CX_MAX_DIVIDES per loop; the prelude's uj_fdiv_r (jit/c/c_emit.c)
 * divides where the form does not pay. */
#include <stdlib.h>

#include "c_divide.h"

typedef struct {
  unsigned char* written; /* by tensor: the block writes it */
  int loop_id;
} scope_t;

static void note_written(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)level;
  (void)stmt;
  if (is_write) ((scope_t*)ctx)->written[acc->tensor] = 1;
}

static int ix_invariant(const scope_t* sc, const ir_ix_t* ix) {
  if (!ix) return 1;
  if (ix->kind == IR_IX_LOAD) return 0;
  if (ix->kind == IR_IX_LOOP) return ix->id != sc->loop_id;
  return ix_invariant(sc, ix->a) && ix_invariant(sc, ix->b);
}

static int invariant(const ir_func_t* f, const scope_t* sc, const ir_expr_t* e) {
  if (!e) return 1;
  switch (e->kind) {
    case IR_EX_CONST: return 1;
    case IR_EX_CARRIED: return 0;
    case IR_EX_INDEX: return ix_invariant(sc, e->ix);
    case IR_EX_LOAD: {
      const ir_tensor_t* t = &f->tensors[e->access.tensor];
      if (t->local || t->noalloc || sc->written[e->access.tensor] || e->access.check_mask) return 0;
      for (int k = 0; k < e->access.nidx; k++)
        if (!ix_invariant(sc, e->access.idx[k])) return 0;
      return 1;
    }
    default: return invariant(f, sc, e->a) && invariant(f, sc, e->b) && invariant(f, sc, e->c);
  }
}

/* A division this file takes: f32 by a divisor invariant along the loop.
 * An f32 division in a statement of a block's innermost loop whose divisor
 * reads, along that loop, nothing that changes: no index of the loop, no
 * carried variable, no local, and only loads from tensors the block does
 * not write, at indices proven in range (no run-time check) that use the
 * outer loops alone and read no tensor. */
static int takes(const ir_func_t* f, const scope_t* sc, const ir_expr_t* e) {
  return e->kind == IR_EX_BINARY && e->op == UJ_BINARY_DIV && e->dtype == UJ_F32 && e->b->dtype == UJ_F32 &&
         invariant(f, sc, e->b);
}

/* 1 when e, computed at every iteration, holds other work for the divider
 * than the divisions this file takes: a division by what varies, a square
 * root, or an operation printed with a division in it (a reciprocal,
 * sigmoid or tanh). The form takes about a dozen more vector instructions
 * per division than it saves on the divider; where the loop divides anyway
 * the divider is busy all the same, and on data that comes from memory the
 * longer loop body keeps fewer loads in flight: AdamW with the bias
 * correction was slower with the form from memory, where an optimizer step
 * runs (docs/ENGINES.md, "Measured"). */
static int other_divider_work(const ir_func_t* f, const scope_t* sc, const ir_expr_t* e) {
  if (!e || invariant(f, sc, e)) return 0; /* computed once, before the loop */
  if (e->kind == IR_EX_BINARY && e->op == UJ_BINARY_DIV) return !takes(f, sc, e) || other_divider_work(f, sc, e->a);
  if (e->kind == IR_EX_UNARY) switch ((uj_unary_op_t)e->op) {
      case UJ_UNARY_SQRT: case UJ_UNARY_RSQRT: case UJ_UNARY_RECIP: case UJ_UNARY_SIGMOID: case UJ_UNARY_TANH:
        return 1;
      default: break;
    }
  return other_divider_work(f, sc, e->a) || other_divider_work(f, sc, e->b) || other_divider_work(f, sc, e->c);
}

/* (begin < end), or (start < end) of loop k: the loop has an iteration.
 * The divisor is computed before the loop under this guard, so that a read
 * proven in range only where the loop runs is not made where it does
 * not. */
static void print_guard(jit_cx_t* E, const ir_block_t* b, int k) {
  if (k == 0) {
    rt_buf_printf(E->out, "(begin < end)");
    return;
  }
  rt_buf_printf(E->out, "(");
  jit_cx_ix(E, b->loops[k].start);
  rt_buf_printf(E->out, " < ");
  jit_cx_ix(E, b->loops[k].end);
  rt_buf_printf(E->out, ")");
}

/* Prints, for each division of e that qualifies, its divisor as a double
 * and its reciprocal, uj_d<n> and uj_r<n>, and records the division.
 *
 * The computation uj_fdiv_r does, a and b floats, all in double: d = b,
 * r = RN(1/d) once; then per element q = RN(a r), rem = a - q d (one fused
 * multiply-add, exact), c = RN(q + rem r) (one fused multiply-add), and the
 * result float(c); when rem is 0 or NaN (a exact quotient, a zero, an
 * infinity or a NaN anywhere) float(q) instead. Why it equals the f32
 * quotient t = a/b:
 *  - q is within 1.5 ulp (of double) of t: r is within 2^-53 of 1/b
 *    relatively, and the product rounds once more.
 *  - rem is exact: a - q d is a multiple of ulp(q) ulp(d) no larger than
 *    about 3 2^24 of them (d has 24 bits), so it fits 53 bits; no
 *    intermediate under- or overflows (|t| lies in [2^-277, 2^277]).
 *  - q + rem r = t + (t - q)(d r - 1), off from t by under 2^-52 ulp; so c
 *    is t itself when t is a double, and within one ulp of t otherwise.
 *  - float(c) = RN_f32(t): rounding to f32 can only go wrong if a rounding
 *    boundary of f32 (a midpoint between neighbours, or the overflow
 *    threshold, itself such a midpoint) lies between t and c. A midpoint
 *    has 25 significant bits; a - b m is then a nonzero multiple of a power
 *    of two, which puts t at least 2^-49 (relative) from every midpoint it
 *    is not equal to where f32 is normal, and at least 2^-25 of the
 *    smallest subnormal from one below that: far more than c's error.
 *    When t is a midpoint itself (possible only below FLT_MIN, e.g.
 *    147 2^-149 / 98), c = t exactly, and the conversion breaks the tie to
 *    even as the division does; float(q) alone could land on either side.
 *  - the cases with rem 0 or NaN: a = +-0 (q is the signed zero), b = +-0
 *    (q = a * inf: +-inf, or NaN for 0/0), b = +-inf (q = a * 0: a signed
 *    zero, NaN for inf/inf), a = +-inf (q = +-inf), a NaN operand (NaN),
 *    an exact quotient (q = t). In each q is the IEEE quotient's value.
 * The prelude's uj_fdiv_r takes this form where a vector holds 8 doubles
 * (AVX-512) and on AArch64. With 256-bit vectors the conversions to double
 * and back double the instructions per float, and there the f32 divide,
 * exact as well, measured faster (softmax's y = e / sum in cache); so
 * there, and without a hardware fused multiply-add, uj_fdiv_r divides. */
static void hoist_in(jit_cx_t* E, const scope_t* sc, const ir_block_t* b, int k, const ir_expr_t* e) {
  if (!e) return;
  if (E->ndivides < JIT_CX_MAX_DIVIDES && takes(E->f, sc, e)) {
    int n = E->ndivides;
    E->divides[E->ndivides++] = e;
    jit_cx_indent(E, k);
    rt_buf_printf(E->out, "const double uj_d%d = ", n);
    print_guard(E, b, k);
    rt_buf_printf(E->out, " ? (double)(");
    jit_cx_expr(E, e->b);
    rt_buf_printf(E->out, ") : 1.0, uj_r%d = 1.0 / uj_d%d;\n", n, n);
    hoist_in(E, sc, b, k, e->a);
    return;
  }
  hoist_in(E, sc, b, k, e->a);
  hoist_in(E, sc, b, k, e->b);
  hoist_in(E, sc, b, k, e->c);
}

void jit_c_hoist_divides(jit_cx_t* E, const ir_block_t* b, int k) {
  E->ndivides = 0;
  if (k != b->nloops - 1) return;
  const ir_loop_t* l = &b->loops[k];
  scope_t sc = {calloc((size_t)E->f->ntensors + 1, 1), l->id};
  if (!sc.written) return; /* out of memory: the divisions stay divisions */
  ir_walk_accesses((ir_block_t*)b, note_written, &sc);
  int other = 0;
  for (int s = 0; s < l->nstmts && !other; s++) other = other_divider_work(E->f, &sc, l->stmts[s].value);
  for (int s = 0; s < l->nstmts && !other; s++) hoist_in(E, &sc, b, k, l->stmts[s].value);
  free(sc.written);
}
