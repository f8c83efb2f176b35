/* bench/report.c: prints what one run of the benchmark measured, as fixed
 * width tables: the machine, STREAM bandwidth, compile and dispatch times,
 * throughput per program, size and engine, and a closing summary of the
 * project's performance targets with the measured value and whether it was
 * met. The targets are listed here once (row_targets, compile_targets) and
 * shown both next to the rows they judge and in the summary.
 *
 * Derived figures: ns/element = time per call / n (input elements);
 * GB/s = bytes per element (as STREAM counts them) * n / time;
 * t/aot and t/unfused = this row's time / that runner's time at the same
 * size (below 1: faster); %triad = GB/s / STREAM triad GB/s on as many
 * threads (Adam rows). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

/* ---- the targets -------------------------------------------------------------------- */

typedef enum { PER_ELEMENT_NS, TIME_VS_AOT, PERCENT_OF_TRIAD } row_figure_t;

/* A target on one throughput row at the largest size measured. */
typedef struct {
  const char* program;
  runner_kind_t kind;
  int threads;
  row_figure_t figure;
  double limit;
  int at_most; /* 1: the figure must be <= limit; 0: >= limit */
  const char* text;
} row_target_t;

static const row_target_t row_targets[] = {
    {"sigmoid", RUNNER_MIR, 1, PER_ELEMENT_NS, 5.0, 1, "<= 5 ns/element"},
    {"sigmoid", RUNNER_MIR, 2, PER_ELEMENT_NS, 2.8, 1, "<= 2.8 ns/element"},
    {"adam", RUNNER_MIR, 1, TIME_VS_AOT, 1.5, 1, "time <= 1.5x AOT"},
    {"sigmoid", RUNNER_C, 1, PER_ELEMENT_NS, 1.2, 1, "<= 1.2 ns/element"},
    {"adam", RUNNER_C, 2, PERCENT_OF_TRIAD, 90.0, 0, ">= 90% of triad"},
};

typedef enum { COLD_MS, KERNEL_MS, DISK_MS, DISPATCH_US } compile_figure_t;

/* A target on every program's compile times on one engine. */
typedef struct {
  int engine; /* index into bench_results_t.compile[p]: 0 interp, 1 mir, 2 c */
  compile_figure_t figure;
  double limit; /* at most */
  const char* text;
} compile_target_t;

static const compile_target_t compile_targets[] = {
    {1, KERNEL_MS, 0.5, "compile per fused kernel <= 0.5 ms"},
    {2, COLD_MS, 100.0, "cold compile <= 100 ms"},
    {2, DISK_MS, 0.2, "disk-cache hit <= 0.2 ms"},
    {2, DISPATCH_US, 2.0, "memory-cache dispatch <= 2 us"},
};

static const char* const compile_engine_names[3] = {"interp", "mir", "c"};

/* ---- lookups and derived figures ------------------------------------------------------- */

static const throughput_row_t* find_row(const bench_results_t* res, int program, int64_t n, runner_kind_t kind,
                                        int threads) {
  for (int r = 0; r < res->nrows; r++) {
    const throughput_row_t* row = &res->rows[r];
    if (row->program == program && row->n == n && row->kind == kind && row->threads == threads) return row;
  }
  return NULL;
}

static int timed(const throughput_row_t* row) {
  return row && (row->status == ROW_OK || row->status == ROW_REFERENCE) && row->ns_per_call > 0;
}

static double gigabytes_per_second(const bench_results_t* res, const throughput_row_t* row) {
  return (double)res->programs[row->program]->bytes_per_element * (double)row->n / row->ns_per_call;
}

/* This row's time over another runner's at the same size; NAN if either is untimed. */
static double time_ratio(const bench_results_t* res, const throughput_row_t* row, runner_kind_t other) {
  const throughput_row_t* base = find_row(res, row->program, row->n, other, 1);
  return timed(row) && timed(base) ? row->ns_per_call / base->ns_per_call : NAN;
}

static double percent_of_triad(const bench_results_t* res, const throughput_row_t* row) {
  int t = row->threads - 1;
  if (!timed(row) || t < 0 || t >= BENCH_THREAD_COUNTS || !res->stream_ok[t]) return NAN;
  return 100.0 * gigabytes_per_second(res, row) / res->stream[t].triad_gbs;
}

