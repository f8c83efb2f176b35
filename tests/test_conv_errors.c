/* tests/test_conv_errors.c: bad input to the convolution commands, and the
 * ways of choosing a backend. Every bad call must return the documented
 * status with a message naming the tensor, axis or parameter at fault, and
 * leave every output exactly as it was (each is filled with a byte pattern
 * first and compared afterwards): wrong ranks, dtypes and devices, channel
 * and filter counts that disagree, output and bias sizes that do not follow
 * from the inputs, sizes of 0, an input smaller than its filter, NULL
 * handles and data, strides and paddings out of range, outputs overlapping
 * inputs or each other, unknown backend names (as argument and in
 * UOPJIT_CONV_BACKEND), backends outside their capability. Then the
 * listing functions, uj_conv2d_output_shape, and UOPJIT_CONV_BACKEND
 * forcing a backend. */
#include <stdlib.h>
#include <string.h>

#include "conv_check.h"

#define PATTERN 0x5a

/* A valid forward call: x [1,6,7,3], w [4,3,3,3], bias [4], y [1,4,5,4],
 * stride 1, no padding; outputs of the backward calls too. */
typedef struct {
  uj_ctx_t* ctx;
  uj_conv2d_desc_t d;
  uj_tensor_t x, w, b, y, dy, dx, dw, db;
} fixture_t;

static void fixture_make(fixture_t* f) {
  uint64_t st = 801;
  cc_shape_t s = {1, 6, 7, 3, 4, 3, 3, 1, 1, 0, 0, 1};
  int64_t xd[4] = {1, 6, 7, 3}, wd[4] = {4, 3, 3, 3}, bd[1] = {4}, yd[4] = {1, 4, 5, 4};
  f->ctx = uj_ctx_new();
  f->d = cc_desc(&s, 0);
  f->x = or_tensor(UJ_F32, 4, xd);
  f->w = or_tensor(UJ_F32, 4, wd);
  f->b = or_tensor(UJ_F32, 1, bd);
  f->y = or_tensor(UJ_F32, 4, yd);
  f->dy = or_tensor(UJ_F32, 4, yd);
  f->dx = or_tensor(UJ_F32, 4, xd);
  f->dw = or_tensor(UJ_F32, 4, wd);
  f->db = or_tensor(UJ_F32, 1, bd);
  or_fill_real(&st, &f->x, -1, 1);
  or_fill_real(&st, &f->w, -1, 1);
  or_fill_real(&st, &f->b, -1, 1);
  or_fill_real(&st, &f->dy, -1, 1);
}

static void fixture_free(fixture_t* f) {
  uj_ctx_free(f->ctx);
  uj_tensor_t* all[] = {&f->x, &f->w, &f->b, &f->y, &f->dy, &f->dx, &f->dw, &f->db};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) or_tensor_free(all[i]);
}

static size_t bytes_of(const uj_tensor_t* t) { return (size_t)or_tnumel(t) * or_dsize(t->dtype); }

/* Fills every output with the pattern. */
static void outputs_mark(fixture_t* f) {
  uj_tensor_t* outs[] = {&f->y, &f->dx, &f->dw, &f->db};
  for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) memset(outs[i]->data, PATTERN, bytes_of(outs[i]));
}

static int untouched(const uj_tensor_t* t) {
  const unsigned char* p = t->data;
  for (size_t i = 0; i < bytes_of(t); i++)
    if (p[i] != PATTERN) return 0;
  return 1;
}

/* The call failed with `want`, its message contains every needle, and no
 * output changed. */
static void expect_(const char* file, int line, fixture_t* f, uj_status_t got, uj_status_t want,
                    const char* needle1, const char* needle2) {
  char msg[512];
  if (got != want) {
    snprintf(msg, sizeof msg, "status %s, want %s (%s)", uj_status_str(got), uj_status_str(want), uj_last_error());
    harness_fail(file, line, msg);
  }
  const char* needles[] = {needle1, needle2};
  for (int i = 0; i < 2; i++)
    if (needles[i] && !strstr(uj_last_error(), needles[i])) {
      snprintf(msg, sizeof msg, "message \"%s\" does not name \"%s\"", uj_last_error(), needles[i]);
      harness_fail(file, line, msg);
    }
  if (!untouched(&f->y) || !untouched(&f->dx) || !untouched(&f->dw) || !untouched(&f->db))
    harness_fail(file, line, "an output was written by a failing call");
}
#define EXPECT(f, call, want, n1, n2)      \
  do {                                     \
    outputs_mark(f);                       \
    uj_status_t got_ = (call);             \
    expect_(__FILE__, __LINE__, (f), got_, (want), (n1), (n2)); \
  } while (0)

