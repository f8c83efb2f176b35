/* bench/rows.c: the row programs, softmax and layernorm over the rows of an
 * f32 matrix (bench/softmax.uj, bench/layernorm.uj; their .args give the
 * shapes, 4096x4096, a quarter of the rows for --short), on the MIR and C
 * engines at 1 and 2 threads, the `uopjit aot` kernel, a hand-written fused
 * kernel (rows_baseline.c) and the peers cpu_peers.py measured in the same
 * run (numpy, torch).
 *
 * The check: the reference is the program run in f64 on the interpreter,
 * from the same f32 inputs widened; an element passes within the error
 * bound of its sums (above row_tolerance). Nothing is timed before its
 * result has passed. Bandwidth counts 8 bytes per element: x read once and
 * y written once (w and b are one row). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* Writes scale[0..cols) for one row from its f64 inputs and reference. */
typedef void (*error_scale_fn)(const double* x, const double* w, const double* b, const double* ref, int64_t cols,
                               double* scale);

typedef struct {
  program_spec_t spec;
  hand_rows_fn hand;
  error_scale_fn error_scale;
} row_program_t;

/* y = e / sum(e): the sum's relative error gamma_n (positive terms) carries
 * over to every y; exp(x - max) is exact in its argument (Sterbenz) and
 * rounds in a few units. So the scale is |y|. */
static void softmax_error_scale(const double* x, const double* w, const double* b, const double* ref, int64_t cols,
                                double* scale) {
  (void)x, (void)w, (void)b;
  for (int64_t j = 0; j < cols; j++) scale[j] = fabs(ref[j]);
}

/* mean is off by up to gamma_n * A (A = mean|x|), which shifts every
 * d = x - mean; var = mean(d*d) by gamma_n * var (positive terms) plus
 * 2 * gamma_n * A * D (D = mean|d|) from the shifted d; r = rsqrt(var + eps)
 * by half of var's relative error. So y = d*r*w + b is off by up to
 * gamma_n * |w| r (A + |d| (1/2 + A D / (var + eps))), and by a few units of
 * |d r w| + |b| in its own roundings. */
static void layernorm_error_scale(const double* x, const double* w, const double* b, const double* ref, int64_t cols,
                                  double* scale) {
  (void)ref;
  double sum = 0, sum_abs = 0;
  for (int64_t j = 0; j < cols; j++) sum += x[j], sum_abs += fabs(x[j]);
  double mean = sum / (double)cols, mean_abs = sum_abs / (double)cols;
  double squares = 0, deviation_abs = 0;
  for (int64_t j = 0; j < cols; j++) squares += (x[j] - mean) * (x[j] - mean), deviation_abs += fabs(x[j] - mean);
  double var = squares / (double)cols + 1e-5, mean_deviation = deviation_abs / (double)cols;
  double r = 1 / sqrt(var);
  for (int64_t j = 0; j < cols; j++) {
    double d = fabs(x[j] - mean);
    scale[j] = fabs(w[j]) * r * (mean_abs + d * (0.5 + mean_abs * mean_deviation / var)) + fabs(w[j]) * d * r +
               fabs(b[j]);
  }
}

static const row_program_t row_programs[] = {
    {{"softmax", 8, 0, 0, NULL, NULL}, hand_softmax_rows, softmax_error_scale},
    {{"layernorm", 8, 0, 0, NULL, NULL}, hand_layernorm_rows,
     layernorm_error_scale},
};
enum { NPROGRAMS = sizeof row_programs / sizeof row_programs[0] };

/* ---- the workspace ------------------------------------------------------------------------ */

typedef struct {
  const row_program_t* program;
  const program_text_t* text;
  int64_t rows, cols;
  int64_t cols_wanted; /* > 0: every input's last axis gets this size instead of the .args' */
  int ninputs;
  uj_tensor_t inputs[BENCH_MAX_IO];
  uj_tensor_t output;
  const float *x, *w, *b; /* the inputs by name, for the hand-written kernel (w, b: NULL when absent) */
  double* reference;      /* the program in f64 */
  double* error_scale;    /* per element, see row_tolerance */
} row_workspace_t;

static int64_t tensor_numel(const uj_tensor_t* t) {
  int64_t count = 1;
  for (int d = 0; d < t->ndim; d++) count *= t->dims[d];
  return count;
}

