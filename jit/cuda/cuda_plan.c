/* jit/cuda/cuda_plan.c: how a block's iterations are shared out among GPU
 * threads (the strategies of jit/cuda/cuda_emit.h).
 *
 * Algorithm, per block:
 *  1. Scatter-add targets the block touches in no other way are atomic
 *     candidates: adds into one element commute once they are atomicAdd.
 *  2. The flattened prefix: loops 0, 1, ... while each is parallel and its
 *     range depends on no other loop, with atomics only where they make it
 *     longer. No parallel loop: SERIAL (correct for anything, fast for
 *     nothing). REDUCE when the last flattened loop carries reductions that
 *     the loops inside only accumulate into, so that the reduction itself
 *     can be split across threads and merged. Otherwise THREADS.
 *  3. THREADS over every loop with only plain stores gets a vector path
 *     when every access is flat or loop-invariant and read-only.
 * It assumes a verified IR and invalidates nothing. */
#include <stdlib.h>

#include "../c_like.h"
#include "cuda_emit.h"

static int ix_loop_free(const ir_ix_t* ix) {
  if (!ix) return 1;
  if (ix->kind == IR_IX_LOOP || ix->kind == IR_IX_LOAD) return 0;
  return ix_loop_free(ix->a) && ix_loop_free(ix->b);
}

static int single_iteration(const ir_loop_t* l) {
  return l->start->kind == IR_IX_CONST && l->end->kind == IR_IX_CONST && l->end->value - l->start->value == 1;
}

/* ---- atomic candidates ---- */

typedef struct {
  const ir_func_t* f;
  unsigned char* scattered; /* target of a scatter-add */
  unsigned char* other;     /* touched any other way */
} scatter_scan_t;

static void scan_scatter(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)level;
  scatter_scan_t* s = ctx;
  if (stmt->kind == IR_ST_SCATTER_ADD && acc == &stmt->target) {
    if (is_write) s->scattered[acc->tensor] = 1;
    return; /* the add's own read of its target */
  }
  s->other[acc->tensor] = 1;
}

/* ---- the flattened prefix ---- */

/* Parallel: a single iteration (a constant range of length 1), or
 * iterations touching disjoint elements of every written tensor
 * (ir_loop_independent, the C engine's test too). A range must not depend
 * on another loop nor on a tensor element. A loop with statements or
 * carried variables ends the prefix: its statements run once per
 * iteration, after the loops inside. */
static int prefix_length(const ir_func_t* f, const ir_block_t* b, const unsigned char* exempt) {
  int p = 0;
  for (int k = 0; k < b->nloops; k++) {
    const ir_loop_t* l = &b->loops[k];
    if (!ix_loop_free(l->start) || !ix_loop_free(l->end)) break;
    if (!single_iteration(l) && !ir_loop_independent(f, b, k, exempt)) break;
    p = k + 1;
    if (l->nstmts || l->ncarried) break;
  }
  return p;
}

/* ---- REDUCE ---- */

static int reads_carried(const ir_expr_t* e) {
  if (!e) return 0;
  if (e->kind == IR_EX_CARRIED) return 1;
  return reads_carried(e->a) || reads_carried(e->b) || reads_carried(e->c);
}

/* Stores beside the accumulation in the split loop (softmax's exp values,
 * written while their sum is taken) are split with it when each iteration
 * writes elements of its own, so that no two threads write one element, and
 * nothing else in the block touches what the loop writes: a thread's stores
 * are not ordered before another thread's reads. */
typedef struct {
  const ir_func_t* f;
  int inner_level, inner_id;
  unsigned char* written; /* non-local tensors the split loop writes */
  int ok;
} split_scan_t;

static void note_split_write(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)stmt;
  split_scan_t* s = ctx;
  if (is_write && level == s->inner_level && !s->f->tensors[acc->tensor].local) s->written[acc->tensor] = 1;
}

