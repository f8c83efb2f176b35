/* backends/conv/kernel.c: the register-blocked product kernel of the CPU
 * convolution backends (declared in cpu.h), in one variant per instruction
 * set, chosen at run time; and the scratch and threading helpers they share.
 *
 * A tile keeps rows x cols sums in vector registers for the whole reduction:
 * per step c it loads cols/width vectors of the panel b (one row of the
 * right-hand side) and, for each of the rows, broadcasts a[r][c] and
 * multiply-adds it into that row's accumulators. The loads per step are
 * rows + cols/width against rows * cols/width multiply-adds, so the tile is
 * as large as the registers allow (the sizes: above kernel_table).
 * Variants are separate functions with their own target attribute, around
 * bodies inlined into each; which one runs is decided by the CPU's and the
 * OS's support for every feature of its target (bk_conv_kernels), and by
 * UOPJIT_CONV_ISA for a context (cpu.h). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#define BK_X86 1
#else
#define BK_X86 0
#endif

#if BK_X86
/* One row of an avx512 tile, 64 accumulators in four named vectors: loaded
 * from or stored to p, or one step of its sum, x times the step's panel
 * vectors b0..b3. The accumulators are named variables, not an array, so
 * that the compiler never has a reason to keep them in memory. */
#define ROW_LOAD(p, r0, r1, r2, r3)                            \
  do {                                                         \
    const bk_v16u* row_ = (const bk_v16u*)(p);                 \
    r0 = row_[0], r1 = row_[1], r2 = row_[2], r3 = row_[3]; \
  } while (0)
#define ROW_STORE(p, r0, r1, r2, r3)                           \
  do {                                                         \
    bk_v16u* row_ = (bk_v16u*)(p);                             \
    row_[0] = r0, row_[1] = r1, row_[2] = r2, row_[3] = r3; \
  } while (0)
#define ROW_FMA(x, r0, r1, r2, r3)                                 \
  do {                                                             \
    float x_ = (x);                                                \
    r0 += x_ * b0, r1 += x_ * b1, r2 += x_ * b2, r3 += x_ * b3; \
  } while (0)
#endif

#if BK_X86
/* step(r, row r's four accumulators) for each row r < rows of tile64_body,
 * the steps being row r loaded from or stored to out, or one step c of its
 * sum with its row pointer a<r>. */
#define TILE64_ROWS(step)                      \
  step(0, c00, c01, c02, c03);                 \
  step(1, c10, c11, c12, c13);                 \
  step(2, c20, c21, c22, c23);                 \
  step(3, c30, c31, c32, c33);                 \
  if (rows > 4) step(4, c40, c41, c42, c43);   \
  if (rows > 5) step(5, c50, c51, c52, c53)
#define LOAD_ROW(r, r0, r1, r2, r3) ROW_LOAD(out + r * ldo, r0, r1, r2, r3)
#define FMA_ROW(r, r0, r1, r2, r3) ROW_FMA(a##r[c], r0, r1, r2, r3)
#define STORE_ROW(r, r0, r1, r2, r3) ROW_STORE(out + r * ldo, r0, r1, r2, r3)

/* The avx512 tiles: `rows` (4 or 6, a constant in each caller, so that the
 * rows past it compile away) x 64 accumulators, over ntaps taps of rows
 * row pointers each, from init (or 0) or out; with a prefetch of the
 * panel read next, one line per step, where the caller has one. */
