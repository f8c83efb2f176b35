/* ir/deps.c: which tensors each block reads and writes.
 *
 * Algorithm: one walk over every access of every block (ir_walk_accesses),
 * filling two block x tensor bitmaps. A scatter-add reads and writes its
 * target; an i32 load inside an index expression (select) is a read. The
 * passes use it for liveness (dce) and for the legality of moving and
 * merging blocks (fuse). It invalidates nothing; any rewrite of the blocks
 * invalidates it, except a merge of two blocks into one, which
 * ir_deps_merge applies to the tables in place: the merged block makes
 * exactly the accesses of the two (renaming loop ids changes no tensor), so
 * its row is the union of theirs. Blocks reach their rows through an
 * index, so that the dropped block's row stays where it is: moving every
 * later row up, as the blocks move, cost a whole table per merge, and a
 * chain of n statements merged one by one moved n tables. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* The walks below run several times per pass over every expression, so
 * they skip what cannot hold a load without a call: index leaves (a
 * constant, loop, size or parameter), absent index trees, and they follow
 * an expression's last operand in a loop rather than a call. The order in
 * which fn sees the accesses is that of the plain recursion. */
static void walk_ix(ir_ix_t* ix, ir_access_fn fn, void* ctx, int level, ir_stmt_t* stmt);

static int ix_may_load(const ir_ix_t* ix) {
  return ix && ix->kind != IR_IX_CONST && ix->kind != IR_IX_LOOP && ix->kind != IR_IX_DIM && ix->kind != IR_IX_PARAM;
}

static void walk_access_indices(ir_access_t* acc, ir_access_fn fn, void* ctx, int level, ir_stmt_t* stmt) {
  for (int k = 0; k < acc->nidx; k++)
    if (ix_may_load(acc->idx[k])) walk_ix(acc->idx[k], fn, ctx, level, stmt);
}

static void walk_ix(ir_ix_t* ix, ir_access_fn fn, void* ctx, int level, ir_stmt_t* stmt) {
  while (ix_may_load(ix)) {
    if (ix->kind == IR_IX_LOAD) {
      walk_access_indices(ix->load, fn, ctx, level, stmt);
      fn(ctx, ix->load, 0, level, stmt);
      return;
    }
    walk_ix(ix->a, fn, ctx, level, stmt);
    ix = ix->b;
  }
}

void ir_walk_expr_loads(ir_expr_t* e, ir_access_fn fn, void* ctx, int level, ir_stmt_t* stmt) {
  while (e) {
    if (e->kind == IR_EX_LOAD) {
      walk_access_indices(&e->access, fn, ctx, level, stmt);
      fn(ctx, &e->access, 0, level, stmt);
    }
    if (ix_may_load(e->ix)) walk_ix(e->ix, fn, ctx, level, stmt);
    if (e->c) {
      ir_walk_expr_loads(e->a, fn, ctx, level, stmt);
      ir_walk_expr_loads(e->b, fn, ctx, level, stmt);
      e = e->c;
    } else if (e->b) {
      ir_walk_expr_loads(e->a, fn, ctx, level, stmt);
      e = e->b;
    } else {
      e = e->a;
    }
  }
}

void ir_walk_accesses(ir_block_t* b, ir_access_fn fn, void* ctx) {
  for (int k = 0; k < b->nloops; k++) {
    ir_loop_t* l = &b->loops[k];
    for (int s = 0; s < l->nstmts; s++) {
      ir_stmt_t* st = &l->stmts[s];
      ir_walk_expr_loads(st->value, fn, ctx, k, st);
      if (ix_may_load(st->arg_index)) walk_ix(st->arg_index, fn, ctx, k, st);
      if (st->kind == IR_ST_ACCUM) continue;
      walk_access_indices(&st->target, fn, ctx, k, st);
      if (st->kind == IR_ST_SCATTER_ADD) fn(ctx, &st->target, 0, k, st);
      fn(ctx, &st->target, 1, k, st);
    }
  }
}

typedef struct {
  ir_deps_t* d;
  int block;
} fill_t;

static void note_access(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)level;
  (void)stmt;
  fill_t* f = ctx;
  unsigned char* map = is_write ? f->d->writes : f->d->reads;
  map[(size_t)f->d->row[f->block] * (size_t)f->d->ntensors + (size_t)acc->tensor] = 1;
}

ir_deps_t* ir_deps_new(const ir_func_t* f) {
  ir_deps_t* d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->nblocks = f->nblocks;
  d->ntensors = f->ntensors;
  size_t n = (size_t)f->nblocks * (size_t)f->ntensors + 1;
  d->reads = calloc(n, 1);
  d->writes = calloc(n, 1);
  d->row = malloc(sizeof *d->row * ((size_t)f->nblocks + 1));
  if (!d->reads || !d->writes || !d->row) {
    ir_deps_free(d);
    return NULL;
  }
  for (int b = 0; b < f->nblocks; b++) {
    d->row[b] = b;
    fill_t fill = {d, b};
    ir_walk_accesses(&f->blocks[b], note_access, &fill);
  }
  return d;
}

