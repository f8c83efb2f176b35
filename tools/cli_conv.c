/* tools/cli_conv.c: `uopjit conv`, one 2-D convolution (uj_conv2d or a
 * backward counterpart) on seeded random values in [-1, 1): the backend
 * that ran and the median time of a few runs with GFLOP/s, or (--check)
 * the result compared with the reference backend run in f64 on the same
 * values.
 *
 * The check holds each element to the bound include/uopjit.h documents,
 * tol * (the number of terms in its sum) * (the largest magnitudes of the
 * two factors) (+ max|bias|), with tol 1e-6 (1e-5 for cpu_winograd) in f32
 * and 1e-12 in f64, and reports max_rel_err, the largest
 * |got - ref| / max(1, |ref|), in the same closing line as `uopjit run`. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

typedef enum { OP_FORWARD, OP_BACKWARD_DATA, OP_BACKWARD_FILTER } conv_op_t;

typedef struct {
  int64_t n, h, w, c, k, kernel;
  int stride, pad, bias, check, repeat, cache_filter;
  uint64_t seed;
  conv_op_t op;
  uj_dtype_t dtype;
  uj_engine_t engine;
  int engine_given;    /* else the context's default: UOPJIT_ENGINE, else auto */
  const char* backend; /* NULL: auto */
} conv_options_t;

/* The tensors of one call; in[] are its inputs, out[] its outputs. */
typedef struct {
  uj_tensor_t x, w, b, y; /* for the backward ops y holds dy, x dx (data) or w dw (filter) */
} conv_tensors_t;

static int parse_int(const char* text, int64_t lo, int64_t hi, int64_t* out) {
  char* end;
  long long v = strtoll(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < lo || v > hi) return 0;
  *out = v;
  return 1;
}

static int conv_usage_error(const char* what, const char* arg) { return cli_usage_error("conv", what, arg); }

static int parse_conv_options(int argc, char** argv, conv_options_t* o) {
  memset(o, 0, sizeof *o);
  o->n = 1, o->h = o->w = 56, o->c = o->k = 64, o->kernel = 3, o->stride = 1, o->pad = -1;
  o->repeat = 5, o->seed = 1, o->dtype = UJ_F32, o->engine = UJ_ENGINE_AUTO;
  for (int i = 1; i < argc; i++) {
    const char* arg = argv[i];
    if (!strcmp(arg, "--check")) { o->check = 1; continue; }
    if (!strcmp(arg, "--bias")) { o->bias = 1; continue; }
    if (!strcmp(arg, "--cache-filter")) { o->cache_filter = 1; continue; }
    const char* eq = strchr(arg, '=');
    char name[32];
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    if (strncmp(arg, "--", 2) != 0 || len >= sizeof name) return conv_usage_error("unknown argument", arg);
    memcpy(name, arg, len);
    name[len] = '\0';
    const char* value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
    if (!value) return conv_usage_error("missing value after", name);
    int64_t v;
    const int64_t size_max = INT64_C(1) << 20;
    if (!strcmp(name, "--n") || !strcmp(name, "--hw") || !strcmp(name, "--h") || !strcmp(name, "--w") ||
        !strcmp(name, "--c") || !strcmp(name, "--k") || !strcmp(name, "--kernel")) {
      if (!parse_int(value, 1, size_max, &v)) return conv_usage_error("a size must be a number from 1 to 2^20, got", value);
      if (!strcmp(name, "--n")) o->n = v;
      else if (!strcmp(name, "--hw")) o->h = o->w = v;
      else if (!strcmp(name, "--h")) o->h = v;
      else if (!strcmp(name, "--w")) o->w = v;
      else if (!strcmp(name, "--c")) o->c = v;
      else if (!strcmp(name, "--k")) o->k = v;
      else o->kernel = v;
    } else if (!strcmp(name, "--stride") || !strcmp(name, "--pad") || !strcmp(name, "--repeat")) {
      if (!parse_int(value, !strcmp(name, "--pad") ? 0 : 1, 1 << 20, &v))
        return conv_usage_error("--stride and --repeat want a number >= 1, --pad one >= 0, got", value);
      if (!strcmp(name, "--stride")) o->stride = (int)v;
      else if (!strcmp(name, "--pad")) o->pad = (int)v;
      else o->repeat = (int)v;
    } else if (!strcmp(name, "--seed")) {
      if (!parse_int(value, 0, INT64_MAX, &v)) return conv_usage_error("--seed wants a number, got", value);
      o->seed = (uint64_t)v;
    } else if (!strcmp(name, "--backend")) {
      o->backend = !strcmp(value, "auto") ? NULL : value;
    } else if (!strcmp(name, "--op")) {
      if (!strcmp(value, "forward")) o->op = OP_FORWARD;
      else if (!strcmp(value, "backward-data")) o->op = OP_BACKWARD_DATA;
      else if (!strcmp(value, "backward-filter")) o->op = OP_BACKWARD_FILTER;
      else return conv_usage_error("--op wants forward, backward-data or backward-filter, got", value);
    } else if (!strcmp(name, "--dtype")) {
      if (!strcmp(value, "f32")) o->dtype = UJ_F32;
      else if (!strcmp(value, "f64")) o->dtype = UJ_F64;
      else return conv_usage_error("--dtype wants f32 or f64, got", value);
    } else if (!strcmp(name, "--engine")) {
      if (!cli_parse_engine(value, &o->engine)) return conv_usage_error(cli_engine_usage(), value);
      o->engine_given = 1;
    } else {
      return conv_usage_error("unknown option", name);
    }
  }
  if (o->pad < 0) o->pad = (int)(o->kernel / 2); /* "same" for odd filters at stride 1 */
  return 0;
}

