/* backends/conv/cpu_direct.c: "cpu_direct", the direct convolution on the
 * CPU: f32, NHWC, forward, any filter size, stride and padding.
 *
 * The convolution is a product with the sum over (tap, channel), taken as
 * an implicit matrix product: rows are output pixels, columns are filters,
 * and the product kernel of kernel.c computes one tile of `rows` pixels by
 * `cols` filters with its sums in registers from start to end, from a row
 * pointer per (tap, pixel) (tile_rows), the packed filter panel
 * (pack_filter) and the bias (or zeros) as the accumulators' starting
 * value. Pixels are numbered over the whole batch (n, oh, ow), so tiles run
 * across row and image boundaries and only the very last tile is partial;
 * the context's threads claim runs of the ordered work (direct_range). */
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

/* Bytes of input pixel rows a group of tiles should span. */
#define GROUP_INPUT_BYTES (128 * 1024)
/* Multiply-adds below which splitting across threads costs more than it saves. */
#define MIN_PARALLEL_WORK (1 << 18)

typedef struct {
  const bk_conv_problem_t* p;
  const bk_conv_kernel_t* kern;
  const float* x;
  const float* wp;    /* packed filter */
  const float* init;  /* bias padded to the panels, or zeros */
  const float* zeros; /* C zeros: the row a padded tap reads */
  float* y;
  const float** rows_of_slot; /* per slot: taps * rows row pointers */
  int64_t pixels, tiles, panels, group_tiles, groups, taps;
} direct_job_t;

/* w [K][KH*KW][C] -> wp [K/cols][KH*KW][C][cols], zero past K, so that one
 * step of the sum reads `cols` consecutive filters. Packing costs one pass
 * over w; with a filter_key the packed copy is kept in the context and
 * reused. Channels run
 * innermost on the read side; a block of 64 of them by `cols` filters is the
 * unit, small enough that the strided writes stay in L1. */
static void pack_filter(const float* w, const bk_conv_problem_t* p, int cols, float* wp) {
  int64_t taps = p->kh * p->kw, C = p->c, K = p->k, panels = (K + cols - 1) / cols;
  for (int64_t pn = 0; pn < panels; pn++)
    for (int64_t t = 0; t < taps; t++) {
      float* dst = wp + (pn * taps + t) * C * cols;
      for (int64_t c0 = 0; c0 < C; c0 += 64) {
        int64_t c1 = c0 + 64 < C ? c0 + 64 : C;
        for (int j = 0; j < cols; j++) {
          int64_t k = pn * cols + j;
          if (k < K) {
            const float* src = w + (k * taps + t) * C;
            for (int64_t c = c0; c < c1; c++) dst[c * cols + j] = src[c];
          } else {
            for (int64_t c = c0; c < c1; c++) dst[c * cols + j] = 0.0f;
          }
        }
      }
    }
}

/* The row pointers of tile `tile`: a[t*rows + r] for tap t and pixel r,
 * where that filter tap reads x for that output pixel,
 * x + ((n*H + ih)*W + iw)*C, or a row of zeros when (ih, iw) falls in the
 * padding. The kernel then runs over the C contiguous channels of each, so
 * padding and strides cost nothing in the inner loop. Rows past the last
 * pixel repeat it (their results are dropped). */
static void tile_rows(const direct_job_t* j, int64_t tile, const float** a) {
  const bk_conv_problem_t* p = j->p;
  int rows = j->kern->rows;
  int64_t first = tile * rows, plane = p->oh * p->ow;
  for (int r = 0; r < rows; r++) {
    int64_t pix = first + r < j->pixels ? first + r : j->pixels - 1;
    int64_t n = pix / plane, oh = pix % plane / p->ow, ow = pix % p->ow;
    int64_t ih0 = oh * p->stride_h - p->pad_h, iw0 = ow * p->stride_w - p->pad_w;
    for (int64_t kh = 0; kh < p->kh; kh++) {
      int64_t ih = ih0 + kh;
      for (int64_t kw = 0; kw < p->kw; kw++) {
        int64_t iw = iw0 + kw;
        int inside = ih >= 0 && ih < p->h && iw >= 0 && iw < p->w;
        a[(kh * p->kw + kw) * rows + r] = inside ? j->x + ((n * p->h + ih) * p->w + iw) * p->c : j->zeros;
      }
    }
  }
}

/* Work items [begin, end): item i is (group, panel, tile within the group).
 * Groups of pixels span about GROUP_INPUT_BYTES of input rows each (kept in
 * L2), then filter panels, then tiles of the group: the panel in use stays
 * in cache while the group's tiles stream past it; the context's threads
 * claim runs of that ordered list (cpu.h, bk_conv_parallel). Partial tiles
 * (the last pixels, or K not a multiple of cols) go through a scratch tile
 * and are copied out, so nothing outside y is ever written. */
