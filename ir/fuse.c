/* ir/fuse.c: loop fusion in the manner of NNC (ccv's micro-op compiler);
 * DESIGN section 6, "fuse", states the rule and why it is legal.
 *
 * Two blocks A (earlier) and B (later) merge when their loops pair up from
 * the outermost with equal ranges (sizes tied by [=] are one canonical
 * expression), or with one side nested in the other's leading loops that
 * run once (pair_loops), and every tensor one side writes and the other
 * touches is accessed at one depth and one index naming a distinct element
 * per iteration (mergeable). The merged chain is the longer one; at each
 * paired depth it carries A's variables then B's and runs A's statements
 * then B's, B's loop ids renamed to A's. B may move left past blocks it
 * does not conflict with, else A right; repeats until no merge applies.
 * Assumes loop bounds read no tensors. Keeps its own dependence tables up
 * to date as it merges; invalidates any other. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct {
  int tensor, write, level;
  const ir_access_t* acc;
  const ir_stmt_t* stmt; /* the statement the access belongs to */
} rec_t;

typedef struct {
  rec_t* recs;
  int n, cap;
  int failed;
} recs_t;

static void collect(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  recs_t* r = ctx;
  if (!rt_grow((void**)&r->recs, &r->cap, r->n + 1, sizeof *r->recs)) {
    r->failed = 1;
    return;
  }
  r->recs[r->n++] = (rec_t){acc->tensor, is_write, level, acc, stmt};
}

/* Renaming B's paired loop ids to A's. */
typedef struct {
  ir_func_t* f;
  int n;
  int from[UJ_MAX_DIMS + 1], to[UJ_MAX_DIMS + 1];
  int shift_a, shift_b; /* depth in the merged chain = depth in A + shift_a (B: + shift_b); one is 0 */
} rename_t;

static ir_ix_t* rename_leaf(void* ctx, const ir_ix_t* leaf) {
  rename_t* r = ctx;
  if (leaf->kind == IR_IX_LOOP)
    for (int i = 0; i < r->n; i++)
      if (leaf->id == r->from[i]) return ir_ix_loop(r->f, r->to[i]);
  return (ir_ix_t*)leaf;
}

static ir_ix_t* rename_ix(rename_t* r, const ir_ix_t* ix) {
  if (!ix) return NULL;
  return ir_ix_map(&r->f->arena, ix, rename_leaf, r);
}

static int rename_access(rename_t* r, ir_access_t* dst, const ir_access_t* src) {
  *dst = *src;
  for (int k = 0; k < src->nidx; k++)
    if (!(dst->idx[k] = rename_ix(r, src->idx[k]))) return 0;
  return 1;
}

static ir_expr_t* rename_expr(rename_t* r, const ir_expr_t* e, int* ok) {
  if (!e) return NULL;
  ir_expr_t* n = rt_arena_alloc(&r->f->arena, sizeof *n);
  if (!n) {
    *ok = 0;
    return NULL;
  }
  *n = *e;
  if (e->kind == IR_EX_LOAD && !rename_access(r, &n->access, &e->access)) *ok = 0;
  if (e->ix && !(n->ix = rename_ix(r, e->ix))) *ok = 0;
  n->a = rename_expr(r, e->a, ok);
  n->b = rename_expr(r, e->b, ok);
  n->c = rename_expr(r, e->c, ok);
  return n;
}

static int same_access_index(rename_t* r, const ir_access_t* a, const ir_access_t* b, int b_is_B) {
  if (a->nidx != b->nidx) return 0;
  for (int k = 0; k < a->nidx; k++) {
    const ir_ix_t* bk = b->idx[k];
    ir_ix_t* renamed = b_is_B ? rename_ix(r, bk) : (ir_ix_t*)bk;
    if (!renamed || !ir_ix_equal(a->idx[k], renamed)) return 0;
  }
  return 1;
}

static int single_iteration(const ir_loop_t* l) {
  return l->start->kind == IR_IX_CONST && l->end->kind == IR_IX_CONST && l->end->value - l->start->value <= 1;
}

