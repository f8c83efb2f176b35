/* tests/test_passes.c: what the pass pipeline (deps, dce, fuse, subst,
 * bounds) makes of typical uop graphs, judged by counting text in the IR
 * dumps and by running the result: a custom elementwise chain (the sigmoid
 * of x*a+b) becomes one block with one store; an Adam step becomes one block
 * that reads p, g, m, v in one pass and stores p, m, v, and matches a naive
 * Adam in double; softmax over the last axis takes at most three blocks,
 * computes exp once per element and stores it in its output beside the
 * sum, and a program that may run in place over its output's input keeps
 * its exp recomputed instead; the
 * uop convolution is one block whose reads are all proven in range, and with
 * padding 1 keeps checks exactly on the two padded axes of x; a consumer
 * reading its producer at another index, and a reduction result read inside
 * the reduced loop, are not fused (and still compute the right values);
 * nests whose outer loops hold no statements fuse (z = - -x); the
 * raw dump has more blocks than the optimized one; UOPJIT_DEBUG=passes
 * prints the IR after each pass. The randomized comparison of passes on
 * against passes off lives in test_passes_random.c. */
#include <unistd.h>

#include "../lang/parse.h"
#include "../uops/uops.h"
#include "oracle.h"

/* ---- reading dumps ----------------------------------------------------------------- */

static char* dump_of(uj_program_t* p, uj_pass_t pass, uj_dump_t what) {
  uj_ctx_t* ctx = uj_ctx_new();
  char* s = ctx && p ? uj_program_dump(ctx, p, pass, what, NULL) : NULL;
  if (!s) fprintf(stderr, "  dump failed: %s\n", uj_last_error());
  uj_ctx_free(ctx);
  return s;
}

/* The line starting at s, without its indentation, copied into buf. */
static const char* trimmed_line(const char* s, char* buf, size_t cap) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = 0;
  while (s[n] && s[n] != '\n' && n + 1 < cap) buf[n] = s[n], n++;
  buf[n] = 0;
  return buf;
}
static const char* next_line(const char* s) {
  const char* e = strchr(s, '\n');
  return e ? e + 1 : NULL;
}

/* Lines that start (after indentation) with prefix. */
static int count_lines_starting(const char* text, const char* prefix) {
  int n = 0;
  char buf[1024];
  for (const char* s = text; s && *s; s = next_line(s))
    if (strncmp(trimmed_line(s, buf, sizeof buf), prefix, strlen(prefix)) == 0) n++;
  return n;
}
static int count_blocks(const char* text) { return text ? count_lines_starting(text, "block") : -1; }

static int count_substr(const char* text, const char* needle) {
  int n = 0;
  size_t k = strlen(needle);
  for (const char* s = text; s && (s = strstr(s, needle)); s += k) n++;
  return n;
}

/* Stores: statement lines `tK[...] = ...;` (not loop headers, not carried
 * resets such as `f32 c0 = 0;`, not reductions `c0 += ...`). */
static int count_stores(const char* text) {
  int n = 0;
  char buf[4096];
  const char* s = text ? strstr(text, "\nblock") : NULL;
  for (; s && *s; s = next_line(s)) {
    trimmed_line(s, buf, sizeof buf);
    if (buf[0] == 't' && buf[1] >= '0' && buf[1] <= '9' && strstr(buf, " = ")) n++;
  }
  return n;
}

/* The name ("t3") of the tensor listed as `role index` in the dump's
 * "tensors" section (role "input" or "output"), or "" if none. */
static void tensor_name(const char* text, const char* role, int index, char* name, size_t cap) {
  char want[64], buf[1024];
  snprintf(want, sizeof want, " %s %d ", role, index);
  name[0] = 0;
  for (const char* s = text; s && *s; s = next_line(s)) {
    trimmed_line(s, buf, sizeof buf);
    if (strncmp(buf, "block", 5) == 0) break;
    if (buf[0] == 't' && strstr(buf, want)) {
      size_t n = strcspn(buf, " ");
      if (n + 1 > cap) n = cap - 1;
      memcpy(name, buf, n);
      name[n] = 0;
      return;
    }
  }
}

/* Occurrences of the load or store `name[` (so that t1 does not match t12). */
static int count_access(const char* text, const char* name) {
  char needle[64];
  snprintf(needle, sizeof needle, "%s[", name);
  int n = 0;
  for (const char* s = text; s && (s = strstr(s, needle)); s++)
    if (s == text || !(s[-1] >= '0' && s[-1] <= '9')) n++;
  return n;
}

/* The index axes of the first access `name[...]` in text, each copied into
 * axes[k] (up to 8); returns the axis count, or -1 when there is none. */
static int access_axes(const char* text, const char* name, char axes[][128]) {
  char needle[64];
  snprintf(needle, sizeof needle, "%s[", name);
  const char* s = text;
  while ((s = strstr(s, needle)) && s != text && s[-1] >= '0' && s[-1] <= '9') s++;
  if (!s) return -1;
  s += strlen(needle);
  int n = 0, depth = 0;
  size_t len = 0;
  for (; *s; s++) {
    if (depth == 0 && (*s == ',' || *s == ']')) {
      if (n < 8) {
        while (len && axes[n][len - 1] == ' ') len--;
        axes[n][len] = 0;
      }
      n++, len = 0;
      if (*s == ']') break;
      continue;
    }
    if (*s == '(') depth++;
    if (*s == ')') depth--;
    if (n < 8 && len + 1 < 128 && !(len == 0 && *s == ' ')) axes[n][len++] = *s;
  }
  return n;
}

