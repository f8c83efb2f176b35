/* tests/test_conv.c: oracle tests of the convolution command (uj_conv2d and
 * its backward counterparts) and its backends:
 *
 *   - ref against naive loops in f64 (tests/conv_check.h), f32 and f64, on
 *     every engine configuration, over random shapes: odd sizes, 1x1
 *     images and filters, channel counts that are no multiple of a vector
 *     width, padding 0..2, strides 1..3, with and without bias;
 *   - every other backend of the table against ref run in f64 on the same
 *     values, within the scaled bound of conv_check.h (1e-6, and 1e-5 for
 *     Winograd), or UJ_ERR_UNSUPPORTED with the output untouched where the
 *     shape is outside its capability;
 *   - the CPU backends on every kernel variant this CPU runs
 *     (UOPJIT_CONV_ISA), on one and on three threads (bit for bit the
 *     same: the split never changes an element's sum), through both
 *     Winograd schedules, and on a layer of realistic size;
 *   - Winograd's error bound over larger channel counts (the worst ratio
 *     seen is printed), and each of its three transforms on its own against
 *     the matrices of winograd.h in double, to a bound of a few roundings
 *     (an end-to-end bound loose enough for any f32 Winograd would let a
 *     slightly wrong coefficient through);
 *   - the filter cache (filter_key, uj_conv2d_forget), auto's choice;
 *   - backward data and backward filter (with dbias) against naive loops.
 * Seeds are fixed and printed on failure (HARNESS_SEED). */
#include <stdlib.h>

#include "../backends/conv/cpu.h"
#include "../backends/conv/winograd.h"
#include "conv_check.h"

/* A context on the default engine, made with the environment as it is now. */
static uj_ctx_t* fresh_ctx(void) {
  uj_ctx_t* ctx = uj_ctx_new();
  CHECK(ctx != NULL);
  return ctx;
}

/* Runs backend on t (y filled with NaN first) and checks it against want;
 * a backend outside its capability must say so and leave y alone. */
static void check_backend(uj_ctx_t* ctx, const char* backend, cc_tensors_t* t, const double* want, uint64_t key) {
  or_fill_sentinel(&t->y);
  uj_conv2d_desc_t d = cc_desc(&t->s, key);
  uj_status_t s = uj_conv2d(ctx, &d, &t->x, &t->w, t->s.bias ? &t->b : NULL, &t->y, backend);
  if (s == UJ_ERR_UNSUPPORTED && backend) {
    int untouched = 1;
    for (int64_t i = 0; i < or_tnumel(&t->y); i++) untouched &= isnan(or_get(&t->y, i));
    CHECK(untouched);
    CHECK(strstr(uj_last_error(), backend) != NULL);
    return;
  }
  CHECK(s == UJ_OK);
  if (s != UJ_OK) {
    fprintf(stderr, "  %s: %s: %s\n", backend ? backend : "auto", uj_status_str(s), uj_last_error());
    cc_print(&t->s);
    return;
  }
  const char* ran = backend ? backend : uj_conv2d_last_backend(ctx);
  CHECK(ran != NULL);
  char what[96];
  snprintf(what, sizeof what, "backend %s (%s)", ran ? ran : "?", backend ? "named" : "auto");
  CC_CHECK(what, want, &t->y, cc_forward_bound(t, cc_tolerance(ran ? ran : "", t->dt)), &t->s);
}

/* ---- ref against naive loops ---- */

static void ref_case(uj_dtype_t dt, uint64_t seed, int iterations) {
  HARNESS_SEED(seed);
  uint64_t st = seed;
  for (int it = 0; it < iterations; it++) {
    cc_shape_t s = cc_random(&st, 9, 8, 3, 0);
    cc_tensors_t t;
    cc_tensors_make(&t, &s, dt, &st);
    double* want = cc_naive_forward(&t.x, &t.w, s.bias ? &t.b : NULL, &s);
    for (int e = 0; e < OR_NENGINES; e++) {
      uj_ctx_t* ctx = or_ctx(e);
      if (!ctx) continue;
      or_fill_sentinel(&t.y);
      uj_conv2d_desc_t d = cc_desc(&s, 0);
      uj_status_t st2 = cc_conv2d_staged(ctx, &d, &t.x, &t.w, s.bias ? &t.b : NULL, &t.y, "ref");
      CHECK(st2 == UJ_OK);
      if (st2 != UJ_OK) {
        fprintf(stderr, "  ref on %s: %s\n", or_configs[e].name, uj_last_error());
        continue;
      }
      char what[64];
      snprintf(what, sizeof what, "ref on %s", or_configs[e].name);
      CC_CHECK(what, want, &t.y, cc_forward_bound(&t, cc_tolerance("ref", dt)), &s);
    }
    free(want);
    cc_tensors_free(&t);
  }
}

