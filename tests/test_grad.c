/* tests/test_grad.c: gradients of every uop against central finite
 * differences of the forward program, in f64 (tests/grad_check.h): every
 * unary op (floor exactly 0), every binary op with equal shapes, a 0-d
 * second operand (its gradient summed) and a const on either side, the
 * comparisons (exactly 0), where (to a where cond holds, to b elsewhere; cond
 * exactly 0), cast f64 -> f64 and through an f32 round trip (looser), reduce
 * sum, mean, max, min and prod over one, several, all and no axes (negative
 * axes too), reindex (transpose, broadcast, flip, stride, padding whose
 * out-of-range reads get no gradient), select (scatter-add, repeated indices
 * accumulating through a broadcast, out-of-range indices skipped), gradients
 * accumulating over a diamond and over x * x, two outputs, forward values
 * given as ingrads, a program that asks for only some gradients (and in
 * another order), and the errors of backward programs. Every backward run
 * happens with the passes on and off. Shapes are random, seeds fixed. */
#include "grad_check.h"

static const char* unary_name(int op) {
  static const char* n[] = {"neg", "abs", "exp", "log", "sqrt", "rsqrt",
                            "recip", "sin", "cos", "tanh", "sigmoid", "floor"};
  return op >= 0 && op < 12 ? n[op] : "?";
}
static const char* binary_name(int op) {
  static const char* n[] = {"add", "sub", "mul", "div", "pow", "max", "min",
                            "eq",  "ne",  "lt",  "le",  "gt",  "ge"};
  return op >= 0 && op < 13 ? n[op] : "?";
}

/* Values for a and b of a binary op, kept away from kinks (max, min) and poles (div). */
static void binary_fill(uj_binary_op_t op, uint64_t* st, uj_tensor_t* a, uj_tensor_t* b) {
  switch (op) {
    case UJ_BINARY_POW:
      gc_fill(st, a, 0.5, 2.0);
      gc_fill(st, b, -2.0, 2.0);
      break;
    case UJ_BINARY_DIV:
      gc_fill(st, a, -2.0, 2.0);
      gc_fill_away(st, b, 0.5, 2.0);
      break;
    default:
      gc_fill_away(st, a, 0.1, 2.0);
      if (or_tnumel(b) == or_tnumel(a)) {
        gc_fill_apart(st, a, b, 0.1);
      } else { /* a 0-d b: keep every a at least 0.1 away from it */
        gc_fill(st, b, -1.0, 1.0);
        double bv = or_get(b, 0);
        int64_t n = or_tnumel(a);
        for (int64_t i = 0; i < n; i++)
          or_set(a, i, bv + harness_real(st, 0.1, 1.6) * (harness_int(st, 0, 1) ? 1.0 : -1.0));
      }
      break;
  }
}

/* ---- unary ------------------------------------------------------------------------ */

TEST(grad_unary) {
  HARNESS_SEED(501);
  uint64_t st = 501;
  for (int op = UJ_UNARY_NEG; op <= UJ_UNARY_SIGMOID; op++) {
    for (int it = 0; it < 4; it++) {
      int64_t dims[UJ_MAX_DIMS];
      int r = (int)harness_int(&st, 0, 4);
      gc_dims(&st, r, 5, dims);
      gc_case_t c;
      char what[64];
      snprintf(what, sizeof what, "%s rank %d", unary_name(op), r);
      gc_init(&c, what);
      uj_io_t x = gc_input(&c, UJ_F64, r, dims, 1);
      gc_output(&c, uj_unary(c.g, (uj_unary_op_t)op, x));
      uj_tensor_t* tx = gc_t(&c, x);
      if (op == UJ_UNARY_LOG || op == UJ_UNARY_SQRT || op == UJ_UNARY_RSQRT) gc_fill(&st, tx, 0.5, 2.0);
      else if (op == UJ_UNARY_RECIP) gc_fill_away(&st, tx, 0.5, 2.0);
      else gc_fill_away(&st, tx, 0.1, 2.0); /* abs: away from 0 */
      GC_CHECK(&c, &st);
    }
  }
}

/* floor: exactly 0 for floor alone; x * floor(x) has gradient floor(x). */
TEST(grad_unary_floor) {
  HARNESS_SEED(502);
  uint64_t st = 502;
  for (int it = 0; it < 4; it++) {
    int64_t dims[UJ_MAX_DIMS];
    int r = (int)harness_int(&st, 0, 3);
    gc_dims(&st, r, 5, dims);
    for (int composite = 0; composite < 2; composite++) {
      gc_case_t c;
      gc_init(&c, composite ? "x * floor(x)" : "floor(x)");
      uj_io_t x = gc_input(&c, UJ_F64, r, dims, 1);
      uj_io_t f = uj_unary(c.g, UJ_UNARY_FLOOR, x);
      gc_output(&c, composite ? uj_binary(c.g, UJ_BINARY_MUL, x, f) : f);
      c.zero[0] = !composite;
      uj_tensor_t* tx = gc_t(&c, x);
      for (int64_t i = 0; i < or_tnumel(tx); i++)
        or_set(tx, i, (double)harness_int(&st, -3, 2) + harness_real(&st, 0.1, 0.9));
      GC_CHECK(&c, &st);
    }
  }
}

