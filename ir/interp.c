/* ir/interp.c: the reference interpreter. It defines what the loop IR means
 * (DESIGN section 3, "Meaning"); every engine is tested against it.
 *
 * The walk: for each block in order, run loop 0; an iteration of loop k
 * sets its id, resets its carried variables to their identity, runs loop
 * k+1, then loop k's statements (ir_walk_iteration, ir/semantics.c, which
 * the C, MIR and CUDA emitters print in the same order). A statement
 * evaluates its whole value (both sides of a where), then, if any checked
 * access was out of range, does nothing.
 *
 * Values are held in double (or int64 for i32) and rounded to the
 * expression's dtype after every operation: double has enough bits that
 * this gives the correctly rounded f32 result for + - * / and sqrt. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>

#include "ir.h"

typedef union {
  double f;
  int64_t i;
} value_t;

typedef struct {
  value_t value;
  int64_t arg;  /* argmax/argmin: the flat index of the best element */
} carried_t;

typedef struct {
  ir_env_t env;
  carried_t* carried;           /* by carried id */
  const ir_carried_t** decl;    /* by carried id: its declaration */
} interp_t;

static int is_float(uj_dtype_t dt) { return dt != UJ_I32; }
/* A cast to bf16/f16 rounds to it (the value stays in a double, as f32's). */
static double round_to(uj_dtype_t dt, double x) {
  return dt == UJ_F32 ? (double)(float)x : ir_dtype_is_half(dt) ? ir_round_to_half(dt, x) : x;
}
static value_t convert(uj_dtype_t from, uj_dtype_t to, value_t v) {
  value_t r;
  if (is_float(from) && is_float(to)) r.f = round_to(to, v.f);
  else if (is_float(from)) r.i = ir_float_to_i32(v.f);
  else if (is_float(to)) r.f = round_to(to, (double)v.i);
  else r.i = v.i;
  return r;
}

/* Flat element offset of an access, or -1 when a checked axis is out of
 * range (a proven axis out of range is a compiler bug). */
static int64_t access_offset(const interp_t* in, const ir_access_t* acc, int* oob) {
  const ir_buffer_t* buf = &in->env.buf[acc->tensor];
  int64_t offset = 0;
  for (int k = 0; k < acc->nidx; k++) {
    int64_t v = ir_ix_eval(&in->env, acc->idx[k], oob);
    if (v < 0 || v >= buf->dims[k]) {
      assert((acc->check_mask & (1u << k)) && "a proven index is out of range");
      *oob = 1;
      return -1;
    }
    offset = offset * buf->dims[k] + v;
  }
  return *oob ? -1 : offset;
}

static value_t load(const interp_t* in, const ir_access_t* acc, int* oob) {
  value_t r = {0};
  int64_t off = access_offset(in, acc, oob);
  if (off < 0) return r;
  const void* data = in->env.buf[acc->tensor].data;
  switch (in->env.f->tensors[acc->tensor].dtype) {
    case UJ_F32: r.f = ((const float*)data)[off]; break;
    case UJ_F64: r.f = ((const double*)data)[off]; break;
    case UJ_I32: r.i = ((const int32_t*)data)[off]; break;
    case UJ_BF16: r.f = ir_bf16_to_f32(((const uint16_t*)data)[off]); break;
    case UJ_F16: r.f = ir_f16_to_f32(((const uint16_t*)data)[off]); break;
  }
  return r;
}

static void store(const interp_t* in, const ir_access_t* acc, int64_t off, value_t v, int add) {
  void* data = in->env.buf[acc->tensor].data;
  switch (in->env.f->tensors[acc->tensor].dtype) {
    case UJ_F32: {
      float* p = (float*)data + off;
      *p = add ? (float)((double)*p + v.f) : (float)v.f;
      break;
    }
    case UJ_F64: {
      double* p = (double*)data + off;
      *p = add ? *p + v.f : v.f;
      break;
    }
    case UJ_I32: {
      int32_t* p = (int32_t*)data + off;
      *p = (int32_t)(add ? ir_wrap_i32((int64_t)*p + v.i) : v.i);
      break;
    }
    /* the value is an f32 (ir_verify: no scatter-add into a half tensor) */
    case UJ_BF16: ((uint16_t*)data)[off] = ir_f32_to_bf16((float)v.f); break;
    case UJ_F16: ((uint16_t*)data)[off] = ir_f32_to_f16((float)v.f); break;
  }
}

