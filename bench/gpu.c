/* bench/gpu.c: the benchmark's GPU section (the CUDA engine), after the
 * CPU tables, or alone with `bench --gpu`. Without a CUDA device it prints
 * one line saying so. It measures the device's copy bandwidth, each
 * program's throughput and traffic-matched kernel, the row programs and an
 * Adam step over a model (gpu_rows.c), compile times and the cost of a
 * launch (above bench_gpu). Everything goes through the public API. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { COPY_N_LOG2 = 26, TINY_N = 16, MAX_REPS = 16, LAUNCH_CALLS = 1000 };

/* A workspace's tensors on the GPU: the inputs' initial values copied
 * over; an in-place output is its input's GPU tensor. */
typedef struct {
  uj_ctx_t* ctx;
  int nin, nout;
  uj_tensor_t in[BENCH_MAX_IO], out[BENCH_MAX_IO];
  const uj_tensor_t* in_ptr[BENCH_MAX_IO];
  uj_tensor_t* out_ptr[BENCH_MAX_IO];
} gpu_io_t;

static void gpu_io_free(gpu_io_t* g, const workspace_t* ws) {
  for (int i = 0; i < g->nin; i++) uj_tensor_free(g->ctx, &g->in[i]);
  for (int o = 0; o < g->nout; o++)
    if (ws->output_alias[o] < 0) uj_tensor_free(g->ctx, &g->out[o]);
  memset(g, 0, sizeof *g);
}

static int gpu_io_new(uj_ctx_t* ctx, const workspace_t* ws, gpu_io_t* g) {
  memset(g, 0, sizeof *g);
  g->ctx = ctx;
  uj_status_t s = UJ_OK;
  for (int i = 0; i < ws->ninputs && s == UJ_OK; i++) {
    s = uj_tensor_alloc(ctx, UJ_CUDA, UJ_F32, ws->inputs[i].ndim, ws->inputs[i].dims, &g->in[i]);
    g->nin = i + (s == UJ_OK);
    if (s == UJ_OK) s = uj_tensor_copy(ctx, &g->in[i], &ws->inputs[i]);
    g->in_ptr[i] = &g->in[i];
  }
  for (int o = 0; o < ws->noutputs && s == UJ_OK; o++) {
    int alias = ws->output_alias[o];
    if (alias >= 0) g->out[o] = g->in[alias];
    else s = uj_tensor_alloc(ctx, UJ_CUDA, UJ_F32, ws->outputs[o].ndim, ws->outputs[o].dims, &g->out[o]);
    g->nout = o + (s == UJ_OK);
    /* an in-place output names its input's tensor, so that the call sees one buffer */
    g->out_ptr[o] = alias >= 0 ? &g->in[alias] : &g->out[o];
  }
  if (s != UJ_OK) {
    fprintf(stderr, "bench: GPU tensors: %s\n", uj_last_error());
    gpu_io_free(g, ws);
    return -1;
  }
  return 0;
}

static uj_status_t gpu_run(uj_program_t* p, gpu_io_t* g) {
  return uj_program_run(g->ctx, p, UJ_FORWARD, g->in_ptr, g->nin, NULL, 0, g->out_ptr, g->nout);
}

/* Median nanoseconds per call over `samples` batches of `calls` calls, each
 * batch ending with a synchronize; negative on a failure. */
static double per_call_ns(uj_program_t* p, gpu_io_t* g, int calls, int samples, int sync_each) {
  double t[MAX_REPS];
  if (samples > MAX_REPS) samples = MAX_REPS;
  for (int r = 0; r < samples; r++) {
    double start = bench_now_ns();
    for (int c = 0; c < calls; c++) {
      if (gpu_run(p, g) != UJ_OK) return -1;
      if (sync_each && uj_ctx_synchronize(g->ctx) != UJ_OK) return -1;
    }
    if (uj_ctx_synchronize(g->ctx) != UJ_OK) return -1;
    t[r] = (bench_now_ns() - start) / calls;
  }
  return bench_median(t, samples);
}

/* GB/s of a device-to-device copy of n floats (read + write). */
static double copy_gbs(uj_ctx_t* ctx, int64_t n, int samples) {
  uj_tensor_t a, b;
  if (uj_tensor_alloc(ctx, UJ_CUDA, UJ_F32, 1, &n, &a) != UJ_OK) return -1;
  if (uj_tensor_alloc(ctx, UJ_CUDA, UJ_F32, 1, &n, &b) != UJ_OK) {
    uj_tensor_free(ctx, &a);
    return -1;
  }
  double t[MAX_REPS], result = -1;
  int ok = uj_tensor_copy(ctx, &b, &a) == UJ_OK && uj_ctx_synchronize(ctx) == UJ_OK; /* warm-up */
  if (samples > MAX_REPS) samples = MAX_REPS;
  for (int r = 0; r < samples && ok; r++) {
    double start = bench_now_ns();
    for (int c = 0; c < 10 && ok; c++) ok = uj_tensor_copy(ctx, c % 2 ? &a : &b, c % 2 ? &b : &a) == UJ_OK;
    ok = ok && uj_ctx_synchronize(ctx) == UJ_OK;
    t[r] = (bench_now_ns() - start) / 10;
  }
  if (ok) result = 2.0 * 4.0 * (double)n / bench_median(t, samples);
  uj_tensor_free(ctx, &a);
  uj_tensor_free(ctx, &b);
  return result;
}

