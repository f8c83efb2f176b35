/* bench/compile.c: what a JIT engine costs before its kernel runs: the cold
 * compile, a disk-cache hit, the kernel's compile alone and the dispatch of
 * a call (above compile_measure). Each is the median over the repetitions,
 * every repetition in its own directory, removed afterwards. One thread:
 * the pool's size does not enter compilation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { TINY_N = 16, MAX_REPETITIONS = 64, DISPATCH_BATCHES = 15, DISPATCH_CALLS = 200 };

/* A new context on `engine` with its disk cache in the directory
 * UOPJIT_CACHE_DIR names now; NULL on failure. */
static uj_ctx_t* fresh_context(uj_engine_t engine) {
  uj_ctx_t* ctx = uj_ctx_new();
  if (ctx && uj_ctx_set_engine(ctx, engine) != UJ_OK) {
    fprintf(stderr, "bench: %s engine: %s\n", uj_engine_name(engine), uj_last_error());
    uj_ctx_free(ctx);
    return NULL;
  }
  return ctx;
}

/* Parses the program (unless *program is already set) and runs it once in
 * ctx; the elapsed nanoseconds, or a negative value on failure. The program
 * is left in *program. */
static double first_run_ns(uj_ctx_t* ctx, const program_text_t* text, workspace_t* ws, uj_program_t** program) {
  double start = bench_now_ns();
  uj_status_t s = *program ? UJ_OK : uj_program_parse(text->source, program);
  if (s == UJ_OK) s = workspace_run(ctx, *program, ws);
  double elapsed = bench_now_ns() - start;
  if (s == UJ_OK) return elapsed;
  fprintf(stderr, "bench: %s: %s\n", text->spec->name, uj_last_error());
  return -1;
}

static double dispatch_ns(uj_ctx_t* ctx, uj_program_t* program, workspace_t* ws) {
  const uj_tensor_t* inputs[BENCH_MAX_IO];
  uj_tensor_t* outputs[BENCH_MAX_IO];
  for (int i = 0; i < ws->ninputs; i++) inputs[i] = &ws->inputs[i];
  for (int o = 0; o < ws->noutputs; o++) outputs[o] = &ws->outputs[o];
  double per_call[DISPATCH_BATCHES];
  for (int b = 0; b < DISPATCH_BATCHES; b++) {
    double start = bench_now_ns();
    for (int c = 0; c < DISPATCH_CALLS; c++)
      if (uj_program_run(ctx, program, UJ_FORWARD, inputs, ws->ninputs, NULL, 0, outputs, ws->noutputs) != UJ_OK)
        return -1;
    per_call[b] = (bench_now_ns() - start) / DISPATCH_CALLS;
  }
  return bench_median(per_call, DISPATCH_BATCHES);
}

/*   cold      a new context whose disk cache is a fresh, empty directory
 *             (UOPJIT_CACHE_DIR, read when the context's JIT state is made):
 *             the time of uj_program_parse plus the first uj_program_run on
 *             a 16-element tensor, so the run itself is negligible and the
 *             figure is building the loop IR, the passes and the compile.
 *   disk hit  the same in another new context on the same directory, once
 *             the cold context is freed (its kernels unloaded): the kernel
 *             comes from the disk cache and is loaded afresh (C engine; MIR
 *             has none).
 *   kernel    the first uj_program_run, in a new context with another fresh
 *             directory, of the program the cold run parsed: the program
 *             keeps its optimized loop IR, so this is the engine's compile of
 *             the fused kernel alone (key, lowering, code generation or the
 *             C compiler, loading), without parsing and the passes.
 *   dispatch  the per-call time of uj_program_run on the 16-element tensor
 *             in a warm context: the in-memory cache hit plus argument checks
 *             and the call, median of batches of calls. */
void compile_measure(const program_text_t* text, uj_engine_t engine, const char* cache_root, int repetitions,
                     compile_times_t* out) {
  *out = (compile_times_t){.cold_ms = NAN, .disk_ms = NAN, .kernel_ms = NAN, .dispatch_us = NAN};
  if (repetitions > MAX_REPETITIONS) repetitions = MAX_REPETITIONS;
  setenv("UOPJIT_THREADS", "1", 1);
  uj_ctx_t* probe = uj_ctx_new();
  out->available = probe && uj_engine_available(probe, engine);
  uj_ctx_free(probe);
  if (!out->available) return;

  workspace_t ws;
  if (workspace_new(text, TINY_N, &ws) != 0) {
    out->failed = 1;
    return;
  }
  const char* previous = getenv("UOPJIT_CACHE_DIR");
  char* saved_dir = previous ? strdup(previous) : NULL;
  int has_disk_cache = engine == UJ_ENGINE_C;
  double cold[MAX_REPETITIONS], disk[MAX_REPETITIONS], kernel[MAX_REPETITIONS];
  for (int r = 0; r < repetitions && !out->failed; r++) {
    char* dir = bench_make_dir(cache_root, "cold");
    char* kernel_dir = dir ? bench_make_dir(cache_root, "kernel") : NULL;
    if (!kernel_dir) {
      if (dir) bench_remove_dir(dir);
      free(dir);
      out->failed = 1;
      break;
    }
    setenv("UOPJIT_CACHE_DIR", dir, 1);
    uj_program_t *cold_program = NULL, *disk_program = NULL;
    uj_ctx_t* cold_ctx = fresh_context(engine);
    uj_ctx_t* disk_ctx = NULL;
    cold[r] = cold_ctx ? first_run_ns(cold_ctx, text, &ws, &cold_program) : -1;
    /* the cold context goes first, so that its kernels are unloaded and the
     * disk hit loads the shared object afresh, as a new process would */
    uj_ctx_free(cold_ctx);
    if (cold[r] >= 0 && (disk_ctx = fresh_context(engine)) != NULL)
      disk[r] = first_run_ns(disk_ctx, text, &ws, &disk_program);
    else
      disk[r] = -1;
    setenv("UOPJIT_CACHE_DIR", kernel_dir, 1);
    uj_ctx_t* kernel_ctx = cold[r] >= 0 ? fresh_context(engine) : NULL;
    kernel[r] = kernel_ctx ? first_run_ns(kernel_ctx, text, &ws, &cold_program) : -1;
    uj_ctx_free(kernel_ctx);
    if (cold[r] < 0 || disk[r] < 0 || kernel[r] < 0) out->failed = 1;
    if (r == 0 && !out->failed) {
      double ns = dispatch_ns(disk_ctx, disk_program, &ws);
      if (ns < 0) out->failed = 1;
      out->dispatch_us = ns / 1e3;
    }
    uj_program_free(cold_program);
    uj_program_free(disk_program);
    uj_ctx_free(disk_ctx);
    bench_remove_dir(dir);
    bench_remove_dir(kernel_dir);
    free(dir);
    free(kernel_dir);
  }
  if (!out->failed) {
    out->cold_ms = bench_median(cold, repetitions) / 1e6;
    out->kernel_ms = bench_median(kernel, repetitions) / 1e6;
    if (has_disk_cache) out->disk_ms = bench_median(disk, repetitions) / 1e6;
  }
  if (saved_dir) setenv("UOPJIT_CACHE_DIR", saved_dir, 1);
  else unsetenv("UOPJIT_CACHE_DIR");
  free(saved_dir);
  workspace_free(&ws);
}
