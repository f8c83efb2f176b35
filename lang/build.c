/* lang/build.c: expression-language syntax trees to uop programs (DESIGN
 * section 5, "The expression language").
 *
 * Broadcasting follows NumPy: ranks align on the right, an axis of size 1
 * stretches, 0-d values are read at every element. Whether an input axis
 * has size 1 is known only at run time, so a program is built per input
 * signature (each input's dtype, rank and size-1 axes) and cached; sizes
 * stay symbolic, so one build serves every size with that signature.
 *
 * dtypes promote with a cast (promoted), numbers adopt their partner's, and
 * arithmetic on numbers alone is folded here in double. A float value
 * computed from 0-d values alone is computed in f64 and rounded once where
 * it meets a tensor, as torch computes its optimizers' scalars (val_t.as);
 * with weak scalars a 0-d f64 value counts as f32 against f32, bf16 or f16
 * tensors (promote). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

typedef struct {
  uj_io_t id;
  int ndim;
  uint32_t ones;   /* axes known to have size 1 */
  uj_dtype_t dtype; /* the node's */
  int is_const;    /* a bare number (uj_const), whose value is number */
  double number;
  uj_dtype_t as;   /* the dtype the value stands for: dtype, but for a
                      0-d float value held in f64 (promote) */
} val_t;

typedef struct {
  uj_graph_t* g;
  pn_program_t* pp;
  val_t cur[PARSE_MAX_NAMES];
  int failed;
} build_t;

static val_t bad(void) { return (val_t){-1, 0, 0, UJ_F32, 0, 0.0, UJ_F32}; }

/* Builder failures get the source position in front. */
static val_t at(build_t* b, const pn_node_t* n, uj_io_t id, int ndim, uint32_t ones, uj_dtype_t dt, int is_const) {
  if (id < 0) {
    if (!b->failed) rt_error_prefix("program line %d, column %d: ", n->line, n->column);
    b->failed = 1;
    return bad();
  }
  return (val_t){id, ndim, ones, dt, is_const, 0.0, dt};
}

static val_t number(build_t* b, const pn_node_t* n, double v) {
  val_t r = at(b, n, uj_const(b->g, v), 0, 0, UJ_F32, 1);
  r.number = v;
  return r;
}

static void label(build_t* b, uj_io_t id, const pn_node_t* n) {
  if (id < 0) return;
  char text[64];
  if (n->kind == PN_NAME) snprintf(text, sizeof text, "%s", b->pp->names[n->name]);
  else snprintf(text, sizeof text, "the expression at line %d, column %d", n->line, n->column);
  if (!b->g->nodes[id].label) b->g->nodes[id].label = rt_arena_strdup(&b->g->arena, text);
}

/* The dtype of a and b combined: i32 < bf16, f16 < f32 < f64; bf16 with
 * f16 gives f32, since neither holds the other. An input takes its hint,
 * else its tensor's dtype; an assigned name with a hint is cast to it (p:
 * bf16; p = m rounds m); float-only functions cast i32 to f32 first.
 * Numbers are folded in double so that (1 + 2) or -0.1 keeps full
 * precision next to an f64 tensor. */
static uj_dtype_t promoted(uj_dtype_t a, uj_dtype_t b) {
  if (a == b || b == UJ_I32) return a;
  if (a == UJ_I32) return b;
  return a == UJ_F64 || b == UJ_F64 ? UJ_F64 : UJ_F32;
}

static val_t cast_to(build_t* b, const pn_node_t* n, val_t v, uj_dtype_t dt) {
  if (v.dtype == dt || v.is_const) return (val_t){v.id, v.ndim, v.ones, dt, v.is_const, v.number, dt};
  uj_io_t id = uj_cast(b->g, dt, v.id);
  label(b, id, n);
  return at(b, n, id, v.ndim, v.ones, dt, 0);
}

/* v in the dtype it stands for: a scalar held in f64 rounded once. */
static val_t settled(build_t* b, const pn_node_t* n, val_t v) {
  return v.dtype == v.as ? v : cast_to(b, n, v, v.as);
}

static int is_float(uj_dtype_t dt) { return dt != UJ_I32; }

/* Brings the values to one dtype and returns the dtype the result stands
 * for (UJ_I32 when all are bare numbers, which keep theirs). Among values
 * that are all 0-d (and with_tensor = 0: no tensor operand outside v, such
 * as where's condition), a float result is computed in f64, held as
 * val_t.dtype = f64 with val_t.as its dtype, and rounded once, to the dtype
 * it meets, where it meets a tensor (or to its own where it is an output or
 * a hinted name): 1 - f32(0.999) in f32 is 0.000999987, 1 - 0.999 rounded
 * once is 0.001. Against tensors, with weak scalars
 * (pn_program_weak_scalars: an optimizer's passes), a 0-d f64 value counts
 * as f32 unless the tensors are f64 or i32, as torch treats 0-d tensors:
 * the optimizer binds its hyperparameters in f64, and their precision must
 * not make the tensor arithmetic f64. Elsewhere 0-d values promote as any
 * others (NumPy 2's rule for its scalars). */