/* ---- binary ------------------------------------------------------------------------ */

/* form 0: a and b of one shape; 1: b 0-d; 2: b a const; 3: a const, b the input. */
static void binary_grad_case(uj_binary_op_t op, int form, uint64_t* st) {
  static const char* forms[] = {"a op b", "a op b0d", "a op const", "const op b"};
  for (int it = 0; it < 4; it++) {
    int64_t dims[UJ_MAX_DIMS];
    int r = (int)harness_int(st, form == 1 ? 1 : 0, 4);
    gc_dims(st, r, 5, dims);
    gc_case_t c;
    char what[96];
    snprintf(what, sizeof what, "%s, %s, rank %d", binary_name(op), forms[form], r);
    gc_init(&c, what);
    uj_io_t a, b, y;
    if (form <= 1) {
      a = gc_input(&c, UJ_F64, r, dims, 1);
      b = gc_input(&c, UJ_F64, form ? 0 : r, dims, 1);
      binary_fill(op, st, gc_t(&c, a), gc_t(&c, b));
      y = uj_binary(c.g, op, a, b);
    } else {
      /* the constant: a valid operand value from the same distribution */
      int64_t one = 1;
      uj_tensor_t ta = or_tensor(UJ_F64, 1, &one), tb = or_tensor(UJ_F64, 1, &one);
      binary_fill(op, st, &ta, &tb);
      double k = form == 2 ? or_get(&tb, 0) : or_get(&ta, 0);
      or_tensor_free(&ta);
      or_tensor_free(&tb);
      uj_io_t x = gc_input(&c, UJ_F64, r, dims, 1);
      uj_tensor_t* tx = gc_t(&c, x);
      uj_tensor_t kt = {&k, UJ_F64, UJ_CPU, 0, {0}};
      if (form == 2) binary_fill(op, st, tx, &kt);  /* x plays a against the 0-d k */
      else if (op == UJ_BINARY_POW) gc_fill(st, tx, -2.0, 2.0);
      else if (op == UJ_BINARY_DIV) gc_fill_away(st, tx, 0.5, 2.0);
      else if (op >= UJ_BINARY_MAX) {
        int64_t n = or_tnumel(tx);
        for (int64_t i = 0; i < n; i++)
          or_set(tx, i, k + harness_real(st, 0.1, 1.6) * (harness_int(st, 0, 1) ? 1.0 : -1.0));
      } else gc_fill(st, tx, -2.0, 2.0);
      uj_io_t kc = uj_const(c.g, k);
      y = form == 2 ? uj_binary(c.g, op, x, kc) : uj_binary(c.g, op, kc, x);
    }
    gc_output(&c, y);
    if (op >= UJ_BINARY_EQ)
      for (int i = 0; i < c.nin; i++) c.zero[i] = 1;
    GC_CHECK(&c, st);
  }
}

TEST(grad_binary) {
  HARNESS_SEED(511);
  uint64_t st = 511;
  for (int op = UJ_BINARY_ADD; op <= UJ_BINARY_MIN; op++) binary_grad_case((uj_binary_op_t)op, 0, &st);
}
TEST(grad_binary_scalar_operand) {
  HARNESS_SEED(512);
  uint64_t st = 512;
  for (int op = UJ_BINARY_ADD; op <= UJ_BINARY_MIN; op++) binary_grad_case((uj_binary_op_t)op, 1, &st);
}
TEST(grad_binary_const) {
  HARNESS_SEED(513);
  uint64_t st = 513;
  for (int op = UJ_BINARY_ADD; op <= UJ_BINARY_MIN; op++) {
    binary_grad_case((uj_binary_op_t)op, 2, &st);
    binary_grad_case((uj_binary_op_t)op, 3, &st);
  }
}
/* Comparisons are flat: both operands get exactly 0, also a 0-d one. */
TEST(grad_binary_compare) {
  HARNESS_SEED(514);
  uint64_t st = 514;
  for (int op = UJ_BINARY_EQ; op <= UJ_BINARY_GE; op++) {
    binary_grad_case((uj_binary_op_t)op, 0, &st);
    binary_grad_case((uj_binary_op_t)op, 1, &st);
  }
}
/* A comparison's 0/1 used as a factor: y = x * (x > w) + w, so x gets the
 * mask and w gets 1 (nothing through the comparison). */
