/* tests/conv_check.h: what the convolution tests (test_conv.c,
 * test_conv_errors.c) share: a problem description with random sizes,
 * its tensors, naive loops in double for the forward pass and both
 * gradients, and the error bound the backends are held to.
 *
 * The bound is per element and scaled by the size of the sum:
 *
 *   |got - want| <= tol * (KH*KW*C * max|x| * max|w| + max|bias|)
 *
 * KH*KW*C * max|x| * max|w| bounds the sum of the magnitudes of the terms,
 * which is what floating-point error grows with; a bound relative to |want|
 * alone would fail wherever terms cancel. tol is CONV_TOL_DIRECT (1e-6) for
 * sums taken directly in f32 (ref, cpu_direct) and CONV_TOL_WINOGRAD (1e-5)
 * for Winograd (cpu_winograd's F(4x4, 3x3), whose transforms scale values
 * by up to 8 and back, and cuda_winograd's F(2x2, 3x3)) (include/uopjit.h documents both). For the gradients the sums run
 * over N*OH*OW*K terms (dw) or KH*KW*K (dx), scaled the same way. */
#ifndef UJ_TESTS_CONV_CHECK_H
#define UJ_TESTS_CONV_CHECK_H

#include "oracle.h"

#define CONV_TOL_DIRECT 1e-6
#define CONV_TOL_WINOGRAD 1e-5
#define CONV_TOL_F64 1e-12

typedef struct {
  int64_t n, h, w, c, k, kh, kw;
  int sh, sw, ph, pw;
  int bias;
} cc_shape_t;

static inline int64_t cc_out_h(const cc_shape_t* s) { return (s->h + 2 * s->ph - s->kh) / s->sh + 1; }
static inline int64_t cc_out_w(const cc_shape_t* s) { return (s->w + 2 * s->pw - s->kw) / s->sw + 1; }

static inline uj_conv2d_desc_t cc_desc(const cc_shape_t* s, uint64_t key) {
  uj_conv2d_desc_t d = {s->sh, s->sw, s->ph, s->pw, key};
  return d;
}

static inline void cc_print(const cc_shape_t* s) {
  fprintf(stderr, "  shape x [%lld,%lld,%lld,%lld] w [%lld,%lld,%lld,%lld] stride %d,%d pad %d,%d bias %d\n",
          (long long)s->n, (long long)s->h, (long long)s->w, (long long)s->c, (long long)s->k, (long long)s->kh,
          (long long)s->kw, (long long)s->c, s->sh, s->sw, s->ph, s->pw, s->bias);
}

/* Random sizes: odd and tiny ones, channel counts that are not multiples
 * of any vector width, 1x1 spatial, filters up to 4 (or exactly 3x3 with
 * stride 1 when winograd is set), stride 1..max_stride, padding 0..2; the
 * padded input always covers the filter. */
static inline cc_shape_t cc_random(uint64_t* st, int max_channels, int max_hw, int max_stride, int winograd) {
  cc_shape_t s;
  s.n = harness_int(st, 1, 3);
  s.c = harness_int(st, 1, max_channels);
  s.k = harness_int(st, 1, max_channels);
  s.kh = winograd ? 3 : harness_int(st, 1, 4);
  s.kw = winograd ? 3 : harness_int(st, 1, 4);
  s.sh = winograd ? 1 : (int)harness_int(st, 1, max_stride);
  s.sw = winograd ? 1 : (int)harness_int(st, 1, max_stride);
  s.ph = (int)harness_int(st, 0, 2);
  s.pw = (int)harness_int(st, 0, 2);
  int64_t hmin = s.kh - 2 * s.ph > 1 ? s.kh - 2 * s.ph : 1, wmin = s.kw - 2 * s.pw > 1 ? s.kw - 2 * s.pw : 1;
  s.h = harness_int(st, hmin, hmin > max_hw ? hmin : max_hw);
  s.w = harness_int(st, wmin, wmin > max_hw ? wmin : max_hw);
  s.bias = (int)harness_int(st, 0, 1);
  return s;
}