static uj_status_t forward(fixture_t* f, const uj_tensor_t* x, const uj_tensor_t* w, const uj_tensor_t* b,
                           uj_tensor_t* y, const char* backend) {
  return uj_conv2d(f->ctx, &f->d, x, w, b, y, backend);
}

TEST(fixture_is_valid) {
  fixture_t f;
  fixture_make(&f);
  /* every CPU backend runs it; the CUDA ones refuse host tensors */
  for (int b = 0; b < uj_conv2d_backend_count(); b++) {
    const char* name = uj_conv2d_backend_name(b);
    CHECK(forward(&f, &f.x, &f.w, &f.b, &f.y, name) == (strncmp(name, "cud", 3) == 0 ? UJ_ERR_UNSUPPORTED : UJ_OK));
  }
  CHECK(uj_conv2d_backward_data(f.ctx, &f.d, &f.dy, &f.w, &f.dx, NULL) == UJ_OK);
  CHECK(uj_conv2d_backward_filter(f.ctx, &f.d, &f.x, &f.dy, &f.dw, &f.db, NULL) == UJ_OK);
  fixture_free(&f);
}

TEST(null_handles_and_desc_values) {
  fixture_t f;
  fixture_make(&f);
  EXPECT(&f, uj_conv2d(NULL, &f.d, &f.x, &f.w, NULL, &f.y, NULL), UJ_ERR_INVALID, "ctx is NULL", NULL);
  EXPECT(&f, uj_conv2d(f.ctx, NULL, &f.x, &f.w, NULL, &f.y, NULL), UJ_ERR_INVALID, "desc is NULL", NULL);
  EXPECT(&f, forward(&f, NULL, &f.w, NULL, &f.y, NULL), UJ_ERR_INVALID, "x is NULL", NULL);
  EXPECT(&f, forward(&f, &f.x, NULL, NULL, &f.y, NULL), UJ_ERR_INVALID, "w is NULL", NULL);
  EXPECT(&f, forward(&f, &f.x, &f.w, NULL, NULL, NULL), UJ_ERR_INVALID, "y is NULL", NULL);
  f.d.stride_h = 0;
  EXPECT(&f, forward(&f, &f.x, &f.w, NULL, &f.y, NULL), UJ_ERR_INVALID, "stride_h", ">= 1");
  f.d.stride_h = 1, f.d.pad_w = -1;
  EXPECT(&f, forward(&f, &f.x, &f.w, NULL, &f.y, NULL), UJ_ERR_INVALID, "pad_w", ">= 0");
  f.d.pad_w = 0;
  uj_tensor_t x = f.x;
  x.data = NULL;
  EXPECT(&f, forward(&f, &x, &f.w, NULL, &f.y, NULL), UJ_ERR_INVALID, "x has NULL data", NULL);
  EXPECT(&f, uj_conv2d_backward_data(NULL, &f.d, &f.dy, &f.w, &f.dx, NULL), UJ_ERR_INVALID, "ctx is NULL", NULL);
  EXPECT(&f, uj_conv2d_backward_data(f.ctx, &f.d, NULL, &f.w, &f.dx, NULL), UJ_ERR_INVALID, "dy is NULL", NULL);
  EXPECT(&f, uj_conv2d_backward_filter(f.ctx, &f.d, &f.x, &f.dy, NULL, NULL, NULL), UJ_ERR_INVALID, "dw is NULL",
         NULL);
  EXPECT(&f, uj_conv2d_backward_filter(f.ctx, NULL, &f.x, &f.dy, &f.dw, NULL, NULL), UJ_ERR_INVALID, "desc is NULL",
         NULL);
  fixture_free(&f);
}

