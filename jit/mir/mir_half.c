/* jit/mir/mir_half.c: bf16 and f16 loads, stores and casts for the MIR
 * lowering (jit/mir/mir_emit.c). MIR has no half type and no bit casts, so
 * each conversion is the algorithm of ir/half.c (which states why it is
 * right, and which the C and CUDA preludes print, jit/prelude.c) in MIR's
 * 64-bit integer instructions, on the 16 bits of the element and the 32
 * bits of the f32 (moved between registers through the stack slot). Every
 * intermediate stays below 2^33, so 64-bit arithmetic and signed compares
 * give the uint32_t results of the C version; a store of MIR_T_U16 keeps
 * the low 16 bits. Branches take the rare cases (NaN, overflow,
 * subnormals) out of the common path of a load or a store. */
#ifdef UJ_HAVE_MIR
#include "mir_lower.h"

static MIR_reg_t ireg(lower_t* L) { return new_reg(L, MIR_T_I64); }

/* The f32's bits, zero-extended (bits_of sign-extends). */
static MIR_reg_t u32_of(lower_t* L, MIR_reg_t x) {
  MIR_reg_t slot = slot_reg(L), u = ireg(L);
  insn2(L, MIR_FMOV, MIR_new_mem_op(L->ctx, MIR_T_F, 0, slot, 0, 1), R(x));
  insn2(L, MIR_MOV, R(u), MIR_new_mem_op(L->ctx, MIR_T_U32, 0, slot, 0, 1));
  return u;
}

/* r = op(a, imm) */
static MIR_reg_t op_imm(lower_t* L, MIR_insn_code_t code, MIR_reg_t a, int64_t imm) {
  MIR_reg_t r = ireg(L);
  insn3(L, code, R(r), R(a), IMM(imm));
  return r;
}

static void branch_imm(lower_t* L, MIR_insn_code_t code, MIR_insn_t to, MIR_reg_t a, int64_t imm) {
  insn3(L, code, LBL(to), R(a), IMM(imm));
}

/* ---- widening: the 16 bits h to an f32 ---- */

static MIR_reg_t bf16_to_f32(lower_t* L, MIR_reg_t h) {
  MIR_insn_t done = MIR_new_label(L->ctx);
  MIR_reg_t u = op_imm(L, MIR_LSH, h, 16);
  MIR_reg_t a = op_imm(L, MIR_AND, u, 0x7fffffff);
  branch_imm(L, MIR_BLE, done, a, 0x7f800000);
  insn3(L, MIR_OR, R(u), R(u), IMM(0x00400000)); /* a NaN comes back quiet */
  emit(L, done);
  return float_of(L, u);
}

static MIR_reg_t f16_to_f32(lower_t* L, MIR_reg_t h) {
  MIR_insn_t not_subnormal = MIR_new_label(L->ctx), normal = MIR_new_label(L->ctx), join = MIR_new_label(L->ctx);
  MIR_reg_t sign = op_imm(L, MIR_LSH, op_imm(L, MIR_AND, h, 0x8000), 16);
  MIR_reg_t e = op_imm(L, MIR_AND, op_imm(L, MIR_URSH, h, 10), 0x1f);
  MIR_reg_t m = op_imm(L, MIR_AND, h, 0x3ff);
  MIR_reg_t u = ireg(L);
  branch_imm(L, MIR_BNE, not_subnormal, e, 0);
  /* zero or a subnormal: m * 2^-24, exact in f32 */
  MIR_reg_t fm = freg(L);
  insn2(L, MIR_I2F, R(fm), R(m));
  insn3(L, MIR_FMUL, R(fm), R(fm), R(fconst(L, 5.9604644775390625e-8f)));
  insn2(L, MIR_MOV, R(u), R(u32_of(L, fm)));
  jump(L, join);
  emit(L, not_subnormal);
  branch_imm(L, MIR_BNE, normal, e, 31);
  /* an infinity or a NaN (made quiet) */
  insn3(L, MIR_LSH, R(u), R(m), IMM(13));
  insn3(L, MIR_OR, R(u), R(u), IMM(0x7f800000));
  branch_imm(L, MIR_BEQ, join, m, 0);
  insn3(L, MIR_OR, R(u), R(u), IMM(0x00400000));
  jump(L, join);
  emit(L, normal);
  insn3(L, MIR_ADD, R(u), R(e), IMM(112));
  insn3(L, MIR_LSH, R(u), R(u), IMM(23));
  insn3(L, MIR_OR, R(u), R(u), R(op_imm(L, MIR_LSH, m, 13)));
  emit(L, join);
  insn3(L, MIR_OR, R(u), R(u), R(sign));
  return float_of(L, u);
}

