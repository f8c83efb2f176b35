/* ir: the loop IR (docs/DESIGN.md section 3) and everything that reads or
 * rewrites it: index expressions and their parser, the printer, the hash, the
 * verifier, the interpreter that defines the IR's meaning, and the passes.
 *
 * Shape of a function:
 *   function = tensors + blocks run in order
 *   block    = one perfectly nested chain of loops, outermost first
 *   loop     = id, range [start, end), carried variables, statements
 * On each iteration of loop k: reset loop k's carried variables to their
 * identity, run the inner chain k+1..n, then run loop k's statements.
 *
 * Every node lives in the function's arena and is freed with it. Passes build
 * new nodes rather than mutate shared ones: index trees may be shared. */
#ifndef UJ_IR_H
#define UJ_IR_H

#include "../rt/rt.h"

typedef struct ir_ix ir_ix_t;
typedef struct ir_expr ir_expr_t;
typedef struct ir_access ir_access_t;

/* ---- dtypes (ir/half.c) ----------------------------------------------------------- */

/* bf16 and f16 are storage dtypes. Only input and output tensors have them
 * (a temporary or local asked for in one gets its compute dtype, f32); a
 * load from one is an f32 expression (widened exactly), a store into one
 * rounds the f32 value to nearest, ties to even. The one expression that
 * may have a half dtype is a CAST to it: its value is the operand rounded
 * to that format, carried as an f32, and only another CAST reads it. A
 * scatter-add never targets a half tensor. */
int ir_dtype_is_half(uj_dtype_t d);
/* The dtype values of a tensor of dtype d are computed in: f32 for bf16
 * and f16, d itself otherwise. */
uj_dtype_t ir_dtype_compute(uj_dtype_t d);

/* The conversions, bit for bit those of the generated code (jit/prelude.c
 * prints the same algorithms, jit/mir/mir_half.c lowers them):
 * widening is exact (a NaN comes back quiet); narrowing rounds to nearest,
 * ties to even, overflows to +-inf and keeps a NaN a quiet NaN. */
float ir_bf16_to_f32(uint16_t h);
uint16_t ir_f32_to_bf16(float x);
float ir_f16_to_f32(uint16_t h);
uint16_t ir_f32_to_f16(float x);
/* x rounded to f32 toward zero, with the last bit set when inexact
 * ("round to odd"): rounding that again to bf16 or f16 (at least two bits
 * narrower) gives x correctly rounded, which rounding to nearest twice
 * would not. A NaN stays a NaN. */
float ir_f64_to_f32_odd(double x);
/* x rounded to half dtype d (bf16 or f16) and widened back. */
double ir_round_to_half(uj_dtype_t d, double x);

/* ---- index expressions ---------------------------------------------------------- */

typedef enum {
  IR_IX_CONST,  /* value */
  IR_IX_LOOP,   /* id: a loop id (while parsing: the output axis N of iN) */
  IR_IX_DIM,    /* id, axis: size of axis `axis` of tensor `id` (while parsing: of shape source id) */
  IR_IX_PARAM,  /* id: the parameter slot (-1 until bound), name: its name without '$' */
  IR_IX_LOAD,   /* load: an i32 tensor element used as an index (select) */
  IR_IX_NEG,    /* -a */
  IR_IX_ADD, IR_IX_SUB, IR_IX_MUL,
  IR_IX_DIV,    /* floor division; x / 0 == 0 */
  IR_IX_MOD,    /* floor modulo (sign of the divisor); x % 0 == 0 */
  IR_IX_MIN, IR_IX_MAX
} ir_ix_kind_t;

struct ir_ix {
  ir_ix_kind_t kind;
  int64_t value;
  int id, axis;
  const char* name;
  ir_access_t* load;
  ir_ix_t *a, *b;
};

/* ---- tensor accesses, value expressions and statements ---------------------------- */

/* t[idx0, idx1, ...]. Bit k of check_mask set: axis k is not proven in range
 * and must be checked at run time (out of range: the statement is skipped). */
struct ir_access {
  int tensor;
  int nidx;
  ir_ix_t* idx[UJ_MAX_DIMS];
  uint32_t check_mask;
};