TEST(wrong_ranks_dtypes_devices) {
  fixture_t f;
  fixture_make(&f);
  uj_tensor_t x = f.x, w = f.w, b = f.b, y = f.y;
  x.ndim = 3;
  EXPECT(&f, forward(&f, &x, &f.w, NULL, &f.y, NULL), UJ_ERR_SHAPE, "x must have rank 4 [N,H,W,C]", "got rank 3");
  w.ndim = 5;
  EXPECT(&f, forward(&f, &f.x, &w, NULL, &f.y, NULL), UJ_ERR_SHAPE, "w must have rank 4 [K,KH,KW,C]", NULL);
  y.ndim = 2;
  EXPECT(&f, forward(&f, &f.x, &f.w, NULL, &y, NULL), UJ_ERR_SHAPE, "y must have rank 4 [N,OH,OW,K]", NULL);
  b.ndim = 2;
  EXPECT(&f, forward(&f, &f.x, &f.w, &b, &f.y, NULL), UJ_ERR_SHAPE, "bias must have rank 1", NULL);
  x = f.x, x.dtype = UJ_I32;
  EXPECT(&f, forward(&f, &x, &f.w, NULL, &f.y, NULL), UJ_ERR_INVALID, "x has dtype i32", NULL);
  x = f.x, x.dtype = UJ_BF16;
  EXPECT(&f, forward(&f, &x, &f.w, NULL, &f.y, NULL), UJ_ERR_UNSUPPORTED, "x has dtype bf16",
         "no convolution backend takes bf16 or f16");
  w = f.w, w.dtype = UJ_F64;
  EXPECT(&f, forward(&f, &f.x, &w, NULL, &f.y, NULL), UJ_ERR_INVALID, "w is f64 but x is f32", NULL);
  y = f.y, y.dtype = UJ_F64;
  EXPECT(&f, forward(&f, &f.x, &f.w, NULL, &y, NULL), UJ_ERR_INVALID, "y is f64 but x is f32", NULL);
  b = f.b, b.dtype = UJ_F64;
  EXPECT(&f, forward(&f, &f.x, &f.w, &b, &f.y, NULL), UJ_ERR_INVALID, "bias is f64", NULL);
  w = f.w, w.device = UJ_CUDA;
  EXPECT(&f, forward(&f, &f.x, &w, NULL, &f.y, NULL), UJ_ERR_INVALID, "w is on cuda but x is on cpu", NULL);
  x = f.x, x.device = (uj_device_t)7;
  EXPECT(&f, forward(&f, &x, &f.w, NULL, &f.y, NULL), UJ_ERR_INVALID, "x has an unknown device 7", NULL);
  /* consistent tensors no backend serves (f64 on cuda without a GPU: the
   * CUDA backends are f32 only and ref needs the CUDA engine; nothing is
   * read, so host memory stands in for the device's): every reason given.
   * With a GPU, ref would run on them: the GPU tests cover that. */
  uj_tensor_t x64 = or_tensor(UJ_F64, 4, f.x.dims), w64 = or_tensor(UJ_F64, 4, f.w.dims);
  uj_tensor_t y64 = or_tensor(UJ_F64, 4, f.y.dims);
  x = x64, w = w64, y = y64;
  x.device = w.device = y.device = UJ_CUDA;
  if (!or_engine_available(UJ_ENGINE_CUDA)) {
    EXPECT(&f, forward(&f, &x, &w, NULL, &y, NULL), UJ_ERR_UNSUPPORTED, "no convolution backend can run this call",
           "backend cpu_winograd runs on cpu only, the tensors are on cuda");
    EXPECT(&f, forward(&f, &x, &w, NULL, &y, NULL), UJ_ERR_UNSUPPORTED, "no convolution backend can run this call",
           "backend cudnn takes f32 only, the tensors are f64");
    EXPECT(&f, forward(&f, &x, &w, NULL, &y, NULL), UJ_ERR_UNSUPPORTED, "no convolution backend can run this call",
           "backend ref is not available");
    uj_status_t named = forward(&f, &x, &w, NULL, &y, "ref");
    CHECK(named == UJ_ERR_DEVICE || named == UJ_ERR_UNSUPPORTED);
    CHECK(strstr(uj_last_error(), "backend ref is not available") != NULL);
  }
  or_tensor_free(&x64);
  or_tensor_free(&w64);
  or_tensor_free(&y64);
  fixture_free(&f);
}

