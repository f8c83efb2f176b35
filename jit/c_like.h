/* jit/c_like.h: what the C emitter (jit/c/c_emit.c) and the CUDA emitter
 * (jit/cuda/cuda_emit.c) share: printing the loop IR's index expressions, value
 * expressions, statements, carried variables and locals in C syntax.
 *
 * Both emitters walk a block the way the interpreter runs it (ir/interp.c)
 * and differ only around the loops (a C function per block and its
 * [begin, end) range; a CUDA kernel whose threads share the iterations), so
 * the statement and expression layer is written once. The dialect picks
 * the spelling of math functions and special values, and hooks in jit_cx_t
 * let each emitter print an access its own way or note what a kernel uses.
 * Names printed: tensors t<N>, sizes d<N>_<axis>, loops i<id>, carried
 * variables c<id> (c<id>a: an arg op's index); nothing from the program's
 * text. */
#ifndef UJ_JIT_C_LIKE_H
#define UJ_JIT_C_LIKE_H

#include "../ir/ir.h"

/* C: builtins and the C prelude's inline polynomials; CUDA: the device
 * math functions. */
typedef enum { JIT_CX_C, JIT_CX_CUDA } jit_cx_dialect_t;

enum { JIT_CX_MAX_DIVIDES = 8 };

typedef struct jit_cx jit_cx_t;
struct jit_cx {
  const ir_func_t* f;
  jit_cx_dialect_t dialect;
  rt_buf_t* out;
  const int64_t* params;  /* folded as constants when fold_params */
  int fold_params;
  const char* param_fmt;  /* otherwise printed with this format and the slot: "params[%d]", "p%d" */
  int size_mode;          /* DIM prints as dims[...], arithmetic through uj_sz_* (the C AOT's size code) */
  uj_reduce_op_t* carried_op; /* by carried id (jit_cx_carried_ops) */
  /* CUDA: by tensor, 1 when a scatter-add into it must be an atomicAdd */
  const unsigned char* atomic_scatter;
  /* CUDA: set when a size (tensor * UJ_MAX_DIMS + axis), tensor or $param
   * slot is printed, so that the kernel takes exactly those arguments */
  unsigned char *used_dims, *used_tensors, *used_params;
  /* CUDA vector lanes (one element of a 16-byte vector in place of a
   * memory access), C streamed lanes: when set and it returns 1, it has
   * printed the access (a load or a store target) itself */
  int (*access_hook)(jit_cx_t* E, const ir_access_t* acc);
  void* hook_state;
  /* C: accumulations go to lane uj_l of each carried variable's partial
   * results (jit/c/c_reduce.c) */
  int lanes;
  /* C: f32 divisions printed as uj_fdiv_r(a, uj_d<i>, uj_r<i>), divides[i]
   * being the division, its divisor computed before the loop
   * (jit/c/c_divide.c) */
  const ir_expr_t* divides[JIT_CX_MAX_DIVIDES];
  int ndivides;
  /* C: the block is called a chunk of rows at a time, after the first
   * block of its chain (ir_block_chains): its reduction loops prefetch the
   * next chunk's rows (jit/c/c_reduce.c) */
  int prefetch_next_chunk;
  /* C: by tensor, what the block's streamed groups prefetch of the next
   * chunk's rows (jit/c/c_stream.c); NULL: nothing */
  const unsigned char* chunk_rows;
  /* C: by tensor, the block whose statement stores it streamed, -1 none
   * (jit/c/c_stream.c); NULL: nothing streams */
  const int* stream_block;
};

/* The reduce op of every carried variable by id; NULL on OOM. */
uj_reduce_op_t* jit_cx_carried_ops(const ir_func_t* f);

/* "float", "double", "int32_t". */
const char* jit_cx_ctype(uj_dtype_t d);
void jit_cx_indent(jit_cx_t* E, int depth);
/* The prelude's function for the max or min reduction (op) of dt values:
 * with the new value as first argument it keeps the old one only when that
 * is better, and ignores a NaN operand, as the interpreter does. */
const char* jit_cx_extremum(uj_reduce_op_t op, uj_dtype_t dt);

void jit_cx_ix(jit_cx_t* E, const ir_ix_t* ix);
void jit_cx_access(jit_cx_t* E, const ir_access_t* acc);
void jit_cx_const(jit_cx_t* E, uj_dtype_t dt, double v);
void jit_cx_expr(jit_cx_t* E, const ir_expr_t* e);
/* The identity of op for values of dt (ir_reduce_identity) as a C
 * expression: 0, 1, the i32 extremes, the dialect's infinity. */
void jit_cx_identity(jit_cx_t* E, uj_reduce_op_t op, uj_dtype_t dt);
/* A carried variable's declaration at its identity, on a line of its own. */
void jit_cx_carried(jit_cx_t* E, const ir_carried_t* c, int depth);
/* Declarations of the locals that loop l's statements write. */
void jit_cx_locals(jit_cx_t* E, const ir_loop_t* l, int depth);
/* One statement, guarded by its run-time range checks when it has any. */
void jit_cx_stmt(jit_cx_t* E, const ir_stmt_t* s, int depth);
/* One iteration of loop k of b, its index set, at indentation depth, in
 * the order ir_walk_iteration gives: its carried variables declared at
 * their identity, its locals, loop k+1 (printed by inner, at the same
 * depth), its statements. */
typedef void (*jit_cx_loop_fn)(void* ctx, const ir_block_t* b, int k, int depth);
void jit_cx_iteration(jit_cx_t* E, const ir_block_t* b, int k, int depth, jit_cx_loop_fn inner, void* inner_ctx);

#endif
