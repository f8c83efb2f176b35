/* backends/conv/winograd.c: the input, output and filter transforms of
 * Winograd F(4x4, 3x3) (matrices and layouts in winograd.h).
 *
 * Each 2-D transform is two passes of a 1-D one: along the first index of
 * the tile for every column, then along the second for every row. The 1-D
 * transforms are written in a factored form that shares the common
 * subexpressions, e.g. for B^T
 *
 *   r1 = (d3 + d4) - 4 (d1 + d2)      r3 = (d4 - d2) + 2 (d3 - d1)
 *   r2 = (d4 - d3) + 4 (d1 - d2)      r4 = (d4 - d2) - 2 (d3 - d1)
 *
 * which is 12 additions and 6 multiplications for 6 values, and keeps the
 * rounding error close to that of a direct evaluation. Every value is a
 * 16-lane vector: 16 channels of one tile (input), 16 filters of one tile
 * (output), or 16 filters of one channel (filter). Lanes past C or K read
 * zeros and are written where the layout has room for them (V and U rows
 * are padded) or dropped (y). */
#include <string.h>

#include "cpu.h"
#include "winograd.h"

#define LANES 16

/* Builds clones of a function for avx512, avx2 and the default target. */
#define BK_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

/* r[k*rs] = (B^T d)[k] for d[k*ds], k < 6. */
static inline __attribute__((always_inline)) void input_1d(bk_v16* r, int rs, const bk_v16* d, int ds) {
  bk_v16 d0 = d[0], d1 = d[ds], d2 = d[2 * ds], d3 = d[3 * ds], d4 = d[4 * ds], d5 = d[5 * ds];
  bk_v16 d42 = d4 - d2, d31 = d3 - d1;
  r[0] = 4.0f * d0 - 5.0f * d2 + d4;
  r[rs] = (d3 + d4) - 4.0f * (d1 + d2);
  r[2 * rs] = (d4 - d3) + 4.0f * (d1 - d2);
  r[3 * rs] = d42 + 2.0f * d31;
  r[4 * rs] = d42 - 2.0f * d31;
  r[5 * rs] = 4.0f * d1 - 5.0f * d3 + d5;
}

/* r[k*rs] = (A^T m)[k] for m[k*ms], k < 4. */
static inline __attribute__((always_inline)) void output_1d(bk_v16* r, int rs, const bk_v16* m, int ms) {
  bk_v16 m1 = m[ms], m2 = m[2 * ms], m3 = m[3 * ms], m4 = m[4 * ms];
  bk_v16 s12 = m1 + m2, d12 = m1 - m2, s34 = m3 + m4, d34 = m3 - m4;
  r[0] = m[0] + s12 + s34;
  r[rs] = d12 + 2.0f * d34;
  r[2 * rs] = s12 + 4.0f * s34;
  r[3 * rs] = d12 + 8.0f * d34 + m[5 * ms];
}

/* r[k*rs] = (G g)[k] for g[k*gs], k < 3 -> 6 values. */
static inline __attribute__((always_inline)) void filter_1d(bk_v16* r, int rs, const bk_v16* g, int gs) {
  bk_v16 g0 = g[0], g1 = g[gs], g2 = g[2 * gs];
  bk_v16 outer = (g0 + g2) * (-1.0f / 6.0f), middle = g1 * (1.0f / 6.0f);
  bk_v16 outer24 = g0 * (1.0f / 24.0f) + g2 * (1.0f / 6.0f), middle12 = g1 * (1.0f / 12.0f);
  r[0] = g0 * 0.25f;
  r[rs] = outer - middle;
  r[2 * rs] = outer + middle;
  r[3 * rs] = outer24 + middle12;
  r[4 * rs] = outer24 - middle12;
  r[5 * rs] = g2;
}

