/* tests/test_engines_math.c: the engines' f32 exp, log, tanh and sigmoid
 * over the whole f32 range, and f64 math, against double-precision libm and
 * the interpreter, on the interpreter and every available CPU engine (C,
 * MIR); every program is also compiled for CUDA with NVRTC.
 *
 * math_f32_whole_range sweeps tests/math_sweep.h's inputs: every 4093rd bit
 * pattern (about a million floats: every binade of both signs, subnormals,
 * +-inf, NaNs), every float within 2048 steps of each threshold (overflow
 * at 88.72, first subnormal result at -87.34, underflow to 0 at -103.97,
 * log's FLT_MIN, tanh's 0.625 switch, sigmoid's -80 switch, ...), and the
 * special values. The interpreter must give f(x) in double rounded to float
 * bit for bit (it defines the results); each engine must agree with it on
 * NaN, +-0, +-inf and zero signs, and stay within docs/ENGINES.md's bounds:
 * relative error where the result is normal, error in units of 2^-149
 * where it is subnormal (ms_bound_rel, ms_bound_ulps). It prints the
 * largest errors it saw per engine, function and range.
 *
 * UJ_MATH_SWEEP=N makes it the measurement docs/ENGINES.md quotes (N = 7):
 * every Nth bit pattern (N = 1: every float, tens of minutes) and every
 * subnormal, on the JIT engines only. f64 math goes through libm on every
 * engine and must match libm to 1e-15. A parsed chain mixing the four functions must agree with the
 * interpreter within 2e-6 at every size (vector bodies and remainders). */
#include "engines_check.h"
#include "math_sweep.h"

enum { F_EXP, F_LOG, F_TANH, F_SIG, NF };
static const char* const fname[NF] = {"exp", "log", "tanh", "sigmoid"};

static double ref_of(int f, double x) { return ms_ref(f, x); }

/* docs/ENGINES.md's bounds, "f32 math accuracy": relative error for normal
 * results, units of 2^-149 for subnormal ones, the same on C and MIR (the
 * larger engine's measured maximum, rounded up). */
static const double ms_bound_rel[NF] = {2e-7, 1e-7, 2.5e-7, 2.5e-7};
static const double ms_bound_ulps[NF] = {1.5, 0, 0, 1.5}; /* log has no subnormal results; tanh's are x */

/* f64 inputs: special values first, then the ranges. */
static void math_inputs(int f, uint64_t* st, uj_tensor_t* t) {
  static const double sp[] = {0, -0.0, 1, -1, INFINITY, -INFINITY, NAN, 1e-30, -1e-30, 20, -20, 0.625, 2, 0.5};
  int nsp = (int)(sizeof sp / sizeof *sp);
  int64_t n = or_tnumel(t);
  for (int64_t i = 0; i < n; i++) {
    double v;
    if (i < nsp) v = sp[i];
    else if (f == F_EXP) v = harness_real(st, -700, 700);
    else if (f == F_LOG) v = ldexp(harness_real(st, 1.0, 2.0), (int)harness_int(st, -1000, 1000));
    else v = i % 2 ? harness_real(st, -1, 1) : harness_real(st, -40, 40);
    or_set(t, i, v);
  }
}

/* One program: four inputs, out_f = f(in_f). */
static uj_program_t* math_program(uj_dtype_t dt) {
  static const uj_unary_op_t ops[NF] = {UJ_UNARY_EXP, UJ_UNARY_LOG, UJ_UNARY_TANH, UJ_UNARY_SIGMOID};
  uj_graph_t* g = uj_graph_new();
  uj_io_t ins[NF], outs[NF];
  for (int f = 0; f < NF; f++) ins[f] = uj_input(g, 1, dt), outs[f] = uj_unary(g, ops[f], ins[f]);
  uj_program_t* p = OR_PROGRAM(g, NF, ins, 0, NULL, NF, outs);
  uj_graph_free(g);
  return p;
}

/* Checks one engine's results for f over inputs in[0..n); the interpreter
 * (engine name "interp") must give the rounded reference exactly. Adds to
 * st; returns the number of failures, the first three reported. */
