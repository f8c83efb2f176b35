/* tools/cli_demo.c: `uopjit demo`, a 2-D convolution (NHWC, "valid", stride
 * 1) written as uops, run on the interpreter, its fused loop IR printed and
 * its result checked against plain loops. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Graph builders return a negative id instead of a status; they fail only
 * on a bad argument (a malformed index expression is reported as such by
 * the message). */
static int bad_node(uj_io_t id) { return id < 0; }

/* The demo's sizes: batch, height, width, channels, filters, kernel. */
enum { DEMO_N = 2, DEMO_H = 7, DEMO_W = 6, DEMO_C = 3, DEMO_K = 4, DEMO_KH = 3, DEMO_KW = 3 };
#define DEMO_SEED 20260101u
#define DEMO_TOLERANCE 1e-5

/* y[n,oh,ow,k] = sum over kh,kw,c of x[n,oh+kh,ow+kw,c] * w[k,kh,kw,c]
 * ("valid" padding, stride 1), as uops:
 *   xr, wr: both operands laid out over the 7-d space
 *           [N, OH, OW, K, KH, KW, C] by reindexing,
 *   p = xr * wr, s = sum over the last three axes, y = s without them.
 * Returns the output node or a negative id. */
static uj_io_t build_conv2d(uj_graph_t* g, uj_io_t* x_out, uj_io_t* w_out) {
  uj_io_t x = uj_input(g, 4, UJ_F32); /* [N, H, W, C] */
  uj_io_t w = uj_input(g, 4, UJ_F32); /* [K, KH, KW, C] */
  if (bad_node(x) || bad_node(w)) return -1;
  *x_out = x;
  *w_out = w;

  static const char* const space[7] = {"dA0",       "dA1-dB1+1", "dA2-dB2+1", "dB0",
                                       "dB1",       "dB2",       "dA3[=dB3]"};
  static const char* const x_index[4] = {"i0", "i1+i4", "i2+i5", "i6"};
  static const char* const w_index[4] = {"i3", "i4", "i5", "i6"};
  const uj_io_t sources[2] = {x, w};
  uj_io_t xr = uj_reindex(g, x, 7, space, 2, sources, 4, x_index);
  if (bad_node(xr)) return -1;
  uj_io_t wr = uj_reindex(g, w, 7, space, 2, sources, 4, w_index);
  if (bad_node(wr)) return -1;
  uj_io_t p = uj_binary(g, UJ_BINARY_MUL, xr, wr);
  if (bad_node(p)) return -1;
  static const int reduced[3] = {4, 5, 6};
  uj_io_t s = uj_reduce(g, UJ_REDUCE_SUM, 3, reduced, p); /* [N, OH, OW, K, 1, 1, 1] */
  if (bad_node(s)) return -1;

  static const char* const y_shape[4] = {"dA0", "dA1", "dA2", "dA3"};
  static const char* const y_index[7] = {"i0", "i1", "i2", "i3", "0", "0", "0"};
  return uj_reindex(g, s, 4, y_shape, 1, &s, 7, y_index);
}

/* The reference: the same convolution in plain loops, in double. */
static void conv2d_reference(const float* x, const float* w, double* y) {
  enum { OH = DEMO_H - DEMO_KH + 1, OW = DEMO_W - DEMO_KW + 1 };
  for (int n = 0; n < DEMO_N; n++)
    for (int oh = 0; oh < OH; oh++)
      for (int ow = 0; ow < OW; ow++)
        for (int k = 0; k < DEMO_K; k++) {
          double sum = 0;
          for (int kh = 0; kh < DEMO_KH; kh++)
            for (int kw = 0; kw < DEMO_KW; kw++)
              for (int c = 0; c < DEMO_C; c++)
                sum += (double)x[((n * DEMO_H + oh + kh) * DEMO_W + ow + kw) * DEMO_C + c] *
                       (double)w[((k * DEMO_KH + kh) * DEMO_KW + kw) * DEMO_C + c];
          y[((n * OH + oh) * OW + ow) * DEMO_K + k] = sum;
        }
}

/* Everything the demo allocates, so one function can release it on any
 * path. */
typedef struct {
  uj_graph_t* graph;
  uj_program_t* program;
  uj_ctx_t* ctx;
  float *x, *w, *y;
  double* expected;
  char* dump;
} demo_t;

static void demo_release(demo_t* d) {
  uj_graph_free(d->graph);
  uj_program_free(d->program);
  uj_ctx_free(d->ctx);
  free(d->x);
  free(d->w);
  free(d->y);
  free(d->expected);
  free(d->dump);
}