TEST(sizes_that_disagree) {
  fixture_t f;
  fixture_make(&f);
  uj_tensor_t x = f.x, w = f.w, b = f.b, y = f.y;
  w.dims[3] = 4;
  EXPECT(&f, forward(&f, &f.x, &w, NULL, &f.y, NULL), UJ_ERR_SHAPE, "w axis 3 (C) has size 4, expected 3",
         "x axis 3 (C)");
  static const struct {
    int axis;
    const char* text;
  } y_axes[] = {{0, "y axis 0 (N) has size 2, expected 1"},
                {1, "y axis 1 (OH) has size 5, expected 4"},
                {2, "y axis 2 (OW) has size 6, expected 5"},
                {3, "y axis 3 (K) has size 5, expected 4"}};
  for (int a = 0; a < 4; a++) {
    y = f.y;
    y.dims[y_axes[a].axis] += 1;
    EXPECT(&f, forward(&f, &f.x, &f.w, NULL, &y, NULL), UJ_ERR_SHAPE, y_axes[a].text, NULL);
  }
  b.dims[0] = 5;
  EXPECT(&f, forward(&f, &f.x, &f.w, &b, &f.y, NULL), UJ_ERR_SHAPE, "bias axis 0 (K) has size 5, expected 4", NULL);
  x.dims[1] = 2; /* 2 + 2*0 < 3 */
  EXPECT(&f, forward(&f, &x, &f.w, NULL, &f.y, NULL), UJ_ERR_SHAPE, "the padded input is smaller than the filter",
         "x axis 1");
  x = f.x, x.dims[0] = 0;
  EXPECT(&f, forward(&f, &x, &f.w, NULL, &f.y, NULL), UJ_ERR_SHAPE, "x axis 0 (N) has size 0", ">= 1");
  w = f.w, w.dims[2] = -3;
  EXPECT(&f, forward(&f, &f.x, &w, NULL, &f.y, NULL), UJ_ERR_SHAPE, "w axis 2 (KW) has size -3", NULL);
  x = f.x, x.dims[0] = x.dims[1] = x.dims[2] = INT64_C(1) << 22;
  EXPECT(&f, forward(&f, &x, &f.w, NULL, &f.y, NULL), UJ_ERR_SHAPE, "x has too many elements", NULL);
  /* a pad near INT_MAX: the expected size and its formula in 64 bits */
  f.d.pad_h = 1 << 30;
  EXPECT(&f, forward(&f, &f.x, &f.w, NULL, &f.y, NULL), UJ_ERR_SHAPE, "y axis 1 (OH) has size 4, expected 2147483652",
         "(6 + 2147483648 - 3) / 1 + 1");
  f.d.pad_h = 0;
  /* backward data: dx gives the input sizes, dy must follow */
  uj_tensor_t dy = f.dy, dx = f.dx;
  dy.dims[0] = 2;
  EXPECT(&f, uj_conv2d_backward_data(f.ctx, &f.d, &dy, &f.w, &f.dx, NULL), UJ_ERR_SHAPE,
         "dy axis 0 (N) has size 2, expected 1", "dx axis 0 (N)");
  dx.dims[3] = 5;
  EXPECT(&f, uj_conv2d_backward_data(f.ctx, &f.d, &f.dy, &f.w, &dx, NULL), UJ_ERR_SHAPE,
         "w axis 3 (C) has size 3, expected 5", "dx axis 3 (C)");
  /* backward filter: dw gives the filter sizes */
  uj_tensor_t dw = f.dw, db = f.db;
  dw.dims[1] = 2;
  EXPECT(&f, uj_conv2d_backward_filter(f.ctx, &f.d, &f.x, &f.dy, &dw, NULL, NULL), UJ_ERR_SHAPE,
         "dy axis 1 (OH) has size 4, expected 5", NULL);
  db.dims[0] = 3;
  EXPECT(&f, uj_conv2d_backward_filter(f.ctx, &f.d, &f.x, &f.dy, &f.dw, &db, NULL), UJ_ERR_SHAPE,
         "dbias axis 0 (K) has size 3, expected 4", NULL);
  fixture_free(&f);
}

TEST(outputs_overlapping) {
  fixture_t f;
  fixture_make(&f);
  /* y inside x's memory: x is large enough to hold y */
  uj_tensor_t x = f.x, y = f.y;
  y.data = (char*)x.data + 4;
  int64_t x_before = or_tnumel(&f.x);
  double first = or_get(&f.x, 0);
  EXPECT(&f, forward(&f, &x, &f.w, NULL, &y, NULL), UJ_ERR_INVALID, "y shares memory with x", NULL);
  CHECK(or_tnumel(&f.x) == x_before && or_get(&f.x, 0) == first);
  uj_tensor_t b = f.b;
  b.data = f.y.data;
  EXPECT(&f, forward(&f, &f.x, &f.w, &b, &f.y, NULL), UJ_ERR_INVALID, "y shares memory with bias", NULL);
  /* dx [1,6,7,3] over a copy of w [4,3,3,3] in memory of their own, so
   * that where the allocator put dy cannot matter */
  float shared[126];
  memcpy(shared, f.w.data, sizeof(float) * 108);
  uj_tensor_t w_copy = f.w, dx = f.dx;
  w_copy.data = shared;
  dx.data = shared;
  EXPECT(&f, uj_conv2d_backward_data(f.ctx, &f.d, &f.dy, &w_copy, &dx, NULL), UJ_ERR_INVALID,
         "dx shares memory with w", NULL);
  CHECK(memcmp(shared, f.w.data, sizeof(float) * 108) == 0); /* nothing written */
  uj_tensor_t db = f.db;
  db.data = f.dw.data;
  EXPECT(&f, uj_conv2d_backward_filter(f.ctx, &f.d, &f.x, &f.dy, &f.dw, &db, NULL), UJ_ERR_INVALID,
         "outputs dw and dbias share memory", NULL);
  fixture_free(&f);
}

