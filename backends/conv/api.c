/* backends/conv/api.c: the public convolution functions (uj_conv2d and its
 * backward counterparts): every argument is checked here, once, before a
 * backend is chosen or anything is written, and the call is described as a
 * bk_conv_problem_t for the backends (conv.h).
 *
 * Checks, in the order a caller would fix them: the handles and desc, each
 * tensor on its own (rank 4, or 1 for a bias; dtype f32/f64, bf16 and f16
 * refused as unsupported; a known
 * device; sizes >= 1 whose product fits; data present), then the tensors
 * against each other (one dtype, one device, the channel and filter counts
 * agreeing, the output sizes following from the inputs), then that no
 * output overlaps an input or another output. Messages name the function,
 * the tensor and the axis with its meaning ("w axis 3 (C)"). */
#include <stdio.h>
#include <string.h>

#include "conv.h"

/* The meaning of each axis of a 4-D tensor of one of the three shapes. */
static const char* const x_axes[4] = {"N", "H", "W", "C"};
static const char* const w_axes[4] = {"K", "KH", "KW", "C"};
static const char* const y_axes[4] = {"N", "OH", "OW", "K"};

static uj_status_t check_desc(const char* fn, const uj_conv2d_desc_t* d) {
  if (!d) return rt_error(UJ_ERR_INVALID, "%s: desc is NULL", fn);
  if (d->stride_h < 1 || d->stride_w < 1)
    return rt_error(UJ_ERR_INVALID, "%s: desc stride_h and stride_w must be >= 1, got %d and %d", fn, d->stride_h,
                    d->stride_w);
  if (d->pad_h < 0 || d->pad_w < 0)
    return rt_error(UJ_ERR_INVALID, "%s: desc pad_h and pad_w must be >= 0, got %d and %d", fn, d->pad_h, d->pad_w);
  return UJ_OK;
}

/* One tensor on its own: rank, dtype, device, sizes, data. */
static uj_status_t check_tensor(const char* fn, const char* name, const uj_tensor_t* t, int ndim,
                                const char* const* axes) {
  if (!t) return rt_error(UJ_ERR_INVALID, "%s: %s is NULL", fn, name);
  if (t->ndim != ndim) {
    if (ndim == 4)
      return rt_error(UJ_ERR_SHAPE, "%s: %s must have rank 4 [%s,%s,%s,%s], got rank %d", fn, name, axes[0], axes[1],
                      axes[2], axes[3], t->ndim);
    return rt_error(UJ_ERR_SHAPE, "%s: %s must have rank 1 [K], got rank %d", fn, name, t->ndim);
  }
  if (t->dtype == UJ_BF16 || t->dtype == UJ_F16)
    return rt_error(UJ_ERR_UNSUPPORTED, "%s: %s has dtype %s; no convolution backend takes bf16 or f16 (convert to f32)",
                    fn, name, uj_dtype_name(t->dtype));
  if (t->dtype != UJ_F32 && t->dtype != UJ_F64)
    return rt_error(UJ_ERR_INVALID, "%s: %s has dtype %s (%d); convolutions take f32 or f64", fn, name,
                    uj_dtype_name(t->dtype), (int)t->dtype);
  if (t->device != UJ_CPU && t->device != UJ_CUDA)
    return rt_error(UJ_ERR_INVALID, "%s: %s has an unknown device %d", fn, name, (int)t->device);
  int64_t numel = 1;
  for (int a = 0; a < ndim; a++) {
    if (t->dims[a] < 1)
      return rt_error(UJ_ERR_SHAPE, "%s: %s axis %d (%s) has size %lld; every size must be >= 1", fn, name, a,
                      ndim == 4 ? axes[a] : "K", (long long)t->dims[a]);
    int64_t bytes;
    if (!rt_mul_i64(numel, t->dims[a], &numel) || !rt_mul_i64(numel, 8, &bytes))
      return rt_error(UJ_ERR_SHAPE, "%s: %s has too many elements (the product of its sizes overflows)", fn, name);
  }
  if (!t->data) return rt_error(UJ_ERR_INVALID, "%s: %s has NULL data but %lld elements", fn, name, (long long)numel);
  return UJ_OK;
}

/* t agrees with ref (x, or the first tensor of the call) in dtype and device. */
static uj_status_t check_same_kind(const char* fn, const char* name, const uj_tensor_t* t, const char* ref_name,
                                   const uj_tensor_t* ref) {
  if (t->dtype != ref->dtype)
    return rt_error(UJ_ERR_INVALID, "%s: %s is %s but %s is %s; the tensors of a convolution share one dtype", fn, name,
                    uj_dtype_name(t->dtype), ref_name, uj_dtype_name(ref->dtype));
  if (t->device != ref->device)
    return rt_error(UJ_ERR_INVALID, "%s: %s is on %s but %s is on %s", fn, name, t->device == UJ_CPU ? "cpu" : "cuda",
                    ref_name, ref->device == UJ_CPU ? "cpu" : "cuda");
  return UJ_OK;
}