static void row_workspace_free(row_workspace_t* ws) {
  for (int i = 0; i < ws->ninputs; i++) free(ws->inputs[i].data);
  free(ws->output.data);
  free(ws->reference);
  free(ws->error_scale);
  memset(ws, 0, sizeof *ws);
}

/* The inputs with their .args shapes (a matrix gets `rows` rows), seeded
 * values in [0.5, 1.5), and the output sized by the library. */
static int make_tensors(row_workspace_t* ws, uj_program_t* program) {
  const char* name = ws->program->spec.name;
  ws->ninputs = uj_program_io_count(program, 0);
  if (ws->ninputs > BENCH_MAX_IO || uj_program_io_count(program, 1) != 1) {
    fprintf(stderr, "bench: %s.uj: a row program has at most %d inputs and one output\n", name, BENCH_MAX_IO);
    ws->ninputs = 0;
    return -1;
  }
  uint64_t seed = 0x2545f4914f6cdd1dull;
  for (int i = 0; i < ws->ninputs; i++) {
    const char* input = uj_program_io_name(program, 0, i);
    input_shape_t shape;
    if (!program_text_shape(ws->text, input, &shape)) {
      fprintf(stderr, "bench: %s.args gives no --shape for input '%s'\n", name, input);
      return -1;
    }
    uj_tensor_t* t = &ws->inputs[i];
    *t = (uj_tensor_t){NULL, UJ_F32, UJ_CPU, shape.ndim, {0}};
    memcpy(t->dims, shape.dims, sizeof shape.dims);
    if (t->ndim == 2) t->dims[0] = ws->rows;
    if (ws->cols_wanted > 0 && t->ndim > 0) t->dims[t->ndim - 1] = ws->cols_wanted;
    if (!(t->data = malloc((size_t)tensor_numel(t) * sizeof(float)))) {
      fprintf(stderr, "bench: out of memory for %s's input '%s'\n", name, input);
      return -1;
    }
    bench_fill_uniform(t->data, tensor_numel(t), &seed);
    const float** slot = NULL;
    if (strcmp(input, "x") == 0) slot = &ws->x;
    else if (strcmp(input, "w") == 0) slot = &ws->w;
    else if (strcmp(input, "b") == 0) slot = &ws->b;
    if (!slot) {
      fprintf(stderr, "bench: %s.uj: the hand-written kernel knows inputs x, w and b, not '%s'\n", name, input);
      return -1;
    }
    *slot = t->data;
    if (slot == &ws->x) ws->cols = t->dims[t->ndim - 1];
  }
  const uj_tensor_t* inputs[BENCH_MAX_IO];
  for (int i = 0; i < ws->ninputs; i++) inputs[i] = &ws->inputs[i];
  uj_tensor_t* out = &ws->output;
  *out = (uj_tensor_t){NULL, UJ_F32, UJ_CPU, 0, {0}};
  if (!ws->x || uj_program_shape(program, UJ_FORWARD, inputs, NULL, 0, &out->ndim, out->dims) != UJ_OK) {
    fprintf(stderr, "bench: %s: %s\n", name, ws->x ? uj_last_error() : "no input x");
    return -1;
  }
  if (out->ndim != 2 || out->dims[0] != ws->rows || out->dims[1] != ws->cols) {
    fprintf(stderr, "bench: %s: the output is not the %lldx%lld matrix of x\n", name, (long long)ws->rows,
            (long long)ws->cols);
    return -1;
  }
  if (!(out->data = malloc((size_t)(ws->rows * ws->cols) * sizeof(float)))) return -1;
  return 0;
}

