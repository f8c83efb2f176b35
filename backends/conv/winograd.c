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
 * rounding error close to that of a direct evaluation. The edge tiles'
 * F(e, 3) transforms (winograd.h) are factored the same way, and write
 * zeros at the positions they leave out. */
#include <string.h>

#include "cpu.h"
#include "winograd.h"

#define LANES 16

/* Positions of the 6 an F(e, 3) tile side uses, by e (winograd.h). */
static const int kind_positions[5] = {0, 0x23, 0x27, 0x2f, 0x3f};

/* r[k*rs] = (B^T d)[k] for d[k*ds], k < 6, for a side of e outputs (e + 2
 * inputs): zeros at the positions e leaves out. */
static inline __attribute__((always_inline)) void input_1d(int e, bk_v16* r, int rs, const bk_v16* d, int ds) {
  bk_v16 zero = {0}, d0 = d[0], d1 = d[ds], d2 = d[2 * ds], d3, d4, d5;
  switch (e) {
  case 4: {
    d3 = d[3 * ds], d4 = d[4 * ds], d5 = d[5 * ds];
    bk_v16 d42 = d4 - d2, d31 = d3 - d1;
    r[0] = 4.0f * (d0 - d2) + d42;
    r[rs] = (d3 + d4) - 4.0f * (d1 + d2);
    r[2 * rs] = (d4 - d3) + 4.0f * (d1 - d2);
    r[3 * rs] = d42 + 2.0f * d31;
    r[4 * rs] = d42 - 2.0f * d31;
    r[5 * rs] = (d5 - d3) - 4.0f * d31;
    return;
  }
  case 3: {
    d3 = d[3 * ds], d4 = d[4 * ds];
    bk_v16 d31 = d3 - d1, d32 = d3 - d2;
    r[0] = 4.0f * (d0 - d2) + 2.0f * d31;
    r[rs] = 3.0f * d32 - 6.0f * d1;
    r[2 * rs] = d32 + 2.0f * (d1 - d2);
    r[3 * rs] = 4.0f * d31;
    r[4 * rs] = zero;
    r[5 * rs] = (d4 - d2) - 2.0f * d31;
    return;
  }
  case 2:
    d3 = d[3 * ds];
    r[0] = 4.0f * (d0 - d2);
    r[rs] = -3.0f * (d1 + d2);
    r[2 * rs] = 3.0f * (d1 - d2);
    r[3 * rs] = zero;
    r[4 * rs] = zero;
    r[5 * rs] = d3 - d1;
    return;
  default: /* 1: d2 is the last input */
    r[0] = 4.0f * (d0 - d1);
    r[rs] = -6.0f * d1;
    r[2 * rs] = zero;
    r[3 * rs] = zero;
    r[4 * rs] = zero;
    r[5 * rs] = d2 - d1;
    return;
  }
}

/* r[k*rs] = (A^T m)[k] for m[k*ms], k < e, reading only the positions of
 * a side of e outputs. */
