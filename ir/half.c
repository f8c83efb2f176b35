/* ir/half.c: the storage dtypes bf16 and f16 in the interpreter: which
 * dtypes they are, what they compute in, and the conversions between them
 * and f32 (the algorithm the generated code runs too: jit/prelude.c prints
 * it for C and CUDA, jit/mir/mir_half.c lowers it to MIR's integer
 * instructions; tests/test_dtypes_half.c checks every engine against this
 * file and this file against an independent reference).
 *
 *  bf16 -> f32: the 16 bits are the high half of the f32 (exact; a
 *               signalling NaN gets its quiet bit).
 *  f32 -> bf16: add 0x7fff plus the lowest kept bit, keep the high half:
 *               round to nearest, ties to even, over normals and
 *               subnormals alike; the carry of the largest values reaches
 *               the infinity's exponent. A NaN keeps its sign and high
 *               payload and gets its quiet bit (the add could carry it
 *               into an infinity).
 *  f16 -> f32:  rebias the exponent by 127 - 15; a subnormal m * 2^-24 is
 *               computed in float (exact: m has 10 bits and the product is
 *               an f32 normal); exponent 31 is an infinity or a NaN.
 *  f32 -> f16:  at or past 65520 +-inf (65520 is half-way from the
 *               largest finite, 65504, to 2^16, and the tie goes to the
 *               even 2^16, which overflows);
 *               normals rebias and round the low 13 bits as bf16 does;
 *               below 2^-14 the 24-bit significand shifts right to the
 *               2^-24 grid, rounding by the bits shifted out; at most
 *               2^-25 (half the least subnormal, a tie to even 0) zero.
 *  f64 -> half: round to odd f32 first, then to the half: correct, where
 *               going through round-to-nearest f32 could round twice.
 * The public uj_half_to_f64 and uj_half_from_f64 are these too. */
#include <math.h>
#include <string.h>

#include "ir.h"

int ir_dtype_is_half(uj_dtype_t d) { return d == UJ_BF16 || d == UJ_F16; }

uj_dtype_t ir_dtype_compute(uj_dtype_t d) { return ir_dtype_is_half(d) ? UJ_F32 : d; }

static uint32_t bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static float float_of(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

float ir_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x00400000u;
  return float_of(u);
}

uint16_t ir_f32_to_bf16(float x) {
  uint32_t u = bits_of(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float ir_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
  if (e == 0) u = bits_of((float)m * 5.9604644775390625e-8f); /* m * 2^-24 */
  else if (e == 31) u = 0x7f800000u | (m << 13) | (m ? 0x00400000u : 0u);
  else u = ((e + 112u) << 23) | (m << 13);
  return float_of(sign | u);
}

uint16_t ir_f32_to_f16(float x) {
  uint32_t u = bits_of(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (a >= 0x38800000u) {
    a -= 0x38000000u;
    return (uint16_t)(sign | ((a + 0xfffu + ((a >> 13) & 1u)) >> 13));
  }
  if (a <= 0x33000000u) return (uint16_t)sign;
  uint32_t shift = 126u - (a >> 23), m = (a & 0x7fffffu) | 0x800000u;
  uint32_t q = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (q & 1u))) q++;
  return (uint16_t)(sign | q);
}

float ir_f64_to_f32_odd(double x) {
  float t = (float)x;
  double back = (double)t;
  if (back == x || x != x) return t;
  uint32_t u = bits_of(t);
  if ((back < 0 ? -back : back) > (x < 0 ? -x : x)) u -= 1u;
  return float_of(u | 1u);
}

double uj_half_to_f64(uj_dtype_t dtype, uint16_t bits) {
  if (!ir_dtype_is_half(dtype)) return NAN;
  return dtype == UJ_BF16 ? (double)ir_bf16_to_f32(bits) : (double)ir_f16_to_f32(bits);
}

uint16_t uj_half_from_f64(uj_dtype_t dtype, double x) {
  if (!ir_dtype_is_half(dtype)) return 0;
  float f = ir_f64_to_f32_odd(x);
  return dtype == UJ_BF16 ? ir_f32_to_bf16(f) : ir_f32_to_f16(f);
}

double ir_round_to_half(uj_dtype_t d, double x) {
  float f = ir_f64_to_f32_odd(x);
  return d == UJ_BF16 ? (double)ir_bf16_to_f32(ir_f32_to_bf16(f)) : (double)ir_f16_to_f32(ir_f32_to_f16(f));
}