static inline __attribute__((always_inline)) void tile64_body(const int rows, int ntaps, const float* const* a,
                                                              int64_t a_offset, int64_t depth, const float* b,
                                                              int64_t b_tap, const float* init, int accumulate,
                                                              float* out, int64_t ldo, const float* prefetch) {
  bk_v16 i0 = {0}, i1 = {0}, i2 = {0}, i3 = {0};
  if (init) {
    i0 = *(const bk_v16u*)(init + 0);
    i1 = *(const bk_v16u*)(init + 16);
    i2 = *(const bk_v16u*)(init + 32);
    i3 = *(const bk_v16u*)(init + 48);
  }
  bk_v16 c00 = i0, c01 = i1, c02 = i2, c03 = i3;
  bk_v16 c10 = i0, c11 = i1, c12 = i2, c13 = i3;
  bk_v16 c20 = i0, c21 = i1, c22 = i2, c23 = i3;
  bk_v16 c30 = i0, c31 = i1, c32 = i2, c33 = i3;
  bk_v16 c40 = i0, c41 = i1, c42 = i2, c43 = i3;
  bk_v16 c50 = i0, c51 = i1, c52 = i2, c53 = i3;
  if (accumulate) {
    TILE64_ROWS(LOAD_ROW);
  }
  for (int t = 0; t < ntaps; t++) {
    const float* restrict a0 = a[rows * t + 0] + a_offset;
    const float* restrict a1 = a[rows * t + 1] + a_offset;
    const float* restrict a2 = a[rows * t + 2] + a_offset;
    const float* restrict a3 = a[rows * t + 3] + a_offset;
    const float* restrict a4 = rows > 4 ? a[rows * t + 4] + a_offset : NULL;
    const float* restrict a5 = rows > 5 ? a[rows * t + 5] + a_offset : NULL;
    const float* restrict bp = b + (int64_t)t * b_tap;
    for (int64_t c = 0; c < depth; c++, bp += 64) {
      if (prefetch) __builtin_prefetch(prefetch + 16 * c, 0, 2);
      bk_v16 b0 = *(const bk_v16u*)(bp + 0), b1 = *(const bk_v16u*)(bp + 16);
      bk_v16 b2 = *(const bk_v16u*)(bp + 32), b3 = *(const bk_v16u*)(bp + 48);
      TILE64_ROWS(FMA_ROW);
    }
  }
  TILE64_ROWS(STORE_ROW);
}

BK_TARGET_AVX512 static void tile_avx512(
    int ntaps, const float* const* a, int64_t a_offset, int64_t depth, const float* b, int64_t b_tap,
    const float* init, int accumulate, float* out, int64_t ldo) {
  tile64_body(6, ntaps, a, a_offset, depth, b, b_tap, init, accumulate, out, ldo, NULL);
}

/* Winograd's product (cpu.h, bk_wino_tile_fn): 4 x 64, so that the small
 * tile counts of late layers (4 tiles per image at 7x7, 16 at 14x14) fill
 * whole tiles; 16 accumulators are still enough to keep both FMA units
 * busy. The prefetch costs a load slot where the FMAs leave plenty. */
BK_TARGET_AVX512 static void wino_avx512(
    const float* const* a, int64_t a_offset, int64_t depth, const float* b, int accumulate, float* out, int64_t ldo,
    const float* prefetch) {
  tile64_body(4, 1, a, a_offset, depth, b, 0, NULL, accumulate, out, ldo, prefetch);
}
#endif

#if BK_X86
/* Winograd's products for calls with few tiles (cpu.h, bk_wino_tall_fn):
 * up to 16 rows of one vector each, the rows' values broadcast from one
 * pointer at constant offsets. Row counts are constants in each variant,
 * so the rows past them compile away. */
#define TALL_DECLARE(r) bk_v16 acc##r = {0}
#define TALL_FMA(r) \
  if (rows > r) acc##r += chunk[16 * r + c] * u_step
#define TALL_STORE(r) \
  if (rows > r) *(bk_v16u*)(out + r * ldo) = acc##r
#define TALL_ALL_ROWS(step)                                                                 \
  step(0); step(1); step(2); step(3); step(4); step(5); step(6); step(7); step(8); step(9); \
  step(10); step(11); step(12); step(13); step(14); step(15)
_Static_assert(BK_WINO_TALL_ROWS == 16 && BK_WINO_TALL_COLS == 16, "tall_body names 16 rows of 16 columns");