static double row_figure(const bench_results_t* res, const throughput_row_t* row, row_figure_t figure) {
  if (!timed(row)) return NAN;
  switch (figure) {
    case PER_ELEMENT_NS: return row->ns_per_call / (double)row->n;
    case TIME_VS_AOT: return time_ratio(res, row, RUNNER_AOT);
    case PERCENT_OF_TRIAD: return percent_of_triad(res, row);
  }
  return NAN;
}

static int program_index(const bench_results_t* res, const char* name) {
  for (int p = 0; p < res->nprograms; p++)
    if (strcmp(res->programs[p]->name, name) == 0) return p;
  return -1;
}

static int64_t largest_size(const bench_results_t* res) { return res->sizes[res->nsizes - 1]; }

static int met(double value, double limit, int at_most) {
  return value == value && (at_most ? value <= limit : value >= limit);
}

static const char* status_text(row_status_t status) {
  switch (status) {
    case ROW_OK: return "ok";
    case ROW_REFERENCE: return "reference";
    case ROW_MISMATCH: return "MISMATCH";
    case ROW_UNAVAILABLE: return "unavailable";
    case ROW_FAILED: return "FAILED";
  }
  return "?";
}

static void size_label(int64_t n, char* out, size_t size) {
  int log2 = 0;
  while (((int64_t)1 << log2) < n) log2++;
  if (((int64_t)1 << log2) == n) snprintf(out, size, "2^%d", log2);
  else snprintf(out, size, "%lld", (long long)n);
}

/* value printed with format, or "-" when it is NAN, right-aligned in width */
static void print_figure(int width, const char* format, double value) {
  char text[32];
  if (value == value) snprintf(text, sizeof text, format, value);
  else snprintf(text, sizeof text, "-");
  printf(" %*s", width, text);
}

/* ---- the tables ------------------------------------------------------------------------ */

static void print_header(const bench_results_t* res) {
  char small[16], large[16];
  size_label(res->sizes[0], small, sizeof small);
  size_label(largest_size(res), large, sizeof large);
  printf("uopjit bench%s: every figure below comes from this one run; times are medians\n",
         res->short_run ? " --short" : "");
  printf("machine:  %s, %d online cores; JIT engines run on 1 and on 2 threads (UOPJIT_THREADS),\n",
         res->cpu_model, res->online_cores);
  printf("          aot and unfused on 1 thread; load average %s when the run began (other work on the\n",
         res->load_average);
  printf("          machine shows as noise, most in the 2-thread rows)\n");
  printf("data:     f32, %s and %s elements; inputs in [0.5, 1.5); bytes/element as STREAM counts\n", small,
         large);
  printf("          (no write-allocate):");
  for (int p = 0; p < res->nprograms; p++)
    printf(" %s %d%s", res->programs[p]->name, res->programs[p]->bytes_per_element, p + 1 < res->nprograms ? "," : "");
  printf("\n");
  printf("engines:  interp, mir, c through uj_program_run; aot = the C of `uopjit aot` built into this binary\n");
  printf("          with plain gcc -O3 -march=native, as a user would (a sqrtf that may set errno keeps\n");
  printf("          such a loop scalar; the C engine adds -fno-math-errno);\n");
  printf("          unfused = one loop per op over whole temporaries, as NumPy evaluates, built with\n");
  printf("          gcc -O3 -march=native -ffast-math (SIMD, exp included, as NumPy's ufuncs);\n");
  printf("          numpy, numexpr, torch = bench/cpu_peers.py in this run, at the largest size (their own\n");
  printf("          check against f64; numpy on 1 thread)\n");
  printf("samples:  compile %d repetitions; throughput %d samples below 2^20, %d from 2^20 (interp %d)\n",
         res->compile_repetitions, res->small_samples, res->large_samples, res->interp_large_samples);
  printf("programs:");
  for (int p = 0; p < res->nprograms; p++) printf(" bench/%s.uj", res->programs[p]->name);
  printf("\n\n");
}

