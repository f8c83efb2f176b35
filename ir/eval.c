/* ir/eval.c: evaluating index expressions and sizes.
 *
 * Two evaluators with different contracts:
 *  - ir_ix_eval runs inside loops, on every iteration: it must be total, so
 *    integer arithmetic wraps (computed on uint64) and x/0 == x%0 == 0. Every
 *    target shares these rules so that they agree bit for bit.
 *  - shape_eval runs once per call on size expressions: it reports overflow
 *    and division by zero as errors instead, since a size that wrapped would
 *    make every later bound check meaningless. */
#include "ir.h"

#include <assert.h>
#include <stdio.h>

int64_t ir_floordiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a); /* INT64_MIN / -1 wraps instead of trapping */
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}

int64_t ir_floormod(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

static int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static int64_t wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* Reads one i32 element used as an index; sets *oob when a checked axis is
 * out of range. */
static int64_t eval_index_load(const ir_env_t* env, const ir_access_t* acc, int* oob) {
  const ir_buffer_t* buf = &env->buf[acc->tensor];
  int64_t offset = 0;
  for (int k = 0; k < acc->nidx; k++) {
    int64_t v = ir_ix_eval(env, acc->idx[k], oob);
    if (v < 0 || v >= buf->dims[k]) {
      assert(acc->check_mask & (1u << k)); /* a proven axis must be in range */
      *oob = 1;
      return 0;
    }
    offset = offset * buf->dims[k] + v;
  }
  if (*oob) return 0;
  return ((const int32_t*)buf->data)[offset];
}

int64_t ir_ix_eval(const ir_env_t* env, const ir_ix_t* ix, int* oob) {
  switch (ix->kind) {
    case IR_IX_CONST: return ix->value;
    case IR_IX_LOOP: return env->loops[ix->id];
    case IR_IX_DIM: return env->buf[ix->id].dims[ix->axis];
    case IR_IX_PARAM: return env->params[ix->id];
    case IR_IX_LOAD: return eval_index_load(env, ix->load, oob);
    case IR_IX_NEG: return wrap_sub(0, ir_ix_eval(env, ix->a, oob));
    default: break;
  }
  int64_t a = ir_ix_eval(env, ix->a, oob);
  int64_t b = ir_ix_eval(env, ix->b, oob);
  switch (ix->kind) {
    case IR_IX_ADD: return wrap_add(a, b);
    case IR_IX_SUB: return wrap_sub(a, b);
    case IR_IX_MUL: return wrap_mul(a, b);
    case IR_IX_DIV: return ir_floordiv(a, b);
    case IR_IX_MOD: return ir_floormod(a, b);
    case IR_IX_MIN: return a < b ? a : b;
    case IR_IX_MAX: return a > b ? a : b;
    default: assert(0 && "unknown index expression kind"); return 0;
  }
}

/* Size arithmetic: 0 on overflow or division by zero, with *why set. */
static int shape_eval(const ir_env_t* env, const ir_ix_t* ix, int64_t* out, const char** why) {
  int64_t a = 0, b = 0;
  switch (ix->kind) {
    case IR_IX_CONST: *out = ix->value; return 1;
    case IR_IX_DIM: *out = env->buf[ix->id].dims[ix->axis]; return 1;
    case IR_IX_PARAM: *out = env->params[ix->id]; return 1;
    case IR_IX_LOOP:
    case IR_IX_LOAD: *why = "a size cannot depend on a loop or a tensor's values"; return 0;
    case IR_IX_NEG:
      if (!shape_eval(env, ix->a, &a, why)) return 0;
      if (__builtin_sub_overflow((int64_t)0, a, out)) break;
      return 1;
    default:
      if (!shape_eval(env, ix->a, &a, why) || !shape_eval(env, ix->b, &b, why)) return 0;
      switch (ix->kind) {
        case IR_IX_ADD: if (__builtin_add_overflow(a, b, out)) goto overflow; return 1;
        case IR_IX_SUB: if (__builtin_sub_overflow(a, b, out)) goto overflow; return 1;
        case IR_IX_MUL: if (__builtin_mul_overflow(a, b, out)) goto overflow; return 1;
        case IR_IX_DIV:
        case IR_IX_MOD:
          if (b == 0) {
            *why = "division by zero";
            return 0;
          }
          *out = ix->kind == IR_IX_DIV ? ir_floordiv(a, b) : ir_floormod(a, b);
          return 1;
        case IR_IX_MIN: *out = a < b ? a : b; return 1;
        case IR_IX_MAX: *out = a > b ? a : b; return 1;
        default: break;
      }
  }
overflow:
  *why = "arithmetic overflows int64";
  return 0;
}

static const char* tensor_label(const ir_tensor_t* t, char* buf, size_t n, int id) {
  if (t->role == IR_TENSOR_INPUT) snprintf(buf, n, "input %d", t->io_index);
  else if (t->role == IR_TENSOR_OUTPUT) snprintf(buf, n, "output %d (tensor t%d)", t->io_index, id);
  else snprintf(buf, n, "tensor t%d", id);
  return buf;
}

uj_status_t ir_func_sizes(const ir_func_t* f, const int64_t* params, ir_buffer_t* buf) {
  ir_env_t env = {f, buf, params, NULL};
  char label[64]; /* formatted only for an error: this runs on every call */
  for (int t = 0; t < f->ntensors; t++) {
    const ir_tensor_t* tt = &f->tensors[t];
    if (tt->role != IR_TENSOR_INPUT) {
      for (int k = 0; k < tt->ndim; k++) {
        const char* why = NULL;
        if (!shape_eval(&env, tt->dims[k], &buf[t].dims[k], &why))
          return rt_error(UJ_ERR_SHAPE, "%s: size of axis %d: %s", tensor_label(tt, label, sizeof label, t), k,
                          why);
        if (buf[t].dims[k] < 0)
          return rt_error(UJ_ERR_SHAPE, "%s: axis %d would have negative size %lld",
                          tensor_label(tt, label, sizeof label, t), k, (long long)buf[t].dims[k]);
      }
    }
    /* the sizes' product with zeros left out, times the element size, must
     * fit as well: an empty tensor's other sizes still multiply into
     * strides, loop work and byte offsets (rt_numel), which the runners
     * (jit/blocks.c) then need not check again */
    int64_t esize = uj_dtype_size(tt->dtype), n = 1, bytes;
    int ok = 1, empty = 0;
    for (int k = 0; k < tt->ndim && ok; k++) {
      if (buf[t].dims[k] == 0) empty = 1;
      else ok = rt_mul_i64(n, buf[t].dims[k], &n);
    }
    if (ok && rt_mul_i64(n, esize > 0 ? esize : 1, &bytes)) {
      buf[t].numel = empty ? 0 : n;
      continue;
    }
    uj_status_t s = rt_numel(tensor_label(tt, label, sizeof label, t), tt->ndim, buf[t].dims, &buf[t].numel);
    if (s != UJ_OK) return s;
    return rt_error(UJ_ERR_SHAPE, "%s: its sizes%s times %lld bytes overflow int64", tensor_label(tt, label, sizeof label, t),
                    empty ? " (zeros left out)" : "", (long long)esize);
  }
  for (int i = 0; i < f->nasserts; i++) {
    const ir_assert_t* as = &f->asserts[i];
    int64_t a, b;
    const char* why = NULL;
    if (!shape_eval(&env, as->a, &a, &why) || !shape_eval(&env, as->b, &b, &why))
      return rt_error(UJ_ERR_SHAPE, "%s: %s", as->what ? as->what : "size check", why);
    if (a != b)
      return rt_error(UJ_ERR_SHAPE, "%s: %lld != %lld", as->what ? as->what : "sizes differ",
                      (long long)a, (long long)b);
  }
  return UJ_OK;
}
