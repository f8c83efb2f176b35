/* jit/mir/mir_emit.c: loop IR to MIR instructions, through the MIR API
 * (DESIGN section 7, "MIR").
 *
 * The walk is the interpreter's (ir_walk_iteration): one function
 * b<N>(buf, dims, params, begin, end) per block, whose outermost loop runs
 * [begin, end). A statement with run-time checked axes branches past itself
 * when an index is out of range, checking an i32 index read before using it.
 *
 * Values live in MIR registers: f32 in F (MIR rounds each operation to f32,
 * as the interpreter does), f64 in D, i32 sign-extended in I64 and
 * re-wrapped (EXT32) after each operation that can leave the 32-bit range;
 * bf16 and f16 widen to f32 when loaded and round when stored
 * (jit/mir/mir_half.c). Index arithmetic is 64-bit; locals and carried
 * variables are registers. Nothing from the program's text reaches MIR:
 * registers, functions and the module are named by number. */
#ifdef UJ_HAVE_MIR
#include "mir_lower.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Instruction codes for one floating type. */
typedef struct {
  MIR_type_t type;
  MIR_insn_code_t mov, add, sub, mul, div, neg, eq, ne, lt, le, gt, ge, blt, ble, bgt, bge, beq, bne, from_int;
} float_ops_t;
static const float_ops_t ops_f32 = {MIR_T_F, MIR_FMOV, MIR_FADD, MIR_FSUB, MIR_FMUL, MIR_FDIV, MIR_FNEG, MIR_FEQ,
                                    MIR_FNE, MIR_FLT, MIR_FLE, MIR_FGT, MIR_FGE, MIR_FBLT, MIR_FBLE, MIR_FBGT,
                                    MIR_FBGE, MIR_FBEQ, MIR_FBNE, MIR_I2F};
static const float_ops_t ops_f64 = {MIR_T_D, MIR_DMOV, MIR_DADD, MIR_DSUB, MIR_DMUL, MIR_DDIV, MIR_DNEG, MIR_DEQ,
                                    MIR_DNE, MIR_DLT, MIR_DLE, MIR_DGT, MIR_DGE, MIR_DBLT, MIR_DBLE, MIR_DBGT,
                                    MIR_DBGE, MIR_DBEQ, MIR_DBNE, MIR_I2D};

static const float_ops_t* fops(uj_dtype_t d) { return d == UJ_F64 ? &ops_f64 : &ops_f32; }

/* Tensor bases and sizes are loaded once at function entry, as are floating
 * constants (constant(), mir_lower.h): MIR has no floating immediates in
 * instructions, and its level-2 optimizer does not hoist loads out of
 * loops. For the same reason an operation on 0-d inputs and constants
 * alone is computed once, in a prologue before the loops (jit_mir_scalar). */
static MIR_reg_t base_reg(lower_t* L, int t) {
  if (!L->base[t]) {
    L->base[t] = new_reg(L, MIR_T_I64);
    emit_at_entry(L, MIR_new_insn(L->ctx, MIR_MOV, R(L->base[t]),
                                  MIR_new_mem_op(L->ctx, MIR_T_P, 8 * t, L->arg_buf, 0, 1)));
  }
  return L->base[t];
}

static MIR_reg_t dim_reg(lower_t* L, int t, int axis) {
  int at = t * UJ_MAX_DIMS + axis;
  if (!L->dim[at]) {
    L->dim[at] = new_reg(L, MIR_T_I64);
    emit_at_entry(L, MIR_new_insn(L->ctx, MIR_MOV, R(L->dim[at]),
                                  MIR_new_mem_op(L->ctx, MIR_T_I64, 8 * at, L->arg_dims, 0, 1)));
  }
  return L->dim[at];
}

static MIR_reg_t local_reg(lower_t* L, int t) {
  if (!L->local[t]) L->local[t] = new_reg(L, reg_type(L->f->tensors[t].dtype));
  return L->local[t];
}

/* ---- index expressions (64-bit) ---- */

static MIR_reg_t lower_ix(lower_t* L, const ir_ix_t* ix);
static MIR_op_t access_mem(lower_t* L, const ir_access_t* acc);

/* Floor division (modulo 0), floor remainder (1) or truncating remainder
 * (2, fmod) with x/0 == x%0 == 0, as ir_floordiv, ir_floormod, ir_binary_i32. */