typedef enum {
  IR_EX_CONST,    /* value */
  IR_EX_LOAD,     /* access */
  IR_EX_CARRIED,  /* carried variable `carried` (arg ops read as the i32 index) */
  IR_EX_INDEX,    /* the integer value of ix, converted to dtype */
  IR_EX_UNARY,    /* op: uj_unary_op_t, a */
  IR_EX_BINARY,   /* op: uj_binary_op_t, a, b */
  IR_EX_WHERE,    /* a != 0 ? b : c */
  IR_EX_CAST      /* a converted to dtype */
} ir_ex_kind_t;

struct ir_expr {
  ir_ex_kind_t kind;
  uj_dtype_t dtype;
  int op;
  double value;
  ir_access_t access;
  int carried;
  ir_ix_t* ix;
  ir_expr_t *a, *b, *c;
};

typedef enum {
  IR_ST_STORE,        /* target = value */
  IR_ST_ACCUM,        /* carried op= value; arg ops also take arg_index */
  IR_ST_SCATTER_ADD   /* target += value */
} ir_stmt_kind_t;

typedef struct {
  ir_stmt_kind_t kind;
  ir_access_t target;   /* STORE, SCATTER_ADD */
  int carried;          /* ACCUM */
  ir_expr_t* value;
  ir_ix_t* arg_index;   /* ACCUM with argmax/argmin: the flat index of this element */
} ir_stmt_t;

/* A loop-carried reduction variable. op is a uj_reduce_op_t other than MEAN
 * (mean is a sum divided when stored). dtype is the dtype of the reduced
 * values; an arg op reads back as i32. */
typedef struct {
  int id;
  uj_reduce_op_t op;
  uj_dtype_t dtype;
} ir_carried_t;

typedef struct {
  int id;
  ir_ix_t *start, *end;
  int ncarried, carried_cap;
  ir_carried_t* carried;
  int nstmts, stmt_cap;
  ir_stmt_t* stmts;
} ir_loop_t;

typedef struct {
  int nloops, loop_cap;
  ir_loop_t* loops;
} ir_block_t;

typedef enum { IR_TENSOR_TEMP, IR_TENSOR_INPUT, IR_TENSOR_OUTPUT } ir_role_t;

/* dims[k] is the size of axis k as an index expression over input sizes and
 * $params, with [=]-asserted sizes replaced by one representative. An input's
 * own size is DIM(itself, k) unless an assertion tied it to another. */
typedef struct {
  uj_dtype_t dtype;
  int ndim;
  ir_ix_t* dims[UJ_MAX_DIMS];
  ir_role_t role;
  int io_index;        /* slot among inputs or outputs */
  int noalloc;         /* substituted away: never read or written */
  int local;           /* a 0-d scalar written and read within one iteration of one loop:
                          engines keep it in a register, private to each iteration */
  int chain_local;     /* a temporary whose row i is written and read only at row i of one chain
                          (ir/chain_local.c): the CPU runner gives it per-thread rows of scratch
                          when the chain runs in chunks, full-size memory otherwise */
  const char* name;    /* for printing only; may be NULL */
} ir_tensor_t;

/* A run-time check that two sizes agree: a [=] assertion or operands of one
 * elementwise uop. `what` says where it came from, for the error message. */
typedef struct {
  ir_ix_t *a, *b;
  const char* what;
} ir_assert_t;

typedef struct {
  rt_arena_t arena;
  int ntensors, tensor_cap;
  ir_tensor_t* tensors;
  int nblocks, block_cap;
  ir_block_t* blocks;
  int next_loop_id, next_carried_id;
  int nparams;
  const char** param_names;   /* without '$' */
  int nasserts, assert_cap;
  ir_assert_t* asserts;
} ir_func_t;

/* ---- building (ir/ir.c) ----------------------------------------------------------- */

ir_func_t* ir_func_new(void);
void ir_func_free(ir_func_t* f);
/* A deep copy (passes run on a copy so the raw IR stays printable). */
ir_func_t* ir_func_clone(const ir_func_t* f);

