/* tests/test_threads_parse.c: one parsed program shared by threads, each
 * with its own context.
 *
 * A parsed program keeps a few specializations (one per input signature:
 * dtypes, ranks, size-1 axes) and evicts the least recently used. Here 8
 * threads cycle through more signatures than it keeps, each thread on a
 * different one at a time, so that specializations are evicted while other
 * threads run them, and dumps, shapes and dtypes are asked for in between.
 * Every result is compared with values computed here: the inputs are
 * multiples of 1/8 in [-2, 2], for which y = a*b + c and
 * z = max(a - c, 0.5*b) are exact in f32 and f64, so a result must match
 * to the bit. Every other call updates a in place (y written over a), and
 * half the threads run with the passes off, so that the specializations'
 * per-program memos see different functions from different threads. A
 * failure names the thread, iteration, case and element.
 *
 * UOPJIT_TEST_THREAD_ITERATIONS sets the iterations per thread (default
 * 40, to keep `make test` short; 300 is the full reproducer). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/uopjit.h"
#include "harness.h"

#define THREADS 8
#define INPUTS 3
#define DEFAULT_ITERATIONS 40

static const char* const source =
    "y = a * b + c\n"
    "z = max(a - c, 0.5 * b)\n";

/* One input signature: per input its dtype, rank and which of its axes have
 * size 1 (bit k for axis k). The other axes take the output's extent. */
typedef struct {
  uj_dtype_t dtype[INPUTS];
  int ndim[INPUTS];
  unsigned ones[INPUTS];
} signature_case_t;

/* 12 signatures, more than the 8 a parsed program keeps. */
static const signature_case_t cases[] = {
    {{UJ_F32, UJ_F32, UJ_F32}, {2, 1, 0}, {0, 0, 0}},
    {{UJ_F64, UJ_F32, UJ_F32}, {2, 1, 0}, {0, 0, 0}},
    {{UJ_F32, UJ_F32, UJ_F32}, {2, 1, 0}, {2, 0, 0}},
    {{UJ_F32, UJ_F32, UJ_F32}, {2, 1, 2}, {0, 1, 2}},
    {{UJ_F32, UJ_F32, UJ_F64}, {3, 2, 3}, {0, 0, 3}},
    {{UJ_F32, UJ_F32, UJ_F32}, {1, 1, 1}, {0, 0, 0}},
    {{UJ_F64, UJ_F64, UJ_F64}, {1, 1, 0}, {0, 1, 0}},
    {{UJ_F32, UJ_F32, UJ_F32}, {0, 0, 0}, {0, 0, 0}},
    {{UJ_F32, UJ_F32, UJ_F32}, {2, 2, 1}, {1, 2, 1}},
    {{UJ_F32, UJ_F64, UJ_F32}, {3, 2, 1}, {2, 2, 0}},
    {{UJ_F32, UJ_F32, UJ_F64}, {1, 0, 1}, {0, 0, 0}},
    {{UJ_F64, UJ_F64, UJ_F64}, {2, 2, 2}, {0, 0, 0}},
};
#define NCASES ((int)(sizeof cases / sizeof *cases))

typedef struct {
  uj_program_t* program;
  uj_engine_t engine;
  int index, iterations;
  uint64_t seed;
  int failures;
  char first_failure[256];
} worker_t;

/* Threads do not touch the harness: each keeps its first failure for the
 * main thread to report. */
static void fail(worker_t* w, int iteration, int c, const char* what, const char* detail, double got, double want) {
  if (w->failures++ == 0)
    snprintf(w->first_failure, sizeof w->first_failure, "thread %d, iteration %d, case %d: %s%s (got %.17g, want %.17g)",
             w->index, iteration, c, what, detail ? detail : "", got, want);
}

static double read_value(const void* data, uj_dtype_t dt, int64_t i) {
  return dt == UJ_F64 ? ((const double*)data)[i] : (double)((const float*)data)[i];
}

static void write_value(void* data, uj_dtype_t dt, int64_t i, double v) {
  if (dt == UJ_F64) ((double*)data)[i] = v;
  else ((float*)data)[i] = (float)v;
}

/* The flat index into an input of rank ndim, right-aligned against the
 * output's index `at`; axes of size 1 read index 0. */
static int64_t broadcast_index(const uj_tensor_t* t, int out_ndim, const int64_t* at) {
  int64_t flat = 0;
  for (int k = 0; k < t->ndim; k++) {
    int64_t i = t->dims[k] == 1 ? 0 : at[out_ndim - t->ndim + k];
    flat = flat * t->dims[k] + i;
  }
  return flat;
}

