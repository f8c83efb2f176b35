/* tests/test_cuda_rows.c: reductions on the GPU side, without a GPU:
 * merges across a CUDA block by warp shuffles (values and argmax indices),
 * and chains of row-by-row blocks as one row kernel, read from the
 * generated source and from the launch plan (jit/cuda/cuda_launch.c) for
 * the bench's shapes, and compiled with NVRTC for sm_80 and sm_90. What a
 * call queues on a (stand-in) driver is in test_cuda_host.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../jit/cuda/cuda_emit.h"
#include "../lang/parse.h"
#include "cuda_check.h"

/* Reductions merge across a CUDA block by warp shuffles in the
 * reduction's own dtype: no shared-memory tree, and nothing in double for
 * f32 but the grid partials (whole-tensor sums: one per CUDA block). Each
 * block merge takes at most three __syncthreads. */
TEST(source_reductions_merge_by_warp_shuffles) {
  static const char* const srcs[] = {
      "s = sum(x*x)",
      "e = exp(x - amax(x, 1)); y = e / sum(e, 1)",
      "_d = x - mean(x, 1); y = _d * rsqrt(mean(_d*_d, 1) + 0.00001)",
  };
  for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
    uj_program_t* p = parse(srcs[i]);
    char* text = p ? cuda_source(p, 2, 0) : NULL;
    if (text) {
      /* counted in the blocks' own kernels, before any row chain's (which
       * adds one __syncthreads between its blocks) */
      char* chain = strstr(text, "\n/* block 0: to ");
      if (chain) *chain = 0;
      int merges = 0, syncs = 0;
      for (const char* at = text; (at = strstr(at, "__shared__ float uj_sw")) != NULL; at++) merges++;
      for (const char* at = text; (at = strstr(at, "__syncthreads()")) != NULL; at++) syncs++;
      int good = strstr(text, "__shfl_down_sync(0xffffffffu, c") != NULL && strstr(text, "__shared__ double") == NULL &&
                 merges >= 1 && syncs <= 3 * merges + 2 * (int)(strstr(text, "uj_ticket") != NULL);
      if (!good) fprintf(stderr, "  %s: %d merges, %d __syncthreads\n%s\n", srcs[i], merges, syncs, text);
      CHECK(good);
    }
    free(text);
    uj_program_free(p);
  }
}

/* argmax over rows: the index goes through the shuffles beside the value;
 * compiled for sm_80 and sm_90. */
TEST(source_argmax_merges_value_and_index) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 2, UJ_F32);
  int axis1 = 1;
  uj_io_t y = uj_reduce(g, UJ_REDUCE_ARGMAX, 1, &axis1, x);
  uj_program_desc_t d = {.input_count = 1, .inputs = &x, .output_count = 1, .outputs = &y};
  uj_program_t* p = NULL;
  CHECK(uj_program_new(g, &d, &p) == UJ_OK);
  uj_graph_free(g);
  if (!p) return;
  char* text = uj_program_dump(NULL, p, UJ_FORWARD, UJ_DUMP_CUDA, NULL);
  CHECK(text && strstr(text, "long long uj_bi = __shfl_down_sync(0xffffffffu, c") != NULL);
  CHECK(text && strstr(text, "__shared__ double") == NULL);
  free(text);
  if (have_nvrtc()) {
    uj_ctx_t* ctx = uj_ctx_new();
    float data[16] = {0};
    uj_tensor_t t = {data, UJ_F32, UJ_CPU, 2, {4, 4}};
    const uj_tensor_t* in[] = {&t};
    for (int a = 0; a < 2; a++) {
      int kernels = 0;
      uj_status_t s = uj_program_compile_cuda(ctx, p, UJ_FORWARD, in, 1, NULL, 0, a ? "sm_90" : "sm_80", &kernels, NULL);
      if (s != UJ_OK) fprintf(stderr, "  %s\n", uj_last_error());
      CHECK(s == UJ_OK && kernels == 1);
    }
    uj_ctx_free(ctx);
  }
  uj_program_free(p);
}

/* Softmax, log-softmax, layernorm and RMSnorm along the last axis are one
 * launch of a row kernel (uj_chain_0, every block of the program, one CUDA
 * block per row) at the bench's sizes, read from the launch plan without a
 * GPU; rows of 16 elements, and fewer rows than SMs, launch block by block.
 * The
 * row kernel compiles for sm_80 and sm_90, and keeps softmax's chain-local
 * exp values in one row per CUDA block. */