TEST(grad_binary_compare_mask) {
  HARNESS_SEED(515);
  uint64_t st = 515;
  for (int it = 0; it < 4; it++) {
    int64_t dims[UJ_MAX_DIMS];
    int r = (int)harness_int(&st, 1, 3);
    gc_dims(&st, r, 5, dims);
    gc_case_t c;
    gc_init(&c, "x * (x > w) + w");
    uj_io_t x = gc_input(&c, UJ_F64, r, dims, 1), w = gc_input(&c, UJ_F64, r, dims, 1);
    gc_fill(&st, gc_t(&c, x), -2.0, 2.0);
    gc_fill_apart(&st, gc_t(&c, x), gc_t(&c, w), 0.1);
    uj_io_t m = uj_binary(c.g, UJ_BINARY_GT, x, w);
    gc_output(&c, uj_binary(c.g, UJ_BINARY_ADD, uj_binary(c.g, UJ_BINARY_MUL, x, m), w));
    GC_CHECK(&c, &st);
  }
}

/* ---- where, cast ------------------------------------------------------------------- */

/* form 0: cond an f64 input of 0s and nonzeros (gradient exactly 0, no
 * differences: a step would turn a 0 into a nonzero); 1: cond = s > 0 for an
 * input s kept away from 0 (exactly 0 through the comparison), b 0-d (its
 * gradient summed over where cond fails); 2: b a const. */
TEST(grad_where) {
  HARNESS_SEED(521);
  uint64_t st = 521;
  for (int form = 0; form < 3; form++) {
    for (int it = 0; it < 4; it++) {
      int64_t dims[UJ_MAX_DIMS];
      int r = (int)harness_int(&st, form == 1 ? 1 : 0, 4);
      gc_dims(&st, r, 5, dims);
      gc_case_t c;
      char what[64];
      snprintf(what, sizeof what, "where form %d rank %d", form, r);
      gc_init(&c, what);
      uj_io_t s = gc_input(&c, UJ_F64, r, dims, 1);
      uj_io_t cond = s;
      uj_tensor_t* ts = gc_t(&c, s);
      if (form == 1) {
        gc_fill_away(&st, ts, 0.1, 2.0);
        cond = uj_binary(c.g, UJ_BINARY_GT, s, uj_const(c.g, 0.0));
        c.zero[0] = 1;
      } else {
        for (int64_t i = 0; i < or_tnumel(ts); i++)
          or_set(ts, i, harness_int(&st, 0, 1) ? harness_real(&st, 0.5, 2.0) * (harness_int(&st, 0, 1) ? 1 : -1) : 0.0);
        c.zero[0] = 2;
      }
      uj_io_t a = gc_input(&c, UJ_F64, r, dims, 1);
      uj_io_t b = form == 0 ? gc_input(&c, UJ_F64, r, dims, 1)
                : form == 1 ? gc_input(&c, UJ_F64, 0, dims, 1)
                            : uj_const(c.g, -0.75);
      gc_fill(&st, gc_t(&c, a), -2.0, 2.0);
      if (form < 2) gc_fill(&st, gc_t(&c, b), -2.0, 2.0);
      /* times a, so that a's gradient is not constant */
      uj_io_t w = uj_where(c.g, cond, a, b);
      gc_output(&c, uj_binary(c.g, UJ_BINARY_MUL, w, a));
      GC_CHECK(&c, &st);
    }
  }
}

/* cast f64 -> f64 is the identity; an f32 round trip of a value exactly
 * representable in f32, with steps that stay representable (multiples of
 * 2^-12 in [-2, 2], h = 2^-10), has gradient exp(x) up to f32 rounding of
 * the gradient on its way back (tolerance 1e-4). */
TEST(grad_cast) {
  HARNESS_SEED(522);
  uint64_t st = 522;
  for (int it = 0; it < 4; it++) {
    int64_t dims[UJ_MAX_DIMS];
    int r = (int)harness_int(&st, 0, 4);
    gc_dims(&st, r, 5, dims);
    gc_case_t c;
    gc_init(&c, "sin(cast f64 (x)) * x");
    uj_io_t x = gc_input(&c, UJ_F64, r, dims, 1);
    gc_fill(&st, gc_t(&c, x), -2.0, 2.0);
    uj_io_t k = uj_cast(c.g, UJ_F64, x);
    gc_output(&c, uj_binary(c.g, UJ_BINARY_MUL, uj_unary(c.g, UJ_UNARY_SIN, k), x));
    GC_CHECK(&c, &st);

    gc_init(&c, "exp(cast f64 (cast f32 (x)))");
    x = gc_input(&c, UJ_F64, r, dims, 1);
    uj_tensor_t* tx = gc_t(&c, x);
    for (int64_t i = 0; i < or_tnumel(tx); i++) or_set(tx, i, (double)harness_int(&st, -8192, 8192) / 4096.0);
    uj_io_t rt = uj_cast(c.g, UJ_F64, uj_cast(c.g, UJ_F32, x));
    gc_output(&c, uj_unary(c.g, UJ_UNARY_EXP, rt));
    c.h = 1.0 / 1024.0;
    c.fixed_h = 1;
    c.tol = 1e-4;
    GC_CHECK(&c, &st);
  }
}

/* ---- reduce ------------------------------------------------------------------------ */

