/* backends/conv/cuda_winograd.c: "cuda_winograd", Winograd F(2x2, 3x3) on
 * the GPU: f32, NHWC, forward, 3x3 filters, stride 1, any padding.
 *
 * Per 2x2 block of output pixels ("tile") it does 16 multiplications per
 * channel and filter where the direct sum does 36. Four kernels, written
 * by hand in CUDA C (cuda_winograd_src.h has the transforms and layouts)
 * and compiled through the CUDA engine's path (jit_cuda_source_get: the
 * same NVRTC options and architecture choice, the memory and disk caches):
 *
 *   filter   w -> U [16][C][K]; once per call, or once per filter_key and
 *            kept in the context's filter cache (device memory)
 *   input    x -> V [16][T][C], one 4x4 patch per tile and channel
 *   product  M_xi = V_xi U_xi for the 16 positions xi of the tile
 *   output   M -> y (+ bias), 2x2 pixels per tile and filter */
#include <stdint.h>
#include <stdlib.h>

#include "../../rt/cuda.h"
#include "conv.h"
#include "cuda_winograd_src.h"
#include "../../jit/cuda/cuda.h"

const char* bk_conv_cuda_winograd_source(const char* const** names, int* count) {
  if (names) *names = bk_cuda_wino_names;
  if (count) *count = BK_WINO2_NKERNELS;
  return bk_cuda_wino_source;
}

/* Threads per block of every kernel (the product needs exactly 256). */
#define THREADS 256
/* Grid-stride kernels get at most this many blocks. */
#define MAX_BLOCKS 65535

static uj_status_t available(const bk_conv_problem_t* p) {
  (void)p;
  uj_status_t s = rt_cuda_device_check();
  return s != UJ_OK ? s : rt_cuda_nvrtc_check();
}

#ifdef UJ_HAVE_CUDA

/* A transformed filter in the filter cache: device memory of the context. */
typedef struct {
  rt_cuda_ctx_t* cc;
  void* u;
} kept_filter_t;

static void kept_free(void* p) {
  kept_filter_t* f = p;
  if (!f) return;
  rt_cuda_free(f->cc, f->u); /* waits for the stream: no queued kernel still reads it */
  free(f);
}

static void grid_for(int64_t work, unsigned grid[3]) {
  int64_t blocks = (work + THREADS - 1) / THREADS;
  grid[0] = (unsigned)(blocks < 1 ? 1 : blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks);
  grid[1] = grid[2] = 1;
}

/* U for w into u (queued). */
static uj_status_t filter_transform(const jit_cuda_source_t* mod, const bk_conv_problem_t* p, const void* w, void* u) {
  int64_t K = p->k, C = p->c;
  unsigned grid[3];
  grid_for(K * C, grid);
  void* args[] = {&w, &u, &K, &C};
  return jit_cuda_source_launch(mod, BK_WINO2_FILTER, grid, THREADS, args);
}

/* The call with the kernels' module in hand. All four kernels run on the
 * context's stream; V, M (and U without a key) are stream-ordered
 * temporaries, so the call returns once the work is queued.
 *
 * Rounding: B^T and A^T only add and subtract, G halves, so the values
 * grow by at most 4 through each transform; the error stays within the
 * bound documented for cpu_winograd's F(4x4, 3x3), 1e-5 * 9C * max|x| *
 * max|w| per element (include/uopjit.h), which the tests hold it to. */