static MIR_reg_t floor_divmod(lower_t* L, MIR_reg_t a, MIR_reg_t b, int modulo) {
  MIR_reg_t r = new_reg(L, MIR_T_I64), m = new_reg(L, MIR_T_I64), sign = new_reg(L, MIR_T_I64);
  MIR_insn_t done = MIR_new_label(L->ctx), general = MIR_new_label(L->ctx);
  insn2(L, MIR_MOV, R(r), IMM(0));
  insn3(L, MIR_BEQ, LBL(done), R(b), IMM(0));
  insn3(L, MIR_BNE, LBL(general), R(b), IMM(-1));
  /* b == -1: the quotient is -a (wrapping, where a / -1 would trap), the remainder 0 */
  if (!modulo) insn2(L, MIR_NEG, R(r), R(a));
  jump(L, done);
  emit(L, general);
  if (modulo) {
    insn3(L, MIR_MOD, R(r), R(a), R(b));
    if (modulo == 2) jump(L, done); /* fmod: the remainder of truncation */
    insn3(L, MIR_BEQ, LBL(done), R(r), IMM(0));
    insn3(L, MIR_XOR, R(sign), R(r), R(b));
    insn3(L, MIR_BGE, LBL(done), R(sign), IMM(0));
    insn3(L, MIR_ADD, R(r), R(r), R(b));
  } else {
    insn3(L, MIR_DIV, R(r), R(a), R(b));
    insn3(L, MIR_MOD, R(m), R(a), R(b));
    insn3(L, MIR_BEQ, LBL(done), R(m), IMM(0));
    insn3(L, MIR_XOR, R(sign), R(a), R(b));
    insn3(L, MIR_BGE, LBL(done), R(sign), IMM(0));
    insn3(L, MIR_SUB, R(r), R(r), IMM(1));
  }
  emit(L, done);
  return r;
}

/* r = (a `cmp` b) ? a : b for a branch code cmp: min with BLE, max with BGE. */
static MIR_reg_t pick(lower_t* L, MIR_insn_code_t keep_a, MIR_type_t type, MIR_insn_code_t mov, MIR_reg_t a,
                      MIR_reg_t b) {
  MIR_reg_t r = new_reg(L, type);
  MIR_insn_t done = MIR_new_label(L->ctx);
  insn2(L, mov, R(r), R(a));
  insn3(L, keep_a, LBL(done), R(a), R(b));
  insn2(L, mov, R(r), R(b));
  emit(L, done);
  return r;
}

static MIR_reg_t lower_ix(lower_t* L, const ir_ix_t* ix) {
  MIR_reg_t r;
  switch (ix->kind) {
    case IR_IX_CONST:
      r = new_reg(L, MIR_T_I64);
      insn2(L, MIR_MOV, R(r), IMM(ix->value));
      return r;
    case IR_IX_LOOP: return L->loop[ix->id];
    case IR_IX_DIM: return dim_reg(L, ix->id, ix->axis);
    case IR_IX_PARAM:
      r = new_reg(L, MIR_T_I64);
      if (L->params) insn2(L, MIR_MOV, R(r), IMM(L->params[ix->id]));
      else insn2(L, MIR_MOV, R(r), MIR_new_mem_op(L->ctx, MIR_T_I64, 8 * ix->id, L->arg_params, 0, 1));
      return r;
    case IR_IX_LOAD:
      if (L->f->tensors[ix->load->tensor].local) return local_reg(L, ix->load->tensor);
      r = new_reg(L, MIR_T_I64);
      insn2(L, MIR_MOV, R(r), access_mem(L, ix->load)); /* an i32 element, sign-extended */
      return r;
    case IR_IX_NEG:
      r = new_reg(L, MIR_T_I64);
      insn2(L, MIR_NEG, R(r), R(lower_ix(L, ix->a)));
      return r;
    default: break;
  }
  MIR_reg_t a = lower_ix(L, ix->a), b = lower_ix(L, ix->b);
  switch (ix->kind) {
    case IR_IX_DIV: return floor_divmod(L, a, b, 0);
    case IR_IX_MOD: return floor_divmod(L, a, b, 1);
    case IR_IX_MIN: return pick(L, MIR_BLE, MIR_T_I64, MIR_MOV, a, b);
    case IR_IX_MAX: return pick(L, MIR_BGE, MIR_T_I64, MIR_MOV, a, b);
    default: break;
  }
  r = new_reg(L, MIR_T_I64);
  insn3(L, ix->kind == IR_IX_ADD ? MIR_ADD : ix->kind == IR_IX_SUB ? MIR_SUB : MIR_MUL, R(r), R(a), R(b));
  return r;
}

/* The memory operand of a (non-local) tensor element: row-major offset
 * ((i0 * d1 + i1) * d2 + i2) ... scaled by the element size. */
static MIR_op_t access_mem(lower_t* L, const ir_access_t* acc) {
  uj_dtype_t d = L->f->tensors[acc->tensor].dtype;
  MIR_reg_t base = base_reg(L, acc->tensor);
  if (acc->nidx == 0) return MIR_new_mem_op(L->ctx, mem_type(d), 0, base, 0, 1);
  MIR_reg_t off = lower_ix(L, acc->idx[0]);
  for (int k = 1; k < acc->nidx; k++) {
    MIR_reg_t scaled = new_reg(L, MIR_T_I64), sum = new_reg(L, MIR_T_I64);
    insn3(L, MIR_MUL, R(scaled), R(off), R(dim_reg(L, acc->tensor, k)));
    insn3(L, MIR_ADD, R(sum), R(scaled), R(lower_ix(L, acc->idx[k])));
    off = sum;
  }
  return MIR_new_mem_op(L->ctx, mem_type(d), 0, base, off, (MIR_scale_t)uj_dtype_size(d));
}

/* ---- value expressions ---- */

