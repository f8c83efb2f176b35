/* bench/suite_write.c: the suite's report directory.
 *
 *   results.json  every measurement and the machine, in the form
 *                 bench/results.schema.json describes (NaN written as null)
 *   *.png         bench/plots.py's plots of results.json (matplotlib), when
 *                 a Python with matplotlib is found; otherwise report.md
 *                 says why there are none
 *   report.md     the summary, STREAM, compile latency and one table per
 *                 workload, with the derived figures (above write_markdown)
 *
 * The summary (also printed by `uopjit bench`) takes each workload at its
 * largest size on the most threads measured. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "suite.h"

static void json_string(FILE* f, const char* text) {
  fputc('"', f);
  for (const unsigned char* c = (const unsigned char*)text; *c; c++) {
    if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
    else if (*c < 0x20) fprintf(f, "\\u%04x", *c);
    else fputc(*c, f);
  }
  fputc('"', f);
}

static void json_number(FILE* f, double value) {
  if (value == value && !isinf(value)) fprintf(f, "%.6g", value);
  else fputs("null", f);
}

/* `, "key": ` and the value: a field of a JSON object after its first. */
static void json_field_string(FILE* f, const char* key, const char* text) {
  fprintf(f, ", \"%s\": ", key);
  json_string(f, text);
}

static void json_field_number(FILE* f, const char* key, double value) {
  fprintf(f, ", \"%s\": ", key);
  json_number(f, value);
}

/* The copy kernel's row for this row's workload, size and threads (1 for a
 * single-threaded runner). */
static const suite_row_t* limit_of(const suite_t* s, const suite_row_t* row) {
  int threads = strcmp(row->kind, "jit") == 0 || strcmp(row->kind, "peer") == 0 ? row->threads : 1;
  for (int r = 0; r < s->nrows; r++) {
    const suite_row_t* c = &s->rows[r];
    if (!strcmp(c->kind, "limit") && !strcmp(c->workload, row->workload) && c->elements == row->elements &&
        c->threads == threads && !strcmp(c->status, "ok"))
      return c;
  }
  return NULL;
}

static int timed(const suite_row_t* row) { return row && !strcmp(row->status, "ok") && row->timing.median_ns > 0; }

/* The ratio of the fastest batches of the copy kernel timed in alternation
 * with the row (the same moments of the machine). A row timed without it: the fastest
 * samples of the row and its copy row, the ones least disturbed by
 * whatever else the machine runs (as STREAM reports its best); medians for
 * a row that came with its median alone. */
static double percent_of_limit(const suite_t* s, const suite_row_t* row) {
  if (!timed(row) || !strcmp(row->kind, "limit")) return NAN;
  if (row->limit_timing.samples > 0 && !row->median_only) return 100.0 * row->limit_ratio;
  const suite_row_t* limit = limit_of(s, row);
  if (!timed(limit)) return NAN;
  if (row->median_only) return 100.0 * limit->timing.median_ns / row->timing.median_ns;
  return 100.0 * limit->timing.min_ns / row->timing.min_ns;
}

static const suite_row_t* find(const suite_t* s, const char* workload, const char* runner, int64_t elements,
                               int threads) {
  for (int r = 0; r < s->nrows; r++) {
    const suite_row_t* row = &s->rows[r];
    if (!strcmp(row->workload, workload) && !strcmp(row->runner, runner) && row->elements == elements &&
        row->threads == threads)
      return row;
  }
  return NULL;
}

static double versus_aot(const suite_t* s, const suite_row_t* row) {
  const suite_row_t* aot = find(s, row->workload, "aot", row->elements, 1);
  return timed(row) && timed(aot) ? row->timing.median_ns / aot->timing.median_ns : NAN;
}