/* The program in f64 on the interpreter, and the error scales. */
static int make_reference(row_workspace_t* ws) {
  const char* name = ws->program->spec.name;
  int64_t count = ws->rows * ws->cols;
  uj_tensor_t wide[BENCH_MAX_IO], wide_out = ws->output;
  const uj_tensor_t* inputs[BENCH_MAX_IO];
  const double *x = NULL, *w = NULL, *b = NULL;
  int status = 0;
  for (int i = 0; i < ws->ninputs; i++) {
    wide[i] = ws->inputs[i];
    wide[i].dtype = UJ_F64;
    int64_t numel = tensor_numel(&ws->inputs[i]);
    double* data = malloc((size_t)numel * sizeof(double));
    wide[i].data = data;
    inputs[i] = &wide[i];
    if (!data) {
      status = -1;
      continue;
    }
    for (int64_t k = 0; k < numel; k++) data[k] = ((const float*)ws->inputs[i].data)[k];
    if (ws->inputs[i].data == ws->x) x = data;
    if (ws->inputs[i].data == ws->w) w = data;
    if (ws->inputs[i].data == ws->b) b = data;
  }
  wide_out.dtype = UJ_F64;
  wide_out.data = ws->reference = malloc((size_t)count * sizeof(double));
  ws->error_scale = malloc((size_t)count * sizeof(double));
  if (status || !ws->reference || !ws->error_scale) {
    fprintf(stderr, "bench: out of memory for %s's f64 reference\n", name);
    status = -1;
  }
  uj_ctx_t* ctx = status ? NULL : uj_ctx_new();
  uj_program_t* program = NULL;
  uj_tensor_t* outputs[1] = {&wide_out};
  if (!status && (!ctx || uj_ctx_set_engine(ctx, UJ_ENGINE_INTERP) != UJ_OK ||
                  uj_program_parse(ws->text->source, &program) != UJ_OK ||
                  uj_program_run(ctx, program, UJ_FORWARD, inputs, ws->ninputs, NULL, 0, outputs, 1) != UJ_OK)) {
    fprintf(stderr, "bench: %s in f64 on the interpreter: %s\n", name, uj_last_error());
    status = -1;
  }
  for (int64_t r = 0; r < ws->rows && !status; r++)
    ws->program->error_scale(x + r * ws->cols, w, b, ws->reference + r * ws->cols, ws->cols,
                             ws->error_scale + r * ws->cols);
  uj_program_free(program);
  uj_ctx_free(ctx);
  for (int i = 0; i < ws->ninputs; i++) free(wide[i].data);
  return status;
}

static int row_workspace_new(const row_program_t* program, const program_text_t* text, int64_t rows,
                             int64_t cols_wanted, row_workspace_t* ws) {
  memset(ws, 0, sizeof *ws);
  ws->program = program;
  ws->text = text;
  ws->rows = rows;
  ws->cols_wanted = cols_wanted;
  uj_program_t* parsed;
  if (uj_program_parse(text->source, &parsed) != UJ_OK) {
    fprintf(stderr, "bench: %s.uj: %s\n", program->spec.name, uj_last_error());
    return -1;
  }
  int status = make_tensors(ws, parsed);
  uj_program_free(parsed);
  if (!status) status = make_reference(ws);
  if (status) row_workspace_free(ws);
  return status;
}

/* gamma_n + 16u for f32 sums of `cols` terms. An f32 result differs from
 * the f64 reference mostly through the order of its sums: a sum of n terms
 * in any order is within gamma_n * sum|terms| of the exact one,
 * gamma_n = n*u/(1 - n*u), u = 2^-24. Each workload says, per element, the
 * magnitude that error is scaled by (error_scale, from a first-order
 * analysis of its formula); an element passes when
 * |got - ref| <= (gamma_n + 16u) * scale, the 16u covering the roundings
 * outside the sums (exp, the divisions, rsqrt) with room to spare. A wrong
 * or partial sum, a missing term or a misplaced row is off by far more. */
static double row_tolerance(int64_t cols) {
  const double u = 0x1p-24;
  return (double)cols * u / (1 - (double)cols * u) + 16 * u;
}

/* The largest |got - ref| / scale (INFINITY for a NaN). */
static double row_max_error(const row_workspace_t* ws) {
  const float* got = ws->output.data;
  double worst = 0;
  for (int64_t k = 0; k < ws->rows * ws->cols; k++) {
    double diff = fabs((double)got[k] - ws->reference[k]);
    double err = ws->error_scale[k] > 0 ? diff / ws->error_scale[k] : diff == 0 ? 0 : INFINITY;
    if (err != err) return INFINITY;
    if (err > worst) worst = err;
  }
  return worst;
}

/* ---- running and timing --------------------------------------------------------------------- */

typedef struct {
  runner_t* runner;
  row_workspace_t* ws;
} row_call_t;

