/* backends/conv/winograd.h: the three transforms of Winograd F(4x4, 3x3)
 * (winograd.c), used by the cpu_winograd backend (cpu_winograd.c).
 *
 * With d a 6x6 input tile, g a 3x3 filter and Y the 4x4 output tile,
 * Y = A^T [ (G g G^T) .* (B^T d B) ] A, interpolating at 0, 1, -1, 2, -2 and
 * infinity (the matrices: above bk_wino_transforms_t). Summed over channels,
 * the elementwise product becomes 36 independent matrix products, one per
 * position xi = 6*i + j of the 6x6 tile: M_xi [tiles x K] = V_xi [tiles x C]
 * times U_xi [C x K], with V the transformed input tiles and U the
 * transformed filters. Tiles step by 4 output pixels and read their input
 * pixels from (4*ty - pad_h, 4*tx - pad_w), zero outside x; a last tile
 * row or column short of 4 outputs is made of smaller tiles (above
 * bk_wino_tile). The layouts of V, U and M: above bk_wino_geom_t. */
#ifndef UJ_BACKENDS_CONV_WINOGRAD_H
#define UJ_BACKENDS_CONV_WINOGRAD_H

#include <stdint.h>

#include "conv.h"

/* Layouts (floats):
 *   V   tile t at V + (t - row0)*v_tile, position xi at + xi*v_xi, channel c
 *       at + (c / 16)*v_chunk + c % 16; rows of cs = round_up(C, 16) floats,
 *       channels past C are 0. Tile-major by default (v_chunk = 16: each
 *       tile's row is contiguous); bk_wino_geom_interleave lays a block of
 *       up to BK_WINO_TALL_ROWS tiles out by 16 channels instead, for the
 *       product kernel of calls with few tiles (cpu.h, bk_wino_tall_fn).
 *       Tile-major (v_tile = 36*cs + 16, v_xi = cs) lets each transform read
 *       and write one contiguous stretch per tile; the product kernel takes
 *       its rows by pointer and does not mind the stride between them. The
 *       16 floats of slack keep the kernel's rows (and M's) from being a
 *       multiple of 4 KiB apart, which for C of 256 or more would put them
 *       all in one L1 cache set
 *   U   [36][panels] blocks of [C][cols], u_block floats apart: for each xi
 *       the filters in panels of cols, the right-hand side panels of the
 *       product kernel (cpu.h). u_block = C*cols + 16: one cache line more
 *       than the block, because with C*cols a power of two the 36 blocks
 *       the filter transform writes at once would share cache sets
 *   M   like V (m_tile, m_xi) with filters for channels; rows of
 *       kp = panels*cols floats */
typedef struct {
  const bk_conv_problem_t* p;
  int64_t tiles_h, tiles_w, tiles; /* tiles = n * tiles_h * tiles_w */
  int edge_h, edge_w;              /* OH % 4 and OW % 4: outputs of the edge tiles, 0 for none */
  int64_t class_first[5];          /* tiles of class c: [class_first[c], class_first[c + 1]) */
  int64_t xi_lo[36], xi_hi[36];    /* the tiles that use position xi */
  int64_t cs, kp;                  /* row lengths of V and M */
  int64_t cols, panels;            /* the product kernel's panel width, K split into panels */
  int64_t u_block;                 /* floats from one (xi, panel) block of U to the next */
  int64_t v_tile, v_xi, v_chunk;   /* V: floats from one tile, xi or 16 channels to the next */
  int64_t m_tile, m_xi;            /* M: the same */
} bk_wino_geom_t;

/* Fills g for problem p and the product kernel's panel width. */
void bk_wino_geom_init(bk_wino_geom_t* g, const bk_conv_problem_t* p, int64_t cols);

/* V for blocks of up to BK_WINO_TALL_ROWS tiles, interleaved: the block's
 * rows for 16 channels of one position are one stretch of
 * 16 * BK_WINO_TALL_ROWS floats (v_tile = 16), so that one pointer reaches
 * every row at a constant offset; the 36 positions' stretches for the
 * same 16 channels follow each other (v_xi), then the next 16 channels
 * (v_chunk). */
void bk_wino_geom_interleave(bk_wino_geom_t* g);

/* Floats of V for a block of `rows` tiles in g's layout (at most
 * BK_WINO_TALL_ROWS when interleaved). */
