/* tests/test_ir_semantics.c: the IR's meaning that every target shares
 * (ir/semantics.c): the reduction identities and op classes as
 * docs/DESIGN.md states them, the order of one loop iteration, and the
 * order of a statement's range checks (an i32 read used as an index is
 * checked before the access that uses it), on functions built by hand. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../ir/ir.h"
#include "harness.h"

TEST(reduce_identities_and_classes) {
  CHECK(ir_reduce_identity(UJ_REDUCE_SUM, UJ_F32) == 0.0);
  CHECK(ir_reduce_identity(UJ_REDUCE_MEAN, UJ_I32) == 0.0);
  CHECK(ir_reduce_identity(UJ_REDUCE_PROD, UJ_F64) == 1.0);
  CHECK(ir_reduce_identity(UJ_REDUCE_PROD, UJ_I32) == 1.0);
  CHECK(isinf(ir_reduce_identity(UJ_REDUCE_MAX, UJ_F32)) && ir_reduce_identity(UJ_REDUCE_MAX, UJ_F32) < 0);
  CHECK(isinf(ir_reduce_identity(UJ_REDUCE_ARGMIN, UJ_F64)) && ir_reduce_identity(UJ_REDUCE_ARGMIN, UJ_F64) > 0);
  CHECK(ir_reduce_identity(UJ_REDUCE_ARGMAX, UJ_I32) == (double)INT32_MIN);
  CHECK(ir_reduce_identity(UJ_REDUCE_MIN, UJ_I32) == (double)INT32_MAX);

  static const uj_reduce_op_t all[] = {UJ_REDUCE_SUM, UJ_REDUCE_MEAN, UJ_REDUCE_PROD,  UJ_REDUCE_MAX,
                                       UJ_REDUCE_MIN, UJ_REDUCE_ARGMAX, UJ_REDUCE_ARGMIN};
  int args = 0, arithmetic = 0, greater = 0;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    args += ir_reduce_is_arg(all[i]);
    arithmetic += ir_reduce_is_arithmetic(all[i]);
    greater += ir_reduce_keeps_greater(all[i]);
    /* every op is exactly one of: a running sum or product, or a comparison */
    int compares = all[i] == UJ_REDUCE_MAX || all[i] == UJ_REDUCE_MIN || ir_reduce_is_arg(all[i]);
    CHECK(ir_reduce_is_arithmetic(all[i]) != compares);
  }
  CHECK(args == 2 && ir_reduce_is_arg(UJ_REDUCE_ARGMAX) && ir_reduce_is_arg(UJ_REDUCE_ARGMIN));
  CHECK(arithmetic == 3);
  CHECK(greater == 2 && ir_reduce_keeps_greater(UJ_REDUCE_MAX) && ir_reduce_keeps_greater(UJ_REDUCE_ARGMAX));
}

/* ---- the range-check walk ---- */

typedef struct {
  char seen[256];
} trace_t;

static void note_check(void* ctx, const ir_access_t* acc, int axis) {
  trace_t* t = ctx;
  size_t n = strlen(t->seen);
  snprintf(t->seen + n, sizeof t->seen - n, "t%d.%d ", acc->tensor, axis);
}

/* f: t0 f32 [d0_0, d0_1] input, t1 i32 [d1_0] input (indices), t2 f32 output.
 *   s: t2[i0 (checked)] = t0[i0, t1[i0 + 1] (checked)] (axis 1 checked)
 * The checks must come as: t1's axis 0 (inside t0's index), t0's axis 1,
 * then the target's axis 0. */
