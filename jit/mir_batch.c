/* jit/mir_batch.c: square roots in batches, for the MIR engine.
 *
 * MIR has no sqrt instruction, so a square root is a call, and a call in the
 * middle of an element's arithmetic is expensive beyond the call itself:
 * every floating register is caller-saved, so the values live across it go
 * to the stack and back. In the Adam update that cost half the time per
 * element (3.8 ns against 1.9 without the root). This file takes the calls
 * out of the element loop when that is safe.
 *
 * Algorithm (strip mining with a batched call). The block's single loop
 * runs in strips of up to STRIP elements. For each strip:
 *   pass 1  per element, compute the argument of every square root (the
 *           "sites") and store it in the site's stack buffer;
 *   call    once per site, jit_batch_sqrt[f](buffer, n), which the library
 *           compiles so that it vectorizes (jit/batch_math.c);
 *   pass 2  per element, the block's statements as usual, each site reading
 *           its root from the buffer instead of calling.
 * Pass 1 computes only what the arguments need: the locals they read (and
 * the locals those read), in statement order. Pass 2 recomputes those
 * locals; that is a few register operations, far less than the call.
 *
 * When it is safe (jit_mir_batchable): the block has one loop, whose
 * iterations are independent (jit_block_parallel), with no carried values;
 * every statement is a plain store with no run-time checks (pass 1 must not
 * read anything a guard would skip); an argument reads no tensor that the
 * block writes (pass 1 runs before the strip's stores, so such a read could
 * see an old value), contains no other site, and reads only locals stored
 * once in the loop by a statement without sites. Evaluating an argument
 * early is then the same computation on the same inputs, and the rounding
 * is the same: sqrt is correctly rounded in both places. */
#ifdef UJ_HAVE_MIR
#include "mir_lower.h"

#include <stdlib.h>
#include <string.h>

/* Elements per strip: buffers of STRIP doubles per site stay in L1. */
#define STRIP 256
#define MAX_SITES 8

struct jit_mir_batch {
  const ir_block_t* block;
  int nsites;
  const ir_expr_t* site[MAX_SITES];
  MIR_reg_t buffer[MAX_SITES];
  unsigned char* local_needed; /* per tensor: pass 1 computes it */
  int pass;                    /* 1 or 2 while lowering the strip loops */
  MIR_reg_t offset;            /* the element's index in the strip */
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
  if (!B || !(B->local_needed = calloc((size_t)f->ntensors + 1, 1))) {
    free(B);
    return NULL; /* out of memory: lower the loop the ordinary way */
  }
  B->block = b;
  analysis_t a = {f, l, B, 1};
  for (int s = 0; s < l->nstmts && a.ok; s++) collect_sites(&a, l->stmts[s].value);
  for (int i = 0; i < B->nsites && a.ok; i++) ir_walk_expr_loads((ir_expr_t*)B->site[i]->a, note_load, &a, 0, NULL);
  if (!a.ok || B->nsites == 0) {
    jit_mir_batch_free(B);
    return NULL;
  }
  return B;
}

void jit_mir_batch_free(jit_mir_batch_t* B) {
  if (!B) return;
  free(B->local_needed);
  free(B);
}

int jit_mir_batch_uses(const jit_mir_batch_t* B, int f64) {
  for (int i = 0; i < B->nsites; i++)
    if ((B->site[i]->dtype == UJ_F64) == f64) return 1;
  return 0;
}

/* ---- lowering --------------------------------------------------------------------------- */

MIR_reg_t jit_mir_batched(lower_t* L, const ir_expr_t* e) {
  jit_mir_batch_t* B = L->batch;
  if (!B || B->pass != 2 || !is_site(e)) return 0;
  for (int i = 0; i < B->nsites; i++) {
    if (B->site[i] != e) continue;
    uj_dtype_t d = e->dtype;
    MIR_reg_t root = new_reg(L, reg_type(d));
    insn2(L, mov_code(d), R(root), MIR_new_mem_op(L->ctx, reg_type(d), 0, B->buffer[i], B->offset, d == UJ_F64 ? 8 : 4));
    if (e->op == UJ_UNARY_SQRT) return root;
    MIR_reg_t r = new_reg(L, reg_type(d));
    insn3(L, d == UJ_F64 ? MIR_DDIV : MIR_FDIV, R(r), R(constant(L, d, 1.0)), R(root));
    return r;
  }
  return 0;
}