static uj_dtype_t promote(build_t* b, const pn_node_t* n, val_t* v, int count, int with_tensor) {
  int scalars = 0, tensors = 0;
  uj_dtype_t d0 = UJ_I32, dn = UJ_I32;
  for (int i = 0; i < count; i++) {
    if (v[i].is_const) continue;
    if (v[i].ndim == 0) d0 = scalars++ ? promoted(d0, v[i].as) : v[i].as;
    else dn = tensors++ ? promoted(dn, v[i].dtype) : v[i].dtype;
  }
  if (!scalars && !tensors) return UJ_I32;
  uj_dtype_t dt;
  if (!tensors && !with_tensor) {
    dt = d0;
    uj_dtype_t held = is_float(dt) ? UJ_F64 : dt;
    for (int i = 0; i < count; i++) v[i] = cast_to(b, n, v[i], held);
    return dt;
  }
  if (!tensors) dt = d0;
  else if (!scalars) dt = dn;
  else dt = promoted(dn, b->pp->weak_scalars && is_float(dn) && dn != UJ_F64 && d0 == UJ_F64 ? UJ_F32 : d0);
  for (int i = 0; i < count; i++) v[i] = cast_to(b, n, v[i], dt);
  return dt;
}

/* Stretches the values to one broadcast shape (0-d values stay 0-d). The
 * stretch is a reindex whose index is 0 on the stretched axes; two axes
 * that must agree become the elementwise uop's run-time check, whose
 * message names both operands (by source text) and the axis. */
static void broadcast(build_t* b, const pn_node_t* n, val_t* v, int count, const pn_node_t* const* src) {
  int r = 0;
  for (int i = 0; i < count; i++)
    if (v[i].ndim > r) r = v[i].ndim;
  if (r == 0) return;
  int from[UJ_MAX_DIMS], from_axis[UJ_MAX_DIMS];
  uint32_t ones = 0;
  for (int k = 0; k < r; k++) {
    from[k] = -1;
    for (int i = 0; i < count && from[k] < 0; i++) {
      int j = k - (r - v[i].ndim);
      if (v[i].ndim > 0 && j >= 0 && !(v[i].ones & (1u << j))) {
        from[k] = i;
        from_axis[k] = j;
      }
    }
    if (from[k] < 0) ones |= 1u << k;
  }
  uj_io_t ss[PARSE_MAX_ARGS];
  int letter[PARSE_MAX_ARGS], nss = 0;
  for (int i = 0; i < count; i++) {
    letter[i] = -1;
    if (v[i].ndim > 0 && !v[i].is_const) {
      letter[i] = nss;
      ss[nss++] = v[i].id;
    }
  }
  for (int i = 0; i < count && !b->failed; i++) {
    if (v[i].ndim == 0) continue;
    int need = v[i].ndim < r;
    for (int j = 0; j < v[i].ndim; j++)
      if ((v[i].ones & (1u << j)) && !(ones & (1u << (j + r - v[i].ndim)))) need = 1;
    if (!need) continue;
    char shape_text[UJ_MAX_DIMS][16], index_text[UJ_MAX_DIMS][16];
    const char* shape[UJ_MAX_DIMS];
    const char* index[UJ_MAX_DIMS];
    for (int k = 0; k < r; k++) {
      /* an axis the operand has itself keeps its own size, so that the
       * elementwise uop checks it against the other operands' at run time */
      int j = k - (r - v[i].ndim);
      if (j >= 0 && !(v[i].ones & (1u << j)))
        snprintf(shape_text[k], sizeof shape_text[k], "d%c%d", 'A' + letter[i], j);
      else if (from[k] < 0) snprintf(shape_text[k], sizeof shape_text[k], "1");
      else snprintf(shape_text[k], sizeof shape_text[k], "d%c%d", 'A' + letter[from[k]], from_axis[k]);
      shape[k] = shape_text[k];
    }
    for (int j = 0; j < v[i].ndim; j++) {
      int k = j + r - v[i].ndim;
      if ((v[i].ones & (1u << j)) && !(ones & (1u << k))) snprintf(index_text[j], sizeof index_text[j], "0");
      else snprintf(index_text[j], sizeof index_text[j], "i%d", k);
      index[j] = index_text[j];
    }
    uj_io_t id = uj_reindex(b->g, v[i].id, r, shape, nss, ss, v[i].ndim, index);
    label(b, id, src[i]);
    v[i] = at(b, n, id, r, ones, v[i].dtype, 0);
  }
}

static val_t eval(build_t* b, const pn_node_t* n);