static int demo_run(demo_t* d) {
  d->graph = uj_graph_new();
  if (!d->graph) return cli_report(UJ_ERR_OOM);
  uj_io_t x = -1, w = -1;
  uj_io_t y = build_conv2d(d->graph, &x, &w);
  if (bad_node(y)) return cli_report(UJ_ERR_INVALID);

  const uj_io_t inputs[2] = {x, w};
  uj_program_desc_t desc = {.input_count = 2, .inputs = inputs, .output_count = 1, .outputs = &y};
  uj_status_t s = uj_program_new(d->graph, &desc, &d->program);
  if (s != UJ_OK) return cli_report(s);

  /* Seeded random inputs. */
  size_t x_count = (size_t)DEMO_N * DEMO_H * DEMO_W * DEMO_C;
  size_t w_count = (size_t)DEMO_K * DEMO_KH * DEMO_KW * DEMO_C;
  d->x = malloc(x_count * sizeof *d->x);
  d->w = malloc(w_count * sizeof *d->w);
  if (!d->x || !d->w) return cli_out_of_memory("the inputs x and w", (x_count + w_count) * sizeof *d->x);
  uint64_t state = DEMO_SEED;
  for (size_t i = 0; i < x_count; i++) d->x[i] = cli_rng_float(&state);
  for (size_t i = 0; i < w_count; i++) d->w[i] = cli_rng_float(&state);
  uj_tensor_t tx = {d->x, UJ_F32, UJ_CPU, 4, {DEMO_N, DEMO_H, DEMO_W, DEMO_C}};
  uj_tensor_t tw = {d->w, UJ_F32, UJ_CPU, 4, {DEMO_K, DEMO_KH, DEMO_KW, DEMO_C}};
  const uj_tensor_t* in[2] = {&tx, &tw};

  /* The program says how big the output is; the demo only checks it agrees
   * with the arithmetic of a valid convolution. */
  uj_tensor_t ty = {NULL, UJ_F32, UJ_CPU, 0, {0}};
  s = uj_program_shape(d->program, UJ_FORWARD, in, NULL, 0, &ty.ndim, ty.dims);
  if (s != UJ_OK) return cli_report(s);
  const int64_t want[4] = {DEMO_N, DEMO_H - DEMO_KH + 1, DEMO_W - DEMO_KW + 1, DEMO_K};
  if (ty.ndim != 4 || memcmp(ty.dims, want, sizeof want) != 0) {
    fprintf(stderr, "uopjit: demo: output shape ");
    cli_print_dims(stderr, ty.ndim, ty.dims);
    fprintf(stderr, ", expected ");
    cli_print_dims(stderr, 4, want);
    fprintf(stderr, "\n");
    return 1;
  }
  size_t y_count = (size_t)(want[0] * want[1] * want[2] * want[3]);
  d->y = malloc(y_count * sizeof *d->y);
  d->expected = malloc(y_count * sizeof *d->expected);
  if (!d->y || !d->expected) return cli_out_of_memory("the output and its expected values", 2 * y_count * sizeof *d->y);
  ty.data = d->y;

  d->ctx = uj_ctx_new();
  if (!d->ctx) return cli_report(UJ_ERR_OOM);
  s = uj_ctx_set_engine(d->ctx, UJ_ENGINE_INTERP);
  if (s != UJ_OK) return cli_report(s);
  uj_tensor_t* out[1] = {&ty};
  s = uj_program_run(d->ctx, d->program, UJ_FORWARD, in, 2, NULL, 0, out, 1);
  if (s != UJ_OK) return cli_report(s);

  d->dump = uj_program_dump(d->ctx, d->program, UJ_FORWARD, UJ_DUMP_IR, NULL);
  if (!d->dump) return cli_report(UJ_ERR_INVALID);

  printf("conv2d NHWC by uops: x ");
  cli_print_dims(stdout, tx.ndim, tx.dims);
  printf(" * w ");
  cli_print_dims(stdout, tw.ndim, tw.dims);
  printf(" -> y ");
  cli_print_dims(stdout, ty.ndim, ty.dims);
  printf(", engine %s, seed %u\n\n", uj_engine_name(UJ_ENGINE_INTERP), DEMO_SEED);
  fputs(d->dump, stdout);
  if (d->dump[0] && d->dump[strlen(d->dump) - 1] != '\n') putchar('\n');
  putchar('\n');

  conv2d_reference(d->x, d->w, d->expected);
  double max_rel_err = 0;
  for (size_t i = 0; i < y_count; i++) {
    double b = d->expected[i];
    double err = fabs((double)d->y[i] - b) / fmax(1.0, fabs(b));
    /* A NaN anywhere must fail the check, so it wins over any number. */
    if (isnan(err)) {
      max_rel_err = NAN;
      break;
    }
    if (err > max_rel_err) max_rel_err = err;
  }
  if (max_rel_err <= DEMO_TOLERANCE) {
    printf("check: ok max_rel_err=%.3g\n", max_rel_err);
    return 0;
  }
  printf("check: FAILED max_rel_err=%.3g\n", max_rel_err);
  return 1;
}

int cli_cmd_demo(int argc, char** argv) {
  if (argc > 1) return cli_usage_error("demo", "takes no arguments, got", argv[1]);
  demo_t d = {0};
  int rc = demo_run(&d);
  demo_release(&d);
  return rc;
}
