/* tests/kernel_cache_check.h: what the tests of the kernel caches share:
 * values for the table that count their frees, a key's hash, a program
 * that makes one kernel per $param value (every value is folded into its
 * kernel, so a loop over values fills a cache), its check, and a context's
 * cache counters. */
#ifndef UJ_TESTS_KERNEL_CACHE_CHECK_H
#define UJ_TESTS_KERNEL_CACHE_CHECK_H

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/uopjit.h"
#include "../jit/jit.h"

/* Table values: ints whose frees are counted. */
static atomic_int values_freed;

static inline void free_value(void* v) {
  atomic_fetch_add(&values_freed, 1);
  free(v);
}

static inline int* new_int(int x) {
  int* p = malloc(sizeof *p);
  if (p) *p = x;
  return p;
}

static inline ir_hash_t hash_of(const char* text) { return ir_hash_bytes(text, strlen(text)); }

/* y[i] = 2 x[i + $k]: one kernel per value of $k, since $params are folded. */
static inline uj_program_t* shifted_double(void) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_F32);
  static const char* const shape[] = {"dA0 - $k"};
  static const char* const index[] = {"i0 + $k"};
  uj_io_t s = uj_reindex(g, x, 1, shape, 1, &x, 1, index);
  uj_io_t y = uj_binary(g, UJ_BINARY_MUL, s, uj_const(g, 2.0));
  static const char* const params[] = {"$k"};
  uj_program_desc_t d = {.input_count = 1, .inputs = &x, .param_count = 1, .params = params, .output_count = 1,
                         .outputs = &y};
  uj_program_t* p = NULL;
  if (uj_program_new(g, &d, &p) != UJ_OK) {
    printf("  %s\n", uj_last_error());
    p = NULL;
  }
  uj_graph_free(g);
  return p;
}

/* Runs p with $k = k on x (n elements); 1 when every output is 2 x[i + k]. */
static inline int run_shift(uj_ctx_t* ctx, uj_program_t* p, const float* xv, int64_t n, int64_t k) {
  float* yv = malloc(sizeof *yv * (size_t)n);
  uj_tensor_t tx = {(void*)xv, UJ_F32, UJ_CPU, 1, {n}}, ty = {yv, UJ_F32, UJ_CPU, 1, {n - k}};
  const uj_tensor_t* in[] = {&tx};
  uj_tensor_t* out[] = {&ty};
  int ok = yv && uj_program_run(ctx, p, UJ_FORWARD, in, 1, &k, 1, out, 1) == UJ_OK;
  if (!ok) printf("  $k = %lld: %s\n", (long long)k, uj_last_error());
  for (int64_t i = 0; ok && i < n - k; i++) ok = yv[i] == 2.0f * xv[i + k];
  free(yv);
  return ok;
}

/* The context's kernel cache counters (zero when it has no JIT state). */
static inline jit_cache_counts_t counts_of(uj_ctx_t* ctx) {
  jit_cache_counts_t k;
  memset(&k, 0, sizeof k);
  jit_state_t* js = jit_state(ctx);
  if (js) jit_cache_counts(js->cache, &k);
  return k;
}

#endif
