/* bench/workload.c: one program's tensors at one size, the runners that
 * execute it on each engine, the check of every runner's result against the
 * interpreter's, and the throughput timing.
 *
 * The program comes from bench/<name>.uj and its 0-d inputs from the
 * --scalar option in bench/<name>.args (the row programs' shapes from its
 * --shape options, read here for rows.c): the same two files the Makefile
 * hands to `uopjit aot` for the AOT kernel, so there is one source of truth.
 * Outputs that carry an input's name (Adam's m, v, p) are given that input's
 * memory, so in-place updates run in place on every engine.
 *
 * Throughput is bench_time_calls' median per call (util.c). A call through
 * the public API includes its dispatch, as a user's call would. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* ---- program files ----------------------------------------------------------------- */

static char* program_file(const char* name, const char* extension) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%s", BENCH_SOURCE_DIR, name, extension);
  return bench_read_file(path);
}

/* The next word of *rest (NULL at the end), splitting in place. */
static char* next_word(char** rest) {
  char* word;
  while ((word = strsep(rest, " \t\r\n")) != NULL && !*word) {
  }
  return word;
}

/* `--shape [NAME=]D0,D1,...` into text->shapes; 0, or -1 with a message. */
static int parse_shape(program_text_t* text, char* value) {
  const char* where = text->spec->name;
  if (text->nshapes == BENCH_MAX_IO) {
    fprintf(stderr, "bench: %s/%s.args: more than %d --shape options\n", BENCH_SOURCE_DIR, where, BENCH_MAX_IO);
    return -1;
  }
  input_shape_t* shape = &text->shapes[text->nshapes];
  char* equals = strchr(value, '=');
  char* dims = equals ? equals + 1 : value;
  if (equals) {
    *equals = '\0';
    if (!(shape->name = strdup(value))) return -1;
  }
  text->nshapes++; /* counted now so that program_text_free frees the name */
  shape->ndim = 0;
  for (char* dim; (dim = strsep(&dims, ",")) != NULL;) {
    char* end;
    long long size = strtoll(dim, &end, 10);
    if (shape->ndim == UJ_MAX_DIMS || end == dim || *end || size < 1) {
      fprintf(stderr, "bench: %s/%s.args: --shape wants up to %d sizes >= 1 separated by ',', found '%s'\n",
              BENCH_SOURCE_DIR, where, UJ_MAX_DIMS, dim);
      return -1;
    }
    shape->dims[shape->ndim++] = size;
  }
  return 0;
}

/* Reads the --scalar lists and --shape options out of the .args text. Any
 * other option is an error: the bench would silently run something other
 * than what `uopjit aot` compiled. */
static int parse_args(program_text_t* text) {
  char* copy = strdup(text->args);
  char* rest = copy;
  int status = copy ? 0 : -1;
  for (char* word; !status && (word = next_word(&rest)) != NULL;) {
    int scalar = strcmp(word, "--scalar") == 0, shape = strcmp(word, "--shape") == 0;
    char* value = scalar || shape ? next_word(&rest) : NULL;
    if (!value) {
      fprintf(stderr,
              "bench: %s/%s.args: the bench understands only --scalar NAME[,NAME...] and "
              "--shape [NAME=]D0[,D1...], found '%s'\n",
              BENCH_SOURCE_DIR, text->spec->name, word);
      status = -1;
    } else if (shape) {
      status = parse_shape(text, value);
    }
    for (char* name; scalar && !status && (name = strsep(&value, ",")) != NULL;)
      if (*name && text->nscalars < BENCH_MAX_IO && !(text->scalars[text->nscalars++] = strdup(name))) status = -1;
  }
  free(copy);
  return status;
}

int program_text_load(const program_spec_t* spec, program_text_t* text) {
  memset(text, 0, sizeof *text);
  text->spec = spec;
  text->source = program_file(spec->name, "uj");
  text->args = program_file(spec->name, "args");
  if (!text->source || !text->args || parse_args(text) != 0) {
    program_text_free(text);
    return -1;
  }
  return 0;
}

void program_text_free(program_text_t* text) {
  free(text->source);
  free(text->args);
  for (int i = 0; i < text->nscalars; i++) free(text->scalars[i]);
  for (int i = 0; i < text->nshapes; i++) free(text->shapes[i].name);
  memset(text, 0, sizeof *text);
}