/* ---- narrowing: an f32 to the 16 bits, rounded to nearest even ---- */

static MIR_reg_t f32_to_bf16(lower_t* L, MIR_reg_t x) {
  MIR_insn_t finite = MIR_new_label(L->ctx), done = MIR_new_label(L->ctx);
  MIR_reg_t u = u32_of(L, x), r = ireg(L);
  MIR_reg_t a = op_imm(L, MIR_AND, u, 0x7fffffff);
  branch_imm(L, MIR_BLE, finite, a, 0x7f800000);
  insn3(L, MIR_URSH, R(r), R(u), IMM(16));
  insn3(L, MIR_OR, R(r), R(r), IMM(0x0040)); /* quiet, its sign and high payload kept */
  jump(L, done);
  emit(L, finite);
  MIR_reg_t lowest_kept = op_imm(L, MIR_AND, op_imm(L, MIR_URSH, u, 16), 1);
  insn3(L, MIR_ADD, R(r), R(u), IMM(0x7fff));
  insn3(L, MIR_ADD, R(r), R(r), R(lowest_kept));
  insn3(L, MIR_URSH, R(r), R(r), IMM(16));
  emit(L, done);
  return r;
}

static MIR_reg_t f32_to_f16(lower_t* L, MIR_reg_t x) {
  MIR_insn_t not_nan = MIR_new_label(L->ctx), finite = MIR_new_label(L->ctx), small = MIR_new_label(L->ctx),
             nonzero = MIR_new_label(L->ctx), round_up = MIR_new_label(L->ctx), rounded = MIR_new_label(L->ctx),
             done = MIR_new_label(L->ctx);
  MIR_reg_t u = u32_of(L, x), r = ireg(L);
  MIR_reg_t sign = op_imm(L, MIR_AND, op_imm(L, MIR_URSH, u, 16), 0x8000);
  MIR_reg_t a = op_imm(L, MIR_AND, u, 0x7fffffff);
  branch_imm(L, MIR_BLE, not_nan, a, 0x7f800000);
  insn3(L, MIR_URSH, R(r), R(a), IMM(13));
  insn3(L, MIR_AND, R(r), R(r), IMM(0x3ff));
  insn3(L, MIR_OR, R(r), R(r), IMM(0x7e00));
  jump(L, done);
  emit(L, not_nan);
  branch_imm(L, MIR_BLT, finite, a, 0x477ff000);
  insn2(L, MIR_MOV, R(r), IMM(0x7c00)); /* 65520 and beyond: +-inf */
  jump(L, done);
  emit(L, finite);
  branch_imm(L, MIR_BLT, small, a, 0x38800000);
  /* a normal: rebias, round the low 13 bits */
  MIR_reg_t b = op_imm(L, MIR_SUB, a, 0x38000000);
  MIR_reg_t lowest_kept = op_imm(L, MIR_AND, op_imm(L, MIR_URSH, b, 13), 1);
  insn3(L, MIR_ADD, R(r), R(b), IMM(0xfff));
  insn3(L, MIR_ADD, R(r), R(r), R(lowest_kept));
  insn3(L, MIR_URSH, R(r), R(r), IMM(13));
  jump(L, done);
  emit(L, small);
  branch_imm(L, MIR_BGT, nonzero, a, 0x33000000);
  insn2(L, MIR_MOV, R(r), IMM(0)); /* at most 2^-25: zero */
  jump(L, done);
  emit(L, nonzero);
  /* a subnormal: the significand shifted to the 2^-24 grid, rounded by
   * what is shifted out */
  MIR_reg_t shift = ireg(L), m = ireg(L), q = ireg(L), rest = ireg(L), half = ireg(L), one = ireg(L);
  insn3(L, MIR_URSH, R(shift), R(a), IMM(23));
  insn2(L, MIR_NEG, R(shift), R(shift));
  insn3(L, MIR_ADD, R(shift), R(shift), IMM(126)); /* 126 - exponent: 14 to 24 */
  insn3(L, MIR_AND, R(m), R(a), IMM(0x7fffff));
  insn3(L, MIR_OR, R(m), R(m), IMM(0x800000));
  insn3(L, MIR_URSH, R(q), R(m), R(shift));
  insn2(L, MIR_MOV, R(one), IMM(1));
  insn3(L, MIR_SUB, R(half), R(shift), IMM(1));
  insn3(L, MIR_LSH, R(half), R(one), R(half));
  insn3(L, MIR_LSH, R(rest), R(half), IMM(1));
  insn3(L, MIR_SUB, R(rest), R(rest), IMM(1));
  insn3(L, MIR_AND, R(rest), R(m), R(rest));
  insn3(L, MIR_BGT, LBL(round_up), R(rest), R(half));
  insn3(L, MIR_BLT, LBL(rounded), R(rest), R(half));
  branch_imm(L, MIR_BEQ, rounded, op_imm(L, MIR_AND, q, 1), 0); /* a tie, q even: stays */
  emit(L, round_up);
  insn3(L, MIR_ADD, R(q), R(q), IMM(1));
  emit(L, rounded);
  insn2(L, MIR_MOV, R(r), R(q));
  emit(L, done);
  insn3(L, MIR_OR, R(r), R(r), R(sign));
  return r;
}

