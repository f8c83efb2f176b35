/* uops: micro-op graphs, their shape rules, their emission into loop IR, and
 * programs (the combine step). One file per micro-op holds its builder,
 * shape rule and emit; graph.c holds the graph and the trivial uops (input,
 * const, grad); emit.c the helpers every emit shares; program.c combines.
 *
 * Emission happens in three phases (program.c): shapes of every needed node
 * in topological order (collecting [=] assertions), then every size made
 * canonical (an asserted-equal size replaced by its representative, so the
 * passes see equal ranges), then each node's blocks. */
#ifndef UJ_UOPS_H
#define UJ_UOPS_H

#include <pthread.h>

#include "../ir/ir.h"

typedef enum {
  UOP_INPUT, UOP_CONST, UOP_REINDEX, UOP_UNARY, UOP_BINARY, UOP_WHERE, UOP_REDUCE,
  UOP_SELECT, UOP_CAST, UOP_GRAD
} uop_kind_t;

typedef struct {
  const char* text;   /* as written, for messages */
  ir_ix_t* ix;        /* parsed: IR_IX_LOOP = output axis, IR_IX_DIM = shape source */
} uop_ixtext_t;

typedef struct {
  uop_kind_t kind;
  uj_dtype_t dtype;
  int ndim;
  int op;               /* unary/binary/reduce op; select: the axis */
  int nin;
  int in[3];            /* operands, in the order of the builder's arguments */
  double value;         /* const */
  uint32_t axes;        /* reduce: bit k set when axis k is reduced */
  /* reindex */
  int nshape, nss, nindex, nasserts;
  uop_ixtext_t* shape;
  int* ss;
  uop_ixtext_t* index;
  ir_ix_assertion_t* asserts;
  const char** assert_text; /* the expression each assertion came from */
  const char* label;        /* how messages name it (the expression language sets it); NULL: "node N" */
} uop_node_t;

struct uj_graph {
  rt_arena_t arena;
  int n, cap;
  uop_node_t* nodes;
};

/* Appends a node; on failure returns -1 with the error set. */
int uop_graph_add(uj_graph_t* g, const uop_node_t* node);
/* The gradient name of node x (a valid id), of any dtype: an i32 node's
 * gradient is zero (uops/backward.c). uj_grad refuses i32, where asking
 * for it is most likely a mistake; a parsed program's backward pass gives
 * every input a gradient, zeros for an i32 one. */
uj_io_t uop_grad(uj_graph_t* g, uj_io_t x);
/* Validates a node id given to a builder; sets the error naming `what`. */
int uop_check_id(const uj_graph_t* g, uj_io_t id, const char* builder, const char* what);
/* The dtype a node has when combined with a partner: a const adopts it. */
uj_dtype_t uop_dtype_with(const uj_graph_t* g, uj_io_t id, uj_io_t partner);
const char* uop_kind_name(uop_kind_t kind);
/* Names a node in messages: its label, or "node N". */
const char* uop_node_desc(const uj_graph_t* g, int id, char* buf, size_t n);

/* ---- emission ---- */

typedef struct {
  ir_func_t* f;
  const uj_graph_t* g;
  int* tensor_of;           /* node -> tensor, -1 when it has none */
  const char* const* params;/* the program's param names, with '$' */
  int nparams;
  ir_ix_t** alias;          /* input tensor * UJ_MAX_DIMS + axis -> its representative */
} uop_emit_t;

/* Shape phase: the dims of node `n`'s tensor in raw (not yet canonical) form,
 * written into f->tensors[tensor_of[n]].dims. Reindex also adds its
 * assertions. */
uj_status_t uop_reindex_shape(uop_emit_t* E, int n);
uj_status_t uop_reduce_shape(uop_emit_t* E, int n);
uj_status_t uop_select_shape(uop_emit_t* E, int n);
/* Elementwise uops take the first non-0-d operand's shape and assert that
 * every other non-0-d operand agrees, naming both. */
uj_status_t uop_elementwise_shape(uop_emit_t* E, int n);

/* Emit phase: the blocks that compute node n's tensor. */
uj_status_t uop_reindex_emit(uop_emit_t* E, int n);
uj_status_t uop_unary_emit(uop_emit_t* E, int n);
uj_status_t uop_binary_emit(uop_emit_t* E, int n);
uj_status_t uop_where_emit(uop_emit_t* E, int n);
uj_status_t uop_reduce_emit(uop_emit_t* E, int n);
uj_status_t uop_select_emit(uop_emit_t* E, int n);
uj_status_t uop_cast_emit(uop_emit_t* E, int n);
uj_status_t uop_const_emit(uop_emit_t* E, int n);

/* A reduction of tensor xt over the axes in `axes` into t (x's shape with
 * those axes 1); also used by gradients (argmax for max's gradient). */
