/* tests/test_stream.c: the C engine's streaming stores for outputs written
 * once and never read (jit/c/c_stream.c, ir/stream.c), and chain-local
 * temporaries in rows of scratch (ir/chain_local.c, jit/blocks.c).
 *
 * Streaming must change no value: each program runs on the C engine with
 * the threshold at 0 (every qualifying output streams) and past any size
 * (none does), and the two outputs must agree bit for bit, and with the
 * interpreter within rounding; the output sits at 0, 4 or 8 bytes past a
 * 64-byte boundary between guard bytes that must stay untouched, with row
 * lengths that leave a peel and a tail, in f32, f64, bf16 and f16, on 1 and
 * 2 threads. The generated source streams exactly the qualifying stores.
 * Softmax, whose exp values live in a chain-local temporary, is checked
 * against the interpreter on random shapes, engines, threads and chunk
 * budgets (0: the chain does not run, and the temporary gets full size). */
#include <stdint.h>

#include "../jit/jit.h"
#include "oracle.h"

enum { GUARD = 64 };
static const unsigned char GUARD_BYTE = 0xA5;

typedef struct {
  uj_engine_t engine;
  int threads;
  int64_t stream_bytes;
  int64_t chain_bytes; /* -1: the default */
  size_t offset;       /* the output's bytes past a 64-byte boundary */
} how_t;

/* Runs p (one output, of dtype dt and the given sizes) on `in`; returns a
 * copy of the output's bytes, or NULL (with a CHECK failed) when the run
 * fails or writes outside the output. */
static unsigned char* run_how(uj_program_t* p, const uj_tensor_t* const* in, int nin, uj_dtype_t dt, int ndim,
                              const int64_t* dims, how_t how) {
  size_t bytes = (size_t)or_numel(ndim, dims) * or_dsize(dt);
  size_t total = (GUARD + how.offset + bytes + GUARD + 63) / 64 * 64;
  unsigned char* mem = aligned_alloc(64, total);
  unsigned char* copy = malloc(bytes ? bytes : 1);
  uj_ctx_t* ctx = uj_ctx_new();
  int ok = mem && copy && ctx && uj_ctx_set_engine(ctx, how.engine) == UJ_OK &&
           uj_ctx_set_threads(ctx, how.threads) == UJ_OK && uj_ctx_set_stream_bytes(ctx, how.stream_bytes) == UJ_OK;
  if (ok && how.chain_bytes >= 0) {
    jit_state_t* js = jit_state(ctx);
    ok = js != NULL;
    if (js) js->chain_bytes = how.chain_bytes;
  }
  CHECK(ok);
  if (ok) {
    memset(mem, GUARD_BYTE, total);
    uj_tensor_t y = {mem + GUARD + how.offset, dt, UJ_CPU, ndim, {0}};
    for (int k = 0; k < ndim; k++) y.dims[k] = dims[k];
    uj_tensor_t* out[] = {&y};
    uj_status_t s = uj_program_run(ctx, p, UJ_FORWARD, in, nin, NULL, 0, out, 1);
    if (s != UJ_OK) fprintf(stderr, "  run: %s\n", uj_last_error());
    CHECK(s == UJ_OK);
    ok = s == UJ_OK;
    int guards_kept = 1;
    for (size_t i = 0; i < GUARD + how.offset; i++) guards_kept &= mem[i] == GUARD_BYTE;
    for (size_t i = GUARD + how.offset + bytes; i < total; i++) guards_kept &= mem[i] == GUARD_BYTE;
    CHECK(guards_kept);
    ok = ok && guards_kept;
    if (ok) memcpy(copy, y.data, bytes);
  }
  uj_ctx_free(ctx);
  free(mem);
  if (!ok) free(copy);
  return ok ? copy : NULL;
}

