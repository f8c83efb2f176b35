/* bench/conv_gpu.c: the GPU rows of `bench --conv`: the same 3x3 layers as
 * bench/conv.c (56x56x64 ... 7x7x512, stride 1, padding 1, f32, NHWC, batch
 * 1 and 8) on the CUDA backends, cudnn and cuda_winograd, on device tensors.
 *
 * Per layer, cudnn runs first (its first call also finds its algorithm) and
 * its output is the check: cuda_winograd must agree within the Winograd
 * bound (1e-5 * 9C * max|x| * max|w|, plus cudnn's own 1e-6) before it is
 * timed. cuda_winograd runs with a filter_key (the transform kept). Times:
 * medians of SAMPLES samples of CALLS calls queued back to back and one
 * synchronize; "x cudnn" = cudnn's time / the row's (above 1: faster).
 * The uop reference ("ref", the convolution as micro-ops on the CUDA engine)
 * is checked against cudnn within 2e-6 * 9C * max|x| * max|w| and timed one
 * call per sample.
 * Without a GPU (or without cuDNN) the rows are skipped with the reason. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define SAMPLES 5
#define CALLS 10

static const int gpu_layers[][2] = {{56, 64}, {28, 128}, {14, 256}, {7, 512}}; /* hw, channels */
static const int gpu_batches[] = {1, 8};

static float rand_unit(uint64_t* s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((*s >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

/* Median ms per call of backend on the device tensors; negative on failure. */
static double time_backend(uj_ctx_t* ctx, const char* backend, uint64_t key, const uj_tensor_t* x,
                           const uj_tensor_t* w, uj_tensor_t* y) {
  uj_conv2d_desc_t d = {1, 1, 1, 1, key};
  double samples[SAMPLES];
  int calls = strcmp(backend, "ref") == 0 ? 1 : CALLS; /* ref: a plain loop nest, milliseconds per call */
  for (int i = 0; i < SAMPLES; i++) {
    double t0 = bench_now_ns();
    for (int c = 0; c < calls; c++)
      if (uj_conv2d(ctx, &d, x, w, NULL, y, backend) != UJ_OK) return -1;
    if (uj_ctx_synchronize(ctx) != UJ_OK) return -1;
    samples[i] = (bench_now_ns() - t0) * 1e-6 / calls;
  }
  return bench_median(samples, SAMPLES);
}

/* One layer at one batch: 0 when every row ran and agreed. */
static int gpu_row(uj_ctx_t* ctx, int hw, int ch, int batch, uint64_t key) {
  int64_t xd[4] = {batch, hw, hw, ch}, wd[4] = {ch, 3, 3, ch};
  int64_t n = batch * (int64_t)hw * hw * ch, nw = (int64_t)ch * 9 * ch;
  float *hx = malloc(sizeof(float) * (size_t)n), *hw_ = malloc(sizeof(float) * (size_t)nw);
  float *ya = malloc(sizeof(float) * (size_t)n), *yb = malloc(sizeof(float) * (size_t)n);
  uj_tensor_t x = {0}, w = {0}, y = {0};
  int status = 1;
  if (!hx || !hw_ || !ya || !yb) goto done;
  uint64_t s = key;
  double mx = 0, mw = 0;
  for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(hx[i] = rand_unit(&s)));
  for (int64_t i = 0; i < nw; i++) mw = fmax(mw, fabs(hw_[i] = 0.1f * rand_unit(&s)));
  uj_tensor_t hxt = {hx, UJ_F32, UJ_CPU, 4, {0}}, hwt = {hw_, UJ_F32, UJ_CPU, 4, {0}};
  uj_tensor_t hya = {ya, UJ_F32, UJ_CPU, 4, {0}}, hyb = {yb, UJ_F32, UJ_CPU, 4, {0}};
  memcpy(hxt.dims, xd, sizeof xd), memcpy(hwt.dims, wd, sizeof wd);
  memcpy(hya.dims, xd, sizeof xd), memcpy(hyb.dims, xd, sizeof xd);
  if (uj_tensor_alloc(ctx, UJ_CUDA, UJ_F32, 4, xd, &x) != UJ_OK ||
      uj_tensor_alloc(ctx, UJ_CUDA, UJ_F32, 4, wd, &w) != UJ_OK ||
      uj_tensor_alloc(ctx, UJ_CUDA, UJ_F32, 4, xd, &y) != UJ_OK || uj_tensor_copy(ctx, &x, &hxt) != UJ_OK ||
      uj_tensor_copy(ctx, &w, &hwt) != UJ_OK)
    goto done;
  uj_conv2d_desc_t d = {1, 1, 1, 1, key};
  uj_status_t r = uj_conv2d(ctx, &d, &x, &w, NULL, &y, "cudnn");
  if (r == UJ_ERR_UNSUPPORTED) { /* no cuDNN here: not a failure of the bench */
    printf("%dx%dx%d batch %d: rows skipped: %s\n", hw, hw, ch, batch, uj_last_error());
    status = 0;
    goto done;
  }
  if (r != UJ_OK || uj_tensor_copy(ctx, &hya, &y) != UJ_OK) goto done;
  if (uj_conv2d(ctx, &d, &x, &w, NULL, &y, "cuda_winograd") != UJ_OK || uj_tensor_copy(ctx, &hyb, &y) != UJ_OK)
    goto done;
  double bound = (1e-5 + 1e-6) * 9.0 * ch * mx * mw, worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)ya[i] - yb[i]);
    worst = isnan(e) ? INFINITY : fmax(worst, e);
  }
  double flops = 2.0 * 9.0 * ch * (double)n;
  double t_cudnn = time_backend(ctx, "cudnn", 0, &x, &w, &y);
  double t_wino = worst <= bound ? time_backend(ctx, "cuda_winograd", key, &x, &w, &y) : -1;
  char label[32];
  snprintf(label, sizeof label, "%dx%dx%d", hw, hw, ch);
  printf("%-16s %5d  %-14s %10.3f %9.1f %9s\n", label, batch, "cudnn", t_cudnn, flops / t_cudnn * 1e-6, "1.00");
  if (t_wino > 0)
    printf("%-16s %5d  %-14s %10.3f %9.1f %9.2f  err %.3f\n", label, batch, "cuda_winograd", t_wino,
           flops / t_wino * 1e-6, t_cudnn / t_wino, worst / bound);
  else
    printf("%-16s %5d  %-14s %10s  err %.3f: outside the bound, not timed\n", label, batch, "cuda_winograd", "-",
           worst / bound);
  /* the uop reference on the CUDA engine: its own bound is 1e-6, plus cudnn's */
  double ref_worst = INFINITY, ref_bound = 2e-6 * 9.0 * ch * mx * mw, t_ref = -1;
  if (uj_conv2d(ctx, &d, &x, &w, NULL, &y, "ref") == UJ_OK && uj_tensor_copy(ctx, &hyb, &y) == UJ_OK) {
    ref_worst = 0;
    for (int64_t i = 0; i < n; i++) {
      double e = fabs((double)ya[i] - yb[i]);
      ref_worst = isnan(e) ? INFINITY : fmax(ref_worst, e);
    }
    if (ref_worst <= ref_bound) t_ref = time_backend(ctx, "ref", 0, &x, &w, &y);
  }
  if (t_ref > 0)
    printf("%-16s %5d  %-14s %10.3f %9.1f %9.2f  err %.3f\n", label, batch, "ref (cuda)", t_ref,
           flops / t_ref * 1e-6, t_cudnn / t_ref, ref_worst / ref_bound);
  else
    printf("%-16s %5d  %-14s %10s  err %.3g: %s\n", label, batch, "ref (cuda)", "-", ref_worst / ref_bound,
           ref_worst <= ref_bound ? "failed" : "outside the bound, not timed");
  status = t_cudnn > 0 && t_wino > 0 && t_ref > 0 ? 0 : 1;
