/* tests/test_mir.c: what is particular to the MIR engine, beyond the oracle
 * tests every engine runs (test_engines*.c): MIR's errors become statuses,
 * contexts are recycled after a bounded number of modules while kernels
 * from retired ones keep working, one kernel runs on many threads at once
 * while others compile, and the text dump holds nothing of the user's. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/uopjit.h"
#include "../jit/jit.h"
#include "harness.h"

#define SKIP_WITHOUT_MIR() SKIP_IF(!uj_engine_available(NULL, UJ_ENGINE_MIR), "this build has no MIR")

TEST(mir_error_becomes_status) {
  SKIP_WITHOUT_MIR();
  CHECK(jit_mir_provoke_error() == UJ_ERR_COMPILE);
  CHECK(strstr(uj_last_error(), "engine mir: MIR error") != NULL);
  /* the process and the engine carry on */
  CHECK(jit_mir_provoke_error() == UJ_ERR_COMPILE);
}

/* y[i] = 2 x[i + $k]: one kernel per value of $k, since $params are folded. */
static uj_program_t* shifted_double(void) {
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
static int run_shift(uj_ctx_t* ctx, uj_program_t* p, const float* xv, int64_t n, int64_t k) {
  float* yv = malloc(sizeof *yv * (size_t)n);
  uj_tensor_t tx = {(void*)xv, UJ_F32, UJ_CPU, 1, {n}}, ty = {yv, UJ_F32, UJ_CPU, 1, {n - k}};
  const uj_tensor_t* in[] = {&tx};
  uj_tensor_t* out[] = {&ty};
  int ok = yv && uj_program_run(ctx, p, UJ_FORWARD, in, 1, &k, 1, out, 1) == UJ_OK;
  for (int64_t i = 0; ok && i < n - k; i++) ok = yv[i] == 2.0f * xv[i + k];
  free(yv);
  return ok;
}

TEST(mir_contexts_recycle) {
  SKIP_WITHOUT_MIR();
  enum { KERNELS = 150, N = 200 };
  uj_ctx_t* ctx = uj_ctx_new();
  uj_program_t* p = shifted_double();
  CHECK(ctx && p && uj_ctx_set_engine(ctx, UJ_ENGINE_MIR) == UJ_OK);
  if (!ctx || !p) return;
  float xv[N];
  for (int i = 0; i < N; i++) xv[i] = (float)i * 0.25f - 7.0f;
  int bad = 0;
  for (int64_t k = 0; k < KERNELS; k++) bad += !run_shift(ctx, p, xv, N, k);
  CHECK(bad == 0);
  jit_state_t* js = jit_state(ctx);
  jit_cache_counts_t counts;
  jit_cache_counts(js->cache, &counts);
  CHECK(counts.memory_entries == KERNELS);
  /* at most 64 modules per MIR context: 150 kernels took at least three */
  CHECK(jit_mir_generations() >= 3);
  /* kernels generated in retired contexts still run, from the cache */
  bad = 0;
  for (int64_t k = 0; k < KERNELS; k++) bad += !run_shift(ctx, p, xv, N, k);
  CHECK(bad == 0);
  jit_cache_counts(js->cache, &counts);
  CHECK(counts.memory_entries == KERNELS);
  uj_program_free(p);
  uj_ctx_free(ctx); /* frees every context; the leak checker of `make debug` watches */
}

typedef struct {
  uj_ctx_t* ctx;
  uj_program_t* p;
  const float* xv;
  int first_k, ok;
} worker_t;

static void* worker(void* arg) {
  worker_t* w = arg;
  w->ok = 1;
  for (int64_t k = w->first_k; k < w->first_k + 40; k++) w->ok &= run_shift(w->ctx, w->p, w->xv, 500, k % 7 + (k & 1) * 11);
  return NULL;
}

TEST(mir_threads_share_kernels) {
  SKIP_WITHOUT_MIR();
  uj_ctx_t* ctx = uj_ctx_new();
  uj_program_t* p = shifted_double();
  CHECK(ctx && p && uj_ctx_set_engine(ctx, UJ_ENGINE_MIR) == UJ_OK);
  if (!ctx || !p) return;
  float xv[500];
  for (int i = 0; i < 500; i++) xv[i] = sinf((float)i);
  worker_t w[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (worker_t){ctx, p, xv, i * 3, 0};
    CHECK(pthread_create(&th[i], NULL, worker, &w[i]) == 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK(w[i].ok);
  }
  uj_program_free(p);
  uj_ctx_free(ctx);
}

TEST(mir_dump_names_nothing_of_the_user) {
  SKIP_WITHOUT_MIR();
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("secret_out = exp(secret_in) * 3", &p) == UJ_OK);
  if (!p) return;
  uj_ctx_t* ctx = uj_ctx_new();
  char* text = uj_program_dump(ctx, p, UJ_FORWARD, UJ_DUMP_MIR, NULL);
  CHECK(text != NULL);
  if (text) {
    CHECK(strstr(text, "func") != NULL);
    CHECK(strstr(text, "secret") == NULL);
  }
  free(text);
  uj_ctx_free(ctx);
  uj_program_free(p);
}

TEST_MAIN()
