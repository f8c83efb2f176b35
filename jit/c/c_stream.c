/* jit/c/c_stream.c: streaming (non-temporal) stores for outputs written
 * once and never read (DESIGN section 6, "Streamed outputs").
 *
 * An ordinary store to a line not in cache first reads the line (read for
 * ownership); a non-temporal store of a whole 64-byte line goes to memory
 * without that read. The outputs that may stream are ir_output_streamable's
 * (ir/stream.c), one per loop. Only large outputs stream, and not in place,
 * tested at run time once per call (jit_c_stream_tests); otherwise the loop
 * runs exactly as without this file. A streamed loop over [s, e) runs
 * scalar iterations until the output is 64-byte aligned, then groups of one
 * line, each storing the output's lanes to a local array written with one
 * non-temporal store (UJ_STREAM64, the prelude), then the rest, scalar.
 * Every statement runs in the same order on the same values; the streamed
 * elements are stored later within their group, and nothing reads them. */
#include <stdlib.h>

#include "c_ahead.h"
#include "c_group.h"
#include "c_reduce.h"
#include "c_stream.h"
#include "../jit.h"

int* jit_c_stream_blocks(const ir_func_t* f) {
  int* block = malloc(((size_t)f->ntensors + 1) * sizeof *block);
  const ir_stmt_t** stmt = malloc(((size_t)f->ntensors + 1) * sizeof *stmt);
  if (!block || !stmt) {
    free(block), free(stmt);
    return NULL;
  }
  for (int t = 0; t < f->ntensors; t++) {
    block[t] = -1;
    stmt[t] = ir_output_streamable(f, t, &block[t]);
  }
  /* one per loop, the first stored: the loop is split where that output's
   * lines start, and another output's lines need not start there too */
  for (int t = 0; t < f->ntensors; t++) {
    if (block[t] < 0) continue;
    const ir_loop_t* l = &f->blocks[block[t]].loops[f->blocks[block[t]].nloops - 1];
    for (const ir_stmt_t* s = l->stmts; s < stmt[t]; s++)
      if (s->kind == IR_ST_STORE && stmt[s->target.tensor] == s) {
        block[t] = -1;
        break;
      }
  }
  free(stmt);
  return block;
}

/* Per call: whether the output's bytes reach the threshold the runner
 * passes in dims[JIT_STREAM_SLOT(ntensors)] (uj_ctx_set_stream_bytes,
 * UOPJIT_STREAM_BYTES). A small output is likely read next, by the caller
 * or the next program, while still in cache; streamed, it would be in
 * memory instead. */
void jit_c_stream_tests(jit_cx_t* E, int bi) {
  const ir_func_t* f = E->f;
  for (int t = 0; t < f->ntensors; t++) {
    if (E->stream_block[t] != bi) continue;
    const ir_tensor_t* tt = &f->tensors[t];
    rt_buf_printf(E->out, "  const int uj_nt%d = ", t);
    for (int k = 0; k < tt->ndim; k++) rt_buf_printf(E->out, "(uint64_t)d%d_%d * ", t, k);
    rt_buf_printf(E->out, "%du >= (uint64_t)dims[%d]", uj_dtype_size(tt->dtype), JIT_STREAM_SLOT(f->ntensors));
    /* not in place (the same pointer): written over an input, as Adam's
     * update is, the lines were just read and are in cache */
    for (int in = 0; in < f->ntensors; in++)
      if (f->tensors[in].role == IR_TENSOR_INPUT && ir_alias_safe(f, in, t))
        rt_buf_printf(E->out, " && (const void*)t%d != (const void*)t%d", t, in);
    rt_buf_printf(E->out, ";\n");
  }
}

/* Non-temporal stores are weakly ordered, so a block that streamed ends
 * with a store fence (UJ_SFENCE; x86 only, elsewhere the runner's
 * synchronization orders them): the thread that waits for the block then
 * sees every element. */
void jit_c_stream_fence(jit_cx_t* E, int bi) {
  for (int t = 0; t < E->f->ntensors; t++)
    if (E->stream_block[t] == bi) rt_buf_printf(E->out, "  if (uj_nt%d) UJ_SFENCE();\n", t);
}

/* The streamed tensor loop k stores, or -1. */
static int streamed_here(const jit_cx_t* E, const ir_block_t* b, int k) {
  if (!E->stream_block || k != b->nloops - 1) return -1;
  const ir_loop_t* l = &b->loops[k];
  for (int s = 0; s < l->nstmts; s++) {
    int t = l->stmts[s].target.tensor;
    if (l->stmts[s].kind == IR_ST_STORE && E->stream_block[t] >= 0 && &E->f->blocks[E->stream_block[t]] == b)
      return t;
  }
  return -1;
}

typedef struct {
  int tensor;
} lane_hook_t;

/* In a group: the streamed store's target is lane uj_l of the local array. */
static int lane_target(jit_cx_t* E, const ir_access_t* acc) {
  const lane_hook_t* h = E->hook_state;
  if (acc->tensor != h->tensor) return 0;
  rt_buf_printf(E->out, "uj_line[uj_l]");
  return 1;
}