/* Each returns NULL (or -1) on out of memory. */
int ir_add_tensor(ir_func_t* f, uj_dtype_t dtype, int ndim, ir_role_t role, int io_index);
/* A 0-d local (see ir_tensor_t.local). */
int ir_add_local(ir_func_t* f, uj_dtype_t dtype);
ir_block_t* ir_add_block(ir_func_t* f);
/* Appends a loop [start, end) inside the block's innermost loop. */
ir_loop_t* ir_add_loop(ir_func_t* f, ir_block_t* b, ir_ix_t* start, ir_ix_t* end);
int ir_add_carried(ir_func_t* f, ir_loop_t* l, uj_reduce_op_t op, uj_dtype_t dtype);
ir_stmt_t* ir_add_stmt(ir_func_t* f, ir_loop_t* l, ir_stmt_kind_t kind);
/* Inserts a statement at position pos of the loop's list (later ones move
 * up); pointers into the list are invalidated. */
ir_stmt_t* ir_insert_stmt(ir_func_t* f, ir_loop_t* l, int pos, ir_stmt_kind_t kind);
int ir_add_assert(ir_func_t* f, ir_ix_t* a, ir_ix_t* b, const char* what);

ir_ix_t* ir_ix_const(ir_func_t* f, int64_t v);
ir_ix_t* ir_ix_loop(ir_func_t* f, int loop_id);
ir_ix_t* ir_ix_dim(ir_func_t* f, int tensor, int axis);
ir_ix_t* ir_ix_bin(ir_func_t* f, ir_ix_kind_t kind, ir_ix_t* a, ir_ix_t* b);

ir_expr_t* ir_ex_const(ir_func_t* f, uj_dtype_t dtype, double v);
ir_expr_t* ir_ex_load(ir_func_t* f, const ir_access_t* acc);
ir_expr_t* ir_ex_carried(ir_func_t* f, int carried, uj_dtype_t dtype);
ir_expr_t* ir_ex_index(ir_func_t* f, ir_ix_t* ix, uj_dtype_t dtype);
ir_expr_t* ir_ex_unary(ir_func_t* f, uj_unary_op_t op, ir_expr_t* a);
/* Comparisons keep the operands' dtype (1 or 0). */
ir_expr_t* ir_ex_binary(ir_func_t* f, uj_binary_op_t op, ir_expr_t* a, ir_expr_t* b);
ir_expr_t* ir_ex_where(ir_func_t* f, ir_expr_t* c, ir_expr_t* a, ir_expr_t* b);
ir_expr_t* ir_ex_cast(ir_func_t* f, uj_dtype_t dtype, ir_expr_t* a);

/* An access of every loop of the block in order: t[l0, l1, ...] (for a 0-d
 * tensor, t[]). Axes start unchecked. */
void ir_access_init(ir_access_t* acc, int tensor);

/* Structural equality of index trees (loop ids, tensors and slots compared
 * as numbers). */
int ir_ix_equal(const ir_ix_t* a, const ir_ix_t* b);
/* Rebuilds ix with each leaf replaced by fn(leaf) (fn returns the leaf itself
 * to keep it). NULL on out of memory. */
typedef ir_ix_t* (*ir_ix_leaf_fn)(void* ctx, const ir_ix_t* leaf);
ir_ix_t* ir_ix_map(rt_arena_t* arena, const ir_ix_t* ix, ir_ix_leaf_fn fn, void* ctx);
/* A deep copy of a value expression inside f's arena; NULL on OOM. */
ir_expr_t* ir_expr_copy(ir_func_t* f, const ir_expr_t* e);
/* Copies an index tree into another arena as is. */
ir_ix_t* ir_ix_copy(rt_arena_t* arena, const ir_ix_t* ix);

/* ---- index expression parser (ir/index.c) ----------------------------------------- */

typedef struct {
  ir_ix_t *dim, *equal_to;  /* both IR_IX_DIM in source terms */
  int column;               /* 1-based column of the '[' */
} ir_ix_assertion_t;

#define IR_IX_MAX_ASSERTIONS 16
#define IR_IX_MAX_DEPTH 64
#define IR_IX_MAX_OPERATIONS 256
#define IR_IX_MAX_LENGTH 4096

