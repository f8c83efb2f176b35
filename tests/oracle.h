/* tests/oracle.h: helpers shared by the oracle tests (test_uops*.c) and the
 * error-path tests: tensors backed by malloc'ed buffers, random fills,
 * sentinel fills, element access in double, a run-and-compare loop over the
 * engine configurations under test, and the naive NHWC convolution with its uop graph.
 *
 * Everything goes through the public API only. References are computed in
 * double from the values actually stored in the input buffers (so f32
 * rounding of the inputs is not counted as error). bf16 and f16 elements
 * are read and written through tests/half_ref.h, the tests' own
 * conversions. */
#ifndef UJ_TESTS_ORACLE_H
#define UJ_TESTS_ORACLE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/uopjit.h"
#include "half_ref.h"
#include "harness.h"
#include "nvrtc_check.h"

/* The configurations every oracle test runs on: the reference interpreter,
 * each CPU JIT engine (C, MIR), the interpreter on the IR as emitted
 * (passes off), so that a pass that changes a result shows up as a mismatch,
 * and the CUDA engine where there is a GPU (its runs go through GPU copies
 * of the tensors: or_run_staged).
 *
 * Besides, every program these helpers run is compiled for the GPU with
 * NVRTC for sm_90 (or_cuda_compile), GPU or not, so that a machine without
 * one still proves that every generated kernel compiles.
 *
 * A configuration whose engine is not available in this build or on this
 * machine (uj_engine_available == 0) is left out, with a one-time message on
 * stderr ("engine mir unavailable: skipping its configuration"); it is not a
 * failure. or_configs[] and OR_NENGINES name only the configurations kept,
 * so a loop over slots 0..OR_NENGINES-1 runs exactly the available ones and
 * picks up an engine as soon as it reports itself available. The raw-IR
 * configuration comes before MIR so that fixed slots 0..2 (interp, c,
 * interp-raw) keep their meaning whether or not MIR is there. */
typedef struct {
  uj_engine_t engine;
  int passes;
  const char* name;
} or_config_t;
static const or_config_t or_all_configs[] = {{UJ_ENGINE_INTERP, 1, "interp"},
                                             {UJ_ENGINE_C, 1, "c"},
                                             {UJ_ENGINE_INTERP, 0, "interp-raw"},
                                             {UJ_ENGINE_MIR, 1, "mir"},
                                             {UJ_ENGINE_CUDA, 1, "cuda"}};
#define OR_NCONFIGS_ALL ((int)(sizeof or_all_configs / sizeof or_all_configs[0]))

/* The available configurations, in or_all_configs order; entries past the
 * count stay {INTERP, passes on, "none"} so a stray slot reads something sane. */
static or_config_t or_active_configs_[OR_NCONFIGS_ALL];
static int or_active_count_ = -1;

/* 1 when engine e is available (asked of a throwaway context, so that the
 * answer does not depend on any configuration's context). */
static inline int or_engine_available(uj_engine_t e) {
  if (e == UJ_ENGINE_INTERP || e == UJ_ENGINE_AUTO) return 1;
  uj_ctx_t* c = uj_ctx_new();
  int ok = c && uj_engine_available(c, e);
  uj_ctx_free(c);
  return ok;
}

static inline void or_configs_init_(void) {
  if (or_active_count_ >= 0) return;
  int n = 0;
  for (int i = 0; i < OR_NCONFIGS_ALL; i++) {
    const or_config_t* c = &or_all_configs[i];
    if (or_engine_available(c->engine)) {
      or_active_configs_[n++] = *c;
    } else {
      int first = 1; /* one message per engine, even if it had several configurations */
      for (int j = 0; j < i; j++) first &= or_all_configs[j].engine != c->engine;
      if (first) fprintf(stderr, "engine %s unavailable: skipping its configuration\n", uj_engine_name(c->engine));
    }
  }
  for (int i = n; i < OR_NCONFIGS_ALL; i++) or_active_configs_[i] = (or_config_t){UJ_ENGINE_INTERP, 1, "none"};
  or_active_count_ = n;
}
/* Decided before main, so that test files which fork per case (or call
 * or_configs in children) still print the skip message once per binary. */
__attribute__((constructor)) static void or_configs_at_start_(void) { or_configs_init_(); }
static inline const or_config_t* or_configs_get_(void) {
  or_configs_init_();
  return or_active_configs_;
}
static inline int or_nengines_(void) {
  or_configs_init_();
  return or_active_count_;
}
#define or_configs (or_configs_get_())
#define OR_NENGINES (or_nengines_())

