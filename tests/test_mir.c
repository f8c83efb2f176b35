/* tests/test_mir.c: what is particular to the MIR engine, beyond the oracle
 * tests every engine runs (test_engines*.c): MIR's errors become statuses,
 * contexts are recycled after a bounded number of modules while kernels
 * from retired ones keep working, one kernel runs on many threads at once
 * while others compile, the text dump holds nothing of the user's, and no
 * instruction names one register in both inputs (jit/mir/mir_distinct.c). */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/uopjit.h"
#include "../jit/jit.h"
#include "harness.h"
#include "kernel_cache_check.h"
#include "../jit/mir/mir.h"

#define SKIP_WITHOUT_MIR() SKIP_IF(!uj_engine_available(NULL, UJ_ENGINE_MIR), "this build has no MIR")

TEST(mir_error_becomes_status) {
  SKIP_WITHOUT_MIR();
  CHECK(jit_mir_provoke_error() == UJ_ERR_COMPILE);
  CHECK(strstr(uj_last_error(), "engine mir: MIR error") != NULL);
  /* the process and the engine carry on */
  CHECK(jit_mir_provoke_error() == UJ_ERR_COMPILE);
}


TEST(mir_contexts_recycle) {
  SKIP_WITHOUT_MIR();
  enum { KERNELS = 150, N = 200 };
  uj_ctx_t* ctx = uj_ctx_new();
  uj_program_t* p = shifted_double();
  CHECK(ctx && p && uj_ctx_set_engine(ctx, UJ_ENGINE_MIR) == UJ_OK);
  if (!ctx || !p) return;
  float xv[N];
  for (int i = 0; i < N; i++) xv[i] = (float)i * 0.25f - 7.0f;
  int bad = 0;
  for (int64_t k = 0; k < KERNELS; k++) bad += !run_shift(ctx, p, xv, N, k);
  CHECK(bad == 0);
  jit_state_t* js = jit_state(ctx);
  jit_cache_counts_t counts;
  jit_cache_counts(js->cache, &counts);
  CHECK(counts.memory_entries == KERNELS);
  /* at most 64 modules per MIR context: 150 kernels took at least three */
  CHECK(jit_mir_generations() >= 3);
  /* kernels generated in retired contexts still run, from the cache */
  bad = 0;
  for (int64_t k = 0; k < KERNELS; k++) bad += !run_shift(ctx, p, xv, N, k);
  CHECK(bad == 0);
  jit_cache_counts(js->cache, &counts);
  CHECK(counts.memory_entries == KERNELS);
  uj_program_free(p);
  uj_ctx_free(ctx); /* frees every context; the leak checker of `make debug` watches */
}

typedef struct {
  uj_ctx_t* ctx;
  uj_program_t* p;
  const float* xv;
  int first_k, ok;
} worker_t;

static void* worker(void* arg) {
  worker_t* w = arg;
  w->ok = 1;
  for (int64_t k = w->first_k; k < w->first_k + 40; k++) w->ok &= run_shift(w->ctx, w->p, w->xv, 500, k % 7 + (k & 1) * 11);
  return NULL;
}

TEST(mir_threads_share_kernels) {
  SKIP_WITHOUT_MIR();
  uj_ctx_t* ctx = uj_ctx_new();
  uj_program_t* p = shifted_double();
  CHECK(ctx && p && uj_ctx_set_engine(ctx, UJ_ENGINE_MIR) == UJ_OK);
  if (!ctx || !p) return;
  float xv[500];
  for (int i = 0; i < 500; i++) xv[i] = sinf((float)i);
  worker_t w[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (worker_t){ctx, p, xv, i * 3, 0};
    CHECK(pthread_create(&th[i], NULL, worker, &w[i]) == 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK(w[i].ok);
  }
  uj_program_free(p);
  uj_ctx_free(ctx);
}

TEST(mir_dump_names_nothing_of_the_user) {
  SKIP_WITHOUT_MIR();
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("secret_out = exp(secret_in) * 3", &p) == UJ_OK);
  if (!p) return;
  uj_ctx_t* ctx = uj_ctx_new();
  char* text = uj_program_dump(ctx, p, UJ_FORWARD, UJ_DUMP_MIR, NULL);
  CHECK(text != NULL);
  if (text) {
    CHECK(strstr(text, "func") != NULL);
    CHECK(strstr(text, "secret") == NULL);
  }
  free(text);
  uj_ctx_free(ctx);
  uj_program_free(p);
}

