/* tests/test_differential.c: random programs on every engine against the
 * interpreter (tests/diff_check.h runs and compares them).
 *
 * Programs come from two generators, alternately:
 *
 *   text: the expression language. Up to four inputs per program whose
 *     shapes are a random shape S (rank 0..3, sizes 0..5, 0 rarely) with
 *     axes dropped from the left or set to 1, or 0-d, so that they
 *     broadcast; f32, f64, i32, bf16 or f16, sometimes with a dtype hint.
 *     Each value is an input, a number or an op on earlier values: - abs
 *     floor sqrt relu exp log rsqrt sin cos tanh sigmoid, + - * / ** min
 *     max pow, comparisons, where, and sum mean amax amin over every axis
 *     or one (negative axes too). Values are written inline or as `_t`
 *     temporaries. An output is sometimes declared bf16 or f16 (stored
 *     rounded).
 *   uops: the C API on inputs of shape S (rank 1..3) in f32, f64, i32,
 *     bf16 or f16, with unary, binary and where uops, casts between them,
 *     the seven reductions over random axes broadcast back with reindex,
 *     and reindex with index strings that flip an axis, shift it by a
 *     $param, stride, halve, wrap or clamp it, transpose two axes (an op in
 *     between) and broadcast a row input or a 0-d input over S; an output
 *     is sometimes cast to bf16 or f16.
 *
 * Inputs mix ordinary values with special ones (diff_check.h: +-0, +-inf,
 * NaN, subnormals, the range edges, huge and tiny). Each output carries an
 * error budget (diff_check.h) worked out as the program grows: ops whose
 * IEEE result is exact on every engine (+ - * / sqrt, comparisons, floor,
 * min, max, where, casts, reductions in a serial order, reindex) add
 * nothing; f32 exp, log, tanh and sigmoid (inline polynomials) add 16 ulps,
 * sin, cos, pow and rsqrt 4; a product or quotient adds its operands'
 * budgets and 1. Ops that do not keep a relative error bounded (+, -, sum,
 * mean, prod, comparisons, floor, casts to i32, a condition, another math
 * function) never take an operand with a budget, so a program with one is
 * still checked to a bound that holds. A bf16 or f16 result is rounded to
 * its format on every engine alike: exact operands give the same bits, but
 * a budget means results on either side of a rounding boundary, one unit
 * of the format apart (diff_check.h compares such outputs so). That unit is
 * far more than any budget counts, so a half value with a budget is only
 * ever an output, never an operand; the text generator, which does not
 * follow the language's promotions, treats every value with a half input
 * on its path as one that may be a half.
 *
 * Programs are run in batches: UOPJIT_DIFF_BATCH (default 8) programs
 * make one parsed program or one uop program (so one kernel per engine),
 * each with its own inputs and outputs. The C engine, whose compile of a
 * batch costs a second or two, runs half of them (a uop and a text batch
 * in every four; UJ_TEST_C_EVERY=1: all), the other engines every one. A batch fails when any of its
 * programs does; the failure prints the batch's source (or its uop listing)
 * and the line to run it alone.
 *
 * Environment: UOPJIT_DIFF_PROGRAMS (default 200), UOPJIT_DIFF_SEED (the
 * first batch's seed, default 1; batch k has seed + k) and
 * UOPJIT_DIFF_BATCH.
 *
 * Nothing is kept inside a range where some engine is known to be wrong:
 * exp, log, tanh and sigmoid take arguments over the whole f32 range
 * (subnormals, past the overflow and underflow thresholds), and numbers go
 * beyond float's range (1e39, -1e300), which an f32 program rounds to
 * infinity as the interpreter does. */
#include <stdarg.h>

#include "diff_check.h"

static int env_int(const char* name, int fallback) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

/* ---- budgets ------------------------------------------------------------------------- */

enum { BUDGET_EXP_LOG = 16, BUDGET_LIBM = 4 };