static MIR_reg_t wrap32(lower_t* L, MIR_reg_t x) {
  MIR_reg_t r = new_reg(L, MIR_T_I64);
  insn2(L, MIR_EXT32, R(r), R(x));
  return r;
}

/* Float (f32 converted exactly to f64) to i32, saturating, NaN to 0. */
static MIR_reg_t saturate_i32(lower_t* L, MIR_reg_t x, uj_dtype_t from) {
  MIR_reg_t d = x;
  if (from == UJ_F32) {
    d = new_reg(L, MIR_T_D);
    insn2(L, MIR_F2D, R(d), R(x));
  }
  MIR_reg_t r = new_reg(L, MIR_T_I64);
  MIR_insn_t done = MIR_new_label(L->ctx);
  insn2(L, MIR_MOV, R(r), IMM(0));
  insn3(L, MIR_DBNE, LBL(done), R(d), R(d));
  insn2(L, MIR_MOV, R(r), IMM(2147483647));
  insn3(L, MIR_DBGE, LBL(done), R(d), R(constant(L, UJ_F64, 2147483647.0)));
  insn2(L, MIR_MOV, R(r), IMM(-2147483647 - 1));
  insn3(L, MIR_DBLE, LBL(done), R(d), R(constant(L, UJ_F64, -2147483648.0)));
  insn2(L, MIR_D2I, R(r), R(d));
  emit(L, done);
  return r;
}

/* |x| by clearing the sign bit, as fabs does (also for -0 and NaN). */
static MIR_reg_t lower_fabs(lower_t* L, MIR_reg_t x, uj_dtype_t d) {
  if (d == UJ_F32) {
    MIR_reg_t u = bits_of(L, x);
    insn3(L, MIR_AND, R(u), R(u), IMM(0x7fffffff));
    return float_of(L, u);
  }
  MIR_reg_t slot = slot_reg(L), u = new_reg(L, MIR_T_I64), r = new_reg(L, MIR_T_D);
  insn2(L, MIR_DMOV, MIR_new_mem_op(L->ctx, MIR_T_D, 0, slot, 0, 1), R(x));
  insn2(L, MIR_MOV, R(u), MIR_new_mem_op(L->ctx, MIR_T_I64, 0, slot, 0, 1));
  insn3(L, MIR_AND, R(u), R(u), IMM(INT64_MAX));
  insn2(L, MIR_MOV, MIR_new_mem_op(L->ctx, MIR_T_I64, 0, slot, 0, 1), R(u));
  insn2(L, MIR_DMOV, R(r), MIR_new_mem_op(L->ctx, MIR_T_D, 0, slot, 0, 1));
  return r;
}

static MIR_reg_t lower_expr(lower_t* L, const ir_expr_t* e);

/* MIR has no vector or sqrt instructions. f32 exp, log, tanh and sigmoid
 * are inline sequences (jit/mir/mir_math.c, with their error bounds). sqrt
 * is a call to sqrtf (an inline Newton iteration measured slower, its
 * dependency chain being longer than the call), made once per strip of
 * elements instead where jit/mir/mir_batch.c proves that safe; floor, sin,
 * cos, pow and every f64 function but sqrt are calls per element. */
static MIR_reg_t lower_unary(lower_t* L, const ir_expr_t* e) {
  uj_unary_op_t op = (uj_unary_op_t)e->op;
  MIR_reg_t a = lower_expr(L, e->a), r;
  if (e->dtype == UJ_I32) {
    if (op == UJ_UNARY_SIGN) {
      MIR_reg_t pos = new_reg(L, MIR_T_I64), neg = new_reg(L, MIR_T_I64);
      r = new_reg(L, MIR_T_I64);
      insn3(L, MIR_GT, R(pos), R(a), IMM(0));
      insn3(L, MIR_LT, R(neg), R(a), IMM(0));
      insn3(L, MIR_SUB, R(r), R(pos), R(neg));
      return r;
    }
    if (op != UJ_UNARY_NEG && op != UJ_UNARY_ABS) return a; /* floor, ceil, round of an integer */
    r = new_reg(L, MIR_T_I64);
    insn2(L, MIR_NEG, R(r), R(a));
    if (op == UJ_UNARY_ABS) r = pick(L, MIR_BGE, MIR_T_I64, MIR_MOV, a, r);
    return wrap32(L, r);
  }
  int f32 = e->dtype == UJ_F32;
  const float_ops_t* o = fops(e->dtype);
  switch (op) {
    case UJ_UNARY_NEG:
      r = new_reg(L, o->type);
      insn2(L, o->neg, R(r), R(a));
      return r;
    case UJ_UNARY_ABS: return lower_fabs(L, a, e->dtype);
    case UJ_UNARY_RSQRT:
    case UJ_UNARY_RECIP: {
      MIR_reg_t x = op == UJ_UNARY_RSQRT ? jit_mir_call(L, f32 ? FN_SQRTF : FN_SQRT, a, 0) : a;
      r = new_reg(L, o->type);
      insn3(L, o->div, R(r), R(constant(L, e->dtype, 1.0)), R(x));
      return r;
    }
    default:
      if (f32 && op == UJ_UNARY_EXP) return jit_mir_expf(L, a);
      if (f32 && op == UJ_UNARY_LOG) return jit_mir_logf(L, a);
      if (f32 && op == UJ_UNARY_TANH) return jit_mir_tanhf(L, a);
      if (f32 && op == UJ_UNARY_SIGMOID) return jit_mir_sigmoidf(L, a);
      return f32 ? jit_mir_call_f32(L, jit_mir_unary_call(op, e->dtype), a, 0) : jit_mir_call(L, jit_mir_unary_call(op, e->dtype), a, 0);
  }
}

