/* tests/diff_check.h: the checking half of the differential test
 * (tests/test_differential.c): input values with the special cases in
 * them, the engines compared with the interpreter, and the comparison
 * itself.
 *
 * Engines: the interpreter with the passes on is the reference; the
 * interpreter on the IR as emitted (passes off), MIR, C and, where there
 * is a GPU, CUDA are compared with it. Each keeps one context for the whole
 * run. Every program is also compiled with NVRTC for sm_90 where NVRTC is
 * present (oracle.h's or_cuda_compile_), GPU or not.
 *
 * Comparison: every output carries an error budget in units of f32's
 * epsilon (2^-23) that the generator works out from the ops on its path
 * (df_out_t.ulps). A budget of 0 means the CPU engines must agree with the
 * interpreter bit for bit: the same bits, a zero's sign included, or NaN
 * for NaN (payloads aside). Otherwise |got - ref| <= ulps * (2^-23 |ref| +
 * 2^-149) (relative, with room for results in the subnormal range), NaN
 * only with NaN, an infinity with the same infinity or, past rounding at
 * the edge of f32's range, with a value of magnitude >= FLT_MAX (1 -
 * budget). i32 is always exact. A bf16 or f16 output with a budget may be
 * one unit of its format away (the neighbouring value, ordered by sign and
 * magnitude: +0 and -0 count as one, and the largest finite value and the
 * infinity are neighbours): results within the budget on either side of a
 * rounding boundary round apart. The CUDA and MIR engines are held to the
 * same, except for outputs downstream of a reduction (df_out_t.reordered):
 * CUDA splits a reduction across threads, MIR adds into four partial sums
 * (from four terms on), both in another order than the interpreter's, and
 * a budget for that order does not survive the ops after it (a difference
 * of rounding raised to a power), so those outputs are not compared there;
 * the reductions themselves are checked with the length-aware bound in
 * test_engines_reduce and test_uops_reduce. The C engine's lanes start at
 * 32 terms, more than these shapes have: it stays exact here. */
#ifndef UJ_TESTS_DIFF_CHECK_H
#define UJ_TESTS_DIFF_CHECK_H

#include <float.h>

#include "oracle.h"

#define DF_MAX_IO 64

typedef struct {
  const char* name;
  uj_engine_t engine;
  int passes;
} df_engine_t;
static const df_engine_t df_engines[] = {{"interp", UJ_ENGINE_INTERP, 1},
                                         {"interp-raw", UJ_ENGINE_INTERP, 0},
                                         {"mir", UJ_ENGINE_MIR, 1},
                                         {"c", UJ_ENGINE_C, 1},
                                         {"cuda", UJ_ENGINE_CUDA, 1}};
#define DF_NENGINES ((int)(sizeof df_engines / sizeof df_engines[0]))

static uj_ctx_t* df_ctx_cache[DF_NENGINES];
static int df_ctx_tried[DF_NENGINES];

static void df_ctx_release(void) {
  for (int i = 0; i < DF_NENGINES; i++) uj_ctx_free(df_ctx_cache[i]), df_ctx_cache[i] = NULL;
}

/* The context of engine slot i, or NULL when that engine is not available
 * here (said once on stderr). */
static inline uj_ctx_t* df_ctx(int i) {
  if (df_ctx_tried[i]) return df_ctx_cache[i];
  df_ctx_tried[i] = 1;
  if (i == 0) atexit(df_ctx_release);
  if (!or_engine_available(df_engines[i].engine)) {
    fprintf(stderr, "engine %s unavailable: not compared\n", df_engines[i].name);
    return NULL;
  }
  uj_ctx_t* c = uj_ctx_new();
  if (c && (uj_ctx_set_engine(c, df_engines[i].engine) != UJ_OK || uj_ctx_set_passes(c, df_engines[i].passes) != UJ_OK)) {
    fprintf(stderr, "cannot configure %s: %s\n", df_engines[i].name, uj_last_error());
    uj_ctx_free(c);
    c = NULL;
  }
  return df_ctx_cache[i] = c;
}