TEST(ref_matches_naive_f32) { ref_case(UJ_F32, 701, 8); }
TEST(ref_matches_naive_f64) { ref_case(UJ_F64, 702, 8); }

/* ---- every backend against ref ---- */

static void backends_case(uint64_t seed, int iterations, int max_channels, int max_hw, int winograd_shapes) {
  HARNESS_SEED(seed);
  uint64_t st = seed;
  uj_ctx_t* ctx = fresh_ctx();
  for (int it = 0; ctx && it < iterations; it++) {
    cc_shape_t s = cc_random(&st, max_channels, max_hw, 3, winograd_shapes);
    cc_tensors_t t;
    cc_tensors_make(&t, &s, UJ_F32, &st);
    double* want = cc_ref_f64(ctx, &t);
    for (int b = 0; want && b < uj_conv2d_backend_count(); b++)
      check_backend(ctx, uj_conv2d_backend_name(b), &t, want, 0);
    if (want) check_backend(ctx, NULL, &t, want, 0);
    free(want);
    cc_tensors_free(&t);
  }
  uj_ctx_free(ctx);
}

TEST(backends_match_ref_any_shape) { backends_case(711, 30, 20, 9, 0); }
/* 3x3 stride 1: Winograd's shapes, with channel counts across the 16-lane
 * and 64-column boundaries of its transforms and panels */
TEST(backends_match_ref_3x3) { backends_case(712, 30, 70, 11, 1); }

/* Filters as large as the padded input (a 1x1 output), 1x1 filters, 1x1
 * images, the 7x7 stride-2 stem of an image network. */
TEST(backends_match_ref_extremes) {
  HARNESS_SEED(713);
  uint64_t st = 713;
  static const cc_shape_t shapes[] = {
      {2, 5, 4, 3, 6, 5, 4, 1, 1, 0, 0, 1}, {1, 3, 3, 17, 9, 3, 3, 1, 1, 0, 0, 0}, {3, 1, 1, 5, 4, 1, 1, 1, 1, 0, 0, 1},
      {1, 1, 1, 7, 5, 3, 3, 1, 1, 1, 1, 1}, {2, 7, 6, 33, 65, 1, 1, 2, 1, 0, 0, 1}, {1, 23, 21, 3, 8, 7, 7, 2, 2, 3, 3, 0},
      {1, 2, 9, 4, 3, 3, 3, 1, 1, 2, 0, 1},
  };
  uj_ctx_t* ctx = fresh_ctx();
  for (size_t i = 0; ctx && i < sizeof shapes / sizeof shapes[0]; i++) {
    cc_tensors_t t;
    cc_tensors_make(&t, &shapes[i], UJ_F32, &st);
    double* want = cc_naive_forward(&t.x, &t.w, t.s.bias ? &t.b : NULL, &t.s);
    for (int b = 0; b < uj_conv2d_backend_count(); b++) check_backend(ctx, uj_conv2d_backend_name(b), &t, want, 0);
    free(want);
    cc_tensors_free(&t);
  }
  uj_ctx_free(ctx);
}

/* ---- kernel variants, threads, schedules ---- */

