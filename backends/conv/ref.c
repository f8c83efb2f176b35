/* backends/conv/ref.c: the reference convolution backend, "ref": the
 * convolution written in uops and run by the context's engine (MIR, C or
 * the interpreter; AUTO picks the best available; on GPU tensors, the CUDA
 * engine). It defines what every other backend must compute, and the uop
 * autodiff gives its gradients.
 *
 * The graph, with $sh $sw $ph $pw the strides and paddings as program
 * parameters (folded into the kernel as constants, one kernel per value
 * set; sizes stay run-time arguments, so one kernel serves every shape):
 *
 *   space = [N, OH, OW, K, KH, KW, C]   OH = (H + 2*$ph - KH) / $sh + 1, ...
 *   xr[i] = x[i0, i1*$sh + i4 - $ph, i2*$sw + i5 - $pw, i6]    (out of range: 0)
 *   wr[i] = w[i3, i4, i5, i6]
 *   y = reindex(sum over axes 4,5,6 of xr*wr)  [+ reindex(bias) along K] */
#include <stdlib.h>
#include <string.h>

#include "../../rt/cuda.h"
#include "conv.h"

enum { REF_F32, REF_F64, REF_DTYPES };

typedef struct {
  uj_program_t* forward[REF_DTYPES][2]; /* [dtype][bias] */
  uj_program_t* backward_data[REF_DTYPES];
  uj_program_t* backward_filter[REF_DTYPES][2]; /* [dtype][dbias] */
} ref_programs_t;

static void ref_programs_free(void* p) {
  ref_programs_t* r = p;
  if (!r) return;
  for (int d = 0; d < REF_DTYPES; d++) {
    for (int b = 0; b < 2; b++) {
      uj_program_free(r->forward[d][b]);
      uj_program_free(r->backward_filter[d][b]);
    }
    uj_program_free(r->backward_data[d]);
  }
  free(r);
}

static const char* const ref_params[] = {"$sh", "$sw", "$ph", "$pw"};

/* The forward graph; *y is the output node, or negative on failure. */
static void conv_graph(uj_graph_t* g, uj_dtype_t dt, int with_bias, uj_io_t* x, uj_io_t* w, uj_io_t* b, uj_io_t* y) {
  static const char* const space[] = {"dA0", "(dA1 + 2*$ph - dB1) / $sh + 1", "(dA2 + 2*$pw - dB2) / $sw + 1", "dB0",
                                      "dB1", "dB2",                           "dA3[=dB3]"};
  static const char* const x_index[] = {"i0", "i1*$sh + i4 - $ph", "i2*$sw + i5 - $pw", "i6"};
  static const char* const w_index[] = {"i3", "i4", "i5", "i6"};
  static const char* const y_shape[] = {"dA0", "dA1", "dA2", "dA3"};
  static const char* const y_index[] = {"i0", "i1", "i2", "i3", "0", "0", "0"};
  static const char* const bias_shape[] = {"dA0", "dA1", "dA2", "dA3[=dB0]"};
  static const char* const bias_index[] = {"i3"};
  static const int reduced[] = {4, 5, 6};
  *y = -1;
  *x = uj_input(g, 4, dt);
  *w = uj_input(g, 4, dt);
  *b = with_bias ? uj_input(g, 1, dt) : 0;
  if (*x < 0 || *w < 0 || *b < 0) return;
  uj_io_t sources[] = {*x, *w};
  uj_io_t xr = uj_reindex(g, *x, 7, space, 2, sources, 4, x_index);
  uj_io_t wr = uj_reindex(g, *w, 7, space, 2, sources, 4, w_index);
  uj_io_t prod = xr >= 0 && wr >= 0 ? uj_binary(g, UJ_BINARY_MUL, xr, wr) : -1;
  uj_io_t sum = prod >= 0 ? uj_reduce(g, UJ_REDUCE_SUM, 3, reduced, prod) : -1;
  uj_io_t conv = sum >= 0 ? uj_reindex(g, sum, 4, y_shape, 1, &sum, 7, y_index) : -1;
  if (conv < 0 || !with_bias) {
    *y = conv;
    return;
  }
  uj_io_t bias_sources[] = {conv, *b};
  uj_io_t bb = uj_reindex(g, *b, 4, bias_shape, 2, bias_sources, 1, bias_index);
  *y = bb >= 0 ? uj_binary(g, UJ_BINARY_ADD, conv, bb) : -1;
}

/* Builds the program of op for dtype dt (bias: forward with a bias, or
 * backward filter with dbias). */
static uj_status_t build(bk_conv_op_t op, uj_dtype_t dt, int bias, uj_program_t** out) {
  uj_graph_t* g = uj_graph_new();
  if (!g) return rt_error(UJ_ERR_OOM, "ref convolution: out of memory allocating a graph");
  uj_io_t x, w, b, y;
  conv_graph(g, dt, bias, &x, &w, &b, &y);
  uj_status_t s = UJ_OK;
  uj_program_desc_t d;
  memset(&d, 0, sizeof d);
  uj_io_t inputs[] = {x, w, b};
  d.input_count = bias ? 3 : 2;
  d.inputs = inputs;
  d.param_count = 4;
  d.params = ref_params;
  uj_io_t ingrads[4], outgrads[2];
  if (y < 0) {
    s = UJ_ERR_INVALID;
  } else if (op == BK_CONV_FORWARD) {
    d.output_count = 1;
    d.outputs = &y;
  } else {
    ingrads[0] = uj_grad(g, y);
    ingrads[1] = x, ingrads[2] = w, ingrads[3] = b;
    d.ingrad_count = bias ? 4 : 3;
    d.ingrads = ingrads;
    outgrads[0] = uj_grad(g, op == BK_CONV_BACKWARD_DATA ? x : w);
    outgrads[1] = bias ? uj_grad(g, b) : 0;
    d.outgrad_count = bias ? 2 : 1;
    d.outgrads = outgrads;
    if (ingrads[0] < 0 || outgrads[0] < 0 || outgrads[1] < 0) s = UJ_ERR_INVALID;
  }
  if (s == UJ_OK) s = uj_program_new(g, &d, out);
  if (s != UJ_OK) rt_error_prefix("ref convolution: building the uop program: ");
  uj_graph_free(g);
  return s;
}

