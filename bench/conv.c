/* bench/conv.c: the convolution benchmark (`bench --conv`, part of `make
 * bench`): the 3x3 layers of VGG/ResNet-style networks, 56x56x64->64,
 * 28x28x128->128, 14x14x256->256 and 7x7x512->512 (stride 1, padding 1,
 * f32, NHWC), at batch 1 and 8, on every CPU backend, in two tables (every
 * core and one thread, or only --threads N), each from one context on the
 * default engine (so ref runs on MIR when it is there). Per layer, ref runs
 * first and its output is the check: every backend must agree with it
 * within the documented bounds before it is timed (measure). Each table
 * closes with the targets: cpu_winograd at least 2.5x cpu_direct on every
 * layer (all have 64 channels or more), cpu_direct at least 5x ref on the
 * MIR engine; each with the rows that meet it. The GPU rows (cudnn,
 * cuda_winograd) follow, from bench/conv_gpu.c. bench_conv_layer measures
 * one layer the same way for `uopjit bench`'s report (suite_measure.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define SAMPLES 7
#define SAMPLE_NS 30e6
#define REF_RUNS_BATCH1 3
#define WINOGRAD_TARGET 2.5
#define REF_TARGET 5.0

typedef struct {
  int hw, channels;
} layer_t;

static const layer_t layers[] = {{56, 64}, {28, 128}, {14, 256}, {7, 512}};
static const int batches[] = {1, 8};
enum { NLAYERS = sizeof layers / sizeof layers[0], NBATCHES = sizeof batches / sizeof batches[0] };

/* How much a table measures: the full one, or --quick's first look (batch
 * 1 only, fewer and shorter samples, ref timed by its checking run). */
typedef struct {
  int samples;      /* per row, at most SAMPLES */
  double sample_ns; /* each sample at least this long */
  int nbatches;     /* the first this many of batches[] */
  int ref_runs;     /* ref's timed runs at batch 1; 0: its checking run */
} conv_plan_t;
static const conv_plan_t full_plan = {SAMPLES, SAMPLE_NS, NBATCHES, REF_RUNS_BATCH1};
static const conv_plan_t quick_plan = {3, SAMPLE_NS / 3, 1, 0};

/* The rows of one layer at one batch. */
typedef enum { ROW_REF, ROW_DIRECT, ROW_WINOGRAD, ROW_WINOGRAD_NO_KEY, NROWS } row_kind_t;
static const char* const row_backend[NROWS] = {"ref", "cpu_direct", "cpu_winograd", "cpu_winograd"};

typedef struct {
  int ok;            /* ran, and agreed with ref */
  double ms;         /* median */
  double worst;      /* largest |got - ref| / bound */
  const char* note;  /* how it was timed, or why it has no time */
} cell_t;

typedef struct {
  uj_tensor_t x, w, y, ref_y;
  double flops, bound_scale; /* 9C max|x| max|w| */
  uint64_t filter_key;       /* its own per workload: the weights differ */
} workload_t;

static uj_tensor_t tensor_f32(int64_t n, int64_t h, int64_t w, int64_t c) {
  uj_tensor_t t = {NULL, UJ_F32, UJ_CPU, 4, {n, h, w, c}};
  t.data = malloc(sizeof(float) * (size_t)(n * h * w * c));
  return t;
}

static int64_t numel(const uj_tensor_t* t) { return t->dims[0] * t->dims[1] * t->dims[2] * t->dims[3]; }