/* The program on GPU tensors at n elements (its 0-d inputs as the CPU
 * section gives them): checked against the program in f64 on the CPU,
 * then timed (gpu_rows.c). 0, or -1 on a failure or mismatch. */
static int program_row(uj_ctx_t* ctx, const program_spec_t* spec, int64_t n, int samples, double copy) {
  program_text_t text;
  uj_program_t* p = NULL;
  if (program_text_load(spec, &text) != 0) return -1;
  int status = -1;
  if (uj_program_parse(text.source, &p) != UJ_OK || uj_program_io_count(p, 0) > 8) {
    fprintf(stderr, "bench: %s: %s\n", spec->name, p ? "more than 8 inputs" : uj_last_error());
    goto done;
  }
  char shape[32];
  snprintf(shape, sizeof shape, "2^%d", __builtin_ctzll((unsigned long long)n));
  /* f32 partial sums of up to ~2000 terms a thread at 2^28 (then merged in
   * a tree) stay within 1e-4 of the f64 sum; elementwise results, 1e-5 */
  gpu_case_t c = {spec->name, shape, text.source, uj_program_io_count(p, 0), {{0}}, (double)spec->bytes_per_element * (double)n,
                  spec->tolerance_per_element > 0 ? 1e-4 : spec->tolerance};
  for (int i = 0; i < c.ninputs; i++) {
    const char* name = uj_program_io_name(p, 0, i);
    int scalar = 0;
    for (int k = 0; k < text.nscalars; k++) scalar |= strcmp(text.scalars[k], name) == 0;
    c.inputs[i] = (gpu_input_t){name, scalar ? 0 : 1, {n}, 0, 0};
    if (scalar) c.inputs[i].fixed = bench_named_scalar(name, &c.inputs[i].value);
  }
  status = gpu_case_row(ctx, &c, copy, samples) > 0 ? 0 : -1;
done:
  uj_program_free(p);
  program_text_free(&text);
  return status;
}

/* parse + first run + synchronize on 16 elements in ctx, in ns (the GPU
 * tensors are made first, outside the span); the program is left in *p.
 * Negative on a failure. */
static double first_run_ns(uj_ctx_t* ctx, const program_text_t* text, const workspace_t* ws, uj_program_t** p,
                           gpu_io_t* g) {
  if (gpu_io_new(ctx, ws, g) != 0) return -1;
  double start = bench_now_ns();
  uj_status_t s = uj_program_parse(text->source, p);
  if (s == UJ_OK) s = gpu_run(*p, g);
  if (s == UJ_OK) s = uj_ctx_synchronize(ctx);
  double elapsed = bench_now_ns() - start;
  if (s != UJ_OK) {
    fprintf(stderr, "bench: GPU compile: %s\n", uj_last_error());
    return -1;
  }
  return elapsed;
}