/* The CPU backends on a context made with the environment as set. */
static void cpu_backends_on(const char* label, cc_tensors_t* t, const double* want, uj_tensor_t* keep_direct,
                            uj_tensor_t* keep_winograd) {
  uj_ctx_t* ctx = fresh_ctx();
  if (!ctx) return;
  static const char* const names[] = {"cpu_direct", "cpu_winograd"};
  for (int b = 0; b < 2; b++) {
    uj_tensor_t* keep = b ? keep_winograd : keep_direct;
    or_fill_sentinel(&t->y);
    uj_conv2d_desc_t d = cc_desc(&t->s, 0);
    uj_status_t s = uj_conv2d(ctx, &d, &t->x, &t->w, t->s.bias ? &t->b : NULL, &t->y, names[b]);
    if (s == UJ_ERR_UNSUPPORTED) continue;
    CHECK(s == UJ_OK);
    if (s != UJ_OK) {
      fprintf(stderr, "  %s %s: %s\n", label, names[b], uj_last_error());
      continue;
    }
    char what[96];
    snprintf(what, sizeof what, "%s %s", names[b], label);
    CC_CHECK(what, want, &t->y, cc_forward_bound(t, cc_tolerance(names[b], UJ_F32)), &t->s);
    size_t bytes = sizeof(float) * (size_t)or_tnumel(&t->y);
    if (keep && keep->data) {
      CHECK(memcmp(keep->data, t->y.data, bytes) == 0);
    } else if (keep) {
      *keep = or_tensor(UJ_F32, 4, t->y.dims);
      memcpy(keep->data, t->y.data, bytes);
    }
  }
  uj_ctx_free(ctx);
}

TEST(cpu_kernel_variants) {
  HARNESS_SEED(721);
  uint64_t st = 721;
  int count;
  const bk_conv_kernel_t* kernels = bk_conv_kernels(&count);
  CHECK(count >= 1 && strcmp(kernels[count - 1].isa, "generic") == 0);
  for (int v = 0; v < count; v++) {
    setenv("UOPJIT_CONV_ISA", kernels[v].isa, 1);
    uj_ctx_t* probe = fresh_ctx();
    bk_conv_state_t* state = probe ? bk_conv_state(probe) : NULL;
    CHECK(state && bk_conv_kernel_for(state) == &kernels[v]);
    uj_ctx_free(probe);
    for (int it = 0; it < 6; it++) {
      cc_shape_t s = cc_random(&st, 80, 10, 2, it % 2);
      cc_tensors_t t;
      cc_tensors_make(&t, &s, UJ_F32, &st);
      double* want = cc_naive_forward(&t.x, &t.w, s.bias ? &t.b : NULL, &s);
      cpu_backends_on(kernels[v].isa, &t, want, NULL, NULL);
      free(want);
      cc_tensors_free(&t);
    }
  }
  unsetenv("UOPJIT_CONV_ISA");
}

/* One thread and three (more than this machine may have): the same bits. */
TEST(cpu_threads_same_bits) {
  HARNESS_SEED(722);
  uint64_t st = 722;
  for (int it = 0; it < 4; it++) {
    cc_shape_t s = cc_random(&st, 70, 20, 2, it % 2);
    s.n = 2;
    cc_tensors_t t;
    cc_tensors_make(&t, &s, UJ_F32, &st);
    double* want = cc_naive_forward(&t.x, &t.w, s.bias ? &t.b : NULL, &s);
    uj_tensor_t direct = {0}, winograd = {0};
    setenv("UOPJIT_THREADS", "1", 1);
    cpu_backends_on("1 thread", &t, want, &direct, &winograd);
    setenv("UOPJIT_THREADS", "3", 1);
    cpu_backends_on("3 threads", &t, want, &direct, &winograd);
    unsetenv("UOPJIT_THREADS");
    or_tensor_free(&direct);
    or_tensor_free(&winograd);
    free(want);
    cc_tensors_free(&t);
  }
}

/* Winograd's three schedules (cpu_winograd.c), each on one and on two
 * threads, against ref in f64 and bit for bit the same on both: U within
 * 1 MiB (private either way), U of 2.4 MiB (shared on one thread, private
 * on two), U beyond 4 MiB (shared either way, 121 tiles in two blocks);
 * then few tiles: 9 with a small U (few on one thread, private on two),
 * 16 and 12 (two images) with U beyond 4 MiB (few either way), with edge
 * tiles of 1, 2 and 3 outputs and channel counts no multiple of 16. Tile
 * counts no multiple of the kernel's rows. */
