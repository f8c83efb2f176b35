/* jit/c/c_reduce.c: the C engine's reduction loops in lanes.
 *
 * A reduction loop adds into one variable per iteration, a dependence
 * carried from each iteration to the next: the C compiler may not reorder
 * floating-point additions, so `c += x[i]` runs one add at a time, each
 * waiting for the last, never in vector registers, and the NaN-aware max
 * becomes a compare and a branch per element. The innermost loop of a block
 * whose statements accumulate into carried variables of an outer loop
 * (ir_lanes_fit, ir/lanes.c) is therefore printed in lanes: each carried
 * variable gets L partial results, iteration j of a group of L accumulates
 * into lane j, the lanes fold into it as a balanced tree in a fixed order,
 * and the rest runs straight into it. Only the order of the reduction's own
 * operations changes, and it depends on the trip count alone, never on
 * threads. In a chain's later blocks the lane loops also prefetch the next
 * chunk's rows (emit_prefetch; DESIGN section 7, "A runner"). */
#include <stdio.h>
#include <stdlib.h>

#include "c_group.h"
#include "c_reduce.h"

/* The lane type of a carried variable: i32 sums and products wrap in uint32_t. */
static const char* lane_type(const ir_carried_t* c) {
  if (c->dtype == UJ_I32 && ir_reduce_is_arithmetic(c->op))
    return "uint32_t";
  return jit_cx_ctype(c->dtype);
}

/* Each carried variable accumulated in loop k once, in statement order. */
static int first_accum(const ir_loop_t* l, int s) {
  for (int j = 0; j < s; j++)
    if (l->stmts[j].kind == IR_ST_ACCUM && l->stmts[j].carried == l->stmts[s].carried) return 0;
  return l->stmts[s].kind == IR_ST_ACCUM;
}

static void declare_lanes(jit_cx_t* E, const ir_carried_t* c, int L, int depth) {
  jit_cx_indent(E, depth);
  rt_buf_printf(E->out, "%s c%d_l[%d]; ", lane_type(c), c->id, L);
  if (ir_reduce_is_arg(c->op)) rt_buf_printf(E->out, "uj_i64 c%da_l[%d]; ", c->id, L);
  rt_buf_printf(E->out, "for (int uj_l = 0; uj_l < %d; uj_l++) { c%d_l[uj_l] = ", L, c->id);
  jit_cx_identity(E, c->op, c->dtype);
  rt_buf_printf(E->out, ";");
  if (ir_reduce_is_arg(c->op)) rt_buf_printf(E->out, " c%da_l[uj_l] = INT64_MAX;", c->id);
  rt_buf_printf(E->out, " }\n");
}

/* `into = op(into, from)` for a lane pair or the final fold; arg ops carry
 * their index along (the smaller wins a tie). Per operation:
 *  - sum, mean, prod: a tree of partial sums (products); i32 in uint32_t,
 *    which wraps as the interpreter's 32-bit results do.
 *  - max, min: within a lane `c_l = x > c_l ? x : c_l`: a lane starts at
 *    -inf (+inf) and takes only values compared greater (less), so it is
 *    never NaN and the interpreter's `c = (x > c || c != c) ? x : c` has
 *    `c != c` always false there; a NaN x compares false and is ignored, as
 *    the interpreter ignores it, and the select is one vector max per
 *    group, no branch. The fold uses the interpreter's own max. Of +0 and
 *    -0 the result may be either (equal values; which came first is no
 *    longer known).
 *  - argmax, argmin: a lane keeps its best value and its flat index,
 *    taking an element only when strictly better (the first best in the
 *    lane); the fold takes the better value and, of equal ones, the smaller
 *    index, which is the earlier element: the flat index grows with the
 *    iteration. A lane that took nothing has index INT64_MAX and loses
 *    every tie, so c keeps its own first element as the interpreter does. */
static void fold(jit_cx_t* E, const ir_carried_t* c, const char* into, const char* into_a, const char* from,
                 const char* from_a) {
  int fl = c->dtype != UJ_I32;
  switch (c->op) {
    case UJ_REDUCE_SUM:
    case UJ_REDUCE_MEAN: rt_buf_printf(E->out, "%s += %s;", into, from); return;
    case UJ_REDUCE_PROD: rt_buf_printf(E->out, "%s *= %s;", into, from); return;
    case UJ_REDUCE_MAX:
    case UJ_REDUCE_MIN:
      if (fl) rt_buf_printf(E->out, "%s = %s(%s, %s);", into, jit_cx_extremum(c->op, c->dtype), from, into);
      else rt_buf_printf(E->out, "%s = %s %s %s ? %s : %s;", into, from, c->op == UJ_REDUCE_MAX ? ">" : "<", into, from, into);
      return;
    default:
      rt_buf_printf(E->out, "if (%s %s %s || (%s == %s && %s < %s)) { %s = %s; %s = %s; }", from,
                    ir_reduce_keeps_greater(c->op) ? ">" : "<", into, from, into, from_a, into_a, into, from, into_a,
                    from_a);
      return;
  }
}