/* The tensors of one problem: x, w, bias (always made, used when s.bias),
 * y; the same values in f64 for the references. */
typedef struct {
  cc_shape_t s;
  uj_dtype_t dt;
  uj_tensor_t x, w, b, y;
} cc_tensors_t;

static inline void cc_tensors_make(cc_tensors_t* t, const cc_shape_t* s, uj_dtype_t dt, uint64_t* st) {
  t->s = *s;
  t->dt = dt;
  int64_t xd[4] = {s->n, s->h, s->w, s->c}, wd[4] = {s->k, s->kh, s->kw, s->c}, bd[1] = {s->k};
  int64_t yd[4] = {s->n, cc_out_h(s), cc_out_w(s), s->k};
  t->x = or_tensor(dt, 4, xd);
  t->w = or_tensor(dt, 4, wd);
  t->b = or_tensor(dt, 1, bd);
  t->y = or_tensor(dt, 4, yd);
  or_fill_real(st, &t->x, -1, 1);
  or_fill_real(st, &t->w, -1, 1);
  or_fill_real(st, &t->b, -1, 1);
}

static inline void cc_tensors_free(cc_tensors_t* t) {
  or_tensor_free(&t->x);
  or_tensor_free(&t->w);
  or_tensor_free(&t->b);
  or_tensor_free(&t->y);
}

static inline double cc_max_abs(const uj_tensor_t* t) {
  double m = 0;
  for (int64_t i = 0; i < or_tnumel(t); i++)
    if (fabs(or_get(t, i)) > m) m = fabs(or_get(t, i));
  return m;
}

/* ---- naive loops in double ---- */

/* y = conv(x, w) (+ bias): every output element as one sum over (r, s, c). */
static inline double* cc_naive_forward(const uj_tensor_t* x, const uj_tensor_t* w, const uj_tensor_t* bias,
                                       const cc_shape_t* s) {
  int64_t OH = cc_out_h(s), OW = cc_out_w(s);
  double* y = or_alloc_ref(s->n * OH * OW * s->k);
  for (int64_t n = 0; n < s->n; n++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++)
        for (int64_t k = 0; k < s->k; k++) {
          double acc = bias ? or_get(bias, k) : 0.0;
          for (int64_t r = 0; r < s->kh; r++)
            for (int64_t q = 0; q < s->kw; q++) {
              int64_t ih = oh * s->sh + r - s->ph, iw = ow * s->sw + q - s->pw;
              if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w) continue;
              for (int64_t c = 0; c < s->c; c++)
                acc += or_get(x, ((n * s->h + ih) * s->w + iw) * s->c + c) *
                       or_get(w, ((k * s->kh + r) * s->kw + q) * s->c + c);
            }
          y[((n * OH + oh) * OW + ow) * s->k + k] = acc;
        }
  return y;
}

/* dx (data) or dw and dbias (filter) from dy: every (output, tap, channel)
 * term scattered where it belongs. */
static inline void cc_naive_backward(const uj_tensor_t* x, const uj_tensor_t* w, const uj_tensor_t* dy,
                                     const cc_shape_t* s, double* dx, double* dw, double* dbias) {
  int64_t OH = cc_out_h(s), OW = cc_out_w(s);
  for (int64_t n = 0; n < s->n; n++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++)
        for (int64_t k = 0; k < s->k; k++) {
          double g = or_get(dy, ((n * OH + oh) * OW + ow) * s->k + k);
          if (dbias) dbias[k] += g;
          for (int64_t r = 0; r < s->kh; r++)
            for (int64_t q = 0; q < s->kw; q++) {
              int64_t ih = oh * s->sh + r - s->ph, iw = ow * s->sw + q - s->pw;
              if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w) continue;
              for (int64_t c = 0; c < s->c; c++) {
                int64_t xi = ((n * s->h + ih) * s->w + iw) * s->c + c, wi = ((k * s->kh + r) * s->kw + q) * s->c + c;
                if (dx) dx[xi] += g * or_get(w, wi);
                if (dw) dw[wi] += g * or_get(x, xi);
              }
            }
        }
}

