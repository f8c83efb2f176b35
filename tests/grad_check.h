/* tests/grad_check.h: gradients against central finite differences, shared
 * by tests/test_grad.c and tests/test_grad_composite.c.
 *
 * A case is a graph with inputs x_i (f64, or i32 for select indices, which
 * get no gradient), forward outputs y_k (f64) and optionally forward nodes
 * whose values the backward pass takes as ingrads ("given"). gc_check builds
 * one program with outputs {y.., given..}, ingrads {grad(y).., x.., given..}
 * and outgrads {grad(x_i)} for the inputs asked for, draws an upstream
 * gradient gy_k in [-1, 1] per output and checks
 *
 *   forward   UJ_FORWARD on every configuration below but the first,
 *             against the interpreter's forward outputs (relative 1e-10);
 *   analytic  UJ_BACKWARD on the interpreter and MIR, each with the passes
 *             on and off (the IR as emitted), and on C with the passes on
 *             (a C compile costs tens of ms, a MIR one well under one);
 *             engines that are not available are skipped; outgrads filled
 *             with NaN first;
 *   numeric   dL/dx_e = sum_k sum(gy_k * (y_k(x + h e) - y_k(x - h e))) / (2h)
 *             with L = sum_k sum(gy_k * y_k), y from UJ_FORWARD on the
 *             interpreter, h = 1e-6 * max(1, |x_e|), the divisor taken as
 *             the difference of the two perturbed values actually stored;
 *
 * per element |a - n| <= tol * max(1, |n|) (tol 1e-6 unless the case says
 * otherwise; a floor of 1 rather than 1e-3, since the differences carry an
 * absolute rounding error of about eps * |y| / h per output touched). Differencing y element by element (instead of L(x+h) - L(x-h))
 * keeps the outputs a perturbation does not touch exactly out of the sum. An
 * input marked zero must get a gradient of exactly 0. A failure names the
 * case, the input, the element, the configuration, analytic vs numeric, and
 * (through HARNESS_SEED) the seed. Everything goes through the public API. */
#ifndef UJ_TESTS_GRAD_CHECK_H
#define UJ_TESTS_GRAD_CHECK_H

#include "oracle.h"

#define GC_MAX 8
#define GC_TOL 1e-6
#define GC_H 1e-6
/* forward outputs (f64) of an engine against the interpreter's */
#define GC_TOL_FORWARD 1e-10

typedef struct {
  uj_graph_t* g;
  int nin;
  uj_io_t in[GC_MAX];
  uj_tensor_t t[GC_MAX]; /* the inputs' values, filled by the test */
  int nout;
  int out[GC_MAX];       /* indices into in[] whose gradients are asked for, in outgrad order */
  int zero[GC_MAX];      /* per input: 1, the gradient must be exactly 0; 2, the same
                            without differences (a perturbation would flip a condition) */
  int ny;
  uj_io_t y[GC_MAX];
  int ngiven;
  uj_io_t given[GC_MAX];
  int np;
  const char* pnames[GC_MAX];
  int64_t pvals[GC_MAX];
  double h;      /* relative step, or absolute with fixed_h */
  int fixed_h;
  double tol;
  char what[160];
} gc_case_t;

/* ---- contexts: the FD forward one and the backward configurations ---- */

typedef struct {
  uj_engine_t engine;
  int passes;
} gc_config_t;
/* Slot 0 is the reference: the interpreter with the passes on (it also runs
 * the finite differences). MIR runs with the passes on and off; C with them
 * on only and on a sample of the cases (oracle.h's or_c_case), since each C
 * kernel is a compile of a tenth of a second and the cases are many (the C
 * emitter meets raw IR in the oracle tests), and CUDA
 * with them on where there is a GPU (runs staged through GPU copies). An
 * engine that is not available is skipped (oracle.h says so once). Both
 * passes of every case are also compiled with NVRTC for sm_90 (oracle.h's
 * or_cuda_compile), GPU or not. */
