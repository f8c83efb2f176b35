/* tests/test_passes_random.c: the pass pipeline must not change results.
 * Random uop graphs (fixed seeds) are run with the passes off
 * (uj_ctx_set_passes(ctx, 0): the IR as emitted) and on, forward and
 * backward, and the outputs must agree (f64 to 1e-12, f32 to 1e-5 relative).
 *
 * A graph grows from an input x [n, m] (n, m in 1..5) by steps picked at
 * random: unary ops, binary ops (denominators and log/sqrt arguments kept
 * away from 0), diamonds (one node read twice), a row vector broadcast
 * through reindex, a transpose there and back with an op between,
 * reductions (sum, max, min, mean over one axis, the axis kept) followed by
 * an elementwise op and broadcast back with index "0", gathers with select
 * (some index values out of range), where on a comparison, casts f32 <-> f64
 * round trips and a 0-d operand. The backward program takes ingrads
 * {grad(outputs)..., inputs...} and gives grad of every float input, so the
 * scatter-adds of reindex and select gradients appear. A failure prints the
 * seed, the graph and both dumps (raw and optimized). */
#include <stdarg.h>

#include "oracle.h"

#define NGRAPHS 200
#define MAXPOOL 64

typedef struct {
  uj_graph_t* g;
  uint64_t* st;
  uj_dtype_t dt, other;
  uj_io_t x, row, scal, idx1, idx0; /* inputs; row/scal/idx* < 0 until used */
  uj_io_t pool[MAXPOOL];            /* nodes of x's shape */
  int npool;
  char desc[8192];
  size_t dlen;
  int bad; /* a builder refused something */
} gen_t;