/* fmax/fmin-like: a wins when it compares better or b is NaN. */
static MIR_reg_t float_extremum(lower_t* L, const float_ops_t* o, int is_max, MIR_reg_t a, MIR_reg_t b) {
  MIR_reg_t r = new_reg(L, o->type);
  MIR_insn_t done = MIR_new_label(L->ctx);
  insn2(L, o->mov, R(r), R(a));
  insn3(L, is_max ? o->bgt : o->blt, LBL(done), R(a), R(b));
  insn3(L, o->bne, LBL(done), R(b), R(b));
  insn2(L, o->mov, R(r), R(b));
  emit(L, done);
  return r;
}

static MIR_reg_t lower_binary(lower_t* L, const ir_expr_t* e) {
  uj_binary_op_t op = (uj_binary_op_t)e->op;
  MIR_reg_t a = lower_expr(L, e->a), b = lower_expr(L, e->b);
  int i32 = e->dtype == UJ_I32;
  const float_ops_t* o = fops(e->dtype);
  if (ir_binary_is_compare(op)) {
    static const MIR_insn_code_t int_cmp[] = {[UJ_BINARY_EQ] = MIR_EQ, [UJ_BINARY_NE] = MIR_NE,
                                              [UJ_BINARY_LT] = MIR_LT, [UJ_BINARY_LE] = MIR_LE,
                                              [UJ_BINARY_GT] = MIR_GT, [UJ_BINARY_GE] = MIR_GE};
    MIR_insn_code_t code = i32 ? int_cmp[op]
                           : op == UJ_BINARY_EQ ? o->eq : op == UJ_BINARY_NE ? o->ne : op == UJ_BINARY_LT ? o->lt
                           : op == UJ_BINARY_LE ? o->le : op == UJ_BINARY_GT ? o->gt : o->ge;
    MIR_reg_t flag = new_reg(L, MIR_T_I64);
    insn3(L, code, R(flag), R(a), R(b));
    if (i32) return flag;
    MIR_reg_t r = new_reg(L, o->type);
    insn2(L, o->from_int, R(r), R(flag));
    return r;
  }
  if (op == UJ_BINARY_MAX || op == UJ_BINARY_MIN) {
    if (!i32) return float_extremum(L, o, op == UJ_BINARY_MAX, a, b);
    return pick(L, op == UJ_BINARY_MAX ? MIR_BGE : MIR_BLE, MIR_T_I64, MIR_MOV, a, b);
  }
  if (op == UJ_BINARY_POW && i32) {
    MIR_reg_t da = new_reg(L, MIR_T_D), db = new_reg(L, MIR_T_D);
    insn2(L, MIR_I2D, R(da), R(a));
    insn2(L, MIR_I2D, R(db), R(b));
    return saturate_i32(L, jit_mir_call(L, FN_B_POW, da, db), UJ_F64);
  }
  int fn = jit_mir_binary_call(op, e->dtype);
  if (fn >= 0) return e->dtype == UJ_F32 ? jit_mir_call_f32(L, fn, a, b) : jit_mir_call(L, fn, a, b);
  if (i32 && op == UJ_BINARY_DIV) return wrap32(L, floor_divmod(L, a, b, 0));
  if (i32 && op == UJ_BINARY_MOD) return floor_divmod(L, a, b, 1);
  if (i32 && op == UJ_BINARY_FMOD) return floor_divmod(L, a, b, 2);
  MIR_insn_code_t code = op == UJ_BINARY_ADD ? (i32 ? MIR_ADD : o->add)
                         : op == UJ_BINARY_SUB ? (i32 ? MIR_SUB : o->sub)
                         : op == UJ_BINARY_MUL ? (i32 ? MIR_MUL : o->mul) : o->div;
  MIR_reg_t r = new_reg(L, reg_type(e->dtype));
  insn3(L, code, R(r), R(a), R(b));
  return i32 ? wrap32(L, r) : r;
}

static MIR_reg_t lower_cast(lower_t* L, const ir_expr_t* e) {
  /* a bf16/f16 operand is an f32 register */
  uj_dtype_t to = e->dtype, from = ir_dtype_compute(e->a->dtype);
  MIR_reg_t a = lower_expr(L, e->a);
  if (ir_dtype_is_half(to)) return jit_mir_half_round(L, to, from, a);
  if (to == from) return a;
  if (to == UJ_I32) return saturate_i32(L, a, from);
  MIR_reg_t r = new_reg(L, reg_type(to));
  MIR_insn_code_t code = from == UJ_I32 ? (to == UJ_F32 ? MIR_I2F : MIR_I2D) : to == UJ_F64 ? MIR_F2D : MIR_D2F;
  insn2(L, code, R(r), R(a));
  return r;
}

