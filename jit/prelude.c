/* jit/prelude.c: the helper functions that the C and the CUDA engines'
 * generated source both define, written once. They are the interpreter's
 * semantics (ir/interp.c, ir/eval.c) in C: floor division and modulo with
 * x/0 == x%0 == 0 (and x / -1 without the trap of INT64_MIN / -1), i32
 * results wrapped to 32 bits, float to i32 conversion that truncates,
 * saturates and maps NaN to 0, max and min that ignore a NaN operand (the
 * first argument wins unless the second is better), and the f32 sigmoid.
 * Each emitter's prelude says only what differs: the headers or typedefs,
 * the qualifier macro UJ_INLINE, its infinities and its math functions
 * (jit/c/c_emit.c, jit/cuda/cuda_emit.c). */
#include "prelude.h"

const char jit_prelude_shared[] =
    "UJ_INLINE uj_i64 uj_fdiv(uj_i64 a, uj_i64 b) {\n"
    "  if (b == 0) return 0;\n"
    "  if (b == -1) return (uj_i64)(0 - (uint64_t)a);\n"
    "  uj_i64 q = a / b;\n"
    "  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;\n"
    "}\n"
    "UJ_INLINE uj_i64 uj_fmod(uj_i64 a, uj_i64 b) {\n"
    "  if (b == 0 || b == -1) return 0;\n"
    "  uj_i64 r = a % b;\n"
    "  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n"
    "}\n"
    "UJ_INLINE uj_i64 uj_imin(uj_i64 a, uj_i64 b) { return a < b ? a : b; }\n"
    "UJ_INLINE uj_i64 uj_imax(uj_i64 a, uj_i64 b) { return a > b ? a : b; }\n"
    "UJ_INLINE int32_t uj_wrap(uj_i64 x) { return (int32_t)(uint32_t)(uint64_t)x; }\n"
    "UJ_INLINE int32_t uj_f2i(double x) {\n"
    "  return x != x ? 0 : x >= 2147483647.0 ? 2147483647 : x <= -2147483648.0 ? (-2147483647 - 1) : (int32_t)x;\n"
    "}\n"
    "UJ_INLINE float uj_fmaxf(float a, float b) { return (a > b || b != b) ? a : b; }\n"
    "UJ_INLINE float uj_fminf(float a, float b) { return (a < b || b != b) ? a : b; }\n"
    "UJ_INLINE double uj_fmax(double a, double b) { return (a > b || b != b) ? a : b; }\n"
    "UJ_INLINE double uj_fmin(double a, double b) { return (a < b || b != b) ? a : b; }\n"
    /* sigmoid: 1/(1 + e^-x); below x = -80, where e^-x would overflow
     * before the result reaches the subnormals, e^x itself (1 + e^x is 1
     * in float there). */
    "UJ_INLINE float uj_sigmoidf(float x) {\n"
    "  float e = UJ_EXPF(x < -80.0f ? x : -x);\n"
    "  return x < -80.0f ? e : 1.0f / (1.0f + e);\n"
    "}\n";
