/* jit/c_like.c: the loop IR's expressions and statements printed in C
 * syntax, for the C and the CUDA emitters (see jit/c_like.h).
 *
 * Arithmetic matches the interpreter: f32 in float (the C compiler runs
 * with -ffp-contract=off, NVRTC with --fmad=false, so nothing the program
 * says is fused; only the C prelude's math functions fuse, explicitly),
 * index arithmetic wrapping through uint64, i32 wrapping through uint32, floor division and modulo with x/0 == 0,
 * fmax-like max/min written as ternaries, saturating float to i32. A
 * statement with run-time checked axes is guarded by `if (every checked
 * index is in range)`, evaluated innermost first so that an i32 index read
 * is itself checked before it is used: the interpreter's "an out-of-range
 * read skips the statement". A bf16/f16 element is a uint16_t, widened by
 * the prelude's uj_bf16_to_f32/uj_f16_to_f32 where it is loaded and
 * rounded by uj_f32_to_bf16/uj_f32_to_f16 where it is stored (ir/half.c). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_like.h"

/* ---- the dialects' spellings ---- */

enum { FN_INF, FN_NAN, FN_COUNT };

/* [dialect][f64][fn]: the C compiler's builtins, and the CUDA prelude's
 * bit-pattern infinities and NaNs. */
static const char* const fn_names[2][2][FN_COUNT] = {
    {{"__builtin_inff()", "__builtin_nanf(\"\")"}, {"__builtin_inf()", "__builtin_nan(\"\")"}},
    {{"uj_inff()", "uj_nanf()"}, {"uj_inf()", "uj_nan()"}}};

static const char* fn(const jit_cx_t* E, uj_dtype_t dt, int which) {
  return fn_names[E->dialect == JIT_CX_CUDA][dt == UJ_F64][which];
}

/* The op table's function names (include/uopjit_ops.h), double flavour;
 * the float one appends an f. */
static const char* const unary_cfn[UJ_UNARY_COUNT] = {
#define UJ_ROW(NAME, spelling, flags, ref, cfn) [UJ_UNARY_##NAME] = #cfn,
    UJ_UNARY_OPS(UJ_ROW)
#undef UJ_ROW
};
static const char* const binary_cfn[UJ_BINARY_COUNT] = {
#define UJ_ROW(NAME, spelling, kind, flags, ref, cfn) [UJ_BINARY_##NAME] = #cfn,
    UJ_BINARY_OPS(UJ_ROW)
#undef UJ_ROW
};

/* What the C dialect spells its own way: f32 exp, log, tanh, erf and
 * log1p are the C prelude's inline functions (which gcc vectorizes). */
static const char* const c_own_f32[UJ_UNARY_COUNT] = {
    [UJ_UNARY_EXP] = "uj_expf",   [UJ_UNARY_LOG] = "uj_logf", [UJ_UNARY_TANH] = "uj_tanhf",
    [UJ_UNARY_ERF] = "uj_erff",   [UJ_UNARY_LOG1P] = "uj_log1pf"};

/* Prints the function computing a table op: CUDA calls the device
 * library's or the prelude's function by the table's name; C calls the
 * compiler's builtin of a C library function (it needs no declaration,
 * and gcc expands the simple ones inline), or the prelude's. */
static void print_fn(jit_cx_t* E, const char* cfn, uj_dtype_t dt) {
  const char* suffix = dt == UJ_F32 ? "f" : "";
  int builtin = E->dialect != JIT_CX_CUDA && strncmp(cfn, "uj_", 3) != 0;
  rt_buf_printf(E->out, "%s%s%s", builtin ? "__builtin_" : "", cfn, suffix);
}

const char* jit_cx_extremum(uj_reduce_op_t op, uj_dtype_t dt) {
  int max = op == UJ_REDUCE_MAX;
  if (dt == UJ_I32) return max ? "(int32_t)uj_imax" : "(int32_t)uj_imin";
  if (dt == UJ_F32) return max ? "uj_fmaxf" : "uj_fminf";
  return max ? "uj_fmax" : "uj_fmin";
}

