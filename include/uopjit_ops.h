/* uopjit_ops.h: every elementwise op, one row each. include/uopjit.h takes
 * the public enums from these rows; the library takes from them the
 * language's function names, the printer, the interpreter's reference, the
 * domain checks and the emitters' spellings. Adding an op is a row here,
 * its gradient (uops/unary.c or uops/binary.c) and a test (DESIGN section
 * 5, "Adding an op"). Included by uopjit.h only; docs/C.md shows the API's
 * use.
 *
 * New rows go at the end of their list: an op's number is part of the ABI. */
#ifndef UOPJIT_OPS_H
#define UOPJIT_OPS_H

#define UJ_OP_FLOAT 0
#define UJ_OP_INT 1
#define UJ_OP_CHEAP 2

/* X(NAME, spelling, flags, ref, cfn), one row per unary op:
 *   NAME      the enum member UJ_UNARY_<NAME>
 *   spelling  its name in the language, in dumps and in messages
 *   flags     UJ_OP_INT: defined on i32 too (exact there; ir/ops.c
 *             ir_unary_i32 says how), else it refuses i32; UJ_OP_CHEAP: a
 *             few instructions, where the others cost a call's worth (the
 *             passes weigh recomputing them against memory traffic)
 *   ref       the host function in double that defines it: the
 *             interpreter computes ref(x) in double and rounds once to the
 *             value's dtype, and every engine is held to that
 *   cfn       the function in the generated C and CUDA source, double
 *             flavour (the float one has an f appended): the C library's
 *             and CUDA's device library's name, or the shared prelude's
 *             (jit/prelude.c) where neither has it. An engine may spell
 *             an op its own way (an inline polynomial, an operator). */
#define UJ_UNARY_OPS(X)                                                        \
  X(NEG, neg, UJ_OP_INT | UJ_OP_CHEAP, ujm_neg, uj_neg)                        \
  X(ABS, abs, UJ_OP_INT | UJ_OP_CHEAP, fabs, fabs)                             \
  X(EXP, exp, UJ_OP_FLOAT, exp, exp)                                           \
  X(LOG, log, UJ_OP_FLOAT, log, log)                                           \
  X(SQRT, sqrt, UJ_OP_FLOAT | UJ_OP_CHEAP, sqrt, sqrt)                         \
  X(RSQRT, rsqrt, UJ_OP_FLOAT | UJ_OP_CHEAP, ujm_rsqrt, uj_rsqrt)              \
  X(RECIP, recip, UJ_OP_FLOAT | UJ_OP_CHEAP, ujm_recip, uj_recip)              \
  X(SIN, sin, UJ_OP_FLOAT, sin, sin)                                           \
  X(COS, cos, UJ_OP_FLOAT, cos, cos)                                           \
  X(TANH, tanh, UJ_OP_FLOAT, tanh, tanh)                                       \
  X(SIGMOID, sigmoid, UJ_OP_FLOAT, ujm_sigmoid, uj_sigmoid)                    \
  X(FLOOR, floor, UJ_OP_INT | UJ_OP_CHEAP, floor, floor)                       \
  X(TAN, tan, UJ_OP_FLOAT, tan, tan)                                           \
  X(ERF, erf, UJ_OP_FLOAT, erf, erf)                                           \
  X(ERFC, erfc, UJ_OP_FLOAT, erfc, erfc)                                       \
  X(LOG1P, log1p, UJ_OP_FLOAT, log1p, log1p)                                   \
  X(EXPM1, expm1, UJ_OP_FLOAT, expm1, expm1)                                   \
  X(LOG2, log2, UJ_OP_FLOAT, log2, log2)                                       \
  X(LOG10, log10, UJ_OP_FLOAT, log10, log10)                                   \
  X(EXP2, exp2, UJ_OP_FLOAT, exp2, exp2)                                       \
  X(SINH, sinh, UJ_OP_FLOAT, sinh, sinh)                                       \
  X(COSH, cosh, UJ_OP_FLOAT, cosh, cosh)                                       \
  X(ASIN, asin, UJ_OP_FLOAT, asin, asin)                                       \
  X(ACOS, acos, UJ_OP_FLOAT, acos, acos)                                       \
  X(ATAN, atan, UJ_OP_FLOAT, atan, atan)                                       \
  X(ASINH, asinh, UJ_OP_FLOAT, asinh, asinh)                                   \
  X(ACOSH, acosh, UJ_OP_FLOAT, acosh, acosh)                                   \
  X(ATANH, atanh, UJ_OP_FLOAT, atanh, atanh)                                   \
  X(CBRT, cbrt, UJ_OP_FLOAT, cbrt, cbrt)                                       \
  X(ROUND, round, UJ_OP_INT | UJ_OP_CHEAP, rint, rint)                         \
  X(SIGN, sign, UJ_OP_INT | UJ_OP_CHEAP, ujm_sign, uj_sign)                    \
  X(CEIL, ceil, UJ_OP_INT | UJ_OP_CHEAP, ceil, ceil)                           \
  X(TRUNC, trunc, UJ_OP_INT | UJ_OP_CHEAP, trunc, trunc)                       \
  X(LGAMMA, lgamma, UJ_OP_FLOAT, lgamma, lgamma)