/* t's axis a must have size want, which came from `source`. */
static uj_status_t check_axis(const char* fn, const char* name, const uj_tensor_t* t, int a,
                              const char* const* axes, int64_t want, const char* source) {
  if (t->dims[a] == want) return UJ_OK;
  return rt_error(UJ_ERR_SHAPE, "%s: %s axis %d (%s) has size %lld, expected %lld (%s)", fn, name, a,
                  t->ndim == 4 ? axes[a] : "K", (long long)t->dims[a], (long long)want, source);
}

/* The output size along one spatial axis; UJ_ERR_SHAPE when the padded
 * input is smaller than the filter. */
static uj_status_t output_size(const char* fn, const char* in_name, int in_axis, int64_t in, const char* pad_name,
                               int pad, const char* f_name, int f_axis, int64_t f, int stride, int64_t* out) {
  int64_t padded = in + 2 * (int64_t)pad;
  if (padded < f)
    return rt_error(UJ_ERR_SHAPE,
                    "%s: the padded input is smaller than the filter: %s axis %d is %lld, + 2*%s %d = %lld < %s axis "
                    "%d = %lld",
                    fn, in_name, in_axis, (long long)in, pad_name, pad, (long long)padded, f_name, f_axis, (long long)f);
  *out = (padded - f) / stride + 1;
  return UJ_OK;
}

static size_t tensor_bytes(const uj_tensor_t* t) {
  size_t n = (size_t)uj_dtype_size(t->dtype);
  for (int a = 0; a < t->ndim; a++) n *= (size_t)t->dims[a];
  return n;
}

static int overlap(const uj_tensor_t* a, const uj_tensor_t* b) {
  const char *pa = a->data, *pb = b->data;
  return pa < pb + tensor_bytes(b) && pb < pa + tensor_bytes(a);
}

/* outs[i] must not overlap ins[] nor one another. */
static uj_status_t check_no_overlap(const char* fn, int nout, const uj_tensor_t* const* outs, const char* const* out_names,
                                    int nin, const uj_tensor_t* const* ins, const char* const* in_names) {
  for (int o = 0; o < nout; o++) {
    if (!outs[o]) continue;
    for (int i = 0; i < nin; i++)
      if (ins[i] && overlap(outs[o], ins[i]))
        return rt_error(UJ_ERR_INVALID, "%s: %s shares memory with %s; an output must not overlap an input", fn,
                        out_names[o], in_names[i]);
    for (int j = 0; j < o; j++)
      if (outs[j] && overlap(outs[o], outs[j]))
        return rt_error(UJ_ERR_INVALID, "%s: outputs %s and %s share memory", fn, out_names[j], out_names[o]);
  }
  return UJ_OK;
}

static void problem_init(bk_conv_problem_t* p, bk_conv_op_t op, const uj_conv2d_desc_t* d, const uj_tensor_t* kind) {
  memset(p, 0, sizeof *p);
  p->op = op;
  p->device = kind->device;
  p->dtype = kind->dtype;
  p->layout = BK_CONV_NHWC;
  p->stride_h = d->stride_h;
  p->stride_w = d->stride_w;
  p->pad_h = d->pad_h;
  p->pad_w = d->pad_w;
  p->filter_key = d->filter_key;
}

/* x and w (or the tensors in their places, named xn and wn) on their own
 * and against each other; fills the problem's input and filter sizes and
 * the output sizes. */
static uj_status_t check_x_w(const char* fn, const uj_conv2d_desc_t* d, const char* xn, const uj_tensor_t* x,
                             const char* wn, const uj_tensor_t* w, bk_conv_problem_t* p) {
  char source[64];
  snprintf(source, sizeof source, "%s axis 3 (C), the input channels", xn);
  uj_status_t s = check_desc(fn, d);
  if (s == UJ_OK) s = check_tensor(fn, xn, x, 4, x_axes);
  if (s == UJ_OK) s = check_tensor(fn, wn, w, 4, w_axes);
  if (s == UJ_OK) s = check_same_kind(fn, wn, w, xn, x);
  if (s == UJ_OK) s = check_axis(fn, wn, w, 3, w_axes, x->dims[3], source);
  if (s != UJ_OK) return s;
  problem_init(p, BK_CONV_FORWARD, d, x);
  p->n = x->dims[0], p->h = x->dims[1], p->w = x->dims[2], p->c = x->dims[3];
  p->k = w->dims[0], p->kh = w->dims[1], p->kw = w->dims[2];
  s = output_size(fn, xn, 1, p->h, "pad_h", d->pad_h, wn, 1, p->kh, d->stride_h, &p->oh);
  if (s == UJ_OK) s = output_size(fn, xn, 2, p->w, "pad_w", d->pad_w, wn, 2, p->kw, d->stride_w, &p->ow);
  return s;
}