static int sweep_check(int f, const char* engine, const float* in, const float* out, int64_t n, ms_stat_t* st,
                       int reported) {
  int interp = !strcmp(engine, "interp"), failures = 0;
  for (int64_t i = 0; i < n; i++) {
    const char* why = NULL;
    float want = (float)ms_ref(f, (double)in[i]);
    if (interp) {
      if (!(ms_bits(out[i]) == ms_bits(want) || (isnan(out[i]) && isnan(want)))) why = "f(x) in double, rounded";
    } else {
      ms_classify(f, in[i], out[i], st, ms_bound_rel[f], ms_bound_ulps[f], &why);
    }
    if (!why) continue;
    if (reported + failures++ < 3) {
      char msg[400];
      snprintf(msg, sizeof msg, "f32 %s(%.9g) on %s: got %.9g, double %.17g; want %s", fname[f], (double)in[i], engine,
               (double)out[i], ms_ref(f, (double)in[i]), why);
      harness_fail(__FILE__, __LINE__, msg);
    }
  }
  return failures;
}

static void sweep_report(const char* engine, int f, const ms_stat_t* st) {
  for (int r = 0; r < MS_NR; r++) {
    if (!st[r].count) continue;
    printf("  %-4s %-8s %-14s %11lld inputs: max rel %.3g (x = %.9g), max 2^-149 units %.3g (x = %.9g)\n", engine,
           fname[f], ms_range[r], (long long)st[r].count, st[r].rel, st[r].rel_at, st[r].ulps, st[r].ulps_at);
  }
}

/* One program per function, y = f(x), run over the sweep in strips. */
TEST(math_f32_whole_range) {
  static const uj_unary_op_t ops[NF] = {UJ_UNARY_EXP, UJ_UNARY_LOG, UJ_UNARY_TANH, UJ_UNARY_SIGMOID};
  const char* mode = getenv("UJ_MATH_SWEEP");
  uint64_t stride = mode && *mode ? strtoull(mode, NULL, 10) : 0;
  int wide = stride > 0; /* the measurement: JIT engines only, every subnormal */
  if (!wide || stride > 4093) stride = 4093;
  int64_t strip = (int64_t)1 << 22;
  uj_tensor_t x = or_tensor(UJ_F32, 1, &strip), y = or_tensor(UJ_F32, 1, &strip);
  for (int f = 0; f < NF; f++) {
    uj_graph_t* g = uj_graph_new();
    uj_io_t in = uj_input(g, 1, UJ_F32), out = uj_unary(g, ops[f], in);
    uj_program_t* p = OR_PROGRAM(g, 1, &in, 0, NULL, 1, &out);
    uj_graph_free(g);
    if (!p) continue;
    ms_sweep_t sweep = ms_sweep(f, stride, wide);
    for (int e = wide ? 0 : -1; e < EN_NENGINES; e++) {
      uj_ctx_t* ctx = e < 0 ? en_interp() : en_ctx(e);
      const char* name = e < 0 ? "interp" : en_engines[e].name;
      if (!ctx) continue;
      ms_stat_t st[MS_NR];
      memset(st, 0, sizeof st);
      int failures = 0;
      for (int64_t at = 0; at < sweep.total; at += strip) {
        int64_t n = sweep.total - at < strip ? sweep.total - at : strip;
        x.dims[0] = y.dims[0] = n;
        for (int64_t i = 0; i < n; i++) ((float*)x.data)[i] = ms_input(&sweep, at + i);
        const uj_tensor_t* inp[] = {&x};
        uj_tensor_t* outp[] = {&y};
        if (!EN_RUN("f32 math sweep", name, ctx, p, inp, 1, NULL, 0, outp, 1)) break;
        failures += sweep_check(f, name, x.data, y.data, n, st, failures);
      }
      if (failures > 3) printf("  %s %s: %d failures in all\n", name, fname[f], failures);
      if (e >= 0) sweep_report(name, f, st);
    }
    uj_program_free(p);
  }
  or_tensor_free(&x), or_tensor_free(&y);
}

