/* tests/test_chains.c: chains of blocks run a chunk of rows at a time
 * (ir/chains.c decides, jit/blocks.c runs them).
 *
 * Which blocks chain (ir_block_chains on the optimized IR): softmax's three
 * blocks and layernorm's four form one chain each; a block reading another
 * block's output at another row, a sum over the outer loop scattered into
 * one element, a reduction over the first axis and a whole-tensor sum do
 * not chain with what reads them; a chain of 70 blocks (more than the
 * runner takes at once) is one chain.
 *
 * What they compute: each program on every CPU engine (C, MIR), with 1 and
 * 2 threads, at random shapes (rows not a multiple of the chunk), with the
 * chunk budget at 0 (no chains), at a few bytes (a row or two per chunk),
 * at a random size and at the default: every result bit for bit the same
 * as with chains off. The negative cases are also compared with the
 * interpreter, so that a chain formed where it must not be shows up as a
 * wrong value, not only as a wrong answer to the query.
 *
 * Beside it, ir_loop_independent, the other per-row analysis: a tensor
 * written at [i, j] and read at [j, i] under loop i is not independent;
 * and ir_loop_accesses_disjoint, its half that a reduction loop may pass
 * (the C engine then marks softmax's lane loops ivdep). */
#include "../jit/jit.h"
#include "../lang/parse.h"
#include "../uops/uops.h"
#include "oracle.h"
#include "../jit/c/c.h"
#include "../jit/mir/mir.h"

static uint64_t next_random(uint64_t* st) {
  *st ^= *st << 13, *st ^= *st >> 7, *st ^= *st << 17;
  return *st;
}

/* ---- the query ---------------------------------------------------------------------------- */

/* ir_block_chains of the program specialized for inputs; lengths into
 * length (at most cap blocks). The number of blocks, or -1. */
static int chains_of(uj_program_t* p, const uj_tensor_t* const* inputs, int ninputs, int* length, int cap) {
  pn_special_t* sp = NULL;
  if (pn_specialize(p->parsed, UJ_FORWARD, inputs, ninputs, &sp) != UJ_OK) return -1;
  const ir_func_t* f = uop_program_func(sp->program, UJ_FORWARD, 1);
  int n = f && f->nblocks <= cap && ir_block_chains(f, length) == UJ_OK ? f->nblocks : -1;
  pn_release(sp);
  return n;
}

/* ---- hand-built functions ------------------------------------------------------------------- */

/* Blocks over i in [0, n) of x (input 0, f32 [n]). */
static ir_loop_t* row_block(ir_func_t* f) {
  return ir_add_loop(f, ir_add_block(f), ir_ix_const(f, 0), ir_ix_dim(f, 0, 0));
}

static ir_access_t access_at(int tensor, ir_ix_t* ix) {
  ir_access_t a;
  ir_access_init(&a, tensor);
  a.nidx = 1;
  a.idx[0] = ix;
  a.check_mask = 0;
  return a;
}

static int vector(ir_func_t* f, ir_role_t role, int io) {
  int t = ir_add_tensor(f, UJ_F32, 1, role, io);
  if (t >= 0) f->tensors[t].dims[0] = ir_ix_dim(f, 0, 0);
  return t;
}

/* a[i] = 2 x[i]; y[i] = a[n - 1 - i]: y reads a at another row. */
static ir_func_t* other_row(void) {
  ir_func_t* f = ir_func_new();
  int x = vector(f, IR_TENSOR_INPUT, 0), y = vector(f, IR_TENSOR_OUTPUT, 0), a = vector(f, IR_TENSOR_TEMP, 0);
  ir_loop_t* l0 = row_block(f);
  ir_stmt_t* s0 = ir_add_stmt(f, l0, IR_ST_STORE);
  ir_access_t xa = access_at(x, ir_ix_loop(f, l0->id));
  s0->target = access_at(a, ir_ix_loop(f, l0->id));
  s0->value = ir_ex_binary(f, UJ_BINARY_MUL, ir_ex_load(f, &xa), ir_ex_const(f, UJ_F32, 2));
  ir_loop_t* l1 = row_block(f);
  ir_stmt_t* s1 = ir_add_stmt(f, l1, IR_ST_STORE);
  ir_ix_t* mirror = ir_ix_bin(f, IR_IX_SUB, ir_ix_bin(f, IR_IX_SUB, ir_ix_dim(f, 0, 0), ir_ix_const(f, 1)),
                              ir_ix_loop(f, l1->id));
  ir_access_t aa = access_at(a, mirror);
  s1->target = access_at(y, ir_ix_loop(f, l1->id));
  s1->value = ir_ex_load(f, &aa);
  return f;
}

