/* bench/gpu_rows.c: GPU rows beyond bench/<name>.uj at 1-D sizes: any
 * program on inputs of given shapes (the traffic-matched copy kernels, the
 * row-wise softmax and layernorm), and one Adam step over every parameter
 * tensor of a real model (GPT-2 small), one call per tensor and then one
 * multi-tensor call (uj_program_run_groups) over the same tensors.
 *
 * Every row is checked before it is timed: the same program on the same
 * initial values, widened to f64, through the CPU's best engine is the
 * reference, and each output element must agree within the row's
 * tolerance, relative to max(1, |ref|). Times are medians over samples, each sample a batch of
 * calls queued back to back and one synchronize, the batch sized to take a
 * few milliseconds so that the launch queue, not the clock, sets the pace.
 * A row's bandwidth counts the bytes the caller says the program must move
 * (each input read once, each output written once). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { MAX_SAMPLES = 16 };
#define BATCH_TARGET_NS 4e6

static float seeded_value(uint64_t* s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return 0.5f + (float)((*s >> 40) & 0xffffff) / 16777216.0f; /* [0.5, 1.5) */
}

static int64_t dims_numel(int ndim, const int64_t* dims) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= dims[d];
  return n;
}

/* A program's tensors on the host and on the device. */
typedef struct {
  uj_program_t* program;
  int nin, nout;
  uj_tensor_t host_in[BENCH_MAX_IO];  /* shapes, and data = the initial values */
  uj_tensor_t host_out[BENCH_MAX_IO]; /* where the device's outputs are copied back */
  uj_tensor_t dev_in[BENCH_MAX_IO], dev_out[BENCH_MAX_IO];
  const uj_tensor_t* dev_in_ptr[BENCH_MAX_IO];
  uj_tensor_t* dev_out_ptr[BENCH_MAX_IO];
  double* reference[BENCH_MAX_IO]; /* the outputs computed in f64 */
  int alias[BENCH_MAX_IO];
} case_io_t;

static void case_io_free(uj_ctx_t* ctx, case_io_t* io) {
  for (int i = 0; i < io->nin; i++) {
    free(io->host_in[i].data);
    if (io->dev_in[i].data) uj_tensor_free(ctx, &io->dev_in[i]);
  }
  for (int o = 0; o < io->nout; o++) {
    free(io->host_out[o].data);
    if (io->alias[o] < 0 && io->dev_out[o].data) uj_tensor_free(ctx, &io->dev_out[o]);
    free(io->reference[o]);
  }
  uj_program_free(io->program);
  memset(io, 0, sizeof *io);
}

static const gpu_input_t* find_input(const gpu_case_t* c, const char* name) {
  for (int i = 0; i < c->ninputs; i++)
    if (strcmp(c->inputs[i].name, name) == 0) return &c->inputs[i];
  return NULL;
}

/* The reference: the program on the CPU's best engine with every input
 * widened to f64, kept in f64. An f32 reference would not do: the CPU
 * engines add a sum's terms in order, and in f32 a sum of 2^26 terms near 1
 * stops growing at 2^25, off by half; in f64 it is good to 1e-9. */
static int case_reference(const gpu_case_t* c, case_io_t* io) {
  uj_tensor_t in[BENCH_MAX_IO], out[BENCH_MAX_IO];
  const uj_tensor_t* in_ptr[BENCH_MAX_IO];
  uj_tensor_t* out_ptr[BENCH_MAX_IO];
  int status = 0;
  memset(in, 0, sizeof in), memset(out, 0, sizeof out);
  for (int i = 0; i < io->nin && !status; i++) {
    in[i] = io->host_in[i];
    in[i].dtype = UJ_F64;
    int64_t n = dims_numel(in[i].ndim, in[i].dims);
    double* d = malloc((size_t)n * sizeof(double));
    in[i].data = d;
    if (!d) status = -1;
    for (int64_t k = 0; d && k < n; k++) d[k] = ((const float*)io->host_in[i].data)[k];
    in_ptr[i] = &in[i];
  }
  for (int o = 0; o < io->nout && !status; o++) {
    out[o] = io->host_out[o];
    out[o].dtype = UJ_F64;
    out[o].data = io->reference[o];
    if (io->alias[o] >= 0) {
      out_ptr[o] = &in[io->alias[o]];
    } else {
      out_ptr[o] = &out[o];
    }
  }
  uj_ctx_t* cpu = status ? NULL : uj_ctx_new(); /* AUTO on host tensors: the best CPU engine */
  if (!status && (!cpu || uj_program_run(cpu, io->program, UJ_FORWARD, in_ptr, io->nin, NULL, 0, out_ptr, io->nout) !=
                              UJ_OK)) {
    fprintf(stderr, "bench gpu %s on the CPU in f64: %s\n", c->label, uj_last_error());
    status = -1;
  }
  uj_ctx_free(cpu);
  for (int o = 0; o < io->nout && !status; o++)
    if (io->alias[o] >= 0)
      memcpy(io->reference[o], in[io->alias[o]].data,
             (size_t)dims_numel(out[o].ndim, out[o].dims) * sizeof(double));
  for (int i = 0; i < io->nin; i++) free(in[i].data);
  return status;
}