int program_text_shape(const program_text_t* text, const char* name, input_shape_t* shape) {
  const input_shape_t* fallback = NULL;
  for (int i = 0; i < text->nshapes; i++) {
    if (text->shapes[i].name && strcmp(text->shapes[i].name, name) == 0) return *shape = text->shapes[i], 1;
    if (!text->shapes[i].name) fallback = &text->shapes[i];
  }
  if (fallback) *shape = *fallback;
  return fallback != NULL;
}

static int is_scalar(const program_text_t* text, const char* name) {
  for (int i = 0; i < text->nscalars; i++)
    if (strcmp(text->scalars[i], name) == 0) return 1;
  return 0;
}

/* ---- workspaces ------------------------------------------------------------------------ */

/* The values the CLI gives these names; other scalars are random. */
int bench_named_scalar(const char* name, float* value) {
  static const struct {
    const char* name;
    float value;
  } known[] = {{"lr", 1e-3f}, {"b1", 0.9f}, {"b2", 0.999f}, {"eps", 1e-8f}, {"wd", 1e-2f}};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strcmp(known[i].name, name) == 0) return *value = known[i].value, 1;
  return 0;
}

static float* alloc_floats(int64_t count) {
  float* p = malloc((size_t)(count > 0 ? count : 1) * sizeof(float));
  if (!p) fprintf(stderr, "bench: out of memory for %lld floats\n", (long long)count);
  return p;
}

static int64_t numel(const uj_tensor_t* t) {
  int64_t count = 1;
  for (int d = 0; d < t->ndim; d++) count *= t->dims[d];
  return count;
}

/* Points a baseline's names at the workspace's tensors (none for NULL). */
static int bind_baseline(workspace_t* ws, const uj_program_t* program, const unfused_baseline_t* base, float** tensors) {
  for (int k = 0; base && k < base->count; k++) {
    tensors[k] = NULL;
    for (int i = 0; i < ws->ninputs && !tensors[k]; i++)
      if (strcmp(uj_program_io_name(program, 0, i), base->names[k]) == 0) tensors[k] = ws->inputs[i].data;
    for (int o = 0; o < ws->noutputs && !tensors[k]; o++)
      if (strcmp(uj_program_io_name(program, 1, o), base->names[k]) == 0) tensors[k] = ws->outputs[o].data;
    if (!tensors[k]) {
      fprintf(stderr, "bench: %s.uj has no tensor '%s', which its baseline in bench/ uses\n", ws->text->spec->name,
              base->names[k]);
      return -1;
    }
  }
  return 0;
}

/* Whether the AOT kernel sizes every output as the library does. */
static int aot_dims_agree(const workspace_t* ws) {
  const aot_kernel_t* kernel = aot_find(ws->text->spec->name);
  if (!kernel) return 0;
  const int64_t* input_dims[BENCH_MAX_IO];
  for (int i = 0; i < ws->ninputs; i++) input_dims[i] = ws->inputs[i].dims;
  for (int o = 0; o < ws->noutputs; o++) {
    int64_t dims[UJ_MAX_DIMS];
    int rank = kernel->dims(input_dims, NULL, o, dims);
    if (rank != ws->outputs[o].ndim) return 0;
    for (int d = 0; d < rank; d++)
      if (dims[d] != ws->outputs[o].dims[d]) return 0;
  }
  return 1;
}