static double get(const uj_tensor_t* t, int64_t i) {
  return t->dtype == UJ_F64 ? ((const double*)t->data)[i] : (double)((const float*)t->data)[i];
}

static void set(uj_tensor_t* t, int64_t i, double v) {
  if (t->dtype == UJ_F64) ((double*)t->data)[i] = v;
  else ((float*)t->data)[i] = (float)v;
}

static int64_t numel(const uj_tensor_t* t) {
  int64_t n = 1;
  for (int a = 0; a < t->ndim; a++) n *= t->dims[a];
  return n;
}

/* t with dims and room for its values; else 1 with the reason printed: a
 * size whose element or byte count overflows (the options bound x and w,
 * but not y: a large pad makes it as large as it likes), or no memory. */
static int tensor_make(uj_tensor_t* t, const char* name, uj_dtype_t dt, int ndim, const int64_t* dims) {
  memset(t, 0, sizeof *t);
  t->dtype = dt;
  t->device = UJ_CPU;
  t->ndim = ndim;
  memcpy(t->dims, dims, sizeof(int64_t) * (size_t)ndim);
  int64_t n = 1, bytes;
  int overflow = 0;
  for (int a = 0; a < ndim; a++) overflow |= __builtin_mul_overflow(n, dims[a], &n);
  overflow |= __builtin_mul_overflow(n, (int64_t)uj_dtype_size(dt), &bytes) || (uint64_t)bytes > SIZE_MAX;
  if (overflow || !(t->data = malloc((size_t)(bytes > 0 ? bytes : 1)))) {
    fprintf(stderr, "uopjit conv: %s ", overflow ? "too large to address:" : "out of memory for");
    cli_print_dims(stderr, ndim, dims);
    fprintf(stderr, " (%s, %s)\n", name, uj_dtype_name(dt));
    return 1;
  }
  return 0;
}

static void tensors_free(conv_tensors_t* t) {
  free(t->x.data);
  free(t->w.data);
  free(t->b.data);
  free(t->y.data);
  memset(t, 0, sizeof *t);
}

/* x, w, bias, y (dy for the backward ops) of the options' sizes; `like`
 * given: its values converted, else seeded values. 0, else 1 with the
 * reason printed. */