static value_t eval(const interp_t* in, const ir_expr_t* e, int* oob) {
  value_t r = {0};
  switch (e->kind) {
    case IR_EX_CONST:
      if (is_float(e->dtype)) r.f = round_to(e->dtype, e->value);
      else r.i = ir_float_to_i32(e->value);
      return r;
    case IR_EX_LOAD: return load(in, &e->access, oob);
    case IR_EX_CARRIED: {
      const carried_t* c = &in->carried[e->carried];
      uj_reduce_op_t op = in->decl[e->carried]->op;
      if (ir_reduce_is_arg(op)) r.i = ir_wrap_i32(c->arg);
      else r = c->value;
      return r;
    }
    case IR_EX_INDEX: {
      int64_t v = ir_ix_eval(&in->env, e->ix, oob);
      if (is_float(e->dtype)) r.f = round_to(e->dtype, (double)v);
      else r.i = ir_wrap_i32(v);
      return r;
    }
    case IR_EX_UNARY: {
      value_t a = eval(in, e->a, oob);
      if (is_float(e->dtype)) r.f = round_to(e->dtype, ir_unary_f64((uj_unary_op_t)e->op, a.f));
      else r.i = ir_unary_i32((uj_unary_op_t)e->op, a.i);
      return r;
    }
    case IR_EX_BINARY: {
      value_t a = eval(in, e->a, oob), b = eval(in, e->b, oob);
      if (is_float(e->dtype)) r.f = round_to(e->dtype, ir_binary_f64((uj_binary_op_t)e->op, a.f, b.f));
      else r.i = ir_binary_i32((uj_binary_op_t)e->op, a.i, b.i);
      return r;
    }
    case IR_EX_WHERE: {
      value_t c = eval(in, e->a, oob), a = eval(in, e->b, oob), b = eval(in, e->c, oob);
      int take = is_float(e->a->dtype) ? c.f != 0.0 : c.i != 0;
      return take ? a : b;
    }
    case IR_EX_CAST: return convert(e->a->dtype, e->dtype, eval(in, e->a, oob));
  }
  return r;
}

/* A carried variable back to its identity (ir_reduce_identity), with no
 * index yet. */
static void reset_carried(void* ctx, const ir_carried_t* c, int k) {
  (void)k;
  interp_t* in = ctx;
  carried_t* v = &in->carried[c->id];
  double identity = ir_reduce_identity(c->op, c->dtype);
  v->arg = 0;
  if (is_float(c->dtype)) v->value.f = identity;
  else v->value.i = (int64_t)identity;
}

static void accumulate(interp_t* in, const ir_stmt_t* s, value_t x, int64_t arg) {
  const ir_carried_t* d = in->decl[s->carried];
  carried_t* c = &in->carried[s->carried];
  if (is_float(d->dtype)) {
    double v = c->value.f;
    switch (d->op) {
      case UJ_REDUCE_SUM:
      case UJ_REDUCE_MEAN: v = round_to(d->dtype, v + x.f); break;
      case UJ_REDUCE_PROD: v = round_to(d->dtype, v * x.f); break;
      /* the new value first: it wins unless the old one is better (fmax-like) */
      case UJ_REDUCE_MAX: v = ir_binary_f64(UJ_BINARY_MAX, x.f, v); break;
      case UJ_REDUCE_MIN: v = ir_binary_f64(UJ_BINARY_MIN, x.f, v); break;
      case UJ_REDUCE_ARGMAX:
        if (x.f > v) v = x.f, c->arg = arg;
        break;
      case UJ_REDUCE_ARGMIN:
        if (x.f < v) v = x.f, c->arg = arg;
        break;
    }
    c->value.f = v;
  } else {
    int64_t v = c->value.i;
    switch (d->op) {
      case UJ_REDUCE_SUM:
      case UJ_REDUCE_MEAN: v = ir_wrap_i32(v + x.i); break;
      case UJ_REDUCE_PROD: v = ir_wrap_i32(v * x.i); break;
      case UJ_REDUCE_MAX: v = x.i > v ? x.i : v; break;
      case UJ_REDUCE_MIN: v = x.i < v ? x.i : v; break;
      /* the identity is a valid i32, so the first element must win on ties */
      case UJ_REDUCE_ARGMAX:
        if (x.i > v || arg == 0) v = x.i, c->arg = arg;
        break;
      case UJ_REDUCE_ARGMIN:
        if (x.i < v || arg == 0) v = x.i, c->arg = arg;
        break;
    }
    c->value.i = v;
  }
}

