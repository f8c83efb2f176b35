/* tests/test_cuda.c: what is particular to the GPU side, beyond the oracle
 * tests (which compile every program they run with NVRTC for sm_90, and
 * run it on the CUDA engine where there is a GPU):
 *
 *   without a GPU   the CUDA source's shape (no #include, extern "C"
 *                   kernels, $params folded or passed, the vector path (of
 *                   bf16/f16 tensors too), the block and grid reductions,
 *                   atomic scatter-adds); NVRTC
 *                   compiling it for sm_80 and sm_90 and reporting its log on a
 *                   compile error; the errors of uj_program_compile_cuda;
 *                   the plans of hand-built blocks the test programs never
 *                   produce (a serial block, a triangular inner loop, i32
 *                   vectors and i32 atomics), compiled with NVRTC;
 *   with a GPU      copies in every direction, elementwise chains on and
 *                   off the vector path (an unaligned view), every
 *                   reduction mode (whole tensor over the grid, few long
 *                   rows per block, many short rows per thread), argmax
 *                   ties, i32 sums, scatter-adds, in-place Adam, the
 *                   hand-built blocks against the interpreter, and a second
 *                   context finding the cubin in the disk cache.
 * Device tensors and runs that cannot reach a GPU are in
 * test_cuda_tensors.c; reductions merged by warp shuffles and the row
 * kernels of chains in test_cuda_rows.c. Tests that need NVRTC or a GPU skip with a message
 * when there is none. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../jit/cuda/cuda_emit.h"
#include "../jit/jit.h"
#include "cuda_check.h"
#include "../jit/cuda/cuda.h"

/* ---- the source ---- */

TEST(source_is_self_contained) {
  uj_program_t* p = parse("y = 1/(1+exp(-(a*x+b)))");
  if (!p) return;
  char* text = cuda_source(p, 1, 0);
  if (text) {
    CHECK(strstr(text, "#include") == NULL);
    CHECK(strstr(text, "extern \"C\" __global__") != NULL);
    CHECK(strstr(text, "uj_block_0(") != NULL);
    CHECK(strstr(text, "expf(") != NULL && strstr(text, "__expf") == NULL); /* the accurate exp */
    CHECK(strstr(text, "float4") != NULL);  /* the 16-byte vector path */
    CHECK(strstr(text, "uj_tail") != NULL); /* and its scalar tail */
  }
  free(text);
  uj_program_free(p);
}

/* y[i] = x[i + $k]: $k folded in when given, an argument p0 otherwise. */
TEST(source_folds_params) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_F32);
  static const char* const shape[] = {"dA0 - $k"};
  static const char* const index[] = {"i0 + $k"};
  uj_io_t y = uj_reindex(g, x, 1, shape, 1, &x, 1, index);
  static const char* const names[] = {"$k"};
  uj_program_desc_t d = {.input_count = 1, .inputs = &x, .param_count = 1, .params = names, .output_count = 1,
                         .outputs = &y};
  uj_program_t* p = NULL;
  CHECK(uj_program_new(g, &d, &p) == UJ_OK);
  uj_graph_free(g);
  if (!p) return;
  int64_t k = 12345;
  char* folded = uj_program_dump(NULL, p, UJ_FORWARD, UJ_DUMP_CUDA, &k);
  char* open = uj_program_dump(NULL, p, UJ_FORWARD, UJ_DUMP_CUDA, NULL);
  CHECK(folded && open);
  if (folded) CHECK(strstr(folded, "12345LL") != NULL && strstr(folded, "const uj_i64 p0") == NULL);
  if (open) CHECK(strstr(open, "const uj_i64 p0") != NULL && strstr(open, "12345") == NULL);
  free(folded);
  free(open);
  uj_program_free(p);
}

TEST(source_reduction_strategies) {
  /* a whole-tensor sum: the grid-wide merge with a ticket */
  uj_program_t* p = parse("s = sum(x)");
  char* text = p ? cuda_source(p, 2, 0) : NULL;
  if (text) {
    CHECK(strstr(text, "uj_mode") != NULL);
    CHECK(strstr(text, "atomicAdd(uj_ticket") != NULL);
    CHECK(strstr(text, "__syncthreads()") != NULL);
  }
  free(text);
  uj_program_free(p);
  /* row reductions: the same kernel serves all three modes */
  p = parse("e = exp(x - amax(x, 1)); y = e / sum(e, 1)");
  text = p ? cuda_source(p, 2, 0) : NULL;
  if (text) CHECK(strstr(text, "uj_mode == 1") != NULL);
  free(text);
  uj_program_free(p);
}

/* y[i, j] = x[j] for i < $n: its gradient adds the $n rows of dy into dx,
 * many iterations into each element. */
static uj_program_t* broadcast_program(void) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_F64);
  static const char* const shape[] = {"$n", "dA0"};
  static const char* const at[] = {"i1"};
  uj_io_t y = uj_reindex(g, x, 2, shape, 1, &x, 1, at);
  uj_io_t gy = uj_grad(g, y), gx = uj_grad(g, x);
  static const char* const names[] = {"$n"};
  uj_io_t ingrads[] = {gy, x};
  uj_program_desc_t d = {.input_count = 1, .inputs = &x, .param_count = 1, .params = names, .output_count = 1,
                         .outputs = &y, .ingrad_count = 2, .ingrads = ingrads, .outgrad_count = 1, .outgrads = &gx};
  uj_program_t* p = NULL;
  uj_status_t s = uj_program_new(g, &d, &p);
  if (s != UJ_OK) fprintf(stderr, "  broadcast program: %s\n", uj_last_error());
  uj_graph_free(g);
  return p;
}

TEST(source_scatter_add_is_atomic) {
  uj_program_t* p = broadcast_program();
  CHECK(p != NULL);
  if (!p) return;
  int64_t n = 5;
  char* text = uj_program_dump(NULL, p, UJ_BACKWARD, UJ_DUMP_CUDA, &n);
  CHECK(text != NULL);
  if (text) CHECK(strstr(text, "atomicAdd(&t") != NULL);
  free(text);
  uj_program_free(p);
}