const char* jit_cx_ctype(uj_dtype_t d) {
  return d == UJ_F32 ? "float" : d == UJ_F64 ? "double" : ir_dtype_is_half(d) ? "uint16_t" : "int32_t";
}

/* The prelude's function that widens an element of half dtype d, or that
 * rounds an f32 to it. */
static const char* half_widen(uj_dtype_t d) { return d == UJ_BF16 ? "uj_bf16_to_f32" : "uj_f16_to_f32"; }
static const char* half_narrow(uj_dtype_t d) { return d == UJ_BF16 ? "uj_f32_to_bf16" : "uj_f32_to_f16"; }

/* Appended rather than printed: the emitters indent every line, and a
 * module is written at every memory-cache lookup of a new program. */
void jit_cx_indent(jit_cx_t* E, int depth) {
  static const char spaces[] = "                                                                ";
  for (int n = 2 * depth + 2; n > 0; n -= (int)sizeof spaces - 1)
    rt_buf_append(E->out, spaces, (size_t)(n < (int)sizeof spaces - 1 ? n : (int)sizeof spaces - 1));
}

uj_reduce_op_t* jit_cx_carried_ops(const ir_func_t* f) {
  uj_reduce_op_t* ops = calloc((size_t)f->next_carried_id + 1, sizeof *ops);
  if (!ops) return NULL;
  for (int b = 0; b < f->nblocks; b++)
    for (int k = 0; k < f->blocks[b].nloops; k++)
      for (int c = 0; c < f->blocks[b].loops[k].ncarried; c++)
        ops[f->blocks[b].loops[k].carried[c].id] = f->blocks[b].loops[k].carried[c].op;
  return ops;
}

/* ---- index expressions and accesses ---- */

static void print_dim(jit_cx_t* E, int t, int axis) {
  if (E->size_mode) {
    rt_buf_printf(E->out, "dims[%d]", t * UJ_MAX_DIMS + axis);
    return;
  }
  if (E->used_dims) E->used_dims[t * UJ_MAX_DIMS + axis] = 1;
  rt_buf_printf(E->out, "d%d_%d", t, axis);
}

static void emit_offset(jit_cx_t* E, const ir_access_t* acc) {
  if (acc->nidx == 0) {
    rt_buf_printf(E->out, "0");
    return;
  }
  for (int k = 1; k < acc->nidx; k++) rt_buf_printf(E->out, "(");
  for (int k = 0; k < acc->nidx; k++) {
    if (k > 0) {
      rt_buf_printf(E->out, " * ");
      print_dim(E, acc->tensor, k);
      rt_buf_printf(E->out, " + ");
    }
    rt_buf_printf(E->out, "(");
    jit_cx_ix(E, acc->idx[k]);
    rt_buf_printf(E->out, ")");
    if (k > 0) rt_buf_printf(E->out, ")");
  }
}

void jit_cx_access(jit_cx_t* E, const ir_access_t* acc) {
  if (E->access_hook && E->access_hook(E, acc)) return;
  if (E->f->tensors[acc->tensor].local) {
    rt_buf_printf(E->out, "t%d", acc->tensor);
    return;
  }
  if (E->used_tensors) E->used_tensors[acc->tensor] = 1;
  rt_buf_printf(E->out, "t%d[", acc->tensor);
  emit_offset(E, acc);
  rt_buf_printf(E->out, "]");
}

/* An int64 constant as a C expression of type uj_i64. INT64_MIN has no
 * literal (9223372036854775808 does not fit a long long), so it is
 * written as a difference. */
static void print_i64(jit_cx_t* E, int64_t v) {
  if (v == INT64_MIN) rt_buf_printf(E->out, "((uj_i64)-9223372036854775807LL - 1)");
  else rt_buf_printf(E->out, "(uj_i64)%lldLL", (long long)v);
}

static int wraps(ir_ix_kind_t kind) {
  return kind == IR_IX_ADD || kind == IR_IX_SUB || kind == IR_IX_MUL || kind == IR_IX_NEG;
}