/* Parses, makes the host inputs and outputs, and computes the reference.
 * 0, or -1 with a message on stderr. */
static int case_io_host(const gpu_case_t* c, uint64_t seed, case_io_t* io) {
  memset(io, 0, sizeof *io);
  if (uj_program_parse(c->source, &io->program) != UJ_OK) {
    fprintf(stderr, "bench gpu %s: %s\n", c->label, uj_last_error());
    return -1;
  }
  io->nin = uj_program_io_count(io->program, 0);
  io->nout = uj_program_io_count(io->program, 1);
  if (io->nin > BENCH_MAX_IO || io->nout > BENCH_MAX_IO) {
    fprintf(stderr, "bench gpu %s: too many inputs or outputs\n", c->label);
    io->nin = io->nout = 0;
    return -1;
  }
  for (int o = 0; o < io->nout; o++) io->alias[o] = -1;
  for (int i = 0; i < io->nin; i++) {
    const char* name = uj_program_io_name(io->program, 0, i);
    const gpu_input_t* spec = find_input(c, name);
    if (!spec) {
      fprintf(stderr, "bench gpu %s: no shape for input %s\n", c->label, name);
      return -1;
    }
    uj_tensor_t* t = &io->host_in[i];
    *t = (uj_tensor_t){NULL, UJ_F32, UJ_CPU, spec->ndim, {0}};
    memcpy(t->dims, spec->dims, sizeof spec->dims);
    size_t n = (size_t)dims_numel(spec->ndim, spec->dims);
    float* data = malloc(n * sizeof(float));
    t->data = data;
    if (!data) return -1;
    for (size_t k = 0; k < n; k++) data[k] = spec->fixed ? spec->value : seeded_value(&seed);
  }
  const uj_tensor_t* in[BENCH_MAX_IO];
  for (int i = 0; i < io->nin; i++) in[i] = &io->host_in[i];
  for (int o = 0; o < io->nout; o++) {
    uj_tensor_t* t = &io->host_out[o];
    *t = (uj_tensor_t){NULL, UJ_F32, UJ_CPU, 0, {0}};
    if (uj_program_shape(io->program, UJ_FORWARD, in, NULL, o, &t->ndim, t->dims) != UJ_OK) {
      fprintf(stderr, "bench gpu %s: %s\n", c->label, uj_last_error());
      return -1;
    }
    for (int i = 0; i < io->nin; i++)
      if (strcmp(uj_program_io_name(io->program, 1, o), uj_program_io_name(io->program, 0, i)) == 0) io->alias[o] = i;
    size_t n = (size_t)dims_numel(t->ndim, t->dims);
    t->data = malloc(n * sizeof(float));
    io->reference[o] = malloc(n * sizeof(double));
    if (!t->data || !io->reference[o]) return -1;
  }
  return case_reference(c, io);
}

/* The device tensors, holding the pristine inputs. */
static int case_io_device(uj_ctx_t* ctx, case_io_t* io) {
  uj_status_t s = UJ_OK;
  for (int i = 0; i < io->nin && s == UJ_OK; i++) {
    const uj_tensor_t* src = &io->host_in[i];
    s = uj_tensor_alloc(ctx, UJ_CUDA, UJ_F32, src->ndim, src->dims, &io->dev_in[i]);
    if (s == UJ_OK) s = uj_tensor_copy(ctx, &io->dev_in[i], src);
    io->dev_in_ptr[i] = &io->dev_in[i];
  }
  for (int o = 0; o < io->nout && s == UJ_OK; o++) {
    if (io->alias[o] >= 0) {
      io->dev_out[o] = io->dev_in[io->alias[o]];
      io->dev_out_ptr[o] = &io->dev_in[io->alias[o]];
      continue;
    }
    s = uj_tensor_alloc(ctx, UJ_CUDA, UJ_F32, io->host_out[o].ndim, io->host_out[o].dims, &io->dev_out[o]);
    io->dev_out_ptr[o] = &io->dev_out[o];
  }
  if (s != UJ_OK) fprintf(stderr, "bench gpu: device tensors: %s\n", uj_last_error());
  return s == UJ_OK ? 0 : -1;
}

