/* ir/recompute.c: recomputation of cheap elementwise values in place of a
 * full-size temporary (DESIGN section 6, "into_output and recompute").
 *
 * The case: an elementwise value read by a reduction and by a later
 * consumer, such as layernorm's centred d = x - mean (squared and summed,
 * then scaled). Fusion puts the value beside the reduction, but the consumer
 * needs the finished reduction and so runs in a later block, which reads the
 * value back from a temporary as large as x: written once, read once.
 * Computing it again from what it was computed from (x and the per-row
 * mean) reads x once instead. A temporary one covering store writes and
 * only streaming loads in later blocks read is recomputed in each reader
 * when that moves strictly fewer bytes (try_tensor states the rule); dce
 * then drops the store. Runs after fuse and subst (so that the consumers
 * fusion could serve have been served, and V is the forwarded expression),
 * before dce. Invalidates deps. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define RECOMPUTE_MAX_NODES 24
#define RECOMPUTE_MAX_COSTLY 1

typedef struct {
  int block, level;
  ir_access_t* acc;
  int is_write;
  ir_stmt_t* stmt;
  int tensor, order;
} access_t;

typedef struct {
  int block, failed;
  access_t* list;
  int n, cap;
} accesses_t;

static void collect(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  accesses_t* a = ctx;
  if (!rt_grow((void**)&a->list, &a->cap, a->n + 1, sizeof *a->list)) {
    a->failed = 1;
    return;
  }
  a->list[a->n++] = (access_t){a->block, level, acc, is_write, stmt, acc->tensor, 0};
}


static int runs_once(const ir_loop_t* l) {
  return l->start->kind == IR_IX_CONST && l->end->kind == IR_IX_CONST && l->end->value - l->start->value <= 1;
}

/* The store covers T (ir_store_covers): index k is loop ids[k] of X. */
static int covering_store(const ir_func_t* f, const ir_block_t* X, const ir_stmt_t* s, int* ids) {
  if (!ir_store_covers(f, X, s)) return 0;
  for (int k = 0; k < s->target.nidx; k++) ids[k] = s->target.idx[k]->id;
  return 1;
}

/* ---- the value, with locals expanded ---- */

typedef struct {
  ir_func_t* f;
  const ir_loop_t* loop; /* the store's statement list */
  int before;            /* locals are defined before this statement */
  int nodes, costly, ok;
} expand_t;

/* A copy of e with every local load replaced by (a copy of) the value last
 * stored to the local before statement `before`; ok = 0 when that fails or
 * the limits are passed. */
static ir_expr_t* expand(expand_t* x, const ir_expr_t* e, int before) {
  if (!e || !x->ok) return NULL;
  if (++x->nodes > RECOMPUTE_MAX_NODES || (x->costly += ir_expr_op_is_transcendental(e)) > RECOMPUTE_MAX_COSTLY ||
      e->kind == IR_EX_CARRIED) {
    x->ok = 0;
    return NULL;
  }
  if (e->kind == IR_EX_LOAD && x->f->tensors[e->access.tensor].local) {
    for (int s = before - 1; s >= 0; s--) {
      const ir_stmt_t* st = &x->loop->stmts[s];
      if (st->kind == IR_ST_STORE && st->target.tensor == e->access.tensor) {
        x->nodes--; /* the load is replaced, not kept */
        return expand(x, st->value, s);
      }
    }
    x->ok = 0;
    return NULL;
  }
  ir_expr_t* n = rt_arena_alloc(&x->f->arena, sizeof *n);
  if (!n) {
    x->ok = 0;
    return NULL;
  }
  *n = *e;
  n->a = e->a ? expand(x, e->a, before) : NULL;
  n->b = e->b ? expand(x, e->b, before) : NULL;
  n->c = e->c ? expand(x, e->c, before) : NULL;
  return x->ok ? n : NULL;
}

/* Whether an index tree uses only the loops in ids[0..n). */
static int ix_uses_only(const ir_ix_t* ix, const int* ids, int n) {
  if (!ix) return 1;
  if (ix->kind == IR_IX_LOOP) {
    for (int k = 0; k < n; k++)
      if (ids[k] == ix->id) return 1;
    return 0;
  }
  if (ix->kind == IR_IX_LOAD) {
    for (int k = 0; k < ix->load->nidx; k++)
      if (!ix_uses_only(ix->load->idx[k], ids, n)) return 0;
    return 1;
  }
  return ix_uses_only(ix->a, ids, n) && ix_uses_only(ix->b, ids, n);
}