/* ix as an expression of type uint64_t equal to it modulo 2^64: a chain of
 * +, - and * stays unsigned, anything else is converted at its leaf. */
static void print_u64(jit_cx_t* E, const ir_ix_t* ix) {
  static const char* const infix[] = {[IR_IX_ADD] = " + ", [IR_IX_SUB] = " - ", [IR_IX_MUL] = " * "};
  if (ix->kind == IR_IX_CONST && ix->value != INT64_MIN) {
    rt_buf_printf(E->out, "(uint64_t)%lldLL", (long long)ix->value);
  } else if (!wraps(ix->kind)) {
    rt_buf_printf(E->out, "(uint64_t)");
    jit_cx_ix(E, ix);
  } else if (ix->kind == IR_IX_NEG) {
    rt_buf_printf(E->out, "(0 - ");
    print_u64(E, ix->a);
    rt_buf_printf(E->out, ")");
  } else {
    rt_buf_printf(E->out, "(");
    print_u64(E, ix->a);
    rt_buf_printf(E->out, "%s", infix[ix->kind]);
    print_u64(E, ix->b);
    rt_buf_printf(E->out, ")");
  }
}

/* Index arithmetic wraps modulo 2^64, as in the interpreter and MIR
 * (ir/eval.c): +, - and * are computed on uint64_t and converted back.
 * Signed overflow would be undefined in C, and with $params folded in as
 * constants (INT64_MAX, say) the compiler simplifies (i0 * $p) / $p to i0
 * where the other engines wrap. The conversion back is implementation-
 * defined, modulo 2^64 in gcc, clang and NVRTC. The AOT's size code is the
 * exception: there an overflow is an error, as in the library. */
void jit_cx_ix(jit_cx_t* E, const ir_ix_t* ix) {
  if (E->size_mode && (wraps(ix->kind) || ix->kind == IR_IX_DIV || ix->kind == IR_IX_MOD)) {
    /* sizes are checked instead (the AOT's uj_sz_* helpers), as the
     * library's size evaluation does: an overflow or a division by zero
     * sets uj_bad */
    static const char* const checked[] = {[IR_IX_ADD] = "uj_sz_add", [IR_IX_SUB] = "uj_sz_sub",
                                          [IR_IX_MUL] = "uj_sz_mul", [IR_IX_DIV] = "uj_sz_div",
                                          [IR_IX_MOD] = "uj_sz_mod", [IR_IX_NEG] = "uj_sz_sub"};
    rt_buf_printf(E->out, "%s(&uj_bad, ", checked[ix->kind]);
    if (ix->kind == IR_IX_NEG) rt_buf_printf(E->out, "(uj_i64)0LL");
    else jit_cx_ix(E, ix->a);
    rt_buf_printf(E->out, ", ");
    jit_cx_ix(E, ix->kind == IR_IX_NEG ? ix->a : ix->b);
    rt_buf_printf(E->out, ")");
    return;
  }
  if (wraps(ix->kind)) {
    rt_buf_printf(E->out, "(uj_i64)");
    print_u64(E, ix);
    return;
  }
  switch (ix->kind) {
    case IR_IX_CONST: print_i64(E, ix->value); return;
    case IR_IX_LOOP: rt_buf_printf(E->out, "i%d", ix->id); return;
    case IR_IX_DIM: print_dim(E, ix->id, ix->axis); return;
    case IR_IX_PARAM:
      if (E->fold_params) {
        print_i64(E, E->params[ix->id]);
      } else {
        if (E->used_params) E->used_params[ix->id] = 1;
        rt_buf_printf(E->out, E->param_fmt, ix->id);
      }
      return;
    case IR_IX_LOAD:
      rt_buf_printf(E->out, "(uj_i64)");
      jit_cx_access(E, ix->load);
      return;
    default: {
      const char* name = ix->kind == IR_IX_DIV ? "uj_fdiv" : ix->kind == IR_IX_MOD ? "uj_fmod"
                         : ix->kind == IR_IX_MIN ? "uj_imin" : "uj_imax";
      rt_buf_printf(E->out, "%s(", name);
      jit_cx_ix(E, ix->a);
      rt_buf_printf(E->out, ", ");
      jit_cx_ix(E, ix->b);
      rt_buf_printf(E->out, ")");
    }
  }
}

