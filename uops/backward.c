/* uops/backward.c: backward programs (reverse-mode autodiff over uops;
 * DESIGN section 5, "Backward programs").
 *
 * Given ingrads (gradients of some nodes, grad(y), and forward values the
 * caller already has) and outgrads (grad(x) wanted):
 * 1. relevant nodes are those on a path from some x to some y (analyse);
 * 2. forward values: every relevant node and, recursively, its operands and
 *    shape sources, stopping at nodes given in ingrads, are re-emitted as
 *    in the forward pass; dce later drops the ones no gradient reads;
 * 3. gradients in reverse topological order (propagate): the gradient of n
 *    is the sum of the contributions its consumers made, then each relevant
 *    float operand of n receives a new contribution from n's emit_grad;
 * 4. each outgrad is written once: the sum of its node's contributions, or
 *    zero when no path reaches it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uops.h"

typedef struct {
  int node, tensor;
} contrib_t;

typedef struct {
  uop_emit_t E;
  const uj_program_desc_t* d;
  char* relevant;
  char* needed;
  contrib_t* contribs;
  int ncontribs, cap;
} bw_t;

static int is_float_node(const uj_graph_t* g, int n) { return g->nodes[n].dtype != UJ_I32; }

static uj_status_t add_contrib(bw_t* b, int node, int tensor) {
  if (!rt_grow((void**)&b->contribs, &b->cap, b->ncontribs + 1, sizeof *b->contribs)) return uop_oom();
  b->contribs[b->ncontribs++] = (contrib_t){node, tensor};
  return UJ_OK;
}

/* A temporary shaped like node n's forward tensor. */
static int like_node(bw_t* b, int n, ir_role_t role, int io_index) {
  ir_func_t* f = b->E.f;
  int src = b->E.tensor_of[n];
  int t = ir_add_tensor(f, f->tensors[src].dtype, f->tensors[src].ndim, role, io_index);
  if (t >= 0) memcpy(f->tensors[t].dims, f->tensors[src].dims, sizeof f->tensors[src].dims);
  return t;
}

/* dst = sum of the tensors in list (all of dst's shape). */
static uj_status_t emit_sum(bw_t* b, int dst, const int* list, int count) {
  uop_nest_t nest;
  uj_status_t s = uop_nest_over(&b->E, dst, &nest);
  if (s != UJ_OK) return s;
  ir_func_t* f = b->E.f;
  ir_expr_t* v = NULL;
  for (int i = 0; i < count; i++) {
    ir_access_t acc;
    uop_access_at(&nest, list[i], f->tensors[list[i]].ndim, &acc, f);
    ir_expr_t* x = ir_ex_load(f, &acc);
    v = v ? ir_ex_binary(f, UJ_BINARY_ADD, v, x) : x;
  }
  if (!v) v = ir_ex_const(f, f->tensors[dst].dtype, 0.0);
  return uop_store(&b->E, &nest, dst, v);
}

static uj_status_t emit_operand_grad(bw_t* b, int n, int operand, int gout, int dst) {
  uop_emit_t* E = &b->E;
  switch (E->g->nodes[n].kind) {
    case UOP_UNARY: return uop_unary_grad(E, n, operand, gout, dst);
    case UOP_BINARY: return uop_binary_grad(E, n, operand, gout, dst);
    case UOP_WHERE: return uop_where_grad(E, n, operand, gout, dst);
    case UOP_CAST: return uop_cast_grad(E, n, operand, gout, dst);
    case UOP_REDUCE: return uop_reduce_grad(E, n, operand, gout, dst);
    case UOP_REINDEX: return uop_reindex_grad(E, n, operand, gout, dst);
    case UOP_SELECT: return uop_select_grad(E, n, operand, gout, dst);
    default: return UJ_OK;
  }
}

/* Whether operand i of node n can receive a gradient. */
static int grad_flows(const uj_graph_t* g, int n, int i) {
  const uop_node_t* node = &g->nodes[n];
  if (node->kind == UOP_WHERE && i == 0) return 0;   /* the condition */
  if (node->kind == UOP_SELECT && i == 1) return 0;  /* the index */
  return is_float_node(g, node->in[i]);
}

/* Graph ids are already topological (an uop only names earlier nodes), so
 * reverse id order is reverse topological order. A node's gradient sums
 * its consumers' contributions plus each grad(n) given (a node that is two
 * outputs gets both), so a tensor feeding several uops gets all of them. */
