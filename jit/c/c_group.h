/* jit/c/c_group.h: the inner loop of a group of iterations, which the C
 * engine's grouped loops share (reductions in lanes, jit/c/c_reduce.c;
 * flat loops with prefetch ahead, jit/c/c_ahead.c): a loop of constant
 * trip count over the group's lanes, which the compiler vectorizes whole,
 * setting the IR loop's index from the group's start uj_g. */
#ifndef UJ_JIT_C_GROUP_H
#define UJ_JIT_C_GROUP_H

#include "../c_like.h"

/* Declares, at indentation depth, the range of loop l as uj_s and uj_e
 * (the block's [begin, end) when l is its outermost loop, whose range the
 * runner splits) and the group's start uj_g at uj_s. */
static inline void jit_c_group_range(jit_cx_t* E, int depth, const ir_loop_t* l, int outermost) {
  jit_cx_indent(E, depth);
  if (outermost) {
    rt_buf_printf(E->out, "const uj_i64 uj_s = begin, uj_e = end;\n");
  } else {
    rt_buf_printf(E->out, "const uj_i64 uj_s = ");
    jit_cx_ix(E, l->start);
    rt_buf_printf(E->out, ", uj_e = ");
    jit_cx_ix(E, l->end);
    rt_buf_printf(E->out, ";\n");
  }
  jit_cx_indent(E, depth);
  rt_buf_printf(E->out, "uj_i64 uj_g = uj_s;\n");
}

/* Opens `for (int uj_l = 0; uj_l < lanes; uj_l++) {` at indentation depth,
 * after `#pragma GCC ivdep` when ivdep, and sets i<loop_id> in it. */
static inline void jit_c_open_lanes(jit_cx_t* E, int depth, int lanes, int loop_id, int ivdep) {
  if (ivdep) {
    jit_cx_indent(E, depth);
    rt_buf_printf(E->out, "#pragma GCC ivdep\n");
  }
  jit_cx_indent(E, depth);
  rt_buf_printf(E->out, "for (int uj_l = 0; uj_l < %d; uj_l++) {\n", lanes);
  jit_cx_indent(E, depth + 1);
  rt_buf_printf(E->out, "const uj_i64 i%d = uj_g + uj_l;\n", loop_id);
}

#endif