done:
  if (status) fprintf(stderr, "bench conv gpu: %s\n", uj_last_error());
  if (x.data) uj_tensor_free(ctx, &x);
  if (w.data) uj_tensor_free(ctx, &w);
  if (y.data) uj_tensor_free(ctx, &y);
  free(hx), free(hw_), free(ya), free(yb);
  return status;
}

int bench_conv_gpu(void) {
  printf("\n== convolution on the GPU: the same layers, cudnn (autotuned), cuda_winograd (filter_key kept), ref\n");
  uj_ctx_t* ctx = uj_ctx_new();
  char name[256] = "";
  int arch = 0, sms = 0;
  if (!ctx || uj_ctx_device(ctx, name, sizeof name, &arch, &sms) != UJ_OK) {
    printf("GPU rows skipped: %s\n", ctx ? uj_last_error() : "out of memory");
    uj_ctx_free(ctx);
    return 0;
  }
  printf("%s (sm_%d, %d SMs). Medians of %d samples of %d queued calls; \"x cudnn\" = cudnn's time / the row's.\n",
         name, arch, sms, SAMPLES, CALLS);
  printf("%-16s %5s  %-14s %10s %9s %9s\n", "layer", "batch", "backend", "ms", "GFLOP/s", "x cudnn");
  int status = 0;
  for (size_t l = 0; l < sizeof gpu_layers / sizeof *gpu_layers; l++)
    for (size_t b = 0; b < sizeof gpu_batches / sizeof *gpu_batches; b++)
      if (gpu_row(ctx, gpu_layers[l][0], gpu_layers[l][1], gpu_batches[b], 0x600d0000u + 16 * l + b) != 0) status = 1;
  uj_ctx_free(ctx);
  return status;
}
