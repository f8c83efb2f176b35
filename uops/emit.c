/* uops/emit.c: what every uop's emit shares: a loop nest over a tensor's
 * shape, accesses at the nest's element, operands (constants inline, 0-d
 * tensors read without indices), fills and stores. */
#include <stdio.h>

#include "uops.h"

uj_status_t uop_oom(void) { return rt_error(UJ_ERR_OOM, "out of memory while emitting loop IR"); }

uj_status_t uop_nest_over(uop_emit_t* E, int t, uop_nest_t* nest) {
  ir_func_t* f = E->f;
  const ir_tensor_t* tt = &f->tensors[t];
  nest->block = ir_add_block(f);
  if (!nest->block) return uop_oom();
  nest->nloops = tt->ndim;
  nest->inner = NULL;
  ir_ix_t* zero = ir_ix_const(f, 0);
  if (!zero) return uop_oom();
  /* every block has a loop, so a 0-d result still has a place for its store */
  int count = tt->ndim ? tt->ndim : 1;
  for (int k = 0; k < count; k++) {
    ir_ix_t* end = tt->ndim ? tt->dims[k] : ir_ix_const(f, 1);
    ir_loop_t* l = ir_add_loop(f, nest->block, zero, end);
    if (!l) return uop_oom();
    if (k < UJ_MAX_DIMS) nest->loop_ids[k] = l->id;
  }
  nest->inner = &nest->block->loops[nest->block->nloops - 1];
  return UJ_OK;
}

void uop_access_at(const uop_nest_t* nest, int t, int ndim, ir_access_t* acc, ir_func_t* f) {
  ir_access_init(acc, t);
  acc->nidx = ndim;
  for (int k = 0; k < ndim; k++) acc->idx[k] = ir_ix_loop(f, nest->loop_ids[k]);
}

ir_expr_t* uop_operand(uop_emit_t* E, int n, const uop_nest_t* nest, uj_dtype_t dtype) {
  const uop_node_t* node = &E->g->nodes[n];
  /* a bf16/f16 node's values are f32 until stored */
  if (node->kind == UOP_CONST) return ir_ex_const(E->f, ir_dtype_compute(dtype), node->value);
  int t = E->tensor_of[n];
  ir_access_t acc;
  uop_access_at(nest, t, E->f->tensors[t].ndim, &acc, E->f);
  for (int k = 0; k < acc.nidx; k++)
    if (!acc.idx[k]) return NULL;
  return ir_ex_load(E->f, &acc);
}

uj_status_t uop_store(uop_emit_t* E, const uop_nest_t* nest, int t, ir_expr_t* value) {
  if (!value) return uop_oom();
  ir_stmt_t* s = ir_add_stmt(E->f, nest->inner, IR_ST_STORE);
  if (!s) return uop_oom();
  uop_access_at(nest, t, E->f->tensors[t].ndim, &s->target, E->f);
  for (int k = 0; k < s->target.nidx; k++)
    if (!s->target.idx[k]) return uop_oom();
  s->value = value;
  return UJ_OK;
}

uj_status_t uop_emit_fill(uop_emit_t* E, int t, double value) {
  uop_nest_t nest;
  uj_status_t s = uop_nest_over(E, t, &nest);
  if (s != UJ_OK) return s;
  return uop_store(E, &nest, t, ir_ex_const(E->f, ir_dtype_compute(E->f->tensors[t].dtype), value));
}

uj_status_t uop_elementwise_shape(uop_emit_t* E, int n) {
  const uop_node_t* node = &E->g->nodes[n];
  ir_tensor_t* out = &E->f->tensors[E->tensor_of[n]];
  /* the shape comes from the first operand that is not 0-d */
  int src = -1;
  for (int i = 0; i < node->nin && src < 0; i++)
    if (E->g->nodes[node->in[i]].ndim > 0) src = i;
  if (src < 0) return UJ_OK; /* every operand 0-d: so is the result */
  const ir_tensor_t* st = &E->f->tensors[E->tensor_of[node->in[src]]];
  for (int k = 0; k < out->ndim; k++) out->dims[k] = st->dims[k];
  static const char* const operand_names[3][3] = {
      {"x", "", ""}, {"a", "b", ""}, {"cond", "a", "b"}};
  const char* const* names = operand_names[node->nin - 1];
  const char* opname = node->kind == UOP_BINARY ? "binary" : uop_kind_name(node->kind);
  for (int i = 0; i < node->nin; i++) {
    const uop_node_t* in = &E->g->nodes[node->in[i]];
    if (i == src || in->ndim == 0) continue;
    const ir_tensor_t* it = &E->f->tensors[E->tensor_of[node->in[i]]];
    for (int k = 0; k < out->ndim; k++) {
      if (ir_ix_equal(it->dims[k], st->dims[k])) continue;
      char what[256], da[80], db[80];
      snprintf(what, sizeof what, "%s node %d: axis %d of operand %s (%s) and operand %s (%s) differ", opname, n, k,
               names[src], uop_node_desc(E->g, node->in[src], da, sizeof da), names[i],
               uop_node_desc(E->g, node->in[i], db, sizeof db));
      if (ir_add_assert(E->f, st->dims[k], it->dims[k], what) < 0) return uop_oom();
    }
  }
  return UJ_OK;
}