/* cond != 0 ? b : c, computing only the side taken. */
static MIR_reg_t lower_where(lower_t* L, const ir_expr_t* e) {
  MIR_reg_t cond = lower_expr(L, e->a), r = new_reg(L, reg_type(e->dtype));
  MIR_insn_t other = MIR_new_label(L->ctx), done = MIR_new_label(L->ctx);
  uj_dtype_t cd = e->a->dtype;
  insn3(L, cd == UJ_I32 ? MIR_BEQ : fops(cd)->beq, LBL(other), R(cond), R(constant(L, cd, 0.0)));
  insn2(L, mov_code(e->dtype), R(r), R(lower_expr(L, e->b)));
  jump(L, done);
  emit(L, other);
  insn2(L, mov_code(e->dtype), R(r), R(lower_expr(L, e->c)));
  emit(L, done);
  return r;
}

static MIR_reg_t lower_expr(lower_t* L, const ir_expr_t* e) {
  MIR_reg_t r;
  if ((r = jit_mir_scalar(L, e)) != 0) return r;
  switch (e->kind) {
    case IR_EX_CONST: return constant(L, e->dtype, e->value);
    case IR_EX_LOAD:
      if (L->f->tensors[e->access.tensor].local) return local_reg(L, e->access.tensor);
      if (ir_dtype_is_half(L->f->tensors[e->access.tensor].dtype))
        return jit_mir_half_load(L, L->f->tensors[e->access.tensor].dtype, access_mem(L, &e->access));
      r = new_reg(L, reg_type(e->dtype));
      insn2(L, mov_code(e->dtype), R(r), access_mem(L, &e->access));
      return r;
    case IR_EX_CARRIED: {
      uj_reduce_op_t op = L->carried_op[e->carried];
      if (ir_reduce_is_arg(op)) return wrap32(L, L->carried_at[e->carried]);
      return L->carried[e->carried];
    }
    case IR_EX_INDEX: {
      MIR_reg_t ix = lower_ix(L, e->ix);
      if (e->dtype == UJ_I32) return wrap32(L, ix);
      r = new_reg(L, reg_type(e->dtype));
      insn2(L, e->dtype == UJ_F32 ? MIR_I2F : MIR_I2D, R(r), R(ix));
      return r;
    }
    case IR_EX_UNARY: return !L->in_prologue && (r = jit_mir_batched(L, e)) ? r : lower_unary(L, e);
    case IR_EX_BINARY: return lower_binary(L, e);
    case IR_EX_WHERE: return lower_where(L, e);
    case IR_EX_CAST: return lower_cast(L, e);
  }
  return constant(L, e->dtype, 0.0);
}

/* ---- statements and loops ---- */

/* A branch to skip when a checked axis is out of range (ir_walk_checks
 * gives them in order: an i32 index read is checked before it is used). */
typedef struct {
  lower_t* L;
  MIR_insn_t skip;
} guard_t;

static void branch_unless_in_range(void* ctx, const ir_access_t* acc, int axis) {
  guard_t* g = ctx;
  lower_t* L = g->L; /* the operand macros name it */
  insn3(L, MIR_UBGE, LBL(g->skip), R(lower_ix(L, acc->idx[axis])), R(dim_reg(L, acc->tensor, axis)));
}

static void lower_accum(lower_t* L, const ir_stmt_t* s) {
  int c = s->carried;
  uj_reduce_op_t op = L->carried_op[c];
  uj_dtype_t d = s->value->dtype;
  const float_ops_t* o = fops(d);
  MIR_reg_t acc = L->carried[c], v = lower_expr(L, s->value);
  switch (op) {
    case UJ_REDUCE_SUM:
    case UJ_REDUCE_MEAN:
    case UJ_REDUCE_PROD: {
      int prod = op == UJ_REDUCE_PROD;
      if (d == UJ_I32) {
        insn3(L, prod ? MIR_MUL : MIR_ADD, R(acc), R(acc), R(v));
        insn2(L, MIR_EXT32, R(acc), R(acc));
      } else {
        insn3(L, prod ? o->mul : o->add, R(acc), R(acc), R(v));
      }
      return;
    }
    case UJ_REDUCE_MAX:
    case UJ_REDUCE_MIN: {
      /* the new value wins unless the old compares better (fmax-like) */
      MIR_reg_t best = d == UJ_I32 ? pick(L, op == UJ_REDUCE_MAX ? MIR_BGE : MIR_BLE, MIR_T_I64, MIR_MOV, v, acc)
                                   : float_extremum(L, o, op == UJ_REDUCE_MAX, v, acc);
      insn2(L, mov_code(d), R(acc), R(best));
      return;
    }
    default: {
      /* argmax/argmin: strictly better wins, so ties keep the first; an i32
       * identity is a valid value, so the first element always enters */
      MIR_reg_t at = lower_ix(L, s->arg_index);
      MIR_insn_t take = MIR_new_label(L->ctx), done = MIR_new_label(L->ctx);
      int up = ir_reduce_keeps_greater(op);
      if (d == UJ_I32) {
        insn3(L, up ? MIR_BGT : MIR_BLT, LBL(take), R(v), R(acc));
        insn3(L, MIR_BEQ, LBL(take), R(at), IMM(0));
      } else {
        insn3(L, up ? o->bgt : o->blt, LBL(take), R(v), R(acc));
      }
      jump(L, done);
      emit(L, take);
      insn2(L, mov_code(d), R(acc), R(v));
      insn2(L, MIR_MOV, R(L->carried_at[c]), R(at));
      emit(L, done);
      return;
    }
  }
}