/* ---- value expressions ---- */

void jit_cx_const(jit_cx_t* E, uj_dtype_t dt, double v) {
  if (dt == UJ_I32) {
    double c = v != v ? 0 : v >= 2147483647.0 ? 2147483647.0 : v <= -2147483648.0 ? -2147483648.0 : v;
    rt_buf_printf(E->out, "((int32_t)%lldLL)", (long long)c);
    return;
  }
  /* The value the interpreter gives the constant: an f32 constant is the
   * double rounded to float, so 1e39 is +inf and 1e-50 is 0. It is
   * classified after rounding, since a finite double can become an
   * infinity that no decimal literal spells. */
  double value = dt == UJ_F32 ? (double)(float)v : v;
  if (value != value) {
    rt_buf_printf(E->out, "%s", fn(E, dt, FN_NAN));
  } else if (isinf(value)) {
    rt_buf_printf(E->out, "%s%s", value < 0 ? "-" : "", fn(E, dt, FN_INF));
  } else {
    /* enough digits to read back exactly (subnormals included), and
     * always a floating literal ("-0" becomes "-0.0") */
    char text[40];
    snprintf(text, sizeof text, dt == UJ_F32 ? "%.9g" : "%.17g", value);
    if (!strpbrk(text, ".e")) strcat(text, ".0");
    rt_buf_printf(E->out, "%s%s", text, dt == UJ_F32 ? "f" : "");
  }
}

static void call1(jit_cx_t* E, const char* name, const ir_expr_t* a) {
  rt_buf_printf(E->out, "%s(", name);
  jit_cx_expr(E, a);
  rt_buf_printf(E->out, ")");
}

static void call2(jit_cx_t* E, const char* name, const ir_expr_t* a, const char* sep, const ir_expr_t* b,
                  const char* end) {
  rt_buf_printf(E->out, "%s", name);
  jit_cx_expr(E, a);
  rt_buf_printf(E->out, "%s", sep);
  jit_cx_expr(E, b);
  rt_buf_printf(E->out, "%s", end);
}

static void emit_unary(jit_cx_t* E, const ir_expr_t* e) {
  uj_unary_op_t op = (uj_unary_op_t)e->op;
  if (e->dtype == UJ_I32) {
    if (op == UJ_UNARY_NEG) {
      call1(E, "uj_wrap(0 - (uj_i64)", e->a);
      rt_buf_printf(E->out, ")");
    } else if (op == UJ_UNARY_ABS) {
      call2(E, "uj_wrap(uj_imax((uj_i64)(", e->a, "), -(uj_i64)(", e->a, ")))");
    } else if (op == UJ_UNARY_SIGN) {
      call2(E, "(int32_t)(((", e->a, ") > 0) - ((", e->a, ") < 0))");
    } else {
      call1(E, "", e->a); /* floor, ceil and round of an integer */
    }
    return;
  }
  int f32 = e->dtype == UJ_F32;
  switch (op) {
    case UJ_UNARY_NEG: call1(E, "-", e->a); return;
    case UJ_UNARY_RSQRT:
      rt_buf_printf(E->out, f32 ? "(1.0f / " : "(1.0 / ");
      print_fn(E, "sqrt", e->dtype);
      call1(E, "", e->a);
      rt_buf_printf(E->out, ")");
      return;
    /* bracketed whole, like every other value printed here: an operand of
     * a division printed after `/` must not split (a / (1.0 / (z))) */
    case UJ_UNARY_RECIP:
      rt_buf_printf(E->out, "(");
      call1(E, f32 ? "1.0f / " : "1.0 / ", e->a);
      rt_buf_printf(E->out, ")");
      return;
    default:
      if (f32 && E->dialect != JIT_CX_CUDA && c_own_f32[op]) rt_buf_printf(E->out, "%s", c_own_f32[op]);
      else print_fn(E, unary_cfn[op], e->dtype);
      call1(E, "", e->a);
      return;
  }
}

