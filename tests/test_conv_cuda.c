/* tests/test_conv_cuda.c: the CUDA convolution backends, cudnn and
 * cuda_winograd.
 *
 *   without a GPU   cuda_winograd's CUDA C has the engine's shape (no
 *                   #include, extern "C" kernels) and compiles with NVRTC
 *                   for sm_90 through the engine's path; cuDNN loads
 *                   with every entry point (or says why not); both backends,
 *                   named or under auto, given device tensors, say they
 *                   are not available (why, and which backend) and write
 *                   nothing; given host tensors they refuse them naming
 *                   the device, and auto never picks them for host tensors
 *   with a GPU      every CUDA backend, and ref run on the device by the
 *                   CUDA engine, against ref (f64, on the host) over
 *                   random shapes: odd sizes, 1x1 images, channel counts
 *                   that are not multiples of 4, 8 or 32, padding 0 to 2,
 *                   bias or not, a filter_key kept across calls; cudnn's
 *                   backward data and filter against naive loops; auto
 *                   on device tensors picks a CUDA backend
 * Tests that need NVRTC or a GPU skip with a message when there is none. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backends/conv/conv.h"
#include "../jit/jit.h"
#include "../rt/cuda.h"
#include "conv_check.h"
#include "../jit/cuda/cuda.h"

static int have_gpu(void) { return rt_cuda_device_present(); }

#define SKIP_WITHOUT_GPU() SKIP_IF(!have_gpu(), "no CUDA device: GPU test skipped")

static const char* const cuda_backends[] = {"cudnn", "cuda_winograd"};

/* ---- without a GPU ---- */

TEST(cuda_winograd_source_shape) {
  const char* const* names = NULL;
  int count = 0;
  const char* src = bk_conv_cuda_winograd_source(&names, &count);
  CHECK(src != NULL && count == 5 && names != NULL); /* filter, input, two products, output */
  if (!src || !names) return;
  CHECK(strstr(src, "#include") == NULL);
  for (int i = 0; i < count; i++) {
    char decl[96];
    snprintf(decl, sizeof decl, "extern \"C\" __global__ void %s(", names[i]);
    CHECK(strstr(src, decl) != NULL);
  }
}

TEST(cuda_winograd_compiles_for_sm_90) {
  SKIP_IF(!rt_cuda_nvrtc_present(), "no NVRTC: CUDA compile test skipped");
  const char* const* names = NULL;
  int count = 0;
  const char* src = bk_conv_cuda_winograd_source(&names, &count);
  uj_ctx_t* ctx = uj_ctx_new();
  CHECK(ctx != NULL);
  if (!ctx) return;
  int reused = -1;
  uj_status_t s = jit_cuda_source_compile_for(ctx, src, names, count, "sm_90", &reused);
  if (s != UJ_OK) fprintf(stderr, "  %s\n", uj_last_error());
  CHECK(s == UJ_OK);
  CHECK(reused == 0 || reused == 1);
  if (s == UJ_OK)
    printf("  %d cuda_winograd kernels compiled for sm_90%s\n", count, reused ? " (from the disk cache)" : "");
  /* the same source straight through NVRTC: a cubin */
  size_t size = 0;
  CHECK(jit_cuda_compile_source(src, "sm_90", &size) == UJ_OK && size > 0);
  /* an architecture NVRTC does not know is refused, not compiled */
  CHECK(jit_cuda_source_compile_for(ctx, src, names, count, "sm_1", NULL) == UJ_ERR_UNSUPPORTED);
  CHECK(jit_cuda_source_compile_for(ctx, src, names, count, "90", NULL) == UJ_ERR_INVALID);
  uj_ctx_free(ctx);
}

/* cuDNN loads (without a GPU too) with every entry point the backend
 * calls, or says why not. */
TEST(cudnn_library_loads_or_says_why) {
  size_t version = 0;
  uj_status_t s = bk_conv_cudnn_library(&version);
  if (s != UJ_OK) {
    CHECK(s == UJ_ERR_UNSUPPORTED);
    CHECK(strstr(uj_last_error(), "cuDNN") != NULL);
    SKIP_IF(1, uj_last_error());
  }
  CHECK(version >= 90000);
  printf("  cuDNN %zu.%zu.%zu loaded\n", version / 10000, version / 100 % 100, version % 100);
}

/* f32 tensors of a 3x3 problem marked as device tensors over host memory:
 * without a GPU nothing may read them. */
typedef struct {
  cc_tensors_t t;
  uj_tensor_t x, w, b, y, dy, dx, dw;
} fake_t;

