/* ir/ir.c: building loop-IR functions, and the generic tree utilities
 * (equality, leaf mapping, deep copy) that the emitters and passes share.
 * Everything is allocated in the function's arena; builders return NULL
 * (or -1) on out of memory and never abort. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

ir_func_t* ir_func_new(void) {
  ir_func_t* f = calloc(1, sizeof *f);
  if (f) rt_arena_init(&f->arena);
  return f;
}

void ir_func_free(ir_func_t* f) {
  if (!f) return;
  rt_arena_release(&f->arena);
  free(f);
}

int ir_add_tensor(ir_func_t* f, uj_dtype_t dtype, int ndim, ir_role_t role, int io_index) {
  if (!rt_arena_grow(&f->arena, (void**)&f->tensors, &f->tensor_cap, f->ntensors + 1,
                     sizeof *f->tensors))
    return -1;
  ir_tensor_t* t = &f->tensors[f->ntensors];
  memset(t, 0, sizeof *t);
  /* only inputs and outputs store bf16/f16: a temporary keeps f32, so what
   * a program computes does not depend on which temporaries the passes
   * remove (ir/half.c) */
  t->dtype = role == IR_TENSOR_TEMP ? ir_dtype_compute(dtype) : dtype;
  t->ndim = ndim;
  t->role = role;
  t->io_index = io_index;
  return f->ntensors++;
}

int ir_add_local(ir_func_t* f, uj_dtype_t dtype) {
  int t = ir_add_tensor(f, dtype, 0, IR_TENSOR_TEMP, -1);
  if (t >= 0) f->tensors[t].local = 1;
  return t;
}

ir_block_t* ir_add_block(ir_func_t* f) {
  if (!rt_arena_grow(&f->arena, (void**)&f->blocks, &f->block_cap, f->nblocks + 1,
                     sizeof *f->blocks))
    return NULL;
  ir_block_t* b = &f->blocks[f->nblocks++];
  memset(b, 0, sizeof *b);
  return b;
}

ir_loop_t* ir_add_loop(ir_func_t* f, ir_block_t* b, ir_ix_t* start, ir_ix_t* end) {
  if (!start || !end) return NULL;
  if (!rt_arena_grow(&f->arena, (void**)&b->loops, &b->loop_cap, b->nloops + 1, sizeof *b->loops))
    return NULL;
  ir_loop_t* l = &b->loops[b->nloops++];
  memset(l, 0, sizeof *l);
  l->id = f->next_loop_id++;
  l->start = start;
  l->end = end;
  return l;
}

int ir_add_carried(ir_func_t* f, ir_loop_t* l, uj_reduce_op_t op, uj_dtype_t dtype) {
  if (!rt_arena_grow(&f->arena, (void**)&l->carried, &l->carried_cap, l->ncarried + 1,
                     sizeof *l->carried))
    return -1;
  ir_carried_t* c = &l->carried[l->ncarried++];
  c->id = f->next_carried_id++;
  c->op = op;
  c->dtype = dtype;
  return c->id;
}

ir_stmt_t* ir_add_stmt(ir_func_t* f, ir_loop_t* l, ir_stmt_kind_t kind) {
  if (!rt_arena_grow(&f->arena, (void**)&l->stmts, &l->stmt_cap, l->nstmts + 1, sizeof *l->stmts))
    return NULL;
  ir_stmt_t* s = &l->stmts[l->nstmts++];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->carried = -1;
  return s;
}

ir_stmt_t* ir_insert_stmt(ir_func_t* f, ir_loop_t* l, int pos, ir_stmt_kind_t kind) {
  if (!ir_add_stmt(f, l, kind)) return NULL;
  ir_stmt_t s = l->stmts[l->nstmts - 1];
  memmove(&l->stmts[pos + 1], &l->stmts[pos], (size_t)(l->nstmts - 1 - pos) * sizeof *l->stmts);
  l->stmts[pos] = s;
  return &l->stmts[pos];
}

int ir_add_assert(ir_func_t* f, ir_ix_t* a, ir_ix_t* b, const char* what) {
  if (!a || !b) return -1;
  if (!rt_arena_grow(&f->arena, (void**)&f->asserts, &f->assert_cap, f->nasserts + 1,
                     sizeof *f->asserts))
    return -1;
  ir_assert_t* as = &f->asserts[f->nasserts];
  as->a = a;
  as->b = b;
  as->what = what ? rt_arena_strdup(&f->arena, what) : NULL;
  return f->nasserts++;
}

/* ---- index expressions ---- */