/* for (i = first; i < stop; i++) { offset = i - first; body(pass) } */
static void element_loop(lower_t* L, MIR_reg_t i, MIR_reg_t first, MIR_reg_t stop, int pass) {
  jit_mir_batch_t* B = L->batch;
  const ir_loop_t* l = &B->block->loops[0];
  MIR_insn_t top = MIR_new_label(L->ctx);
  B->pass = pass;
  insn2(L, MIR_MOV, R(i), R(first));
  emit(L, top);
  insn3(L, MIR_SUB, R(B->offset), R(i), R(first));
  for (int s = 0; s < l->nstmts; s++) {
    const ir_stmt_t* st = &l->stmts[s];
    if (pass == 2) jit_mir_stmt(L, st);
    else if (B->local_needed[st->target.tensor]) jit_mir_stmt(L, st);
  }
  for (int k = 0; pass == 1 && k < B->nsites; k++) {
    uj_dtype_t d = B->site[k]->dtype;
    MIR_reg_t arg = jit_mir_expr(L, B->site[k]->a);
    insn2(L, mov_code(d), MIR_new_mem_op(L->ctx, reg_type(d), 0, B->buffer[k], B->offset, d == UJ_F64 ? 8 : 4),
          R(arg));
  }
  insn3(L, MIR_ADD, R(i), R(i), IMM(1));
  insn3(L, MIR_BLT, LBL(top), R(i), R(stop));
  B->pass = 0;
}

void jit_mir_lower_strips(lower_t* L, jit_mir_batch_t* B) {
  L->batch = B;
  const ir_loop_t* l = &B->block->loops[0];
  for (int k = 0; k < B->nsites; k++) {
    B->buffer[k] = new_reg(L, MIR_T_I64);
    emit_at_entry(L, MIR_new_insn(L->ctx, MIR_ALLOCA, R(B->buffer[k]), IMM(STRIP * 8)));
  }
  B->offset = new_reg(L, MIR_T_I64);
  MIR_reg_t i = L->loop[l->id] = new_reg(L, MIR_T_I64);
  MIR_reg_t first = new_reg(L, MIR_T_I64), stop = new_reg(L, MIR_T_I64), count = new_reg(L, MIR_T_I64);
  MIR_insn_t strip = MIR_new_label(L->ctx), full = MIR_new_label(L->ctx), exit = MIR_new_label(L->ctx);
  insn2(L, MIR_MOV, R(first), R(L->arg_begin));
  insn3(L, MIR_BGE, LBL(exit), R(first), R(L->arg_end));
  emit(L, strip);
  /* count = min(end - first, STRIP) */
  insn3(L, MIR_SUB, R(count), R(L->arg_end), R(first));
  insn3(L, MIR_BLE, LBL(full), R(count), IMM(STRIP));
  insn2(L, MIR_MOV, R(count), IMM(STRIP));
  emit(L, full);
  insn3(L, MIR_ADD, R(stop), R(first), R(count));
  element_loop(L, i, first, stop, 1);
  for (int k = 0; k < B->nsites; k++) {
    int f64 = B->site[k]->dtype == UJ_F64;
    MIR_op_t proto = MIR_new_ref_op(L->ctx, L->batch_proto), callee = MIR_new_ref_op(L->ctx, L->batch_import[f64]);
    emit(L, MIR_new_call_insn(L->ctx, 4, proto, callee, R(B->buffer[k]), R(count)));
  }
  element_loop(L, i, first, stop, 2);
  insn2(L, MIR_MOV, R(first), R(stop));
  insn3(L, MIR_BLT, LBL(strip), R(first), R(L->arg_end));
  emit(L, exit);
  L->batch = NULL;
}
#endif