/* ---- values ------------------------------------------------------------------------- */

/* Float values every input draws from about a third of the time: zeros of
 * both signs, infinities, NaN, the smallest subnormal, the normal range's
 * edges, values near exp's overflow and underflow, values beyond f32's
 * range (for f64 inputs: a cast to f32 makes them infinite), and for
 * stores to bf16 and f16 ties between two of their values (to the even one
 * below and above), f16's overflow point 65520 and the value below it. */
static const double df_specials[] = {0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 3.0, INFINITY, -INFINITY, NAN,
                                     1.4e-45, -1.4e-45, 1e-40, -3e-39, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX,
                                     88.0, 88.7, -87.3, -103.0, 1e30, -1e-30, 2147483647.0, -2147483648.0,
                                     4e38, -1e300, 1e-310, DBL_MAX, DBL_MIN,
                                     1 + 0x1p-8, -(1 + 0x3p-8), 1 + 0x1p-11, -(1 + 0x3p-11), 65520.0, 65519.0};
#define DF_NSPECIALS ((int)(sizeof df_specials / sizeof df_specials[0]))
static const int32_t df_int_specials[] = {0, 1, -1, 2, -2, 7, INT32_MAX, INT32_MIN, INT32_MAX - 1, INT32_MIN + 1,
                                          65536, -65536, 46341};
#define DF_NINT_SPECIALS ((int)(sizeof df_int_specials / sizeof df_int_specials[0]))

static inline double df_float_value(uint64_t* st, uj_dtype_t dt) {
  int kind = (int)harness_int(st, 0, 99);
  if (kind < 30) return df_specials[harness_int(st, 0, DF_NSPECIALS - 1)];
  double sign = harness_int(st, 0, 1) ? -1.0 : 1.0;
  if (kind < 45) { /* any magnitude the dtype holds, subnormals included */
    double lo = dt == UJ_F64 ? -320 : dt == UJ_F16 ? -8.5 : -45, hi = dt == UJ_F64 ? 308 : dt == UJ_F16 ? 4.9 : 38.5;
    return sign * pow(10.0, harness_real(st, lo, hi));
  }
  if (kind < 65) return (double)harness_int(st, -64, 64) / 8.0; /* dyadic: ties, exact sums */
  return harness_real(st, -4.0, 4.0);
}

static inline void df_fill(uint64_t* st, uj_tensor_t* t) {
  int64_t n = or_tnumel(t);
  for (int64_t i = 0; i < n; i++) {
    if (t->dtype == UJ_I32) {
      int32_t v = harness_int(st, 0, 3) == 0 ? df_int_specials[harness_int(st, 0, DF_NINT_SPECIALS - 1)]
                                             : (int32_t)harness_int(st, -20, 20);
      ((int32_t*)t->data)[i] = v;
    } else {
      or_set(t, i, df_float_value(st, t->dtype));
    }
  }
}

/* ---- comparing ------------------------------------------------------------------------ */

/* What the generator knows about one output. */
typedef struct {
  int ulps;      /* error budget in units of 2^-23; 0: bit-exact */
  int reordered; /* a reduction on its path (the CUDA engine sums in another order) */
} df_out_t;

/* The position of a half's bits on the line of its values: neighbours
 * differ by one, and both zeros are 0. */
static inline int df_half_position(uj_dtype_t dt, double v) {
  uint16_t bits = hr_encode(dt, v); /* exact: v is a value of the format */
  return (bits & 0x8000u) ? -(int)(bits & 0x7fffu) : (int)(bits & 0x7fffu);
}