/* s[0] = 0 (one iteration); s[0] += x[i]; y[i] = x[i] / s[0]: the sum runs
 * over the outer loop, scattered into one element. */
static ir_func_t* outer_sum(void) {
  ir_func_t* f = ir_func_new();
  int x = vector(f, IR_TENSOR_INPUT, 0), y = vector(f, IR_TENSOR_OUTPUT, 0);
  int s = ir_add_tensor(f, UJ_F32, 1, IR_TENSOR_TEMP, 0);
  f->tensors[s].dims[0] = ir_ix_const(f, 1);
  ir_loop_t* l0 = ir_add_loop(f, ir_add_block(f), ir_ix_const(f, 0), ir_ix_const(f, 1));
  ir_stmt_t* zero = ir_add_stmt(f, l0, IR_ST_STORE);
  zero->target = access_at(s, ir_ix_const(f, 0));
  zero->value = ir_ex_const(f, UJ_F32, 0);
  ir_loop_t* l1 = row_block(f);
  ir_stmt_t* add = ir_add_stmt(f, l1, IR_ST_SCATTER_ADD);
  ir_access_t x1 = access_at(x, ir_ix_loop(f, l1->id));
  add->target = access_at(s, ir_ix_const(f, 0));
  add->value = ir_ex_load(f, &x1);
  ir_loop_t* l2 = row_block(f);
  ir_stmt_t* div = ir_add_stmt(f, l2, IR_ST_STORE);
  ir_access_t x2 = access_at(x, ir_ix_loop(f, l2->id)), s2 = access_at(s, ir_ix_const(f, 0));
  div->target = access_at(y, ir_ix_loop(f, l2->id));
  div->value = ir_ex_binary(f, UJ_BINARY_DIV, ir_ex_load(f, &x2), ir_ex_load(f, &s2));
  return f;
}

/* t1[i] = x[i] + 1, t2[i] = t1[i] + 1, ..., y = t69 + 1: 70 blocks. */
enum { LONG_CHAIN = 70 };
static ir_func_t* long_chain(void) {
  ir_func_t* f = ir_func_new();
  int x = vector(f, IR_TENSOR_INPUT, 0), y = vector(f, IR_TENSOR_OUTPUT, 0), prev = x;
  for (int b = 0; b < LONG_CHAIN; b++) {
    int next = b == LONG_CHAIN - 1 ? y : vector(f, IR_TENSOR_TEMP, 0);
    ir_loop_t* l = row_block(f);
    ir_stmt_t* st = ir_add_stmt(f, l, IR_ST_STORE);
    ir_access_t in = access_at(prev, ir_ix_loop(f, l->id));
    st->target = access_at(next, ir_ix_loop(f, l->id));
    st->value = ir_ex_binary(f, UJ_BINARY_ADD, ir_ex_load(f, &in), ir_ex_const(f, UJ_F32, 1));
    prev = next;
  }
  return f;
}

/* Runs f on x (n elements, values 1..n/8) with the kernel of `engine`
 * under chain budget `bytes` and `threads`; y gets output 0. */
static int run_hand(uj_engine_t engine, int threads, int64_t bytes, const ir_func_t* f, const float* x, int64_t n,
                    float* y) {
  uj_ctx_t* ctx = uj_ctx_new();
  jit_state_t* js = ctx && uj_ctx_set_threads(ctx, threads) == UJ_OK ? jit_state(ctx) : NULL;
  ir_buffer_t* buf = calloc((size_t)f->ntensors + 1, sizeof *buf);
  jit_cache_entry_t* e = NULL;
  int ok = js && buf;
  if (ok) {
    buf[0].dims[0] = n;
    buf[0].data = (void*)x;
    ok = ir_func_sizes(f, NULL, buf) == UJ_OK;
  }
  for (int t = 1; ok && t < f->ntensors; t++) {
    buf[t].data = t == 1 ? (void*)y : calloc((size_t)buf[t].numel + 1, sizeof(float));
    ok = buf[t].data != NULL;
  }
  if (ok) {
    js->chain_bytes = bytes;
    uj_status_t s = engine == UJ_ENGINE_MIR ? jit_mir_get(js, f, NULL, 2, &e) : jit_c_get(js, f, NULL, &e);
    ok = s == UJ_OK && jit_blocks_run(js, jit_blocks_of(e), f, buf, NULL) == UJ_OK;
    if (!ok) fprintf(stderr, "  %s: %s\n", engine == UJ_ENGINE_MIR ? "mir" : "c", uj_last_error());
  }
  if (e) jit_cache_release(js->cache, e);
  for (int t = 2; buf && t < f->ntensors; t++) free(buf[t].data);
  free(buf);
  uj_ctx_free(ctx);
  return ok;
}