static val_t unary(build_t* b, const pn_node_t* n, uj_unary_op_t op, val_t x) {
  if (x.is_const) return number(b, n, ir_unary_f64(op, x.number));
  int float_only = !ir_unary_takes_i32(op);
  uj_dtype_t as = float_only && x.as == UJ_I32 ? UJ_F32 : x.as;
  if (x.ndim == 0 && is_float(as)) x = cast_to(b, n, x, UJ_F64); /* a scalar: in f64 */
  else if (float_only && x.dtype == UJ_I32) x = cast_to(b, n, x, UJ_F32);
  if (b->failed) return bad();
  uj_io_t id = uj_unary(b->g, op, x.id);
  label(b, id, n);
  val_t r = at(b, n, id, x.ndim, x.ones, x.dtype, 0);
  r.as = x.ndim == 0 ? as : x.dtype;
  return r;
}

static val_t binary_as(build_t* b, const pn_node_t* n, uj_binary_op_t op, val_t x, val_t y, int true_division);
static val_t binary(build_t* b, const pn_node_t* n, uj_binary_op_t op, val_t x, val_t y) {
  return binary_as(b, n, op, x, y, 1);
}

/* x // y: floor division, of integers as they are, of floats as floor(x / y). */
static val_t floor_divide(build_t* b, const pn_node_t* n, val_t x, val_t y) {
  if (x.is_const && y.is_const) return number(b, n, floor(x.number / y.number));
  val_t v[2] = {x, y};
  if (promote(b, n, v, 2, 0) == UJ_I32 && !b->failed) return binary_as(b, n, UJ_BINARY_DIV, x, y, 0);
  val_t q = binary(b, n, UJ_BINARY_DIV, x, y);
  return q.id < 0 ? q : unary(b, n, UJ_UNARY_FLOOR, q);
}

/* x != 0, as 1 or 0: the truth of a logical operator's operand. */
static val_t truth(build_t* b, const pn_node_t* n, val_t x) { return binary(b, n, UJ_BINARY_NE, x, number(b, n, 0.0)); }

/* A binary operator of the language: an op of the table, or //, &, |. */
static val_t infix(build_t* b, const pn_node_t* n, int code, val_t x, val_t y) {
  if (code == PN_FLOORDIV) return floor_divide(b, n, x, y);
  if (code == PN_AND || code == PN_OR) {
    val_t tx = truth(b, n, x), ty = tx.id < 0 ? tx : truth(b, n, y);
    if (ty.id < 0) return bad();
    return binary(b, n, code == PN_AND ? UJ_BINARY_MUL : UJ_BINARY_MAX, tx, ty);
  }
  return binary(b, n, (uj_binary_op_t)code, x, y);
}

/* x op y; with true_division, i32 / i32 is NumPy's true division, in f64
 * (0: the uop's floor division, for //). */
static val_t binary_as(build_t* b, const pn_node_t* n, uj_binary_op_t op, val_t x, val_t y, int true_division) {
  if (x.is_const && y.is_const) return number(b, n, ir_binary_f64(op, x.number, y.number));
  val_t v[2] = {x, y};
  const pn_node_t* src[2] = {n->args[0], n->nargs > 1 ? n->args[1] : n};
  uj_dtype_t as = promote(b, n, v, 2, 0);
  if (!ir_binary_takes_i32(op) && as == UJ_I32) { /* i32 ** i32, atan2 of i32, ... are f32 */
    uj_dtype_t held = v[0].ndim == 0 && v[1].ndim == 0 ? UJ_F64 : UJ_F32;
    v[0] = cast_to(b, n, v[0], held);
    v[1] = cast_to(b, n, v[1], held);
    as = UJ_F32;
  } else if (op == UJ_BINARY_DIV && as == UJ_I32 && true_division) { /* true division, as NumPy's: i32 / i32 is f64 */
    v[0] = cast_to(b, n, v[0], UJ_F64);
    v[1] = cast_to(b, n, v[1], UJ_F64);
    as = UJ_F64;
  }
  broadcast(b, n, v, 2, src);
  if (b->failed) return bad();
  uj_io_t id = uj_binary(b->g, op, v[0].id, v[1].id);
  label(b, id, n);
  int r = v[0].ndim > v[1].ndim ? v[0].ndim : v[1].ndim;
  uint32_t ones = v[0].ndim == r ? v[0].ones : v[1].ones;
  uj_dtype_t dt = v[0].is_const ? v[1].dtype : v[0].dtype;
  val_t out = at(b, n, id, r, ones, dt, v[0].is_const && v[1].is_const);
  out.as = r == 0 ? as : dt;
  return out;
}