/* The lanes folded pairwise (lane j with j + h, h = L/2, L/4, .., 1), then
 * into the carried variable. */
static void fold_lanes(jit_cx_t* E, const ir_carried_t* c, int L, int depth) {
  char into[48], into_a[48], from[48], from_a[48], cv[32], ca[32];
  snprintf(into, sizeof into, "c%d_l[uj_l]", c->id);
  snprintf(into_a, sizeof into_a, "c%da_l[uj_l]", c->id);
  snprintf(from, sizeof from, "c%d_l[uj_l + uj_h]", c->id);
  snprintf(from_a, sizeof from_a, "c%da_l[uj_l + uj_h]", c->id);
  jit_cx_indent(E, depth);
  rt_buf_printf(E->out, "for (int uj_h = %d; uj_h > 0; uj_h /= 2) for (int uj_l = 0; uj_l < uj_h; uj_l++) { ",
                L / 2);
  fold(E, c, into, into_a, from, from_a);
  rt_buf_printf(E->out, " }\n");
  jit_cx_indent(E, depth);
  snprintf(cv, sizeof cv, "c%d", c->id);
  snprintf(ca, sizeof ca, "c%da", c->id);
  snprintf(from, sizeof from, "c%d_l[0]", c->id);
  snprintf(from_a, sizeof from_a, "c%da_l[0]", c->id);
  if (c->dtype == UJ_I32 && ir_reduce_is_arithmetic(c->op)) {
    rt_buf_printf(E->out, "c%d = uj_wrap((uj_i64)c%d %s (uj_i64)(int32_t)c%d_l[0]);\n", c->id, c->id,
                  c->op == UJ_REDUCE_PROD ? "*" : "+", c->id);
    return;
  }
  fold(E, c, cv, ca, from, from_a);
  rt_buf_printf(E->out, "\n");
}

/* 32 lanes of 4-byte values (four 256-bit vectors: enough independent
 * adds to cover their latency), 16 when a lane holds 8 bytes (f64, an arg
 * op's index). */
static int lane_count(const ir_block_t* b, int k) {
  const ir_loop_t* l = &b->loops[k];
  for (int s = 0; s < l->nstmts; s++)
    if (l->stmts[s].kind == IR_ST_ACCUM) {
      const ir_carried_t* c = ir_outer_carried(b, k, l->stmts[s].carried);
      if (c->dtype == UJ_F64 || ir_reduce_is_arg(c->op)) return 16;
    }
  return 32;
}

/* The tensors loop k reads or writes at [row, column]: rank 2, indexed by
 * loop 0's and loop k's variables, bare and unchecked. */
typedef struct {
  const ir_func_t* f;
  int k, row_id, col_id;
  unsigned char* mode; /* by tensor: 1 read there, 2 written there (or both) */
} row_walk_t;

static void note_row_access(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)stmt;
  row_walk_t* w = ctx;
  const ir_tensor_t* t = &w->f->tensors[acc->tensor];
  /* a chain-local temporary's next rows are in scratch the runner reuses,
   * not at the address the prefetch would compute (ir/chain_local.c) */
  if (level != w->k || t->local || t->noalloc || t->chain_local || acc->nidx != 2 || acc->check_mask) return;
  if (acc->idx[0]->kind != IR_IX_LOOP || acc->idx[0]->id != w->row_id) return;
  if (acc->idx[1]->kind != IR_IX_LOOP || acc->idx[1]->id != w->col_id) return;
  w->mode[acc->tensor] |= (unsigned char)(is_write ? 2 : 1);
}

unsigned char* jit_c_row_tensors(const ir_func_t* f, const ir_block_t* b, int k) {
  row_walk_t w = {f, k, b->loops[0].id, b->loops[k].id, calloc((size_t)f->ntensors + 1, 1)};
  if (w.mode && b->nloops > k && k > 0) ir_walk_accesses((ir_block_t*)b, note_row_access, &w);
  return w.mode;
}

void jit_c_prefetch_rows(jit_cx_t* E, const ir_block_t* b, int depth, int group, const unsigned char* mode) {
  int row = b->loops[0].id;
  for (int t = 0; t < E->f->ntensors; t++) {
    if (!mode[t]) continue;
    int size = uj_dtype_size(E->f->tensors[t].dtype), per_line = 64 / size, lines = group * size / 64;
    jit_cx_indent(E, depth);
    /* uj_g < d_1: the group's columns are the tensor's (a loop over another
     * range fetches nothing past the row) */
    rt_buf_printf(E->out, "if (i%d + (end - begin) < d%d_0 && uj_g < d%d_1) {", row, t, t);
    for (int line = 0; line < (lines > 0 ? lines : 1); line++)
      rt_buf_printf(E->out, " __builtin_prefetch(&t%d[(i%d + (end - begin)) * d%d_1 + uj_g + %d], %d, 2);", t, row, t,
                    line * per_line, mode[t] & 2 ? 1 : 0);
    rt_buf_printf(E->out, " }\n");
  }
}