/* The stores `name[...] = ...` in the block whose text holds needle (the
 * first such block), or -1 when no block holds it. */
static int stores_in_block_with(const char* text, const char* needle, const char* name) {
  const char* hit = text ? strstr(text, needle) : NULL;
  if (!hit) return -1;
  const char* start = text;
  for (const char* s = strstr(text, "\nblock"); s && s < hit; s = strstr(s + 1, "\nblock")) start = s;
  const char* end = strstr(hit, "\nblock");
  char prefix[64], buf[1024];
  snprintf(prefix, sizeof prefix, "%s[", name);
  int n = 0;
  for (const char* s = next_line(start); s && *s && (!end || s < end); s = next_line(s))
    if (strncmp(trimmed_line(s, buf, sizeof buf), prefix, strlen(prefix)) == 0 && strstr(buf, "] = ")) n++;
  return n;
}

/* ---- the sigmoid chain --------------------------------------------------------- */

/* y = 1 / (1 + exp(-(x*a + b))), x [n], a and b 0-d. */
static uj_program_t* chain_program(uj_dtype_t dt) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, dt), a = uj_input(g, 0, dt), b = uj_input(g, 0, dt);
  uj_io_t t = uj_binary(g, UJ_BINARY_MUL, x, a);
  t = uj_binary(g, UJ_BINARY_ADD, t, b);
  t = uj_unary(g, UJ_UNARY_NEG, t);
  t = uj_unary(g, UJ_UNARY_EXP, t);
  t = uj_binary(g, UJ_BINARY_ADD, uj_const(g, 1.0), t);
  uj_io_t y = uj_binary(g, UJ_BINARY_DIV, uj_const(g, 1.0), t);
  uj_io_t ins[] = {x, a, b};
  uj_program_t* p = OR_PROGRAM(g, 3, ins, 0, NULL, 1, &y);
  uj_graph_free(g);
  return p;
}

TEST(chain_one_block_one_store) {
  uj_program_t* p = chain_program(UJ_F32);
  char* ir = dump_of(p, UJ_FORWARD, UJ_DUMP_IR);
  CHECK(ir != NULL);
  CHECK(count_blocks(ir) == 1);
  CHECK(count_stores(ir) == 1);
  /* the only store writes the output */
  char out[16];
  tensor_name(ir, "output", 0, out, sizeof out);
  CHECK(out[0] && count_access(ir ? strstr(ir, "\nblock") : NULL, out) == 1);
  if (harness_failed_checks && ir) fprintf(stderr, "%s\n", ir);
  free(ir);

  uint64_t st = 31;
  HARNESS_SEED(31);
  int64_t n = 13, d0[1] = {0};
  uj_tensor_t tx = or_tensor(UJ_F32, 1, &n), ta = or_tensor(UJ_F32, 0, d0),
              tb = or_tensor(UJ_F32, 0, d0), ty = or_tensor(UJ_F32, 1, &n);
  or_fill_real(&st, &tx, -3, 3);
  ((float*)ta.data)[0] = 0.75f;
  ((float*)tb.data)[0] = -0.25f;
  double* ref = or_alloc_ref(n);
  for (int64_t i = 0; i < n; i++) ref[i] = 1.0 / (1.0 + exp(-(or_get(&tx, i) * 0.75 - 0.25)));
  const uj_tensor_t* in[] = {&tx, &ta, &tb};
  uj_tensor_t* outs[] = {&ty};
  const double* refs[] = {ref};
  OR_RUN_CHECK(p, in, 3, NULL, 0, outs, refs, 1, OR_TOL_F32);
  free(ref);
  or_tensor_free(&tx), or_tensor_free(&ta), or_tensor_free(&tb), or_tensor_free(&ty);
  uj_program_free(p);
}

TEST(raw_dump_has_more_blocks) {
  uj_program_t* p = chain_program(UJ_F64);
  char* raw = dump_of(p, UJ_FORWARD, UJ_DUMP_IR_RAW);
  char* ir = dump_of(p, UJ_FORWARD, UJ_DUMP_IR);
  CHECK(raw && ir);
  /* one block per uop as emitted: 2 constants and 6 ops */
  CHECK(count_blocks(raw) > count_blocks(ir));
  CHECK(count_blocks(raw) >= 6);
  CHECK(count_stores(raw) > count_stores(ir));
  free(raw), free(ir);
  uj_program_free(p);
}

/* UOPJIT_DEBUG=passes: the IR after each pass goes to stderr while the
 * program is built. stderr is pointed at a temporary file meanwhile. */