/* n floats of src (n < 16) as a vector, zeros after. */
static inline __attribute__((always_inline)) void load_partial(bk_v16* v, const float* src, int64_t n) {
  float lanes[LANES] = {0};
  memcpy(lanes, src, sizeof(float) * (size_t)n);
  memcpy(v, lanes, sizeof lanes);
}

/* The 6 input pixels of column j of a tile, 16 channels from c0: zeros
 * outside x and past C. */
static inline __attribute__((always_inline)) void input_column(bk_v16* col, const float* base, int64_t ih0,
                                                                int64_t iw, const bk_conv_problem_t* p, int64_t nc) {
  int col_inside = iw >= 0 && iw < p->w;
  for (int i = 0; i < 6; i++) {
    int64_t ih = ih0 + i;
    const float* src = base + (ih * p->w + iw) * p->c;
    if (!col_inside || ih < 0 || ih >= p->h || nc <= 0) col[i] = (bk_v16){0};
    else if (nc == LANES) col[i] = *(const bk_v16u*)src;
    else load_partial(&col[i], src, nc);
  }
}

BK_CLONES void bk_wino_input(const bk_wino_geom_t* g, const float* x, int64_t t_begin, int64_t t_end, float* v,
                             int64_t row0) {
  const bk_conv_problem_t* p = g->p;
  /* every size in a local: the vector stores may alias anything (bk_v16u),
   * so a size read through g or p would be read again after each store */
  const int64_t H = p->h, W = p->w, C = p->c, cs = g->cs, per_image = g->tiles_h * g->tiles_w;
  const int64_t tiles_w = g->tiles_w, v_tile = g->v_tile, v_xi = g->v_xi, pad_h = p->pad_h, pad_w = p->pad_w;
  for (int64_t t = t_begin; t < t_end; t++) {
    int64_t n = t / per_image, ty = t % per_image / tiles_w, tx = t % tiles_w;
    int64_t ih0 = 4 * ty - pad_h, iw0 = 4 * tx - pad_w;
    int inside = ih0 >= 0 && ih0 + 6 <= H && iw0 >= 0 && iw0 + 6 <= W;
    float* out = v + (t - row0) * v_tile;
    for (int64_t c0 = 0; c0 < cs; c0 += LANES) {
      int64_t nc = C - c0 < LANES ? C - c0 : LANES;
      const float* base = x + n * H * W * C + c0;
      /* columns: tmp[6*i + j] = (B^T d)[i][j]; rows: V[6*i + j] = (B^T d B)[i][j] */
      bk_v16 tmp[36];
      for (int j = 0; j < 6; j++) {
        bk_v16 col[6];
        if (inside && nc == LANES) {
          const float* src = base + (ih0 * W + iw0 + j) * C;
          for (int i = 0; i < 6; i++) col[i] = *(const bk_v16u*)(src + i * W * C);
        } else {
          input_column(col, base, ih0, iw0 + j, p, nc);
        }
        input_1d(&tmp[j], 6, col, 1);
      }
      for (int i = 0; i < 6; i++) {
        bk_v16 row[6];
        input_1d(row, 1, &tmp[6 * i], 1);
        for (int j = 0; j < 6; j++) *(bk_v16u*)(out + (6 * i + j) * v_xi + c0) = row[j];
      }
    }
  }
}