static const char* reduce_name(int op) {
  static const char* n[] = {"sum", "prod", "max", "min", "mean"};
  return op >= 0 && op < 5 ? n[op] : "?";
}

/* Random axis sets: one axis, several, all, none, negative spellings. */
static void reduce_grad_case(uj_reduce_op_t op, uint64_t* st) {
  for (int it = 0; it < 8; it++) {
    int64_t dims[UJ_MAX_DIMS];
    int r = (int)harness_int(st, 1, 4);
    gc_dims(st, r, 4, dims);
    int axes[UJ_MAX_DIMS], na = 0;
    if (it == 0) {
      for (int k = 0; k < r; k++) axes[na++] = k; /* all */
    } else if (it == 1) {
      na = 0; /* none: each element its own group */
    } else {
      for (int k = 0; k < r; k++)
        if (harness_int(st, 0, 1)) axes[na++] = harness_int(st, 0, 1) ? k : k - r;
      if (!na) axes[na++] = (int)harness_int(st, 0, r - 1);
    }
    gc_case_t c;
    char what[96];
    snprintf(what, sizeof what, "reduce %s rank %d over %d axes", reduce_name(op), r, na);
    gc_init(&c, what);
    uj_io_t x = gc_input(&c, UJ_F64, r, dims, 1);
    uj_tensor_t* tx = gc_t(&c, x);
    if (op == UJ_REDUCE_MAX || op == UJ_REDUCE_MIN) gc_fill_distinct(st, tx);
    else if (op == UJ_REDUCE_PROD) gc_fill_away(st, tx, 0.5, 1.5);
    else gc_fill(st, tx, -2.0, 2.0);
    gc_output(&c, uj_reduce(c.g, op, na, axes, x));
    GC_CHECK(&c, st);
  }
}

TEST(grad_reduce_sum) {
  HARNESS_SEED(531);
  uint64_t st = 531;
  reduce_grad_case(UJ_REDUCE_SUM, &st);
}
TEST(grad_reduce_mean) {
  HARNESS_SEED(532);
  uint64_t st = 532;
  reduce_grad_case(UJ_REDUCE_MEAN, &st);
}
TEST(grad_reduce_max) {
  HARNESS_SEED(533);
  uint64_t st = 533;
  reduce_grad_case(UJ_REDUCE_MAX, &st);
}
TEST(grad_reduce_min) {
  HARNESS_SEED(534);
  uint64_t st = 534;
  reduce_grad_case(UJ_REDUCE_MIN, &st);
}
TEST(grad_reduce_prod) {
  HARNESS_SEED(535);
  uint64_t st = 535;
  reduce_grad_case(UJ_REDUCE_PROD, &st);
}
/* A reduction feeding an elementwise op on its size-1 result, then reduced
 * again: y = sum_j (max_j x) * x[i, j] summed over i. */
TEST(grad_reduce_chain) {
  HARNESS_SEED(536);
  uint64_t st = 536;
  for (int it = 0; it < 4; it++) {
    int64_t dims[2];
    gc_dims(&st, 2, 5, dims);
    gc_case_t c;
    gc_init(&c, "sum(x * bcast(max_1 x))");
    uj_io_t x = gc_input(&c, UJ_F64, 2, dims, 1);
    gc_fill_distinct(&st, gc_t(&c, x));
    int ax1 = 1, ax01[] = {0, 1};
    uj_io_t m = uj_reduce(c.g, UJ_REDUCE_MAX, 1, &ax1, x);
    static const char* const sh[] = {"dA0", "dA1"};
    static const char* const ix[] = {"i0", "0"};
    uj_io_t ss[] = {x};
    uj_io_t mb = uj_reindex(c.g, m, 2, sh, 1, ss, 2, ix);
    gc_output(&c, uj_reduce(c.g, UJ_REDUCE_SUM, 2, ax01, uj_binary(c.g, UJ_BINARY_MUL, x, mb)));
    GC_CHECK(&c, &st);
  }
}

/* ---- reindex ----------------------------------------------------------------------- */

typedef struct {
  const char* name;
  int xrank, yrank;
  const char* shape[4];
  const char* index[4];
} reindex_form_t;

static const reindex_form_t reindex_forms[] = {
    {"transpose 2-D", 2, 2, {"dA1", "dA0"}, {"i1", "i0"}},
    {"permute 3-D", 3, 3, {"dA2", "dA0", "dA1"}, {"i1", "i2", "i0"}},
    {"broadcast a row", 1, 2, {"3", "dA0"}, {"i1"}},
    {"broadcast a column", 2, 3, {"dA0", "dA1", "4"}, {"i0", "i1"}},
    {"flip", 2, 2, {"dA0", "dA1"}, {"dA0 - 1 - i0", "i1"}},
    {"every second row", 2, 2, {"(dA0 + 1) / 2", "dA1"}, {"i0 * 2", "i1"}},
    {"pad 1 before, 2 after", 2, 2, {"dA0 + 3", "dA1"}, {"i0 - 1", "i1"}},
    {"pad both axes", 2, 2, {"dA0 + 2", "dA1 + 2"}, {"i0 - 1", "i1 - 1"}},
    {"pad 2 on both sides of a vector", 1, 1, {"dA0 + 4"}, {"i0 - 2"}},
    {"shifted window, modulo", 1, 1, {"dA0"}, {"(i0 + 2) % dA0"}},
    {"a diagonal (rank 1 from rank 2)", 2, 1, {"min(dA0, dA1)"}, {"i0", "i0"}},
    {"overlapping windows", 1, 2, {"dA0 - 1", "2"}, {"i0 + i1"}},
};

