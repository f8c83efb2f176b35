/* jit/mir/mir_math.c: f32 exp, log, tanh and sigmoid as inline MIR instruction
 * sequences, for the MIR lowering (jit/mir/mir_emit.c).
 *
 * MIR has no vector instructions, no bit casts and no math instructions; a
 * libm call per element costs more than the rest of a typical chain. Each
 * function here is range reduction, a polynomial and exponent bits (moved
 * between float and integer registers through a stack slot). log and tanh
 * use the C engine's algorithms and coefficients; exp is shaped for scalar
 * code (see jit_mir_expf). Each covers the whole f32 range: subnormal
 * inputs and results, overflow to +inf, +-0, +-inf and NaN; docs/ENGINES.md
 * states the measured error per function and range. */
#ifdef UJ_HAVE_MIR
#include <math.h>
#include <pthread.h>

#include "mir_lower.h"

/* p = p * x + c for each coefficient after the first (highest degree first). */
static MIR_reg_t horner(lower_t* L, MIR_reg_t x, const float* coef, int n) {
  MIR_reg_t p = freg(L);
  insn2(L, MIR_FMOV, R(p), R(fconst(L, coef[0])));
  for (int i = 1; i < n; i++) {
    insn3(L, MIR_FMUL, R(p), R(p), R(x));
    insn3(L, MIR_FADD, R(p), R(p), R(fconst(L, coef[i])));
  }
  return p;
}
/* r = value when `branch` (a, b) is false, else r keeps its value. */
static void set_unless(lower_t* L, MIR_reg_t r, MIR_insn_code_t branch, MIR_reg_t a, MIR_reg_t b, MIR_reg_t value) {
  MIR_insn_t skip = MIR_new_label(L->ctx);
  insn3(L, branch, LBL(skip), R(a), R(b));
  insn2(L, MIR_FMOV, R(r), R(value));
  emit(L, skip);
}

/* 2^(i - 126) at index i for i <= 253 (2^-126 .. 2^127). A table lookup is one
 * memory operand, where building the float's bits takes several
 * floating-point instructions: this scalar code is bound by the throughput
 * of the floating-point ports, so every such instruction counts. */
static float exp2_table[256];
static pthread_once_t exp2_once = PTHREAD_ONCE_INIT;
static void exp2_table_init(void) {
  for (int i = 0; i < 256; i++) exp2_table[i] = ldexpf(1.0f, (i <= 253 ? i : 253) - 126); /* above: unused */
}

/* e^x: t = x log2(e) + 1.5 * 2^23 rounds to k = round(x log2(e)) in its low
 * bits, read as an integer through the stack slot to index the table (a
 * conversion instruction instead costs 10% of the sigmoid chain's time:
 * this scalar code is bound by the floating-point ports); r = x - k ln2
 * (ln2 in two parts, |r| <= ln2/2); e^r = 1 + r + r^2 q(r) with q a
 * degree-3 fit to (e^r - 1 - r)/r^2 (max relative error 1.1e-7); times 2^k
 * from the table. The fast path covers k in [-126, 127], so results down
 * into the subnormals at k = -126 (one rounding of p 2^-126).
 *
 * The rare path, one branch away: x > 89 gives +inf and x < -104 gives 0
 * (e^x rounds to them; +-inf too); otherwise k is in [-150, -127] or is
 * 128, and 2^k is taken as two table factors 2^(k1) 2^(k2), k1 = k - k2,
 * k2 = floor((k + 126) / 2) - 63, both normal: the first product is exact
 * and the second rounds once, to a subnormal or to +inf past FLT_MAX, as
 * the correctly rounded e^x does. NaN reaches the two factors with garbage
 * indices, masked into the table, and gives p's NaN. */