/* |got - ref| <= tol * max(1, |ref|) element by element; both NaN agree. */
static int close_to(const unsigned char* got, const unsigned char* ref, uj_dtype_t dt, int64_t n, double tol) {
  uj_tensor_t g = {(void*)got, dt, UJ_CPU, 1, {n}}, r = {(void*)ref, dt, UJ_CPU, 1, {n}};
  for (int64_t i = 0; i < n; i++) {
    double a = or_get(&g, i), b = or_get(&r, i);
    if (isnan(a) && isnan(b)) continue;
    if (!(fabs(a - b) <= tol * fmax(1.0, fabs(b)))) {
      fprintf(stderr, "  element %lld: %.9g against %.9g\n", (long long)i, a, b);
      return 0;
    }
  }
  return 1;
}

static double tolerance(uj_dtype_t dt) { return dt == UJ_F64 ? 1e-10 : dt == UJ_F32 ? 1e-4 : 1.6e-2; }

static const char* dtype_name(uj_dtype_t dt) {
  return dt == UJ_F64 ? "f64" : dt == UJ_F32 ? "f32" : dt == UJ_BF16 ? "bf16" : "f16";
}

/* The program `body` with x (and w, b when `affine`) of dtype dt, on x of
 * the given sizes (w and b of its last), streamed against not, each
 * against the interpreter. */
static void check_program(const char* body, int affine, uj_dtype_t dt, int ndim, const int64_t* dims,
                          uint64_t seed) {
  char text[512];
  if (affine)
    snprintf(text, sizeof text, "x: %s; w: %s; b: %s\n%s", dtype_name(dt), dtype_name(dt), dtype_name(dt), body);
  else
    snprintf(text, sizeof text, "x: %s\n%s", dtype_name(dt), body);
  uj_program_t* p = NULL;
  CHECK(uj_program_parse(text, &p) == UJ_OK);
  if (!p) return;
  HARNESS_SEED(seed);
  uint64_t st = seed;
  int64_t last = dims[ndim - 1];
  uj_tensor_t x = or_tensor(dt, ndim, dims), w = or_tensor(dt, 1, &last), b = or_tensor(dt, 1, &last);
  or_fill_real(&st, &x, -4, 4);
  or_fill_real(&st, &w, 0.5, 1.5);
  or_fill_real(&st, &b, -1, 1);
  const uj_tensor_t* in[] = {&x, &w, &b};
  int nin = affine ? 3 : 1;
  int64_t n = or_numel(ndim, dims);
  unsigned char* want = run_how(p, in, nin, dt, ndim, dims, (how_t){UJ_ENGINE_INTERP, 1, INT64_MAX, -1, 0});
  static const size_t offsets[] = {0, 4, 8};
  for (int threads = 1; threads <= 2; threads++)
    for (size_t o = 0; o < sizeof offsets / sizeof *offsets; o++) {
      how_t plain = {UJ_ENGINE_C, threads, INT64_MAX, -1, offsets[o]}, streamed = plain;
      streamed.stream_bytes = 0;
      unsigned char* a = run_how(p, in, nin, dt, ndim, dims, plain);
      unsigned char* s = run_how(p, in, nin, dt, ndim, dims, streamed);
      int same = a && s && memcmp(a, s, (size_t)n * or_dsize(dt)) == 0;
      if (!same)
        fprintf(stderr, "  %s %s, %lld elements, %d threads, offset %zu: streamed differs\n", body, dtype_name(dt),
                (long long)n, threads, offsets[o]);
      CHECK(same);
      CHECK(want && a && close_to(a, want, dt, n, tolerance(dt)));
      free(a), free(s);
    }
  free(want);
  or_tensor_free(&x), or_tensor_free(&w), or_tensor_free(&b);
  uj_program_free(p);
}

static const char* const SOFTMAX = "_e = exp(x - amax(x, -1)); y = _e / sum(_e, -1)";
static const char* const LAYERNORM = "_d = x - mean(x, -1); y = _d * rsqrt(mean(_d * _d, -1) + 1e-5) * w + b";
static const char* const ELEMENTWISE = "y = 1 / (1 + exp(-(x * 1.5 + 0.25)))";