static void emit_binary(jit_cx_t* E, const ir_expr_t* e) {
  uj_binary_op_t op = (uj_binary_op_t)e->op;
  const char* one = e->dtype == UJ_F32 ? "1.0f" : e->dtype == UJ_F64 ? "1.0" : "1";
  const char* zero = e->dtype == UJ_F32 ? "0.0f" : e->dtype == UJ_F64 ? "0.0" : "0";
  char infix[8];
  snprintf(infix, sizeof infix, " %s ", ir_binary_name(op));
  if (ir_binary_is_compare(op)) {
    call2(E, "((", e->a, infix, e->b, ") ? ");
    rt_buf_printf(E->out, "(%s)%s : (%s)%s)", jit_cx_ctype(e->dtype), one, jit_cx_ctype(e->dtype), zero);
    return;
  }
  if (e->dtype == UJ_I32) {
    switch (op) {
      case UJ_BINARY_DIV: call2(E, "uj_wrap(uj_fdiv(", e->a, ", ", e->b, "))"); return;
      case UJ_BINARY_MOD: call2(E, "uj_wrap(uj_fmod(", e->a, ", ", e->b, "))"); return;
      case UJ_BINARY_FMOD: call2(E, "uj_wrap(uj_irem(", e->a, ", ", e->b, "))"); return;
      case UJ_BINARY_POW: call2(E, "uj_f2i(pow((double)", e->a, ", (double)", e->b, "))"); return;
      case UJ_BINARY_MAX: call2(E, "(int32_t)uj_imax(", e->a, ", ", e->b, ")"); return;
      case UJ_BINARY_MIN: call2(E, "(int32_t)uj_imin(", e->a, ", ", e->b, ")"); return;
      default:
        rt_buf_printf(E->out, "uj_wrap((uj_i64)(");
        jit_cx_expr(E, e->a);
        rt_buf_printf(E->out, ")%s(uj_i64)(", infix);
        jit_cx_expr(E, e->b);
        rt_buf_printf(E->out, "))");
        return;
    }
  }
  for (int i = 0; i < E->ndivides; i++)
    if (E->divides[i] == e) {
      rt_buf_printf(E->out, "uj_fdiv_r(");
      jit_cx_expr(E, e->a);
      rt_buf_printf(E->out, ", uj_d%d, uj_r%d)", i, i);
      return;
    }
  if (ir_binary_kind(op) == UJ_OP_CALL) {
    print_fn(E, binary_cfn[op], e->dtype);
    call2(E, "(", e->a, ", ", e->b, ")");
    return;
  }
  call2(E, "(", e->a, infix, e->b, ")");
}

/* 1 when e calls a math function somewhere (exp, log1p, pow, ...). */
static int calls_math(const ir_expr_t* e) {
  if (!e) return 0;
  if ((e->kind == IR_EX_UNARY || e->kind == IR_EX_BINARY) && ir_expr_op_is_transcendental(e)) return 1;
  return calls_math(e->a) || calls_math(e->b) || calls_math(e->c);
}