/* Distinct element per iteration of the merged loops 0..level. */
static int injective(const ir_block_t* chain, int level, const ir_access_t* acc) {
  for (int k = 0; k <= level; k++) {
    const ir_loop_t* l = &chain->loops[k];
    if (single_iteration(l)) continue;
    int seen = 0;
    for (int i = 0; i < acc->nidx && !seen; i++) seen = acc->idx[i]->kind == IR_IX_LOOP && acc->idx[i]->id == l->id;
    if (!seen) return 0;
  }
  return 1;
}

/* Leading loops of b that run exactly once. */
static int leading_once(const ir_block_t* b) {
  int n = 0;
  while (n < b->nloops && b->loops[n].start->kind == IR_IX_CONST && b->loops[n].end->kind == IR_IX_CONST &&
         b->loops[n].end->value - b->loops[n].start->value == 1)
    n++;
  return n;
}

/* Whether the loops of A and B pair up with A shifted by sa and B by sb
 * (one of them 0); fills the rename map. -1 on OOM. */
static int pair_shifted(ir_func_t* f, const ir_block_t* A, const ir_block_t* B, int sa, int sb, rename_t* r) {
  r->f = f;
  r->n = 0;
  r->shift_a = sa;
  r->shift_b = sb;
  int depth = A->nloops + sa < B->nloops + sb ? A->nloops + sa : B->nloops + sb;
  for (int k = sa > sb ? sa : sb; k < depth; k++) {
    const ir_loop_t *la = &A->loops[k - sa], *lb = &B->loops[k - sb];
    ir_ix_t* s = rename_ix(r, lb->start);
    ir_ix_t* e = rename_ix(r, lb->end);
    if (!s || !e) return -1;
    if (!ir_ix_equal(la->start, s) || !ir_ix_equal(la->end, e)) return 0;
    r->from[r->n] = lb->id;
    r->to[r->n++] = la->id;
  }
  return 1;
}

/* The loops of A and B paired from the outermost, or else with one side
 * nested inside loops of the other that run once: the fewest such loops
 * that make the rest pair. 1 paired (r filled), 0 not, -1 OOM.
 *
 * Single-iteration loops outside. A reduction over every axis is a chain
 * whose outermost loop runs once (it holds the sum and its store), and the
 * elementwise producer of its operand has no such loop, so the two never
 * pair from the outermost. The chain of one side may instead nest inside
 * the leading loops of the other that run exactly once (constant range of
 * length 1): the nested side's loop at depth k then pairs with the outer
 * side's loop at depth k + s, where s is the number of such loops it goes
 * under. Running a list of statements inside a loop that runs once is
 * running it once, so the legality argument (above mergeable) holds with
 * the nested side's depths shifted by s, and so do the checks (every access
 * to a shared tensor at the same shifted depth and index). A loop of length
 * 0 or of a length not known here is never gone under: the nested side's
 * statements would run a different number of times. */
static int pair_loops(ir_func_t* f, const ir_block_t* A, const ir_block_t* B, rename_t* r) {
  int p = pair_shifted(f, A, B, 0, 0, r);
  if (p != 0) return p;
  int once_a = leading_once(A), once_b = leading_once(B);
  for (int s = 1; s <= once_b && s < B->nloops; s++)
    if ((p = pair_shifted(f, A, B, s, 0, r)) != 0) return p;
  for (int s = 1; s <= once_a && s < A->nloops; s++)
    if ((p = pair_shifted(f, A, B, 0, s, r)) != 0) return p;
  return 0;
}

/* The search's state, kept in step with f->blocks: the dependence tables
 * and each block's accesses. A merge changes two blocks into one, so only
 * that block's records are made (from the two it came from) and the tables
 * are updated in place (ir_deps_merge); rebuilding them all after every
 * merge was most of the pass's time. */