TEST(debug_env_prints_passes) {
  char path[] = "/tmp/uopjit_test_passes_XXXXXX";
  int fd = mkstemp(path);
  SKIP_IF(fd < 0, "no temporary file");
  fflush(stderr);
  int saved = dup(2);
  SKIP_IF(saved < 0, "cannot duplicate stderr");
  const char* old = getenv("UOPJIT_DEBUG");
  char* old_copy = old ? strdup(old) : NULL;
  setenv("UOPJIT_DEBUG", "passes", 1);
  dup2(fd, 2);
  uj_program_t* p = chain_program(UJ_F32);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  if (old_copy) setenv("UOPJIT_DEBUG", old_copy, 1);
  else unsetenv("UOPJIT_DEBUG");
  free(old_copy);
  CHECK(p != NULL);
  uj_program_free(p);

  char text[1 << 16];
  ssize_t got = pread(fd, text, sizeof text - 1, 0);
  close(fd);
  unlink(path);
  text[got > 0 ? got : 0] = 0;
  CHECK(got > 0);
  CHECK(strstr(text, "after") != NULL);
  /* one report per pass of the pipeline, each naming it */
  static const char* const passes[] = {"after bounds", "after dce", "after fuse", "after subst"};
  for (int i = 0; i < 4; i++) CHECK(strstr(text, passes[i]) != NULL);
  CHECK(count_substr(text, "after ") >= 5);
  /* the last report is the fused chain */
  const char* last = text;
  for (const char* s = text; (s = strstr(s, "after ")); s++) last = s;
  CHECK(count_blocks(last) == 1);
}

/* ---- Adam ------------------------------------------------------------------------- */

TEST(adam_one_block) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t p = uj_input(g, 1, UJ_F32), gr = uj_input(g, 1, UJ_F32), m = uj_input(g, 1, UJ_F32),
          v = uj_input(g, 1, UJ_F32);
  uj_io_t lr = uj_input(g, 0, UJ_F32), b1 = uj_input(g, 0, UJ_F32), b2 = uj_input(g, 0, UJ_F32),
          eps = uj_input(g, 0, UJ_F32), bc1 = uj_input(g, 0, UJ_F32), bc2 = uj_input(g, 0, UJ_F32);
#define BIN(op, a, b) uj_binary(g, UJ_BINARY_##op, (a), (b))
  uj_io_t one = uj_const(g, 1.0);
  /* m2 = b1*m + (1-b1)*g; v2 = b2*v + (1-b2)*g*g */
  uj_io_t m2 = BIN(ADD, BIN(MUL, m, b1), BIN(MUL, gr, BIN(SUB, one, b1)));
  uj_io_t v2 = BIN(ADD, BIN(MUL, v, b2), BIN(MUL, BIN(MUL, gr, gr), BIN(SUB, one, b2)));
  /* p2 = p - lr * (m2/bc1) / (sqrt(v2/bc2) + eps) */
  uj_io_t den = BIN(ADD, uj_unary(g, UJ_UNARY_SQRT, BIN(DIV, v2, bc2)), eps);
  uj_io_t p2 = BIN(SUB, p, BIN(DIV, BIN(MUL, BIN(DIV, m2, bc1), lr), den));
#undef BIN
  uj_io_t ins[] = {p, gr, m, v, lr, b1, b2, eps, bc1, bc2};
  uj_io_t outs[] = {p2, m2, v2};
  uj_program_t* prog = OR_PROGRAM(g, 10, ins, 0, NULL, 3, outs);
  uj_graph_free(g);

  char* ir = dump_of(prog, UJ_FORWARD, UJ_DUMP_IR);
  CHECK(ir != NULL);
  CHECK(count_blocks(ir) == 1);
  const char* body = ir ? strstr(ir, "\nblock") : NULL;
  /* p, g, m, v are each read once (g feeds m2 and g*g through one load):
   * nothing is recomputed and nothing read twice. */
  static const int reads[4] = {1, 1, 1, 1};
  for (int k = 0; k < 4 && body; k++) {
    char name[16];
    tensor_name(ir, "input", k, name, sizeof name);
    CHECK(name[0] != 0);
    if (count_access(body, name) != reads[k]) {
      char msg[128];
      snprintf(msg, sizeof msg, "input %d (%s) accessed %d times in the blocks, want %d", k, name,
               count_access(body, name), reads[k]);
      harness_fail(__FILE__, __LINE__, msg);
    }
  }
  /* three stores of 1-D tensors, one per output (0-d scalars such as
   * 1 - b1 may be stored apart) */
  CHECK(count_stores(ir) - count_substr(body, "[] = ") == 3);
  for (int k = 0; k < 3 && body; k++) {
    char name[16];
    tensor_name(ir, "output", k, name, sizeof name);
    CHECK(name[0] && count_access(body, name) == 1);
  }
  if (harness_failed_checks && ir) fprintf(stderr, "%s\n", ir);
  free(ir);

  /* numerically against a naive Adam in double */
  HARNESS_SEED(37);
  uint64_t st = 37;
  int64_t n = 29, d0[1] = {0};
  uj_tensor_t t[10], o[3];
  for (int k = 0; k < 10; k++) t[k] = or_tensor(UJ_F32, k < 4 ? 1 : 0, k < 4 ? &n : d0);
  for (int k = 0; k < 3; k++) o[k] = or_tensor(UJ_F32, 1, &n);
  or_fill_real(&st, &t[0], -1, 1);
  or_fill_real(&st, &t[1], -1, 1);
  or_fill_real(&st, &t[2], -0.1, 0.1);
  or_fill_real(&st, &t[3], 0, 0.01);
  const double sc[6] = {1e-3, 0.9, 0.999, 1e-8, 1 - pow(0.9, 3), 1 - pow(0.999, 3)};
  for (int k = 0; k < 6; k++) ((float*)t[4 + k].data)[0] = (float)sc[k];
  double *rp = or_alloc_ref(n), *rm = or_alloc_ref(n), *rv = or_alloc_ref(n);
  double s[6];
  for (int k = 0; k < 6; k++) s[k] = or_get(&t[4 + k], 0);
  for (int64_t i = 0; i < n; i++) {
    double pv = or_get(&t[0], i), gv = or_get(&t[1], i), mv = or_get(&t[2], i), vv = or_get(&t[3], i);
    rm[i] = s[1] * mv + (1 - s[1]) * gv;
    rv[i] = s[2] * vv + (1 - s[2]) * gv * gv;
    rp[i] = pv - s[0] * (rm[i] / s[4]) / (sqrt(rv[i] / s[5]) + s[3]);
  }
  const uj_tensor_t* in[10];
  for (int k = 0; k < 10; k++) in[k] = &t[k];
  uj_tensor_t* out[] = {&o[0], &o[1], &o[2]};
  const double* refs[] = {rp, rm, rv};
  OR_RUN_CHECK(prog, in, 10, NULL, 0, out, refs, 3, 1e-5);
  free(rp), free(rm), free(rv);
  for (int k = 0; k < 10; k++) or_tensor_free(&t[k]);
  for (int k = 0; k < 3; k++) or_tensor_free(&o[k]);
  uj_program_free(prog);
}