/* The gradients of one problem: dy seeded, dx, dw and dbias filled with
 * sentinels (so that what a backend does not write shows), and their
 * expected values from cc_naive_backward. */
typedef struct {
  uj_tensor_t dy, dx, dw, db;
  double *want_dx, *want_dw, *want_db; /* NULL when out of memory */
} cc_grads_t;

static inline void cc_grads_make(cc_grads_t* g, const cc_tensors_t* t, uint64_t* st) {
  g->dy = or_tensor(t->dt, 4, t->y.dims);
  g->dx = or_tensor(t->dt, 4, t->x.dims);
  g->dw = or_tensor(t->dt, 4, t->w.dims);
  g->db = or_tensor(t->dt, 1, t->b.dims);
  or_fill_real(st, &g->dy, -1, 1);
  or_fill_sentinel(&g->dx);
  or_fill_sentinel(&g->dw);
  or_fill_sentinel(&g->db);
  g->want_dx = or_alloc_ref(or_tnumel(&g->dx));
  g->want_dw = or_alloc_ref(or_tnumel(&g->dw));
  g->want_db = or_alloc_ref(or_tnumel(&g->db));
  if (g->want_dx && g->want_dw && g->want_db)
    cc_naive_backward(&t->x, &t->w, &g->dy, &t->s, g->want_dx, g->want_dw, g->want_db);
}

static inline void cc_grads_free(cc_grads_t* g) {
  free(g->want_dx);
  free(g->want_dw);
  free(g->want_db);
  or_tensor_free(&g->dy);
  or_tensor_free(&g->dx);
  or_tensor_free(&g->dw);
  or_tensor_free(&g->db);
}

/* The bounds the gradients are held to with tolerance tol: dx sums KH*KW*K
 * terms of dy*w, dw and dbias one per output pixel. */
static inline double cc_dx_bound(const cc_tensors_t* t, const cc_grads_t* g, double tol) {
  return tol * (double)(t->s.kh * t->s.kw * t->s.k) * cc_max_abs(&g->dy) * cc_max_abs(&t->w);
}
static inline double cc_dw_bound(const cc_tensors_t* t, const cc_grads_t* g, double tol) {
  return tol * (double)(t->s.n * cc_out_h(&t->s) * cc_out_w(&t->s)) * cc_max_abs(&g->dy) * cc_max_abs(&t->x);
}
static inline double cc_db_bound(const cc_tensors_t* t, const cc_grads_t* g, double tol) {
  return tol * (double)(t->s.n * cc_out_h(&t->s) * cc_out_w(&t->s)) * cc_max_abs(&g->dy);
}

/* ---- comparing ---- */

/* The first element of got farther than `bound` from want, or -1; *worst
 * gets the largest |got - want| (NaN counts as infinite). */
static inline int64_t cc_first_outside(const double* want, const uj_tensor_t* got, double bound, double* worst) {
  int64_t first = -1;
  *worst = 0;
  for (int64_t i = 0; i < or_tnumel(got); i++) {
    double e = fabs(or_get(got, i) - want[i]);
    if (isnan(e)) e = INFINITY;
    if (e > *worst) *worst = e;
    if (!(e <= bound) && first < 0) first = i;
  }
  return first;
}

/* Checks got against want within bound; on failure reports what, the
 * element, the values and the shape. Returns 1 when it passed. */
static inline int cc_check_(const char* file, int line, const char* what, const double* want, const uj_tensor_t* got,
                            double bound, const cc_shape_t* s) {
  double worst;
  int64_t i = cc_first_outside(want, got, bound, &worst);
  if (i < 0) return 1;
  char msg[384];
  snprintf(msg, sizeof msg, "%s: element %lld: got %.9g, want %.17g (bound %.3g, worst error %.3g)", what, (long long)i,
           or_get(got, i), want[i], bound, worst);
  harness_fail(file, line, msg);
  cc_print(s);
  return 0;
}
#define CC_CHECK(what, want, got, bound, s) cc_check_(__FILE__, __LINE__, (what), (want), (got), (bound), (s))