static const gc_config_t gc_configs[] = {{UJ_ENGINE_INTERP, 1}, {UJ_ENGINE_INTERP, 0}, {UJ_ENGINE_C, 1},
                                         {UJ_ENGINE_MIR, 1},    {UJ_ENGINE_MIR, 0},    {UJ_ENGINE_CUDA, 1}};
#define GC_NCONFIGS ((int)(sizeof gc_configs / sizeof gc_configs[0]))

static uj_ctx_t* gc_ctx_cache[GC_NCONFIGS];
static void gc_ctx_release(void) {
  for (int i = 0; i < GC_NCONFIGS; i++) uj_ctx_free(gc_ctx_cache[i]), gc_ctx_cache[i] = NULL;
}
/* 1 when configuration k's engine is available (asked once). */
static inline int gc_config_distinct(int k) {
  static int known[GC_NCONFIGS], avail[GC_NCONFIGS];
  if (!known[k]) {
    or_configs_init_(); /* the one-time "unavailable" messages */
    avail[k] = or_engine_available(gc_configs[k].engine);
    known[k] = 1;
  }
  return avail[k];
}
static inline uj_ctx_t* gc_ctx(int k) {
  static int registered;
  if (!registered) registered = 1, atexit(gc_ctx_release);
  if (!gc_ctx_cache[k]) {
    if (!gc_config_distinct(k)) return NULL;
    uj_ctx_t* c = uj_ctx_new();
    if (!c) return NULL;
    if (uj_ctx_set_engine(c, gc_configs[k].engine) != UJ_OK ||
        uj_ctx_set_passes(c, gc_configs[k].passes) != UJ_OK) {
      uj_ctx_free(c);
      return NULL;
    }
    gc_ctx_cache[k] = c;
  }
  return gc_ctx_cache[k];
}

/* ---- building a case ---- */

static inline void gc_init(gc_case_t* c, const char* fmt_what) {
  memset(c, 0, sizeof *c);
  c->g = uj_graph_new();
  c->h = GC_H;
  c->tol = GC_TOL;
  snprintf(c->what, sizeof c->what, "%s", fmt_what);
}

/* Registers node (an input of c->g) with a new tensor; want asks for its gradient. */
static inline uj_io_t gc_adopt(gc_case_t* c, uj_io_t node, uj_dtype_t dt, int nd, const int64_t* dims,
                               int want) {
  int i = c->nin++;
  c->in[i] = node;
  c->t[i] = or_tensor(dt, nd, dims);
  if (want) c->out[c->nout++] = i;
  return node;
}
static inline uj_io_t gc_input(gc_case_t* c, uj_dtype_t dt, int nd, const int64_t* dims, int want) {
  return gc_adopt(c, uj_input(c->g, nd, dt), dt, nd, dims, want);
}
/* The tensor of input node n. */
static inline uj_tensor_t* gc_t(gc_case_t* c, uj_io_t n) {
  for (int i = 0; i < c->nin; i++)
    if (c->in[i] == n) return &c->t[i];
  return NULL;
}
static inline int gc_index(const gc_case_t* c, uj_io_t n) {
  for (int i = 0; i < c->nin; i++)
    if (c->in[i] == n) return i;
  return -1;
}
static inline void gc_output(gc_case_t* c, uj_io_t y) { c->y[c->ny++] = y; }

/* ---- fills ---- */

/* Uniform in [lo, hi). */
static inline void gc_fill(uint64_t* st, uj_tensor_t* t, double lo, double hi) { or_fill_real(st, t, lo, hi); }
/* |x| in [gap, hi), random sign: away from the kink at 0. */
static inline void gc_fill_away(uint64_t* st, uj_tensor_t* t, double gap, double hi) {
  int64_t n = or_tnumel(t);
  for (int64_t i = 0; i < n; i++)
    or_set(t, i, harness_real(st, gap, hi) * (harness_int(st, 0, 1) ? 1.0 : -1.0));
}
/* Pairwise distinct values (a shuffled grid with steps of at least 0.01,
 * plus a jitter below the step) around [-2, 2]. */
