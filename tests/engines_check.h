/* tests/engines_check.h: what tests/test_engines*.c share: the CPU engines
 * under test (C, MIR) against the interpreter, one context each kept for
 * the whole run (so that one compiled kernel serves every size), the sizes
 * to try, seeds, and comparisons that name the engine, the case, the
 * element and (through HARNESS_SEED) the seed.
 *
 * An engine that is not available (uj_engine_available == 0; MIR until its
 * engine lands) is skipped with oracle.h's one-time message and is not a
 * failure; nothing here needs to change when it becomes available. The
 * CUDA engine is not among them (these tests hold the CPU engines to
 * bit-exact results and to their thread splits); every program they run
 * is compiled with NVRTC though (oracle.h's or_cuda_compile), and runs on
 * the GPU in the oracle configurations.
 *
 * Seeds: each test starts from a fixed seed, printed with every failure;
 * UJ_TEST_SEED=<n> in the environment replaces it (the same seed for every
 * test) to explore other data. */
#ifndef UJ_TESTS_ENGINES_CHECK_H
#define UJ_TESTS_ENGINES_CHECK_H

#include <float.h>

#include "oracle.h"

/* ---- engines -------------------------------------------------------------------------- */

typedef struct {
  uj_engine_t engine;
  const char* name;
} en_engine_t;
static const en_engine_t en_engines[] = {{UJ_ENGINE_C, "c"}, {UJ_ENGINE_MIR, "mir"}};
#define EN_NENGINES ((int)(sizeof en_engines / sizeof en_engines[0]))

static uj_ctx_t* en_ctx_cache[EN_NENGINES + 1]; /* [EN_NENGINES]: the interpreter */
static int en_avail[EN_NENGINES];               /* 0 unknown, 1 yes, -1 no */

static void en_ctx_release(void) {
  for (int i = 0; i <= EN_NENGINES; i++) uj_ctx_free(en_ctx_cache[i]), en_ctx_cache[i] = NULL;
}

/* A new context on engine e with the passes on; NULL with a message on failure. */
static inline uj_ctx_t* en_ctx_new(uj_engine_t e) {
  uj_ctx_t* c = uj_ctx_new();
  if (!c) return NULL;
  if (uj_ctx_set_engine(c, e) != UJ_OK || uj_ctx_set_passes(c, 1) != UJ_OK) {
    fprintf(stderr, "  cannot configure engine %s: %s\n", uj_engine_name(e), uj_last_error());
    uj_ctx_free(c);
    return NULL;
  }
  return c;
}

/* 1 when engine slot i is available (asked once). */
static inline int en_available(int i) {
  if (!en_avail[i]) {
    or_configs_init_(); /* prints "engine mir unavailable: ..." once */
    en_avail[i] = or_engine_available(en_engines[i].engine) ? 1 : -1;
  }
  return en_avail[i] > 0;
}

/* The shared context of engine slot i (NULL when unavailable), or of the
 * interpreter for i == EN_NENGINES. */
static inline uj_ctx_t* en_ctx(int i) {
  static int registered;
  if (!registered) registered = 1, atexit(en_ctx_release);
  if (i < EN_NENGINES && !en_available(i)) return NULL;
  if (!en_ctx_cache[i]) en_ctx_cache[i] = en_ctx_new(i < EN_NENGINES ? en_engines[i].engine : UJ_ENGINE_INTERP);
  return en_ctx_cache[i];
}
static inline uj_ctx_t* en_interp(void) { return en_ctx(EN_NENGINES); }

/* The number of available engines (0: a test has nothing to compare). */
static inline int en_count(void) {
  int n = 0;
  for (int i = 0; i < EN_NENGINES; i++) n += en_available(i);
  return n;
}

/* ---- sizes and seeds ------------------------------------------------------------------ */

/* 1-D sizes: empty, tiny, around the vector widths (4, 8, 16 lanes), primes,
 * and around the C engine's thread split (jit/c/c.c: a parallel block is split
 * when its outermost loop has at least 2 * ceil(16384 / inner work)
 * iterations, 32768 for an elementwise vector). */
static const int64_t en_sizes[] = {0,  1,  2,  3,   7,    8,    15,    16,    17,    31,
                                   33, 63, 65, 127, 1021, 4099, 32767, 32768, 32769, 65537};
#define EN_NSIZES ((int)(sizeof en_sizes / sizeof en_sizes[0]))

/* 2-D shapes: rows and columns of one, primes, and the split for a block
 * whose outermost loop runs over rows (inner work = columns). */
static const int64_t en_shapes2[][2] = {{1, 1},     {1, 17},   {17, 1},   {1, 4099},  {4099, 1}, {3, 1021},
                                        {17, 33},   {0, 5},    {5, 0},    {2, 3},     {33, 65},  {32767, 1},
                                        {32769, 1}, {4681, 7}, {4683, 7}, {7, 4683},  {2, 16385}, {16385, 2},
                                        {3, 40009}};
#define EN_NSHAPES2 ((int)(sizeof en_shapes2 / sizeof en_shapes2[0]))

static inline uint64_t en_seed(uint64_t fixed) {
  const char* v = getenv("UJ_TEST_SEED");
  if (v && *v) return strtoull(v, NULL, 0);
  return fixed;
}

/* ---- running and comparing ------------------------------------------------------------- */

/* Runs p forward on ctx with every output filled with the sentinel first;
 * a failure is reported (naming what and engine) and returns 0. */