int workspace_new(const program_text_t* text, int64_t n, workspace_t* ws) {
  memset(ws, 0, sizeof *ws);
  ws->text = text;
  ws->n = n;
  if (text->nshapes > 0) {
    fprintf(stderr, "bench: %s.args gives --shape: a row program, which rows.c measures, not a 1-D one\n",
            text->spec->name);
    return -1;
  }
  uj_program_t* program;
  if (uj_program_parse(text->source, &program) != UJ_OK) {
    fprintf(stderr, "bench: %s.uj: %s\n", text->spec->name, uj_last_error());
    return -1;
  }
  ws->ninputs = uj_program_io_count(program, 0);
  ws->noutputs = uj_program_io_count(program, 1);
  int status = 0;
  if (ws->ninputs > BENCH_MAX_IO || ws->noutputs > BENCH_MAX_IO) {
    fprintf(stderr, "bench: %s.uj has more than %d inputs or outputs\n", text->spec->name, BENCH_MAX_IO);
    ws->ninputs = ws->noutputs = 0;
    status = -1;
  }
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < ws->ninputs && !status; i++) {
    const char* name = uj_program_io_name(program, 0, i);
    int scalar = is_scalar(text, name);
    ws->inputs[i] = (uj_tensor_t){NULL, UJ_F32, UJ_CPU, scalar ? 0 : 1, {n}};
    ws->input_numel[i] = scalar ? 1 : n;
    float* data = alloc_floats(ws->input_numel[i]);
    ws->pristine[i] = alloc_floats(ws->input_numel[i]);
    ws->inputs[i].data = data;
    if (!data || !ws->pristine[i]) {
      status = -1;
      break;
    }
    if (!scalar || !bench_named_scalar(name, &data[0])) bench_fill_uniform(data, ws->input_numel[i], &seed);
    memcpy(ws->pristine[i], data, (size_t)ws->input_numel[i] * sizeof(float));
  }
  const uj_tensor_t* inputs[BENCH_MAX_IO];
  for (int i = 0; i < ws->ninputs; i++) inputs[i] = &ws->inputs[i];
  for (int o = 0; o < ws->noutputs && !status; o++) {
    uj_tensor_t* out = &ws->outputs[o];
    *out = (uj_tensor_t){NULL, UJ_F32, UJ_CPU, 0, {0}};
    if (uj_program_shape(program, UJ_FORWARD, inputs, NULL, o, &out->ndim, out->dims) != UJ_OK) {
      fprintf(stderr, "bench: %s.uj: %s\n", text->spec->name, uj_last_error());
      status = -1;
      break;
    }
    ws->output_numel[o] = numel(out);
    ws->output_alias[o] = -1;
    for (int i = 0; i < ws->ninputs; i++)
      if (strcmp(uj_program_io_name(program, 1, o), uj_program_io_name(program, 0, i)) == 0) ws->output_alias[o] = i;
    int alias = ws->output_alias[o];
    out->data = alias >= 0 ? ws->inputs[alias].data : alloc_floats(ws->output_numel[o]);
    ws->reference[o] = alloc_floats(ws->output_numel[o]);
    if (!out->data || !ws->reference[o]) status = -1;
  }
  for (int s = 0; s < UNFUSED_SCRATCH && !status; s++) {
    if (!(ws->scratch[s] = alloc_floats(n))) status = -1;
    else memset(ws->scratch[s], 0, (size_t)n * sizeof(float)); /* fault the pages in now */
  }
  if (!status) status = bind_baseline(ws, program, text->spec->unfused, ws->unfused_tensors);
  if (!status) status = bind_baseline(ws, program, text->spec->hand, ws->hand_tensors);
  if (!status) ws->aot_dims_agree = aot_dims_agree(ws);
  uj_program_free(program);
  if (status) workspace_free(ws);
  else workspace_reset(ws);
  return status;
}

void workspace_free(workspace_t* ws) {
  for (int i = 0; i < ws->ninputs; i++) free(ws->inputs[i].data), free(ws->pristine[i]);
  for (int o = 0; o < ws->noutputs; o++) {
    if (ws->output_alias[o] < 0) free(ws->outputs[o].data);
    free(ws->reference[o]);
  }
  for (int s = 0; s < UNFUSED_SCRATCH; s++) free(ws->scratch[s]);
  memset(ws, 0, sizeof *ws);
}

void workspace_reset(workspace_t* ws) {
  for (int i = 0; i < ws->ninputs; i++)
    memcpy(ws->inputs[i].data, ws->pristine[i], (size_t)ws->input_numel[i] * sizeof(float));
  for (int o = 0; o < ws->noutputs; o++) {
    if (ws->output_alias[o] >= 0) continue;
    float* data = ws->outputs[o].data;
    for (int64_t k = 0; k < ws->output_numel[o]; k++) data[k] = NAN;
  }
}

void workspace_keep_reference(workspace_t* ws) {
  for (int o = 0; o < ws->noutputs; o++)
    memcpy(ws->reference[o], ws->outputs[o].data, (size_t)ws->output_numel[o] * sizeof(float));
}