TEST(range_checks_inner_reads_first) {
  ir_func_t* f = ir_func_new();
  int x = ir_add_tensor(f, UJ_F32, 2, IR_TENSOR_INPUT, 0);
  int ix = ir_add_tensor(f, UJ_I32, 1, IR_TENSOR_INPUT, 1);
  int y = ir_add_tensor(f, UJ_F32, 1, IR_TENSOR_OUTPUT, 0);
  ir_block_t* b = ir_add_block(f);
  ir_loop_t* l = ir_add_loop(f, b, ir_ix_const(f, 0), ir_ix_dim(f, x, 0));
  ir_access_t* inner = rt_arena_alloc(&f->arena, sizeof *inner);
  ir_access_init(inner, ix);
  inner->nidx = 1;
  inner->idx[0] = ir_ix_bin(f, IR_IX_ADD, ir_ix_loop(f, l->id), ir_ix_const(f, 1));
  inner->check_mask = 1;
  ir_ix_t* gathered = ir_ix_const(f, 0);
  gathered->kind = IR_IX_LOAD;
  gathered->load = inner;
  ir_access_t read;
  ir_access_init(&read, x);
  read.nidx = 2;
  read.idx[0] = ir_ix_loop(f, l->id);
  read.idx[1] = gathered;
  read.check_mask = 2;
  ir_stmt_t* s = ir_add_stmt(f, l, IR_ST_STORE);
  ir_access_init(&s->target, y);
  s->target.nidx = 1;
  s->target.idx[0] = ir_ix_loop(f, l->id);
  s->target.check_mask = 1;
  s->value = ir_ex_unary(f, UJ_UNARY_EXP, ir_ex_load(f, &read));

  trace_t t = {{0}};
  CHECK(ir_stmt_has_checks(s));
  ir_walk_checks(s, note_check, &t);
  CHECK(strcmp(t.seen, "t1.0 t0.1 t2.0 ") == 0);
  if (strcmp(t.seen, "t1.0 t0.1 t2.0 ") != 0) printf("  checks in the order: %s\n", t.seen);

  /* an accumulation has no target to check */
  s->kind = IR_ST_ACCUM;
  s->target.check_mask = 1;
  memset(t.seen, 0, sizeof t.seen);
  ir_walk_checks(s, note_check, &t);
  CHECK(strcmp(t.seen, "t1.0 t0.1 ") == 0);

  /* nothing checked: no guard */
  read.check_mask = 0;
  inner->check_mask = 0;
  s->value = ir_ex_load(f, &read);
  CHECK(!ir_stmt_has_checks(s));
  ir_func_free(f);
}

/* ---- the loop-nest walk ---- */

static void note(void* ctx, const char* what, int id) {
  trace_t* t = ctx;
  size_t n = strlen(t->seen);
  snprintf(t->seen + n, sizeof t->seen - n, "%s%d ", what, id);
}
static void on_reset(void* ctx, const ir_carried_t* c, int k) { (void)k, note(ctx, "reset c", c->id); }
static void on_locals(void* ctx, const ir_loop_t* l, int k) { (void)k, note(ctx, "locals i", l->id); }
static void on_inner(void* ctx, const ir_block_t* b, int k) { note(ctx, "inner i", b->loops[k].id); }
static void on_stmt(void* ctx, const ir_stmt_t* s, int k) { (void)s, note(ctx, "stmt at ", k); }

/* Loop 0 with carried c0 and c1 and two statements, around loop 1: an
 * iteration of loop 0 resets both, then its locals, then loop 1, then its
 * statements; an iteration of the innermost loop has no inner loop. */
TEST(iteration_order) {
  ir_func_t* f = ir_func_new();
  int x = ir_add_tensor(f, UJ_F32, 1, IR_TENSOR_INPUT, 0);
  ir_block_t* b = ir_add_block(f);
  ir_loop_t* outer = ir_add_loop(f, b, ir_ix_const(f, 0), ir_ix_dim(f, x, 0));
  ir_add_carried(f, outer, UJ_REDUCE_SUM, UJ_F32);
  ir_add_carried(f, outer, UJ_REDUCE_ARGMAX, UJ_F32);
  ir_add_stmt(f, outer, IR_ST_STORE);
  ir_add_stmt(f, outer, IR_ST_STORE);
  ir_add_loop(f, b, ir_ix_const(f, 0), ir_ix_dim(f, x, 0));

  ir_iteration_visitor_t v = {on_reset, on_locals, on_inner, on_stmt};
  trace_t t = {{0}};
  ir_walk_iteration(b, 0, &v, &t);
  const char* want = "reset c0 reset c1 locals i0 inner i1 stmt at 0 stmt at 0 ";
  CHECK(strcmp(t.seen, want) == 0);
  if (strcmp(t.seen, want) != 0) printf("  walked: %s\n", t.seen);

  memset(t.seen, 0, sizeof t.seen);
  v.locals = NULL; /* optional */
  ir_walk_iteration(b, 1, &v, &t);
  CHECK(strcmp(t.seen, "") == 0);
  ir_func_free(f);
}

TEST_MAIN()
