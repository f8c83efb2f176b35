/* backends/conv/cpu_winograd.c: "cpu_winograd", Winograd F(4x4, 3x3) on the
 * CPU: f32, NHWC, forward, 3x3 filters, stride 1, any padding.
 *
 * Per 4x4 block of output pixels ("tile") it does 36 multiplications per
 * channel and filter where the direct sum does 144 (winograd.h has the
 * algebra, winograd.c the transforms). The work is three steps:
 *
 *   input    every tile's 6x6 input patch -> V [tiles][36][C]
 *   product  M_xi = V_xi U_xi for xi < 36, with the Winograd product
 *            kernel of kernel.c; U [36][C][K] is the transformed filter, computed
 *            once per call, or once per filter_key and kept in the context
 *   output   every tile's M [tiles][36][K] -> its 4x4 outputs (+ bias) in y
 *
 * Memory traffic decides the speed as much as arithmetic, so the steps run
 * in one of three schedules (above schedule_t). */
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "winograd.h"

/* V and M of one block should fit in this much of a core's L2; half as
 * much while U is kept in L2 too (faster at 56x56x64, on one thread and on
 * two). The limits below come from timing the layers of bench/conv.c on
 * one and two threads. */
#define BLOCK_BYTES (1 << 20)
#define BLOCK_BYTES_U_IN_L2 (1 << 19)
/* U up to this size is read by every block (the private schedule), on one
 * thread and on several. */
#define PRIVATE_U_BYTES_ONE_THREAD (1 << 20)
#define PRIVATE_U_BYTES_THREADS (4 << 20)
/* The shared schedule's blocks have at least this many tiles, so that the
 * product's panels of U are used for enough rows to pay for reading them
 * (14x14x256, batch 8: one block of 128 tiles rather than two of 64). */
#define SHARED_MIN_TILES 128
/* Channels per slice of the products' sums (see products()): at most 96
 * (faster than 64 or 128 on the 14x14 and 7x7 layers, no slower
 * elsewhere), and C split into slices of equal depth, a short slice paying
 * the accumulators' loads and stores for little work (docs/CONVOLUTION.md,
 * "Measured"). */
#define DEPTH_SLICE_MAX 96
/* Row blocks per thread from which the shared schedule's products split by
 * rows (docs/CONVOLUTION.md, "Measured"); below, the split by products is
 * the one in small runs, so that a thread the machine holds up keeps
 * little work from the other. */
#define ROWS_PER_SLOT 4
/* The few-tiles schedule (above schedule_t) takes calls of
 * FEW_TILES_MIN to BK_WINO_TALL_ROWS tiles whose U does not stay in the
 * cores' L2 between calls: on several threads, U larger than
 * PRIVATE_U_BYTES_THREADS; on one thread, any U. Below FEW_TILES_MIN the
 * other schedules' 4-row kernel reads U once as well, with fewer loads.
 * Each thread claims FEW_RUNS_PER_SLOT runs of products, contiguous in U
 * and about equal in work, U streaming through each core in one piece and
 * each position's V and M staying with one core (docs/CONVOLUTION.md,
 * "Measured", has the figures behind each bound). */
#define FEW_TILES_MIN 5
#define FEW_RUNS_PER_SLOT 2
/* Tiles per slot below which threads are not worth waking. */
#define MIN_TILES_PER_SLOT 6

typedef struct {
  bk_wino_geom_t g;
  const bk_wino_kernel_t* kern;
  const bk_wino_transforms_t* xf; /* for kern's instruction set */
  const float* x;
  const float* u;
  const float* bias;
  float* y;
  int64_t block;       /* tiles per block (the most), a multiple of the kernel's rows */
  int64_t runs;        /* private: the blocks threads claim */
  int even;            /* private: the runs split the row blocks evenly, else block tiles each */
  float* v;            /* per slot (private) or one (shared) */
  float* m;
  const float** a;     /* row pointers: kernel rows per slot */
  int64_t block_first; /* shared: the block being worked on */
  int64_t block_count;
  int64_t row_parts;   /* shared: the shares the products' rows are split into */
} wino_job_t;