static void note(gen_t* G, uj_io_t id, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(gen_t* G, uj_io_t id, const char* fmt, ...) {
  if (id < 0) G->bad = 1;
  if (G->dlen + 200 >= sizeof G->desc) return;
  G->dlen += (size_t)snprintf(G->desc + G->dlen, sizeof G->desc - G->dlen, "  n%d = ", id);
  va_list ap;
  va_start(ap, fmt);
  G->dlen += (size_t)vsnprintf(G->desc + G->dlen, sizeof G->desc - G->dlen, fmt, ap);
  va_end(ap);
  G->dlen += (size_t)snprintf(G->desc + G->dlen, sizeof G->desc - G->dlen, "\n");
}

static int rnd(gen_t* G, int lo, int hi) { return (int)harness_int(G->st, lo, hi); }

/* A pool node, mostly the newest (so that most of the graph stays live;
 * the rest is left for dce). */
static uj_io_t pick(gen_t* G) {
  if (rnd(G, 0, 3)) return G->pool[G->npool - 1];
  return G->pool[rnd(G, 0, G->npool - 1)];
}
static void push(gen_t* G, uj_io_t id) {
  if (id < 0) G->bad = 1;
  if (G->npool < MAXPOOL) G->pool[G->npool++] = id;
  else G->pool[MAXPOOL - 1] = id;
}

static uj_io_t cst(gen_t* G, double v) {
  uj_io_t c = uj_const(G->g, v);
  note(G, c, "const %g", v);
  return c;
}
static uj_io_t un(gen_t* G, uj_unary_op_t op, uj_io_t a) {
  static const char* n[] = {"neg", "abs",   "exp",   "log",  "sqrt",    "rsqrt",
                            "recip", "sin", "cos", "tanh", "sigmoid", "floor"};
  uj_io_t r = uj_unary(G->g, op, a);
  note(G, r, "%s(n%d)", n[op], a);
  return r;
}
static uj_io_t bin(gen_t* G, uj_binary_op_t op, uj_io_t a, uj_io_t b) {
  static const char* n[] = {"add", "sub", "mul", "div", "pow", "max", "min",
                            "eq",  "ne",  "lt",  "le",  "gt",  "ge"};
  uj_io_t r = uj_binary(G->g, op, a, b);
  note(G, r, "%s(n%d, n%d)", n[op], a, b);
  return r;
}
/* |a| + 0.5: a value safe for log, sqrt, rsqrt, recip and division. */
static uj_io_t positive(gen_t* G, uj_io_t a) {
  return bin(G, UJ_BINARY_ADD, un(G, UJ_UNARY_ABS, a), cst(G, 0.5));
}
/* x's shape again from a node of shape [n, 1] (axis 1) or [1, m] (axis 0). */
static uj_io_t broadcast_back(gen_t* G, uj_io_t r, int axis) {
  static const char* const sh[] = {"dA0", "dA1"};
  static const char* const ix1[] = {"i0", "0"};
  static const char* const ix0[] = {"0", "i1"};
  uj_io_t out = uj_reindex(G->g, r, 2, sh, 1, &G->x, 2, axis ? ix1 : ix0);
  note(G, out, "reindex(n%d, [dA0, dA1] of x, [%s])", r, axis ? "i0, 0" : "0, i1");
  return out;
}

/* An elementwise op on a, with arguments kept in range. */
static uj_io_t rand_unary(gen_t* G, uj_io_t a) {
  switch (rnd(G, 0, 11)) {
    case 0: return un(G, UJ_UNARY_NEG, a);
    case 1: return un(G, UJ_UNARY_ABS, a);
    case 2: return un(G, UJ_UNARY_EXP, un(G, UJ_UNARY_TANH, a));
    case 3: return un(G, UJ_UNARY_LOG, positive(G, a));
    case 4: return un(G, UJ_UNARY_SQRT, positive(G, a));
    case 5: return un(G, UJ_UNARY_RSQRT, positive(G, a));
    case 6: return un(G, UJ_UNARY_RECIP, positive(G, a));
    case 7: return un(G, UJ_UNARY_SIN, a);
    case 8: return un(G, UJ_UNARY_COS, a);
    case 9: return un(G, UJ_UNARY_TANH, a);
    case 10: return un(G, UJ_UNARY_SIGMOID, a);
    default: return un(G, UJ_UNARY_FLOOR, a);
  }
}
static uj_io_t rand_binary(gen_t* G, uj_io_t a, uj_io_t b) {
  switch (rnd(G, 0, 7)) {
    case 0: return bin(G, UJ_BINARY_ADD, a, b);
    case 1: return bin(G, UJ_BINARY_SUB, a, b);
    case 2: return bin(G, UJ_BINARY_MUL, a, b);
    case 3: return bin(G, UJ_BINARY_DIV, a, positive(G, b));
    case 4: return bin(G, UJ_BINARY_POW, positive(G, a), cst(G, 1.5));
    case 5: return bin(G, UJ_BINARY_MAX, a, b);
    case 6: return bin(G, UJ_BINARY_MIN, a, b);
    default: return bin(G, UJ_BINARY_MUL, a, un(G, UJ_UNARY_TANH, b));
  }
}

static void step(gen_t* G) {
  uj_graph_t* g = G->g;
  uj_io_t a = pick(G), r;
  switch (rnd(G, 0, 11)) {
    case 0: r = rand_unary(G, a); break;
    case 1: r = rand_binary(G, a, pick(G)); break;
    case 2: /* diamond: a read by two ops that meet again */
      r = rand_binary(G, rand_unary(G, a), rand_unary(G, a));
      break;
    case 3: { /* a row vector broadcast over the rows */
      if (G->row < 0) {
        G->row = uj_input(g, 1, G->dt);
        note(G, G->row, "input row [m]");
      }
      static const char* const sh[] = {"dA0", "dA1"};
      static const char* const ix[] = {"i1"};
      uj_io_t rb = uj_reindex(g, G->row, 2, sh, 1, &a, 1, ix);
      note(G, rb, "reindex(row, [dA0, dA1] of n%d, [i1])", a);
      r = rnd(G, 0, 1) ? rand_binary(G, a, rb) : rand_binary(G, rb, a);
      break;
    }
    case 4: { /* transpose, an op, transpose back */
      static const char* const sh[] = {"dA1", "dA0"};
      static const char* const ix[] = {"i1", "i0"};
      uj_io_t t = uj_reindex(g, a, 2, sh, 1, &a, 2, ix);
      note(G, t, "transpose(n%d)", a);
      uj_io_t u = rand_unary(G, t);
      r = uj_reindex(g, u, 2, sh, 1, &u, 2, ix);
      note(G, r, "transpose(n%d)", u);
      if (rnd(G, 0, 1)) r = rand_binary(G, r, a);
      break;
    }
    case 5:
    case 6: { /* a reduction, an op on it, broadcast back, combined */
      static const uj_reduce_op_t ops[] = {UJ_REDUCE_SUM, UJ_REDUCE_MAX, UJ_REDUCE_MIN, UJ_REDUCE_MEAN};
      static const char* const names[] = {"sum", "max", "min", "mean"};
      int o = rnd(G, 0, 3), axis = rnd(G, 0, 1);
      int ax[] = {rnd(G, 0, 1) ? axis - 2 : axis};
      uj_io_t red = uj_reduce(g, ops[o], 1, ax, a);
      note(G, red, "reduce %s axis %d (n%d)", names[o], ax[0], a);
      if (rnd(G, 0, 1)) red = rand_unary(G, red);
      r = broadcast_back(G, red, axis);
      if (rnd(G, 0, 2)) r = rand_binary(G, a, r);
      break;
    }
    case 7: { /* gather along an axis with select, broadcast back */
      int axis = rnd(G, 0, 1);
      uj_io_t* ix = axis ? &G->idx1 : &G->idx0;
      if (*ix < 0) {
        *ix = uj_input(g, 2, UJ_I32);
        note(G, *ix, "input index %s i32", axis ? "[n, 1]" : "[1, m]");
      }
      uj_io_t s = uj_select(g, axis, a, *ix);
      note(G, s, "select axis %d (n%d, n%d)", axis, a, *ix);
      r = broadcast_back(G, s, axis);
      if (rnd(G, 0, 1)) r = rand_binary(G, r, a);
      break;
    }
    case 8: { /* where on a comparison */
      uj_io_t b = pick(G);
      uj_io_t c = bin(G, rnd(G, 0, 1) ? UJ_BINARY_LT : UJ_BINARY_GE, a, b);
      if (rnd(G, 0, 1)) r = uj_where(g, c, a, b);
      else r = uj_where(g, c, rand_unary(G, a), cst(G, 0.25));
      note(G, r, "where(n%d, ...)", c);
      break;
    }
    case 9: { /* cast to the other float type and back, an op between */
      uj_io_t c = uj_cast(g, G->other, a);
      note(G, c, "cast %s (n%d)", uj_dtype_name(G->other), a);
      uj_io_t u = rand_unary(G, c);
      r = uj_cast(g, G->dt, u);
      note(G, r, "cast %s (n%d)", uj_dtype_name(G->dt), u);
      break;
    }
    case 10: { /* a 0-d input operand */
      if (G->scal < 0) {
        G->scal = uj_input(g, 0, G->dt);
        note(G, G->scal, "input scalar []");
      }
      r = rand_binary(G, a, G->scal);
      break;
    }
    default: /* a chain of two */
      r = rand_unary(G, rand_unary(G, a));
      break;
  }
  push(G, r);
}

/* ---- running ------------------------------------------------------------------------ */

static int runs_compared, elements_compared; /* printed, to show the test did its work */

typedef struct {
  uj_ctx_t* off; /* passes off */
  uj_ctx_t* on;
} ctx_pair_t;

static void print_dumps(uj_program_t* p, uj_pass_t pass) {
  uj_ctx_t* ctx = uj_ctx_new();
  char* raw = uj_program_dump(ctx, p, pass, UJ_DUMP_IR_RAW, NULL);
  char* ir = uj_program_dump(ctx, p, pass, UJ_DUMP_IR, NULL);
  fprintf(stderr, "---- %s, raw IR (passes off)\n%s---- %s, optimized IR (passes on)\n%s",
          pass == UJ_FORWARD ? "forward" : "backward", raw ? raw : "(no dump)\n",
          pass == UJ_FORWARD ? "forward" : "backward", ir ? ir : "(no dump)\n");
  free(raw), free(ir);
  uj_ctx_free(ctx);
}

/* Runs pass with the passes off and on and compares every output; 0 when
 * they agree. outs are allocated here from uj_program_shape. */
static int compare_run(ctx_pair_t* C, uj_program_t* p, uj_pass_t pass, const uj_tensor_t* const* in,
                       int nin, int nout, uj_dtype_t* out_dt, const char* what) {
  uj_tensor_t a[8], b[8];
  uj_tensor_t *pa[8], *pb[8];
  int bad = 0;
  for (int k = 0; k < nout; k++) {
    int nd = 0;
    int64_t dims[UJ_MAX_DIMS];
    uj_status_t s = uj_program_shape(p, pass, in, NULL, k, &nd, dims);
    if (s != UJ_OK) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s: shape of output %d: %s", what, k, uj_last_error());
      harness_fail(__FILE__, __LINE__, msg);
      for (int j = 0; j < k; j++) or_tensor_free(&a[j]), or_tensor_free(&b[j]);
      return 1;
    }
    a[k] = or_tensor(out_dt[k], nd, dims), b[k] = or_tensor(out_dt[k], nd, dims);
    or_fill_sentinel(&a[k]), or_fill_sentinel(&b[k]);
    pa[k] = &a[k], pb[k] = &b[k];
  }
  uj_status_t sa = uj_program_run(C->off, p, pass, in, nin, NULL, 0, pa, nout);
  char msg[1024];
  if (sa != UJ_OK) {
    snprintf(msg, sizeof msg, "%s: run with passes off: %s: %s", what, uj_status_str(sa), uj_last_error());
    harness_fail(__FILE__, __LINE__, msg);
    bad = 1;
  }
  uj_status_t sb = uj_program_run(C->on, p, pass, in, nin, NULL, 0, pb, nout);
  if (sb != UJ_OK) {
    snprintf(msg, sizeof msg, "%s: run with passes on: %s: %s", what, uj_status_str(sb), uj_last_error());
    harness_fail(__FILE__, __LINE__, msg);
    bad = 1;
  }
  /* the random program's kernels as CUDA, compiled with NVRTC */
  if (!bad) bad = OR_CUDA_COMPILE(p, pass, in, nin, NULL, 0);
  for (int k = 0; k < nout && !bad; k++) {
    double tol = out_dt[k] == UJ_F64 ? OR_TOL_F64 : OR_TOL_F32;
    double* ref = or_to_double(&a[k]);
    int64_t n = or_tnumel(&a[k]);
    /* the values are kept benign: a NaN means the generator is at fault */
    for (int64_t i = 0; i < n && !bad; i++)
      if (!isfinite(ref[i])) {
        snprintf(msg, sizeof msg, "%s: output %d element %lld is %g with passes off", what, k,
                 (long long)i, ref[i]);
        harness_fail(__FILE__, __LINE__, msg);
        bad = 1;
      }
    int64_t i = bad ? -1 : or_first_mismatch(ref, &b[k], tol);
    elements_compared += (int)n;
    if (i >= 0) {
      char shp[128];
      or_shape_str(shp, sizeof shp, &a[k]);
      snprintf(msg, sizeof msg, "%s: output %d %s element %lld: passes on %.17g, off %.17g (max rel err %g)",
               what, k, shp, (long long)i, or_get(&b[k], i), ref[i], or_max_rel_err(ref, &b[k]));
      harness_fail(__FILE__, __LINE__, msg);
      bad = 1;
    }
    free(ref);
  }
  for (int k = 0; k < nout; k++) or_tensor_free(&a[k]), or_tensor_free(&b[k]);
  runs_compared++;
  return bad;
}