/* The C engine compiles each kernel with the system compiler, a tenth of a
 * second or more apiece, which made most of a cold make test's time in the
 * checks that run hundreds of cases (gradients, every uop, random
 * programs, the language's constructs). Those run the C engine on a sample
 * of their cases: each test binary's first OR_C_FIRST, then one in
 * UJ_TEST_C_EVERY (default 8; 1 runs C on every case). The interpreter and
 * MIR run every case, and the C engine's own tests (test_engines*,
 * test_math_ops, test_c_*) every one of theirs. Call once per case: 1 when
 * this case runs on C. */
enum { OR_C_FIRST = 4, OR_C_EVERY_DEFAULT = 8 };
static inline int or_c_every(void) {
  static int every = 0;
  if (every == 0) {
    const char* v = getenv("UJ_TEST_C_EVERY");
    every = v && atoi(v) >= 1 ? atoi(v) : OR_C_EVERY_DEFAULT;
  }
  return every;
}
static inline int or_c_case(void) {
  static long cases = 0;
  long n = cases++;
  return n < OR_C_FIRST || n % or_c_every() == 0;
}

/* The engine slot after `slot` for a case, the C engine left out where
 * on_c (or_c_case) is 0; OR_NENGINES past the last. */
static inline int or_next_engine_(int slot, int on_c) {
  do slot++;
  while (slot < OR_NENGINES && or_configs[slot].engine == UJ_ENGINE_C && !on_c);
  return slot;
}
/* for (each engine slot e of one case): OR_FOR_ENGINES(e) { ... }, the C
 * engine in the loop only where the case is in its sample (or_c_case). */