static void fake_make(fake_t* f) {
  static const cc_shape_t s = {2, 6, 5, 3, 4, 3, 3, 1, 1, 1, 1, 1};
  uint64_t st = 801;
  cc_tensors_make(&f->t, &s, UJ_F32, &st);
  or_fill_sentinel(&f->t.y);
  f->x = f->t.x, f->w = f->t.w, f->b = f->t.b, f->y = f->t.y;
  f->dy = or_tensor(UJ_F32, 4, f->t.y.dims);
  f->dx = or_tensor(UJ_F32, 4, f->t.x.dims);
  f->dw = or_tensor(UJ_F32, 4, f->t.w.dims);
  or_fill_sentinel(&f->dx);
  or_fill_sentinel(&f->dw);
  uj_tensor_t* all[] = {&f->x, &f->w, &f->b, &f->y, &f->dy, &f->dx, &f->dw};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) all[i]->device = UJ_CUDA;
}

static void fake_free(fake_t* f) {
  cc_tensors_free(&f->t);
  or_tensor_free(&f->dy);
  or_tensor_free(&f->dx);
  or_tensor_free(&f->dw);
}

static int all_nan(const uj_tensor_t* t) {
  uj_tensor_t h = *t;
  h.device = UJ_CPU;
  for (int64_t i = 0; i < or_tnumel(&h); i++)
    if (!isnan(or_get(&h, i))) return 0;
  return 1;
}

/* Without a GPU (or cuDNN): status UNSUPPORTED or DEVICE with a message
 * that names the backend and the reason. */
static void expect_unavailable(uj_status_t s, const char* backend) {
  CHECK(s == UJ_ERR_UNSUPPORTED || s == UJ_ERR_DEVICE);
  char want[64];
  snprintf(want, sizeof want, "backend %s is not available: ", backend);
  const char* e = uj_last_error();
  CHECK(strstr(e, want) != NULL);
  CHECK(strstr(e, "CUDA") != NULL || strstr(e, "cuDNN") != NULL);
  if (!strstr(e, want)) fprintf(stderr, "  %s: %s\n", backend, e);
  else printf("  %s\n", e);
}

TEST(cuda_backends_unavailable_without_gpu) {
  SKIP_IF(have_gpu(), "a CUDA device is present: covered by the GPU tests");
  fake_t f;
  fake_make(&f);
  uj_ctx_t* ctx = uj_ctx_new();
  CHECK(ctx != NULL);
  uj_conv2d_desc_t d = cc_desc(&f.t.s, 0);
  for (int b = 0; ctx && b < 2; b++) {
    expect_unavailable(uj_conv2d(ctx, &d, &f.x, &f.w, &f.b, &f.y, cuda_backends[b]), cuda_backends[b]);
    CHECK(all_nan(&f.y));
  }
  if (ctx) {
    expect_unavailable(uj_conv2d_backward_data(ctx, &d, &f.dy, &f.w, &f.dx, "cudnn"), "cudnn");
    expect_unavailable(uj_conv2d_backward_filter(ctx, &d, &f.x, &f.dy, &f.dw, NULL, "cudnn"), "cudnn");
    CHECK(all_nan(&f.dx) && all_nan(&f.dw));
    /* auto: none is available, every reason given, nothing written */
    uj_status_t s = uj_conv2d(ctx, &d, &f.x, &f.w, NULL, &f.y, NULL);
    CHECK(s == UJ_ERR_UNSUPPORTED);
    CHECK(strstr(uj_last_error(), "no convolution backend can run this call") != NULL);
    CHECK(strstr(uj_last_error(), "backend cudnn is not available") != NULL);
    CHECK(strstr(uj_last_error(), "backend cuda_winograd is not available") != NULL);
    CHECK(all_nan(&f.y));
    CHECK(uj_conv2d_last_backend(ctx) == NULL);
    /* and again, on a context that has asked before */
    CHECK(uj_conv2d(ctx, &d, &f.x, &f.w, NULL, &f.y, "cuda_winograd") != UJ_OK);
  }
  uj_ctx_free(ctx);
  fake_free(&f);
}

