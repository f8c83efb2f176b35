/* ir/verify.c: checks the structural invariants of a loop-IR function, the
 * contract every pass, emitter and the interpreter rely on (DESIGN
 * section 3, "Invariants"):
 *
 *   - tensors: valid dtype, rank and role; sizes mention no loop; accesses
 *     name an allocated tensor with one index per axis, check bits only on
 *     existing axes; DIM names an existing axis, PARAM a slot below nparams;
 *   - scopes: loop iN only inside loop iN, carried variables only inside
 *     the loop that declares them; ids unique and below the counters;
 *   - dtypes: operands, results and targets agree in compute dtypes, half
 *     dtypes only where ir/half.c allows them, no float-only math on i32.
 *
 * Algorithm: one recursive walk; the first violation is UJ_ERR_INVALID
 * naming where it was found ("block 2 loop i5: ... (statement 1)"). These
 * are internal errors, never the user's. */
#include <stdarg.h>
#include <stdio.h>

#include "ir.h"

typedef struct {
  const ir_func_t* f;
  const ir_block_t* block; /* NULL outside blocks (tensor sizes, asserts) */
  int scope;               /* loops block->loops[0..scope] are visible; -1: none */
  /* where the check is, formatted only when one fails (the verifier runs
   * on every compile, where formatting labels up front cost more than the
   * checks themselves): "block 2 loop i5: ... (statement 1)" */
  enum { AT_NONE, AT_TENSOR, AT_ASSERT, AT_BLOCK, AT_LOOP } at;
  int at_index, at_loop;
  enum { IN_ALL, IN_START, IN_END, IN_STATEMENT, IN_AXIS } in;
  int in_index;
  uj_status_t status;
} verifier_t;

static void locate(verifier_t* v, int at, int index, int loop) {
  v->at = at;
  v->at_index = index;
  v->at_loop = loop;
  v->in = IN_ALL;
}

__attribute__((format(printf, 2, 3))) static int fail(verifier_t* v, const char* fmt, ...) {
  if (v->status != UJ_OK) return 0;
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  char where[64] = "", suffix[48] = "";
  switch (v->at) {
    case AT_NONE: break;
    case AT_TENSOR: snprintf(where, sizeof where, "tensor t%d: ", v->at_index); break;
    case AT_ASSERT: snprintf(where, sizeof where, "assert %d: ", v->at_index); break;
    case AT_BLOCK: snprintf(where, sizeof where, "block %d: ", v->at_index); break;
    case AT_LOOP: snprintf(where, sizeof where, "block %d loop i%d: ", v->at_index, v->at_loop); break;
  }
  switch (v->in) {
    case IN_ALL: break;
    case IN_START: snprintf(suffix, sizeof suffix, " (start)"); break;
    case IN_END: snprintf(suffix, sizeof suffix, " (end)"); break;
    case IN_STATEMENT: snprintf(suffix, sizeof suffix, " (statement %d)", v->in_index); break;
    case IN_AXIS: snprintf(suffix, sizeof suffix, " (size of axis %d)", v->in_index); break;
  }
  v->status = rt_error(UJ_ERR_INVALID, "%s%s%s", where, what, suffix);
  return 0;
}

/* The dtypes values are computed in; a tensor may also store bf16/f16. */
static int dtype_valid(uj_dtype_t d) { return d == UJ_F32 || d == UJ_F64 || d == UJ_I32; }
static int storage_valid(uj_dtype_t d) { return dtype_valid(d) || ir_dtype_is_half(d); }

/* The declaration of carried `id` on a visible loop of the current block. */
static const ir_carried_t* visible_carried(const verifier_t* v, int id) {
  for (int k = 0; v->block && k <= v->scope; k++) {
    const ir_loop_t* l = &v->block->loops[k];
    for (int c = 0; c < l->ncarried; c++)
      if (l->carried[c].id == id) return &l->carried[c];
  }
  return NULL;
}

static int check_access(verifier_t* v, const ir_access_t* acc, const char* what);

