/* ir/bounds.c: proving index expressions in range (DESIGN section 6).
 *
 * Algorithm: interval arithmetic whose end points are affine forms
 * c + k1*s1 + k2*s2 + ... over symbols s: axis sizes (DIM, known >= 0),
 * $params (sign unknown) and non-affine size sub-expressions kept whole. A
 * loop variable ranges over [lo(start), hi(end) - 1]. `+ - neg` and
 * multiplication by a constant are exact; floor division and modulo by a
 * positive constant are bounded conservatively; min/max pick an end point
 * when the two are comparable; anything else is unbounded. 0 <= idx < size
 * holds when -lo(idx) <= 0 and hi(idx) - size <= -1 (aff_le).
 *
 * Assumes loop bounds and sizes are free of tensor loads. A loop whose range
 * is empty never runs, so its variable's interval may be empty: claims about
 * it hold vacuously. */
#include "ir.h"

#define AFF_TERMS 16

typedef struct {
  int ok;      /* 0: unbounded */
  int64_t c;
  int n;
  const ir_ix_t* sym[AFF_TERMS];
  int64_t k[AFF_TERMS];
} aff_t;

typedef struct {
  aff_t lo, hi;
} range_t;

static aff_t aff_const(int64_t c) {
  aff_t a = {0};
  a.ok = 1;
  a.c = c;
  return a;
}

static aff_t aff_unbounded(void) {
  aff_t a = {0};
  return a;
}

static aff_t aff_sym(const ir_ix_t* s) {
  aff_t a = aff_const(0);
  a.n = 1;
  a.sym[0] = s;
  a.k[0] = 1;
  return a;
}

/* a + m*b, 64-bit overflow making the result unbounded. */
static aff_t aff_axpy(aff_t a, int64_t m, const aff_t* b) {
  if (!a.ok || !b->ok) return aff_unbounded();
  int64_t t;
  if (__builtin_mul_overflow(m, b->c, &t) || __builtin_add_overflow(a.c, t, &a.c)) return aff_unbounded();
  for (int j = 0; j < b->n; j++) {
    int64_t kj;
    if (__builtin_mul_overflow(m, b->k[j], &kj)) return aff_unbounded();
    int i = 0;
    while (i < a.n && !ir_ix_equal(a.sym[i], b->sym[j])) i++;
    if (i == a.n) {
      if (a.n == AFF_TERMS) return aff_unbounded();
      a.sym[a.n] = b->sym[j];
      a.k[a.n++] = 0;
    }
    if (__builtin_add_overflow(a.k[i], kj, &a.k[i])) return aff_unbounded();
  }
  int w = 0; /* drop cancelled terms */
  for (int i = 0; i < a.n; i++)
    if (a.k[i] != 0) {
      a.sym[w] = a.sym[i];
      a.k[w++] = a.k[i];
    }
  a.n = w;
  return a;
}

static aff_t aff_scale(const aff_t* a, int64_t m) { return aff_axpy(aff_const(0), m, a); }

static int ix_static(const ir_ix_t* ix) {
  if (!ix) return 1;
  if (ix->kind == IR_IX_LOOP || ix->kind == IR_IX_LOAD) return 0;
  return ix_static(ix->a) && ix_static(ix->b);
}

/* The affine form of a loop-free size expression, exact. */
static aff_t aff_of(const ir_ix_t* ix) {
  switch (ix->kind) {
    case IR_IX_CONST: return aff_const(ix->value);
    case IR_IX_DIM:
    case IR_IX_PARAM: return aff_sym(ix);
    case IR_IX_NEG: {
      aff_t a = aff_of(ix->a);
      return aff_scale(&a, -1);
    }
    case IR_IX_ADD:
    case IR_IX_SUB: {
      aff_t a = aff_of(ix->a), b = aff_of(ix->b);
      return aff_axpy(a, ix->kind == IR_IX_ADD ? 1 : -1, &b);
    }
    case IR_IX_MUL: {
      aff_t a = aff_of(ix->a), b = aff_of(ix->b);
      if (a.ok && a.n == 0) return aff_scale(&b, a.c);
      if (b.ok && b.n == 0) return aff_scale(&a, b.c);
      return aff_sym(ix);
    }
    case IR_IX_DIV: {
      aff_t a = aff_of(ix->a), b = aff_of(ix->b);
      if (a.ok && b.ok && a.n == 0 && b.n == 0) return aff_const(ir_floordiv(a.c, b.c));
      return aff_sym(ix);
    }
    default: return aff_sym(ix);
  }
}