TEST(winograd_schedules) {
  HARNESS_SEED(723);
  uint64_t st = 723;
  static const cc_shape_t shapes[] = {
      {2, 29, 31, 32, 40, 3, 3, 1, 1, 1, 1, 1},
      {2, 30, 27, 130, 100, 3, 3, 1, 1, 1, 0, 0},
      {1, 42, 41, 170, 170, 3, 3, 1, 1, 1, 1, 1},
      {1, 12, 11, 20, 24, 3, 3, 1, 1, 0, 0, 1},
      {1, 13, 15, 190, 170, 3, 3, 1, 1, 1, 1, 1},
      {2, 5, 10, 200, 150, 3, 3, 1, 1, 1, 1, 0},
  };
  uj_ctx_t* ref_ctx = fresh_ctx();
  for (size_t i = 0; ref_ctx && i < sizeof shapes / sizeof shapes[0]; i++) {
    cc_tensors_t t;
    cc_tensors_make(&t, &shapes[i], UJ_F32, &st);
    double* want = cc_ref_f64(ref_ctx, &t);
    uj_tensor_t direct = {0}, winograd = {0};
    setenv("UOPJIT_THREADS", "1", 1);
    if (want) cpu_backends_on("1 thread", &t, want, &direct, &winograd);
    setenv("UOPJIT_THREADS", "2", 1);
    if (want) cpu_backends_on("2 threads", &t, want, &direct, &winograd);
    unsetenv("UOPJIT_THREADS");
    or_tensor_free(&direct);
    or_tensor_free(&winograd);
    free(want);
    cc_tensors_free(&t);
  }
  uj_ctx_free(ref_ctx);
}

/* A layer of realistic size, against ref in f64. */
TEST(backends_match_ref_resnet_layer) {
  HARNESS_SEED(724);
  uint64_t st = 724;
  cc_shape_t s = {1, 14, 14, 64, 96, 3, 3, 1, 1, 1, 1, 1};
  cc_tensors_t t;
  cc_tensors_make(&t, &s, UJ_F32, &st);
  uj_ctx_t* ctx = fresh_ctx();
  double* want = ctx ? cc_ref_f64(ctx, &t) : NULL;
  for (int b = 0; want && b < uj_conv2d_backend_count(); b++) check_backend(ctx, uj_conv2d_backend_name(b), &t, want, 0);
  free(want);
  uj_ctx_free(ctx);
  cc_tensors_free(&t);
}

/* The documented Winograd bound over larger channel counts and values of
 * one sign (no cancellation to hide errors). */
TEST(winograd_error_bound) {
  HARNESS_SEED(725);
  uint64_t st = 725;
  uj_ctx_t* ctx = fresh_ctx();
  double worst_ratio = 0;
  for (int it = 0; ctx && it < 8; it++) {
    cc_shape_t s = cc_random(&st, 300, 9, 1, 1);
    cc_tensors_t t;
    cc_tensors_make(&t, &s, UJ_F32, &st);
    if (it % 2) { /* all positive: every term adds up */
      or_fill_real(&st, &t.x, 0, 1);
      or_fill_real(&st, &t.w, 0, 1);
    }
    double* want = cc_naive_forward(&t.x, &t.w, s.bias ? &t.b : NULL, &s);
    uj_conv2d_desc_t d = cc_desc(&s, 0);
    uj_status_t rs = uj_conv2d(ctx, &d, &t.x, &t.w, s.bias ? &t.b : NULL, &t.y, "cpu_winograd");
    CHECK(rs == UJ_OK);
    if (rs == UJ_OK) {
      double worst, scale = cc_forward_bound(&t, 1.0);
      cc_first_outside(want, &t.y, INFINITY, &worst);
      if (worst / scale > worst_ratio) worst_ratio = worst / scale;
      CC_CHECK("cpu_winograd bound", want, &t.y, CONV_TOL_WINOGRAD * scale, &s);
    }
    free(want);
    cc_tensors_free(&t);
  }
  printf("  worst |error| / (9C max|x| max|w|) seen: %.3g (bound %g)\n", worst_ratio, CONV_TOL_WINOGRAD);
  uj_ctx_free(ctx);
}

/* The matrices of winograd.h, in double, by the outputs e of a tile side
 * (4: a full tile, 1 to 3: an edge tile): B^T [position][input] for e + 2
 * inputs and A^T [output][position], zero at the positions e leaves out. */