void jit_cx_expr(jit_cx_t* E, const ir_expr_t* e) {
  switch (e->kind) {
    case IR_EX_CONST: jit_cx_const(E, e->dtype, e->value); return;
    case IR_EX_LOAD: {
      uj_dtype_t td = E->f->tensors[e->access.tensor].dtype;
      if (ir_dtype_is_half(td)) rt_buf_printf(E->out, "%s(", half_widen(td));
      jit_cx_access(E, &e->access);
      if (ir_dtype_is_half(td)) rt_buf_printf(E->out, ")");
      return;
    }
    case IR_EX_CARRIED: {
      uj_reduce_op_t op = E->carried_op[e->carried];
      if (ir_reduce_is_arg(op)) rt_buf_printf(E->out, "uj_wrap(c%da)", e->carried);
      else rt_buf_printf(E->out, "c%d", e->carried);
      return;
    }
    case IR_EX_INDEX:
      rt_buf_printf(E->out, e->dtype == UJ_I32 ? "uj_wrap((" : "((%s)(", jit_cx_ctype(e->dtype));
      jit_cx_ix(E, e->ix);
      rt_buf_printf(E->out, "))");
      return;
    case IR_EX_UNARY: emit_unary(E, e); return;
    case IR_EX_BINARY: emit_binary(E, e); return;
    case IR_EX_WHERE:
      if (E->dialect != JIT_CX_CUDA && e->dtype == UJ_F32 && (calls_math(e->b) || calls_math(e->c))) {
        /* both sides computed, one kept by a bit mask: a ?: whose side
         * calls exp or log stays a branch under gcc 12, and the loop
         * scalar; the value is the same (the sides are pure, and a
         * statement's reads are in range before it runs) */
        call2(E, "uj_selectf((", e->a, ") != 0, ", e->b, ", ");
        jit_cx_expr(E, e->c);
        rt_buf_printf(E->out, ")");
        return;
      }
      call2(E, "((", e->a, ") != 0 ? (", e->b, ") : (");
      jit_cx_expr(E, e->c);
      rt_buf_printf(E->out, "))");
      return;
    case IR_EX_CAST:
      if (ir_dtype_is_half(e->dtype)) {
        /* rounded to the half and widened back: a half value is carried
         * as f32; from f64 or i32 through f32 rounded to odd, so that it
         * rounds once */
        rt_buf_printf(E->out, "%s(%s(", half_widen(e->dtype), half_narrow(e->dtype));
        if (e->a->dtype == UJ_F64) call1(E, "uj_f64_to_f32_odd", e->a);
        else if (e->a->dtype == UJ_I32) call1(E, "uj_f64_to_f32_odd((double)", e->a), rt_buf_printf(E->out, ")");
        else call1(E, "", e->a);
        rt_buf_printf(E->out, "))");
      } else if (e->dtype == UJ_I32 && e->a->dtype != UJ_I32) call1(E, "uj_f2i", e->a);
      else rt_buf_printf(E->out, "(%s)", jit_cx_ctype(e->dtype)), call1(E, "", e->a);
      return;
  }
}

/* ---- statements ---- */

/* One condition of a statement's guard: a checked axis in range
 * (ir_walk_checks gives them in the order they must be tested). */
typedef struct {
  jit_cx_t* E;
  int n;
} guard_t;

static void print_check(void* ctx, const ir_access_t* acc, int axis) {
  guard_t* g = ctx;
  rt_buf_printf(g->E->out, "%s(uint64_t)(", g->n++ ? " && " : "");
  jit_cx_ix(g->E, acc->idx[axis]);
  rt_buf_printf(g->E->out, ") < (uint64_t)");
  print_dim(g->E, acc->tensor, axis);
}

/* An accumulation into lane uj_l of the carried variable's partial results
 * (jit/c/c_reduce.c says why each form is the interpreter's). */
static void emit_lane_accum(jit_cx_t* E, const ir_stmt_t* s) {
  int c = s->carried;
  uj_reduce_op_t op = E->carried_op[c];
  int fl = s->value->dtype != UJ_I32;
  if (ir_reduce_is_arithmetic(op)) {
    rt_buf_printf(E->out, "c%d_l[uj_l] %s %s(", c, op == UJ_REDUCE_PROD ? "*=" : "+=", fl ? "" : "(uint32_t)");
    jit_cx_expr(E, s->value);
    rt_buf_printf(E->out, ");\n");
    return;
  }
  int up = ir_reduce_keeps_greater(op);
  rt_buf_printf(E->out, "{ %s v = ", jit_cx_ctype(s->value->dtype));
  jit_cx_expr(E, s->value);
  if (!ir_reduce_is_arg(op)) {
    rt_buf_printf(E->out, "; c%d_l[uj_l] = v %s c%d_l[uj_l] ? v : c%d_l[uj_l]; }\n", c, up ? ">" : "<", c, c);
    return;
  }
  rt_buf_printf(E->out, "; uj_i64 at = ");
  jit_cx_ix(E, s->arg_index);
  rt_buf_printf(E->out, "; if (v %s c%d_l[uj_l]) { c%d_l[uj_l] = v; c%da_l[uj_l] = at; } }\n", up ? ">" : "<", c, c, c);
}