static val_t reduction(build_t* b, const pn_node_t* n, uj_reduce_op_t op, val_t x) {
  int axes[UJ_MAX_DIMS], count = 0;
  if (n->has_axis) {
    int a = n->axis < 0 ? n->axis + x.ndim : n->axis;
    if (a < 0 || a >= x.ndim) {
      b->failed = 1;
      rt_error(UJ_ERR_SHAPE, "program line %d, column %d: axis %d is out of range for a value of rank %d", n->line,
               n->column, n->axis, x.ndim);
      return bad();
    }
    axes[count++] = a;
  } else {
    for (int k = 0; k < x.ndim; k++) axes[count++] = k;
  }
  uint32_t ones = x.ones;
  for (int i = 0; i < count; i++) ones |= 1u << axes[i];
  if (x.is_const) return x;
  uj_io_t id = uj_reduce(b->g, op, count, axes, x.id);
  label(b, id, n);
  val_t r = at(b, n, id, x.ndim, ones, x.dtype, 0);
  r.as = x.as;
  return r;
}

/* where(c, x, y), with x and y brought to one dtype and all three to one
 * shape. */
static val_t choose(build_t* b, const pn_node_t* n, const pn_node_t* const* src, val_t c, val_t x, val_t y) {
  if (c.is_const) return c.number != 0 ? x : y;
  val_t a[3] = {c, x, y};
  if (a[1].is_const && a[2].is_const && a[0].dtype != UJ_I32) {
    /* two numbers take the condition's dtype, their only partner */
    for (int i = 1; i < 3; i++) {
      uj_io_t id = uj_cast(b->g, a[0].dtype, a[i].id);
      a[i] = at(b, n, id, 0, 0, a[0].dtype, 0);
      a[i].as = a[0].as;
    }
    if (b->failed) return bad();
  }
  uj_dtype_t as = promote(b, n, a + 1, 2, a[0].ndim > 0);
  broadcast(b, n, a, 3, src);
  if (b->failed) return bad();
  uj_io_t id = uj_where(b->g, a[0].id, a[1].id, a[2].id);
  label(b, id, n);
  int r = 0;
  uint32_t ones = 0;
  for (int i = 0; i < 3; i++)
    if (a[i].ndim > r) r = a[i].ndim, ones = a[i].ones;
  val_t out = at(b, n, id, r, ones, a[1].is_const ? a[2].dtype : a[1].dtype, 0);
  if (r == 0 && !(a[1].is_const && a[2].is_const)) out.as = as;
  return out;
}

/* Each step stops at the first failure: the value then has id -1. */
#define TRY(v) \
  if ((v).id < 0) return bad()

static val_t call(build_t* b, const pn_node_t* n) {
  val_t a[PARSE_MAX_ARGS];
  for (int i = 0; i < n->nargs; i++)
    if ((a[i] = eval(b, n->args[i])).id < 0) return bad();
  const pn_node_t* x_src[3] = {n->args[0], n->args[0], n->args[0]};
  switch ((pn_func_t)n->func) {
    case PF_UNARY: return unary(b, n, (uj_unary_op_t)n->op, a[0]);
    case PF_BINARY: return binary(b, n, (uj_binary_op_t)n->op, a[0], a[1]);
    case PF_RELU: return binary(b, n, UJ_BINARY_MAX, a[0], number(b, n, 0.0));
    case PF_SOFTPLUS: { /* torch's: x past 20, else log(1 + e^x); e^x of at most e^20 on either side */
      val_t big = binary(b, n, UJ_BINARY_GT, a[0], number(b, n, 20.0));
      TRY(big);
      val_t e = choose(b, n, x_src, big, number(b, n, 20.0), a[0]); /* NaN stays NaN */
      TRY(e);
      if ((e = unary(b, n, UJ_UNARY_EXP, e)).id >= 0) e = unary(b, n, UJ_UNARY_LOG1P, e);
      TRY(e);
      return choose(b, n, x_src, big, a[0], e);
    }
    case PF_CLAMP: { /* NaN stays NaN: x only when it is not out of range */
      const pn_node_t* src[3] = {n->args[0], n->args[2], n->args[0]};
      val_t above = binary(b, n, UJ_BINARY_GT, a[0], a[2]);
      TRY(above);
      val_t upper = choose(b, n, src, above, a[2], a[0]);
      TRY(upper);
      val_t below = binary(b, n, UJ_BINARY_LT, a[0], a[1]);
      TRY(below);
      const pn_node_t* src2[3] = {n->args[0], n->args[1], n->args[0]};
      return choose(b, n, src2, below, a[1], upper);
    }
    case PF_ONES_LIKE:
    case PF_ZEROS_LIKE: { /* (x == x) + (x != x) is 1 and (x != x) * 0 is 0, NaN or not, in x's shape and dtype */
      if (a[0].is_const) return number(b, n, n->func == PF_ONES_LIKE ? 1.0 : 0.0);
      val_t nan = binary(b, n, UJ_BINARY_NE, a[0], a[0]);
      TRY(nan);
      if (n->func == PF_ZEROS_LIKE) return binary(b, n, UJ_BINARY_MUL, nan, number(b, n, 0.0));
      val_t real = binary(b, n, UJ_BINARY_EQ, a[0], a[0]);
      TRY(real);
      return binary(b, n, UJ_BINARY_ADD, real, nan);
    }
    case PF_WHERE: {
      const pn_node_t* src[3] = {n->args[0], n->args[1], n->args[2]};
      return choose(b, n, src, a[0], a[1], a[2]);
    }
    case PF_SUM: return reduction(b, n, UJ_REDUCE_SUM, a[0]);
    case PF_MEAN: return reduction(b, n, UJ_REDUCE_MEAN, a[0]);
    case PF_PROD: return reduction(b, n, UJ_REDUCE_PROD, a[0]);
    case PF_AMAX: return reduction(b, n, UJ_REDUCE_MAX, a[0]);
    case PF_AMIN: return reduction(b, n, UJ_REDUCE_MIN, a[0]);
  }
  return bad();
}

