/* jit/groups/plan.c: whether multi-tensor execution's fast path serves a
 * program on a list of groups, and how (jit/groups/groups.h says what it runs).
 *
 * The flat build is the program built for scalars and rank-1 tensors of the
 * other inputs (flat_build). Its loop IR qualifies when every block is
 * either elementwise (one loop [0, n) whose accesses to rank-1 tensors are
 * all [i], nothing checked at run time) or a full reduction (a loop [0, 1)
 * carrying sums, products, maxima or minima around such an elementwise loop
 * that accumulates them, whose own statements store each carried value
 * unchanged into element 0 of an output nothing else reads); no temporary
 * holds memory, no value depends on an index, and sizes are tied only to
 * one another. Then every element of a group depends only on the same
 * element of its inputs, and each reduction on all of them in any cut, so
 * running the blocks piece by piece gives, element by element, what one
 * run gives. */
#include <string.h>

#include "groups.h"
#include "../memo.h"

typedef struct {
  groups_plan_t* plan;
  const ir_func_t* f;
  int elem_loop;   /* the loop id of the elements */
  int outer_loop;  /* a reduction block's loop id; -1 elementwise */
  int ok;
} walk_t;

static int is_elem_index(const ir_ix_t* ix, int loop) { return ix && ix->kind == IR_IX_LOOP && ix->id == loop; }

static int is_const(const ir_ix_t* ix, int64_t v) { return ix && ix->kind == IR_IX_CONST && ix->value == v; }

/* A size of the group's shape: the size of axis 0 of a rank-1 input. */
static int is_group_size(const groups_plan_t* plan, const ir_func_t* f, const ir_ix_t* ix) {
  return ix && ix->kind == IR_IX_DIM && ix->id >= 0 && ix->id < f->ntensors && ix->axis == 0 &&
         plan->t_kind[ix->id] == GK_GROUP && f->tensors[ix->id].role == IR_TENSOR_INPUT;
}

static void check_access(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)stmt;
  walk_t* w = ctx;
  const groups_plan_t* plan = w->plan;
  int t = acc->tensor;
  if (acc->check_mask) w->ok = 0;
  switch (plan->t_kind[t]) {
  case GK_SCALAR:
    if (is_write || acc->nidx != 0) w->ok = 0;
    break;
  case GK_GROUP:
    if (acc->nidx != 1 || !is_elem_index(acc->idx[0], w->elem_loop) || (w->outer_loop >= 0 && level != 1))
      w->ok = 0;
    break;
  case GK_REDUCED:
    if (!is_write || w->outer_loop < 0 || level != 0 || acc->nidx != 1 || !is_const(acc->idx[0], 0)) w->ok = 0;
    break;
  default: /* locals */
    if (acc->nidx != 0 || !w->f->tensors[t].local) w->ok = 0;
  }
}

/* 0 when a value depends on an index (IR_EX_INDEX): it would be the
 * piece's, not the group's. */
static int expr_index_free(const ir_expr_t* e) {
  if (!e) return 1;
  if (e->kind == IR_EX_INDEX) return 0;
  return expr_index_free(e->a) && expr_index_free(e->b) && expr_index_free(e->c);
}

static int stmts_ok(const ir_loop_t* l, int allow_accum) {
  for (int s = 0; s < l->nstmts; s++) {
    const ir_stmt_t* st = &l->stmts[s];
    if (st->kind == IR_ST_SCATTER_ADD || st->arg_index || !expr_index_free(st->value)) return 0;
    if (st->kind == IR_ST_ACCUM && !allow_accum) return 0;
  }
  return 1;
}

static int reduce_op_ok(uj_reduce_op_t op) {
  return op == UJ_REDUCE_SUM || op == UJ_REDUCE_PROD || op == UJ_REDUCE_MAX || op == UJ_REDUCE_MIN;
}

/* Block b of the flat build: elementwise (0), a full reduction (1), or
 * neither (-1); a reduction's outputs get their reduce op. */