TEST(host_tensors_refused_by_cuda_backends) {
  static const cc_shape_t s = {1, 7, 6, 5, 3, 3, 3, 1, 1, 1, 0, 1};
  uint64_t st = 802;
  cc_tensors_t t;
  cc_tensors_make(&t, &s, UJ_F32, &st);
  uj_ctx_t* ctx = uj_ctx_new();
  CHECK(ctx != NULL);
  uj_conv2d_desc_t d = cc_desc(&s, 0);
  for (int b = 0; ctx && b < 2; b++) {
    or_fill_sentinel(&t.y);
    CHECK(uj_conv2d(ctx, &d, &t.x, &t.w, &t.b, &t.y, cuda_backends[b]) == UJ_ERR_UNSUPPORTED);
    char want[96];
    snprintf(want, sizeof want, "backend %s runs on cuda only, the tensors are on cpu", cuda_backends[b]);
    CHECK(strstr(uj_last_error(), want) != NULL);
    CHECK(all_nan(&t.y));
  }
  /* auto on host tensors: a CPU backend, within its bound */
  double* want = ctx ? cc_naive_forward(&t.x, &t.w, &t.b, &s) : NULL;
  if (want) {
    or_fill_sentinel(&t.y);
    CHECK(uj_conv2d(ctx, &d, &t.x, &t.w, &t.b, &t.y, NULL) == UJ_OK);
    const char* ran = uj_conv2d_last_backend(ctx);
    CHECK(ran != NULL && strncmp(ran, "cpu_", 3) == 0);
    CC_CHECK("auto on host tensors", want, &t.y, cc_forward_bound(&t, CONV_TOL_WINOGRAD), &s);
    free(want);
  }
  uj_ctx_free(ctx);
  cc_tensors_free(&t);
}

/* ---- with a GPU ---- */

/* A device copy of host tensor h (NULL data when that fails, checked). */
static uj_tensor_t on_device(uj_ctx_t* ctx, const uj_tensor_t* h) {
  uj_tensor_t d;
  memset(&d, 0, sizeof d);
  uj_status_t s = uj_tensor_alloc(ctx, UJ_CUDA, h->dtype, h->ndim, h->dims, &d);
  if (s == UJ_OK) s = uj_tensor_copy(ctx, &d, h);
  if (s != UJ_OK) fprintf(stderr, "  device tensor: %s\n", uj_last_error());
  CHECK(s == UJ_OK);
  return d;
}

/* Runs backend (NULL: auto) on device copies of t, y back into t->y. */
static uj_status_t run_on_device(uj_ctx_t* ctx, const char* backend, cc_tensors_t* t, uint64_t key) {
  uj_tensor_t x = on_device(ctx, &t->x), w = on_device(ctx, &t->w), b = on_device(ctx, &t->b);
  or_fill_sentinel(&t->y);
  uj_tensor_t y = on_device(ctx, &t->y);
  uj_conv2d_desc_t d = cc_desc(&t->s, key);
  uj_status_t s = x.data && w.data && b.data && y.data ? uj_conv2d(ctx, &d, &x, &w, t->s.bias ? &b : NULL, &y, backend)
                                                       : UJ_ERR_DEVICE;
  if (s != UJ_OK) fprintf(stderr, "  %s: %s\n", backend ? backend : "auto", uj_last_error());
  if (s == UJ_OK) s = uj_tensor_copy(ctx, &t->y, &y);
  uj_tensor_free(ctx, &x);
  uj_tensor_free(ctx, &w);
  uj_tensor_free(ctx, &b);
  uj_tensor_free(ctx, &y);
  return s;
}