static int write_json(const suite_t* s, const char* path) {
  FILE* f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "{\n  \"schema_version\": 1,\n  \"generator\": ");
  json_string(f, "uopjit bench");
  fprintf(f, ",\n  \"machine\": {\"cpu_model\": ");
  json_string(f, s->cpu_model);
  fprintf(f, ", \"cores\": %d, \"caches\": ", s->cores);
  json_string(f, s->cache_sizes);
  json_field_string(f, "compiler", s->compiler);
  json_field_string(f, "uopjit_version", uj_version());
  json_field_string(f, "mir", s->mir);
  json_field_string(f, "cuda", s->cuda);
  json_field_string(f, "load_average", s->load_average);
  json_field_string(f, "started", s->started);
  fprintf(f, "},\n  \"run\": {\"quick\": %s, \"seconds\": ", s->quick ? "true" : "false");
  json_number(f, s->seconds);
  fprintf(f, ", \"samples\": %d, \"threads\": [", s->samples);
  for (int t = 0; t < s->nthreads; t++) fprintf(f, "%s%d", t ? ", " : "", s->threads[t]);
  fprintf(f, "], \"sizes\": [");
  for (int k = 0; k < s->nsizes; k++) fprintf(f, "%s%lld", k ? ", " : "", 1LL << s->sizes_log2[k]);
  fprintf(f, "], \"filter\": ");
  json_string(f, s->filter);
  json_field_string(f, "notes", s->notes);
  fprintf(f, "},\n  \"stream\": [");
  for (int t = 0, first = 1; t < s->nthreads; t++) {
    if (!s->stream_ok[t]) continue;
    fprintf(f, "%s\n    {\"threads\": %d, \"elements\": %lld, \"copy_gbs\": ", first ? "" : ",", s->threads[t],
            (long long)s->stream_length);
    json_number(f, s->stream[t].copy_gbs);
    fprintf(f, ", \"copy_bytes_counted\": 16, \"copy_bytes_moved\": 24, \"triad_gbs\": ");
    json_number(f, s->stream[t].triad_gbs);
    fprintf(f, ", \"triad_bytes_counted\": 24, \"triad_bytes_moved\": 32}");
    first = 0;
  }
  fprintf(f, "\n  ],\n  \"compile\": [");
  for (int c = 0; c < s->ncompile; c++) {
    const suite_compile_t* k = &s->compile[c];
    fprintf(f, "%s\n    {\"workload\": \"%s\", \"engine\": \"%s\", \"ok\": %s, \"cold_ms\": ", c ? "," : "", k->workload,
            k->engine, k->ok ? "true" : "false");
    json_number(f, k->cold_ms);
    json_field_number(f, "disk_hit_ms", k->disk_ms);
    json_field_number(f, "dispatch_us", k->dispatch_us);
    json_field_number(f, "first_result_ms", k->first_result_ms);
    fprintf(f, ", \"first_result_elements\": %lld}", (long long)k->first_result_elements);
  }
  fprintf(f, "\n  ],\n  \"measurements\": [");
  for (int r = 0; r < s->nrows; r++) {
    const suite_row_t* row = &s->rows[r];
    fprintf(f,
            "%s\n    {\"workload\": \"%s\", \"runner\": \"%s\", \"kind\": \"%s\", \"shape\": ", r ? "," : "",
            row->workload, row->runner, row->kind);
    json_string(f, row->shape);
    fprintf(f, ", \"elements\": %lld, \"dtype\": \"f32\", \"threads\": %d, \"status\": \"%s\", \"samples\": %d",
            (long long)row->elements, row->threads, row->status, row->timing.samples);
    int ok = timed(row), spread = ok && !row->median_only;
    json_field_number(f, "median_ns", ok ? row->timing.median_ns : NAN);
    json_field_number(f, "min_ns", spread ? row->timing.min_ns : NAN);
    json_field_number(f, "max_ns", spread ? row->timing.max_ns : NAN);
    json_field_number(f, "max_error", strcmp(row->kind, "limit") ? row->max_error : NAN);
    json_field_number(f, "bytes", row->bytes);
    json_field_number(f, "flops", row->flops);
    json_field_number(f, "percent_of_limit", percent_of_limit(s, row));
    fprintf(f, "}");
  }
  fprintf(f, "\n  ]\n}\n");
  return fclose(f) == 0 ? 0 : -1;
}