TEST(source_row_chains_are_one_launch) {
  static const char* const srcs[] = {
      "_e = exp(x - amax(x, 1)); y = _e / sum(_e, 1)",
      "_s = x - amax(x, 1); y = _s - log(sum(exp(_s), 1))",
      "_d = x - mean(x, 1); y = _d * rsqrt(mean(_d*_d, 1) + 0.00001)",
      "y = x * rsqrt(mean(x*x, 1) + 0.000001) * g",
  };
  /* the bench's three shapes; rows of 16 elements; fewer rows than SMs */
  static const int64_t shapes[][2] = {{8192, 8192}, {65536, 1024}, {1024, 65536}, {100000, 16}, {4, 1 << 20}};
  for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
    uj_program_t* p = parse(srcs[i]);
    if (!p) continue;
    float data[64] = {0};
    uj_tensor_t x = {data, UJ_F32, UJ_CPU, 2, {4, 4}}, g = {data, UJ_F32, UJ_CPU, 1, {4}};
    const uj_tensor_t* in[] = {&x, &g};
    int ndim = 0;
    int64_t dims[UJ_MAX_DIMS];
    CHECK(uj_program_shape(p, UJ_FORWARD, in, NULL, 0, &ndim, dims) == UJ_OK); /* builds for these inputs */
    char* text = uj_program_dump(NULL, p, UJ_FORWARD, UJ_DUMP_CUDA, NULL);
    CHECK(text && strstr(text, "uj_chain_0(") != NULL);
    /* softmax's exp values are chain-local: a row per CUDA block */
    if (i == 0) CHECK(text && strstr(text, " + ((uj_i64)blockIdx.x - uj_g) * (uj_i64)(1 * d") != NULL);
    free(text);
    const ir_func_t* f = NULL;
    pn_special_t* sp = NULL; /* the build for these inputs */
    if (pn_specialize(p->parsed, UJ_FORWARD, in, uj_program_io_count(p, 0), &sp) == UJ_OK) f = uop_program_func(sp->program, UJ_FORWARD, 1);
    jit_cu_module_t m;
    CHECK(f && jit_cu_emit(f, NULL, &m) == UJ_OK);
    if (f) {
      for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        ir_buffer_t* buf = calloc((size_t)f->ntensors + 1, sizeof *buf);
        int64_t loops[256] = {0};
        for (int t = 0; t < f->ntensors; t++)
          if (f->tensors[t].role == IR_TENSOR_INPUT && f->tensors[t].io_index == 0) {
            buf[t].dims[0] = shapes[k][0], buf[t].dims[1] = shapes[k][1];
          } else if (f->tensors[t].role == IR_TENSOR_INPUT) {
            buf[t].dims[0] = shapes[k][1];
          }
        CHECK(ir_func_sizes(f, NULL, buf) == UJ_OK); /* the temporaries' sizes too, as a run has them */
        ir_env_t env = {f, buf, NULL, loops};
        jit_cu_launch_t launches[64];
        int count = -1;
        CHECK(f->next_loop_id <= 256 && f->nblocks <= 64);
        CHECK(jit_cu_launches(&m, f, &env, 132, launches, &count) == UJ_OK);
        int one = count == 1 && launches[0].chain >= 2 && launches[0].grid >= 1;
        int rows = shapes[k][1] >= 64 && shapes[k][0] >= 132;
        if (rows && !one)
          fprintf(stderr, "  %s at %lldx%lld: %d launches\n", srcs[i], (long long)shapes[k][0], (long long)shapes[k][1], count);
        CHECK(rows ? one : count > 1 && launches[0].chain == 0);
        /* softmax's exp values: at most 64 MiB of scratch rows, one per CUDA block */
        if (rows && i == 0) CHECK(launches[0].grid * shapes[k][1] * 4 <= ((int64_t)64 << 20) || launches[0].grid == 132);
        free(buf);
      }
      jit_cu_module_release(&m);
    }
    pn_release(sp);
    if (have_nvrtc()) {
      uj_ctx_t* ctx = uj_ctx_new();
      for (int a = 0; a < 2; a++) {
        int kernels = 0;
        uj_status_t s = uj_program_compile_cuda(ctx, p, UJ_FORWARD, in, uj_program_io_count(p, 0), NULL, 0,
                                                a ? "sm_90" : "sm_80", &kernels, NULL);
        if (s != UJ_OK) fprintf(stderr, "  %s: %s\n", srcs[i], uj_last_error());
        CHECK(s == UJ_OK);
      }
      uj_ctx_free(ctx);
    }
    uj_program_free(p);
  }
}

TEST_MAIN()