static void check_split_access(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)is_write;
  (void)stmt;
  split_scan_t* s = ctx;
  if (!s->written[acc->tensor]) return;
  int own = 0;
  for (int k = 0; k < acc->nidx && !own; k++) own = acc->idx[k]->kind == IR_IX_LOOP && acc->idx[k]->id == s->inner_id;
  if (level != s->inner_level || !own) s->ok = 0;
}

static int split_stores_fit(const ir_func_t* f, const ir_block_t* b) {
  unsigned char* written = calloc((size_t)f->ntensors + 1, 1);
  if (!written) return 0;
  split_scan_t s = {f, b->nloops - 1, b->loops[b->nloops - 1].id, written, 1};
  ir_walk_accesses((ir_block_t*)b, note_split_write, &s);
  ir_walk_accesses((ir_block_t*)b, check_split_access, &s);
  free(written);
  return s.ok;
}

/* The loops inside r only accumulate into r's carried variables (and write
 * locals), all in the innermost loop, over ranges that depend on no other
 * loop. */
static int reduce_fits(const ir_func_t* f, const ir_block_t* b, int r) {
  const ir_loop_t* lr = &b->loops[r];
  if (lr->ncarried < 1 || lr->ncarried > JIT_CU_MAX_CARRIED || r + 1 >= b->nloops) return 0;
  for (int j = r + 1; j < b->nloops; j++) {
    const ir_loop_t* l = &b->loops[j];
    if (l->ncarried || !ix_loop_free(l->start) || !ix_loop_free(l->end)) return 0;
    if (j < b->nloops - 1 && l->nstmts) return 0;
  }
  const ir_loop_t* in = &b->loops[b->nloops - 1];
  int stores = 0;
  for (int s = 0; s < in->nstmts; s++) {
    const ir_stmt_t* st = &in->stmts[s];
    /* a partial result read before the merge would not be the serial one */
    if (reads_carried(st->value)) return 0;
    if (st->kind == IR_ST_ACCUM) continue;
    if (st->kind != IR_ST_STORE) return 0;
    stores |= !f->tensors[st->target.tensor].local;
  }
  /* with stores, one split loop: its index alone tells the threads' elements apart */
  return !stores || (r + 2 == b->nloops && split_stores_fit(f, b));
}

/* ---- the vector path ---- */

typedef struct {
  const ir_func_t* f;
  const ir_block_t* b;
  const unsigned char* written;
  int ok;
  int widest; /* bytes of the widest flat element */
} vector_scan_t;

int jit_cu_access_flat(const ir_func_t* f, const ir_block_t* b, const ir_access_t* acc) {
  if (acc->nidx != b->nloops) return 0;
  for (int k = 0; k < acc->nidx; k++) {
    const ir_ix_t* ix = acc->idx[k];
    if (ix->kind != IR_IX_LOOP || ix->id != b->loops[k].id) return 0;
    if (k > 0 && !ir_ix_equal(f->tensors[acc->tensor].dims[k], b->loops[k].end)) return 0;
  }
  return 1;
}

static void scan_vector_access(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)is_write;
  (void)level;
  (void)stmt;
  vector_scan_t* v = ctx;
  if (v->f->tensors[acc->tensor].local) return;
  if (jit_cu_access_flat(v->f, v->b, acc)) {
    int size = uj_dtype_size(v->f->tensors[acc->tensor].dtype);
    if (size > v->widest) v->widest = size;
    return;
  }
  int invariant = !v->written[acc->tensor];
  for (int k = 0; k < acc->nidx && invariant; k++) invariant = ix_loop_free(acc->idx[k]);
  if (!invariant) v->ok = 0;
}

/* 1 when a loop index is used as a value (it would differ per lane). */
static int uses_index_value(const ir_expr_t* e) {
  if (!e) return 0;
  if (e->kind == IR_EX_INDEX && !ix_loop_free(e->ix)) return 1;
  return uses_index_value(e->a) || uses_index_value(e->b) || uses_index_value(e->c);
}