/* Runs bench/plots.py on results.json; fills s->plots_note. */
static void make_plots(suite_t* s) {
  if (!s->plots) {
    snprintf(s->plots_note, sizeof s->plots_note, "no plots: --no-plots");
    return;
  }
  const char* python = getenv("UOPJIT_BENCH_PYTHON");
  if (!python || !*python) python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  char command[4400];
  if (strchr(python, '\'') || strchr(s->out_dir, '\'') || strchr(BENCH_SOURCE_DIR, '\'')) {
    snprintf(s->plots_note, sizeof s->plots_note, "no plots: a path holds a single quote");
    return;
  }
  snprintf(command, sizeof command, "'%s' '%s/plots.py' '%s/results.json' '%s' 2>&1", python, BENCH_SOURCE_DIR,
           s->out_dir, s->out_dir);
  fflush(stdout);
  FILE* f = popen(command, "r");
  char line[512], last[512] = "";
  while (f && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (line[0]) snprintf(last, sizeof last, "%s", line);
  }
  int status = f ? pclose(f) : -1;
  if (status == 0) snprintf(s->plots_note, sizeof s->plots_note, "%.500s", last);
  else snprintf(s->plots_note, sizeof s->plots_note, "no plots: %.300s (%.150s)",
                last[0] ? last : "bench/plots.py failed", python);
}

/* ---- report.md and the summary ------------------------------------------------------------- */

static void cell(FILE* f, const char* format, double value) {
  if (value == value) fprintf(f, format, value);
  else fprintf(f, "| - ");
}

static double per_element(const suite_row_t* row) {
  return timed(row) ? row->timing.median_ns / (double)row->elements : NAN;
}

/* The largest size a workload was measured at, and the most threads. */
static int64_t largest(const suite_t* s, const char* workload) {
  int64_t n = 0;
  for (int r = 0; r < s->nrows; r++)
    if (!strcmp(s->rows[r].workload, workload) && s->rows[r].elements > n) n = s->rows[r].elements;
  return n;
}

static const char* const workloads[] = {"sigmoid", "gelu",      "gelu_erf", "adam",
                                        "sumsq",   "softmax",   "layernorm", "adamw", "conv3x3"};
enum { NWORKLOADS = sizeof workloads / sizeof workloads[0] };

/* The fastest peer at this size on these threads (numpy, single-threaded,
 * on its one), or NULL. */
static const suite_row_t* best_peer(const suite_t* s, const char* workload, int64_t n, int threads) {
  const suite_row_t* best = NULL;
  for (int r = 0; r < s->nrows; r++) {
    const suite_row_t* row = &s->rows[r];
    if (!strcmp(row->kind, "peer") && !strcmp(row->workload, workload) && row->elements == n &&
        (row->threads == threads || !strcmp(row->runner, "numpy")) && timed(row) && (!best || row->timing.median_ns < best->timing.median_ns))
      best = row;
  }
  return best;
}

