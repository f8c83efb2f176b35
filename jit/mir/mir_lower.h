/* jit/mir/mir_lower.h: what the two halves of the MIR lowering share: the
 * lowering state (lower_t) and the small instruction builders, used by
 * jit/mir/mir_emit.c (loops, statements, expressions) and jit/mir/mir_math.c (the
 * inline f32 math). Internal to jit/; only built with MIR. */
#ifndef UJ_JIT_MIR_LOWER_H
#define UJ_JIT_MIR_LOWER_H

#ifdef UJ_HAVE_MIR
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mir_emit.h"

/* The functions the lowering may call: the square roots (which
 * mir_batch.c may batch instead), then every op's reference in double
 * (the op table's ref column), FN_U_<op> and FN_B_<op> in table order. */
enum {
  FN_SQRTF,
  FN_SQRT,
#define UJ_ROW(NAME, spelling, flags, ref, cfn) FN_U_##NAME,
  UJ_UNARY_OPS(UJ_ROW)
#undef UJ_ROW
#define UJ_ROW(NAME, spelling, kind, flags, ref, cfn) FN_B_##NAME,
  UJ_BINARY_OPS(UJ_ROW)
#undef UJ_ROW
  NFNS
};
typedef struct {
  uj_dtype_t dtype;
  uint64_t bits;
  MIR_reg_t reg;
} hoisted_t;

#define MAX_HOISTED 256

/* A block whose square roots are computed in batches (jit/mir/mir_batch.c). */
typedef struct jit_mir_batch jit_mir_batch_t;

typedef struct {
  MIR_context_t ctx;
  const ir_func_t* f;
  const int64_t* params;
  MIR_item_t item;
  MIR_func_t func;
  MIR_insn_t entry;  /* loads of bases, sizes and constants go right after it */
  MIR_reg_t arg_buf, arg_dims, arg_params, arg_begin, arg_end, arg_scratch, slot, exp2_base;
  int nregs;
  /* per function, 0 until first used */
  MIR_reg_t *base, *dim, *local, *loop, *carried, *carried_at;
  uj_reduce_op_t* carried_op;
  int nhoisted;
  hoisted_t hoisted[MAX_HOISTED];
  MIR_item_t proto[4], import[NFNS];  /* proto: [f64 * 2 + nargs - 1] */
  jit_mir_batch_t* batch; /* while lowering a half of a block run in strips */
  /* Scalar expressions computed once, before the loops (jit_mir_scalar in
   * mir_scalars.c): their instructions go before prologue_end, and each
   * expression's register is kept by its address. */
  MIR_insn_t prologue_end;
  int in_prologue;
  int nscalars;
  struct {
    const ir_expr_t* e;
    MIR_reg_t reg;
  } scalars[MAX_HOISTED];
} lower_t;

#define R(r) MIR_new_reg_op(L->ctx, (r))
#define IMM(v) MIR_new_int_op(L->ctx, (v))
#define LBL(l) MIR_new_label_op(L->ctx, (l))

static inline void emit(lower_t* L, MIR_insn_t insn) {
  if (L->in_prologue) MIR_insert_insn_before(L->ctx, L->item, L->prologue_end, insn);
  else MIR_append_insn(L->ctx, L->item, insn);
}
static inline void emit_at_entry(lower_t* L, MIR_insn_t insn) { MIR_insert_insn_after(L->ctx, L->item, L->entry, insn); }
static inline void insn2(lower_t* L, MIR_insn_code_t c, MIR_op_t a, MIR_op_t b) { emit(L, MIR_new_insn(L->ctx, c, a, b)); }
/* An instruction that writes a register from one register in both inputs
 * goes through jit_mir_insn3_same_inputs (jit/mir/mir_distinct.c): MIR's
 * allocator overflows a stack array on an instruction that names one
 * register three times, which coalescing makes of `y = x op x`. */
void jit_mir_insn3_same_inputs(lower_t* L, MIR_insn_code_t c, MIR_op_t out, MIR_reg_t x);
static inline void insn3(lower_t* L, MIR_insn_code_t c, MIR_op_t a, MIR_op_t b, MIR_op_t d) {
  if (a.mode == MIR_OP_REG && b.mode == MIR_OP_REG && d.mode == MIR_OP_REG && b.u.reg == d.u.reg)
    jit_mir_insn3_same_inputs(L, c, a, b.u.reg);
  else
    emit(L, MIR_new_insn(L->ctx, c, a, b, d));
}
static inline void jump(lower_t* L, MIR_insn_t label) { emit(L, MIR_new_insn(L->ctx, MIR_JMP, LBL(label))); }

