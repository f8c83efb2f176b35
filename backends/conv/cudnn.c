/* backends/conv/cudnn.c: "cudnn", the convolutions of NVIDIA's cuDNN 9 on
 * the GPU: f32, NHWC, forward, backward data and backward filter, any
 * filter, stride and padding.
 *
 * cuDNN is loaded with dlopen at run time (libcudnn.so.9, then libcudnn.so,
 * then the toolkit's lib64 and lib), never linked, like the CUDA driver
 * (rt/cuda.c): building needs only cudnn.h (UJ_HAVE_CUDNN). Without the
 * library, a version older than 9 or a GPU, the backend is not available:
 * named, it fails with UJ_ERR_UNSUPPORTED (the library) or UJ_ERR_DEVICE
 * (the driver or device) and the reason; auto passes over it. Each shape
 * and op runs the algorithm that cudnnFind*Algorithm timed fastest, asked
 * once per context (above cudnn_state_t). */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../rt/cuda.h"
#include "conv.h"

#if defined(UJ_HAVE_CUDNN) && defined(UJ_HAVE_CUDA)
#include <cudnn.h>

#define FN(name) __typeof__(name)* name
typedef struct {
  FN(cudnnGetVersion);
  FN(cudnnGetErrorString);
  FN(cudnnCreate);
  FN(cudnnDestroy);
  FN(cudnnSetStream);
  FN(cudnnCreateTensorDescriptor);
  FN(cudnnDestroyTensorDescriptor);
  FN(cudnnSetTensor4dDescriptor);
  FN(cudnnCreateFilterDescriptor);
  FN(cudnnDestroyFilterDescriptor);
  FN(cudnnSetFilter4dDescriptor);
  FN(cudnnCreateConvolutionDescriptor);
  FN(cudnnDestroyConvolutionDescriptor);
  FN(cudnnSetConvolution2dDescriptor);
  FN(cudnnSetConvolutionMathType);
  FN(cudnnFindConvolutionForwardAlgorithm);
  FN(cudnnFindConvolutionBackwardDataAlgorithm);
  FN(cudnnFindConvolutionBackwardFilterAlgorithm);
  FN(cudnnConvolutionForward);
  FN(cudnnConvolutionBackwardData);
  FN(cudnnConvolutionBackwardFilter);
  FN(cudnnConvolutionBackwardBias);
  FN(cudnnAddTensor);
} cudnn_lib_t;
#undef FN

static cudnn_lib_t lib;
static int lib_ok;
static char lib_error[512];
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

static void lib_load(void) {
  static const char* const names[] = {"libcudnn.so.9", "libcudnn.so", UJ_CUDA_DIR "/lib64/libcudnn.so.9",
                                      UJ_CUDA_DIR "/lib/libcudnn.so.9"};
  void* h = NULL;
  const char* first_error = NULL;
  char first[256] = "";
  for (size_t i = 0; i < sizeof names / sizeof *names && !h; i++) {
    h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h && !first_error && (first_error = dlerror())) snprintf(first, sizeof first, "%s", first_error);
  }
  if (!h) {
    snprintf(lib_error, sizeof lib_error, "no cuDNN (libcudnn.so.9 not found: %s)", first[0] ? first : "?");
    return;
  }