static int row_call(void* arg) {
  row_call_t* call = arg;
  row_workspace_t* ws = call->ws;
  const program_spec_t* spec = &ws->program->spec;
  const uj_tensor_t* inputs[BENCH_MAX_IO];
  uj_tensor_t* outputs[1] = {&ws->output};
  for (int i = 0; i < ws->ninputs; i++) inputs[i] = &ws->inputs[i];
  switch (call->runner->kind) {
    case RUNNER_MIR:
    case RUNNER_C:
    case RUNNER_AUTO:
      if (uj_program_run(call->runner->ctx, call->runner->program, UJ_FORWARD, inputs, ws->ninputs, NULL, 0, outputs,
                         1) == UJ_OK)
        return 0;
      fprintf(stderr, "bench: %s on %s: %s\n", spec->name, runner_name(call->runner->kind), uj_last_error());
      return -1;
    case RUNNER_AOT: {
      void* data[BENCH_MAX_IO];
      void* out[1] = {ws->output.data};
      const int64_t* dims[BENCH_MAX_IO];
      for (int i = 0; i < ws->ninputs; i++) data[i] = ws->inputs[i].data, dims[i] = ws->inputs[i].dims;
      int64_t out_dims[UJ_MAX_DIMS];
      const aot_kernel_t* kernel = aot_find(spec->name);
      if (!kernel) {
        fprintf(stderr, "bench: %s: no AOT kernel was built\n", spec->name);
        return -1;
      }
      if (kernel->dims(dims, NULL, 0, out_dims) != 2 || out_dims[0] != ws->rows || out_dims[1] != ws->cols) {
        fprintf(stderr, "bench: %s: the AOT kernel sizes its output differently from the library\n", spec->name);
        return -1;
      }
      int status = kernel->run(data, dims, out, NULL);
      if (status == 0) return 0;
      fprintf(stderr, "bench: %s: the AOT kernel returned %d\n", spec->name, status);
      return -1;
    }
    case RUNNER_HAND: ws->program->hand(ws->x, ws->w, ws->b, ws->output.data, ws->rows, ws->cols); return 0;
    default: fprintf(stderr, "bench: %s: no %s runner for row programs\n", spec->name, runner_name(call->runner->kind));
  }
  return -1;
}

static throughput_row_t* add_result(rows_results_t* res, int program, runner_kind_t kind, int threads) {
  if (res->nresults == ROWS_MAX_RESULTS) return NULL;
  throughput_row_t* row = &res->results[res->nresults++];
  *row = (throughput_row_t){program, res->rows * res->cols, kind, threads, ROW_FAILED, 0, 0, NULL};
  return row;
}

/* Checks, then times, one runner. */
static void measure_runner(rows_results_t* res, int p, row_workspace_t* ws, runner_kind_t kind, int threads) {
  throughput_row_t* row = add_result(res, p, kind, threads);
  if (!row) return;
  runner_t runner;
  int opened = runner_open(&runner, kind, threads, ws->text);
  if (opened <= 0) {
    row->status = opened == 0 ? ROW_UNAVAILABLE : ROW_FAILED;
    return;
  }
  float* y = ws->output.data;
  for (int64_t k = 0; k < ws->rows * ws->cols; k++) y[k] = NAN; /* a runner that writes nothing cannot pass */
  row_call_t call = {&runner, ws};
  if (row_call(&call) == 0) {
    row->max_error = row_max_error(ws);
    row->status = row->max_error <= row_tolerance(ws->cols) ? ROW_OK : ROW_MISMATCH;
  }
  if (row->status == ROW_OK) {
    row->ns_per_call = bench_time_calls(row_call, &call, res->short_run ? 3 : 7, res->short_run ? 0 : 20e6);
    if (row->ns_per_call < 0) row->status = ROW_FAILED;
  }
  runner_close(&runner);
}

int rows_matrix_shape(int short_run, int64_t* rows, int64_t* cols) {
  program_text_t text;
  if (program_text_load(&row_programs[0].spec, &text) != 0) return -1;
  input_shape_t shape;
  int found = program_text_shape(&text, "x", &shape) && shape.ndim == 2;
  program_text_free(&text);
  if (!found) {
    fprintf(stderr, "bench: %s.args gives x no 2-D --shape\n", row_programs[0].spec.name);
    return -1;
  }
  *rows = short_run ? (shape.dims[0] + 3) / 4 : shape.dims[0];
  *cols = shape.dims[1];
  return 0;
}