/* A new register named r<N> (written out by hand: this runs for every
 * value of every kernel, and printf would be a noticeable part of a compile). */
static inline MIR_reg_t new_reg(lower_t* L, MIR_type_t type) {
  char digits[24], name[24];
  int n = 0, len = 0;
  for (unsigned v = (unsigned)L->nregs++; n == 0 || v; v /= 10) digits[n++] = (char)('0' + v % 10);
  name[len++] = 'r';
  while (n) name[len++] = digits[--n];
  name[len] = 0;
  return MIR_new_func_reg(L->ctx, L->func, type, name);
}

/* A bf16/f16 value is held as an f32; its element in memory is 16 bits. */
static inline MIR_type_t reg_type(uj_dtype_t d) {
  return d == UJ_F32 || ir_dtype_is_half(d) ? MIR_T_F : d == UJ_F64 ? MIR_T_D : MIR_T_I64;
}
static inline MIR_type_t mem_type(uj_dtype_t d) {
  return d == UJ_F32 ? MIR_T_F : d == UJ_F64 ? MIR_T_D : ir_dtype_is_half(d) ? MIR_T_U16 : MIR_T_I32;
}
static inline MIR_insn_code_t mov_code(uj_dtype_t d) { return d == UJ_F32 ? MIR_FMOV : d == UJ_F64 ? MIR_DMOV : MIR_MOV; }

/* A register holding constant v of dtype d, loaded once at entry. */
static inline MIR_reg_t constant(lower_t* L, uj_dtype_t d, double v) {
  uint64_t bits;
  if (d == UJ_I32) {
    int64_t c = v != v ? 0 : v >= 2147483647.0 ? 2147483647 : v <= -2147483648.0 ? -2147483647 - 1 : (int64_t)v;
    memcpy(&bits, &c, sizeof bits);
  } else if (d == UJ_F32) {
    float x = (float)v;
    uint32_t b32;
    memcpy(&b32, &x, sizeof b32);
    bits = b32;
  } else {
    memcpy(&bits, &v, sizeof bits);
  }
  for (int i = 0; i < L->nhoisted; i++)
    if (L->hoisted[i].dtype == d && L->hoisted[i].bits == bits) return L->hoisted[i].reg;
  MIR_reg_t r = new_reg(L, reg_type(d));
  MIR_op_t value = d == UJ_F32 ? MIR_new_float_op(L->ctx, (float)v)
                   : d == UJ_F64 ? MIR_new_double_op(L->ctx, v) : MIR_new_int_op(L->ctx, (int64_t)bits);
  MIR_insn_t load = MIR_new_insn(L->ctx, mov_code(d), R(r), value);
  if (L->nhoisted < MAX_HOISTED) {
    L->hoisted[L->nhoisted++] = (hoisted_t){d, bits, r};
    emit_at_entry(L, load);
  } else {
    emit(L, load); /* a huge expression: load it where it is used */
  }
  return r;
}
static inline MIR_reg_t fconst(lower_t* L, float v) { return constant(L, UJ_F32, v); }

/* A 4-byte stack slot for moving bits between float and integer registers. */
static inline MIR_reg_t slot_reg(lower_t* L) {
  if (!L->slot) {
    L->slot = new_reg(L, MIR_T_I64);
    emit_at_entry(L, MIR_new_insn(L->ctx, MIR_ALLOCA, R(L->slot), IMM(16)));
  }
  return L->slot;
}

static inline MIR_reg_t freg(lower_t* L) { return new_reg(L, MIR_T_F); }

static inline MIR_reg_t fop(lower_t* L, MIR_insn_code_t code, MIR_reg_t a, MIR_reg_t b) {
  MIR_reg_t r = freg(L);
  insn3(L, code, R(r), R(a), R(b));
  return r;
}