static void print_stream(const bench_results_t* res) {
  char length[16];
  size_label(res->stream_length, length, sizeof length);
  printf("STREAM (arrays of %s doubles, %d repetitions; copy 16 B/element, triad 24 B/element)\n", length,
         res->stream_repetitions);
  printf("%-8s %11s %11s %11s %11s\n", "threads", "copy GB/s", "best", "triad GB/s", "best");
  for (int t = 0; t < BENCH_THREAD_COUNTS; t++) {
    printf("%-8d", t + 1);
    if (!res->stream_ok[t]) {
      printf(" %11s\n", "FAILED");
      continue;
    }
    const stream_result_t* s = &res->stream[t];
    printf(" %11.2f %11.2f %11.2f %11.2f\n", s->copy_gbs, s->copy_best_gbs, s->triad_gbs, s->triad_best_gbs);
  }
  printf("\n");
}

static double compile_figure(const compile_times_t* c, compile_figure_t figure) {
  if (!c->available || c->failed) return NAN;
  return figure == COLD_MS     ? c->cold_ms
         : figure == KERNEL_MS ? c->kernel_ms
         : figure == DISK_MS   ? c->disk_ms
                               : c->dispatch_us;
}

/* The target on this engine's figure, as "<= 0.5 met", or "" when none. */
static void compile_target_text(int engine, compile_figure_t figure, double value, char* out, size_t size) {
  out[0] = '\0';
  for (size_t k = 0; k < sizeof compile_targets / sizeof compile_targets[0]; k++) {
    const compile_target_t* t = &compile_targets[k];
    if (t->engine == engine && t->figure == figure)
      snprintf(out, size, "<=%g %s", t->limit, met(value, t->limit, 1) ? "met" : "NOT met");
  }
}

static void print_compile(const bench_results_t* res) {
  printf("compile and dispatch (one thread; cold and disk hit = uj_program_parse + the first uj_program_run\n");
  printf("on 16 elements: building the loop IR, the passes, then compiling or loading; the interp row is\n");
  printf("that IR building alone; kernel = the first run of the parsed program in a new context and a\n");
  printf("fresh disk cache: the engine's compile of the fused kernel alone; only the C engine has a disk\n");
  printf("cache; dispatch = a warm 16-element call)\n");
  printf("%-8s %-7s %-11s %9s %-14s %9s %-14s %9s %-14s %10s %-14s\n", "program", "engine", "status", "cold ms",
         "target", "kernel ms", "target", "disk ms", "target", "dispatch us", "target");
  for (int p = 0; p < res->nprograms; p++)
    for (int e = 0; e < 3; e++) {
      const compile_times_t* c = &res->compile[p][e];
      const char* status = !c->available ? "unavailable" : c->failed ? "FAILED" : "ok";
      printf("%-8s %-7s %-11s", res->programs[p]->name, compile_engine_names[e], status);
      static const compile_figure_t figures[4] = {COLD_MS, KERNEL_MS, DISK_MS, DISPATCH_US};
      static const char* const formats[4] = {"%.3f", "%.3f", "%.3f", "%.2f"};
      static const int widths[4] = {9, 9, 9, 11};
      for (int f = 0; f < 4; f++) {
        double value = compile_figure(c, figures[f]);
        char target[32];
        compile_target_text(e, figures[f], value, target, sizeof target);
        print_figure(widths[f], formats[f], value);
        printf(" %-14s", c->available ? target : "");
      }
      printf("\n");
    }
  printf("\n");
}

/* The target that judges this row, as "<= 5 ns/element: met", or "". */
static void row_target_text(const bench_results_t* res, const throughput_row_t* row, char* out, size_t size) {
  out[0] = '\0';
  if (row->n != largest_size(res)) return;
  for (size_t k = 0; k < sizeof row_targets / sizeof row_targets[0]; k++) {
    const row_target_t* t = &row_targets[k];
    if (t->kind != row->kind || t->threads != row->threads || program_index(res, t->program) != row->program)
      continue;
    const char* verdict = row->status == ROW_UNAVAILABLE                                 ? "unavailable"
                          : met(row_figure(res, row, t->figure), t->limit, t->at_most) ? "met"
                                                                                       : "NOT met";
    snprintf(out, size, "%s: %s", t->text, verdict);
  }
}