/* The pristine inputs again (the outputs are updated in place). */
static int case_io_restore(uj_ctx_t* ctx, case_io_t* io) {
  for (int i = 0; i < io->nin; i++)
    if (uj_tensor_copy(ctx, &io->dev_in[i], &io->host_in[i]) != UJ_OK) return -1;
  return 0;
}

/* The largest |got - ref| / max(1, |ref|) over every output, got copied
 * back from the device (NaN counts as infinite; a NaN reference agrees
 * only with NaN). */
static double case_io_error(uj_ctx_t* ctx, case_io_t* io) {
  double worst = 0;
  for (int o = 0; o < io->nout; o++) {
    uj_tensor_t* host = &io->host_out[o];
    if (uj_tensor_copy(ctx, host, io->dev_out_ptr[o]) != UJ_OK) return INFINITY;
    const float* got = host->data;
    int64_t n = dims_numel(host->ndim, host->dims);
    for (int64_t k = 0; k < n; k++) {
      double r = io->reference[o][k], e = fabs((double)got[k] - r) / fmax(1.0, fabs(r));
      if (isnan(r) && isnan(got[k])) continue;
      worst = isnan(e) ? INFINITY : fmax(worst, e);
    }
  }
  return worst;
}

double gpu_time_batches(uj_ctx_t* ctx, gpu_step_fn step, void* arg, int samples) {
  if (samples > MAX_SAMPLES) samples = MAX_SAMPLES;
  double start = bench_now_ns();
  if (step(arg) != 0 || uj_ctx_synchronize(ctx) != UJ_OK) return -1;
  double one = bench_now_ns() - start;
  int calls = one > 0 ? (int)(BATCH_TARGET_NS / one) : 1;
  if (calls < 1) calls = 1;
  if (calls > 1000) calls = 1000;
  double t[MAX_SAMPLES];
  for (int r = 0; r < samples; r++) {
    start = bench_now_ns();
    for (int c = 0; c < calls; c++)
      if (step(arg) != 0) return -1;
    if (uj_ctx_synchronize(ctx) != UJ_OK) return -1;
    t[r] = (bench_now_ns() - start) / calls;
  }
  return bench_median(t, samples);
}

typedef struct {
  uj_ctx_t* ctx;
  case_io_t* io;
} case_step_t;

static int case_step(void* arg) {
  case_step_t* c = arg;
  return uj_program_run(c->ctx, c->io->program, UJ_FORWARD, c->io->dev_in_ptr, c->io->nin, NULL, 0,
                        c->io->dev_out_ptr, c->io->nout) == UJ_OK
             ? 0
             : -1;
}

double gpu_case_row(uj_ctx_t* ctx, const gpu_case_t* c, double copy_gbs, int samples) {
  case_io_t io;
  double ns = -1;
  if (case_io_host(c, 0x5eed0000u + (uint64_t)c->bytes, &io) != 0 || case_io_device(ctx, &io) != 0) {
    case_io_free(ctx, &io);
    return -1;
  }
  case_step_t step = {ctx, &io};
  double err = case_step(&step) == 0 ? case_io_error(ctx, &io) : INFINITY;
  if (err == INFINITY && uj_last_error()[0]) fprintf(stderr, "bench gpu %s: %s\n", c->label, uj_last_error());
  if (err <= c->tolerance) ns = gpu_time_batches(ctx, case_step, &step, samples);
  if (ns > 0) {
    double gbs = c->bytes / ns;
    printf("  %-22s %-12s %9.3f ms  %8.1f GB/s  %5.1f%% of copy   max rel err %.2g\n", c->label, c->shape_label,
           ns / 1e6, gbs, copy_gbs > 0 ? 100.0 * gbs / copy_gbs : NAN, err);
  } else {
    printf("  %-22s %-12s FAILED (max rel err %.3g, tolerance %.1g)\n", c->label, c->shape_label, err, c->tolerance);
  }
  case_io_free(ctx, &io);
  return ns;
}

/* ---- one Adam step over GPT-2 small's 148 parameter tensors ---------------------- */

enum { GPT2_LAYERS = 12, GPT2_D = 768, GPT2_VOCAB = 50257, GPT2_CONTEXT = 1024, GPT2_TENSORS = 4 + 12 * GPT2_LAYERS };

/* The tensors' element counts in the model's order: token and position
 * embeddings, then per layer ln_1 (w, b), attention c_attn (w, b) and c_proj
 * (w, b), ln_2 (w, b), MLP c_fc (w, b) and c_proj (w, b); then ln_f (w, b). */
