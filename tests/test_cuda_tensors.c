/* tests/test_cuda_tensors.c: device tensors and the runs that must fail
 * cleanly without a GPU: uj_tensor_alloc's argument checks, host tensors'
 * alloc, copy and free, and calls that mix devices or reach the GPU without
 * one, which fail with a message and write nothing. Needs no GPU; where
 * there is one, the device side of the checks runs too. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oracle.h"

static int have_gpu(void) { return or_engine_available(UJ_ENGINE_CUDA); }

static uj_program_t* parse(const char* src) {
  uj_program_t* p = NULL;
  uj_status_t s = uj_program_parse(src, &p);
  if (s != UJ_OK) fprintf(stderr, "  parse \"%s\": %s\n", src, uj_last_error());
  CHECK(s == UJ_OK);
  return p;
}

/* ---- tensors ---- */

TEST(tensor_alloc_checks_its_arguments) {
  uj_ctx_t* ctx = uj_ctx_new();
  int64_t dims[2] = {3, 4}, neg[2] = {3, -1};
  uj_tensor_t t, before;
  memset(&t, 0x5a, sizeof t);
  before = t;
  CHECK(uj_tensor_alloc(NULL, UJ_CPU, UJ_F32, 2, dims, &t) == UJ_ERR_INVALID);
  CHECK(uj_tensor_alloc(ctx, UJ_CPU, UJ_F32, 2, dims, NULL) == UJ_ERR_INVALID);
  CHECK(uj_tensor_alloc(ctx, (uj_device_t)7, UJ_F32, 2, dims, &t) == UJ_ERR_INVALID);
  CHECK(uj_tensor_alloc(ctx, UJ_CPU, (uj_dtype_t)9, 2, dims, &t) == UJ_ERR_INVALID);
  CHECK(uj_tensor_alloc(ctx, UJ_CPU, UJ_F32, 9, dims, &t) == UJ_ERR_SHAPE);
  CHECK(uj_tensor_alloc(ctx, UJ_CPU, UJ_F32, 2, NULL, &t) == UJ_ERR_INVALID);
  CHECK(uj_tensor_alloc(ctx, UJ_CPU, UJ_F32, 2, neg, &t) == UJ_ERR_SHAPE);
  CHECK(strstr(uj_last_error(), "axis 1") != NULL);
  int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
  CHECK(uj_tensor_alloc(ctx, UJ_CPU, UJ_F64, 2, huge, &t) == UJ_ERR_SHAPE);
  CHECK(memcmp(&t, &before, sizeof t) == 0); /* untouched by every failure */
  if (!have_gpu()) {
    uj_status_t s = uj_tensor_alloc(ctx, UJ_CUDA, UJ_F32, 2, dims, &t);
    CHECK(s == UJ_ERR_DEVICE || s == UJ_ERR_UNSUPPORTED);
    CHECK(strstr(uj_last_error(), "CUDA") != NULL);
    CHECK(memcmp(&t, &before, sizeof t) == 0);
    CHECK(uj_ctx_device(ctx, NULL, 0, NULL, NULL) == s);
  }
  uj_ctx_free(ctx);
}

TEST(host_tensors_alloc_copy_free) {
  uj_ctx_t* ctx = uj_ctx_new();
  int64_t dims[2] = {3, 5}, other[2] = {5, 3}, none[1] = {0};
  uj_tensor_t a, b, c, e;
  CHECK(uj_tensor_alloc(ctx, UJ_CPU, UJ_F32, 2, dims, &a) == UJ_OK);
  CHECK(uj_tensor_alloc(ctx, UJ_CPU, UJ_F32, 2, dims, &b) == UJ_OK);
  CHECK(uj_tensor_alloc(ctx, UJ_CPU, UJ_F32, 2, other, &c) == UJ_OK);
  CHECK(uj_tensor_alloc(ctx, UJ_CPU, UJ_F64, 1, none, &e) == UJ_OK);
  CHECK(e.data != NULL && e.ndim == 1 && e.dims[0] == 0);
  CHECK((uintptr_t)a.data % 64 == 0 && a.device == UJ_CPU && a.dtype == UJ_F32 && a.dims[1] == 5);
  for (int i = 0; i < 15; i++) ((float*)a.data)[i] = (float)i, ((float*)b.data)[i] = -1, ((float*)c.data)[i] = -2;
  CHECK(uj_tensor_copy(ctx, &b, &a) == UJ_OK);
  CHECK(((float*)b.data)[14] == 14.0f && ((float*)b.data)[0] == 0.0f);
  /* same element count, other shape: refused, nothing written */
  CHECK(uj_tensor_copy(ctx, &c, &a) == UJ_ERR_SHAPE);
  CHECK(strstr(uj_last_error(), "axis 0") != NULL);
  CHECK(((float*)c.data)[0] == -2.0f);
  CHECK(uj_tensor_copy(ctx, &e, &a) != UJ_OK); /* dtype and rank */
  CHECK(uj_tensor_copy(NULL, &b, &a) == UJ_ERR_INVALID);
  CHECK(uj_tensor_copy(ctx, NULL, &a) == UJ_ERR_INVALID);
  uj_tensor_t broken = a;
  broken.data = NULL;
  CHECK(uj_tensor_copy(ctx, &b, &broken) == UJ_ERR_INVALID);
  /* a GPU tensor where there is none */
  if (!have_gpu()) {
    uj_tensor_t fake = a;
    fake.device = UJ_CUDA;
    uj_status_t s = uj_tensor_copy(ctx, &fake, &a);
    CHECK(s == UJ_ERR_DEVICE || s == UJ_ERR_UNSUPPORTED);
    CHECK(((float*)a.data)[3] == 3.0f);
  }
  CHECK(uj_tensor_free(ctx, &a) == UJ_OK && a.data == NULL);
  CHECK(uj_tensor_free(ctx, &a) == UJ_OK); /* twice: data is NULL now */
  CHECK(uj_tensor_free(ctx, NULL) == UJ_OK);
  uj_tensor_free(ctx, &b), uj_tensor_free(ctx, &c), uj_tensor_free(ctx, &e);
  CHECK(uj_ctx_synchronize(ctx) == UJ_OK); /* nothing was queued */
  CHECK(uj_ctx_synchronize(NULL) == UJ_ERR_INVALID);
  uj_ctx_free(ctx);
}

