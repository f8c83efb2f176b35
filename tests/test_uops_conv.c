/* tests/test_uops_conv.c: oracle tests of 2-D NHWC convolution written as
 * uops (reindex + mul + reduce + reindex), against a naive loop in double:
 * sizes from the filter's dims tied by [=], sizes from $kh/$kw params, zero
 * padding through out-of-range reads ($pad and a literal 1), stride 2
 * through index arithmetic (also with $pad), f32 and f64, on the interpreter, on AUTO and
 * on the emitted IR with the passes off. One program serves every random
 * shape: sizes are run-time values. Also uj_program_shape on the same
 * programs. */
#include "oracle.h"

#define CONV_ITERS 12

/* Random conv sizes: x [N,H,W,C], w [K,KH,KW,C] with the filter fitting the
 * (padded) input. */
static void conv_sizes(uint64_t* st, int pad, int64_t* xd, int64_t* wd) {
  xd[0] = harness_int(st, 1, 2);
  xd[1] = harness_int(st, 1, 7);
  xd[2] = harness_int(st, 1, 7);
  xd[3] = harness_int(st, 1, 3);
  wd[0] = harness_int(st, 1, 3);
  wd[1] = harness_int(st, 1, xd[1] + 2 * pad < 4 ? xd[1] + 2 * pad : 4);
  wd[2] = harness_int(st, 1, xd[2] + 2 * pad < 4 ? xd[2] + 2 * pad : 4);
  wd[3] = xd[3];
}

static void conv_case(or_conv_kind_t kind, uj_dtype_t dt, uint64_t seed) {
  HARNESS_SEED(seed);
  uint64_t st = seed;
  uj_program_t* p = or_conv_program(kind, dt);
  if (!p) return;
  double tol = dt == UJ_F32 ? OR_TOL_F32_SUM : OR_TOL_F64;
  for (int it = 0; it < CONV_ITERS; it++) {
    int has_pad = kind == OR_CONV_PAD || kind == OR_CONV_S2_PAD;
    int pad = has_pad ? (int)harness_int(&st, 0, 2) : kind == OR_CONV_PAD1 ? 1 : 0;
    int stride = kind == OR_CONV_STRIDE2 || kind == OR_CONV_S2_PAD ? 2 : 1;
    int64_t xd[4], wd[4], od[4];
    conv_sizes(&st, pad, xd, wd);
    uj_tensor_t x = or_tensor(dt, 4, xd), w = or_tensor(dt, 4, wd);
    or_fill_real(&st, &x, -1, 1);
    or_fill_real(&st, &w, -1, 1);
    int64_t OH = (xd[1] + 2 * pad - wd[1]) / stride + 1, OW = (xd[2] + 2 * pad - wd[2]) / stride + 1;
    double* ref = or_alloc_ref(xd[0] * OH * OW * wd[0]);
    or_conv2d_nhwc(&x, &w, stride, pad, ref, od);
    uj_tensor_t y = or_tensor(dt, 4, od);
    const uj_tensor_t* in[] = {&x, &w};
    uj_tensor_t* out[] = {&y};
    const double* refs[] = {ref};
    int64_t params[2] = {0, 0};
    int np = 0;
    if (kind == OR_CONV_PARAMS) params[0] = wd[1], params[1] = wd[2], np = 2;
    if (has_pad) params[0] = pad, np = 1;

    /* The shape the program infers matches the naive one. */
    int ndim = -1;
    int64_t dims[UJ_MAX_DIMS] = {0};
    uj_status_t s = uj_program_shape(p, UJ_FORWARD, in, np ? params : NULL, 0, &ndim, dims);
    CHECK(s == UJ_OK);
    if (s != UJ_OK) fprintf(stderr, "  shape: %s\n", uj_last_error());
    CHECK(ndim == 4);
    CHECK(ndim == 4 && dims[0] == od[0] && dims[1] == od[1] && dims[2] == od[2] &&
          dims[3] == od[3]);

    if (OR_RUN_CHECK(p, in, 2, np ? params : NULL, np, out, refs, 1, tol))
      fprintf(stderr, "  conv kind %d x [%lld,%lld,%lld,%lld] w [%lld,%lld,%lld,%lld] pad %d\n",
              (int)kind, (long long)xd[0], (long long)xd[1], (long long)xd[2], (long long)xd[3],
              (long long)wd[0], (long long)wd[1], (long long)wd[2], (long long)wd[3], pad);
    free(ref);
    or_tensor_free(&x);
    or_tensor_free(&w);
    or_tensor_free(&y);
  }
  uj_program_free(p);
}