int rows_measure(const peer_results_t* peers, int short_run, rows_results_t* res) {
  memset(res, 0, sizeof *res);
  res->short_run = short_run;
  if (rows_matrix_shape(short_run, &res->rows, &res->cols) != 0) return 1;
  static const struct {
    runner_kind_t kind;
    int threads;
  } plan[] = {{RUNNER_MIR, 1}, {RUNNER_MIR, 2}, {RUNNER_C, 1}, {RUNNER_C, 2}, {RUNNER_AOT, 1}, {RUNNER_HAND, 1}};
  int status = 0;
  for (int p = 0; p < NPROGRAMS; p++) {
    res->names[res->nprograms++] = row_programs[p].spec.name;
    program_text_t text;
    row_workspace_t ws;
    if (program_text_load(&row_programs[p].spec, &text) != 0) {
      add_result(res, p, RUNNER_INTERP, 1);
      status = 1;
      continue;
    }
    if (row_workspace_new(&row_programs[p], &text, res->rows, 0, &ws) != 0) {
      add_result(res, p, RUNNER_INTERP, 1);
      status = 1;
    } else {
      for (size_t k = 0; k < sizeof plan / sizeof plan[0]; k++) measure_runner(res, p, &ws, plan[k].kind, plan[k].threads);
      row_workspace_free(&ws);
    }
    program_text_free(&text);
    for (int k = peers_find(peers, res->names[p], res->rows * res->cols, 0); k >= 0;
         k = peers_find(peers, res->names[p], res->rows * res->cols, k + 1)) {
      const peer_row_t* peer = &peers->rows[k];
      throughput_row_t* row = add_result(res, p, RUNNER_PEER, peer->threads);
      if (!row) break;
      row->peer = peer->peer;
      row->status = peer->checked_ok ? ROW_OK : ROW_MISMATCH;
      row->max_error = peer->max_error;
      row->ns_per_call = peer->ns_per_call;
    }
  }
  for (int r = 0; r < res->nresults; r++)
    if (res->results[r].status == ROW_MISMATCH || res->results[r].status == ROW_FAILED) status = 1;
  return status;
}

/* ---- one shape at a time, for the suite (suite.c) ------------------------------------------- */

struct row_case {
  program_text_t text;
  row_workspace_t ws;
};

int row_case_new(const char* name, int64_t rows, int64_t cols, row_case_t** out) {
  *out = NULL;
  const row_program_t* program = NULL;
  for (int p = 0; p < NPROGRAMS; p++)
    if (strcmp(row_programs[p].spec.name, name) == 0) program = &row_programs[p];
  row_case_t* c = program ? calloc(1, sizeof *c) : NULL;
  if (!c) {
    fprintf(stderr, "bench: %s: %s\n", name, program ? "out of memory" : "not a row program");
    return -1;
  }
  if (program_text_load(&program->spec, &c->text) != 0) {
    free(c);
    return -1;
  }
  if (row_workspace_new(program, &c->text, rows, cols, &c->ws) != 0) {
    program_text_free(&c->text);
    free(c);
    return -1;
  }
  *out = c;
  return 0;
}

void row_case_free(row_case_t* c) {
  if (!c) return;
  row_workspace_free(&c->ws);
  program_text_free(&c->text);
  free(c);
}

row_status_t row_case_measure(row_case_t* c, runner_kind_t kind, int threads, int samples, double min_sample_ns,
                              const bench_paired_t* alongside, bench_timing_t* timing, double* max_error) {
  row_workspace_t* ws = &c->ws;
  runner_t runner;
  int opened = runner_open(&runner, kind, threads, ws->text);
  if (opened <= 0) return opened == 0 ? ROW_UNAVAILABLE : ROW_FAILED;
  float* y = ws->output.data;
  for (int64_t k = 0; k < ws->rows * ws->cols; k++) y[k] = NAN;
  row_call_t call = {&runner, ws};
  row_status_t status = ROW_FAILED;
  if (row_call(&call) == 0) {
    *max_error = row_max_error(ws);
    status = *max_error <= row_tolerance(ws->cols) ? ROW_OK : ROW_MISMATCH;
  }
  if (status == ROW_OK && kind == RUNNER_AUTO) runner_warm_auto(&runner, row_call, &call);
  if (status == ROW_OK) {
    int timed = alongside ? bench_time_alternating(row_call, &call, alongside->call, alongside->arg, samples,
                                                   min_sample_ns, timing, alongside->timing,
                                                   alongside->fastest_ratio)
                          : bench_time_stats(row_call, &call, samples, min_sample_ns, timing);
    if (timed != 0) status = ROW_FAILED;
  }
  runner_close(&runner);
  return status;
}