static void emit_accum(jit_cx_t* E, const ir_stmt_t* s) {
  int c = s->carried;
  uj_reduce_op_t op = E->carried_op[c];
  int fl = s->value->dtype != UJ_I32;
  if (E->lanes) {
    emit_lane_accum(E, s);
    return;
  }
  switch (op) {
    case UJ_REDUCE_SUM:
    case UJ_REDUCE_MEAN:
    case UJ_REDUCE_PROD:
      if (fl) rt_buf_printf(E->out, "c%d %s ", c, op == UJ_REDUCE_PROD ? "*=" : "+=");
      else rt_buf_printf(E->out, "c%d = uj_wrap((uj_i64)c%d %s (uj_i64)", c, c, op == UJ_REDUCE_PROD ? "*" : "+");
      jit_cx_expr(E, s->value);
      rt_buf_printf(E->out, fl ? ";\n" : ");\n");
      return;
    case UJ_REDUCE_MAX:
    case UJ_REDUCE_MIN: {
      /* the new value is the first argument: it wins unless the old is larger (fmax-like) */
      rt_buf_printf(E->out, "c%d = %s(", c, jit_cx_extremum(op, s->value->dtype));
      jit_cx_expr(E, s->value);
      rt_buf_printf(E->out, ", c%d);\n", c);
      return;
    }
    default: {
      /* argmax/argmin: strictly better wins, so ties keep the first; for i32
       * the identity is a valid value, so the first element always enters */
      rt_buf_printf(E->out, "{ %s v = ", jit_cx_ctype(s->value->dtype));
      jit_cx_expr(E, s->value);
      rt_buf_printf(E->out, "; uj_i64 at = ");
      jit_cx_ix(E, s->arg_index);
      rt_buf_printf(E->out, "; if (v %s c%d%s) { c%d = v; c%da = at; } }\n", ir_reduce_keeps_greater(op) ? ">" : "<", c,
                    fl ? "" : " || at == 0", c, c);
      return;
    }
  }
}

void jit_cx_stmt(jit_cx_t* E, const ir_stmt_t* s, int depth) {
  jit_cx_indent(E, depth);
  if (ir_stmt_has_checks(s)) {
    guard_t g = {E, 0};
    rt_buf_printf(E->out, "if (");
    ir_walk_checks(s, print_check, &g);
    rt_buf_printf(E->out, ") ");
  }
  if (s->kind == IR_ST_ACCUM) {
    emit_accum(E, s);
    return;
  }
  int i32 = E->f->tensors[s->target.tensor].dtype == UJ_I32;
  if (s->kind == IR_ST_SCATTER_ADD && E->atomic_scatter && E->atomic_scatter[s->target.tensor]) {
    /* iterations on other threads may add into the same element; i32
     * atomicAdd wraps as uj_wrap does */
    rt_buf_printf(E->out, "atomicAdd(%s&", i32 ? "(int*)" : "");
    jit_cx_access(E, &s->target);
    rt_buf_printf(E->out, ", ");
    jit_cx_expr(E, s->value);
    rt_buf_printf(E->out, ");\n");
    return;
  }
  jit_cx_access(E, &s->target);
  if (s->kind == IR_ST_SCATTER_ADD && i32) {
    rt_buf_printf(E->out, " = uj_wrap((uj_i64)");
    jit_cx_access(E, &s->target);
    rt_buf_printf(E->out, " + (uj_i64)");
    jit_cx_expr(E, s->value);
    rt_buf_printf(E->out, ");\n");
    return;
  }
  uj_dtype_t td = E->f->tensors[s->target.tensor].dtype;
  if (ir_dtype_is_half(td)) { /* a store (ir_verify: no scatter-add into a half) */
    rt_buf_printf(E->out, " = %s(", half_narrow(td));
    jit_cx_expr(E, s->value);
    rt_buf_printf(E->out, ");\n");
    return;
  }
  rt_buf_printf(E->out, s->kind == IR_ST_SCATTER_ADD ? " += " : " = ");
  jit_cx_expr(E, s->value);
  rt_buf_printf(E->out, ";\n");
}