#define OR_FOR_ENGINES(e)                                                   \
  for (int e##_on_c_ = or_c_case(), e = or_next_engine_(-1, e##_on_c_); e < OR_NENGINES; \
       e = or_next_engine_(e, e##_on_c_))

#define OR_TOL_F32 1e-5
#define OR_TOL_F32_SUM 5e-5 /* accumulations of many f32 terms; a fixed bound: see or_sum_gamma for one that grows */
#define OR_TOL_F64 1e-12

/* A value no engine computes by accident; NaN for floats. */
#define OR_SENTINEL_I32 (-123456789)

/* A new context for configuration slot; NULL (with a message) on failure. */
static inline uj_ctx_t* or_ctx_new(int slot) {
  if (slot < 0 || slot >= OR_NENGINES) {
    fprintf(stderr, "  no configuration in slot %d (%d available)\n", slot, OR_NENGINES);
    return NULL;
  }
  uj_ctx_t* c = uj_ctx_new();
  if (!c) return NULL;
  if (uj_ctx_set_engine(c, or_configs[slot].engine) != UJ_OK ||
      uj_ctx_set_passes(c, or_configs[slot].passes) != UJ_OK) {
    fprintf(stderr, "  cannot configure %s: %s\n", or_configs[slot].name, uj_last_error());
    uj_ctx_free(c);
    return NULL;
  }
  return c;
}

/* One context per configuration, kept for the whole run so kernel caches are reused. */
static uj_ctx_t* or_ctx_cache[OR_NCONFIGS_ALL];
static void or_ctx_release(void) {
  for (int i = 0; i < OR_NCONFIGS_ALL; i++) uj_ctx_free(or_ctx_cache[i]), or_ctx_cache[i] = NULL;
}
static inline uj_ctx_t* or_ctx(int slot) {
  static int registered;
  if (slot < 0 || slot >= OR_NENGINES) return or_ctx_new(slot); /* NULL, with the message */
  if (!registered) registered = 1, atexit(or_ctx_release);
  if (!or_ctx_cache[slot]) or_ctx_cache[slot] = or_ctx_new(slot);
  return or_ctx_cache[slot];
}

/* ---- tensors ------------------------------------------------------------------ */

static inline int64_t or_numel(int ndim, const int64_t* dims) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= dims[i];
  return n;
}
static inline size_t or_dsize(uj_dtype_t dt) { return dt == UJ_F64 ? 8 : hr_is_half(dt) ? 2 : 4; }

/* A CPU tensor with its own buffer (at least one element, so data is never NULL). */
static inline uj_tensor_t or_tensor(uj_dtype_t dt, int ndim, const int64_t* dims) {
  uj_tensor_t t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.device = UJ_CPU;
  t.ndim = ndim;
  for (int i = 0; i < ndim; i++) t.dims[i] = dims[i];
  int64_t n = or_numel(ndim, dims);
  t.data = calloc((size_t)(n > 0 ? n : 1), or_dsize(dt));
  return t;
}
static inline void or_tensor_free(uj_tensor_t* t) {
  free(t->data);
  t->data = NULL;
}
static inline int64_t or_tnumel(const uj_tensor_t* t) { return or_numel(t->ndim, t->dims); }

static inline double or_get(const uj_tensor_t* t, int64_t i) {
  switch (t->dtype) {
    case UJ_F32: return ((const float*)t->data)[i];
    case UJ_F64: return ((const double*)t->data)[i];
    case UJ_BF16:
    case UJ_F16: return hr_decode(t->dtype, ((const uint16_t*)t->data)[i]);
    default: return ((const int32_t*)t->data)[i];
  }
}
static inline void or_set(uj_tensor_t* t, int64_t i, double v) {
  switch (t->dtype) {
    case UJ_F32: ((float*)t->data)[i] = (float)v; break;
    case UJ_F64: ((double*)t->data)[i] = v; break;
    case UJ_BF16:
    case UJ_F16: ((uint16_t*)t->data)[i] = hr_encode(t->dtype, v); break;
    default: ((int32_t*)t->data)[i] = (int32_t)v; break;
  }
}
static inline void or_fill_real(uint64_t* st, uj_tensor_t* t, double lo, double hi) {
  int64_t n = or_tnumel(t);
  for (int64_t i = 0; i < n; i++) or_set(t, i, harness_real(st, lo, hi));
}
static inline void or_fill_int(uint64_t* st, uj_tensor_t* t, int64_t lo, int64_t hi) {
  int64_t n = or_tnumel(t);
  for (int64_t i = 0; i < n; i++) or_set(t, i, (double)harness_int(st, lo, hi));
}
static inline void or_fill_sentinel(uj_tensor_t* t) {
  int64_t n = or_tnumel(t);
  for (int64_t i = 0; i < n; i++) or_set(t, i, t->dtype == UJ_I32 ? OR_SENTINEL_I32 : NAN);
}
/* Reads the whole tensor into a new double array. */
static inline double* or_to_double(const uj_tensor_t* t) {
  int64_t n = or_tnumel(t);
  double* d = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; i++) d[i] = or_get(t, i);
  return d;
}
static inline double* or_alloc_ref(int64_t n) {
  return calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

/* Random shape: rank in [rlo, rhi], each size in [1, dmax]. Returns rank. */
static inline int or_rand_shape(uint64_t* st, int rlo, int rhi, int dmax, int64_t* dims) {
  int r = (int)harness_int(st, rlo, rhi);
  for (int i = 0; i < r; i++) dims[i] = harness_int(st, 1, dmax);
  return r;
}

/* Row-major unravel / ravel. */
static inline void or_unravel(int64_t flat, int ndim, const int64_t* dims, int64_t* idx) {
  for (int k = ndim - 1; k >= 0; k--) {
    idx[k] = flat % dims[k];
    flat /= dims[k];
  }
}
static inline int64_t or_ravel(int ndim, const int64_t* dims, const int64_t* idx) {
  int64_t f = 0;
  for (int k = 0; k < ndim; k++) f = f * dims[k] + idx[k];
  return f;
}

/* ---- running on the GPU ------------------------------------------------------------ */

#define OR_STAGE_MAX 32

static inline int or_same_tensor_shape(const uj_tensor_t* a, const uj_tensor_t* b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
  for (int k = 0; k < a->ndim; k++)
    if (a->dims[k] != b->dims[k]) return 0;
  return 1;
}

/* A host tensor the staging can copy: on the CPU, a sane shape, data
 * present. Anything else goes to the call as it is, for it to reject. */
static inline int or_stageable(const uj_tensor_t* h) {
  if (!h || h->device != UJ_CPU || h->ndim < 0 || h->ndim > UJ_MAX_DIMS || uj_dtype_size(h->dtype) == 0) return 0;
  for (int k = 0; k < h->ndim; k++)
    if (h->dims[k] < 0 || h->dims[k] > (INT64_C(1) << 40)) return 0;
  return h->data != NULL;
}

/* uj_program_run on ctx; when ctx runs the CUDA engine, through GPU copies
 * of the tensors: inputs copied over, outputs copied over too (so that
 * what a run leaves unwritten reads back unchanged) and back after a
 * successful run. Tensors given the same host buffer in the same shape
 * share one GPU copy, so in-place calls stay in place. */
static inline uj_status_t or_run_staged(uj_ctx_t* ctx, uj_program_t* p, uj_pass_t pass, const uj_tensor_t* const* in,
                                        int nin, const int64_t* params, int np, uj_tensor_t* const* outs, int nout) {
  if (!ctx || uj_ctx_engine(ctx) != UJ_ENGINE_CUDA || nin < 0 || nout < 0 || nin > OR_STAGE_MAX ||
      nout > OR_STAGE_MAX || (nin && !in) || (nout && !outs))
    return uj_program_run(ctx, p, pass, in, nin, params, np, outs, nout);
  int n = nin + nout;
  uj_tensor_t dev[2 * OR_STAGE_MAX];
  const uj_tensor_t* host[2 * OR_STAGE_MAX];
  int owner[2 * OR_STAGE_MAX]; /* the slot whose GPU copy this slot uses; -1: none, the host tensor goes */
  const uj_tensor_t* din[OR_STAGE_MAX] = {0};
  uj_tensor_t* dout[OR_STAGE_MAX] = {0};
  uj_status_t s = UJ_OK;
  for (int i = 0; i < n; i++) {
    host[i] = i < nin ? in[i] : outs[i - nin];
    owner[i] = or_stageable(host[i]) ? i : -1;
    memset(&dev[i], 0, sizeof dev[i]);
    for (int j = 0; owner[i] == i && j < i; j++)
      if (owner[j] == j && host[j]->data == host[i]->data && or_same_tensor_shape(host[j], host[i])) owner[i] = j;
    if (owner[i] != i) continue;
    if ((s = uj_tensor_alloc(ctx, UJ_CUDA, host[i]->dtype, host[i]->ndim, host[i]->dims, &dev[i])) != UJ_OK) break;
    if ((s = uj_tensor_copy(ctx, &dev[i], host[i])) != UJ_OK) break;
  }
  for (int i = 0; s == UJ_OK && i < n; i++) {
    const uj_tensor_t* t = owner[i] < 0 ? host[i] : &dev[owner[i]];
    if (i < nin) din[i] = t;
    else dout[i - nin] = (uj_tensor_t*)t;
  }
  if (s == UJ_OK) s = uj_program_run(ctx, p, pass, din, nin, params, np, dout, nout);
  if (s == UJ_OK) s = uj_ctx_synchronize(ctx);
  for (int i = nin; s == UJ_OK && i < n; i++)
    if (owner[i] >= 0) s = uj_tensor_copy(ctx, outs[i - nin], &dev[owner[i]]);
  for (int i = 0; i < n; i++)
    if (owner[i] == i) uj_tensor_free(ctx, &dev[i]); /* succeeds without touching the last error */
  return s;
}

/* Runs on configuration slot (staged through the GPU for the cuda one);
 * the reference slot 0 also compiles the program for the GPU. */
static inline uj_status_t or_program_run(int slot, uj_program_t* p, uj_pass_t pass, const uj_tensor_t* const* in,
                                         int nin, const int64_t* params, int np, uj_tensor_t* const* outs, int nout) {
  uj_ctx_t* ctx = or_ctx(slot);
  uj_status_t s = or_run_staged(ctx, p, pass, in, nin, params, np, outs, nout);
  if (slot == 0 && s == UJ_OK) OR_CUDA_COMPILE(p, pass, in, nin, params, np);
  return s;
}

/* ---- comparing ------------------------------------------------------------------- */

/* The first element where got differs from ref by more than
 * tol * max(1, |ref|) (both NaN, or equal infinities, count as equal), or -1. */
static inline int64_t or_first_mismatch(const double* ref, const uj_tensor_t* got, double tol) {
  int64_t n = or_tnumel(got);
  for (int64_t i = 0; i < n; i++) {
    double a = or_get(got, i), b = ref[i];
    if ((isnan(a) && isnan(b)) || a == b) continue; /* equal infinities too */
    double s = fabs(b) > 1.0 ? fabs(b) : 1.0;
    if (!(fabs(a - b) <= tol * s)) return i;
  }
  return -1;
}

/* ---- reductions ------------------------------------------------------------------- */

/* The unit roundoff of the sums of dt: 2^-24 (f32, and bf16 and f16,
 * which are summed in f32), 2^-53 (f64); 0 for i32, whose sums are exact
 * (or wrap, which no bound describes). */
static inline double or_unit_roundoff(uj_dtype_t dt) {
  return dt == UJ_F32 || hr_is_half(dt) ? 0x1p-24 : dt == UJ_F64 ? 0x1p-53 : 0;
}

/* Higham's gamma_n = n u / (1 - n u) for dtype dt (Accuracy and Stability
 * of Numerical Algorithms, 3.1, 4.2): a sum of n terms computed in dt in
 * any order (one after the other, pairwise, in blocks, over threads) is
 * within gamma_{n-1} * sum |terms| of the exact sum of the terms; a mean
 * divides both sides by n. n counts the terms of one output element. It
 * is INFINITY once n u >= 1 (2^24 terms in f32), where the worst case says
 * nothing; 0 for n <= 1. */
static inline double or_sum_gamma(int64_t n, uj_dtype_t dt) {
  double nu = (double)n * or_unit_roundoff(dt);
  return n <= 1 ? 0 : nu < 1 ? nu / (1 - nu) : INFINITY;
}

/* The bound on element i of a reduction of `terms` terms per element:
 * tol * max(1, |ref|) for the rounding of the terms and what follows the
 * sum, plus gamma_terms * sum_abs[i], where sum_abs[i] is the sum (for a
 * mean, the mean) of the absolute values of the terms of element i,
 * computed in double from the reduced operand. */
static inline double or_sum_bound(double ref, double sum_abs, int64_t terms, uj_dtype_t dt, double tol) {
  return tol * (fabs(ref) > 1.0 ? fabs(ref) : 1.0) + or_sum_gamma(terms, dt) * sum_abs;
}

/* The first element where got differs from ref by more than or_sum_bound
 * (both NaN, or equal infinities, agree), or -1. */
static inline int64_t or_first_mismatch_sum(const double* ref, const double* sum_abs, int64_t terms,
                                            const uj_tensor_t* got, double tol) {
  int64_t n = or_tnumel(got);
  for (int64_t i = 0; i < n; i++) {
    double a = or_get(got, i), b = ref[i];
    if ((isnan(a) && isnan(b)) || a == b) continue;
    if (!(fabs(a - b) <= or_sum_bound(b, sum_abs[i], terms, got->dtype, tol))) return i;
  }
  return -1;
}

/* Largest relative error (relative to max(1, |ref|)). */
static inline double or_max_rel_err(const double* ref, const uj_tensor_t* got) {
  double m = 0;
  int64_t n = or_tnumel(got);
  for (int64_t i = 0; i < n; i++) {
    double a = or_get(got, i), b = ref[i];
    if ((isnan(a) && isnan(b)) || a == b) continue;
    double s = fabs(b) > 1.0 ? fabs(b) : 1.0;
    double e = fabs(a - b) / s;
    if (isnan(e)) e = INFINITY;
    if (e > m) m = e;
  }
  return m;
}

static inline void or_shape_str(char* buf, size_t cap, const uj_tensor_t* t) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < t->ndim && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)t->dims[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* Runs p forward on every engine under test, outputs filled with the
 * sentinel first, and compares each output with its reference: within
 * tol * max(1, |ref|), or, where sum_abs is given and sum_abs[k] is not
 * NULL, output k as a reduction of terms[k] terms per element
 * (or_sum_bound; the message names the bound). Returns the number of
 * engines on which it failed. */
static inline int or_run_check_bounded_(const char* file, int line, uj_program_t* p, const uj_tensor_t* const* in,
                                        int nin, const int64_t* params, int np, uj_tensor_t* const* outs,
                                        const double* const* refs, const double* const* sum_abs,
                                        const int64_t* terms, int nout, double tol) {
  int bad = 0;
  if (!p) {
    harness_fail(file, line, "no program to run");
    return OR_NENGINES;
  }
  OR_FOR_ENGINES(e) {
    char msg[512];
    uj_ctx_t* ctx = or_ctx(e);
    if (!ctx) {
      harness_fail(file, line, "no context");
      bad++;
      continue;
    }
    for (int k = 0; k < nout; k++) or_fill_sentinel(outs[k]);
    uj_status_t s = or_run_staged(ctx, p, UJ_FORWARD, in, nin, params, np, outs, nout);
    if (s != UJ_OK) {
      snprintf(msg, sizeof msg, "engine %s: run failed: %s: %s", or_configs[e].name,
               uj_status_str(s), uj_last_error());
      harness_fail(file, line, msg);
      bad++;
      continue;
    }
    for (int k = 0; k < nout; k++) {
      int reduction = sum_abs && sum_abs[k];
      int64_t i = reduction ? or_first_mismatch_sum(refs[k], sum_abs[k], terms[k], outs[k], tol)
                            : or_first_mismatch(refs[k], outs[k], tol);
      if (i >= 0) {
        char shp[128], bound[160] = "";
        or_shape_str(shp, sizeof shp, outs[k]);
        if (reduction)
          snprintf(bound, sizeof bound, " + gamma_n*sum|terms| = %.3g, n = %lld terms, gamma_n %.3g, sum|terms| %.6g",
                   or_sum_bound(refs[k][i], sum_abs[k][i], terms[k], outs[k]->dtype, tol), (long long)terms[k],
                   or_sum_gamma(terms[k], outs[k]->dtype), sum_abs[k][i]);
        snprintf(msg, sizeof msg,
                 "engine %s: output %d %s element %lld: got %.17g, want %.17g (bound %g*max(1,|ref|)%s; max rel "
                 "err %g)",
                 or_configs[e].name, k, shp, (long long)i, or_get(outs[k], i), refs[k][i], tol, bound,
                 or_max_rel_err(refs[k], outs[k]));
        harness_fail(file, line, msg);
        bad++;
        break;
      }
    }
  }
  return bad + or_cuda_compile_(file, line, p, UJ_FORWARD, in, nin, params, np);
}
static inline int or_run_check_(const char* file, int line, uj_program_t* p, const uj_tensor_t* const* in, int nin,
                                const int64_t* params, int np, uj_tensor_t* const* outs, const double* const* refs,
                                int nout, double tol) {
  return or_run_check_bounded_(file, line, p, in, nin, params, np, outs, refs, NULL, NULL, nout, tol);
}
#define OR_RUN_CHECK(p, in, nin, params, np, outs, refs, nout, tol) \
  or_run_check_(__FILE__, __LINE__, (p), (in), (nin), (params), (np), (outs), (refs), (nout), (tol))
/* OR_RUN_CHECK with output k judged as a reduction of terms[k] terms per
 * element when sum_abs[k] (sum |terms| per element) is not NULL. */
#define OR_RUN_CHECK_SUM(p, in, nin, params, np, outs, refs, sum_abs, terms, nout, tol)                          \
  or_run_check_bounded_(__FILE__, __LINE__, (p), (in), (nin), (params), (np), (outs), (refs), (sum_abs), (terms), \
                        (nout), (tol))

/* Runs a one-input one-output program and compares; the number of engines
 * on which it failed. */
static inline int or_run_check1_(const char* file, int line, uj_program_t* p,
                                 const uj_tensor_t* tin, uj_tensor_t* tout, const double* ref,
                                 double tol) {
  const uj_tensor_t* in[] = {tin};
  uj_tensor_t* out[] = {tout};
  const double* refs[] = {ref};
  return or_run_check_(file, line, p, in, 1, NULL, 0, out, refs, 1, tol);
}
#define OR_RUN_CHECK1(p, tin, tout, ref, tol) \
  or_run_check1_(__FILE__, __LINE__, (p), (tin), (tout), (ref), (tol))

/* Builds a program; on failure reports the error and returns NULL. */
static inline uj_program_t* or_program_(const char* file, int line, uj_graph_t* g, int nin,
                                        const uj_io_t* ins, int np, const char* const* params,
                                        int nout, const uj_io_t* outs) {
  uj_program_desc_t d;
  memset(&d, 0, sizeof d);
  d.input_count = nin;
  d.inputs = ins;
  d.param_count = np;
  d.params = params;
  d.output_count = nout;
  d.outputs = outs;
  uj_program_t* p = NULL;
  uj_status_t s = uj_program_new(g, &d, &p);
  if (s != UJ_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "uj_program_new: %s: %s", uj_status_str(s), uj_last_error());
    harness_fail(file, line, msg);
    return NULL;
  }
  return p;
}
#define OR_PROGRAM(g, nin, ins, np, params, nout, outs) \
  or_program_(__FILE__, __LINE__, (g), (nin), (ins), (np), (params), (nout), (outs))