/* Parses one index expression (docs/DESIGN.md section 4) into the arena: iN as
 * IR_IX_LOOP with id N, dXn as IR_IX_DIM with id X-'A' and axis n, $name as
 * IR_IX_PARAM (slot -1). Each [=dYm] adds to asserts (at most
 * IR_IX_MAX_ASSERTIONS). On error: UJ_ERR_PARSE with
 *   index expression "i0 + " at column 6: expected an operand
 * (or UJ_ERR_OOM). Text longer than IR_IX_MAX_LENGTH or nested deeper than
 * IR_IX_MAX_DEPTH is an error, never a stack overflow. */
uj_status_t ir_ix_parse(rt_arena_t* arena, const char* text, ir_ix_t** out,
                        ir_ix_assertion_t* asserts, int* nasserts);

/* ---- evaluation (ir/eval.c) ----------------------------------------------------------- */

/* What a function runs on: for each tensor its sizes and data. */
typedef struct {
  int64_t dims[UJ_MAX_DIMS];
  int64_t numel;
  void* data;
} ir_buffer_t;

typedef struct {
  const ir_func_t* f;
  ir_buffer_t* buf;        /* f->ntensors entries */
  const int64_t* params;   /* f->nparams values */
  int64_t* loops;          /* value of each loop id (f->next_loop_id entries) */
} ir_env_t;

/* Evaluates an index expression. IR_IX_LOAD reads an i32 element; *oob is set
 * (and 0 returned) when a checked axis of such a load is out of range. */
int64_t ir_ix_eval(const ir_env_t* env, const ir_ix_t* ix, int* oob);
/* Floor division and modulo with x/0 == x%0 == 0, shared by every target. */
int64_t ir_floordiv(int64_t a, int64_t b);
int64_t ir_floormod(int64_t a, int64_t b);

/* Given the inputs' dims in buf[0..ninputs), computes every other tensor's
 * dims and every numel, then checks the assertions. UJ_ERR_SHAPE naming the
 * tensor and axis for a negative or overflowing size, or the failed
 * assertion with both values. */
uj_status_t ir_func_sizes(const ir_func_t* f, const int64_t* params, ir_buffer_t* buf);

/* ---- interpreter (ir/interp.c) -------------------------------------------------------- */

/* Runs the function over the buffers (all allocated: inputs, outputs and
 * temporaries; no-alloc tensors may have data NULL). Fails only on OOM. */
uj_status_t ir_interp_run(const ir_func_t* f, ir_buffer_t* buf, const int64_t* params);

/* ---- the op table's host side (ir/ops.c) ---------------------------------------------- */

/* The interpreter's float semantics of one op, in double (the row's ref):
 * what folding a constant expression must agree with. */
double ir_unary_f64(uj_unary_op_t op, double x);
double ir_binary_f64(uj_binary_op_t op, double a, double b);
/* An integer wrapped to 32 bits; a float cast to i32 as every engine casts
 * it (truncated, saturated, NaN to 0). */
int64_t ir_wrap_i32(int64_t x);
int64_t ir_float_to_i32(double x);
/* The exact i32 rule of an op that takes i32 (wrapped to 32 bits). */
int64_t ir_unary_i32(uj_unary_op_t op, int64_t x);
int64_t ir_binary_i32(uj_binary_op_t op, int64_t a, int64_t b);
int ir_unary_valid(int op);
int ir_binary_valid(int op);
/* The spelling column: "exp", "atan2", "+", "==" ("?" for no op). */
const char* ir_unary_name(uj_unary_op_t op);
const char* ir_binary_name(uj_binary_op_t op);
int ir_unary_takes_i32(uj_unary_op_t op);
int ir_binary_takes_i32(uj_binary_op_t op);
int ir_binary_kind(uj_binary_op_t op);           /* UJ_OP_ARITH, UJ_OP_COMPARE or UJ_OP_CALL */
int ir_binary_is_compare(uj_binary_op_t op);
/* The op spelled name[0..len), or -1: a unary op, or a binary UJ_OP_CALL. */
int ir_unary_find(const char* name, size_t len);
int ir_binary_find_call(const char* name, size_t len);
/* 1 for the ops that cost many adds (exp, erf, pow, ...); 0 for neg, abs,
 * sqrt, rsqrt, recip, floor, ceil, round, sign and the arithmetic. */
