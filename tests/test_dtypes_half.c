/* tests/test_dtypes_half.c: the storage dtypes bf16 and f16 on every
 * engine configuration (oracle.h: interpreter, C, MIR, the raw IR, CUDA
 * where there is a GPU; every program also compiled with NVRTC for sm_90),
 * against tests/half_ref.h, a reference written on values rather than bits:
 *
 *  - widening every one of the 65536 bit patterns of each format to f32
 *    and f64, bit for bit (a NaN must come back a quiet NaN);
 *  - narrowing f32 patterns (a stride over all 2^32, the ties and their
 *    neighbours of every half value, the edges: overflow, subnormals) and
 *    f64 and i32 values where rounding twice would go wrong;
 *  - named special values (NaN, +-inf, +-0, subnormals, largest finite,
 *    65520 -> inf, 65519 -> 65504, ties to even), spelled as the formats
 *    define them;
 *  - casts between every pair of f32, f64, i32, bf16 and f16;
 *  - elementwise chains and mixed dtypes in the expression language
 *    (bf16 with f32 promotes to f32, all-bf16 stays bf16), and sums of bf16
 *    accumulated in f32; an in-place update of bf16/f16 parameters;
 *  - tensors of the library (uj_tensor_alloc, uj_tensor_copy), the API's
 *    conversions, and what refuses the dtypes: the backward pass, a
 *    declared dtype mismatch. */
#include "../ir/ir.h"
#include "oracle.h"

/* ---- running on every configuration, compared bit for bit ---------------------------- */

/* Runs p on every configuration; after each run check(ctx, outs) returns
 * the first bad element or -1, and a failure names the configuration. */
typedef int64_t (*bits_check_fn)(void* ctx, uj_tensor_t* const* outs, char* what, size_t cap);

static void run_bits(uj_program_t* p, const uj_tensor_t* const* in, int nin, uj_tensor_t* const* outs, int nout,
                     bits_check_fn check, void* ctx) {
  CHECK(p != NULL);
  if (!p) return;
  OR_FOR_ENGINES(e) {
    for (int k = 0; k < nout; k++) memset(outs[k]->data, 0xA5, or_dsize(outs[k]->dtype) * (size_t)or_tnumel(outs[k]));
    uj_status_t s = or_run_staged(or_ctx(e), p, UJ_FORWARD, in, nin, NULL, 0, outs, nout);
    char what[256] = "", msg[512];
    if (s != UJ_OK) {
      snprintf(msg, sizeof msg, "engine %s: run failed: %s: %s", or_configs[e].name, uj_status_str(s), uj_last_error());
      harness_fail(__FILE__, __LINE__, msg);
      continue;
    }
    int64_t bad = check(ctx, outs, what, sizeof what);
    if (bad >= 0) {
      snprintf(msg, sizeof msg, "engine %s: element %lld: %s", or_configs[e].name, (long long)bad, what);
      harness_fail(__FILE__, __LINE__, msg);
    }
  }
  OR_CUDA_COMPILE(p, UJ_FORWARD, in, nin, NULL, 0);
}

static uj_program_t* cast_program(uj_dtype_t from, uj_dtype_t to) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, from);
  uj_io_t y = uj_cast(g, to, x);
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &y);
  uj_graph_free(g);
  return p;
}