static int tensors_make(const conv_options_t* o, uj_dtype_t dt, const conv_tensors_t* like, conv_tensors_t* t) {
  int64_t xd[4] = {o->n, o->h, o->w, o->c}, wd[4] = {o->k, o->kernel, o->kernel, o->c}, bd[1] = {o->k}, yd[4];
  uj_conv2d_desc_t d = {o->stride, o->stride, o->pad, o->pad, 0};
  if (tensor_make(&t->x, "x", dt, 4, xd) || tensor_make(&t->w, "w", dt, 4, wd) || tensor_make(&t->b, "bias", dt, 1, bd))
    return 1;
  uj_status_t s = uj_conv2d_output_shape(&d, &t->x, &t->w, yd);
  if (s != UJ_OK) return cli_report(s);
  if (tensor_make(&t->y, o->op == OP_FORWARD ? "y" : "dy", dt, 4, yd)) return 1;
  uint64_t state = o->seed;
  uj_tensor_t* all[] = {&t->x, &t->w, &t->b, &t->y};
  for (int i = 0; i < 4; i++) {
    const uj_tensor_t* from = !like ? NULL : i == 0 ? &like->x : i == 1 ? &like->w : i == 2 ? &like->b : &like->y;
    for (int64_t e = 0, n = numel(all[i]); e < n; e++) set(all[i], e, from ? get(from, e) : cli_rng_float(&state));
  }
  return 0;
}

/* The call of the options' op on t; backend NULL means auto. */
static uj_status_t conv_call(uj_ctx_t* ctx, const conv_options_t* o, const char* backend, conv_tensors_t* t,
                             uj_tensor_t* out) {
  uj_conv2d_desc_t d = {o->stride, o->stride, o->pad, o->pad, o->cache_filter ? 1 : 0};
  switch (o->op) {
    case OP_FORWARD: return uj_conv2d(ctx, &d, &t->x, &t->w, o->bias ? &t->b : NULL, out, backend);
    case OP_BACKWARD_DATA: return uj_conv2d_backward_data(ctx, &d, &t->y, &t->w, out, backend);
    case OP_BACKWARD_FILTER: return uj_conv2d_backward_filter(ctx, &d, &t->x, &t->y, out, NULL, backend);
  }
  return UJ_ERR_INVALID;
}

/* The output tensor of the op: y, dx (x's shape) or dw (w's shape); 0, else
 * 1 with the reason printed. */
static int output_make(const conv_options_t* o, const conv_tensors_t* t, uj_tensor_t* out) {
  const uj_tensor_t* shape = o->op == OP_FORWARD ? &t->y : o->op == OP_BACKWARD_DATA ? &t->x : &t->w;
  return tensor_make(out, o->op == OP_FORWARD ? "y" : o->op == OP_BACKWARD_DATA ? "dx" : "dw", t->x.dtype, shape->ndim,
                     shape->dims);
}

static double max_abs(const uj_tensor_t* t) {
  double m = 0;
  for (int64_t i = 0, n = numel(t); i < n; i++) m = fmax(m, fabs(get(t, i)));
  return m;
}

/* The per-element bound for the backend that ran (see the file comment). */
static double check_bound(const conv_options_t* o, const conv_tensors_t* t, const char* ran) {
  double tol = o->dtype == UJ_F64 ? 1e-12 : ran && !strcmp(ran, "cpu_winograd") ? 1e-5 : 1e-6;
  double taps = (double)(o->kernel * o->kernel);
  switch (o->op) {
    case OP_FORWARD:
      return tol * (taps * (double)o->c * max_abs(&t->x) * max_abs(&t->w) + (o->bias ? max_abs(&t->b) : 0));
    case OP_BACKWARD_DATA: return tol * taps * (double)o->k * max_abs(&t->y) * max_abs(&t->w);
    case OP_BACKWARD_FILTER:
      return tol * (double)(t->y.dims[0] * t->y.dims[1] * t->y.dims[2]) * max_abs(&t->y) * max_abs(&t->x);
  }
  return 0;
}

typedef struct {
  uj_ctx_t *ctx, *ref_ctx;
  conv_tensors_t t, ref;
  uj_tensor_t out, ref_out;
  double* times;
} conv_run_t;

static void conv_release(conv_run_t* r) {
  uj_ctx_free(r->ctx);
  uj_ctx_free(r->ref_ctx);
  tensors_free(&r->t);
  tensors_free(&r->ref);
  free(r->out.data);
  free(r->ref_out.data);
  free(r->times);
}