/* ---- softmax ----------------------------------------------------------------------- */

TEST(softmax_at_most_three_blocks) {
  for (int d = 0; d < 2; d++) {
    uj_dtype_t dt = d ? UJ_F64 : UJ_F32;
    uj_graph_t* g = uj_graph_new();
    uj_io_t x = uj_input(g, 2, dt);
    int ax[] = {1};
    static const char* const sh[] = {"dA0", "dA1"};
    static const char* const ix[] = {"i0", "0"};
    uj_io_t mx = uj_reduce(g, UJ_REDUCE_MAX, 1, ax, x);
    uj_io_t mb = uj_reindex(g, mx, 2, sh, 1, &x, 2, ix);
    uj_io_t e = uj_unary(g, UJ_UNARY_EXP, uj_binary(g, UJ_BINARY_SUB, x, mb));
    uj_io_t s = uj_reduce(g, UJ_REDUCE_SUM, 1, ax, e);
    uj_io_t sb = uj_reindex(g, s, 2, sh, 1, &x, 2, ix);
    uj_io_t y = uj_binary(g, UJ_BINARY_DIV, e, sb);
    uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &y);
    uj_graph_free(g);
    char* ir = dump_of(p, UJ_FORWARD, UJ_DUMP_IR);
    int nb = count_blocks(ir);
    CHECK(nb >= 1 && nb <= 3);
    /* the max is read inside the loop it reduces: that cannot be one block */
    CHECK(nb > 1);
    /* the exp values are computed once, beside their sum, into a temporary
     * of x's size that lives within a row of the chain (chain-local: the CPU
     * runner gives it a few rows of scratch), which the divide reads; y,
     * written once there and read nowhere, may then be streamed past the
     * cache, which beats staging the exp values in y (ir/into_output.c) */
    CHECK(count_substr(ir, "exp(") == 1);
    CHECK(count_substr(ir, d ? "temp f64 [d0_0, d0_1] chain-local\n" : "temp f32 [d0_0, d0_1] chain-local\n") == 1);
    char yname[16];
    tensor_name(ir, "output", 0, yname, sizeof yname);
    CHECK(yname[0] != 0);
    CHECK(stores_in_block_with(ir, "exp(", yname) == 0);
    CHECK(stores_in_block_with(ir, "+= ", yname) == 0);
    CHECK(count_access(ir ? strstr(ir, "\nblock") : NULL, yname) == 1);
    if (harness_failed_checks && ir) fprintf(stderr, "%s\n", ir);
    free(ir);

    HARNESS_SEED(41 + d);
    uint64_t st = 41 + (uint64_t)d;
    int64_t dims[2] = {5, 7};
    uj_tensor_t tx = or_tensor(dt, 2, dims), ty = or_tensor(dt, 2, dims);
    or_fill_real(&st, &tx, -4, 4);
    double* ref = or_alloc_ref(35);
    for (int r = 0; r < 5; r++) {
      double m = -INFINITY, sum = 0;
      for (int c = 0; c < 7; c++) m = fmax(m, or_get(&tx, r * 7 + c));
      for (int c = 0; c < 7; c++) sum += exp(or_get(&tx, r * 7 + c) - m);
      for (int c = 0; c < 7; c++) ref[r * 7 + c] = exp(or_get(&tx, r * 7 + c) - m) / sum;
    }
    OR_RUN_CHECK1(p, &tx, &ty, ref, dt == UJ_F32 ? OR_TOL_F32 : OR_TOL_F64);
    free(ref);
    or_tensor_free(&tx), or_tensor_free(&ty);
    uj_program_free(p);
  }
}