static uint32_t f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static float f32_of(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* ---- widening every pattern ---------------------------------------------------------- */

typedef struct {
  uj_dtype_t half;
} widen_t;

/* out[i] is the f32 or f64 widening of pattern i: the same value and sign,
 * or a NaN that is quiet. */
static int64_t check_widen(void* ctx, uj_tensor_t* const* outs, char* what, size_t cap) {
  widen_t* w = ctx;
  for (int64_t i = 0; i < 65536; i++) {
    double want = hr_decode(w->half, (uint16_t)i);
    int quiet, same;
    double got;
    if (outs[0]->dtype == UJ_F32) {
      uint32_t u = ((const uint32_t*)outs[0]->data)[i];
      got = f32_of(u);
      quiet = (u & 0x7fc00000u) == 0x7fc00000u;
    } else {
      got = ((const double*)outs[0]->data)[i];
      uint64_t u;
      memcpy(&u, &got, sizeof u);
      quiet = (u & 0x7ff8000000000000ull) == 0x7ff8000000000000ull;
    }
    same = isnan(want) ? isnan(got) && quiet : got == want && signbit(got) == signbit(want);
    if (!same) {
      snprintf(what, cap, "%s pattern 0x%04x widens to %.9g, want %.9g%s", uj_dtype_name(w->half), (unsigned)i, got,
               want, isnan(want) ? " (a quiet NaN)" : "");
      return i;
    }
  }
  return -1;
}

TEST(widen_every_pattern) {
  int64_t n = 65536;
  for (int h = 0; h < 2; h++) {
    uj_dtype_t half = h ? UJ_F16 : UJ_BF16;
    uj_tensor_t x = or_tensor(half, 1, &n);
    for (int64_t i = 0; i < n; i++) ((uint16_t*)x.data)[i] = (uint16_t)i;
    for (int wide = 0; wide < 2; wide++) {
      uj_dtype_t to = wide ? UJ_F64 : UJ_F32;
      uj_tensor_t y = or_tensor(to, 1, &n);
      uj_program_t* p = cast_program(half, to);
      const uj_tensor_t* in[] = {&x};
      uj_tensor_t* out[] = {&y};
      widen_t w = {half};
      run_bits(p, in, 1, out, 1, check_widen, &w);
      uj_program_free(p);
      or_tensor_free(&y);
    }
    or_tensor_free(&x);
  }
}

/* ---- narrowing ------------------------------------------------------------------------ */

typedef struct {
  uj_dtype_t half;
  const uj_tensor_t* x; /* the input: f32, f64 or i32 */
} narrow_t;

static double input_value(const uj_tensor_t* x, int64_t i) { return or_get(x, i); }

/* out[i] is the input rounded to the half: the reference's bits, or a
 * quiet NaN for a NaN. */
static int64_t check_narrow(void* ctx, uj_tensor_t* const* outs, char* what, size_t cap) {
  narrow_t* c = ctx;
  int64_t n = or_tnumel(c->x);
  for (int64_t i = 0; i < n; i++) {
    double v = input_value(c->x, i);
    uint16_t got = ((const uint16_t*)outs[0]->data)[i], want = hr_encode(c->half, v);
    int ok = isnan(v) ? hr_is_quiet_nan(c->half, got) && (got & 0x8000u) == (want & 0x8000u) : got == want;
    if (!ok) {
      snprintf(what, cap, "%s %.17g (bits 0x%08x as f32) narrows to %s 0x%04x, want 0x%04x", uj_dtype_name(c->x->dtype),
               v, c->x->dtype == UJ_F32 ? ((const uint32_t*)c->x->data)[i] : 0u, uj_dtype_name(c->half),
               (unsigned)got, (unsigned)want);
      return i;
    }
  }
  return -1;
}

static void narrow_all(const uj_tensor_t* x) {
  int64_t n = or_tnumel(x);
  for (int h = 0; h < 2; h++) {
    uj_dtype_t half = h ? UJ_F16 : UJ_BF16;
    uj_tensor_t y = or_tensor(half, 1, &n);
    uj_program_t* p = cast_program(x->dtype, half);
    const uj_tensor_t* in[] = {x};
    uj_tensor_t* out[] = {&y};
    narrow_t c = {half, x};
    run_bits(p, in, 1, out, 1, check_narrow, &c);
    uj_program_free(p);
    or_tensor_free(&y);
  }
}

/* f32 patterns: a stride over all of them, and for every half value of
 * either format the f32s at its tie with the next one and one step to
 * either side. */
TEST(narrow_f32_patterns) {
  enum { STRIDED = 1 << 18 };
  int64_t n = STRIDED + 2 * 65536 * 3;
  uj_tensor_t x = or_tensor(UJ_F32, 1, &n);
  uint32_t* u = x.data;
  int64_t k = 0;
  for (int64_t i = 0; i < STRIDED; i++) u[k++] = (uint32_t)(i * 16411u + 7u); /* 16411 is odd: all residues */
  for (uint32_t h = 0; h < 65536; h++) {
    uint32_t bf16_tie = (h << 16) | 0x8000u; /* half-way to the next bf16 */
    u[k++] = bf16_tie, u[k++] = bf16_tie - 1, u[k++] = bf16_tie + 1;
    float lo = (float)hr_decode(UJ_F16, (uint16_t)h), hi = (float)hr_decode(UJ_F16, (uint16_t)(h + 1));
    uint32_t f16_tie = isfinite(lo) && isfinite(hi) && (h & 0x7fff) != 0x7fff ? f32_bits((lo + hi) / 2) : f32_bits(lo);
    u[k++] = f16_tie, u[k++] = f16_tie - 1, u[k++] = f16_tie + 1;
  }
  CHECK(k == n);
  narrow_all(&x);
  or_tensor_free(&x);
}

/* ir/half.c's narrowings, which the generated code prints line for line,
 * on a dense stride over all 2^32 f32 patterns and on every pattern in f16's
 * subnormal range (from 2^-26 to 2^-14, both signs, where the shifts
 * differ for each exponent). Asking the reference (slow: frexp, ldexp) for
 * each pattern would take minutes, so it is asked where it steps: rounding
 * correctly is monotone in the magnitude, so the non-negative patterns up
 * to +inf split into one run per half value, and the reference gives each
 * run's first pattern (at the tie with the value below, or one past it) and
 * confirms the pattern before it still rounds down. A pattern is then
 * compared with the value of the run it falls in, its negative with the
 * same bits plus the sign, a NaN by kind and sign. */
enum { HALF_RUNS = 0x7f81 }; /* positive finite bf16 values and +inf: the most runs */

/* run_start[h] = the first f32 pattern that rounds to half value h (0..inf);
 * returns the number of runs. */
static int half_runs(uj_dtype_t half, uint32_t* run_start) {
  uint16_t inf = half == UJ_BF16 ? 0x7f80u : 0x7c00u;
  run_start[0] = 0;
  for (uint32_t h = 1; h <= inf; h++) {
    double below = hr_decode(half, (uint16_t)(h - 1));
    double tie = h < inf ? (below + hr_decode(half, (uint16_t)h)) / 2 : below + (below - hr_decode(half, (uint16_t)(h - 2))) / 2;
    uint32_t t = f32_bits((float)tie); /* exact: a tie has one bit more than the half */
    uint32_t start = hr_encode(half, f32_of(t)) == h ? t : t + 1;
    CHECK(hr_encode(half, f32_of(start)) == h && hr_encode(half, f32_of(start - 1)) == h - 1);
    run_start[h] = start;
  }
  return inf + 1;
}

typedef struct {
  uj_dtype_t half;
  uint32_t run_start[HALF_RUNS];
  int runs, run; /* the run of the last pattern, patterns come in increasing order */
  int failures;
} narrow_walk_t;

/* Checks pattern a (sign bit clear) and its negative; patterns ascend. */
static void walk_check(narrow_walk_t* w, uint32_t a) {
  uint16_t got[2];
  for (int neg = 0; neg < 2; neg++) {
    float x = f32_of(a | (neg ? 0x80000000u : 0u));
    got[neg] = w->half == UJ_BF16 ? ir_f32_to_bf16(x) : ir_f32_to_f16(x);
  }
  int ok;
  uint16_t want = 0;
  if (a > 0x7f800000u) {
    ok = hr_is_quiet_nan(w->half, got[0]) && hr_is_quiet_nan(w->half, got[1]) && got[1] == (got[0] | 0x8000u);
  } else {
    while (w->run + 1 < w->runs && w->run_start[w->run + 1] <= a) w->run++;
    want = (uint16_t)w->run;
    ok = got[0] == want && got[1] == (want | 0x8000u);
  }
  if (!ok && w->failures++ < 5) {
    char msg[200];
    snprintf(msg, sizeof msg, "f32 0x%08x (and its negative) narrows to %s 0x%04x (0x%04x), want 0x%04x%s", a,
             uj_dtype_name(w->half), (unsigned)got[0], (unsigned)got[1], (unsigned)want,
             a > 0x7f800000u ? " (a NaN: quiet, same sign)" : "");
    harness_fail(__FILE__, __LINE__, msg);
  }
}

TEST(narrow_f32_dense_against_the_runs_of_the_reference) {
  static narrow_walk_t walk;
  for (int h = 0; h < 2; h++) {
    walk.half = h ? UJ_F16 : UJ_BF16;
    walk.runs = half_runs(walk.half, walk.run_start);
    walk.run = 0, walk.failures = 0;
    /* a stride of 251 (odd, so every low bit pattern comes up) over all of them */
    for (uint64_t a = 0; a < 0x80000000u; a += 251) walk_check(&walk, (uint32_t)a);
    if (walk.half == UJ_F16) {
      walk.run = 0;
      for (uint32_t a = 0x32800000u; a < 0x38800000u; a++) walk_check(&walk, a); /* 2^-26 up to 2^-14 */
    }
    CHECK(walk.failures == 0);
  }
}

/* f64 and i32 values whose nearest f32 is exactly a half-way point: going
 * through round-to-nearest f32 first would round twice and wrongly. */
TEST(narrow_f64_and_i32_rounding_once) {
  static const double f64[] = {
      1.0 + 0x1p-8 + 0x1p-40,     /* bf16: just above the tie after 1: up */
      1.0 + 0x1p-8 - 0x1p-40,     /* just below: down */
      1.0 + 0x1p-11 + 0x1p-40,    /* f16 likewise */
      1.0 + 0x1p-11 - 0x1p-40,
      65520.0 - 0x1p-30,          /* below f16's overflow point: 65504 */
      65520.0,                    /* inf */
      0x1p-25 + 0x1p-60,          /* just above half of f16's least subnormal: 2^-24 */
      0x1p-25,                    /* the tie: 0 */
      0x1p-134 + 0x1p-170,        /* half of bf16's least subnormal, plus: 2^-133 */
      -0x1p-134,                  /* the tie: -0 */
      1e300, -1e300, 1e-300, -0.0, 0.0, INFINITY, -INFINITY, NAN, 3.4e38, 3.3961e38,
      0.1, -2.5e-5, 6.103515625e-05, 123456.789};
  int64_t n = (int64_t)(sizeof f64 / sizeof f64[0]);
  uj_tensor_t x = or_tensor(UJ_F64, 1, &n);
  memcpy(x.data, f64, sizeof f64);
  narrow_all(&x);
  or_tensor_free(&x);
  static const int32_t i32[] = {0, 1, -1, 255, 257, 16777217, 16842753 /* 2^24 + 2^16 + 1 */, -16842753,
                                65519, 65520, 2147483647, -2147483647 - 1, 33558529, 1000};
  n = (int64_t)(sizeof i32 / sizeof i32[0]);
  x = or_tensor(UJ_I32, 1, &n);
  memcpy(x.data, i32, sizeof i32);
  narrow_all(&x);
  or_tensor_free(&x);
}

/* The special values, as the two formats define them (IEEE 754 binary16;
 * bfloat16, the high half of binary32). */
TEST(special_values) {
  static const struct {
    float x;
    uint16_t bf16, f16;
  } cases[] = {
      {0.0f, 0x0000, 0x0000},
      {-0.0f, 0x8000, 0x8000},
      {1.0f, 0x3f80, 0x3c00},
      {-2.0f, 0xc000, 0xc000},
      {INFINITY, 0x7f80, 0x7c00},
      {-INFINITY, 0xff80, 0xfc00},
      {65504.0f, 0x4780, 0x7bff},            /* f16's largest finite */
      {65519.0f, 0x4780, 0x7bff},            /* below the overflow point */
      {65520.0f, 0x4780, 0x7c00},            /* f16: overflows to inf */
      {-65520.0f, 0xc780, 0xfc00},
      {0x1p-24f, 0x3380, 0x0001},            /* f16's least subnormal */
      {0x1p-25f, 0x3300, 0x0000},            /* its half: ties to even 0 */
      {0x1.8p-25f, 0x3340, 0x0001},          /* three quarters: up */
      {0x1p-14f, 0x3880, 0x0400},            /* f16's least normal */
      {0x1.ffcp-15f, 0x3880, 0x0400},        /* the largest subnormal's tie with it: even 0x400 */
      {0x1p-133f, 0x0001, 0x0000},           /* bf16's least subnormal */
      {0x1p-134f, 0x0000, 0x0000},           /* its half: ties to even 0 */
      {0x1.8p-133f, 0x0002, 0x0000},         /* 1.5 units: ties to even 2 */
      {0x1.fep127f, 0x7f7f, 0x7c00},         /* bf16's largest finite */
      {0x1.ffp127f, 0x7f80, 0x7c00},         /* its tie with 2^128: inf */
      {1.00390625f, 0x3f80, 0x3c04},         /* 1 + 2^-8: bf16 tie, to even 1.0 */
      {1.01171875f, 0x3f82, 0x3c0c},         /* 1 + 3 * 2^-8: bf16 tie, to even 1 + 2^-6 */
      {1.00048828125f, 0x3f80, 0x3c00},      /* 1 + 2^-11: f16 tie, to even 1.0 */
      {1.00146484375f, 0x3f80, 0x3c02},      /* 1 + 3 * 2^-11: f16 tie, to even 1 + 2^-9 */
  };
  int64_t n = (int64_t)(sizeof cases / sizeof cases[0]);
  for (int64_t i = 0; i < n; i++) { /* the reference agrees with the definitions */
    CHECK(hr_encode(UJ_BF16, cases[i].x) == cases[i].bf16);
    CHECK(hr_encode(UJ_F16, cases[i].x) == cases[i].f16);
  }
  uj_tensor_t x = or_tensor(UJ_F32, 1, &n);
  for (int64_t i = 0; i < n; i++) ((float*)x.data)[i] = cases[i].x;
  narrow_all(&x);
  /* NaNs of both signs, quiet and signalling: a quiet NaN comes out */
  static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0x7f810000u};
  n = 6;
  uj_tensor_t xn = or_tensor(UJ_F32, 1, &n);
  memcpy(xn.data, nans, sizeof nans);
  narrow_all(&xn);
  or_tensor_free(&xn);
  or_tensor_free(&x);
}