static int failures_printed;

/* Builds, runs and compares one random graph; 0 on agreement. */
static int one_graph(ctx_pair_t* C, uint64_t seed) {
  uint64_t st = seed;
  gen_t G;
  memset(&G, 0, sizeof G);
  G.st = &st;
  G.g = uj_graph_new();
  G.dt = harness_int(&st, 0, 1) ? UJ_F64 : UJ_F32;
  G.other = G.dt == UJ_F64 ? UJ_F32 : UJ_F64;
  G.row = G.scal = G.idx1 = G.idx0 = -1;
  G.x = uj_input(G.g, 2, G.dt);
  note(&G, G.x, "input x [n, m] %s", uj_dtype_name(G.dt));
  push(&G, G.x);
  int steps = rnd(&G, 1, 8);
  for (int i = 0; i < steps; i++) step(&G);

  /* outputs: the last node, sometimes an earlier one and a reduction too */
  uj_io_t outs[3];
  uj_dtype_t out_dt[3];
  int nout = 0;
  outs[nout++] = G.pool[G.npool - 1];
  if (G.npool > 2 && rnd(&G, 0, 2) == 0) {
    uj_io_t o = G.pool[rnd(&G, 1, G.npool - 2)];
    if (o != outs[0]) outs[nout++] = o;
  }
  if (rnd(&G, 0, 3) == 0) {
    int ax[] = {rnd(&G, 0, 1)};
    uj_io_t s = uj_reduce(G.g, UJ_REDUCE_SUM, 1, ax, G.pool[G.npool - 1]);
    note(&G, s, "reduce sum axis %d (n%d)", ax[0], G.pool[G.npool - 1]);
    outs[nout++] = s;
  }
  for (int k = 0; k < nout; k++) out_dt[k] = G.dt;
  G.dlen += (size_t)snprintf(G.desc + G.dlen, sizeof G.desc - G.dlen, "  outputs:");
  for (int k = 0; k < nout; k++)
    G.dlen += (size_t)snprintf(G.desc + G.dlen, sizeof G.desc - G.dlen, " n%d", outs[k]);

  /* inputs actually used, in a fixed order */
  uj_io_t ins[5];
  int nin = 0;
  ins[nin++] = G.x;
  if (G.row >= 0) ins[nin++] = G.row;
  if (G.scal >= 0) ins[nin++] = G.scal;
  if (G.idx1 >= 0) ins[nin++] = G.idx1;
  if (G.idx0 >= 0) ins[nin++] = G.idx0;

  /* backward: ingrads {grad(outputs)..., inputs...}, outgrads the float inputs */
  uj_io_t ingrads[8], outgrads[3];
  int ning = 0, noutg = 0;
  for (int k = 0; k < nout; k++) ingrads[ning++] = uj_grad(G.g, outs[k]);
  for (int k = 0; k < nin; k++) ingrads[ning++] = ins[k];
  uj_dtype_t grad_dt[3];
  outgrads[noutg] = uj_grad(G.g, G.x), grad_dt[noutg++] = G.dt;
  if (G.row >= 0) outgrads[noutg] = uj_grad(G.g, G.row), grad_dt[noutg++] = G.dt;
  if (G.scal >= 0) outgrads[noutg] = uj_grad(G.g, G.scal), grad_dt[noutg++] = G.dt;

  int bad = 0;
  char msg[512];
  uj_program_t* p = NULL;
  if (G.bad) {
    snprintf(msg, sizeof msg, "a builder refused a node: %s", uj_last_error());
    harness_fail(__FILE__, __LINE__, msg);
    bad = 1;
  } else {
    uj_program_desc_t d;
    memset(&d, 0, sizeof d);
    d.input_count = nin, d.inputs = ins;
    d.output_count = nout, d.outputs = outs;
    d.ingrad_count = ning, d.ingrads = ingrads;
    d.outgrad_count = noutg, d.outgrads = outgrads;
    uj_status_t s = uj_program_new(G.g, &d, &p);
    if (s != UJ_OK) {
      snprintf(msg, sizeof msg, "uj_program_new: %s: %s", uj_status_str(s), uj_last_error());
      harness_fail(__FILE__, __LINE__, msg);
      bad = 1;
    }
  }

  /* tensors: x [n, m], row [m], scalar, index [n, 1] and [1, m] */
  int64_t n = harness_int(&st, 1, 5), m = harness_int(&st, 1, 5);
  int64_t dx[2] = {n, m}, dr[1] = {m}, dn1[2] = {n, 1}, d1m[2] = {1, m};
  uj_tensor_t tin[5];
  int nt = 0;
  tin[nt] = or_tensor(G.dt, 2, dx), or_fill_real(&st, &tin[nt++], 0.5, 1.5);
  if (G.row >= 0) tin[nt] = or_tensor(G.dt, 1, dr), or_fill_real(&st, &tin[nt++], 0.5, 1.5);
  if (G.scal >= 0) tin[nt] = or_tensor(G.dt, 0, dr), or_fill_real(&st, &tin[nt++], 0.5, 1.5);
  /* index values mostly in range, now and then one out of range (-1 or size) */
  if (G.idx1 >= 0) tin[nt] = or_tensor(UJ_I32, 2, dn1), or_fill_int(&st, &tin[nt++], -1, m);
  if (G.idx0 >= 0) tin[nt] = or_tensor(UJ_I32, 2, d1m), or_fill_int(&st, &tin[nt++], -1, n);
  const uj_tensor_t* in[5];
  for (int k = 0; k < nt; k++) in[k] = &tin[k];

  int fwd_bad = 0, bwd_bad = 0;
  if (!bad) fwd_bad = compare_run(C, p, UJ_FORWARD, in, nin, nout, out_dt, "forward");

  /* backward inputs: output gradients in [-1, 1], then the forward inputs */
  uj_tensor_t tg[3];
  int ng = 0;
  if (!bad) {
    for (int k = 0; k < nout; k++) {
      int nd = 0;
      int64_t dims[UJ_MAX_DIMS];
      if (uj_program_shape(p, UJ_FORWARD, in, NULL, k, &nd, dims) != UJ_OK) {
        harness_fail(__FILE__, __LINE__, "shape of a forward output");
        bad = 1;
        break;
      }
      tg[ng] = or_tensor(G.dt, nd, dims), or_fill_real(&st, &tg[ng++], -1, 1);
    }
  }
  if (!bad) {
    const uj_tensor_t* bin_[8];
    int nb = 0;
    for (int k = 0; k < ng; k++) bin_[nb++] = &tg[k];
    for (int k = 0; k < nt; k++) bin_[nb++] = &tin[k];
    bwd_bad = compare_run(C, p, UJ_BACKWARD, bin_, nb, noutg, grad_dt, "backward");
  }
  for (int k = 0; k < ng; k++) or_tensor_free(&tg[k]);

  if (bad || fwd_bad || bwd_bad) {
    fprintf(stderr, "  graph (seed %llu, n %lld, m %lld):\n%s\n", (unsigned long long)seed, (long long)n,
            (long long)m, G.desc);
    if (p && failures_printed++ < 3) {
      if (fwd_bad) print_dumps(p, UJ_FORWARD);
      if (bwd_bad) print_dumps(p, UJ_BACKWARD);
    }
  }
  for (int k = 0; k < nt; k++) or_tensor_free(&tin[k]);
  uj_program_free(p);
  uj_graph_free(G.g);
  return bad || fwd_bad || bwd_bad;
}