/* Blocks of bf16/f16 tensors take the vector path: alone, 4 halves (8
 * bytes) per access; beside f32, 4 of each; beside f64, 2 of each; NVRTC
 * compiles each. */
TEST(source_half_vector_path) {
  static const struct {
    const char* src;
    uj_dtype_t in[3];
    const char *vector, *aligned;
  } cases[] = {
      {"p: f16\ng: f16\np = p - 0.01*g", {UJ_F16, UJ_F16}, "const ushort4 u0 = ((const ushort4*)t0)[uj_v];",
       "(uint64_t)t0 % 8 == 0"},
      {"p: bf16\nm: f32\ng: f32\nm = m - 0.01*g\np = m", {UJ_F32, UJ_F32}, "ushort4 w6;", "(uint64_t)t0 % 16 == 0"},
      {"x: f64\nz: bf16\ny = x * z", {UJ_F64, UJ_BF16}, "const ushort2 u1 = ((const ushort2*)t1)[uj_v];",
       "(uint64_t)t1 % 4 == 0"},
  };
  uj_ctx_t* ctx = uj_ctx_new();
  double data[16] = {0};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uj_program_t* p = parse(cases[i].src);
    if (!p) continue;
    char* text = uj_program_dump(NULL, p, UJ_FORWARD, UJ_DUMP_CUDA, NULL);
    CHECK(text != NULL);
    if (text && (!strstr(text, cases[i].vector) || !strstr(text, cases[i].aligned))) {
      fprintf(stderr, "  \"%s\": no \"%s\" or \"%s\" in:\n%s\n", cases[i].src, cases[i].vector, cases[i].aligned, text);
      CHECK(0);
    }
    free(text);
    if (have_nvrtc()) {
      uj_tensor_t t[3];
      const uj_tensor_t* in[3];
      int n = uj_program_io_count(p, 0);
      for (int k = 0; k < n && k < 3; k++) {
        t[k] = (uj_tensor_t){data, cases[i].in[k], UJ_CPU, 1, {10}};
        in[k] = &t[k];
      }
      uj_status_t s = uj_program_compile_cuda(ctx, p, UJ_FORWARD, in, n, NULL, 0, "sm_90", NULL, NULL);
      if (s != UJ_OK) fprintf(stderr, "  \"%s\": %s\n", cases[i].src, uj_last_error());
      CHECK(s == UJ_OK);
    }
    uj_program_free(p);
  }
  uj_ctx_free(ctx);
}

/* What an update computes from 0-d values alone (1 - b1) is computed in
 * f64 and rounded once where it meets a tensor (lang/build.c); the
 * kernel keeps its shape: one launch, the float4 path, the scalar read
 * once per thread. */
TEST(source_scalar_expressions_in_f64) {
  uj_program_t* p = parse("m = b1*m + (1-b1)*g");
  if (!p) return;
  float data[16] = {0};
  uj_tensor_t b1 = {data, UJ_F32, UJ_CPU, 0, {0}}, m = {data, UJ_F32, UJ_CPU, 1, {16}}, g = m;
  const uj_tensor_t* in[] = {&b1, &m, &g};
  int ndim = 0;
  int64_t dims[UJ_MAX_DIMS];
  CHECK(uj_program_shape(p, UJ_FORWARD, in, NULL, 0, &ndim, dims) == UJ_OK); /* builds for these inputs */
  char* text = uj_program_dump(NULL, p, UJ_FORWARD, UJ_DUMP_CUDA, NULL);
  CHECK(text != NULL);
  if (text) {
    int kernels = 0;
    for (const char* at = text; (at = strstr(at, "__global__")) != NULL; at++) kernels++;
    CHECK(kernels == 1);
    CHECK(strstr(text, "(float)((1.0 - (double)(") != NULL);
    CHECK(strstr(text, "float4") != NULL);
    CHECK(strstr(text, "(1.0f - ") == NULL); /* not in f32 */
    if (kernels != 1 || !strstr(text, "(float)((1.0 - (double)(")) fprintf(stderr, "%s\n", text);
  }
  free(text);
  uj_program_free(p);
}

/* ---- NVRTC ---- */

TEST(nvrtc_compiles_for_sm_80_and_sm_90) {
  SKIP_WITHOUT_NVRTC();
  static const char* const srcs[] = {
      "y = 1/(1+exp(-(a*x+b)))",
      "m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; p = p - lr*m/(sqrt(v)+eps)",
      "s = sum(x*x)",
      "e = exp(x - amax(x, 1)); y = e / sum(e, 1)",
      "y = where(x > 0, log(x), tanh(x)) + floor(x) * sin(x) - cos(x) ** 2",
      "_d = x - mean(x, 1); y = _d * rsqrt(mean(_d*_d, 1) + 0.00001)",
      /* every function of the op table, and the language's own */
      "y = tan(x) + erf(x) + erfc(x) + log1p(x) + expm1(x) + log2(x) + log10(x) + exp2(x) + sinh(x) + cosh(x)"
      " + asin(x) + acos(x) + atan(x) + asinh(x) + acosh(x) + atanh(x) + cbrt(x) + round(x) + sign(x) + ceil(x)"
      " + atan2(x, a) + hypot(x, a) + copysign(x, a) + x % a + fmod(x, a) + x // a + softplus(x)"
      " + clamp(x, -1, 1) + ((x > a) & (x < 1) | ~(x > 0)) + ones_like(x) + prod(x, 1) + sigmoid(x)",
      "x: f64; a: f64; y = erf(x) + atan2(x, a) + x % a + sign(x) + sigmoid(x) + round(x) + fmod(x, a)",
      "i: i32; j: i32; y = i % j + fmod(i, j) + i // j + sign(i) + round(i) + ceil(i); z = i / j",
  };
  uj_ctx_t* ctx = uj_ctx_new();
  double data[64] = {0};
  for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
    uj_program_t* p = parse(srcs[i]);
    if (!p) continue;
    uj_tensor_t t[8];
    const uj_tensor_t* in[8];
    int n = uj_program_io_count(p, 0);
    for (int k = 0; k < n; k++) {
      memset(&t[k], 0, sizeof t[k]);
      t[k].data = data, t[k].dtype = UJ_F32, t[k].ndim = 2, t[k].dims[0] = 3, t[k].dims[1] = 5;
      uj_program_input_dtype(p, k, &t[k].dtype); /* a hinted input's own */
      in[k] = &t[k];
    }
    for (int a = 0; a < 2; a++) {
      const char* arch = a ? "sm_90" : "sm_80";
      int kernels = -1;
      uj_status_t s = uj_program_compile_cuda(ctx, p, UJ_FORWARD, in, n, NULL, 0, arch, &kernels, NULL);
      if (s != UJ_OK) fprintf(stderr, "  \"%s\" for %s: %s\n", srcs[i], arch, uj_last_error());
      CHECK(s == UJ_OK);
      CHECK(kernels >= 1);
    }
    uj_program_free(p);
  }
  /* the backward pass of a broadcast: a scatter-add with atomics */
  uj_program_t* g = broadcast_program();
  if (g) {
    double x[4] = {0}, dy[12] = {0};
    uj_tensor_t tx = {x, UJ_F64, UJ_CPU, 1, {4}}, tg = {dy, UJ_F64, UJ_CPU, 2, {3, 4}};
    const uj_tensor_t* bin[] = {&tg, &tx};
    int64_t n = 3;
    int kernels = 0;
    CHECK(uj_program_compile_cuda(ctx, g, UJ_BACKWARD, bin, 2, &n, 1, "sm_90", &kernels, NULL) == UJ_OK);
    CHECK(kernels >= 2); /* zero-fill, then the scatter */
    uj_program_free(g);
  }
  uj_ctx_free(ctx);
}