TEST(grad_reindex) {
  HARNESS_SEED(541);
  uint64_t st = 541;
  for (size_t f = 0; f < sizeof reindex_forms / sizeof reindex_forms[0]; f++) {
    const reindex_form_t* rf = &reindex_forms[f];
    for (int it = 0; it < 3; it++) {
      int64_t dims[UJ_MAX_DIMS];
      gc_dims(&st, rf->xrank, 5, dims);
      if (f == 11) dims[0] += 1; /* at least one window */
      gc_case_t c;
      gc_init(&c, rf->name);
      uj_io_t x = gc_input(&c, UJ_F64, rf->xrank, dims, 1);
      gc_fill(&st, gc_t(&c, x), -2.0, 2.0);
      uj_io_t ss[] = {x};
      uj_io_t y = uj_reindex(c.g, x, rf->yrank, rf->shape, 1, ss, rf->xrank, rf->index);
      /* sin so the gradient depends on the value read */
      gc_output(&c, uj_unary(c.g, UJ_UNARY_SIN, y));
      GC_CHECK(&c, &st);
    }
  }
}

/* A broadcast added to a matrix: b's gradient sums over the rows. */
TEST(grad_reindex_broadcast_add) {
  HARNESS_SEED(542);
  uint64_t st = 542;
  for (int it = 0; it < 4; it++) {
    int64_t dims[2];
    gc_dims(&st, 2, 5, dims);
    gc_case_t c;
    gc_init(&c, "tanh(x + bcast(b))");
    uj_io_t x = gc_input(&c, UJ_F64, 2, dims, 1), b = gc_input(&c, UJ_F64, 1, dims + 1, 1);
    gc_fill(&st, gc_t(&c, x), -2.0, 2.0);
    gc_fill(&st, gc_t(&c, b), -2.0, 2.0);
    static const char* const sh[] = {"dA0", "dA1[=dB0]"};
    static const char* const ix[] = {"i1"};
    uj_io_t ss[] = {x, b};
    uj_io_t bb = uj_reindex(c.g, b, 2, sh, 2, ss, 1, ix);
    gc_output(&c, uj_unary(c.g, UJ_UNARY_TANH, uj_binary(c.g, UJ_BINARY_ADD, x, bb)));
    GC_CHECK(&c, &st);
  }
}

/* ---- select ------------------------------------------------------------------------ */

/* x [n, m] gathered along either axis by random indices, some out of range
 * (those read 0 and give no gradient). */
TEST(grad_select) {
  HARNESS_SEED(551);
  uint64_t st = 551;
  for (int axis = 0; axis < 2; axis++) {
    for (int it = 0; it < 4; it++) {
      int64_t dims[3];
      int r = (int)harness_int(&st, 2, 3);
      gc_dims(&st, r, 5, dims);
      int64_t idims[3] = {dims[0], dims[1], r == 3 ? dims[2] : 1};
      idims[axis] = 1;
      gc_case_t c;
      char what[64];
      snprintf(what, sizeof what, "select axis %d rank %d", axis, r);
      gc_init(&c, what);
      uj_io_t x = gc_input(&c, UJ_F64, r, dims, 1);
      uj_io_t ix = gc_input(&c, UJ_I32, r, idims, 0);
      gc_fill(&st, gc_t(&c, x), -2.0, 2.0);
      uj_tensor_t* ti = gc_t(&c, ix);
      for (int64_t i = 0; i < or_tnumel(ti); i++)
        or_set(ti, i, (double)harness_int(&st, it == 3 ? -1 : 0, dims[axis] - (it == 3 ? 0 : 1)));
      gc_output(&c, uj_unary(c.g, UJ_UNARY_SIN, uj_select(c.g, axis, x, ix)));
      GC_CHECK(&c, &st);
    }
  }
}

/* Repeated indices accumulate: x [m] broadcast to rows [n, m] (B = index),
 * each row picks one element; several rows picking the same element add up. */