static inline __attribute__((always_inline)) void tall_body(const int rows, const float* v, int64_t v_chunk,
                                                             int64_t depth, const float* u, float* out, int64_t ldo) {
  TALL_ALL_ROWS(TALL_DECLARE);
  for (int64_t c0 = 0; c0 < depth; c0 += 16) {
    const float* restrict chunk = v + c0 / 16 * v_chunk; /* 16 channels of every row */
    const float* restrict u_chunk = u + c0 * 16;
    int64_t n = depth - c0 < 16 ? depth - c0 : 16;
    for (int64_t c = 0; c < n; c++) {
      bk_v16 u_step = *(const bk_v16u*)(u_chunk + 16 * c);
      TALL_ALL_ROWS(TALL_FMA);
    }
  }
  TALL_ALL_ROWS(TALL_STORE);
}

#define TALL_VARIANT(r)                                                                                         \
  BK_TARGET_AVX512 static void tall_avx512_##r(          \
      const float* v, int64_t v_chunk, int64_t depth, const float* u, float* out, int64_t ldo) {               \
    tall_body(r + 1, v, v_chunk, depth, u, out, ldo);                                                           \
  }
TALL_ALL_ROWS(TALL_VARIANT)
#define TALL_ENTRY(r) tall_avx512_##r
static const bk_wino_tall_fn tall_avx512[BK_WINO_TALL_ROWS] = {TALL_ENTRY(0), TALL_ENTRY(1), TALL_ENTRY(2),
    TALL_ENTRY(3), TALL_ENTRY(4), TALL_ENTRY(5), TALL_ENTRY(6), TALL_ENTRY(7), TALL_ENTRY(8), TALL_ENTRY(9),
    TALL_ENTRY(10), TALL_ENTRY(11), TALL_ENTRY(12), TALL_ENTRY(13), TALL_ENTRY(14), TALL_ENTRY(15)};
#endif

/* 6 x 16 with 8-float vectors, inlined into the avx2 and generic variants. */
static inline __attribute__((always_inline)) void tile_v8_body(int ntaps, const float* const* a, int64_t a_offset,
                                                               int64_t depth, const float* b, int64_t b_tap,
                                                               const float* init, int accumulate, float* out,
                                                               int64_t ldo) {
  bk_v8 i0 = {0}, i1 = {0};
  if (init) {
    i0 = *(const bk_v8u*)(init + 0);
    i1 = *(const bk_v8u*)(init + 8);
  }
  bk_v8 c00 = i0, c01 = i1, c10 = i0, c11 = i1, c20 = i0, c21 = i1;
  bk_v8 c30 = i0, c31 = i1, c40 = i0, c41 = i1, c50 = i0, c51 = i1;
  if (accumulate) {
    c00 = *(const bk_v8u*)(out + 0), c01 = *(const bk_v8u*)(out + 8);
    c10 = *(const bk_v8u*)(out + ldo), c11 = *(const bk_v8u*)(out + ldo + 8);
    c20 = *(const bk_v8u*)(out + 2 * ldo), c21 = *(const bk_v8u*)(out + 2 * ldo + 8);
    c30 = *(const bk_v8u*)(out + 3 * ldo), c31 = *(const bk_v8u*)(out + 3 * ldo + 8);
    c40 = *(const bk_v8u*)(out + 4 * ldo), c41 = *(const bk_v8u*)(out + 4 * ldo + 8);
    c50 = *(const bk_v8u*)(out + 5 * ldo), c51 = *(const bk_v8u*)(out + 5 * ldo + 8);
  }
  for (int t = 0; t < ntaps; t++) {
    const float* restrict a0 = a[6 * t + 0] + a_offset;
    const float* restrict a1 = a[6 * t + 1] + a_offset;
    const float* restrict a2 = a[6 * t + 2] + a_offset;
    const float* restrict a3 = a[6 * t + 3] + a_offset;
    const float* restrict a4 = a[6 * t + 4] + a_offset;
    const float* restrict a5 = a[6 * t + 5] + a_offset;
    const float* restrict bp = b + (int64_t)t * b_tap;
    for (int64_t c = 0; c < depth; c++, bp += 16) {
      bk_v8 b0 = *(const bk_v8u*)(bp + 0), b1 = *(const bk_v8u*)(bp + 8);
      float x = a0[c];
      c00 += x * b0, c01 += x * b1;
      x = a1[c];
      c10 += x * b0, c11 += x * b1;
      x = a2[c];
      c20 += x * b0, c21 += x * b1;
      x = a3[c];
      c30 += x * b0, c31 += x * b1;
      x = a4[c];
      c40 += x * b0, c41 += x * b1;
      x = a5[c];
      c50 += x * b0, c51 += x * b1;
    }
  }
  *(bk_v8u*)(out + 0) = c00, *(bk_v8u*)(out + 8) = c01;
  *(bk_v8u*)(out + ldo) = c10, *(bk_v8u*)(out + ldo + 8) = c11;
  *(bk_v8u*)(out + 2 * ldo) = c20, *(bk_v8u*)(out + 2 * ldo + 8) = c21;
  *(bk_v8u*)(out + 3 * ldo) = c30, *(bk_v8u*)(out + 3 * ldo + 8) = c31;
  *(bk_v8u*)(out + 4 * ldo) = c40, *(bk_v8u*)(out + 4 * ldo + 8) = c41;
  *(bk_v8u*)(out + 5 * ldo) = c50, *(bk_v8u*)(out + 5 * ldo + 8) = c51;
}