typedef struct {
  ir_func_t* f;
  ir_deps_t* d;
  recs_t* recs; /* [block] */
  int* seen;    /* [tensor]: == gen when mergeable has looked at it */
  int gen;
} fuse_t;

/* Whether blocks ia and ib (A before B) may merge; fills the rename map.
 * -1 on OOM.
 *
 * Why that is legal. Statements at one depth keep their A-before-B order
 * within an iteration, and statements at different depths keep the loop
 * nest's own order (inner chain first), so the only thing that changes is
 * that B's work for an element now happens right after A's work for that
 * element instead of after all of A. That is harmless for every tensor that
 * at most one side writes and neither reads from the other. For a tensor
 * that one side writes and the other touches (read after write, write after
 * read, write after write), the merge is allowed only when every access to
 * it, in both blocks, is at the same depth, at the identical index, and
 * that index names a distinct element per iteration of the loops enclosing
 * it (each such loop of more than one iteration appears as a bare index):
 * then both sides touch element e in the same iteration and nowhere else,
 * in the original order. Otherwise (a consumer reading the producer at a
 * different index, a reduction result read inside the reduced loop, a
 * scatter) the merge is refused. In particular loops that hold statements
 * or carried variables (pivots) keep their relative order.
 *
 * A tensor needs the same-element check when B touches it and either side
 * writes it, which the dependence tables answer per tensor; and the check
 * passes for one of A's accesses to it exactly when it passes for any other
 * (every access must equal that one), so each tensor is checked once. */
static int mergeable(fuse_t* F, int ia, int ib, rename_t* r) {
  ir_func_t* f = F->f;
  const ir_deps_t* d = F->d;
  const ir_block_t *A = &f->blocks[ia], *B = &f->blocks[ib];
  const recs_t *ra = &F->recs[ia], *rb = &F->recs[ib];
  int paired = pair_loops(f, A, B, r);
  if (paired <= 0) return paired;
  int ok = 1;
  F->gen++;
  for (int i = 0; i < ra->n && ok == 1; i++) {
    const rec_t* x = &ra->recs[i];
    int t = x->tensor;
    if (F->seen[t] == F->gen) continue;
    F->seen[t] = F->gen;
    int b_touches = ir_deps_reads(d, ib, t) || ir_deps_writes(d, ib, t);
    if (!b_touches || !(ir_deps_writes(d, ia, t) || ir_deps_writes(d, ib, t))) continue;
    /* every access to this tensor in both blocks must be the same element */
    const ir_access_t* ref = x->acc;
    int level = x->level + r->shift_a; /* depths compared in the merged chain */
    /* ref is A's access, so the loops enclosing it are A's (paired or its own) */
    if (!injective(A, x->level, ref)) ok = 0;
    for (int j = 0; j < ra->n && ok == 1; j++)
      if (ra->recs[j].tensor == t &&
          (ra->recs[j].level + r->shift_a != level || !same_access_index(r, ref, ra->recs[j].acc, 0)))
        ok = 0;
    for (int j = 0; j < rb->n && ok == 1; j++)
      if (rb->recs[j].tensor == t &&
          (rb->recs[j].level + r->shift_b != level || !same_access_index(r, ref, rb->recs[j].acc, 1)))
        ok = 0;
  }
  return ok;
}

static int append_items(ir_func_t* f, void** items, int* n, int* cap, const void* more, int count, size_t size) {
  if (!count) return 1;
  if (!rt_arena_grow(&f->arena, items, cap, *n + count, size)) return 0;
  memcpy((char*)*items + (size_t)*n * size, more, (size_t)count * size);
  *n += count;
  return 1;
}

/* Builds the merged chain into *out: at each depth A's loop where A has
 * one (depths shifted as r says), else B's. At
 * each paired depth the chain takes over A's arrays and appends B's items
 * (A is replaced by the chain, and no other loop shares them): copying A's
 * statements into fresh arrays made a chain of n statements, merged one
 * at a time, cost n^2 statements of memory. */