static uj_status_t propagate(bw_t* b, int* want) {
  const uj_graph_t* g = b->E.g;
  ir_func_t* f = b->E.f;
  int* list = malloc(((size_t)b->ncontribs + (size_t)g->n * 3 + 1) * sizeof *list);
  if (!list) return uop_oom();
  uj_status_t s = UJ_OK;
  for (int n = g->n - 1; n >= 0 && s == UJ_OK; n--) {
    if (!b->relevant[n]) continue;
    int count = 0;
    for (int i = 0; i < b->ncontribs; i++)
      if (b->contribs[i].node == n) list[count++] = b->contribs[i].tensor;
    int G;
    if (want[n] >= 0) {
      if ((G = like_node(b, n, IR_TENSOR_OUTPUT, want[n])) < 0 || (s = emit_sum(b, G, list, count)) != UJ_OK) break;
      want[n] = -2; /* written */
    } else if (count == 0) {
      continue; /* no gradient arrives: nothing flows on */
    } else if (count == 1) {
      G = list[0];
    } else if ((G = like_node(b, n, IR_TENSOR_TEMP, -1)) < 0 || (s = emit_sum(b, G, list, count)) != UJ_OK) {
      break;
    }
    const uop_node_t* node = &g->nodes[n];
    if (!is_float_node(g, n)) continue;
    for (int i = 0; i < node->nin && s == UJ_OK; i++) {
      int m = node->in[i];
      if (!b->relevant[m] || !grad_flows(g, n, i)) continue;
      int D = like_node(b, m, IR_TENSOR_TEMP, -1);
      if (D < 0) s = uop_oom();
      else if ((s = emit_operand_grad(b, n, i, G, D)) == UJ_OK) s = add_contrib(b, m, D);
    }
  }
  free(list);
  /* outgrads no path reaches: zero */
  for (int n = 0; n < g->n && s == UJ_OK; n++) {
    if (want[n] < 0) continue;
    int t = like_node(b, n, IR_TENSOR_OUTPUT, want[n]);
    s = t < 0 ? uop_oom() : uop_emit_fill(&b->E, t, 0.0);
    want[n] = -2;
  }
  (void)f;
  return s;
}

/* Marks what is relevant and which forward values are needed. Relevant:
 * descendants of the xs (through value operands) that are also ancestors of
 * the ys; i32 nodes carry no gradient. A needed input that is not in
 * ingrads is an error naming it. */
static uj_status_t analyse(bw_t* b, const int* given_grad, const int* want) {
  const uj_graph_t* g = b->E.g;
  char* from_x = calloc((size_t)g->n + 1, 1);
  char* to_y = calloc((size_t)g->n + 1, 1);
  if (!from_x || !to_y) {
    free(from_x);
    free(to_y);
    return uop_oom();
  }
  for (int n = 0; n < g->n; n++) {
    const uop_node_t* node = &g->nodes[n];
    from_x[n] = want[n] >= 0;
    for (int i = 0; i < node->nin && node->kind != UOP_GRAD; i++) from_x[n] |= from_x[node->in[i]];
  }
  for (int n = g->n - 1; n >= 0; n--) {
    const uop_node_t* node = &g->nodes[n];
    to_y[n] |= given_grad[n] >= 0;
    if (to_y[n] && node->kind != UOP_GRAD)
      for (int i = 0; i < node->nin; i++) to_y[node->in[i]] = 1;
  }
  for (int n = 0; n < g->n; n++) b->relevant[n] = from_x[n] && to_y[n] && is_float_node(g, n);
  free(from_x);
  free(to_y);
  /* forward values: relevant nodes and what they are computed from, down to
   * the values the caller gives; outgrad nodes need at least their sizes */
  for (int n = 0; n < g->n; n++) b->needed[n] = b->relevant[n] || want[n] >= 0;
  for (int n = g->n - 1; n >= 0; n--) {
    const uop_node_t* node = &g->nodes[n];
    if (!b->needed[n] || b->E.tensor_of[n] >= 0) continue; /* given: stop */
    for (int i = 0; i < node->nin; i++) b->needed[node->in[i]] = 1;
    if (node->kind == UOP_REINDEX)
      for (int i = 0; i < node->nss; i++) b->needed[node->ss[i]] = 1;
  }
  return UJ_OK;
}