static void lower_stmt(lower_t* L, const ir_stmt_t* s) {
  MIR_insn_t skip = ir_stmt_has_checks(s) ? MIR_new_label(L->ctx) : NULL;
  if (skip) {
    guard_t g = {L, skip};
    ir_walk_checks(s, branch_unless_in_range, &g);
  }
  if (s->kind == IR_ST_ACCUM) {
    lower_accum(L, s);
  } else {
    int t = s->target.tensor;
    uj_dtype_t d = L->f->tensors[t].dtype;
    MIR_reg_t v = L->f->tensors[t].local ? jit_mir_batched_local(L, t) : 0;
    if (!v) v = lower_expr(L, s->value);
    if (L->f->tensors[t].local) {
      insn2(L, mov_code(d), R(local_reg(L, t)), R(v));
    } else {
      MIR_op_t mem = access_mem(L, &s->target);
      if (ir_dtype_is_half(d)) { /* a store (ir_verify: no scatter-add into a half) */
        jit_mir_half_store(L, d, mem, v);
        if (skip) emit(L, skip);
        return;
      }
      if (s->kind == IR_ST_SCATTER_ADD) {
        MIR_reg_t old = new_reg(L, reg_type(d)), sum = new_reg(L, reg_type(d));
        insn2(L, mov_code(d), R(old), mem);
        insn3(L, d == UJ_I32 ? MIR_ADD : fops(d)->add, R(sum), R(old), R(v));
        v = sum; /* an i32 store keeps the low 32 bits: the wrap */
      }
      insn2(L, mov_code(d), mem, R(v));
    }
  }
  if (skip) emit(L, skip);
}

MIR_reg_t jit_mir_expr(lower_t* L, const ir_expr_t* e) { return lower_expr(L, e); }
void jit_mir_stmt(lower_t* L, const ir_stmt_t* s) { lower_stmt(L, s); }

static void init_carried(lower_t* L, const ir_carried_t* c) {
  MIR_reg_t r = L->carried[c->id];
  insn2(L, mov_code(c->dtype), R(r), R(constant(L, c->dtype, ir_reduce_identity(c->op, c->dtype))));
  if (ir_reduce_is_arg(c->op)) insn2(L, MIR_MOV, R(L->carried_at[c->id]), IMM(0));
}

/* Sums and products accumulated in loop l can take MIR_SUM_LANES partial
 * results (ir/lanes.c); max, min and the arg ops compare and branch, and
 * a branch does not wait on the previous one, so they gain nothing. */
#define MIR_SUM_LANES 4

static int sum_lanes_fit(lower_t* L, const ir_block_t* b, int k) {
  const ir_loop_t* l = &b->loops[k];
  if (!ir_lanes_fit(b, k)) return 0;
  for (int s = 0; s < l->nstmts; s++) {
    if (l->stmts[s].kind == IR_ST_ACCUM && !ir_reduce_is_arithmetic(L->carried_op[l->stmts[s].carried])) return 0;
  }
  return 1;
}

/* The iterations of loop l from i, in groups of MIR_SUM_LANES while a whole
 * group remains: iteration j of a group accumulates into partial result j
 * of each carried variable (the statements lowered once per j, with the
 * loop's index i + j), and after the groups the partial results are folded
 * into the variable as (p0 op p1) op (p2 op p3): an add no longer waits for
 * the one before it. i is left at the first iteration not run. */