static int is_dim(const ir_ix_t* s) { return s->kind == IR_IX_DIM; }

static int is_pos_div(const ir_ix_t* s) {
  return s->kind == IR_IX_DIV && s->b->kind == IR_IX_CONST && s->b->value > 0 && ix_static(s->a);
}

/* Proves form <= bound for every value of its symbols: every size symbol
 * has a non-positive coefficient, every symbol of unknown sign a zero one,
 * and the constant is <= bound. Sound because sizes are non-negative, and
 * complete enough for sums of loop variables against sizes that cancel
 * symbolically (the convolution's i1 + i4 over dA1 - dB1 + 1 and dB1). An
 * opaque floor(E/c) is first relaxed with c*floor(E/c) <= E and
 * >= E-c+1. */
static int aff_le(aff_t f, int64_t bound, int budget) {
  if (!f.ok) return 0;
  for (int i = 0; i < f.n; i++) {
    if (!is_pos_div(f.sym[i]) || budget <= 0) continue;
    /* c*f <= c*bound; replace c*k*floor(E/c) by its bound in terms of E */
    const ir_ix_t* d = f.sym[i];
    int64_t c = d->b->value, k = f.k[i], cb;
    aff_t rest = f, e = aff_of(d->a);
    rest.k[i] = 0;
    aff_t scaled = aff_scale(&rest, c);
    if (k < 0) e = aff_axpy(e, 1, &(aff_t){1, 1 - c, 0, {0}, {0}});
    scaled = aff_axpy(scaled, k, &e);
    if (__builtin_mul_overflow(bound, c, &cb)) return 0;
    return aff_le(scaled, cb, budget - 1);
  }
  for (int i = 0; i < f.n; i++) {
    if (is_dim(f.sym[i]) && f.k[i] <= 0) continue;
    return 0;
  }
  return f.c <= bound;
}

static range_t range_of(const ir_func_t* fn, const ir_block_t* b, int depth, const ir_ix_t* ix, int height);

static range_t exact(aff_t a) { return (range_t){a, a}; }
static range_t unbounded(void) { return (range_t){aff_unbounded(), aff_unbounded()}; }

static range_t loop_range(const ir_func_t* fn, const ir_block_t* b, int depth, int id, int height) {
  for (int k = 0; k <= depth && k < b->nloops; k++) {
    if (b->loops[k].id != id) continue;
    range_t s = range_of(fn, b, k - 1, b->loops[k].start, height + 1);
    range_t e = range_of(fn, b, k - 1, b->loops[k].end, height + 1);
    aff_t m1 = aff_const(-1);
    return (range_t){s.lo, aff_axpy(e.hi, 1, &m1)};
  }
  return unbounded();
}

/* Picks the end point that is provably the smaller (want_min) or larger. */
static aff_t pick(aff_t a, aff_t b, int want_min) {
  aff_t d = aff_axpy(a, -1, &b); /* a - b */
  if (!d.ok) return aff_unbounded();
  if (aff_le(d, 0, 4)) return want_min ? a : b;
  aff_t nd = aff_scale(&d, -1);
  if (aff_le(nd, 0, 4)) return want_min ? b : a;
  return aff_unbounded();
}

/* height: how deep in ix's tree this call is. Index expressions are built
 * by substituting one into another, so a tree can be deeper than any one
 * parsed text; past RANGE_MAX_HEIGHT the range is simply not proven (the
 * access keeps its run-time check), and the recursion stays shallow. */
#define RANGE_MAX_HEIGHT 512

