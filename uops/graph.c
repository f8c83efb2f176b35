/* uops/graph.c: the uop graph, and the uops with no computation of their
 * own: input (a tensor given at run time), const (a 0-d value that adopts
 * its partner's dtype) and grad (a name for a gradient). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uops.h"

uj_graph_t* uj_graph_new(void) {
  uj_graph_t* g = calloc(1, sizeof *g);
  if (g) rt_arena_init(&g->arena);
  else rt_error(UJ_ERR_OOM, "uj_graph_new: out of memory allocating a graph (%zu bytes)", sizeof *g);
  return g;
}

void uj_graph_free(uj_graph_t* g) {
  if (!g) return;
  rt_arena_release(&g->arena);
  free(g);
}

const char* uop_kind_name(uop_kind_t kind) {
  static const char* const names[] = {"input", "const",  "reindex", "unary", "binary",
                                      "where", "reduce", "select",  "cast",  "grad"};
  return (unsigned)kind < sizeof names / sizeof *names ? names[kind] : "?";
}

const char* uop_node_desc(const uj_graph_t* g, int id, char* buf, size_t n) {
  if (g->nodes[id].label) snprintf(buf, n, "'%s'", g->nodes[id].label);
  else snprintf(buf, n, "node %d", id);
  return buf;
}

int uop_graph_add(uj_graph_t* g, const uop_node_t* node) {
  if (!rt_arena_grow(&g->arena, (void**)&g->nodes, &g->cap, g->n + 1, sizeof *g->nodes)) {
    rt_error(UJ_ERR_OOM, "graph: out of memory adding a %s node", uop_kind_name(node->kind));
    return -1;
  }
  g->nodes[g->n] = *node;
  return g->n++;
}

int uop_check_id(const uj_graph_t* g, uj_io_t id, const char* builder, const char* what) {
  if (!g) {
    rt_error(UJ_ERR_INVALID, "%s: the graph is NULL", builder);
    return 0;
  }
  if (id < 0 || id >= g->n) {
    rt_error(UJ_ERR_INVALID, "%s: %s is %d, not a node of this graph (it has %d)", builder, what, id,
             g->n);
    return 0;
  }
  return 1;
}

uj_dtype_t uop_dtype_with(const uj_graph_t* g, uj_io_t id, uj_io_t partner) {
  const uop_node_t* n = &g->nodes[id];
  if (n->kind == UOP_CONST && partner >= 0 && g->nodes[partner].kind != UOP_CONST)
    return g->nodes[partner].dtype;
  return n->dtype;
}

static int dtype_ok(uj_dtype_t d) { return uj_dtype_size(d) != 0; }

uj_io_t uj_input(uj_graph_t* g, int ndim, uj_dtype_t dtype) {
  if (!g) return rt_error(UJ_ERR_INVALID, "uj_input: the graph is NULL"), -1;
  if (ndim < 0 || ndim > UJ_MAX_DIMS)
    return rt_error(UJ_ERR_INVALID, "uj_input: rank %d is outside 0..%d", ndim, UJ_MAX_DIMS), -1;
  if (!dtype_ok(dtype)) return rt_error(UJ_ERR_INVALID, "uj_input: unknown dtype %d", (int)dtype), -1;
  uop_node_t n = {.kind = UOP_INPUT, .dtype = dtype, .ndim = ndim};
  return uop_graph_add(g, &n);
}

uj_io_t uj_const(uj_graph_t* g, double value) {
  if (!g) return rt_error(UJ_ERR_INVALID, "uj_const: the graph is NULL"), -1;
  uop_node_t n = {.kind = UOP_CONST, .dtype = UJ_F32, .ndim = 0, .value = value};
  return uop_graph_add(g, &n);
}

uj_io_t uop_grad(uj_graph_t* g, uj_io_t x) {
  const uop_node_t* xn = &g->nodes[x];
  uop_node_t n = {.kind = UOP_GRAD, .dtype = xn->dtype, .ndim = xn->ndim, .nin = 1, .in = {x}};
  return uop_graph_add(g, &n);
}

uj_io_t uj_grad(uj_graph_t* g, uj_io_t x) {
  if (!uop_check_id(g, x, "uj_grad", "x")) return -1;
  const uop_node_t* xn = &g->nodes[x];
  if (xn->kind == UOP_GRAD) return rt_error(UJ_ERR_INVALID, "uj_grad: node %d is already a gradient", x), -1;
  if (xn->dtype == UJ_I32)
    return rt_error(UJ_ERR_INVALID, "uj_grad: node %d is i32; only float tensors have gradients", x), -1;
  return uop_grad(g, x);
}

/* A const that is an output (or otherwise materialized) is one store. */
uj_status_t uop_const_emit(uop_emit_t* E, int n) {
  return uop_emit_fill(E, E->tensor_of[n], E->g->nodes[n].value);
}
