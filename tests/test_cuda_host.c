/* tests/test_cuda_host.c: the CUDA engine's host side, on a machine without
 * a GPU. A stand-in for the driver (tests/fake_cuda.c, loaded before the
 * library looks for libcuda.so.1, whose soname it has) records what each
 * call queues; NVRTC is the real one, so every kernel is compiled, and none
 * runs. What a GPU run would cost beyond its kernels is pinned here:
 *
 *   - softmax over 8192x8192 is one launch, the row kernel uj_chain_0 with
 *     one CUDA block of 256 threads per row, as many as can be resident on
 *     the device's 132 SMs (1056), and allocates only its two per-row
 *     temporaries (64 KiB): its exp values live in the context's scratch, a
 *     row per CUDA block, not in 256 MiB allocated at every call;
 *   - rows of 16 elements launch block by block, no row kernel;
 *   - an Adam step on one tensor is one launch and allocates nothing: its
 *     0-d locals live in registers, not in device memory;
 *   - an AdamW step of the optimizer over 148 tensors is one launch and
 *     waits for the stream nowhere (its scalars and chunk table go up
 *     without a wait, its scalar block is freed in stream order);
 *   - no call synchronizes the stream.
 * Without NVRTC or the stand-in (a build without CUDA) every test skips. */
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../include/uopjit.h"
#include "../include/uopjit_optim.h"
#include "harness.h"

typedef struct {
  long launches, allocs, async_allocs, async_frees, frees, syncs, pushes, copies;
  long long async_bytes, up_bytes, down_bytes;
} fake_cuda_stats_t;

static void* fake;
static void (*stats_of)(fake_cuda_stats_t*);
static const char* (*launch_of)(long, unsigned*, unsigned*);

/* Before main, so that the library's first look for the driver finds it. */
__attribute__((constructor)) static void load_fake_driver(void) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 32);
  if (n <= 0) return;
  exe[n] = 0;
  char path[4200];
  snprintf(path, sizeof path, "%s/libfakecuda.so", dirname(exe));
  if (!(fake = dlopen(path, RTLD_NOW | RTLD_GLOBAL))) return;
  *(void**)&stats_of = dlsym(fake, "fake_cuda_stats");
  *(void**)&launch_of = dlsym(fake, "fake_cuda_launch");
}

static uj_ctx_t* cuda_ctx(void) {
  if (!fake || !stats_of || !launch_of) return NULL;
  uj_ctx_t* ctx = uj_ctx_new();
  if (ctx && (!uj_engine_available(ctx, UJ_ENGINE_CUDA) || uj_ctx_set_engine(ctx, UJ_ENGINE_CUDA) != UJ_OK)) {
    uj_ctx_free(ctx);
    return NULL;
  }
  return ctx;
}

#define SKIP_WITHOUT_FAKE(ctx) SKIP_IF(!(ctx), "no CUDA build, stand-in driver or NVRTC: skipped")

/* One run of p on device tensors of these shapes (0-d for ndim 0), after
 * one to compile; the stats of the second run alone. 0 when a run fails
 * (NVRTC missing, say: the caller skips). */
static int second_run(uj_ctx_t* ctx, const char* src, int n, const int* ndim, const int64_t (*dims)[2],
                      fake_cuda_stats_t* delta, long* first_launch) {
  uj_program_t* p = NULL;
  CHECK(uj_program_parse(src, &p) == UJ_OK);
  if (!p) return 0;
  uj_tensor_t t[8] = {{0}}, o[8] = {{0}};
  const uj_tensor_t* in[8];
  uj_tensor_t* out[8] = {0};
  int ok = 1;
  for (int i = 0; i < n && ok; i++) {
    ok = uj_tensor_alloc(ctx, UJ_CUDA, UJ_F32, ndim[i], dims[i], &t[i]) == UJ_OK;
    in[i] = &t[i];
  }
  int nout = uj_program_io_count(p, 1);
  for (int j = 0; j < nout && ok; j++) {
    /* an output named as an input is updated in place; others get memory */
    const char* name = uj_program_io_name(p, 1, j);
    out[j] = NULL;
    for (int i = 0; i < n; i++)
      if (!strcmp(name, uj_program_io_name(p, 0, i))) out[j] = &t[i];
    if (!out[j]) {
      int od = 0;
      int64_t odims[UJ_MAX_DIMS];
      ok = uj_program_shape(p, UJ_FORWARD, in, NULL, j, &od, odims) == UJ_OK &&
           uj_tensor_alloc(ctx, UJ_CUDA, UJ_F32, od, odims, &o[j]) == UJ_OK;
      out[j] = &o[j];
    }
  }
  fake_cuda_stats_t before, after;
  ok = ok && uj_program_run(ctx, p, UJ_FORWARD, in, n, NULL, 0, out, nout) == UJ_OK;
  if (!ok) fprintf(stderr, "  %s: %s\n", src, uj_last_error());
  stats_of(&before);
  ok = ok && uj_program_run(ctx, p, UJ_FORWARD, in, n, NULL, 0, out, nout) == UJ_OK;
  stats_of(&after);
  *first_launch = before.launches;
  delta->launches = after.launches - before.launches;
  delta->async_allocs = after.async_allocs - before.async_allocs;
  delta->async_bytes = after.async_bytes - before.async_bytes;
  delta->syncs = after.syncs - before.syncs;
  delta->allocs = after.allocs - before.allocs;
  /* the stand-in's device memory is host memory, which a context does not
   * take back as a driver would: freed here */
  for (int i = 0; i < n; i++) uj_tensor_free(ctx, &t[i]);
  for (int j = 0; j < nout; j++)
    if (out[j] == &o[j]) uj_tensor_free(ctx, &o[j]);
  uj_program_free(p);
  return ok;
}