static void lower_sum_lanes(lower_t* L, const ir_loop_t* l, MIR_reg_t i, MIR_reg_t end) {
  enum { N = MIR_SUM_LANES };
  MIR_reg_t saved[64], lanes[64][N];
  int ids[64], n = 0;
  for (int s = 0; s < l->nstmts && n < 64; s++) {
    int c = l->stmts[s].carried, seen = 0;
    if (l->stmts[s].kind != IR_ST_ACCUM) continue;
    for (int j = 0; j < n; j++) seen |= ids[j] == c;
    if (seen) continue;
    ids[n] = c;
    saved[n] = L->carried[c];
    uj_dtype_t d = l->stmts[s].value->dtype;
    double identity = ir_reduce_identity(L->carried_op[c], d);
    for (int j = 0; j < N; j++) {
      lanes[n][j] = new_reg(L, reg_type(d));
      insn2(L, mov_code(d), R(lanes[n][j]), R(constant(L, d, identity)));
    }
    n++;
  }
  MIR_reg_t last = new_reg(L, MIR_T_I64), ij = new_reg(L, MIR_T_I64);
  MIR_insn_t top = MIR_new_label(L->ctx), done = MIR_new_label(L->ctx);
  insn3(L, MIR_SUB, R(last), R(end), IMM(N - 1));
  insn3(L, MIR_BGE, LBL(done), R(i), R(last));
  emit(L, top);
  for (int j = 0; j < N; j++) {
    insn3(L, MIR_ADD, R(ij), R(i), IMM(j));
    L->loop[l->id] = ij;
    for (int c = 0; c < n; c++) L->carried[ids[c]] = lanes[c][j];
    for (int s = 0; s < l->nstmts; s++) lower_stmt(L, &l->stmts[s]);
  }
  L->loop[l->id] = i;
  insn3(L, MIR_ADD, R(i), R(i), IMM(N));
  insn3(L, MIR_BLT, LBL(top), R(i), R(last));
  emit(L, done);
  for (int c = 0; c < n; c++) {
    L->carried[ids[c]] = saved[c];
    int prod = L->carried_op[ids[c]] == UJ_REDUCE_PROD;
    MIR_reg_t* p = lanes[c];
    uj_dtype_t d = UJ_F32;
    for (int s = 0; s < l->nstmts; s++)
      if (l->stmts[s].kind == IR_ST_ACCUM && l->stmts[s].carried == ids[c]) d = l->stmts[s].value->dtype;
    MIR_insn_code_t code = d == UJ_I32 ? (prod ? MIR_MUL : MIR_ADD) : (prod ? fops(d)->mul : fops(d)->add);
    insn3(L, code, R(p[0]), R(p[0]), R(p[1]));
    insn3(L, code, R(p[2]), R(p[2]), R(p[3]));
    insn3(L, code, R(p[0]), R(p[0]), R(p[2]));
    insn3(L, code, R(saved[c]), R(saved[c]), R(p[0]));
    if (d == UJ_I32) insn2(L, MIR_EXT32, R(saved[c]), R(saved[c]));
  }
}

/* Loops are not unrolled: MIR's generator takes time in proportion to the
 * instructions it is given, so each copy of the body adds a full body's
 * compile, and the elements saved repay it only after dozens of calls while
 * a first call gets slower (docs/ENGINES.md, "Measured"). MIR's job is a
 * kernel's first calls; one called that often is worth the C engine's
 * compile. Sums keep partial results (lower_sum_lanes), which does pay: it
 * removes a dependency chain, not loop overhead. */
static void lower_loop(lower_t* L, const ir_block_t* b, int k) {
  const ir_loop_t* l = &b->loops[k];
  MIR_reg_t i = L->loop[l->id] = new_reg(L, MIR_T_I64), end = L->arg_end;
  if (k == 0) {
    insn2(L, MIR_MOV, R(i), R(L->arg_begin));
  } else {
    insn2(L, MIR_MOV, R(i), R(lower_ix(L, l->start)));
    end = new_reg(L, MIR_T_I64);
    insn2(L, MIR_MOV, R(end), R(lower_ix(L, l->end)));
  }
  if (sum_lanes_fit(L, b, k)) lower_sum_lanes(L, l, i, end);
  for (int c = 0; c < l->ncarried; c++) {
    const ir_carried_t* cv = &l->carried[c];
    L->carried[cv->id] = new_reg(L, reg_type(cv->dtype));
    if (ir_reduce_is_arg(cv->op)) L->carried_at[cv->id] = new_reg(L, MIR_T_I64);
  }
  MIR_insn_t top = MIR_new_label(L->ctx), exit = MIR_new_label(L->ctx);
  insn3(L, MIR_BGE, LBL(exit), R(i), R(end));
  emit(L, top);
  for (int c = 0; c < l->ncarried; c++) init_carried(L, &l->carried[c]);
  if (k + 1 < b->nloops) lower_loop(L, b, k + 1);
  for (int s = 0; s < l->nstmts; s++) lower_stmt(L, &l->stmts[s]);
  insn3(L, MIR_ADD, R(i), R(i), IMM(1));
  insn3(L, MIR_BLT, LBL(top), R(i), R(end));
  emit(L, exit);
}

/* Starts function `name` with the arguments of a jit_block_fn, and the
 * scratch pointer of a jit_strip_fn when `strip_half`. */