static const double wino_bt[5][6][6] = {
    {{0}},
    {{4, -4, 0}, {0, -6, 0}, {0}, {0}, {0}, {0, -1, 1}},
    {{4, 0, -4, 0}, {0, -3, -3, 0}, {0, 3, -3, 0}, {0}, {0}, {0, -1, 0, 1}},
    {{4, -2, -4, 2, 0}, {0, -6, -3, 3, 0}, {0, 2, -3, 1, 0}, {0, -4, 0, 4, 0}, {0}, {0, 2, -1, -2, 1}},
    {{4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0}, {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0},
     {0, 4, 0, -5, 0, 1}}};
static const double wino_g[6][3] = {{1.0 / 4, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                    {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
static const double wino_at[5][4][6] = {{{0}},
                                        {{1, 1, 0, 0, 0, 1}},
                                        {{1, 1, 1, 0, 0, 0}, {0, 1, -1, 0, 0, 1}},
                                        {{1, 1, 1, 1, 0, 0}, {0, 1, -1, 2, 0, 0}, {0, 1, 1, 4, 0, 1}},
                                        {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}};

/* out [lr x rr] = L in R^T for L [lr x li], in [li x ri], R [rr x ri], the
 * rows of L and R 6 apart; mag the same with absolute values everywhere
 * (the size of the rounding errors to expect). */
static void sandwich(int lr, int li, const double* l, int rr, int ri, const double* r, const double* in, double* out,
                     double* mag) {
  for (int i = 0; i < lr; i++)
    for (int j = 0; j < rr; j++) {
      double v = 0, m = 0;
      for (int a = 0; a < li; a++)
        for (int b = 0; b < ri; b++) {
          v += l[i * 6 + a] * in[a * ri + b] * r[j * 6 + b];
          m += fabs(l[i * 6 + a] * in[a * ri + b] * r[j * 6 + b]);
        }
      out[i * rr + j] = v;
      mag[i * rr + j] = m;
    }
}

#define TRANSFORM_TOL 1e-6 /* relative to the magnitude sum: a few f32 roundings */

/* The input and output transforms built for kern's instruction set, on one
 * tile with er x ec outputs (an image of exactly that tile), against the
 * matrices. */
static void check_tile_transforms(const bk_conv_kernel_t* kern, int er, int ec, uint64_t* st) {
  const int C = 19, K = 21; /* 16 lanes and a partial group */
  const bk_wino_transforms_t* xf = bk_wino_transforms_for(kern->isa);
  CHECK(strcmp(xf->isa, kern->isa) == 0);
  bk_conv_problem_t p = {.n = 1, .h = er + 2, .w = ec + 2, .c = C, .k = K, .kh = 3, .kw = 3, .oh = er, .ow = ec,
                         .stride_h = 1, .stride_w = 1};
  bk_wino_geom_t g;
  bk_wino_geom_init(&g, &p, kern->cols);
  CHECK(g.tiles == 1);
  int64_t n, ty, tx;
  int rows, cols;
  bk_wino_tile(&g, 0, &n, &ty, &tx, &rows, &cols);
  CHECK(n == 0 && ty == 0 && tx == 0 && rows == er && cols == ec);
  float* x = malloc(sizeof(float) * (size_t)(p.h * p.w * C));
  float* v = malloc(sizeof(float) * (size_t)g.v_tile);
  float* m = malloc(sizeof(float) * (size_t)g.m_tile);
  float* y = malloc(sizeof(float) * (size_t)(er * ec * K));
  float* bias = malloc(sizeof(float) * K);
  for (int i = 0; i < p.h * p.w * C; i++) x[i] = (float)harness_real(st, -1, 1);
  for (int i = 0; i < g.m_tile; i++) m[i] = (float)harness_real(st, -1, 1);
  for (int i = 0; i < K; i++) bias[i] = (float)harness_real(st, -1, 1);
  double in[36], want[36], mag[36];
  xf->input(&g, x, 0, 1, v, 0);
  for (int c = 0; c < C; c++) {
    for (int i = 0; i < p.h * p.w; i++) in[i] = x[i * C + c];
    sandwich(6, er + 2, &wino_bt[er][0][0], 6, ec + 2, &wino_bt[ec][0][0], in, want, mag);
    for (int xi = 0; xi < 36; xi++) CHECK(fabs(v[xi * g.cs + c] - want[xi]) <= TRANSFORM_TOL * mag[xi]);
  }
  for (int c = C; c < g.cs; c++) CHECK(v[c] == 0.0f); /* padding lanes */
  xf->output(&g, m, 0, 0, 1, bias, y);
  for (int k = 0; k < K; k++) {
    for (int i = 0; i < 36; i++) in[i] = m[i * g.kp + k];
    double out[16], omag[16];
    sandwich(er, 6, &wino_at[er][0][0], ec, 6, &wino_at[ec][0][0], in, out, omag);
    for (int o = 0; o < er * ec; o++) CHECK(fabs(y[o * K + k] - (out[o] + bias[k])) <= TRANSFORM_TOL * (omag[o] + 1));
  }
  free(x);
  free(v);
  free(m);
  free(y);
  free(bias);
}

/* U from the filter transform built for kern's instruction set against G w G^T. */
static void check_filter_transform(const bk_conv_kernel_t* kern, uint64_t* st) {
  const int C = 19, K = 21;
  const bk_wino_transforms_t* xf = bk_wino_transforms_for(kern->isa);
  bk_conv_problem_t p = {.n = 1, .h = 6, .w = 6, .c = C, .k = K, .kh = 3, .kw = 3, .oh = 4, .ow = 4,
                         .stride_h = 1, .stride_w = 1};
  bk_wino_geom_t g;
  bk_wino_geom_init(&g, &p, kern->cols);
  float* w = malloc(sizeof(float) * (size_t)(K * 9 * C));
  float* u = malloc(sizeof(float) * 36 * (size_t)(g.panels * g.u_block));
  for (int i = 0; i < K * 9 * C; i++) w[i] = (float)harness_real(st, -1, 1);
  double in[9], want[36], mag[36];
  xf->filter(&g, w, 0, C, u);
  for (int k = 0; k < g.kp; k++)
    for (int c = 0; c < C; c++) {
      for (int i = 0; i < 9; i++) in[i] = k < K ? w[(k * 9 + i) * C + c] : 0.0;
      /* G's rows are 3 apart: spread them 6 apart for sandwich */
      double gm[36] = {0};
      for (int r = 0; r < 6; r++)
        for (int t = 0; t < 3; t++) gm[r * 6 + t] = wino_g[r][t];
      sandwich(6, 3, gm, 6, 3, gm, in, want, mag);
      for (int xi = 0; xi < 36; xi++) {
        float got = u[(xi * g.panels + k / g.cols) * g.u_block + c * g.cols + k % g.cols];
        CHECK(fabs(got - want[xi]) <= TRANSFORM_TOL * mag[xi]);
      }
    }
  free(w);
  free(u);
}

/* Every instruction set this CPU runs: each has transforms of its own. */
TEST(winograd_transforms_match_matrices) {
  HARNESS_SEED(726);
  uint64_t st = 726;
  int count;
  const bk_conv_kernel_t* kernels = bk_conv_kernels(&count);
  /* full tiles, and every edge kind on either side */
  static const int kinds[][2] = {{4, 4}, {3, 4}, {4, 2}, {1, 4}, {3, 3}, {2, 1}, {1, 3}};
  for (int v = 0; v < count; v++) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
      check_tile_transforms(&kernels[v], kinds[i][0], kinds[i][1], &st);
    check_filter_transform(&kernels[v], &st);
  }
}

/* Tiles are numbered by class (winograd.h): each class holds the tiles of
 * its kind, and the tiles that use a position are the run xi_lo..xi_hi. */
TEST(winograd_tile_classes) {
  HARNESS_SEED(727);
  static const int sizes[][3] = {{2, 14, 14}, {1, 7, 7}, {3, 5, 12}, {2, 8, 6}, {1, 1, 2}, {2, 16, 16}};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    bk_conv_problem_t p = {.n = sizes[s][0], .oh = sizes[s][1], .ow = sizes[s][2], .c = 1, .k = 1};
    bk_wino_geom_t g;
    bk_wino_geom_init(&g, &p, 16);
    int64_t th = (p.oh + 3) / 4, tw = (p.ow + 3) / 4;
    CHECK(g.tiles == p.n * th * tw && g.class_first[4] == g.tiles);
    char* seen = calloc((size_t)g.tiles, 1);
    static const int positions[5] = {0, 0x23, 0x27, 0x2f, 0x3f};
    for (int64_t t = 0; t < g.tiles; t++) {
      int64_t n, ty, tx;
      int rows, cols;
      bk_wino_tile(&g, t, &n, &ty, &tx, &rows, &cols);
      CHECK(n >= 0 && n < p.n && ty >= 0 && ty < th && tx >= 0 && tx < tw);
      CHECK(rows == (4 * ty + 4 <= p.oh ? 4 : p.oh - 4 * ty) && cols == (4 * tx + 4 <= p.ow ? 4 : p.ow - 4 * tx));
      int64_t id = (n * th + ty) * tw + tx;
      if (id >= 0 && id < g.tiles) {
        CHECK(!seen[id]);
        seen[id] = 1;
      }
      for (int xi = 0; xi < 36; xi++) {
        int uses = (positions[rows] >> (xi / 6) & 1) && (positions[cols] >> (xi % 6) & 1);
        CHECK(uses == (t >= g.xi_lo[xi] && t < g.xi_hi[xi]));
      }
    }
    free(seen);
  }
}

/* ---- filter cache and auto ---- */

TEST(filter_key_reuses_and_forgets) {
  HARNESS_SEED(731);
  uint64_t st = 731;
  cc_shape_t s = {1, 9, 10, 20, 70, 3, 3, 1, 1, 1, 1, 0};
  cc_tensors_t t;
  cc_tensors_make(&t, &s, UJ_F32, &st);
  uj_ctx_t* ctx = fresh_ctx();
  static const char* const names[] = {"cpu_direct", "cpu_winograd"};
  for (int b = 0; ctx && b < 2; b++) {
    uj_conv2d_desc_t plain = cc_desc(&s, 0), keyed = cc_desc(&s, 1234);
    uj_tensor_t first = or_tensor(UJ_F32, 4, t.y.dims);
    CHECK(uj_conv2d(ctx, &plain, &t.x, &t.w, NULL, &first, names[b]) == UJ_OK);
    CHECK(uj_conv2d(ctx, &keyed, &t.x, &t.w, NULL, &t.y, names[b]) == UJ_OK);
    CHECK(memcmp(first.data, t.y.data, sizeof(float) * (size_t)or_tnumel(&t.y)) == 0);
    /* new values under the same key: the kept filter is used (the caller
     * broke the promise), until the key is forgotten */
    uj_tensor_t w2 = or_tensor(UJ_F32, 4, t.w.dims);
    or_fill_real(&st, &w2, -1, 1);
    CHECK(uj_conv2d(ctx, &keyed, &t.x, &w2, NULL, &t.y, names[b]) == UJ_OK);
    CHECK(memcmp(first.data, t.y.data, sizeof(float) * (size_t)or_tnumel(&t.y)) == 0);
    CHECK(uj_conv2d_forget(ctx, 1234) == UJ_OK);
    CHECK(uj_conv2d(ctx, &keyed, &t.x, &w2, NULL, &t.y, names[b]) == UJ_OK);
    double* want = cc_naive_forward(&t.x, &w2, NULL, &s);
    CC_CHECK(names[b], want, &t.y, cc_forward_bound(&t, cc_tolerance(names[b], UJ_F32)), &s);
    free(want);
    /* the same key with other sizes is another entry, not the old one */
    cc_shape_t s2 = s;
    s2.k = 5;
    cc_tensors_t t2;
    cc_tensors_make(&t2, &s2, UJ_F32, &st);
    CHECK(uj_conv2d(ctx, &keyed, &t2.x, &t2.w, NULL, &t2.y, names[b]) == UJ_OK);
    want = cc_naive_forward(&t2.x, &t2.w, NULL, &s2);
    CC_CHECK("same key, other sizes", want, &t2.y, cc_forward_bound(&t2, cc_tolerance(names[b], UJ_F32)), &s2);
    free(want);
    cc_tensors_free(&t2);
    or_tensor_free(&w2);
    or_tensor_free(&first);
    CHECK(uj_conv2d_forget(ctx, 0) == UJ_OK);
  }
  uj_ctx_free(ctx);
  cc_tensors_free(&t);
}

TEST(auto_picks_a_capable_backend_and_remembers) {
  HARNESS_SEED(732);
  uint64_t st = 732;
  static const struct {
    cc_shape_t s;
    uj_dtype_t dt;
    const char* only; /* the one backend that qualifies, or NULL for several */
  } cases[] = {
      {{1, 12, 12, 16, 16, 3, 3, 1, 1, 1, 1, 1}, UJ_F32, NULL},
      {{1, 12, 12, 8, 8, 5, 5, 1, 1, 2, 2, 0}, UJ_F32, "cpu_direct"},
      {{1, 6, 6, 3, 4, 3, 3, 1, 1, 1, 1, 1}, UJ_F64, "ref"},
  };
  uj_ctx_t* ctx = fresh_ctx();
  CHECK(ctx && uj_conv2d_last_backend(ctx) == NULL);
  for (size_t i = 0; ctx && i < sizeof cases / sizeof cases[0]; i++) {
    cc_tensors_t t;
    cc_tensors_make(&t, &cases[i].s, cases[i].dt, &st);
    double* want = cc_naive_forward(&t.x, &t.w, t.s.bias ? &t.b : NULL, &t.s);
    check_backend(ctx, NULL, &t, want, 0);
    const char* first = uj_conv2d_last_backend(ctx);
    CHECK(first != NULL);
    if (cases[i].only) CHECK(first && strcmp(first, cases[i].only) == 0);
    else CHECK(first && strcmp(first, "ref") != 0);
    check_backend(ctx, NULL, &t, want, 0);
    CHECK(first && uj_conv2d_last_backend(ctx) && strcmp(first, uj_conv2d_last_backend(ctx)) == 0);
    free(want);
    cc_tensors_free(&t);
  }
  uj_ctx_free(ctx);
}

/* ---- backward ---- */

static void backward_case(uj_dtype_t dt, uint64_t seed, const char* backend) {
  HARNESS_SEED(seed);
  uint64_t st = seed;
  uj_ctx_t* ctx = fresh_ctx();
  for (int it = 0; ctx && it < 10; it++) {
    cc_shape_t s = cc_random(&st, 7, 7, 3, 0);
    cc_tensors_t t;
    cc_tensors_make(&t, &s, dt, &st);
    cc_grads_t g;
    cc_grads_make(&g, &t, &st);
    CHECK(g.want_dx && g.want_dw && g.want_db);
    uj_conv2d_desc_t d = cc_desc(&s, 0);
    double tol = dt == UJ_F64 ? CONV_TOL_F64 : CONV_TOL_DIRECT;
    uj_status_t r = uj_conv2d_backward_data(ctx, &d, &g.dy, &t.w, &g.dx, backend);
    CHECK(r == UJ_OK);
    if (r == UJ_OK && g.want_dx) CC_CHECK("backward data", g.want_dx, &g.dx, cc_dx_bound(&t, &g, tol), &s);
    else if (r != UJ_OK) fprintf(stderr, "  backward data: %s\n", uj_last_error());
    r = uj_conv2d_backward_filter(ctx, &d, &t.x, &g.dy, &g.dw, s.bias ? &g.db : NULL, backend);
    CHECK(r == UJ_OK);
    if (r == UJ_OK && g.want_dw && g.want_db) {
      CC_CHECK("backward filter", g.want_dw, &g.dw, cc_dw_bound(&t, &g, tol), &s);
      if (s.bias) CC_CHECK("backward bias", g.want_db, &g.db, cc_db_bound(&t, &g, tol), &s);
      else CHECK(isnan(or_get(&g.db, 0))); /* not asked for: not written */
    } else if (r != UJ_OK) {
      fprintf(stderr, "  backward filter: %s\n", uj_last_error());
    }
    cc_grads_free(&g);
    cc_tensors_free(&t);
  }
  uj_ctx_free(ctx);
}

TEST(backward_matches_naive_f32_auto) { backward_case(UJ_F32, 741, NULL); }
TEST(backward_matches_naive_f64_ref) { backward_case(UJ_F64, 742, "ref"); }

TEST_MAIN()