/* One call on case c with fresh sizes and values; 1 when every check held. */
static int run_case(worker_t* w, uj_ctx_t* ctx, int iteration, int c) {
  const signature_case_t* sc = &cases[c];
  int64_t extent[UJ_MAX_DIMS];
  for (int k = 0; k < UJ_MAX_DIMS; k++) extent[k] = harness_int(&w->seed, 2, 6);
  int out_ndim = 0;
  uj_dtype_t out_dtype = UJ_F32;
  for (int i = 0; i < INPUTS; i++) {
    if (sc->ndim[i] > out_ndim) out_ndim = sc->ndim[i];
    if (sc->dtype[i] == UJ_F64) out_dtype = UJ_F64;
  }
  uj_tensor_t in[INPUTS];
  const uj_tensor_t* in_list[INPUTS];
  int64_t out_dims[UJ_MAX_DIMS];
  for (int k = 0; k < out_ndim; k++) out_dims[k] = 1;
  for (int i = 0; i < INPUTS; i++) {
    in[i] = (uj_tensor_t){NULL, sc->dtype[i], UJ_CPU, sc->ndim[i], {0}};
    int64_t n = 1;
    for (int k = 0; k < sc->ndim[i]; k++) {
      int out_axis = out_ndim - sc->ndim[i] + k;
      in[i].dims[k] = sc->ones[i] >> k & 1 ? 1 : extent[out_axis];
      if (in[i].dims[k] > 1) out_dims[out_axis] = in[i].dims[k];
      n *= in[i].dims[k];
    }
    in[i].data = malloc((size_t)n * (size_t)uj_dtype_size(sc->dtype[i]));
    for (int64_t e = 0; e < n && in[i].data; e++)
      write_value(in[i].data, sc->dtype[i], e, (double)harness_int(&w->seed, -16, 16) / 8.0);
    in_list[i] = &in[i];
  }
  int64_t numel = 1;
  for (int k = 0; k < out_ndim; k++) numel *= out_dims[k];
  /* every other call writes y over a when they match (an in-place update),
   * which asks the program's table of aliasing answers; a_values keeps a
   * as it was for the expected values */
  int in_place = iteration % 2 && in[0].dtype == out_dtype && in[0].ndim == out_ndim &&
                 !memcmp(in[0].dims, out_dims, sizeof out_dims[0] * (size_t)out_ndim);
  size_t out_bytes = (size_t)numel * (size_t)uj_dtype_size(out_dtype);
  void* a_copy = in_place ? malloc(out_bytes) : NULL;
  if (a_copy && in[0].data) memcpy(a_copy, in[0].data, out_bytes);
  const void* a_values = in_place ? a_copy : in[0].data;
  void* y_data = in_place ? in[0].data : malloc(out_bytes);
  uj_tensor_t y = {y_data, out_dtype, UJ_CPU, out_ndim, {0}};
  uj_tensor_t z = {malloc(out_bytes), out_dtype, UJ_CPU, out_ndim, {0}};
  memcpy(y.dims, out_dims, sizeof out_dims[0] * (size_t)out_ndim);
  memcpy(z.dims, out_dims, sizeof out_dims[0] * (size_t)out_ndim);
  uj_tensor_t* out_list[] = {&y, &z};
  int ok = in[0].data && in[1].data && in[2].data && y.data && z.data && (a_copy || !in_place);
  if (!ok) fail(w, iteration, c, "out of memory", NULL, 0, 0);

  /* the questions other than a run go through the same specializations */
  uj_dtype_t dt;
  if (ok && (uj_program_output_dtype(w->program, UJ_FORWARD, in_list, 1, &dt) != UJ_OK || dt != out_dtype)) {
    fail(w, iteration, c, "output dtype: ", uj_last_error(), dt, out_dtype);
    ok = 0;
  }
  int shape_ndim = -1;
  int64_t shape[UJ_MAX_DIMS];
  if (ok && (uj_program_shape(w->program, UJ_FORWARD, in_list, NULL, 0, &shape_ndim, shape) != UJ_OK ||
             shape_ndim != out_ndim || memcmp(shape, out_dims, sizeof shape[0] * (size_t)out_ndim))) {
    fail(w, iteration, c, "output shape: ", uj_last_error(), shape_ndim, out_ndim);
    ok = 0;
  }
  if (ok && iteration % 8 == 0) {
    char* dump = uj_program_dump(ctx, w->program, UJ_FORWARD, UJ_DUMP_IR, NULL);
    if (!dump || !*dump) fail(w, iteration, c, "dump: ", uj_last_error(), 0, 0), ok = 0;
    free(dump);
  }
  if (ok) {
    uj_status_t s = uj_program_run(ctx, w->program, UJ_FORWARD, in_list, INPUTS, NULL, 0, out_list, 2);
    if (s != UJ_OK) fail(w, iteration, c, "run: ", uj_last_error(), s, UJ_OK), ok = 0;
  }
  int64_t at[UJ_MAX_DIMS];
  for (int64_t e = 0; e < numel && ok; e++) {
    int64_t rest = e;
    for (int k = out_ndim - 1; k >= 0; k--) {
      at[k] = rest % out_dims[k];
      rest /= out_dims[k];
    }
    double a = read_value(a_values, in[0].dtype, broadcast_index(&in[0], out_ndim, at));
    double b = read_value(in[1].data, in[1].dtype, broadcast_index(&in[1], out_ndim, at));
    double cv = read_value(in[2].data, in[2].dtype, broadcast_index(&in[2], out_ndim, at));
    double want_y = a * b + cv, want_z = a - cv > 0.5 * b ? a - cv : 0.5 * b;
    double got_y = read_value(y.data, out_dtype, e), got_z = read_value(z.data, out_dtype, e);
    char where[48];
    snprintf(where, sizeof where, "element %lld", (long long)e);
    if (got_y != want_y) fail(w, iteration, c, "y at ", where, got_y, want_y), ok = 0;
    else if (got_z != want_z) fail(w, iteration, c, "z at ", where, got_z, want_z), ok = 0;
  }
  for (int i = 0; i < INPUTS; i++) free(in[i].data);
  if (!in_place) free(y.data);
  free(a_copy);
  free(z.data);
  return ok;
}