/* ---- convolution ------------------------------------------------------------------ */

/* out[n,oh,ow,k] = sum_{r,s,c} x[n, oh*stride+r-pad, ow*stride+s-pad, c] * w[k,r,s,c],
 * reads outside x give 0. x [N,H,W,C], w [K,KH,KW,C], out [N,OH,OW,K] with
 * OH = (H + 2 pad - KH) / stride + 1. */
static inline void or_conv2d_nhwc(const uj_tensor_t* x, const uj_tensor_t* w, int stride, int pad,
                                  double* out, int64_t* odims) {
  int64_t N = x->dims[0], H = x->dims[1], W = x->dims[2], C = x->dims[3];
  int64_t K = w->dims[0], KH = w->dims[1], KW = w->dims[2];
  int64_t OH = (H + 2 * pad - KH) / stride + 1, OW = (W + 2 * pad - KW) / stride + 1;
  odims[0] = N, odims[1] = OH, odims[2] = OW, odims[3] = K;
  for (int64_t n = 0; n < N; n++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++)
        for (int64_t k = 0; k < K; k++) {
          double acc = 0;
          for (int64_t r = 0; r < KH; r++)
            for (int64_t s = 0; s < KW; s++) {
              int64_t ih = oh * stride + r - pad, iw = ow * stride + s - pad;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              for (int64_t c = 0; c < C; c++)
                acc += or_get(x, ((n * H + ih) * W + iw) * C + c) *
                       or_get(w, ((k * KH + r) * KW + s) * C + c);
            }
          out[((n * OH + oh) * OW + ow) * K + k] = acc;
        }
}