static void summary_table(FILE* f, const suite_t* s) {
  int threads = s->threads[s->nthreads - 1];
  fprintf(f, "| workload | size | threads | mir | c | auto | aot (1 thr) | hand (1 thr) | best peer | c / aot | c %% of limit |\n");
  fprintf(f, "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int w = 0; w < NWORKLOADS; w++) {
    int64_t n = largest(s, workloads[w]);
    const suite_row_t* c = find(s, workloads[w], "c", n, threads);
    if (!n || !c) continue;
    fprintf(f, "| %s | %s | %d ", workloads[w], c->shape, threads);
    static const char* const runners[] = {"mir", "c", "auto", "aot", "hand"};
    for (int k = 0; k < 5; k++) cell(f, "| %.3f ", per_element(find(s, workloads[w], runners[k], n, k < 3 ? threads : 1)));
    const suite_row_t* peer = best_peer(s, workloads[w], n, threads);
    if (peer) fprintf(f, "| %.3f (%s) ", per_element(peer), peer->runner);
    else fprintf(f, "| - ");
    const suite_row_t* c1 = find(s, workloads[w], "c", n, 1);
    cell(f, "| %.2f ", c1 ? versus_aot(s, c1) : NAN);
    cell(f, "| %.0f%% ", percent_of_limit(s, c));
    fprintf(f, "|\n");
  }
  fprintf(f, "\nns per element (median), at each workload's largest size; c / aot on one thread; "
             "%% of limit: the traffic-matched copy kernel's time over C's (the two timed in alternation: the ratio of "
             "each one's fastest batch over the rounds).\n");
  /* Another process on one of the cores holds back one thread of a call on
   * every core at random moments, the copy's as well as the workload's:
   * their ratio then moves by tens of percent from run to run (seen: 46%
   * to 171% for in-cache rows with one other busy process on 2 cores). */
  double load = atof(s->load_average);
  if (load >= 0.5 * s->cores && threads >= s->cores)
    fprintf(f, "\nThe machine was busy when the run began (load average %s on %d cores): the rows on %d threads shared "
               "their cores with other work, and their %% of limit, a ratio of two timings, can be off by tens of "
               "percent; rerun on a quiet machine for that column.\n",
            s->load_average, s->cores, threads);
}

void suite_print_summary(const suite_t* s) {
  printf("\nuopjit bench%s: %s, %d cores, load %s, %.0f s\n", s->quick ? " --quick" : "", s->cpu_model, s->cores,
         s->load_average, s->seconds);
  summary_table(stdout, s);
  printf("\nreport: %s/report.md, %s/results.json\n%s\n", s->out_dir, s->out_dir, s->plots_note);
}

static void workload_table(FILE* f, const suite_t* s, const char* workload) {
  fprintf(f, "\n### %s\n\n| size | runner | threads | status | ns/element | min..max ns/element | GB/s | %% of limit | x aot | max error |\n",
          workload);
  fprintf(f, "|---|---|---|---|---|---|---|---|---|---|\n");
  for (int r = 0; r < s->nrows; r++) {
    const suite_row_t* row = &s->rows[r];
    if (strcmp(row->workload, workload)) continue;
    fprintf(f, "| %s | %s%s | %d | %s ", row->shape, row->runner, !strcmp(row->kind, "limit") ? " (traffic-matched)" : "",
            row->threads, row->status);
    cell(f, "| %.3f ", per_element(row));
    if (timed(row) && !row->median_only)
      fprintf(f, "| %.3f..%.3f ", row->timing.min_ns / (double)row->elements, row->timing.max_ns / (double)row->elements);
    else
      fprintf(f, "| - ");
    if (row->flops == row->flops) cell(f, "| %.1f GFLOP/s ", timed(row) ? row->flops / row->timing.median_ns : NAN);
    else cell(f, "| %.2f ", timed(row) ? row->bytes / row->timing.median_ns : NAN);
    cell(f, "| %.0f%% ", percent_of_limit(s, row));
    cell(f, "| %.2f ", strcmp(row->kind, "limit") ? versus_aot(s, row) : NAN);
    if (strcmp(row->kind, "limit")) fprintf(f, "| %.1e |\n", row->max_error);
    else fprintf(f, "| - |\n");
  }
}

/* The derived figures:
 *   ns/element = median ns per call / elements
 *   GB/s       = bytes per call / median ns per call
 *   % of limit = the copy kernel's time / this row's, the copy kernel on
 *                the row's traffic and threads timed in alternation with
 *                it: the ratio of each one's fastest batch
 *                (suite_row_t.limit_ratio); rows without (peers: medians,
 *                all they report) against the copy row at the same size
 *                and threads (one for single-threaded runners)
 *   x aot      = this median / the AOT kernel's */