static int check_ix(verifier_t* v, const ir_ix_t* ix) {
  if (!ix) return fail(v, "missing index expression");
  const ir_func_t* f = v->f;
  switch (ix->kind) {
    case IR_IX_CONST: return 1;
    case IR_IX_LOOP:
      for (int k = 0; v->block && k <= v->scope; k++)
        if (v->block->loops[k].id == ix->id) return 1;
      return fail(v, "i%d is not an enclosing loop", ix->id);
    case IR_IX_DIM:
      if (ix->id < 0 || ix->id >= f->ntensors)
        return fail(v, "size d%d_%d names tensor t%d, function has %d tensors", ix->id, ix->axis,
                    ix->id, f->ntensors);
      if (ix->axis < 0 || ix->axis >= f->tensors[ix->id].ndim)
        return fail(v, "size d%d_%d names axis %d, t%d has rank %d", ix->id, ix->axis, ix->axis,
                    ix->id, f->tensors[ix->id].ndim);
      return 1;
    case IR_IX_PARAM:
      if (ix->id < 0 || ix->id >= f->nparams)
        return fail(v, "parameter $%s has slot %d, function has %d parameters",
                    ix->name ? ix->name : "?", ix->id, f->nparams);
      return 1;
    case IR_IX_LOAD:
      if (!ix->load) return fail(v, "index load without an access");
      if (!check_access(v, ix->load, "index load")) return 0;
      if (f->tensors[ix->load->tensor].dtype != UJ_I32)
        return fail(v, "index load of t%d of dtype %s, must be i32", ix->load->tensor,
                    uj_dtype_name(f->tensors[ix->load->tensor].dtype));
      return 1;
    case IR_IX_NEG: return check_ix(v, ix->a);
    case IR_IX_ADD:
    case IR_IX_SUB:
    case IR_IX_MUL:
    case IR_IX_DIV:
    case IR_IX_MOD:
    case IR_IX_MIN:
    case IR_IX_MAX: return check_ix(v, ix->a) && check_ix(v, ix->b);
  }
  return fail(v, "index expression of unknown kind %d", (int)ix->kind);
}

static int check_access(verifier_t* v, const ir_access_t* acc, const char* what) {
  const ir_func_t* f = v->f;
  if (acc->tensor < 0 || acc->tensor >= f->ntensors)
    return fail(v, "%s of t%d, function has %d tensors", what, acc->tensor, f->ntensors);
  const ir_tensor_t* t = &f->tensors[acc->tensor];
  if (t->noalloc) return fail(v, "%s of t%d, which is no-alloc", what, acc->tensor);
  if (acc->nidx != t->ndim)
    return fail(v, "%s of t%d has %d indices, tensor has rank %d", what, acc->tensor, acc->nidx,
                t->ndim);
  if (acc->nidx < 32 && (acc->check_mask >> acc->nidx) != 0)
    return fail(v, "%s of t%d has check mask 0x%x beyond its %d indices", what, acc->tensor,
                (unsigned)acc->check_mask, acc->nidx);
  for (int k = 0; k < acc->nidx; k++)
    if (!check_ix(v, acc->idx[k])) return 0;
  return 1;
}

/* A load has its tensor's compute dtype (f32 for bf16/f16), a carried read
 * the carried dtype (i32 for argmax/argmin). */
static int check_expr(verifier_t* v, const ir_expr_t* e) {
  if (!e) return fail(v, "missing value expression");
  /* a half-dtype value is a cast to it, read only by another cast: every
   * other reader below requires its operands' dtype to be its own, a
   * compute dtype, and the where's condition is checked on its own */
  if (!dtype_valid(e->dtype) && !(ir_dtype_is_half(e->dtype) && e->kind == IR_EX_CAST))
    return fail(v, "expression of kind %d has dtype %d", (int)e->kind, (int)e->dtype);
  const ir_func_t* f = v->f;
  switch (e->kind) {
    case IR_EX_CONST: return 1;
    case IR_EX_LOAD: {
      if (!check_access(v, &e->access, "load")) return 0;
      uj_dtype_t td = f->tensors[e->access.tensor].dtype;
      if (e->dtype != ir_dtype_compute(td))
        return fail(v, "load of t%d has dtype %s, tensor has %s", e->access.tensor,
                    uj_dtype_name(e->dtype), uj_dtype_name(td));
      return 1;
    }
    case IR_EX_CARRIED: {
      const ir_carried_t* c = visible_carried(v, e->carried);
      if (!c) return fail(v, "reads c%d, which no enclosing loop carries", e->carried);
      uj_dtype_t want = ir_reduce_is_arg(c->op) ? UJ_I32 : c->dtype;
      if (e->dtype != want)
        return fail(v, "read of c%d has dtype %s, must be %s", e->carried, uj_dtype_name(e->dtype),
                    uj_dtype_name(want));
      return 1;
    }
    case IR_EX_INDEX: return check_ix(v, e->ix);
    case IR_EX_UNARY:
      if (!ir_unary_valid(e->op)) return fail(v, "unknown unary op %d", e->op);
      if (!check_expr(v, e->a)) return 0;
      if (e->a->dtype != e->dtype)
        return fail(v, "unary op %d has dtype %s, operand has %s", e->op, uj_dtype_name(e->dtype),
                    uj_dtype_name(e->a->dtype));
      if (e->dtype == UJ_I32 && !ir_unary_takes_i32((uj_unary_op_t)e->op))
        return fail(v, "unary op %d applied to i32", e->op);
      return 1;
    case IR_EX_BINARY:
      if (!ir_binary_valid(e->op)) return fail(v, "unknown binary op %d", e->op);
      if (!check_expr(v, e->a) || !check_expr(v, e->b)) return 0;
      if (e->a->dtype != e->dtype || e->b->dtype != e->dtype)
        return fail(v, "binary op %d has dtype %s, operands have %s and %s", e->op,
                    uj_dtype_name(e->dtype), uj_dtype_name(e->a->dtype), uj_dtype_name(e->b->dtype));
      return 1;
    case IR_EX_WHERE:
      if (!check_expr(v, e->a) || !check_expr(v, e->b) || !check_expr(v, e->c)) return 0;
      if (ir_dtype_is_half(e->a->dtype)) return fail(v, "where's condition has dtype %s", uj_dtype_name(e->a->dtype));
      if (e->b->dtype != e->dtype || e->c->dtype != e->dtype)
        return fail(v, "where has dtype %s, branches have %s and %s", uj_dtype_name(e->dtype),
                    uj_dtype_name(e->b->dtype), uj_dtype_name(e->c->dtype));
      return 1;
    case IR_EX_CAST: return check_expr(v, e->a);
  }
  return fail(v, "value expression of unknown kind %d", (int)e->kind);
}

