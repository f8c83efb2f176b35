/* tools/uopjit.c: the uopjit command-line tool. It uses only the public API
 * (include/uopjit.h), so it doubles as an example of a complete client.
 *
 *   uopjit info    version, engines and devices
 *   uopjit demo    a 2-D convolution written as uops, run on the interpreter
 *                  and checked against plain loops
 *   uopjit run     an expression-language program on random inputs: timing,
 *                  or (--check) a comparison against the interpreter in f64
 *   uopjit dump    the loop IR of an expression-language program
 *
 * Each command is one function in the table at the bottom; a new command is
 * a new function plus a row. Exit status: 0 success, 1 a failure, 2 bad
 * usage. */
/* sysconf needs POSIX; the Makefile's _GNU_SOURCE covers it, this keeps a
 * bare `cc -std=c11` working too. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "uopjit.h"

/* ---- shared helpers ---------------------------------------------------------------- */

/* Reports a failed API call in the one format every command uses. */
static int report(uj_status_t s) {
  fprintf(stderr, "uopjit: %s: %s\n", uj_status_str(s), uj_last_error());
  return 1;
}

/* Graph builders return a negative id instead of a status; they fail only
 * on a bad argument (a malformed index expression is reported as such by
 * the message). */
static int bad_node(uj_io_t id) { return id < 0; }

/* splitmix64: small, seedable and identical on every platform, so that a
 * demo run is reproducible. */
