/* jit/mir/mir_batch.c: square roots in batches, for the MIR engine.
 *
 * MIR has no sqrt instruction, so a root is a call, and a call amid an
 * element's arithmetic costs beyond itself: every floating register is
 * caller-saved, so the values live across it go to the stack and back
 * (docs/ENGINES.md, "Measured"). This file takes the calls out of the
 * element loop when that is safe (jit_mir_batchable).
 *
 * Algorithm (strip mining with a batched call): the block becomes two
 * functions, a<N> and b<N> (jit_strip_fn), which the runner (jit/blocks.c)
 * drives over strips of up to JIT_STRIP elements. a<N> computes, per
 * element, the argument of every square root (a "site") into the site's
 * part of the runner's scratch; the runner calls jit_batch_sqrt[f] once per
 * site, which vectorizes (jit/batch_math.c); b<N> runs the block's
 * statements as usual, each site reading its root from the scratch. */
#ifdef UJ_HAVE_MIR
#include "mir_lower.h"

#include <stdlib.h>
#include <string.h>

#define MAX_SITES JIT_STRIP_MAX_ROOTS

struct jit_mir_batch {
  const ir_block_t* block;
  int nsites;
  const ir_expr_t* site[MAX_SITES];
  unsigned char* local_needed; /* per tensor: pass 1 computes it */
  signed char* argument_of;    /* per local tensor: the site whose argument it is, or -1 */
  int pass;                    /* 1 or 2 while lowering a half */
  MIR_reg_t scratch_at[2];     /* scratch - first * 4, scratch - first * 8 */
};

static int is_site(const ir_expr_t* e) {
  return e->kind == IR_EX_UNARY && e->dtype != UJ_I32 &&
         (e->op == UJ_UNARY_SQRT || e->op == UJ_UNARY_RSQRT);
}

/* ---- analysis -------------------------------------------------------------------------- */

typedef struct {
  const ir_func_t* f;
  const ir_loop_t* loop;
  jit_mir_batch_t* batch;
  int ok;
} analysis_t;

static int contains_site(const ir_expr_t* e) {
  return e && (is_site(e) || contains_site(e->a) || contains_site(e->b) || contains_site(e->c));
}

static void collect_sites(analysis_t* a, const ir_expr_t* e) {
  if (!e || !a->ok) return;
  if (is_site(e)) {
    jit_mir_batch_t* B = a->batch;
    for (int i = 0; i < B->nsites; i++)
      if (B->site[i] == e) return;
    if (B->nsites == MAX_SITES || contains_site(e->a)) a->ok = 0;
    else B->site[B->nsites++] = e;
    return;
  }
  collect_sites(a, e->a);
  collect_sites(a, e->b);
  collect_sites(a, e->c);
}

/* The statement storing local tensor t, or -1 when there is not exactly one. */
static int local_definition(const ir_loop_t* l, int t) {
  int found = -1;
  for (int s = 0; s < l->nstmts; s++)
    if (l->stmts[s].target.tensor == t) {
      if (found >= 0) return -1;
      found = s;
    }
  return found;
}

static int block_writes(const ir_loop_t* l, int t) {
  for (int s = 0; s < l->nstmts; s++)
    if (l->stmts[s].target.tensor == t) return 1;
  return 0;
}

/* fn for ir_walk_expr_loads over an argument (or a local it needs). */
static void note_load(void* ctx, ir_access_t* acc, int is_write, int level, ir_stmt_t* stmt) {
  (void)is_write, (void)level, (void)stmt;
  analysis_t* a = ctx;
  int t = acc->tensor;
  if (!a->ok) return;
  if (!a->f->tensors[t].local) {
    if (block_writes(a->loop, t)) a->ok = 0;
    return;
  }
  if (a->batch->local_needed[t]) return;
  int s = local_definition(a->loop, t);
  if (s < 0 || contains_site(a->loop->stmts[s].value)) {
    a->ok = 0;
    return;
  }
  a->batch->local_needed[t] = 1;
  ir_walk_expr_loads(a->loop->stmts[s].value, note_load, a, 0, NULL);
}