/* ---- casts between every pair ----------------------------------------------------------- */

static const uj_dtype_t all_dtypes[] = {UJ_F32, UJ_F64, UJ_I32, UJ_BF16, UJ_F16};

static double ref_cast(uj_dtype_t to, double v) {
  if (to == UJ_I32) return isnan(v) ? 0 : v >= 2147483647.0 ? 2147483647.0 : v <= -2147483648.0 ? -2147483648.0 : trunc(v);
  return or_in_dtype(to, v);
}

TEST(cast_every_pair) {
  HARNESS_SEED(1906);
  uint64_t st = 1906;
  int64_t n = 64;
  for (int a = 0; a < 5; a++)
    for (int b = 0; b < 5; b++) {
      uj_dtype_t from = all_dtypes[a], to = all_dtypes[b];
      uj_tensor_t x = or_tensor(from, 1, &n), y = or_tensor(to, 1, &n);
      for (int64_t i = 0; i < n; i++) {
        double v = i < 8 ? (double[]){0.0, -0.0, 1.5, -2.5, 65504.0, 70000.0, 1e-6, 3e9}[i]
                         : i % 3 ? harness_real(&st, -3e4, 3e4) : harness_real(&st, -2.0, 2.0);
        or_set(&x, i, from == UJ_I32 ? trunc(v > 2e9 ? 2e9 : v) : v);
      }
      double* ref = or_alloc_ref(n);
      for (int64_t i = 0; i < n; i++) ref[i] = ref_cast(to, or_get(&x, i));
      uj_program_t* p = cast_program(from, to);
      if (OR_RUN_CHECK1(p, &x, &y, ref, 0)) fprintf(stderr, "  (cast %s -> %s)\n", uj_dtype_name(from), uj_dtype_name(to));
      uj_program_free(p);
      free(ref);
      or_tensor_free(&x);
      or_tensor_free(&y);
    }
}