static uint64_t next_random(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void fill(uj_tensor_t* t, uint64_t* state) {
  float* p = t->data;
  for (int64_t i = 0; i < numel(t); i++) p[i] = (float)((double)(next_random(state) >> 11) * 0x1p-52 - 1.0);
}

static int workload_make(const layer_t* l, int batch, workload_t* wl) {
  uint64_t state = 20260101u + (uint64_t)(l->hw * 131 + batch);
  wl->filter_key = state;
  wl->x = tensor_f32(batch, l->hw, l->hw, l->channels);
  wl->w = tensor_f32(l->channels, 3, 3, l->channels);
  wl->y = tensor_f32(batch, l->hw, l->hw, l->channels);
  wl->ref_y = tensor_f32(batch, l->hw, l->hw, l->channels);
  if (!wl->x.data || !wl->w.data || !wl->y.data || !wl->ref_y.data) return -1;
  fill(&wl->x, &state);
  fill(&wl->w, &state);
  wl->flops = 2.0 * (double)numel(&wl->y) * (double)l->channels * 9.0;
  double mx = 0, mw = 0;
  for (int64_t i = 0; i < numel(&wl->x); i++) mx = fmax(mx, fabs(((float*)wl->x.data)[i]));
  for (int64_t i = 0; i < numel(&wl->w); i++) mw = fmax(mw, fabs(((float*)wl->w.data)[i]));
  wl->bound_scale = 9.0 * (double)l->channels * mx * mw;
  return 0;
}

static void workload_free(workload_t* wl) {
  free(wl->x.data);
  free(wl->w.data);
  free(wl->y.data);
  free(wl->ref_y.data);
}

static int run_once(uj_ctx_t* ctx, workload_t* wl, row_kind_t kind, uj_tensor_t* out) {
  uj_conv2d_desc_t d = {1, 1, 1, 1, kind == ROW_DIRECT || kind == ROW_WINOGRAD ? wl->filter_key : 0};
  uj_status_t s = uj_conv2d(ctx, &d, &wl->x, &wl->w, NULL, out, row_backend[kind]);
  if (s != UJ_OK) fprintf(stderr, "bench conv: %s: %s: %s\n", row_backend[kind], uj_status_str(s), uj_last_error());
  return s == UJ_OK ? 0 : -1;
}

/* Calls per sample for a row: enough to fill sample_ns, judged from one call. */
static int calls_per_sample(uj_ctx_t* ctx, workload_t* wl, row_kind_t kind, double sample_ns) {
  double t0 = bench_now_ns();
  if (run_once(ctx, wl, kind, &wl->y) != 0) return -1;
  double elapsed = bench_now_ns() - t0;
  return elapsed >= sample_ns ? 1 : (int)(sample_ns / fmax(elapsed, 1.0)) + 1;
}

/* Median milliseconds per call of the rows [first, last] that have calls[k]
 * > 0, over nsamples samples taken round-robin: a machine whose load changes
 * during the run then slows each of them alike and their ratio holds. */
static void time_rows(uj_ctx_t* ctx, workload_t* wl, const int* calls, cell_t* cells, int first, int last,
                      int nsamples) {
  double samples[NROWS][SAMPLES];
  for (int s = 0; s < nsamples; s++)
    for (int k = first; k <= last; k++) {
      if (calls[k] <= 0) continue;
      double t0 = bench_now_ns();
      for (int c = 0; c < calls[k] && cells[k].ok; c++) cells[k].ok = run_once(ctx, wl, (row_kind_t)k, &wl->y) == 0;
      samples[k][s] = (bench_now_ns() - t0) / calls[k] * 1e-6;
    }
  for (int k = first; k <= last; k++)
    if (calls[k] > 0 && cells[k].ok) cells[k].ms = bench_median(samples[k], nsamples);
}

/* Largest |y - ref| over the backend's bound (tolerances as include/uopjit.h:
 * 1e-6 per f32 sum, 1e-5 for Winograd; ref's own error counts too). */
static double worst_error(const workload_t* wl, row_kind_t kind) {
  double tol = (kind == ROW_WINOGRAD || kind == ROW_WINOGRAD_NO_KEY ? 1e-5 : 1e-6) + 1e-6;
  const float *a = wl->y.data, *b = wl->ref_y.data;
  double worst = 0;
  for (int64_t i = 0; i < numel(&wl->y); i++) {
    double e = fabs((double)a[i] - (double)b[i]);
    worst = isnan(e) ? INFINITY : fmax(worst, e);
  }
  return worst / (tol * wl->bound_scale);
}

/* The hand-written backends run with a filter_key, so the filter packing
 * (cpu_direct) and transform (cpu_winograd) are kept across calls as an
 * inference loop would keep them; the "no key" row times cpu_winograd with
 * its filter transform in every call. Times are medians of SAMPLES
 * samples, each as many calls as fill SAMPLE_NS (at least one);
 * cpu_direct's and cpu_winograd's samples are taken in turn so that a
 * change in the machine's load touches both. ref is too slow at batch 8 to
 * sample: it is timed by the median of REF_RUNS_BATCH1 runs at batch 1 and
 * by its one checking run at batch 8 (the table says which). */
static void measure(uj_ctx_t* ctx, const layer_t* l, int batch, const conv_plan_t* plan, cell_t* cells) {
  workload_t wl;
  memset(&wl, 0, sizeof wl);
  for (int k = 0; k < NROWS; k++) cells[k] = (cell_t){0, 0, 0, "failed"};
  if (workload_make(l, batch, &wl) != 0) {
    fprintf(stderr, "bench conv: out of memory\n");
    workload_free(&wl);
    return;
  }
  double t0 = bench_now_ns();
  if (run_once(ctx, &wl, ROW_REF, &wl.ref_y) == 0) {
    double first_ms = (bench_now_ns() - t0) * 1e-6; /* includes the MIR compile on the first layer */
    cells[ROW_REF] = (cell_t){1, first_ms, 0, "1 run"};
    if (batch == 1 && plan->ref_runs > 0) {
      double runs[REF_RUNS_BATCH1];
      int ok = 1;
      for (int r = 0; r < plan->ref_runs && ok; r++) {
        t0 = bench_now_ns();
        ok = run_once(ctx, &wl, ROW_REF, &wl.y) == 0;
        runs[r] = (bench_now_ns() - t0) * 1e-6;
      }
      if (ok) cells[ROW_REF] = (cell_t){1, bench_median(runs, plan->ref_runs), 0, "median of 3 runs"};
    }
  }
  int calls[NROWS] = {0};
  for (int k = ROW_DIRECT; k < NROWS && cells[ROW_REF].ok; k++) {
    memset(wl.y.data, 0xff, sizeof(float) * (size_t)numel(&wl.y)); /* NaN: a backend that writes nothing fails */
    if (run_once(ctx, &wl, (row_kind_t)k, &wl.y) != 0) continue;  /* also the warm-up */
    cells[k].worst = worst_error(&wl, (row_kind_t)k);
    if (!(cells[k].worst <= 1.0)) {
      cells[k].note = "MISMATCH";
      continue;
    }
    calls[k] = calls_per_sample(ctx, &wl, (row_kind_t)k, plan->sample_ns);
    cells[k].ok = calls[k] > 0;
    cells[k].note = k == ROW_WINOGRAD_NO_KEY ? "no key, median" : "median";
  }
  /* the pair the target compares by turns; the "no key" row after them,
   * since its own copy of U would push the kept one out of the caches */
  time_rows(ctx, &wl, calls, cells, ROW_DIRECT, ROW_WINOGRAD, plan->samples);
  time_rows(ctx, &wl, calls, cells, ROW_WINOGRAD_NO_KEY, ROW_WINOGRAD_NO_KEY, plan->samples);
  uj_conv2d_forget(ctx, wl.filter_key);
  workload_free(&wl);
}

/* One table: every layer and batch on a fresh context with `threads`
 * threads (0: every core), every backend on the same threads. Returns 0,
 * or 1 when a row failed. "x direct" is cpu_direct's time over the row's
 * (above 1: faster). */
static int conv_table(int threads, const conv_plan_t* plan) {
  char value[16];
  if (threads > 0) {
    snprintf(value, sizeof value, "%d", threads);
    setenv("UOPJIT_THREADS", value, 1); /* read when the context's pool is made */
  } else {
    unsetenv("UOPJIT_THREADS");
  }
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx) return 1;
  static cell_t cells[NBATCHES][NLAYERS][NROWS];
  for (int b = 0; b < plan->nbatches; b++)
    for (int l = 0; l < NLAYERS; l++) {
      if (isatty(2)) fprintf(stderr, "\rbench conv: %s, batch %d, %dx%dx%d ...\033[K", threads ? value : "all threads",
                             batches[b], layers[l].hw, layers[l].hw, layers[l].channels);
      measure(ctx, &layers[l], batches[b], plan, cells[b][l]);
    }
  if (isatty(2)) fprintf(stderr, "\r\033[K");

  int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  printf("\n-- %d thread(s)%s; ref on the %s engine\n", threads ? threads : cores, threads ? "" : " (every core)",
         uj_engine_name(uj_ctx_engine(ctx)));
  printf("%-16s %5s  %-22s %10s %9s %9s %8s\n", "layer", "batch", "backend", "ms", "GFLOP/s", "x direct", "err");
  int status = 0, wino_met = 0, wino_rows = 0, ref_met = 0, ref_rows = 0;
  double wino_min = INFINITY, ref_min = INFINITY;
  for (int b = 0; b < plan->nbatches; b++)
    for (int l = 0; l < NLAYERS; l++) {
      const cell_t* row = cells[b][l];
      char name[32];
      snprintf(name, sizeof name, "%dx%dx%d->%d", layers[l].hw, layers[l].hw, layers[l].channels, layers[l].channels);
      double flops = 2.0 * batches[b] * layers[l].hw * layers[l].hw * 9.0 * layers[l].channels * layers[l].channels;
      for (int k = 0; k < NROWS; k++) {
        char label[40];
        snprintf(label, sizeof label, "%s%s", row_backend[k], k == ROW_WINOGRAD_NO_KEY ? " (no key)" : "");
        if (!row[k].ok) {
          printf("%-16s %5d  %-22s %10s  %s\n", name, batches[b], label, "-", row[k].note);
          status = 1;
          continue;
        }
        double ratio = row[ROW_DIRECT].ok ? row[ROW_DIRECT].ms / row[k].ms : NAN;
        printf("%-16s %5d  %-22s %10.3f %9.1f %8.2fx", name, batches[b], label, row[k].ms, flops / (row[k].ms * 1e6),
               ratio);
        if (k == ROW_REF) printf(" %8s  (%s)\n", "-", row[k].note);
        else printf(" %8.3f\n", row[k].worst);
      }
      if (row[ROW_DIRECT].ok && row[ROW_WINOGRAD].ok) {
        double r = row[ROW_DIRECT].ms / row[ROW_WINOGRAD].ms;
        wino_rows++, wino_met += r >= WINOGRAD_TARGET, wino_min = fmin(wino_min, r);
      }
      if (row[ROW_DIRECT].ok && row[ROW_REF].ok) {
        double r = row[ROW_REF].ms / row[ROW_DIRECT].ms;
        ref_rows++, ref_met += r >= REF_TARGET, ref_min = fmin(ref_min, r);
      }
    }
  printf("targets, this table:\n");
  printf("  cpu_winograd >= %.1fx cpu_direct (filter kept): %d of %d layer/batch rows, lowest %.2fx: %s\n",
         WINOGRAD_TARGET, wino_met, wino_rows, wino_min, wino_met == wino_rows && wino_rows ? "met" : "NOT met");
  printf("  cpu_direct >= %.0fx ref on %s: %d of %d rows, lowest %.1fx: %s\n", REF_TARGET,
         uj_engine_name(uj_ctx_engine(ctx)), ref_met, ref_rows, ref_min,
         ref_met == ref_rows && ref_rows ? "met" : "NOT met");
  uj_ctx_free(ctx);
  return status;
}