static int write_markdown(const suite_t* s, const char* path) {
  FILE* f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "# uopjit bench%s\n\n", s->quick ? " --quick" : "");
  fprintf(f, "Machine: %s, %d cores (%s); compiler: %s; uopjit %s; MIR: %s; CUDA: %s. Started %s, load average %s, "
             "%.0f s.\n\n",
          s->cpu_model, s->cores, s->cache_sizes, s->compiler, uj_version(), s->mir, s->cuda, s->started,
          s->load_average, s->seconds);
  fprintf(f, "## Summary\n\n");
  summary_table(f, s);
  fprintf(f, "\n%s\n", s->plots_note);
  if (s->notes[0]) fprintf(f, "\nNotes: %s.\n", s->notes);
  fprintf(f, "\n## Memory bandwidth (STREAM, %lld doubles per array)\n\n| threads | copy GB/s | triad GB/s |\n|---|---|---|\n",
          (long long)s->stream_length);
  for (int t = 0; t < s->nthreads; t++)
    if (s->stream_ok[t])
      fprintf(f, "| %d | %.2f | %.2f |\n", s->threads[t], s->stream[t].copy_gbs, s->stream[t].triad_gbs);
  fprintf(f, "\nSTREAM counts 16 bytes per element for copy and 24 for triad; with write-allocate the machine moves 24 "
             "and 32. The limits below are not STREAM's: each workload's is a copy kernel that reads and writes "
             "exactly its arrays (bench/traffic.c), measured in this run: each row's %% of limit from the copy kernel timed "
             "in alternation with it on its threads, the copy rows timed alone.\n");
  fprintf(f, "\n## Compile latency (one thread, 16-element tensors; first result at the size given)\n\n"
             "| workload | engine | cold ms | disk-cache hit ms | memory-cache dispatch us | first result ms | at |\n"
             "|---|---|---|---|---|---|---|\n");
  for (int c = 0; c < s->ncompile; c++) {
    const suite_compile_t* k = &s->compile[c];
    fprintf(f, "| %s | %s ", k->workload, k->engine);
    cell(f, "| %.2f ", k->cold_ms);
    cell(f, "| %.3f ", k->disk_ms);
    cell(f, "| %.2f ", k->dispatch_us);
    cell(f, "| %.2f ", k->first_result_ms);
    fprintf(f, "| 2^%d |\n", __builtin_ctzll((unsigned long long)k->first_result_elements));
  }
  fprintf(f, "\ncold: parse and first run in a new context with an empty disk cache; disk-cache hit: the same in "
             "another new context on the filled cache (C only); dispatch: per call with the kernel in memory; first "
             "result: parse and first run at the size given, cold. Medians.\n");
  fprintf(f, "\n## Throughput\n\nChecked before timed; times are medians of %d samples per call (%d "
             "rounds for a row timed in alternation with its copy kernel; peers and "
             "convolutions: the median their own timing reports). GB/s counts each array read once and each written "
             "once; conv3x3 gives GFLOP/s instead (ref: the convolution built of uops on the JIT engine; cpu_direct, "
             "cpu_winograd: the library's hand-written backends; max error in units of the bound of bench/conv.c). "
             "The AOT kernels are compiled with cc -O3 -march=native, without -ffast-math or -fno-math-errno, as a "
             "user would.\n",
          s->samples, s->alternation_rounds);
  for (int w = 0; w < NWORKLOADS; w++)
    if (largest(s, workloads[w])) workload_table(f, s, workloads[w]);
  return fclose(f) == 0 ? 0 : -1;
}

int suite_write(suite_t* s) {
  if (mkdir(s->out_dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "uopjit bench: cannot make %s: %s\n", s->out_dir, strerror(errno));
    return 1;
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/results.json", s->out_dir);
  if (write_json(s, path) != 0) {
    fprintf(stderr, "uopjit bench: cannot write %s: %s\n", path, strerror(errno));
    return 1;
  }
  make_plots(s);
  snprintf(path, sizeof path, "%s/report.md", s->out_dir);
  if (write_markdown(s, path) != 0) {
    fprintf(stderr, "uopjit bench: cannot write %s: %s\n", path, strerror(errno));
    return 1;
  }
  return 0;
}