TEST(backend_names_and_capabilities) {
  fixture_t f;
  fixture_make(&f);
  EXPECT(&f, forward(&f, &f.x, &f.w, NULL, &f.y, "cpu_fast"), UJ_ERR_INVALID,
         "unknown convolution backend \"cpu_fast\"", "known: auto, ref, cpu_direct, cpu_winograd");
  /* 5x5 filter: Winograd is 3x3 only */
  int64_t wd[4] = {4, 5, 5, 3}, xd[4] = {1, 8, 9, 3}, yd[4] = {1, 4, 5, 4};
  uj_tensor_t w5 = or_tensor(UJ_F32, 4, wd), x5 = or_tensor(UJ_F32, 4, xd);
  EXPECT(&f, forward(&f, &x5, &w5, NULL, &f.y, "cpu_winograd"), UJ_ERR_UNSUPPORTED,
         "backend cpu_winograd takes 3x3 filters only, w is 5x5 (axes 1 and 2)", NULL);
  CHECK(f.y.dims[1] == yd[1]);
  /* stride 2: Winograd takes stride 1 */
  f.d.stride_w = 2;
  uj_tensor_t y2 = f.y;
  y2.dims[2] = 3;
  EXPECT(&f, forward(&f, &f.x, &f.w, NULL, &y2, "cpu_winograd"), UJ_ERR_UNSUPPORTED,
         "backend cpu_winograd takes strides up to 1", "stride_w 2");
  CHECK(forward(&f, &f.x, &f.w, NULL, &y2, "cpu_direct") == UJ_OK);
  f.d.stride_w = 1;
  /* f64: the hand-written backends are f32 only */
  uj_tensor_t x64 = or_tensor(UJ_F64, 4, f.x.dims), w64 = or_tensor(UJ_F64, 4, f.w.dims);
  uj_tensor_t y64 = or_tensor(UJ_F64, 4, f.y.dims);
  EXPECT(&f, forward(&f, &x64, &w64, NULL, &y64, "cpu_direct"), UJ_ERR_UNSUPPORTED,
         "backend cpu_direct takes f32 only, the tensors are f64", NULL);
  CHECK(forward(&f, &x64, &w64, NULL, &y64, NULL) == UJ_OK);
  CHECK(strcmp(uj_conv2d_last_backend(f.ctx), "ref") == 0);
  /* backward: the reference only */
  EXPECT(&f, uj_conv2d_backward_data(f.ctx, &f.d, &f.dy, &f.w, &f.dx, "cpu_direct"), UJ_ERR_UNSUPPORTED,
         "backend cpu_direct does not run backward data", NULL);
  EXPECT(&f, uj_conv2d_backward_filter(f.ctx, &f.d, &f.x, &f.dy, &f.dw, NULL, "cpu_winograd"), UJ_ERR_UNSUPPORTED,
         "backend cpu_winograd does not run backward filter", NULL);
  /* a failed call does not change which backend ran last */
  CHECK(strcmp(uj_conv2d_last_backend(f.ctx), "ref") == 0);
  or_tensor_free(&w5);
  or_tensor_free(&x5);
  or_tensor_free(&x64);
  or_tensor_free(&w64);
  or_tensor_free(&y64);
  fixture_free(&f);
}