static void no_inner_loop(void* ctx, const ir_block_t* b, int k, int depth) {
  (void)ctx, (void)b, (void)k, (void)depth; /* loop k is the innermost */
}

/* `for (uj_i64 i<id> = from; i<id> < to; i<id>++) { an iteration }` */
static void scalar_loop(jit_cx_t* E, const ir_block_t* b, int k, int depth, const char* from, const char* to) {
  int id = b->loops[k].id;
  jit_cx_indent(E, depth);
  rt_buf_printf(E->out, "for (uj_i64 i%d = %s; i%d < %s; i%d++) {\n", id, from, id, to, id);
  jit_cx_iteration(E, b, k, depth + 1, no_inner_loop, NULL);
  jit_cx_indent(E, depth);
  rt_buf_printf(E->out, "}\n");
}

/* The peel runs no iteration when the output cannot be aligned (an address
 * not a multiple of the element size); a group is 64 / (element size)
 * iterations, each running every statement of the loop in order, the
 * streamed store going to lane l of uj_line. */
int jit_c_stream_loop(jit_cx_t* E, const ir_block_t* b, int k) {
  int t = streamed_here(E, b, k);
  if (t < 0) return 0;
  const ir_loop_t* l = &b->loops[k];
  const ir_access_t* target = NULL;
  for (int s = 0; s < l->nstmts && !target; s++)
    if (l->stmts[s].target.tensor == t) target = &l->stmts[s].target;
  int id = l->id, size = uj_dtype_size(E->f->tensors[t].dtype), group = 64 / size;
  int independent = ir_loop_independent(E->f, b, k, NULL);
  /* a flat loop prefetches its other streams ahead (jit/c/c_ahead.c), in
   * the groups that stream and in the loop that does not */
  int ahead = jit_c_ahead_fits(E, b, k);
  jit_cx_indent(E, k);
  rt_buf_printf(E->out, "{\n");
  jit_c_group_range(E, k + 1, l, k == 0);
  jit_cx_indent(E, k + 1);
  rt_buf_printf(E->out, "if (uj_nt%d && uj_e > uj_s) {\n", t);
  jit_cx_indent(E, k + 2);
  rt_buf_printf(E->out, "uintptr_t uj_at; { const uj_i64 i%d = uj_s; uj_at = (uintptr_t)&", id);
  jit_cx_access(E, target);
  rt_buf_printf(E->out, "; }\n");
  jit_cx_indent(E, k + 2);
  rt_buf_printf(E->out, "if (uj_at %% %du == 0) {\n", size);
  jit_cx_indent(E, k + 3);
  rt_buf_printf(E->out, "const uj_i64 uj_peel = (uj_i64)((0u - uj_at) & 63u) / %d;\n", size);
  jit_cx_indent(E, k + 3);
  rt_buf_printf(E->out, "const uj_i64 uj_p = uj_e - uj_s < uj_peel ? uj_e : uj_s + uj_peel;\n");
  scalar_loop(E, b, k, k + 3, "uj_s", "uj_p");
  jit_cx_indent(E, k + 3);
  rt_buf_printf(E->out, "for (uj_g = uj_p; uj_e - uj_g >= %d; uj_g += %d) {\n", group, group);
  jit_cx_indent(E, k + 4);
  rt_buf_printf(E->out, "_Alignas(64) %s uj_line[%d];\n", jit_cx_ctype(E->f->tensors[t].dtype), group);
  jit_c_open_lanes(E, k + 4, group, id, independent);
  lane_hook_t hook = {t};
  E->access_hook = lane_target;
  E->hook_state = &hook;
  jit_cx_iteration(E, b, k, k + 5, no_inner_loop, NULL);
  E->access_hook = NULL;
  E->hook_state = NULL;
  jit_cx_indent(E, k + 4);
  rt_buf_printf(E->out, "}\n");
  jit_cx_indent(E, k + 4);
  rt_buf_printf(E->out, "{ const uj_i64 i%d = uj_g; UJ_STREAM64(&", id);
  jit_cx_access(E, target);
  rt_buf_printf(E->out, ", uj_line); }\n");
  if (ahead) jit_c_ahead_prefetch(E, b, k + 4, group, t, "uj_e");
  if (E->chunk_rows && k > 0) jit_c_prefetch_rows(E, b, k + 4, group, E->chunk_rows);
  jit_cx_indent(E, k + 3);
  rt_buf_printf(E->out, "}\n");
  jit_cx_indent(E, k + 2);
  rt_buf_printf(E->out, "}\n");
  jit_cx_indent(E, k + 1);
  rt_buf_printf(E->out, "}\n");
  if (ahead) {
    jit_c_emit_ahead(E, b, k, k + 1, NULL, "uj_e", no_inner_loop, NULL);
  } else {
    if (independent) {
      jit_cx_indent(E, k + 1);
      rt_buf_printf(E->out, "#pragma GCC ivdep\n");
    }
    scalar_loop(E, b, k, k + 1, "uj_g", "uj_e");
  }
  jit_cx_indent(E, k);
  rt_buf_printf(E->out, "}\n");
  return 1;
}