/* x = x - softmax(y), run in place (x passed as its output too): the output
 * may be written over the input x, since only the last block touches
 * either. Staging the exp values in x would overwrite x before the divide
 * reads it, and make such a call compute x apart and copy it; so the exp is
 * computed again in the last block (ir/recompute.c), which stores x alone.
 * The result, in place, on every engine, against plain loops. */
TEST(softmax_into_an_in_place_output_recomputes) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t xy[2] = {uj_input(g, 2, UJ_F64), uj_input(g, 2, UJ_F64)};
  int ax[] = {1};
  static const char* const sh[] = {"dA0", "dA1"};
  static const char* const ix[] = {"i0", "0"};
  uj_io_t y = xy[1];
  uj_io_t mb = uj_reindex(g, uj_reduce(g, UJ_REDUCE_MAX, 1, ax, y), 2, sh, 1, &y, 2, ix);
  uj_io_t e = uj_unary(g, UJ_UNARY_EXP, uj_binary(g, UJ_BINARY_SUB, y, mb));
  uj_io_t sb = uj_reindex(g, uj_reduce(g, UJ_REDUCE_SUM, 1, ax, e), 2, sh, 1, &y, 2, ix);
  uj_io_t out = uj_binary(g, UJ_BINARY_SUB, xy[0], uj_binary(g, UJ_BINARY_DIV, e, sb));
  uj_program_t* p = OR_PROGRAM(g, 2, xy, 0, NULL, 1, &out);
  uj_graph_free(g);
  char* ir = dump_of(p, UJ_FORWARD, UJ_DUMP_IR);
  char oname[16];
  tensor_name(ir, "output", 0, oname, sizeof oname);
  CHECK(oname[0] != 0);
  CHECK(count_substr(ir, "exp(") == 2);
  CHECK(stores_in_block_with(ir, "+= ", oname) == 0);
  CHECK(count_access(ir ? strstr(ir, "\nblock") : NULL, oname) == 1);
  if (harness_failed_checks && ir) fprintf(stderr, "%s\n", ir);
  free(ir);

  HARNESS_SEED(53);
  int64_t dims[2] = {5, 9};
  for (int slot = 0; slot < OR_NENGINES && p; slot++) {
    uint64_t st = 53;
    uj_tensor_t tx = or_tensor(UJ_F64, 2, dims), ty = or_tensor(UJ_F64, 2, dims);
    or_fill_real(&st, &tx, -4, 4), or_fill_real(&st, &ty, -4, 4);
    double* ref = or_alloc_ref(45);
    for (int r = 0; r < 5; r++) {
      double m = -INFINITY, sum = 0;
      for (int c = 0; c < 9; c++) m = fmax(m, or_get(&ty, r * 9 + c));
      for (int c = 0; c < 9; c++) sum += exp(or_get(&ty, r * 9 + c) - m);
      for (int c = 0; c < 9; c++) ref[r * 9 + c] = or_get(&tx, r * 9 + c) - exp(or_get(&ty, r * 9 + c) - m) / sum;
    }
    const uj_tensor_t* in[] = {&tx, &ty};
    uj_tensor_t* outs[] = {&tx};
    uj_status_t s = or_program_run(slot, p, UJ_FORWARD, in, 2, NULL, 0, outs, 1);
    if (s != UJ_OK) fprintf(stderr, "  %s: %s\n", or_configs[slot].name, uj_last_error());
    CHECK(s == UJ_OK);
    for (int i = 0; i < 45; i++)
      if (fabs(or_get(&tx, i) - ref[i]) > OR_TOL_F64 * (1 + fabs(ref[i]))) {
        fprintf(stderr, "  %s: element %d is %.17g, expected %.17g\n", or_configs[slot].name, i, or_get(&tx, i), ref[i]);
        CHECK(0);
        break;
      }
    free(ref);
    or_tensor_free(&tx), or_tensor_free(&ty);
  }
  uj_program_free(p);
}

/* ---- convolution ------------------------------------------------------------------- */

TEST(conv_one_block_no_checks) {
  uj_program_t* p = or_conv_program(OR_CONV_DIMS, UJ_F32);
  char* ir = dump_of(p, UJ_FORWARD, UJ_DUMP_IR);
  CHECK(ir != NULL);
  CHECK(count_blocks(ir) == 1);
  CHECK(count_substr(ir, "?(") == 0);
  /* the product is accumulated straight from x and w: one store, the output */
  CHECK(count_stores(ir) == 1);
  if (harness_failed_checks && ir) fprintf(stderr, "%s\n", ir);
  free(ir);

  HARNESS_SEED(43);
  uint64_t st = 43;
  int64_t xd[4] = {2, 5, 6, 3}, wd[4] = {4, 3, 2, 3}, od[4];
  uj_tensor_t tx = or_tensor(UJ_F32, 4, xd), tw = or_tensor(UJ_F32, 4, wd);
  or_fill_real(&st, &tx, -1, 1);
  or_fill_real(&st, &tw, -1, 1);
  double* ref = or_alloc_ref(2 * 3 * 5 * 4);
  or_conv2d_nhwc(&tx, &tw, 1, 0, ref, od);
  uj_tensor_t ty = or_tensor(UJ_F32, 4, od);
  const uj_tensor_t* in[] = {&tx, &tw};
  uj_tensor_t* out[] = {&ty};
  const double* refs[] = {ref};
  OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 1, OR_TOL_F32_SUM);
  free(ref);
  or_tensor_free(&tx), or_tensor_free(&tw), or_tensor_free(&ty);
  uj_program_free(p);
}