/* A chain of binary operators, x + y - z + ..., is a tree that grows to
 * the left as long as the chain (the parser reads it with a loop and does
 * not count it as nesting). Its left spine is walked here with a loop too:
 * the nodes down to the first operand go on a stack of their own, then
 * each one's right operand is built on the way back up. Recursion is left
 * for the right operands, calls and unary operators, which the parser's
 * nesting limit bounds, so a sum of 10,000 terms costs no stack. */
static val_t eval_chain(build_t* b, const pn_node_t* n) {
  size_t count = 0, cap = 64;
  const pn_node_t** spine = malloc(cap * sizeof *spine);
  for (; spine && n->kind == PN_BINARY; n = n->args[0]) {
    if (count == cap) {
      const pn_node_t** grown = realloc(spine, 2 * cap * sizeof *spine);
      if (!grown) {
        free(spine);
        spine = NULL;
        break;
      }
      spine = grown, cap *= 2;
    }
    spine[count++] = n;
  }
  if (!spine) {
    if (!b->failed)
      rt_error(UJ_ERR_OOM, "program line %d, column %d: out of memory building a chain of over %zu operators", n->line,
               n->column, count);
    b->failed = 1;
    return bad();
  }
  val_t x = eval(b, n); /* the chain's first operand */
  while (count > 0 && x.id >= 0) {
    const pn_node_t* op = spine[--count];
    val_t y = eval(b, op->args[1]);
    x = y.id < 0 ? bad() : infix(b, op, op->op, x, y);
  }
  free(spine);
  return x;
}

static val_t eval(build_t* b, const pn_node_t* n) {
  if (b->failed) return bad();
  switch (n->kind) {
    case PN_NUMBER: return number(b, n, n->number);
    case PN_NAME: return b->cur[n->name];
    case PN_NEG: {
      val_t x = eval(b, n->args[0]);
      return x.id < 0 ? x : unary(b, n, UJ_UNARY_NEG, x);
    }
    case PN_NOT: { /* ~x: x == 0, as 1 or 0 */
      val_t x = eval(b, n->args[0]);
      return x.id < 0 ? x : binary(b, n, UJ_BINARY_EQ, x, number(b, n, 0.0));
    }
    case PN_BINARY: return eval_chain(b, n);
    case PN_CALL: return call(b, n);
  }
  return bad();
}

/* The operations the outputs need: the graph's nodes other than inputs
 * reached from them through operands and shape sources. Nodes are added
 * after their operands, so one pass down the ids marks them all. -1 when
 * out of memory. */
static int needed_operations(const uj_graph_t* g, const uj_io_t* outs, int nout) {
  unsigned char* need = calloc((size_t)g->n + 1, 1);
  if (!need) return -1;
  for (int i = 0; i < nout; i++)
    if (outs[i] >= 0 && outs[i] < g->n) need[outs[i]] = 1;
  int count = 0;
  for (int id = g->n - 1; id >= 0; id--) {
    if (!need[id]) continue;
    const uop_node_t* node = &g->nodes[id];
    count += node->kind != UOP_INPUT;
    for (int k = 0; k < node->nin; k++)
      if (node->in[k] >= 0 && node->in[k] < id) need[node->in[k]] = 1;
    for (int k = 0; k < node->nss; k++)
      if (node->ss[k] >= 0 && node->ss[k] < id) need[node->ss[k]] = 1;
  }
  free(need);
  return count;
}

/* The backward program of the forward graph g: it reads the inputs, then
 * the gradient of each output, and writes the gradient of each input
 * (zeros for an i32 one; an i32 output's gradient is read for its size
 * only). An output that is also another output, or an input, gets a
 * gradient name of its own each time; the autodiff sums them. */