void row_case_traffic(const row_case_t* c, int threads, traffic_t* t) {
  *t = (traffic_t){.nreads = 1, .nwrites = 1, .n = c->ws.rows * c->ws.cols, .threads = threads};
  t->reads[0] = c->ws.x;
  t->writes[0] = c->ws.output.data;
}

/* ---- the table -------------------------------------------------------------------------------- */

/* The time of the runner (a peer's name for RUNNER_PEER) on the same program, NAN when untimed. */
static double time_of(const rows_results_t* res, int program, runner_kind_t kind, const char* peer, int threads) {
  for (int r = 0; r < res->nresults; r++) {
    const throughput_row_t* row = &res->results[r];
    if (row->program != program || row->kind != kind || row->threads != threads || row->status != ROW_OK) continue;
    if (kind == RUNNER_PEER && strcmp(row->peer, peer) != 0) continue;
    return row->ns_per_call;
  }
  return NAN;
}

static void print_ratio(int width, double time, double base) {
  if (time == time && base == base && base > 0) printf(" %*.2f", width, time / base);
  else printf(" %*s", width, "-");
}

void rows_print(const rows_results_t* res, const peer_results_t* peers) {
  printf("\nrow-wise reductions over %lldx%lld f32 (bench/softmax.uj, bench/layernorm.uj; their .args give the\n",
         (long long)res->rows, (long long)res->cols);
  printf("shapes%s); 8 bytes/element (x read, y written once)\n", res->short_run ? ", --short takes a quarter of the rows" : "");
  printf("check: against the program in f64 on the interpreter, err = max |got - ref| / scale, scale the\n");
  printf("       magnitude an f32 evaluation in any order of its sums is off by per unit of gamma_n (softmax |y|,\n");
  printf("       layernorm see bench/rows.c); passes at err <= gamma_n + 16u = %.2e (n = %lld, u = 2^-24)\n",
         row_tolerance(res->cols), (long long)res->cols);
  printf("engines: mir, c through uj_program_run; aot = `uopjit aot` C built with gcc -O3 -march=native;\n");
  printf("         hand = bench/rows_baseline.c, one fused pass per row, gcc -O3 -march=native -ffast-math;\n");
  printf("         peers: %s\n", peers->note);
  printf("t/hand, t/numpy = time over the hand kernel's and numpy's (1 thread); t/torch over torch's on as\n");
  printf("many threads; below 1 is faster\n");
  printf("%-9s %-9s %-8s %3s %-11s %8s %9s %8s %7s %7s %7s %7s\n", "program", "shape", "engine", "thr", "check",
         "err", "ms/call", "ns/elem", "GB/s", "t/hand", "t/numpy", "t/torch");
  char shape[32];
  snprintf(shape, sizeof shape, "%lldx%lld", (long long)res->rows, (long long)res->cols);
  for (int r = 0; r < res->nresults; r++) {
    const throughput_row_t* row = &res->results[r];
    if (r > 0 && row->program != res->results[r - 1].program) printf("\n");
    static const char* const status_names[] = {"ok", "reference", "MISMATCH", "unavailable", "FAILED"};
    printf("%-9s %-9s %-8s %3d %-11s", res->names[row->program], shape,
           row->kind == RUNNER_PEER ? row->peer : runner_name(row->kind), row->threads, status_names[row->status]);
    int checked = row->status == ROW_OK || row->status == ROW_MISMATCH;
    if (checked) printf(" %8.1e", row->max_error);
    else printf(" %8s", "-");
    if (row->status != ROW_OK) {
      printf("\n");
      continue;
    }
    double ns = row->ns_per_call;
    printf(" %9.2f %8.3f %7.2f", ns / 1e6, ns / (double)row->n, 8.0 * (double)row->n / ns);
    print_ratio(7, ns, time_of(res, row->program, RUNNER_HAND, NULL, 1));
    print_ratio(7, ns, time_of(res, row->program, RUNNER_PEER, "numpy", 1));
    print_ratio(7, ns, time_of(res, row->program, RUNNER_PEER, "torch", row->threads));
    printf("\n");
  }
}
