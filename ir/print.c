/* ir/print.c: the loop IR as readable C-like text, and the canonical text
 * that ir_hash hashes (the form: above ir_print_stream).
 *
 * Algorithm: one walk over the function, writing through a callback
 * (ir/print.h) so that the same code feeds a buffer (ir_print) or the hash
 * (ir_hash) without allocating. A loop prints its carried declarations
 * (reset to the identity of their op), then the inner loop, then its own
 * statements: the order in which they run. Infix operators get parentheses
 * only where precedence or left associativity would otherwise change the
 * tree, so the text reads like C yet different trees never print alike:
 * the hash depends on that. The walk tolerates broken IR (NULL nodes print
 * as "_", unknown kinds by number) because the printer is what one reads
 * when the verifier fails. */
#include "print.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The text is gathered in `pending` and handed to the callback in chunks:
 * a callback per token (most are one to four bytes) cost more than the
 * printing itself, and the canonical text is printed on every kernel-cache
 * lookup of a new program (a disk-cache hit included). */
typedef struct {
  const ir_func_t* f;
  const int64_t* params;
  int canonical;
  ir_text_write_fn write;
  void* ctx;
  size_t npending;
  char pending[2048];
} printer_t;

static void flush(printer_t* p) {
  if (p->npending) p->write(p->ctx, p->pending, p->npending);
  p->npending = 0;
}

static void put_n(printer_t* p, const char* s, size_t n) {
  if (n > sizeof p->pending - p->npending) {
    flush(p);
    if (n > sizeof p->pending) {
      p->write(p->ctx, s, n);
      return;
    }
  }
  memcpy(p->pending + p->npending, s, n);
  p->npending += n;
}

static void put(printer_t* p, const char* s) { put_n(p, s, strlen(s)); }

/* Formatted pieces are short (numbers, ids, keywords); names go through
 * put_escaped instead, so a fixed buffer suffices. */