static inline __attribute__((always_inline)) void output_1d(int e, bk_v16* r, int rs, const bk_v16* m, int ms) {
  bk_v16 m0 = m[0], m1 = m[ms], m2 = m[2 * ms], m5 = m[5 * ms];
  bk_v16 s12 = m1 + m2, d12 = m1 - m2;
  switch (e) {
  case 4: {
    bk_v16 m3 = m[3 * ms], m4 = m[4 * ms], s34 = m3 + m4, d34 = m3 - m4;
    r[0] = m0 + s12 + s34;
    r[rs] = d12 + 2.0f * d34;
    r[2 * rs] = s12 + 4.0f * s34;
    r[3 * rs] = d12 + 8.0f * d34 + m5;
    return;
  }
  case 3: {
    bk_v16 m3 = m[3 * ms];
    r[0] = m0 + s12 + m3;
    r[rs] = d12 + 2.0f * m3;
    r[2 * rs] = s12 + 4.0f * m3 + m5;
    return;
  }
  case 2:
    r[0] = m0 + s12;
    r[rs] = d12 + m5;
    return;
  default:
    r[0] = m0 + m1 + m5;
    return;
  }
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

void bk_wino_geom_init(bk_wino_geom_t* g, const bk_conv_problem_t* p, int64_t cols) {
  memset(g, 0, sizeof *g);
  g->p = p;
  g->edge_h = (int)(p->oh % 4), g->edge_w = (int)(p->ow % 4);
  int64_t full_h = p->oh / 4, full_w = p->ow / 4, eh = g->edge_h > 0, ew = g->edge_w > 0;
  g->tiles_h = full_h + eh, g->tiles_w = full_w + ew;
  g->tiles = p->n * g->tiles_h * g->tiles_w;
  /* per image: full rows x edge column, full x full, edge row x full, edge x edge */
  int64_t per_image[4] = {full_h * ew, full_h * full_w, eh * full_w, eh * ew};
  for (int c = 0; c < 4; c++) g->class_first[c + 1] = g->class_first[c] + p->n * per_image[c];
  for (int xi = 0; xi < 36; xi++) {
    /* with no edge on a side, its edge classes are empty: any answer does */
    int all_rows = g->edge_h == 0 || (kind_positions[g->edge_h] >> (xi / 6) & 1);
    int all_cols = g->edge_w == 0 || (kind_positions[g->edge_w] >> (xi % 6) & 1);
    g->xi_lo[xi] = g->class_first[all_cols ? 0 : 1];
    g->xi_hi[xi] = g->class_first[all_rows ? (all_cols ? 4 : 3) : 2];
  }
  g->cs = (p->c + 15) / 16 * 16;
  g->cols = cols;
  g->panels = (p->k + cols - 1) / cols;
  g->kp = g->panels * cols;
  g->u_block = p->c * cols + 16;
  g->v_tile = 36 * g->cs + 16, g->v_xi = g->cs, g->v_chunk = LANES;
  g->m_tile = 36 * g->kp + 16, g->m_xi = g->kp;
}

void bk_wino_geom_interleave(bk_wino_geom_t* g) {
  /* 16 channels of every position together: the input transform writes
   * 36 vectors per tile and 16 channels, which with positions a plane
   * apart (v_xi = 16 * cs) land on 36 pages, and took 3 times as long at
   * 14x14x256. A cache line between positions keeps their stretches from
   * being a power of two apart. */
  g->v_tile = LANES;
  g->v_xi = LANES * BK_WINO_TALL_ROWS + LANES;
  g->v_chunk = 36 * g->v_xi;
}

int64_t bk_wino_v_floats(const bk_wino_geom_t* g, int64_t rows) {
  /* interleaved, every 16 channels hold room for BK_WINO_TALL_ROWS rows */
  return g->v_chunk > LANES ? g->cs / LANES * g->v_chunk : rows * g->v_tile;
}

void bk_wino_tile(const bk_wino_geom_t* g, int64_t t, int64_t* n, int64_t* ty, int64_t* tx, int* rows, int* cols) {
  int64_t full_h = g->p->oh / 4, full_w = g->p->ow / 4;
  int c = 0;
  while (t >= g->class_first[c + 1]) c++;
  /* the class's tile rows start at 0 (full rows) or full_h (the edge row), its columns likewise */
  int64_t ty0 = c < 2 ? 0 : full_h, tx0 = c == 1 || c == 2 ? 0 : full_w;
  int64_t nty = c < 2 ? full_h : 1, ntx = c == 1 || c == 2 ? full_w : 1;
  int64_t u = t - g->class_first[c], per_image = nty * ntx;
  *n = u / per_image;
  *ty = ty0 + u % per_image / ntx;
  *tx = tx0 + u % per_image % ntx;
  *rows = *ty < full_h ? 4 : g->edge_h;
  *cols = *tx < full_w ? 4 : g->edge_w;
}

/* n (< 16) floats of src as a vector, zeros after. */
static inline __attribute__((always_inline)) void load_partial(bk_v16* v, const float* src, int64_t n) {
  float lanes[LANES] = {0};
  memcpy(lanes, src, sizeof(float) * (size_t)n);
  memcpy(v, lanes, sizeof lanes);
}

/* The `count` input pixels of column iw from row ih0 on, 16 channels from
 * c0 (base): zeros outside x and past C. */
static inline __attribute__((always_inline)) void input_column(bk_v16* col, int count, const float* base, int64_t ih0,
                                                                int64_t iw, const bk_conv_problem_t* p, int64_t nc) {
  int col_inside = iw >= 0 && iw < p->w;
  for (int i = 0; i < count; i++) {
    int64_t ih = ih0 + i;
    const float* src = base + (ih * p->w + iw) * p->c;
    if (!col_inside || ih < 0 || ih >= p->h || nc <= 0) col[i] = (bk_v16){0};
    else if (nc == LANES) col[i] = *(const bk_v16u*)src;
    else load_partial(&col[i], src, nc);
  }
}

/* Calls body(e, ...) with e a constant 1 to 4, so that each side's loops
 * unroll with the transform's registers named (the F(4, 3) transforms take
 * a third longer with e a variable). */
#define BY_OUTPUTS(e, body, ...)     \
  switch (e) {                       \
  case 1: body(1, __VA_ARGS__); break; \
  case 2: body(2, __VA_ARGS__); break; \
  case 3: body(3, __VA_ARGS__); break; \
  default: body(4, __VA_ARGS__); break; \
  }

/* The first pass of the input transform: tmp[6*i + j] = (B^T d)[i][j] for
 * the ec + 2 columns j of the tile, 16 channels from base. */
static inline __attribute__((always_inline)) void input_columns(int er, int ec, bk_v16* tmp, const float* base,
                                                                 int fast, int64_t ih0, int64_t iw0,
                                                                 const bk_conv_problem_t* p, int64_t nc) {
  const int64_t WC = p->w * p->c;
  for (int j = 0; j < ec + 2; j++) {
    bk_v16 col[6] = {{0}}; /* er + 2 of them read */
    if (fast) {
      const float* src = base + ih0 * WC + (iw0 + j) * p->c;
      for (int i = 0; i < er + 2; i++) col[i] = *(const bk_v16u*)(src + i * WC);
    } else {
      input_column(col, er + 2, base, ih0, iw0 + j, p, nc);
    }
    input_1d(er, &tmp[j], 6, col, 1);
  }
  for (int j = ec + 2; j < 6; j++) /* not read; written, for the compiler's sake */
    for (int i = 0; i < 6; i++) tmp[6 * i + j] = (bk_v16){0};
}

/* The second: V[6*i + j] = (tmp B)[i][j], every position. */
static inline __attribute__((always_inline)) void input_rows(int ec, const bk_v16* tmp, float* out, int64_t v_xi) {
  for (int i = 0; i < 6; i++) {
    bk_v16 row[6];
    input_1d(ec, row, 1, &tmp[6 * i], 1);
    for (int j = 0; j < 6; j++) *(bk_v16u*)(out + (6 * i + j) * v_xi) = row[j];
  }
}

static inline __attribute__((always_inline)) void input_transform(const bk_wino_geom_t* g, const float* x,
                                                                   int64_t t_begin, int64_t t_end, float* v,
                                                                   int64_t row0) {
  const bk_conv_problem_t* p = g->p;
  /* every size in a local: the vector stores may alias anything (bk_v16u),
   * so a size read through g or p would be read again after each store */
  const int64_t H = p->h, W = p->w, C = p->c, cs = g->cs;
  const int64_t v_tile = g->v_tile, v_xi = g->v_xi, v_chunk = g->v_chunk, pad_h = p->pad_h, pad_w = p->pad_w;
  for (int64_t t = t_begin; t < t_end; t++) {
    int64_t n, ty, tx;
    int er, ec; /* outputs down and across: the tile reads er + 2 by ec + 2 pixels */
    bk_wino_tile(g, t, &n, &ty, &tx, &er, &ec);
    int64_t ih0 = 4 * ty - pad_h, iw0 = 4 * tx - pad_w;
    int inside = ih0 >= 0 && ih0 + er + 2 <= H && iw0 >= 0 && iw0 + ec + 2 <= W;
    float* out = v + (t - row0) * v_tile;
    for (int64_t c0 = 0; c0 < cs; c0 += LANES) {
      int64_t nc = C - c0 < LANES ? C - c0 : LANES;
      const float* base = x + n * H * W * C + c0;
      int fast = inside && nc == LANES;
      bk_v16 tmp[36];
      BY_OUTPUTS(er, input_columns, ec, tmp, base, fast, ih0, iw0, p, nc)
      /* interleaved V: the next 16 channels' 36 lines are far apart, and
       * after the products streamed U through L2 they are no longer
       * there; asking for them ahead, for writing, makes the input step
       * faster (14x14x256, batch 1, on one thread and on two; tile-major
       * V gains nothing) */
      if (v_chunk > LANES && c0 + LANES < cs)
        for (int xi = 0; xi < 36; xi++) __builtin_prefetch(out + (c0 / LANES + 1) * v_chunk + xi * v_xi, 1, 3);
      BY_OUTPUTS(ec, input_rows, tmp, out + c0 / LANES * v_chunk, v_xi)
    }
  }
}

/* The first pass of the output transform: tmp[6*a + j] = (A^T m)[a][j] for
 * a < er, at the positions j the tile uses (zeros elsewhere), 16 filters
 * of M from in. */
static inline __attribute__((always_inline)) void output_columns(int er, int ec, bk_v16* tmp, const float* in,
                                                                  int64_t m_xi) {
  for (int j = 0; j < 6; j++) {
    if (!(kind_positions[ec] >> j & 1)) {
      for (int a = 0; a < 4; a++) tmp[6 * a + j] = (bk_v16){0};
      continue;
    }
    bk_v16 col[6] = {{0}};
    for (int i = 0; i < 6; i++)
      if (kind_positions[er] >> i & 1) col[i] = *(const bk_v16u*)(in + (6 * i + j) * m_xi);
    output_1d(er, &tmp[j], 6, col, 1);
  }
}

/* The second: Y[a][c] = (tmp A)[a][c] + *b for a < er, c < ec, into dst
 * (rows OW*K apart, pixels K apart), nk filters. The bias comes by pointer:
 * a 64-byte vector passed by value has a different calling convention with
 * and without AVX-512, which clang refuses in the clones built without it
 * even when the call is inlined. */
static inline __attribute__((always_inline)) void output_rows(int ec, int er, const bk_v16* tmp, const bk_v16* b,
                                                               float* dst, int64_t OW, int64_t K, int64_t nk) {
  for (int a = 0; a < er; a++) {
    bk_v16 row[4];
    output_1d(ec, row, 1, &tmp[6 * a], 1);
    float* d = dst + a * OW * K;
    if (nk == LANES) {
      for (int c = 0; c < ec; c++) *(bk_v16u*)(d + c * K) = row[c] + *b;
    } else {
      for (int c = 0; c < ec; c++) {
        bk_v16 r = row[c] + *b;
        memcpy(d + c * K, &r, sizeof(float) * (size_t)nk);
      }
    }
  }
}

static inline __attribute__((always_inline)) void output_transform(const bk_wino_geom_t* g, const float* m,
                                                                    int64_t row0, int64_t t_begin, int64_t t_end,
                                                                    const float* bias, float* y) {
  const bk_conv_problem_t* p = g->p;
  /* sizes in locals, as in input_transform */
  const int64_t OH = p->oh, OW = p->ow, K = p->k, m_tile = g->m_tile, m_xi = g->m_xi;
  for (int64_t t = t_begin; t < t_end; t++) {
    int64_t n, ty, tx;
    int er, ec;
    bk_wino_tile(g, t, &n, &ty, &tx, &er, &ec);
    const float* in = m + (t - row0) * m_tile;
    float* out = y + ((n * OH + 4 * ty) * OW + 4 * tx) * K;
    for (int64_t k0 = 0; k0 < K; k0 += LANES) {
      int64_t nk = K - k0 < LANES ? K - k0 : LANES;
      bk_v16 b = {0};
      if (bias && nk == LANES) b = *(const bk_v16u*)(bias + k0);
      else if (bias) load_partial(&b, bias + k0, nk);
      bk_v16 tmp[24];
      /* most tiles: with both sides and the lanes constant every loop
       * unrolls, faster per tile than through BY_OUTPUTS, where the other
       * side's outputs stay a variable */
      if (er == 4 && ec == 4 && nk == LANES) {
        output_columns(4, 4, tmp, in + k0, m_xi);
        output_rows(4, 4, tmp, &b, out + k0, OW, K, LANES);
        continue;
      }
      BY_OUTPUTS(er, output_columns, ec, tmp, in + k0, m_xi)
      BY_OUTPUTS(ec, output_rows, er, tmp, &b, out + k0, OW, K, nk)
    }
  }
}

static inline __attribute__((always_inline)) void filter_transform(const bk_wino_geom_t* g, const float* w,
                                                                    int64_t c_begin, int64_t c_end, float* u) {
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

/* The three transforms compiled for one instruction set: the inlined
 * bodies above, under the function's target attribute. Every value is a
 * 16-lane vector: 16 channels of one tile (input), 16 filters of one tile
 * (output), or 16 filters of one channel (filter). Lanes past C or K read
 * zeros and are written where the layout has room for them (V and U rows
 * are padded) or dropped (y). cpu_winograd calls the transforms of the
 * kernel it runs: the CPU's features, the OS's support for their registers
 * and UOPJIT_CONV_ISA decide both alike. */
#define TRANSFORMS(isa_name, suffix, target_attribute)                                                              \
  target_attribute static void input_##suffix(const bk_wino_geom_t* g, const float* x, int64_t t_begin,             \
                                              int64_t t_end, float* v, int64_t row0) {                              \
    input_transform(g, x, t_begin, t_end, v, row0);                                                                  \
  }                                                                                                                  \
  target_attribute static void output_##suffix(const bk_wino_geom_t* g, const float* m, int64_t row0,              \
                                               int64_t t_begin, int64_t t_end, const float* bias, float* y) {       \
    output_transform(g, m, row0, t_begin, t_end, bias, y);                                                           \
  }                                                                                                                  \
  target_attribute static void filter_##suffix(const bk_wino_geom_t* g, const float* w, int64_t c_begin,           \
                                               int64_t c_end, float* u) {                                           \
    filter_transform(g, w, c_begin, c_end, u);                                                                       \
  }                                                                                                                  \
  static const bk_wino_transforms_t transforms_##suffix = {isa_name, input_##suffix, output_##suffix, filter_##suffix};

#if defined(__x86_64__) || defined(__i386__)
TRANSFORMS("avx512", avx512, BK_TARGET_AVX512)
TRANSFORMS("avx2", avx2, BK_TARGET_AVX2)
#endif
TRANSFORMS("generic", generic, )

const bk_wino_transforms_t* bk_wino_transforms_for(const char* isa) {
#if defined(__x86_64__) || defined(__i386__)
  if (strcmp(isa, transforms_avx512.isa) == 0) return &transforms_avx512;
  if (strcmp(isa, transforms_avx2.isa) == 0) return &transforms_avx2;
#endif
  return &transforms_generic;
}