#if BK_X86
BK_TARGET_AVX2 static void tile_avx2(int ntaps, const float* const* a, int64_t a_offset,
                                                          int64_t depth, const float* b, int64_t b_tap,
                                                          const float* init, int accumulate, float* out, int64_t ldo) {
  tile_v8_body(ntaps, a, a_offset, depth, b, b_tap, init, accumulate, out, ldo);
}
#endif

static void tile_generic(int ntaps, const float* const* a, int64_t a_offset, int64_t depth, const float* b,
                         int64_t b_tap, const float* init, int accumulate, float* out, int64_t ldo) {
  tile_v8_body(ntaps, a, a_offset, depth, b, b_tap, init, accumulate, out, ldo);
}

_Static_assert(6 * 64 <= BK_CONV_TILE_MAX && 6 * 16 <= BK_CONV_TILE_MAX, "a tile larger than BK_CONV_TILE_MAX");

/* Fastest first; bk_conv_kernels() skips those the CPU lacks:
 *
 *   avx512   6 x 64: 24 accumulators of 16 floats, 4 panel vectors and a
 *            broadcast in 32 registers
 *   avx2     6 x 16: 12 accumulators of 8 floats in 16 registers
 *   generic  the avx2 body for the compiler's default target (SSE2 on
 *            x86-64, NEON on AArch64): correct anywhere, slower */
static const bk_conv_kernel_t kernel_table[] = {
#if BK_X86
    {"avx512", 6, 64, tile_avx512},
    {"avx2", 6, 16, tile_avx2},
#endif
    {"generic", 6, 16, tile_generic},
};
enum { KERNEL_TOTAL = sizeof kernel_table / sizeof kernel_table[0] };

#if BK_X86
/* Every feature of BK_TARGET_AVX512 and BK_TARGET_AVX2 (cpu.h): a CPU may
 * have AVX-512F without the subsets the kernels use. __builtin_cpu_supports
 * asks CPUID as this process sees it and counts AVX and AVX-512 only when
 * the OS saves their registers (XGETBV), in gcc and clang alike; under
 * valgrind, whose CPUID has no AVX-512, the avx2 kernels are chosen. */