/* V and M are as large as x and y times 36/16, and U is w times 4. The
 * schedules (chosen by plan()):
 *
 *   private  each thread claims blocks of tiles whose V and M fit in L2
 *            and does all three steps per block in scratch of its own;
 *            nothing but x, y and U leaves the core, but every block reads
 *            all of U. Used while U is small: up to 1 MiB (C*K up to about
 *            7000, U stays in L2) on one thread, up to 4 MiB (C = K = 128)
 *            on several, where the alternative moves V and M between cores.
 *            With U in L2 there are about four blocks per thread, so that
 *            a thread the machine holds up leaves its share to the others;
 *            a larger U is read from L3 by every block, so blocks are few.
 *   shared   U is larger: reading it once per thread per block would cost
 *            more than the arithmetic, so all threads work on one block of
 *            many tiles at a time, step by step: the input and output steps
 *            split the tiles; the product splits the rows when every
 *            thread gets four row blocks or more, each thread reading all
 *            of U but only its own rows of V and M, else the 36 x (K / cols)
 *            products, so that U streams through once per block (see
 *            run_shared).
 *   few      a call of at most 16 tiles (14x14 at batch 1) whose U does
 *            not stay in L2: every U element serves those tiles only, so
 *            the products take all of them at once, in the 16 x 16 kernel
 *            of cpu.h (bk_wino_tall_fn) over the whole depth, V laid out
 *            for it (bk_wino_geom_interleave) and U in panels of 16; U
 *            streams through once, each position's rows in one call.
 *
 * A last tile row or column short of 4 outputs is made of F(e, 3) tiles on
 * a subset of the positions (winograd.h), numbered so that the tiles using
 * a position are one run; each product runs over its position's run only. */
typedef enum { SCHEDULE_PRIVATE, SCHEDULE_SHARED, SCHEDULE_FEW } schedule_t;

/* The rows of position xi in the block of tiles [first, first + count),
 * relative to first: the tiles that use xi, [*lo, *hi), and the row blocks
 * over them, *blocks of the kernel's rows from *lo. Returns 0 when none. */
static int xi_rows(const wino_job_t* j, int64_t xi, int64_t first, int64_t count, int64_t* lo, int64_t* hi,
                   int64_t* blocks) {
  const bk_wino_geom_t* g = &j->g;
  *lo = g->xi_lo[xi] > first ? g->xi_lo[xi] - first : 0;
  *hi = g->xi_hi[xi] < first + count ? g->xi_hi[xi] - first : count;
  *blocks = (*hi - *lo + j->kern->rows - 1) / j->kern->rows;
  return *hi > *lo;
}

/* M_xi = V_xi U_xi for products [begin, end) of the block of tiles
 * [first, first + count); product i is (xi, panel) = (i / panels,
 * i % panels). Its rows are the block's tiles that use xi (winograd.h),
 * in row blocks of the kernel's rows from the first; a share (part of
 * parts) of those row blocks is done, so that threads can split the rows.
 * The last row block may run up to rows - 1 past the range: into tiles
 * that do not use xi (their V is zero there and their M never read), or
 * into the zeroed rows past the block (zero_tail). The sum over channels
 * is split into slices of up to DEPTH_SLICE_MAX, each slice of the U panel
 * (up to DEPTH_SLICE_MAX x cols floats, 24 KiB) staying in L1 while every row of
 * the block passes over it. */
static void products(const wino_job_t* j, const float* v, float* m, int64_t first, int64_t count, int64_t part,
                     int64_t parts, int64_t begin, int64_t end, const float** a) {
  const bk_wino_geom_t* g = &j->g;
  int rows = j->kern->rows;
  int64_t C = g->p->c, cols = g->cols;
  int64_t slices = (C + DEPTH_SLICE_MAX - 1) / DEPTH_SLICE_MAX, slice = (C + slices - 1) / slices;
  for (int64_t i = begin; i < end; i++) {
    int64_t xi = i / g->panels, panel = i % g->panels, lo, hi, blocks;
    if (!xi_rows(j, xi, first, count, &lo, &hi, &blocks)) continue;
    int64_t row_begin = lo + blocks * part / parts * rows, row_end = lo + blocks * (part + 1) / parts * rows;
    const float* ux = j->u + i * g->u_block; /* (xi, panel) blocks in order */
    float* mx = m + xi * g->m_xi + panel * cols;
    for (int64_t c0 = 0; c0 < C; c0 += slice) {
      int64_t depth = C - c0 < slice ? C - c0 : slice;
      /* the next slice (of this panel, else the next product's), a quarter
       * per row block over the first four (cpu.h, bk_wino_tile_fn) */
      const float* next = c0 + depth < C ? ux + (c0 + depth) * cols : i + 1 < end ? ux + g->u_block : NULL;
      for (int64_t r0 = row_begin; r0 < row_end; r0 += rows) {
        for (int r = 0; r < rows; r++) a[r] = v + (r0 + r) * g->v_tile + xi * g->v_xi;
        int64_t q = (r0 - row_begin) / rows;
        const float* pf = next && q < 4 ? next + q * depth * 16 : NULL;
        j->kern->tile(a, c0, depth, ux + c0 * cols, c0 > 0, mx + r0 * g->m_tile, g->m_tile, pf);
      }
    }
  }
}