static int classify_block(groups_plan_t* plan, const ir_func_t* f, ir_block_t* b) {
  walk_t w = {plan, f, -1, -1, 1};
  if (b->nloops == 1) {
    const ir_loop_t* l = &b->loops[0];
    if (!is_const(l->start, 0) || !is_group_size(plan, f, l->end) || l->ncarried || !stmts_ok(l, 0)) return -1;
    w.elem_loop = l->id;
    ir_walk_accesses(b, check_access, &w);
    return w.ok ? 0 : -1;
  }
  if (b->nloops != 2) return -1;
  const ir_loop_t *outer = &b->loops[0], *inner = &b->loops[1];
  if (!is_const(outer->start, 0) || !is_const(outer->end, 1) || !is_const(inner->start, 0) ||
      !is_group_size(plan, f, inner->end) || inner->ncarried || !outer->ncarried || !stmts_ok(inner, 1))
    return -1;
  for (int c = 0; c < outer->ncarried; c++)
    if (!reduce_op_ok(outer->carried[c].op)) return -1;
  /* the outer statements store a carried value as it is, into element 0 of a reduced output */
  for (int s = 0; s < outer->nstmts; s++) {
    const ir_stmt_t* st = &outer->stmts[s];
    if (st->kind != IR_ST_STORE || !st->value || st->value->kind != IR_EX_CARRIED) return -1;
    int t = st->target.tensor, found = -1;
    for (int c = 0; c < outer->ncarried; c++)
      if (outer->carried[c].id == st->value->carried) found = c;
    /* groups_combine merges f32, f64 and i32 partials; a half output's
     * carried value is f32 and fails the dtype test too, but say it here */
    uj_dtype_t dt = f->tensors[t].dtype;
    if (found < 0 || plan->t_kind[t] != GK_REDUCED || outer->carried[found].dtype != dt ||
        (dt != UJ_F32 && dt != UJ_F64 && dt != UJ_I32))
      return -1;
    plan->red_op[plan->t_red[t]] = outer->carried[found].op;
  }
  w.elem_loop = inner->id;
  w.outer_loop = outer->id;
  ir_walk_accesses(b, check_access, &w);
  return w.ok ? 1 : -1;
}

/* Kinds of f's tensors; 0 when one does not fit the fast path. */
static int classify_tensors(groups_plan_t* plan, const ir_func_t* f) {
  if (f->ntensors > GROUPS_MAX_TENSORS || f->nblocks > GROUPS_MAX_TENSORS) return 0;
  plan->nred = 0;
  for (int t = 0; t < f->ntensors; t++) {
    const ir_tensor_t* tt = &f->tensors[t];
    plan->t_input[t] = plan->t_output[t] = plan->t_red[t] = -1;
    plan->t_kind[t] = GK_NONE;
    if (tt->role == IR_TENSOR_INPUT) {
      if (tt->io_index >= plan->nin) return 0;
      plan->t_input[t] = (signed char)tt->io_index;
      plan->t_kind[t] = plan->in_kind[tt->io_index];
      if (tt->ndim != (plan->t_kind[t] == GK_GROUP) || tt->dtype != plan->in_dtype[tt->io_index]) return 0;
      if (tt->ndim == 1 && (!tt->dims[0] || tt->dims[0]->kind != IR_IX_DIM)) return 0;
    } else if (tt->role == IR_TENSOR_OUTPUT) {
      if (tt->io_index >= plan->nout || tt->ndim != 1 || !tt->dims[0]) return 0;
      int o = tt->io_index;
      plan->t_output[t] = (signed char)o;
      plan->out_dtype[o] = tt->dtype;
      if (tt->dims[0]->kind == IR_IX_DIM) {
        plan->t_kind[t] = plan->out_kind[o] = GK_GROUP;
      } else if (is_const(tt->dims[0], 1)) {
        plan->t_kind[t] = plan->out_kind[o] = GK_REDUCED;
        plan->t_red[t] = (signed char)plan->nred;
        plan->red_slot[plan->nred] = o;
        plan->red_op[plan->nred++] = UJ_REDUCE_MEAN; /* set by the block that stores it */
      } else {
        return 0;
      }
    } else if (!tt->local && !tt->noalloc) {
      return 0; /* a temporary holding memory links blocks */
    }
  }
  /* sizes tied to one another only: no $param or constant in an assertion
   * or a size of the group's shape */
  for (int a = 0; a < f->nasserts; a++)
    if (f->asserts[a].a->kind != IR_IX_DIM || f->asserts[a].b->kind != IR_IX_DIM) return 0;
  return 1;
}

