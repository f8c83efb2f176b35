/* bench/suite_measure.c: the suite's measurements of one workload at one
 * size: every runner checked against a reference before it is timed, and
 * the workload's traffic-matched copy kernel (traffic.c) timed beside it on
 * each thread count, as the memory limit its rows are a fraction of.
 *
 *   1-D programs   reference: the program in f64 on the interpreter,
 *                  rounded to f32; jit rows on 1..N threads,
 *                  aot, hand and unfused on one (they are single-threaded)
 *   row programs   reference: the program in f64 (rows.c's error bound)
 *   AdamW step     the step over every tensor of a model (suite_adamw.c);
 *                  reference: the hand-written loop's result
 *
 * Times are bench_time_stats' (median, min, max of the samples). Bytes per
 * call count each array the workload reads once and each it writes once. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suite.h"

static const char* runner_kind_text(runner_kind_t kind) {
  switch (kind) {
    case RUNNER_MIR:
    case RUNNER_C:
    case RUNNER_AUTO: return "jit";
    case RUNNER_AOT: return "aot";
    case RUNNER_PEER: return "peer";
    default: return "baseline";
  }
}

static const char* status_text(row_status_t status) {
  switch (status) {
    case ROW_OK:
    case ROW_REFERENCE: return "ok";
    case ROW_MISMATCH: return "mismatch";
    case ROW_UNAVAILABLE: return "unavailable";
    case ROW_FAILED: break;
  }
  return "failed";
}

/* Which suite runners stand for a library runner, and on how many threads. */
static const struct {
  runner_kind_t kind;
  suite_runner_t engine;
  int threaded;
} plan[] = {{RUNNER_MIR, SR_MIR, 1}, {RUNNER_C, SR_C, 1},          {RUNNER_AUTO, SR_AUTO, 1},
            {RUNNER_AOT, SR_AOT, 0}, {RUNNER_HAND, SR_HAND, 0}, {RUNNER_UNFUSED, SR_UNFUSED, 0}};
enum { NPLAN = sizeof plan / sizeof plan[0] };

static void size_label(char* out, size_t size, int64_t n) {
  if (n > 0 && (n & (n - 1)) == 0) snprintf(out, size, "2^%d", __builtin_ctzll((unsigned long long)n));
  else snprintf(out, size, "%lld", (long long)n);
}

typedef struct {
  const traffic_t* t;
} copy_call_t;

static int copy_call(void* arg) { return traffic_copy(((copy_call_t*)arg)->t); }

/* The copy rows are timed alone. Each runner is timed in alternation with
 * its copy kernel on its own thread count (bench_time_alternating), so
 * that its % of limit compares batches taken at the same moments, the
 * fastest of each side. */
static int add_copy_row(suite_t* s, const char* workload, const char* shape, const traffic_t* t, double bytes) {
  suite_row_t* row = suite_add_row(s, workload, "copy", "limit", t->n, t->threads);
  if (!row) return 1;
  snprintf(row->shape, sizeof row->shape, "%s", shape);
  row->bytes = bytes;
  copy_call_t call = {t};
  if (bench_time_stats(copy_call, &call, s->samples, s->min_sample_ns, &row->timing) != 0) return 1;
  snprintf(row->status, sizeof row->status, "ok");
  return 0;
}

/* ---- 1-D programs ------------------------------------------------------------------------- */