/* ---- batched square roots (jit/mir/mir_batch.c) ---- */

/* Runs the parsed program on MIR and on the interpreter with every input
 * n values of dtype d (0-d for the names in `scalars`, each between spaces)
 * from seed, outputs shaped as the program says and given
 * their input's memory when they share its name (in place), and counts
 * output elements that differ by more than 2 ulp (NaN equals NaN; square
 * roots agree exactly, batched or not). -1 on failure. */
static long roots_mismatches(uj_program_t* p, uj_dtype_t d, int64_t n, const char* scalars, uint64_t seed,
                             int negatives) {
  enum { MAX_IO = 8 };
  int ni = uj_program_io_count(p, 0), no = uj_program_io_count(p, 1);
  if (ni > MAX_IO || no > MAX_IO) return -1;
  size_t esize = d == UJ_F64 ? 8 : 4;
  long bad = 0;
  unsigned char* result[2][MAX_IO] = {{0}};
  int64_t count[MAX_IO];
  for (int run = 0; run < 2 && bad >= 0; run++) {
    uj_ctx_t* ctx = uj_ctx_new();
    uj_ctx_set_engine(ctx, run ? UJ_ENGINE_INTERP : UJ_ENGINE_MIR);
    uj_tensor_t in[MAX_IO], out[MAX_IO];
    const uj_tensor_t* ip[MAX_IO];
    uj_tensor_t* op[MAX_IO];
    void* data[MAX_IO] = {0};
    for (int o = 0; o < no; o++) count[o] = 1;
    uint64_t state = seed;
    for (int i = 0; i < ni; i++) {
      const char* name = uj_program_io_name(p, 0, i);
      char word[64];
      snprintf(word, sizeof word, " %s ", name ? name : "");
      int scalar = name && strstr(scalars, word) != NULL;
      int64_t count = scalar ? 1 : n;
      data[i] = calloc((size_t)count + 1, esize);
      for (int64_t k = 0; k < count; k++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        double v = (double)(state >> 11) / 9007199254740992.0 * 4.0 + (negatives ? -1.0 : 0.01);
        if (d == UJ_F64) ((double*)data[i])[k] = v;
        else ((float*)data[i])[k] = (float)v;
      }
      in[i] = (uj_tensor_t){data[i], d, UJ_CPU, scalar ? 0 : 1, {scalar ? 0 : n}};
      ip[i] = &in[i];
    }
    for (int o = 0; o < no; o++) {
      void* mem = NULL;
      const char* name = uj_program_io_name(p, 1, o); /* NULL for a graph's unnamed outputs */
      for (int i = 0; i < ni && name; i++) {
        const char* input = uj_program_io_name(p, 0, i);
        if (input && !strcmp(name, input)) mem = data[i];
      }
      out[o] = (uj_tensor_t){NULL, d, UJ_CPU, 0, {0}};
      if (uj_program_shape(p, UJ_FORWARD, ip, NULL, o, &out[o].ndim, out[o].dims) != UJ_OK) bad = -1;
      for (int k = 0; k < out[o].ndim; k++) count[o] *= out[o].dims[k];
      result[run][o] = mem ? NULL : calloc((size_t)count[o] + 1, esize);
      out[o].data = mem ? mem : result[run][o];
      op[o] = &out[o];
    }
    if (bad < 0 || uj_program_run(ctx, p, UJ_FORWARD, ip, ni, NULL, 0, op, no) != UJ_OK) {
      printf("  %s\n", uj_last_error());
      bad = -1;
    }
    for (int o = 0; o < no; o++) {
      if (!result[run][o]) { /* in place: keep a copy of the input's memory */
        result[run][o] = malloc((size_t)count[o] * esize + 1);
        if (result[run][o]) memcpy(result[run][o], out[o].data, (size_t)count[o] * esize);
      }
    }
    for (int i = 0; i < ni; i++) free(data[i]);
    uj_ctx_free(ctx);
  }
  for (int o = 0; o < no && bad >= 0; o++)
    for (int64_t k = 0; k < count[o]; k++) {
      double a = d == UJ_F64 ? ((double*)result[0][o])[k] : ((float*)result[0][o])[k];
      double b = d == UJ_F64 ? ((double*)result[1][o])[k] : ((float*)result[1][o])[k];
      /* 2 ulp: the interpreter rounds 1/sqrt(x) once, the engines twice */
      double ulps = d == UJ_F64 ? 2.3e-16 : 1.2e-7;
      if (!(a != a && b != b) && !(fabs(a - b) <= 2 * ulps * fmax(fabs(a), fabs(b)))) bad++;
    }
  for (int run = 0; run < 2; run++)
    for (int o = 0; o < no; o++) free(result[run][o]);
  return bad;
}