/* A tensor shaped like the output [N,OH,OW,K] of the problem. */
static uj_status_t check_y_shape(const char* fn, const char* name, const uj_tensor_t* y, const bk_conv_problem_t* p,
                                 const char* n_source, const char* k_source) {
  char oh_source[128], ow_source[128];
  snprintf(oh_source, sizeof oh_source, "(H + 2*pad_h - KH) / stride_h + 1 = (%lld + %lld - %lld) / %d + 1",
           (long long)p->h, 2 * (long long)p->pad_h, (long long)p->kh, p->stride_h);
  snprintf(ow_source, sizeof ow_source, "(W + 2*pad_w - KW) / stride_w + 1 = (%lld + %lld - %lld) / %d + 1",
           (long long)p->w, 2 * (long long)p->pad_w, (long long)p->kw, p->stride_w);
  uj_status_t s = check_axis(fn, name, y, 0, y_axes, p->n, n_source);
  if (s == UJ_OK) s = check_axis(fn, name, y, 1, y_axes, p->oh, oh_source);
  if (s == UJ_OK) s = check_axis(fn, name, y, 2, y_axes, p->ow, ow_source);
  if (s == UJ_OK) s = check_axis(fn, name, y, 3, y_axes, p->k, k_source);
  return s;
}

static uj_status_t check_bias(const char* fn, const char* name, const uj_tensor_t* b, const uj_tensor_t* kind,
                              const char* kind_name, int64_t k) {
  if (!b) return UJ_OK;
  uj_status_t s = check_tensor(fn, name, b, 1, NULL);
  if (s == UJ_OK) s = check_same_kind(fn, name, b, kind_name, kind);
  if (s == UJ_OK) s = check_axis(fn, name, b, 0, NULL, k, "the filters K");
  return s;
}

/* Chooses the backend and runs it; a failure's message gets the function's name. */
static uj_status_t run(const char* fn, uj_ctx_t* ctx, bk_conv_call_t* call, const bk_conv_problem_t* p,
                       const char* backend) {
  call->ctx = ctx;
  call->p = p;
  uj_status_t s = (call->state = bk_conv_state(ctx)) ? bk_conv_dispatch(call, backend) : UJ_ERR_OOM;
  if (s != UJ_OK) rt_error_prefix("%s: ", fn);
  return s;
}

uj_status_t uj_conv2d(uj_ctx_t* ctx, const uj_conv2d_desc_t* desc, const uj_tensor_t* x, const uj_tensor_t* w,
                      const uj_tensor_t* bias, uj_tensor_t* y, const char* backend) {
  static const char fn[] = "uj_conv2d";
  if (!ctx) return rt_error(UJ_ERR_INVALID, "%s: ctx is NULL", fn);
  bk_conv_problem_t p;
  uj_status_t s = check_x_w(fn, desc, "x", x, "w", w, &p);
  if (s == UJ_OK) s = check_bias(fn, "bias", bias, x, "x", p.k);
  if (s == UJ_OK) s = check_tensor(fn, "y", y, 4, y_axes);
  if (s == UJ_OK) s = check_same_kind(fn, "y", y, "x", x);
  if (s == UJ_OK) s = check_y_shape(fn, "y", y, &p, "x axis 0 (N), the batch", "w axis 0 (K), the filters");
  if (s != UJ_OK) return s;
  const uj_tensor_t* outs[] = {y};
  const uj_tensor_t* ins[] = {x, w, bias};
  static const char* const out_names[] = {"y"};
  static const char* const in_names[] = {"x", "w", "bias"};
  if ((s = check_no_overlap(fn, 1, outs, out_names, 3, ins, in_names)) != UJ_OK) return s;
  p.has_bias = bias != NULL;
  bk_conv_call_t call = {.x = x, .w = w, .bias = bias, .y = y};
  return run(fn, ctx, &call, &p, backend);
}

