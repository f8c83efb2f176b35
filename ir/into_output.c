/* ir/into_output.c: a costly value staged in the output it becomes, in
 * place of a full-size temporary (softmax's e = exp(x - max), summed in one
 * block and divided by the sum in the next).
 *
 * A temporary T written once by a covering store of a value V that holds a
 * transcendental call (block A), and read only at the element a later
 * block B overwrites in output O, in the same chain, is replaced by O: A
 * stores V into O, B reads it back and writes O in place. One exp per
 * element and no memory beyond the output; the result is the same bit for
 * bit. Where O can be streamed and T is chain-local, T stays (scratch rows
 * beat staging). docs/DESIGN.md section 6 gives the full rule, why it keeps
 * results, and what it costs on CUDA. Runs after subst, before recompute
 * and dce; invalidates deps. */
#include <stdlib.h>

#include "ir.h"

/* Nodes visited looking for a transcendental call through the locals: a
 * statement list where each local reads the previous twice would take
 * exponential time unbounded; past this the answer is no. */
#define INTO_OUTPUT_MAX_NODES 256

typedef struct {
  int nwrites, nreads;
  int write_block;
  ir_stmt_t* write_stmt;
  const ir_access_t* write_acc;
  int write_level;
  int read_block;  /* the block of the reads, when they share one */
  int reads_apart; /* reads in more than one block */
} usage_t;

typedef struct {
  usage_t* use;
  int block;
} collect_t;

static void note_access(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  collect_t* c = ctx;
  usage_t* u = &c->use[acc->tensor];
  if (is_write) {
    if (u->nwrites++ == 0) u->write_block = c->block, u->write_stmt = stmt, u->write_acc = acc, u->write_level = level;
    return;
  }
  (void)stmt;
  if (u->nreads++ == 0) u->read_block = c->block;
  else if (u->read_block != c->block) u->reads_apart = 1;
}

/* A store statement `t[..] = ..` written by its target alone, covering t: each
 * index a distinct loop of block b over [0, size of that axis), nothing
 * checked at run time. */
static int covering_store(const ir_func_t* f, const ir_block_t* b, const usage_t* u) {
  return u->nwrites == 1 && u->write_acc == &u->write_stmt->target && ir_store_covers(f, b, u->write_stmt);
}

/* Whether e, with each local it loads replaced by the value last stored to
 * it before statement `before` of l, holds a transcendental call; *budget
 * counts the nodes visited down (0: give up, answering no). */
static int holds_transcendental(const ir_func_t* f, const ir_loop_t* l, int before, const ir_expr_t* e, int* budget) {
  if (!e || *budget <= 0) return 0;
  --*budget;
  if (ir_expr_op_is_transcendental(e)) return 1;
  if (e->kind == IR_EX_LOAD && f->tensors[e->access.tensor].local) {
    for (int s = before - 1; s >= 0; s--)
      if (l->stmts[s].kind == IR_ST_STORE && l->stmts[s].target.tensor == e->access.tensor)
        return holds_transcendental(f, l, s, l->stmts[s].value, budget);
    return 0;
  }
  return holds_transcendental(f, l, before, e->a, budget) || holds_transcendental(f, l, before, e->b, budget) ||
         holds_transcendental(f, l, before, e->c, budget);
}

static int same_index(const ir_access_t* a, const ir_access_t* b) {
  if (a->nidx != b->nidx) return 0;
  for (int k = 0; k < a->nidx; k++)
    if (!ir_ix_equal(a->idx[k], b->idx[k])) return 0;
  return 1;
}

/* The loads of tensor t in value expressions of e (not in indices); *off
 * counts those not at index `at` or checked at run time. */
static int loads_of(const ir_expr_t* e, int t, const ir_access_t* at, int* off) {
  if (!e) return 0;
  int here = e->kind == IR_EX_LOAD && e->access.tensor == t;
  if (here && (e->access.check_mask || !same_index(&e->access, at))) ++*off;
  return here + loads_of(e->a, t, at, off) + loads_of(e->b, t, at, off) + loads_of(e->c, t, at, off);
}

