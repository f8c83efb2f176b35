/* backends/conv/cuda_winograd_src.h: the CUDA C of the cuda_winograd
 * backend (cuda_winograd.c), Winograd F(2x2, 3x3) in four kernels, as one
 * string that NVRTC compiles. Included by cuda_winograd.c only.
 *
 * With d a 4x4 input tile, g a 3x3 filter and Y the 2x2 output tile,
 * Y = A^T [ (G g G^T) .* (B^T d B) ] A with
 *
 *        | 1  0 -1  0 |        | 1    0    0   |
 *  B^T = | 0  1  1  0 |    G = | 1/2  1/2  1/2 |    A^T = | 1  1  1  0 |
 *        | 0 -1  1  0 |        | 1/2 -1/2  1/2 |          | 0  1 -1 -1 |
 *        | 0  1  0 -1 |        | 0    0    1   |
 *
 * The kernels' layouts: above bk_cuda_wino_source. The element-wise kernels
 * are grid-stride loops with the channel (or filter) index fastest, so that
 * neighbouring threads touch neighbouring floats of NHWC tensors. */
#ifndef UJ_BACKENDS_CONV_CUDA_WINOGRAD_SRC_H
#define UJ_BACKENDS_CONV_CUDA_WINOGRAD_SRC_H

static const char* const bk_cuda_wino_names[] = {"uj_wino2_filter", "uj_wino2_input", "uj_wino2_product",
                                                 "uj_wino2_product64", "uj_wino2_output"};
enum { BK_WINO2_FILTER, BK_WINO2_INPUT, BK_WINO2_PRODUCT, BK_WINO2_PRODUCT64, BK_WINO2_OUTPUT, BK_WINO2_NKERNELS };

/* Layouts (floats, xi = 4*i + j the position in the 4x4 transformed tile,
 * T = N * ceil(OH/2) * ceil(OW/2) tiles, tile t = (n*tiles_h + ty)*tiles_w + tx;
 * offsets are 64-bit):
 *   U [16][C][K]   uj_wino2_filter, from w [K][3][3][C]
 *   V [16][T][C]   uj_wino2_input, from the 4x4 patch of x at
 *                  (2*ty - pad_h, 2*tx - pad_w), zero outside x
 *   M [16][T][K]   uj_wino2_product: M_xi = V_xi U_xi, 16 matrix products
 *                  (blockIdx.z = xi) in 16x16 tiles through shared memory,
 *                  one output a thread; uj_wino2_product64 when the
 *                  products are large enough to fill the GPU with 64x64
 *                  tiles: 16 outputs a thread, so that each value read
 *                  from shared memory feeds four multiply-adds rather than
 *                  one. Both add the C terms of an output in the same order.
 *   y              uj_wino2_output: A^T m A (+ bias), pixels past OH or OW
 *                  dropped */