#define LOAD(name)                                                                                     \
  if (!(*(void**)&lib.name = dlsym(h, #name))) {                                                       \
    snprintf(lib_error, sizeof lib_error, "cuDNN library lacks %s; cuDNN 9 is needed", #name);         \
    return;                                                                                            \
  }
  LOAD(cudnnGetVersion) LOAD(cudnnGetErrorString) LOAD(cudnnCreate) LOAD(cudnnDestroy) LOAD(cudnnSetStream)
  LOAD(cudnnCreateTensorDescriptor) LOAD(cudnnDestroyTensorDescriptor) LOAD(cudnnSetTensor4dDescriptor)
  LOAD(cudnnCreateFilterDescriptor) LOAD(cudnnDestroyFilterDescriptor) LOAD(cudnnSetFilter4dDescriptor)
  LOAD(cudnnCreateConvolutionDescriptor) LOAD(cudnnDestroyConvolutionDescriptor)
  LOAD(cudnnSetConvolution2dDescriptor) LOAD(cudnnSetConvolutionMathType)
  LOAD(cudnnFindConvolutionForwardAlgorithm) LOAD(cudnnFindConvolutionBackwardDataAlgorithm)
  LOAD(cudnnFindConvolutionBackwardFilterAlgorithm) LOAD(cudnnConvolutionForward)
  LOAD(cudnnConvolutionBackwardData) LOAD(cudnnConvolutionBackwardFilter) LOAD(cudnnConvolutionBackwardBias)
  LOAD(cudnnAddTensor)
#undef LOAD
  size_t v = lib.cudnnGetVersion();
  if (v < 90000) {
    snprintf(lib_error, sizeof lib_error, "cuDNN version %zu found; cuDNN 9 is needed", v);
    return; /* the handle stays open: a process loads it once */
  }
  lib_ok = 1;
}

static uj_status_t lib_check(void) {
  pthread_once(&lib_once, lib_load);
  return lib_ok ? UJ_OK : rt_error(UJ_ERR_UNSUPPORTED, "%s", lib_error);
}

uj_status_t bk_conv_cudnn_library(size_t* version) {
  uj_status_t s = lib_check();
  if (s == UJ_OK && version) *version = lib.cudnnGetVersion();
  return s;
}

static uj_status_t available(const bk_conv_problem_t* p) {
  (void)p;
  uj_status_t s = lib_check();
  return s != UJ_OK ? s : rt_cuda_device_check();
}

/* Every failing cuDNN call becomes UJ_ERR_DEVICE (UJ_ERR_OOM for
 * CUDNN_STATUS_ALLOC_FAILED, UJ_ERR_UNSUPPORTED for NOT_SUPPORTED) with
 * "cudnnCall: cudnnGetErrorString's text" in uj_last_error(). */
static uj_status_t ck(cudnnStatus_t r, const char* call) {
  if (r == CUDNN_STATUS_SUCCESS) return UJ_OK;
  uj_status_t s = r == CUDNN_STATUS_ALLOC_FAILED ? UJ_ERR_OOM : r == CUDNN_STATUS_NOT_SUPPORTED ? UJ_ERR_UNSUPPORTED
                                                                                               : UJ_ERR_DEVICE;
  return rt_error(s, "%s: %s", call, lib.cudnnGetErrorString(r));
}
#define CK(call) ck(call, #call)

/* ---- per-context state ---- */

typedef struct {
  bk_conv_op_t op;
  int64_t n, h, w, c, k, kh, kw, oh, ow;
  int stride_h, stride_w, pad_h, pad_w;
  int algo;
  size_t workspace;
} memo_t;

/* Per context (the backend's state slot): one cuDNN handle on the
 * context's stream, one workspace in the context's device memory (grown
 * when a call needs more, freed with the context), and per shape the
 * algorithm that cudnnFind*Algorithm timed fastest, asked once per shape
 * and op. Only algorithms with plain FMA math are taken (no TF32 tensor
 * cores), so the results stay within the direct sum's bound, 1e-6 * KH*KW*C
 * * max|x| * max|w| (include/uopjit.h). */
typedef struct {
  pthread_mutex_t lock; /* one call at a time on the handle */
  rt_cuda_ctx_t* cc;
  cudnnHandle_t handle;
  void* workspace;
  size_t workspace_bytes;
  memo_t* memo;
  int nmemo, cap;
} cudnn_state_t;

static void state_free(void* p) {
  cudnn_state_t* st = p;
  if (!st) return;
  if (st->handle && rt_cuda_enter(st->cc) == UJ_OK) {
    lib.cudnnDestroy(st->handle);
    rt_cuda_leave(st->cc);
  }
  if (st->workspace) rt_cuda_free(st->cc, st->workspace);
  pthread_mutex_destroy(&st->lock);
  free(st->memo);
  free(st);
}

/* The context's cuDNN state, made on first use. */
static uj_status_t state_get(const bk_conv_call_t* call, rt_cuda_ctx_t* cc, cudnn_state_t** out) {
  bk_conv_state_lock(call->state);
  void** slot = bk_conv_state_slot(call->state, &bk_conv_cudnn, state_free);
  uj_status_t s = UJ_OK;
  if (!slot) s = rt_error(UJ_ERR_OOM, "cudnn: out of memory allocating the backends' slots");
  else if (!*slot) {
    cudnn_state_t* st = calloc(1, sizeof *st);
    if (!st) s = rt_error(UJ_ERR_OOM, "cudnn: out of memory allocating its state (%zu bytes)", sizeof *st);
    else {
      pthread_mutex_init(&st->lock, NULL);
      st->cc = cc;
      if ((s = rt_cuda_enter(cc)) == UJ_OK) {
        s = CK(lib.cudnnCreate(&st->handle));
        if (s == UJ_OK) s = CK(lib.cudnnSetStream(st->handle, (cudaStream_t)cc->stream));
        rt_cuda_leave(cc);
      }
      if (s == UJ_OK) *slot = st;
      else state_free(st);
    }
  }
  if (s == UJ_OK) *out = *slot;
  bk_conv_state_unlock(call->state);
  return s;
}

static memo_t* memo_find(cudnn_state_t* st, const bk_conv_problem_t* p) {
  for (int i = 0; i < st->nmemo; i++) {
    memo_t* m = &st->memo[i];
    if (m->op == p->op && m->n == p->n && m->h == p->h && m->w == p->w && m->c == p->c && m->k == p->k &&
        m->kh == p->kh && m->kw == p->kw && m->oh == p->oh && m->ow == p->ow && m->stride_h == p->stride_h &&
        m->stride_w == p->stride_w && m->pad_h == p->pad_h && m->pad_w == p->pad_w)
      return m;
  }
  return NULL;
}

static uj_status_t memo_add(cudnn_state_t* st, const bk_conv_problem_t* p, int algo, size_t workspace) {
  if (!rt_grow((void**)&st->memo, &st->cap, st->nmemo + 1, sizeof *st->memo))
    return rt_error(UJ_ERR_OOM, "cudnn: out of memory remembering the algorithms of %d shapes (%zu bytes)",
                    st->nmemo + 1, ((size_t)st->nmemo + 1) * sizeof *st->memo);
  st->memo[st->nmemo++] = (memo_t){p->op,       p->n,        p->h,     p->w,     p->c,  p->k,
                                   p->kh,       p->kw,       p->oh,    p->ow,    p->stride_h,
                                   p->stride_w, p->pad_h,    p->pad_w, algo,     workspace};
  return UJ_OK;
}

/* ---- one call ---- */

typedef struct {
  cudnnTensorDescriptor_t x, y, b;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
} descs_t;

static void descs_free(descs_t* d) {
  if (d->x) lib.cudnnDestroyTensorDescriptor(d->x);
  if (d->y) lib.cudnnDestroyTensorDescriptor(d->y);
  if (d->b) lib.cudnnDestroyTensorDescriptor(d->b);
  if (d->w) lib.cudnnDestroyFilterDescriptor(d->w);
  if (d->conv) lib.cudnnDestroyConvolutionDescriptor(d->conv);
}

static uj_status_t descs_make(const bk_conv_problem_t* p, descs_t* d) {
  memset(d, 0, sizeof *d);
  const int64_t sizes[] = {p->n, p->h, p->w, p->c, p->k, p->kh, p->kw, p->oh, p->ow};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    if (sizes[i] > INT_MAX)
      return rt_error(UJ_ERR_UNSUPPORTED, "backend cudnn: a size of %lld does not fit cuDNN's int descriptors",
                      (long long)sizes[i]);
  int n = (int)p->n, h = (int)p->h, w = (int)p->w, c = (int)p->c, k = (int)p->k;
  uj_status_t s = CK(lib.cudnnCreateTensorDescriptor(&d->x));
  if (s == UJ_OK) s = CK(lib.cudnnCreateTensorDescriptor(&d->y));
  if (s == UJ_OK) s = CK(lib.cudnnCreateTensorDescriptor(&d->b));
  if (s == UJ_OK) s = CK(lib.cudnnCreateFilterDescriptor(&d->w));
  if (s == UJ_OK) s = CK(lib.cudnnCreateConvolutionDescriptor(&d->conv));
  if (s == UJ_OK) s = CK(lib.cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, c, h, w));
  if (s == UJ_OK)
    s = CK(lib.cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, k, (int)p->oh, (int)p->ow));
  if (s == UJ_OK) s = CK(lib.cudnnSetTensor4dDescriptor(d->b, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, k, 1, 1));
  if (s == UJ_OK)
    s = CK(lib.cudnnSetFilter4dDescriptor(d->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, k, c, (int)p->kh, (int)p->kw));
  if (s == UJ_OK)
    s = CK(lib.cudnnSetConvolution2dDescriptor(d->conv, p->pad_h, p->pad_w, p->stride_h, p->stride_w, 1, 1,
                                               CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  if (s == UJ_OK) s = CK(lib.cudnnSetConvolutionMathType(d->conv, CUDNN_FMA_MATH));
  if (s != UJ_OK) descs_free(d);
  return s;
}

enum { NPERF = 16 };

/* The fastest algorithm with FMA math that cuDNN found, among `count`
 * results (status, algo, memory, mathType members in each). */
#define PICK(perf, count, algo, bytes, found)                                               \
  for (int i_ = 0; i_ < (count) && !(found); i_++)                                          \
    if ((perf)[i_].status == CUDNN_STATUS_SUCCESS && (perf)[i_].mathType != CUDNN_TENSOR_OP_MATH && \
        (perf)[i_].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)                         \
      (algo) = (int)(perf)[i_].algo, (bytes) = (perf)[i_].memory, (found) = 1

/* Asks cuDNN for p's algorithm (once per shape and op). */
static uj_status_t find_algo(cudnn_state_t* st, const bk_conv_problem_t* p, const descs_t* d, memo_t** out) {
  if ((*out = memo_find(st, p))) return UJ_OK;
  int count = 0, algo = 0, found = 0;
  size_t bytes = 0;
  uj_status_t s;
  if (p->op == BK_CONV_FORWARD) {
    cudnnConvolutionFwdAlgoPerf_t perf[NPERF];
    s = CK(lib.cudnnFindConvolutionForwardAlgorithm(st->handle, d->x, d->w, d->conv, d->y, NPERF, &count, perf));
    if (s == UJ_OK) PICK(perf, count, algo, bytes, found);
  } else if (p->op == BK_CONV_BACKWARD_DATA) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[NPERF];
    s = CK(lib.cudnnFindConvolutionBackwardDataAlgorithm(st->handle, d->w, d->y, d->conv, d->x, NPERF, &count, perf));
    if (s == UJ_OK) PICK(perf, count, algo, bytes, found);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[NPERF];
    s = CK(lib.cudnnFindConvolutionBackwardFilterAlgorithm(st->handle, d->x, d->y, d->conv, d->w, NPERF, &count,
                                                            perf));
    if (s == UJ_OK) PICK(perf, count, algo, bytes, found);
  }
  if (s != UJ_OK) return s;
  if (!found)
    return rt_error(UJ_ERR_UNSUPPORTED, "backend cudnn: cuDNN found no FMA algorithm for this shape (%d tried)", count);
  if ((s = memo_add(st, p, algo, bytes)) != UJ_OK) return s;
  *out = &st->memo[st->nmemo - 1];
  return UJ_OK;
}

/* At least `bytes` of workspace (after the queued work that used the old one). */
static uj_status_t workspace(cudnn_state_t* st, size_t bytes) {
  if (bytes <= st->workspace_bytes && st->workspace) return UJ_OK;
  if (st->workspace) {
    uj_status_t s = rt_cuda_free(st->cc, st->workspace);
    st->workspace = NULL, st->workspace_bytes = 0;
    if (s != UJ_OK) return s;
  }
  uj_status_t s = rt_cuda_alloc(st->cc, bytes, &st->workspace);
  if (s == UJ_OK) st->workspace_bytes = bytes;
  else st->workspace = NULL;
  return s;
}

/* The bias is added (cudnnAddTensor, cudnnConvolutionBackwardBias) after
 * the convolution is queued: should that call fail, y or dw holds the
 * convolution without it (conv.h says which failures can write). */
static uj_status_t run_locked(const bk_conv_call_t* call, cudnn_state_t* st) {
  const bk_conv_problem_t* p = call->p;
  descs_t d;
  uj_status_t s = descs_make(p, &d);
  if (s != UJ_OK) return s;
  memo_t* m = NULL;
  s = find_algo(st, p, &d, &m);
  if (s == UJ_OK) s = workspace(st, m->workspace);
  const float one = 1.0f, zero = 0.0f;
  if (s == UJ_OK && p->op == BK_CONV_FORWARD) {
    s = CK(lib.cudnnConvolutionForward(st->handle, &one, d.x, call->x->data, d.w, call->w->data, d.conv,
                                        (cudnnConvolutionFwdAlgo_t)m->algo, st->workspace, m->workspace, &zero, d.y,
                                        call->y->data));
    if (s == UJ_OK && call->bias)
      s = CK(lib.cudnnAddTensor(st->handle, &one, d.b, call->bias->data, &one, d.y, call->y->data));
  } else if (s == UJ_OK && p->op == BK_CONV_BACKWARD_DATA) {
    s = CK(lib.cudnnConvolutionBackwardData(st->handle, &one, d.w, call->w->data, d.y, call->dy->data, d.conv,
                                             (cudnnConvolutionBwdDataAlgo_t)m->algo, st->workspace, m->workspace,
                                             &zero, d.x, call->dx->data));
  } else if (s == UJ_OK) {
    s = CK(lib.cudnnConvolutionBackwardFilter(st->handle, &one, d.x, call->x->data, d.y, call->dy->data, d.conv,
                                               (cudnnConvolutionBwdFilterAlgo_t)m->algo, st->workspace, m->workspace,
                                               &zero, d.w, call->dw->data));
    if (s == UJ_OK && call->dbias)
      s = CK(lib.cudnnConvolutionBackwardBias(st->handle, &one, d.y, call->dy->data, &zero, d.b, call->dbias->data));
  }
  descs_free(&d);
  return s;
}

static uj_status_t run(const bk_conv_call_t* call) {
  uj_status_t s = lib_check();
  rt_cuda_ctx_t* cc = NULL;
  if (s == UJ_OK) s = rt_cuda_ctx_get(call->ctx, &cc);
  cudnn_state_t* st = NULL;
  if (s == UJ_OK) s = state_get(call, cc, &st);
  if (s != UJ_OK) return s;
  pthread_mutex_lock(&st->lock);
  if ((s = rt_cuda_enter(cc)) == UJ_OK) {
    s = run_locked(call, st);
    rt_cuda_leave(cc);
  }
  pthread_mutex_unlock(&st->lock);
  if (s != UJ_OK) rt_error_prefix("backend cudnn: ");
  return s;
}

#else /* no cudnn.h or no CUDA headers at build time */

static uj_status_t available(const bk_conv_problem_t* p) {
  (void)p;
  return rt_error(UJ_ERR_UNSUPPORTED, "this build has no cuDNN support (cudnn.h and the CUDA headers were not found "
                                      "at build time)");
}

static uj_status_t run(const bk_conv_call_t* call) {
  (void)call;
  return available();
}

uj_status_t bk_conv_cudnn_library(size_t* version) {
  (void)version;
  return available();
}

#endif

const bk_conv_backend_t bk_conv_cudnn = {
    .name = "cudnn",
    .caps =
        {
            .ops = (1u << BK_CONV_FORWARD) | (1u << BK_CONV_BACKWARD_DATA) | (1u << BK_CONV_BACKWARD_FILTER),
            .devices = 1u << UJ_CUDA,
            .dtypes = 1u << UJ_F32,
            .layout = BK_CONV_NHWC,
            .kernel_min = 1,
            .kernel_max = 0,
            .stride_max = 0,
            .pad_max = -1,
        },
    .run = run,
    .available = available,
};