int workspace_reference_f64(workspace_t* ws) {
  const char* name = ws->text->spec->name;
  uj_tensor_t wide_in[BENCH_MAX_IO], wide_out[BENCH_MAX_IO];
  const uj_tensor_t* inputs[BENCH_MAX_IO];
  uj_tensor_t* outputs[BENCH_MAX_IO];
  int status = 0;
  for (int i = 0; i < ws->ninputs; i++) {
    wide_in[i] = ws->inputs[i];
    wide_in[i].dtype = UJ_F64;
    double* data = malloc((size_t)ws->input_numel[i] * sizeof(double));
    wide_in[i].data = data;
    inputs[i] = &wide_in[i];
    if (!data) {
      status = -1;
      continue;
    }
    for (int64_t k = 0; k < ws->input_numel[i]; k++) data[k] = ws->pristine[i][k];
  }
  for (int o = 0; o < ws->noutputs; o++) {
    wide_out[o] = ws->outputs[o];
    wide_out[o].dtype = UJ_F64;
    int alias = ws->output_alias[o];
    wide_out[o].data = alias >= 0 ? wide_in[alias].data : malloc((size_t)ws->output_numel[o] * sizeof(double));
    outputs[o] = &wide_out[o];
    if (!wide_out[o].data) status = -1;
  }
  if (status) fprintf(stderr, "bench: out of memory for %s's f64 reference\n", name);
  uj_ctx_t* ctx = status ? NULL : uj_ctx_new();
  uj_program_t* program = NULL;
  if (!status && (!ctx || uj_ctx_set_engine(ctx, UJ_ENGINE_INTERP) != UJ_OK ||
                  uj_program_parse(ws->text->source, &program) != UJ_OK ||
                  uj_program_run(ctx, program, UJ_FORWARD, inputs, ws->ninputs, NULL, 0, outputs, ws->noutputs) !=
                      UJ_OK)) {
    fprintf(stderr, "bench: %s in f64 on the interpreter: %s\n", name, uj_last_error());
    status = -1;
  }
  for (int o = 0; o < ws->noutputs && !status; o++) {
    const double* wide = wide_out[o].data;
    for (int64_t k = 0; k < ws->output_numel[o]; k++) ws->reference[o][k] = (float)wide[k];
  }
  uj_program_free(program);
  uj_ctx_free(ctx);
  for (int o = 0; o < ws->noutputs; o++)
    if (ws->output_alias[o] < 0) free(wide_out[o].data);
  for (int i = 0; i < ws->ninputs; i++) free(wide_in[i].data);
  return status;
}

double workspace_max_error(const workspace_t* ws) {
  double worst = 0;
  for (int o = 0; o < ws->noutputs; o++) {
    const float* got = ws->outputs[o].data;
    for (int64_t k = 0; k < ws->output_numel[o]; k++) {
      double ref = ws->reference[o][k];
      double err = fabs((double)got[k] - ref) / fmax(1.0, fabs(ref));
      if (err != err) return INFINITY;
      if (err > worst) worst = err;
    }
  }
  return worst;
}

double workspace_tolerance(const workspace_t* ws) {
  const program_spec_t* spec = ws->text->spec;
  return fmax(spec->tolerance, (double)ws->n * spec->tolerance_per_element);
}

/* ---- runners ---------------------------------------------------------------------------- */

const char* runner_name(runner_kind_t kind) {
  switch (kind) {
    case RUNNER_INTERP: return "interp";
    case RUNNER_MIR: return "mir";
    case RUNNER_C: return "c";
    case RUNNER_AOT: return "aot";
    case RUNNER_UNFUSED: return "unfused";
    case RUNNER_HAND: return "hand";
    case RUNNER_PEER: return "peer";
    case RUNNER_AUTO: return "auto";
  }
  return "?";
}

static uj_engine_t runner_engine(runner_kind_t kind) {
  switch (kind) {
    case RUNNER_MIR: return UJ_ENGINE_MIR;
    case RUNNER_C: return UJ_ENGINE_C;
    case RUNNER_AUTO: return UJ_ENGINE_AUTO;
    default: return UJ_ENGINE_INTERP;
  }
}