static int classify(groups_plan_t* plan, const ir_func_t* f) {
  if (!classify_tensors(plan, f)) return 0;
  for (int b = 0; b < f->nblocks; b++) {
    int kind = f->blocks[b].nloops ? classify_block(plan, f, &f->blocks[b]) : -1;
    if (kind < 0) return 0;
    plan->block_reduces[b] = (unsigned char)kind;
  }
  for (int r = 0; r < plan->nred; r++)
    if (plan->red_op[r] == UJ_REDUCE_MEAN) return 0; /* an output no block stores */
  return 1;
}

/* The program's build for groups of rank r agrees with the flat one: its
 * outputs of the group's shape have it (shape computed for sizes of 2 on
 * every axis), its reductions are all-ones (sum(x, axis=0) at rank 2 is not
 * a full reduction, and sends the call to the per-group path). Fills
 * plan->reduced_rank[r]. 0 when it does not agree. */
static int rank_agrees(groups_plan_t* plan, uj_program_t* p, int r, const int64_t* params) {
  uj_tensor_t rep[GROUPS_MAX_SLOTS];
  const uj_tensor_t* in[GROUPS_MAX_SLOTS];
  static const float dummy[4];
  for (int i = 0; i < plan->nin; i++) {
    rep[i] = (uj_tensor_t){(void*)dummy, plan->in_dtype[i], UJ_CPU, 0, {0}};
    if (plan->in_kind[i] == GK_GROUP) {
      rep[i].ndim = r;
      for (int a = 0; a < r; a++) rep[i].dims[a] = 2;
    }
    in[i] = &rep[i];
  }
  for (int o = 0; o < plan->nout; o++) {
    int ndim = 0;
    int64_t dims[UJ_MAX_DIMS];
    uj_dtype_t dtype;
    if (uj_program_shape(p, UJ_FORWARD, in, params, o, &ndim, dims) != UJ_OK ||
        uj_program_output_dtype(p, UJ_FORWARD, in, o, &dtype) != UJ_OK || dtype != plan->out_dtype[o])
      return 0;
    int64_t want = plan->out_kind[o] == GK_GROUP ? 2 : 1;
    if (plan->out_kind[o] == GK_GROUP && ndim != r) return 0;
    for (int a = 0; a < ndim; a++)
      if (dims[a] != want) return 0;
    plan->reduced_rank[r][o] = (signed char)ndim;
  }
  return 1;
}

/* Slot kinds and dtypes from the groups (what plan->gather holds of
 * them: the groups themselves are read once per call, by the walk of
 * jit/groups/gather.c). An input is a scalar when it is 0-d in every group,
 * else it is of the group's shape. 0 when a group lacks a tensor, the groups disagree on a dtype or a
 * device, or no input is of the group's shape. */
static int slots_from_groups(groups_plan_t* plan) {
  const groups_gather_t* ga = &plan->gather;
  if (ga->missing || ga->unlike_first) return 0;
  for (int i = 0; i < plan->nin; i++) {
    plan->in_kind[i] = ga->nonscalar >> i & 1 ? GK_GROUP : GK_SCALAR;
    plan->in_dtype[i] = ga->first_dtype[i];
  }
  return ga->nonscalar != 0;
}

/* The build for every rank the groups have agrees with the flat one,
 * asked in the order the groups first show the ranks. A group's rank is
 * that of its input in the first slot of the group's shape: its shape
 * tensor's when that is the slot, else 0 (the input there is 0-d). */