/* After each group: the lines the group touched of every [row, column]
 * tensor, in the row one chunk further on (the block runs a chunk of rows
 * [begin, end) per call).
 *
 * The runner calls the blocks of a chain (ir/chains.c) a chunk of rows
 * [begin, end) at a time, every block of the chain on one chunk before the
 * next chunk. Only the chain's first block then waits for memory (softmax's
 * max reads x from DRAM; its exp and its quotient work on rows in cache),
 * and memory idles while the later blocks compute. A lane loop of a later
 * block (jit_cx_t.prefetch_next_chunk) therefore prefetches, once per
 * group, the lines the group touched of each [row, column] tensor in the
 * row end - begin further on, which the next chunk will touch: to read, or
 * to write (the store then finds its line already owned), when the row
 * exists. No value changes (docs/ENGINES.md, "Measured"). Where the chain's
 * last block streams its output (jit/c/c_stream.c), that block prefetches
 * instead and these loops fetch nothing (see chunk_prefetch in
 * jit/c/c_emit.c). */
static void emit_prefetch(jit_cx_t* E, const ir_block_t* b, int k, int L) {
  unsigned char* mode = jit_c_row_tensors(E->f, b, k);
  if (!mode) return; /* out of memory: no prefetch, nothing else changes */
  jit_c_prefetch_rows(E, b, k + 2, L, mode);
  free(mode);
}

/* Each carried variable c gets L partial results c_l[0..L) at the
 * identity (lane_count), the loop runs in groups of L iterations, iteration
 * j of a group accumulating into lane j (an inner loop of constant trip
 * count over the lanes, which the compiler turns into vector operations
 * with independent accumulators), then the lanes are folded into c as a
 * balanced tree in a fixed order (lane j with lane j + L/2, and so on), and
 * the iterations past the last whole group run as before, straight into c.
 * Everything else is unchanged: the iterations still run in their order, so
 * stores, loads and guards see what they saw; only the order of the
 * reduction's own operations changes, and it depends on the loop's trip
 * count alone, never on threads (the C engine splits blocks by their
 * outermost loop, and a reduction's lanes live inside one iteration of it).
 *
 * The loop over the lanes of a group gets `#pragma GCC ivdep` when its
 * iterations touch disjoint elements of every tensor the block writes
 * (ir_loop_accesses_disjoint; each lane accumulates into its own partial
 * result): without it gcc cannot tell that softmax's store of exp(x - max)
 * to y leaves the row's max and x unchanged, and checks the pointers for
 * overlap and reloads the max and its constants once per group of 32
 * (docs/ENGINES.md, "Measured"). */
void jit_c_emit_lanes(jit_cx_t* E, const ir_block_t* b, int k) {
  const ir_loop_t* l = &b->loops[k];
  int id = l->id, L = lane_count(b, k);
  jit_cx_indent(E, k);
  rt_buf_printf(E->out, "{\n");
  for (int s = 0; s < l->nstmts; s++)
    if (first_accum(l, s)) declare_lanes(E, ir_outer_carried(b, k, l->stmts[s].carried), L, k + 1);
  jit_c_group_range(E, k + 1, l, 0);
  jit_cx_indent(E, k + 1);
  rt_buf_printf(E->out, "for (; uj_e > uj_g && (uint64_t)(uj_e - uj_g) >= %d; uj_g += %d) {\n", L, L);
  jit_c_open_lanes(E, k + 2, L, id, ir_loop_accesses_disjoint(E->f, b, k, NULL));
  jit_cx_locals(E, l, k + 3);
  E->lanes = 1;
  for (int s = 0; s < l->nstmts; s++) jit_cx_stmt(E, &l->stmts[s], k + 3);
  E->lanes = 0;
  jit_cx_indent(E, k + 2);
  rt_buf_printf(E->out, "}\n");
  if (E->prefetch_next_chunk) emit_prefetch(E, b, k, L);
  jit_cx_indent(E, k + 1);
  rt_buf_printf(E->out, "}\n");
  for (int s = 0; s < l->nstmts; s++)
    if (first_accum(l, s)) fold_lanes(E, ir_outer_carried(b, k, l->stmts[s].carried), L, k + 1);
  /* the rest, one at a time into the carried variables */
  jit_cx_indent(E, k + 1);
  rt_buf_printf(E->out, "for (uj_i64 i%d = uj_g; i%d < uj_e; i%d++) {\n", id, id, id);
  jit_cx_locals(E, l, k + 2);
  for (int s = 0; s < l->nstmts; s++) jit_cx_stmt(E, &l->stmts[s], k + 2);
  jit_cx_indent(E, k + 1);
  rt_buf_printf(E->out, "}\n");
  jit_cx_indent(E, k);
  rt_buf_printf(E->out, "}\n");
}
