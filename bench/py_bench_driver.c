/* bench/py_bench_driver.c: the sigmoid kernel of bench/py_bench.py run from C
 * inside the Python process, so that Python's uopjit.Kernel and plain C calls
 * of uj_program_run can be timed in alternating batches on the same arrays,
 * threads and engine, under the same machine load.
 *
 * py_bench.py compiles this file with cc -O2 against build/libuopjit.so and
 * loads it with ctypes. The driver parses the program once, binds its inputs
 * by name (x the array, a and b 0-d f32 scalars, as the Python package passes
 * Python numbers beside f32 arrays), builds the tensors once, and times each
 * uj_program_run with clock_gettime, so no Python runs on the C side. */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "uopjit.h"

typedef struct {
  uj_ctx_t* ctx;
  uj_program_t* program;
} driver_t;

/* A context on the C engine with `threads` threads and the parsed program;
 * NULL on any failure (py_bench.py then notes the driver as failed). */
void* driver_open(const char* source, int threads) {
  driver_t* d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->ctx = uj_ctx_new();
  if (!d->ctx || uj_ctx_set_engine(d->ctx, UJ_ENGINE_C) != UJ_OK || uj_ctx_set_threads(d->ctx, threads) != UJ_OK ||
      uj_program_parse(source, &d->program) != UJ_OK) {
    if (d->ctx) uj_ctx_free(d->ctx);
    free(d);
    return NULL;
  }
  return d;
}

void driver_close(void* handle) {
  driver_t* d = handle;
  if (!d) return;
  uj_program_free(d->program);
  uj_ctx_free(d->ctx);
  free(d);
}

static int compare_i64(const void* a, const void* b) {
  int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

/* Runs y = sigmoid program on x (n f32), a, b `calls` times back to back and
 * writes each call's ns to per_call_ns[0..calls). Returns the median ns, or -1
 * when an input name is not x, a or b or a run fails. */
int64_t driver_run(void* handle, float* x, float a, float b, float* y, int64_t n, int calls, int64_t* per_call_ns) {
  driver_t* d = handle;
  uj_tensor_t tx = {x, UJ_F32, UJ_CPU, 1, {n}};
  uj_tensor_t ta = {&a, UJ_F32, UJ_CPU, 0, {0}};
  uj_tensor_t tb = {&b, UJ_F32, UJ_CPU, 0, {0}};
  uj_tensor_t ty = {y, UJ_F32, UJ_CPU, 1, {n}};
  int count = uj_program_io_count(d->program, 0);
  if (count != 3 || calls <= 0) return -1;
  const uj_tensor_t* inputs[3];
  for (int i = 0; i < count; i++) {
    const char* name = uj_program_io_name(d->program, 0, i);
    if (!name) return -1;
    if (strcmp(name, "x") == 0) inputs[i] = &tx;
    else if (strcmp(name, "a") == 0) inputs[i] = &ta;
    else if (strcmp(name, "b") == 0) inputs[i] = &tb;
    else return -1;
  }
  uj_tensor_t* outputs[] = {&ty};
  for (int c = 0; c < calls; c++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uj_status_t s = uj_program_run(d->ctx, d->program, UJ_FORWARD, inputs, 3, NULL, 0, outputs, 1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (s != UJ_OK) return -1;
    per_call_ns[c] = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
  }
  int64_t* sorted = malloc(sizeof *sorted * (size_t)calls);
  if (!sorted) return -1;
  memcpy(sorted, per_call_ns, sizeof *sorted * (size_t)calls);
  qsort(sorted, (size_t)calls, sizeof *sorted, compare_i64);
  int64_t median = sorted[calls / 2];
  free(sorted);
  return median;
}
