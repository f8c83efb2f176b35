/* tools/cli_run.c: `uopjit run`, an expression-language program on seeded
 * random inputs: the median time of a few runs, or (--check) every output
 * compared with the interpreter's in f64 on the same input values. With
 * --engine cuda the inputs are copied to the GPU once, the program runs on
 * GPU tensors (each timed run waits for its kernels), and --check copies
 * the outputs back. */
/* clock_gettime needs POSIX; the Makefile's _GNU_SOURCE covers it, this
 * keeps a bare `cc -std=c11` working too. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

#define CHECK_TOL_F32 1e-5
#define CHECK_TOL_F64 1e-12

static int64_t numel(const uj_tensor_t* t) {
  int64_t n = 1;
  for (int k = 0; k < t->ndim; k++) n *= t->dims[k];
  return n;
}

static size_t tensor_bytes(const uj_tensor_t* t) {
  return (size_t)numel(t) * (size_t)uj_dtype_size(t->dtype);
}

static double get(const uj_tensor_t* t, int64_t i) {
  switch (t->dtype) {
    case UJ_F64: return ((const double*)t->data)[i];
    case UJ_I32: return (double)((const int32_t*)t->data)[i];
    default: return (double)((const float*)t->data)[i];
  }
}

/* v is an input's value: in [0.5, 1.5), or one of scalar_value's */
static void set(uj_tensor_t* t, int64_t i, double v) {
  switch (t->dtype) {
    case UJ_F64: ((double*)t->data)[i] = v; break;
    case UJ_I32: ((int32_t*)t->data)[i] = (int32_t)v; break;
    default: ((float*)t->data)[i] = (float)v; break;
  }
}

/* Tensors of one program call; on the GPU of ctx when ctx is set. */
typedef struct {
  uj_ctx_t* ctx;
  int nin, nout;
  uj_tensor_t* in;
  uj_tensor_t* out;
  const uj_tensor_t** in_ptr;
  uj_tensor_t** out_ptr;
} io_t;