static void* worker_main(void* arg) {
  worker_t* w = arg;
  uj_ctx_t* ctx = uj_ctx_new();
  /* odd threads run the IR as emitted: they ask the shared specializations
   * about other functions than the even ones */
  if (!ctx || uj_ctx_set_engine(ctx, w->engine) != UJ_OK || uj_ctx_set_passes(ctx, w->index % 2 == 0) != UJ_OK) {
    fail(w, 0, 0, "context: ", uj_last_error(), 0, 0);
    uj_ctx_free(ctx);
    return NULL;
  }
  /* threads start on different signatures and move on each iteration, so
   * that at any moment they use about as many signatures as are cached */
  for (int it = 0; it < w->iterations && w->failures == 0; it++)
    run_case(w, ctx, it, (w->index * 5 + it) % NCASES);
  uj_ctx_free(ctx);
  return NULL;
}

static int iterations(void) {
  const char* env = getenv("UOPJIT_TEST_THREAD_ITERATIONS");
  char* end;
  long n = env ? strtol(env, &end, 10) : 0;
  if (env && (*end || n < 1 || n > 1000000)) {
    printf("  UOPJIT_TEST_THREAD_ITERATIONS=%s is not a count in 1..1000000; using %d\n", env, DEFAULT_ITERATIONS);
    n = 0;
  }
  return n ? (int)n : DEFAULT_ITERATIONS;
}

/* engines[t % count] for thread t. */
static void run_shared(const uj_engine_t* engines, int count) {
  uj_program_t* program = NULL;
  CHECK(uj_program_parse(source, &program) == UJ_OK);
  if (!program) return;
  int n = iterations();
  uint64_t seed = 0x5eed0000u + (uint64_t)n;
  HARNESS_SEED(seed);
  worker_t workers[THREADS];
  pthread_t threads[THREADS];
  int started[THREADS];
  for (int t = 0; t < THREADS; t++) {
    workers[t] = (worker_t){program, engines[t % count], t, n, seed * 31 + (uint64_t)t, 0, ""};
    started[t] = pthread_create(&threads[t], NULL, worker_main, &workers[t]) == 0;
    CHECK(started[t]);
  }
  for (int t = 0; t < THREADS; t++)
    if (started[t]) pthread_join(threads[t], NULL);
  for (int t = 0; t < THREADS; t++) {
    if (workers[t].failures) printf("  %s (%d failures)\n", workers[t].first_failure, workers[t].failures);
    CHECK(workers[t].failures == 0);
  }
  uj_program_free(program);
}

static int available(uj_engine_t e) {
  uj_ctx_t* ctx = uj_ctx_new();
  int yes = ctx && uj_engine_available(ctx, e);
  uj_ctx_free(ctx);
  return yes;
}

TEST(shared_parsed_program_mir) {
  SKIP_IF(!available(UJ_ENGINE_MIR), "the MIR engine is not in this build");
  const uj_engine_t e = UJ_ENGINE_MIR;
  run_shared(&e, 1);
}

TEST(shared_parsed_program_c) {
  SKIP_IF(!available(UJ_ENGINE_C), "the C engine is not available (no C compiler found)");
  const uj_engine_t e = UJ_ENGINE_C;
  run_shared(&e, 1);
}

/* Contexts on different engines share the specializations' memos. */
TEST(shared_parsed_program_mixed_engines) {
  uj_engine_t engines[3];
  int count = 0;
  engines[count++] = UJ_ENGINE_INTERP;
  if (available(UJ_ENGINE_MIR)) engines[count++] = UJ_ENGINE_MIR;
  if (available(UJ_ENGINE_C)) engines[count++] = UJ_ENGINE_C;
  run_shared(engines, count);
}

TEST_MAIN()