static ir_ix_t* ix_new(rt_arena_t* arena, ir_ix_kind_t kind) {
  ir_ix_t* ix = rt_arena_alloc(arena, sizeof *ix);
  if (ix) ix->kind = kind;
  return ix;
}

ir_ix_t* ir_ix_const(ir_func_t* f, int64_t v) {
  ir_ix_t* ix = ix_new(&f->arena, IR_IX_CONST);
  if (ix) ix->value = v;
  return ix;
}

ir_ix_t* ir_ix_loop(ir_func_t* f, int loop_id) {
  ir_ix_t* ix = ix_new(&f->arena, IR_IX_LOOP);
  if (ix) ix->id = loop_id;
  return ix;
}

ir_ix_t* ir_ix_dim(ir_func_t* f, int tensor, int axis) {
  ir_ix_t* ix = ix_new(&f->arena, IR_IX_DIM);
  if (ix) {
    ix->id = tensor;
    ix->axis = axis;
  }
  return ix;
}

ir_ix_t* ir_ix_bin(ir_func_t* f, ir_ix_kind_t kind, ir_ix_t* a, ir_ix_t* b) {
  if (!a || (kind != IR_IX_NEG && !b)) return NULL;
  ir_ix_t* ix = ix_new(&f->arena, kind);
  if (ix) {
    ix->a = a;
    ix->b = b;
  }
  return ix;
}

/* ---- value expressions ---- */

static ir_expr_t* ex_new(ir_func_t* f, ir_ex_kind_t kind, uj_dtype_t dtype) {
  ir_expr_t* e = rt_arena_alloc(&f->arena, sizeof *e);
  if (e) {
    e->kind = kind;
    e->dtype = dtype;
    e->carried = -1;
  }
  return e;
}

ir_expr_t* ir_ex_const(ir_func_t* f, uj_dtype_t dtype, double v) {
  ir_expr_t* e = ex_new(f, IR_EX_CONST, dtype);
  if (e) e->value = v;
  return e;
}

ir_expr_t* ir_ex_load(ir_func_t* f, const ir_access_t* acc) {
  ir_expr_t* e = ex_new(f, IR_EX_LOAD, ir_dtype_compute(f->tensors[acc->tensor].dtype));
  if (e) e->access = *acc;
  return e;
}

ir_expr_t* ir_ex_carried(ir_func_t* f, int carried, uj_dtype_t dtype) {
  ir_expr_t* e = ex_new(f, IR_EX_CARRIED, dtype);
  if (e) e->carried = carried;
  return e;
}

ir_expr_t* ir_ex_index(ir_func_t* f, ir_ix_t* ix, uj_dtype_t dtype) {
  if (!ix) return NULL;
  ir_expr_t* e = ex_new(f, IR_EX_INDEX, dtype);
  if (e) e->ix = ix;
  return e;
}

/* A node with operands x, y, z (a, b, c; NULL past the last) and op; NULL
 * when out of memory. */
static ir_expr_t* ex_operands(ir_func_t* f, ir_ex_kind_t kind, uj_dtype_t dtype, int op, ir_expr_t* x, ir_expr_t* y,
                              ir_expr_t* z) {
  ir_expr_t* e = ex_new(f, kind, dtype);
  if (e) {
    e->op = op;
    e->a = x;
    e->b = y;
    e->c = z;
  }
  return e;
}

/* The operand builders pass a failed operand's NULL on. */
ir_expr_t* ir_ex_unary(ir_func_t* f, uj_unary_op_t op, ir_expr_t* a) {
  return a ? ex_operands(f, IR_EX_UNARY, a->dtype, op, a, NULL, NULL) : NULL;
}

ir_expr_t* ir_ex_binary(ir_func_t* f, uj_binary_op_t op, ir_expr_t* a, ir_expr_t* b) {
  return a && b ? ex_operands(f, IR_EX_BINARY, a->dtype, op, a, b, NULL) : NULL;
}

/* The condition comes first: a = c, b = a, c = b. */
ir_expr_t* ir_ex_where(ir_func_t* f, ir_expr_t* c, ir_expr_t* a, ir_expr_t* b) {
  return c && a && b ? ex_operands(f, IR_EX_WHERE, a->dtype, 0, c, a, b) : NULL;
}

ir_expr_t* ir_ex_cast(ir_func_t* f, uj_dtype_t dtype, ir_expr_t* a) {
  return a ? ex_operands(f, IR_EX_CAST, dtype, 0, a, NULL, NULL) : NULL;
}

