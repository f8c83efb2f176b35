/* ir/stream.c: which outputs are written once and never read, so that an
 * engine may write them around the cache (the C engine's streaming stores,
 * jit/c/c_stream.c; DESIGN section 6, "Streamed outputs").
 *
 * An ordinary store first reads the line it lands in (read for ownership);
 * a streaming store of a whole line writes it alone, which is only right
 * for a line nothing reads back soon. The rule, for output O: one
 * statement S in block B is the only access to O in the function, a plain
 * unguarded store covering O (ir_store_covers); every loop around S of
 * more than one iteration is named by its target; S sits in B's innermost
 * loop, which is O's last index, so consecutive iterations store
 * consecutive elements; and that loop is not a reduction in lanes. An
 * output an input may be written over qualifies too: whether a call runs
 * in place is known only when it runs, and the engine tests it then. The
 * values stored are the same; only where they pass through changes. */
#include <stdlib.h>

#include "ir.h"

typedef struct {
  int tensor;
  int accesses, block, level;
  int is_write;
  const ir_stmt_t* stmt;
  const ir_access_t* acc;
} find_t;

static void note_access(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  find_t* w = ctx;
  if (acc->tensor != w->tensor) return;
  if (w->accesses++ == 0) w->is_write = is_write, w->level = level, w->stmt = stmt, w->acc = acc;
}

static int named(const ir_access_t* target, int id) {
  for (int i = 0; i < target->nidx; i++)
    if (target->idx[i]->id == id) return 1;
  return 0;
}

/* A reduction loop in lanes (ir_lanes_fit) is refused: split where the
 * output's lines start, the order of its additions would depend on an
 * address, and results must depend on sizes alone. An in-place output
 * (ir_alias_safe: an elementwise chain's, Adam's) is not streamed when the
 * call does run in place, since the line was just read and is in cache
 * anyway (jit/c/c_stream.c). */
const ir_stmt_t* ir_output_streamable(const ir_func_t* f, int O, int* block) {
  const ir_tensor_t* ot = &f->tensors[O];
  if (ot->role != IR_TENSOR_OUTPUT || ot->local || ot->noalloc || ot->ndim < 1) return NULL;
  find_t w = {O, 0, -1, -1, 0, NULL, NULL};
  for (int b = 0; b < f->nblocks && w.accesses <= 1; b++) {
    int before = w.accesses;
    ir_walk_accesses(&f->blocks[b], note_access, &w);
    if (before == 0 && w.accesses) w.block = b;
  }
  if (w.accesses != 1 || !w.is_write || w.acc != &w.stmt->target) return NULL;
  const ir_block_t* b = &f->blocks[w.block];
  int inner = b->nloops - 1;
  if (w.level != inner || !ir_store_covers(f, b, w.stmt) || ir_lanes_fit(b, inner)) return NULL;
  if (w.acc->idx[w.acc->nidx - 1]->id != b->loops[inner].id) return NULL;
  for (int k = 0; k < inner; k++) {
    const ir_loop_t* l = &b->loops[k];
    int once = l->start->kind == IR_IX_CONST && l->end->kind == IR_IX_CONST && l->end->value - l->start->value <= 1;
    if (!once && !named(w.acc, l->id)) return NULL;
  }
  if (block) *block = w.block;
  return w.stmt;
}
