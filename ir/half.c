/* ir/half.c: the storage dtypes bf16 and f16 in the interpreter: which
 * dtypes they are, what they compute in, and the conversions between them
 * and f32 (the algorithm the generated code runs too: jit/prelude.c prints
 * it for C and CUDA, line for line; jit/mir/mir_half.c lowers the same
 * cases to MIR's integer instructions with branches; tests/test_dtypes_half.c
 * checks every engine against this file and this file against an
 * independent reference, on every f32 pattern).
 *
 * Each conversion computes every case and selects the result, with no
 * branch: a loop of loads and stores in the generated C then vectorizes,
 * where a branchy store does not. Rounding is to nearest, ties to even, by
 * adding half a unit less one plus the lowest kept bit; a NaN keeps its
 * sign and high payload and gets its quiet bit. The algorithm of each form
 * is above its function. The public uj_half_to_f64 and uj_half_from_f64
 * are these too. */
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

/* The 16 bits are the high half of the f32 (exact; a signalling NaN gets
 * its quiet bit). */
float ir_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  return float_of((u & 0x7fffffffu) > 0x7f800000u ? u | 0x00400000u : u);
}

/* Add 0x7fff plus the lowest kept bit, keep the high half: round to
 * nearest, ties to even, over normals and subnormals alike; the carry of the
 * largest values reaches the infinity's exponent. A NaN keeps its sign and
 * high payload and gets its quiet bit (the add could carry it into an
 * infinity). */
uint16_t ir_f32_to_bf16(float x) {
  uint32_t u = bits_of(x);
  uint32_t nan = (u >> 16) | 0x0040u, rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

/* The value is an 11-bit integer significand (the 10 fraction bits, and
 * the implicit 1 unless the exponent e is 0) times 2^(max(e, 1) - 25): one
 * float multiply by that power of two, exact for normals and subnormals
 * alike, and computed only from integers and normal floats, so a
 * flush-to-zero mode cannot change it. Exponent 31 ORs in the all-ones
 * exponent (the product's fraction bits are the payload) and a NaN's quiet
 * bit.
 *
 * The selects are arithmetic on 0/1, not conditionals: gcc would thread a
 * conditional into branches that each hold a copy of the float multiply,
 * and it does not make a float operation unconditional again (it could
 * trap), so the loop would not vectorize. */
float ir_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t is_normal = e != 0u, significand = m | (is_normal << 10), unit = (e + !is_normal + 102u) << 23;
  uint32_t finite = bits_of((float)(int32_t)significand * float_of(unit));
  uint32_t special = (0u - (uint32_t)(e == 31u)) & (0x7f800000u | ((uint32_t)(m != 0u) << 22));
  return float_of(sign | finite | special);
}

/* Normals (from 2^-14) rebias by 127 - 15 and round the low 13 bits as
 * bf16 does; from 65520 up (half-way from the largest finite, 65504, to
 * 2^16, and the tie goes to the even 2^16) the sum reaches 0x7c00 and is
 * clamped there, the infinity. Below 2^-14 the 24-bit significand m shifts
 * right to the 2^-24 grid by 126 - exponent, rounding the same way: add
 * half the shifted-out unit less one plus the lowest kept bit. The exponent
 * is clamped to [101, 112] first: 112 is the largest below 2^-14, and from
 * 2^-25 down (exponent 101 and below) a shift of 25 leaves 0, as rounding
 * must (2^-25 is half the least subnormal, a tie to the even 0), while
 * every shift stays under 32. A NaN keeps its sign and high payload, quiet. */
uint16_t ir_f32_to_f16(float x) {
  uint32_t u = bits_of(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
  uint32_t normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  normal = normal < 0x7c00u ? normal : 0x7c00u;
  uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126u - (e < 101u ? 101u : e > 112u ? 112u : e);
  uint32_t subnormal = (m + (1u << (shift - 1u)) - 1u + ((m >> shift) & 1u)) >> shift;
  return (uint16_t)(sign | (a > 0x7f800000u ? nan : a >= 0x38800000u ? normal : subnormal));
}

/* f64 -> half rounds to odd f32 first, then to the half: correct, where
 * going through round-to-nearest f32 could round twice. */
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