static void direct_range(void* ctx, int slot, int64_t begin, int64_t end) {
  const direct_job_t* j = ctx;
  const bk_conv_problem_t* p = j->p;
  int rows = j->kern->rows, cols = j->kern->cols;
  const float** a = j->rows_of_slot + (int64_t)slot * j->taps * rows;
  float partial[BK_CONV_TILE_MAX];
  int64_t per_group = j->panels * j->group_tiles;
  for (int64_t i = begin; i < end; i++) {
    int64_t group = i / per_group, in_group = i % per_group;
    int64_t panel = in_group / j->group_tiles;
    int64_t tile = group * j->group_tiles + in_group % j->group_tiles;
    if (tile >= j->tiles) continue;
    tile_rows(j, tile, a);
    int64_t first = tile * rows, k0 = panel * cols;
    int64_t nrows = j->pixels - first < rows ? j->pixels - first : rows;
    int64_t ncols = p->k - k0 < cols ? p->k - k0 : cols;
    const float* wpanel = j->wp + panel * j->taps * p->c * cols;
    const float* init = j->init + k0;
    float* dst = j->y + first * p->k + k0;
    if (nrows == rows && ncols == cols) {
      j->kern->tile((int)j->taps, a, 0, p->c, wpanel, p->c * cols, init, 0, dst, p->k);
    } else {
      j->kern->tile((int)j->taps, a, 0, p->c, wpanel, p->c * cols, init, 0, partial, cols);
      for (int64_t r = 0; r < nrows; r++) memcpy(dst + r * p->k, partial + r * cols, sizeof(float) * (size_t)ncols);
    }
  }
}

static uj_status_t direct_run(const bk_conv_call_t* call) {
  const bk_conv_problem_t* p = call->p;
  const bk_conv_kernel_t* kern = bk_conv_kernel_for(call->state);
  int rows = kern->rows, cols = kern->cols;
  direct_job_t j = {.p = p, .kern = kern, .x = call->x->data, .y = call->y->data};
  j.taps = p->kh * p->kw;
  j.pixels = p->n * p->oh * p->ow;
  j.tiles = (j.pixels + rows - 1) / rows;
  j.panels = (p->k + cols - 1) / cols;
  int64_t group_pixels = GROUP_INPUT_BYTES / (p->c * (int64_t)sizeof(float));
  j.group_tiles = group_pixels / rows > 0 ? group_pixels / rows : 1;
  if (j.group_tiles > j.tiles) j.group_tiles = j.tiles;
  j.groups = (j.tiles + j.group_tiles - 1) / j.group_tiles;

  /* the packed filter: kept under the filter_key; else packed now, into
   * memory the cache will own (a key) or into the call's scratch (no key) */
  int64_t packed_floats = j.panels * j.taps * p->c * cols;
  bk_conv_filter_t* kept = bk_conv_filter_find(call->state, &bk_conv_cpu_direct, p, cols);
  float* for_cache = NULL;
  uj_status_t s = UJ_OK;
  if (!kept && p->filter_key && !(for_cache = bk_conv_alloc(packed_floats, "cpu_direct"))) s = UJ_ERR_OOM;
  int64_t packed_in_scratch = kept || for_cache ? 0 : packed_floats;

  rt_pool_t* pool = bk_conv_pool(call->ctx);
  int64_t items = j.groups * j.panels * j.group_tiles;
  int64_t work_per_item = (int64_t)rows * cols * j.taps * p->c;
  int slots = bk_conv_slots(pool, items, MIN_PARALLEL_WORK / work_per_item + 1);
  /* scratch: [packed filter] bias padded to the panels, then C zeros */
  int64_t init_floats = j.panels * cols + p->c, scratch_floats = 0;
  float* scratch = NULL;
  if (s == UJ_OK) {
    scratch = bk_conv_scratch_take(call->state, packed_in_scratch + init_floats, &scratch_floats, "cpu_direct");
    j.rows_of_slot = scratch ? malloc(sizeof *j.rows_of_slot * (size_t)(slots * j.taps * rows)) : NULL;
    if (!scratch) s = UJ_ERR_OOM;
    else if (!j.rows_of_slot)
      s = rt_error(UJ_ERR_OOM, "cpu_direct: out of memory allocating row pointers (%zu bytes)",
                   sizeof *j.rows_of_slot * (size_t)(slots * j.taps * rows));
  }
  if (s == UJ_OK) {
    float* init = scratch + packed_in_scratch;
    memset(init, 0, sizeof(float) * (size_t)init_floats);
    if (call->bias) memcpy(init, call->bias->data, sizeof(float) * (size_t)p->k);
    j.init = init;
    j.zeros = init + j.panels * cols;
    if (kept) {
      j.wp = bk_conv_filter_data(kept);
    } else {
      float* packed = for_cache ? for_cache : scratch;
      pack_filter(call->w->data, p, cols, packed);
      j.wp = packed;
      if (for_cache) { /* the cache owns it from here, or frees it on OOM */
        kept = bk_conv_filter_add(call->state, &bk_conv_cpu_direct, p, cols, for_cache,
                                  (size_t)packed_floats * sizeof(float), NULL);
        for_cache = NULL;
        if (!kept) s = rt_error(UJ_ERR_OOM, "cpu_direct: out of memory keeping the packed filter");
      }
    }
  }
  /* runs of at most one group's tiles for one panel, and about 8 runs per
   * slot so that a slow thread costs little */
  int64_t grain = (items + 8 * slots - 1) / (8 * slots);
  if (grain > j.group_tiles) grain = j.group_tiles;
  if (s == UJ_OK) bk_conv_parallel(pool, slots, items, grain, direct_range, &j);
  free(j.rows_of_slot);
  free(for_cache);
  bk_conv_scratch_give(call->state, scratch, scratch_floats);
  bk_conv_filter_release(call->state, kept);
  return s;
}

const bk_conv_backend_t bk_conv_cpu_direct = {
    .name = "cpu_direct",
    .caps =
        {
            .ops = 1u << BK_CONV_FORWARD,
            .devices = 1u << UJ_CPU,
            .dtypes = 1u << UJ_F32,
            .layout = BK_CONV_NHWC,
            .kernel_min = 1,
            .kernel_max = 0,
            .stride_max = 0,
            .pad_max = -1,
            .reference = 0,
        },
    .run = direct_run,
};