static void note_write(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)level;
  (void)stmt;
  if (is_write) ((unsigned char*)ctx)[acc->tensor] = 1;
}

/* Lanes of the vector path (16 bytes of the widest flat element, at most
 * 4, as CUDA's vector types name lanes x, y, z, w: 4 for f32 and i32, 2 for
 * f64, 4 halves, 8 bytes, for a block of bf16/f16 tensors alone) for a
 * block whose every loop is flattened; 0 when it cannot take the vector
 * path: an access neither flat (offset = the flattened index) nor
 * loop-invariant and read-only, a check, a loop index used as a value. */
static int vector_width(const ir_func_t* f, const ir_block_t* b, unsigned char* written) {
  const ir_loop_t* in = &b->loops[b->nloops - 1];
  if (in->ncarried) return 0;
  for (int k = 0; k < b->nloops; k++)
    if (b->loops[k].start->kind != IR_IX_CONST || b->loops[k].start->value != 0) return 0;
  for (int s = 0; s < in->nstmts; s++) {
    const ir_stmt_t* st = &in->stmts[s];
    if (st->kind != IR_ST_STORE || ir_expr_has_checks(st->value) || ir_access_has_checks(&st->target) ||
        uses_index_value(st->value))
      return 0;
  }
  ir_walk_accesses((ir_block_t*)b, note_write, written);
  vector_scan_t v = {f, b, written, 1, 0};
  ir_walk_accesses((ir_block_t*)b, scan_vector_access, &v);
  if (!v.ok || !v.widest) return 0;
  return 16 / v.widest < 4 ? 16 / v.widest : 4;
}

/* ---- the plan ---- */

uj_status_t jit_cu_plan(const ir_func_t* f, const ir_block_t* b, jit_cu_plan_t* out) {
  jit_cu_plan_t p = {JIT_CU_NONE, 0, 0, 0, 0, NULL};
  *out = p;
  if (!b->nloops) return UJ_OK;
  size_t n = (size_t)f->ntensors + 1;
  unsigned char* scattered = calloc(n, 1);
  unsigned char* other = calloc(n, 1);
  unsigned char* written = calloc(n, 1);
  if (!scattered || !other || !written) {
    free(scattered), free(other), free(written);
    return rt_error(UJ_ERR_OOM, "engine cuda: out of memory allocating three tables (%zu bytes)", 3 * n);
  }
  scatter_scan_t scan = {f, scattered, other};
  ir_walk_accesses((ir_block_t*)b, scan_scatter, &scan);
  int any = 0;
  for (int t = 0; t < f->ntensors; t++) {
    scattered[t] = scattered[t] && !other[t];
    any |= scattered[t];
  }
  int plain = prefix_length(f, b, NULL);
  int with_atomics = any ? prefix_length(f, b, scattered) : plain;
  if (with_atomics > plain) {
    p.atomic = scattered;
    scattered = NULL;
  }
  p.nouter = with_atomics > plain ? with_atomics : plain;
  if (p.nouter == 0) {
    p.strategy = JIT_CU_SERIAL;
  } else if (reduce_fits(f, b, p.nouter - 1)) {
    const ir_loop_t* lr = &b->loops[p.nouter - 1];
    p.strategy = JIT_CU_REDUCE;
    p.ncarried = lr->ncarried;
    for (int c = 0; c < lr->ncarried; c++)
      p.has_arg |= ir_reduce_is_arg(lr->carried[c].op);
  } else {
    p.strategy = JIT_CU_THREADS;
    if (p.nouter == b->nloops) p.vector = vector_width(f, b, written);
  }
  free(scattered);
  free(other);
  free(written);
  *out = p;
  return UJ_OK;
}

void jit_cu_plan_release(jit_cu_plan_t* p) {
  free(p->atomic);
  p->atomic = NULL;
}