static uj_status_t build_backward(uj_graph_t* g, const uj_io_t* ins, int nin, const uj_io_t* outs, int nout,
                                  uj_program_t** out) {
  if (nin == 0)
    return rt_error(UJ_ERR_INVALID, "the program has no inputs, so its backward pass has no gradients to give");
  uj_io_t* ingrads = malloc(sizeof(uj_io_t) * (size_t)(nin + nout));
  uj_io_t* outgrads = malloc(sizeof(uj_io_t) * (size_t)nin);
  uj_status_t s = UJ_OK;
  if (!ingrads || !outgrads)
    s = rt_error(UJ_ERR_OOM, "out of memory listing the gradients of %d inputs and %d outputs (%zu bytes)", nin, nout,
                 sizeof(uj_io_t) * (size_t)(2 * nin + nout));
  for (int i = 0; i < nin && s == UJ_OK; i++) {
    ingrads[i] = ins[i];
    if ((outgrads[i] = uop_grad(g, ins[i])) < 0) s = UJ_ERR_OOM;
  }
  for (int j = 0; j < nout && s == UJ_OK; j++)
    if ((ingrads[nin + j] = uop_grad(g, outs[j])) < 0) s = UJ_ERR_OOM;
  if (s == UJ_OK) {
    uj_program_desc_t d = {.input_count = nin, .inputs = ins, .ingrad_count = nin + nout, .ingrads = ingrads,
                           .outgrad_count = nin, .outgrads = outgrads};
    s = uj_program_new(g, &d, out);
  }
  free(ingrads);
  free(outgrads);
  return s;
}

static uj_status_t build(pn_program_t* pp, const pn_signature_t* sig, uj_program_t** out) {
  build_t* b = calloc(1, sizeof *b);
  uj_io_t* ins = malloc(sizeof(uj_io_t) * (size_t)(pp->ninputs + 1));
  uj_io_t* outs = malloc(sizeof(uj_io_t) * (size_t)(pp->noutputs + 1));
  uj_status_t s = UJ_OK;
  if (!b || !ins || !outs || !(b->g = uj_graph_new())) {
    s = rt_error(UJ_ERR_OOM, "uj_program_parse: out of memory allocating a build of %d inputs and %d outputs (%zu bytes)",
                 pp->ninputs, pp->noutputs, sizeof *b + sizeof(uj_io_t) * (size_t)(pp->ninputs + pp->noutputs + 2));
    goto done;
  }
  b->pp = pp;
  for (int i = 0; i < pp->ninputs && s == UJ_OK; i++) {
    int name = pp->input_name[i];
    ins[i] = uj_input(b->g, sig->ndim[i], (uj_dtype_t)sig->dtype[i]);
    if (ins[i] < 0) s = UJ_ERR_OOM;
    else b->g->nodes[ins[i]].label = pp->names[name];
    b->cur[name] = (val_t){ins[i], sig->ndim[i], sig->ones[i], (uj_dtype_t)sig->dtype[i], 0, 0.0, (uj_dtype_t)sig->dtype[i]};
  }
  for (int i = 0; i < pp->nstmts && s == UJ_OK; i++) {
    int name = pp->stmts[i].name;
    val_t v = eval(b, pp->stmts[i].value);
    /* a declared name holds its dtype: `p: bf16` then `p = m` rounds m */
    if (v.id >= 0 && pp->hinted[name] && !v.is_const && v.dtype == pp->hint[name]) v.as = v.dtype;
    if (v.id >= 0 && pp->hinted[name] && (v.is_const || v.dtype != pp->hint[name])) {
      uj_io_t id = uj_cast(b->g, pp->hint[name], v.id);
      label(b, id, pp->stmts[i].value);
      v = id < 0 ? bad() : at(b, pp->stmts[i].value, id, v.ndim, v.ones, pp->hint[name], 0);
    }
    if (v.id < 0) s = strstr(uj_last_error(), "out of memory") ? UJ_ERR_OOM : UJ_ERR_SHAPE;
    b->cur[name] = v;
  }
  /* an output holds its dtype: a scalar kept in f64 is rounded to it */
  for (int i = 0; i < pp->noutputs && s == UJ_OK; i++) {
    const pn_stmt_t* last = NULL;
    for (int k = 0; k < pp->nstmts; k++)
      if (pp->stmts[k].name == pp->output_name[i]) last = &pp->stmts[k];
    val_t v = b->cur[pp->output_name[i]];
    if (last && v.id >= 0 && v.dtype != v.as) v = settled(b, last->value, v);
    if ((outs[i] = v.id) < 0) s = strstr(uj_last_error(), "out of memory") ? UJ_ERR_OOM : UJ_ERR_SHAPE;
  }
  /* A flat chain is no nesting (parse.c), so a source of a megabyte may
   * be one sum of 250,000 terms. Every operation lowers to one loop block
   * at least, and the pass pipeline refuses more than PARSE_MAX_OPERATIONS
   * blocks; refused here, before uj_program_new lowers and verifies them
   * (the verifier's time grows with the square of the blocks: minutes for
   * such a source), with the same limit in the message. */
  int needed = s == UJ_OK ? needed_operations(b->g, outs, pp->noutputs) : 0;
  if (needed < 0)
    s = rt_error(UJ_ERR_OOM, "out of memory counting the operations of a program of %d nodes", b->g->n);
  else if (needed > PARSE_MAX_OPERATIONS)
    s = rt_error(UJ_ERR_UNSUPPORTED,
                 "the program has %d operations once lowered (its operators, calls, numbers, broadcasts and "
                 "casts); programs of at most %d operations are compiled",
                 needed, PARSE_MAX_OPERATIONS);
  if (s == UJ_OK && sig->pass == UJ_BACKWARD) {
    s = build_backward(b->g, ins, pp->ninputs, outs, pp->noutputs, out);
  } else if (s == UJ_OK) {
    uj_program_desc_t d = {.input_count = pp->ninputs, .inputs = ins, .output_count = pp->noutputs, .outputs = outs};
    s = uj_program_new(b->g, &d, out);
  }
done:
  if (b) uj_graph_free(b->g);
  free(b);
  free(ins);
  free(outs);
  return s;
}