/* Whether the MIR module built for p calls the batched root helper. */
static int dump_has(uj_program_t* p, const char* what) {
  uj_ctx_t* ctx = uj_ctx_new();
  char* text = uj_program_dump(ctx, p, UJ_FORWARD, UJ_DUMP_MIR, NULL);
  int found = text && strstr(text, what) != NULL;
  free(text);
  uj_ctx_free(ctx);
  return found;
}

TEST(mir_batched_roots_match_interpreter) {
  SKIP_WITHOUT_MIR();
  static const struct {
    const char* source;
    const char* scalars;
    int batched; /* whether a block must run in strips: halves a<N>, b<N> taking the scratch */
  } programs[] = {
      /* in place, locals feeding the root, 0-d inputs */
      {"m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; p = p - lr*m/(sqrt(v)+eps)", " b1 b2 lr eps ", 1},
      /* two sites, one an rsqrt, one of them shared */
      {"y = sqrt(x) + rsqrt(x + 1) * sqrt(x)", "", 1},
      /* a root of a value the block writes: computed from the new value */
      {"x = x * 2 + 1; y = sqrt(x)", "", 1},
      /* a root inside a root: not batched (pass 1 would need the inner one) */
      {"y = sqrt(sqrt(x) + 1)", "", 0},
      /* a reduction over every axis: fused with its operand, the roots are
       * taken inside the summing loop, one at a time */
      {"s = sum(sqrt(x))", "", 0},
  };
  static const int64_t sizes[] = {0, 1, 7, 255, 256, 257, 513, 1000};
  uint64_t seed = 0x5eedu;
  HARNESS_SEED(seed);
  for (size_t i = 0; i < sizeof programs / sizeof *programs; i++) {
    uj_program_t* p = NULL;
    CHECK(uj_program_parse(programs[i].source, &p) == UJ_OK);
    if (!p) continue;
    CHECK(dump_has(p, "p:scratch") == programs[i].batched);
    CHECK(!dump_has(p, "sqrtf") || !programs[i].batched); /* no root left to a call per element */
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
      long bad = roots_mismatches(p, UJ_F32, sizes[s], programs[i].scalars, seed + s, (int)(s % 2));
      CHECK(bad == 0);
      if (bad) printf("  %s, n = %lld: %ld elements differ\n", programs[i].source, (long long)sizes[s], bad);
    }
    uj_program_free(p);
  }
}

TEST(mir_batched_roots_f64) {
  SKIP_WITHOUT_MIR();
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_F64);
  uj_io_t y = uj_binary(g, UJ_BINARY_ADD, uj_unary(g, UJ_UNARY_SQRT, x), uj_unary(g, UJ_UNARY_RSQRT, x));
  uj_program_desc_t d = {.input_count = 1, .inputs = &x, .output_count = 1, .outputs = &y};
  uj_program_t* p = NULL;
  CHECK(uj_program_new(g, &d, &p) == UJ_OK);
  uj_graph_free(g);
  if (!p) return;
  CHECK(dump_has(p, "p:scratch"));
  CHECK(dump_has(p, "d:2048(")); /* the second root's part of the scratch, as doubles */
  CHECK(!dump_has(p, "sqrt"));
  static const int64_t sizes[] = {1, 255, 256, 257, 2000};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    long bad = roots_mismatches(p, UJ_F64, sizes[s], "", 77 + s, (int)(s % 2));
    CHECK(bad == 0);
    if (bad) printf("  f64 n = %lld: %ld elements differ\n", (long long)sizes[s], bad);
  }
  uj_program_free(p);
}

