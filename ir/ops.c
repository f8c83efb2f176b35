/* ir/ops.c: the host side of the op table (include/uopjit_ops.h). From
 * its rows come each op's name, which ops take i32, and the reference:
 * the interpreter computes an op in double with the row's `ref` and rounds
 * once to the value's dtype, and constant folding does the same, so that a
 * folded value is the value a kernel would have computed.
 *
 * The ujm_* functions are the references that the C library does not
 * have. The generated C and CUDA code computes them with the shared
 * prelude's uj_* functions (jit/prelude.c), the same formulas.
 *
 * On i32 each op that takes it has an exact rule (ir_unary_i32,
 * ir_binary_i32): results wrap to 32 bits, division and `mod` round
 * toward negative infinity and `fmod` toward zero, and a division or
 * remainder by zero gives 0 (as NumPy's integer ops do). */
#include <math.h>
#include <string.h>

#include "ir.h"

double ujm_neg(double x) { return -x; }
double ujm_rsqrt(double x) { return 1.0 / sqrt(x); }
double ujm_recip(double x) { return 1.0 / x; }
double ujm_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
/* -1, +1, or x itself for +-0 and NaN (NumPy's sign, keeping a zero's sign). */
double ujm_sign(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; }
double ujm_add(double a, double b) { return a + b; }
double ujm_sub(double a, double b) { return a - b; }
double ujm_mul(double a, double b) { return a * b; }
double ujm_div(double a, double b) { return a / b; }
/* NumPy's maximum and minimum without NaN propagation from b: a wins when
 * it compares better or b is NaN (every engine's reductions agree). */
double ujm_fmax(double a, double b) { return (a > b || b != b) ? a : b; }
double ujm_fmin(double a, double b) { return (a < b || b != b) ? a : b; }
double ujm_eq(double a, double b) { return a == b; }
double ujm_ne(double a, double b) { return a != b; }
double ujm_lt(double a, double b) { return a < b; }
double ujm_le(double a, double b) { return a <= b; }
double ujm_gt(double a, double b) { return a > b; }
double ujm_ge(double a, double b) { return a >= b; }
/* Python's and NumPy's remainder: the sign of the divisor. A zero result
 * takes the divisor's sign; x mod +-inf is x when the signs agree. */
double ujm_mod(double a, double b) {
  double r = fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r == 0 ? copysign(0.0, b) : r;
}

static const struct {
  const char* name;
  int flags;
  double (*ref)(double);
} unary_rows[] = {
#define UJ_ROW(NAME, spelling, flags, ref, cfn) {#spelling, flags, ref},
    UJ_UNARY_OPS(UJ_ROW)
#undef UJ_ROW
};

static const struct {
  const char* name;
  int kind, flags;
  double (*ref)(double, double);
} binary_rows[] = {
#define UJ_ROW(NAME, spelling, kind, flags, ref, cfn) {#spelling, kind, flags, ref},
    UJ_BINARY_OPS(UJ_ROW)
#undef UJ_ROW
};

int ir_unary_valid(int op) { return op >= 0 && op < UJ_UNARY_COUNT; }
int ir_binary_valid(int op) { return op >= 0 && op < UJ_BINARY_COUNT; }
const char* ir_unary_name(uj_unary_op_t op) { return ir_unary_valid(op) ? unary_rows[op].name : "?"; }
const char* ir_binary_name(uj_binary_op_t op) { return ir_binary_valid(op) ? binary_rows[op].name : "?"; }
const char* uj_unary_name(uj_unary_op_t op) { return ir_unary_name(op); }
const char* uj_binary_name(uj_binary_op_t op) { return ir_binary_name(op); }
int ir_unary_takes_i32(uj_unary_op_t op) { return ir_unary_valid(op) && (unary_rows[op].flags & UJ_OP_INT); }
int ir_binary_takes_i32(uj_binary_op_t op) { return ir_binary_valid(op) && (binary_rows[op].flags & UJ_OP_INT); }
int ir_binary_kind(uj_binary_op_t op) { return binary_rows[op].kind; }
int ir_binary_is_compare(uj_binary_op_t op) { return binary_rows[op].kind == UJ_OP_COMPARE; }

int ir_unary_find(const char* name, size_t len) {
  for (int op = 0; op < UJ_UNARY_COUNT; op++)
    if (strlen(unary_rows[op].name) == len && !memcmp(unary_rows[op].name, name, len)) return op;
  return -1;
}

int ir_binary_find_call(const char* name, size_t len) {
  for (int op = 0; op < UJ_BINARY_COUNT; op++)
    if (binary_rows[op].kind == UJ_OP_CALL && strlen(binary_rows[op].name) == len &&
        !memcmp(binary_rows[op].name, name, len))
      return op;
  return -1;
}

double ir_unary_f64(uj_unary_op_t op, double x) { return ir_unary_valid(op) ? unary_rows[op].ref(x) : x; }
double ir_binary_f64(uj_binary_op_t op, double a, double b) {
  return ir_binary_valid(op) ? binary_rows[op].ref(a, b) : 0;
}

int64_t ir_wrap_i32(int64_t x) { return (int32_t)(uint32_t)(uint64_t)x; }

int64_t ir_float_to_i32(double x) {
  if (x != x) return 0;
  if (x >= 2147483647.0) return 2147483647;
  if (x <= -2147483648.0) return INT32_MIN;
  return (int64_t)x;
}

int64_t ir_unary_i32(uj_unary_op_t op, int64_t x) {
  switch (op) {
    case UJ_UNARY_NEG: return ir_wrap_i32(-x);
    case UJ_UNARY_ABS: return ir_wrap_i32(x < 0 ? -x : x);
    case UJ_UNARY_SIGN: return (x > 0) - (x < 0);
    default: return x; /* floor, ceil and round of an integer */
  }
}

int64_t ir_binary_i32(uj_binary_op_t op, int64_t a, int64_t b) {
  switch (op) {
    case UJ_BINARY_ADD: return ir_wrap_i32(a + b);
    case UJ_BINARY_SUB: return ir_wrap_i32(a - b);
    case UJ_BINARY_MUL: return ir_wrap_i32(a * b);
    case UJ_BINARY_DIV: return ir_wrap_i32(ir_floordiv(a, b));
    case UJ_BINARY_MOD: return ir_floormod(a, b);
    case UJ_BINARY_FMOD: return b == 0 || b == -1 ? 0 : a % b;
    case UJ_BINARY_POW: return ir_float_to_i32(pow((double)a, (double)b));
    case UJ_BINARY_MAX: return a > b ? a : b;
    case UJ_BINARY_MIN: return a < b ? a : b;
    default: /* comparisons: i32 values are exact in double */
      return (int64_t)ir_binary_f64(op, (double)a, (double)b);
  }
}

int ir_unary_is_transcendental(uj_unary_op_t op) {
  return ir_unary_valid(op) && !(unary_rows[op].flags & UJ_OP_CHEAP);
}

int ir_binary_is_transcendental(uj_binary_op_t op) {
  return ir_binary_valid(op) && !(binary_rows[op].flags & UJ_OP_CHEAP);
}