/* The forward bound of a problem's tensors with tolerance tol. */
static inline double cc_forward_bound(const cc_tensors_t* t, double tol) {
  double scale = (double)(t->s.kh * t->s.kw * t->s.c) * cc_max_abs(&t->x) * cc_max_abs(&t->w);
  if (t->s.bias) scale += cc_max_abs(&t->b);
  return tol * scale;
}

/* The tolerance a backend is held to in dtype dt. */
static inline double cc_tolerance(const char* backend, uj_dtype_t dt) {
  if (dt == UJ_F64) return CONV_TOL_F64;
  return strcmp(backend, "cpu_winograd") == 0 || strcmp(backend, "cuda_winograd") == 0 ? CONV_TOL_WINOGRAD
                                                                                        : CONV_TOL_DIRECT;
}

/* uj_conv2d on host tensors; when ctx runs the CUDA engine, on GPU copies of
 * them (y copied over too, so that what is left unwritten reads back
 * unchanged, and back after a successful call). */
static inline uj_status_t cc_conv2d_staged(uj_ctx_t* ctx, const uj_conv2d_desc_t* d, const uj_tensor_t* x,
                                           const uj_tensor_t* w, const uj_tensor_t* b, uj_tensor_t* y,
                                           const char* backend) {
  if (!ctx || uj_ctx_engine(ctx) != UJ_ENGINE_CUDA) return uj_conv2d(ctx, d, x, w, b, y, backend);
  const uj_tensor_t* host[4] = {x, w, b, y};
  uj_tensor_t dev[4];
  memset(dev, 0, sizeof dev);
  uj_status_t s = UJ_OK;
  for (int i = 0; i < 4 && s == UJ_OK; i++) {
    if (!host[i]) continue;
    s = uj_tensor_alloc(ctx, UJ_CUDA, host[i]->dtype, host[i]->ndim, host[i]->dims, &dev[i]);
    if (s == UJ_OK) s = uj_tensor_copy(ctx, &dev[i], host[i]);
  }
  if (s == UJ_OK) s = uj_conv2d(ctx, d, &dev[0], &dev[1], b ? &dev[2] : NULL, &dev[3], backend);
  if (s == UJ_OK) s = uj_tensor_copy(ctx, y, &dev[3]);
  for (int i = 0; i < 4; i++)
    if (dev[i].data) uj_tensor_free(ctx, &dev[i]);
  return s;
}

/* ref in f64 on f64 copies of t's inputs: the reference every backend is held to. */
static inline double* cc_ref_f64(uj_ctx_t* ctx, const cc_tensors_t* t) {
  uj_tensor_t x = or_tensor(UJ_F64, 4, t->x.dims), w = or_tensor(UJ_F64, 4, t->w.dims);
  uj_tensor_t b = or_tensor(UJ_F64, 1, t->b.dims), y = or_tensor(UJ_F64, 4, t->y.dims);
  for (int64_t i = 0; i < or_tnumel(&x); i++) or_set(&x, i, or_get(&t->x, i));
  for (int64_t i = 0; i < or_tnumel(&w); i++) or_set(&w, i, or_get(&t->w, i));
  for (int64_t i = 0; i < or_tnumel(&b); i++) or_set(&b, i, or_get(&t->b, i));
  uj_conv2d_desc_t d = cc_desc(&t->s, 0);
  uj_status_t s = uj_conv2d(ctx, &d, &x, &w, t->s.bias ? &b : NULL, &y, "ref");
  CHECK(s == UJ_OK);
  if (s != UJ_OK) fprintf(stderr, "  ref f64: %s\n", uj_last_error());
  double* out = s == UJ_OK ? or_to_double(&y) : NULL;
  or_tensor_free(&x);
  or_tensor_free(&w);
  or_tensor_free(&b);
  or_tensor_free(&y);
  return out;
}

#endif