/* ---- programs in the expression language --------------------------------------------- */

static uj_program_t* parse(const char* src) {
  uj_program_t* p = NULL;
  uj_status_t s = uj_program_parse(src, &p);
  if (s != UJ_OK) fprintf(stderr, "  parse: %s: %s\n", uj_status_str(s), uj_last_error());
  CHECK(s == UJ_OK);
  return p;
}

/* y = (x * w + 1.5) / (w - 3): f32 arithmetic (correctly rounded on every
 * engine), stored in the half: bit for bit the reference's. */
TEST(elementwise_chain_all_half) {
  HARNESS_SEED(1907);
  uint64_t st = 1907;
  for (int h = 0; h < 2; h++) {
    uj_dtype_t half = h ? UJ_F16 : UJ_BF16;
    uj_program_t* p = parse("y = (x * w + 1.5) / (w - 3)");
    int64_t dims[2] = {37, 29};
    uj_tensor_t x = or_tensor(half, 2, dims), w = or_tensor(half, 2, dims), y = or_tensor(half, 2, dims);
    or_fill_real(&st, &x, -100, 100);
    or_fill_real(&st, &w, -4, 4);
    int64_t n = or_tnumel(&y);
    double* ref = or_alloc_ref(n);
    for (int64_t i = 0; i < n; i++) {
      float xv = (float)or_get(&x, i), wv = (float)or_get(&w, i);
      float num = xv * wv, den = wv - 3.0f;
      num = num + 1.5f;
      ref[i] = hr_round(half, (double)(num / den));
    }
    uj_dtype_t out_dt = UJ_F32;
    const uj_tensor_t* in[] = {&x, &w};
    uj_tensor_t* out[] = {&y};
    const double* refs[] = {ref};
    CHECK(uj_program_output_dtype(p, UJ_FORWARD, in, 0, &out_dt) == UJ_OK && out_dt == half);
    OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 1, 0);
    free(ref);
    or_tensor_free(&x), or_tensor_free(&w), or_tensor_free(&y);
    uj_program_free(p);
  }
}