static const char bk_cuda_wino_source[] =
    "/* Winograd F(2x2, 3x3): filter, input, product and output kernels. */\n"
    "typedef long long i64;\n"
    "\n"
    "extern \"C\" __global__ void uj_wino2_filter(const float* __restrict__ w, float* __restrict__ u, i64 K, i64 C) {\n"
    "  i64 total = K * C;\n"
    "  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {\n"
    "    i64 k = i % K, c = i / K;\n"
    "    float g[3][3], t[4][3];\n"
    "    for (int r = 0; r < 3; r++)\n"
    "      for (int s = 0; s < 3; s++) g[r][s] = w[((k * 3 + r) * 3 + s) * C + c];\n"
    "    for (int s = 0; s < 3; s++) {\n"
    "      t[0][s] = g[0][s];\n"
    "      t[1][s] = 0.5f * (g[0][s] + g[1][s] + g[2][s]);\n"
    "      t[2][s] = 0.5f * (g[0][s] - g[1][s] + g[2][s]);\n"
    "      t[3][s] = g[2][s];\n"
    "    }\n"
    "    for (int r = 0; r < 4; r++) {\n"
    "      float e[4];\n"
    "      e[0] = t[r][0];\n"
    "      e[1] = 0.5f * (t[r][0] + t[r][1] + t[r][2]);\n"
    "      e[2] = 0.5f * (t[r][0] - t[r][1] + t[r][2]);\n"
    "      e[3] = t[r][2];\n"
    "      for (int j = 0; j < 4; j++) u[((i64)(4 * r + j) * C + c) * K + k] = e[j];\n"
    "    }\n"
    "  }\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void uj_wino2_input(const float* __restrict__ x, float* __restrict__ v, i64 T, i64 H,\n"
    "                                          i64 W, i64 C, i64 tiles_h, i64 tiles_w, int pad_h, int pad_w) {\n"
    "  i64 total = T * C;\n"
    "  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {\n"
    "    i64 c = i % C, t = i / C;\n"
    "    i64 n = t / (tiles_h * tiles_w), rest = t % (tiles_h * tiles_w);\n"
    "    i64 y0 = 2 * (rest / tiles_w) - pad_h, x0 = 2 * (rest % tiles_w) - pad_w;\n"
    "    float d[4][4], b[4][4];\n"
    "    for (int r = 0; r < 4; r++)\n"
    "      for (int s = 0; s < 4; s++) {\n"
    "        i64 yy = y0 + r, xx = x0 + s;\n"
    "        d[r][s] = yy >= 0 && yy < H && xx >= 0 && xx < W ? x[((n * H + yy) * W + xx) * C + c] : 0.0f;\n"
    "      }\n"
    "    for (int s = 0; s < 4; s++) {\n"
    "      b[0][s] = d[0][s] - d[2][s];\n"
    "      b[1][s] = d[1][s] + d[2][s];\n"
    "      b[2][s] = d[2][s] - d[1][s];\n"
    "      b[3][s] = d[1][s] - d[3][s];\n"
    "    }\n"
    "    for (int r = 0; r < 4; r++) {\n"
    "      float e[4];\n"
    "      e[0] = b[r][0] - b[r][2];\n"
    "      e[1] = b[r][1] + b[r][2];\n"
    "      e[2] = b[r][2] - b[r][1];\n"
    "      e[3] = b[r][1] - b[r][3];\n"
    "      for (int j = 0; j < 4; j++) v[((i64)(4 * r + j) * T + t) * C + c] = e[j];\n"
    "    }\n"
    "  }\n"
    "}\n"
    "\n"
    "/* M_xi [T x K] = V_xi [T x C] U_xi [C x K]; 256 threads, a 16x16 tile of M each block. */\n"
    "extern \"C\" __global__ void uj_wino2_product(const float* __restrict__ v, const float* __restrict__ u,\n"
    "                                            float* __restrict__ m, i64 T, i64 C, i64 K) {\n"
    "  __shared__ float a[16][17];\n"
    "  __shared__ float b[16][17];\n"
    "  int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;\n"
    "  i64 xi = blockIdx.z;\n"
    "  const float* vx = v + xi * T * C;\n"
    "  const float* ux = u + xi * C * K;\n"
    "  i64 row = (i64)blockIdx.x * 16 + ty, col = (i64)blockIdx.y * 16 + tx;\n"
    "  float acc = 0.0f;\n"
    "  for (i64 c0 = 0; c0 < C; c0 += 16) {\n"
    "    a[ty][tx] = row < T && c0 + tx < C ? vx[row * C + c0 + tx] : 0.0f;\n"
    "    b[ty][tx] = c0 + ty < C && col < K ? ux[(c0 + ty) * K + col] : 0.0f;\n"
    "    __syncthreads();\n"
    "    for (int q = 0; q < 16; q++) acc += a[ty][q] * b[q][tx];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (row < T && col < K) m[(xi * T + row) * K + col] = acc;\n"
    "}\n"
    "\n"
    "/* The same products, a 64x64 tile of M a block: thread (tx, ty) of 16x16 computes rows ty + 16i and\n"
    " * columns tx + 16j (i, j < 4), so that a warp reads 16 consecutive floats of b and two of a. */\n"
    "extern \"C\" __global__ void uj_wino2_product64(const float* __restrict__ v, const float* __restrict__ u,\n"
    "                                              float* __restrict__ m, i64 T, i64 C, i64 K) {\n"
    "  __shared__ float a[64][17];\n"
    "  __shared__ float b[16][64];\n"
    "  int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;\n"
    "  i64 xi = blockIdx.z;\n"
    "  const float* vx = v + xi * T * C;\n"
    "  const float* ux = u + xi * C * K;\n"
    "  i64 row0 = (i64)blockIdx.x * 64, col0 = (i64)blockIdx.y * 64;\n"
    "  float acc[4][4];\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 4; i++)\n"
    "#pragma unroll\n"
    "    for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;\n"
    "  for (i64 c0 = 0; c0 < C; c0 += 16) {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 4; i++) {\n"
    "      int r = ty + 16 * i, br = (tid >> 6) + 4 * i, bc = tid & 63;\n"
    "      a[r][tx] = row0 + r < T && c0 + tx < C ? vx[(row0 + r) * C + c0 + tx] : 0.0f;\n"
    "      b[br][bc] = c0 + br < C && col0 + bc < K ? ux[(c0 + br) * K + col0 + bc] : 0.0f;\n"
    "    }\n"
    "    __syncthreads();\n"
    "#pragma unroll\n"
    "    for (int q = 0; q < 16; q++) {\n"
    "      float av[4], bv[4];\n"
    "#pragma unroll\n"
    "      for (int i = 0; i < 4; i++) av[i] = a[ty + 16 * i][q];\n"
    "#pragma unroll\n"
    "      for (int j = 0; j < 4; j++) bv[j] = b[q][tx + 16 * j];\n"
    "#pragma unroll\n"
    "      for (int i = 0; i < 4; i++)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 4; j++) acc[i][j] += av[i] * bv[j];\n"
    "    }\n"
    "    __syncthreads();\n"
    "  }\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 4; i++)\n"
    "#pragma unroll\n"
    "    for (int j = 0; j < 4; j++) {\n"
    "      i64 row = row0 + ty + 16 * i, col = col0 + tx + 16 * j;\n"
    "      if (row < T && col < K) m[(xi * T + row) * K + col] = acc[i][j];\n"
    "    }\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void uj_wino2_output(const float* __restrict__ m, const float* __restrict__ bias,\n"
    "                                           float* __restrict__ y, i64 T, i64 K, i64 OH, i64 OW, i64 tiles_h,\n"
    "                                           i64 tiles_w, int has_bias) {\n"
    "  i64 total = T * K;\n"
    "  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {\n"
    "    i64 k = i % K, t = i / K;\n"
    "    i64 n = t / (tiles_h * tiles_w), rest = t % (tiles_h * tiles_w);\n"
    "    i64 oy = 2 * (rest / tiles_w), ox = 2 * (rest % tiles_w);\n"
    "    float q[4][4], s[2][4];\n"
    "    for (int xi = 0; xi < 16; xi++) q[xi / 4][xi % 4] = m[((i64)xi * T + t) * K + k];\n"
    "    for (int j = 0; j < 4; j++) {\n"
    "      s[0][j] = q[0][j] + q[1][j] + q[2][j];\n"
    "      s[1][j] = q[1][j] - q[2][j] - q[3][j];\n"
    "    }\n"
    "    float add = has_bias ? bias[k] : 0.0f;\n"
    "    for (int r = 0; r < 2; r++) {\n"
    "      float o[2];\n"
    "      o[0] = s[r][0] + s[r][1] + s[r][2] + add;\n"
    "      o[1] = s[r][1] - s[r][2] - s[r][3] + add;\n"
    "      for (int j = 0; j < 2; j++)\n"
    "        if (oy + r < OH && ox + j < OW) y[((n * OH + oy + r) * OW + ox + j) * K + k] = o[j];\n"
    "    }\n"
    "  }\n"
    "}\n";

#endif
