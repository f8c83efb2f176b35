/* uops/program.c: combine a graph into a program (DESIGN section 5,
 * "Combining").
 *
 * 1. Check the description: inputs are distinct input nodes, params are
 *    distinct "$name"s, outputs are value nodes.
 * 2. Order: a depth-first walk from the outputs (topo_order); a reached
 *    input that is not listed is an error naming it.
 * 3. Tensors: the inputs in the description's order, then one per needed
 *    node in topological order.
 * 4. Shapes of every node, assertions collected, then canonical sizes
 *    (uop_canonicalize), so that the passes see equal loop ranges.
 * 5. Emit every node's blocks in order, then a copy for any output that is
 *    an input or appears twice; verify; run the pass pipeline. */
#include <stdlib.h>
#include <string.h>

#include "uops.h"

static void program_release(uj_program_t* p) {
  if (!p) return;
  if (p->parsed) p->parsed_free(p->parsed);
  if (p->jit_memo) p->jit_memo_free(p->jit_memo);
  for (int i = 0; i < 2; i++) {
    ir_func_free(p->raw[i]);
    ir_func_free(p->opt[i]);
  }
  for (int i = 0; i < p->nparams; i++) free(p->param_names[i]);
  free(p->param_names);
  free(p);
}

void uj_program_free(uj_program_t* p) { program_release(p); }

const ir_func_t* uop_program_func(const uj_program_t* p, uj_pass_t pass, int optimized) {
  if (pass != UJ_FORWARD && pass != UJ_BACKWARD) {
    rt_error(UJ_ERR_INVALID, "pass %d is neither UJ_FORWARD nor UJ_BACKWARD", (int)pass);
    return NULL;
  }
  const ir_func_t* f = optimized ? p->opt[pass] : p->raw[pass];
  if (!f) rt_error(UJ_ERR_INVALID, "this program has no %s pass", pass == UJ_FORWARD ? "forward" : "backward");
  return f;
}

uj_status_t uop_program_check_counts(const uj_program_t* p, uj_pass_t pass, int inputs, int params, int outputs) {
  if (inputs >= 0 && inputs != p->ninputs[pass])
    return rt_error(UJ_ERR_INVALID, "the program takes %d inputs, got %d", p->ninputs[pass], inputs);
  if (params >= 0 && params != p->nparams)
    return rt_error(UJ_ERR_INVALID, "the program takes %d params, got %d", p->nparams, params);
  if (outputs >= 0 && outputs != p->noutputs[pass])
    return rt_error(UJ_ERR_INVALID, "the program has %d outputs, got %d", p->noutputs[pass], outputs);
  return UJ_OK;
}

