/* jit/c/c_ahead.c: the C engine's flat elementwise loops, with software
 * prefetch ahead of every stream (DESIGN section 7, the runner).
 *
 * A block of one independent loop (a sigmoid chain, an optimizer update, a
 * piece of a multi-tensor call) streams each tensor it touches at [i]. One
 * core keeps only as many misses in flight as its line-fill buffers allow,
 * and the hardware prefetcher follows a stream only after several misses,
 * so such a loop waits on memory for part of every pass. It is therefore
 * printed in groups of GROUP iterations (an inner loop of constant trip
 * count, which the compiler vectorizes whole), and after each group
 * prefetches, for every tensor accessed at exactly [i], the lines GROUP
 * iterations cover AHEAD elements further on: to read, or to write where
 * the loop writes it (the store then finds its line owned). No value
 * changes: the iterations run in order, and a prefetch neither faults nor
 * stores. Which loops: jit_c_ahead_fits; others are printed as before. */
#include <stdlib.h>

#include "c_ahead.h"
#include "c_group.h"
#include "../jit.h"

enum {
  GROUP = 32,      /* iterations per group: two 64-byte vectors of f32 */
  AHEAD = 256,     /* elements ahead: 1 KiB of f32 */
  LINE_BYTES = 64, /* a cache line */
  TAIL_LANES = 8,  /* the smallest group of the rest */
};

typedef struct {
  int loop;            /* the loop's id */
  int streams;         /* tensors accessed at [i] */
  unsigned char* mode; /* by tensor: 1 read at [i], 2 written at [i] (or both) */
} stream_walk_t;

static int is_loop_index(const ir_access_t* acc, int loop) {
  return acc->nidx == 1 && acc->idx[0]->kind == IR_IX_LOOP && acc->idx[0]->id == loop;
}

static void note_stream(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)level, (void)stmt;
  stream_walk_t* w = ctx;
  if (!is_loop_index(acc, w->loop) || acc->check_mask) return;
  if (!w->mode[acc->tensor]) w->streams++;
  w->mode[acc->tensor] |= (unsigned char)(is_write ? 2 : 1);
}

/* The tensors b's only loop streams, or NULL when it streams none (or on
 * out of memory: the loop is then printed as before). */
static unsigned char* stream_modes(const ir_func_t* f, const ir_block_t* b) {
  stream_walk_t w = {b->loops[0].id, 0, calloc((size_t)f->ntensors + 1, 1)};
  if (!w.mode) return NULL;
  ir_walk_accesses((ir_block_t*)b, note_stream, &w);
  for (int t = 0; t < f->ntensors; t++)
    if (w.mode[t] && (f->tensors[t].local || f->tensors[t].noalloc)) w.mode[t] = 0, w.streams--;
  if (w.streams > 0) return w.mode;
  free(w.mode);
  return NULL;
}

int jit_c_ahead_block(const ir_func_t* f, const ir_block_t* b) {
  if (b->nloops != 1 || !ir_loop_independent(f, b, 0, NULL)) return 0;
  unsigned char* mode = stream_modes(f, b);
  free(mode);
  return mode != NULL;
}

int jit_c_ahead_fits(const jit_cx_t* E, const ir_block_t* b, int k) { return k == 0 && jit_c_ahead_block(E->f, b); }

void jit_c_ahead_next_decls(jit_cx_t* E, const ir_block_t* b) {
  const ir_func_t* f = E->f;
  unsigned char* mode = stream_modes(f, b);
  rt_buf_printf(E->out, "  const uj_i64 uj_nx = dims[%d];\n", JIT_NEXT_SLOT(f->ntensors));
  for (int t = 0; mode && t < f->ntensors; t++)
    if (mode[t])
      rt_buf_printf(E->out, "  const %s* uj_n%d = (const %s*)(uj_nx > 0 ? buf[%d] : 0); (void)uj_n%d;\n",
                    jit_cx_ctype(f->tensors[t].dtype), t, jit_cx_ctype(f->tensors[t].dtype), f->ntensors + t, t);
  free(mode);
}

/* The prefetches of a group of `group` iterations: for every tensor the
 * loop streams but skip, the lines they cover at [<index> + offset] of
 * <prefix><t>, to write where the loop writes the tensor. */
