/* jit/c/c_divide.h: f32 divisions by a divisor that does not change along
 * the innermost loop, as exact multiplies in double (jit/c/c_divide.c). */
#ifndef UJ_JIT_C_DIVIDE_H
#define UJ_JIT_C_DIVIDE_H

#include "../c_like.h"

/* Before loop k of b is printed (at indentation k): when it is the
 * innermost, prints uj_d<n> and uj_r<n> for each f32 division of its
 * statements whose divisor qualifies and records the division in E, which
 * then prints it as uj_fdiv_r(a, uj_d<n>, uj_r<n>) (jit/c_like.c). Clears
 * the record first; out of memory, the divisions stay as they are. */
void jit_c_hoist_divides(jit_cx_t* E, const ir_block_t* b, int k);

#endif