static int same_signature(const pn_signature_t* a, const pn_signature_t* b) {
  return a->n == b->n && a->pass == b->pass && !memcmp(a->dtype, b->dtype, (size_t)a->n) && !memcmp(a->ndim, b->ndim, (size_t)a->n) &&
         !memcmp(a->ones, b->ones, (size_t)a->n);
}

/* The cached specialization with this signature, or -1; pp->lock held. */
static int find_cached(const pn_program_t* pp, const pn_signature_t* sig) {
  for (int i = 0; i < pp->ncached; i++)
    if (same_signature(&pp->cached[i]->sig, sig)) return i;
  return -1;
}

/* Moves cached entry i to the front and holds it for the caller; pp->lock
 * held. */
static pn_special_t* use_cached(pn_program_t* pp, int i) {
  pn_special_t* sp = pp->cached[i];
  for (; i > 0; i--) pp->cached[i] = pp->cached[i - 1];
  pp->cached[0] = sp;
  atomic_fetch_add_explicit(&sp->refs, 1, memory_order_relaxed);
  return sp;
}

/* Finds or builds the specialization for a signature, most recent first.
 * The build runs outside the lock, so that threads on other signatures
 * are not held up by it; two threads building the same signature keep the
 * first that arrives. The evicted entry loses the cache's reference only:
 * a call still running it keeps it alive until it releases it. */
static uj_status_t lookup(pn_program_t* pp, const pn_signature_t* sig, pn_special_t** out) {
  pthread_mutex_lock(&pp->lock);
  int hit = find_cached(pp, sig);
  if (hit >= 0) {
    *out = use_cached(pp, hit);
    pthread_mutex_unlock(&pp->lock);
    return UJ_OK;
  }
  pthread_mutex_unlock(&pp->lock);

  pn_special_t* built = calloc(1, sizeof *built);
  if (!built) return rt_error(UJ_ERR_OOM, "out of memory allocating a build of a parsed program (%zu bytes)", sizeof *built);
  uj_status_t s = build(pp, sig, &built->program);
  if (s != UJ_OK) {
    free(built);
    return s;
  }
  built->sig = *sig;
  atomic_init(&built->refs, 1); /* the cache's */
  pn_special_t* unused = NULL;  /* released outside the lock: freeing a program takes a while */
  pthread_mutex_lock(&pp->lock);
  if ((hit = find_cached(pp, sig)) >= 0) {
    unused = built; /* another thread was first */
  } else {
    if (pp->ncached == PARSE_CACHE) unused = pp->cached[--pp->ncached];
    hit = pp->ncached++;
    pp->cached[hit] = built;
  }
  *out = use_cached(pp, hit);
  pthread_mutex_unlock(&pp->lock);
  pn_release(unused);
  return UJ_OK;
}

void pn_release(pn_special_t* sp) {
  if (!sp) return;
  /* acq_rel: whoever frees it sees every other holder's last use */
  if (atomic_fetch_sub_explicit(&sp->refs, 1, memory_order_acq_rel) != 1) return;
  uj_program_free(sp->program);
  free(sp);
}

/* Input i's part of the signature, after checking the tensor (the message
 * names the input). */