int ir_unary_is_transcendental(uj_unary_op_t op);
int ir_binary_is_transcendental(uj_binary_op_t op);
/* The references the C library lacks (ir/ops.c says what each is). */
double ujm_neg(double x);
double ujm_rsqrt(double x);
double ujm_recip(double x);
double ujm_sigmoid(double x);
double ujm_sign(double x);
double ujm_add(double a, double b);
double ujm_sub(double a, double b);
double ujm_mul(double a, double b);
double ujm_div(double a, double b);
double ujm_fmax(double a, double b);
double ujm_fmin(double a, double b);
double ujm_eq(double a, double b);
double ujm_ne(double a, double b);
double ujm_lt(double a, double b);
double ujm_le(double a, double b);
double ujm_gt(double a, double b);
double ujm_ge(double a, double b);
double ujm_mod(double a, double b);

/* ---- meaning shared by every target (ir/semantics.c) ------------------------------------ */

/* The value a carried variable of op starts from, for values of dtype:
 * 0 (sum, mean), 1 (prod), -inf or INT32_MIN (max, argmax), +inf or
 * INT32_MAX (min, argmin). */
double ir_reduce_identity(uj_reduce_op_t op, uj_dtype_t dtype);
/* 1 for argmax and argmin: the variable also keeps the flat index of its
 * best element, and reads back as that index (i32). */
int ir_reduce_is_arg(uj_reduce_op_t op);
/* 1 for sum, mean and prod: a running sum or product (wrapping in i32);
 * 0 for the comparisons (max, min and the arg ops). */
int ir_reduce_is_arithmetic(uj_reduce_op_t op);
/* 1 for max and argmax (a greater value wins), 0 for the others. */
int ir_reduce_keeps_greater(uj_reduce_op_t op);
/* 1 when the node itself (not its operands) is a transcendental call (exp,
 * erf, pow, ...: ir_unary_is_transcendental), many times an add's cost. */
int ir_expr_op_is_transcendental(const ir_expr_t* e);

/* One iteration of loop k of a block, its index already set: reset each of
 * the loop's carried variables to its identity, then (optional hook) the
 * locals its statements write, then loop k+1 (when there is one), then the
 * loop's statements in order. The interpreter runs it per iteration; the
 * emitters print it once. */
typedef struct {
  void (*reset)(void* ctx, const ir_carried_t* c, int k);
  void (*locals)(void* ctx, const ir_loop_t* l, int k); /* may be NULL */
  void (*inner)(void* ctx, const ir_block_t* b, int k); /* k: the inner loop's position */
  void (*stmt)(void* ctx, const ir_stmt_t* s, int k);
} ir_iteration_visitor_t;
void ir_walk_iteration(const ir_block_t* b, int k, const ir_iteration_visitor_t* v, void* ctx);

/* 1 when the statement is guarded by run-time range checks (out of range:
 * it does nothing). */
int ir_stmt_has_checks(const ir_stmt_t* s);
/* 1 when statement s, a plain store in block b, is unchecked and covers its
 * target: each index a distinct loop of b over [0, the size of that axis). */
int ir_store_covers(const ir_func_t* f, const ir_block_t* b, const ir_stmt_t* s);
/* Calls fn for every run-time checked axis of what the statement reads
 * (value, arg index) and, unless it accumulates, writes, in the order the
 * checks must run: inside an access, the i32 reads in its index trees
 * before its own axes. */
typedef void (*ir_check_fn)(void* ctx, const ir_access_t* acc, int axis);
void ir_walk_checks(const ir_stmt_t* s, ir_check_fn fn, void* ctx);

/* ---- printer, hash, verifier (ir/print.c, ir/hash.c, ir/verify.c) ---------------------------- */

enum {
  IR_PRINT_CANONICAL = 1   /* no names, $params as slots: the text that is hashed */
};
/* The function as readable C-like loops; every block starts with a line
 * "block N". params (may be NULL) folds $param values into the text.
 * Returns a malloc'ed string or NULL on OOM. */
char* ir_print(const ir_func_t* f, const int64_t* params, int flags);

typedef struct {
  uint64_t lo, hi;
} ir_hash_t;
/* 128-bit hash (ir/hash.c) of the canonical text: equal for equal IR,
 * different when anything but a name changes. */