TEST(nvrtc_compile_error_carries_the_log) {
  SKIP_WITHOUT_NVRTC();
  size_t size = 0;
  CHECK(jit_cuda_compile_source("extern \"C\" __global__ void k(float* a) { a[0] = 1.0f; }", "sm_90", &size) == UJ_OK);
  CHECK(size > 0);
  uj_status_t s = jit_cuda_compile_source("extern \"C\" __global__ void k(float* a) { a[0] = undeclared_qz; }", "sm_90",
                                          &size);
  CHECK(s == UJ_ERR_COMPILE);
  CHECK(strstr(uj_last_error(), "nvrtcCompileProgram") != NULL);
  CHECK(strstr(uj_last_error(), "NVRTC_ERROR_COMPILATION") != NULL);
  CHECK(strstr(uj_last_error(), "undeclared_qz") != NULL); /* from NVRTC's log */
}

/* The tests' batch check (jit/cuda/cuda_check.c): generated modules, whose
 * kernels and macros have the same names, compile together; a bad one
 * among them is named with its log. */
TEST(batch_check_names_the_source_that_fails) {
  SKIP_WITHOUT_NVRTC();
  static const char* const programs[] = {"y = x * sigmoid(1.702 * x)", "s = sum(x*x)", "y = exp(x - amax(x, -1))"};
  char* sources[4] = {0};
  for (int i = 0; i < 3; i++) {
    uj_program_t* p = parse(programs[i]);
    sources[i] = p ? cuda_source(p, i == 2 ? 2 : 1, 0) : NULL;
    uj_program_free(p);
    CHECK(sources[i] && strstr(sources[i], "uj_block_0") && strstr(sources[i], "#define "));
  }
  int failing = 99;
  CHECK(jit_cuda_check_sources((const char* const*)sources, 3, 90, &failing) == UJ_OK && failing == -1);
  /* the second one broken: an undeclared name where a statement was */
  const char* at = sources[1] ? strstr(sources[1], "__global__") : NULL;
  at = at ? strchr(at, '{') : NULL;
  if (at) {
    size_t head = (size_t)(at + 1 - sources[1]);
    sources[3] = malloc(strlen(sources[1]) + 64);
    if (sources[3]) sprintf(sources[3], "%.*s undeclared_qz = 1; %s", (int)head, sources[1], sources[1] + head);
  }
  const char* batch[3] = {sources[0], sources[3], sources[2]};
  uj_status_t s = sources[3] ? jit_cuda_check_sources(batch, 3, 90, &failing) : UJ_OK;
  CHECK(s == UJ_ERR_COMPILE && failing == 1);
  CHECK(strstr(uj_last_error(), "undeclared_qz") != NULL);
  for (int i = 0; i < 4; i++) free(sources[i]);
}

TEST(compile_cuda_errors) {
  uj_program_t* p = parse("y = x * 2");
  uj_ctx_t* ctx = uj_ctx_new();
  float v[4] = {0};
  uj_tensor_t x = {v, UJ_F32, UJ_CPU, 1, {4}};
  const uj_tensor_t* in[] = {&x};
  CHECK(uj_program_compile_cuda(NULL, p, UJ_FORWARD, in, 1, NULL, 0, "sm_90", NULL, NULL) == UJ_ERR_INVALID);
  CHECK(uj_program_compile_cuda(ctx, NULL, UJ_FORWARD, in, 1, NULL, 0, "sm_90", NULL, NULL) == UJ_ERR_INVALID);
  CHECK(uj_program_compile_cuda(ctx, p, UJ_FORWARD, in, 2, NULL, 0, "sm_90", NULL, NULL) == UJ_ERR_INVALID);
  if (have_nvrtc()) {
    CHECK(uj_program_compile_cuda(ctx, p, UJ_FORWARD, in, 1, NULL, 0, "compute_90", NULL, NULL) == UJ_ERR_INVALID);
    CHECK(strstr(uj_last_error(), "sm_XX") != NULL);
    CHECK(uj_program_compile_cuda(ctx, p, UJ_FORWARD, in, 1, NULL, 0, NULL, NULL, NULL) == UJ_ERR_INVALID);
    CHECK(uj_program_compile_cuda(ctx, p, UJ_FORWARD, in, 1, NULL, 0, "sm_1", NULL, NULL) == UJ_ERR_UNSUPPORTED);
    CHECK(strstr(uj_last_error(), "sm_1") != NULL);
    /* strictly sm_ and digits: no sign, space, leading zero, suffix, or
     * number that wraps around to a known one (4294967386 = 2^32 + 90) */
    static const char* const malformed[] = {"sm_4294967386", "sm_ 90", "sm_+90", "sm_-90", "sm_090", "sm_90 ",
                                            "sm_90a",        "sm_",    "sm_99990", "SM_90", " sm_90"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
      uj_status_t s = uj_program_compile_cuda(ctx, p, UJ_FORWARD, in, 1, NULL, 0, malformed[i], NULL, NULL);
      if (s != UJ_ERR_INVALID) fprintf(stderr, "  arch \"%s\": %s\n", malformed[i], uj_status_str(s));
      CHECK(s == UJ_ERR_INVALID);
      CHECK(strstr(uj_last_error(), "sm_XX") != NULL);
      size_t size = 0;
      CHECK(jit_cuda_compile_source("extern \"C\" __global__ void k(float* a) { a[0] = 1.0f; }", malformed[i], &size) ==
            UJ_ERR_INVALID);
    }
  } else {
    uj_status_t s = uj_program_compile_cuda(ctx, p, UJ_FORWARD, in, 1, NULL, 0, "sm_90", NULL, NULL);
    CHECK(s == UJ_ERR_UNSUPPORTED);
    CHECK(uj_last_error()[0] != '\0');
  }
  uj_ctx_free(ctx);
  uj_program_free(p);
}

