/* tests/half_ref.h: a reference for the bf16 and f16 storage dtypes that the
 * tests hold the library to, written independently of it (ir/half.c and
 * the generated code work on bit patterns; this works on values in double,
 * with frexp and ldexp):
 *
 *   a format: p fraction bits, a bias, the all-ones exponent for inf/NaN;
 *   decode: fraction * 2^(1 - bias - p) for exponent 0 (subnormals),
 *           (2^p + fraction) * 2^(e - bias - p) otherwise;
 *   encode: x scaled so that one unit is the spacing of the format near
 *           |x| (2^(max(exponent of x, 1 - bias) - p)), rounded to the
 *           nearest integer with ties to even (the scaled value has at
 *           most 53 bits, so floor and the difference are exact), scaled
 *           back; past the largest finite value: infinity. A NaN encodes
 *           as the canonical quiet NaN (tests compare NaNs by kind, not by
 *           payload). */
#ifndef UJ_TESTS_HALF_REF_H
#define UJ_TESTS_HALF_REF_H

#include <math.h>
#include <stdint.h>

#include "../include/uopjit.h"

typedef struct {
  int fraction_bits, exponent_bits, bias;
} hr_format_t;

static inline hr_format_t hr_format(uj_dtype_t dt) {
  return dt == UJ_BF16 ? (hr_format_t){7, 8, 127} : (hr_format_t){10, 5, 15};
}

static inline int hr_is_half(uj_dtype_t dt) { return dt == UJ_BF16 || dt == UJ_F16; }

static inline double hr_decode(uj_dtype_t dt, uint16_t bits) {
  hr_format_t f = hr_format(dt);
  int all_ones = (1 << f.exponent_bits) - 1;
  int e = (bits >> f.fraction_bits) & all_ones;
  double fraction = (double)(bits & ((1u << f.fraction_bits) - 1));
  double v;
  if (e == all_ones) v = fraction != 0 ? NAN : INFINITY;
  else if (e == 0) v = ldexp(fraction, 1 - f.bias - f.fraction_bits);
  else v = ldexp(ldexp(1.0, f.fraction_bits) + fraction, e - f.bias - f.fraction_bits);
  return (bits & 0x8000u) ? -v : v;
}

/* The largest finite value of the format. */
static inline double hr_max(uj_dtype_t dt) {
  hr_format_t f = hr_format(dt);
  int emax = (1 << f.exponent_bits) - 2 - f.bias;
  return ldexp(2.0 - ldexp(1.0, -f.fraction_bits), emax);
}

/* x rounded to the format (nearest, ties to even), as a double. */
static inline double hr_round(uj_dtype_t dt, double x) {
  if (isnan(x) || isinf(x) || x == 0) return x;
  hr_format_t f = hr_format(dt);
  double ax = fabs(x);
  int e2;
  frexp(ax, &e2); /* ax in [2^(e2-1), 2^e2) */
  int lead = e2 - 1, emin = 1 - f.bias;
  int unit = (lead > emin ? lead : emin) - f.fraction_bits;
  double scaled = ldexp(ax, -unit), whole = floor(scaled), rest = scaled - whole;
  if (rest > 0.5 || (rest == 0.5 && fmod(whole, 2.0) == 1.0)) whole += 1.0;
  double r = ldexp(whole, unit);
  if (r > hr_max(dt)) r = INFINITY;
  return x < 0 ? -r : r;
}

/* The bits of x rounded to the format. */
static inline uint16_t hr_encode(uj_dtype_t dt, double x) {
  hr_format_t f = hr_format(dt);
  int all_ones = (1 << f.exponent_bits) - 1;
  uint16_t sign = signbit(x) ? 0x8000u : 0;
  if (isnan(x)) return (uint16_t)(sign | (all_ones << f.fraction_bits) | (1u << (f.fraction_bits - 1)));
  double r = fabs(hr_round(dt, x));
  if (isinf(r)) return (uint16_t)(sign | (all_ones << f.fraction_bits));
  if (r == 0) return sign;
  int e2;
  frexp(r, &e2);
  int lead = e2 - 1, emin = 1 - f.bias;
  if (lead < emin) return (uint16_t)(sign | (uint16_t)ldexp(r, f.fraction_bits - emin)); /* subnormal */
  uint32_t fraction = (uint32_t)(ldexp(r, f.fraction_bits - lead) - ldexp(1.0, f.fraction_bits));
  return (uint16_t)(sign | ((uint32_t)(lead + f.bias) << f.fraction_bits) | fraction);
}

/* 1 when the 16 bits are a NaN whose quiet bit (the fraction's highest) is set. */
static inline int hr_is_quiet_nan(uj_dtype_t dt, uint16_t bits) {
  hr_format_t f = hr_format(dt);
  int all_ones = (1 << f.exponent_bits) - 1;
  return ((bits >> f.fraction_bits) & all_ones) == all_ones && (bits & (1u << (f.fraction_bits - 1)));
}

#endif
