/* uops/reindex.c: out[i0, ...] = x[index0(i), index1(i), ...], with out's
 * shape given by size expressions over shape sources (dXn) and $params.
 *
 * Build: every expression is parsed and checked (iN within out's rank, dXn
 * naming an existing source and axis, no iN in a size). Shape phase: dXn
 * becomes the source tensor's size, $name its parameter slot, and each
 * [=] assertion a run-time check. Emit: one block over out's shape; an index
 * that the bounds prover cannot keep inside x is checked at run time, and
 * then a zero-fill block comes first so that skipped elements read 0.
 *
 * Gradient: dx = 0, then dx[index(i)] += dout[i] over out's shape (a
 * scatter-add, checked where the index may leave x). */
#include <stdio.h>
#include <string.h>

#include "uops.h"

typedef struct {
  const uj_graph_t* g;
  const uop_node_t* node;  /* the reindex being built (ss, nshape known) */
  const char* text;
  const char* where;       /* "shape[2]" */
  int allow_loops;
  int failed;
} check_t;

static void check_leaf(check_t* c, const ir_ix_t* ix) {
  if (c->failed) return;
  if (ix->kind == IR_IX_LOOP) {
    if (!c->allow_loops) {
      rt_error(UJ_ERR_PARSE, "uj_reindex: %s \"%s\": i%d: a size cannot use loop indices", c->where, c->text, ix->id);
      c->failed = 1;
    } else if (ix->id >= c->node->nshape) {
      rt_error(UJ_ERR_PARSE, "uj_reindex: %s \"%s\": i%d names axis %d, but the output has rank %d", c->where,
               c->text, ix->id, ix->id, c->node->nshape);
      c->failed = 1;
    }
  } else if (ix->kind == IR_IX_DIM) {
    if (ix->id >= c->node->nss) {
      rt_error(UJ_ERR_PARSE, "uj_reindex: %s \"%s\": d%c%d names shape source %c, but only %d given", c->where,
               c->text, 'A' + ix->id, ix->axis, 'A' + ix->id, c->node->nss);
      c->failed = 1;
    } else {
      int src = c->node->ss[ix->id];
      if (ix->axis >= c->g->nodes[src].ndim) {
        rt_error(UJ_ERR_PARSE, "uj_reindex: %s \"%s\": d%c%d names axis %d of node %d, which has rank %d",
                 c->where, c->text, 'A' + ix->id, ix->axis, ix->axis, src, c->g->nodes[src].ndim);
        c->failed = 1;
      }
    }
  }
}

static void check_tree(check_t* c, const ir_ix_t* ix) {
  if (!ix || c->failed) return;
  check_leaf(c, ix);
  check_tree(c, ix->a);
  check_tree(c, ix->b);
}

/* Parses and checks one expression into the graph's arena. */
static int parse_one(uj_graph_t* g, uop_node_t* node, const char* text, const char* where, int allow_loops,
                     uop_ixtext_t* out, ir_ix_assertion_t* asserts, const char** assert_text, int* nasserts) {
  if (!text) {
    rt_error(UJ_ERR_INVALID, "uj_reindex: %s is NULL", where);
    return 0;
  }
  ir_ix_assertion_t local[IR_IX_MAX_ASSERTIONS];
  int nlocal = 0;
  uj_status_t s = ir_ix_parse(&g->arena, text, &out->ix, local, &nlocal);
  if (s != UJ_OK) {
    rt_error_prefix("uj_reindex: %s: ", where);
    return 0;
  }
  out->text = rt_arena_strdup(&g->arena, text);
  if (!out->text) return uop_oom(), 0;
  check_t c = {g, node, text, where, allow_loops, 0};
  check_tree(&c, out->ix);
  for (int i = 0; i < nlocal && !c.failed; i++) {
    check_tree(&c, local[i].dim);
    check_tree(&c, local[i].equal_to);
    if (*nasserts >= UJ_MAX_DIMS * 2 * IR_IX_MAX_ASSERTIONS) {
      rt_error(UJ_ERR_PARSE, "uj_reindex: %s \"%s\": too many [=] assertions", where, text);
      return 0;
    }
    asserts[*nasserts] = local[i];
    assert_text[(*nasserts)++] = out->text;
  }
  return !c.failed;
}