uj_status_t uj_conv2d_backward_data(uj_ctx_t* ctx, const uj_conv2d_desc_t* desc, const uj_tensor_t* dy,
                                    const uj_tensor_t* w, uj_tensor_t* dx, const char* backend) {
  static const char fn[] = "uj_conv2d_backward_data";
  if (!ctx) return rt_error(UJ_ERR_INVALID, "%s: ctx is NULL", fn);
  /* dx plays the part of x: its sizes are the input's */
  uj_status_t s = check_tensor(fn, "dy", dy, 4, y_axes);
  if (s == UJ_OK) s = check_tensor(fn, "dx", dx, 4, x_axes);
  if (s == UJ_OK) s = check_same_kind(fn, "dx", dx, "dy", dy);
  bk_conv_problem_t p;
  if (s == UJ_OK) s = check_x_w(fn, desc, "dx", dx, "w", w, &p);
  if (s != UJ_OK) return s;
  if ((s = check_same_kind(fn, "w", w, "dy", dy)) != UJ_OK) return s;
  if ((s = check_y_shape(fn, "dy", dy, &p, "dx axis 0 (N), the batch", "w axis 0 (K), the filters")) != UJ_OK) return s;
  const uj_tensor_t* outs[] = {dx};
  const uj_tensor_t* ins[] = {dy, w};
  static const char* const out_names[] = {"dx"};
  static const char* const in_names[] = {"dy", "w"};
  if ((s = check_no_overlap(fn, 1, outs, out_names, 2, ins, in_names)) != UJ_OK) return s;
  p.op = BK_CONV_BACKWARD_DATA;
  bk_conv_call_t call = {.w = w, .dy = dy, .dx = dx};
  return run(fn, ctx, &call, &p, backend);
}

uj_status_t uj_conv2d_backward_filter(uj_ctx_t* ctx, const uj_conv2d_desc_t* desc, const uj_tensor_t* x,
                                      const uj_tensor_t* dy, uj_tensor_t* dw, uj_tensor_t* dbias,
                                      const char* backend) {
  static const char fn[] = "uj_conv2d_backward_filter";
  if (!ctx) return rt_error(UJ_ERR_INVALID, "%s: ctx is NULL", fn);
  /* dw plays the part of w: its sizes are the filter's */
  bk_conv_problem_t p;
  uj_status_t s = check_x_w(fn, desc, "x", x, "dw", dw, &p);
  if (s == UJ_OK) s = check_tensor(fn, "dy", dy, 4, y_axes);
  if (s == UJ_OK) s = check_same_kind(fn, "dy", dy, "x", x);
  if (s == UJ_OK) s = check_y_shape(fn, "dy", dy, &p, "x axis 0 (N), the batch", "dw axis 0 (K), the filters");
  if (s == UJ_OK) s = check_bias(fn, "dbias", dbias, x, "x", p.k);
  if (s != UJ_OK) return s;
  const uj_tensor_t* outs[] = {dw, dbias};
  const uj_tensor_t* ins[] = {x, dy};
  static const char* const out_names[] = {"dw", "dbias"};
  static const char* const in_names[] = {"x", "dy"};
  if ((s = check_no_overlap(fn, 2, outs, out_names, 2, ins, in_names)) != UJ_OK) return s;
  p.op = BK_CONV_BACKWARD_FILTER;
  p.has_bias = dbias != NULL;
  p.filter_key = 0; /* the filter is what this computes */
  bk_conv_call_t call = {.x = x, .dy = dy, .dw = dw, .dbias = dbias};
  return run(fn, ctx, &call, &p, backend);
}

uj_status_t uj_conv2d_output_shape(const uj_conv2d_desc_t* desc, const uj_tensor_t* x, const uj_tensor_t* w,
                                   int64_t dims[4]) {
  static const char fn[] = "uj_conv2d_output_shape";
  if (!dims) return rt_error(UJ_ERR_INVALID, "%s: dims is NULL", fn);
  bk_conv_problem_t p;
  uj_status_t s = check_x_w(fn, desc, "x", x, "w", w, &p);
  if (s != UJ_OK) return s;
  dims[0] = p.n, dims[1] = p.oh, dims[2] = p.ow, dims[3] = p.k;
  return UJ_OK;
}

const char* uj_conv2d_last_backend(uj_ctx_t* ctx) {
  bk_conv_state_t* st = ctx ? __atomic_load_n(&ctx->backend_state, __ATOMIC_ACQUIRE) : NULL;
  const bk_conv_backend_t* b = st ? bk_conv_state_last(st) : NULL;
  return b ? b->name : NULL;
}

uj_status_t uj_conv2d_forget(uj_ctx_t* ctx, uint64_t filter_key) {
  if (!ctx) return rt_error(UJ_ERR_INVALID, "uj_conv2d_forget: ctx is NULL");
  bk_conv_state_t* st = __atomic_load_n(&ctx->backend_state, __ATOMIC_ACQUIRE);
  if (st) bk_conv_filter_forget(st, filter_key);
  return UJ_OK;
}