/* x (f64) rounded to f32 toward zero, the last bit set when inexact
 * (ir_f64_to_f32_odd): one more rounding to a half is then correct. */
static MIR_reg_t f64_to_f32_odd(lower_t* L, MIR_reg_t x) {
  MIR_insn_t exact = MIR_new_label(L->ctx), done = MIR_new_label(L->ctx), back_pos = MIR_new_label(L->ctx),
             x_pos = MIR_new_label(L->ctx), odd = MIR_new_label(L->ctx);
  MIR_reg_t t = freg(L), back = new_reg(L, MIR_T_D), r = freg(L);
  insn2(L, MIR_D2F, R(t), R(x));
  insn2(L, MIR_F2D, R(back), R(t));
  insn3(L, MIR_DBEQ, LBL(exact), R(back), R(x));
  insn3(L, MIR_DBNE, LBL(exact), R(x), R(x)); /* NaN */
  MIR_reg_t abs_back = new_reg(L, MIR_T_D), abs_x = new_reg(L, MIR_T_D), zero = constant(L, UJ_F64, 0.0);
  insn2(L, MIR_DMOV, R(abs_back), R(back));
  insn3(L, MIR_DBGE, LBL(back_pos), R(back), R(zero));
  insn2(L, MIR_DNEG, R(abs_back), R(back));
  emit(L, back_pos);
  insn2(L, MIR_DMOV, R(abs_x), R(x));
  insn3(L, MIR_DBGE, LBL(x_pos), R(x), R(zero));
  insn2(L, MIR_DNEG, R(abs_x), R(x));
  emit(L, x_pos);
  MIR_reg_t u = u32_of(L, t);
  insn3(L, MIR_DBLE, LBL(odd), R(abs_back), R(abs_x));
  insn3(L, MIR_SUB, R(u), R(u), IMM(1)); /* rounded away from zero: one step back */
  emit(L, odd);
  insn3(L, MIR_OR, R(u), R(u), IMM(1));
  insn2(L, MIR_FMOV, R(r), R(float_of(L, u)));
  jump(L, done);
  emit(L, exact);
  insn2(L, MIR_FMOV, R(r), R(t));
  emit(L, done);
  return r;
}

MIR_reg_t jit_mir_half_load(lower_t* L, uj_dtype_t d, MIR_op_t mem) {
  MIR_reg_t h = ireg(L);
  insn2(L, MIR_MOV, R(h), mem); /* MIR_T_U16: zero-extended */
  return d == UJ_BF16 ? bf16_to_f32(L, h) : f16_to_f32(L, h);
}

void jit_mir_half_store(lower_t* L, uj_dtype_t d, MIR_op_t mem, MIR_reg_t x) {
  insn2(L, MIR_MOV, mem, R(d == UJ_BF16 ? f32_to_bf16(L, x) : f32_to_f16(L, x)));
}

MIR_reg_t jit_mir_half_round(lower_t* L, uj_dtype_t d, uj_dtype_t from, MIR_reg_t x) {
  if (from == UJ_I32) {
    MIR_reg_t wide = new_reg(L, MIR_T_D);
    insn2(L, MIR_I2D, R(wide), R(x)); /* exact */
    x = wide, from = UJ_F64;
  }
  if (from == UJ_F64) x = f64_to_f32_odd(L, x);
  return d == UJ_BF16 ? bf16_to_f32(L, f32_to_bf16(L, x)) : f16_to_f32(L, f32_to_f16(L, x));
}

#endif