ir_hash_t ir_hash(const ir_func_t* f);
/* The hash of the canonical text with params folded in, as ir_print(f,
 * params, IR_PRINT_CANONICAL) writes it: one kernel of f per value. */
ir_hash_t ir_hash_params(const ir_func_t* f, const int64_t* params);
ir_hash_t ir_hash_bytes(const void* data, size_t n);

/* Checks the structural invariants (ids, ranks, scopes, dtypes). UJ_OK or
 * UJ_ERR_INVALID with what is wrong: an internal error, never the user's. */
uj_status_t ir_verify(const ir_func_t* f);

/* ---- bounds (ir/bounds.c) ------------------------------------------------------------- */

/* 1 when every value of idx, over the ranges of the block's loops
 * 0..depth (inclusive), lies in [0, size). Interval arithmetic over affine
 * forms of sizes and $params. */
int ir_bounds_prove(const ir_func_t* f, const ir_block_t* b, int depth, const ir_ix_t* idx,
                    const ir_ix_t* size);

/* ---- deps (ir/deps.c) ------------------------------------------------------------- */

/* Calls fn on every tensor access of a block: statement targets (writes; a
 * scatter-add's target is also a read), loads in value expressions, and
 * i32 loads inside index expressions (reads), with the level (loop depth) of
 * the statement they belong to. */
typedef void (*ir_access_fn)(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt);
void ir_walk_accesses(ir_block_t* b, ir_access_fn fn, void* ctx);
/* Calls fn on every load in a value expression (and in the index
 * expressions inside it). */
void ir_walk_expr_loads(ir_expr_t* e, ir_access_fn fn, void* ctx, int level, ir_stmt_t* stmt);

/* Per block the tensors it reads and writes; per tensor the blocks. */
typedef struct {
  int nblocks, ntensors;
  unsigned char* reads;   /* [row[block] * ntensors + tensor] */
  unsigned char* writes;
  int* row;               /* [block]: merges drop an index here, not a row of the tables */
} ir_deps_t;
/* NULL on OOM. */
ir_deps_t* ir_deps_new(const ir_func_t* f);
void ir_deps_free(ir_deps_t* d);
int ir_deps_reads(const ir_deps_t* d, int block, int tensor);
int ir_deps_writes(const ir_deps_t* d, int block, int tensor);
/* 1 when the two blocks touch a common tensor and one of them writes it. */
int ir_deps_conflict(const ir_deps_t* d, int a, int b);
/* Blocks `into` and `from` were merged into one at `into` and block `from`
 * removed (the later blocks move down one): the same to the tables. */
void ir_deps_merge(ir_deps_t* d, int into, int from);

/* 1 when an axis of the access (or of an i32 load inside it), of the index
 * tree or of the expression is checked at run time: the statement holding
 * it is guarded (out of range: skipped). */
int ir_access_has_checks(const ir_access_t* acc);
int ir_ix_has_checks(const ir_ix_t* ix);
int ir_expr_has_checks(const ir_expr_t* e);

/* 1 when tensor `out` may be written into the memory of tensor `in`: both
 * are touched in one block only, `out` by one unchecked store that names a
 * distinct element per iteration, and every read of `in` is at that index,
 * in the same loop, no later than the store (so each element is read
 * before it is overwritten, and never after). */
int ir_alias_safe(const ir_func_t* f, int in, int out);

/* 1 when iterations of loop k of b touch disjoint elements of every tensor
 * the block writes, and nothing at or inside loop k accumulates into a
 * carried variable of an outer loop (ir/loop_indep.c). Tensors marked in
 * exempt (may be NULL) are left out of the disjointness test: the CUDA
 * engine marks the tensors that only receive scatter-adds, which it makes
 * atomic. 0 on OOM (the safe answer). */
int ir_loop_independent(const ir_func_t* f, const ir_block_t* b, int k, const unsigned char* exempt);
/* The second half of ir_loop_independent, for one pass of loop k: 1 when,
 * counting only the statements inside loop k, its iterations touch
 * disjoint elements of every tensor written there (other than those in
 * exempt), whatever they accumulate into carried variables. 0 on OOM. */
int ir_loop_accesses_disjoint(const ir_func_t* f, const ir_block_t* b, int k, const unsigned char* exempt);