static int conv_check(conv_run_t* r, const conv_options_t* o, const char* ran) {
  if (!(r->ref_ctx = uj_ctx_new())) return cli_report(UJ_ERR_OOM);
  if (o->engine_given && uj_ctx_set_engine(r->ref_ctx, o->engine) != UJ_OK) return cli_engine_unavailable(o->engine);
  uj_status_t s;
  if (tensors_make(o, UJ_F64, &r->t, &r->ref) || output_make(o, &r->ref, &r->ref_out)) return 1;
  if ((s = conv_call(r->ref_ctx, o, "ref", &r->ref, &r->ref_out)) != UJ_OK) return cli_report(s);
  double bound = check_bound(o, &r->t, ran), max_rel_err = 0;
  for (int64_t i = 0, n = numel(&r->out); i < n; i++) {
    double a = get(&r->out, i), b = get(&r->ref_out, i), err = fabs(a - b);
    max_rel_err = fmax(max_rel_err, err / fmax(1.0, fabs(b)));
    if (!(err <= bound)) { /* NaN fails too */
      printf("check: FAILED element %lld: %s %.9g, ref f64 %.17g (|error| %.3g > bound %.3g)\n", (long long)i, ran,
             a, b, err, bound);
      return 1;
    }
  }
  printf("bound: |error| <= %.3g per element\n", bound);
  printf("check: ok max_rel_err=%.3g\n", max_rel_err);
  return 0;
}

static int conv_main(conv_run_t* r, const conv_options_t* o) {
  static const char* const op_names[] = {"forward", "backward data", "backward filter"};
  if (!(r->ctx = uj_ctx_new())) return cli_report(UJ_ERR_OOM);
  if (o->engine_given && uj_ctx_set_engine(r->ctx, o->engine) != UJ_OK) return cli_engine_unavailable(o->engine);
  if (tensors_make(o, o->dtype, NULL, &r->t) || output_make(o, &r->t, &r->out)) return 1;
  uj_status_t s;
  double t0 = cli_now_seconds();
  if ((s = conv_call(r->ctx, o, o->backend, &r->t, &r->out)) != UJ_OK) return cli_report(s);
  double first = cli_now_seconds() - t0;
  const char* ran = uj_conv2d_last_backend(r->ctx);
  printf("conv2d %s, backend %s (%s), %s, x", op_names[o->op], ran, o->backend ? "named" : "auto",
         uj_dtype_name(o->dtype));
  cli_print_dims(stdout, 4, r->t.x.dims);
  printf(" w");
  cli_print_dims(stdout, 4, r->t.w.dims);
  printf(" y");
  cli_print_dims(stdout, 4, r->t.y.dims);
  printf(", stride %d, pad %d%s%s\n", o->stride, o->pad, o->bias ? ", bias" : "", o->cache_filter ? ", filter kept" : "");
  fflush(stdout);
  if (o->check) return conv_check(r, o, ran);
  if (!(r->times = malloc(sizeof *r->times * (size_t)o->repeat)))
    return cli_out_of_memory("the run times", sizeof *r->times * (size_t)o->repeat);
  for (int k = 0; k < o->repeat; k++) {
    t0 = cli_now_seconds();
    if ((s = conv_call(r->ctx, o, ran, &r->t, &r->out)) != UJ_OK) return cli_report(s);
    r->times[k] = cli_now_seconds() - t0;
  }
  double median = cli_median(r->times, o->repeat);
  double flops = 2.0 * (double)(r->t.y.dims[0] * r->t.y.dims[1] * r->t.y.dims[2]) * (double)(o->k * o->c) *
                 (double)(o->kernel * o->kernel);
  printf("time: median %.3f ms of %d runs (first call %.3f ms), %.2f GFLOP/s\n", median * 1e3, o->repeat, first * 1e3,
         flops / fmax(median, 1e-9) * 1e-9);
  return 0;
}

int cli_cmd_conv(int argc, char** argv) {
  conv_options_t o;
  int rc = parse_conv_options(argc, argv, &o);
  if (rc) return rc;
  conv_run_t r;
  memset(&r, 0, sizeof r);
  rc = conv_main(&r, &o);
  conv_release(&r);
  return rc;
}