/* ---- one register in both inputs (jit/mir/mir_distinct.c) ---- */

/* N squares live at once, each of a value that dies at its square, and four
 * sums of their products: more values than registers, so MIR spills the
 * squares. Before the rewrite, coalescing made each square `fmul r, r, r`
 * and the allocator's rewrite of a spilled r wrote past a two-entry stack
 * array: a stack-protected MIR aborted ("stack smashing detected") at 14. */
enum { SQ_N = 16, SQ_OUT = 4 };

static char* squares_source(void) {
  size_t cap = 16384, len = 0;
  char* src = malloc(cap);
  if (!src) return NULL;
  src[0] = 0;
  for (int i = 0; i < SQ_N; i++)
    len += (size_t)snprintf(src + len, cap - len, "_s%d = x%d * x%d + x%d; _q%d = _s%d * _s%d; ", i, i, (i + 1) % SQ_N,
                            (i + 3) % SQ_N, i, i, i);
  for (int j = 0; j < SQ_OUT; j++) {
    len += (size_t)snprintf(src + len, cap - len, "y%d = ", j);
    for (int i = 0; i < SQ_N; i++)
      len += (size_t)snprintf(src + len, cap - len, "%s_q%d * _q%d", i ? " + " : "", (i + j) % SQ_N,
                              (i + 2 * j + 1) % SQ_N);
    len += (size_t)snprintf(src + len, cap - len, "; ");
  }
  return src;
}

/* The first instruction of the dump whose last two operands name one
 * register ("fmul r14, r12, r12"), copied into line; 0 when there is none. */
static int find_same_inputs(const char* text, char* line, size_t size) {
  for (const char* at = text; *at;) {
    const char* end = strchr(at, '\n');
    size_t n = end ? (size_t)(end - at) : strlen(at);
    char buf[256];
    if (n < sizeof buf) {
      memcpy(buf, at, n);
      buf[n] = 0;
      char* ops[3];
      int nops = 0;
      for (char* tok = strtok(buf, " \t,"); tok && nops < 3; tok = strtok(NULL, " \t,"))
        if (tok != buf + strspn(buf, " \t")) ops[nops++] = tok; /* skip the code */
      if (nops == 3 && ops[1][0] == 'r' && isdigit((unsigned char)ops[1][1]) && !strcmp(ops[1], ops[2]) &&
          strtok(NULL, " \t,") == NULL) {
        snprintf(line, size, "%.*s", (int)n, at);
        return 1;
      }
    }
    at += n + (end != NULL);
  }
  return 0;
}