/* ---- chains (ir/chains.c) ------------------------------------------------------------ */

/* Groups consecutive blocks into chains that may run chunk by chunk of
 * their common outermost loop, every block of the chain on one chunk of
 * rows before the next chunk, and on several threads with a range of rows
 * each (the file's comment states the rule and why the results are
 * unchanged). length has f->nblocks entries: length[b] is the number of
 * blocks in the chain starting at b (1: b runs alone), 0 for a block inside
 * a chain started before it. UJ_OK or UJ_ERR_OOM. */
uj_status_t ir_block_chains(const ir_func_t* f, int* length);

/* ---- lanes (ir/lanes.c) ------------------------------------------------------------- */

/* 1 when loop k of b may accumulate into several partial results folded
 * after it (the file's comment says when). */
int ir_lanes_fit(const ir_block_t* b, int k);
/* The carried variable with id `id` among loops 0..k-1 of b, or NULL. */
const ir_carried_t* ir_outer_carried(const ir_block_t* b, int k, int id);

/* ---- streamed outputs (ir/stream.c) and chain-local temporaries (ir/chain_local.c) ---- */

/* Output O's only statement when O is written once and never read, so that
 * an engine may write it around the cache (the file's comment states the
 * rule), with its block in *block (may be NULL); NULL otherwise. */
const ir_stmt_t* ir_output_streamable(const ir_func_t* f, int O, int* block);
/* 1 when temporary T is written and read only by the blocks of one chain
 * (length: ir_block_chains), one covering store writing it, each of its
 * rows (axis 0, the chain's row) read only at that row by later blocks. */
int ir_temp_chain_local(const ir_func_t* f, int T, const int* length);

/* ---- passes (one file each) ------------------------------------------------------------ */

/* Each rewrites f in place and returns UJ_OK, or UJ_ERR_OOM. */
uj_status_t ir_pass_dce(ir_func_t* f);
uj_status_t ir_pass_scalars(ir_func_t* f);
/* Whether e reads only 0-d inputs and constants (no carried values, no
 * indices): the same value at every element (ir/scalars.c). With
 * float_ops_only, also every operation in it f32 or f64 (none that could
 * trap, as an integer division, where a loop would never have run it). */
int ir_expr_scalar(const ir_func_t* f, const ir_expr_t* e, int float_ops_only);
uj_status_t ir_pass_fuse(ir_func_t* f);
uj_status_t ir_pass_subst(ir_func_t* f);
uj_status_t ir_pass_cse(ir_func_t* f);
uj_status_t ir_pass_powers(ir_func_t* f);
uj_status_t ir_pass_into_output(ir_func_t* f);
uj_status_t ir_pass_recompute(ir_func_t* f);
uj_status_t ir_pass_bounds(ir_func_t* f);
/* Sets ir_tensor_t.chain_local on the temporaries ir_temp_chain_local finds. */
uj_status_t ir_pass_chain_local(ir_func_t* f);

/* ---- pipeline (ir/pipeline.c) --------------------------------------------------------- */

/* The passes compare blocks pairwise and keep tables of blocks by tensors,
 * so their time and memory grow with the square of a program's size (a
 * chain of 10000 one-op statements: 1.6 s and 250 MB; of 4000: 0.25 s
 * and 40 MB); larger programs are refused, not compiled for minutes. The
 * expression language checks its programs against the same limit before
 * lowering them (lang/parse.h). */
#define PIPELINE_MAX_BLOCKS 8192
#define PIPELINE_MAX_TENSORS 16384

/* Runs the passes in order on a copy of raw into *out. UJ_ERR_OOM, or
 * UJ_ERR_INVALID when a debug build's verifier finds a pass broke the IR. */
uj_status_t ir_pipeline(const ir_func_t* raw, ir_func_t** out);
/* UOPJIT_DEBUG's words as IR_DEBUG_* bits (0 when unset), or
 * UJ_ERR_INVALID naming the variable for a word it does not know. The
 * pipeline reads it on every run. */
enum { IR_DEBUG_PASSES = 1, IR_DEBUG_VERIFY = 2 };
uj_status_t ir_debug_from_env(unsigned* flags);

#endif
