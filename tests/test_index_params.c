/* tests/test_index_params.c: hostile $params in index arithmetic.
 *
 * Index arithmetic wraps modulo 2^64 on every engine (ir/eval.c). The C
 * engine folds $params into its source as constants, where signed overflow
 * would be undefined: with $p = 2^62 gcc turned (i0 * $p) / $p into i0
 * while the interpreter and MIR wrapped. Each program here gathers x
 * through an index that overflows for large $p, on the C and MIR engines
 * against the interpreter, bit for bit, for values at and around the int64
 * limits (and compiles each as CUDA with NVRTC where it is present, the
 * values folded in: INT64_MIN has no C literal). One case is also checked
 * against wrapping arithmetic written out here, so that the interpreter is
 * not only agreed with but right.
 *
 * Sizes are the exception: an output of dA0 * $p elements must not wrap
 * to a small one. The library refuses such a size (UJ_ERR_SHAPE), and so
 * does the AOT C, compiled here with cc and loaded: its output_dims says
 * -1 where wrapping gave 0. */
#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engines_check.h"

extern char** environ;

#define N 8

/* y[i0] = x[index], i0 < dA0: a read out of range gives 0. */
static uj_program_t* gather_program(const char* index) {
  static const char* const shape[] = {"dA0"};
  static const char* const names[] = {"$p"};
  const char* idx[] = {index};
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_F32);
  uj_io_t y = uj_reindex(g, x, 1, shape, 1, &x, 1, idx);
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 1, names, 1, &y);
  uj_graph_free(g);
  return p;
}

static const char* const indices[] = {
    "(i0 * $p) / $p",           /* folds to i0 unless the product wraps */
    "(i0 + $p) / 4 - $p / 4",   /* the sum wraps for $p near INT64_MAX */
    "(i0 - $p) % 8",            /* the difference wraps for $p near INT64_MIN */
    "-(i0 * $p) / (-$p)",       /* negation of INT64_MIN */
    "i0 * $p * $p % 8 + i0 % 2", /* a product of products */
    "min(i0 * $p, 7) + max(-$p, 0) * 0",
};
#define NINDICES ((int)(sizeof indices / sizeof indices[0]))

static const int64_t hostile[] = {INT64_MAX, INT64_MIN, INT64_MIN + 1, INT64_MAX - 3, (int64_t)1 << 62,
                                  -((int64_t)1 << 62), 3037000500, ((int64_t)1 << 32) + 1, -1, 0, 1, 3};
#define NHOSTILE ((int)(sizeof hostile / sizeof hostile[0]))

TEST(hostile_params_agree_on_every_engine) {
  SKIP_IF(en_count() == 0, "no JIT engine available");
  HARNESS_SEED(0);
  int64_t n = N;
  uj_tensor_t x = or_tensor(UJ_F32, 1, &n), want = or_tensor(UJ_F32, 1, &n), got = or_tensor(UJ_F32, 1, &n);
  for (int i = 0; i < N; i++) ((float*)x.data)[i] = (float)(i + 1);
  const uj_tensor_t* in[] = {&x};
  for (int k = 0; k < NINDICES; k++) {
    uj_program_t* p = gather_program(indices[k]);
    CHECK(p != NULL);
    if (!p) continue;
    for (int v = 0; v < NHOSTILE; v++) {
      char what[160];
      snprintf(what, sizeof what, "y = x[%s], $p = %lld", indices[k], (long long)hostile[v]);
      uj_tensor_t* ref_out[] = {&want};
      if (!EN_RUN(what, "interp", en_interp(), p, in, 1, &hostile[v], 1, ref_out, 1)) continue;
      for (int e = 0; e < EN_NENGINES; e++) {
        uj_ctx_t* ctx = en_ctx(e);
        uj_tensor_t* outs[] = {&got};
        if (ctx && EN_RUN(what, en_engines[e].name, ctx, p, in, 1, &hostile[v], 1, outs, 1))
          EN_EXPECT_SAME(what, en_engines[e].name, &got, &want);
      }
    }
    uj_program_free(p);
  }
  or_tensor_free(&x), or_tensor_free(&want), or_tensor_free(&got);
}

/* (i0 * 2^62) / 2^62 with the product taken modulo 2^64: 0, 1, then
 * 2^63 = INT64_MIN and 3 * 2^62 (negative) give -2 and -1, out of range;
 * 4 * 2^62 wraps to 0. */