static int merge_blocks(ir_func_t* f, const ir_block_t* A, const ir_block_t* B, rename_t* r, ir_block_t* out) {
  int sa = r->shift_a, sb = r->shift_b;
  int nloops = A->nloops + sa > B->nloops + sb ? A->nloops + sa : B->nloops + sb;
  memset(out, 0, sizeof *out);
  out->nloops = out->loop_cap = nloops;
  out->loops = rt_arena_alloc(&f->arena, (size_t)nloops * sizeof *out->loops);
  if (!out->loops) return 0;
  for (int k = 0; k < nloops; k++) {
    ir_loop_t* l = &out->loops[k];
    const ir_loop_t* la = k >= sa && k - sa < A->nloops ? &A->loops[k - sa] : NULL;
    const ir_loop_t* lb = k >= sb && k - sb < B->nloops ? &B->loops[k - sb] : NULL;
    memset(l, 0, sizeof *l);
    l->id = la ? la->id : lb->id;
    l->start = la ? la->start : rename_ix(r, lb->start);
    l->end = la ? la->end : rename_ix(r, lb->end);
    if (!l->start || !l->end) return 0;
    if (la) {
      l->carried = la->carried, l->ncarried = la->ncarried, l->carried_cap = la->carried_cap;
      l->stmts = la->stmts, l->nstmts = la->nstmts, l->stmt_cap = la->stmt_cap;
    }
    if (!lb) continue;
    if (!append_items(f, (void**)&l->carried, &l->ncarried, &l->carried_cap, lb->carried, lb->ncarried,
                      sizeof *lb->carried))
      return 0;
    for (int s = 0; s < lb->nstmts; s++) {
      ir_stmt_t st = lb->stmts[s];
      int ok = 1;
      if (st.kind != IR_ST_ACCUM && !rename_access(r, &st.target, &lb->stmts[s].target)) return 0;
      st.value = rename_expr(r, lb->stmts[s].value, &ok);
      if (lb->stmts[s].arg_index && !(st.arg_index = rename_ix(r, lb->stmts[s].arg_index))) ok = 0;
      if (!ok || !append_items(f, (void**)&l->stmts, &l->nstmts, &l->stmt_cap, &st, 1, sizeof st)) return 0;
    }
  }
  return 1;
}

static int block_records(ir_block_t* b, recs_t* out) {
  *out = (recs_t){0};
  ir_walk_accesses(b, collect, out);
  return !out->failed;
}

/* The records of chain, the merge of A (records ra) and B, in the order of
 * a walk over chain: per level, A's statements then B's. A's are ra with
 * the statements (and the targets, which live in them) moved to where
 * chain holds its copies; only B's renamed statements are walked. */
static int chain_records(const ir_block_t* A, const recs_t* ra, const ir_block_t* chain, int shift_a, recs_t* out) {
  *out = (recs_t){0};
  ir_loop_t* view = malloc((size_t)chain->nloops * sizeof *view + 1);
  if (!view) return 0;
  for (int k = 0; k < chain->nloops; k++) {
    int ka = k - shift_a;
    int na = ka >= 0 && ka < A->nloops ? A->loops[ka].nstmts : 0;
    view[k] = chain->loops[k];
    /* a loop with no statements of A's (an outer loop of a nest) may have
     * no array at all, and NULL + 0 is undefined */
    if (na > 0) {
      view[k].stmts += na;
      view[k].nstmts -= na;
    }
  }
  ir_block_t b_part = {chain->nloops, chain->nloops, view};
  recs_t rb = {0};
  ir_walk_accesses(&b_part, collect, &rb);
  free(view);
  out->cap = ra->n + rb.n;
  out->recs = malloc((size_t)out->cap * sizeof *out->recs + 1);
  if (rb.failed || !out->recs) {
    free(rb.recs);
    return 0;
  }
  int ia = 0, ib = 0;
  for (int k = 0; k < chain->nloops; k++) {
    for (; ia < ra->n && ra->recs[ia].level + shift_a == k; ia++) {
      rec_t x = ra->recs[ia];
      const ir_stmt_t* moved = &chain->loops[k].stmts[x.stmt - A->loops[k - shift_a].stmts];
      if (x.acc == &x.stmt->target) x.acc = &moved->target;
      x.stmt = moved;
      x.level = k;
      out->recs[out->n++] = x;
    }
    for (; ib < rb.n && rb.recs[ib].level == k; ib++) out->recs[out->n++] = rb.recs[ib];
  }
  free(rb.recs);
  return 1;
}