uj_io_t uj_reindex(uj_graph_t* g, uj_io_t x, int shape_count, const char* const* shape, int ss_count,
                   const uj_io_t* ss, int index_count, const char* const* index) {
  if (!uop_check_id(g, x, "uj_reindex", "x")) return -1;
  if (!uop_is_value(g, x, "uj_reindex", "x")) return -1;
  const uop_node_t* xn = &g->nodes[x];
  if (shape_count < 0 || shape_count > UJ_MAX_DIMS)
    return rt_error(UJ_ERR_INVALID, "uj_reindex: shape_count %d is outside 0..%d", shape_count, UJ_MAX_DIMS), -1;
  if (ss_count < 0 || ss_count > 26)
    return rt_error(UJ_ERR_INVALID, "uj_reindex: ss_count %d is outside 0..26", ss_count), -1;
  if (index_count != xn->ndim)
    return rt_error(UJ_ERR_INVALID, "uj_reindex: %d index expressions for x (node %d) of rank %d", index_count, x,
                    xn->ndim), -1;
  if ((shape_count && !shape) || (ss_count && !ss) || (index_count && !index))
    return rt_error(UJ_ERR_INVALID, "uj_reindex: a NULL array with a non-zero count"), -1;
  for (int i = 0; i < ss_count; i++) {
    char what[32];
    snprintf(what, sizeof what, "ss[%d]", i);
    if (!uop_check_id(g, ss[i], "uj_reindex", what)) return -1;
  }
  uop_node_t n = {.kind = UOP_REINDEX, .dtype = xn->dtype, .ndim = shape_count, .nin = 1, .in = {x},
                  .nshape = shape_count, .nss = ss_count, .nindex = index_count};
  int cap = UJ_MAX_DIMS * 2 * IR_IX_MAX_ASSERTIONS;
  n.shape = rt_arena_alloc(&g->arena, (size_t)(shape_count + 1) * sizeof *n.shape);
  n.index = rt_arena_alloc(&g->arena, (size_t)(index_count + 1) * sizeof *n.index);
  n.ss = rt_arena_alloc(&g->arena, (size_t)(ss_count + 1) * sizeof *n.ss);
  n.asserts = rt_arena_alloc(&g->arena, (size_t)cap * sizeof *n.asserts);
  n.assert_text = rt_arena_alloc(&g->arena, (size_t)cap * sizeof *n.assert_text);
  if (!n.shape || !n.index || !n.ss || !n.asserts || !n.assert_text) return uop_oom(), -1;
  for (int i = 0; i < ss_count; i++) n.ss[i] = ss[i];
  for (int i = 0; i < shape_count; i++) {
    char where[32];
    snprintf(where, sizeof where, "shape[%d]", i);
    if (!parse_one(g, &n, shape[i], where, 0, &n.shape[i], n.asserts, n.assert_text, &n.nasserts)) return -1;
  }
  for (int i = 0; i < index_count; i++) {
    char where[32];
    snprintf(where, sizeof where, "index[%d]", i);
    if (!parse_one(g, &n, index[i], where, 1, &n.index[i], n.asserts, n.assert_text, &n.nasserts)) return -1;
  }
  return uop_graph_add(g, &n);
}

/* ---- resolution of source terms into the function ---- */

typedef struct {
  uop_emit_t* E;
  const uop_node_t* node;
  int n;
  const int* loop_ids;   /* NULL in the shape phase */
  int failed;            /* the error is set; status says which */
  uj_status_t status;
} resolve_t;

static ir_ix_t* resolve_leaf(void* ctx, const ir_ix_t* leaf) {
  resolve_t* r = ctx;
  ir_func_t* f = r->E->f;
  switch (leaf->kind) {
    case IR_IX_DIM: {
      int t = r->E->tensor_of[r->node->ss[leaf->id]];
      return f->tensors[t].dims[leaf->axis];
    }
    case IR_IX_LOOP: return r->loop_ids ? ir_ix_loop(f, r->loop_ids[leaf->id]) : NULL;
    case IR_IX_PARAM: {
      for (int i = 0; i < r->E->nparams; i++) {
        const char* p = r->E->params[i];
        if (p[0] == '$' && !strcmp(p + 1, leaf->name)) {
          ir_ix_t* ix = rt_arena_alloc(&f->arena, sizeof *ix);
          if (!ix) return NULL;
          *ix = *leaf;
          ix->id = i;
          ix->name = f->param_names[i];
          return ix;
        }
      }
      if (!r->failed)
        r->status = rt_error(UJ_ERR_INVALID, "reindex node %d uses $%s, which is not among the program's params", r->n,
                 leaf->name);
      r->failed = 1;
      return NULL;
    }
    default: return ir_ix_copy(&f->arena, leaf);
  }
}