static const uj_engine_t cpu_engines[] = {UJ_ENGINE_C, UJ_ENGINE_MIR};

/* f on every engine, threads 1 and 2, chunk budgets 8 bytes (one row a
 * chunk), 24 (three) and the default, against the interpreter and the
 * engine with chains off, bit for bit. */
static void check_hand(const char* name, ir_func_t* f) {
  static const int64_t sizes[] = {1, 7, 100, 4099, 70001};
  static const int64_t budgets[] = {8, 24, JIT_CHAIN_BYTES};
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
    int64_t n = sizes[si];
    float *x = malloc(sizeof *x * (size_t)n), *want = calloc((size_t)n, sizeof *want);
    float *off = calloc((size_t)n, sizeof *off), *got = calloc((size_t)n, sizeof *got);
    ir_buffer_t* buf = calloc((size_t)f->ntensors + 1, sizeof *buf);
    CHECK(x && want && off && got && buf);
    if (!x || !want || !off || !got || !buf) goto done;
    for (int64_t i = 0; i < n; i++) x[i] = (float)(1 + i % 64) * 0.125f;
    buf[0].dims[0] = n;
    buf[0].data = x;
    CHECK(ir_func_sizes(f, NULL, buf) == UJ_OK);
    for (int t = 1; t < f->ntensors; t++) buf[t].data = t == 1 ? (void*)want : calloc((size_t)buf[t].numel + 1, 4);
    CHECK(ir_interp_run(f, buf, NULL) == UJ_OK);
    for (int t = 2; t < f->ntensors; t++) free(buf[t].data);
    for (size_t e = 0; e < sizeof cpu_engines / sizeof *cpu_engines; e++) {
      if (!uj_engine_available(NULL, cpu_engines[e])) continue;
      for (int threads = 1; threads <= 2; threads++) {
        CHECK(run_hand(cpu_engines[e], threads, 0, f, x, n, off));
        CHECK(memcmp(off, want, sizeof *off * (size_t)n) == 0);
        for (size_t k = 0; k < sizeof budgets / sizeof *budgets; k++) {
          memset(got, 0, sizeof *got * (size_t)n);
          CHECK(run_hand(cpu_engines[e], threads, budgets[k], f, x, n, got));
          if (memcmp(got, off, sizeof *got * (size_t)n) != 0) {
            fprintf(stderr, "  %s n=%lld engine %d threads %d budget %lld: chunked differs\n", name, (long long)n,
                    (int)cpu_engines[e], threads, (long long)budgets[k]);
            CHECK(0);
          }
        }
      }
    }
  done:
    free(x), free(want), free(off), free(got), free(buf);
  }
}

TEST(hand_built_chains) {
  ir_func_t *mirror = other_row(), *sum = outer_sum(), *chain = long_chain();
  CHECK(mirror && sum && chain && ir_verify(mirror) == UJ_OK && ir_verify(sum) == UJ_OK && ir_verify(chain) == UJ_OK);
  if (!mirror || !sum || !chain) return;
  int length[LONG_CHAIN];
  CHECK(ir_block_chains(mirror, length) == UJ_OK && length[0] == 1 && length[1] == 1);
  CHECK(ir_block_chains(sum, length) == UJ_OK && length[0] == 1 && length[1] == 1 && length[2] == 1);
  CHECK(ir_block_chains(chain, length) == UJ_OK && length[0] == LONG_CHAIN);
  check_hand("other row", mirror);
  check_hand("outer sum", sum);
  check_hand("70 blocks", chain);
  ir_func_free(mirror), ir_func_free(sum), ir_func_free(chain);
}

/* ---- programs from the expression language ------------------------------------------------ */

typedef struct {
  const char* name;
  const char* source;
  int vectors;      /* inputs after x: vectors as long as x's rows */
  int chained;      /* 1: every block in one chain; 0: no chain at all */
} program_case_t;