static uint64_t rng_next(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float rng_float(uint64_t* state) {
  return (float)((double)(rng_next(state) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

static void print_dims(FILE* out, int ndim, const int64_t* dims) {
  fputc('[', out);
  for (int k = 0; k < ndim; k++) fprintf(out, "%s%lld", k ? "," : "", (long long)dims[k]);
  fputc(']', out);
}

/* ---- info ---------------------------------------------------------------------------- */

static int cmd_info(int argc, char** argv) {
  (void)argc;
  (void)argv;
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx) return report(UJ_ERR_OOM);

  printf("uopjit %s\n", UJ_VERSION);
  printf("engines:\n");
  static const uj_engine_t engines[] = {UJ_ENGINE_AUTO, UJ_ENGINE_INTERP, UJ_ENGINE_MIR,
                                        UJ_ENGINE_C, UJ_ENGINE_CUDA};
  for (size_t i = 0; i < sizeof engines / sizeof engines[0]; i++)
    printf("  %-8s %s\n", uj_engine_name(engines[i]),
           uj_engine_available(ctx, engines[i]) ? "available" : "not available");
  printf("  (this context runs on %s)\n", uj_engine_name(uj_ctx_engine(ctx)));

  printf("devices:\n");
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores > 0)
    printf("  cpu      %ld cores\n", cores);
  else
    printf("  cpu      yes\n");
  /* The GPU runtime is not wired up yet; say so rather than guess. */
  printf("  cuda     not detected\n");

  uj_ctx_free(ctx);
  return 0;
}

/* ---- demo: conv2d NHWC by uops --------------------------------------------------------- */

/* The demo's sizes: batch, height, width, channels, filters, kernel. */
enum { DEMO_N = 2, DEMO_H = 7, DEMO_W = 6, DEMO_C = 3, DEMO_K = 4, DEMO_KH = 3, DEMO_KW = 3 };
#define DEMO_SEED 20260101u
#define DEMO_TOLERANCE 1e-5

/* y[n,oh,ow,k] = sum over kh,kw,c of x[n,oh+kh,ow+kw,c] * w[k,kh,kw,c]
 * ("valid" padding, stride 1), as uops:
 *   xr, wr: both operands laid out over the 7-d space
 *           [N, OH, OW, K, KH, KW, C] by reindexing,
 *   p = xr * wr, s = sum over the last three axes, y = s without them.
 * Returns the output node or a negative id. */
static uj_io_t build_conv2d(uj_graph_t* g, uj_io_t* x_out, uj_io_t* w_out) {
  uj_io_t x = uj_input(g, 4, UJ_F32); /* [N, H, W, C] */
  uj_io_t w = uj_input(g, 4, UJ_F32); /* [K, KH, KW, C] */
  if (bad_node(x) || bad_node(w)) return -1;
  *x_out = x;
  *w_out = w;

  static const char* const space[7] = {"dA0",       "dA1-dB1+1", "dA2-dB2+1", "dB0",
                                       "dB1",       "dB2",       "dA3[=dB3]"};
  static const char* const x_index[4] = {"i0", "i1+i4", "i2+i5", "i6"};
  static const char* const w_index[4] = {"i3", "i4", "i5", "i6"};
  const uj_io_t sources[2] = {x, w};
  uj_io_t xr = uj_reindex(g, x, 7, space, 2, sources, 4, x_index);
  if (bad_node(xr)) return -1;
  uj_io_t wr = uj_reindex(g, w, 7, space, 2, sources, 4, w_index);
  if (bad_node(wr)) return -1;
  uj_io_t p = uj_binary(g, UJ_BINARY_MUL, xr, wr);
  if (bad_node(p)) return -1;
  static const int reduced[3] = {4, 5, 6};
  uj_io_t s = uj_reduce(g, UJ_REDUCE_SUM, 3, reduced, p); /* [N, OH, OW, K, 1, 1, 1] */
  if (bad_node(s)) return -1;

  static const char* const y_shape[4] = {"dA0", "dA1", "dA2", "dA3"};
  static const char* const y_index[7] = {"i0", "i1", "i2", "i3", "0", "0", "0"};
  return uj_reindex(g, s, 4, y_shape, 1, &s, 7, y_index);
}

/* The reference: the same convolution in plain loops, in double. */
static void conv2d_reference(const float* x, const float* w, double* y) {
  enum { OH = DEMO_H - DEMO_KH + 1, OW = DEMO_W - DEMO_KW + 1 };
  for (int n = 0; n < DEMO_N; n++)
    for (int oh = 0; oh < OH; oh++)
      for (int ow = 0; ow < OW; ow++)
        for (int k = 0; k < DEMO_K; k++) {
          double sum = 0;
          for (int kh = 0; kh < DEMO_KH; kh++)
            for (int kw = 0; kw < DEMO_KW; kw++)
              for (int c = 0; c < DEMO_C; c++)
                sum += (double)x[((n * DEMO_H + oh + kh) * DEMO_W + ow + kw) * DEMO_C + c] *
                       (double)w[((k * DEMO_KH + kh) * DEMO_KW + kw) * DEMO_C + c];
          y[((n * OH + oh) * OW + ow) * DEMO_K + k] = sum;
        }
}

/* Everything the demo allocates, so one function can release it on any
 * path. */
typedef struct {
  uj_graph_t* graph;
  uj_program_t* program;
  uj_ctx_t* ctx;
  float *x, *w, *y;
  double* expected;
  char* dump;
} demo_t;

static void demo_release(demo_t* d) {
  uj_graph_free(d->graph);
  uj_program_free(d->program);
  uj_ctx_free(d->ctx);
  free(d->x);
  free(d->w);
  free(d->y);
  free(d->expected);
  free(d->dump);
}

static int demo_run(demo_t* d) {
  d->graph = uj_graph_new();
  if (!d->graph) return report(UJ_ERR_OOM);
  uj_io_t x = -1, w = -1;
  uj_io_t y = build_conv2d(d->graph, &x, &w);
  if (bad_node(y)) return report(UJ_ERR_INVALID);

  const uj_io_t inputs[2] = {x, w};
  uj_program_desc_t desc = {.input_count = 2, .inputs = inputs, .output_count = 1, .outputs = &y};
  uj_status_t s = uj_program_new(d->graph, &desc, &d->program);
  if (s != UJ_OK) return report(s);

  /* Seeded random inputs. */
  size_t x_count = (size_t)DEMO_N * DEMO_H * DEMO_W * DEMO_C;
  size_t w_count = (size_t)DEMO_K * DEMO_KH * DEMO_KW * DEMO_C;
  d->x = malloc(x_count * sizeof *d->x);
  d->w = malloc(w_count * sizeof *d->w);
  if (!d->x || !d->w) return report(UJ_ERR_OOM);
  uint64_t state = DEMO_SEED;
  for (size_t i = 0; i < x_count; i++) d->x[i] = rng_float(&state);
  for (size_t i = 0; i < w_count; i++) d->w[i] = rng_float(&state);
  uj_tensor_t tx = {d->x, UJ_F32, UJ_CPU, 4, {DEMO_N, DEMO_H, DEMO_W, DEMO_C}};
  uj_tensor_t tw = {d->w, UJ_F32, UJ_CPU, 4, {DEMO_K, DEMO_KH, DEMO_KW, DEMO_C}};
  const uj_tensor_t* in[2] = {&tx, &tw};

  /* The program says how big the output is; the demo only checks it agrees
   * with the arithmetic of a valid convolution. */
  uj_tensor_t ty = {NULL, UJ_F32, UJ_CPU, 0, {0}};
  s = uj_program_shape(d->program, UJ_FORWARD, in, NULL, 0, &ty.ndim, ty.dims);
  if (s != UJ_OK) return report(s);
  const int64_t want[4] = {DEMO_N, DEMO_H - DEMO_KH + 1, DEMO_W - DEMO_KW + 1, DEMO_K};
  if (ty.ndim != 4 || memcmp(ty.dims, want, sizeof want) != 0) {
    fprintf(stderr, "uopjit: demo: output shape ");
    print_dims(stderr, ty.ndim, ty.dims);
    fprintf(stderr, ", expected ");
    print_dims(stderr, 4, want);
    fprintf(stderr, "\n");
    return 1;
  }
  size_t y_count = (size_t)(want[0] * want[1] * want[2] * want[3]);
  d->y = malloc(y_count * sizeof *d->y);
  d->expected = malloc(y_count * sizeof *d->expected);
  if (!d->y || !d->expected) return report(UJ_ERR_OOM);
  ty.data = d->y;

  d->ctx = uj_ctx_new();
  if (!d->ctx) return report(UJ_ERR_OOM);
  s = uj_ctx_set_engine(d->ctx, UJ_ENGINE_INTERP);
  if (s != UJ_OK) return report(s);
  uj_tensor_t* out[1] = {&ty};
  s = uj_program_run(d->ctx, d->program, UJ_FORWARD, in, 2, NULL, 0, out, 1);
  if (s != UJ_OK) return report(s);

  d->dump = uj_program_dump(d->ctx, d->program, UJ_FORWARD, UJ_DUMP_IR, NULL);
  if (!d->dump) return report(UJ_ERR_INVALID);

  printf("conv2d NHWC by uops: x ");
  print_dims(stdout, tx.ndim, tx.dims);
  printf(" * w ");
  print_dims(stdout, tw.ndim, tw.dims);
  printf(" -> y ");
  print_dims(stdout, ty.ndim, ty.dims);
  printf(", engine %s, seed %u\n\n", uj_engine_name(UJ_ENGINE_INTERP), DEMO_SEED);
  fputs(d->dump, stdout);
  if (d->dump[0] && d->dump[strlen(d->dump) - 1] != '\n') putchar('\n');
  putchar('\n');

  conv2d_reference(d->x, d->w, d->expected);
  double max_rel_err = 0;
  for (size_t i = 0; i < y_count; i++) {
    double b = d->expected[i];
    double err = fabs((double)d->y[i] - b) / fmax(1.0, fabs(b));
    /* A NaN anywhere must fail the check, so it wins over any number. */
    if (isnan(err)) {
      max_rel_err = NAN;
      break;
    }
    if (err > max_rel_err) max_rel_err = err;
  }
  if (max_rel_err <= DEMO_TOLERANCE) {
    printf("check: ok max_rel_err=%.3g\n", max_rel_err);
    return 0;
  }
  printf("check: FAILED max_rel_err=%.3g\n", max_rel_err);
  return 1;
}

static int cmd_demo(int argc, char** argv) {
  (void)argc;
  (void)argv;
  demo_t d = {0};
  int rc = demo_run(&d);
  demo_release(&d);
  return rc;
}

/* ---- run and dump: programs in the expression language --------------------------------- */

/* What `run` and `dump` take from the command line. */
typedef struct {
  const char* source;
  int ndim;                      /* of every non-scalar input */
  int64_t dims[UJ_MAX_DIMS];
  uj_dtype_t dtype;
  uj_engine_t engine;
  int repeat;
  uint64_t seed;
  int check;
  const char* scalars;           /* "lr,b1": inputs made 0-d; NULL for none */
  int specialized;               /* --shape, --scalar or --dtype was given */
  uj_dump_t dump;
} options_t;

#define RUN_DEFAULT_SIZE 1000000
#define RUN_MAX_ELEMENTS ((int64_t)1 << 34)
#define CHECK_TOL_F32 1e-5
#define CHECK_TOL_F64 1e-12

static int usage_error(const char* cmd, const char* what, const char* arg) {
  fprintf(stderr, "uopjit %s: %s%s%s%s\n", cmd, what, arg ? " \"" : "", arg ? arg : "", arg ? "\"" : "");
  fprintf(stderr, "run `uopjit` without arguments for the usage\n");
  return 2;
}

/* "1000000" or "64,128": 1..8 positive sizes whose product stays below
 * RUN_MAX_ELEMENTS. */
static int parse_shape(const char* text, options_t* o) {
  int n = 0;
  int64_t total = 1;
  const char* s = text;
  for (;;) {
    if (n == UJ_MAX_DIMS || *s < '0' || *s > '9') return 0;
    char* end;
    long long v = strtoll(s, &end, 10);
    if (v <= 0 || __builtin_mul_overflow(total, (int64_t)v, &total) || total > RUN_MAX_ELEMENTS) return 0;
    o->dims[n++] = v;
    if (*end == 0) break;
    if (*end != ',') return 0;
    s = end + 1;
  }
  o->ndim = n;
  return 1;
}

static int parse_engine(const char* text, uj_engine_t* e) {
  static const uj_engine_t all[] = {UJ_ENGINE_AUTO, UJ_ENGINE_INTERP, UJ_ENGINE_MIR, UJ_ENGINE_C, UJ_ENGINE_CUDA};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (strcmp(text, uj_engine_name(all[i])) == 0) {
      *e = all[i];
      return 1;
    }
  return 0;
}

/* Options come as "--name value" or "--name=value"; the one other argument
 * is the program source. Returns 0 or the exit status of a usage error. */
static int parse_options(const char* cmd, int argc, char** argv, int is_dump, options_t* o) {
  memset(o, 0, sizeof *o);
  o->ndim = 1;
  o->dims[0] = RUN_DEFAULT_SIZE;
  o->dtype = UJ_F32;
  o->engine = UJ_ENGINE_AUTO;
  o->repeat = 5;
  o->seed = 1;
  o->dump = UJ_DUMP_IR;
  static const struct {
    const char* name;
    uj_dump_t what;
  } dumps[] = {{"--ir-raw", UJ_DUMP_IR_RAW}, {"--ir", UJ_DUMP_IR}, {"--c", UJ_DUMP_C},
               {"--mir", UJ_DUMP_MIR},       {"--cuda", UJ_DUMP_CUDA}};
  for (int i = 1; i < argc; i++) {
    const char* arg = argv[i];
    if (strncmp(arg, "--", 2) != 0) {
      if (o->source) return usage_error(cmd, "more than one program source:", arg);
      o->source = arg;
      continue;
    }
    int matched = 0;
    for (size_t k = 0; is_dump && k < sizeof dumps / sizeof dumps[0]; k++)
      if (strcmp(arg, dumps[k].name) == 0) o->dump = dumps[k].what, matched = 1;
    if (matched) continue;
    if (!is_dump && strcmp(arg, "--check") == 0) {
      o->check = 1;
      continue;
    }
    /* The options with a value. */
    char name[32];
    const char* value = strchr(arg, '=');
    size_t len = value ? (size_t)(value - arg) : strlen(arg);
    if (len >= sizeof name) return usage_error(cmd, "unknown option", arg);
    memcpy(name, arg, len);
    name[len] = 0;
    int takes_value = !strcmp(name, "--shape") || !strcmp(name, "--dtype") || !strcmp(name, "--scalar") ||
                      (!is_dump && (!strcmp(name, "--engine") || !strcmp(name, "--repeat") || !strcmp(name, "--seed")));
    if (!takes_value) return usage_error(cmd, "unknown option", arg);
    if (value) {
      value++;
    } else {
      if (i + 1 >= argc) return usage_error(cmd, "missing value after", arg);
      value = argv[++i];
    }
    char* end = NULL;
    if (!strcmp(name, "--shape")) {
      if (!parse_shape(value, o)) return usage_error(cmd, "--shape wants sizes such as 1000000 or 64,128, got", value);
      o->specialized = 1;
    } else if (!strcmp(name, "--dtype")) {
      if (!strcmp(value, "f32")) o->dtype = UJ_F32;
      else if (!strcmp(value, "f64")) o->dtype = UJ_F64;
      else return usage_error(cmd, "--dtype wants f32 or f64, got", value);
      o->specialized = 1;
    } else if (!strcmp(name, "--scalar")) {
      o->scalars = value;
      o->specialized = 1;
    } else if (!strcmp(name, "--engine")) {
      if (!parse_engine(value, &o->engine))
        return usage_error(cmd, "--engine wants auto, interp, mir, c or cuda, got", value);
    } else if (!strcmp(name, "--repeat")) {
      long v = strtol(value, &end, 10);
      if (*value < '0' || *value > '9' || *end || v < 1 || v > 1000000)
        return usage_error(cmd, "--repeat wants a count from 1, got", value);
      o->repeat = (int)v;
    } else {
      unsigned long long v = strtoull(value, &end, 10);
      if (*value < '0' || *value > '9' || *end) return usage_error(cmd, "--seed wants a non-negative integer, got", value);
      o->seed = v;
    }
  }
  if (!o->source) return usage_error(cmd, "missing the program source, e.g. 'y = 1/(1+exp(-x))'", NULL);
  return 0;
}

/* 1 when name is in the comma-separated list. */
static int in_list(const char* list, const char* name) {
  size_t n = strlen(name);
  for (const char* s = list; s && *s;) {
    const char* end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    if (len == n && strncmp(s, name, n) == 0) return 1;
    s = end ? end + 1 : NULL;
  }
  return 0;
}

/* Every name in --scalar must be an input of the program. */
static int check_scalars(const char* cmd, const uj_program_t* p, const char* list) {
  for (const char* s = list; s && *s;) {
    const char* end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    int found = 0;
    for (int i = 0; i < uj_program_io_count(p, 0) && !found; i++) {
      const char* name = uj_program_io_name(p, 0, i);
      found = strlen(name) == len && strncmp(name, s, len) == 0;
    }
    if (!found) {
      fprintf(stderr, "uopjit %s: --scalar names \"%.*s\", which is not an input of the program (inputs:", cmd,
              (int)(len > 64 ? 64 : len), s);
      for (int i = 0; i < uj_program_io_count(p, 0); i++) fprintf(stderr, " %s", uj_program_io_name(p, 0, i));
      fprintf(stderr, ")\n");
      return 2;
    }
    s = end ? end + 1 : NULL;
  }
  return 0;
}

static int64_t numel(const uj_tensor_t* t) {
  int64_t n = 1;
  for (int k = 0; k < t->ndim; k++) n *= t->dims[k];
  return n;
}

static size_t tensor_bytes(const uj_tensor_t* t) {
  return (size_t)numel(t) * (size_t)uj_dtype_size(t->dtype);
}

static double get(const uj_tensor_t* t, int64_t i) {
  return t->dtype == UJ_F64 ? ((const double*)t->data)[i] : (double)((const float*)t->data)[i];
}

static void set(uj_tensor_t* t, int64_t i, double v) {
  if (t->dtype == UJ_F64) ((double*)t->data)[i] = v;
  else ((float*)t->data)[i] = (float)v;
}

/* Tensors of one program call. */
typedef struct {
  int nin, nout;
  uj_tensor_t* in;
  uj_tensor_t* out;
  const uj_tensor_t** in_ptr;
  uj_tensor_t** out_ptr;
} io_t;

static void io_release(io_t* io) {
  for (int i = 0; io->in && i < io->nin; i++) free(io->in[i].data);
  for (int i = 0; io->out && i < io->nout; i++) free(io->out[i].data);
  free(io->in);
  free(io->out);
  free(io->in_ptr);
  free(io->out_ptr);
  memset(io, 0, sizeof *io);
}

static uj_status_t io_alloc(io_t* io, const uj_program_t* p) {
  io->nin = uj_program_io_count(p, 0);
  io->nout = uj_program_io_count(p, 1);
  io->in = calloc((size_t)io->nin + 1, sizeof *io->in);
  io->out = calloc((size_t)io->nout + 1, sizeof *io->out);
  io->in_ptr = calloc((size_t)io->nin + 1, sizeof *io->in_ptr);
  io->out_ptr = calloc((size_t)io->nout + 1, sizeof *io->out_ptr);
  if (!io->in || !io->out || !io->in_ptr || !io->out_ptr) return UJ_ERR_OOM;
  for (int i = 0; i < io->nin; i++) io->in_ptr[i] = &io->in[i];
  for (int i = 0; i < io->nout; i++) io->out_ptr[i] = &io->out[i];
  return UJ_OK;
}

/* The value a scalar input gets: the usual Adam settings for their usual
 * names, else a draw like any other input. */
static double scalar_value(const char* name, uint64_t* state) {
  static const struct {
    const char* name;
    double value;
  } known[] = {{"lr", 1e-3}, {"b1", 0.9}, {"b2", 0.999}, {"eps", 1e-8}};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strcmp(name, known[i].name) == 0) return known[i].value;
  return 0.5 + (double)(rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* Seeded inputs in [0.5, 1.5) (safe for log, sqrt and division), of the
 * options' shape and dtype; --scalar inputs are 0-d. Then the outputs, in
 * the shapes and dtypes the program infers. */
static uj_status_t io_make(io_t* io, uj_program_t* p, const options_t* o) {
  if (io_alloc(io, p) != UJ_OK) return UJ_ERR_OOM;
  uint64_t state = o->seed;
  for (int i = 0; i < io->nin; i++) {
    const char* name = uj_program_io_name(p, 0, i);
    uj_tensor_t* t = &io->in[i];
    t->dtype = o->dtype;
    t->device = UJ_CPU;
    if (!in_list(o->scalars, name)) {
      t->ndim = o->ndim;
      memcpy(t->dims, o->dims, sizeof o->dims);
    }
    t->data = malloc(tensor_bytes(t));
    if (!t->data) return UJ_ERR_OOM;
    int64_t n = numel(t);
    if (t->ndim == 0) set(t, 0, scalar_value(name, &state));
    else
      for (int64_t k = 0; k < n; k++) set(t, k, 0.5 + (double)(rng_next(&state) >> 11) * (1.0 / 9007199254740992.0));
  }
  for (int i = 0; i < io->nout; i++) {
    uj_tensor_t* t = &io->out[i];
    t->device = UJ_CPU;
    uj_status_t s = uj_program_shape(p, UJ_FORWARD, io->in_ptr, NULL, i, &t->ndim, t->dims);
    if (s == UJ_OK) s = uj_program_output_dtype(p, UJ_FORWARD, io->in_ptr, i, &t->dtype);
    if (s != UJ_OK) return s;
    if (!(t->data = malloc(tensor_bytes(t) ? tensor_bytes(t) : 1))) return UJ_ERR_OOM;
  }
  return UJ_OK;
}

/* The same inputs converted to f64, with outputs of the same shapes. */
static uj_status_t io_make_f64(io_t* ref, uj_program_t* p, const io_t* from) {
  if (io_alloc(ref, p) != UJ_OK) return UJ_ERR_OOM;
  for (int i = 0; i < ref->nin + ref->nout; i++) {
    int is_out = i >= ref->nin;
    uj_tensor_t* t = is_out ? &ref->out[i - ref->nin] : &ref->in[i];
    const uj_tensor_t* f = is_out ? &from->out[i - ref->nin] : &from->in[i];
    *t = *f;
    t->dtype = UJ_F64;
    /* An output's dtype follows the inputs (f32 when it reads none). */
    if (is_out) {
      uj_status_t s = uj_program_output_dtype(p, UJ_FORWARD, ref->in_ptr, i - ref->nin, &t->dtype);
      if (s != UJ_OK) return s;
    }
    if (!(t->data = malloc(tensor_bytes(t) ? tensor_bytes(t) : 1))) return UJ_ERR_OOM;
    if (!is_out)
      for (int64_t k = 0, n = numel(t); k < n; k++) set(t, k, get(f, k));
  }
  return UJ_OK;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static void print_io(FILE* out, const uj_program_t* p, const io_t* io) {
  fprintf(out, "inputs");
  for (int i = 0; i < io->nin; i++) {
    fprintf(out, " %s", uj_program_io_name(p, 0, i));
    print_dims(out, io->in[i].ndim, io->in[i].dims);
  }
  fprintf(out, ", outputs");
  for (int i = 0; i < io->nout; i++) {
    fprintf(out, " %s", uj_program_io_name(p, 1, i));
    print_dims(out, io->out[i].ndim, io->out[i].dims);
  }
}

/* Parses SOURCE; a bare expression such as '1/(1+exp(-x))', which is no
 * program by itself, is taken as 'y = EXPR'. On failure the message is the
 * one for the source as written. */
static uj_status_t parse_source(const char* source, uj_program_t** p) {
  uj_status_t s = uj_program_parse(source, p);
  if (s != UJ_ERR_PARSE) return s;
  size_t len = strlen(source);
  char* wrapped = malloc(len + 5);
  char* first_error = strdup(uj_last_error());
  if (wrapped && first_error) {
    memcpy(wrapped, "y = ", 4);
    memcpy(wrapped + 4, source, len + 1);
    if (uj_program_parse(wrapped, p) == UJ_OK) s = UJ_OK;
  }
  free(wrapped);
  /* Report the original error, not one about the wrapped text. */
  if (s != UJ_OK && first_error) fprintf(stderr, "uopjit: %s: %s\n", uj_status_str(s), first_error);
  free(first_error);
  return s;
}

/* Everything `run` allocates. */
typedef struct {
  uj_program_t* program;
  uj_ctx_t *ctx, *ref_ctx;
  io_t io, ref;
  double* times;
} run_t;

static void run_release(run_t* r) {
  uj_program_free(r->program);
  uj_ctx_free(r->ctx);
  uj_ctx_free(r->ref_ctx);
  io_release(&r->io);
  io_release(&r->ref);
  free(r->times);
}

static int engine_unavailable(uj_engine_t e) {
  fprintf(stderr, "uopjit: engine %s is not available: %s\n", uj_engine_name(e), uj_last_error());
  return 1;
}

/* Median time, ns per element of the largest output, and GB/s for the
 * bytes of every input read and every output written. */
static int run_timing(run_t* r, const options_t* o) {
  uj_status_t s = uj_program_run(r->ctx, r->program, UJ_FORWARD, r->io.in_ptr, r->io.nin, NULL, 0, r->io.out_ptr,
                                 r->io.nout); /* warm-up: builds and compiles */
  if (s != UJ_OK) return report(s);
  if (!(r->times = malloc(sizeof *r->times * (size_t)o->repeat))) return report(UJ_ERR_OOM);
  for (int k = 0; k < o->repeat; k++) {
    double t0 = now_seconds();
    s = uj_program_run(r->ctx, r->program, UJ_FORWARD, r->io.in_ptr, r->io.nin, NULL, 0, r->io.out_ptr, r->io.nout);
    r->times[k] = now_seconds() - t0;
    if (s != UJ_OK) return report(s);
  }
  qsort(r->times, (size_t)o->repeat, sizeof *r->times, compare_doubles);
  double median = o->repeat % 2 ? r->times[o->repeat / 2]
                                : 0.5 * (r->times[o->repeat / 2 - 1] + r->times[o->repeat / 2]);
  int64_t elements = 1;
  double bytes = 0;
  for (int i = 0; i < r->io.nout; i++) {
    if (numel(&r->io.out[i]) > elements) elements = numel(&r->io.out[i]);
    bytes += (double)tensor_bytes(&r->io.out[i]);
  }
  for (int i = 0; i < r->io.nin; i++) bytes += (double)tensor_bytes(&r->io.in[i]);
  if (median <= 0) median = 1e-9; /* below the clock's resolution */
  printf("time: median %.3f ms of %d runs, %.3f ns/element, %.2f GB/s\n", median * 1e3, o->repeat,
         median * 1e9 / (double)elements, bytes / median * 1e-9);
  return 0;
}

/* Runs the chosen engine in the chosen dtype and the interpreter in f64 on
 * the same input values, and compares every output. */
static int run_check(run_t* r, const options_t* o) {
  uj_status_t s = uj_program_run(r->ctx, r->program, UJ_FORWARD, r->io.in_ptr, r->io.nin, NULL, 0, r->io.out_ptr,
                                 r->io.nout);
  if (s != UJ_OK) return report(s);
  if (!(r->ref_ctx = uj_ctx_new())) return report(UJ_ERR_OOM);
  if ((s = uj_ctx_set_engine(r->ref_ctx, UJ_ENGINE_INTERP)) != UJ_OK) return report(s);
  if ((s = io_make_f64(&r->ref, r->program, &r->io)) != UJ_OK) return report(s);
  for (int i = 0; i < r->ref.nout; i++) { /* the reference's shapes must agree */
    uj_tensor_t t = r->ref.out[i];
    if ((s = uj_program_shape(r->program, UJ_FORWARD, r->ref.in_ptr, NULL, i, &t.ndim, t.dims)) != UJ_OK)
      return report(s);
    if (t.ndim != r->io.out[i].ndim || memcmp(t.dims, r->io.out[i].dims, sizeof t.dims[0] * (size_t)t.ndim)) {
      printf("check: FAILED output %s has shape ", uj_program_io_name(r->program, 1, i));
      print_dims(stdout, r->io.out[i].ndim, r->io.out[i].dims);
      printf(" in %s but ", uj_dtype_name(o->dtype));
      print_dims(stdout, t.ndim, t.dims);
      printf(" in f64\n");
      return 1;
    }
  }
  s = uj_program_run(r->ref_ctx, r->program, UJ_FORWARD, r->ref.in_ptr, r->ref.nin, NULL, 0, r->ref.out_ptr,
                     r->ref.nout);
  if (s != UJ_OK) return report(s);
  double tol = o->dtype == UJ_F64 ? CHECK_TOL_F64 : CHECK_TOL_F32;
  double max_rel_err = 0;
  for (int i = 0; i < r->io.nout; i++) {
    const uj_tensor_t *got = &r->io.out[i], *want = &r->ref.out[i];
    for (int64_t k = 0, n = numel(got); k < n; k++) {
      double a = get(got, k), b = get(want, k);
      double err = fabs(a - b) / fmax(1.0, fabs(b));
      if (err > max_rel_err) max_rel_err = err;
      /* `!(err <= tol)` so that a NaN fails too. */
      if (!(err <= tol)) {
        printf("check: FAILED output %s element %lld: %s %.9g, interp f64 %.17g (rel err %.3g > %g)\n",
               uj_program_io_name(r->program, 1, i), (long long)k, uj_engine_name(uj_ctx_engine(r->ctx)), a, b, err,
               tol);
        return 1;
      }
    }
  }
  printf("check: ok max_rel_err=%.3g\n", max_rel_err);
  return 0;
}

static int run_main(run_t* r, const options_t* o) {
  uj_status_t s = parse_source(o->source, &r->program);
  if (s != UJ_OK) return 1;
  int rc = check_scalars("run", r->program, o->scalars);
  if (rc) return rc;
  if (!(r->ctx = uj_ctx_new())) return report(UJ_ERR_OOM);
  if (uj_ctx_set_engine(r->ctx, o->engine) != UJ_OK) return engine_unavailable(o->engine);
  if ((s = io_make(&r->io, r->program, o)) != UJ_OK) return report(s);
  printf("engine %s, %s, ", uj_engine_name(uj_ctx_engine(r->ctx)), uj_dtype_name(o->dtype));
  print_io(stdout, r->program, &r->io);
  printf("\n");
  fflush(stdout);
  return o->check ? run_check(r, o) : run_timing(r, o);
}

static int cmd_run(int argc, char** argv) {
  options_t o;
  int rc = parse_options("run", argc, argv, 0, &o);
  if (rc) return rc;
  run_t r = {0};
  rc = run_main(&r, &o);
  run_release(&r);
  return rc;
}

/* ---- dump --------------------------------------------------------------------------------- */

static int dump_main(const options_t* o, uj_program_t** p, uj_ctx_t** ctx, io_t* io, char** text) {
  uj_status_t s = parse_source(o->source, p);
  if (s != UJ_OK) return 1;
  int rc = check_scalars("dump", *p, o->scalars);
  if (rc) return rc;
  /* Shaping the inputs selects the specialization the dump shows. */
  if (o->specialized && (s = io_make(io, *p, o)) != UJ_OK) return report(s);
  if (!(*ctx = uj_ctx_new())) return report(UJ_ERR_OOM);
  *text = uj_program_dump(*ctx, *p, UJ_FORWARD, o->dump, NULL);
  if (!*text) {
    static const uj_engine_t engine_of[] = {[UJ_DUMP_C] = UJ_ENGINE_C, [UJ_DUMP_MIR] = UJ_ENGINE_MIR,
                                            [UJ_DUMP_CUDA] = UJ_ENGINE_CUDA};
    if (o->dump >= UJ_DUMP_C) return engine_unavailable(engine_of[o->dump]);
    return report(UJ_ERR_INVALID);
  }
  fputs(*text, stdout);
  if ((*text)[0] && (*text)[strlen(*text) - 1] != '\n') putchar('\n');
  return 0;
}

static int cmd_dump(int argc, char** argv) {
  options_t o;
  int rc = parse_options("dump", argc, argv, 1, &o);
  if (rc) return rc;
  uj_program_t* p = NULL;
  uj_ctx_t* ctx = NULL;
  io_t io = {0};
  char* text = NULL;
  rc = dump_main(&o, &p, &ctx, &io, &text);
  free(text);
  io_release(&io);
  uj_ctx_free(ctx);
  uj_program_free(p);
  return rc;
}

/* ---- command table ---------------------------------------------------------------------- */

typedef struct {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv); /* argv[0] is the command name */
} command_t;

static const command_t commands[] = {
    {"info", "version, engines and devices", cmd_info},
    {"demo", "a 2-D convolution by uops, checked against plain loops", cmd_demo},
    {"run", "an expression-language program on random inputs: timing or --check", cmd_run},
    {"dump", "the loop IR of an expression-language program", cmd_dump},
};

static int usage(void) {
  fprintf(stderr, "usage: uopjit <command> [arguments]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(stderr, "  %-8s %s\n", commands[i].name, commands[i].summary);
  fprintf(stderr,
          "\n"
          "  uopjit run 'SOURCE' [--shape 1000000 | --shape 64,128] [--scalar NAME[,NAME...]]\n"
          "             [--dtype f32|f64] [--engine auto|interp|mir|c|cuda] [--repeat N] [--seed S]\n"
          "             [--check]\n"
          "      Inputs are seeded random values in [0.5, 1.5) of the given shape (default\n"
          "      1000000) and dtype (default f32); --scalar inputs are 0-d (lr 1e-3, b1 0.9,\n"
          "      b2 0.999, eps 1e-8 by name). Prints the median time of N runs (default 5),\n"
          "      ns/element and GB/s; --check instead compares every output with the\n"
          "      interpreter in f64.\n"
          "  uopjit dump [--ir-raw | --ir | --c | --mir | --cuda] 'SOURCE' [--shape ...]\n"
          "              [--scalar ...] [--dtype ...]\n"
          "      The program as emitted (--ir-raw), after the passes (--ir, the default) or\n"
          "      as engine code; --shape, --scalar and --dtype pick the specialization.\n"
          "  A SOURCE that is a bare expression, such as '1/(1+exp(-x))', means 'y = EXPR'.\n"
          "\n"
          "  e.g. uopjit run --check '1/(1+exp(-(a*x+b)))' --scalar a,b\n");
  return 2;
}

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "uopjit: unknown command \"%s\"\n", argv[1]);
  return usage();
}