TEST(listing_and_output_shape) {
  CHECK(uj_conv2d_backend_count() == 5);
  CHECK(uj_conv2d_backend_name(0) && strcmp(uj_conv2d_backend_name(0), "ref") == 0);
  CHECK(uj_conv2d_backend_name(1) && strcmp(uj_conv2d_backend_name(1), "cpu_direct") == 0);
  CHECK(uj_conv2d_backend_name(2) && strcmp(uj_conv2d_backend_name(2), "cpu_winograd") == 0);
  CHECK(uj_conv2d_backend_name(3) && strcmp(uj_conv2d_backend_name(3), "cudnn") == 0);
  CHECK(uj_conv2d_backend_name(4) && strcmp(uj_conv2d_backend_name(4), "cuda_winograd") == 0);
  CHECK(uj_conv2d_backend_name(-1) == NULL && uj_conv2d_backend_name(5) == NULL);
  CHECK(uj_conv2d_last_backend(NULL) == NULL);
  CHECK(uj_conv2d_forget(NULL, 0) == UJ_ERR_INVALID);
  fixture_t f;
  fixture_make(&f);
  int64_t dims[4] = {0};
  f.d.stride_h = 2, f.d.pad_h = 1, f.d.pad_w = 2;
  CHECK(uj_conv2d_output_shape(&f.d, &f.x, &f.w, dims) == UJ_OK);
  CHECK(dims[0] == 1 && dims[1] == (6 + 2 - 3) / 2 + 1 && dims[2] == 7 + 4 - 3 + 1 && dims[3] == 4);
  CHECK(uj_conv2d_output_shape(&f.d, &f.x, &f.w, NULL) == UJ_ERR_INVALID);
  uj_tensor_t w = f.w;
  w.dims[3] = 2;
  CHECK(uj_conv2d_output_shape(&f.d, &f.x, &w, dims) == UJ_ERR_SHAPE);
  CHECK(strstr(uj_last_error(), "uj_conv2d_output_shape: w axis 3 (C)") != NULL);
  fixture_free(&f);
}

/* UOPJIT_CONV_BACKEND is read when a context makes its backend state. */
TEST(environment_forces_a_backend) {
  fixture_t f;
  fixture_make(&f);
  uj_ctx_free(f.ctx);
  setenv("UOPJIT_CONV_BACKEND", "cpu_direct", 1);
  f.ctx = uj_ctx_new();
  CHECK(forward(&f, &f.x, &f.w, NULL, &f.y, NULL) == UJ_OK);
  CHECK(uj_conv2d_last_backend(f.ctx) && strcmp(uj_conv2d_last_backend(f.ctx), "cpu_direct") == 0);
  uj_ctx_free(f.ctx);

  setenv("UOPJIT_CONV_BACKEND", "cpu_winograd", 1);
  f.ctx = uj_ctx_new();
  int64_t wd[4] = {4, 1, 1, 3}, yd[4] = {1, 6, 7, 4};
  uj_tensor_t w1 = or_tensor(UJ_F32, 4, wd), y1 = or_tensor(UJ_F32, 4, yd);
  memset(y1.data, PATTERN, bytes_of(&y1));
  CHECK(forward(&f, &f.x, &w1, NULL, &y1, NULL) == UJ_ERR_UNSUPPORTED);
  CHECK(strstr(uj_last_error(), "UOPJIT_CONV_BACKEND: backend cpu_winograd takes 3x3 filters only") != NULL);
  CHECK(untouched(&y1));
  CHECK(forward(&f, &f.x, &w1, NULL, &y1, "cpu_direct") == UJ_OK); /* a name still wins */
  uj_ctx_free(f.ctx);

  setenv("UOPJIT_CONV_BACKEND", "fastest", 1);
  f.ctx = uj_ctx_new();
  EXPECT(&f, forward(&f, &f.x, &f.w, NULL, &f.y, NULL), UJ_ERR_INVALID, "UOPJIT_CONV_BACKEND=\"fastest\"",
         "is not valid: expected one of auto, ref, cpu_direct");
  EXPECT(&f, forward(&f, &f.x, &f.w, NULL, &f.y, "auto"), UJ_ERR_INVALID, "UOPJIT_CONV_BACKEND", NULL);
  CHECK(forward(&f, &f.x, &f.w, NULL, &f.y, "ref") == UJ_OK);
  uj_ctx_free(f.ctx);

  setenv("UOPJIT_CONV_BACKEND", "auto", 1);
  f.ctx = uj_ctx_new();
  CHECK(forward(&f, &f.x, &f.w, NULL, &f.y, NULL) == UJ_OK);
  CHECK(uj_conv2d_last_backend(f.ctx) && strcmp(uj_conv2d_last_backend(f.ctx), "ref") != 0);
  unsetenv("UOPJIT_CONV_BACKEND");
  or_tensor_free(&w1);
  or_tensor_free(&y1);
  fixture_free(&f);
}

TEST_MAIN()