/* 1 when got agrees with ref under a budget of ulps (see the top). */
static inline int df_agree(double got, double ref, int ulps, uj_dtype_t dt) {
  if (dt == UJ_I32) return got == ref;
  if (isnan(got) || isnan(ref)) return isnan(got) && isnan(ref);
  if (ulps == 0) return got == ref && signbit(got) == signbit(ref);
  if (hr_is_half(dt)) return abs(df_half_position(dt, got) - df_half_position(dt, ref)) <= 1;
  double rel = ulps * 0x1p-23;
  if (isinf(got) || isinf(ref)) {
    if (isinf(got) && isinf(ref)) return got == ref;
    double finite = isinf(got) ? ref : got, inf = isinf(got) ? got : ref;
    return signbit(finite) == signbit(inf) && fabs(finite) >= FLT_MAX * (1 - rel);
  }
  return fabs(got - ref) <= rel * fabs(ref) + ulps * 0x1p-149;
}

/* The first element where got and ref disagree, or -1. */
static inline int64_t df_first_mismatch(const uj_tensor_t* got, const uj_tensor_t* ref, int ulps) {
  int64_t n = or_tnumel(ref);
  for (int64_t i = 0; i < n; i++)
    if (!df_agree(or_get(got, i), or_get(ref, i), ulps, ref->dtype)) return i;
  return -1;
}

/* ---- running a program on every engine -------------------------------------------------- */

/* What was compared, per engine slot: elements held bit-exact, elements
 * held to a budget, of those in bf16/f16, and outputs the CUDA engine was
 * not compared on. */
static int64_t df_exact_elements[DF_NENGINES], df_budget_elements[DF_NENGINES], df_half_elements[DF_NENGINES],
    df_skipped_outputs[DF_NENGINES];

/* "mir 1234 (1000 exact), c ..." for the engines that ran. */
static inline void df_stats_line(char* buf, size_t cap) {
  size_t n = 0;
  buf[0] = '\0';
  for (int e = 1; e < DF_NENGINES; e++) {
    if (!df_ctx(e) || n >= cap) continue;
    n += (size_t)snprintf(buf + n, cap - n, "%s%s %lld (%lld bit-exact, %lld bf16/f16)", n ? ", " : "",
                          df_engines[e].name, (long long)(df_exact_elements[e] + df_budget_elements[e]),
                          (long long)df_exact_elements[e], (long long)df_half_elements[e]);
    if (df_skipped_outputs[e] && n < cap)
      n += (size_t)snprintf(buf + n, cap - n, ", %lld outputs after a reduction not compared",
                            (long long)df_skipped_outputs[e]);
  }
}

/* One program to check: inputs, params, and per output its name for
 * messages and what the generator knows of it. */
typedef struct {
  uj_program_t* p;
  int nin, nout, nparams;
  const uj_tensor_t* in[DF_MAX_IO];
  int64_t params[4];
  df_out_t out[DF_MAX_IO];
  char out_name[DF_MAX_IO][32];
} df_case_t;

static inline void df_free_outputs(uj_tensor_t* outs, int n) {
  for (int o = 0; o < n; o++) or_tensor_free(&outs[o]);
}

/* Outputs in the shapes and dtypes the program gives them, NaN- or
 * sentinel-filled (so that an element an engine leaves unwritten shows). */
static inline uj_status_t df_alloc_outputs(const df_case_t* c, uj_tensor_t* outs) {
  for (int o = 0; o < c->nout; o++) {
    int ndim = 0;
    int64_t dims[UJ_MAX_DIMS] = {0};
    uj_dtype_t dt = UJ_F32;
    uj_status_t s = uj_program_shape(c->p, UJ_FORWARD, c->in, c->params, o, &ndim, dims);
    if (s == UJ_OK) s = uj_program_output_dtype(c->p, UJ_FORWARD, c->in, o, &dt);
    if (s != UJ_OK) {
      df_free_outputs(outs, o);
      return s;
    }
    outs[o] = or_tensor(dt, ndim, dims);
    or_fill_sentinel(&outs[o]);
  }
  return UJ_OK;
}