static int gpt2_sizes(int64_t* sizes) {
  int n = 0;
  const int64_t d = GPT2_D;
  sizes[n++] = (int64_t)GPT2_VOCAB * d;
  sizes[n++] = (int64_t)GPT2_CONTEXT * d;
  for (int l = 0; l < GPT2_LAYERS; l++) {
    const int64_t layer[12] = {d, d, d * 3 * d, 3 * d, d * d, d, d, d, d * 4 * d, 4 * d, 4 * d * d, d};
    for (int k = 0; k < 12; k++) sizes[n++] = layer[k];
  }
  sizes[n++] = d;
  sizes[n++] = d;
  return n;
}

typedef struct {
  uj_ctx_t* ctx;
  case_io_t io[GPT2_TENSORS];
  uj_group_t groups[GPT2_TENSORS]; /* the same tensors, for one multi-tensor call */
  int count;
} gpt2_step_t;

static int gpt2_step(void* arg) {
  gpt2_step_t* g = arg;
  for (int t = 0; t < g->count; t++) {
    case_step_t one = {g->ctx, &g->io[t]};
    if (case_step(&one) != 0) return -1;
  }
  return 0;
}

/* The step as one uj_program_run_groups call: one launch over a chunk table
 * (every tensor's program is the same source, so the first one's serves). */
static int gpt2_step_groups(void* arg) {
  gpt2_step_t* g = arg;
  return uj_program_run_groups(g->ctx, g->io[0].program, g->groups, g->count, g->io[0].nin, NULL, 0,
                               g->io[0].nout) == UJ_OK
             ? 0
             : -1;
}

static double gpt2_error(gpt2_step_t* g) {
  double worst = 0;
  for (int t = 0; t < g->count; t++) worst = fmax(worst, case_io_error(g->ctx, &g->io[t]));
  return worst;
}

static void gpt2_print(const char* how, double ns, double worst, double copy_gbs, int count, int64_t params) {
  if (ns > 0) {
    double gbs = 28.0 * (double)params / ns;
    printf("  %-22s %-12s %9.3f ms  %8.1f GB/s  %5.1f%% of copy   max rel err %.2g   (%d tensors, %lld "
           "parameters, %s)\n",
           "adam step, GPT-2 small", "148 tensors", ns / 1e6, gbs, copy_gbs > 0 ? 100.0 * gbs / copy_gbs : NAN, worst,
           count, (long long)params, how);
  } else {
    printf("  %-22s FAILED (%s, max rel err %.3g): %s\n", "adam step, GPT-2 small", how, worst, uj_last_error());
  }
}

int gpu_gpt2_adam_row(uj_ctx_t* ctx, const char* adam_source, double copy_gbs, int samples) {
  int64_t sizes[GPT2_TENSORS];
  int count = gpt2_sizes(sizes);
  static gpt2_step_t g; /* large: 148 tensor sets */
  memset(&g, 0, sizeof g);
  g.ctx = ctx;
  int64_t params = 0;
  double worst = 0;
  int status = 0;
  for (int t = 0; t < count && !status; t++) {
    gpu_case_t c = {"gpt2", "", adam_source, 8, {{"p", 1, {sizes[t]}, 0, 0}, {"g", 1, {sizes[t]}, 0, 0},
                                                   {"m", 1, {sizes[t]}, 0, 0}, {"v", 1, {sizes[t]}, 0, 0},
                                                   {"lr", 0, {0}, 1e-3f, 1}, {"b1", 0, {0}, 0.9f, 1},
                                                   {"b2", 0, {0}, 0.999f, 1}, {"eps", 0, {0}, 1e-8f, 1}},
                    0, 1e-5};
    status = case_io_host(&c, 0xadu + (uint64_t)t, &g.io[t]) || case_io_device(ctx, &g.io[t]);
    g.count = t + 1;
    params += sizes[t];
  }
  if (!status) status = gpt2_step(&g);
  if (!status) worst = gpt2_error(&g);
  double ns = !status && worst <= 1e-5 ? gpu_time_batches(ctx, gpt2_step, &g, samples) : -1;
  gpt2_print("one call each", ns, worst, copy_gbs, count, params);
  for (int t = 0; t < g.count; t++)
    g.groups[t] = (uj_group_t){(const uj_tensor_t* const*)g.io[t].dev_in_ptr, g.io[t].dev_out_ptr};
  double worst_groups = -1, ns_groups = -1;
  if (!status) {
    for (int t = 0; t < g.count && !status; t++) status = case_io_restore(ctx, &g.io[t]);
    if (!status) status = gpt2_step_groups(&g);
  }
  if (!status) worst_groups = gpt2_error(&g);
  if (!status && worst_groups <= 1e-5) ns_groups = gpu_time_batches(ctx, gpt2_step_groups, &g, samples);
  gpt2_print("one multi-tensor call", ns_groups, worst_groups, copy_gbs, count, params);
  for (int t = 0; t < g.count; t++) case_io_free(ctx, &g.io[t]);
  return ns > 0 && ns_groups > 0 ? 0 : -1;
}