int bench_conv_layer(int layer, int batch, int threads, bench_conv_row_t* rows, char* shape, size_t shape_size) {
  if (layer < 0 || layer >= NLAYERS || batch < 1 || threads < 1) return -1;
  char value[16];
  snprintf(value, sizeof value, "%d", threads);
  setenv("UOPJIT_THREADS", value, 1); /* read when the context's pool is made */
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx) return -1;
  cell_t cells[NROWS];
  measure(ctx, &layers[layer], batch, &full_plan, cells);
  const layer_t* l = &layers[layer];
  snprintf(shape, shape_size, "%dx%dx%d->%d, batch %d", l->hw, l->hw, l->channels, l->channels, batch);
  for (int k = 0; k < NROWS; k++)
    rows[k] = (bench_conv_row_t){row_backend[k], k == ROW_WINOGRAD_NO_KEY, cells[k].ok, cells[k].ms, cells[k].worst,
                                 cells[k].note, 2.0 * batch * l->hw * l->hw * 9.0 * l->channels * l->channels,
                                 (int64_t)batch * l->hw * l->hw * l->channels,
                                 k == ROW_REF ? uj_engine_name(uj_ctx_engine(ctx)) : NULL};
  uj_ctx_free(ctx);
  return 0;
}

int bench_conv_main(int argc, char** argv) {
  int threads = -1; /* both tables */
  const conv_plan_t* plan = &full_plan;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc && atoi(argv[i + 1]) > 0) {
      threads = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--quick")) {
      plan = &quick_plan;
    } else {
      fprintf(stderr, "usage: bench --conv [--quick] [--threads N]\n");
      return 2;
    }
  }
  unsetenv("UOPJIT_CONV_BACKEND");
  unsetenv("UOPJIT_CONV_ISA");
  char* saved = getenv("UOPJIT_THREADS") ? strdup(getenv("UOPJIT_THREADS")) : NULL;
  printf("\n== convolution: 3x3 filters, stride 1, padding 1, f32, NHWC%s\n",
         plan == &quick_plan ? " (--quick: batch 1, every core, short samples)" : "");
  printf("cpu_direct and cpu_winograd keep their filter packing/transform (a filter_key) except in the\n");
  printf("\"no key\" rows. Times: medians of %d samples of >= %.0f ms; cpu_direct and cpu_winograd are\n",
         plan->samples, plan->sample_ns * 1e-6);
  if (plan->ref_runs > 0)
    printf("sampled by turns, \"no key\" after them. ref: median of %d runs at batch 1, its one checking run\n"
           "at batch 8 (seconds per call there). \"x direct\" = cpu_direct's time / the row's. \"err\" =\n",
           plan->ref_runs);
  else
    printf("sampled by turns, \"no key\" after them. ref: its one checking run.\n"
           "\"x direct\" = cpu_direct's time / the row's. \"err\" =\n");
  printf("largest |y - ref| / the documented bound (1e-6, Winograd 1e-5, times 9C max|x| max|w|, plus\n");
  printf("ref's own 1e-6): <= 1 passes.\n");
  printf("Every backend, ref included, runs on the table's threads (ref's loops split over the batch).\n");
  int status = conv_table(threads > 0 ? threads : 0, plan);
  if (threads < 0 && plan != &quick_plan && conv_table(1, plan) != 0) status = 1;
  if (bench_conv_gpu() != 0) status = 1;
  if (saved) setenv("UOPJIT_THREADS", saved, 1);
  else unsetenv("UOPJIT_THREADS");
  free(saved);
  return status;
}