/* Set by a test for the cases that the C engine sits out (its sample:
 * the compiles cost most of a run). */
static int df_c_off;

/* Runs c on the interpreter, then on every other available engine (C not
 * while df_c_off is set), and compares. On a failure calls report(what, ctx) (which prints the program
 * and how to reproduce it) and returns 0. */
typedef void (*df_report_fn)(const char* what, void* ctx);

static inline int df_check_case(const df_case_t* c, df_report_fn report, void* report_ctx) {
  char msg[1024];
  uj_tensor_t ref[DF_MAX_IO], got[DF_MAX_IO];
  uj_tensor_t* refp[DF_MAX_IO];
  uj_tensor_t* gotp[DF_MAX_IO];
  uj_status_t s = df_alloc_outputs(c, ref);
  if (s == UJ_OK) {
    for (int o = 0; o < c->nout; o++) refp[o] = &ref[o];
    s = uj_program_run(df_ctx(0), c->p, UJ_FORWARD, c->in, c->nin, c->params, c->nparams, refp, c->nout);
  }
  if (s != UJ_OK) {
    snprintf(msg, sizeof msg, "the interpreter refused the program: %s: %s", uj_status_str(s), uj_last_error());
    report(msg, report_ctx);
    return 0;
  }
  int ok = or_cuda_compile_(__FILE__, __LINE__, c->p, UJ_FORWARD, c->in, c->nin, c->params, c->nparams) == 0;
  if (!ok) report("NVRTC failed to compile the program's CUDA source (above)", report_ctx);
  for (int e = 1; e < DF_NENGINES; e++) { /* every engine, so that a failure says which ones disagree */
    uj_ctx_t* ctx = df_ctx(e);
    if (!ctx || (df_c_off && df_engines[e].engine == UJ_ENGINE_C)) continue;
    if ((s = df_alloc_outputs(c, got)) != UJ_OK) {
      snprintf(msg, sizeof msg, "output shapes for %s: %s: %s", df_engines[e].name, uj_status_str(s), uj_last_error());
      report(msg, report_ctx);
      ok = 0;
      continue;
    }
    for (int o = 0; o < c->nout; o++) gotp[o] = &got[o];
    s = or_run_staged(ctx, c->p, UJ_FORWARD, c->in, c->nin, c->params, c->nparams, gotp, c->nout);
    if (s != UJ_OK) {
      snprintf(msg, sizeof msg, "engine %s failed: %s: %s", df_engines[e].name, uj_status_str(s), uj_last_error());
      report(msg, report_ctx);
      ok = 0;
    }
    for (int o = 0; o < c->nout && s == UJ_OK; o++) {
      if ((df_engines[e].engine == UJ_ENGINE_CUDA || df_engines[e].engine == UJ_ENGINE_MIR) && c->out[o].reordered) {
        df_skipped_outputs[e]++;
        continue;
      }
      int64_t i = df_first_mismatch(&got[o], &ref[o], c->out[o].ulps);
      if (i < 0) {
        int exact = c->out[o].ulps == 0 || ref[o].dtype == UJ_I32;
        (exact ? df_exact_elements : df_budget_elements)[e] += or_tnumel(&ref[o]);
        if (hr_is_half(ref[o].dtype)) df_half_elements[e] += or_tnumel(&ref[o]);
        continue;
      }
      char shape[128];
      or_shape_str(shape, sizeof shape, &ref[o]);
      snprintf(msg, sizeof msg, "engine %s, output %s %s element %lld: got %.9g, interpreter %.9g (budget %d ulps)",
               df_engines[e].name, c->out_name[o], shape, (long long)i, or_get(&got[o], i), or_get(&ref[o], i),
               c->out[o].ulps);
      report(msg, report_ctx);
      ok = 0;
      break; /* the first output that disagrees on this engine */
    }
    df_free_outputs(got, c->nout);
  }
  df_free_outputs(ref, c->nout);
  return ok;
}

#endif