static void retarget_loads(ir_expr_t* e, int from, int to) {
  if (!e) return;
  if (e->kind == IR_EX_LOAD && e->access.tensor == from) e->access.tensor = to;
  retarget_loads(e->a, from, to);
  retarget_loads(e->b, from, to);
  retarget_loads(e->c, from, to);
}

/* The position of S: its loop (depth) and place in that loop's list. */
typedef struct {
  int level, pos;
} place_t;

static place_t place_of(const ir_block_t* b, const ir_stmt_t* S) {
  for (int k = 0; k < b->nloops; k++) {
    const ir_loop_t* l = &b->loops[k];
    /* a loop without statements may have no list at all: stmts + 0 on NULL
     * is undefined behaviour, so it is not formed */
    if (l->nstmts > 0 && S >= l->stmts && S < l->stmts + l->nstmts) return (place_t){k, (int)(S - l->stmts)};
  }
  return (place_t){-1, -1};
}

/* Whether S, at `at` in b, stores each element once: every loop around it
 * of more than one iteration is named by its target (covering_store has
 * made each index a loop). A loop it does not name would run S again over
 * an element, and a second run would read back what the first stored. */
static int stores_each_element_once(const ir_block_t* b, place_t at, const ir_access_t* target) {
  for (int k = 0; k <= at.level; k++) {
    const ir_loop_t* l = &b->loops[k];
    int once = l->start->kind == IR_IX_CONST && l->end->kind == IR_IX_CONST && l->end->value - l->start->value <= 1;
    int named = 0;
    for (int i = 0; i < target->nidx && !named; i++) named = target->idx[i]->id == l->id;
    if (!once && !named) return 0;
  }
  return 1;
}

/* Whether every read of T (nreads in all, all in block b) is a load in a
 * value expression at S's index I, unchecked, in a statement that runs
 * before S in each iteration of S's loop: one of S's loop before S or S
 * itself, or one in a loop inside it. Those reads see the value A stored;
 * a read after S would see S's result instead. */
static int reads_before_the_store(const ir_block_t* b, place_t at, const ir_stmt_t* S, int T, int nreads) {
  int seen = 0, off = 0;
  for (int k = 0; k < b->nloops; k++)
    for (int i = 0; i < b->loops[k].nstmts; i++) {
      int n = loads_of(b->loops[k].stmts[i].value, T, &S->target, &off);
      if (n && (k < at.level || (k == at.level && i > at.pos))) return 0;
      seen += n;
    }
  return seen == nreads && !off;
}

/* The temporary, among those block B reads, that the rule replaces by O,
 * or -1. */
static int staged_temporary(const ir_func_t* f, const usage_t* use, const int* chain_start, int O, place_t at) {
  const usage_t* o = &use[O];
  const ir_tensor_t* ot = &f->tensors[O];
  int B = o->write_block;
  const ir_block_t* b = &f->blocks[B];
  for (int T = 0; T < f->ntensors; T++) {
    const ir_tensor_t* tt = &f->tensors[T];
    const usage_t* u = &use[T];
    if (tt->role != IR_TENSOR_TEMP || tt->local || tt->noalloc || tt->dtype != ot->dtype || tt->ndim != ot->ndim ||
        u->nreads == 0 || u->reads_apart || u->read_block != B || u->nwrites != 1 || u->write_block >= B ||
        chain_start[u->write_block] != chain_start[B])
      continue;
    int same_sizes = 1;
    for (int k = 0; k < tt->ndim; k++) same_sizes = same_sizes && ir_ix_equal(tt->dims[k], ot->dims[k]);
    if (!same_sizes || !reads_before_the_store(b, at, o->write_stmt, T, u->nreads) ||
        !covering_store(f, &f->blocks[u->write_block], u))
      continue;
    const ir_loop_t* l = &f->blocks[u->write_block].loops[u->write_level];
    int budget = INTO_OUTPUT_MAX_NODES;
    if (holds_transcendental(f, l, (int)(u->write_stmt - l->stmts), u->write_stmt->value, &budget)) return T;
  }
  return -1;
}