void ir_access_init(ir_access_t* acc, int tensor) {
  memset(acc, 0, sizeof *acc);
  acc->tensor = tensor;
}

/* ---- tree utilities ---- */

static int access_equal(const ir_access_t* a, const ir_access_t* b) {
  if (a->tensor != b->tensor || a->nidx != b->nidx || a->check_mask != b->check_mask) return 0;
  for (int k = 0; k < a->nidx; k++)
    if (!ir_ix_equal(a->idx[k], b->idx[k])) return 0;
  return 1;
}

int ir_ix_equal(const ir_ix_t* a, const ir_ix_t* b) {
  if (a == b) return 1;
  if (!a || !b || a->kind != b->kind) return 0;
  switch (a->kind) {
    case IR_IX_CONST: return a->value == b->value;
    case IR_IX_LOOP: return a->id == b->id;
    case IR_IX_DIM: return a->id == b->id && a->axis == b->axis;
    case IR_IX_PARAM:
      /* unbound parameters (slot -1) compare by name */
      if (a->id < 0 || b->id < 0) return a->id == b->id && a->name && b->name && !strcmp(a->name, b->name);
      return a->id == b->id;
    case IR_IX_LOAD: return access_equal(a->load, b->load);
    case IR_IX_NEG: return ir_ix_equal(a->a, b->a);
    default: return ir_ix_equal(a->a, b->a) && ir_ix_equal(a->b, b->b);
  }
}

static int is_leaf(const ir_ix_t* ix) {
  return ix->kind == IR_IX_CONST || ix->kind == IR_IX_LOOP || ix->kind == IR_IX_DIM ||
         ix->kind == IR_IX_PARAM || ix->kind == IR_IX_LOAD;
}

static ir_ix_t* map_rec(rt_arena_t* arena, const ir_ix_t* ix, ir_ix_leaf_fn fn, void* ctx,
                        int* failed) {
  if (!ix) return NULL;
  if (is_leaf(ix)) {
    if (ix->kind == IR_IX_LOAD) {
      /* a load's indices are index trees too */
      ir_access_t* acc = rt_arena_alloc(arena, sizeof *acc);
      ir_ix_t* copy = rt_arena_alloc(arena, sizeof *copy);
      if (!acc || !copy) {
        *failed = 1;
        return NULL;
      }
      *acc = *ix->load;
      for (int k = 0; k < acc->nidx; k++) acc->idx[k] = map_rec(arena, ix->load->idx[k], fn, ctx, failed);
      *copy = *ix;
      copy->load = acc;
      ir_ix_t* r = fn ? fn(ctx, copy) : copy;
      if (!r) *failed = 1;
      return r;
    }
    ir_ix_t* r = fn ? fn(ctx, ix) : (ir_ix_t*)ix;
    if (!r) *failed = 1;
    return r;
  }
  ir_ix_t* n = rt_arena_alloc(arena, sizeof *n);
  if (!n) {
    *failed = 1;
    return NULL;
  }
  *n = *ix;
  n->a = map_rec(arena, ix->a, fn, ctx, failed);
  n->b = map_rec(arena, ix->b, fn, ctx, failed);
  return n;
}

ir_ix_t* ir_ix_map(rt_arena_t* arena, const ir_ix_t* ix, ir_ix_leaf_fn fn, void* ctx) {
  int failed = 0;
  ir_ix_t* r = map_rec(arena, ix, fn, ctx, &failed);
  return failed ? NULL : r;
}

static ir_ix_t* copy_leaf(void* ctx, const ir_ix_t* leaf) {
  rt_arena_t* arena = ctx;
  ir_ix_t* n = rt_arena_alloc(arena, sizeof *n);
  if (!n) return NULL;
  *n = *leaf;
  if (leaf->name) n->name = rt_arena_strdup(arena, leaf->name);
  return n;
}

ir_ix_t* ir_ix_copy(rt_arena_t* arena, const ir_ix_t* ix) {
  if (!ix) return NULL;
  return ir_ix_map(arena, ix, copy_leaf, arena);
}

/* ---- deep copy ---- */

typedef struct {
  ir_func_t* dst;
  int failed;
} clone_t;

static ir_ix_t* clone_ix(clone_t* c, const ir_ix_t* ix) {
  if (!ix) return NULL;
  ir_ix_t* r = ir_ix_copy(&c->dst->arena, ix);
  if (!r) c->failed = 1;
  return r;
}