/* ---- hand-built blocks: the strategies the test programs never need ---- *
 *
 *   block 0  for i0: t2[0] = t0[i0]              every iteration writes one element: SERIAL
 *   block 1  for i1 { c = 0; for i2 < i1 + 1: c += t0[i2]; t3[i1] = c }
 *                                                 prefix sums: THREADS, a triangular loop inside
 *   block 2  for i3: t4[i3] = 0                   an i32 zero fill: THREADS with int4 vectors
 *   block 3  for i4, i5: t4[i5] += t1[i4, i5]     i32 column sums as scatter-adds: atomicAdd on int */
static ir_func_t* hand_built(void) {
  ir_func_t* f = ir_func_new();
  if (!f) return NULL;
  int x = ir_add_tensor(f, UJ_F32, 1, IR_TENSOR_INPUT, 0), m = ir_add_tensor(f, UJ_I32, 2, IR_TENSOR_INPUT, 1);
  int last = ir_add_tensor(f, UJ_F32, 1, IR_TENSOR_OUTPUT, 0), pre = ir_add_tensor(f, UJ_F32, 1, IR_TENSOR_OUTPUT, 1);
  int col = ir_add_tensor(f, UJ_I32, 1, IR_TENSOR_OUTPUT, 2);
  f->tensors[x].dims[0] = ir_ix_dim(f, x, 0);
  f->tensors[m].dims[0] = ir_ix_dim(f, m, 0), f->tensors[m].dims[1] = ir_ix_dim(f, m, 1);
  f->tensors[last].dims[0] = ir_ix_const(f, 1);
  f->tensors[pre].dims[0] = ir_ix_dim(f, x, 0);
  f->tensors[col].dims[0] = ir_ix_dim(f, m, 1);
  ir_access_t a;
  /* block 0 */
  ir_block_t* b = ir_add_block(f);
  ir_loop_t* l = ir_add_loop(f, b, ir_ix_const(f, 0), ir_ix_dim(f, x, 0));
  ir_access_init(&a, x);
  a.nidx = 1, a.idx[0] = ir_ix_loop(f, l->id);
  ir_stmt_t* st = ir_add_stmt(f, l, IR_ST_STORE);
  st->value = ir_ex_load(f, &a);
  ir_access_init(&st->target, last);
  st->target.nidx = 1, st->target.idx[0] = ir_ix_const(f, 0);
  /* block 1 */
  b = ir_add_block(f);
  ir_loop_t* outer = ir_add_loop(f, b, ir_ix_const(f, 0), ir_ix_dim(f, x, 0));
  int c = ir_add_carried(f, outer, UJ_REDUCE_SUM, UJ_F32);
  int outer_id = outer->id;
  ir_loop_t* inner = ir_add_loop(f, b, ir_ix_const(f, 0), ir_ix_bin(f, IR_IX_ADD, ir_ix_loop(f, outer_id), ir_ix_const(f, 1)));
  ir_access_init(&a, x);
  a.nidx = 1, a.idx[0] = ir_ix_loop(f, inner->id);
  st = ir_add_stmt(f, inner, IR_ST_ACCUM);
  st->carried = c, st->value = ir_ex_load(f, &a);
  outer = &f->blocks[1].loops[0]; /* adding the inner loop may have moved it */
  st = ir_add_stmt(f, outer, IR_ST_STORE);
  st->value = ir_ex_carried(f, c, UJ_F32);
  ir_access_init(&st->target, pre);
  st->target.nidx = 1, st->target.idx[0] = ir_ix_loop(f, outer_id);
  /* block 2 */
  b = ir_add_block(f);
  l = ir_add_loop(f, b, ir_ix_const(f, 0), ir_ix_dim(f, m, 1));
  st = ir_add_stmt(f, l, IR_ST_STORE);
  st->value = ir_ex_const(f, UJ_I32, 0);
  ir_access_init(&st->target, col);
  st->target.nidx = 1, st->target.idx[0] = ir_ix_loop(f, l->id);
  /* block 3 */
  b = ir_add_block(f);
  int rows = ir_add_loop(f, b, ir_ix_const(f, 0), ir_ix_dim(f, m, 0))->id;
  l = ir_add_loop(f, b, ir_ix_const(f, 0), ir_ix_dim(f, m, 1));
  ir_access_init(&a, m);
  a.nidx = 2, a.idx[0] = ir_ix_loop(f, rows), a.idx[1] = ir_ix_loop(f, l->id);
  st = ir_add_stmt(f, l, IR_ST_SCATTER_ADD);
  st->value = ir_ex_load(f, &a);
  ir_access_init(&st->target, col);
  st->target.nidx = 1, st->target.idx[0] = ir_ix_loop(f, l->id);
  return f;
}