static inline void gc_fill_distinct(uint64_t* st, uj_tensor_t* t) {
  int64_t n = or_tnumel(t);
  double step = n > 1 && 4.0 / (double)(n - 1) > 0.01 ? 4.0 / (double)(n - 1) : 0.01;
  for (int64_t i = 0; i < n; i++) or_set(t, i, -2.0 + step * (double)i + harness_real(st, 0, 0.3 * step));
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = harness_int(st, 0, i);
    double a = or_get(t, i);
    or_set(t, i, or_get(t, j));
    or_set(t, j, a);
  }
}
/* b = a +- [gap, gap + 1.5): the two differ by at least gap everywhere. */
static inline void gc_fill_apart(uint64_t* st, const uj_tensor_t* a, uj_tensor_t* b, double gap) {
  int64_t n = or_tnumel(b);
  for (int64_t i = 0; i < n; i++)
    or_set(b, i, or_get(a, i) + harness_real(st, gap, gap + 1.5) * (harness_int(st, 0, 1) ? 1.0 : -1.0));
}
/* A random shape of rank r, sizes in [1, dmax]. */
static inline void gc_dims(uint64_t* st, int r, int dmax, int64_t* dims) {
  for (int i = 0; i < r; i++) dims[i] = harness_int(st, 1, dmax);
}

/* ---- the check ---- */

static inline double* gc_copy(const uj_tensor_t* t) { return or_to_double(t); }

static inline void gc_free_case(gc_case_t* c) {
  for (int i = 0; i < c->nin; i++) or_tensor_free(&c->t[i]);
  uj_graph_free(c->g);
  c->g = NULL;
  c->nin = 0;
}

/* Runs the case (see the file comment) and frees it. Returns the number of
 * failed comparisons (0 when all agree). */