static uj_status_t input_signature(const pn_program_t* pp, int i, const uj_tensor_t* t, unsigned char* dtype,
                                   unsigned char* ndim, unsigned char* ones) {
  int name = pp->input_name[i];
  /* an input without a hint takes its tensor's dtype, which must be one */
  if (t && !pp->hinted[name] && uj_dtype_size(t->dtype) == 0)
    return rt_error(UJ_ERR_INVALID, "input %d (\"%s\"): unknown dtype %d", i, pp->names[name], (int)t->dtype);
  uj_dtype_t dt = t && pp->hinted[name] ? pp->hint[name] : t ? t->dtype : UJ_F32;
  int rank = t && t->ndim >= 0 && t->ndim <= UJ_MAX_DIMS ? t->ndim : -1;
  /* the build depends on ranks, dtypes and size-1 axes, not on the device:
   * which device the call may use is decided where it runs (jit/run.c) */
  uj_device_t dev = t && t->device == UJ_CUDA ? UJ_CUDA : UJ_CPU;
  if (!rt_tensor_ok_on(t, dev, rank, dt, NULL)) {
    char what[96];
    snprintf(what, sizeof what, "input %d (\"%s\")", i, pp->names[name]);
    uj_status_t s = t ? rt_tensor_check_on(what, t, dev, rank, dt, NULL) : rt_error(UJ_ERR_INVALID, "%s: NULL tensor", what);
    if (s != UJ_OK) return s;
  }
  *dtype = (unsigned char)dt;
  *ndim = (unsigned char)t->ndim;
  *ones = 0;
  for (int k = 0; k < t->ndim; k++)
    if (t->dims[k] == 1) *ones |= (unsigned char)(1u << k);
  return UJ_OK;
}

/* The specialization of the most recent signature when these inputs have
 * it, held for the caller: the common case of a program called again and
 * again, answered without building a signature. */
static pn_special_t* same_as_last(pn_program_t* pp, uj_pass_t pass, const uj_tensor_t* const* inputs,
                                  int input_count) {
  pthread_mutex_lock(&pp->lock);
  pn_special_t* sp = pp->ncached && pp->cached[0]->sig.pass == pass ? pp->cached[0] : NULL;
  for (int i = 0; i < input_count && sp; i++) {
    unsigned char dtype, ndim, ones;
    uj_status_t s = input_signature(pp, i, inputs[i], &dtype, &ndim, &ones);
    if (s != UJ_OK || dtype != sp->sig.dtype[i] || ndim != sp->sig.ndim[i] || ones != sp->sig.ones[i]) sp = NULL;
  }
  if (sp) atomic_fetch_add_explicit(&sp->refs, 1, memory_order_relaxed);
  pthread_mutex_unlock(&pp->lock);
  return sp;
}

uj_status_t pn_specialize(pn_program_t* pp, uj_pass_t pass, const uj_tensor_t* const* inputs, int input_count,
                          pn_special_t** out) {
  int takes = pass == UJ_BACKWARD ? pp->ninputs + pp->noutputs : pp->ninputs;
  if (input_count != takes)
    return rt_error(UJ_ERR_INVALID, "the program's %s pass takes %d inputs%s, got %d",
                    pass == UJ_BACKWARD ? "backward" : "forward", takes,
                    pass == UJ_BACKWARD ? " (its inputs, then the gradient of each output)" : "", input_count);
  if (input_count && !inputs) return rt_error(UJ_ERR_INVALID, "inputs is NULL");
  /* the gradients take the outputs' signature, checked where the pass runs */
  input_count = pp->ninputs;
  if ((*out = same_as_last(pp, pass, inputs, input_count)) != NULL) return UJ_OK;
  pn_signature_t* sig = calloc(1, sizeof *sig);
  if (!sig) return rt_error(UJ_ERR_OOM, "out of memory allocating an input signature (%zu bytes)", sizeof *sig);
  sig->n = input_count;
  sig->pass = (unsigned char)pass;
  uj_status_t s = UJ_OK;
  for (int i = 0; i < input_count && s == UJ_OK; i++)
    s = input_signature(pp, i, inputs[i], &sig->dtype[i], &sig->ndim[i], &sig->ones[i]);
  if (s == UJ_OK) s = lookup(pp, sig, out);
  free(sig);
  return s;
}

uj_status_t pn_specialize_default(pn_program_t* pp, uj_pass_t pass, pn_special_t** out) {
  /* the most recently used of the pass, read under the lock: another
   * thread may be replacing it */
  pthread_mutex_lock(&pp->lock);
  *out = NULL;
  for (int i = 0; i < pp->ncached && !*out; i++)
    if (pp->cached[i]->sig.pass == pass) *out = use_cached(pp, i);
  pthread_mutex_unlock(&pp->lock);
  if (*out) return UJ_OK;
  pn_signature_t* sig = calloc(1, sizeof *sig);
  if (!sig) return rt_error(UJ_ERR_OOM, "out of memory allocating an input signature (%zu bytes)", sizeof *sig);
  sig->n = pp->ninputs;
  sig->pass = (unsigned char)pass;
  for (int i = 0; i < pp->ninputs; i++) {
    int name = pp->input_name[i];
    sig->dtype[i] = (unsigned char)(pp->hinted[name] ? pp->hint[name] : UJ_F32);
    sig->ndim[i] = 1;
  }
  uj_status_t s = lookup(pp, sig, out);
  free(sig);
  return s;
}