/* Non-0-d operands of an elementwise uop must share one rank (*ndim). */
int uop_ranks_agree(const uj_graph_t* g, const char* builder, int count, const uj_io_t* ids,
                       const char* const* names, int* ndim) {
  *ndim = 0;
  int first = -1;
  for (int i = 0; i < count; i++) {
    int r = g->nodes[ids[i]].ndim;
    if (r == 0) continue;
    if (first < 0) {
      first = i;
      *ndim = r;
    } else if (r != *ndim) {
      rt_error(UJ_ERR_SHAPE, "%s: %s (node %d) has rank %d but %s (node %d) has rank %d; ranks must agree or one be 0-d",
               builder, names[first], ids[first], *ndim, names[i], ids[i], r);
      return 0;
    }
  }
  return 1;
}

int uop_is_value(const uj_graph_t* g, uj_io_t id, const char* builder, const char* name) {
  if (g->nodes[id].kind == UOP_GRAD) {
    rt_error(UJ_ERR_INVALID, "%s: %s (node %d) is a gradient name, not a value", builder, name, id);
    return 0;
  }
  return 1;
}

uj_status_t uop_grad_elementwise(uop_emit_t* E, int n, int operand, int gout, int dst, uop_local_grad_fn local) {
  ir_func_t* f = E->f;
  int outt = E->tensor_of[n];
  int out_ndim = f->tensors[outt].ndim;
  int reduce_all = E->g->nodes[E->g->nodes[n].in[operand]].ndim == 0 && out_ndim > 0;
  uop_nest_t nest;
  if (!reduce_all) {
    uj_status_t s = uop_nest_over(E, outt, &nest);
    if (s != UJ_OK) return s;
    ir_access_t acc;
    uop_access_at(&nest, gout, out_ndim, &acc, f);
    ir_expr_t* g = ir_ex_load(f, &acc);
    return uop_store(E, &nest, dst, g ? local(E, n, operand, &nest, g) : NULL);
  }
  /* a 0-d operand was read at every element: its gradient is the sum */
  ir_ix_t* zero = ir_ix_const(f, 0);
  ir_block_t* b = ir_add_block(f);
  if (!zero || !b || !ir_add_loop(f, b, zero, ir_ix_const(f, 1))) return uop_oom();
  int c = ir_add_carried(f, &b->loops[0], UJ_REDUCE_SUM, f->tensors[dst].dtype);
  if (c < 0) return uop_oom();
  nest.block = b;
  nest.nloops = out_ndim;
  for (int k = 0; k < out_ndim; k++) {
    ir_loop_t* l = ir_add_loop(f, b, zero, f->tensors[outt].dims[k]);
    if (!l) return uop_oom();
    nest.loop_ids[k] = l->id;
  }
  nest.inner = &b->loops[b->nloops - 1];
  ir_access_t acc;
  uop_access_at(&nest, gout, out_ndim, &acc, f);
  ir_expr_t* g = ir_ex_load(f, &acc);
  ir_expr_t* v = g ? local(E, n, operand, &nest, g) : NULL;
  ir_stmt_t* s = v ? ir_add_stmt(f, nest.inner, IR_ST_ACCUM) : NULL;
  ir_stmt_t* st = s ? ir_add_stmt(f, &b->loops[0], IR_ST_STORE) : NULL;
  ir_expr_t* cv = ir_ex_carried(f, c, f->tensors[dst].dtype);
  if (!st || !cv) return uop_oom();
  s = &b->loops[b->nloops - 1].stmts[b->loops[b->nloops - 1].nstmts - 1];
  s->carried = c;
  s->value = v;
  ir_access_init(&st->target, dst);
  st->value = cv;
  return UJ_OK;
}