/* The program for the call, built now if this context has none yet. The
 * programs are built on first use per context and dtype, and kept in the
 * backend's slot of the context's state (a program's kernel memo is per
 * context, so per-context programs also keep kernels warm). */
static uj_status_t program_for(const bk_conv_call_t* call, uj_program_t** out) {
  const bk_conv_problem_t* p = call->p;
  int d = p->dtype == UJ_F64 ? REF_F64 : REF_F32;
  bk_conv_state_lock(call->state);
  void** slot = bk_conv_state_slot(call->state, &bk_conv_ref, ref_programs_free);
  uj_status_t s = UJ_OK;
  if (!*slot && !(*slot = calloc(1, sizeof(ref_programs_t)))) s = rt_error(UJ_ERR_OOM, "ref convolution: out of memory allocating its program table (%zu bytes)", sizeof(ref_programs_t));
  if (s == UJ_OK) {
    ref_programs_t* r = *slot;
    uj_program_t** cell = p->op == BK_CONV_FORWARD         ? &r->forward[d][p->has_bias]
                          : p->op == BK_CONV_BACKWARD_DATA ? &r->backward_data[d]
                                                           : &r->backward_filter[d][p->has_bias];
    if (!*cell) s = build(p->op, p->dtype, p->op == BK_CONV_BACKWARD_DATA ? 0 : p->has_bias, cell);
    *out = *cell;
  }
  bk_conv_state_unlock(call->state);
  return s;
}

/* A view with t's sizes and memory, standing for a tensor whose values the
 * backward pass does not read. Backward data and backward filter are the
 * backward passes of the forward graph with outgrads grad(x), and grad(w)
 * (+ grad(bias)). Those passes need x's (or w's, bias's) sizes but never
 * read its values, so the call passes a view of the output being computed
 * in its place: same sizes, memory that exists; the program runner sees
 * the overlap and computes the output aside before copying it in. */
static uj_tensor_t shape_view(const uj_tensor_t* t) { return *t; }

static uj_status_t ref_run(const bk_conv_call_t* call) {
  uj_program_t* prog;
  uj_status_t s = program_for(call, &prog);
  if (s != UJ_OK) return s;
  const bk_conv_problem_t* p = call->p;
  const int64_t params[4] = {p->stride_h, p->stride_w, p->pad_h, p->pad_w};
  switch (p->op) {
    case BK_CONV_FORWARD: {
      const uj_tensor_t* in[] = {call->x, call->w, call->bias};
      uj_tensor_t* out[] = {call->y};
      return uj_program_run(call->ctx, prog, UJ_FORWARD, in, p->has_bias ? 3 : 2, params, 4, out, 1);
    }
    case BK_CONV_BACKWARD_DATA: {
      uj_tensor_t x_view = shape_view(call->dx);
      const uj_tensor_t* in[] = {call->dy, &x_view, call->w};
      uj_tensor_t* out[] = {call->dx};
      return uj_program_run(call->ctx, prog, UJ_BACKWARD, in, 3, params, 4, out, 1);
    }
    case BK_CONV_BACKWARD_FILTER: {
      uj_tensor_t w_view = shape_view(call->dw);
      uj_tensor_t b_view = p->has_bias ? shape_view(call->dbias) : w_view;
      const uj_tensor_t* in[] = {call->dy, call->x, &w_view, &b_view};
      uj_tensor_t* out[] = {call->dw, call->dbias};
      return uj_program_run(call->ctx, prog, UJ_BACKWARD, in, p->has_bias ? 4 : 3, params, 4, out,
                            p->has_bias ? 2 : 1);
    }
    case BK_CONV_NOPS: break;
  }
  return rt_error(UJ_ERR_INVALID, "ref convolution: unknown op %d", (int)p->op);
}

/* On GPU tensors the programs run on the CUDA engine: a GPU and NVRTC. */
static uj_status_t available(const bk_conv_problem_t* p) {
  if (p->device != UJ_CUDA) return UJ_OK;
  uj_status_t s = rt_cuda_device_check();
  return s != UJ_OK ? s : rt_cuda_nvrtc_check();
}

const bk_conv_backend_t bk_conv_ref = {
    .name = "ref",
    .caps =
        {
            .ops = 1u << BK_CONV_FORWARD | 1u << BK_CONV_BACKWARD_DATA | 1u << BK_CONV_BACKWARD_FILTER,
            .devices = 1u << UJ_CPU | 1u << UJ_CUDA,
            .dtypes = 1u << UJ_F32 | 1u << UJ_F64,
            .layout = BK_CONV_NHWC,
            .kernel_min = 1,
            .kernel_max = 0,
            .stride_max = 0,
            .pad_max = -1,
            .reference = 1,
        },
    .run = ref_run,
    .available = available,
};