/* A bf16 parameter with an f32 master copy: m (f32) = m - 0.5 * g (bf16)
 * promotes to f32; p, declared bf16, = m rounds it into the bf16 output. q = exp(p) * p
 * stays bf16 (checked within one bf16 unit: exp is not correctly rounded
 * everywhere). Also bf16 with f16, which promotes to f32, and with f64. */
TEST(mixed_dtypes_promote) {
  HARNESS_SEED(1908);
  uint64_t st = 1908;
  uj_program_t* p = parse("g: bf16; p: bf16; m: f32\nm = m - 0.5 * g\np = m"); /* inputs m, g */
  uj_program_t* pq = parse("p: bf16\nq = exp(p) * p");
  int64_t n = 1000;
  uj_tensor_t g = or_tensor(UJ_BF16, 1, &n), pp = or_tensor(UJ_BF16, 1, &n), m = or_tensor(UJ_F32, 1, &n);
  uj_tensor_t mo = or_tensor(UJ_F32, 1, &n), po = or_tensor(UJ_BF16, 1, &n), qo = or_tensor(UJ_BF16, 1, &n);
  or_fill_real(&st, &g, -1, 1);
  or_fill_real(&st, &pp, -2, 2);
  or_fill_real(&st, &m, -2, 2);
  double *rm = or_alloc_ref(n), *rp = or_alloc_ref(n), *rq = or_alloc_ref(n);
  for (int64_t i = 0; i < n; i++) {
    float mv = (float)or_get(&m, i) - 0.5f * (float)or_get(&g, i);
    rm[i] = mv;
    rp[i] = hr_round(UJ_BF16, mv);
    rq[i] = hr_round(UJ_BF16, exp(or_get(&pp, i)) * or_get(&pp, i));
  }
  const uj_tensor_t* in[] = {&m, &g};
  uj_dtype_t dts[3];
  for (int k = 0; k < 2; k++) CHECK(uj_program_output_dtype(p, UJ_FORWARD, in, k, &dts[k]) == UJ_OK);
  CHECK(dts[0] == UJ_F32 && dts[1] == UJ_BF16);
  uj_tensor_t* out[] = {&mo, &po};
  const double* refs[] = {rm, rp};
  OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 2, 0);
  const uj_tensor_t* inq[] = {&pp};
  CHECK(uj_program_output_dtype(pq, UJ_FORWARD, inq, 0, &dts[2]) == UJ_OK && dts[2] == UJ_BF16);
  OR_RUN_CHECK1(pq, &pp, &qo, rq, 0x1p-7);
  free(rm), free(rp), free(rq);
  or_tensor_free(&g), or_tensor_free(&pp), or_tensor_free(&m);
  or_tensor_free(&mo), or_tensor_free(&po), or_tensor_free(&qo);
  uj_program_free(p);
  uj_program_free(pq);

  uj_program_t* p2 = parse("a: bf16; b: f16; c: f64\ny = a + b\nz = a * c");
  uj_tensor_t a = or_tensor(UJ_BF16, 1, &n), b = or_tensor(UJ_F16, 1, &n), c = or_tensor(UJ_F64, 1, &n);
  or_fill_real(&st, &a, -10, 10);
  or_fill_real(&st, &b, -10, 10);
  or_fill_real(&st, &c, -10, 10);
  const uj_tensor_t* in2[] = {&a, &b, &c};
  CHECK(uj_program_output_dtype(p2, UJ_FORWARD, in2, 0, &dts[0]) == UJ_OK && dts[0] == UJ_F32);
  CHECK(uj_program_output_dtype(p2, UJ_FORWARD, in2, 1, &dts[1]) == UJ_OK && dts[1] == UJ_F64);
  uj_tensor_t y = or_tensor(UJ_F32, 1, &n), z = or_tensor(UJ_F64, 1, &n);
  double *ry = or_alloc_ref(n), *rz = or_alloc_ref(n);
  for (int64_t i = 0; i < n; i++) {
    ry[i] = (float)((float)or_get(&a, i) + (float)or_get(&b, i));
    rz[i] = or_get(&a, i) * or_get(&c, i);
  }
  uj_tensor_t* out2[] = {&y, &z};
  const double* refs2[] = {ry, rz};
  OR_RUN_CHECK(p2, in2, 3, NULL, 0, out2, refs2, 2, 0);
  free(ry), free(rz);
  or_tensor_free(&a), or_tensor_free(&b), or_tensor_free(&c), or_tensor_free(&y), or_tensor_free(&z);
  uj_program_free(p2);
}