uj_status_t uop_emit_reduce(uop_emit_t* E, uj_reduce_op_t op, uint32_t axes, int xt, int t);
/* Dispatch on the node's kind (program.c). */
uj_status_t uop_node_shape(uop_emit_t* E, int n);
uj_status_t uop_node_emit(uop_emit_t* E, int n);
/* Makes every size canonical (program.c's step 4). */
uj_status_t uop_canonicalize(ir_func_t* f, int ninputs);

/* Shared emit helpers (emit.c). */
typedef struct {
  ir_block_t* block;
  ir_loop_t* inner;           /* the innermost loop: where statements go */
  int nloops;
  int loop_ids[UJ_MAX_DIMS];  /* loop id of each axis of the tensor */
} uop_nest_t;
/* A new block looping over every axis of tensor t (one [0,1) loop for 0-d). */
uj_status_t uop_nest_over(uop_emit_t* E, int t, uop_nest_t* nest);
/* t[i0, i1, ...] over the nest's loops. */
void uop_access_at(const uop_nest_t* nest, int t, int ndim, ir_access_t* acc, ir_func_t* f);
/* The value of node n at the nest's current element: a constant for const
 * nodes (in dtype), t[] for 0-d tensors, else t[i0, ...]. */
ir_expr_t* uop_operand(uop_emit_t* E, int n, const uop_nest_t* nest, uj_dtype_t dtype);
/* Emits t[...] = value over its whole shape. */
uj_status_t uop_emit_fill(uop_emit_t* E, int t, double value);
/* Stores `value` to tensor t over the nest. */
uj_status_t uop_store(uop_emit_t* E, const uop_nest_t* nest, int t, ir_expr_t* value);
uj_status_t uop_oom(void);
/* Builder checks shared by the elementwise uops. */
int uop_ranks_agree(const uj_graph_t* g, const char* builder, int count, const uj_io_t* ids,
                    const char* const* names, int* ndim);
int uop_is_value(const uj_graph_t* g, uj_io_t id, const char* builder, const char* name);

/* ---- gradients (in each uop's file) ----
 * uop_<kind>_grad writes into dst (shaped like operand `operand` of node n)
 * the whole contribution of n to that operand's gradient, given the
 * gradient of n's output in tensor gout. Forward values are read from
 * E->tensor_of. */
uj_status_t uop_unary_grad(uop_emit_t* E, int n, int operand, int gout, int dst);
uj_status_t uop_binary_grad(uop_emit_t* E, int n, int operand, int gout, int dst);
uj_status_t uop_where_grad(uop_emit_t* E, int n, int operand, int gout, int dst);
uj_status_t uop_cast_grad(uop_emit_t* E, int n, int operand, int gout, int dst);
uj_status_t uop_reduce_grad(uop_emit_t* E, int n, int operand, int gout, int dst);
uj_status_t uop_reindex_grad(uop_emit_t* E, int n, int operand, int gout, int dst);
uj_status_t uop_select_grad(uop_emit_t* E, int n, int operand, int gout, int dst);

/* The local derivative of an elementwise node at the nest's element,
 * already multiplied by g (the output gradient there). */
typedef ir_expr_t* (*uop_local_grad_fn)(uop_emit_t* E, int n, int operand, const uop_nest_t* nest, ir_expr_t* g);
/* dst = local(...) over n's output shape; when the operand is 0-d and the
 * output is not, the contributions are summed into dst[]. */
uj_status_t uop_grad_elementwise(uop_emit_t* E, int n, int operand, int gout, int dst, uop_local_grad_fn local);

/* ---- programs ---- */

typedef struct pn_program pn_program_t;

struct uj_program {
  pn_program_t* parsed;         /* expression-language source: the uop program is built per input signature */
  void (*parsed_free)(pn_program_t* parsed); /* set with parsed by the language (lang/parse.c) */
  int ninputs[2], noutputs[2];  /* by uj_pass_t */
  int nparams;
  char** param_names;
  ir_func_t* raw[2];   /* by uj_pass_t: as emitted; NULL when that pass is absent */
  ir_func_t* opt[2];   /* after the pass pipeline */
  /* the JIT's memo for this program (jit/memo.c: its last kernel per pass,
   * which outputs may be written in place), opaque here: made by the JIT
   * on the program's first run, freed with the program by jit_memo_free */
  void* jit_memo;
  void (*jit_memo_free)(void* memo);
};

/* The backward function of a description with ingrads and outgrads
 * (backward.c). */
uj_status_t uop_build_backward(const uj_graph_t* g, const uj_program_desc_t* d, const uj_program_t* p,
                               ir_func_t** out);

/* The function a pass runs, optimized or raw; NULL with the error set when
 * the program has no such pass. */
const ir_func_t* uop_program_func(const uj_program_t* p, uj_pass_t pass, int optimized);

/* UJ_OK when a call on pass gives the program as many inputs, params and
 * outputs as it has; else UJ_ERR_INVALID saying which count is off. A
 * count below 0 is not checked. */
uj_status_t uop_program_check_counts(const uj_program_t* p, uj_pass_t pass, int inputs, int params, int outputs);

#endif