static inline int gc_check_(const char* file, int line, gc_case_t* c, uint64_t* st) {
  char msg[640];
  int bad = 0;
  uj_program_t* p = NULL;
  int nfo = c->ny + c->ngiven; /* forward outputs */
  uj_tensor_t fo[2 * GC_MAX];  /* forward outputs at the base point */
  uj_tensor_t gy[GC_MAX];
  uj_tensor_t go[GC_MAX];
  double* res[GC_NCONFIGS][GC_MAX];
  double *yp[GC_MAX], *ym[GC_MAX];
  memset(fo, 0, sizeof fo);
  memset(gy, 0, sizeof gy);
  memset(go, 0, sizeof go);
  memset(res, 0, sizeof res);
  memset(yp, 0, sizeof yp);
  memset(ym, 0, sizeof ym);
  int nfo_made = 0, ngy_made = 0, ngo_made = 0;
  int c_case = or_c_case(); /* this case on the C engine too (oracle.h) */

  /* the graph */
  uj_io_t gyn[GC_MAX], ogn[GC_MAX], outs[2 * GC_MAX], ingr[3 * GC_MAX];
  int ok = c->g != NULL;
  for (int i = 0; i < c->nin; i++) ok = ok && c->in[i] >= 0;
  for (int k = 0; k < c->ny; k++) ok = ok && c->y[k] >= 0;
  for (int k = 0; k < c->ngiven; k++) ok = ok && c->given[k] >= 0;
  for (int k = 0; k < c->ny && ok; k++) ok = (gyn[k] = uj_grad(c->g, c->y[k])) >= 0;
  for (int j = 0; j < c->nout && ok; j++) ok = (ogn[j] = uj_grad(c->g, c->in[c->out[j]])) >= 0;
  if (!ok) {
    snprintf(msg, sizeof msg, "%s: building the graph failed: %s", c->what, uj_last_error());
    harness_fail(file, line, msg);
    gc_free_case(c);
    return 1;
  }
  int ning = 0;
  for (int k = 0; k < c->ny; k++) outs[k] = c->y[k], ingr[ning++] = gyn[k];
  for (int i = 0; i < c->nin; i++) ingr[ning++] = c->in[i];
  for (int k = 0; k < c->ngiven; k++) outs[c->ny + k] = c->given[k], ingr[ning++] = c->given[k];
  uj_program_desc_t d;
  memset(&d, 0, sizeof d);
  d.input_count = c->nin;
  d.inputs = c->in;
  d.param_count = c->np;
  d.params = c->pnames;
  d.output_count = nfo;
  d.outputs = outs;
  d.ingrad_count = ning;
  d.ingrads = ingr;
  d.outgrad_count = c->nout;
  d.outgrads = ogn;
  uj_status_t s = uj_program_new(c->g, &d, &p);
  if (s != UJ_OK) {
    snprintf(msg, sizeof msg, "%s: uj_program_new: %s: %s", c->what, uj_status_str(s), uj_last_error());
    harness_fail(file, line, msg);
    gc_free_case(c);
    return 1;
  }
  const int64_t* pv = c->np ? c->pvals : NULL;
  const uj_tensor_t* fin[GC_MAX];
  for (int i = 0; i < c->nin; i++) fin[i] = &c->t[i];
  uj_ctx_t* fctx = gc_ctx(0);
  if (!fctx) {
    harness_fail(file, line, "no context");
    bad++;
    goto out;
  }

  /* forward at the base point */
  uj_tensor_t* fout[2 * GC_MAX];
  for (int k = 0; k < nfo; k++) {
    int nd = 0;
    int64_t dims[UJ_MAX_DIMS];
    s = uj_program_shape(p, UJ_FORWARD, fin, pv, k, &nd, dims);
    if (s != UJ_OK) {
      snprintf(msg, sizeof msg, "%s: uj_program_shape(forward, %d): %s: %s", c->what, k, uj_status_str(s),
               uj_last_error());
      harness_fail(file, line, msg);
      bad++;
      goto out;
    }
    fo[k] = or_tensor(UJ_F64, nd, dims);
    fout[k] = &fo[k];
    nfo_made++;
  }
  s = uj_program_run(fctx, p, UJ_FORWARD, fin, c->nin, pv, c->np, fout, nfo);
  if (s != UJ_OK) {
    snprintf(msg, sizeof msg, "%s: forward run: %s: %s", c->what, uj_status_str(s), uj_last_error());
    harness_fail(file, line, msg);
    bad++;
    goto out;
  }

  /* the forward pass on every other configuration against the reference's */
  for (int cf = 1; cf < GC_NCONFIGS; cf++) {
    if (!gc_config_distinct(cf) || (gc_configs[cf].engine == UJ_ENGINE_C && !c_case)) continue;
    uj_ctx_t* ctx = gc_ctx(cf);
    if (!ctx) {
      harness_fail(file, line, "no context");
      bad++;
      goto out;
    }
    uj_tensor_t fc[2 * GC_MAX];
    uj_tensor_t* fcout[2 * GC_MAX];
    for (int k = 0; k < nfo; k++) {
      fc[k] = or_tensor(fo[k].dtype, fo[k].ndim, fo[k].dims);
      or_fill_sentinel(&fc[k]);
      fcout[k] = &fc[k];
    }
    s = or_run_staged(ctx, p, UJ_FORWARD, fin, c->nin, pv, c->np, fcout, nfo);
    if (s != UJ_OK) {
      snprintf(msg, sizeof msg, "%s: forward run (%s, passes %d): %s: %s", c->what,
               uj_engine_name(gc_configs[cf].engine), gc_configs[cf].passes, uj_status_str(s), uj_last_error());
      harness_fail(file, line, msg);
      bad++;
    }
    for (int k = 0; k < nfo && s == UJ_OK; k++) {
      double* ref = or_to_double(&fo[k]);
      int64_t e = or_first_mismatch(ref, &fc[k], GC_TOL_FORWARD);
      if (e >= 0) {
        snprintf(msg, sizeof msg, "%s: forward output %d element %lld (%s, passes %d): %.17g, interpreter %.17g (tol %g)",
                 c->what, k, (long long)e, uj_engine_name(gc_configs[cf].engine), gc_configs[cf].passes,
                 or_get(&fc[k], e), ref[e], GC_TOL_FORWARD);
        harness_fail(file, line, msg);
        bad++;
      }
      free(ref);
    }
    for (int k = 0; k < nfo; k++) or_tensor_free(&fc[k]);
    if (bad) goto out;
  }

  /* the upstream gradients and the analytic gradients */
  for (int k = 0; k < c->ny; k++) {
    gy[k] = or_tensor(UJ_F64, fo[k].ndim, fo[k].dims);
    ngy_made++;
    gc_fill(st, &gy[k], -1.0, 1.0);
  }
  const uj_tensor_t* bin[3 * GC_MAX];
  int nb = 0;
  for (int k = 0; k < c->ny; k++) bin[nb++] = &gy[k];
  for (int i = 0; i < c->nin; i++) bin[nb++] = &c->t[i];
  for (int k = 0; k < c->ngiven; k++) bin[nb++] = &fo[c->ny + k];
  uj_tensor_t* bout[GC_MAX];
  for (int j = 0; j < c->nout; j++) {
    const uj_tensor_t* x = &c->t[c->out[j]];
    go[j] = or_tensor(UJ_F64, x->ndim, x->dims);
    bout[j] = &go[j];
    ngo_made++;
  }
  for (int cf = 0; cf < GC_NCONFIGS; cf++) {
    if (!gc_config_distinct(cf) || (gc_configs[cf].engine == UJ_ENGINE_C && !c_case)) continue;
    uj_ctx_t* ctx = gc_ctx(cf);
    if (!ctx) {
      harness_fail(file, line, "no context");
      bad++;
      goto out;
    }
    for (int j = 0; j < c->nout; j++) or_fill_sentinel(&go[j]);
    s = or_run_staged(ctx, p, UJ_BACKWARD, bin, nb, pv, c->np, bout, c->nout);
    if (s != UJ_OK) {
      snprintf(msg, sizeof msg, "%s: backward run (%s, passes %d): %s: %s", c->what,
               uj_engine_name(gc_configs[cf].engine), gc_configs[cf].passes, uj_status_str(s), uj_last_error());
      harness_fail(file, line, msg);
      bad++;
      goto out;
    }
    for (int j = 0; j < c->nout; j++) res[cf][j] = gc_copy(&go[j]);
  }
  bad += or_cuda_compile_(file, line, p, UJ_FORWARD, fin, c->nin, pv, c->np);
  bad += or_cuda_compile_(file, line, p, UJ_BACKWARD, bin, nb, pv, c->np);
  if (bad) goto out;

  /* numeric gradients, compared element by element */
  uj_tensor_t pert[GC_MAX];
  uj_tensor_t* pout[2 * GC_MAX];
  for (int k = 0; k < nfo; k++) {
    pert[k] = fo[k]; /* same shape; its own buffer below */
    int64_t n = or_tnumel(&fo[k]);
    pert[k].data = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    pout[k] = &pert[k];
  }
  for (int k = 0; k < c->ny; k++) {
    int64_t n = or_tnumel(&fo[k]);
    yp[k] = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    ym[k] = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  }
  for (int j = 0; j < c->nout && !bad; j++) {
    int i = c->out[j];
    uj_tensor_t* x = &c->t[i];
    int64_t n = or_tnumel(x);
    int reported[GC_NCONFIGS] = {0};
    if (c->zero[i] == 2) {
      for (int cf = 0; cf < GC_NCONFIGS; cf++)
        for (int64_t e = 0; e < n && res[cf][j] && !reported[cf]; e++) {
          if (res[cf][j][e] == 0.0) continue;
          snprintf(msg, sizeof msg, "%s: gradient of input %d element %lld (%s, passes %d): %.17g, want exactly 0",
                   c->what, i, (long long)e, uj_engine_name(gc_configs[cf].engine), gc_configs[cf].passes,
                   res[cf][j][e]);
          harness_fail(file, line, msg);
          reported[cf] = 1;
          bad++;
        }
      continue;
    }
    for (int64_t e = 0; e < n; e++) {
      double v = or_get(x, e);
      double step = c->fixed_h ? c->h : c->h * (fabs(v) > 1.0 ? fabs(v) : 1.0);
      double hp = v + step, hm = v - step;
      or_set(x, e, hp);
      uj_status_t s1 = uj_program_run(fctx, p, UJ_FORWARD, fin, c->nin, pv, c->np, pout, nfo);
      for (int k = 0; k < c->ny; k++) memcpy(yp[k], pert[k].data, sizeof(double) * (size_t)or_tnumel(&fo[k]));
      or_set(x, e, hm);
      uj_status_t s2 = uj_program_run(fctx, p, UJ_FORWARD, fin, c->nin, pv, c->np, pout, nfo);
      for (int k = 0; k < c->ny; k++) memcpy(ym[k], pert[k].data, sizeof(double) * (size_t)or_tnumel(&fo[k]));
      double denom = or_get(x, e);
      or_set(x, e, hp);
      denom = or_get(x, e) - denom; /* the stored step, f32 rounding included */
      or_set(x, e, v);
      if (s1 != UJ_OK || s2 != UJ_OK) {
        snprintf(msg, sizeof msg, "%s: forward run for differences: %s", c->what, uj_last_error());
        harness_fail(file, line, msg);
        bad++;
        break;
      }
      double acc = 0;
      for (int k = 0; k < c->ny; k++) {
        int64_t m = or_tnumel(&fo[k]);
        for (int64_t q = 0; q < m; q++) acc += or_get(&gy[k], q) * (yp[k][q] - ym[k][q]);
      }
      double num = acc / denom;
      for (int cf = 0; cf < GC_NCONFIGS; cf++) {
        if (!res[cf][j] || reported[cf]) continue;
        double a = res[cf][j][e];
        int fail = c->zero[i] ? !(a == 0.0) : !(fabs(a - num) <= c->tol * (fabs(num) > 1.0 ? fabs(num) : 1.0));
        if (c->zero[i] && !(fabs(num) <= c->tol)) fail = 1;
        if (!fail) continue;
        char shp[128];
        or_shape_str(shp, sizeof shp, x);
        snprintf(msg, sizeof msg,
                 "%s: gradient of input %d %s element %lld (%s, passes %d): analytic %.17g, numeric %.17g%s (tol %g)",
                 c->what, i, shp, (long long)e, uj_engine_name(gc_configs[cf].engine), gc_configs[cf].passes, a,
                 num, c->zero[i] ? ", want exactly 0" : "", c->tol);
        harness_fail(file, line, msg);
        reported[cf] = 1;
        bad++;
      }
    }
  }
  for (int k = 0; k < nfo; k++) free(pert[k].data);

out:
  for (int k = 0; k < c->ny; k++) free(yp[k]), free(ym[k]);
  for (int cf = 0; cf < GC_NCONFIGS; cf++)
    for (int j = 0; j < GC_MAX; j++) free(res[cf][j]);
  for (int k = 0; k < nfo_made; k++) or_tensor_free(&fo[k]);
  for (int k = 0; k < ngy_made; k++) or_tensor_free(&gy[k]);
  for (int k = 0; k < ngo_made; k++) or_tensor_free(&go[k]);
  uj_program_free(p);
  gc_free_case(c);
  return bad;
}
#define GC_CHECK(c, st) gc_check_(__FILE__, __LINE__, (c), (st))

#endif