/* Blocks keep and drop were merged into chain (records in *recs): chain
 * goes at keep and drop is removed. */
static void merged(fuse_t* F, int keep, int drop, const ir_block_t* chain, const recs_t* recs) {
  ir_func_t* f = F->f;
  f->blocks[keep] = *chain;
  free(F->recs[keep].recs);
  free(F->recs[drop].recs);
  F->recs[keep] = *recs;
  memmove(&F->recs[drop], &F->recs[drop + 1], (size_t)(f->nblocks - drop - 1) * sizeof *F->recs);
  memmove(&f->blocks[drop], &f->blocks[drop + 1], (size_t)(f->nblocks - drop - 1) * sizeof *f->blocks);
  f->nblocks--;
  ir_deps_merge(F->d, keep, drop);
}

/* One merge, the first in the order (j ascending, then i descending from
 * j - 1) that applies, looking no further left than j = from: 1 merged
 * (*at is the smaller of the two indices), 0 none, -1 OOM. Blocks in
 * between: B may move left past a block it does not conflict with; if one
 * in between forbids that, A may instead move right past the blocks in
 * between (merge to the right). */
static int fuse_once(fuse_t* F, int from, int* at) {
  ir_func_t* f = F->f;
  ir_deps_t* d = F->d;
  for (int j = from > 1 ? from : 1; j < f->nblocks; j++) {
    for (int i = j - 1; i >= 0; i--) {
      int left_ok = 1, right_ok = 1;
      for (int m = i + 1; m < j; m++) {
        if (ir_deps_conflict(d, m, j)) left_ok = 0;
        if (ir_deps_conflict(d, i, m)) right_ok = 0;
      }
      if (!left_ok && !right_ok) continue;
      rename_t r;
      int can = mergeable(F, i, j, &r);
      if (can < 0) return -1;
      if (can == 0) continue;
      ir_block_t chain;
      recs_t recs;
      if (!merge_blocks(f, &f->blocks[i], &f->blocks[j], &r, &chain) ||
          !chain_records(&f->blocks[i], &F->recs[i], &chain, r.shift_a, &recs))
        return -1;
      merged(F, left_ok ? i : j, left_ok ? j : i, &chain, &recs);
      *at = i;
      return 1;
    }
  }
  return 0;
}

/* Whether a pair may merge depends only on the blocks from its left to its
 * right one. After a merge of (i, j), the pairs left of i are as they were,
 * and they all failed (the search took the first pair that applied), so the
 * next search starts at i: the result is that of restarting from the
 * first pair every time. */
uj_status_t ir_pass_fuse(ir_func_t* f) {
  fuse_t F = {f, ir_deps_new(f), calloc((size_t)f->nblocks + 1, sizeof *F.recs),
              calloc((size_t)f->ntensors + 1, sizeof *F.seen), 0};
  int r = F.d && F.recs && F.seen ? 1 : -1;
  for (int b = 0; b < f->nblocks && r > 0; b++)
    if (!block_records(&f->blocks[b], &F.recs[b])) r = -1;
  for (int from = 1; r > 0;) r = fuse_once(&F, from, &from);
  for (int b = 0; F.recs && b < f->nblocks; b++) free(F.recs[b].recs);
  free(F.recs);
  free(F.seen);
  ir_deps_free(F.d);
  return r < 0 ? rt_error(UJ_ERR_OOM, "fuse: out of memory allocating the access records of %d blocks", f->nblocks) : UJ_OK;
}