TEST(conv_dims_f32) { conv_case(OR_CONV_DIMS, UJ_F32, 101); }
TEST(conv_dims_f64) { conv_case(OR_CONV_DIMS, UJ_F64, 102); }
TEST(conv_params_f32) { conv_case(OR_CONV_PARAMS, UJ_F32, 103); }
TEST(conv_params_f64) { conv_case(OR_CONV_PARAMS, UJ_F64, 104); }
TEST(conv_pad_f32) { conv_case(OR_CONV_PAD, UJ_F32, 105); }
TEST(conv_pad_f64) { conv_case(OR_CONV_PAD, UJ_F64, 106); }
TEST(conv_pad1_f32) { conv_case(OR_CONV_PAD1, UJ_F32, 107); }
TEST(conv_stride2_f32) { conv_case(OR_CONV_STRIDE2, UJ_F32, 108); }
TEST(conv_stride2_f64) { conv_case(OR_CONV_STRIDE2, UJ_F64, 109); }
TEST(conv_stride2_pad_f32) { conv_case(OR_CONV_S2_PAD, UJ_F32, 112); }
TEST(conv_stride2_pad_f64) { conv_case(OR_CONV_S2_PAD, UJ_F64, 113); }

/* A 1x1 filter is a matmul over channels; the program built once also runs
 * a filter as large as the input (output 1x1). */
TEST(conv_extreme_filters) {
  HARNESS_SEED(110);
  uint64_t st = 110;
  uj_program_t* p = or_conv_program(OR_CONV_DIMS, UJ_F64);
  if (!p) return;
  for (int it = 0; it < 6; it++) {
    int64_t xd[4] = {harness_int(&st, 1, 2), harness_int(&st, 1, 6), harness_int(&st, 1, 6),
                     harness_int(&st, 1, 4)};
    int64_t wd[4] = {harness_int(&st, 1, 3), 1, 1, xd[3]};
    if (it & 1) wd[1] = xd[1], wd[2] = xd[2];
    int64_t od[4];
    uj_tensor_t x = or_tensor(UJ_F64, 4, xd), w = or_tensor(UJ_F64, 4, wd);
    or_fill_real(&st, &x, -2, 2);
    or_fill_real(&st, &w, -2, 2);
    double* ref = or_alloc_ref(xd[0] * xd[1] * xd[2] * wd[0]);
    or_conv2d_nhwc(&x, &w, 1, 0, ref, od);
    uj_tensor_t y = or_tensor(UJ_F64, 4, od);
    const uj_tensor_t* in[] = {&x, &w};
    uj_tensor_t* out[] = {&y};
    const double* refs[] = {ref};
    OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 1, OR_TOL_F64);
    free(ref);
    or_tensor_free(&x);
    or_tensor_free(&w);
    or_tensor_free(&y);
  }
  uj_program_free(p);
}

/* conv followed by a bias add and relu in one program (a fused epilogue):
 * y = max(conv(x, w) + b, 0) with b [K] broadcast over [N,OH,OW,K]. */
TEST(conv_bias_relu) {
  HARNESS_SEED(111);
  uint64_t st = 111;
  uj_graph_t* g = uj_graph_new();
  uj_io_t x, w;
  uj_io_t c = or_conv_graph(g, OR_CONV_DIMS, UJ_F32, &x, &w);
  uj_io_t b = uj_input(g, 1, UJ_F32);
  const char* const shape[] = {"dA0", "dA1", "dA2", "dA3[=dB0]"};
  const char* const index[] = {"i3"};
  uj_io_t ss[] = {c, b};
  uj_io_t bb = uj_reindex(g, b, 4, shape, 2, ss, 1, index);
  uj_io_t sum = uj_binary(g, UJ_BINARY_ADD, c, bb);
  uj_io_t y = uj_binary(g, UJ_BINARY_MAX, sum, uj_const(g, 0.0));
  CHECK(y >= 0);
  uj_io_t ins[] = {x, w, b};
  uj_program_t* p = OR_PROGRAM(g, 3, ins, 0, NULL, 1, &y);
  uj_graph_free(g);
  if (!p) return;
  for (int it = 0; it < 8; it++) {
    int64_t xd[4], wd[4], od[4];
    conv_sizes(&st, 0, xd, wd);
    uj_tensor_t tx = or_tensor(UJ_F32, 4, xd), tw = or_tensor(UJ_F32, 4, wd);
    uj_tensor_t tb = or_tensor(UJ_F32, 1, wd);
    or_fill_real(&st, &tx, -1, 1);
    or_fill_real(&st, &tw, -1, 1);
    or_fill_real(&st, &tb, -1, 1);
    double* ref = or_alloc_ref(xd[0] * xd[1] * xd[2] * wd[0]);
    or_conv2d_nhwc(&tx, &tw, 1, 0, ref, od);
    int64_t n = or_numel(4, od);
    for (int64_t i = 0; i < n; i++) {
      double v = ref[i] + or_get(&tb, i % od[3]);
      ref[i] = v > 0 ? v : 0;
    }
    uj_tensor_t ty = or_tensor(UJ_F32, 4, od);
    const uj_tensor_t* in[] = {&tx, &tw, &tb};
    uj_tensor_t* out[] = {&ty};
    const double* refs[] = {ref};
    OR_RUN_CHECK(p, in, 3, NULL, 0, out, refs, 1, OR_TOL_F32_SUM);
    free(ref);
    or_tensor_free(&tx);
    or_tensor_free(&tw);
    or_tensor_free(&tb);
    or_tensor_free(&ty);
  }
  uj_program_free(p);
}

TEST_MAIN()