/* Zeros what products() reads past the block's count tiles: the rows the
 * last row block of a position whose tiles end the block runs into. */
static void zero_tail(const wino_job_t* j, float* v, int64_t first, int64_t count) {
  for (int64_t xi = 0; xi < 36; xi++) {
    int64_t lo, hi, blocks;
    if (!xi_rows(j, xi, first, count, &lo, &hi, &blocks) || hi < count) continue;
    for (int64_t t = count; t < lo + blocks * j->kern->rows; t++)
      memset(v + t * j->g.v_tile + xi * j->g.v_xi, 0, sizeof(float) * (size_t)j->g.cs);
  }
}

/* Tiles [first, first + count) through all three steps, in V and M of one slot. */
static void block_all_steps(const wino_job_t* j, int64_t first, int64_t count, float* v, float* m, const float** a) {
  const bk_wino_geom_t* g = &j->g;
  j->xf->input(g, j->x, first, first + count, v, first);
  zero_tail(j, v, first, count);
  products(j, v, m, first, count, 0, 1, 0, 36 * g->panels, a);
  j->xf->output(g, m, first, first, first + count, j->bias, j->y);
}

/* The tiles of private run r: [*first, *first + *count). */
static void private_run(const wino_job_t* j, int64_t r, int64_t* first, int64_t* count) {
  int64_t rows = j->kern->rows, rowblocks = (j->g.tiles + rows - 1) / rows;
  int64_t end = j->even ? rows * ((r + 1) * rowblocks / j->runs) : (r + 1) * j->block;
  *first = j->even ? rows * (r * rowblocks / j->runs) : r * j->block;
  *count = (end < j->g.tiles ? end : j->g.tiles) - *first;
}

static void private_slot(void* ctx, int slot, int64_t begin, int64_t end) {
  const wino_job_t* j = ctx;
  int64_t rows = j->block + j->kern->rows; /* per slot, as allocated */
  float* v = j->v + (int64_t)slot * rows * j->g.v_tile;
  float* m = j->m + (int64_t)slot * rows * j->g.m_tile;
  const float** a = j->a + (int64_t)slot * j->kern->rows;
  for (int64_t r = begin; r < end; r++) {
    int64_t first, count;
    private_run(j, r, &first, &count);
    if (count > 0) block_all_steps(j, first, count, v, m, a);
  }
}

/* The shared schedule's three steps, each split across the slots. */
static void shared_input(void* ctx, int slot, int64_t begin, int64_t end) {
  const wino_job_t* j = ctx;
  (void)slot;
  j->xf->input(&j->g, j->x, j->block_first + begin, j->block_first + end, j->v, j->block_first);
}

static void shared_products(void* ctx, int slot, int64_t begin, int64_t end) {
  const wino_job_t* j = ctx;
  products(j, j->v, j->m, j->block_first, j->block_count, 0, 1, begin, end, j->a + (int64_t)slot * j->kern->rows);
}

/* Shares [begin, end) of every product's row blocks (products()). */
static void shared_products_rows(void* ctx, int slot, int64_t begin, int64_t end) {
  const wino_job_t* j = ctx;
  const float** a = j->a + (int64_t)slot * j->kern->rows;
  for (int64_t part = begin; part < end; part++)
    products(j, j->v, j->m, j->block_first, j->block_count, part, j->row_parts, 0, 36 * j->g.panels, a);
}

static void shared_output(void* ctx, int slot, int64_t begin, int64_t end) {
  const wino_job_t* j = ctx;
  (void)slot;
  j->xf->output(&j->g, j->m, j->block_first, j->block_first + begin, j->block_first + end, j->bias, j->y);
}