static void run_stmt(interp_t* in, const ir_stmt_t* s) {
  int oob = 0;
  value_t v = eval(in, s->value, &oob);
  switch (s->kind) {
    case IR_ST_STORE:
    case IR_ST_SCATTER_ADD: {
      int64_t off = access_offset(in, &s->target, &oob);
      if (!oob) store(in, &s->target, off, v, s->kind == IR_ST_SCATTER_ADD);
      break;
    }
    case IR_ST_ACCUM: {
      int64_t arg = s->arg_index ? ir_ix_eval(&in->env, s->arg_index, &oob) : 0;
      if (!oob) accumulate(in, s, v, arg);
      break;
    }
  }
}

static void run_loop(void* ctx, const ir_block_t* b, int k);

static void run_stmt_of_loop(void* ctx, const ir_stmt_t* s, int k) {
  (void)k;
  run_stmt(ctx, s);
}

/* One iteration: the order every target follows (ir/semantics.c). */
static const ir_iteration_visitor_t iteration = {reset_carried, NULL, run_loop, run_stmt_of_loop};

static void run_loop(void* ctx, const ir_block_t* b, int k) {
  interp_t* in = ctx;
  const ir_loop_t* l = &b->loops[k];
  int oob = 0;
  int64_t start = ir_ix_eval(&in->env, l->start, &oob);
  int64_t end = ir_ix_eval(&in->env, l->end, &oob);
  for (int64_t v = start; v < end; v++) {
    in->env.loops[l->id] = v;
    ir_walk_iteration(b, k, &iteration, in);
  }
}

uj_status_t ir_interp_run(const ir_func_t* f, ir_buffer_t* buf, const int64_t* params) {
  int nl = f->next_loop_id > 0 ? f->next_loop_id : 1;
  int nc = f->next_carried_id > 0 ? f->next_carried_id : 1;
  interp_t in = {{f, buf, params, calloc((size_t)nl, sizeof(int64_t))},
                 calloc((size_t)nc, sizeof(carried_t)),
                 calloc((size_t)nc, sizeof(const ir_carried_t*))};
  uj_status_t status = UJ_OK;
  if (!in.env.loops || !in.carried || !in.decl) {
    status = rt_error(UJ_ERR_OOM, "interpreter: out of memory allocating its loop and carried-value tables (%zu bytes)",
                      (size_t)nl * sizeof(int64_t) + (size_t)nc * (sizeof(carried_t) + sizeof(const ir_carried_t*)));
    goto done;
  }
  for (int bi = 0; bi < f->nblocks; bi++)
    for (int li = 0; li < f->blocks[bi].nloops; li++) {
      const ir_loop_t* l = &f->blocks[bi].loops[li];
      for (int c = 0; c < l->ncarried; c++) in.decl[l->carried[c].id] = &l->carried[c];
    }
  for (int bi = 0; bi < f->nblocks; bi++)
    if (f->blocks[bi].nloops > 0) run_loop(&in, &f->blocks[bi], 0);
done:
  free(in.env.loops);
  free(in.carried);
  free(in.decl);
  return status;
}