/* An in-place update of bf16 parameters (one tensor passed as input p and
 * as output p): every element read before it is rounded and written. */
TEST(in_place_half_update) {
  HARNESS_SEED(1910);
  uint64_t st = 1910;
  for (int h = 0; h < 2; h++) {
    uj_dtype_t half = h ? UJ_F16 : UJ_BF16;
    uj_program_t* p = parse("p = p - 0.5 * g * p");
    int64_t n = 4099;
    uj_tensor_t pt = or_tensor(half, 1, &n), g = or_tensor(half, 1, &n);
    or_fill_real(&st, &pt, -3, 3);
    or_fill_real(&st, &g, -1, 1);
    uint16_t* start = malloc(sizeof(uint16_t) * (size_t)n);
    memcpy(start, pt.data, sizeof(uint16_t) * (size_t)n);
    const uj_tensor_t* in[] = {&pt, &g};
    uj_tensor_t* out[] = {&pt};
    OR_FOR_ENGINES(e) {
      memcpy(pt.data, start, sizeof(uint16_t) * (size_t)n);
      uj_status_t s = or_run_staged(or_ctx(e), p, UJ_FORWARD, in, 2, NULL, 0, out, 1);
      CHECK(s == UJ_OK);
      int64_t bad = -1;
      for (int64_t i = 0; i < n && bad < 0 && s == UJ_OK; i++) {
        float pv = (float)hr_decode(half, start[i]), gv = (float)or_get(&g, i);
        float step = 0.5f * gv;
        step = step * pv;
        if (((uint16_t*)pt.data)[i] != hr_encode(half, pv - step)) bad = i;
      }
      if (bad >= 0) fprintf(stderr, "  engine %s, %s: element %lld\n", or_configs[e].name, uj_dtype_name(half), (long long)bad);
      CHECK(bad < 0);
    }
    OR_CUDA_COMPILE(p, UJ_FORWARD, in, 2, NULL, 0);
    free(start);
    or_tensor_free(&pt), or_tensor_free(&g);
    uj_program_free(p);
  }
}