MIR_reg_t jit_mir_expf(lower_t* L, MIR_reg_t x) {
  static const float q[] = {0.008312525227665901f, 0.041890114545822144f, 0.16667114198207855f,
                            0.499992311000824f};
  pthread_once(&exp2_once, exp2_table_init);
  MIR_reg_t magic = fconst(L, 12582912.0f);
  MIR_reg_t t = fop(L, MIR_FADD, fop(L, MIR_FMUL, x, fconst(L, 1.44269504f)), magic);
  MIR_reg_t index = bits_of(L, t); /* 0x4B400000 + k: index k + 126 below */
  insn3(L, MIR_SUB, R(index), R(index), IMM(0x4B400000 - 126));
  MIR_reg_t k = fop(L, MIR_FSUB, t, magic);
  MIR_reg_t r = fop(L, MIR_FSUB, x, fop(L, MIR_FMUL, k, fconst(L, 0.693145751953125f)));
  r = fop(L, MIR_FSUB, r, fop(L, MIR_FMUL, k, fconst(L, 1.428606765330187e-06f)));
  MIR_reg_t p = horner(L, r, q, 4);
  p = fop(L, MIR_FADD, fop(L, MIR_FADD, fop(L, MIR_FMUL, p, fop(L, MIR_FMUL, r, r)), r), fconst(L, 1.0f));
  if (!L->exp2_base) {
    L->exp2_base = new_reg(L, MIR_T_I64);
    emit_at_entry(L, MIR_new_insn(L->ctx, MIR_MOV, R(L->exp2_base), MIR_new_int_op(L->ctx, (int64_t)(intptr_t)exp2_table)));
  }
  /* masked so the load stays in the table whatever k is; out of range is redone below */
  MIR_reg_t slot = new_reg(L, MIR_T_I64), y = freg(L);
  insn3(L, MIR_AND, R(slot), R(index), IMM(255));
  insn3(L, MIR_FMUL, R(y), R(p), MIR_new_mem_op(L->ctx, MIR_T_F, 0, L->exp2_base, slot, 4));
  MIR_insn_t done = MIR_new_label(L->ctx);
  insn3(L, MIR_UBLE, LBL(done), R(index), IMM(253));
  insn2(L, MIR_FMOV, R(y), R(fconst(L, INFINITY)));
  insn3(L, MIR_FBGT, LBL(done), R(x), R(fconst(L, 89.0f)));
  insn2(L, MIR_FMOV, R(y), R(fconst(L, 0.0f)));
  insn3(L, MIR_FBLT, LBL(done), R(x), R(fconst(L, -104.0f)));
  /* the factors' table slots: ((k + 126) >> 1) + 63, and the rest of k + 126, plus 63 */
  MIR_reg_t i2 = new_reg(L, MIR_T_I64), i1 = new_reg(L, MIR_T_I64);
  insn3(L, MIR_RSH, R(i2), R(index), IMM(1));
  insn3(L, MIR_SUB, R(i1), R(index), R(i2));
  insn3(L, MIR_ADD, R(i1), R(i1), IMM(63));
  insn3(L, MIR_AND, R(i1), R(i1), IMM(255));
  insn3(L, MIR_ADD, R(i2), R(i2), IMM(63));
  insn3(L, MIR_AND, R(i2), R(i2), IMM(255));
  insn3(L, MIR_FMUL, R(y), R(p), MIR_new_mem_op(L->ctx, MIR_T_F, 0, L->exp2_base, i1, 4));
  insn3(L, MIR_FMUL, R(y), R(y), MIR_new_mem_op(L->ctx, MIR_T_F, 0, L->exp2_base, i2, 4));
  emit(L, done);
  return y;
}

/* log x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), the Cephes polynomial in
 * m-1. A subnormal x (exponent field 0) is first scaled by 2^23, its
 * exponent bias then 150 instead of 127: one well-predicted branch on the
 * fast path. */
MIR_reg_t jit_mir_logf(lower_t* L, MIR_reg_t x) {
  static const float coef[] = {7.0376836292e-2f,  -1.1514610310e-1f, 1.1676998740e-1f,
                               -1.2420140846e-1f, 1.4249322787e-1f,  -1.6668057665e-1f,
                               2.0000714765e-1f,  -2.4999993993e-1f, 3.3333331174e-1f};
  MIR_reg_t normal_x = freg(L), bias = new_reg(L, MIR_T_I64);
  MIR_insn_t normal = MIR_new_label(L->ctx);
  insn2(L, MIR_FMOV, R(normal_x), R(x));
  insn2(L, MIR_MOV, R(bias), IMM(127));
  insn3(L, MIR_FBGE, LBL(normal), R(x), R(fconst(L, 1.17549435e-38f)));
  insn3(L, MIR_FMUL, R(normal_x), R(x), R(fconst(L, 8388608.0f)));
  insn2(L, MIR_MOV, R(bias), IMM(150));
  emit(L, normal);
  MIR_reg_t u = bits_of(L, normal_x), e = new_reg(L, MIR_T_I64), mb = new_reg(L, MIR_T_I64);
  MIR_reg_t big = new_reg(L, MIR_T_I64);
  insn3(L, MIR_RSH, R(e), R(u), IMM(23));
  insn3(L, MIR_AND, R(e), R(e), IMM(0xff));
  insn3(L, MIR_SUB, R(e), R(e), R(bias));
  insn3(L, MIR_AND, R(mb), R(u), IMM(0x007fffff));
  insn3(L, MIR_OR, R(mb), R(mb), IMM(0x3f800000));
  MIR_reg_t m = float_of(L, mb);
  MIR_insn_t small = MIR_new_label(L->ctx);
  insn2(L, MIR_MOV, R(big), IMM(0));
  insn3(L, MIR_FBLE, LBL(small), R(m), R(fconst(L, 1.41421356f)));
  insn2(L, MIR_MOV, R(big), IMM(1));
  insn3(L, MIR_FMUL, R(m), R(m), R(fconst(L, 0.5f)));
  emit(L, small);
  MIR_reg_t fe = freg(L);
  insn3(L, MIR_ADD, R(e), R(e), R(big));
  insn2(L, MIR_I2F, R(fe), R(e));
  MIR_reg_t f = fop(L, MIR_FSUB, m, fconst(L, 1.0f)), z = fop(L, MIR_FMUL, f, f);
  MIR_reg_t y = horner(L, f, coef, 9);
  y = fop(L, MIR_FSUB, fop(L, MIR_FMUL, fop(L, MIR_FMUL, y, f), z), fop(L, MIR_FMUL, fconst(L, 2.12194440e-4f), fe));
  y = fop(L, MIR_FSUB, y, fop(L, MIR_FMUL, fconst(L, 0.5f), z));
  MIR_reg_t r = fop(L, MIR_FADD, fop(L, MIR_FADD, f, y), fop(L, MIR_FMUL, fconst(L, 0.693359375f), fe));
  MIR_reg_t zero = fconst(L, 0.0f), nan_reg = fconst(L, NAN);
  set_unless(L, r, MIR_FBNE, x, fconst(L, INFINITY), x);
  set_unless(L, r, MIR_FBNE, x, zero, fconst(L, -INFINITY));
  set_unless(L, r, MIR_FBGE, x, zero, nan_reg); /* negative or NaN: NaN */
  return r;
}