TEST(streamed_outputs_agree_with_plain_stores_and_the_interpreter) {
  static const uj_dtype_t dtypes[] = {UJ_F32, UJ_F64, UJ_BF16, UJ_F16};
  static const int64_t rows[][2] = {{1, 1}, {3, 17}, {5, 1001}, {4, 64}, {2, 4099}};
  static const int64_t flat[] = {1, 13, 100003};
  uint64_t seed = 1000;
  for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
      check_program(SOFTMAX, 0, dtypes[d], 2, rows[r], seed++);
      check_program(LAYERNORM, 1, dtypes[d], 2, rows[r], seed++);
    }
    for (size_t r = 0; r < sizeof flat / sizeof *flat; r++) check_program(ELEMENTWISE, 0, dtypes[d], 1, &flat[r], seed++);
  }
}

/* Above and below a threshold set through the setter: a 64 KiB output streams
 * under a 64 KiB threshold and not under one a byte larger; both agree. */
TEST(threshold_from_the_setter) {
  uj_program_t* p = NULL;
  CHECK(uj_program_parse(ELEMENTWISE, &p) == UJ_OK);
  int64_t n = 16384;
  uj_tensor_t x = or_tensor(UJ_F32, 1, &n);
  uint64_t st = 5;
  HARNESS_SEED(5);
  or_fill_real(&st, &x, -8, 8);
  const uj_tensor_t* in[] = {&x};
  unsigned char* at = run_how(p, in, 1, UJ_F32, 1, &n, (how_t){UJ_ENGINE_C, 1, 65536, -1, 4});
  unsigned char* above = run_how(p, in, 1, UJ_F32, 1, &n, (how_t){UJ_ENGINE_C, 1, 65537, -1, 4});
  CHECK(at && above && memcmp(at, above, 65536) == 0);
  free(at), free(above);
  uj_ctx_t* ctx = uj_ctx_new();
  CHECK(ctx && uj_ctx_set_stream_bytes(ctx, -1) == UJ_ERR_INVALID && strstr(uj_last_error(), "-1 bytes"));
  CHECK(uj_ctx_set_stream_bytes(NULL, 0) == UJ_ERR_INVALID);
  uj_ctx_free(ctx);
  or_tensor_free(&x);
  uj_program_free(p);
}

/* A bad UOPJIT_STREAM_BYTES fails C engine runs with its name until the
 * setter gives a valid value. */
TEST(bad_environment_value_is_named) {
  setenv("UOPJIT_STREAM_BYTES", "lots", 1);
  uj_ctx_t* ctx = uj_ctx_new();
  unsetenv("UOPJIT_STREAM_BYTES");
  uj_program_t* p = NULL;
  CHECK(uj_program_parse(ELEMENTWISE, &p) == UJ_OK);
  int64_t n = 8;
  uj_tensor_t x = or_tensor(UJ_F32, 1, &n), y = or_tensor(UJ_F32, 1, &n);
  const uj_tensor_t* in[] = {&x};
  uj_tensor_t* out[] = {&y};
  CHECK(ctx && uj_ctx_set_engine(ctx, UJ_ENGINE_C) == UJ_OK);
  CHECK(uj_program_run(ctx, p, UJ_FORWARD, in, 1, NULL, 0, out, 1) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "UOPJIT_STREAM_BYTES") != NULL);
  CHECK(uj_ctx_set_stream_bytes(ctx, 1 << 20) == UJ_OK);
  CHECK(uj_program_run(ctx, p, UJ_FORWARD, in, 1, NULL, 0, out, 1) == UJ_OK);
  or_tensor_free(&x), or_tensor_free(&y);
  uj_program_free(p);
  uj_ctx_free(ctx);
}

static int count_substr(const char* s, const char* what) {
  int n = 0;
  for (const char* at = s; at && (at = strstr(at, what)); at++) n++;
  return n;
}

/* `what` of `text` as last built: run on the interpreter with ninputs f32
 * inputs of n elements (rank 1) or 3 x n, output k of last size out_last[k]. */