typedef enum {
  OR_CONV_DIMS,    /* sizes from the filter's dims, C tied by [=] */
  OR_CONV_PARAMS,  /* filter sizes as $kh, $kw */
  OR_CONV_PAD,     /* zero padding $pad through out-of-range reads */
  OR_CONV_PAD1,    /* zero padding of a literal 1 */
  OR_CONV_STRIDE2, /* stride 2 through index arithmetic */
  OR_CONV_S2_PAD   /* stride 2 and zero padding $pad together */
} or_conv_kind_t;

/* The conv graph: x [N,H,W,C], w [K,KH,KW,C] of dtype dt. Returns the
 * 4-D output node, or a negative id. */
static inline uj_io_t or_conv_graph(uj_graph_t* g, or_conv_kind_t kind, uj_dtype_t dt,
                                    uj_io_t* xo, uj_io_t* wo) {
  static const char* const sh_dims[] = {"dA0", "dA1-dB1+1", "dA2-dB2+1", "dB0",
                                        "dB1", "dB2",       "dA3[=dB3]"};
  static const char* const sh_params[] = {"dA0", "dA1-$kh+1", "dA2-$kw+1", "dB0",
                                          "$kh", "$kw",       "dA3"};
  static const char* const sh_pad[] = {"dA0", "dA1-dB1+1+2*$pad", "dA2-dB2+1+2*$pad", "dB0",
                                       "dB1", "dB2",              "dA3[=dB3]"};
  static const char* const sh_pad1[] = {"dA0", "dA1 - dB1 + 1 + 2", "dA2 - dB2 + 3", "dB0",
                                        "dB1", "dB2",               "dA3[=dB3]"};
  static const char* const sh_s2[] = {"dA0", "(dA1-dB1)/2+1", "(dA2-dB2)/2+1", "dB0",
                                      "dB1", "dB2",           "dA3[=dB3]"};
  static const char* const sh_s2p[] = {"dA0", "(dA1-dB1+2*$pad)/2+1", "(dA2-dB2+2*$pad)/2+1", "dB0",
                                       "dB1", "dB2",                  "dA3[=dB3]"};
  static const char* const ix_s2p[] = {"i0", "i1*2+i4-$pad", "i2*2+i5-$pad", "i6"};
  static const char* const ix_plain[] = {"i0", "i1+i4", "i2+i5", "i6"};
  static const char* const ix_pad[] = {"i0", "i1+i4-$pad", "i2+i5-$pad", "i6"};
  static const char* const ix_pad1[] = {"i0", "i1+i4-1", "i2+i5-1", "i6"};
  static const char* const ix_s2[] = {"i0", "i1*2+i4", "i2*2+i5", "i6"};
  static const char* const ix_w[] = {"i3", "i4", "i5", "i6"};
  static const char* const sh_out[] = {"dA0", "dA1", "dA2", "dA3"};
  static const char* const ix_out[] = {"i0", "i1", "i2", "i3", "0", "0", "0"};
  const char* const* shape = sh_dims;
  const char* const* xix = ix_plain;
  switch (kind) {
    case OR_CONV_DIMS: break;
    case OR_CONV_PARAMS: shape = sh_params; break;
    case OR_CONV_PAD: shape = sh_pad, xix = ix_pad; break;
    case OR_CONV_PAD1: shape = sh_pad1, xix = ix_pad1; break;
    case OR_CONV_STRIDE2: shape = sh_s2, xix = ix_s2; break;
    case OR_CONV_S2_PAD: shape = sh_s2p, xix = ix_s2p; break;
  }
  uj_io_t x = uj_input(g, 4, dt), w = uj_input(g, 4, dt);
  *xo = x, *wo = w;
  uj_io_t ss[] = {x, w};
  uj_io_t xr = uj_reindex(g, x, 7, shape, 2, ss, 4, xix);
  uj_io_t wr = uj_reindex(g, w, 7, shape, 2, ss, 4, ix_w);
  uj_io_t m = uj_binary(g, UJ_BINARY_MUL, xr, wr);
  int axes[] = {4, 5, 6};
  uj_io_t s = uj_reduce(g, UJ_REDUCE_SUM, 3, axes, m);
  return uj_reindex(g, s, 4, sh_out, 1, &s, 7, ix_out);
}