TEST(math_f64_libm) {
  uint64_t seed = en_seed(7202), st = seed;
  HARNESS_SEED(seed);
  uj_program_t* p = math_program(UJ_F64);
  if (!p) return;
  int64_t n = 4099;
  uj_tensor_t in[NF], out[NF];
  const uj_tensor_t* inp[NF];
  uj_tensor_t* outp[NF];
  double* ref[NF];
  for (int f = 0; f < NF; f++) {
    in[f] = or_tensor(UJ_F64, 1, &n), out[f] = or_tensor(UJ_F64, 1, &n);
    math_inputs(f, &st, &in[f]);
    if (f == F_EXP) or_set(&in[f], 20, 700), or_set(&in[f], 21, -745), or_set(&in[f], 22, 710);
    inp[f] = &in[f], outp[f] = &out[f];
    ref[f] = or_alloc_ref(n);
    for (int64_t i = 0; i < n; i++) ref[f][i] = ref_of(f, or_get(&in[f], i));
  }
  for (int e = -1; e < EN_NENGINES; e++) {
    uj_ctx_t* ctx = e < 0 ? en_interp() : en_ctx(e);
    const char* name = e < 0 ? "interp" : en_engines[e].name;
    if (!ctx || !EN_RUN("f64 math", name, ctx, p, inp, NF, NULL, 0, outp, NF)) continue;
    for (int f = 0; f < NF; f++) {
      char what[64];
      snprintf(what, sizeof what, "f64 %s", fname[f]);
      /* relative to max(1, |ref|): absolute near 0, where libm and the
       * sigmoid formula agree to the last bits anyway */
      EN_EXPECT_CLOSE(what, name, &out[f], ref[f], 1e-15);
    }
  }
  for (int f = 0; f < NF; f++) or_tensor_free(&in[f]), or_tensor_free(&out[f]), free(ref[f]);
  uj_program_free(p);
}

/* A chain of the inline functions from the expression language, at every
 * size (vector bodies, remainders, thread splits), f32, against the
 * interpreter within 2e-6 relative to max(1, |ref|). */
TEST(math_parsed_chain_sizes) {
  uint64_t seed = en_seed(7203), st = seed;
  HARNESS_SEED(seed);
  SKIP_IF(en_count() == 0, "no JIT engine available");
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("y = sigmoid(x) * tanh(3*x) + exp(-x*x) + log(1 + x*x)\n"
                         "z = exp(x * 20) / (1 + exp(x * 20)) - sigmoid(x * 20)",
                         &p) == UJ_OK);
  if (!p) return;
  for (int i = 0; i < EN_NSIZES; i++) {
    int64_t n = en_sizes[i];
    uj_tensor_t x = or_tensor(UJ_F32, 1, &n), y = or_tensor(UJ_F32, 1, &n), z = or_tensor(UJ_F32, 1, &n);
    or_fill_real(&st, &x, -4, 4);
    char what[64];
    snprintf(what, sizeof what, "inline math chain [%lld]", (long long)n);
    const uj_tensor_t* in[] = {&x};
    uj_tensor_t* out[] = {&y, &z};
    if (EN_RUN(what, "interp", en_interp(), p, in, 1, NULL, 0, out, 2)) {
      double *wy = or_to_double(&y), *wz = or_to_double(&z);
      for (int e = 0; e < EN_NENGINES; e++) {
        uj_ctx_t* ctx = en_ctx(e);
        if (!ctx || !EN_RUN(what, en_engines[e].name, ctx, p, in, 1, NULL, 0, out, 2)) continue;
        EN_EXPECT_CLOSE(what, en_engines[e].name, &y, wy, 2e-6);
        EN_EXPECT_CLOSE(what, en_engines[e].name, &z, wz, 2e-6);
      }
      free(wy), free(wz);
    }
    or_tensor_free(&x), or_tensor_free(&y), or_tensor_free(&z);
  }
  uj_program_free(p);
}

EN_TEST_MAIN()
