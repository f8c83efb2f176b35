/* jit/mir/mir_calls.c: the functions a MIR module calls, and the calls.
 *
 * A float op that MIR does not lower inline (jit/mir/mir_emit.c for the
 * instructions, jit/mir/mir_math.c for f32 exp, log, tanh and sigmoid) calls
 * its reference from the op table (include/uopjit_ops.h) in double, an f32
 * value widened and the result rounded once: the interpreter's value, bit
 * for bit. Square roots keep their own float and double entries, which
 * jit/mir/mir_batch.c may replace by batched roots. A module imports only
 * the functions its blocks call (jit_mir_note_calls), each by its name, and
 * MIR links them through jit_mir_resolve. */
#ifdef UJ_HAVE_MIR
#include <math.h>
#include <string.h>

#include "mir_lower.h"

static const struct {
  const char* name;
  int f64, nargs;
  void* addr;
} libm[NFNS] = {
    [FN_SQRTF] = {"sqrtf", 0, 1, (void*)sqrtf},
    [FN_SQRT] = {"sqrt", 1, 1, (void*)sqrt},
#define UJ_ROW(NAME, spelling, flags, ref, cfn) [FN_U_##NAME] = {#ref, 1, 1, (void*)ref},
    UJ_UNARY_OPS(UJ_ROW)
#undef UJ_ROW
#define UJ_ROW(NAME, spelling, kind, flags, ref, cfn) [FN_B_##NAME] = {#ref, 1, 2, (void*)ref},
    UJ_BINARY_OPS(UJ_ROW)
#undef UJ_ROW
};

/* The function a float unary op calls, or -1 when it is lowered inline:
 * neg, abs and recip, and f32 exp, log, tanh and sigmoid (mir_math.c).
 * Any other op calls its reference in double, so that an f32 result is
 * the interpreter's, rounded once. */
int jit_mir_unary_call(uj_unary_op_t op, uj_dtype_t dt) {
  int f32 = dt == UJ_F32;
  switch (op) {
    case UJ_UNARY_NEG:
    case UJ_UNARY_ABS:
    case UJ_UNARY_RECIP: return -1;
    case UJ_UNARY_SQRT:
    case UJ_UNARY_RSQRT: return f32 ? FN_SQRTF : FN_SQRT;
    case UJ_UNARY_EXP:
    case UJ_UNARY_LOG:
    case UJ_UNARY_TANH:
    case UJ_UNARY_SIGMOID:
      if (f32) return -1;
      break;
    default: break;
  }
  return FN_U_NEG + (int)op;
}

/* The same for a binary op: pow (on any dtype: i32 through double) and
 * the float function ops; the others are instructions. */
int jit_mir_binary_call(uj_binary_op_t op, uj_dtype_t dt) {
  if (op == UJ_BINARY_POW) return FN_B_POW;
  if (dt == UJ_I32 || ir_binary_kind(op) != UJ_OP_CALL || op == UJ_BINARY_MAX || op == UJ_BINARY_MIN) return -1;
  return FN_B_ADD + (int)op;
}

void* jit_mir_resolve(const char* name) {
  for (int i = 0; i < NFNS; i++)
    if (!strcmp(name, libm[i].name)) return libm[i].addr;
  return NULL;
}

MIR_reg_t jit_mir_call(lower_t* L, int fn, MIR_reg_t a, MIR_reg_t b) {
  MIR_type_t t = libm[fn].f64 ? MIR_T_D : MIR_T_F;
  MIR_reg_t r = new_reg(L, t);
  MIR_item_t proto = L->proto[libm[fn].f64 * 2 + libm[fn].nargs - 1];
  MIR_op_t p = MIR_new_ref_op(L->ctx, proto), callee = MIR_new_ref_op(L->ctx, L->import[fn]);
  if (libm[fn].nargs == 1) emit(L, MIR_new_call_insn(L->ctx, 4, p, callee, R(r), R(a)));
  else emit(L, MIR_new_call_insn(L->ctx, 5, p, callee, R(r), R(a), R(b)));
  return r;
}

/* fn on f32 registers: widened to double for a reference in double, the
 * result rounded back once. */
MIR_reg_t jit_mir_call_f32(lower_t* L, int fn, MIR_reg_t a, MIR_reg_t b) {
  if (!libm[fn].f64) return jit_mir_call(L, fn, a, b);
  MIR_reg_t da = new_reg(L, MIR_T_D), db = b, r = new_reg(L, MIR_T_F);
  insn2(L, MIR_F2D, R(da), R(a));
  if (libm[fn].nargs == 2) {
    db = new_reg(L, MIR_T_D);
    insn2(L, MIR_F2D, R(db), R(b));
  }
  insn2(L, MIR_D2F, R(r), R(jit_mir_call(L, fn, da, db)));
  return r;
}

void jit_mir_note_calls(const ir_expr_t* e, unsigned char* need) {
  if (!e) return;
  int fn = -1;
  if (e->kind == IR_EX_UNARY && e->dtype != UJ_I32) fn = jit_mir_unary_call((uj_unary_op_t)e->op, e->dtype);
  if (e->kind == IR_EX_BINARY) fn = jit_mir_binary_call((uj_binary_op_t)e->op, e->dtype);
  if (fn >= 0) need[fn] = 1;
  jit_mir_note_calls(e->a, need);
  jit_mir_note_calls(e->b, need);
  jit_mir_note_calls(e->c, need);
}

void jit_mir_declare_calls(lower_t* L, const unsigned char* need) {
  unsigned char need_proto[4] = {0};
  for (int i = 0; i < NFNS; i++)
    if (need[i]) need_proto[libm[i].f64 * 2 + libm[i].nargs - 1] = 1;
  static const char* const proto_names[] = {"pf1", "pf2", "pd1", "pd2"};
  for (int i = 0; i < 4; i++) {
    MIR_type_t t = i >= 2 ? MIR_T_D : MIR_T_F;
    if (!need_proto[i]) continue;
    L->proto[i] = i % 2 ? MIR_new_proto(L->ctx, proto_names[i], 1, &t, 2, t, "a", t, "b")
                        : MIR_new_proto(L->ctx, proto_names[i], 1, &t, 1, t, "a");
  }
  for (int i = 0; i < NFNS; i++)
    if (need[i]) L->import[i] = MIR_new_import(L->ctx, libm[i].name);
}
#endif
