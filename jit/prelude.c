/* jit/prelude.c: the helper functions that the C and the CUDA engines'
 * generated source both define, written once. They are the interpreter's
 * semantics (ir/interp.c, ir/eval.c, ir/ops.c) in C: floor division and
 * modulo with x/0 == x%0 == 0 (and x / -1 without the trap of INT64_MIN /
 * -1), the truncating remainder with the same zeros, i32 results wrapped,
 * float to i32 conversion that truncates, saturates and maps NaN to 0, max
 * and min that ignore a NaN operand, the sigmoid, sign and the floor
 * remainder of floats, and the bf16 and f16 conversions (ir/half.c's
 * algorithms, line for line, tested against it on every bit pattern of the
 * half formats). Each emitter's prelude says only what differs: the
 * headers or typedefs, the qualifier macro UJ_INLINE, the float bit casts
 * UJ_F2U and UJ_U2F, its infinities and its math functions
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
    "UJ_INLINE uj_i64 uj_irem(uj_i64 a, uj_i64 b) { return (b == 0 || b == -1) ? 0 : a % b; }\n"
    /* the op table's functions that neither C nor CUDA has (ir/ops.c, the
     * reference, says what each is) */
    "UJ_INLINE double uj_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }\n"
    "UJ_INLINE float uj_signf(float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x; }\n"
    "UJ_INLINE double uj_sign(double x) { return x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : x; }\n"
    "UJ_INLINE float uj_modf(float a, float b) {\n"
    "  float r = fmodf(a, b);\n"
    "  r = (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;\n"
    "  return r == 0.0f ? copysignf(0.0f, b) : r;\n"
    "}\n"
    "UJ_INLINE double uj_mod(double a, double b) {\n"
    "  double r = fmod(a, b);\n"
    "  r = (r != 0.0 && ((r < 0.0) != (b < 0.0))) ? r + b : r;\n"
    "  return r == 0.0 ? copysign(0.0, b) : r;\n"
    "}\n"
    /* max and min: the first argument wins unless the second is better */
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
    "}\n"
    /* bf16 and f16 storage: ir/half.c. Every case is computed and the
     * result selected, with no branch and no early return, so that the
     * compiler vectorizes a loop of loads and stores (ir/half.c says why
     * the f16 widening selects by arithmetic, not by ?:). */
    "UJ_INLINE float uj_bf16_to_f32(uint16_t h) {\n"
    "  uint32_t u = (uint32_t)h << 16;\n"
    "  return UJ_U2F((u & 0x7fffffffu) > 0x7f800000u ? u | 0x00400000u : u);\n"
    "}\n"
    "UJ_INLINE uint16_t uj_f32_to_bf16(float x) {\n"
    "  uint32_t u = UJ_F2U(x);\n"
    "  uint32_t nan = (u >> 16) | 0x0040u, rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;\n"
    "  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);\n"
    "}\n"
    "UJ_INLINE float uj_f16_to_f32(uint16_t h) {\n"
    "  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;\n"
    "  uint32_t is_normal = e != 0u, significand = m | (is_normal << 10), unit = (e + !is_normal + 102u) << 23;\n"
    "  uint32_t finite = UJ_F2U((float)(int32_t)significand * UJ_U2F(unit));\n"
    "  uint32_t special = (0u - (uint32_t)(e == 31u)) & (0x7f800000u | ((uint32_t)(m != 0u) << 22));\n"
    "  return UJ_U2F(sign | finite | special);\n"
    "}\n"
    "UJ_INLINE uint16_t uj_f32_to_f16(float x) {\n"
    "  uint32_t u = UJ_F2U(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;\n"
    "  uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);\n"
    "  uint32_t normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;\n"
    "  normal = normal < 0x7c00u ? normal : 0x7c00u;\n"
    "  uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;\n"
    "  uint32_t shift = 126u - (e < 101u ? 101u : e > 112u ? 112u : e);\n"
    "  uint32_t subnormal = (m + (1u << (shift - 1u)) - 1u + ((m >> shift) & 1u)) >> shift;\n"
    "  return (uint16_t)(sign | (a > 0x7f800000u ? nan : a >= 0x38800000u ? normal : subnormal));\n"
    "}\n"
    "UJ_INLINE float uj_f64_to_f32_odd(double x) {\n"
    "  float t = (float)x;\n"
    "  double back = (double)t;\n"
    "  if (back == x || x != x) return t;\n"
    "  uint32_t u = UJ_F2U(t);\n"
    "  if ((back < 0 ? -back : back) > (x < 0 ? -x : x)) u -= 1u;\n"
    "  return UJ_U2F(u | 1u);\n"
    "}\n";