int suite_measure_1d(suite_t* s, const program_spec_t* spec, int64_t n) {
  program_text_t text;
  workspace_t ws;
  char shape[40];
  size_label(shape, sizeof shape, n);
  if (program_text_load(spec, &text) != 0) return 1;
  if (workspace_new(&text, n, &ws) != 0) {
    program_text_free(&text);
    return 1;
  }
  int failed = workspace_reference_f64(&ws) != 0;

  traffic_t traffic = {.n = n};
  double bytes = 0;
  for (int i = 0; i < ws.ninputs; i++)
    if (ws.input_numel[i] == n) traffic.reads[traffic.nreads++] = ws.inputs[i].data, bytes += 4.0 * (double)n;
  for (int o = 0; o < ws.noutputs; o++)
    if (ws.output_numel[o] == n) traffic.writes[traffic.nwrites++] = ws.outputs[o].data, bytes += 4.0 * (double)n;
  for (int t = 0; t < s->nthreads && !failed; t++) {
    traffic.threads = s->threads[t];
    failed |= add_copy_row(s, spec->name, shape, &traffic, bytes);
    for (int k = 0; k < NPLAN; k++) {
      if (!s->engines[plan[k].engine] || (!plan[k].threaded && s->threads[t] != 1)) continue;
      if (!plan[k].threaded && t > 0) continue;
      suite_row_t* row = suite_add_row(s, spec->name, runner_name(plan[k].kind), runner_kind_text(plan[k].kind), n,
                                       plan[k].threaded ? s->threads[t] : 1);
      if (!row) return 1;
      snprintf(row->shape, sizeof row->shape, "%s", shape);
      row->bytes = bytes;
      runner_t runner;
      int opened = runner_open(&runner, plan[k].kind, row->threads, &text);
      row_status_t status = opened == 0 ? ROW_UNAVAILABLE : ROW_FAILED;
      if (opened == 1) {
        workspace_reset(&ws);
        if (runner_run(&runner, &ws) == 0) {
          row->max_error = workspace_max_error(&ws);
          status = row->max_error <= workspace_tolerance(&ws) ? ROW_OK : ROW_MISMATCH;
        }
        if (status == ROW_OK) {
          runner_call_t call = {&runner, &ws};
          runner_warm_auto(&runner, runner_call, &call);
          traffic_t limit = traffic;
          limit.threads = row->threads;
          copy_call_t copy = {&limit};
          if (bench_time_alternating(runner_call, &call, copy_call, &copy, s->alternation_rounds, s->min_sample_ns, &row->timing,
                                     &row->limit_timing, &row->limit_ratio) != 0)
            status = ROW_FAILED;
        }
        runner_close(&runner);
      }
      snprintf(row->status, sizeof row->status, "%s", status_text(status));
      if (status == ROW_MISMATCH || status == ROW_FAILED) failed = 1;
    }
  }
  workspace_free(&ws);
  program_text_free(&text);
  return failed;
}

/* ---- row programs ------------------------------------------------------------------------- */

int suite_measure_rows(suite_t* s, const char* name, int64_t n, int64_t cols) {
  int64_t rows = n / cols;
  if (rows < 1) return 0;
  row_case_t* c;
  if (row_case_new(name, rows, cols, &c) != 0) return 1;
  char shape[40];
  snprintf(shape, sizeof shape, "%lldx%lld", (long long)rows, (long long)cols);
  double bytes = 8.0 * (double)(rows * cols);
  int failed = 0;
  for (int t = 0; t < s->nthreads && !failed; t++) {
    traffic_t traffic;
    row_case_traffic(c, s->threads[t], &traffic);
    failed |= add_copy_row(s, name, shape, &traffic, bytes);
    for (int k = 0; k < NPLAN; k++) {
      runner_kind_t kind = plan[k].kind;
      if (kind == RUNNER_UNFUSED || !s->engines[plan[k].engine] || (!plan[k].threaded && t > 0)) continue;
      suite_row_t* row = suite_add_row(s, name, runner_name(kind), runner_kind_text(kind), rows * cols,
                                       plan[k].threaded ? s->threads[t] : 1);
      if (!row) return 1;
      snprintf(row->shape, sizeof row->shape, "%s", shape);
      row->bytes = bytes;
      traffic_t limit;
      row_case_traffic(c, row->threads, &limit);
      copy_call_t copy = {&limit};
      bench_paired_t alongside = {copy_call, &copy, &row->limit_timing, &row->limit_ratio};
      row_status_t status = row_case_measure(c, kind, row->threads, s->alternation_rounds, s->min_sample_ns, &alongside,
                                             &row->timing, &row->max_error);
      snprintf(row->status, sizeof row->status, "%s", status_text(status));
      if (status == ROW_MISMATCH || status == ROW_FAILED) failed = 1;
    }
  }
  row_case_free(c);
  return failed;
}

/* ---- peers ---------------------------------------------------------------------------------- */

void suite_add_peers(suite_t* s, const peer_results_t* peers) {
  for (int k = 0; k < peers->nrows; k++) {
    const peer_row_t* p = &peers->rows[k];
    /* the shape and bytes of the engines' rows of the same workload and size */
    const suite_row_t* same = NULL;
    for (int r = 0; r < s->nrows && !same; r++)
      if (strcmp(s->rows[r].workload, p->workload) == 0 && s->rows[r].elements == p->elements) same = &s->rows[r];
    if (!same) continue;
    suite_row_t* row = suite_add_row(s, p->workload, p->peer, "peer", p->elements, p->threads);
    if (!row) return;
    same = NULL; /* the array may have moved */
    for (int r = 0; r < s->nrows - 1 && !same; r++)
      if (strcmp(s->rows[r].workload, p->workload) == 0 && s->rows[r].elements == p->elements) same = &s->rows[r];
    snprintf(row->shape, sizeof row->shape, "%s", same->shape);
    row->bytes = same->bytes;
    row->max_error = p->max_error;
    snprintf(row->status, sizeof row->status, "%s", p->checked_ok ? "ok" : "mismatch");
    /* the helper reports medians only */
    row->timing = (bench_timing_t){0, p->ns_per_call, NAN, NAN};
    row->median_only = 1;
  }
}