TEST(softmax_is_one_row_kernel_launch_without_a_full_size_temporary) {
  uj_ctx_t* ctx = cuda_ctx();
  SKIP_WITHOUT_FAKE(ctx);
  static const int ndim[] = {2};
  static const int64_t dims[][2] = {{8192, 8192}};
  fake_cuda_stats_t d;
  long first = 0;
  int ran = second_run(ctx, "_e = exp(x - amax(x, -1)); y = _e / sum(_e, -1)", 1, ndim, dims, &d, &first);
  SKIP_IF(!ran, "the CUDA engine could not compile (NVRTC): skipped");
  unsigned grid = 0, block = 0;
  const char* name = launch_of(first, &grid, &block);
  printf("  softmax 8192x8192: %ld launches (%s, grid %u x %u), %ld allocations (%lld bytes), %ld syncs\n", d.launches,
         name ? name : "-", grid, block, d.async_allocs, d.async_bytes, d.syncs);
  CHECK(d.launches == 1);
  CHECK(name && !strcmp(name, "uj_chain_0") && grid == 8 * 132 && block == 256);
  CHECK(d.async_bytes <= 2 * 8192 * 4); /* the row max and row sum only */
  CHECK(d.allocs == 0 && d.syncs == 0);
  uj_ctx_free(ctx);
}

TEST(short_rows_launch_block_by_block) {
  uj_ctx_t* ctx = cuda_ctx();
  SKIP_WITHOUT_FAKE(ctx);
  static const int ndim[] = {2};
  static const int64_t dims[][2] = {{100000, 16}};
  fake_cuda_stats_t d;
  long first = 0;
  int ran = second_run(ctx, "_e = exp(x - amax(x, -1)); y = _e / sum(_e, -1)", 1, ndim, dims, &d, &first);
  SKIP_IF(!ran, "the CUDA engine could not compile (NVRTC): skipped");
  CHECK(d.launches > 1);
  for (long i = first; i < first + d.launches; i++) {
    unsigned grid, block;
    const char* name = launch_of(i, &grid, &block);
    CHECK(name && !strncmp(name, "uj_block_", 9));
  }
  uj_ctx_free(ctx);
}

TEST(an_adam_step_is_one_launch_and_allocates_nothing) {
  uj_ctx_t* ctx = cuda_ctx();
  SKIP_WITHOUT_FAKE(ctx);
  /* b1 m g b2 v p lr eps: the scalars 0-d */
  static const int ndim[] = {0, 1, 1, 0, 1, 1, 0, 0};
  static const int64_t dims[][2] = {{0}, {1000}, {1000}, {0}, {1000}, {1000}, {0}, {0}};
  fake_cuda_stats_t d;
  long first = 0;
  int ran = second_run(ctx, "m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; p = p - lr*m/(sqrt(v)+eps)", 8, ndim, dims,
                       &d, &first);
  SKIP_IF(!ran, "the CUDA engine could not compile (NVRTC): skipped");
  printf("  adam on 1000 elements: %ld launches, %ld allocations, %ld syncs\n", d.launches, d.async_allocs, d.syncs);
  CHECK(d.launches == 1 && d.async_allocs == 0 && d.allocs == 0 && d.syncs == 0);
  uj_ctx_free(ctx);
}

TEST(an_optimizer_step_over_148_tensors_is_one_launch_without_a_wait) {
  uj_ctx_t* ctx = cuda_ctx();
  SKIP_WITHOUT_FAKE(ctx);
  enum { G = 148 };
  static uj_tensor_t t[G][4];
  static uj_tensor_t* states[G][2];
  uj_optim_group_t groups[G];
  int ok = 1;
  for (int i = 0; i < G && ok; i++) {
    int64_t n = 768 * (1 + i % 4);
    for (int k = 0; k < 4 && ok; k++) ok = uj_tensor_alloc(ctx, UJ_CUDA, UJ_F32, 1, &n, &t[i][k]) == UJ_OK;
    states[i][0] = &t[i][2], states[i][1] = &t[i][3];
    groups[i] = (uj_optim_group_t){&t[i][0], &t[i][1], states[i], NULL};
  }
  uj_optim_t* opt = NULL;
  CHECK(ok && uj_optim_new("adamw", &opt) == UJ_OK);
  if (!opt) return;
  CHECK(uj_optim_set(opt, "lr", 1e-3) == UJ_OK && uj_optim_set(opt, "wd", 0.1) == UJ_OK);
  uj_status_t s = uj_optim_step(ctx, opt, groups, G, NULL); /* compiles */
  if (s != UJ_OK) fprintf(stderr, "  %s\n", uj_last_error());
  SKIP_IF(s != UJ_OK, "the CUDA engine could not compile (NVRTC): skipped");
  fake_cuda_stats_t before, after;
  stats_of(&before);
  for (int k = 0; k < 3; k++) CHECK(uj_optim_step(ctx, opt, groups, G, NULL) == UJ_OK);
  stats_of(&after);
  printf("  adamw over %d tensors, 3 steps: %ld launches, %ld synchronizations, %ld allocations that wait\n", G,
         after.launches - before.launches, after.syncs - before.syncs, after.allocs - before.allocs);
  CHECK(after.launches - before.launches == 3);
  CHECK(after.syncs - before.syncs == 0);
  CHECK(after.allocs - before.allocs == 0);
  uj_optim_free(opt);
  for (int i = 0; i < G; i++)
    for (int k = 0; k < 4; k++) uj_tensor_free(ctx, &t[i][k]);
  uj_ctx_free(ctx);
}

TEST_MAIN()