__attribute__((format(printf, 2, 3))) static void putf(printer_t* p, const char* fmt, ...) {
  char piece[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(piece, sizeof piece, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  put_n(p, piece, (size_t)n < sizeof piece ? (size_t)n : sizeof piece - 1);
}

/* Integers are most of the text (ids, sizes, slots): written directly,
 * since a formatted print per id dominated the cost of building cache keys. */
static void put_int(printer_t* p, long long v) {
  char digits[24];
  int n = 0;
  unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
  do digits[sizeof digits - 1 - n++] = (char)('0' + u % 10);
  while (u /= 10);
  if (v < 0) digits[sizeof digits - 1 - n++] = '-';
  put_n(p, digits + sizeof digits - n, (size_t)n);
}

/* prefix then n: "i3", "t12[", "c0" */
static void put_id(printer_t* p, const char* prefix, long long n) {
  put(p, prefix);
  put_int(p, n);
}

static void indent(printer_t* p, int level) {
  for (int k = 0; k < level; k++) put(p, "  ");
}

/* Names are caller data: non-printable bytes become \xNN so the text stays
 * one readable line per item. */
static void put_escaped(printer_t* p, const char* s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      putf(p, "\\%c", c);
    else if (c >= 0x20 && c < 0x7f)
      put_n(p, s, 1);
    else
      putf(p, "\\x%02x", c);
  }
}

/* ---- index expressions ------------------------------------------------------------- */

enum { IX_PREC_ADD = 1, IX_PREC_MUL = 2, IX_PREC_ATOM = 3 };

static int ix_prec(const ir_ix_t* ix) {
  if (!ix) return IX_PREC_ATOM;
  switch (ix->kind) {
    case IR_IX_ADD:
    case IR_IX_SUB: return IX_PREC_ADD;
    case IR_IX_MUL:
    case IR_IX_DIV:
    case IR_IX_MOD: return IX_PREC_MUL;
    default: return IX_PREC_ATOM;
  }
}

/* Whether a parameter prints as its folded value. */
static int param_folded(const printer_t* p, const ir_ix_t* ix) {
  return p->params && ix->id >= 0 && ix->id < p->f->nparams;
}

/* Whether the printed text of ix begins with '-'. Such an operand would read
 * differently as a right operand (a - -b) or before '*' (the parser reads
 * "-a * b" as -(a * b), which differs under floor division), so it gets
 * parentheses except as the leftmost operand of + and -. */
static int ix_starts_with_minus(const printer_t* p, const ir_ix_t* ix) {
  if (!ix) return 0;
  switch (ix->kind) {
    case IR_IX_NEG: return 1;
    case IR_IX_CONST: return ix->value < 0;
    case IR_IX_PARAM: return param_folded(p, ix) && p->params[ix->id] < 0;
    /* a minus-led left operand stays bare only before + and - (before * it
     * is parenthesized, so the product's text starts with '(') */
    case IR_IX_ADD:
    case IR_IX_SUB: return ix_starts_with_minus(p, ix->a);
    default: return 0;
  }
}

static void print_ix(printer_t* p, const ir_ix_t* ix);
static void print_access(printer_t* p, const ir_access_t* acc);

static void print_ix_operand(printer_t* p, const ir_ix_t* child, const ir_ix_t* parent, int is_right) {
  int parens;
  if (ix_starts_with_minus(p, child) && ix_prec(child) == IX_PREC_ATOM)
    parens = is_right || ix_prec(parent) != IX_PREC_ADD;
  else if (is_right)
    parens = ix_prec(child) <= ix_prec(parent);
  else
    parens = ix_prec(child) < ix_prec(parent);
  if (parens) put(p, "(");
  print_ix(p, child);
  if (parens) put(p, ")");
}

static void print_param(printer_t* p, const ir_ix_t* ix) {
  const ir_func_t* f = p->f;
  if (param_folded(p, ix)) {
    put_int(p, p->params[ix->id]);
  } else if (ix->id >= 0 && (p->canonical || !ix->name)) {
    int named = !p->canonical && ix->id < f->nparams && f->param_names && f->param_names[ix->id];
    if (named) {
      put(p, "$");
      put_escaped(p, f->param_names[ix->id]);
    } else {
      put_id(p, "$", ix->id);
    }
  } else {
    /* unbound (slot -1): the name is all there is, canonical or not */
    put(p, "$");
    put_escaped(p, ix->name ? ix->name : "?");
  }
}

static void print_ix(printer_t* p, const ir_ix_t* ix) {
  if (!ix) {
    put(p, "_");
    return;
  }
  const char* infix = NULL;
  switch (ix->kind) {
    case IR_IX_CONST: put_int(p, ix->value); return;
    case IR_IX_LOOP: put_id(p, "i", ix->id); return;
    case IR_IX_DIM: put_id(p, "d", ix->id), put_id(p, "_", ix->axis); return;
    case IR_IX_PARAM: print_param(p, ix); return;
    case IR_IX_LOAD:
      if (ix->load)
        print_access(p, ix->load);
      else
        put(p, "_[]");
      return;
    case IR_IX_NEG: {
      int bare = ix_prec(ix->a) == IX_PREC_ATOM && !ix_starts_with_minus(p, ix->a);
      put(p, bare ? "-" : "-(");
      print_ix(p, ix->a);
      if (!bare) put(p, ")");
      return;
    }
    case IR_IX_MIN:
    case IR_IX_MAX:
      put(p, ix->kind == IR_IX_MIN ? "min(" : "max(");
      print_ix(p, ix->a);
      put(p, ", ");
      print_ix(p, ix->b);
      put(p, ")");
      return;
    case IR_IX_ADD: infix = " + "; break;
    case IR_IX_SUB: infix = " - "; break;
    case IR_IX_MUL: infix = " * "; break;
    case IR_IX_DIV: infix = " / "; break;
    case IR_IX_MOD: infix = " % "; break;
  }
  if (!infix) {
    putf(p, "ix?%d", (int)ix->kind);
    return;
  }
  print_ix_operand(p, ix->a, ix, 0);
  put(p, infix);
  print_ix_operand(p, ix->b, ix, 1);
}

static void print_access(printer_t* p, const ir_access_t* acc) {
  put_id(p, "t", acc->tensor), put(p, "[");
  int n = acc->nidx < 0 ? 0 : acc->nidx > UJ_MAX_DIMS ? UJ_MAX_DIMS : acc->nidx;
  for (int k = 0; k < n; k++) {
    if (k) put(p, ", ");
    int checked = (acc->check_mask >> k) & 1u;
    if (checked) put(p, "?(");
    print_ix(p, acc->idx[k]);
    if (checked) put(p, ")");
  }
  /* stray check bits past the rank would otherwise vanish from the hash */
  if (n < 32 && (acc->check_mask >> n)) putf(p, "; check 0x%x", (unsigned)acc->check_mask);
  put(p, "]");
}

/* ---- value expressions ------------------------------------------------------------- */

/* The shortest %g text that reads back to the same value: stable across runs
 * (the hash needs that) and kinder to read than %.17g. */
static void format_real(char* out, size_t size, double v, int is_f32) {
  if (isnan(v)) {
    snprintf(out, size, "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(out, size, v < 0 ? "-inf" : "inf");
    return;
  }
  int max_digits = is_f32 ? 9 : 17;
  for (int digits = 1; digits <= max_digits; digits++) {
    snprintf(out, size, "%.*g", digits, v);
    double back = strtod(out, NULL);
    if (is_f32 ? (float)back == (float)v : back == v) break;
  }
  /* a float always shows as one: "1.0", never "1" (that is an i32) */
  if (!strpbrk(out, ".e")) strncat(out, ".0", size - strlen(out) - 1);
}

static void print_const(printer_t* p, const ir_expr_t* e) {
  char text[48];
  if (e->dtype == UJ_I32 && e->value == floor(e->value) && fabs(e->value) < 9.0e18) {
    putf(p, "%lld", (long long)e->value);
    return;
  }
  format_real(text, sizeof text, e->value, e->dtype == UJ_F32);
  put(p, text);
  if (e->dtype == UJ_F32 && isfinite(e->value)) put(p, "f");
  if (e->dtype == UJ_I32) put(p, " i32"); /* a non-integral i32 constant: broken IR, but visible */
}

enum { EX_PREC_EQ = 1, EX_PREC_CMP = 2, EX_PREC_ADD = 3, EX_PREC_MUL = 4, EX_PREC_ATOM = 5 };

static const char* binary_infix(int op, int* prec) {
  switch (op) {
    case UJ_BINARY_ADD: *prec = EX_PREC_ADD; return " + ";
    case UJ_BINARY_SUB: *prec = EX_PREC_ADD; return " - ";
    case UJ_BINARY_MUL: *prec = EX_PREC_MUL; return " * ";
    case UJ_BINARY_DIV: *prec = EX_PREC_MUL; return " / ";
    case UJ_BINARY_EQ: *prec = EX_PREC_EQ; return " == ";
    case UJ_BINARY_NE: *prec = EX_PREC_EQ; return " != ";
    case UJ_BINARY_LT: *prec = EX_PREC_CMP; return " < ";
    case UJ_BINARY_LE: *prec = EX_PREC_CMP; return " <= ";
    case UJ_BINARY_GT: *prec = EX_PREC_CMP; return " > ";
    case UJ_BINARY_GE: *prec = EX_PREC_CMP; return " >= ";
    default: *prec = EX_PREC_ATOM; return NULL;
  }
}

static int ex_prec(const ir_expr_t* e) {
  int prec = EX_PREC_ATOM;
  if (e && e->kind == IR_EX_BINARY) binary_infix(e->op, &prec);
  return prec;
}

static int ex_starts_with_minus(const ir_expr_t* e) {
  if (!e) return 0;
  if (e->kind == IR_EX_CONST) return e->value < 0 || (e->value == 0 && signbit(e->value));
  if (e->kind == IR_EX_UNARY) return e->op == UJ_UNARY_NEG;
  if (e->kind == IR_EX_BINARY && ex_prec(e) != EX_PREC_ATOM) return ex_starts_with_minus(e->a);
  return 0;
}

static void print_expr(printer_t* p, const ir_expr_t* e);

static void print_expr_operand(printer_t* p, const ir_expr_t* child, int parent_prec, int is_right) {
  int prec = ex_prec(child);
  int parens = is_right ? prec <= parent_prec : prec < parent_prec;
  if (is_right && ex_starts_with_minus(child)) parens = 1;
  if (parens) put(p, "(");
  print_expr(p, child);
  if (parens) put(p, ")");
}

static void print_call(printer_t* p, const char* name, const ir_expr_t* a, const ir_expr_t* b,
                       const ir_expr_t* c) {
  put(p, name);
  put(p, "(");
  print_expr(p, a);
  if (b) {
    put(p, ", ");
    print_expr(p, b);
  }
  if (c) {
    put(p, ", ");
    print_expr(p, c);
  }
  put(p, ")");
}

static void print_expr(printer_t* p, const ir_expr_t* e) {
  if (!e) {
    put(p, "_");
    return;
  }
  switch (e->kind) {
    case IR_EX_CONST: print_const(p, e); return;
    case IR_EX_LOAD: print_access(p, &e->access); return;
    case IR_EX_CARRIED: put_id(p, "c", e->carried); return;
    case IR_EX_INDEX:
      putf(p, "(%s)(", uj_dtype_name(e->dtype));
      print_ix(p, e->ix);
      put(p, ")");
      return;
    case IR_EX_UNARY: {
      const char* name = e->op == UJ_UNARY_NEG ? "-" : ir_unary_valid(e->op) ? ir_unary_name(e->op) : NULL;
      if (name) {
        print_call(p, name, e->a, NULL, NULL);
      } else {
        putf(p, "unary%d", e->op);
        print_call(p, "", e->a, NULL, NULL);
      }
      return;
    }
    case IR_EX_BINARY: {
      int prec;
      const char* infix = binary_infix(e->op, &prec);
      if (infix) {
        print_expr_operand(p, e->a, prec, 0);
        put(p, infix);
        print_expr_operand(p, e->b, prec, 1);
      } else if (ir_binary_valid(e->op)) {
        print_call(p, ir_binary_name(e->op), e->a, e->b, NULL);
      } else {
        putf(p, "binary%d", e->op);
        print_call(p, "", e->a, e->b, NULL);
      }
      return;
    }
    case IR_EX_WHERE: print_call(p, "where", e->a, e->b, e->c); return;
    case IR_EX_CAST:
      putf(p, "(%s)", uj_dtype_name(e->dtype));
      print_call(p, "", e->a, NULL, NULL);
      return;
  }
  putf(p, "expr?%d", (int)e->kind);
}

/* ---- statements, loops, blocks ------------------------------------------------------ */

/* The declaration of carried variable `id`, searched over the whole function
 * (NULL when none: broken IR still prints). */
static const ir_carried_t* find_carried(const ir_func_t* f, int id) {
  for (int b = 0; b < f->nblocks; b++)
    for (int l = 0; l < f->blocks[b].nloops; l++) {
      const ir_loop_t* loop = &f->blocks[b].loops[l];
      for (int c = 0; c < loop->ncarried; c++)
        if (loop->carried[c].id == id) return &loop->carried[c];
    }
  return NULL;
}

static void print_carried_decl(printer_t* p, const ir_carried_t* c) {
  putf(p, "%s c%d = ", uj_dtype_name(c->dtype), c->id);
  switch (c->op) {
    case UJ_REDUCE_SUM: put(p, "0;\n"); return;
    case UJ_REDUCE_MEAN: put(p, "0;  // mean\n"); return;
    case UJ_REDUCE_PROD: put(p, "1;\n"); return;
    case UJ_REDUCE_MAX: put(p, "-inf;\n"); return;
    case UJ_REDUCE_MIN: put(p, "inf;\n"); return;
    case UJ_REDUCE_ARGMAX: put(p, "argmax_init;\n"); return;
    case UJ_REDUCE_ARGMIN: put(p, "argmin_init;\n"); return;
  }
  putf(p, "reduce%d_init;\n", (int)c->op);
}

static void print_accum(printer_t* p, const ir_stmt_t* s) {
  const ir_carried_t* c = find_carried(p->f, s->carried);
  int op = c ? (int)c->op : -1;
  int n = s->carried;
  switch (op) {
    case UJ_REDUCE_SUM:
    case UJ_REDUCE_MEAN:
    case UJ_REDUCE_PROD:
      putf(p, "c%d %s ", n, op == UJ_REDUCE_PROD ? "*=" : "+=");
      print_expr(p, s->value);
      break;
    case UJ_REDUCE_MAX:
    case UJ_REDUCE_MIN:
    case UJ_REDUCE_ARGMAX:
    case UJ_REDUCE_ARGMIN: {
      int arg = ir_reduce_is_arg((uj_reduce_op_t)op);
      int max = op == UJ_REDUCE_MAX || op == UJ_REDUCE_ARGMAX;
      putf(p, "c%d = %s%s(c%d, ", n, arg ? "arg" : "", max ? "max" : "min", n);
      print_expr(p, s->value);
      if (arg) {
        put(p, ", at ");
        print_ix(p, s->arg_index);
      }
      put(p, ")");
      break;
    }
    default:
      putf(p, "c%d ?= ", n);
      print_expr(p, s->value);
  }
  /* an index on a non-arg accumulation is wrong, but must not hide from the hash */
  if (s->arg_index && !ir_reduce_is_arg((uj_reduce_op_t)op)) {
    put(p, " at ");
    print_ix(p, s->arg_index);
  }
  put(p, ";\n");
}

static void print_stmt(printer_t* p, const ir_stmt_t* s, int level) {
  indent(p, level);
  switch (s->kind) {
    case IR_ST_STORE:
    case IR_ST_SCATTER_ADD:
      print_access(p, &s->target);
      put(p, s->kind == IR_ST_STORE ? " = " : " += ");
      print_expr(p, s->value);
      put(p, ";\n");
      return;
    case IR_ST_ACCUM: print_accum(p, s); return;
  }
  putf(p, "stmt?%d;\n", (int)s->kind);
}

static void print_loops(printer_t* p, const ir_block_t* b, int k) {
  const ir_loop_t* l = &b->loops[k];
  int level = k + 1;
  indent(p, level);
  put_id(p, "for (i", l->id), put(p, " = ");
  print_ix(p, l->start);
  put_id(p, "; i", l->id), put(p, " < ");
  print_ix(p, l->end);
  put_id(p, "; i", l->id), put(p, "++) {\n");
  for (int c = 0; c < l->ncarried; c++) {
    indent(p, level + 1);
    print_carried_decl(p, &l->carried[c]);
  }
  if (k + 1 < b->nloops) print_loops(p, b, k + 1);
  for (int s = 0; s < l->nstmts; s++) print_stmt(p, &l->stmts[s], level + 1);
  indent(p, level);
  put(p, "}\n");
}

static void print_tensor(printer_t* p, int t) {
  const ir_tensor_t* x = &p->f->tensors[t];
  put_id(p, "  t", t);
  if (!p->canonical && x->name) {
    put(p, " \"");
    put_escaped(p, x->name);
    put(p, "\"");
  }
  switch (x->role) {
    case IR_TENSOR_INPUT: put_id(p, " input ", x->io_index); break;
    case IR_TENSOR_OUTPUT: put_id(p, " output ", x->io_index); break;
    case IR_TENSOR_TEMP: put(p, " temp"); break;
    default: putf(p, " role?%d", (int)x->role);
  }
  put(p, " ");
  put(p, uj_dtype_name(x->dtype));
  put(p, " [");
  int n = x->ndim < 0 ? 0 : x->ndim > UJ_MAX_DIMS ? UJ_MAX_DIMS : x->ndim;
  for (int k = 0; k < n; k++) {
    if (k) put(p, ", ");
    print_ix(p, x->dims[k]);
  }
  put(p, "]");
  if (x->noalloc) put(p, " noalloc");
  if (x->local) put(p, " local");
  if (x->chain_local) put(p, " chain-local");
  put(p, "\n");
}

/* The text:
 *
 *   tensors
 *     t0 "x" input 0 f32 [d0_0, d0_1]
 *     t1 temp f32 [d0_0, 1] noalloc
 *     t4 temp f32 [d0_0, d0_1] chain-local
 *   asserts
 *     d1_0 == d0_0  (what: "reindex shape")
 *   block 0
 *     for (i0 = 0; i0 < d0_0; i0++) {
 *       f32 c0 = 0;
 *       for (i1 = 0; i1 < d0_1; i1++) {
 *         c0 += t0[i0, ?(i1 - 1)];
 *       }
 *       t1[i0, 0] = c0;
 *     }
 *
 * A '?' marks an axis checked at run time. Canonical mode
 * (IR_PRINT_CANONICAL) leaves out tensor names, parameter names and
 * assertion descriptions, and prints bound parameters as their slot ($0):
 * changing only a name keeps the hash. Constants print in the shortest form
 * that reads back to the same value, with a dtype marker (1.5f for f32, 1.5
 * for f64, 2 for i32). Ids are the raw loop and carried ids. */
void ir_print_stream(const ir_func_t* f, const int64_t* params, int flags, ir_text_write_fn write,
                     void* ctx) {
  printer_t p; /* not an initializer: that would clear `pending` for nothing */
  p.f = f;
  p.params = params;
  p.canonical = (flags & IR_PRINT_CANONICAL) != 0;
  p.write = write;
  p.ctx = ctx;
  p.npending = 0;
  if (!p.canonical && f->nparams > 0) {
    put(&p, "params");
    for (int i = 0; i < f->nparams; i++) {
      put(&p, " $");
      if (f->param_names && f->param_names[i])
        put_escaped(&p, f->param_names[i]);
      else
        putf(&p, "%d", i);
      if (params) putf(&p, "=%lld", (long long)params[i]);
    }
    put(&p, "\n");
  }
  put(&p, "tensors\n");
  for (int t = 0; t < f->ntensors; t++) print_tensor(&p, t);
  if (f->nasserts > 0) {
    put(&p, "asserts\n");
    for (int a = 0; a < f->nasserts; a++) {
      const ir_assert_t* as = &f->asserts[a];
      put(&p, "  ");
      print_ix(&p, as->a);
      put(&p, " == ");
      print_ix(&p, as->b);
      if (!p.canonical && as->what) {
        put(&p, "  (what: \"");
        put_escaped(&p, as->what);
        put(&p, "\")");
      }
      put(&p, "\n");
    }
  }
  for (int b = 0; b < f->nblocks; b++) {
    put_id(&p, "block ", b);
    put(&p, "\n");
    if (f->blocks[b].nloops > 0)
      print_loops(&p, &f->blocks[b], 0);
    else
      put(&p, "  (no loops)\n");
  }
  flush(&p);
}

static void write_to_buf(void* ctx, const char* text, size_t n) {
  rt_buf_t* buf = ctx;
  rt_buf_append(buf, text, n);
}

char* ir_print(const ir_func_t* f, const int64_t* params, int flags) {
  if (!f) return NULL;
  rt_buf_t buf = {0};
  ir_print_stream(f, params, flags, write_to_buf, &buf);
  return rt_buf_take(&buf);
}