TEST(mir_no_instruction_names_one_register_in_both_inputs) {
  SKIP_WITHOUT_MIR();
  char* src = squares_source();
  uj_program_t* p = NULL;
  CHECK(src && uj_program_parse(src, &p) == UJ_OK);
  free(src);
  if (!p) return;
  uj_ctx_t* ctx = uj_ctx_new();
  char* text = uj_program_dump(ctx, p, UJ_FORWARD, UJ_DUMP_MIR, NULL);
  CHECK(text != NULL);
  char line[256];
  CHECK(text && strstr(text, "fneg") != NULL); /* x * x became -(x * -x) */
  CHECK(text && !find_same_inputs(text, line, sizeof line));
  if (text && find_same_inputs(text, line, sizeof line)) printf("  %s\n", line);
  free(text);

  /* and the kernel builds and runs under register pressure, against the
   * formula in double */
  enum { N = 333 };
  float* data = malloc(sizeof(float) * N * (SQ_N + SQ_OUT));
  CHECK(data && uj_ctx_set_engine(ctx, UJ_ENGINE_MIR) == UJ_OK);
  if (!data) {
    uj_ctx_free(ctx);
    uj_program_free(p);
    return;
  }
  uj_tensor_t in[SQ_N], out[SQ_OUT];
  const uj_tensor_t* ip[SQ_N];
  uj_tensor_t* op[SQ_OUT];
  uint64_t state = 0x5eedu;
  HARNESS_SEED(state);
  for (int i = 0; i < SQ_N; i++) {
    char name[16];
    snprintf(name, sizeof name, "x%d", i);
    int slot = -1;
    for (int k = 0; k < SQ_N; k++)
      if (!strcmp(uj_program_io_name(p, 0, k), name)) slot = k;
    CHECK(slot >= 0);
    if (slot < 0) slot = i;
    float* x = data + (size_t)N * i;
    for (int k = 0; k < N; k++) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      x[k] = (float)((double)(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    in[slot] = (uj_tensor_t){x, UJ_F32, UJ_CPU, 1, {N}};
    ip[slot] = &in[slot];
  }
  for (int j = 0; j < SQ_OUT; j++) {
    out[j] = (uj_tensor_t){data + (size_t)N * (SQ_N + j), UJ_F32, UJ_CPU, 1, {N}};
    op[j] = &out[j];
  }
  CHECK(uj_program_io_count(p, 0) == SQ_N && uj_program_io_count(p, 1) == SQ_OUT);
  CHECK(uj_program_run(ctx, p, UJ_FORWARD, ip, SQ_N, NULL, 0, op, SQ_OUT) == UJ_OK);
  long bad = 0;
  for (int j = 0; j < SQ_OUT; j++) {
    const float* y = out[j].data;
    for (int k = 0; k < N; k++) {
      double q[SQ_N], ref = 0, mass = 0;
      for (int i = 0; i < SQ_N; i++) {
        const float* x = data + (size_t)N * i;
        double s = (double)x[k] * data[(size_t)N * ((i + 1) % SQ_N) + k] + data[(size_t)N * ((i + 3) % SQ_N) + k];
        q[i] = s * s;
      }
      for (int i = 0; i < SQ_N; i++) {
        double t = q[(i + j) % SQ_N] * q[(i + 2 * j + 1) % SQ_N];
        ref += t;
        mass += fabs(t);
      }
      /* f32 rounding of each of about 5 operations per term */
      if (!(fabs(y[k] - ref) <= 1e-5 * (mass + 1e-30))) bad++;
    }
  }
  CHECK(bad == 0);
  if (bad) printf("  %ld elements differ from the formula\n", bad);
  free(data);
  uj_ctx_free(ctx);
  uj_program_free(p);
}

/* A value computed from 0-d inputs alone (1 - b, in f64: lang/build.c)
 * is computed once, before the loop, not at every element. */
TEST(mir_scalar_expressions_are_computed_before_the_loop) {
  SKIP_WITHOUT_MIR();
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("y = x*(1 - b)", &p) == UJ_OK);
  uj_ctx_t* ctx = uj_ctx_new();
  if (!p || !ctx || uj_ctx_set_engine(ctx, UJ_ENGINE_MIR) != UJ_OK) {
    CHECK(0);
    uj_program_free(p), uj_ctx_free(ctx);
    return;
  }
  enum { N = 1000 };
  float x[N], y[N], b = 0.999f;
  for (int i = 0; i < N; i++) x[i] = (float)i - 500.0f;
  uj_tensor_t tx = {x, UJ_F32, UJ_CPU, 1, {N}}, tb = {&b, UJ_F32, UJ_CPU, 0, {0}}, ty = {y, UJ_F32, UJ_CPU, 1, {N}};
  const uj_tensor_t* in[] = {&tx, &tb};
  uj_tensor_t* out[] = {&ty};
  CHECK(uj_program_run(ctx, p, UJ_FORWARD, in, 2, NULL, 0, out, 1) == UJ_OK);
  float c = (float)(1.0 - (double)b); /* rounded once */
  for (int i = 0; i < N; i++) CHECK(y[i] == x[i] * c);
  char* text = uj_program_dump(ctx, p, UJ_FORWARD, UJ_DUMP_MIR, NULL);
  CHECK(text != NULL);
  if (text) {
    const char *sub = strstr(text, "dsub"), *loop = strstr(text, "bge");
    CHECK(sub && loop && sub < loop);
    CHECK(sub && !strstr(sub + 4, "dsub")); /* once */
    if (!(sub && loop && sub < loop)) printf("%s\n", text);
  }
  free(text);
  uj_ctx_free(ctx);
  uj_program_free(p);
}

TEST_MAIN()