uj_status_t uop_build_backward(const uj_graph_t* g, const uj_program_desc_t* d, const uj_program_t* p,
                               ir_func_t** out) {
  ir_func_t* f = ir_func_new();
  int* tensor_of = malloc(((size_t)g->n + 1) * sizeof *tensor_of);
  int* given_grad = malloc(((size_t)g->n + 1) * sizeof *given_grad);
  int* want = malloc(((size_t)g->n + 1) * sizeof *want);
  bw_t b = {{f, g, tensor_of, (const char* const*)p->param_names, p->nparams, NULL}, d,
            calloc((size_t)g->n + 1, 1), calloc((size_t)g->n + 1, 1), NULL, 0, 0};
  uj_status_t s = UJ_OK;
  if (!f || !tensor_of || !given_grad || !want || !b.relevant || !b.needed) {
    s = uop_oom();
    goto done;
  }
  for (int n = 0; n < g->n; n++) tensor_of[n] = given_grad[n] = want[n] = -1;
  for (int o = 0; o < d->outgrad_count; o++) want[g->nodes[d->outgrads[o]].in[0]] = o;
  f->nparams = p->nparams;
  if (p->nparams && !(f->param_names = rt_arena_alloc(&f->arena, (size_t)p->nparams * sizeof(char*)))) s = uop_oom();
  for (int i = 0; i < p->nparams && s == UJ_OK; i++)
    if (!(f->param_names[i] = rt_arena_strdup(&f->arena, p->param_names[i] + 1))) s = uop_oom();
  /* the ingrads are the inputs, in order: tensor i is ingrad i */
  for (int i = 0; i < d->ingrad_count && s == UJ_OK; i++) {
    int id = d->ingrads[i];
    const uop_node_t* node = &g->nodes[id];
    int t = ir_add_tensor(f, node->dtype, node->ndim, IR_TENSOR_INPUT, i);
    if (t < 0) {
      s = uop_oom();
      break;
    }
    for (int k = 0; k < node->ndim && s == UJ_OK; k++)
      if (!(f->tensors[t].dims[k] = ir_ix_dim(f, t, k))) s = uop_oom();
    if (node->kind == UOP_GRAD) given_grad[node->in[0]] = t;
    else tensor_of[id] = t;
  }
  if (s == UJ_OK) s = analyse(&b, given_grad, want);
  /* gradients would be summed and scattered into bf16/f16 tensors, where
   * each step would round: not offered */
  for (int n = 0; n < g->n && s == UJ_OK; n++)
    if ((b.needed[n] || want[n] >= 0) && ir_dtype_is_half(g->nodes[n].dtype))
      s = rt_error(UJ_ERR_UNSUPPORTED,
                   "uj_program_new: the backward pass needs node %d, of dtype %s; it takes f32, f64 and i32 only "
                   "(cast bf16 and f16 values to f32 first)",
                   n, uj_dtype_name(g->nodes[n].dtype));
  for (int n = 0; n < g->n && s == UJ_OK; n++) {
    if (!b.needed[n] || tensor_of[n] >= 0) continue;
    const uop_node_t* node = &g->nodes[n];
    if (node->kind == UOP_INPUT)
      s = rt_error(UJ_ERR_INVALID, "uj_program_new: the backward pass needs the values or sizes of input node %d; list it in ingrads", n);
    else if (node->kind == UOP_GRAD)
      s = rt_error(UJ_ERR_INVALID, "uj_program_new: the backward pass would read gradient name %d as a value", n);
    else if ((tensor_of[n] = ir_add_tensor(f, node->dtype, node->ndim, IR_TENSOR_TEMP, -1)) < 0)
      s = uop_oom();
  }
  for (int n = 0; n < g->n && s == UJ_OK; n++)
    if (b.needed[n] && g->nodes[n].kind != UOP_INPUT && f->tensors[tensor_of[n]].role == IR_TENSOR_TEMP)
      s = uop_node_shape(&b.E, n);
  /* a given gradient has its node's sizes */
  for (int i = 0; i < d->ingrad_count && s == UJ_OK; i++) {
    const uop_node_t* node = &g->nodes[d->ingrads[i]];
    int n = node->in[0];
    if (node->kind != UOP_GRAD || tensor_of[n] < 0) continue;
    const ir_tensor_t* gt = &f->tensors[i];
    for (int k = 0; k < gt->ndim && s == UJ_OK; k++) {
      char what[128];
      snprintf(what, sizeof what, "ingrad %d (the gradient of node %d): axis %d differs from the node's size", i, n, k);
      if (ir_add_assert(f, gt->dims[k], f->tensors[tensor_of[n]].dims[k], what) < 0) s = uop_oom();
    }
  }
  if (s == UJ_OK) s = uop_canonicalize(f, d->ingrad_count);
  for (int n = 0; n < g->n && s == UJ_OK; n++)
    if (b.needed[n] && f->tensors[tensor_of[n]].role == IR_TENSOR_TEMP) s = uop_node_emit(&b.E, n);
  /* every given gradient of a node contributes: one node may be two
   * outputs, each with its own gradient */
  for (int i = 0; i < d->ingrad_count && s == UJ_OK; i++) {
    const uop_node_t* node = &g->nodes[d->ingrads[i]];
    if (node->kind == UOP_GRAD && b.relevant[node->in[0]]) s = add_contrib(&b, node->in[0], i);
  }
  if (s == UJ_OK) s = propagate(&b, want);
  if (s == UJ_OK && ir_verify(f) != UJ_OK) {
    rt_error_prefix("uj_program_new: internal error, the backward IR is malformed: ");
    s = UJ_ERR_INVALID;
  }
done:
  free(tensor_of);
  free(given_grad);
  free(want);
  free(b.relevant);
  free(b.needed);
  free(b.contribs);
  if (s != UJ_OK) ir_func_free(f);
  else *out = f;
  return s;
}