static char* dump_of(const char* text, uj_dump_t what, int ninputs, int rank, int64_t n, const int64_t* out_last) {
  uj_program_t* p = NULL;
  char* src = NULL;
  uj_ctx_t* ctx = uj_ctx_new();
  if (uj_program_parse(text, &p) != UJ_OK || !ctx || uj_ctx_set_engine(ctx, UJ_ENGINE_INTERP) != UJ_OK) {
    fprintf(stderr, "  %s: %s\n", text, uj_last_error());
  } else {
    int64_t dims[2] = {3, n};
    uj_tensor_t t[8], o[8];
    const uj_tensor_t* in[8];
    uj_tensor_t* out[8];
    int nout = uj_program_io_count(p, 1);
    for (int i = 0; i < ninputs; i++) t[i] = or_tensor(UJ_F32, rank, rank == 1 ? &dims[1] : dims), in[i] = &t[i];
    for (int i = 0; i < nout && i < 8; i++) {
      int64_t od[2] = {rank == 1 ? out_last[i] : 3, out_last[i]};
      o[i] = or_tensor(UJ_F32, rank, rank == 1 ? &od[1] : od), out[i] = &o[i];
    }
    /* the dump is of the build last run */
    if (uj_program_run(ctx, p, UJ_FORWARD, in, ninputs, NULL, 0, out, nout) == UJ_OK)
      src = uj_program_dump(ctx, p, UJ_FORWARD, what, NULL);
    else
      fprintf(stderr, "  %s: %s\n", text, uj_last_error());
    for (int i = 0; i < ninputs; i++) or_tensor_free(&t[i]);
    for (int i = 0; i < nout && i < 8; i++) or_tensor_free(&o[i]);
  }
  uj_program_free(p);
  uj_ctx_free(ctx);
  return src;
}

TEST(only_qualifying_stores_stream) {
  /* an elementwise output, softmax's and layernorm's y: one streamed store each */
  static const int64_t full[] = {100, 100, 100}, reduced[] = {100, 1};
  char* s = dump_of(ELEMENTWISE, UJ_DUMP_C, 1, 1, 100, full);
  CHECK(s && count_substr(s, "UJ_STREAM64(&") == 1 && count_substr(s, ") UJ_SFENCE();") == 1);
  if (harness_failed_checks && s) fprintf(stderr, "%s\n", s);
  free(s);
  s = dump_of(SOFTMAX, UJ_DUMP_C, 1, 2, 100, full);
  CHECK(s && count_substr(s, "UJ_STREAM64(&t7[") == 1);
  free(s);
  /* Adam: each output may be written over its input, whose lines the update
   * has just read; whether a call does is known when it runs, and each
   * block tests it then. One output per loop streams, the first. */
  s = dump_of("m = 0.9*m + 0.1*g; v = 0.999*v + 0.001*g*g; p = p - 0.001*m/(sqrt(v)+1e-8)", UJ_DUMP_C, 4, 1, 100,
              full);
  CHECK(s && count_substr(s, "UJ_STREAM64(&") == 1 && count_substr(s, "const int uj_nt") == 1 &&
        count_substr(s, "(const void*)t") >= 2);
  if (harness_failed_checks && s) fprintf(stderr, "%s\n", s);
  free(s);
  /* a reduction's output is stored once per row, not along a loop */
  s = dump_of("z = sum(x, -1)", UJ_DUMP_C, 1, 2, 100, reduced + 1);
  CHECK(s && count_substr(s, "UJ_STREAM64(&") == 0 && count_substr(s, "uj_nt") == 0);
  free(s);
  /* y stored in the loop that sums it, in lanes: splitting that loop where
   * y's lines start would make the sum's order depend on an address */
  s = dump_of("y = exp(x); z = sum(y, -1)", UJ_DUMP_C, 1, 2, 100, reduced);
  CHECK(s && count_substr(s, "UJ_STREAM64(&") == 0);
  free(s);
}

/* Adam in place (the outputs passed as the inputs' buffers) with every
 * qualifying output streamable: the blocks see the pointers are the same and
 * store as usual; against the interpreter in place. */
