/* jit/mir/mir_distinct.c: three-operand instructions whose two inputs are one
 * register, rewritten so that no instruction names a register three times.
 *
 * Why (DESIGN section 7, "MIR"): on x86-64, MIR's generator makes each
 * two-address instruction's output its first input (make_io_dup_op_insns)
 * and coalesces the copy, so y = x * x with x dead after becomes `fmul r, r,
 * r`. When r is spilled, the allocator's rewrite (try_spilled_reg_mem in
 * mir-gen.c at the pinned commit) records the operands naming it in an
 * array of two, guarded only by an assertion release builds drop: stack
 * smashing, or silent corruption without a stack protector. The project's
 * patch (.ci/mir-a8ab7c31-reload-bound.patch) fixes MIR; this rewrite keeps
 * uopjit safe on any MIR build. A plain copy of x does not help (MIR's copy
 * propagation undoes it), so the second input becomes -x and the operation
 * one with the same result, exactly (the rules below). */
#ifdef UJ_HAVE_MIR
#include "mir_lower.h"

/* Exact by IEEE 754's definitions (x - y is x + -y; rounding is symmetric
 * in sign) and by two's complement arithmetic modulo 2^64:
 *
 *   x + x  ->  x - (-x)          x * x  ->  -(x * (-x))
 *   x - x  ->  x + (-x)          x / x  ->  -(x / (-x))   (floating only)
 *   x & x, x | x  ->  x          x ^ x  ->  0
 *
 * NaN inputs give NaN either way; only a NaN's sign may differ, which the
 * interpreter does not promise. Any other code with one register in both
 * inputs (the lowering emits none) reads the second input back from the
 * stack slot: a load is not a copy, so copy propagation leaves it. */
typedef struct {
  MIR_insn_code_t code, neg, as; /* x code x  ->  [neg] (x as -x) */
  int negate_result;
} same_input_rule_t;

static const same_input_rule_t rules[] = {
    {MIR_FADD, MIR_FNEG, MIR_FSUB, 0}, {MIR_DADD, MIR_DNEG, MIR_DSUB, 0}, {MIR_ADD, MIR_NEG, MIR_SUB, 0},
    {MIR_FSUB, MIR_FNEG, MIR_FADD, 0}, {MIR_DSUB, MIR_DNEG, MIR_DADD, 0}, {MIR_SUB, MIR_NEG, MIR_ADD, 0},
    {MIR_FMUL, MIR_FNEG, MIR_FMUL, 1}, {MIR_DMUL, MIR_DNEG, MIR_DMUL, 1}, {MIR_MUL, MIR_NEG, MIR_MUL, 1},
    {MIR_FDIV, MIR_FNEG, MIR_FDIV, 1}, {MIR_DDIV, MIR_DNEG, MIR_DDIV, 1},
};

static MIR_insn_code_t move_code_of(MIR_type_t t) { return t == MIR_T_F ? MIR_FMOV : t == MIR_T_D ? MIR_DMOV : MIR_MOV; }

void jit_mir_insn3_same_inputs(lower_t* L, MIR_insn_code_t code, MIR_op_t out, MIR_reg_t x) {
  MIR_type_t type = MIR_reg_type(L->ctx, x, L->func);
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
    const same_input_rule_t* r = &rules[i];
    if (r->code != code) continue;
    MIR_reg_t minus_x = new_reg(L, type);
    insn2(L, r->neg, R(minus_x), R(x));
    if (!r->negate_result) {
      insn3(L, r->as, out, R(x), R(minus_x));
    } else {
      MIR_reg_t negated = new_reg(L, type);
      insn3(L, r->as, R(negated), R(x), R(minus_x));
      insn2(L, r->neg, out, R(negated));
    }
    return;
  }
  if (code == MIR_AND || code == MIR_OR) {
    insn2(L, MIR_MOV, out, R(x));
  } else if (code == MIR_XOR) {
    insn2(L, MIR_MOV, out, IMM(0));
  } else {
    MIR_type_t mem = type == MIR_T_F || type == MIR_T_D ? type : MIR_T_I64;
    MIR_reg_t slot = slot_reg(L), reread = new_reg(L, type);
    insn2(L, move_code_of(type), MIR_new_mem_op(L->ctx, mem, 0, slot, 0, 1), R(x));
    insn2(L, move_code_of(type), R(reread), MIR_new_mem_op(L->ctx, mem, 0, slot, 0, 1));
    insn3(L, code, out, R(x), R(reread));
  }
}
#endif