/* The filter transform, split over input channels. */
typedef struct {
  const bk_wino_geom_t* g;
  const bk_wino_transforms_t* xf;
  const float* w;
  float* u;
} filter_job_t;

static void filter_slot(void* ctx, int slot, int64_t begin, int64_t end) {
  const filter_job_t* f = ctx;
  (void)slot;
  f->xf->filter(f->g, f->w, begin, end, f->u);
}

/* Fills U from w (into memory the caller provides). */
static void filter_transform(const bk_conv_call_t* call, const bk_wino_geom_t* g, const bk_wino_transforms_t* xf,
                             rt_pool_t* pool, float* u) {
  filter_job_t fj = {g, xf, call->w->data, u};
  int64_t C = call->p->c;
  /* runs of whole groups of 16 channels, a few per slot */
  int slots = bk_conv_slots(pool, C, 16);
  bk_conv_parallel(pool, slots, C, bk_round_up((C + 4 * slots - 1) / (4 * slots), 16), filter_slot, &fj);
}

/* The schedule and its tiles per block (above schedule_t). */
static schedule_t plan(wino_job_t* j, rt_pool_t* pool, int* slots) {
  int rows = j->kern->rows;
  int64_t tile_bytes = 36 * (j->g.cs + j->g.kp) * (int64_t)sizeof(float);
  int64_t u_bytes = 36 * j->g.panels * j->g.u_block * (int64_t)sizeof(float);
  int64_t fit = (u_bytes <= PRIVATE_U_BYTES_ONE_THREAD ? BLOCK_BYTES_U_IN_L2 : BLOCK_BYTES) / tile_bytes / rows * rows;
  if (fit < rows) fit = rows;
  int64_t tiles = j->g.tiles;
  int several = rt_pool_size(pool) > 1;
  if (j->kern->tall && tiles <= BK_WINO_TALL_ROWS && tiles >= FEW_TILES_MIN &&
      (!several || u_bytes > PRIVATE_U_BYTES_THREADS)) {
    j->block = tiles;
    *slots = rt_pool_size(pool);
    return SCHEDULE_FEW;
  }
  int shared = u_bytes > (several ? PRIVATE_U_BYTES_THREADS : PRIVATE_U_BYTES_ONE_THREAD);
  if (shared) {
    /* blocks of about equal size: a short last block would read all of U
     * for a few rows */
    int64_t most = fit > SHARED_MIN_TILES ? fit : SHARED_MIN_TILES;
    int64_t nblocks = (tiles + most - 1) / most;
    j->block = bk_round_up((tiles + nblocks - 1) / nblocks, rows);
    *slots = rt_pool_size(pool);
  } else {
    /* blocks are the runs threads claim. With U in L2 (PRIVATE_U_BYTES_ONE_THREAD)
     * a block costs little more than its rows, and about four per slot
     * keep the threads even when one of them is held up; a larger U is
     * read from L3 by every block, so there are as few as fit */
    *slots = bk_conv_slots(pool, tiles, MIN_TILES_PER_SLOT);
    int64_t per = u_bytes <= PRIVATE_U_BYTES_ONE_THREAD ? 4 * *slots : *slots;
    int64_t nblocks = per * ((tiles + per * fit - 1) / (per * fit));
    int64_t rowblocks = (tiles + rows - 1) / rows;
    /* with many blocks, whole shares and a short remainder that whichever
     * thread is free takes (56x56: 8 blocks of 24 tiles and one of 4
     * rather than 7 of 28, 4 for one thread and 3 for the other); with
     * few, every block reads U, so the row blocks are split evenly (28x28,
     * batch 1: 12, 12, 12 and 16 tiles, 6 row blocks for one thread and 7
     * for the other, where blocks of 16 left one of 1 and took 8 and 5) */
    j->even = per == *slots;
    j->block = rows * (j->even ? (rowblocks + nblocks - 1) / nblocks : rowblocks / nblocks);
    if (j->block < rows) j->block = rows;
    if (!j->even && j->block > fit) j->block = fit;
    j->runs = j->even ? nblocks : (tiles + j->block - 1) / j->block;
  }
  return shared ? SCHEDULE_SHARED : SCHEDULE_PRIVATE;
}

/* The shared schedule. The products split by rows when every thread gets
 * at least ROWS_PER_SLOT row blocks: each thread then reads all of U but
 * only the V and M rows it works on; with fewer rows (7x7 at batch 1: one
 * row block), they split by (xi, panel) instead. */