TEST(grad_select_repeated) {
  HARNESS_SEED(552);
  uint64_t st = 552;
  for (int it = 0; it < 4; it++) {
    int64_t m = harness_int(&st, 1, 3), n = harness_int(&st, 3, 6);
    int64_t idims[2] = {n, 1};
    gc_case_t c;
    gc_init(&c, "select over broadcast rows");
    uj_io_t x = gc_input(&c, UJ_F64, 1, &m, 1);
    uj_io_t ix = gc_input(&c, UJ_I32, 2, idims, 0);
    gc_fill(&st, gc_t(&c, x), -2.0, 2.0);
    uj_tensor_t* ti = gc_t(&c, ix);
    for (int64_t i = 0; i < n; i++) or_set(ti, i, (double)harness_int(&st, 0, m - 1));
    static const char* const sh[] = {"dB0", "dA0"};
    static const char* const rix[] = {"i1"};
    uj_io_t ss[] = {x, ix};
    uj_io_t xb = uj_reindex(c.g, x, 2, sh, 2, ss, 1, rix);
    gc_output(&c, uj_unary(c.g, UJ_UNARY_EXP, uj_select(c.g, 1, xb, ix)));
    GC_CHECK(&c, &st);
  }
}

/* ---- accumulation, several outputs, given values, partial outgrads ------------- */

/* x -> a = exp(x), b = sin(x), y = a * b: the gradient is da + db. */
TEST(grad_accumulate_diamond) {
  HARNESS_SEED(561);
  uint64_t st = 561;
  for (int it = 0; it < 4; it++) {
    int64_t dims[UJ_MAX_DIMS];
    int r = (int)harness_int(&st, 0, 4);
    gc_dims(&st, r, 5, dims);
    gc_case_t c;
    gc_init(&c, "exp(x) * sin(x)");
    uj_io_t x = gc_input(&c, UJ_F64, r, dims, 1);
    gc_fill(&st, gc_t(&c, x), -2.0, 2.0);
    uj_io_t a = uj_unary(c.g, UJ_UNARY_EXP, x), b = uj_unary(c.g, UJ_UNARY_SIN, x);
    gc_output(&c, uj_binary(c.g, UJ_BINARY_MUL, a, b));
    GC_CHECK(&c, &st);
  }
}

/* x twice in one uop (x * x), x both beside and inside a uop (x - x * x),
 * and x in three uops at once (x + x * x + exp(x)). */
TEST(grad_accumulate_same_operand) {
  HARNESS_SEED(562);
  uint64_t st = 562;
  for (int it = 0; it < 4; it++) {
    int64_t dims[UJ_MAX_DIMS];
    int r = (int)harness_int(&st, 0, 4);
    gc_dims(&st, r, 5, dims);
    for (int form = 0; form < 3; form++) {
      static const char* names[] = {"x * x", "x - x * x", "x + x * x + exp(x)"};
      gc_case_t c;
      gc_init(&c, names[form]);
      uj_io_t x = gc_input(&c, UJ_F64, r, dims, 1);
      gc_fill(&st, gc_t(&c, x), -2.0, 2.0);
      uj_io_t xx = uj_binary(c.g, UJ_BINARY_MUL, x, x);
      uj_io_t y = xx;
      if (form == 1) y = uj_binary(c.g, UJ_BINARY_SUB, x, xx);
      if (form == 2)
        y = uj_binary(c.g, UJ_BINARY_ADD, uj_binary(c.g, UJ_BINARY_ADD, x, xx), uj_unary(c.g, UJ_UNARY_EXP, x));
      gc_output(&c, y);
      GC_CHECK(&c, &st);
    }
  }
}

/* Two outputs sharing x, with an upstream gradient for each; the second
 * output is an intermediate of the first. */
TEST(grad_two_outputs) {
  HARNESS_SEED(563);
  uint64_t st = 563;
  for (int it = 0; it < 4; it++) {
    int64_t dims[UJ_MAX_DIMS];
    int r = (int)harness_int(&st, 1, 3);
    gc_dims(&st, r, 5, dims);
    gc_case_t c;
    gc_init(&c, "y1 = tanh(x * w), y2 = x * w");
    uj_io_t x = gc_input(&c, UJ_F64, r, dims, 1), w = gc_input(&c, UJ_F64, r, dims, 1);
    gc_fill(&st, gc_t(&c, x), -2.0, 2.0);
    gc_fill(&st, gc_t(&c, w), -2.0, 2.0);
    uj_io_t m = uj_binary(c.g, UJ_BINARY_MUL, x, w);
    gc_output(&c, uj_unary(c.g, UJ_UNARY_TANH, m));
    gc_output(&c, m);
    GC_CHECK(&c, &st);
  }
}

/* Forward values the caller already has, passed as ingrads: y = exp(x) with
 * y given (its gradient reads y), and a = exp(x) given to sin(x) * a. */