/* Locals whose statements sit in loop l: declared at the top of its body,
 * so each iteration (and each thread) has its own. */
void jit_cx_locals(jit_cx_t* E, const ir_loop_t* l, int depth) {
  for (int s = 0; s < l->nstmts; s++) {
    const ir_access_t* t = &l->stmts[s].target;
    if (l->stmts[s].kind == IR_ST_ACCUM || !E->f->tensors[t->tensor].local) continue;
    int first = 1;
    for (int j = 0; j < s && first; j++)
      first = l->stmts[j].kind == IR_ST_ACCUM || l->stmts[j].target.tensor != t->tensor;
    if (!first) continue;
    jit_cx_indent(E, depth);
    rt_buf_printf(E->out, "%s t%d;\n", jit_cx_ctype(E->f->tensors[t->tensor].dtype), t->tensor);
  }
}

void jit_cx_identity(jit_cx_t* E, uj_reduce_op_t op, uj_dtype_t dt) {
  double v = ir_reduce_identity(op, dt);
  if (isinf(v)) rt_buf_printf(E->out, "%s%s", v < 0 ? "-" : "", fn(E, dt, FN_INF));
  else if (v == (double)INT32_MIN) rt_buf_printf(E->out, "(-2147483647 - 1)"); /* -2147483648 is not an int literal */
  else rt_buf_printf(E->out, "%.0f", v);
}

void jit_cx_carried(jit_cx_t* E, const ir_carried_t* c, int depth) {
  jit_cx_indent(E, depth);
  rt_buf_printf(E->out, "%s c%d = ", jit_cx_ctype(c->dtype), c->id);
  jit_cx_identity(E, c->op, c->dtype);
  rt_buf_printf(E->out, ";");
  if (ir_reduce_is_arg(c->op)) rt_buf_printf(E->out, " uj_i64 c%da = 0;", c->id);
  rt_buf_printf(E->out, "\n");
}

/* ---- one iteration of a loop (ir_walk_iteration) ---- */

typedef struct {
  jit_cx_t* E;
  int depth;
  jit_cx_loop_fn inner;
  void* inner_ctx;
} iteration_t;

static void iteration_reset(void* ctx, const ir_carried_t* c, int k) {
  (void)k;
  iteration_t* it = ctx;
  jit_cx_carried(it->E, c, it->depth);
}

static void iteration_locals(void* ctx, const ir_loop_t* l, int k) {
  (void)k;
  iteration_t* it = ctx;
  jit_cx_locals(it->E, l, it->depth);
}

static void iteration_inner(void* ctx, const ir_block_t* b, int k) {
  iteration_t* it = ctx;
  it->inner(it->inner_ctx, b, k, it->depth);
}

static void iteration_stmt(void* ctx, const ir_stmt_t* s, int k) {
  (void)k;
  iteration_t* it = ctx;
  jit_cx_stmt(it->E, s, it->depth);
}

void jit_cx_iteration(jit_cx_t* E, const ir_block_t* b, int k, int depth, jit_cx_loop_fn inner, void* inner_ctx) {
  static const ir_iteration_visitor_t visitor = {iteration_reset, iteration_locals, iteration_inner, iteration_stmt};
  iteration_t it = {E, depth, inner, inner_ctx};
  ir_walk_iteration(b, k, &visitor, &it);
}