static void run_shared(wino_job_t* j, rt_pool_t* pool) {
  int64_t rows = j->kern->rows;
  for (j->block_first = 0; j->block_first < j->g.tiles; j->block_first += j->block) {
    int64_t tiles = j->g.tiles - j->block_first < j->block ? j->g.tiles - j->block_first : j->block;
    j->block_count = tiles;
    int64_t rowblocks = bk_round_up(tiles, rows) / rows, nproducts = 36 * j->g.panels;
    int row_slots = bk_conv_slots(pool, rowblocks, ROWS_PER_SLOT);
    bk_conv_parallel(pool, bk_conv_slots(pool, tiles, MIN_TILES_PER_SLOT), tiles, rows, shared_input, j);
    zero_tail(j, j->v, j->block_first, tiles);
    j->row_parts = row_slots;
    if (row_slots > 1)
      bk_conv_parallel(pool, row_slots, row_slots, 1, shared_products_rows, j);
    else
      bk_conv_parallel(pool, bk_conv_slots(pool, nproducts, 1), nproducts, 1, shared_products, j);
    bk_conv_parallel(pool, bk_conv_slots(pool, tiles, MIN_TILES_PER_SLOT), tiles, rows, shared_output, j);
  }
}

/* The first product of run r of j->runs, the runs about equal in work: a
 * product's multiply-adds are its position's rows times the depth. */
static int64_t few_run_start(const wino_job_t* j, int64_t r) {
  const bk_wino_geom_t* g = &j->g;
  int64_t total = 0, sum = 0, i = 0;
  for (int xi = 0; xi < 36; xi++) total += (g->xi_hi[xi] - g->xi_lo[xi]) * g->panels;
  int64_t want = total * r / j->runs;
  for (; i < 36 * g->panels; i++) {
    if (sum >= want) break;
    int64_t xi = i / g->panels;
    sum += g->xi_hi[xi] - g->xi_lo[xi];
  }
  return i;
}

/* The few-tiles schedule's products of runs [run_begin, run_end), each
 * product (xi, panel) as in products(): the run of tiles that use xi, in
 * one call of the tall kernel for that many rows over the whole depth. */
static void few_products(void* ctx, int slot, int64_t run_begin, int64_t run_end) {
  const wino_job_t* j = ctx;
  const bk_wino_geom_t* g = &j->g;
  (void)slot;
  int64_t begin = few_run_start(j, run_begin), end = few_run_start(j, run_end);
  for (int64_t i = begin; i < end; i++) {
    int64_t xi = i / g->panels, panel = i % g->panels, lo = g->xi_lo[xi], hi = g->xi_hi[xi];
    if (hi > lo)
      j->kern->tall[hi - lo - 1](j->v + xi * g->v_xi + lo * g->v_tile, g->v_chunk, g->p->c, j->u + i * g->u_block,
                                 j->m + lo * g->m_tile + xi * g->m_xi + panel * g->cols, g->m_tile);
  }
}

/* The few-tiles schedule: every tile in one interleaved block, the three
 * steps each split across the slots. */
static void run_few(wino_job_t* j, rt_pool_t* pool) {
  int64_t tiles = j->g.tiles;
  int slots = bk_conv_slots(pool, 36 * j->g.panels, 1);
  j->block_first = 0;
  j->block_count = tiles;
  j->runs = slots * FEW_RUNS_PER_SLOT;
  bk_conv_parallel(pool, bk_conv_slots(pool, tiles, MIN_TILES_PER_SLOT), tiles, 1, shared_input, j);
  bk_conv_parallel(pool, slots, j->runs, 1, few_products, j);
  bk_conv_parallel(pool, bk_conv_slots(pool, tiles, MIN_TILES_PER_SLOT), tiles, 1, shared_output, j);
}

/* Rounding: the transforms multiply values by up to 5 (B^T) and 8 (A^T)
 * and divide by up to 24 (G), and the terms they add cancel, so the f32
 * result is less accurate than a direct sum; the tested bound is
 * 1e-5 * 9C * max|x| * max|w| per element, against 1e-6 for the direct and
 * reference backends (include/uopjit.h). */