TEST(adam_in_place_with_streaming_on) {
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("m = 0.9*m + 0.1*g; v = 0.999*v + 0.001*g*g; p = p - 0.001*m/(sqrt(v)+1e-8)", &p) == UJ_OK);
  int64_t n = 1003;
  double* result[2][3] = {{0}};
  for (int e = 0; e < 2 && p; e++) {
    uj_ctx_t* ctx = uj_ctx_new();
    CHECK(ctx && uj_ctx_set_engine(ctx, e ? UJ_ENGINE_C : UJ_ENGINE_INTERP) == UJ_OK &&
          uj_ctx_set_stream_bytes(ctx, 0) == UJ_OK);
    uint64_t st = 99;
    HARNESS_SEED(99);
    uj_tensor_t t[4];
    for (int i = 0; i < 4; i++) t[i] = or_tensor(UJ_F32, 1, &n), or_fill_real(&st, &t[i], 0.01, 1);
    /* inputs in order of first use: m, g, v, p; outputs m, v, p */
    const uj_tensor_t* in[] = {&t[0], &t[1], &t[2], &t[3]};
    uj_tensor_t* out[] = {&t[0], &t[2], &t[3]};
    CHECK(uj_program_run(ctx, p, UJ_FORWARD, in, 4, NULL, 0, out, 3) == UJ_OK);
    for (int o = 0; o < 3; o++) result[e][o] = or_to_double(out[o]);
    for (int i = 0; i < 4; i++) or_tensor_free(&t[i]);
    uj_ctx_free(ctx);
  }
  for (int o = 0; o < 3 && p; o++) {
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++)
      ok = fabs(result[1][o][i] - result[0][o][i]) <= 1e-5 * fmax(1.0, fabs(result[0][o][i]));
    CHECK(ok);
  }
  for (int e = 0; e < 2; e++)
    for (int o = 0; o < 3; o++) free(result[e][o]);
  uj_program_free(p);
}

/* Softmax's exp values in a chain-local temporary: random shapes, the C and
 * MIR engines, 1 and 2 threads, chunk budgets of one row, the default, and
 * 0 (the chain does not run: full-size memory), against the interpreter. */
TEST(softmax_through_chain_local_scratch) {
  uj_program_t* p = NULL;
  CHECK(uj_program_parse(SOFTMAX, &p) == UJ_OK);
  static const int64_t full[] = {100};
  char* ir = dump_of(SOFTMAX, UJ_DUMP_IR, 1, 2, 100, full);
  CHECK(ir && strstr(ir, "chain-local"));
  free(ir);
  static const uj_engine_t engines[] = {UJ_ENGINE_C, UJ_ENGINE_MIR};
  static const int64_t budgets[] = {4, JIT_CHAIN_BYTES, 0};
  for (int trial = 0; trial < 12 && p; trial++) {
    uint64_t seed = 7000 + (uint64_t)trial, st = seed;
    HARNESS_SEED(seed);
    int64_t dims[2] = {harness_int(&st, 1, 40), harness_int(&st, 1, 2100)};
    uj_tensor_t x = or_tensor(UJ_F32, 2, dims);
    or_fill_real(&st, &x, -6, 6);
    const uj_tensor_t* in[] = {&x};
    unsigned char* want = run_how(p, in, 1, UJ_F32, 2, dims, (how_t){UJ_ENGINE_INTERP, 1, INT64_MAX, -1, 0});
    for (size_t e = 0; e < sizeof engines / sizeof *engines; e++) {
      if (!uj_engine_available(NULL, engines[e])) continue;
      for (int threads = 1; threads <= 2; threads++)
        for (size_t b = 0; b < sizeof budgets / sizeof *budgets; b++) {
          how_t how = {engines[e], threads, trial % 2 ? 0 : INT64_MAX, budgets[b], (size_t)(trial % 3) * 4};
          unsigned char* got = run_how(p, in, 1, UJ_F32, 2, dims, how);
          int ok = want && got && close_to(got, want, UJ_F32, dims[0] * dims[1], 1e-4);
          if (!ok)
            fprintf(stderr, "  %lldx%lld on %s, %d threads, budget %lld\n", (long long)dims[0], (long long)dims[1],
                    uj_engine_name(engines[e]), threads, (long long)budgets[b]);
          CHECK(ok);
          free(got);
        }
    }
    free(want);
    or_tensor_free(&x);
  }
  uj_program_free(p);
}

TEST_MAIN()