static int expr_uses_only(const ir_expr_t* e, const int* ids, int n) {
  if (!e) return 1;
  if (e->kind == IR_EX_LOAD)
    for (int k = 0; k < e->access.nidx; k++)
      if (!ix_uses_only(e->access.idx[k], ids, n)) return 0;
  return ix_uses_only(e->ix, ids, n) && expr_uses_only(e->a, ids, n) && expr_uses_only(e->b, ids, n) &&
         expr_uses_only(e->c, ids, n);
}

/* ---- renaming X's loops to a reader's index ---- */

typedef struct {
  ir_func_t* f;
  const int* ids;
  ir_ix_t* const* to; /* the reader's index of T, axis by axis */
  int n;
} rename_t;

static ir_ix_t* rename_leaf(void* ctx, const ir_ix_t* leaf) {
  rename_t* r = ctx;
  if (leaf->kind == IR_IX_LOOP)
    for (int k = 0; k < r->n; k++)
      if (leaf->id == r->ids[k]) return r->to[k];
  return (ir_ix_t*)leaf;
}

static int rename_access(rename_t* r, ir_access_t* acc) {
  for (int k = 0; k < acc->nidx; k++)
    if (!(acc->idx[k] = ir_ix_map(&r->f->arena, acc->idx[k], rename_leaf, r))) return 0;
  return 1;
}

/* A copy of V for one reader; NULL on OOM. */
static ir_expr_t* renamed(rename_t* r, const ir_expr_t* V) {
  ir_expr_t* n = rt_arena_alloc(&r->f->arena, sizeof *n);
  if (!n) return NULL;
  *n = *V;
  if (V->kind == IR_EX_LOAD && !rename_access(r, &n->access)) return NULL;
  if (V->ix && !(n->ix = ir_ix_map(&r->f->arena, V->ix, rename_leaf, r))) return NULL;
  if (V->a && !(n->a = renamed(r, V->a))) return NULL;
  if (V->b && !(n->b = renamed(r, V->b))) return NULL;
  if (V->c && !(n->c = renamed(r, V->c))) return NULL;
  return n;
}

/* ---- bytes ---- */

static int ix_mentions(const ir_ix_t* ix, int id) {
  if (!ix) return 0;
  if (ix->kind == IR_IX_LOOP) return ix->id == id;
  if (ix->kind == IR_IX_LOAD) {
    for (int k = 0; k < ix->load->nidx; k++)
      if (ix_mentions(ix->load->idx[k], id)) return 1;
    return 0;
  }
  return ix_mentions(ix->a, id) || ix_mentions(ix->b, id);
}

/* Whether acc, in block b at depth level, changes element with every loop
 * of more than one iteration around it (it streams). */
static int streams(const ir_block_t* b, int level, const ir_access_t* acc) {
  for (int k = 0; k <= level && k < b->nloops; k++) {
    const ir_loop_t* l = &b->loops[k];
    if (runs_once(l)) continue;
    int seen = 0;
    for (int i = 0; i < acc->nidx && !seen; i++) seen = ix_mentions(acc->idx[i], l->id);
    if (!seen) return 0;
  }
  return 1;
}

typedef struct {
  const ir_func_t* f;
  const ir_block_t* b;
  int level;
  long bytes;
} stream_count_t;

static void count_stream(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)is_write;
  (void)level;
  (void)stmt;
  stream_count_t* c = ctx;
  if (streams(c->b, c->level, acc)) c->bytes += uj_dtype_size(c->f->tensors[acc->tensor].dtype);
}

typedef struct {
  const ir_deps_t* d;
  int from, to, clobbered;
} clobber_t;

static void check_clobber(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)is_write;
  (void)level;
  (void)stmt;
  clobber_t* c = ctx;
  for (int b = c->from; b <= c->to && !c->clobbered; b++) c->clobbered = ir_deps_writes(c->d, b, acc->tensor);
}

static void mark_touched(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)is_write;
  (void)level;
  (void)stmt;
  ((unsigned char*)ctx)[acc->tensor] = 1;
}

/* ---- replacing the reads ---- */

typedef struct {
  ir_func_t* f;
  int tensor;
  const ir_expr_t* V;
  const int* ids;
  int n, failed;
} replace_t;