static void clone_access(clone_t* c, ir_access_t* dst, const ir_access_t* src) {
  *dst = *src;
  for (int k = 0; k < src->nidx; k++) dst->idx[k] = clone_ix(c, src->idx[k]);
}

static ir_expr_t* clone_expr(clone_t* c, const ir_expr_t* e) {
  if (!e) return NULL;
  ir_expr_t* n = rt_arena_alloc(&c->dst->arena, sizeof *n);
  if (!n) {
    c->failed = 1;
    return NULL;
  }
  *n = *e;
  if (e->kind == IR_EX_LOAD) clone_access(c, &n->access, &e->access);
  n->ix = clone_ix(c, e->ix);
  n->a = clone_expr(c, e->a);
  n->b = clone_expr(c, e->b);
  n->c = clone_expr(c, e->c);
  return n;
}

static void* clone_array(clone_t* c, const void* src, int n, size_t size) {
  if (!n) return NULL;
  void* r = rt_arena_dup(&c->dst->arena, src, (size_t)n * size);
  if (!r) c->failed = 1;
  return r;
}

ir_func_t* ir_func_clone(const ir_func_t* f) {
  ir_func_t* g = ir_func_new();
  if (!g) return NULL;
  clone_t c = {g, 0};
  g->ntensors = g->tensor_cap = f->ntensors;
  g->tensors = clone_array(&c, f->tensors, f->ntensors, sizeof *f->tensors);
  for (int t = 0; t < f->ntensors && !c.failed; t++) {
    for (int k = 0; k < f->tensors[t].ndim; k++) g->tensors[t].dims[k] = clone_ix(&c, f->tensors[t].dims[k]);
    if (f->tensors[t].name) g->tensors[t].name = rt_arena_strdup(&g->arena, f->tensors[t].name);
  }
  g->nblocks = g->block_cap = f->nblocks;
  g->blocks = clone_array(&c, f->blocks, f->nblocks, sizeof *f->blocks);
  for (int bi = 0; bi < f->nblocks && !c.failed; bi++) {
    const ir_block_t* sb = &f->blocks[bi];
    ir_block_t* db = &g->blocks[bi];
    db->loop_cap = sb->nloops;
    db->loops = clone_array(&c, sb->loops, sb->nloops, sizeof *sb->loops);
    for (int li = 0; li < sb->nloops && !c.failed; li++) {
      const ir_loop_t* sl = &sb->loops[li];
      ir_loop_t* dl = &db->loops[li];
      dl->start = clone_ix(&c, sl->start);
      dl->end = clone_ix(&c, sl->end);
      dl->carried_cap = sl->ncarried;
      dl->carried = clone_array(&c, sl->carried, sl->ncarried, sizeof *sl->carried);
      dl->stmt_cap = sl->nstmts;
      dl->stmts = clone_array(&c, sl->stmts, sl->nstmts, sizeof *sl->stmts);
      for (int si = 0; si < sl->nstmts && !c.failed; si++) {
        const ir_stmt_t* ss = &sl->stmts[si];
        ir_stmt_t* ds = &dl->stmts[si];
        clone_access(&c, &ds->target, &ss->target);
        ds->value = clone_expr(&c, ss->value);
        ds->arg_index = clone_ix(&c, ss->arg_index);
      }
    }
  }
  g->next_loop_id = f->next_loop_id;
  g->next_carried_id = f->next_carried_id;
  g->nparams = f->nparams;
  if (f->nparams) {
    g->param_names = rt_arena_alloc(&g->arena, (size_t)f->nparams * sizeof *g->param_names);
    if (!g->param_names) c.failed = 1;
    for (int i = 0; i < f->nparams && !c.failed; i++)
      g->param_names[i] = rt_arena_strdup(&g->arena, f->param_names[i]);
  }
  g->nasserts = g->assert_cap = f->nasserts;
  g->asserts = clone_array(&c, f->asserts, f->nasserts, sizeof *f->asserts);
  for (int i = 0; i < f->nasserts && !c.failed; i++) {
    g->asserts[i].a = clone_ix(&c, f->asserts[i].a);
    g->asserts[i].b = clone_ix(&c, f->asserts[i].b);
    if (f->asserts[i].what) g->asserts[i].what = rt_arena_strdup(&g->arena, f->asserts[i].what);
  }
  if (c.failed) {
    ir_func_free(g);
    return NULL;
  }
  return g;
}

ir_expr_t* ir_expr_copy(ir_func_t* f, const ir_expr_t* e) {
  clone_t c = {f, 0};
  ir_expr_t* r = clone_expr(&c, e);
  return c.failed ? NULL : r;
}