TEST(plans_of_hand_built_blocks) {
  ir_func_t* f = hand_built();
  CHECK(f != NULL);
  if (!f) return;
  uj_status_t s = ir_verify(f);
  if (s != UJ_OK) fprintf(stderr, "  %s\n", uj_last_error());
  CHECK(s == UJ_OK);
  jit_cu_plan_t plan[4];
  for (int b = 0; b < 4; b++) CHECK(jit_cu_plan(f, &f->blocks[b], &plan[b]) == UJ_OK);
  CHECK(plan[0].strategy == JIT_CU_SERIAL);
  CHECK(plan[1].strategy == JIT_CU_THREADS && plan[1].nouter == 1 && plan[1].vector == 0);
  CHECK(plan[2].strategy == JIT_CU_THREADS && plan[2].vector == 4);
  CHECK(plan[3].strategy == JIT_CU_THREADS && plan[3].nouter == 2 && plan[3].atomic && plan[3].atomic[4]);
  for (int b = 0; b < 4; b++) jit_cu_plan_release(&plan[b]);
  jit_cu_module_t m;
  CHECK(jit_cu_emit(f, NULL, &m) == UJ_OK);
  if (m.source) {
    CHECK(strstr(m.source, "if (blockIdx.x != 0 || threadIdx.x != 0) return;") != NULL);
    CHECK(strstr(m.source, "atomicAdd((int*)&t4") != NULL);
    CHECK(strstr(m.source, "int4") != NULL);
    if (have_nvrtc()) {
      size_t size = 0;
      s = jit_cuda_compile_source(m.source, "sm_90", &size);
      if (s != UJ_OK) fprintf(stderr, "  %s\n", uj_last_error());
      CHECK(s == UJ_OK && size > 0);
    }
  }
  jit_cu_module_release(&m);
  ir_func_free(f);
}

/* The hand-built function on the GPU against the interpreter, through the
 * engine's internal entry points (it is no program). */
TEST(gpu_hand_built_blocks) {
  SKIP_WITHOUT_GPU();
  ir_func_t* f = hand_built();
  uj_ctx_t* ctx = uj_ctx_new();
  jit_state_t* js = ctx ? jit_state(ctx) : NULL;
  CHECK(f && js);
  if (!f || !js) {
    ir_func_free(f), uj_ctx_free(ctx);
    return;
  }
  ir_buffer_t host[5], dev[5];
  uj_tensor_t gpu[5];
  memset(host, 0, sizeof host), memset(gpu, 0, sizeof gpu);
  host[0].dims[0] = 5000, host[1].dims[0] = 3001, host[1].dims[1] = 37;
  CHECK(ir_func_sizes(f, NULL, host) == UJ_OK);
  uint64_t st = 41;
  for (int t = 0; t < 5; t++) {
    uj_dtype_t dt = f->tensors[t].dtype;
    host[t].data = calloc((size_t)host[t].numel + 1, 4);
    for (int64_t i = 0; t < 2 && i < host[t].numel; i++) {
      if (dt == UJ_F32) ((float*)host[t].data)[i] = (float)harness_real(&st, -1, 1);
      else ((int32_t*)host[t].data)[i] = (int32_t)harness_int(&st, -2000000000, 2000000000); /* sums wrap */
    }
    CHECK(uj_tensor_alloc(ctx, UJ_CUDA, dt, f->tensors[t].ndim, host[t].dims, &gpu[t]) == UJ_OK);
    uj_tensor_t h = {host[t].data, dt, UJ_CPU, f->tensors[t].ndim, {0}};
    memcpy(h.dims, host[t].dims, sizeof h.dims);
    if (t < 2) CHECK(uj_tensor_copy(ctx, &gpu[t], &h) == UJ_OK);
    dev[t] = host[t];
    dev[t].data = gpu[t].data;
  }
  jit_cache_entry_t* k = NULL;
  uj_status_t s = jit_cuda_get(ctx, js, f, NULL, &k);
  if (s == UJ_OK) s = jit_cuda_launch(ctx, jit_cache_value(k), f, dev, NULL);
  jit_cache_release(js->cache, k);
  if (s == UJ_OK) s = uj_ctx_synchronize(ctx);
  if (s != UJ_OK) fprintf(stderr, "  %s\n", uj_last_error());
  CHECK(s == UJ_OK);
  CHECK(ir_interp_run(f, host, NULL) == UJ_OK);
  for (int t = 2; t < 5 && s == UJ_OK; t++) {
    void* got = calloc((size_t)host[t].numel + 1, 4);
    uj_tensor_t h = {got, f->tensors[t].dtype, UJ_CPU, f->tensors[t].ndim, {0}};
    memcpy(h.dims, host[t].dims, sizeof h.dims);
    CHECK(uj_tensor_copy(ctx, &h, &gpu[t]) == UJ_OK);
    /* the same additions in the same order (per thread), or wrapping i32 sums: identical */
    CHECK(memcmp(got, host[t].data, (size_t)host[t].numel * 4) == 0);
    free(got);
  }
  for (int t = 0; t < 5; t++) uj_tensor_free(ctx, &gpu[t]), free(host[t].data);
  uj_ctx_free(ctx);
  ir_func_free(f);
}

/* ---- with a GPU ---- */