static int cpu_runs_avx512(void) {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static int cpu_runs_avx2(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
#endif

const bk_conv_kernel_t* bk_conv_kernels(int* count) {
  int first = 0;
#if BK_X86
  __builtin_cpu_init();
  if (!cpu_runs_avx512()) first = 1;
  if (first == 1 && !cpu_runs_avx2()) first = 2;
#endif
  *count = KERNEL_TOTAL - first;
  return &kernel_table[first];
}

const bk_conv_kernel_t* bk_conv_kernel_for(bk_conv_state_t* st) {
  int count;
  const bk_conv_kernel_t* k = bk_conv_kernels(&count);
  const char* isa = st ? bk_conv_state_isa(st) : NULL;
  for (int i = 0; isa && i < count; i++)
    if (strcmp(k[i].isa, isa) == 0) return &k[i];
  return &k[0];
}

/* Winograd's kernel for instruction sets without a kernel of their own: the
 * 6 x 16 body with one tap. */
#if BK_X86
BK_TARGET_AVX2 static void wino_avx2(const float* const* a, int64_t a_offset, int64_t depth,
                                                          const float* b, int accumulate, float* out,
                                                          int64_t ldo, const float* prefetch) {
  (void)prefetch;
  tile_v8_body(1, a, a_offset, depth, b, 0, NULL, accumulate, out, ldo);
}
#endif

static void wino_generic(const float* const* a, int64_t a_offset, int64_t depth, const float* b, int accumulate,
                         float* out, int64_t ldo, const float* prefetch) {
  (void)prefetch;
  tile_v8_body(1, a, a_offset, depth, b, 0, NULL, accumulate, out, ldo);
}

/* cpu_winograd's products have a kernel of their own (bk_wino_tile_fn):
 * 4 x 64 on avx512, for its small tile counts, with a prefetch of the
 * panel it reads next, and the tall kernel for calls with few tiles; the
 * 6 x 16 body elsewhere. */
static const bk_wino_kernel_t wino_table[] = {
#if BK_X86
    {"avx512", 4, 64, wino_avx512, tall_avx512},
    {"avx2", 6, 16, wino_avx2, NULL},
#endif
    {"generic", 6, 16, wino_generic, NULL},
};
_Static_assert(sizeof wino_table / sizeof wino_table[0] == KERNEL_TOTAL, "a Winograd kernel per product kernel");

const bk_wino_kernel_t* bk_wino_kernel_for(bk_conv_state_t* st) {
  const bk_conv_kernel_t* k = bk_conv_kernel_for(st);
  for (int i = 0; i < KERNEL_TOTAL; i++)
    if (strcmp(wino_table[i].isa, k->isa) == 0) return &wino_table[i];
  return &wino_table[KERNEL_TOTAL - 1];
}

float* bk_conv_alloc(int64_t n, const char* what) {
  int64_t bytes;
  if (n < 0 || !rt_mul_i64(n, (int64_t)sizeof(float), &bytes) || bytes > INT64_MAX - 64) {
    rt_error(UJ_ERR_OOM, "%s: %lld floats of scratch is more than can be addressed", what, (long long)n);
    return NULL;
  }
  /* aligned_alloc wants a multiple of the alignment */
  float* p = aligned_alloc(64, (size_t)bk_round_up(bytes ? bytes : 1, 64));
  if (!p) rt_error(UJ_ERR_OOM, "%s: out of memory for %lld bytes of scratch", what, (long long)bytes);
  return p;
}

int bk_conv_slots(rt_pool_t* pool, int64_t items, int64_t min_items) {
  int64_t slots = min_items > 0 ? items / min_items : items;
  if (slots > rt_pool_size(pool)) slots = rt_pool_size(pool);
  return slots < 1 ? 1 : (int)slots;
}

typedef struct {
  bk_conv_slot_fn fn;
  void* ctx;
  int64_t items, grain;
  _Atomic int64_t next; /* the first item no runner has claimed */
} slot_job_t;

/* The pool hands out slot numbers; a busy pool gives one thread them all,
 * and the first of them then claims every run. */
static void run_slots(void* ctx, int64_t begin, int64_t end) {
  slot_job_t* j = ctx;
  for (int64_t s = begin; s < end; s++)
    for (;;) {
      int64_t lo = atomic_fetch_add(&j->next, j->grain);
      if (lo >= j->items) break;
      int64_t hi = lo + j->grain < j->items ? lo + j->grain : j->items;
      j->fn(j->ctx, (int)s, lo, hi);
    }
}

void bk_conv_parallel(rt_pool_t* pool, int slots, int64_t items, int64_t grain, bk_conv_slot_fn fn, void* ctx) {
  slot_job_t j = {fn, ctx, items, grain > 0 ? grain : 1, 0};
  atomic_init(&j.next, 0);
  rt_pool_run(pool, 0, slots, 1, run_slots, &j);
}