static void gpu_case(uint64_t seed, int iterations, int winograd_shapes) {
  SKIP_WITHOUT_GPU();
  HARNESS_SEED(seed);
  uint64_t st = seed;
  uj_ctx_t* ctx = uj_ctx_new();
  CHECK(ctx != NULL);
  static const cc_shape_t fixed[] = {
      {1, 1, 1, 7, 5, 3, 3, 1, 1, 1, 1, 1},    {3, 1, 1, 5, 4, 1, 1, 1, 1, 0, 0, 1},
      {2, 9, 7, 33, 65, 3, 3, 1, 1, 1, 1, 0},  {1, 2, 9, 4, 3, 3, 3, 1, 1, 1, 1, 1},
      {1, 13, 11, 37, 19, 3, 3, 1, 1, 0, 0, 1}, {2, 5, 4, 3, 6, 5, 4, 2, 1, 0, 0, 1},
      /* enough tiles for cuda_winograd's 64x64 product tiles, with partial tiles at both edges */
      {8, 27, 28, 70, 70, 3, 3, 1, 1, 1, 1, 1},
  };
  int nfixed = (int)(sizeof fixed / sizeof *fixed);
  for (int it = 0; ctx && it < nfixed + iterations; it++) {
    cc_shape_t s = it < nfixed ? fixed[it] : cc_random(&st, 70, 12, 2, winograd_shapes);
    cc_tensors_t t;
    cc_tensors_make(&t, &s, UJ_F32, &st);
    double* want = cc_ref_f64(ctx, &t);
    /* the CUDA backends, ref on the CUDA engine (the uop reference on the device), then auto */
    for (int b = 0; want && b < 4; b++) {
      const char* name = b < 2 ? cuda_backends[b] : b == 2 ? "ref" : NULL;
      uint64_t key = b == 1 ? 1000 + (uint64_t)it : 0;
      for (int rep = 0; rep < (key ? 2 : 1); rep++) { /* with a key: the kept filter the second time */
        uj_status_t r = run_on_device(ctx, name, &t, key);
        if (r == UJ_ERR_UNSUPPORTED && name && strcmp(name, "cuda_winograd") == 0 &&
            (s.kh != 3 || s.kw != 3 || s.sh != 1 || s.sw != 1)) {
          CHECK(strstr(uj_last_error(), "cuda_winograd") != NULL);
          break;
        }
        CHECK(r == UJ_OK);
        if (r != UJ_OK) {
          cc_print(&s);
          break;
        }
        const char* ran = name ? name : uj_conv2d_last_backend(ctx);
        CHECK(ran != NULL && (name || strncmp(ran, "cud", 3) == 0));
        char what[96];
        snprintf(what, sizeof what, "backend %s (%s)", ran ? ran : "?", name ? "named" : "auto");
        CC_CHECK(what, want, &t.y, cc_forward_bound(&t, cc_tolerance(ran ? ran : "", UJ_F32)), &s);
      }
    }
    free(want);
    cc_tensors_free(&t);
  }
  uj_ctx_free(ctx);
}

TEST(gpu_backends_match_ref_any_shape) { gpu_case(811, 20, 0); }
TEST(gpu_backends_match_ref_3x3) { gpu_case(812, 20, 1); }

TEST(gpu_cudnn_backward_matches_naive) {
  SKIP_WITHOUT_GPU();
  HARNESS_SEED(813);
  uint64_t st = 813;
  uj_ctx_t* ctx = uj_ctx_new();
  CHECK(ctx != NULL);
  for (int it = 0; ctx && it < 12; it++) {
    cc_shape_t s = cc_random(&st, 40, 10, 2, 0);
    cc_tensors_t t;
    cc_tensors_make(&t, &s, UJ_F32, &st);
    cc_grads_t g;
    cc_grads_make(&g, &t, &st);
    CHECK(g.want_dx && g.want_dw && g.want_db);
    if (g.want_dx && g.want_dw && g.want_db) {
      uj_tensor_t gx = on_device(ctx, &t.x), gw = on_device(ctx, &t.w), gdy = on_device(ctx, &g.dy);
      uj_tensor_t gdx = on_device(ctx, &g.dx), gdw = on_device(ctx, &g.dw), gdb = on_device(ctx, &g.db);
      uj_conv2d_desc_t d = cc_desc(&s, 0);
      uj_status_t r = uj_conv2d_backward_data(ctx, &d, &gdy, &gw, &gdx, "cudnn");
      if (r == UJ_OK) r = uj_conv2d_backward_filter(ctx, &d, &gx, &gdy, &gdw, &gdb, "cudnn");
      if (r != UJ_OK) fprintf(stderr, "  cudnn backward: %s\n", uj_last_error());
      CHECK(r == UJ_OK);
      if (r == UJ_OK) {
        CHECK(uj_tensor_copy(ctx, &g.dx, &gdx) == UJ_OK && uj_tensor_copy(ctx, &g.dw, &gdw) == UJ_OK &&
              uj_tensor_copy(ctx, &g.db, &gdb) == UJ_OK);
        CC_CHECK("cudnn dx", g.want_dx, &g.dx, cc_dx_bound(&t, &g, CONV_TOL_DIRECT), &s);
        CC_CHECK("cudnn dw", g.want_dw, &g.dw, cc_dw_bound(&t, &g, CONV_TOL_DIRECT), &s);
        CC_CHECK("cudnn dbias", g.want_db, &g.db, cc_db_bound(&t, &g, CONV_TOL_DIRECT), &s);
      }
      uj_tensor_t* dev[] = {&gx, &gw, &gdy, &gdx, &gdw, &gdb};
      for (int i = 0; i < 6; i++) uj_tensor_free(ctx, dev[i]);
    }
    cc_grads_free(&g);
    cc_tensors_free(&t);
  }
  uj_ctx_free(ctx);
}

TEST_MAIN()