static void print_lines(jit_cx_t* E, const unsigned char* mode, int skip, int group, const char* prefix,
                        const char* index, int offset) {
  const ir_func_t* f = E->f;
  for (int t = 0; t < f->ntensors; t++) {
    if (!mode[t] || t == skip) continue;
    int size = uj_dtype_size(f->tensors[t].dtype), per_line = LINE_BYTES / size;
    int lines = group * size / LINE_BYTES;
    for (int line = 0; line < (lines > 0 ? lines : 1); line++)
      rt_buf_printf(E->out, " __builtin_prefetch(&%s%d[%s + %d], %d);", prefix, t, index, offset + line * per_line,
                    mode[t] & 2 ? 1 : 0);
  }
}

void jit_c_ahead_prefetch(jit_cx_t* E, const ir_block_t* b, int depth, int group, int skip, const char* end) {
  const ir_func_t* f = E->f;
  unsigned char* mode = stream_modes(f, b);
  int any = 0;
  for (int t = 0; mode && t < f->ntensors; t++) any |= mode[t] && t != skip;
  if (any) {
    jit_cx_indent(E, depth);
    rt_buf_printf(E->out, "if (%s - uj_g >= %d) {", end, group + AHEAD);
    print_lines(E, mode, skip, group, "t", "uj_g", AHEAD);
    /* near the end, the next piece's lines as far ahead, while there is one */
    rt_buf_printf(E->out, " } else if (uj_nx > 0) { const uj_i64 uj_o = uj_g + %d - %s; if (uj_o >= 0 && uj_o < uj_nx) {",
                  AHEAD, end);
    print_lines(E, mode, skip, group, "uj_n", "uj_o", 0);
    rt_buf_printf(E->out, " } }\n");
  }
  free(mode);
}

/* The iterations past the last whole group run in a group of half and one
 * of a quarter of GROUP where they fill one, and the last few (at most 7)
 * one by one: a piece of a multi-tensor call is a few hundred elements, and
 * a rest of up to 31 iterations one by one (a scalar divide and square root
 * each, in AdamW) cost as much as the rest of the piece. A third group of 4
 * is left out: each group prints the loop's body once more, and the compile
 * grows with it (docs/ENGINES.md, "Measured", which also has what the
 * groups and their prefetch gain; the bench's traffic-matched copy kernel,
 * the limit such a loop is judged by, prefetches the same way,
 * bench/traffic.c). */
void jit_c_emit_ahead(jit_cx_t* E, const ir_block_t* b, int k, int depth, const char* from, const char* end,
                      jit_cx_loop_fn inner, void* inner_ctx) {
  int id = b->loops[k].id;
  jit_cx_indent(E, depth);
  rt_buf_printf(E->out, "{\n");
  if (from) {
    jit_cx_indent(E, depth + 1);
    rt_buf_printf(E->out, "uj_i64 uj_g = %s;\n", from);
  }
  jit_cx_indent(E, depth + 1);
  rt_buf_printf(E->out, "for (; %s - uj_g >= %d; uj_g += %d) {\n", end, GROUP, GROUP);
  jit_c_open_lanes(E, depth + 2, GROUP, id, 1);
  jit_cx_iteration(E, b, k, depth + 3, inner, inner_ctx);
  jit_cx_indent(E, depth + 2);
  rt_buf_printf(E->out, "}\n");
  jit_c_ahead_prefetch(E, b, depth + 2, GROUP, -1, end);
  jit_cx_indent(E, depth + 1);
  rt_buf_printf(E->out, "}\n");
  /* the rest in halving groups: at most TAIL_LANES - 1 iterations one by one */
  for (int lanes = GROUP / 2; lanes >= TAIL_LANES; lanes /= 2) {
    jit_cx_indent(E, depth + 1);
    rt_buf_printf(E->out, "if (%s - uj_g >= %d) {\n", end, lanes);
    jit_c_open_lanes(E, depth + 2, lanes, id, 1);
    jit_cx_iteration(E, b, k, depth + 3, inner, inner_ctx);
    jit_cx_indent(E, depth + 2);
    rt_buf_printf(E->out, "}\n");
    jit_cx_indent(E, depth + 2);
    rt_buf_printf(E->out, "uj_g += %d;\n", lanes);
    jit_cx_indent(E, depth + 1);
    rt_buf_printf(E->out, "}\n");
  }
  jit_cx_indent(E, depth + 1);
  rt_buf_printf(E->out, "for (uj_i64 i%d = uj_g; i%d < %s; i%d++) {\n", id, id, end, id);
  jit_cx_iteration(E, b, k, depth + 2, inner, inner_ctx);
  jit_cx_indent(E, depth + 1);
  rt_buf_printf(E->out, "}\n");
  jit_cx_indent(E, depth);
  rt_buf_printf(E->out, "}\n");
}