/* Stored values match their target's compute dtype; only inputs and outputs
 * store bf16/f16 and nothing scatter-adds into them; ACCUM has arg_index
 * exactly for the arg ops. */
static int check_stmt(verifier_t* v, const ir_stmt_t* s) {
  switch (s->kind) {
    case IR_ST_STORE:
    case IR_ST_SCATTER_ADD: {
      const char* what = s->kind == IR_ST_STORE ? "store" : "scatter-add";
      if (!check_access(v, &s->target, what) || !check_expr(v, s->value)) return 0;
      uj_dtype_t td = v->f->tensors[s->target.tensor].dtype;
      if (s->value->dtype != ir_dtype_compute(td))
        return fail(v, "%s of a %s value into t%d of dtype %s", what, uj_dtype_name(s->value->dtype),
                    s->target.tensor, uj_dtype_name(td));
      if (s->kind == IR_ST_SCATTER_ADD && ir_dtype_is_half(td))
        return fail(v, "scatter-add into t%d of dtype %s", s->target.tensor, uj_dtype_name(td));
      if (s->arg_index) return fail(v, "%s has an arg index", what);
      return 1;
    }
    case IR_ST_ACCUM: {
      const ir_carried_t* c = visible_carried(v, s->carried);
      if (!c) return fail(v, "accumulates into c%d, which no enclosing loop carries", s->carried);
      if (!check_expr(v, s->value)) return 0;
      if (s->value->dtype != c->dtype)
        return fail(v, "accumulates a %s value into c%d of dtype %s", uj_dtype_name(s->value->dtype),
                    s->carried, uj_dtype_name(c->dtype));
      if (ir_reduce_is_arg(c->op) && !s->arg_index)
        return fail(v, "accumulation into arg-reduction c%d has no arg index", s->carried);
      if (!ir_reduce_is_arg(c->op) && s->arg_index)
        return fail(v, "accumulation into c%d has an arg index, but its op %d is not argmax/argmin",
                    s->carried, (int)c->op);
      return !s->arg_index || check_ix(v, s->arg_index);
    }
  }
  return fail(v, "statement of unknown kind %d", (int)s->kind);
}

/* Whether loop id / carried id `id` appears before position (b, k[, c]) in
 * the function: uniqueness without a side table, pairwise, since functions
 * have few loops and carried variables. Ids stay below next_loop_id and
 * next_carried_id because the interpreter indexes arrays by them. */
static int loop_id_seen_before(const ir_func_t* f, int bi, int k, int id) {
  for (int b = 0; b <= bi; b++)
    for (int l = 0; l < (b == bi ? k : f->blocks[b].nloops); l++)
      if (f->blocks[b].loops[l].id == id) return 1;
  return 0;
}

static int carried_id_seen_before(const ir_func_t* f, int bi, int k, int ci, int id) {
  for (int b = 0; b <= bi; b++)
    for (int l = 0; l < (b == bi ? k + 1 : f->blocks[b].nloops); l++) {
      const ir_loop_t* loop = &f->blocks[b].loops[l];
      int n = (b == bi && l == k) ? ci : loop->ncarried;
      for (int c = 0; c < n; c++)
        if (loop->carried[c].id == id) return 1;
    }
  return 0;
}