/* The program of or_conv_graph with the params its kind declares. */
static inline uj_program_t* or_conv_program(or_conv_kind_t kind, uj_dtype_t dt) {
  static const char* const p_k[] = {"$kh", "$kw"};
  static const char* const p_pad[] = {"$pad"};
  uj_graph_t* g = uj_graph_new();
  uj_io_t x, w;
  uj_io_t y = or_conv_graph(g, kind, dt, &x, &w);
  uj_io_t ins[] = {x, w};
  uj_program_t* p = NULL;
  if (y >= 0) {
    int has_pad = kind == OR_CONV_PAD || kind == OR_CONV_S2_PAD;
    int np = kind == OR_CONV_PARAMS ? 2 : has_pad ? 1 : 0;
    const char* const* params = kind == OR_CONV_PARAMS ? p_k : has_pad ? p_pad : NULL;
    p = OR_PROGRAM(g, 2, ins, np, params, 1, &y);
  } else {
    char msg[512];
    snprintf(msg, sizeof msg, "conv graph: %s", uj_last_error());
    harness_fail(__FILE__, __LINE__, msg);
  }
  uj_graph_free(g);
  return p;
}

/* Distance in representable floats of dtype dt (f32 or f64) between a and
 * b, both finite or both the same special value (0 then); -1 when one is
 * special and the other is not the same. */