/* Every engine this build runs: the interpreter, and AUTO when it resolves
 * to something else. */
static void random_graphs(uj_engine_t engine) {
  ctx_pair_t C = {uj_ctx_new(), uj_ctx_new()};
  CHECK(C.off && C.on);
  if (!C.off || !C.on) return;
  CHECK(uj_ctx_set_engine(C.off, engine) == UJ_OK);
  CHECK(uj_ctx_set_engine(C.on, engine) == UJ_OK);
  CHECK(uj_ctx_set_passes(C.off, 0) == UJ_OK);
  CHECK(uj_ctx_set_passes(C.on, 1) == UJ_OK);
  /* AUTO without tiering: one engine serves both sides. Tiered, either side
   * could be served by MIR or by C depending on when C's compile ends, and
   * their sums group terms differently (four partial sums, 32 lanes), so a
   * difference of rounding, amplified by a later cancellation, would be
   * blamed on the passes. */
  CHECK(uj_ctx_set_tier(C.off, 0) == UJ_OK);
  CHECK(uj_ctx_set_tier(C.on, 0) == UJ_OK);
  int failed = 0;
  runs_compared = elements_compared = 0;
  for (uint64_t i = 0; i < NGRAPHS; i++) {
    uint64_t seed = 7000 + i;
    HARNESS_SEED(seed);
    failed += one_graph(&C, seed);
  }
  printf("  %d graphs, %d runs compared, %d elements\n", NGRAPHS, runs_compared, elements_compared);
  if (failed) fprintf(stderr, "  %d of %d graphs disagree\n", failed, NGRAPHS);
  uj_ctx_free(C.off);
  uj_ctx_free(C.on);
}

TEST(passes_keep_results_interp) { random_graphs(UJ_ENGINE_INTERP); }

TEST(passes_keep_results_auto) {
  uj_ctx_t* c = uj_ctx_new();
  uj_engine_t e = c ? uj_ctx_engine(c) : UJ_ENGINE_INTERP;
  uj_ctx_free(c);
  SKIP_IF(e == UJ_ENGINE_INTERP, "AUTO is the interpreter in this build");
  random_graphs(UJ_ENGINE_AUTO);
}

TEST(set_passes_null_ctx) { CHECK(uj_ctx_set_passes(NULL, 0) == UJ_ERR_INVALID); }

TEST_MAIN()