static range_t range_of(const ir_func_t* fn, const ir_block_t* b, int depth, const ir_ix_t* ix, int height) {
  if (height > RANGE_MAX_HEIGHT) return unbounded();
  if (ix_static(ix)) return exact(aff_of(ix));
  switch (ix->kind) {
    case IR_IX_LOOP: return loop_range(fn, b, depth, ix->id, height);
    case IR_IX_NEG: {
      range_t a = range_of(fn, b, depth, ix->a, height + 1);
      return (range_t){aff_scale(&a.hi, -1), aff_scale(&a.lo, -1)};
    }
    case IR_IX_ADD: {
      range_t x = range_of(fn, b, depth, ix->a, height + 1), y = range_of(fn, b, depth, ix->b, height + 1);
      return (range_t){aff_axpy(x.lo, 1, &y.lo), aff_axpy(x.hi, 1, &y.hi)};
    }
    case IR_IX_SUB: {
      range_t x = range_of(fn, b, depth, ix->a, height + 1), y = range_of(fn, b, depth, ix->b, height + 1);
      return (range_t){aff_axpy(x.lo, -1, &y.hi), aff_axpy(x.hi, -1, &y.lo)};
    }
    case IR_IX_MUL: {
      range_t x = range_of(fn, b, depth, ix->a, height + 1), y = range_of(fn, b, depth, ix->b, height + 1);
      if (!(y.lo.ok && y.lo.n == 0 && y.hi.ok && y.hi.n == 0 && y.lo.c == y.hi.c)) {
        range_t t = x;
        x = y;
        y = t;
      }
      if (y.lo.ok && y.lo.n == 0 && y.hi.ok && y.hi.n == 0 && y.lo.c == y.hi.c) {
        int64_t m = y.lo.c;
        aff_t lo = aff_scale(&x.lo, m), hi = aff_scale(&x.hi, m);
        return m >= 0 ? (range_t){lo, hi} : (range_t){hi, lo};
      }
      return unbounded();
    }
    case IR_IX_DIV:
    case IR_IX_MOD: {
      if (ix->b->kind != IR_IX_CONST || ix->b->value <= 0) return unbounded();
      int64_t c = ix->b->value;
      range_t x = range_of(fn, b, depth, ix->a, height + 1);
      if (ix->kind == IR_IX_MOD) return (range_t){aff_const(0), aff_const(c - 1)};
      if (x.lo.ok && x.lo.n == 0 && x.hi.ok && x.hi.n == 0)
        return (range_t){aff_const(ir_floordiv(x.lo.c, c)), aff_const(ir_floordiv(x.hi.c, c))};
      /* 0 <= x implies 0 <= floor(x/c) <= x */
      aff_t nlo = aff_scale(&x.lo, -1);
      if (aff_le(nlo, 0, 4)) return (range_t){aff_const(0), x.hi};
      return unbounded();
    }
    case IR_IX_MIN:
    case IR_IX_MAX: {
      range_t x = range_of(fn, b, depth, ix->a, height + 1), y = range_of(fn, b, depth, ix->b, height + 1);
      int mn = ix->kind == IR_IX_MIN;
      /* min(x, y) <= x.hi and <= y.hi: either is a valid upper bound */
      aff_t lo = mn ? pick(x.lo, y.lo, 1) : (x.lo.ok ? x.lo : y.lo);
      aff_t hi = mn ? (x.hi.ok ? x.hi : y.hi) : pick(x.hi, y.hi, 0);
      if (mn && x.hi.ok && y.hi.ok) {
        aff_t p = pick(x.hi, y.hi, 1);
        if (p.ok) hi = p;
      }
      if (!mn && x.lo.ok && y.lo.ok) {
        aff_t p = pick(x.lo, y.lo, 0);
        if (p.ok) lo = p;
      }
      return (range_t){lo, hi};
    }
    default: return unbounded();
  }
}

int ir_bounds_prove(const ir_func_t* f, const ir_block_t* b, int depth, const ir_ix_t* idx,
                    const ir_ix_t* size) {
  if (!ix_static(size)) return 0;
  range_t r = range_of(f, b, depth, idx, 0);
  aff_t s = aff_of(size);
  aff_t nlo = aff_scale(&r.lo, -1);
  aff_t gap = aff_axpy(r.hi, -1, &s);
  return aff_le(nlo, 0, 4) && aff_le(gap, -1, 4);
}

/* ---- the pass ---- */

typedef struct {
  ir_func_t* f;
  ir_block_t* b;
} pass_t;

static void drop_proven(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)is_write;
  (void)stmt;
  pass_t* p = ctx;
  for (int k = 0; k < acc->nidx; k++)
    if ((acc->check_mask & (1u << k)) &&
        ir_bounds_prove(p->f, p->b, level, acc->idx[k], p->f->tensors[acc->tensor].dims[k]))
      acc->check_mask &= ~(1u << k);
}

/* The bounds pass: every checked axis that ir_bounds_prove shows in range,
 * over the loops enclosing its statement, loses its run-time check.
 * Invalidates nothing else. */
uj_status_t ir_pass_bounds(ir_func_t* f) {
  for (int b = 0; b < f->nblocks; b++) {
    pass_t p = {f, &f->blocks[b]};
    ir_walk_accesses(&f->blocks[b], drop_proven, &p);
  }
  return UJ_OK;
}