static const program_case_t programs[] = {
    {"softmax", "_e = exp(x - amax(x, -1)); y = _e / sum(_e, -1)", 0, 1},
    {"layernorm", "_d = x - mean(x, -1); y = _d * rsqrt(mean(_d * _d, -1) + 1e-5) * w + b", 2, 1},
    {"sum over rows", "y = x - sum(x, 0)", 0, 0},
    {"sum of all", "y = x / sum(x)", 0, 0},
};

/* One program at one shape: chains as expected, and every engine, thread
 * count and budget bit for bit as with chains off. */
static void check_program(const program_case_t* pc, uj_program_t* p, int64_t rows, int64_t cols, uint64_t* st) {
  int64_t dims[2] = {rows, cols}, vdims[1] = {cols};
  uj_tensor_t x = or_tensor(UJ_F32, 2, dims), y = or_tensor(UJ_F32, 2, dims), want = or_tensor(UJ_F32, 2, dims);
  uj_tensor_t v[2] = {or_tensor(UJ_F32, 1, vdims), or_tensor(UJ_F32, 1, vdims)};
  or_fill_real(st, &x, -4, 4);
  for (int i = 0; i < pc->vectors; i++) or_fill_real(st, &v[i], 0.5, 2);
  const uj_tensor_t* in[] = {&x, &v[0], &v[1]};
  int length[16];
  int n = chains_of(p, in, 1 + pc->vectors, length, 16);
  CHECK(n > 1);
  for (int b = 0; b < n; b++) {
    int expect = pc->chained ? (b == 0 ? n : 0) : 1;
    if (length[b] != expect) {
      fprintf(stderr, "  %s %lldx%lld: block %d heads a chain of %d, expected %d\n", pc->name, (long long)rows,
              (long long)cols, b, length[b], expect);
      CHECK(0);
    }
  }
  size_t bytes = (size_t)(rows * cols) * sizeof(float);
  int64_t budget = 1 + (int64_t)(next_random(st) % (uint64_t)(cols * 16 * 3));
  int64_t budgets[] = {1, 4 * cols + 3, budget, JIT_CHAIN_BYTES};
  for (size_t e = 0; e < sizeof cpu_engines / sizeof *cpu_engines; e++) {
    if (!uj_engine_available(NULL, cpu_engines[e])) continue;
    for (int threads = 1; threads <= 2; threads++) {
      uj_ctx_t* ctx = uj_ctx_new();
      jit_state_t* js = ctx ? jit_state(ctx) : NULL;
      CHECK(js && uj_ctx_set_engine(ctx, cpu_engines[e]) == UJ_OK && uj_ctx_set_threads(ctx, threads) == UJ_OK);
      if (!js) continue;
      uj_tensor_t* out[] = {&want};
      js->chain_bytes = 0;
      CHECK(uj_program_run(ctx, p, UJ_FORWARD, in, 1 + pc->vectors, NULL, 0, out, 1) == UJ_OK);
      out[0] = &y;
      for (size_t k = 0; k < sizeof budgets / sizeof *budgets; k++) {
        js->chain_bytes = budgets[k];
        memset(y.data, 0, bytes);
        CHECK(uj_program_run(ctx, p, UJ_FORWARD, in, 1 + pc->vectors, NULL, 0, out, 1) == UJ_OK);
        if (memcmp(y.data, want.data, bytes) != 0) {
          fprintf(stderr, "  %s %lldx%lld engine %d threads %d budget %lld: chunked differs\n", pc->name,
                  (long long)rows, (long long)cols, (int)cpu_engines[e], threads, (long long)budgets[k]);
          CHECK(0);
        }
      }
      uj_ctx_free(ctx);
    }
  }
  or_tensor_free(&x), or_tensor_free(&y), or_tensor_free(&want), or_tensor_free(&v[0]), or_tensor_free(&v[1]);
}

TEST(programs_random_shapes) {
  uint64_t seed = 0x5eed0c4a1bULL, st = seed;
  const char* env = getenv("UJ_TEST_SEED");
  if (env) seed = st = strtoull(env, NULL, 0) | 1;
  HARNESS_SEED(seed);
  for (size_t i = 0; i < sizeof programs / sizeof *programs; i++) {
    uj_program_t* p = NULL;
    CHECK(uj_program_parse(programs[i].source, &p) == UJ_OK);
    if (!p) continue;
    for (int round = 0; round < 4; round++) {
      int64_t rows = 1 + (int64_t)(next_random(&st) % 300), cols = 1 + (int64_t)(next_random(&st) % 200);
      if (round == 0) rows = 257, cols = 129; /* enough rows per thread to split with 2 threads */
      check_program(&programs[i], p, rows, cols, &st);
    }
    uj_program_free(p);
  }
}