/* With padding 1 the reads of x on axes 1 and 2 can fall outside (at the
 * border), so exactly those two checks stay; axes 0 and 3 of x and every
 * axis of w are proven. */
TEST(conv_pad1_keeps_exactly_the_padded_checks) {
  uj_program_t* p = or_conv_program(OR_CONV_PAD1, UJ_F32);
  char* ir = dump_of(p, UJ_FORWARD, UJ_DUMP_IR);
  CHECK(ir != NULL);
  CHECK(count_blocks(ir) == 1);
  const char* body = ir ? strstr(ir, "\nblock") : NULL;
  char xname[16], wname[16];
  tensor_name(ir, "input", 0, xname, sizeof xname);
  tensor_name(ir, "input", 1, wname, sizeof wname);
  CHECK(xname[0] && wname[0]);
  CHECK(count_substr(body, "?(") == 2);
  char axes[8][128];
  CHECK(access_axes(body, xname, axes) == 4);
  CHECK(strncmp(axes[0], "?(", 2) != 0);
  CHECK(strncmp(axes[1], "?(", 2) == 0);
  CHECK(strncmp(axes[2], "?(", 2) == 0);
  CHECK(strncmp(axes[3], "?(", 2) != 0);
  CHECK(access_axes(body, wname, axes) == 4);
  for (int k = 0; k < 4; k++) CHECK(strncmp(axes[k], "?(", 2) != 0);
  /* and no other access of x is checked: the checked axes all belong to its read */
  CHECK(count_access(body, xname) == 1);
  if (harness_failed_checks && ir) fprintf(stderr, "%s\n", ir);
  free(ir);

  HARNESS_SEED(47);
  uint64_t st = 47;
  int64_t xd[4] = {2, 4, 5, 3}, wd[4] = {3, 3, 3, 3}, od[4];
  uj_tensor_t tx = or_tensor(UJ_F32, 4, xd), tw = or_tensor(UJ_F32, 4, wd);
  or_fill_real(&st, &tx, -1, 1);
  or_fill_real(&st, &tw, -1, 1);
  double* ref = or_alloc_ref(2 * 4 * 5 * 3);
  or_conv2d_nhwc(&tx, &tw, 1, 1, ref, od);
  uj_tensor_t ty = or_tensor(UJ_F32, 4, od);
  const uj_tensor_t* in[] = {&tx, &tw};
  uj_tensor_t* out[] = {&ty};
  const double* refs[] = {ref};
  OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 1, OR_TOL_F32_SUM);
  free(ref);
  or_tensor_free(&tx), or_tensor_free(&tw), or_tensor_free(&ty);
  uj_program_free(p);
}

/* ---- what must not fuse ----------------------------------------------------------- */

/* y = x * w; z = reversed(y) + y: z[i] reads y[n-1-i], an element another
 * iteration writes, so the producer cannot be merged into the consumer. (A
 * product of two inputs: recomputing it in the consumer would read four
 * streams where keeping y moves three, so recompute leaves it alone.) */
TEST(no_fusion_at_another_index) {
  for (int d = 0; d < 2; d++) {
    uj_dtype_t dt = d ? UJ_F64 : UJ_F32;
    uj_graph_t* g = uj_graph_new();
    uj_io_t xw[2] = {uj_input(g, 1, dt), uj_input(g, 1, dt)};
    uj_io_t x = xw[0];
    uj_io_t y = uj_binary(g, UJ_BINARY_MUL, x, xw[1]);
    static const char* const sh[] = {"dA0"};
    static const char* const ix[] = {"dA0 - 1 - i0"};
    uj_io_t r = uj_reindex(g, y, 1, sh, 1, &x, 1, ix);
    uj_io_t z = uj_binary(g, UJ_BINARY_ADD, r, y);
    uj_program_t* p = OR_PROGRAM(g, 2, xw, 0, NULL, 1, &z);
    uj_graph_free(g);
    char* ir = dump_of(p, UJ_FORWARD, UJ_DUMP_IR);
    CHECK(count_blocks(ir) > 1);
    if (harness_failed_checks && ir) fprintf(stderr, "%s\n", ir);
    free(ir);

    HARNESS_SEED(53 + d);
    uint64_t st = 53 + (uint64_t)d;
    for (int64_t n = 1; n <= 9; n += 4) {
      uj_tensor_t tx = or_tensor(dt, 1, &n), tw = or_tensor(dt, 1, &n), tz = or_tensor(dt, 1, &n);
      or_fill_real(&st, &tx, -2, 2);
      or_fill_real(&st, &tw, -2, 2);
      double* ref = or_alloc_ref(n);
      for (int64_t i = 0; i < n; i++)
        ref[i] = or_get(&tx, n - 1 - i) * or_get(&tw, n - 1 - i) + or_get(&tx, i) * or_get(&tw, i);
      const uj_tensor_t* in[] = {&tx, &tw};
      uj_tensor_t* out[] = {&tz};
      const double* refs[] = {ref};
      OR_RUN_CHECK(p, in, 2, NULL, 0, out, refs, 1, dt == UJ_F32 ? OR_TOL_F32 : OR_TOL_F64);
      free(ref);
      or_tensor_free(&tx), or_tensor_free(&tw), or_tensor_free(&tz);
    }
    uj_program_free(p);
  }
}

