/* tests/test_ir.c: the IR printer, hash and verifier (ir/print.c, ir/hash.c,
 * ir/verify.c) on functions built by hand with the builders of ir.h. The
 * index-expression parser has its own file, tests/test_index.c. */
#include "../ir/ir.h"
#include "harness.h"

/* ---- a sample function -------------------------------------------------------------
 *
 *   t0 "x" input 0 f32 [d0_0, d0_1]; t1 output 0 f32 [d0_0, d0_1]; t2 output 1 f32 [d0_0, 1]
 *   block 0: t1[i0, i1] = exp(t0[i0, i1]) * 1.5f
 *   block 1: for i2 { c0 = 0; for i3 { c0 += t0[i2, ?(i3 + $kh - 1)] } t2[i2, 0] = c0 }
 *
 * Each variant changes one thing, for the hash tests. */
typedef enum {
  V_BASE,
  V_CONSTANT,       /* 1.5 -> 2.5 */
  V_OP,             /* exp -> log */
  V_BOUND,          /* i1 starts at 1 */
  V_TENSOR_DTYPE,   /* t2 is f64 */
  V_CARRIED_DTYPE,  /* c0 is f64 */
  V_REDUCE_OP,      /* c0 is a max */
  V_CHECK_BIT,      /* the checked axis is not checked */
  V_TENSOR_NAME,    /* t0 is "y" */
  V_PARAM_NAME,     /* $kh is $kw */
  V_STMT_KIND,      /* block 0 scatter-adds */
  V_COUNT
} variant_t;

static ir_ix_t* dim(ir_func_t* f, int t, int axis) { return ir_ix_dim(f, t, axis); }

static void access2(ir_access_t* acc, int tensor, ir_ix_t* a, ir_ix_t* b) {
  ir_access_init(acc, tensor);
  acc->nidx = 2;
  acc->idx[0] = a;
  acc->idx[1] = b;
}

static ir_func_t* sample(variant_t v) {
  ir_func_t* f = ir_func_new();
  int x = ir_add_tensor(f, UJ_F32, 2, IR_TENSOR_INPUT, 0);
  int y = ir_add_tensor(f, UJ_F32, 2, IR_TENSOR_OUTPUT, 0);
  int s = ir_add_tensor(f, v == V_TENSOR_DTYPE ? UJ_F64 : UJ_F32, 2, IR_TENSOR_OUTPUT, 1);
  f->tensors[x].name = v == V_TENSOR_NAME ? "y" : "x";
  for (int t = 0; t < 3; t++) {
    f->tensors[t].dims[0] = dim(f, 0, 0);
    f->tensors[t].dims[1] = t == 2 ? ir_ix_const(f, 1) : dim(f, 0, 1);
  }
  f->nparams = 1;
  f->param_names = rt_arena_alloc(&f->arena, sizeof *f->param_names);
  f->param_names[0] = v == V_PARAM_NAME ? "kw" : "kh";

  ir_block_t* b0 = ir_add_block(f);
  ir_loop_t* l0 = ir_add_loop(f, b0, ir_ix_const(f, 0), dim(f, 0, 0));
  ir_loop_t* l1 = ir_add_loop(f, b0, ir_ix_const(f, v == V_BOUND ? 1 : 0), dim(f, 0, 1));
  ir_access_t in;
  access2(&in, x, ir_ix_loop(f, l0->id), ir_ix_loop(f, l1->id));
  ir_expr_t* e = ir_ex_unary(f, v == V_OP ? UJ_UNARY_LOG : UJ_UNARY_EXP, ir_ex_load(f, &in));
  e = ir_ex_binary(f, UJ_BINARY_MUL, e, ir_ex_const(f, UJ_F32, v == V_CONSTANT ? 2.5 : 1.5));
  ir_stmt_t* st = ir_add_stmt(f, l1, v == V_STMT_KIND ? IR_ST_SCATTER_ADD : IR_ST_STORE);
  access2(&st->target, y, ir_ix_loop(f, l0->id), ir_ix_loop(f, l1->id));
  st->value = e;

  ir_block_t* b1 = ir_add_block(f);
  ir_loop_t* l2 = ir_add_loop(f, b1, ir_ix_const(f, 0), dim(f, 0, 0));
  ir_loop_t* l3 = ir_add_loop(f, b1, ir_ix_const(f, 0), dim(f, 0, 1));
  uj_dtype_t cd = v == V_CARRIED_DTYPE ? UJ_F64 : UJ_F32;
  int c = ir_add_carried(f, l2, v == V_REDUCE_OP ? UJ_REDUCE_MAX : UJ_REDUCE_SUM, cd);
  ir_ix_t* param = ir_ix_const(f, 0); /* replaced by a PARAM node below */
  param->kind = IR_IX_PARAM;
  param->id = 0;
  param->name = f->param_names[0];
  ir_ix_t* shifted = ir_ix_bin(f, IR_IX_SUB, ir_ix_bin(f, IR_IX_ADD, ir_ix_loop(f, l3->id), param),
                               ir_ix_const(f, 1));
  access2(&in, x, ir_ix_loop(f, l2->id), shifted);
  in.check_mask = v == V_CHECK_BIT ? 0 : 2;
  ir_stmt_t* acc = ir_add_stmt(f, l3, IR_ST_ACCUM);
  acc->carried = c;
  acc->value = ir_ex_load(f, &in);
  ir_stmt_t* out = ir_add_stmt(f, l2, IR_ST_STORE);
  access2(&out->target, s, ir_ix_loop(f, l2->id), ir_ix_const(f, 0));
  out->value = ir_ex_carried(f, c, cd);
  return f;
}