/* Compile times and launch overhead of the first program. */
static int compile_and_launch(const program_spec_t* spec, const char* cache_root, int reps, int launch) {
  program_text_t text;
  workspace_t ws;
  if (program_text_load(spec, &text) != 0) return -1;
  if (workspace_new(&text, TINY_N, &ws) != 0) {
    program_text_free(&text);
    return -1;
  }
  const char* previous = getenv("UOPJIT_CACHE_DIR");
  char* saved = previous ? strdup(previous) : NULL;
  double cold[MAX_REPS], disk[MAX_REPS], memory[MAX_REPS], queue_ns = -1, sync_ns = -1;
  int failed = 0;
  if (reps > MAX_REPS) reps = MAX_REPS;
  for (int r = 0; r < reps && !failed; r++) {
    char* dir = bench_make_dir(cache_root, "gpu");
    if (!dir) {
      failed = 1;
      break;
    }
    setenv("UOPJIT_CACHE_DIR", dir, 1);
    uj_ctx_t* a = uj_ctx_new();
    uj_ctx_t* b = uj_ctx_new();
    uj_program_t *pa = NULL, *pb = NULL, *pc = NULL;
    gpu_io_t ga, gb, gc;
    memset(&ga, 0, sizeof ga), memset(&gb, 0, sizeof gb), memset(&gc, 0, sizeof gc);
    cold[r] = a && b ? first_run_ns(a, &text, &ws, &pa, &ga) : -1;
    disk[r] = cold[r] >= 0 ? first_run_ns(b, &text, &ws, &pb, &gb) : -1;
    memory[r] = disk[r] >= 0 ? first_run_ns(b, &text, &ws, &pc, &gc) : -1;
    failed = cold[r] < 0 || disk[r] < 0 || memory[r] < 0;
    if (launch && r == 0 && !failed) {
      queue_ns = per_call_ns(pc, &gc, LAUNCH_CALLS, 5, 0);
      sync_ns = per_call_ns(pc, &gc, LAUNCH_CALLS / 10, 5, 1);
      failed = queue_ns < 0 || sync_ns < 0;
    }
    if (ga.ctx) gpu_io_free(&ga, &ws);
    if (gb.ctx) gpu_io_free(&gb, &ws);
    if (gc.ctx) gpu_io_free(&gc, &ws);
    uj_program_free(pa), uj_program_free(pb), uj_program_free(pc);
    uj_ctx_free(a), uj_ctx_free(b);
    bench_remove_dir(dir);
    free(dir);
  }
  if (saved) setenv("UOPJIT_CACHE_DIR", saved, 1);
  else unsetenv("UOPJIT_CACHE_DIR");
  free(saved);
  if (!failed) {
    printf("  compile (%s, 16 elements, median of %d): cold %.1f ms (NVRTC), disk %.2f ms, memory %.1f us\n",
           spec->name, reps, bench_median(cold, reps) / 1e6, bench_median(disk, reps) / 1e6,
           bench_median(memory, reps) / 1e3);
    if (launch)
      printf("  launch (%s, 16 elements): %.2f us per call queued, %.2f us per call and synchronize\n", spec->name,
             queue_ns / 1e3, sync_ns / 1e3);
  }
  workspace_free(&ws);
  program_text_free(&text);
  return failed ? -1 : 0;
}

/* The kernel that reads and writes exactly what the program does, with at
 * most an add per element: sigmoid reads x and writes y; Adam reads p, g, m,
 * v and writes p, m, v; sumsq reads x. */
static const char* traffic_source(const char* name) {
  if (strcmp(name, "sigmoid") == 0) return "y = x";
  if (strcmp(name, "adam") == 0) return "p = p + g; m = m + g; v = v + g";
  if (strcmp(name, "sumsq") == 0) return "s = sum(x)";
  return NULL;
}

static void traffic_row(uj_ctx_t* ctx, const program_spec_t* spec, int64_t n, int samples, double copy) {
  const char* source = traffic_source(spec->name);
  if (!source) return;
  char label[64], shape[32];
  snprintf(label, sizeof label, "  traffic kernel, %dB", spec->bytes_per_element);
  snprintf(shape, sizeof shape, "2^%d", __builtin_ctzll((unsigned long long)n));
  /* every name the three sources read; a row uses those its source does */
  gpu_case_t c = {label,
                  shape,
                  source,
                  5,
                  {{"x", 1, {n}, 0, 0}, {"p", 1, {n}, 0, 0}, {"g", 1, {n}, 0, 0}, {"m", 1, {n}, 0, 0}, {"v", 1, {n}, 0, 0}},
                  (double)spec->bytes_per_element * (double)n,
                  1e-4};
  gpu_case_row(ctx, &c, copy, samples);
}

/* Softmax and layernorm over the rows of 8192x8192, 65536x1024 and
 * 1024x65536 (square, many short rows, few long ones), and a model's Adam
 * step. */
static int model_rows(uj_ctx_t* ctx, const program_spec_t* const* programs, int nprograms, int samples, double copy) {
  static const int64_t shapes[][2] = {{8192, 8192}, {65536, 1024}, {1024, 65536}};
  /* the CPU bench's row programs (bench/softmax.uj, bench/layernorm.uj), at the GPU's size */
  static const struct {
    const char* name;
    double tolerance;
  } rows[] = {{"softmax", 1e-5}, {"layernorm", 1e-4}};
  int status = 0;
  for (size_t k = 0; k < sizeof rows / sizeof *rows; k++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.uj", BENCH_SOURCE_DIR, rows[k].name);
    char* source = bench_read_file(path);
    if (!source) {
      status = 1;
      continue;
    }
    for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++) {
      const int64_t r = shapes[sh][0], c = shapes[sh][1];
      char label[32];
      snprintf(label, sizeof label, "%lldx%lld", (long long)r, (long long)c);
      gpu_case_t row = {rows[k].name,
                        label,
                        source,
                        3,
                        {{"x", 2, {r, c}, 0, 0}, {"w", 1, {c}, 0, 0}, {"b", 1, {c}, 0, 0}},
                        8.0 * (double)(r * c),
                        rows[k].tolerance};
      if (gpu_case_row(ctx, &row, copy, samples) < 0) status = 1;
    }
    free(source);
  }
  for (int p = 0; p < nprograms; p++) {
    if (strcmp(programs[p]->name, "adam") != 0) continue;
    program_text_t text;
    if (program_text_load(programs[p], &text) != 0) return 1;
    if (gpu_gpt2_adam_row(ctx, text.source, copy, samples) != 0) status = 1;
    program_text_free(&text);
  }
  return status;
}