/* y = x - max(x) over the last axis, broadcast back: the max is complete
 * only after its loop, so the subtraction cannot run inside it. */
TEST(no_fusion_of_reduction_into_its_loop) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 2, UJ_F64);
  int ax[] = {1};
  static const char* const sh[] = {"dA0", "dA1"};
  static const char* const ix[] = {"i0", "0"};
  uj_io_t mx = uj_reduce(g, UJ_REDUCE_MAX, 1, ax, x);
  uj_io_t mb = uj_reindex(g, mx, 2, sh, 1, &x, 2, ix);
  uj_io_t y = uj_binary(g, UJ_BINARY_SUB, x, mb);
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, 1, &y);
  uj_graph_free(g);
  char* ir = dump_of(p, UJ_FORWARD, UJ_DUMP_IR);
  CHECK(count_blocks(ir) == 2);
  if (harness_failed_checks && ir) fprintf(stderr, "%s\n", ir);
  free(ir);

  HARNESS_SEED(59);
  uint64_t st = 59;
  int64_t dims[2] = {4, 6};
  uj_tensor_t tx = or_tensor(UJ_F64, 2, dims), ty = or_tensor(UJ_F64, 2, dims);
  or_fill_real(&st, &tx, -3, 3);
  double* ref = or_alloc_ref(24);
  for (int r = 0; r < 4; r++) {
    double m = -INFINITY;
    for (int c = 0; c < 6; c++) m = fmax(m, or_get(&tx, r * 6 + c));
    for (int c = 0; c < 6; c++) ref[r * 6 + c] = or_get(&tx, r * 6 + c) - m;
  }
  OR_RUN_CHECK1(p, &tx, &ty, ref, OR_TOL_F64);
  free(ref);
  or_tensor_free(&tx), or_tensor_free(&ty);
  uj_program_free(p);
}

/* z = - -x on a matrix: two blocks whose outer loops hold no statements
 * (no array at all) merge into one; the merge once offset such a loop's
 * NULL statement array by 0, which UBSan (clang) reports. */
TEST(fusion_of_nests_with_empty_outer_loops) {
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("z = - -x", &p) == UJ_OK);
  if (!p) return;
  HARNESS_SEED(61);
  uint64_t st = 61;
  int64_t dims[2] = {3, 5};
  uj_tensor_t tx = or_tensor(UJ_F32, 2, dims), tz = or_tensor(UJ_F32, 2, dims);
  or_fill_real(&st, &tx, -3, 3);
  double* ref = or_alloc_ref(15);
  for (int i = 0; i < 15; i++) ref[i] = or_get(&tx, i);
  OR_RUN_CHECK1(p, &tx, &tz, ref, OR_TOL_F32);
  free(ref);
  or_tensor_free(&tx), or_tensor_free(&tz);
  uj_program_free(p);
}

/* s = sum(x * x) over every axis: the reduction's chain starts with a loop
 * that runs once, and the square nests inside it, so x * x never goes to a
 * temporary of x's size; y = x / sum(x) must not nest the divide inside
 * the sum's loop (it reads the finished sum), and gives the right answer. */