/* sum of bf16 accumulates in f32: 1000 ones give 1000 (in bf16 steps the
 * sum would stop at 256), and random rows match the double sum within the
 * f32 bound plus the final rounding to bf16. */
TEST(sum_of_half_in_f32) {
  HARNESS_SEED(1909);
  uint64_t st = 1909;
  for (int h = 0; h < 2; h++) {
    uj_dtype_t half = h ? UJ_F16 : UJ_BF16;
    uj_program_t* p = parse("s = sum(x, 1)\nmu = mean(x)");
    int64_t dims[2] = {7, 1000}, sd[2] = {7, 1}, md[2] = {1, 1};
    uj_tensor_t x = or_tensor(half, 2, dims), s = or_tensor(half, 2, sd), mu = or_tensor(half, 2, md);
    for (int64_t i = 0; i < 1000; i++) or_set(&x, i, 1.0); /* row 0: ones */
    for (int64_t i = 1000; i < 7000; i++) or_set(&x, i, harness_real(&st, -1, 3));
    double rs[7], abs_s[7], rmu[1], abs_mu[1] = {0};
    double total = 0;
    for (int r = 0; r < 7; r++) {
      rs[r] = abs_s[r] = 0;
      for (int64_t i = 0; i < 1000; i++) rs[r] += or_get(&x, r * 1000 + i), abs_s[r] += fabs(or_get(&x, r * 1000 + i));
      total += rs[r], abs_mu[0] += abs_s[r] / 7000;
    }
    rmu[0] = total / 7000;
    const uj_tensor_t* in[] = {&x};
    uj_tensor_t* out[] = {&s, &mu};
    const double* refs[] = {rs, rmu};
    const double* sum_abs[] = {abs_s, abs_mu};
    int64_t terms[] = {1000, 7000};
    double unit = half == UJ_BF16 ? 0x1p-8 : 0x1p-11; /* the final rounding: half a unit, relative */
    OR_RUN_CHECK_SUM(p, in, 1, NULL, 0, out, refs, sum_abs, terms, 2, 2 * unit);
    CHECK(or_get(&s, 0) == 1000.0);
    or_tensor_free(&x), or_tensor_free(&s), or_tensor_free(&mu);
    uj_program_free(p);
  }
}