TEST(grad_given_forward_values) {
  HARNESS_SEED(564);
  uint64_t st = 564;
  for (int it = 0; it < 4; it++) {
    int64_t dims[UJ_MAX_DIMS];
    int r = (int)harness_int(&st, 0, 3);
    gc_dims(&st, r, 5, dims);
    gc_case_t c;
    gc_init(&c, "exp(x), y given");
    uj_io_t x = gc_input(&c, UJ_F64, r, dims, 1);
    gc_fill(&st, gc_t(&c, x), -2.0, 2.0);
    uj_io_t y = uj_unary(c.g, UJ_UNARY_EXP, x);
    gc_output(&c, y);
    c.given[c.ngiven++] = y;
    GC_CHECK(&c, &st);

    gc_init(&c, "sin(x) * a, a = exp(x) given");
    x = gc_input(&c, UJ_F64, r, dims, 1);
    gc_fill(&st, gc_t(&c, x), -2.0, 2.0);
    uj_io_t a = uj_unary(c.g, UJ_UNARY_EXP, x);
    gc_output(&c, uj_binary(c.g, UJ_BINARY_MUL, uj_unary(c.g, UJ_UNARY_SIN, x), a));
    c.given[c.ngiven++] = a;
    GC_CHECK(&c, &st);
  }
}

/* y = x * w + b (b 0-d): outgrads {grad(w)} only, then {grad(b), grad(x)} in
 * the reverse of the input order, then the gradient of an input no path
 * reaches (z, listed but unused by y: exactly 0). */
TEST(grad_some_outgrads) {
  HARNESS_SEED(565);
  uint64_t st = 565;
  for (int it = 0; it < 3; it++) {
    int64_t dims[UJ_MAX_DIMS];
    int r = (int)harness_int(&st, 1, 3);
    gc_dims(&st, r, 5, dims);
    for (int form = 0; form < 3; form++) {
      gc_case_t c;
      gc_init(&c, form == 0 ? "x*w+b, only grad(w)" : form == 1 ? "x*w+b, grad(b), grad(x)" : "x*w+b, grad(z)");
      uj_io_t x = gc_input(&c, UJ_F64, r, dims, 0), w = gc_input(&c, UJ_F64, r, dims, 0);
      uj_io_t b = gc_input(&c, UJ_F64, 0, dims, 0);
      uj_io_t z = form == 2 ? gc_input(&c, UJ_F64, r, dims, 0) : -1;
      for (int i = 0; i < c.nin; i++) gc_fill(&st, &c.t[i], -2.0, 2.0);
      if (form == 0) c.out[c.nout++] = gc_index(&c, w);
      if (form == 1) c.out[c.nout++] = gc_index(&c, b), c.out[c.nout++] = gc_index(&c, x);
      if (form == 2) c.out[c.nout++] = gc_index(&c, z), c.out[c.nout++] = gc_index(&c, w), c.zero[3] = 1;
      gc_output(&c, uj_binary(c.g, UJ_BINARY_ADD, uj_binary(c.g, UJ_BINARY_MUL, x, w), b));
      GC_CHECK(&c, &st);
    }
  }
}

/* ---- errors ------------------------------------------------------------------------ */