static int has_carried(const ir_expr_t* e) {
  return e && (e->kind == IR_EX_CARRIED || has_carried(e->a) || has_carried(e->b) || has_carried(e->c));
}

/* Safe when the block has one loop, whose iterations are independent
 * (jit_block_parallel), with no carried values; every statement is a plain
 * store with no run-time checks (pass 1 must not read anything a guard
 * would skip); an argument reads no tensor that the block writes (pass 1
 * runs before the strip's stores, so such a read could see an old value),
 * contains no other site, and reads only locals stored once in the loop by
 * a statement without sites. Evaluating an argument early is then the same
 * computation on the same inputs, rounded the same: sqrt is correctly
 * rounded in both places. */
jit_mir_batch_t* jit_mir_batchable(const ir_func_t* f, const ir_block_t* b) {
  if (b->nloops != 1 || b->loops[0].ncarried != 0 || !jit_block_parallel(f, b)) return NULL;
  const ir_loop_t* l = &b->loops[0];
  for (int s = 0; s < l->nstmts; s++) {
    const ir_stmt_t* st = &l->stmts[s];
    if (st->kind != IR_ST_STORE || ir_access_has_checks(&st->target) || ir_expr_has_checks(st->value) ||
        has_carried(st->value))
      return NULL;
  }
  jit_mir_batch_t* B = calloc(1, sizeof *B);
  if (!B || !(B->local_needed = calloc((size_t)f->ntensors + 1, 1)) ||
      !(B->argument_of = malloc((size_t)f->ntensors + 1))) {
    jit_mir_batch_free(B);
    return NULL; /* out of memory: lower the loop the ordinary way */
  }
  memset(B->argument_of, -1, (size_t)f->ntensors + 1);
  B->block = b;
  analysis_t a = {f, l, B, 1};
  for (int s = 0; s < l->nstmts && a.ok; s++) collect_sites(&a, l->stmts[s].value);
  for (int i = 0; i < B->nsites && a.ok; i++) ir_walk_expr_loads((ir_expr_t*)B->site[i]->a, note_load, &a, 0, NULL);
  if (!a.ok || B->nsites == 0) {
    jit_mir_batch_free(B);
    return NULL;
  }
  for (int k = B->nsites - 1; k >= 0; k--) {
    const ir_expr_t* arg = B->site[k]->a;
    if (arg->kind == IR_EX_LOAD && f->tensors[arg->access.tensor].local) B->argument_of[arg->access.tensor] = (signed char)k;
  }
  return B;
}

void jit_mir_batch_free(jit_mir_batch_t* B) {
  if (!B) return;
  free(B->local_needed);
  free(B->argument_of);
  free(B);
}

/* ---- lowering --------------------------------------------------------------------------- */

void jit_mir_batch_roots(const jit_mir_batch_t* B, int* nroots, unsigned char* f64) {
  *nroots = B->nsites;
  for (int k = 0; k < B->nsites; k++) f64[k] = B->site[k]->dtype == UJ_F64;
}

/* Site k's argument (root 0) or root (1) for the current iteration i in
 * the scratch buffer (jit_strips_t): in part k or JIT_STRIP_MAX_ROOTS + k,
 * at byte part * JIT_STRIP * 8 + (i - first) * size, addressed as
 * displacement, base scratch - first * size and index i, so no per-element
 * arithmetic. */
static MIR_op_t site_slot(lower_t* L, const jit_mir_batch_t* B, int k, int root) {
  uj_dtype_t d = B->site[k]->dtype;
  int f64 = d == UJ_F64;
  MIR_disp_t part = root ? JIT_STRIP_MAX_ROOTS + k : k;
  return MIR_new_mem_op(L->ctx, reg_type(d), part * JIT_STRIP * 8, B->scratch_at[f64], L->loop[B->block->loops[0].id],
                        f64 ? 8 : 4);
}