/* ---- convolutions ------------------------------------------------------------------------ */

/* The 3x3 layers at batch 1 (--quick: the last, 7x7x512), every backend on
 * each thread count, from bench_conv_layer: ref is the convolution built of
 * uops and run on the JIT engine; cpu_direct and cpu_winograd are the
 * library's hand-written backends. Compute-bound: no copy limit. */
int suite_measure_conv(suite_t* s) {
  int failed = 0;
  for (int layer = s->quick ? BENCH_CONV_LAYERS - 1 : 0; layer < BENCH_CONV_LAYERS; layer++)
    for (int t = 0; t < s->nthreads; t++) {
      bench_conv_row_t rows[BENCH_CONV_ROWS];
      char shape[40];
      if (bench_conv_layer(layer, 1, s->threads[t], rows, shape, sizeof shape) != 0) return 1;
      for (int k = 0; k < BENCH_CONV_ROWS; k++) {
        char runner[24];
        snprintf(runner, sizeof runner, "%s%s", rows[k].backend, rows[k].no_key ? " (no key)" : "");
        suite_row_t* row = suite_add_row(s, "conv3x3", runner, rows[k].engine ? "jit" : "baseline", rows[k].outputs,
                                         s->threads[t]);
        if (!row) return 1;
        snprintf(row->shape, sizeof row->shape, "%s", shape);
        row->flops = rows[k].flops;
        row->max_error = rows[k].worst;
        row->median_only = 1;
        row->timing = (bench_timing_t){0, rows[k].ms * 1e6, NAN, NAN};
        const char* status = rows[k].ok ? "ok" : strcmp(rows[k].note, "MISMATCH") == 0 ? "mismatch" : "failed";
        snprintf(row->status, sizeof row->status, "%s", status);
        if (!rows[k].ok) failed = 1;
      }
    }
  return failed;
}

/* ---- compile latency ------------------------------------------------------------------------- */

/* Parse and first run at size n in a new context with an empty cache. */
static double first_result_ms(const program_spec_t* spec, uj_engine_t engine, int64_t n, const char* cache_root) {
  program_text_t text;
  if (program_text_load(spec, &text) != 0) return NAN;
  workspace_t ws;
  double ms = NAN;
  char* dir = bench_make_dir(cache_root, "first");
  if (dir && workspace_new(&text, n, &ws) == 0) {
    const char* previous = getenv("UOPJIT_CACHE_DIR");
    char* saved = previous ? strdup(previous) : NULL;
    setenv("UOPJIT_CACHE_DIR", dir, 1);
    setenv("UOPJIT_THREADS", "1", 1);
    uj_ctx_t* ctx = uj_ctx_new();
    uj_program_t* program = NULL;
    double start = bench_now_ns();
    if (ctx && uj_ctx_set_engine(ctx, engine) == UJ_OK && uj_program_parse(text.source, &program) == UJ_OK &&
        workspace_run(ctx, program, &ws) == UJ_OK)
      ms = (bench_now_ns() - start) / 1e6;
    uj_program_free(program);
    uj_ctx_free(ctx);
    if (saved) setenv("UOPJIT_CACHE_DIR", saved, 1);
    free(saved);
    workspace_free(&ws);
  }
  if (dir) bench_remove_dir(dir);
  free(dir);
  program_text_free(&text);
  return ms;
}

void suite_measure_compile(suite_t* s, const program_spec_t* spec, int64_t first_n, const char* cache_root) {
  static const struct {
    suite_runner_t runner;
    uj_engine_t engine;
  } engines[] = {{SR_MIR, UJ_ENGINE_MIR}, {SR_C, UJ_ENGINE_C}, {SR_AUTO, UJ_ENGINE_AUTO}};
  program_text_t text;
  if (program_text_load(spec, &text) != 0) return;
  for (size_t e = 0; e < sizeof engines / sizeof engines[0] && s->ncompile < SUITE_MAX_COMPILE; e++) {
    if (!s->engines[engines[e].runner]) continue;
    compile_times_t times;
    compile_measure(&text, engines[e].engine, cache_root, s->quick ? 3 : 5, &times);
    if (!times.available) continue;
    suite_compile_t* c = &s->compile[s->ncompile++];
    snprintf(c->workload, sizeof c->workload, "%s", spec->name);
    snprintf(c->engine, sizeof c->engine, "%s", uj_engine_name(engines[e].engine));
    c->ok = !times.failed;
    c->cold_ms = times.cold_ms;
    c->disk_ms = times.disk_ms;
    c->dispatch_us = times.dispatch_us;
    c->first_result_elements = first_n;
    c->first_result_ms = first_result_ms(spec, engines[e].engine, first_n, cache_root);
    if (c->first_result_ms != c->first_result_ms) c->ok = 0;
  }
  program_text_free(&text);
}