TEST(grad_errors) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_F64), w = uj_input(g, 1, UJ_F64);
  uj_io_t y = uj_binary(g, UJ_BINARY_MUL, x, w);
  uj_io_t gy = uj_grad(g, y), gx = uj_grad(g, x), gw = uj_grad(g, w);
  uj_io_t ins[] = {x, w};
  uj_program_t* p = (uj_program_t*)0x1;
  uj_program_desc_t d;

  /* an outgrad that is not a uj_grad node */
  {
    uj_io_t ing[] = {gy, x, w};
    uj_io_t og[] = {x};
    memset(&d, 0, sizeof d);
    d.input_count = 2, d.inputs = ins, d.output_count = 1, d.outputs = &y;
    d.ingrad_count = 3, d.ingrads = ing, d.outgrad_count = 1, d.outgrads = og;
    CHECK(uj_program_new(g, &d, &p) == UJ_ERR_INVALID);
    CHECK(p == (uj_program_t*)0x1);
    CHECK(strstr(uj_last_error(), "outgrads") != NULL);
  }
  /* a needed input missing from the ingrads: grad(x) = g * w needs w */
  {
    uj_io_t ing[] = {gy, x};
    uj_io_t og[] = {gx};
    memset(&d, 0, sizeof d);
    d.input_count = 2, d.inputs = ins, d.output_count = 1, d.outputs = &y;
    d.ingrad_count = 2, d.ingrads = ing, d.outgrad_count = 1, d.outgrads = og;
    CHECK(uj_program_new(g, &d, &p) == UJ_ERR_INVALID);
    CHECK(p == (uj_program_t*)0x1);
    char want[32];
    snprintf(want, sizeof want, "node %d", w);
    CHECK(strstr(uj_last_error(), want) != NULL);
    if (!strstr(uj_last_error(), want)) fprintf(stderr, "  message: %s\n", uj_last_error());
  }
  /* outgrads without any ingrad */
  {
    uj_io_t og[] = {gx};
    memset(&d, 0, sizeof d);
    d.input_count = 2, d.inputs = ins, d.output_count = 1, d.outputs = &y;
    d.outgrad_count = 1, d.outgrads = og;
    CHECK(uj_program_new(g, &d, &p) == UJ_ERR_INVALID);
  }
  /* the same gradient asked for twice */
  {
    uj_io_t ing[] = {gy, x, w};
    uj_io_t gx2 = uj_grad(g, x);
    uj_io_t og[] = {gx, gx2};
    memset(&d, 0, sizeof d);
    d.input_count = 2, d.inputs = ins, d.output_count = 1, d.outputs = &y;
    d.ingrad_count = 3, d.ingrads = ing, d.outgrad_count = 2, d.outgrads = og;
    CHECK(uj_program_new(g, &d, &p) == UJ_ERR_INVALID);
  }
  /* a run-time size mismatch of grad(y), and of an outgrad buffer: SHAPE,
   * nothing written */
  {
    uj_io_t ing[] = {gy, x, w};
    uj_io_t og[] = {gx, gw};
    memset(&d, 0, sizeof d);
    d.input_count = 2, d.inputs = ins, d.output_count = 1, d.outputs = &y;
    d.ingrad_count = 3, d.ingrads = ing, d.outgrad_count = 2, d.outgrads = og;
    p = NULL;
    CHECK(uj_program_new(g, &d, &p) == UJ_OK);
    int64_t n = 4, n5 = 5, n3 = 3;
    uj_tensor_t tx = or_tensor(UJ_F64, 1, &n), tw = or_tensor(UJ_F64, 1, &n);
    uj_tensor_t tg = or_tensor(UJ_F64, 1, &n), tg5 = or_tensor(UJ_F64, 1, &n5);
    uj_tensor_t ogx = or_tensor(UJ_F64, 1, &n), ogw = or_tensor(UJ_F64, 1, &n);
    uj_tensor_t ogw3 = or_tensor(UJ_F64, 1, &n3);
    for (int i = 0; i < 4; i++) or_set(&tx, i, i + 1), or_set(&tw, i, 2 * i - 1), or_set(&tg, i, 1);
    for (int i = 0; i < 5; i++) or_set(&tg5, i, 1);
    uj_ctx_t* ctx = uj_ctx_new();
    for (int passes = 1; passes >= 0 && p; passes--) {
      CHECK(uj_ctx_set_passes(ctx, passes) == UJ_OK);
      const uj_tensor_t* bad_in[] = {&tg5, &tx, &tw};
      uj_tensor_t* outs[] = {&ogx, &ogw};
      or_fill_sentinel(&ogx), or_fill_sentinel(&ogw), or_fill_sentinel(&ogw3);
      CHECK(uj_program_run(ctx, p, UJ_BACKWARD, bad_in, 3, NULL, 0, outs, 2) == UJ_ERR_SHAPE);
      CHECK(isnan(or_get(&ogx, 0)) && isnan(or_get(&ogw, 3)));
      const uj_tensor_t* in[] = {&tg, &tx, &tw};
      uj_tensor_t* bad_out[] = {&ogx, &ogw3};
      CHECK(uj_program_run(ctx, p, UJ_BACKWARD, in, 3, NULL, 0, bad_out, 2) == UJ_ERR_SHAPE);
      CHECK(isnan(or_get(&ogx, 0)) && isnan(or_get(&ogw3, 2)));
      /* too few ingrads */
      CHECK(uj_program_run(ctx, p, UJ_BACKWARD, in, 2, NULL, 0, outs, 2) != UJ_OK);
      /* and the right sizes work: grad(x) = w, grad(w) = x */
      CHECK(uj_program_run(ctx, p, UJ_BACKWARD, in, 3, NULL, 0, outs, 2) == UJ_OK);
      for (int i = 0; i < 4; i++) {
        CHECK(or_get(&ogx, i) == 2 * i - 1);
        CHECK(or_get(&ogw, i) == i + 1);
      }
    }
    uj_ctx_free(ctx);
    or_tensor_free(&tx), or_tensor_free(&tw), or_tensor_free(&tg), or_tensor_free(&tg5);
    or_tensor_free(&ogx), or_tensor_free(&ogw), or_tensor_free(&ogw3);
    uj_program_free(p);
  }
  /* a program without outgrads has no backward pass */
  {
    p = NULL;
    memset(&d, 0, sizeof d);
    d.input_count = 2, d.inputs = ins, d.output_count = 1, d.outputs = &y;
    CHECK(uj_program_new(g, &d, &p) == UJ_OK);
    int64_t n = 2;
    uj_tensor_t t = or_tensor(UJ_F64, 1, &n), o = or_tensor(UJ_F64, 1, &n);
    const uj_tensor_t* in[] = {&t, &t, &t};
    uj_tensor_t* outs[] = {&o, &o};
    uj_ctx_t* ctx = uj_ctx_new();
    CHECK(uj_program_run(ctx, p, UJ_BACKWARD, in, 3, NULL, 0, outs, 2) == UJ_ERR_INVALID);
    uj_ctx_free(ctx);
    or_tensor_free(&t), or_tensor_free(&o);
    uj_program_free(p);
  }
  uj_graph_free(g);
}

TEST_MAIN()