static uj_status_t run_with(const bk_conv_call_t* call, const jit_cuda_source_t* mod) {
  const bk_conv_problem_t* p = call->p;
  rt_cuda_ctx_t* cc;
  uj_status_t s = rt_cuda_ctx_get(call->ctx, &cc);
  if (s != UJ_OK) return s;
  int64_t tiles_h = (p->oh + 1) / 2, tiles_w = (p->ow + 1) / 2, T = p->n * tiles_h * tiles_w;
  int64_t C = p->c, K = p->k, H = p->h, W = p->w, OH = p->oh, OW = p->ow;
  if ((T + 15) / 16 > INT32_MAX || (K + 15) / 16 > 65535)
    return rt_error(UJ_ERR_UNSUPPORTED, "backend cuda_winograd: %lld tiles and %lld filters exceed its grid",
                    (long long)T, (long long)K);
  /* V, M and U in bytes; the API bounded every tensor's bytes, not these */
  int64_t v_bytes, m_bytes, u_bytes;
  if (!rt_mul_i64(16 * 4, T, &v_bytes) || !rt_mul_i64(v_bytes, C, &v_bytes) || !rt_mul_i64(16 * 4, T, &m_bytes) ||
      !rt_mul_i64(m_bytes, K, &m_bytes) || !rt_mul_i64(16 * 4 * C, K, &u_bytes))
    return rt_error(UJ_ERR_SHAPE, "backend cuda_winograd: the transformed tensors' sizes overflow");

  /* U: kept under the filter key, or made for this call */
  bk_conv_filter_t* kept = bk_conv_filter_find(call->state, &bk_conv_cuda_winograd, p, 0);
  void* u = kept ? ((const kept_filter_t*)bk_conv_filter_data(kept))->u : NULL;
  void* u_temp = NULL;
  if (!u && p->filter_key) {
    kept_filter_t* f = calloc(1, sizeof *f);
    if (!f) return rt_error(UJ_ERR_OOM, "cuda_winograd: out of memory allocating a kept filter (%zu bytes)", sizeof *f);
    f->cc = cc;
    if ((s = rt_cuda_alloc(cc, (size_t)u_bytes, &f->u)) != UJ_OK) {
      free(f);
      return s;
    }
    if ((s = filter_transform(mod, p, call->w->data, f->u)) != UJ_OK) {
      kept_free(f);
      return s;
    }
    if (!(kept = bk_conv_filter_add(call->state, &bk_conv_cuda_winograd, p, 0, f, (size_t)u_bytes, kept_free)))
      return rt_error(UJ_ERR_OOM, "cuda_winograd: out of memory keeping the transformed filter");
    u = f->u;
  } else if (!u) {
    if ((s = rt_cuda_alloc_temp(cc, (size_t)u_bytes, &u_temp)) != UJ_OK) return s;
    s = filter_transform(mod, p, call->w->data, u_temp);
    u = u_temp;
  }

  void *v = NULL, *m = NULL;
  if (s == UJ_OK) s = rt_cuda_alloc_temp(cc, (size_t)v_bytes, &v);
  if (s == UJ_OK) s = rt_cuda_alloc_temp(cc, (size_t)m_bytes, &m);
  if (s == UJ_OK) {
    const void* x = call->x->data;
    int pad_h = p->pad_h, pad_w = p->pad_w;
    unsigned grid[3];
    grid_for(T * C, grid);
    void* args[] = {&x, &v, &T, &H, &W, &C, &tiles_h, &tiles_w, &pad_h, &pad_w};
    s = jit_cuda_source_launch(mod, BK_WINO2_INPUT, grid, THREADS, args);
  }
  if (s == UJ_OK) {
    /* 64x64 tiles when they still give every multiprocessor two blocks:
     * four times the work per shared-memory read; else 16x16 tiles, which
     * keep small problems (a batch of one late layer) spread over the GPU */
    int sms = 0;
    rt_cuda_describe(cc, NULL, NULL, NULL, &sms);
    int64_t blocks64 = ((T + 63) / 64) * ((K + 63) / 64) * 16;
    int wide = blocks64 >= 2 * (int64_t)(sms > 0 ? sms : 1);
    int64_t tile = wide ? 64 : 16;
    unsigned grid[3] = {(unsigned)((T + tile - 1) / tile), (unsigned)((K + tile - 1) / tile), 16};
    void* args[] = {&v, &u, &m, &T, &C, &K};
    s = jit_cuda_source_launch(mod, wide ? BK_WINO2_PRODUCT64 : BK_WINO2_PRODUCT, grid, THREADS, args);
  }
  if (s == UJ_OK) {
    const void* bias = call->bias ? call->bias->data : NULL;
    void* y = call->y->data;
    int has_bias = call->bias != NULL;
    unsigned grid[3];
    grid_for(T * K, grid);
    void* args[] = {&m, &bias, &y, &T, &K, &OH, &OW, &tiles_h, &tiles_w, &has_bias};
    s = jit_cuda_source_launch(mod, BK_WINO2_OUTPUT, grid, THREADS, args);
  }
  /* stream-ordered: freed once the queued kernels are done with them */
  void* temps[3] = {v, m, u_temp};
  for (int i = 0; i < 3; i++) {
    if (!temps[i]) continue;
    uj_status_t f = rt_cuda_free_temp(cc, temps[i]);
    if (s == UJ_OK) s = f;
  }
  if (kept) bk_conv_filter_release(call->state, kept);
  return s;
}

/* The module is held for the call only, not kept in the backend's state:
 * the context's memory cache may evict it afterwards, and unloads it once
 * the launches queued here have run. */
static uj_status_t run(const bk_conv_call_t* call) {
  const jit_cuda_source_t* mod;
  jit_cache_entry_t* ref;
  uj_status_t s =
      jit_cuda_source_get(call->ctx, bk_cuda_wino_source, bk_cuda_wino_names, BK_WINO2_NKERNELS, &mod, &ref);
  if (s != UJ_OK) return s;
  s = run_with(call, mod);
  jit_cuda_source_release(call->ctx, ref);
  return s;
}

#else /* !UJ_HAVE_CUDA */

static uj_status_t run(const bk_conv_call_t* call) {
  (void)call;
  return rt_error(UJ_ERR_UNSUPPORTED, "backend cuda_winograd: this build has no CUDA support");
}

#endif

const bk_conv_backend_t bk_conv_cuda_winograd = {
    .name = "cuda_winograd",
    .caps =
        {
            .ops = 1u << BK_CONV_FORWARD,
            .devices = 1u << UJ_CUDA,
            .dtypes = 1u << UJ_F32,
            .layout = BK_CONV_NHWC,
            .kernel_min = 3,
            .kernel_max = 3,
            .stride_max = 1,
            .pad_max = -1,
        },
    .run = run,
    .available = available,
};
