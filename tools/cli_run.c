/* tools/cli_run.c: `uopjit run`, an expression-language program on seeded
 * random inputs: the median time of a few runs, or (--check) every output
 * compared with the interpreter's in f64 on the same input values, each
 * element within 1e-5 (f32; 1e-12 in f64; a unit of the format, 2^-7 or
 * 2^-10, in bf16 or f16) of max(1, |ref|), plus, for an
 * output that reduces the inputs with sum or mean, the worst-case error of
 * a sum of that many terms in any order, gamma_n * sum|terms|, where
 * sum|terms| comes from the program's magnitude form (cli_magnitude.c). With
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
    case UJ_BF16:
    case UJ_F16: return uj_half_to_f64(t->dtype, ((const uint16_t*)t->data)[i]);
    default: return (double)((const float*)t->data)[i];
  }
}

/* v is an input's value: in [0.5, 1.5), or one of scalar_value's */
static void set(uj_tensor_t* t, int64_t i, double v) {
  switch (t->dtype) {
    case UJ_F64: ((double*)t->data)[i] = v; break;
    case UJ_I32: ((int32_t*)t->data)[i] = (int32_t)v; break;
    case UJ_BF16:
    case UJ_F16: ((uint16_t*)t->data)[i] = uj_half_from_f64(t->dtype, v); break;
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
 * shapes and dtypes the options give each (cli_resolve_inputs). Then the
 * outputs, in the shapes and dtypes the program infers. */
static uj_status_t io_make(io_t* io, uj_program_t* p, const cli_input_t* inputs, uint64_t seed) {
  if (io_alloc(io, p) != UJ_OK) return UJ_ERR_OOM;
  uint64_t state = seed;
  for (int i = 0; i < io->nin; i++) {
    const char* name = uj_program_io_name(p, 0, i);
    uj_tensor_t* t = &io->in[i];
    t->dtype = inputs[i].dtype;
    t->device = UJ_CPU;
    t->ndim = inputs[i].ndim;
    memcpy(t->dims, inputs[i].dims, sizeof(int64_t) * (size_t)t->ndim);
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

/* "inputs x[64,130] b[130] s[], outputs y[64,130]"; a tensor whose dtype
 * is not the default one says so: "x:f64[3]". */
static void print_io(FILE* out, const uj_program_t* p, const io_t* io, uj_dtype_t default_dtype) {
  for (int is_out = 0; is_out < 2; is_out++) {
    fprintf(out, "%s", is_out ? ", outputs" : "inputs");
    for (int i = 0; i < (is_out ? io->nout : io->nin); i++) {
      const uj_tensor_t* t = is_out ? &io->out[i] : &io->in[i];
      fprintf(out, " %s", uj_program_io_name(p, is_out, i));
      if (t->dtype != default_dtype) fprintf(out, ":%s", uj_dtype_name(t->dtype));
      cli_print_dims(out, t->ndim, t->dims);
    }
  }
}

/* Everything `run` allocates. */
typedef struct {
  uj_program_t* program;
  cli_input_t* inputs; /* the shape and dtype of each input */
  char* source;        /* the text that parsed */
  uj_ctx_t *ctx, *ref_ctx;
  io_t io, ref;
  io_t dev;     /* --engine cuda: the tensors the program runs on */
  double* times;
  /* --check of a program with sums or means: the magnitude form and its
   * outputs, sum|terms| per element (cli_magnitude.c) */
  uj_program_t* magnitude;
  uj_tensor_t* magnitude_out;
  uj_tensor_t** magnitude_ptr;
  /* what served the program's own last run, kept before --check's
   * reference runs the same program on the interpreter (the program
   * reports its last run by any context) */
  uj_engine_t asked; /* --engine, UOPJIT_ENGINE or auto */
  uj_run_info_t info;
  int have_info;
  uj_engine_t* served; /* the engine of each timed run */
  const char* failure_note; /* put before the library's message of a failure */
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
  uj_program_free(r->magnitude);
  for (int i = 0; r->magnitude_out && i < r->io.nout; i++) free(r->magnitude_out[i].data);
  free(r->magnitude_out);
  free(r->magnitude_ptr);
  free(r->inputs);
  free(r->source);
  io_release(&r->dev); /* before its context */
  uj_ctx_free(r->ctx);
  uj_ctx_free(r->ref_ctx);
  io_release(&r->io);
  io_release(&r->ref);
  free(r->times);
  free(r->served);
}

/* Keeps what served the run that just ended, for -v and the messages. */
static void note_last_run(run_t* r) {
  r->have_info = uj_program_last_run(r->ctx, r->program, UJ_FORWARD, &r->info) == UJ_OK;
}

/* Median time, ns per element and GB/s for the bytes of every input read
 * and every output written. The elements are those of the largest tensor,
 * input or output (an output on a tie), which the line names: for an
 * elementwise program the output it writes, for a reduction the input it
 * reads (per element of a sum's one output would mean nothing). */
static int run_timing(run_t* r, const cli_options_t* o) {
  uj_status_t s = run_once(r); /* warm-up: builds and compiles */
  if (s != UJ_OK) return cli_report(s);
  if (!(r->times = malloc(sizeof *r->times * (size_t)o->repeat))) return cli_report(UJ_ERR_OOM);
  if (!(r->served = calloc((size_t)o->repeat, sizeof *r->served))) return cli_report(UJ_ERR_OOM);
  for (int k = 0; k < o->repeat; k++) {
    cli_served_mark_t mark;
    cli_served_mark(r->ctx, &mark);
    double t0 = cli_now_seconds();
    s = run_once(r);
    r->times[k] = cli_now_seconds() - t0;
    if (s != UJ_OK) return cli_report(s);
    r->served[k] = r->dev.ctx ? UJ_ENGINE_CUDA : cli_served_since(r->ctx, r->asked, &mark);
  }
  note_last_run(r);
  double median = cli_median(r->times, o->repeat);
  const uj_tensor_t* largest = NULL;
  int largest_is_out = 0, largest_index = 0;
  double bytes = 0;
  for (int is_out = 1; is_out >= 0; is_out--)
    for (int i = 0; i < (is_out ? r->io.nout : r->io.nin); i++) {
      const uj_tensor_t* t = is_out ? &r->io.out[i] : &r->io.in[i];
      bytes += (double)tensor_bytes(t);
      if (!largest || numel(t) > numel(largest)) largest = t, largest_is_out = is_out, largest_index = i;
    }
  int64_t elements = largest && numel(largest) > 0 ? numel(largest) : 1;
  if (median <= 0) median = 1e-9; /* below the clock's resolution */
  printf("time: median %.3f ms of %d runs, %.3f ns/element of %s %s", median * 1e3, o->repeat,
         median * 1e9 / (double)elements, largest_is_out ? "output" : "input",
         largest ? uj_program_io_name(r->program, largest_is_out, largest_index) : "-");
  if (largest) cli_print_dims(stdout, largest->ndim, largest->dims);
  printf(", %.2f GB/s\n", bytes / median * 1e-9);
  return 0;
}

/* How output i is judged: an output with fewer elements than the largest
 * input is a reduction of `terms` = (elements of that input) / (elements
 * of the output) terms per element; any other output is elementwise
 * (terms 1). */
typedef struct {
  double tol;           /* relative to max(1, |ref|), every element */
  double unit_roundoff; /* of the output's dtype */
  int64_t terms;
  double gamma;         /* terms * u / (1 - terms * u): Higham's gamma_n; inf from n*u >= 1 */
} bound_t;

static bound_t output_bound(const run_t* r, int i, int program_reduces) {
  bound_t b;
  int is_f64 = r->io.out[i].dtype == UJ_F64;
  b.tol = is_f64 ? CHECK_TOL_F64 : CHECK_TOL_F32;
  /* a bf16/f16 output is the f32 result rounded once more (sums are
   * still f32 sums): one unit of the format, twice the rounding's worst
   * case, covers that and the f32 error before it */
  if (r->io.out[i].dtype == UJ_BF16) b.tol = 0x1p-7;
  if (r->io.out[i].dtype == UJ_F16) b.tol = 0x1p-10;
  b.unit_roundoff = is_f64 ? 0x1p-53 : 0x1p-24;
  int64_t largest_input = 1, out = numel(&r->io.out[i]);
  for (int k = 0; k < r->io.nin; k++)
    if (numel(&r->io.in[k]) > largest_input) largest_input = numel(&r->io.in[k]);
  /* amax and amin round nothing: without a sum or a mean the smaller
   * output is judged elementwise */
  b.terms = program_reduces && out > 0 && largest_input > out ? largest_input / out : 1;
  double nu = (double)b.terms * b.unit_roundoff;
  b.gamma = b.terms == 1 ? 0 : nu < 1 ? nu / (1 - nu) : INFINITY;
  return b;
}

/* The magnitude form of the program (cli_magnitude.c) run by the f64
 * interpreter on the reference's inputs, into r->magnitude_out. *reduces
 * is 0, and nothing is run, when the program has no sum or mean. */
static uj_status_t run_magnitude(run_t* r, int* reduces) {
  char* text = cli_magnitude_source(r->source, reduces);
  if (!text) return UJ_ERR_OOM;
  uj_status_t s = UJ_OK;
  if (*reduces) s = uj_program_parse(text, &r->magnitude);
  free(text);
  /* abs( ) adds a level of nesting to each sum and mean: a program at the
   * parser's limit has a magnitude form past it, which is said as such
   * rather than as an error in text the user never wrote */
  if (s == UJ_ERR_PARSE)
    r->failure_note = "the program's magnitude form (each sum(E) and mean(E) taken over abs(E), for the error bound "
                     "of a reduction) does not parse: ";
  if (!*reduces || s != UJ_OK) return s;
  /* the rewrite adds no names: the same inputs and outputs, in order */
  if (uj_program_io_count(r->magnitude, 0) != r->ref.nin || uj_program_io_count(r->magnitude, 1) != r->ref.nout) {
    fprintf(stderr, "uopjit run: internal error: the magnitude form of the program has other inputs or outputs\n");
    return UJ_ERR_INVALID;
  }
  r->magnitude_out = calloc((size_t)r->ref.nout + 1, sizeof *r->magnitude_out);
  r->magnitude_ptr = calloc((size_t)r->ref.nout + 1, sizeof *r->magnitude_ptr);
  if (!r->magnitude_out || !r->magnitude_ptr) return UJ_ERR_OOM;
  for (int i = 0; i < r->ref.nout; i++) {
    uj_tensor_t* t = &r->magnitude_out[i];
    *t = r->ref.out[i];
    if (!(t->data = malloc(tensor_bytes(t) ? tensor_bytes(t) : 1))) return UJ_ERR_OOM;
    r->magnitude_ptr[i] = t;
  }
  return uj_program_run(r->ref_ctx, r->magnitude, UJ_FORWARD, r->ref.in_ptr, r->ref.nin, NULL, 0, r->magnitude_ptr,
                        r->ref.nout);
}

/* The relative error of got against the f64 reference want, for the
 * report: 0 when both are NaN or the same infinity (both sides computed the
 * same special value, while their difference would be NaN). */
static double relative_error(double got, double want) {
  if ((isnan(got) && isnan(want)) || (isinf(got) && got == want)) return 0;
  return fabs(got - want) / fmax(1.0, fabs(want));
}

/* 1 when got agrees with the f64 reference want: both NaN, the same
 * infinity (their difference would be NaN), or |got - want| <= bound.
 * `!(x > bound)` would pass a NaN difference; `x <= bound` fails it. */
static int agrees(double got, double want, double bound) {
  if ((isnan(got) && isnan(want)) || (isinf(got) && got == want)) return 1;
  return fabs(got - want) <= bound;
}

/* "1e-05*max(1,|ref|)", then for a reduction
 * " + gamma_n*sum|terms| (n=1027 terms, u=2^-24, gamma_n=6.12e-05)". */
static void print_bound(const bound_t* b) {
  printf("%g*max(1,|ref|)", b->tol);
  if (b->terms > 1)
    printf(" + gamma_n*sum|terms| (n=%lld terms, u=2^-%d, gamma_n=n*u/(1-n*u)=%.3g)", (long long)b->terms,
           b->unit_roundoff == 0x1p-53 ? 53 : 24, b->gamma);
}

/* Runs the chosen engine and the interpreter in f64 on the same input
 * values, and compares every element of every output within its bound
 * (output_bound): tol * max(1, |ref|), plus for a reduction
 * gamma_n * sum|terms| with sum|terms| from the magnitude form. */
static int run_check(run_t* r) {
  uj_status_t s = run_once(r);
  if (s == UJ_OK) note_last_run(r); /* before the reference runs the program */
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
      printf(" in %s but ", uj_dtype_name(r->io.out[i].dtype));
      cli_print_dims(stdout, t.ndim, t.dims);
      printf(" in f64\n");
      return 1;
    }
  }
  s = uj_program_run(r->ref_ctx, r->program, UJ_FORWARD, r->ref.in_ptr, r->ref.nin, NULL, 0, r->ref.out_ptr,
                     r->ref.nout);
  int reduces = 0;
  if (s == UJ_OK) s = run_magnitude(r, &reduces);
  if (s != UJ_OK && r->failure_note) {
    fprintf(stderr, "uopjit: %s: %s%s\n", uj_status_str(s), r->failure_note, uj_last_error());
    return 1;
  }
  if (s != UJ_OK) return cli_report(s);
  double max_rel_err = 0;
  for (int i = 0; i < r->io.nout; i++) {
    const uj_tensor_t *got = &r->io.out[i], *want = &r->ref.out[i];
    bound_t b = output_bound(r, i, reduces);
    double worst_share = 0; /* the largest |error| / bound */
    for (int64_t k = 0, n = numel(got); k < n; k++) {
      double x = get(got, k), ref = get(want, k);
      double bound = b.tol * fmax(1.0, fabs(ref));
      if (b.terms > 1) bound += b.gamma * get(&r->magnitude_out[i], k);
      if (!agrees(x, ref, bound)) {
        printf("check: FAILED output %s element %lld: %s %.9g, interp f64 %.17g (|error| %.3g > bound %.3g = ",
               uj_program_io_name(r->program, 1, i), (long long)k,
               uj_engine_name(r->have_info ? r->info.engine : uj_ctx_engine(r->ctx)), x, ref,
               fabs(x - ref), bound);
        print_bound(&b);
        if (b.terms > 1) printf(", sum|terms|=%.6g", get(&r->magnitude_out[i], k));
        printf(")\n");
        return 1;
      }
      double err = relative_error(x, ref);
      if (err > max_rel_err) max_rel_err = err;
      if (bound > 0 && fabs(x - ref) / bound > worst_share) worst_share = fabs(x - ref) / bound;
    }
    if (b.terms > 1) {
      printf("bound: output %s, a reduction: |error| <= ", uj_program_io_name(r->program, 1, i));
      print_bound(&b);
      printf("; largest |error|/bound %.3g\n", worst_share);
    }
  }
  printf("check: ok max_rel_err=%.3g\n", max_rel_err);
  return 0;
}

static const char* const tier_words[] = {"none", "waiting", "compiling", "ready", "failed"};

static void print_ms(const char* what, double ms) {
  if (ms < 0) printf(", %s -", what);
  else printf(", %s %.1f ms", what, ms);
}

/* -v: the engine that served the program's last run (not --check's
 * reference) and, when it was tiered, its kernel's tiers: each one's
 * compile time, and why C failed; under auto, which engines served the
 * timed runs; with --check, where the reference ran. */
static void print_last_run(run_t* r, const cli_options_t* o) {
  if (!r->have_info) return;
  const uj_run_info_t info = r->info;
  printf("last run: engine %s", uj_engine_name(info.engine));
  if (info.tier != UJ_TIER_NONE) {
    printf("; tiered, c %s", tier_words[info.tier]);
    print_ms("mir compile", info.mir_ms);
    print_ms(info.c_from_disk ? "c from the disk cache" : "c compile", info.c_ms);
    if (info.tier == UJ_TIER_FAILED) printf("; c failed: %s", info.c_error);
  }
  printf("\n");
  if (!o->check && r->served && r->asked == UJ_ENGINE_AUTO) {
    char summary[160];
    cli_served_summary(r->served, o->repeat, "run", summary, sizeof summary);
    printf("timed runs: %s\n", summary);
  }
  if (o->check) printf("check: the reference ran on %s, in f64\n", uj_engine_name(UJ_ENGINE_INTERP));
}

static int run_main(run_t* r, const cli_options_t* o) {
  int rc = cli_load_program("run", o, &r->program, &r->inputs, &r->source);
  if (rc || (rc = cli_check_run_memory("run", r->program, r->inputs, o->check))) return rc;
  uj_status_t s;
  if (!(r->ctx = uj_ctx_new())) return cli_report(UJ_ERR_OOM);
  if (o->engine_given && (s = uj_ctx_set_engine(r->ctx, o->engine)) != UJ_OK) return cli_report(s);
  if ((s = io_make(&r->io, r->program, r->inputs, o->seed)) != UJ_OK) return cli_report(s);
  if (uj_ctx_engine(r->ctx) == UJ_ENGINE_CUDA && (s = io_make_device(&r->dev, r->program, &r->io, r->ctx)) != UJ_OK)
    return cli_report(s);
  /* the engine asked for: auto is auto (tiered, MIR then C), whatever
   * engine serves a given call (-v says which served the last) */
  uj_engine_t asked = cli_engine_asked(o->engine_given, o->engine);
  r->asked = asked == UJ_ENGINE_AUTO ? asked : uj_ctx_engine(r->ctx);
  printf("engine %s, %s, ", uj_engine_name(r->asked),
         uj_dtype_name(o->inputs.all.dtype));
  print_io(stdout, r->program, &r->io, o->inputs.all.dtype);
  printf("\n");
  fflush(stdout);
  rc = o->check ? run_check(r) : run_timing(r, o);
  if (!rc && o->verbose) print_last_run(r, o);
  return rc;
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