static void replace_in(replace_t* R, ir_expr_t* e) {
  if (!e || R->failed) return;
  if (e->kind == IR_EX_LOAD && e->access.tensor == R->tensor) {
    rename_t r = {R->f, R->ids, e->access.idx, R->n};
    ir_expr_t* v = renamed(&r, R->V);
    if (!v) {
      R->failed = 1;
      return;
    }
    *e = *v;
    return;
  }
  replace_in(R, e->a);
  replace_in(R, e->b);
  replace_in(R, e->c);
}

/* Counts the loads of tensor t in value expressions (not in indices). */
static int value_loads(const ir_expr_t* e, int t) {
  if (!e) return 0;
  return (e->kind == IR_EX_LOAD && e->access.tensor == t) + value_loads(e->a, t) + value_loads(e->b, t) +
         value_loads(e->c, t);
}

/* Recomputes T, whose accesses are a.list[0..a.n) in block order, when the
 * rule says so: 1 done (touched[] marks the tensors V loads: their lists
 * are now short of the loads V brought into the readers), 0 not, -1 OOM.
 *
 * The rule. A temporary T (not an output, not a local) qualifies when
 *  - it is written by exactly one statement, an unchecked store `T[i..] =
 *    V` in block X, each index a distinct loop of X whose range is [0, the
 *    size of that axis), so the store covers every element of T once;
 *  - V, with the locals it reads replaced by their definitions earlier in
 *    the same statement list, reads no carried variable, has no run-time
 *    checked access, uses only loops that index T, is at most
 *    RECOMPUTE_MAX_NODES nodes with at most RECOMPUTE_MAX_COSTLY
 *    transcendental calls (exp, log, tanh, sigmoid, sin, cos, pow), and
 *    reads only tensors that no block from X to the last reader writes;
 *  - every other access to T is an unchecked load in a value expression of
 *    a block after X, and streams (below): a read that repeats elements,
 *    a broadcast, would evaluate V once per repeat instead of once per
 *    element of T, more work than the bytes are worth (layernorm's per-row
 *    rsqrt stays in its temporary).
 * Bytes moved are counted in "streams": an access whose index names every
 * loop of more than one iteration around its statement streams its tensor
 * (one element per iteration, T's size in all); any other access repeats
 * elements and is taken to hit the cache (a per-row max, a weight vector).
 * Keeping T moves its write plus each streamed read of T; recomputing moves,
 * for each reader, the streams V's loads become at the reader's index. T is
 * recomputed when that is strictly fewer bytes: every read of T is replaced
 * by V with X's loops renamed to the reader's indices. Softmax's e = exp(x -
 * max): keeping moves 4 + 4 bytes per element (write e, read e),
 * recomputing 4 (read x): e is recomputed. A value of two streamed inputs
 * read once (a * b) is kept: 8 bytes either way. (Softmax usually does not
 * get here: ir/into_output.c, which runs first, stores a value with a
 * transcendental call in the output its reader writes, so that exp runs
 * once per element; what it leaves, such as a softmax whose output may be
 * written over an input, is recomputed here.) A temporary into_output left
 * as chain-local scratch is kept: it moves no bytes. */