static int budget_of_unary(uj_unary_op_t op) {
  switch (op) {
    case UJ_UNARY_EXP: case UJ_UNARY_LOG: case UJ_UNARY_TANH: case UJ_UNARY_SIGMOID: return BUDGET_EXP_LOG;
    case UJ_UNARY_NEG: case UJ_UNARY_ABS: case UJ_UNARY_SQRT: case UJ_UNARY_RECIP: case UJ_UNARY_FLOOR:
    case UJ_UNARY_CEIL: case UJ_UNARY_ROUND: case UJ_UNARY_SIGN: return 0;
    default: return BUDGET_LIBM; /* sin, rsqrt, erf, atanh, ...: the C library's float functions */
  }
}
/* The unary ops defined on i32 (the others get an f32 operand). */
static int unary_takes_i32(uj_unary_op_t op) {
  return op == UJ_UNARY_NEG || op == UJ_UNARY_ABS || op == UJ_UNARY_FLOOR || op == UJ_UNARY_CEIL ||
         op == UJ_UNARY_ROUND || op == UJ_UNARY_SIGN;
}
/* Unary ops that keep a relative error as it is (sqrt halves it, +1 ulp). */
static int keeps_budget(uj_unary_op_t op) {
  return op == UJ_UNARY_NEG || op == UJ_UNARY_ABS || op == UJ_UNARY_SQRT || op == UJ_UNARY_RECIP;
}
/* Binary ops that may take operands with a budget, and what they give. */
static int binary_budget(uj_binary_op_t op, int a, int b) {
  switch (op) {
    case UJ_BINARY_MUL: case UJ_BINARY_DIV: return a || b ? a + b + 1 : 0;
    case UJ_BINARY_MAX: case UJ_BINARY_MIN: return a > b ? a : b;
    case UJ_BINARY_POW: case UJ_BINARY_ATAN2: case UJ_BINARY_HYPOT: return a || b ? -1 : BUDGET_LIBM;
    case UJ_BINARY_MOD: return a || b ? -1 : 1; /* r + b rounds once in float, once through double */
    default: return a || b ? -1 : 0; /* -1: not allowed */
  }
}

/* Numbers the programs use; the last ones are beyond f32's range (class b). */
static const double numbers[] = {0, 1, -1, 0.5, 2, 3, -7, 1e-8, 1e30, -3e38, 1e-40, 0.1, 1e39, -1e300};
static int n_numbers(void) { return (int)(sizeof numbers / sizeof numbers[0]); }

/* ---- the batch being built ------------------------------------------------------------ */

#define MAX_VALUES 48
#define SRC_CAP 65536

typedef struct {
  uint64_t* st;
  df_case_t c;
  uj_tensor_t tensors[DF_MAX_IO];
  char* src;         /* text: the source; uops: the listing */
  size_t len;
  int overflow;      /* src ran out of room or a builder refused: generator bug */
  uj_graph_t* g;     /* uops only */
  uj_io_t in_ids[DF_MAX_IO], out_ids[DF_MAX_IO];
  char in_name[DF_MAX_IO][32]; /* text only */
  int ntensors;
} batch_t;