MIR_reg_t jit_mir_batched_local(lower_t* L, int t) {
  jit_mir_batch_t* B = L->batch;
  if (!B || B->pass != 2 || B->argument_of[t] < 0) return 0;
  int k = B->argument_of[t];
  uj_dtype_t d = B->site[k]->dtype;
  MIR_reg_t value = new_reg(L, reg_type(d));
  insn2(L, mov_code(d), R(value), site_slot(L, B, k, 0));
  return value;
}

MIR_reg_t jit_mir_batched(lower_t* L, const ir_expr_t* e) {
  jit_mir_batch_t* B = L->batch;
  if (!B || B->pass != 2 || !is_site(e)) return 0;
  for (int k = 0; k < B->nsites; k++) {
    if (B->site[k] != e) continue;
    uj_dtype_t d = e->dtype;
    MIR_reg_t root = new_reg(L, reg_type(d));
    insn2(L, mov_code(d), R(root), site_slot(L, B, k, 1));
    if (e->op == UJ_UNARY_SQRT) return root;
    MIR_reg_t r = new_reg(L, reg_type(d));
    insn3(L, d == UJ_F64 ? MIR_DDIV : MIR_FDIV, R(r), R(constant(L, d, 1.0)), R(root));
    return r;
  }
  return 0;
}

/* Pass 1 computes only what the arguments need: the locals they read (and
 * the locals those read), in statement order. Pass 2 recomputes those
 * locals, a few register operations, far less than the call; except that a
 * local which is itself an argument (v in Adam's sqrt(v)) is read back from
 * the scratch, where pass 1 left it, bit for bit the same value. Two
 * single-loop functions rather than one with the strip loop and the calls
 * inside: MIR's generator takes markedly longer over the nested loops and
 * the call than the runner's two indirect calls per strip cost. */
void jit_mir_lower_strip_half(lower_t* L, jit_mir_batch_t* B, int pass, MIR_reg_t scratch) {
  const ir_loop_t* l = &B->block->loops[0];
  L->batch = B;
  B->pass = pass;
  for (int f64 = 0; f64 < 2; f64++) {
    int used = 0;
    for (int k = 0; k < B->nsites; k++) used |= (B->site[k]->dtype == UJ_F64) == f64;
    if (!used) continue;
    B->scratch_at[f64] = new_reg(L, MIR_T_I64);
    insn3(L, MIR_MUL, R(B->scratch_at[f64]), R(L->arg_begin), IMM(f64 ? 8 : 4));
    insn3(L, MIR_SUB, R(B->scratch_at[f64]), R(scratch), R(B->scratch_at[f64]));
  }
  MIR_reg_t i = L->loop[l->id] = new_reg(L, MIR_T_I64);
  MIR_insn_t top = MIR_new_label(L->ctx), exit = MIR_new_label(L->ctx);
  insn2(L, MIR_MOV, R(i), R(L->arg_begin));
  insn3(L, MIR_BGE, LBL(exit), R(i), R(L->arg_end));
  emit(L, top);
  for (int s = 0; s < l->nstmts; s++) {
    const ir_stmt_t* st = &l->stmts[s];
    if (pass == 2 || B->local_needed[st->target.tensor]) jit_mir_stmt(L, st);
  }
  for (int k = 0; pass == 1 && k < B->nsites; k++)
    insn2(L, mov_code(B->site[k]->dtype), site_slot(L, B, k, 0), R(jit_mir_expr(L, B->site[k]->a)));
  insn3(L, MIR_ADD, R(i), R(i), IMM(1));
  insn3(L, MIR_BLT, LBL(top), R(i), R(L->arg_end));
  emit(L, exit);
  B->pass = 0;
  L->batch = NULL;
}
#endif