static int check_loop(verifier_t* v, int bi, int k) {
  const ir_func_t* f = v->f;
  const ir_loop_t* l = &v->block->loops[k];
  locate(v, AT_LOOP, bi, l->id);
  if (l->id < 0 || l->id >= f->next_loop_id)
    return fail(v, "loop id outside [0, %d)", f->next_loop_id);
  if (loop_id_seen_before(f, bi, k, l->id)) return fail(v, "loop id used twice");

  /* the bounds of loop k see loops 0..k-1, its statements loops 0..k */
  v->scope = k - 1;
  v->in = IN_START;
  if (!check_ix(v, l->start)) return 0;
  v->in = IN_END;
  if (!check_ix(v, l->end)) return 0;
  v->in = IN_ALL;

  for (int c = 0; c < l->ncarried; c++) {
    const ir_carried_t* cv = &l->carried[c];
    if (cv->id < 0 || cv->id >= f->next_carried_id)
      return fail(v, "carried c%d outside [0, %d)", cv->id, f->next_carried_id);
    if (carried_id_seen_before(f, bi, k, c, cv->id)) return fail(v, "carried id c%d used twice", cv->id);
    if ((int)cv->op < UJ_REDUCE_SUM || cv->op > UJ_REDUCE_ARGMIN || cv->op == UJ_REDUCE_MEAN)
      return fail(v, "carried c%d has op %d (mean is a sum divided when stored)", cv->id, (int)cv->op);
    if (!dtype_valid(cv->dtype)) return fail(v, "carried c%d has dtype %d", cv->id, (int)cv->dtype);
  }

  v->scope = k;
  for (int s = 0; s < l->nstmts; s++) {
    v->in = IN_STATEMENT, v->in_index = s;
    if (!check_stmt(v, &l->stmts[s])) return 0;
  }
  v->in = IN_ALL;
  return 1;
}

static int check_tensors_and_asserts(verifier_t* v) {
  const ir_func_t* f = v->f;
  if (f->ntensors < 0 || (f->ntensors > 0 && !f->tensors)) return fail(v, "bad tensor table");
  for (int t = 0; t < f->ntensors; t++) {
    const ir_tensor_t* x = &f->tensors[t];
    locate(v, AT_TENSOR, t, 0);
    if (!storage_valid(x->dtype)) return fail(v, "dtype %d", (int)x->dtype);
    if (ir_dtype_is_half(x->dtype) && x->role == IR_TENSOR_TEMP)
      return fail(v, "a temporary of dtype %s (only inputs and outputs store it)", uj_dtype_name(x->dtype));
    if (x->ndim < 0 || x->ndim > UJ_MAX_DIMS) return fail(v, "rank %d outside [0, %d]", x->ndim, UJ_MAX_DIMS);
    if (x->role != IR_TENSOR_TEMP && x->role != IR_TENSOR_INPUT && x->role != IR_TENSOR_OUTPUT)
      return fail(v, "role %d", (int)x->role);
    /* Sizes may be unset in hand-built functions; when set they are
     * expressions over sizes and parameters, outside every loop. */
    for (int k = 0; k < x->ndim; k++) {
      v->in = IN_AXIS, v->in_index = k;
      if (x->dims[k] && !check_ix(v, x->dims[k])) return 0;
    }
    v->in = IN_ALL;
  }
  for (int a = 0; a < f->nasserts; a++) {
    locate(v, AT_ASSERT, a, 0);
    if (!check_ix(v, f->asserts[a].a) || !check_ix(v, f->asserts[a].b)) return 0;
  }
  return 1;
}

uj_status_t ir_verify(const ir_func_t* f) {
  if (!f) return rt_error(UJ_ERR_INVALID, "ir_verify: function is NULL");
  verifier_t v = {f, NULL, -1, AT_NONE, 0, 0, IN_ALL, 0, UJ_OK};
  if (f->nparams < 0) return rt_error(UJ_ERR_INVALID, "function has %d parameters", f->nparams);
  if (!check_tensors_and_asserts(&v)) return v.status;
  for (int bi = 0; bi < f->nblocks; bi++) {
    const ir_block_t* b = &f->blocks[bi];
    v.block = b;
    locate(&v, AT_BLOCK, bi, 0);
    if (b->nloops < 1) return fail(&v, "has no loops"), v.status;
    for (int k = 0; k < b->nloops; k++)
      if (!check_loop(&v, bi, k)) return v.status;
  }
  return UJ_OK;
}