int runner_open(runner_t* r, runner_kind_t kind, int threads, const program_text_t* text) {
  memset(r, 0, sizeof *r);
  r->kind = kind;
  r->threads = threads;
  if (kind == RUNNER_AOT) return aot_find(text->spec->name) != NULL;
  if (kind == RUNNER_UNFUSED) return text->spec->unfused != NULL;
  /* a row program (shapes in its .args) has its hand-written kernel in rows.c */
  if (kind == RUNNER_HAND) return text->spec->hand != NULL || text->nshapes > 0;
  if (kind == RUNNER_PEER) return 0; /* measured by cpu_peers.py, not here */
  /* the context's thread pool is sized from UOPJIT_THREADS when its JIT
   * state is created, which the first engine query does */
  char count[16];
  snprintf(count, sizeof count, "%d", threads);
  setenv("UOPJIT_THREADS", count, 1);
  if (!(r->ctx = uj_ctx_new())) {
    fprintf(stderr, "bench: uj_ctx_new failed\n");
    return -1;
  }
  uj_engine_t engine = runner_engine(kind);
  if (!uj_engine_available(r->ctx, engine)) {
    runner_close(r);
    return 0;
  }
  if (uj_ctx_set_engine(r->ctx, engine) != UJ_OK || uj_program_parse(text->source, &r->program) != UJ_OK) {
    fprintf(stderr, "bench: %s on %s: %s\n", text->spec->name, runner_name(kind), uj_last_error());
    runner_close(r);
    return -1;
  }
  return 1;
}

void runner_close(runner_t* r) {
  uj_program_free(r->program);
  uj_ctx_free(r->ctx);
  r->program = NULL;
  r->ctx = NULL;
}

uj_status_t workspace_run(uj_ctx_t* ctx, uj_program_t* program, workspace_t* ws) {
  const uj_tensor_t* inputs[BENCH_MAX_IO];
  uj_tensor_t* outputs[BENCH_MAX_IO];
  for (int i = 0; i < ws->ninputs; i++) inputs[i] = &ws->inputs[i];
  for (int o = 0; o < ws->noutputs; o++) outputs[o] = &ws->outputs[o];
  return uj_program_run(ctx, program, UJ_FORWARD, inputs, ws->ninputs, NULL, 0, outputs, ws->noutputs);
}

int runner_run(runner_t* r, workspace_t* ws) {
  const program_spec_t* spec = ws->text->spec;
  switch (r->kind) {
    case RUNNER_INTERP:
    case RUNNER_MIR:
    case RUNNER_C:
    case RUNNER_AUTO:
      if (workspace_run(r->ctx, r->program, ws) == UJ_OK) return 0;
      fprintf(stderr, "bench: %s on %s: %s\n", spec->name, runner_name(r->kind), uj_last_error());
      return -1;
    case RUNNER_AOT: {
      if (!ws->aot_dims_agree) {
        fprintf(stderr, "bench: %s: the AOT kernel sizes its outputs differently from the library\n", spec->name);
        return -1;
      }
      void* inputs[BENCH_MAX_IO];
      void* outputs[BENCH_MAX_IO];
      const int64_t* input_dims[BENCH_MAX_IO];
      for (int i = 0; i < ws->ninputs; i++) inputs[i] = ws->inputs[i].data, input_dims[i] = ws->inputs[i].dims;
      for (int o = 0; o < ws->noutputs; o++) outputs[o] = ws->outputs[o].data;
      int status = aot_find(spec->name)->run(inputs, input_dims, outputs, NULL);
      if (status == 0) return 0;
      fprintf(stderr, "bench: %s: the AOT kernel returned %d\n", spec->name, status);
      return -1;
    }
    case RUNNER_UNFUSED: spec->unfused->run(ws->unfused_tensors, ws->n, ws->scratch); return 0;
    case RUNNER_HAND: spec->hand->run(ws->hand_tensors, ws->n, ws->scratch); return 0;
    case RUNNER_PEER: break; /* the peers' own (peers.c) */
  }
  fprintf(stderr, "bench: %s: the %s runner does not run 1-D programs\n", spec->name, runner_name(r->kind));
  return -1;
}

int runner_call(void* arg) {
  runner_call_t* call = arg;
  return runner_run(call->runner, call->ws);
}

double runner_time_ns(runner_t* r, workspace_t* ws, int samples, double min_sample_ns) {
  runner_call_t call = {r, ws};
  return bench_time_calls(runner_call, &call, samples, min_sample_ns);
}

void runner_warm_auto(runner_t* r, bench_call_fn call, void* arg) {
  if (r->kind != RUNNER_AUTO) return;
  double start = bench_now_ns();
  while (bench_now_ns() - start < 5e9) {
    uj_run_info_t info;
    if (uj_program_last_run(r->ctx, r->program, UJ_FORWARD, &info) != UJ_OK) return;
    if (info.tier == UJ_TIER_READY || info.tier == UJ_TIER_FAILED || info.tier == UJ_TIER_NONE) return;
    if (call(arg) != 0) return;
  }
}
