/* backends/conv/cpu.h: what the hand-written CPU convolution backends
 * (cpu_direct.c, cpu_winograd.c) share: vector types, the register-blocked
 * product kernel both are built on, and scratch memory.
 *
 * Vectors are GCC vector extensions (vector_size), not intrinsics: the same
 * source compiles for any target, and each function that matters is built
 * for several instruction sets and picked at run time by the CPU's features
 * (kernel.c for the product kernel, target_clones on the transforms). These
 * files build with -ffp-contract=fast (Makefile) so that a*b + c becomes
 * one fused multiply-add where the target has it; the library's -std=c11
 * would otherwise keep them apart. */
#ifndef UJ_BACKENDS_CONV_CPU_H
#define UJ_BACKENDS_CONV_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "conv.h"

/* 16 and 8 floats. The "u" types are for loads and stores at any float
 * alignment, and may alias float arrays. */
typedef float bk_v16 __attribute__((vector_size(64)));
typedef float bk_v16u __attribute__((vector_size(64), aligned(4), may_alias));
typedef float bk_v8 __attribute__((vector_size(32)));
typedef float bk_v8u __attribute__((vector_size(32), aligned(4), may_alias));

/* The instruction sets of the variants, as target attributes. A variant
 * runs only where the CPU and the OS support every feature its attribute
 * names (bk_conv_kernels checks the same lists). */
#define BK_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")))
#define BK_TARGET_AVX2 __attribute__((target("avx2,fma")))

/* The product kernel: for one tile of `rows` rows and `cols` columns,
 *
 *   out[r*ldo + j] = start[r][j] + sum over t < ntaps, c < depth of
 *                    a[t*rows + r][a_offset + c] * b[t*b_tap + c*cols + j]
 *
 * where start is out's own value when accumulate is 1, else init[j] (0 when
 * init is NULL). Each row of `a` is a pointer, so a row can be a pixel of an
 * image (direct convolution: one pointer per filter tap and output pixel, a
 * zero row for padding) or a row of a matrix (Winograd's products: one
 * tap). `b` is a panel of the right-hand side, `cols` wide, b_tap floats
 * from one tap to the next. The whole tile is written; callers route
 * partial tiles through a scratch tile. The accumulators stay in registers
 * for the whole sum, so the kernel reads each element of a and b once per
 * tile; a caller that splits the sum (a_offset, depth, accumulate) keeps a
 * slice of b in L1 while many tiles pass over it. */
typedef void (*bk_conv_tile_fn)(int ntaps, const float* const* a, int64_t a_offset, int64_t depth, const float* b,
                                int64_t b_tap, const float* init, int accumulate, float* out, int64_t ldo);

/* rows * cols of the largest kernel: the size of a scratch tile. */
#define BK_CONV_TILE_MAX (6 * 64)

typedef struct {
  const char* isa; /* "avx512", "avx2", "generic" */
  int rows, cols;  /* the tile */
  bk_conv_tile_fn tile;
} bk_conv_kernel_t;

/* The kernel variants this CPU can run, fastest first; *count set. */
const bk_conv_kernel_t* bk_conv_kernels(int* count);
/* The kernel a context's CPU backends use: the fastest, unless
 * UOPJIT_CONV_ISA (avx512, avx2 or generic; read when the context's backend
 * state is made) names another this CPU can run. It lets tests and
 * benchmarks reach every variant on one machine. */
const bk_conv_kernel_t* bk_conv_kernel_for(bk_conv_state_t* st);
/* The kernel of cpu_winograd's products: bk_conv_tile_fn with one tap and
 * no init, `rows` x `cols` of its own, b's steps `cols` floats apart. When
 * prefetch is not NULL it also asks for one cache line there per step
 * (depth lines from prefetch on) to be brought into L2: cpu_winograd hands
 * each of the first row blocks of a slice of U a quarter of the next slice,
 * so that a U too large for L2 arrives while the kernel computes, instead
 * of the first row block of every slice waiting on memory for all of it. */
typedef void (*bk_wino_tile_fn)(const float* const* a, int64_t a_offset, int64_t depth, const float* b, int accumulate,
                                float* out, int64_t ldo, const float* prefetch);
/* The products of a call with few tiles (at most BK_WINO_TALL_ROWS, all in
 * one block: 14x14 at batch 1 has 16), where U is too large to stay in a
 * core's cache and each of its elements serves only those rows:
 *
 *   out[r*ldo + j] = sum over c < depth of V_r[c] * u[c*16 + j],  r < rows, j < 16 (BK_WINO_TALL_COLS)
 *
 * with row r's channel c at v[(c / 16) * v_chunk + 16 * r + c % 16]
 * (bk_wino_geom_interleave). All the rows' sums stay in registers for the
 * whole depth, so U streams through once, one vector per step for rows
 * multiply-adds, and every row is at a constant offset from one pointer:
 * with a pointer per row (bk_wino_tile_fn) the 16 pointers do not fit in
 * the registers and are reloaded every step, slower than the interleaved
 * rows. One function per row count, so that the run of tiles that use a
 * position is computed and no more. */
#define BK_WINO_TALL_ROWS 16
#define BK_WINO_TALL_COLS 16
typedef void (*bk_wino_tall_fn)(const float* v, int64_t v_chunk, int64_t depth, const float* u, float* out,
                                int64_t ldo);

typedef struct {
  const char* isa;
  int rows, cols;
  bk_wino_tile_fn tile;
  const bk_wino_tall_fn* tall; /* tall[rows - 1], rows <= BK_WINO_TALL_ROWS; NULL when the set has none */
} bk_wino_kernel_t;
/* The Winograd kernel for the instruction set bk_conv_kernel_for picks. */
const bk_wino_kernel_t* bk_wino_kernel_for(bk_conv_state_t* st);

/* Parallel work with per-thread scratch. The items [0, items) are cut into
 * runs of `grain` consecutive items, and `slots` runners, one per thread of
 * the context's pool, claim runs in order from a shared counter until none
 * is left, calling fn(ctx, slot, begin, end) for each. A runner whose thread
 * is held up (a busy machine) simply claims fewer runs, instead of the
 * whole call waiting for its fixed share. Scratch allocated per slot before
 * the call is used by one thread at a time. bk_conv_slots says how many
 * slots to plan for: at most the pool's threads, and none with fewer than
 * min_items items (at least 1 slot). Which runner computes an item never
 * changes its value, so results do not depend on the threads. */
typedef void (*bk_conv_slot_fn)(void* ctx, int slot, int64_t begin, int64_t end);
int bk_conv_slots(rt_pool_t* pool, int64_t items, int64_t min_items);
void bk_conv_parallel(rt_pool_t* pool, int slots, int64_t items, int64_t grain, bk_conv_slot_fn fn, void* ctx);

/* 64-byte aligned memory for n floats (n may be 0); NULL with the error
 * set on OOM or a size that overflows. Free with free(). */
float* bk_conv_alloc(int64_t n, const char* what);

static inline int64_t bk_round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

#endif