static ir_ix_t* resolve(resolve_t* r, const ir_ix_t* ix) {
  ir_ix_t* out = ir_ix_map(&r->E->f->arena, ix, resolve_leaf, r);
  if (!out && !r->failed) {
    r->status = uop_oom();
    r->failed = 1;
  }
  return out;
}

uj_status_t uop_reindex_shape(uop_emit_t* E, int n) {
  const uop_node_t* node = &E->g->nodes[n];
  ir_tensor_t* out = &E->f->tensors[E->tensor_of[n]];
  resolve_t r = {E, node, n, NULL, 0, UJ_OK};
  for (int k = 0; k < node->nshape; k++) {
    out->dims[k] = resolve(&r, node->shape[k].ix);
    if (r.failed) return r.status;
  }
  for (int i = 0; i < node->nasserts; i++) {
    const ir_ix_assertion_t* as = &node->asserts[i];
    ir_ix_t* a = resolve(&r, as->dim);
    ir_ix_t* b = resolve(&r, as->equal_to);
    if (r.failed) return r.status;
    char what[200];
    snprintf(what, sizeof what, "reindex node %d: assertion d%c%d[=d%c%d] in \"%.80s\" failed", n,
             'A' + as->dim->id, as->dim->axis, 'A' + as->equal_to->id, as->equal_to->axis, node->assert_text[i]);
    if (ir_add_assert(E->f, a, b, what) < 0) return uop_oom();
  }
  return UJ_OK;
}

uj_status_t uop_reindex_emit(uop_emit_t* E, int n) {
  const uop_node_t* node = &E->g->nodes[n];
  ir_func_t* f = E->f;
  int t = E->tensor_of[n], xt = E->tensor_of[node->in[0]];
  uop_nest_t nest;
  uj_status_t s = uop_nest_over(E, t, &nest);
  if (s != UJ_OK) return s;
  resolve_t r = {E, node, n, nest.loop_ids, 0, UJ_OK};
  ir_access_t acc;
  ir_access_init(&acc, xt);
  acc.nidx = node->nindex;
  int depth = nest.block->nloops - 1;
  for (int k = 0; k < node->nindex; k++) {
    acc.idx[k] = resolve(&r, node->index[k].ix);
    if (r.failed) return r.status;
    if (!ir_bounds_prove(f, nest.block, depth, acc.idx[k], f->tensors[xt].dims[k])) acc.check_mask |= 1u << k;
  }
  s = uop_store(E, &nest, t, ir_ex_load(f, &acc));
  if (s != UJ_OK || !acc.check_mask) return s;
  /* some reads may fall outside x: zero the output first, and put that
   * block before the gather */
  s = uop_emit_fill(E, t, 0.0);
  if (s != UJ_OK) return s;
  ir_block_t tmp = f->blocks[f->nblocks - 1];
  f->blocks[f->nblocks - 1] = f->blocks[f->nblocks - 2];
  f->blocks[f->nblocks - 2] = tmp;
  return UJ_OK;
}

uj_status_t uop_reindex_grad(uop_emit_t* E, int n, int operand, int gout, int dst) {
  (void)operand;
  const uop_node_t* node = &E->g->nodes[n];
  ir_func_t* f = E->f;
  uj_status_t s = uop_emit_fill(E, dst, 0.0);
  if (s != UJ_OK) return s;
  uop_nest_t nest;
  if ((s = uop_nest_over(E, E->tensor_of[n], &nest)) != UJ_OK) return s;
  resolve_t r = {E, node, n, nest.loop_ids, 0, UJ_OK};
  ir_stmt_t* st = ir_add_stmt(f, nest.inner, IR_ST_SCATTER_ADD);
  if (!st) return uop_oom();
  ir_access_init(&st->target, dst);
  st->target.nidx = node->nindex;
  for (int k = 0; k < node->nindex; k++) {
    st->target.idx[k] = resolve(&r, node->index[k].ix);
    if (r.failed) return r.status;
    if (!ir_bounds_prove(f, nest.block, nest.block->nloops - 1, st->target.idx[k], f->tensors[dst].dims[k]))
      st->target.check_mask |= 1u << k;
  }
  ir_access_t acc;
  uop_access_at(&nest, gout, f->tensors[gout].ndim, &acc, f);
  st = &nest.inner->stmts[nest.inner->nstmts - 1];
  if (!(st->value = ir_ex_load(f, &acc))) return uop_oom();
  return UJ_OK;
}