static int valid_param_name(const char* s) {
  if (!s || s[0] != '$') return 0;
  if (!((s[1] >= 'a' && s[1] <= 'z') || (s[1] >= 'A' && s[1] <= 'Z') || s[1] == '_')) return 0;
  for (const char* c = s + 2; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
      return 0;
  return 1;
}

static uj_status_t check_desc(const uj_graph_t* g, const uj_program_desc_t* d) {
  if (d->input_count < 0 || d->param_count < 0 || d->output_count < 0 || d->ingrad_count < 0 ||
      d->outgrad_count < 0)
    return rt_error(UJ_ERR_INVALID, "uj_program_new: a negative count in the description");
  if ((d->input_count && !d->inputs) || (d->param_count && !d->params) || (d->output_count && !d->outputs) ||
      (d->ingrad_count && !d->ingrads) || (d->outgrad_count && !d->outgrads))
    return rt_error(UJ_ERR_INVALID, "uj_program_new: a NULL array with a non-zero count in the description");
  if (d->output_count == 0 && d->outgrad_count == 0)
    return rt_error(UJ_ERR_INVALID, "uj_program_new: the program has no outputs and no outgrads");
  if (d->outgrad_count && !d->ingrad_count)
    return rt_error(UJ_ERR_INVALID, "uj_program_new: outgrads need ingrads (at least one gradient to start from)");
  for (int i = 0; i < d->param_count; i++) {
    if (!valid_param_name(d->params[i]))
      return rt_error(UJ_ERR_INVALID, "uj_program_new: param %d \"%s\" is not of the form $name", i,
                      d->params[i] ? d->params[i] : "(null)");
    for (int j = 0; j < i; j++)
      if (!strcmp(d->params[i], d->params[j]))
        return rt_error(UJ_ERR_INVALID, "uj_program_new: param %s is declared twice (%d and %d)", d->params[i], j, i);
  }
  for (int i = 0; i < d->input_count; i++) {
    int id = d->inputs[i];
    if (id < 0 || id >= g->n || g->nodes[id].kind != UOP_INPUT)
      return rt_error(UJ_ERR_INVALID, "uj_program_new: inputs[%d] = %d is not an input node of this graph", i, id);
    for (int j = 0; j < i; j++)
      if (d->inputs[j] == id)
        return rt_error(UJ_ERR_INVALID, "uj_program_new: node %d is listed as input %d and %d", id, j, i);
  }
  for (int i = 0; i < d->output_count; i++) {
    int id = d->outputs[i];
    if (id < 0 || id >= g->n)
      return rt_error(UJ_ERR_INVALID, "uj_program_new: outputs[%d] = %d is not a node of this graph", i, id);
    if (g->nodes[id].kind == UOP_GRAD)
      return rt_error(UJ_ERR_INVALID, "uj_program_new: outputs[%d] (node %d) is a gradient name; list it in outgrads",
                      i, id);
  }
  for (int i = 0; i < d->ingrad_count; i++) {
    int id = d->ingrads[i];
    if (id < 0 || id >= g->n)
      return rt_error(UJ_ERR_INVALID, "uj_program_new: ingrads[%d] = %d is not a node of this graph", i, id);
    for (int j = 0; j < i; j++)
      if (d->ingrads[j] == id)
        return rt_error(UJ_ERR_INVALID, "uj_program_new: node %d is listed as ingrad %d and %d", id, j, i);
  }
  for (int i = 0; i < d->outgrad_count; i++) {
    int id = d->outgrads[i];
    if (id < 0 || id >= g->n || g->nodes[id].kind != UOP_GRAD)
      return rt_error(UJ_ERR_INVALID, "uj_program_new: outgrads[%d] = %d is not a uj_grad node of this graph", i, id);
    for (int j = 0; j < i; j++)
      if (g->nodes[d->outgrads[j]].in[0] == g->nodes[id].in[0])
        return rt_error(UJ_ERR_INVALID, "uj_program_new: outgrads %d and %d name the gradient of the same node %d", j,
                        i, g->nodes[id].in[0]);
  }
  return UJ_OK;
}

/* Post-order walk from the outputs over operands and reindex shape sources,
 * iterative; order[] receives each needed node once, a topological order
 * correct for diamonds and shared subgraphs. */
static uj_status_t topo_order(const uj_graph_t* g, const uj_program_desc_t* d, int* order, int* count) {
  char* state = calloc((size_t)g->n, 1); /* 0 new, 1 on the stack, 2 done */
  int* stack = malloc((size_t)g->n * 2 * sizeof *stack + sizeof *stack);
  if (!state || !stack) {
    free(state);
    free(stack);
    return rt_error(UJ_ERR_OOM, "uj_program_new: out of memory sorting %d nodes (%zu bytes)", g->n,
                    (size_t)g->n * (1 + 2 * sizeof *stack) + sizeof *stack);
  }
  *count = 0;
  for (int o = 0; o < d->output_count; o++) {
    int sp = 0;
    if (state[d->outputs[o]]) continue;
    stack[sp++] = d->outputs[o];
    state[d->outputs[o]] = 1;
    while (sp) {
      int n = stack[sp - 1];
      const uop_node_t* node = &g->nodes[n];
      int pushed = 0;
      int ndeps = node->nin + (node->kind == UOP_REINDEX ? node->nss : 0);
      for (int i = 0; i < ndeps && !pushed; i++) {
        int m = i < node->nin ? node->in[i] : node->ss[i - node->nin];
        if (state[m]) continue; /* the graph is built in order, so no cycles */
        state[m] = 1;
        stack[sp++] = m;
        pushed = 1;
      }
      if (!pushed) {
        state[n] = 2;
        order[(*count)++] = n;
        sp--;
      }
    }
  }
  free(state);
  free(stack);
  return UJ_OK;
}

/* ---- canonical sizes ----
 * Each run-time equality between an input's size and another size makes
 * that size the input's representative, so that the passes see equal loop
 * ranges; the checks themselves keep the raw sizes and run before anything
 * executes. */

typedef struct {
  ir_func_t* f;
  ir_ix_t** alias;
  int ninputs;
  int depth;
} canon_t;

static ir_ix_t* canon(canon_t* c, const ir_ix_t* ix);

static ir_ix_t* canon_leaf(void* ctx, const ir_ix_t* leaf) {
  canon_t* c = ctx;
  if (leaf->kind == IR_IX_DIM && leaf->id < c->ninputs && c->alias[leaf->id * UJ_MAX_DIMS + leaf->axis] &&
      c->depth < 64) {
    c->depth++;
    ir_ix_t* r = canon(c, c->alias[leaf->id * UJ_MAX_DIMS + leaf->axis]);
    c->depth--;
    return r;
  }
  return (ir_ix_t*)leaf;
}

static ir_ix_t* canon(canon_t* c, const ir_ix_t* ix) { return ir_ix_map(&c->f->arena, ix, canon_leaf, c); }

static int mentions(const ir_ix_t* ix, const ir_ix_t* dim) {
  if (!ix) return 0;
  if (ix->kind == IR_IX_DIM && ix->id == dim->id && ix->axis == dim->axis) return 1;
  return mentions(ix->a, dim) || mentions(ix->b, dim);
}

static int is_input_dim(const canon_t* c, const ir_ix_t* ix) {
  return ix->kind == IR_IX_DIM && ix->id < c->ninputs;
}

uj_status_t uop_canonicalize(ir_func_t* f, int ninputs) {
  ir_ix_t** alias = calloc((size_t)(ninputs ? ninputs : 1) * UJ_MAX_DIMS, sizeof *alias);
  if (!alias) return uop_oom();
  canon_t c = {f, alias, ninputs, 0};
  uj_status_t s = UJ_OK;
  for (int i = 0; i < f->nasserts && s == UJ_OK; i++) {
    ir_ix_t* a = canon(&c, f->asserts[i].a);
    ir_ix_t* b = canon(&c, f->asserts[i].b);
    if (!a || !b) s = uop_oom();
    else if (ir_ix_equal(a, b)) continue;
    else if (is_input_dim(&c, a) && !mentions(b, a)) alias[a->id * UJ_MAX_DIMS + a->axis] = b;
    else if (is_input_dim(&c, b) && !mentions(a, b)) alias[b->id * UJ_MAX_DIMS + b->axis] = a;
  }
  for (int t = 0; t < f->ntensors && s == UJ_OK; t++)
    for (int k = 0; k < f->tensors[t].ndim; k++)
      if (!(f->tensors[t].dims[k] = canon(&c, f->tensors[t].dims[k]))) s = uop_oom();
  free(alias);
  return s;
}

/* ---- emission ---- */

uj_status_t uop_node_shape(uop_emit_t* E, int n) {
  switch (E->g->nodes[n].kind) {
    case UOP_REINDEX: return uop_reindex_shape(E, n);
    case UOP_REDUCE: return uop_reduce_shape(E, n);
    case UOP_SELECT: return uop_select_shape(E, n);
    case UOP_UNARY:
    case UOP_BINARY:
    case UOP_WHERE:
    case UOP_CAST: return uop_elementwise_shape(E, n);
    default: return UJ_OK; /* inputs have their own sizes, consts none */
  }
}

uj_status_t uop_node_emit(uop_emit_t* E, int n) {
  switch (E->g->nodes[n].kind) {
    case UOP_CONST: return uop_const_emit(E, n);
    case UOP_REINDEX: return uop_reindex_emit(E, n);
    case UOP_UNARY: return uop_unary_emit(E, n);
    case UOP_BINARY: return uop_binary_emit(E, n);
    case UOP_WHERE: return uop_where_emit(E, n);
    case UOP_REDUCE: return uop_reduce_emit(E, n);
    case UOP_SELECT: return uop_select_emit(E, n);
    case UOP_CAST: return uop_cast_emit(E, n);
    default: return UJ_OK;
  }
}

/* An output that is an input or already another output, or whose dtype is
 * bf16/f16, gets its own copy. */
static uj_status_t bind_outputs(uop_emit_t* E, const uj_program_desc_t* d) {
  ir_func_t* f = E->f;
  for (int o = 0; o < d->output_count; o++) {
    int src = E->tensor_of[d->outputs[o]];
    ir_tensor_t* st = &f->tensors[src];
    /* a bf16/f16 result is computed into an f32 temporary and rounded by
     * the copy into the output, so readers of the temporary see f32 */
    uj_dtype_t dtype = E->g->nodes[d->outputs[o]].dtype;
    if (st->role == IR_TENSOR_TEMP && !ir_dtype_is_half(dtype)) {
      st->role = IR_TENSOR_OUTPUT;
      st->io_index = o;
      continue;
    }
    int t = ir_add_tensor(f, dtype, st->ndim, IR_TENSOR_OUTPUT, o);
    if (t < 0) return uop_oom();
    st = &f->tensors[src];
    memcpy(f->tensors[t].dims, st->dims, sizeof st->dims);
    uop_nest_t nest;
    uj_status_t s = uop_nest_over(E, t, &nest);
    if (s != UJ_OK) return s;
    ir_access_t acc;
    uop_access_at(&nest, src, st->ndim, &acc, f);
    if ((s = uop_store(E, &nest, t, ir_ex_load(f, &acc))) != UJ_OK) return s;
  }
  return UJ_OK;
}

static uj_status_t build_forward(const uj_graph_t* g, const uj_program_desc_t* d, uj_program_t* p,
                                 ir_func_t** out) {
  int* order = malloc((size_t)g->n * sizeof *order + sizeof *order);
  int* tensor_of = malloc((size_t)g->n * sizeof *tensor_of + sizeof *tensor_of);
  ir_func_t* f = ir_func_new();
  uj_status_t s = UJ_OK;
  int count = 0;
  if (!order || !tensor_of || !f) {
    s = uop_oom();
    goto done;
  }
  for (int i = 0; i < g->n; i++) tensor_of[i] = -1;
  f->nparams = p->nparams;
  if (p->nparams && !(f->param_names = rt_arena_alloc(&f->arena, (size_t)p->nparams * sizeof(char*)))) {
    s = uop_oom();
    goto done;
  }
  for (int i = 0; i < p->nparams; i++)
    if (!(f->param_names[i] = rt_arena_strdup(&f->arena, p->param_names[i] + 1))) s = uop_oom();
  for (int i = 0; i < d->input_count && s == UJ_OK; i++) {
    const uop_node_t* in = &g->nodes[d->inputs[i]];
    int t = ir_add_tensor(f, in->dtype, in->ndim, IR_TENSOR_INPUT, i);
    if (t < 0) s = uop_oom();
    for (int k = 0; k < in->ndim && s == UJ_OK; k++)
      if (!(f->tensors[t].dims[k] = ir_ix_dim(f, t, k))) s = uop_oom();
    tensor_of[d->inputs[i]] = t;
  }
  if (s != UJ_OK || (s = topo_order(g, d, order, &count)) != UJ_OK) goto done;
  for (int i = 0; i < count; i++) {
    const uop_node_t* node = &g->nodes[order[i]];
    if (node->kind == UOP_INPUT) {
      if (tensor_of[order[i]] < 0) {
        s = rt_error(UJ_ERR_INVALID, "uj_program_new: input node %d is needed by the outputs but is not listed in inputs",
                     order[i]);
        goto done;
      }
      continue;
    }
    if (node->kind == UOP_GRAD) {
      s = rt_error(UJ_ERR_INVALID, "uj_program_new: node %d is a gradient name; a forward pass cannot read it", order[i]);
      goto done;
    }
    if ((tensor_of[order[i]] = ir_add_tensor(f, node->dtype, node->ndim, IR_TENSOR_TEMP, -1)) < 0) {
      s = uop_oom();
      goto done;
    }
  }
  uop_emit_t E = {f, g, tensor_of, (const char* const*)p->param_names, p->nparams, NULL};
  for (int i = 0; i < count && s == UJ_OK; i++) s = uop_node_shape(&E, order[i]);
  if (s == UJ_OK) s = uop_canonicalize(f, d->input_count);
  for (int i = 0; i < count && s == UJ_OK; i++) s = uop_node_emit(&E, order[i]);
  if (s == UJ_OK) s = bind_outputs(&E, d);
  if (s == UJ_OK && ir_verify(f) != UJ_OK) {
    rt_error_prefix("uj_program_new: internal error, the emitted IR is malformed: ");
    s = UJ_ERR_INVALID;
  }
done:
  free(order);
  free(tensor_of);
  if (s != UJ_OK) ir_func_free(f);
  else *out = f;
  return s;
}

uj_status_t uj_program_new(uj_graph_t* g, const uj_program_desc_t* desc, uj_program_t** out) {
  if (!g || !desc || !out) return rt_error(UJ_ERR_INVALID, "uj_program_new: graph, desc and out must not be NULL");
  uj_status_t s = check_desc(g, desc);
  if (s != UJ_OK) return s;
  uj_program_t* p = calloc(1, sizeof *p);
  if (!p) return uop_oom();
  p->ninputs[UJ_FORWARD] = desc->input_count;
  p->noutputs[UJ_FORWARD] = desc->output_count;
  p->ninputs[UJ_BACKWARD] = desc->ingrad_count;
  p->noutputs[UJ_BACKWARD] = desc->outgrad_count;
  p->nparams = desc->param_count;
  if (p->nparams && !(p->param_names = calloc((size_t)p->nparams, sizeof *p->param_names))) s = uop_oom();
  for (int i = 0; i < p->nparams && s == UJ_OK; i++)
    if (!(p->param_names[i] = strdup(desc->params[i]))) s = uop_oom();
  if (s == UJ_OK && desc->output_count) {
    s = build_forward(g, desc, p, &p->raw[UJ_FORWARD]);
    if (s == UJ_OK) s = ir_pipeline(p->raw[UJ_FORWARD], &p->opt[UJ_FORWARD]);
  }
  if (s == UJ_OK && desc->outgrad_count) {
    s = uop_build_backward(g, desc, p, &p->raw[UJ_BACKWARD]);
    if (s == UJ_OK) s = ir_pipeline(p->raw[UJ_BACKWARD], &p->opt[UJ_BACKWARD]);
  }
  if (s != UJ_OK) {
    program_release(p);
    return s;
  }
  *out = p;
  return UJ_OK;
}