/* Float bits to and from an integer register through the stack slot. */
static inline MIR_reg_t bits_of(lower_t* L, MIR_reg_t x) {
  MIR_reg_t slot = slot_reg(L), u = new_reg(L, MIR_T_I64);
  insn2(L, MIR_FMOV, MIR_new_mem_op(L->ctx, MIR_T_F, 0, slot, 0, 1), R(x));
  insn2(L, MIR_MOV, R(u), MIR_new_mem_op(L->ctx, MIR_T_I32, 0, slot, 0, 1));
  return u;
}
static inline MIR_reg_t float_of(lower_t* L, MIR_reg_t u) {
  MIR_reg_t slot = slot_reg(L), x = freg(L);
  insn2(L, MIR_MOV, MIR_new_mem_op(L->ctx, MIR_T_I32, 0, slot, 0, 1), R(u));
  insn2(L, MIR_FMOV, R(x), MIR_new_mem_op(L->ctx, MIR_T_F, 0, slot, 0, 1));
  return x;
}

/* bf16/f16 (jit/mir/mir_half.c, the algorithms of ir/half.c): a load of
 * the element at mem (of MIR_T_U16) widened to an f32 register; a store of
 * f32 register x rounded to it; and a cast: x, of dtype from (a compute
 * dtype), rounded to half dtype d and widened back. */
MIR_reg_t jit_mir_half_load(lower_t* L, uj_dtype_t d, MIR_op_t mem);
void jit_mir_half_store(lower_t* L, uj_dtype_t d, MIR_op_t mem, MIR_reg_t x);
MIR_reg_t jit_mir_half_round(lower_t* L, uj_dtype_t d, uj_dtype_t from, MIR_reg_t x);

/* One expression or statement, as jit/mir/mir_emit.c lowers them. */
MIR_reg_t jit_mir_expr(lower_t* L, const ir_expr_t* e);
/* The register of e computed once, in the function's prologue, when e is
 * an operation on 0-d inputs and constants alone; else 0 (mir_scalars.c). */
MIR_reg_t jit_mir_scalar(lower_t* L, const ir_expr_t* e);
void jit_mir_stmt(lower_t* L, const ir_stmt_t* s);

/* Batched square roots (jit/mir/mir_batch.c). jit_mir_batchable: the plan for
 * block b when its roots can be batched, else NULL (free it with
 * jit_mir_batch_free). jit_mir_batch_roots: the roots' count and types, for
 * the runner (jit_strips_t). jit_mir_lower_strip_half: the body of half
 * `pass` (1 or 2) of the block, in a function whose sixth argument is
 * `scratch`. Inside half 2, jit_mir_batched: the register holding e's value
 * when e is a batched root, else 0; jit_mir_batched_local: the register
 * holding the value of local t when t is a root's argument, else 0. */
jit_mir_batch_t* jit_mir_batchable(const ir_func_t* f, const ir_block_t* b);
void jit_mir_batch_free(jit_mir_batch_t* B);
void jit_mir_batch_roots(const jit_mir_batch_t* B, int* nroots, unsigned char* f64);
void jit_mir_lower_strip_half(lower_t* L, jit_mir_batch_t* B, int pass, MIR_reg_t scratch);
MIR_reg_t jit_mir_batched(lower_t* L, const ir_expr_t* e);
MIR_reg_t jit_mir_batched_local(lower_t* L, int t);

/* Calls (jit/mir/mir_calls.c). jit_mir_unary_call, jit_mir_binary_call:
 * the FN_ a float op calls, or -1 when it is lowered inline.
 * jit_mir_note_calls: marks need[] for every call in e. jit_mir_declare_calls:
 * the prototypes and imports of the needed ones, in the module being built.
 * jit_mir_call: a call of fn on registers of its own type; jit_mir_call_f32:
 * the same on f32 registers (widened for a reference in double, the result
 * rounded once). */
int jit_mir_unary_call(uj_unary_op_t op, uj_dtype_t dt);
int jit_mir_binary_call(uj_binary_op_t op, uj_dtype_t dt);
void jit_mir_note_calls(const ir_expr_t* e, unsigned char* need);
void jit_mir_declare_calls(lower_t* L, const unsigned char* need);
MIR_reg_t jit_mir_call(lower_t* L, int fn, MIR_reg_t a, MIR_reg_t b);
MIR_reg_t jit_mir_call_f32(lower_t* L, int fn, MIR_reg_t a, MIR_reg_t b);

/* Inline f32 math (jit/mir/mir_math.c): each returns a new register. */
MIR_reg_t jit_mir_expf(lower_t* L, MIR_reg_t x);
MIR_reg_t jit_mir_logf(lower_t* L, MIR_reg_t x);
MIR_reg_t jit_mir_tanhf(lower_t* L, MIR_reg_t x);
MIR_reg_t jit_mir_sigmoidf(lower_t* L, MIR_reg_t x);
#endif

#endif