void ir_deps_merge(ir_deps_t* d, int into, int from) {
  size_t n = (size_t)d->ntensors;
  unsigned char *ri = d->reads + (size_t)d->row[into] * n, *wi = d->writes + (size_t)d->row[into] * n;
  unsigned char *rf = d->reads + (size_t)d->row[from] * n, *wf = d->writes + (size_t)d->row[from] * n;
  for (size_t t = 0; t < n; t++) {
    ri[t] |= rf[t];
    wi[t] |= wf[t];
  }
  memmove(&d->row[from], &d->row[from + 1], (size_t)(d->nblocks - from - 1) * sizeof *d->row);
  d->nblocks--;
}

void ir_deps_free(ir_deps_t* d) {
  if (!d) return;
  free(d->reads);
  free(d->writes);
  free(d->row);
  free(d);
}

int ir_deps_reads(const ir_deps_t* d, int block, int tensor) {
  return d->reads[(size_t)d->row[block] * (size_t)d->ntensors + (size_t)tensor];
}

int ir_deps_writes(const ir_deps_t* d, int block, int tensor) {
  return d->writes[(size_t)d->row[block] * (size_t)d->ntensors + (size_t)tensor];
}

int ir_deps_conflict(const ir_deps_t* d, int a, int b) {
  for (int t = 0; t < d->ntensors; t++) {
    int wa = ir_deps_writes(d, a, t), wb = ir_deps_writes(d, b, t);
    if ((wa && (wb || ir_deps_reads(d, b, t))) || (wb && ir_deps_reads(d, a, t))) return 1;
  }
  return 0;
}

typedef struct {
  int in, out;
  int block;
  int bad;
  int nstores;
  const ir_stmt_t* store;
  int store_level;
  const ir_access_t* reads[64];
  const ir_stmt_t* read_stmt[64];
  int read_level[64];
  int nreads;
} alias_t;

static void alias_access(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  alias_t* a = ctx;
  if (acc->tensor != a->in && acc->tensor != a->out) return;
  if (acc->tensor == a->out && is_write) {
    a->nstores++;
    a->store = stmt;
    a->store_level = level;
    if (stmt->kind != IR_ST_STORE || acc->check_mask) a->bad = 1;
    return;
  }
  if (a->nreads == 64) {
    a->bad = 1;
    return;
  }
  if (acc->tensor == a->in && is_write) a->bad = 1;
  a->reads[a->nreads] = acc;
  a->read_stmt[a->nreads] = stmt;
  a->read_level[a->nreads++] = level;
}

static int loop_named(const ir_access_t* acc, int id) {
  for (int i = 0; i < acc->nidx; i++)
    if (acc->idx[i]->kind == IR_IX_LOOP && acc->idx[i]->id == id) return 1;
  return 0;
}

int ir_alias_safe(const ir_func_t* f, int in, int out) {
  alias_t a = {in, out, -1, 0, 0, NULL, 0, {0}, {0}, {0}, 0};
  for (int b = 0; b < f->nblocks && !a.bad; b++) {
    int before = a.nstores + a.nreads;
    ir_walk_accesses(&f->blocks[b], alias_access, &a);
    if (a.nstores + a.nreads != before) {
      if (a.block >= 0) a.bad = 1; /* touched in two blocks */
      a.block = b;
    }
  }
  if (a.bad || a.nstores != 1) return 0;
  const ir_block_t* blk = &f->blocks[a.block];
  const ir_loop_t* l = &blk->loops[a.store_level];
  const ir_access_t* target = &a.store->target;
  for (int k = 0; k <= a.store_level; k++) {
    const ir_loop_t* lk = &blk->loops[k];
    int single = lk->start->kind == IR_IX_CONST && lk->end->kind == IR_IX_CONST && lk->end->value - lk->start->value <= 1;
    if (!single && !loop_named(target, lk->id)) return 0;
  }
  int store_pos = (int)(a.store - l->stmts);
  for (int i = 0; i < a.nreads; i++) {
    if (a.read_level[i] != a.store_level) return 0;
    const ir_access_t* r = a.reads[i];
    if (r->nidx != target->nidx) return 0;
    for (int k = 0; k < r->nidx; k++)
      if (!ir_ix_equal(r->idx[k], target->idx[k])) return 0;
    int pos = (int)(a.read_stmt[i] - l->stmts);
    /* reads of `in` must come no later than the store; reads of `out` after it see what it wrote */
    if (r->tensor == in && pos > store_pos) return 0;
    if (r->tensor == out && r->tensor != in && pos <= store_pos) return 0;
  }
  return 1;
}

/* ---- run-time checks ---- */

int ir_access_has_checks(const ir_access_t* acc) {
  if (acc->check_mask) return 1;
  for (int k = 0; k < acc->nidx; k++)
    if (ir_ix_has_checks(acc->idx[k])) return 1;
  return 0;
}
int ir_ix_has_checks(const ir_ix_t* ix) {
  if (!ix) return 0;
  if (ix->kind == IR_IX_LOAD) return ir_access_has_checks(ix->load);
  return ir_ix_has_checks(ix->a) || ir_ix_has_checks(ix->b);
}
int ir_expr_has_checks(const ir_expr_t* e) {
  if (!e) return 0;
  if (e->kind == IR_EX_LOAD && ir_access_has_checks(&e->access)) return 1;
  return ir_ix_has_checks(e->ix) || ir_expr_has_checks(e->a) || ir_expr_has_checks(e->b) || ir_expr_has_checks(e->c);
}