/* X(NAME, spelling, kind, flags, ref, cfn), one row per binary op:
 *   kind      UJ_OP_ARITH: written `a spelling b` in C as in the language;
 *             UJ_OP_COMPARE: the same, giving 1 or 0 in the operands'
 *             dtype; UJ_OP_CALL: a function of two arguments
 *   flags     as above; on i32 every binary op has its own exact rule
 *   ref, cfn  as above, for UJ_OP_CALL (the others' ref is the C operator) */
#define UJ_OP_ARITH 0
#define UJ_OP_COMPARE 1
#define UJ_OP_CALL 2

#define UJ_BINARY_OPS(X)                                                       \
  X(ADD, +, UJ_OP_ARITH, UJ_OP_INT | UJ_OP_CHEAP, ujm_add, uj_add)             \
  X(SUB, -, UJ_OP_ARITH, UJ_OP_INT | UJ_OP_CHEAP, ujm_sub, uj_sub)             \
  X(MUL, *, UJ_OP_ARITH, UJ_OP_INT | UJ_OP_CHEAP, ujm_mul, uj_mul)             \
  X(DIV, /, UJ_OP_ARITH, UJ_OP_INT | UJ_OP_CHEAP, ujm_div, uj_div)             \
  X(POW, pow, UJ_OP_CALL, UJ_OP_FLOAT, pow, pow)                               \
  X(MAX, max, UJ_OP_CALL, UJ_OP_INT | UJ_OP_CHEAP, ujm_fmax, uj_fmax)          \
  X(MIN, min, UJ_OP_CALL, UJ_OP_INT | UJ_OP_CHEAP, ujm_fmin, uj_fmin)          \
  X(EQ, ==, UJ_OP_COMPARE, UJ_OP_INT | UJ_OP_CHEAP, ujm_eq, uj_eq)             \
  X(NE, !=, UJ_OP_COMPARE, UJ_OP_INT | UJ_OP_CHEAP, ujm_ne, uj_ne)             \
  X(LT, <, UJ_OP_COMPARE, UJ_OP_INT | UJ_OP_CHEAP, ujm_lt, uj_lt)              \
  X(LE, <=, UJ_OP_COMPARE, UJ_OP_INT | UJ_OP_CHEAP, ujm_le, uj_le)             \
  X(GT, >, UJ_OP_COMPARE, UJ_OP_INT | UJ_OP_CHEAP, ujm_gt, uj_gt)              \
  X(GE, >=, UJ_OP_COMPARE, UJ_OP_INT | UJ_OP_CHEAP, ujm_ge, uj_ge)             \
  X(ATAN2, atan2, UJ_OP_CALL, UJ_OP_FLOAT, atan2, atan2)                       \
  X(HYPOT, hypot, UJ_OP_CALL, UJ_OP_FLOAT, hypot, hypot)                       \
  X(COPYSIGN, copysign, UJ_OP_CALL, UJ_OP_FLOAT | UJ_OP_CHEAP, copysign, copysign) \
  X(MOD, mod, UJ_OP_CALL, UJ_OP_INT | UJ_OP_CHEAP, ujm_mod, uj_mod)            \
  X(FMOD, fmod, UJ_OP_CALL, UJ_OP_INT | UJ_OP_CHEAP, fmod, fmod)

#endif