TEST(full_reduction_fuses_with_its_operand) {
  uj_program_t *p = NULL, *q = NULL;
  CHECK(uj_program_parse("s = sum(x * x)", &p) == UJ_OK);
  CHECK(uj_program_parse("y = x / sum(x)", &q) == UJ_OK);
  if (!p || !q) {
    uj_program_free(p), uj_program_free(q);
    return;
  }
  char* ir = dump_of(p, UJ_FORWARD, UJ_DUMP_IR);
  CHECK(count_blocks(ir) == 1);
  CHECK(count_substr(ir, "temp f32 [d0_0]\n") == 0);
  if (harness_failed_checks && ir) fprintf(stderr, "%s\n", ir);
  free(ir);
  ir = dump_of(q, UJ_FORWARD, UJ_DUMP_IR);
  CHECK(count_blocks(ir) == 2);
  if (harness_failed_checks && ir) fprintf(stderr, "%s\n", ir);
  free(ir);
  HARNESS_SEED(67);
  uint64_t st = 67;
  for (int64_t n = 1; n <= 4099; n = n * 4 + 3) {
    uj_tensor_t tx = or_tensor(UJ_F32, 1, &n), ts = or_tensor(UJ_F32, 1, (int64_t[]){1});
    uj_tensor_t ty = or_tensor(UJ_F32, 1, &n);
    or_fill_real(&st, &tx, -2, 2);
    double sum_sq = 0, sum = 0, sum_abs = 0;
    for (int64_t i = 0; i < n; i++) {
      double v = or_get(&tx, i);
      sum_sq += v * v, sum += v, sum_abs += fabs(v);
    }
    double* refy = or_alloc_ref(n);
    for (int64_t i = 0; i < n; i++) refy[i] = or_get(&tx, i) / sum;
    const uj_tensor_t* in[] = {&tx};
    uj_tensor_t* outs[] = {&ts};
    const double* refs[] = {&sum_sq};
    const double* sums[] = {&sum_sq};
    int64_t terms[] = {n};
    OR_RUN_CHECK_SUM(p, in, 1, NULL, 0, outs, refs, sums, terms, 1, OR_TOL_F32);
    /* x / sum(x): each element is off by the sum's error relative to the sum */
    double rel = (or_sum_gamma(n, UJ_F32) * sum_abs) / fabs(sum) + 4 * OR_TOL_F32;
    if (rel < 1e-3) OR_RUN_CHECK1(q, &tx, &ty, refy, rel);
    free(refy);
    or_tensor_free(&tx), or_tensor_free(&ts), or_tensor_free(&ty);
  }
  uj_program_free(p), uj_program_free(q);
}

/* Row-wise layernorm: the centred value x - mean is summed squared and then
 * scaled; the scaling computes it again from x and the row mean instead of
 * reading it back from a temporary of x's size (ir/recompute.c), while the
 * per-row rsqrt, read by every element of its row, stays computed once. */
TEST(layernorm_recomputes_the_centred_value) {
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("x: f32\nw: f32\nb: f32\n_d = x - mean(x, -1); y = _d * rsqrt(mean(_d * _d, -1) + 1e-5) * w + b",
                         &p) == UJ_OK);
  if (!p) return;
  HARNESS_SEED(71);
  uint64_t st = 71;
  int64_t dims[2] = {5, 37};
  uj_tensor_t tx = or_tensor(UJ_F32, 2, dims), tw = or_tensor(UJ_F32, 1, &dims[1]), tb = or_tensor(UJ_F32, 1, &dims[1]);
  uj_tensor_t ty = or_tensor(UJ_F32, 2, dims);
  or_fill_real(&st, &tx, -3, 3), or_fill_real(&st, &tw, -1, 1), or_fill_real(&st, &tb, -1, 1);
  /* the optimized IR of the build for these rank-2 inputs (a dump without
   * inputs shows the rank-1 build, which has no rows to centre) */
  const uj_tensor_t* spec_in[] = {&tx, &tw, &tb};
  pn_special_t* sp = NULL;
  CHECK(pn_specialize(p->parsed, UJ_FORWARD, spec_in, 3, &sp) == UJ_OK);
  const ir_func_t* f = sp ? uop_program_func(sp->program, UJ_FORWARD, 1) : NULL;
  CHECK(f != NULL);
  int full_size_temps = 0, rsqrt_blocks = 0;
  for (int t = 0; f && t < f->ntensors; t++)
    full_size_temps += f->tensors[t].role == IR_TENSOR_TEMP && !f->tensors[t].noalloc && f->tensors[t].ndim == 2 &&
                       !ir_ix_equal(f->tensors[t].dims[1], ir_ix_const((ir_func_t*)f, 1));
  char* ir = sp ? dump_of(sp->program, UJ_FORWARD, UJ_DUMP_IR) : NULL;
  rsqrt_blocks = count_substr(ir, "rsqrt(");
  CHECK(full_size_temps == 0); /* the centred value is computed again, not stored */
  CHECK(rsqrt_blocks == 1);
  if (harness_failed_checks && ir) fprintf(stderr, "%s\n", ir);
  free(ir);
  pn_release(sp);
  double* ref = or_alloc_ref(5 * 37);
  for (int r = 0; r < 5; r++) {
    double mean = 0, var = 0;
    for (int c = 0; c < 37; c++) mean += or_get(&tx, r * 37 + c) / 37;
    for (int c = 0; c < 37; c++) var += (or_get(&tx, r * 37 + c) - mean) * (or_get(&tx, r * 37 + c) - mean) / 37;
    for (int c = 0; c < 37; c++)
      ref[r * 37 + c] = (or_get(&tx, r * 37 + c) - mean) / sqrt(var + 1e-5) * or_get(&tw, c) + or_get(&tb, c);
  }
  const uj_tensor_t* in[] = {&tx, &tw, &tb};
  uj_tensor_t* out[] = {&ty};
  const double* refs[] = {ref};
  OR_RUN_CHECK(p, in, 3, NULL, 0, out, refs, 1, OR_TOL_F32_SUM);
  free(ref);
  or_tensor_free(&tx), or_tensor_free(&tw), or_tensor_free(&tb), or_tensor_free(&ty);
  uj_program_free(p);
}

TEST_MAIN()