static uj_status_t winograd_run(const bk_conv_call_t* call) {
  const bk_conv_problem_t* p = call->p;
  wino_job_t j;
  memset(&j, 0, sizeof j);
  j.kern = bk_wino_kernel_for(call->state);
  j.xf = bk_wino_transforms_for(j.kern->isa);
  bk_wino_geom_init(&j.g, p, j.kern->cols);
  j.x = call->x->data;
  j.y = call->y->data;
  j.bias = call->bias ? call->bias->data : NULL;
  rt_pool_t* pool = bk_conv_pool(call->ctx);
  int slots;
  schedule_t schedule = plan(&j, pool, &slots);
  if (schedule == SCHEDULE_FEW) { /* U in the tall kernel's panels, V interleaved */
    bk_wino_geom_init(&j.g, p, BK_WINO_TALL_COLS);
    bk_wino_geom_interleave(&j.g);
  }

  /* U: kept under the filter_key; else made now, into memory the cache
   * will own (a key) or into the call's scratch (no key) */
  int64_t u_floats = 36 * j.g.panels * j.g.u_block;
  bk_conv_filter_t* kept = bk_conv_filter_find(call->state, &bk_conv_cpu_winograd, p, (int)j.g.cols);
  float* u_for_cache = NULL;
  uj_status_t s = UJ_OK;
  if (!kept && p->filter_key && !(u_for_cache = bk_conv_alloc(u_floats, "cpu_winograd"))) s = UJ_ERR_OOM;
  int64_t u_in_scratch = kept || u_for_cache ? 0 : u_floats;
  int buffers = schedule == SCHEDULE_PRIVATE ? slots : 1;
  /* rows past the block: products() may run into them (zero_tail); the
   * few-tiles schedule reads and writes the tiles' rows only */
  int64_t rows = schedule == SCHEDULE_FEW ? j.block : j.block + j.kern->rows;
  int64_t v_floats = bk_wino_v_floats(&j.g, rows), m_floats = rows * j.g.m_tile;
  int64_t scratch_floats = 0;
  float* scratch = NULL;
  if (s == UJ_OK) {
    scratch = bk_conv_scratch_take(call->state, u_in_scratch + buffers * (v_floats + m_floats), &scratch_floats,
                                   "cpu_winograd");
    j.a = scratch ? malloc(sizeof *j.a * (size_t)(slots * j.kern->rows)) : NULL;
    if (!scratch) s = UJ_ERR_OOM;
    else if (!j.a)
      s = rt_error(UJ_ERR_OOM, "cpu_winograd: out of memory allocating %d row pointers (%zu bytes)", slots * j.kern->rows,
                   sizeof *j.a * (size_t)(slots * j.kern->rows));
  }
  if (s == UJ_OK) {
    j.v = scratch + u_in_scratch;
    j.m = j.v + buffers * v_floats;
    if (kept) {
      j.u = bk_conv_filter_data(kept);
    } else {
      float* u = u_for_cache ? u_for_cache : scratch;
      filter_transform(call, &j.g, j.xf, pool, u);
      j.u = u;
      if (u_for_cache) { /* the cache owns it from here, or frees it on OOM */
        kept = bk_conv_filter_add(call->state, &bk_conv_cpu_winograd, p, (int)j.g.cols, u_for_cache,
                                  (size_t)u_floats * sizeof(float), NULL);
        u_for_cache = NULL;
        if (!kept) s = rt_error(UJ_ERR_OOM, "cpu_winograd: out of memory keeping the transformed filter");
      }
    }
  }
  if (s == UJ_OK && schedule == SCHEDULE_FEW) run_few(&j, pool);
  else if (s == UJ_OK && schedule == SCHEDULE_SHARED) run_shared(&j, pool);
  else if (s == UJ_OK) bk_conv_parallel(pool, slots, j.runs, 1, private_slot, &j);
  free(j.a);
  free(u_for_cache);
  bk_conv_scratch_give(call->state, scratch, scratch_floats);
  bk_conv_filter_release(call->state, kept);
  return s;
}

const bk_conv_backend_t bk_conv_cpu_winograd = {
    .name = "cpu_winograd",
    .caps =
        {
            .ops = 1u << BK_CONV_FORWARD,
            .devices = 1u << UJ_CPU,
            .dtypes = 1u << UJ_F32,
            .layout = BK_CONV_NHWC,
            .kernel_min = 3,
            .kernel_max = 3,
            .stride_max = 1,
            .pad_max = -1,
            .reference = 0,
        },
    .run = winograd_run,
};