/*   copy      a device-to-device copy of 2^26 floats (uj_tensor_copy, a
 *             cuMemcpyDtoD), counted as a read and a write: the bandwidth
 *             the fused kernels are measured against; and the engine's own
 *             copy kernel (y = x) beside it.
 *   programs  each bench/<name>.uj at 2^24, 2^26 and 2^28 elements (2^24
 *             only with --short) on GPU tensors (f32): time per call
 *             (batches of calls, then one synchronize, the median batch),
 *             GB/s for the bytes per element the CPU section counts, and
 *             that as a share of the copy's bandwidth. Before timing, one
 *             run's outputs are copied back and checked against the best
 *             CPU engine's on the same inputs. Each program's traffic-matched
 *             kernel (the same arrays read and written, an add at most per
 *             element) follows it: the ceiling that program can reach.
 *   rows      softmax and layernorm over the rows of 8192x8192, 65536x1024
 *             and 1024x65536, and one Adam step over GPT-2 small's 148
 *             parameter tensors, one call per tensor (gpu_rows.c); not with
 *             --short.
 *   compile   of each program: cold (a new context, an empty disk cache:
 *             emit, NVRTC, load, launch on 16 elements), disk (a new
 *             context on the same cache: the cubin from disk), memory (a new
 *             program in the warm context: the in-memory cache), each the
 *             parse plus the first run and a synchronize, median over the
 *             repetitions.
 *   launch    the cost of a call on 16 elements with the kernel resident:
 *             queueing only (batches of calls, one synchronize after), and
 *             a call followed by a synchronize (first program only). */
int bench_gpu(const program_spec_t* const* programs, int nprograms, bench_gpu_mode_t mode) {
  int short_run = mode != BENCH_GPU_FULL;
  uj_ctx_t* ctx = uj_ctx_new();
  char name[256];
  int arch = 0, sms = 0;
  printf("\nGPU (CUDA engine)\n");
  if (!ctx || !uj_engine_available(ctx, UJ_ENGINE_CUDA) || uj_ctx_device(ctx, name, sizeof name, &arch, &sms) != UJ_OK) {
    uj_status_t s = ctx ? uj_ctx_set_engine(ctx, UJ_ENGINE_CUDA) : UJ_ERR_OOM;
    printf("  no CUDA device: GPU section skipped (%s)\n", s == UJ_OK ? "no device" : uj_last_error());
    uj_ctx_free(ctx);
    return 0;
  }
  int samples = short_run ? 3 : 9, status = 0;
  int64_t n = (int64_t)1 << COPY_N_LOG2;
  printf("  %s, sm_%d, %d multiprocessors\n", name, arch, sms);
  double copy = copy_gbs(ctx, n, samples);
  if (copy > 0) printf("  %-22s %-12s %9.3f ms  %8.1f GB/s  (cuMemcpyDtoD, read + write)\n", "copy", "2^26",
                       2.0 * 4.0 * (double)n / copy / 1e6, copy);
  else status = 1, fprintf(stderr, "bench: GPU copy: %s\n", uj_last_error());
  gpu_case_t copy_kernel = {"copy kernel: y = x", "2^26", "y = x", 1, {{"x", 1, {n}, 0, 0}}, 8.0 * (double)n, 0};
  if (gpu_case_row(ctx, &copy_kernel, copy, samples) < 0) status = 1;
  static const int full_sizes[] = {24, 26, 28};
  int nsizes = short_run ? 1 : 3;
  for (int p = 0; p < nprograms; p++)
    for (int k = 0; k < nsizes; k++) {
      int64_t size = (int64_t)1 << full_sizes[k];
      if (program_row(ctx, programs[p], size, samples, copy) != 0) status = 1;
      traffic_row(ctx, programs[p], size, samples, copy);
    }
  if (mode != BENCH_GPU_SHORT && model_rows(ctx, programs, nprograms, samples, copy) != 0) status = 1;
  const char* tmp = getenv("TMPDIR");
  char* root = bench_make_dir(tmp && *tmp ? tmp : "/tmp", "uopjit-bench-gpu");
  if (!root) status = 1;
  for (int p = 0; p < nprograms && root; p++)
    if (compile_and_launch(programs[p], root, short_run ? 3 : 7, p == 0) != 0) status = 1;
  if (root) bench_remove_dir(root);
  free(root);
  uj_ctx_free(ctx);
  return status;
}