static void begin_func(lower_t* L, const char* name, int strip_half) {
  L->item = strip_half ? MIR_new_func(L->ctx, name, 0, NULL, 6, MIR_T_P, "buf", MIR_T_P, "dims", MIR_T_P, "params",
                                      MIR_T_I64, "begin", MIR_T_I64, "end", MIR_T_P, "scratch")
                       : MIR_new_func(L->ctx, name, 0, NULL, 5, MIR_T_P, "buf", MIR_T_P, "dims", MIR_T_P, "params",
                                      MIR_T_I64, "begin", MIR_T_I64, "end");
  L->func = L->item->u.func;
  L->arg_buf = MIR_reg(L->ctx, "buf", L->func);
  L->arg_dims = MIR_reg(L->ctx, "dims", L->func);
  L->arg_params = MIR_reg(L->ctx, "params", L->func);
  L->arg_begin = MIR_reg(L->ctx, "begin", L->func);
  L->arg_end = MIR_reg(L->ctx, "end", L->func);
  L->arg_scratch = strip_half ? MIR_reg(L->ctx, "scratch", L->func) : 0;
  L->slot = 0;
  L->exp2_base = 0;
  L->nhoisted = 0;
  const ir_func_t* f = L->f;
  memset(L->base, 0, sizeof *L->base * (size_t)f->ntensors);
  memset(L->local, 0, sizeof *L->local * (size_t)f->ntensors);
  memset(L->dim, 0, sizeof *L->dim * (size_t)f->ntensors * UJ_MAX_DIMS);
  L->in_prologue = 0;
  L->nscalars = 0;
  L->entry = MIR_new_label(L->ctx);
  emit(L, L->entry);
  /* after the loads emit_at_entry places after the entry, before the loops */
  L->prologue_end = MIR_new_label(L->ctx);
  emit(L, L->prologue_end);
}

static MIR_item_t end_func(lower_t* L) {
  emit(L, MIR_new_ret_insn(L->ctx, 0));
  MIR_finish_func(L->ctx);
  return L->item;
}

/* batch: the block's plan for batched roots, or NULL (jit/mir/mir_batch.c) */
static void lower_block(lower_t* L, int bi, jit_mir_batch_t* batch, jit_mir_block_t* out) {
  char name[32];
  if (batch) {
    snprintf(name, sizeof name, "a%d", bi);
    begin_func(L, name, 1);
    jit_mir_lower_strip_half(L, batch, 1, L->arg_scratch);
    out->args = end_func(L);
    jit_mir_batch_roots(batch, &out->nroots, out->f64);
  }
  snprintf(name, sizeof name, "b%d", bi);
  begin_func(L, name, batch != NULL);
  if (batch) jit_mir_lower_strip_half(L, batch, 2, L->arg_scratch);
  else lower_loop(L, &L->f->blocks[bi], 0);
  out->fn = end_func(L);
}

MIR_module_t jit_mir_lower(MIR_context_t ctx, const ir_func_t* f, const int64_t* params, const char* module_name,
                           jit_mir_block_t* blocks) {
  lower_t* L = calloc(1, sizeof *L);
  size_t nt = (size_t)f->ntensors + 1, nl = (size_t)f->next_loop_id + 1, nc = (size_t)f->next_carried_id + 1;
  if (L) {
    L->base = calloc(nt, sizeof *L->base);
    L->local = calloc(nt, sizeof *L->local);
    L->dim = calloc(nt * UJ_MAX_DIMS, sizeof *L->dim);
    L->loop = calloc(nl, sizeof *L->loop);
    L->carried = calloc(nc, sizeof *L->carried);
    L->carried_at = calloc(nc, sizeof *L->carried_at);
    L->carried_op = calloc(nc, sizeof *L->carried_op);
  }
  MIR_module_t m = NULL;
  jit_mir_batch_t** plans = calloc((size_t)f->nblocks + 1, sizeof *plans);
  if (L && L->base && L->local && L->dim && L->loop && L->carried && L->carried_at && L->carried_op && plans) {
    L->ctx = ctx;
    L->f = f;
    L->params = params;
    for (int b = 0; b < f->nblocks; b++)
      for (int k = 0; k < f->blocks[b].nloops; k++)
        for (int c = 0; c < f->blocks[b].loops[k].ncarried; c++)
          L->carried_op[f->blocks[b].loops[k].carried[c].id] = f->blocks[b].loops[k].carried[c].op;
    /* each block's plan for batched roots, made once: it decides the
     * imports and then how the block is lowered */
    unsigned char need[NFNS] = {0};
    for (int b = 0; b < f->nblocks; b++) {
      unsigned char block_need[NFNS] = {0};
      for (int k = 0; k < f->blocks[b].nloops; k++)
        for (int st = 0; st < f->blocks[b].loops[k].nstmts; st++)
          jit_mir_note_calls(f->blocks[b].loops[k].stmts[st].value, block_need);
      plans[b] = f->blocks[b].nloops ? jit_mir_batchable(f, &f->blocks[b]) : NULL;
      if (plans[b]) block_need[FN_SQRT] = block_need[FN_SQRTF] = 0; /* every root of the block is batched */
      for (int i = 0; i < NFNS; i++) need[i] |= block_need[i];
    }
    m = MIR_new_module(ctx, module_name);
    jit_mir_declare_calls(L, need);
    for (int b = 0; b < f->nblocks; b++)
      if (f->blocks[b].nloops) lower_block(L, b, plans[b], &blocks[b]);
    MIR_finish_module(ctx);
  }
  for (int b = 0; plans && b < f->nblocks; b++) jit_mir_batch_free(plans[b]);
  free(plans);
  if (L) {
    free(L->base);
    free(L->local);
    free(L->dim);
    free(L->loop);
    free(L->carried);
    free(L->carried_at);
    free(L->carried_op);
  }
  free(L);
  return m;
}
#endif