TEST(gpu_copies_every_direction) {
  SKIP_WITHOUT_GPU();
  uj_ctx_t* ctx = uj_ctx_new();
  int64_t n = 1000003; /* odd: no whole number of vectors */
  uj_tensor_t h, back, d1, d2;
  CHECK(uj_tensor_alloc(ctx, UJ_CPU, UJ_F64, 1, &n, &h) == UJ_OK);
  CHECK(uj_tensor_alloc(ctx, UJ_CPU, UJ_F64, 1, &n, &back) == UJ_OK);
  CHECK(uj_tensor_alloc(ctx, UJ_CUDA, UJ_F64, 1, &n, &d1) == UJ_OK);
  CHECK(uj_tensor_alloc(ctx, UJ_CUDA, UJ_F64, 1, &n, &d2) == UJ_OK);
  CHECK(d1.device == UJ_CUDA && (uintptr_t)d1.data % 256 == 0);
  for (int64_t i = 0; i < n; i++) ((double*)h.data)[i] = (double)i * 0.5;
  CHECK(uj_tensor_copy(ctx, &d1, &h) == UJ_OK);
  CHECK(uj_tensor_copy(ctx, &d2, &d1) == UJ_OK);
  CHECK(uj_tensor_copy(ctx, &back, &d2) == UJ_OK);
  CHECK(memcmp(h.data, back.data, (size_t)n * 8) == 0);
  char name[128] = "";
  int arch = 0, sms = 0;
  CHECK(uj_ctx_device(ctx, name, sizeof name, &arch, &sms) == UJ_OK);
  CHECK(name[0] && arch >= 50 && sms > 0);
  printf("  device: %s, sm_%d, %d multiprocessors\n", name, arch, sms);
  CHECK(uj_tensor_free(ctx, &d1) == UJ_OK && uj_tensor_free(ctx, &d2) == UJ_OK);
  uj_tensor_free(ctx, &h), uj_tensor_free(ctx, &back);
  uj_ctx_free(ctx);
}

/* Runs p forward on the GPU (through staged copies) and on the
 * interpreter, and compares output 0 (and 1, 2 when there). */
static void gpu_against_interp(const char* what, uj_program_t* p, const uj_tensor_t* const* in, int nin,
                               uj_tensor_t* const* outs, int nout, double tol) {
  uj_ctx_t* gpu = uj_ctx_new();
  uj_ctx_t* ref = uj_ctx_new();
  CHECK(uj_ctx_set_engine(gpu, UJ_ENGINE_CUDA) == UJ_OK);
  CHECK(uj_ctx_set_engine(ref, UJ_ENGINE_INTERP) == UJ_OK);
  double* want[4] = {0};
  CHECK(uj_program_run(ref, p, UJ_FORWARD, in, nin, NULL, 0, outs, nout) == UJ_OK);
  for (int k = 0; k < nout; k++) want[k] = or_to_double(outs[k]), or_fill_sentinel(outs[k]);
  uj_status_t s = or_run_staged(gpu, p, UJ_FORWARD, in, nin, NULL, 0, outs, nout);
  if (s != UJ_OK) fprintf(stderr, "  %s: %s\n", what, uj_last_error());
  CHECK(s == UJ_OK);
  for (int k = 0; k < nout && s == UJ_OK; k++) {
    int64_t bad = or_first_mismatch(want[k], outs[k], tol);
    if (bad >= 0)
      fprintf(stderr, "  %s: output %d element %lld: %.9g, interpreter %.9g\n", what, k, (long long)bad,
              or_get(outs[k], bad), want[k][bad]);
    CHECK(bad < 0);
  }
  for (int k = 0; k < nout; k++) free(want[k]);
  uj_ctx_free(gpu);
  uj_ctx_free(ref);
}

/* Views that start one element into their GPU buffers are not 16-byte
 * aligned: the kernel must take the scalar path for all of it. */
static void sigmoid_on_shifted_views(uj_program_t* p, const uj_tensor_t* x, const uj_tensor_t* a, const uj_tensor_t* b,
                                     int64_t n) {
  uj_ctx_t* gpu = uj_ctx_new();
  uj_ctx_t* ref = uj_ctx_new();
  CHECK(uj_ctx_set_engine(gpu, UJ_ENGINE_CUDA) == UJ_OK && uj_ctx_set_engine(ref, UJ_ENGINE_INTERP) == UJ_OK);
  int64_t whole = n + 1;
  uj_tensor_t dx, dy, da, db, host_y = or_tensor(UJ_F32, 1, &whole), want = or_tensor(UJ_F32, 1, &n);
  CHECK(uj_tensor_alloc(gpu, UJ_CUDA, UJ_F32, 1, &whole, &dx) == UJ_OK);
  CHECK(uj_tensor_alloc(gpu, UJ_CUDA, UJ_F32, 1, &whole, &dy) == UJ_OK);
  CHECK(uj_tensor_alloc(gpu, UJ_CUDA, UJ_F32, 0, NULL, &da) == UJ_OK);
  CHECK(uj_tensor_alloc(gpu, UJ_CUDA, UJ_F32, 0, NULL, &db) == UJ_OK);
  CHECK(uj_tensor_copy(gpu, &dx, x) == UJ_OK && uj_tensor_copy(gpu, &da, a) == UJ_OK &&
        uj_tensor_copy(gpu, &db, b) == UJ_OK);
  uj_tensor_t vx = dx, vy = dy, hx = *x;
  vx.dims[0] = vy.dims[0] = hx.dims[0] = n;
  vx.data = (float*)dx.data + 1, vy.data = (float*)dy.data + 1, hx.data = (float*)x->data + 1;
  const uj_tensor_t* din[] = {&da, &vx, &db};
  uj_tensor_t* dout[] = {&vy};
  const uj_tensor_t* hin[] = {a, &hx, b};
  uj_tensor_t* hout[] = {&want};
  CHECK(uj_program_run(ref, p, UJ_FORWARD, hin, 3, NULL, 0, hout, 1) == UJ_OK);
  CHECK(uj_program_run(gpu, p, UJ_FORWARD, din, 3, NULL, 0, dout, 1) == UJ_OK);
  CHECK(uj_tensor_copy(gpu, &host_y, &dy) == UJ_OK);
  double* w = or_to_double(&want);
  uj_tensor_t got = host_y;
  got.dims[0] = n, got.data = (float*)host_y.data + 1;
  CHECK(or_first_mismatch(w, &got, OR_TOL_F32) < 0);
  free(w);
  uj_tensor_free(gpu, &dx), uj_tensor_free(gpu, &dy), uj_tensor_free(gpu, &da), uj_tensor_free(gpu, &db);
  or_tensor_free(&host_y), or_tensor_free(&want);
  uj_ctx_free(gpu);
  uj_ctx_free(ref);
}