static inline int en_run_(const char* file, int line, const char* what, const char* engine, uj_ctx_t* ctx,
                          uj_program_t* p, const uj_tensor_t* const* in, int nin, const int64_t* params, int np,
                          uj_tensor_t* const* outs, int nout) {
  for (int k = 0; k < nout; k++) or_fill_sentinel(outs[k]);
  uj_status_t s = uj_program_run(ctx, p, UJ_FORWARD, in, nin, params, np, outs, nout);
  if (s != UJ_OK) {
    char msg[768];
    snprintf(msg, sizeof msg, "%s on %s: run failed: %s: %s", what, engine, uj_status_str(s), uj_last_error());
    harness_fail(file, line, msg);
    return 0;
  }
  /* the same program as CUDA, compiled with NVRTC (once per source) */
  return or_cuda_compile_(file, line, p, UJ_FORWARD, in, nin, params, np) == 0;
}
#define EN_RUN(what, engine, ctx, p, in, nin, params, np, outs, nout) \
  en_run_(__FILE__, __LINE__, (what), (engine), (ctx), (p), (in), (nin), (params), (np), (outs), (nout))

/* got against ref elementwise, |got - ref| <= tol * max(1, |ref|) (NaN with
 * NaN, equal infinities and, for i32, equal values agree); reports the first
 * mismatch and returns 0 then. */
static inline int en_expect_close_(const char* file, int line, const char* what, const char* engine,
                                   const uj_tensor_t* got, const double* ref, double tol) {
  int64_t e = or_first_mismatch(ref, got, tol);
  if (e < 0) return 1;
  char msg[768], shp[128];
  or_shape_str(shp, sizeof shp, got);
  snprintf(msg, sizeof msg, "%s on %s: %s element %lld: got %.9g, want %.9g (tol %g, max rel err %g)", what, engine,
           shp, (long long)e, or_get(got, e), ref[e], tol, or_max_rel_err(ref, got));
  harness_fail(file, line, msg);
  return 0;
}
#define EN_EXPECT_CLOSE(what, engine, got, ref, tol) \
  en_expect_close_(__FILE__, __LINE__, (what), (engine), (got), (ref), (tol))

/* Two tensors of one shape and dtype equal bit for bit (NaN payloads aside:
 * any NaN matches any NaN); reports the first difference. */
static inline int en_expect_same_(const char* file, int line, const char* what, const char* engine,
                                  const uj_tensor_t* got, const uj_tensor_t* ref) {
  int64_t n = or_tnumel(got);
  for (int64_t i = 0; i < n; i++) {
    double a = or_get(got, i), b = or_get(ref, i);
    if (isnan(a) && isnan(b)) continue;
    if (a == b && signbit(a) == signbit(b)) continue;
    char msg[768], shp[128];
    or_shape_str(shp, sizeof shp, got);
    snprintf(msg, sizeof msg, "%s on %s: %s element %lld: got %.17g, interpreter %.17g (want identical)", what,
             engine, shp, (long long)i, a, b);
    harness_fail(file, line, msg);
    return 0;
  }
  return 1;
}
#define EN_EXPECT_SAME(what, engine, got, ref) en_expect_same_(__FILE__, __LINE__, (what), (engine), (got), (ref))

/* main for the engine tests: unless UOPJIT_THREADS is set, three threads,
 * so that split blocks get uneven chunks even on a two-core machine. */
#define EN_TEST_MAIN()                                                               \
  int main(int argc, char** argv) {                                                  \
    setenv("UOPJIT_THREADS", "3", 0);                                                \
    return harness_main(argc, argv);                                                 \
  }

/* Copies of tensors (same shape and dtype, own buffer). */
static inline uj_tensor_t en_like(const uj_tensor_t* t) { return or_tensor(t->dtype, t->ndim, t->dims); }

/* Division's hard cases, for the C engine's division by a divisor the same
 * along a row (jit/c/c_divide.c): signed zeros, infinities, NaN, zero and
 * infinite divisors, overflow, subnormal quotients, and quotients exactly
 * halfway between two subnormals (147 2^-149 / 98). en_fill_division puts
 * divisor r in w[r] (w is [EN_NDIVISORS, 1]) and in row r of x
 * ([EN_NDIVISORS, cols]) the EN_NNUMERATORS numerators, then floats of
 * random bits. */
enum { EN_NDIVISORS = 16, EN_NNUMERATORS = 16 };
static inline double en_divisor(int k) {
  const double tiny = ldexp(1, -149);
  const double divisors[EN_NDIVISORS] = {98,   -98,   6,    3,     0.0,    -0.0, INFINITY, -INFINITY, NAN, tiny, 1e-40,
                                         3.4028234663852886e38, 1.5, 7, 1e30, 0.1};
  return divisors[k];
}
static inline void en_fill_division(uj_tensor_t* x, uj_tensor_t* w, int64_t cols, uint64_t* st) {
  const double tiny = ldexp(1, -149);
  const double numerators[EN_NNUMERATORS] = {147 * tiny, -147 * tiny, 343 * tiny, 9 * tiny, 15 * tiny, tiny,
                                             0.0,        -0.0,        INFINITY,   -INFINITY, NAN, 3.4028234663852886e38,
                                             1,          -1,          1e-38,      6};
  for (int r = 0; r < EN_NDIVISORS; r++) {
    or_set(w, r, en_divisor(r));
    for (int64_t c = 0; c < cols; c++) {
      uint32_t bits = (uint32_t)(harness_next(st) >> 32);
      float v;
      memcpy(&v, &bits, sizeof v);
      or_set(x, r * cols + c, c < EN_NNUMERATORS ? numerators[c] : (double)v);
    }
  }
}

#endif