static inline double or_ulps(uj_dtype_t dt, double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : -1;
  if (isinf(a) || isinf(b)) return a == b ? 0 : -1;
  if (a == 0 && b == 0) return signbit(a) == signbit(b) ? 0 : -1;
  if (dt == UJ_F32) {
    float fa = (float)a, fb = (float)b;
    int32_t ia, ib;
    memcpy(&ia, &fa, 4), memcpy(&ib, &fb, 4);
    if (ia < 0) ia = INT32_MIN - ia;
    if (ib < 0) ib = INT32_MIN - ib;
    return fabs((double)ia - (double)ib);
  }
  int64_t la, lb;
  memcpy(&la, &a, 8), memcpy(&lb, &b, 8);
  if (la < 0) la = INT64_MIN - la;
  if (lb < 0) lb = INT64_MIN - lb;
  uint64_t d = la > lb ? (uint64_t)la - (uint64_t)lb : (uint64_t)lb - (uint64_t)la; /* exact, unlike a double */
  return d > 1000000 ? 1e6 : (double)d;
}

/* Floor division and modulo as the IR defines them for i32 (x / 0 == 0, x % 0 == 0). */
static inline int64_t or_floordiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q--;
  return q;
}
static inline int64_t or_floormod(int64_t a, int64_t b) { return b == 0 ? 0 : a - or_floordiv(a, b) * b; }

/* The result of storing v into dt (f32 rounding; i32 already integral). */
static inline double or_in_dtype(uj_dtype_t dt, double v) {
  return dt == UJ_F32 ? (double)(float)v : hr_is_half(dt) ? hr_round(dt, v) : v;
}

#endif