TEST(wrapped_product_reads_what_wrapping_arithmetic_says) {
  HARNESS_SEED(0);
  int64_t n = N, p62 = (int64_t)1 << 62;
  uj_program_t* p = gather_program(indices[0]);
  CHECK(p != NULL);
  if (!p) return;
  uj_tensor_t x = or_tensor(UJ_F32, 1, &n), y = or_tensor(UJ_F32, 1, &n);
  for (int i = 0; i < N; i++) ((float*)x.data)[i] = (float)(i + 1);
  double ref[N];
  for (int i = 0; i < N; i++) {
    int64_t wrapped = (int64_t)((uint64_t)i * (uint64_t)p62);
    int64_t q = wrapped / p62 - (wrapped % p62 != 0 && wrapped < 0); /* floor */
    ref[i] = q >= 0 && q < N ? (double)(q + 1) : 0.0;
  }
  CHECK(ref[1] == 2.0 && ref[2] == 0.0 && ref[3] == 0.0 && ref[4] == 1.0);
  const uj_tensor_t* in[] = {&x};
  uj_tensor_t* outs[] = {&y};
  for (int e = 0; e <= EN_NENGINES; e++) {
    uj_ctx_t* ctx = en_ctx(e);
    const char* name = e < EN_NENGINES ? en_engines[e].name : "interp";
    if (ctx && EN_RUN("y = x[(i0 * 2^62) / 2^62]", name, ctx, p, in, 1, &p62, 1, outs, 1))
      EN_EXPECT_CLOSE("y = x[(i0 * 2^62) / 2^62]", name, &y, ref, 0);
  }
  or_tensor_free(&x), or_tensor_free(&y);
  uj_program_free(p);
}

/* ---- AOT sizes ------------------------------------------------------------------------ */

typedef int (*output_dims_fn)(const int64_t* const* input_dims, const int64_t* params, int output, int64_t* dims);

/* Compiles the AOT C of p with cc into a shared object in dir and loads it;
 * NULL (and *so NULL) when there is no cc. */
static output_dims_fn load_aot(uj_program_t* p, const char* dir, void** so) {
  *so = NULL;
  uj_ctx_t* ctx = uj_ctx_new();
  char* src = uj_program_dump(ctx, p, UJ_FORWARD, UJ_DUMP_C_AOT, NULL);
  uj_ctx_free(ctx);
  CHECK(src != NULL);
  if (!src) return NULL;
  char c_path[256], so_path[256];
  snprintf(c_path, sizeof c_path, "%s/aot.c", dir);
  snprintf(so_path, sizeof so_path, "%s/aot.so", dir);
  FILE* f = fopen(c_path, "w");
  CHECK(f != NULL);
  if (f) fputs(src, f), fclose(f);
  free(src);
  char* argv[] = {"cc", "-std=c11", "-O1", "-shared", "-fPIC", "-o", so_path, c_path, NULL};
  pid_t pid;
  int status = -1;
  if (posix_spawnp(&pid, "cc", NULL, NULL, argv, environ) != 0) return NULL;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    CHECK(!"the AOT C compiles");
    return NULL;
  }
  *so = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
  CHECK(*so != NULL);
  return *so ? (output_dims_fn)(uintptr_t)dlsym(*so, "uopjit_kernel_output_dims") : NULL;
}

TEST(aot_refuses_sizes_the_library_refuses) {
  static const char* const shape[] = {"dA0 * $p"};
  static const char* const idx[] = {"i0 / $p"};
  static const char* const names[] = {"$p"};
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_F32);
  uj_io_t y = uj_reindex(g, x, 1, shape, 1, &x, 1, idx);
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 1, names, 1, &y);
  uj_graph_free(g);
  char dir[] = "/tmp/uopjit-aot-sizes-XXXXXX";
  CHECK(p && mkdtemp(dir));
  if (!p) return;
  void* so;
  output_dims_fn output_dims = load_aot(p, dir, &so);
  int64_t n = 4, in_dims[1] = {4};
  const int64_t* input_dims[] = {in_dims};
  float xv[4] = {0};
  uj_tensor_t tx = {xv, UJ_F32, UJ_CPU, 1, {4}};
  const uj_tensor_t* in[] = {&tx};
  /* 4 * 2^62 wraps to 0; 4 * 2^61 and 4 * -1 are out of int64 and negative */
  static const int64_t refused[] = {(int64_t)1 << 62, (int64_t)1 << 61, INT64_MAX, INT64_MIN, -1};
  for (int v = 0; v < 5; v++) {
    int ndim = -1;
    int64_t dims[UJ_MAX_DIMS] = {0};
    uj_status_t s = uj_program_shape(p, UJ_FORWARD, in, &refused[v], 0, &ndim, dims);
    if (s != UJ_ERR_SHAPE) printf("  $p = %lld: library %s\n", (long long)refused[v], uj_status_str(s));
    CHECK(s == UJ_ERR_SHAPE);
    if (output_dims) {
      int rank = output_dims(input_dims, &refused[v], 0, dims);
      if (rank != -1) printf("  $p = %lld: AOT rank %d, size %lld\n", (long long)refused[v], rank, (long long)dims[0]);
      CHECK(rank == -1);
    }
  }
  int64_t fine = 3, dims[UJ_MAX_DIMS] = {0};
  int ndim = 0;
  CHECK(uj_program_shape(p, UJ_FORWARD, in, &fine, 0, &ndim, dims) == UJ_OK && ndim == 1 && dims[0] == 3 * n);
  if (output_dims) CHECK(output_dims(input_dims, &fine, 0, dims) == 1 && dims[0] == 3 * n);
  if (so) dlclose(so);
  char path[64];
  snprintf(path, sizeof path, "%s/aot.c", dir), remove(path);
  snprintf(path, sizeof path, "%s/aot.so", dir), remove(path);
  rmdir(dir);
  uj_program_free(p);
}

EN_TEST_MAIN()