int64_t bk_wino_v_floats(const bk_wino_geom_t* g, int64_t rows);

/* Where tile t is: image *n, tile row *ty and column *tx, with *rows and
 * *cols outputs (4, or the edge's).
 *
 * Edge tiles. When OH (or OW) is not a multiple of 4, the last tile row
 * (column) has e = OH % 4 outputs. A full tile there would compute 4 and
 * drop 4 - e (at 14x14, 16 tiles of 16 outputs for 196: 31% more products
 * than needed). It is an F(e, 3) tile instead, interpolating at a subset
 * of the same points with the same rows of G, so that it uses the same U:
 *
 *   e  points              positions   B^T (rows at those positions)      A^T
 *   3  0, 1, -1, 2, inf   0 1 2 3 5   | 4 -2 -4  2  0 |                   | 1 1  1 1 0 |
 *                                     | 0 -6 -3  3  0 |                   | 0 1 -1 2 0 |
 *                                     | 0  2 -3  1  0 |                   | 0 1  1 4 1 |
 *                                     | 0 -4  0  4  0 |
 *                                     | 0  2 -1 -2  1 |
 *   2  0, 1, -1, inf      0 1 2 5     | 4 0 -4 0 | 0 -3 -3 0 |             | 1 1  1 0 |
 *                                     | 0 3 -3 0 | 0 -1  0 1 |             | 0 1 -1 1 |
 *   1  0, 1, inf          0 1 5       | 4 -4 0 | 0 -6 0 | 0 -1 1 |         | 1 1 1 |
 *
 * (B^T follows from G and A^T: each row of G here is the F(e, 3) row
 * scaled, and B^T's row carries the inverse scale). A tile's kind is the
 * pair (rows, columns), each 4 or e; its V holds zeros at the positions
 * its kinds leave out, and its products there are never read. So that the
 * tiles using a position are one run of rows, tiles are numbered by class,
 * [full rows x edge column, full x full, edge row x full, edge x edge],
 * each class image by image and row-major within an image: a position
 * outside the edge row kind's set is used by the first two classes only,
 * one outside the edge column kind's by the middle two, one outside both
 * by full x full alone. The products of each xi run over its rows
 * [xi_lo, xi_hi) only. */
void bk_wino_tile(const bk_wino_geom_t* g, int64_t t, int64_t* n, int64_t* ty, int64_t* tx, int* rows, int* cols);

/* The transforms:
 *
 *        | 4  0 -5  0  1  0 |         | 1/4    0     0   |
 *        | 0 -4 -4  1  1  0 |         | -1/6 -1/6  -1/6  |          | 1  1  1  1  1  0 |
 *  B^T = | 0  4 -4 -1  1  0 |     G = | -1/6  1/6  -1/6  |    A^T = | 0  1 -1  2 -2  0 |
 *        | 0 -2 -1  2  1  0 |         | 1/24  1/12  1/6  |          | 0  1  1  4  4  0 |
 *        | 0  2 -1 -2  1  0 |         | 1/24 -1/12  1/6  |          | 0  1 -1  8 -8  1 |
 *        | 0  4  0 -5  0  1 |         | 0      0     1   |
 *
 * compiled once per instruction set of the product kernels (cpu.h; each
 * works on 16 lanes at once, channels of the input, filters of the filter
 * and the output, as GCC vectors): input tiles [t_begin, t_end) of x into
 * V; output tiles [t_begin, t_end) from M into y (+ bias when not NULL); U
 * for input channels [c_begin, c_end) of w, every filter (zeros past K). */
typedef struct {
  const char* isa; /* as bk_conv_kernel_t's */
  void (*input)(const bk_wino_geom_t* g, const float* x, int64_t t_begin, int64_t t_end, float* v, int64_t row0);
  void (*output)(const bk_wino_geom_t* g, const float* m, int64_t row0, int64_t t_begin, int64_t t_end,
                 const float* bias, float* y);
  void (*filter)(const bk_wino_geom_t* g, const float* w, int64_t c_begin, int64_t c_end, float* u);
} bk_wino_transforms_t;

/* The transforms for the instruction set isa names (a bk_conv_kernel_t's,
 * which the CPU and UOPJIT_CONV_ISA chose): one choice decides every
 * instruction the backend runs. The generic ones for a name not known. */
const bk_wino_transforms_t* bk_wino_transforms_for(const char* isa);

#endif