/* ---- ir_loop_independent: one axis per tensor -------------------------------------------- */

/* for i, j in [0, n) x [0, n): t[i, j] = x[i]; y[i, j] = t[j or i, i or j]
 * (transposed: t read at [j, i]). Loop i is independent only when t is
 * read where it is written: transposed, iteration 1 reads t[0, 1], which
 * iteration 0 writes. */
static int square_loop_independent(int transposed) {
  ir_func_t* f = ir_func_new();
  int x = vector(f, IR_TENSOR_INPUT, 0);
  int t = ir_add_tensor(f, UJ_F32, 2, IR_TENSOR_TEMP, 0), y = ir_add_tensor(f, UJ_F32, 2, IR_TENSOR_OUTPUT, 0);
  for (int d = 0; d < 2; d++) f->tensors[t].dims[d] = f->tensors[y].dims[d] = ir_ix_dim(f, 0, 0);
  ir_block_t* b = ir_add_block(f);
  int i = ir_add_loop(f, b, ir_ix_const(f, 0), ir_ix_dim(f, 0, 0))->id; /* the pointer moves as loops are added */
  ir_loop_t* lj = ir_add_loop(f, b, ir_ix_const(f, 0), ir_ix_dim(f, 0, 0));
  int j = lj->id;
  ir_stmt_t* write = ir_add_stmt(f, lj, IR_ST_STORE);
  ir_access_t xa = access_at(x, ir_ix_loop(f, i));
  write->target = access_at(t, ir_ix_loop(f, i));
  write->target.nidx = 2;
  write->target.idx[1] = ir_ix_loop(f, j);
  write->value = ir_ex_load(f, &xa);
  ir_stmt_t* read = ir_add_stmt(f, lj, IR_ST_STORE);
  ir_access_t ta = access_at(t, ir_ix_loop(f, transposed ? j : i));
  ta.nidx = 2;
  ta.idx[1] = ir_ix_loop(f, transposed ? i : j);
  read->target = access_at(y, ir_ix_loop(f, i));
  read->target.nidx = 2;
  read->target.idx[1] = ir_ix_loop(f, j);
  read->value = ir_ex_load(f, &ta);
  int independent = ir_loop_independent(f, &f->blocks[0], 0, NULL);
  ir_func_free(f);
  return independent;
}

TEST(loop_independence_needs_one_axis_per_tensor) {
  CHECK(square_loop_independent(0) == 1);
  CHECK(square_loop_independent(1) == 0);
}

/* for i in [0, n): c = 0; for j in [0, n): { t[i, j or 0] = x[i]; c += t[i, j or 0] }; r[i] = c.
 * Loop j adds into c, so it is not independent, but its accesses are
 * disjoint when t is written at [i, j] (the C engine's lanes then get
 * ivdep), not when every j writes t[i, 0]. r, written outside loop j,
 * has no say. Returns ir_loop_accesses_disjoint(loop j) * 2 +
 * ir_loop_independent(loop j). */
static int reduction_inner_loop(int one_column) {
  ir_func_t* f = ir_func_new();
  int x = vector(f, IR_TENSOR_INPUT, 0), r = vector(f, IR_TENSOR_OUTPUT, 0);
  int t = ir_add_tensor(f, UJ_F32, 2, IR_TENSOR_TEMP, 0);
  for (int d = 0; d < 2; d++) f->tensors[t].dims[d] = ir_ix_dim(f, 0, 0);
  ir_block_t* b = ir_add_block(f);
  int i = ir_add_loop(f, b, ir_ix_const(f, 0), ir_ix_dim(f, 0, 0))->id;
  int c = ir_add_carried(f, &b->loops[0], UJ_REDUCE_SUM, UJ_F32);
  ir_loop_t* lj = ir_add_loop(f, b, ir_ix_const(f, 0), ir_ix_dim(f, 0, 0));
  int j = lj->id;
  ir_access_t ta = access_at(t, ir_ix_loop(f, i));
  ta.nidx = 2;
  ta.idx[1] = one_column ? ir_ix_const(f, 0) : ir_ix_loop(f, j);
  ir_access_t xa = access_at(x, ir_ix_loop(f, i));
  ir_stmt_t* write = ir_add_stmt(f, lj, IR_ST_STORE);
  write->target = ta;
  write->value = ir_ex_load(f, &xa);
  ir_stmt_t* add = ir_add_stmt(f, &b->loops[1], IR_ST_ACCUM);
  add->carried = c;
  add->value = ir_ex_load(f, &ta);
  ir_stmt_t* out = ir_add_stmt(f, &b->loops[0], IR_ST_STORE);
  out->target = access_at(r, ir_ix_loop(f, i));
  out->value = ir_ex_carried(f, c, UJ_F32);
  int answer = ir_loop_accesses_disjoint(f, b, 1, NULL) * 2 + ir_loop_independent(f, b, 1, NULL);
  ir_func_free(f);
  return answer;
}