/* tanh: an odd polynomial below |x| = 0.625 (a subnormal x gives x, +-0
 * itself), else 1 - 2/(e^(2|x|) + 1) with the sign put back (1 once
 * e^(2|x|) overflows). Only the side taken is computed. */
MIR_reg_t jit_mir_tanhf(lower_t* L, MIR_reg_t x) {
  static const float coef[] = {-5.70498872745e-3f, 2.06390887954e-2f, -5.37397155531e-2f, 1.33314422036e-1f,
                               -3.33332819422e-1f};
  MIR_reg_t zero = fconst(L, 0.0f), a = freg(L), r = freg(L);
  MIR_insn_t big = MIR_new_label(L->ctx), done = MIR_new_label(L->ctx);
  insn2(L, MIR_FMOV, R(a), R(x));
  MIR_insn_t positive = MIR_new_label(L->ctx);
  insn3(L, MIR_FBGE, LBL(positive), R(x), R(zero));
  insn2(L, MIR_FNEG, R(a), R(x));
  emit(L, positive);
  insn3(L, MIR_FBGE, LBL(big), R(a), R(fconst(L, 0.625f)));
  insn2(L, MIR_FMOV, R(r), R(x));
  insn3(L, MIR_FBEQ, LBL(done), R(x), R(zero)); /* +-0 as is: x + (+0) would lose -0's sign */
  MIR_reg_t z = fop(L, MIR_FMUL, x, x), p = horner(L, z, coef, 5);
  insn3(L, MIR_FADD, R(r), R(fop(L, MIR_FMUL, fop(L, MIR_FMUL, p, z), x)), R(x));
  jump(L, done);
  emit(L, big);
  MIR_reg_t one = fconst(L, 1.0f), two = fconst(L, 2.0f);
  MIR_reg_t ex = jit_mir_expf(L, fop(L, MIR_FMUL, two, a));
  insn3(L, MIR_FSUB, R(r), R(one), R(fop(L, MIR_FDIV, two, fop(L, MIR_FADD, ex, one))));
  insn3(L, MIR_FBGE, LBL(done), R(x), R(zero));
  insn2(L, MIR_FNEG, R(r), R(r));
  emit(L, done);
  return r;
}

/* sigmoid: 1/(1 + e^-x); below x = -80, where e^-x would overflow before
 * the result reaches the subnormals, e^x itself (1 + e^x is 1 in float
 * there). Two well-predicted branches pick the argument and the result. */
MIR_reg_t jit_mir_sigmoidf(lower_t* L, MIR_reg_t x) {
  MIR_reg_t arg = freg(L), one = fconst(L, 1.0f), low = fconst(L, -80.0f);
  MIR_insn_t negated = MIR_new_label(L->ctx), done = MIR_new_label(L->ctx);
  insn2(L, MIR_FNEG, R(arg), R(x));
  insn3(L, MIR_FBGE, LBL(negated), R(x), R(low));
  insn2(L, MIR_FMOV, R(arg), R(x));
  emit(L, negated);
  MIR_reg_t e = jit_mir_expf(L, arg), r = freg(L);
  insn3(L, MIR_FDIV, R(r), R(one), R(fop(L, MIR_FADD, one, e)));
  insn3(L, MIR_FBGE, LBL(done), R(x), R(low));
  insn2(L, MIR_FMOV, R(r), R(e));
  emit(L, done);
  return r;
}
#endif