static void print_throughput(const bench_results_t* res) {
  printf("throughput (each result checked against the interpreter's first: max |got-ref|/max(1,|ref|);\n");
  printf("t/aot, t/unfused = time ratio to the 1-thread AOT kernel and unfused baseline, below 1 is faster;\n");
  printf("%%triad = GB/s over STREAM triad GB/s with as many threads, for the in-place Adam)\n");
  printf("%-8s %-5s %-8s %3s %-11s %8s %9s %8s %7s %9s %7s  %s\n", "program", "size", "engine", "thr", "check",
         "max err", "ns/elem", "GB/s", "t/aot", "t/unfused", "%triad", "target");
  for (int r = 0; r < res->nrows; r++) {
    const throughput_row_t* row = &res->rows[r];
    const program_spec_t* spec = res->programs[row->program];
    char size[16], target[64];
    size_label(row->n, size, sizeof size);
    row_target_text(res, row, target, sizeof target);
    if (r > 0 && (row->program != res->rows[r - 1].program || row->n != res->rows[r - 1].n)) printf("\n");
    printf("%-8s %-5s %-8s %3d %-11s", spec->name, size, row->kind == RUNNER_PEER ? row->peer : runner_name(row->kind),
           row->threads, status_text(row->status));
    int checked = row->status == ROW_OK || row->status == ROW_MISMATCH;
    print_figure(8, "%.1e", checked ? row->max_error : NAN);
    double ns = timed(row) ? row->ns_per_call : NAN;
    print_figure(9, "%.3f", ns / (double)row->n);
    print_figure(8, "%.2f", timed(row) ? gigabytes_per_second(res, row) : NAN);
    print_figure(7, "%.2f", time_ratio(res, row, RUNNER_AOT));
    print_figure(9, "%.2f", time_ratio(res, row, RUNNER_UNFUSED));
    print_figure(6, "%.0f", strcmp(spec->name, "adam") == 0 ? percent_of_triad(res, row) : NAN);
    printf("%s  %s\n", strcmp(spec->name, "adam") == 0 && timed(row) && res->stream_ok[0] ? "%" : " ", target);
  }
  printf("\n");
}

static void print_summary_line(const char* engine, const char* program, const char* target, const char* measured,
                               int available, int ok) {
  printf("%-7s %-8s %-32s %-16s %s\n", engine, program, target, measured,
         !available ? "NOT met (engine unavailable)" : ok ? "met" : "NOT met");
}

static void print_targets(const bench_results_t* res) {
  char large[16];
  size_label(largest_size(res), large, sizeof large);
  printf("targets (throughput at %s%s; medians from the tables above)\n", large,
         res->short_run ? ", the largest size of --short; the targets are set at 2^24" : "");
  printf("cold compile times include building the loop IR (the interp rows of the compile table);\n");
  printf("the compile per fused kernel does not (the kernel column)\n");
  printf("%-7s %-8s %-32s %-16s %s\n", "engine", "program", "target", "measured", "result");
  for (size_t k = 0; k < sizeof compile_targets / sizeof compile_targets[0]; k++) {
    const compile_target_t* t = &compile_targets[k];
    for (int p = 0; p < res->nprograms; p++) {
      const compile_times_t* c = &res->compile[p][t->engine];
      double value = compile_figure(c, t->figure);
      char measured[32] = "-";
      if (value == value) snprintf(measured, sizeof measured, "%.3f %s", value, t->figure == DISPATCH_US ? "us" : "ms");
      print_summary_line(compile_engine_names[t->engine], res->programs[p]->name, t->text, measured, c->available,
                         met(value, t->limit, 1));
    }
  }
  for (size_t k = 0; k < sizeof row_targets / sizeof row_targets[0]; k++) {
    const row_target_t* t = &row_targets[k];
    int p = program_index(res, t->program);
    const throughput_row_t* row = p < 0 ? NULL : find_row(res, p, largest_size(res), t->kind, t->threads);
    double value = row ? row_figure(res, row, t->figure) : NAN;
    char target[64], measured[32] = "-";
    snprintf(target, sizeof target, "%s, %d thread%s", t->text, t->threads, t->threads > 1 ? "s" : "");
    static const char* const units[] = {"ns/element", "x AOT", "% of triad"};
    if (value == value) snprintf(measured, sizeof measured, "%.2f %s", value, units[t->figure]);
    print_summary_line(runner_name(t->kind), t->program, target, measured, row && row->status != ROW_UNAVAILABLE,
                       met(value, t->limit, t->at_most));
  }
}

void report_print(const bench_results_t* res) {
  print_header(res);
  print_stream(res);
  print_compile(res);
  print_throughput(res);
  print_targets(res);
}