/* ---- runs that cannot reach a GPU ---- */

TEST(run_refuses_mixed_or_unreachable_devices) {
  uj_program_t* p = parse("y = x + z");
  uj_ctx_t* ctx = uj_ctx_new();
  if (!p || !ctx) return;
  float xv[4] = {1, 2, 3, 4}, zv[4] = {1, 1, 1, 1}, yv[4] = {-7, -7, -7, -7};
  uj_tensor_t x = {xv, UJ_F32, UJ_CPU, 1, {4}}, z = {zv, UJ_F32, UJ_CPU, 1, {4}}, y = {yv, UJ_F32, UJ_CPU, 1, {4}};
  uj_tensor_t zg = z, yg = y, xg = x;
  zg.device = yg.device = xg.device = UJ_CUDA;
  /* one host, one GPU tensor: named, refused before anything runs */
  const uj_tensor_t* mixed[] = {&x, &zg};
  uj_tensor_t* out[] = {&y};
  CHECK(uj_program_run(ctx, p, UJ_FORWARD, mixed, 2, NULL, 0, out, 1) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "input 1") != NULL && strstr(uj_last_error(), "share a device") != NULL);
  uj_tensor_t* out_g[] = {&yg};
  const uj_tensor_t* host_in[] = {&x, &z};
  CHECK(uj_program_run(ctx, p, UJ_FORWARD, host_in, 2, NULL, 0, out_g, 1) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "output 0") != NULL);
  CHECK(yv[0] == -7 && yv[3] == -7);
  /* a CPU engine given GPU tensors */
  const uj_tensor_t* gpu_in[] = {&xg, &zg};
  uj_ctx_t* interp = uj_ctx_new();
  CHECK(uj_ctx_set_engine(interp, UJ_ENGINE_INTERP) == UJ_OK);
  CHECK(uj_program_run(interp, p, UJ_FORWARD, gpu_in, 2, NULL, 0, out_g, 1) == UJ_ERR_UNSUPPORTED);
  CHECK(strstr(uj_last_error(), "input 0") != NULL && strstr(uj_last_error(), "GPU") != NULL);
  uj_ctx_free(interp);
  if (!have_gpu()) {
    /* AUTO with GPU tensors and no GPU: why not, nothing written */
    CHECK(uj_program_run(ctx, p, UJ_FORWARD, gpu_in, 2, NULL, 0, out_g, 1) == UJ_ERR_UNSUPPORTED);
    CHECK(strstr(uj_last_error(), "cuda engine is not available") != NULL);
    CHECK(yv[0] == -7);
    CHECK(!uj_engine_available(ctx, UJ_ENGINE_CUDA));
    CHECK(uj_ctx_set_engine(ctx, UJ_ENGINE_CUDA) == UJ_ERR_UNSUPPORTED);
    CHECK(strstr(uj_last_error(), "engine cuda is not available: ") != NULL);
  } else {
    /* the CUDA engine given host tensors */
    CHECK(uj_ctx_set_engine(ctx, UJ_ENGINE_CUDA) == UJ_OK);
    CHECK(uj_program_run(ctx, p, UJ_FORWARD, host_in, 2, NULL, 0, out, 1) == UJ_ERR_UNSUPPORTED);
    CHECK(strstr(uj_last_error(), "host memory") != NULL);
    CHECK(yv[0] == -7);
  }
  uj_ctx_free(ctx);
  uj_program_free(p);
}


TEST_MAIN()