TEST(gpu_elementwise_vector_and_scalar_paths) {
  SKIP_WITHOUT_GPU();
  uj_program_t* p = parse("y = 1/(1+exp(-(a*x+b)))");
  uint64_t st = 11;
  static const int64_t sizes[] = {1, 3, 4, 5, 1023, 4096, 1 << 20};
  for (size_t i = 0; p && i < sizeof sizes / sizeof sizes[0]; i++) {
    int64_t n = sizes[i], whole = n + 1;
    uj_tensor_t x = or_tensor(UJ_F32, 1, &whole), y = or_tensor(UJ_F32, 1, &n), a = or_tensor(UJ_F32, 0, NULL),
                b = or_tensor(UJ_F32, 0, NULL);
    or_fill_real(&st, &x, -4, 4), or_fill_real(&st, &a, 0.5, 2), or_fill_real(&st, &b, -1, 1);
    uj_tensor_t xs = x;
    xs.dims[0] = n;
    const uj_tensor_t* in[] = {&a, &xs, &b};
    uj_tensor_t* out[] = {&y};
    gpu_against_interp("sigmoid", p, in, 3, out, 1, OR_TOL_F32); /* aligned: the vector path and its tail */
    sigmoid_on_shifted_views(p, &x, &a, &b, n);
    or_tensor_free(&x), or_tensor_free(&y), or_tensor_free(&a), or_tensor_free(&b);
  }
  uj_program_free(p);
}

TEST(gpu_reduction_modes) {
  SKIP_WITHOUT_GPU();
  /* whole tensor (grid), few long rows (a block each), many short rows (a thread each) */
  static const int64_t shapes[][2] = {{1, 1 << 22}, {1000, 3000}, {3, 100000}, {200000, 3}, {7, 1}, {1, 100}};
  uj_program_t* sum = parse("s = sum(x, 1); m = amax(x, 1); n = amin(x, 1); a = mean(x, 1)");
  uj_program_t* all = parse("s = sum(x); m = amax(x)");
  uint64_t st = 21;
  for (size_t i = 0; sum && all && i < sizeof shapes / sizeof shapes[0]; i++) {
    uj_tensor_t x = or_tensor(UJ_F64, 2, shapes[i]);
    or_fill_real(&st, &x, -1, 1);
    int64_t rows[2] = {shapes[i][0], 1}, one[2] = {1, 1};
    uj_tensor_t o[4];
    uj_tensor_t* outs[4];
    for (int k = 0; k < 4; k++) o[k] = or_tensor(UJ_F64, 2, rows), outs[k] = &o[k];
    const uj_tensor_t* in[] = {&x};
    gpu_against_interp("row reductions", sum, in, 1, outs, 4, 1e-10);
    for (int k = 0; k < 4; k++) or_tensor_free(&o[k]);
    for (int k = 0; k < 2; k++) o[k] = or_tensor(UJ_F64, 2, one), outs[k] = &o[k];
    gpu_against_interp("whole-tensor reductions", all, in, 1, outs, 2, 1e-10);
    for (int k = 0; k < 2; k++) or_tensor_free(&o[k]);
    or_tensor_free(&x);
  }
  uj_program_free(sum);
  uj_program_free(all);
}

/* argmax over a long row with many equal maxima: the first one wins, however the threads split it. */
TEST(gpu_argmax_ties_and_i32_sums) {
  SKIP_WITHOUT_GPU();
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_F32), k = uj_input(g, 1, UJ_I32);
  int axis = 0;
  uj_io_t am = uj_reduce(g, UJ_REDUCE_ARGMAX, 1, &axis, x), an = uj_reduce(g, UJ_REDUCE_ARGMIN, 1, &axis, x);
  uj_io_t ks = uj_reduce(g, UJ_REDUCE_SUM, 1, &axis, k), km = uj_reduce(g, UJ_REDUCE_MAX, 1, &axis, k);
  uj_io_t ins[] = {x, k}, outs_n[] = {am, an, ks, km};
  uj_program_t* p = OR_PROGRAM(g, 2, ins, 0, NULL, 4, outs_n);
  uj_graph_free(g);
  static const int64_t sizes[] = {5, 300, 70000, 3000000};
  for (size_t i = 0; p && i < sizeof sizes / sizeof sizes[0]; i++) {
    int64_t n = sizes[i], one = 1;
    uj_tensor_t tx = or_tensor(UJ_F32, 1, &n), tk = or_tensor(UJ_I32, 1, &n);
    for (int64_t j = 0; j < n; j++) {
      or_set(&tx, j, (double)(j % 7)); /* maxima 6 at 6, 13, ...; minima 0 at 0, 7, ... */
      or_set(&tk, j, (double)((j * 2654435761u) % 2000001) - 1000000.0); /* wraps when summed */
    }
    or_set(&tx, n - 1, 6.0);
    uj_tensor_t o[4];
    uj_tensor_t* outs[4];
    for (int q = 0; q < 4; q++) o[q] = or_tensor(UJ_I32, 1, &one), outs[q] = &o[q];
    const uj_tensor_t* in[] = {&tx, &tk};
    gpu_against_interp("argmax, argmin, i32 sum and max", p, in, 2, outs, 4, 0);
    CHECK(or_get(&o[0], 0) == (n > 6 ? 6 : n - 1)); /* the first maximum */
    CHECK(or_get(&o[1], 0) == 0);                   /* the first minimum */
    for (int q = 0; q < 4; q++) or_tensor_free(&o[q]);
    or_tensor_free(&tx), or_tensor_free(&tk);
  }
  uj_program_free(p);
}