TEST(reduction_loop_accesses_disjoint_apart_from_its_sum) {
  CHECK(reduction_inner_loop(0) == 2);
  CHECK(reduction_inner_loop(1) == 0);
}

/* The C engine's source for softmax puts ivdep on its lane loops (the max's
 * and the exp's): without it gcc checks y against x and the max once per
 * group of 32 and reloads them. */
TEST(softmax_c_source_lanes_and_prefetch) {
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("_e = exp(x - amax(x, -1)); y = _e / sum(_e, -1)", &p) == UJ_OK);
  int64_t dims[2] = {8, 64};
  uj_tensor_t x = or_tensor(UJ_F32, 2, dims), y = or_tensor(UJ_F32, 2, dims);
  uint64_t st = 7;
  or_fill_real(&st, &x, -4, 4);
  const uj_tensor_t* in[] = {&x};
  uj_tensor_t* out[] = {&y};
  uj_ctx_t* ctx = uj_ctx_new();
  char* text = NULL;
  /* the dump shows the build last run: this one, of rank-2 inputs */
  if (p && ctx && uj_ctx_set_engine(ctx, UJ_ENGINE_INTERP) == UJ_OK &&
      uj_program_run(ctx, p, UJ_FORWARD, in, 1, NULL, 0, out, 1) == UJ_OK)
    text = uj_program_dump(ctx, p, UJ_FORWARD, UJ_DUMP_C, NULL);
  CHECK(text != NULL);
  int lane_loops = 0, with_ivdep = 0;
  for (const char* s = text; s && (s = strstr(s, "for (int uj_l = 0; uj_l < 32; uj_l++) {\n")); s++) {
    lane_loops++;
    const char* line = s; /* back to the start of the line above */
    while (line > text && line[-1] != '\n') line--;
    const char* above = line > text ? line - 1 : text;
    while (above > text && above[-1] != '\n') above--;
    with_ivdep += strncmp(above + strspn(above, " "), "#pragma GCC ivdep\n", 18) == 0;
  }
  CHECK(lane_loops == 2);
  CHECK(with_ivdep == 2);
  /* The divide's block, last in the chain, writes y (t7) with streaming
   * stores when it is large (jit/c/c_stream.c), and in those groups of 16
   * fetches the next chunk's x (t0), one line each, to read; the exp's and
   * the max's blocks then fetch nothing and run from cache, nor is
   * anything fetched of the exp values' rows (t4), which are chain-local:
   * the runner keeps them in scratch it reuses (ir/chain_local.c). The AOT
   * source, which runs each block over all rows at once, fetches nothing. */
  const char* divide_block = text ? strstr(text, "void uj_block_2(") : NULL;
  const char* first = text ? strstr(text, "__builtin_prefetch(") : NULL;
  CHECK(divide_block && first && first > divide_block);
  CHECK(divide_block && strstr(divide_block, "UJ_STREAM64(&t7["));
  CHECK(text && strstr(text, "if (i10 + (end - begin) < d0_0 && uj_g < d0_1) { "
                             "__builtin_prefetch(&t0[(i10 + (end - begin)) * d0_1 + uj_g + 0], 0, 2); }"));
  CHECK(text && !strstr(text, "__builtin_prefetch(&t4["));
  char* aot = uj_program_dump(ctx, p, UJ_FORWARD, UJ_DUMP_C_AOT, NULL);
  CHECK(aot && !strstr(aot, "__builtin_prefetch("));
  free(aot);
  free(text);
  uj_ctx_free(ctx);
  or_tensor_free(&x), or_tensor_free(&y);
  uj_program_free(p);
}

TEST_MAIN()