/* Points every load of T in block b at O, on copies of the statements'
 * values (expression nodes may be shared); 0 on OOM. */
static int retarget_block(ir_func_t* f, ir_block_t* b, int T, int O) {
  for (int k = 0; k < b->nloops; k++)
    for (int i = 0; i < b->loops[k].nstmts; i++) {
      ir_stmt_t* st = &b->loops[k].stmts[i];
      int off = 0;
      if (!loads_of(st->value, T, &st->target, &off)) continue;
      ir_expr_t* copy = ir_expr_copy(f, st->value);
      if (!copy) return 0;
      retarget_loads(copy, T, O);
      st->value = copy;
    }
  return 1;
}

static int may_overwrite_an_input(const ir_func_t* f, int O) {
  for (int in = 0; in < f->ntensors; in++)
    if (f->tensors[in].role == IR_TENSOR_INPUT && ir_alias_safe(f, in, O)) return 1;
  return 0;
}

uj_status_t ir_pass_into_output(ir_func_t* f) {
  usage_t* use = calloc((size_t)f->ntensors + 1, sizeof *use);
  int* chain_start = malloc(((size_t)f->nblocks + 1) * sizeof *chain_start);
  if (!use || !chain_start) {
    free(use), free(chain_start);
    return rt_error(UJ_ERR_OOM, "into_output: out of memory over %d blocks and %d tensors", f->nblocks, f->ntensors);
  }
  int* chain_length = malloc(((size_t)f->nblocks + 1) * sizeof *chain_length);
  uj_status_t s = chain_length ? ir_block_chains(f, chain_start)
                               : rt_error(UJ_ERR_OOM, "into_output: out of memory over %d blocks", f->nblocks);
  if (s != UJ_OK) {
    free(use), free(chain_start), free(chain_length);
    return s;
  }
  for (int b = 0; b < f->nblocks; b++) chain_length[b] = chain_start[b];
  /* lengths to the first block of each block's chain */
  for (int b = 0, start = 0; b < f->nblocks; b++) chain_start[b] = chain_start[b] ? (start = b) : start;
  for (int b = 0; b < f->nblocks; b++) {
    collect_t c = {use, b};
    ir_walk_accesses(&f->blocks[b], note_access, &c);
  }
  for (int O = 0; O < f->ntensors; O++) {
    const usage_t* o = &use[O];
    if (f->tensors[O].role != IR_TENSOR_OUTPUT || o->nreads || !o->write_stmt ||
        !covering_store(f, &f->blocks[o->write_block], o))
      continue;
    ir_block_t* B = &f->blocks[o->write_block];
    place_t at = place_of(B, o->write_stmt);
    if (at.level < 0 || !stores_each_element_once(B, at, &o->write_stmt->target)) continue;
    int T = staged_temporary(f, use, chain_start, O, at);
    if (T < 0 || may_overwrite_an_input(f, O)) continue;
    if (ir_output_streamable(f, O, NULL) && ir_temp_chain_local(f, T, chain_length)) {
      f->tensors[T].chain_local = 1; /* a row of scratch and a streamed O: see the file's comment */
      continue;
    }
    if (!retarget_block(f, B, T, O)) {
      int block = o->write_block;
      free(use), free(chain_start), free(chain_length);
      return rt_error(UJ_ERR_OOM, "into_output: out of memory copying the statements of block %d", block);
    }
    use[T].write_stmt->target.tensor = O;
    /* O and T are now touched where the tables do not say: neither is
     * looked at again (O's write is no longer its only access, T is gone) */
  }
  free(use), free(chain_start), free(chain_length);
  return UJ_OK;
}