TEST(gpu_scatter_add_and_in_place_adam) {
  SKIP_WITHOUT_GPU();
  uj_program_t* g = broadcast_program();
  uj_ctx_t* gpu = uj_ctx_new();
  uj_ctx_t* ref = uj_ctx_new();
  CHECK(uj_ctx_set_engine(gpu, UJ_ENGINE_CUDA) == UJ_OK && uj_ctx_set_engine(ref, UJ_ENGINE_INTERP) == UJ_OK);
  uint64_t st = 31;
  int64_t nx = 17, rows = 100000, gdims[2] = {rows, nx};
  uj_tensor_t x = or_tensor(UJ_F64, 1, &nx), gy = or_tensor(UJ_F64, 2, gdims);
  or_fill_real(&st, &x, -1, 1), or_fill_real(&st, &gy, -1, 1);
  uj_tensor_t gx = or_tensor(UJ_F64, 1, &nx), want = or_tensor(UJ_F64, 1, &nx);
  const uj_tensor_t* bin[] = {&gy, &x};
  uj_tensor_t* wout[] = {&want};
  uj_tensor_t* gout[] = {&gx};
  if (g) {
    CHECK(uj_program_run(ref, g, UJ_BACKWARD, bin, 2, &rows, 1, wout, 1) == UJ_OK);
    CHECK(or_run_staged(gpu, g, UJ_BACKWARD, bin, 2, &rows, 1, gout, 1) == UJ_OK);
    double* w = or_to_double(&want);
    CHECK(or_first_mismatch(w, &gx, 1e-10) < 0); /* 100000 atomic adds per element, in any order */
    free(w);
  }
  /* Adam in place: p, m, v are inputs and outputs at once */
  uj_program_t* adam = parse("m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; p = p - lr*m/(sqrt(v)+eps)");
  int64_t n = (1 << 20) + 3;
  uj_tensor_t t[8], r[8];
  static const char* const names[] = {"b1", "m", "g", "b2", "v", "p", "lr", "eps"};
  static const double scal[] = {0.9, 0, 0, 0.999, 0, 0, 1e-3, 1e-8};
  for (int i = 0; i < 8; i++) {
    int scalar = scal[i] != 0;
    t[i] = or_tensor(UJ_F32, scalar ? 0 : 1, &n);
    if (scalar) or_set(&t[i], 0, scal[i]);
    else or_fill_real(&st, &t[i], i == 4 ? 0 : -1, 1);
    r[i] = or_tensor(UJ_F32, t[i].ndim, &n);
    memcpy(r[i].data, t[i].data, (size_t)or_tnumel(&t[i]) * 4);
  }
  if (adam) {
    for (int i = 0; i < 8; i++) {
      const char* name = uj_program_io_name(adam, 0, i);
      CHECK(name && strcmp(name, names[i]) == 0);
    }
    const uj_tensor_t* in[8] = {&t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6], &t[7]};
    const uj_tensor_t* rin[8] = {&r[0], &r[1], &r[2], &r[3], &r[4], &r[5], &r[6], &r[7]};
    uj_tensor_t* out[3] = {&t[1], &t[4], &t[5]};
    uj_tensor_t* rout[3] = {&r[1], &r[4], &r[5]};
    CHECK(or_run_staged(gpu, adam, UJ_FORWARD, in, 8, NULL, 0, out, 3) == UJ_OK);
    CHECK(uj_program_run(ref, adam, UJ_FORWARD, rin, 8, NULL, 0, rout, 3) == UJ_OK);
    for (int q = 0; q < 3; q++) {
      double* w = or_to_double(rout[q]);
      CHECK(or_first_mismatch(w, out[q], OR_TOL_F32) < 0);
      free(w);
    }
  }
  for (int i = 0; i < 8; i++) or_tensor_free(&t[i]), or_tensor_free(&r[i]);
  or_tensor_free(&x), or_tensor_free(&gy), or_tensor_free(&gx), or_tensor_free(&want);
  uj_program_free(adam);
  uj_program_free(g);
  uj_ctx_free(gpu);
  uj_ctx_free(ref);
}

/* A second context finds the first one's cubin in the disk cache. */
TEST(gpu_cubin_from_disk) {
  SKIP_WITHOUT_GPU();
  char dir[] = "/tmp/uopjit-cuda-disk-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  const char* before = getenv("UOPJIT_CACHE_DIR");
  char* saved = before ? strdup(before) : NULL;
  setenv("UOPJIT_CACHE_DIR", dir, 1); /* read when a context's JIT state is made */
  uj_program_t* p = parse("y = x * 3 + 1");
  int64_t n = 1000;
  uj_tensor_t x = or_tensor(UJ_F32, 1, &n), y = or_tensor(UJ_F32, 1, &n);
  uint64_t st = 51;
  or_fill_real(&st, &x, -1, 1);
  const uj_tensor_t* in[] = {&x};
  uj_tensor_t* out[] = {&y};
  jit_cache_counts_t counts[2];
  memset(counts, 0, sizeof counts);
  for (int round = 0; round < 2 && p; round++) {
    uj_ctx_t* ctx = uj_ctx_new();
    CHECK(uj_ctx_set_engine(ctx, UJ_ENGINE_CUDA) == UJ_OK);
    CHECK(or_run_staged(ctx, p, UJ_FORWARD, in, 1, NULL, 0, out, 1) == UJ_OK);
    for (int64_t i = 0; i < n; i++) CHECK_NEAR(or_get(&y, i), or_get(&x, i) * 3 + 1, 1e-6);
    jit_state_t* js = jit_state(ctx);
    if (js) jit_cache_counts(js->cache, &counts[round]);
    if (round == 0) { /* a new program object, so that its memo does not answer */
      uj_program_free(p);
      p = parse("y = x * 3 + 1");
    }
    uj_ctx_free(ctx);
  }
  CHECK(counts[0].disk_stores == 1 && counts[0].disk_hits == 0);
  CHECK(counts[1].disk_hits == 1 && counts[1].disk_stores == 0);
  uj_program_free(p);
  or_tensor_free(&x), or_tensor_free(&y);
  if (saved) setenv("UOPJIT_CACHE_DIR", saved, 1);
  else unsetenv("UOPJIT_CACHE_DIR");
  free(saved);
  /* the cache is flat: its files, then the directory */
  DIR* d = opendir(dir);
  for (struct dirent* e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d) closedir(d);
  CHECK(rmdir(dir) == 0);
}

TEST_MAIN()