BK_CLONES void bk_wino_output(const bk_wino_geom_t* g, const float* m, int64_t row0, int64_t t_begin, int64_t t_end,
                              const float* bias, float* y) {
  const bk_conv_problem_t* p = g->p;
  /* sizes in locals, as in bk_wino_input */
  const int64_t OH = p->oh, OW = p->ow, K = p->k, per_image = g->tiles_h * g->tiles_w;
  const int64_t tiles_w = g->tiles_w, m_tile = g->m_tile, m_xi = g->m_xi;
  for (int64_t t = t_begin; t < t_end; t++) {
    int64_t n = t / per_image, ty = t % per_image / tiles_w, tx = t % tiles_w;
    int64_t rows = OH - 4 * ty < 4 ? OH - 4 * ty : 4, cols = OW - 4 * tx < 4 ? OW - 4 * tx : 4;
    const float* in = m + (t - row0) * m_tile;
    float* out = y + ((n * OH + 4 * ty) * OW + 4 * tx) * K;
    for (int64_t k0 = 0; k0 < K; k0 += LANES) {
      int64_t nk = K - k0 < LANES ? K - k0 : LANES;
      bk_v16 b = {0};
      if (bias && nk == LANES) b = *(const bk_v16u*)(bias + k0);
      else if (bias) load_partial(&b, bias + k0, nk);
      /* columns: tmp[6*a + j] = (A^T m)[a][j]; rows: Y[a][c] = (A^T m A)[a][c] */
      bk_v16 tmp[24];
      for (int j = 0; j < 6; j++) {
        bk_v16 col[6];
        for (int i = 0; i < 6; i++) col[i] = *(const bk_v16u*)(in + (6 * i + j) * m_xi + k0);
        output_1d(&tmp[j], 6, col, 1);
      }
      for (int64_t a = 0; a < rows; a++) {
        bk_v16 row[4];
        output_1d(row, 1, &tmp[6 * a], 1);
        float* dst = out + a * OW * K + k0;
        if (cols == 4 && nk == LANES) {
          for (int c = 0; c < 4; c++) *(bk_v16u*)(dst + c * K) = row[c] + b;
        } else {
          for (int64_t c = 0; c < cols; c++) {
            bk_v16 r = row[c] + b;
            memcpy(dst + c * K, &r, sizeof(float) * (size_t)nk);
          }
        }
      }
    }
  }
}

BK_CLONES void bk_wino_filter(const bk_wino_geom_t* g, const float* w, int64_t c_begin, int64_t c_end, float* u) {
  const bk_conv_problem_t* p = g->p;
  const int64_t C = p->c, K = p->k, cols = g->cols, panels = g->panels;
  /* A few channels of one panel at a time are transformed into `rows`, then
   * copied out as one contiguous run per position xi: writing U one vector
   * at a time would touch 36 places a whole plane apart for every vector,
   * and with planes a power of two apart those all fall in one cache set. */
  enum { CHANNELS = 4 };
  float rows[36][CHANNELS][64];
  for (int64_t panel = 0; panel < panels; panel++)
    for (int64_t c0 = c_begin; c0 < c_end; c0 += CHANNELS) {
      int64_t nc = c_end - c0 < CHANNELS ? c_end - c0 : CHANNELS;
      for (int64_t lane0 = 0; lane0 < cols; lane0 += LANES) {
        int64_t k0 = panel * cols + lane0;
        for (int64_t ci = 0; ci < nc; ci++) {
          /* the 9 taps of 16 filters for channel c: strided reads gathered
           * through a small array; the lines stay in L1 while c advances */
          float taps[9][LANES];
          for (int kk = 0; kk < LANES; kk++) {
            int64_t k = k0 + kk;
            for (int tap = 0; tap < 9; tap++) taps[tap][kk] = k < K ? w[(k * 9 + tap) * C + c0 + ci] : 0.0f;
          }
          bk_v16 gv[9], tmp[18], res[6];
          memcpy(gv, taps, sizeof taps);
          for (int s = 0; s < 3; s++) filter_1d(&tmp[s], 3, &gv[s], 3);
          for (int i = 0; i < 6; i++) {
            filter_1d(res, 1, &tmp[3 * i], 1);
            for (int j = 0; j < 6; j++) memcpy(&rows[6 * i + j][ci][lane0], &res[j], sizeof res[j]);
          }
        }
      }
      for (int xi = 0; xi < 36; xi++)
        for (int64_t ci = 0; ci < nc; ci++)
          memcpy(u + (xi * panels + panel) * g->u_block + (c0 + ci) * cols, rows[xi][ci], sizeof(float) * (size_t)cols);
    }
}