static int try_tensor(ir_func_t* f, const ir_deps_t* d, int T, accesses_t a, unsigned char* touched) {
  const ir_tensor_t* tt = &f->tensors[T];
  /* chain_local set here is ir/into_output.c's choice of a row of scratch
   * with a streamed output over staging T in that output: T then costs no
   * memory traffic, and recomputing it would only repeat its compute */
  if (tt->role != IR_TENSOR_TEMP || tt->local || tt->noalloc || tt->chain_local || touched[T]) return 0;
  int result = 0;
  const access_t* w = NULL;
  int nwrites = 0, last_reader = -1, ok = a.n > 1;
  for (int i = 0; i < a.n && ok; i++)
    if (a.list[i].is_write) w = &a.list[i], nwrites++;
  ok = ok && nwrites == 1 && w->stmt->kind == IR_ST_STORE && w->acc == &w->stmt->target;
  for (int i = 0; i < a.n && ok; i++) {
    const access_t* r = &a.list[i];
    if (r->is_write) continue;
    ok = r->block > w->block && !r->acc->check_mask;
    if (r->block > last_reader) last_reader = r->block;
  }
  int ids[UJ_MAX_DIMS];
  const ir_block_t* X = ok ? &f->blocks[w->block] : NULL;
  ok = ok && covering_store(f, X, w->stmt, ids); /* unchecked, its value too */
  ir_expr_t* V = NULL;
  if (ok) {
    const ir_loop_t* l = &X->loops[w->level];
    expand_t x = {f, l, (int)(w->stmt - l->stmts), 0, 0, 1};
    V = expand(&x, w->stmt->value, x.before);
    ok = x.ok && V && expr_uses_only(V, ids, tt->ndim) && !ir_expr_has_checks(V);
  }
  if (ok) {
    clobber_t c = {d, w->block, last_reader, 0};
    ir_walk_expr_loads(V, check_clobber, &c, 0, NULL);
    ok = !c.clobbered;
  }
  /* every read a load in a value expression, and the bytes of each side */
  long keep = uj_dtype_size(tt->dtype), recompute = 0;
  for (int i = 0; i < a.n && ok; i++) {
    const access_t* r = &a.list[i];
    if (r->is_write) continue;
    const ir_block_t* Y = &f->blocks[r->block];
    /* a read that repeats elements (a broadcast) would compute V once per
     * repeat: that costs more than the bytes it saves */
    ok = value_loads(r->stmt->value, T) > 0 && streams(Y, r->level, r->acc);
    keep += uj_dtype_size(tt->dtype);
    rename_t rn = {f, ids, r->acc->idx, tt->ndim};
    ir_expr_t* v = ok ? renamed(&rn, V) : NULL;
    if (ok && !v) result = -1, ok = 0;
    stream_count_t sc = {f, Y, r->level, 0};
    if (v) ir_walk_expr_loads(v, count_stream, &sc, r->level, r->stmt);
    recompute += sc.bytes;
  }
  /* all loads of T in value expressions: a read inside an index would be left */
  int counted = 0, reads = 0;
  for (int i = 0; i < a.n && ok; i++)
    if (!a.list[i].is_write) {
      reads++;
      int seen = 0;
      for (int j = 0; j < i; j++) seen |= !a.list[j].is_write && a.list[j].stmt == a.list[i].stmt;
      if (!seen) counted += value_loads(a.list[i].stmt->value, T);
    }
  ok = ok && counted == reads && recompute < keep;
  for (int i = 0; i < a.n && ok; i++) {
    if (a.list[i].is_write) continue;
    int seen = 0;
    for (int j = 0; j < i; j++) seen |= !a.list[j].is_write && a.list[j].stmt == a.list[i].stmt;
    if (seen) continue;
    replace_t R = {f, T, V, ids, tt->ndim, 0};
    replace_in(&R, a.list[i].stmt->value);
    if (R.failed) result = -1, ok = 0;
  }
  if (ok) {
    ir_walk_expr_loads(V, mark_touched, touched, 0, NULL);
    result = 1;
  }
  return result;
}

static int by_tensor(const void* x, const void* y) {
  const access_t *a = x, *b = y;
  if (a->tensor != b->tensor) return a->tensor < b->tensor ? -1 : 1;
  return a->order < b->order ? -1 : a->order > b->order;
}

uj_status_t ir_pass_recompute(ir_func_t* f) {
  accesses_t a = {0, 0, NULL, 0, 0};
  for (int b = 0; b < f->nblocks && !a.failed; b++) a.block = b, ir_walk_accesses(&f->blocks[b], collect, &a);
  /* ties in block keep the walk's order: qsort is not stable, so the
   * position breaks them */
  for (int i = 0; i < a.n; i++) a.list[i].order = i;
  if (a.n) qsort(a.list, (size_t)a.n, sizeof *a.list, by_tensor);
  ir_deps_t* d = a.failed ? NULL : ir_deps_new(f);
  unsigned char* touched = calloc((size_t)f->ntensors + 1, 1);
  int r = d && touched ? 0 : -1;
  for (int i = 0; i < a.n && r >= 0;) {
    int j = i;
    while (j < a.n && a.list[j].tensor == a.list[i].tensor) j++;
    accesses_t one = {0, 0, a.list + i, j - i, j - i};
    r = try_tensor(f, d, a.list[i].tensor, one, touched);
    i = j;
  }
  free(a.list);
  free(touched);
  ir_deps_free(d);
  return r < 0 ? rt_error(UJ_ERR_OOM, "recompute: out of memory over %d blocks and %d tensors", f->nblocks, f->ntensors)
               : UJ_OK;
}