/* ---- what refuses the half dtypes ------------------------------------------------------ */

TEST(tensors_api_conversions_and_refusals) {
  /* a backward pass through a bf16 value */
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_BF16);
  uj_io_t y = uj_unary(g, UJ_UNARY_EXP, x);
  uj_io_t gy = uj_grad(g, y), gx = uj_grad(g, x);
  uj_program_desc_t d;
  memset(&d, 0, sizeof d);
  d.input_count = 1, d.inputs = &x, d.output_count = 1, d.outputs = &y;
  uj_io_t ingrads[] = {gy, x};
  d.ingrad_count = 2, d.ingrads = ingrads, d.outgrad_count = 1, d.outgrads = &gx;
  uj_program_t* p = NULL;
  uj_status_t s = uj_program_new(g, &d, &p);
  int64_t n = 4;
  uj_tensor_t tx = or_tensor(UJ_BF16, 1, &n), tg = or_tensor(UJ_BF16, 1, &n), tgx = or_tensor(UJ_BF16, 1, &n);
  if (s == UJ_OK) { /* built lazily: the backward pass is refused where it is built */
    uj_ctx_t* ctx = uj_ctx_new();
    const uj_tensor_t* in[] = {&tg, &tx};
    uj_tensor_t* out[] = {&tgx};
    s = uj_program_run(ctx, p, UJ_BACKWARD, in, 2, NULL, 0, out, 1);
    uj_ctx_free(ctx);
  }
  CHECK(s == UJ_ERR_UNSUPPORTED);
  CHECK(strstr(uj_last_error(), "bf16") != NULL);
  uj_program_free(p);
  uj_graph_free(g);
  or_tensor_free(&tx), or_tensor_free(&tg), or_tensor_free(&tgx);
  /* a declared bf16 input given an f16 tensor */
  uj_program_t* q = parse("x: bf16\ny = x * 2");
  uj_tensor_t h = or_tensor(UJ_F16, 1, &n), o = or_tensor(UJ_BF16, 1, &n);
  const uj_tensor_t* in[] = {&h};
  uj_tensor_t* out[] = {&o};
  uj_ctx_t* ctx = uj_ctx_new();
  CHECK(uj_program_run(ctx, q, UJ_FORWARD, in, 1, NULL, 0, out, 1) == UJ_ERR_INVALID);
  uj_ctx_free(ctx);
  uj_program_free(q);
  or_tensor_free(&h), or_tensor_free(&o);
  CHECK(uj_dtype_size(UJ_BF16) == 2 && uj_dtype_size(UJ_F16) == 2);
  /* the library's own tensors: 2 bytes an element, copied bit for bit */
  uj_ctx_t* c2 = uj_ctx_new();
  int64_t three = 3;
  uj_tensor_t a, b;
  CHECK(uj_tensor_alloc(c2, UJ_CPU, UJ_F16, 1, &three, &a) == UJ_OK);
  CHECK(uj_tensor_alloc(c2, UJ_CPU, UJ_F16, 1, &three, &b) == UJ_OK);
  uint16_t bits[3] = {0x7bff, 0x0001, 0xfe00};
  memcpy(a.data, bits, sizeof bits);
  CHECK(uj_tensor_copy(c2, &b, &a) == UJ_OK && !memcmp(b.data, bits, sizeof bits));
  b.dtype = UJ_BF16;
  CHECK(uj_tensor_copy(c2, &b, &a) == UJ_ERR_INVALID);
  b.dtype = UJ_F16;
  uj_tensor_free(c2, &a), uj_tensor_free(c2, &b);
  uj_ctx_free(c2);
  /* the API's conversions are the stores' */
  CHECK(uj_half_from_f64(UJ_F16, 65519.0) == 0x7bff && uj_half_from_f64(UJ_F16, 65520.0) == 0x7c00);
  CHECK(uj_half_to_f64(UJ_BF16, 0x3f80) == 1.0 && isnan(uj_half_to_f64(UJ_F32, 0)));
  CHECK(!strcmp(uj_dtype_name(UJ_BF16), "bf16") && !strcmp(uj_dtype_name(UJ_F16), "f16"));
}

TEST_MAIN()