static void io_release(io_t* io) {
  for (int i = 0; io->in && i < io->nin; i++) io->ctx ? (void)uj_tensor_free(io->ctx, &io->in[i]) : free(io->in[i].data);
  for (int i = 0; io->out && i < io->nout; i++)
    io->ctx ? (void)uj_tensor_free(io->ctx, &io->out[i]) : free(io->out[i].data);
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
  return 0.5 + (double)(cli_rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* Seeded inputs in [0.5, 1.5) (safe for log, sqrt and division), of the
 * options' shape and dtype; --scalar inputs are 0-d. Then the outputs, in
 * the shapes and dtypes the program infers. */
static uj_status_t io_make(io_t* io, uj_program_t* p, const cli_options_t* o) {
  if (io_alloc(io, p) != UJ_OK) return UJ_ERR_OOM;
  uint64_t state = o->seed;
  for (int i = 0; i < io->nin; i++) {
    const char* name = uj_program_io_name(p, 0, i);
    uj_tensor_t* t = &io->in[i];
    if (!uj_program_input_dtype(p, i, &t->dtype)) t->dtype = o->dtype;
    t->device = UJ_CPU;
    if (!cli_in_list(o->scalars, name)) {
      t->ndim = o->ndim;
      memcpy(t->dims, o->dims, sizeof o->dims);
    }
    t->data = malloc(tensor_bytes(t));
    if (!t->data) return UJ_ERR_OOM;
    int64_t n = numel(t);
    if (t->ndim == 0) set(t, 0, scalar_value(name, &state));
    else
      for (int64_t k = 0; k < n; k++) set(t, k, 0.5 + (double)(cli_rng_next(&state) >> 11) * (1.0 / 9007199254740992.0));
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

/* The same inputs converted to f64 (those that declare a dtype keep it),
 * with outputs of the same shapes. */
static uj_status_t io_make_f64(io_t* ref, uj_program_t* p, const io_t* from) {
  if (io_alloc(ref, p) != UJ_OK) return UJ_ERR_OOM;
  for (int i = 0; i < ref->nin + ref->nout; i++) {
    int is_out = i >= ref->nin;
    uj_tensor_t* t = is_out ? &ref->out[i - ref->nin] : &ref->in[i];
    const uj_tensor_t* f = is_out ? &from->out[i - ref->nin] : &from->in[i];
    *t = *f;
    t->data = NULL; /* f's, until this tensor has its own */
    if (is_out || !uj_program_input_dtype(p, i, &t->dtype)) t->dtype = UJ_F64;
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

/* GPU copies of host's tensors, the inputs' values copied over. */
static uj_status_t io_make_device(io_t* dev, uj_program_t* p, const io_t* host, uj_ctx_t* ctx) {
  if (io_alloc(dev, p) != UJ_OK) return UJ_ERR_OOM;
  dev->ctx = ctx;
  for (int i = 0; i < dev->nin + dev->nout; i++) {
    int is_out = i >= dev->nin;
    uj_tensor_t* t = is_out ? &dev->out[i - dev->nin] : &dev->in[i];
    const uj_tensor_t* h = is_out ? &host->out[i - dev->nin] : &host->in[i];
    uj_status_t s = uj_tensor_alloc(ctx, UJ_CUDA, h->dtype, h->ndim, h->dims, t);
    if (s == UJ_OK && !is_out) s = uj_tensor_copy(ctx, t, h);
    if (s != UJ_OK) return s;
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
    cli_print_dims(out, io->in[i].ndim, io->in[i].dims);
  }
  fprintf(out, ", outputs");
  for (int i = 0; i < io->nout; i++) {
    fprintf(out, " %s", uj_program_io_name(p, 1, i));
    cli_print_dims(out, io->out[i].ndim, io->out[i].dims);
  }
}

/* Everything `run` allocates. */
typedef struct {
  uj_program_t* program;
  uj_ctx_t *ctx, *ref_ctx;
  io_t io, ref;
  io_t dev;     /* --engine cuda: the tensors the program runs on */
  double* times;
} run_t;

/* One run on the engine's tensors; on the GPU it waits for the kernels. */
static uj_status_t run_once(run_t* r) {
  io_t* io = r->dev.ctx ? &r->dev : &r->io;
  uj_status_t s = uj_program_run(r->ctx, r->program, UJ_FORWARD, io->in_ptr, io->nin, NULL, 0, io->out_ptr, io->nout);
  if (s == UJ_OK && r->dev.ctx) s = uj_ctx_synchronize(r->ctx);
  return s;
}

static void run_release(run_t* r) {
  uj_program_free(r->program);
  io_release(&r->dev); /* before its context */
  uj_ctx_free(r->ctx);
  uj_ctx_free(r->ref_ctx);
  io_release(&r->io);
  io_release(&r->ref);
  free(r->times);
}

/* Median time, ns per element of the largest output, and GB/s for the
 * bytes of every input read and every output written. */
static int run_timing(run_t* r, const cli_options_t* o) {
  uj_status_t s = run_once(r); /* warm-up: builds and compiles */
  if (s != UJ_OK) return cli_report(s);
  if (!(r->times = malloc(sizeof *r->times * (size_t)o->repeat))) return cli_report(UJ_ERR_OOM);
  for (int k = 0; k < o->repeat; k++) {
    double t0 = now_seconds();
    s = run_once(r);
    r->times[k] = now_seconds() - t0;
    if (s != UJ_OK) return cli_report(s);
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
static int run_check(run_t* r, const cli_options_t* o) {
  uj_status_t s = run_once(r);
  for (int i = 0; s == UJ_OK && r->dev.ctx && i < r->io.nout; i++) s = uj_tensor_copy(r->ctx, &r->io.out[i], &r->dev.out[i]);
  if (s != UJ_OK) return cli_report(s);
  if (!(r->ref_ctx = uj_ctx_new())) return cli_report(UJ_ERR_OOM);
  if ((s = uj_ctx_set_engine(r->ref_ctx, UJ_ENGINE_INTERP)) != UJ_OK) return cli_report(s);
  if ((s = io_make_f64(&r->ref, r->program, &r->io)) != UJ_OK) return cli_report(s);
  for (int i = 0; i < r->ref.nout; i++) { /* the reference's shapes must agree */
    uj_tensor_t t = r->ref.out[i];
    if ((s = uj_program_shape(r->program, UJ_FORWARD, r->ref.in_ptr, NULL, i, &t.ndim, t.dims)) != UJ_OK)
      return cli_report(s);
    if (t.ndim != r->io.out[i].ndim || memcmp(t.dims, r->io.out[i].dims, sizeof t.dims[0] * (size_t)t.ndim)) {
      printf("check: FAILED output %s has shape ", uj_program_io_name(r->program, 1, i));
      cli_print_dims(stdout, r->io.out[i].ndim, r->io.out[i].dims);
      printf(" in %s but ", uj_dtype_name(o->dtype));
      cli_print_dims(stdout, t.ndim, t.dims);
      printf(" in f64\n");
      return 1;
    }
  }
  s = uj_program_run(r->ref_ctx, r->program, UJ_FORWARD, r->ref.in_ptr, r->ref.nin, NULL, 0, r->ref.out_ptr,
                     r->ref.nout);
  if (s != UJ_OK) return cli_report(s);
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

static int run_main(run_t* r, const cli_options_t* o) {
  int rc = cli_load_program("run", o, &r->program);
  if (rc || (rc = cli_check_run_memory("run", r->program, o))) return rc;
  uj_status_t s;
  if (!(r->ctx = uj_ctx_new())) return cli_report(UJ_ERR_OOM);
  if ((s = uj_ctx_set_engine(r->ctx, o->engine)) != UJ_OK) return cli_report(s);
  if ((s = io_make(&r->io, r->program, o)) != UJ_OK) return cli_report(s);
  if (o->engine == UJ_ENGINE_CUDA && (s = io_make_device(&r->dev, r->program, &r->io, r->ctx)) != UJ_OK)
    return cli_report(s);
  printf("engine %s, %s, ", uj_engine_name(uj_ctx_engine(r->ctx)), uj_dtype_name(o->dtype));
  print_io(stdout, r->program, &r->io);
  printf("\n");
  fflush(stdout);
  return o->check ? run_check(r, o) : run_timing(r, o);
}

int cli_cmd_run(int argc, char** argv) {
  cli_options_t o;
  int rc = cli_parse_options("run", argc, argv, CLI_ACCEPT_RUN, &o);
  if (rc) return rc;
  run_t r = {0};
  rc = run_main(&r, &o);
  run_release(&r);
  return rc;
}