static void put(batch_t* b, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(batch_t* b, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(b->src + b->len, SRC_CAP - b->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= SRC_CAP - b->len) b->overflow = 1;
  else b->len += (size_t)n;
}

static int rnd(batch_t* b, int lo, int hi) { return (int)harness_int(b->st, lo, hi); }

static uj_dtype_t random_dtype(batch_t* b) {
  int r = rnd(b, 0, 11);
  return r < 5 ? UJ_F32 : r < 8 ? UJ_F64 : r < 10 ? UJ_I32 : r == 10 ? UJ_BF16 : UJ_F16;
}

static int is_half(uj_dtype_t dt) { return dt == UJ_BF16 || dt == UJ_F16; }

/* Adds an input tensor of this shape and dtype, filled. */
static int add_input(batch_t* b, uj_dtype_t dt, int ndim, const int64_t* dims) {
  if (b->c.nin == DF_MAX_IO) return -1;
  int i = b->c.nin++;
  b->ntensors = b->c.nin;
  b->tensors[i] = or_tensor(dt, ndim, dims);
  df_fill(b->st, &b->tensors[i]);
  b->c.in[i] = &b->tensors[i];
  return i;
}

static int add_output(batch_t* b, int ulps, int reordered, const char* name) {
  if (b->c.nout == DF_MAX_IO) return -1;
  int o = b->c.nout++;
  b->c.out[o] = (df_out_t){ulps, reordered};
  snprintf(b->c.out_name[o], sizeof b->c.out_name[o], "%s", name);
  return o;
}

/* A random shape S: rank lo..3, sizes 1..5, a size 0 once in 40 axes. */
static int random_shape(batch_t* b, int lo, int64_t* dims) {
  int r = rnd(b, lo, 3);
  for (int k = 0; k < r; k++) dims[k] = rnd(b, 0, 39) ? rnd(b, 1, 5) : 0;
  return r;
}

/* ---- the expression-language generator --------------------------------------------------- */

typedef struct {
  char text[160]; /* inline text or the temporary's name */
  int ndim, ulps, reordered;
  int half; /* a bf16/f16 input on its path: it may be a half itself */
} tval_t;

/* A value that may be a half rounded from a result with a budget: an
 * output only (see the top). */
static int tainted(const tval_t* v) { return v->half && v->ulps; }

/* Writes v's text; text that does not fit is a generator bug (the batch
 * fails), never a silently shortened program. */
static void settext(batch_t* b, char* text, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static void settext(batch_t* b, char* text, const char* fmt, ...) {
  char buf[sizeof ((tval_t*)0)->text];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof buf) b->overflow = 1;
  memcpy(text, buf, sizeof buf);
}

/* Makes v a temporary when it is long or at random, so that it can be
 * written several times (guards, diamonds) without the text growing. */
static void tname(batch_t* b, int prog, int* ntemp, tval_t* v, int force) {
  if (!force && strlen(v->text) < 40 && rnd(b, 0, 2)) return;
  char name[32];
  snprintf(name, sizeof name, "_t%d_%d", prog, (*ntemp)++);
  put(b, "%s = %s\n", name, v->text);
  settext(b, v->text, "%s", name);
}

static tval_t tnumber(batch_t* b) {
  tval_t v = {{0}, 0, 0, 0, 0};
  double x = numbers[rnd(b, 0, n_numbers() - 1)];
  /* the language has no negative literals: a leading minus is an op */
  if (x < 0) settext(b, v.text, "(%.17g)", x);
  else settext(b, v.text, "%.17g", x);
  return v;
}

static void gen_text_program(batch_t* b, int prog) {
  tval_t vals[MAX_VALUES];
  int nvals = 0, ntemp = 0;
  int64_t S[UJ_MAX_DIMS];
  int r = random_shape(b, 0, S);
  int ninputs = rnd(b, 1, 4);
  for (int i = 0; i < ninputs; i++) {
    int64_t dims[UJ_MAX_DIMS];
    int nd = rnd(b, 0, 6) ? r - rnd(b, 0, r > 0 ? 1 : 0) : 0; /* sometimes 0-d, sometimes one axis fewer */
    for (int k = 0; k < nd; k++) dims[k] = rnd(b, 0, 3) ? S[k + r - nd] : 1;
    uj_dtype_t dt = random_dtype(b);
    int slot = add_input(b, dt, nd, dims);
    if (slot < 0) return;
    tval_t* v = &vals[nvals++];
    settext(b, v->text, "x%d_%d", prog, i);
    snprintf(b->in_name[slot], sizeof b->in_name[slot], "x%d_%d", prog, i);
    v->ndim = nd, v->ulps = 0, v->reordered = 0, v->half = is_half(dt);
    if (!rnd(b, 0, 3)) put(b, "%s: %s\n", v->text, uj_dtype_name(dt));
  }
  int nops = rnd(b, 2, 10);
  for (int n = 0; n < nops && nvals < MAX_VALUES; n++) {
    tval_t a = vals[rnd(b, 0, 3) ? nvals - 1 : rnd(b, 0, nvals - 1)];
    tval_t c = rnd(b, 0, 4) ? vals[rnd(b, 0, nvals - 1)] : tnumber(b);
    if (tainted(&a)) a = vals[rnd(b, 0, ninputs - 1)]; /* inputs are exact */
    if (tainted(&c)) c = vals[rnd(b, 0, ninputs - 1)];
    tval_t v = {{0}, a.ndim > c.ndim ? a.ndim : c.ndim, 0, a.reordered || c.reordered, a.half || c.half};
    int kind = rnd(b, 0, 9);
    if (kind < 4) { /* unary */
      static const uj_unary_op_t ops[] = {UJ_UNARY_NEG, UJ_UNARY_ABS, UJ_UNARY_FLOOR, UJ_UNARY_SQRT, UJ_UNARY_EXP,
                                          UJ_UNARY_LOG, UJ_UNARY_RSQRT, UJ_UNARY_SIN, UJ_UNARY_COS, UJ_UNARY_TANH,
                                          UJ_UNARY_SIGMOID, UJ_UNARY_CEIL, UJ_UNARY_ROUND, UJ_UNARY_SIGN, UJ_UNARY_TAN,
                                          UJ_UNARY_ERF, UJ_UNARY_ERFC, UJ_UNARY_LOG1P, UJ_UNARY_EXPM1, UJ_UNARY_LOG2,
                                          UJ_UNARY_LOG10, UJ_UNARY_EXP2, UJ_UNARY_SINH, UJ_UNARY_COSH, UJ_UNARY_ASIN,
                                          UJ_UNARY_ACOS, UJ_UNARY_ATAN, UJ_UNARY_ASINH, UJ_UNARY_ACOSH, UJ_UNARY_ATANH,
                                          UJ_UNARY_CBRT};
      enum { NOPS = (int)(sizeof ops / sizeof ops[0]), RELU = NOPS };
      static const int exact_ops[] = {0, 1, 2, 3, 11, 12, 13, RELU};
      int k = rnd(b, 0, 1) ? rnd(b, 0, RELU) : exact_ops[rnd(b, 0, 7)]; /* half the time an exact op */
      if (a.ulps && !(k == RELU || keeps_budget(ops[k]))) k = rnd(b, 0, 1) ? 1 : RELU;
      v.ndim = a.ndim;
      v.reordered = a.reordered, v.half = a.half;
      if (strlen(a.text) > 120) tname(b, prog, &ntemp, &a, 1);
      if (k == RELU) {
        settext(b, v.text, "relu(%s)", a.text);
        v.ulps = a.ulps;
      } else {
        if (k == 0) settext(b, v.text, "(-%s)", a.text);
        else settext(b, v.text, "%s(%s)", uj_unary_name(ops[k]), a.text);
        v.ulps = ops[k] == UJ_UNARY_SQRT ? (a.ulps ? a.ulps / 2 + 1 : 0) : a.ulps ? a.ulps : budget_of_unary(ops[k]);
      }
    } else if (kind < 8) { /* binary */
      static const uj_binary_op_t ops[] = {UJ_BINARY_ADD,   UJ_BINARY_SUB,   UJ_BINARY_MUL,      UJ_BINARY_DIV,
                                           UJ_BINARY_POW,   UJ_BINARY_MAX,   UJ_BINARY_MIN,      UJ_BINARY_LT,
                                           UJ_BINARY_LE,    UJ_BINARY_GT,    UJ_BINARY_GE,       UJ_BINARY_EQ,
                                           UJ_BINARY_NE,    UJ_BINARY_ATAN2, UJ_BINARY_HYPOT,    UJ_BINARY_COPYSIGN,
                                           UJ_BINARY_MOD,   UJ_BINARY_FMOD};
      static const char* const fmt[] = {"(%s + %s)",   "(%s - %s)",   "(%s * %s)",      "(%s / %s)",   "(%s ** %s)",
                                        "max(%s, %s)", "min(%s, %s)", "(%s < %s)",      "(%s <= %s)",  "(%s > %s)",
                                        "(%s >= %s)",  "(%s == %s)",  "(%s != %s)",     "atan2(%s, %s)", "hypot(%s, %s)",
                                        "copysign(%s, %s)", "(%s %% %s)", "fmod(%s, %s)"};
      int k = rnd(b, 0, (int)(sizeof ops / sizeof ops[0]) - 1);
      v.ulps = binary_budget(ops[k], a.ulps, c.ulps);
      if (v.ulps < 0) k = 2, v.ulps = binary_budget(ops[k], a.ulps, c.ulps);
      if (strlen(a.text) + strlen(c.text) > 140) tname(b, prog, &ntemp, &a, 1), tname(b, prog, &ntemp, &c, 1);
      if (k == 4 && rnd(b, 0, 1)) settext(b, v.text, "pow(%s, %s)", a.text, c.text);
      else settext(b, v.text, fmt[k], a.text, c.text);
    } else if (kind == 8) { /* where: the condition exact, the branches anything */
      tval_t cond = vals[rnd(b, 0, nvals - 1)];
      if (cond.ulps) cond = vals[0];
      if (strlen(cond.text) + strlen(a.text) + strlen(c.text) > 140)
        tname(b, prog, &ntemp, &cond, 1), tname(b, prog, &ntemp, &a, 1), tname(b, prog, &ntemp, &c, 1);
      settext(b, v.text, "where(%s, %s, %s)", cond.text, a.text, c.text);
      v.ndim = cond.ndim > v.ndim ? cond.ndim : v.ndim;
      v.ulps = a.ulps > c.ulps ? a.ulps : c.ulps;
      v.reordered |= cond.reordered;
    } else { /* reduction */
      static const char* const names[] = {"sum", "mean", "amax", "amin"};
      int k = a.ulps ? rnd(b, 2, 3) : rnd(b, 0, 3);
      if (strlen(a.text) > 120) tname(b, prog, &ntemp, &a, 1);
      if (a.ndim > 0 && rnd(b, 0, 2))
        settext(b, v.text, "%s(%s, %d)", names[k], a.text, rnd(b, -a.ndim, a.ndim - 1));
      else
        settext(b, v.text, "%s(%s)", names[k], a.text);
      v.ndim = a.ndim, v.ulps = a.ulps, v.reordered = 1, v.half = a.half;
    }
    tname(b, prog, &ntemp, &v, 0);
    vals[nvals++] = v;
  }
  int nout = rnd(b, 1, 3);
  for (int o = 0; o < nout; o++) {
    const tval_t* v = &vals[o == 0 ? nvals - 1 : rnd(b, ninputs, nvals - 1)];
    char name[32];
    snprintf(name, sizeof name, "y%d_%d", prog, o);
    if (add_output(b, v->ulps, v->reordered, name) < 0) break; /* a large batch filled every slot */
    if (!tainted(v) && !rnd(b, 0, 4)) put(b, "%s: %s\n", name, rnd(b, 0, 1) ? "bf16" : "f16"); /* stored rounded */
    put(b, "%s = %s\n", name, v->text);
  }
}

/* ---- the uop generator ---------------------------------------------------------------------- */

typedef struct {
  uj_io_t id;
  uj_dtype_t dt;
  int ulps, reordered;
} uval_t;

typedef struct {
  batch_t* b;
  int prog, r;  /* the program's number in the batch, the rank of S */
  uj_io_t x;    /* the first input: shape S, the shape source of every reindex */
  uval_t pool[MAX_VALUES];
  int n;
} ugen_t;

/* Records a node in the listing; a refusal is a generator bug. */
static uj_io_t note(ugen_t* u, uj_io_t id, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static uj_io_t note(ugen_t* u, uj_io_t id, const char* fmt, ...) {
  char text[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  put(u->b, "p%d n%d = %s\n", u->prog, id, text);
  if (id < 0) {
    put(u->b, "  refused: %s\n", uj_last_error());
    u->b->overflow = 1;
  }
  return id;
}

static uval_t push(ugen_t* u, uval_t v) {
  if (u->n < MAX_VALUES) u->pool[u->n++] = v;
  return v;
}

/* A half rounded from a result with a budget: an output only (see the top). */
static int utainted(uval_t v) { return is_half(v.dt) && v.ulps; }

static uval_t pick(ugen_t* u) {
  uval_t v = u->pool[rnd(u->b, 0, 3) ? u->n - 1 : rnd(u->b, 0, u->n - 1)];
  return utainted(v) ? u->pool[0] : v; /* the first input: exact */
}

static uval_t ucast(ugen_t* u, uval_t v, uj_dtype_t dt) {
  if (v.dt == dt) return v;
  uj_io_t id = note(u, uj_cast(u->b->g, dt, v.id), "cast(n%d, %s)", v.id, uj_dtype_name(dt));
  return (uval_t){id, dt, v.ulps ? v.ulps + 1 : 0, v.reordered};
}

/* a and c brought to one dtype: c to a's, unless c has a budget and a is
 * i32 or a half, which would round it (then a to c's). */
static void same_dtype(ugen_t* u, uval_t* a, uval_t* c) {
  if (c->dt == a->dt) return;
  if (c->ulps && (a->dt == UJ_I32 || is_half(a->dt))) *a = ucast(u, *a, c->dt);
  else *c = ucast(u, *c, a->dt);
}

static uj_io_t uconst(ugen_t* u, double x) { return note(u, uj_const(u->b->g, x), "%.17g", x); }

/* Reindex of v with these index strings into shape S, or S with axes
 * swap_j and swap_k swapped when they differ. */
static uj_io_t ureindex(ugen_t* u, uj_io_t v, int swap_j, int swap_k, int nidx, const char* const* index) {
  char shape_text[UJ_MAX_DIMS][16];
  const char* shape[UJ_MAX_DIMS];
  for (int a = 0; a < u->r; a++) {
    int from = a == swap_j ? swap_k : a == swap_k ? swap_j : a;
    snprintf(shape_text[a], sizeof shape_text[a], "dA%d", from);
    shape[a] = shape_text[a];
  }
  char list[160] = "";
  for (int a = 0; a < nidx; a++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", a ? ", " : "", index[a]);
  return note(u, uj_reindex(u->b->g, v, u->r, shape, 1, &u->x, nidx, index), "reindex(n%d, [%s]%s)", v, list,
              swap_j != swap_k ? ", shape with two axes swapped" : "");
}

/* f(a) for a float-only or any unary op. */
static uval_t uunary(ugen_t* u, uj_unary_op_t op, uval_t a) {
  if (!unary_takes_i32(op) && a.dt == UJ_I32) a = ucast(u, a, UJ_F32);
  uj_graph_t* g = u->b->g;
  uj_io_t id = note(u, uj_unary(g, op, a.id), "%s(n%d)", uj_unary_name(op), a.id);
  int ulps = !a.ulps ? budget_of_unary(op) : op == UJ_UNARY_SQRT ? a.ulps / 2 + 1
             : op == UJ_UNARY_RECIP ? a.ulps + 1 : a.ulps;
  return (uval_t){id, a.dt, ulps, a.reordered};
}

static void uop_step(ugen_t* u) {
  batch_t* b = u->b;
  uj_graph_t* g = b->g;
  uval_t a = pick(u);
  int kind = rnd(b, 0, 11);
  if (kind < 3) { /* unary */
    static const uj_unary_op_t exact_ops[] = {UJ_UNARY_NEG, UJ_UNARY_ABS, UJ_UNARY_SQRT, UJ_UNARY_RECIP,
                                              UJ_UNARY_FLOOR};
    /* half the time an op every engine computes exactly */
    uj_unary_op_t op = rnd(b, 0, 1) ? (uj_unary_op_t)rnd(b, 0, UJ_UNARY_COUNT - 1) : exact_ops[rnd(b, 0, 4)];
    if (a.ulps && !keeps_budget(op)) op = UJ_UNARY_ABS;
    push(u, uunary(u, op, a));
  } else if (kind < 6) { /* binary, with a pool value or a number */
    uj_binary_op_t op = (uj_binary_op_t)rnd(b, 0, UJ_BINARY_COUNT - 1);
    uval_t c = rnd(b, 0, 4) ? pick(u) : (uval_t){uconst(u, numbers[rnd(b, 0, n_numbers() - 1)]), a.dt, 0, 0};
    if (binary_budget(op, a.ulps, c.ulps) < 0) op = UJ_BINARY_MUL;
    same_dtype(u, &a, &c);
    int float_only = op == UJ_BINARY_POW || op == UJ_BINARY_ATAN2 || op == UJ_BINARY_HYPOT || op == UJ_BINARY_COPYSIGN;
    if (float_only && a.dt == UJ_I32) a = ucast(u, a, UJ_F32), c = ucast(u, c, UJ_F32);
    uj_io_t id = note(u, uj_binary(g, op, a.id, c.id), "binary %d (n%d, n%d)", (int)op, a.id, c.id);
    push(u, (uval_t){id, a.dt, binary_budget(op, a.ulps, c.ulps), a.reordered || c.reordered});
  } else if (kind == 6) { /* where on a comparison of exact values */
    uval_t p = u->pool[rnd(b, 0, u->n - 1)], q = u->pool[rnd(b, 0, u->n - 1)], c = pick(u);
    if (p.ulps || q.ulps) p = q = u->pool[0];
    q = ucast(u, q, p.dt);
    uj_io_t cond = note(u, uj_binary(g, (uj_binary_op_t)rnd(b, UJ_BINARY_EQ, UJ_BINARY_GE), p.id, q.id),
                        "compare(n%d, n%d)", p.id, q.id);
    same_dtype(u, &a, &c);
    uj_io_t id = note(u, uj_where(g, cond, a.id, c.id), "where(n%d, n%d, n%d)", cond, a.id, c.id);
    push(u, (uval_t){id, a.dt, a.ulps > c.ulps ? a.ulps : c.ulps, a.reordered || c.reordered || p.reordered});
  } else if (kind == 7) { /* cast */
    uj_dtype_t dt = random_dtype(b);
    if (a.ulps && dt == UJ_I32) dt = a.dt == UJ_F64 ? UJ_F32 : UJ_F64;
    push(u, ucast(u, a, dt));
  } else if (kind == 8) { /* a reduction, broadcast back over S (and sometimes an output itself) */
    uj_reduce_op_t op = (uj_reduce_op_t)rnd(b, 0, UJ_REDUCE_ARGMIN);
    if (a.ulps && op != UJ_REDUCE_MAX && op != UJ_REDUCE_MIN) op = UJ_REDUCE_MAX;
    int axes[UJ_MAX_DIMS], naxes = 0;
    uint32_t mask = (uint32_t)rnd(b, 1, (1 << u->r) - 1);
    for (int k = 0; k < u->r; k++)
      if (mask & (1u << k)) axes[naxes++] = rnd(b, 0, 1) ? k : k - u->r;
    uj_io_t red = note(u, uj_reduce(g, op, naxes, axes, a.id), "reduce %d over mask %u (n%d)", (int)op, mask, a.id);
    uj_dtype_t dt = op == UJ_REDUCE_ARGMAX || op == UJ_REDUCE_ARGMIN ? UJ_I32 : a.dt;
    if (!rnd(b, 0, 3) && b->c.nout < DF_MAX_IO) {
      char name[32];
      snprintf(name, sizeof name, "p%d n%d", u->prog, red);
      b->out_ids[b->c.nout] = red;
      add_output(b, a.ulps, 1, name);
    }
    char idx_text[UJ_MAX_DIMS][16];
    const char* index[UJ_MAX_DIMS];
    for (int k = 0; k < u->r; k++) {
      snprintf(idx_text[k], sizeof idx_text[k], (mask & (1u << k)) ? "0" : "i%d", k);
      index[k] = idx_text[k];
    }
    push(u, (uval_t){ureindex(u, red, 0, 0, u->r, index), dt, a.ulps, 1});
  } else if (kind < 11) { /* an index expression along one axis */
    static const char* const forms[] = {"dA%d - 1 - i%d", "i%d + $p0", "i%d - $p1", "2 * i%d", "i%d / 2",
                                        "i%d %% 2", "min(i%d, $p1)", "max(i%d - 1, 0)", "(i%d + $p0) %% dA%d"};
    int k = rnd(b, 0, u->r - 1), f = rnd(b, 0, 8);
    char idx_text[UJ_MAX_DIMS][48];
    const char* index[UJ_MAX_DIMS];
    for (int j = 0; j < u->r; j++) {
      if (j != k) snprintf(idx_text[j], sizeof idx_text[j], "i%d", j);
      else if (f == 0) snprintf(idx_text[j], sizeof idx_text[j], forms[0], j, j);
      else if (f == 8) snprintf(idx_text[j], sizeof idx_text[j], forms[8], j, j);
      else snprintf(idx_text[j], sizeof idx_text[j], forms[f], j);
      index[j] = idx_text[j];
    }
    push(u, (uval_t){ureindex(u, a.id, 0, 0, u->r, index), a.dt, a.ulps, a.reordered});
  } else if (u->r >= 2) { /* transpose two axes, an op, transpose back */
    int j = rnd(b, 0, u->r - 2), k = rnd(b, j + 1, u->r - 1);
    char idx_text[UJ_MAX_DIMS][16];
    const char* index[UJ_MAX_DIMS];
    for (int m = 0; m < u->r; m++) {
      snprintf(idx_text[m], sizeof idx_text[m], "i%d", m == j ? k : m == k ? j : m);
      index[m] = idx_text[m];
    }
    uval_t t = a;
    t.id = ureindex(u, a.id, j, k, u->r, index);
    t = uunary(u, a.ulps ? UJ_UNARY_NEG : (uj_unary_op_t)rnd(b, 0, UJ_UNARY_COUNT - 1), t);
    t.id = ureindex(u, t.id, 0, 0, u->r, index); /* the same swap of the index, back to shape S */
    push(u, t);
  }
}

/* One program of a uop batch: inputs of shape S, a row and a 0-d input
 * broadcast over S, then random steps. */
static void gen_uop_program(batch_t* b, int prog) {
  ugen_t u = {.b = b, .prog = prog};
  int64_t S[UJ_MAX_DIMS];
  u.r = random_shape(b, 1, S);
  uj_dtype_t dt = random_dtype(b);
  int ninputs = rnd(b, 1, 2);
  for (int i = 0; i < ninputs; i++) {
    uj_dtype_t d = i ? random_dtype(b) : dt;
    int slot = add_input(b, d, u.r, S);
    if (slot < 0) return;
    uj_io_t id = note(&u, uj_input(b->g, u.r, d), "input %d, %s", slot, uj_dtype_name(d));
    b->in_ids[slot] = id;
    if (i == 0) u.x = id;
    push(&u, (uval_t){id, d, 0, 0});
  }
  if (rnd(b, 0, 1)) { /* a row: the last axis of S, sometimes longer or of size 1 (reads past it give 0) */
    int64_t m = S[u.r - 1] + (rnd(b, 0, 3) ? 0 : rnd(b, 0, 1) ? 1 : 1 - S[u.r - 1]);
    uj_dtype_t d = random_dtype(b);
    int slot = add_input(b, d, 1, &m);
    if (slot < 0) return;
    uj_io_t row = note(&u, uj_input(b->g, 1, d), "input %d (row), %s", slot, uj_dtype_name(d));
    b->in_ids[slot] = row;
    char last[16];
    snprintf(last, sizeof last, "i%d", u.r - 1);
    const char* index[] = {last};
    push(&u, (uval_t){ureindex(&u, row, 0, 0, 1, index), d, 0, 0});
  }
  if (rnd(b, 0, 1)) { /* a 0-d input read everywhere */
    uj_dtype_t d = random_dtype(b);
    int slot = add_input(b, d, 0, NULL);
    if (slot < 0) return;
    uj_io_t s = note(&u, uj_input(b->g, 0, d), "input %d (0-d), %s", slot, uj_dtype_name(d));
    b->in_ids[slot] = s;
    push(&u, (uval_t){ureindex(&u, s, 0, 0, 0, NULL), d, 0, 0});
  }
  int steps = rnd(b, 2, 10);
  for (int i = 0; i < steps; i++) uop_step(&u);
  int nout = rnd(b, 1, 2);
  for (int o = 0; o < nout && b->c.nout < DF_MAX_IO; o++) {
    uval_t v = o == 0 ? u.pool[u.n - 1] : pick(&u);
    if (!utainted(v) && !rnd(b, 0, 4)) v = ucast(&u, v, rnd(b, 0, 1) ? UJ_BF16 : UJ_F16); /* stored rounded */
    char name[32];
    snprintf(name, sizeof name, "p%d n%d", prog, v.id);
    b->out_ids[b->c.nout] = v.id;
    add_output(b, v.ulps, v.reordered, name);
  }
}

/* A batch of uop programs as one uop program with $p0 and $p1. */
static uj_status_t gen_uop_batch(batch_t* b, int count) {
  if (!(b->g = uj_graph_new())) return UJ_ERR_OOM;
  for (int i = 0; i < count; i++) gen_uop_program(b, i);
  static const char* const params[] = {"$p0", "$p1"};
  b->c.nparams = 2;
  b->c.params[0] = rnd(b, -3, 6);
  b->c.params[1] = rnd(b, -3, 6);
  put(b, "params $p0 = %lld, $p1 = %lld\n", (long long)b->c.params[0], (long long)b->c.params[1]);
  uj_program_desc_t desc = {.input_count = b->c.nin, .inputs = b->in_ids, .param_count = 2, .params = params,
                            .output_count = b->c.nout, .outputs = b->out_ids};
  uj_status_t s = b->overflow ? UJ_ERR_INVALID : uj_program_new(b->g, &desc, &b->c.p);
  uj_graph_free(b->g);
  b->g = NULL;
  return s;
}

/* ---- batches ------------------------------------------------------------------------------- */

typedef struct {
  uint64_t seed;
  int count, text;
  const char* src;
  int reported; /* the source was printed */
} report_ctx_t;

/* A failure of the batch: the message, then once the batch's source and
 * the command that reruns it alone. */
static void report(const char* what, void* vctx) {
  report_ctx_t* r = vctx;
  char msg[1200];
  snprintf(msg, sizeof msg, "%s batch of %d: %s", r->text ? "text" : "uop", r->count, what);
  harness_fail(__FILE__, __LINE__, msg);
  if (r->reported++) return;
  fprintf(stderr, "  %s:\n%s", r->text ? "source" : "uops", r->src);
  fprintf(stderr, "  alone: UOPJIT_DIFF_SEED=%llu UOPJIT_DIFF_PROGRAMS=%d UOPJIT_DIFF_BATCH=%d %s\n",
          (unsigned long long)r->seed, r->count, r->count, "build/tests/test_differential");
}

/* A parsed program's inputs are the names read, in order of first
 * appearance (an input never read is none); its outputs the names
 * assigned. Puts the tensors in that order; 0 when the names differ. */
static int bind_by_name(batch_t* b) {
  int nin = uj_program_io_count(b->c.p, 0);
  if (nin < 0 || nin > b->c.nin || uj_program_io_count(b->c.p, 1) != b->c.nout) return 0;
  for (int i = 0; i < nin; i++) {
    const char* name = uj_program_io_name(b->c.p, 0, i);
    int slot = -1;
    for (int k = 0; k < b->c.nin && name; k++)
      if (!strcmp(b->in_name[k], name)) slot = k;
    if (slot < 0) return 0;
    b->c.in[i] = &b->tensors[slot];
  }
  b->c.nin = nin; /* the tensors are freed through b->tensors, b->ntensors of them */
  for (int o = 0; o < b->c.nout; o++) {
    const char* name = uj_program_io_name(b->c.p, 1, o);
    if (!name || strcmp(name, b->c.out_name[o])) return 0;
  }
  return 1;
}

/* Generates and checks one batch of `count` programs from `seed`; 1 when it passes. */
static int run_batch(uint64_t seed, int count) {
  uint64_t st = seed * 0x9e3779b97f4a7c15ull + 1;
  batch_t b;
  memset(&b, 0, sizeof b);
  b.st = &st;
  b.src = malloc(SRC_CAP);
  if (!b.src) return 0;
  b.src[0] = '\0';
  int text = (seed & 1) == 0;
  uj_status_t s = UJ_OK;
  if (text) {
    for (int i = 0; i < count; i++) gen_text_program(&b, i);
    if (!b.overflow) s = uj_program_parse(b.src, &b.c.p);
  } else {
    s = gen_uop_batch(&b, count);
  }
  report_ctx_t r = {seed, count, text, b.src, 0};
  int ok = 0;
  if (b.overflow) {
    report("the generator ran out of room or a builder refused (above)", &r);
  } else if (s != UJ_OK) {
    char msg[600];
    snprintf(msg, sizeof msg, "the program was refused: %s: %s", uj_status_str(s), uj_last_error());
    report(msg, &r);
  } else if (text && !bind_by_name(&b)) {
    report("the parsed program's inputs or outputs are not the ones written", &r);
  } else {
    ok = df_check_case(&b.c, report, &r);
  }
  uj_program_free(b.c.p);
  for (int i = 0; i < b.ntensors; i++) or_tensor_free(&b.tensors[i]);
  free(b.src);
  return ok;
}

TEST(random_programs_on_every_engine) {
  int programs = env_int("UOPJIT_DIFF_PROGRAMS", 200), batch = env_int("UOPJIT_DIFF_BATCH", 8);
  uint64_t seed = (uint64_t)strtoull(getenv("UOPJIT_DIFF_SEED") ? getenv("UOPJIT_DIFF_SEED") : "1", NULL, 0);
  if (batch < 1) batch = 1;
  int batches = 0, failed = 0, on_c = 0;
  for (int done = 0; done < programs; done += batch, batches++) {
    uint64_t s = seed + (uint64_t)batches;
    HARNESS_SEED(s);
    int count = programs - done < batch ? programs - done : batch;
    /* C on half the batches, in pairs, since batches alternate between
     * the two generators: batches 0 and 1 (a uop and a text batch), 4 and
     * 5, ...; every batch with UJ_TEST_C_EVERY=1 */
    df_c_off = or_c_every() > 1 && (batches / 2) % 2 == 1;
    on_c += !df_c_off;
    if (!run_batch(s, count)) failed++;
  }
  df_c_off = 0;
  char stats[512];
  df_stats_line(stats, sizeof stats);
  printf("  %d programs in %d batches from seed %llu (%d of them on C): %d batches failed; elements compared: %s\n",
         programs, batches, (unsigned long long)seed, on_c, failed, stats);
}

TEST_MAIN()