static int ranks_agree(groups_plan_t* plan, uj_program_t* p, const int64_t* params) {
  const groups_gather_t* ga = &plan->gather;
  int first_group_slot = 0;
  while (!(ga->nonscalar >> first_group_slot & 1)) first_group_slot++;
  for (int k = 0; k < ga->nranks_listed; k++) {
    int r = ga->rank_list[k].slot == first_group_slot ? ga->rank_list[k].rank : 0;
    if (r > UJ_MAX_DIMS) return 0;
    if (plan->reduced_rank[r][0] < 0 && !rank_agrees(plan, p, r, params)) return 0;
  }
  return 1;
}

/* A parsed program's specialization for the slots' kinds; a uop program's
 * only build, when its ranks are those. */
static uj_status_t flat_build(groups_plan_t* plan, uj_program_t* p) {
  if (!p->parsed) {
    plan->flat = p;
    return UJ_OK;
  }
  uj_tensor_t rep[GROUPS_MAX_SLOTS];
  const uj_tensor_t* in[GROUPS_MAX_SLOTS];
  static const float dummy[4];
  for (int i = 0; i < plan->nin; i++) {
    rep[i] = (uj_tensor_t){(void*)dummy, plan->in_dtype[i], UJ_CPU, plan->in_kind[i] == GK_GROUP, {2}};
    in[i] = &rep[i];
  }
  uj_status_t s = pn_specialize(p->parsed, UJ_FORWARD, in, plan->nin, &plan->held);
  if (s == UJ_OK) plan->flat = plan->held->program;
  return s;
}

uj_status_t groups_plan_make(uj_ctx_t* ctx, uj_program_t* p, const uj_group_t* groups, int group_count,
                             const int64_t* params, groups_plan_t* plan, int* fast) {
  memset(plan, 0, sizeof *plan);
  memset(plan->reduced_rank, -1, sizeof plan->reduced_rank);
  *fast = 0;
  plan->nin = uj_program_io_count(p, 0);
  plan->nout = uj_program_io_count(p, 1);
  if (group_count < 1 || plan->nin > GROUPS_MAX_SLOTS || plan->nout > GROUPS_MAX_SLOTS || plan->nout < 1)
    return UJ_OK;
  /* the context's memo and pool once a compiled run has made them: the walk makes neither */
  const jit_state_t* js = jit_state_existing(ctx);
  if (!js || !groups_memo_find(js->groups_memo, groups, group_count, plan->nin, plan->nout, &plan->gather)) {
    uj_status_t s = groups_gather(&plan->gather, groups, group_count, plan->nin, plan->nout, 1, js ? js->pool : NULL);
    if (s != UJ_OK) return s;
  }
  if (!slots_from_groups(plan)) return UJ_OK;
  /* a build the checks cannot make (a bad dtype) goes to the per-group path, which says why */
  if (flat_build(plan, p) != UJ_OK) return UJ_OK;
  plan->f = uop_program_func(plan->flat, UJ_FORWARD, !ctx->raw_ir);
  if (!plan->f || !classify(plan, plan->f)) return UJ_OK;
  if (!ranks_agree(plan, p, params)) return UJ_OK;
  const ir_func_t* f = plan->f;
  for (int o = 0; o < f->ntensors; o++)
    for (int i = 0; i < f->ntensors; i++)
      if (plan->t_output[o] >= 0 && plan->t_input[i] >= 0 && f->tensors[o].dtype == f->tensors[i].dtype &&
          plan->t_kind[o] == GK_GROUP && plan->t_kind[i] == GK_GROUP)
        plan->alias_safe[plan->t_output[o]][plan->t_input[i]] =
            jit_memo_alias_safe(plan->flat, UJ_FORWARD, f, i, o);
  plan->numel = plan->gather.numel;
  *fast = 1;
  return UJ_OK;
}

void groups_plan_release(groups_plan_t* plan) {
  groups_gather_release(&plan->gather);
  plan->numel = NULL;
  pn_release(plan->held);
  plan->held = NULL;
  plan->flat = NULL;
  plan->f = NULL;
}