static int count_block_lines(const char* text) {
  int n = 0;
  for (const char* line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
    if (!strncmp(line, "block", 5)) n++;
  return n;
}

/* Whether text holds `line` as a whole line. */
static int has_line(const char* text, const char* line) {
  size_t n = strlen(line);
  for (const char* at = strstr(text, line); at; at = strstr(at + 1, line))
    if ((at == text || at[-1] == '\n') && (at[n] == '\n' || at[n] == '\0')) return 1;
  printf("  missing line: %s\n", line);
  return 0;
}

TEST(print_sample) {
  ir_func_t* f = sample(V_BASE);
  char* text = ir_print(f, NULL, 0);
  CHECK(text != NULL);
  if (!text) return;
  CHECK(has_line(text, "params $kh"));
  CHECK(has_line(text, "tensors"));
  CHECK(has_line(text, "  t0 \"x\" input 0 f32 [d0_0, d0_1]"));
  CHECK(has_line(text, "  t1 output 0 f32 [d0_0, d0_1]"));
  CHECK(has_line(text, "  t2 output 1 f32 [d0_0, 1]"));
  CHECK(has_line(text, "block 0"));
  CHECK(has_line(text, "  for (i0 = 0; i0 < d0_0; i0++) {"));
  CHECK(has_line(text, "    for (i1 = 0; i1 < d0_1; i1++) {"));
  CHECK(has_line(text, "      t1[i0, i1] = exp(t0[i0, i1]) * 1.5f;"));
  CHECK(has_line(text, "block 1"));
  CHECK(has_line(text, "    f32 c0 = 0;"));
  CHECK(has_line(text, "      c0 += t0[i2, ?(i3 + $kh - 1)];"));
  CHECK(has_line(text, "    t2[i2, 0] = c0;"));
  CHECK(!strstr(text, "asserts"));
  CHECK(count_block_lines(text) == f->nblocks);
  free(text);

  /* canonical: no names, the parameter as its slot; the whole text pinned */
  text = ir_print(f, NULL, IR_PRINT_CANONICAL);
  const char* want =
      "tensors\n"
      "  t0 input 0 f32 [d0_0, d0_1]\n"
      "  t1 output 0 f32 [d0_0, d0_1]\n"
      "  t2 output 1 f32 [d0_0, 1]\n"
      "block 0\n"
      "  for (i0 = 0; i0 < d0_0; i0++) {\n"
      "    for (i1 = 0; i1 < d0_1; i1++) {\n"
      "      t1[i0, i1] = exp(t0[i0, i1]) * 1.5f;\n"
      "    }\n"
      "  }\n"
      "block 1\n"
      "  for (i2 = 0; i2 < d0_0; i2++) {\n"
      "    f32 c0 = 0;\n"
      "    for (i3 = 0; i3 < d0_1; i3++) {\n"
      "      c0 += t0[i2, ?(i3 + $0 - 1)];\n"
      "    }\n"
      "    t2[i2, 0] = c0;\n"
      "  }\n";
  CHECK(text && !strcmp(text, want));
  if (text && strcmp(text, want)) printf("%s", text);
  free(text);

  /* parameter values fold into the text */
  int64_t kh = 3;
  text = ir_print(f, &kh, IR_PRINT_CANONICAL);
  CHECK(text && strstr(text, "c0 += t0[i2, ?(i3 + 3 - 1)];"));
  free(text);
  text = ir_print(f, &kh, 0);
  CHECK(text && has_line(text, "params $kh=3"));
  free(text);
  ir_func_free(f);
}

TEST(print_expressions) {
  ir_func_t* f = ir_func_new();
  int x = ir_add_tensor(f, UJ_F32, 1, IR_TENSOR_INPUT, 0);
  int y = ir_add_tensor(f, UJ_F32, 1, IR_TENSOR_OUTPUT, 0);
  int z = ir_add_tensor(f, UJ_F64, 1, IR_TENSOR_OUTPUT, 1);
  int ix = ir_add_tensor(f, UJ_I32, 1, IR_TENSOR_INPUT, 1);
  f->tensors[y].name = "y";
  f->tensors[y].noalloc = 1;
  ir_block_t* b = ir_add_block(f);
  ir_loop_t* l = ir_add_loop(f, b, ir_ix_const(f, 1),
                             ir_ix_bin(f, IR_IX_SUB, ir_ix_dim(f, x, 0), ir_ix_const(f, 1)));
  ir_ix_t* i0 = ir_ix_loop(f, l->id);
  ir_access_t at;
  ir_access_init(&at, x);
  at.nidx = 1;
  at.idx[0] = i0;
  ir_access_t out = at;
  out.tensor = y;
  ir_access_t out64 = at;
  out64.tensor = z;
#define LOAD() ir_ex_load(f, &at)
#define F32(v) ir_ex_const(f, UJ_F32, v)
#define STORE(kind, acc, e)                         \
  do {                                              \
    ir_stmt_t* s_ = ir_add_stmt(f, l, kind);        \
    s_->target = acc;                               \
    s_->value = (e);                                \
  } while (0)
  STORE(IR_ST_STORE, out,
        ir_ex_binary(f, UJ_BINARY_SUB, LOAD(), ir_ex_binary(f, UJ_BINARY_SUB, LOAD(), F32(1))));
  STORE(IR_ST_STORE, out,
        ir_ex_binary(f, UJ_BINARY_MUL, ir_ex_binary(f, UJ_BINARY_ADD, LOAD(), F32(1)), LOAD()));
  STORE(IR_ST_STORE, out,
        ir_ex_binary(f, UJ_BINARY_ADD, ir_ex_binary(f, UJ_BINARY_MUL, LOAD(), LOAD()), F32(0.1)));
  STORE(IR_ST_STORE, out, ir_ex_binary(f, UJ_BINARY_SUB, LOAD(), F32(-1.5)));
  STORE(IR_ST_STORE, out, ir_ex_unary(f, UJ_UNARY_NEG, LOAD()));
  STORE(IR_ST_STORE, out, ir_ex_binary(f, UJ_BINARY_POW, LOAD(), F32(2)));
  STORE(IR_ST_STORE, out, ir_ex_binary(f, UJ_BINARY_MAX, LOAD(), F32(0)));
  STORE(IR_ST_STORE, out,
        ir_ex_where(f, ir_ex_binary(f, UJ_BINARY_LT, LOAD(), F32(0)), ir_ex_unary(f, UJ_UNARY_NEG, LOAD()),
                    ir_ex_unary(f, UJ_UNARY_SIGMOID, LOAD())));
  STORE(IR_ST_STORE, out,
        ir_ex_index(f, ir_ix_bin(f, IR_IX_MUL, ir_ix_bin(f, IR_IX_ADD, i0, ir_ix_const(f, 1)),
                                 ir_ix_const(f, 2)),
                    UJ_F32));
  STORE(IR_ST_STORE, out,
        ir_ex_index(f, ir_ix_bin(f, IR_IX_SUB, i0, ir_ix_bin(f, IR_IX_SUB, i0, ir_ix_const(f, 1))),
                    UJ_F32));
  STORE(IR_ST_STORE, out,
        ir_ex_index(f, ir_ix_bin(f, IR_IX_MAX, ir_ix_bin(f, IR_IX_MIN, i0, ir_ix_const(f, 3)),
                                 ir_ix_bin(f, IR_IX_NEG, ir_ix_bin(f, IR_IX_ADD, i0, ir_ix_const(f, 1)), NULL)),
                    UJ_F32));
  STORE(IR_ST_SCATTER_ADD, out, LOAD());
  STORE(IR_ST_STORE, out64, ir_ex_cast(f, UJ_F64, LOAD()));
  STORE(IR_ST_STORE, out64, ir_ex_const(f, UJ_F64, 0.1));
  STORE(IR_ST_STORE, out64, ir_ex_const(f, UJ_F64, 1));
  /* an index read from an i32 tensor, and an i32 constant */
  ir_access_t gather = at;
  gather.tensor = ix;
  ir_ix_t* load_ix = ir_ix_const(f, 0);
  load_ix->kind = IR_IX_LOAD;
  load_ix->load = &gather;
  ir_access_t indirect = at;
  indirect.idx[0] = load_ix;
  indirect.check_mask = 1;
  STORE(IR_ST_STORE, out, ir_ex_load(f, &indirect));
  STORE(IR_ST_STORE, out,
        ir_ex_cast(f, UJ_F32, ir_ex_binary(f, UJ_BINARY_ADD, ir_ex_const(f, UJ_I32, 7), ir_ex_const(f, UJ_I32, -2))));
  /* every reduction op: declaration and accumulation */
  static const uj_reduce_op_t ops[] = {UJ_REDUCE_SUM, UJ_REDUCE_PROD, UJ_REDUCE_MAX, UJ_REDUCE_MIN,
                                       UJ_REDUCE_ARGMAX, UJ_REDUCE_ARGMIN};
  for (int k = 0; k < 6; k++) {
    int c = ir_add_carried(f, l, ops[k], UJ_F32);
    ir_stmt_t* s = ir_add_stmt(f, l, IR_ST_ACCUM);
    s->carried = c;
    s->value = LOAD();
    if (k >= 4) s->arg_index = i0;
  }
#undef LOAD
#undef F32
#undef STORE
  CHECK(ir_verify(f) == UJ_ERR_INVALID); /* y is no-alloc yet written: printing must not care */
  char* text = ir_print(f, NULL, 0);
  CHECK(text != NULL);
  if (!text) return;
  CHECK(has_line(text, "  t1 \"y\" output 0 f32 [_] noalloc"));
  CHECK(has_line(text, "  t3 input 1 i32 [_]"));
  CHECK(has_line(text, "  for (i0 = 1; i0 < d0_0 - 1; i0++) {"));
  CHECK(has_line(text, "    t1[i0] = t0[i0] - (t0[i0] - 1.0f);"));
  CHECK(has_line(text, "    t1[i0] = (t0[i0] + 1.0f) * t0[i0];"));
  CHECK(has_line(text, "    t1[i0] = t0[i0] * t0[i0] + 0.1f;"));
  CHECK(has_line(text, "    t1[i0] = t0[i0] - (-1.5f);"));
  CHECK(has_line(text, "    t1[i0] = -(t0[i0]);"));
  CHECK(has_line(text, "    t1[i0] = pow(t0[i0], 2.0f);"));
  CHECK(has_line(text, "    t1[i0] = max(t0[i0], 0.0f);"));
  CHECK(has_line(text, "    t1[i0] = where(t0[i0] < 0.0f, -(t0[i0]), sigmoid(t0[i0]));"));
  CHECK(has_line(text, "    t1[i0] = (f32)((i0 + 1) * 2);"));
  CHECK(has_line(text, "    t1[i0] = (f32)(i0 - (i0 - 1));"));
  CHECK(has_line(text, "    t1[i0] = (f32)(max(min(i0, 3), -(i0 + 1)));"));
  CHECK(has_line(text, "    t1[i0] += t0[i0];"));
  CHECK(has_line(text, "    t2[i0] = (f64)(t0[i0]);"));
  CHECK(has_line(text, "    t2[i0] = 0.1;"));
  CHECK(has_line(text, "    t2[i0] = 1.0;"));
  CHECK(has_line(text, "    t1[i0] = t0[?(t3[i0])];"));
  CHECK(has_line(text, "    t1[i0] = (f32)(7 + (-2));"));
  CHECK(has_line(text, "    f32 c0 = 0;"));
  CHECK(has_line(text, "    f32 c1 = 1;"));
  CHECK(has_line(text, "    f32 c2 = -inf;"));
  CHECK(has_line(text, "    f32 c3 = inf;"));
  CHECK(has_line(text, "    f32 c4 = argmax_init;"));
  CHECK(has_line(text, "    f32 c5 = argmin_init;"));
  CHECK(has_line(text, "    c0 += t0[i0];"));
  CHECK(has_line(text, "    c1 *= t0[i0];"));
  CHECK(has_line(text, "    c2 = max(c2, t0[i0]);"));
  CHECK(has_line(text, "    c3 = min(c3, t0[i0]);"));
  CHECK(has_line(text, "    c4 = argmax(c4, t0[i0], at i0);"));
  CHECK(has_line(text, "    c5 = argmin(c5, t0[i0], at i0);"));
  CHECK(count_block_lines(text) == 1);
  free(text);
  ir_func_free(f);
}

TEST(print_asserts_and_params) {
  ir_func_t* f = sample(V_BASE);
  ir_add_assert(f, ir_ix_dim(f, 1, 1), ir_ix_dim(f, 0, 1), "operands of add");
  char* text = ir_print(f, NULL, 0);
  CHECK(text && has_line(text, "asserts"));
  CHECK(text && has_line(text, "  d1_1 == d0_1  (what: \"operands of add\")"));
  free(text);
  text = ir_print(f, NULL, IR_PRINT_CANONICAL);
  CHECK(text && has_line(text, "  d1_1 == d0_1"));
  CHECK(text && !strstr(text, "operands"));
  /* "asserts" and "tensors" never start a line with "block" */
  CHECK(text && count_block_lines(text) == 2);
  free(text);
  ir_func_free(f);
}

static int hash_equal(ir_hash_t a, ir_hash_t b) { return a.lo == b.lo && a.hi == b.hi; }

TEST(hash_bytes_properties) {
  /* deterministic, and the same whether the text comes whole or in pieces
   * (ir_hash streams it): checked through the canonical text below */
  char text[67];
  for (int i = 0; i < 66; i++) text[i] = (char)('a' + i % 26);
  text[66] = '\0';
  ir_hash_t base = ir_hash_bytes(text, 66);
  CHECK(hash_equal(base, ir_hash_bytes(text, 66)));
  CHECK(base.lo != base.hi);
  /* one flipped bit anywhere, in a whole word or in the tail, changes both halves */
  for (int i = 0; i < 66; i++)
    for (int bit = 0; bit < 8; bit++) {
      text[i] ^= (char)(1 << bit);
      ir_hash_t h = ir_hash_bytes(text, 66);
      text[i] ^= (char)(1 << bit);
      CHECK(h.lo != base.lo && h.hi != base.hi);
    }
  /* a zero byte appended, or the text cut short, is another input */
  char padded[8] = "abc";
  CHECK(!hash_equal(ir_hash_bytes(padded, 3), ir_hash_bytes(padded, 4)));
  CHECK(!hash_equal(ir_hash_bytes(padded, 8), ir_hash_bytes(padded, 7)));
  CHECK(!hash_equal(ir_hash_bytes("", 0), ir_hash_bytes(padded + 3, 1)));
  CHECK(!hash_equal(ir_hash_bytes(text, 65), base));
}

TEST(hash_tracks_everything_but_names) {
  ir_func_t* base = sample(V_BASE);
  ir_func_t* again = sample(V_BASE);
  ir_hash_t h = ir_hash(base);
  CHECK(hash_equal(h, ir_hash(again)));
  /* the hash is that of the canonical text */
  char* text = ir_print(base, NULL, IR_PRINT_CANONICAL);
  CHECK(text && hash_equal(h, ir_hash_bytes(text, strlen(text))));
  free(text);
  ir_func_t* copy = ir_func_clone(base);
  CHECK(copy && hash_equal(h, ir_hash(copy)));
  ir_func_free(copy);
  for (int v = V_BASE + 1; v < V_COUNT; v++) {
    ir_func_t* f = sample((variant_t)v);
    int names_only = v == V_TENSOR_NAME || v == V_PARAM_NAME;
    int same = hash_equal(h, ir_hash(f));
    CHECK(same == names_only);
    if (same != names_only) printf("  variant %d\n", v);
    ir_func_free(f);
  }
  ir_func_free(base);
  ir_func_free(again);
}

/* ---- verifier ---------------------------------------------------------------------- */

/* The statement of block b, loop k, index s. */
static ir_stmt_t* stmt(ir_func_t* f, int b, int k, int s) { return &f->blocks[b].loops[k].stmts[s]; }

static int verify_fails(ir_func_t* f, const char* fragment) {
  uj_status_t s = ir_verify(f);
  int ok = s == UJ_ERR_INVALID && strstr(uj_last_error(), fragment) != NULL;
  if (!ok) printf("  status %d, message \"%s\", want \"%s\"\n", (int)s, uj_last_error(), fragment);
  ir_func_free(f);
  return ok;
}

TEST(verify_accepts_valid) {
  for (int v = V_BASE; v < V_COUNT; v++) {
    if (v == V_TENSOR_DTYPE || v == V_CARRIED_DTYPE) continue; /* inconsistent on purpose */
    ir_func_t* f = sample((variant_t)v);
    uj_status_t s = ir_verify(f);
    CHECK(s == UJ_OK);
    if (s != UJ_OK) printf("  variant %d: %s\n", v, uj_last_error());
    ir_func_free(f);
  }
}

TEST(verify_reports_broken_invariants) {
  ir_func_t* f = sample(V_BASE);
  stmt(f, 0, 1, 0)->target.tensor = 7;
  CHECK(verify_fails(f, "block 0 loop i1: store of t7, function has 3 tensors (statement 0)"));

  f = sample(V_BASE);
  stmt(f, 0, 1, 0)->value->a->a->access.nidx = 1;
  CHECK(verify_fails(f, "block 0 loop i1: load of t0 has 1 indices, tensor has rank 2 (statement 0)"));

  f = sample(V_BASE);
  stmt(f, 1, 0, 0)->target.idx[1] = ir_ix_loop(f, 3); /* i3 is the inner loop */
  CHECK(verify_fails(f, "block 1 loop i2: i3 is not an enclosing loop (statement 0)"));

  f = sample(V_BASE);
  f->blocks[0].loops[1].end = ir_ix_loop(f, 1); /* a bound sees only the enclosing loops */
  CHECK(verify_fails(f, "block 0 loop i1: i1 is not an enclosing loop (end)"));

  f = sample(V_BASE);
  stmt(f, 0, 1, 0)->target.idx[0] = ir_ix_loop(f, 2); /* a loop of another block */
  CHECK(verify_fails(f, "i2 is not an enclosing loop"));

  f = sample(V_BASE);
  stmt(f, 0, 1, 0)->value = ir_ex_carried(f, 0, UJ_F32); /* c0 lives in block 1 */
  CHECK(verify_fails(f, "block 0 loop i1: reads c0, which no enclosing loop carries (statement 0)"));

  f = sample(V_BASE);
  {
    /* an accumulation outside the loop that declares its variable */
    ir_stmt_t* s = ir_add_stmt(f, &f->blocks[0].loops[1], IR_ST_ACCUM);
    s->carried = 0;
    s->value = ir_ex_const(f, UJ_F32, 1);
  }
  CHECK(verify_fails(f, "accumulates into c0, which no enclosing loop carries"));

  f = sample(V_BASE);
  stmt(f, 0, 1, 0)->value->b = ir_ex_const(f, UJ_F64, 1.5);
  CHECK(verify_fails(f, "binary op 2 has dtype f32, operands have f32 and f64"));

  f = sample(V_TENSOR_DTYPE);
  CHECK(verify_fails(f, "block 1 loop i2: store of a f32 value into t2 of dtype f64 (statement 0)"));

  f = sample(V_CARRIED_DTYPE);
  f->tensors[2].dtype = UJ_F64; /* so that only the accumulation disagrees */
  CHECK(verify_fails(f, "accumulates a f32 value into c0 of dtype f64"));

  f = sample(V_BASE);
  stmt(f, 0, 1, 0)->value->a->a->dtype = UJ_F64;
  CHECK(verify_fails(f, "load of t0 has dtype f64, tensor has f32"));

  f = sample(V_BASE);
  /* argmax: the read back is i32, and the accumulation needs an index */
  f->blocks[1].loops[0].carried[0].op = UJ_REDUCE_ARGMAX;
  CHECK(verify_fails(f, "read of c0 has dtype f32, must be i32"));
  f = sample(V_BASE);
  f->blocks[1].loops[0].carried[0].op = UJ_REDUCE_ARGMAX;
  f->tensors[2].dtype = UJ_I32;
  stmt(f, 1, 0, 0)->value->dtype = UJ_I32;
  ir_func_t* fixed = ir_func_clone(f);
  CHECK(verify_fails(f, "block 1 loop i3: accumulation into arg-reduction c0 has no arg index (statement 0)"));
  stmt(fixed, 1, 1, 0)->arg_index = ir_ix_loop(fixed, 3);
  CHECK(ir_verify(fixed) == UJ_OK);
  ir_func_free(fixed);

  f = sample(V_BASE);
  stmt(f, 1, 1, 0)->arg_index = ir_ix_loop(f, 3);
  CHECK(verify_fails(f, "has an arg index, but its op 0 is not argmax/argmin"));

  f = sample(V_BASE);
  f->tensors[0].noalloc = 1;
  CHECK(verify_fails(f, "load of t0, which is no-alloc"));

  f = sample(V_BASE);
  stmt(f, 0, 1, 0)->target.check_mask = 4;
  CHECK(verify_fails(f, "store of t1 has check mask 0x4 beyond its 2 indices"));

  f = sample(V_BASE);
  f->nparams = 0;
  CHECK(verify_fails(f, "parameter $kh has slot 0, function has 0 parameters"));

  f = sample(V_BASE);
  f->tensors[2].dims[0] = ir_ix_dim(f, 0, 5);
  CHECK(verify_fails(f, "tensor t2: size d0_5 names axis 5, t0 has rank 2 (size of axis 0)"));

  f = sample(V_BASE);
  f->blocks[1].loops[1].id = 0;
  CHECK(verify_fails(f, "block 1 loop i0: loop id used twice"));

  f = sample(V_BASE);
  f->blocks[1].loops[0].carried[0].id = 5;
  CHECK(verify_fails(f, "carried c5 outside [0, 1)"));

  f = sample(V_BASE);
  ir_add_block(f);
  CHECK(verify_fails(f, "block 2: has no loops"));

  f = sample(V_BASE);
  {
    ir_func_t* g = f;
    int t = ir_add_tensor(g, UJ_I32, 2, IR_TENSOR_OUTPUT, 2);
    ir_stmt_t* s = ir_add_stmt(g, &g->blocks[0].loops[1], IR_ST_STORE);
    access2(&s->target, t, ir_ix_loop(g, 0), ir_ix_loop(g, 1));
    s->value = ir_ex_unary(g, UJ_UNARY_EXP, ir_ex_const(g, UJ_I32, 1));
  }
  CHECK(verify_fails(f, "unary op 2 applied to i32 (statement 1)"));

  CHECK(ir_verify(NULL) == UJ_ERR_INVALID);
}

TEST_MAIN()
