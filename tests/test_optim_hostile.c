/* tests/test_optim_hostile.c: hostile inputs to the optimizer and to the
 * block runner, each refused up front with a status and a message that
 * names the culprit, never run into undefined behaviour (under DEBUG=1,
 * UBSan stops at the first signed overflow, so these tests fail there if a
 * check is missing):
 *   - groups whose tensor structs change between steps under the same
 *     pointers (a half copy's or a gradient's dtype, a state's rank): the
 *     kept bindings (optim/bindings.c) must be made again, and the step
 *     must give what a fresh optimizer gives;
 *   - step counts at the end of int64 (optim/optim.c);
 *   - an updater's [defaults] with a key given twice or a number out of
 *     range (optim/spec.c);
 *   - zero-element tensors whose other sizes multiply past int64
 *     (rt/tensor.c, jit/blocks.c), on every host engine and through an
 *     optimizer step, and ones whose sizes fit but whose empty rows are
 *     many ({2^40, 0, 3}: nothing to write, so nothing runs, jit/run.c). */
#include <unistd.h>

#include "harness.h"
#include "oracle.h"

/* ---- kept bindings: the structs change, the pointers stay -------------------------------- */

enum { HG = 3, HN = 7 };

typedef struct {
  uj_tensor_t p[HG], g[HG], m[HG], v[HG], h[HG];
  uj_tensor_t* st[HG][2];
  uj_optim_group_t groups[HG];
} adam_model_t;

static void adam_model_new(adam_model_t* a, uj_dtype_t half, uint64_t seed) {
  int64_t n = HN;
  uint64_t s = seed;
  for (int i = 0; i < HG; i++) {
    a->p[i] = or_tensor(UJ_F32, 1, &n), a->g[i] = or_tensor(UJ_F32, 1, &n);
    a->m[i] = or_tensor(UJ_F32, 1, &n), a->v[i] = or_tensor(UJ_F32, 1, &n);
    a->h[i] = or_tensor(half, 1, &n);
    or_fill_real(&s, &a->p[i], -1, 1), or_fill_real(&s, &a->g[i], -1, 1);
    a->st[i][0] = &a->m[i], a->st[i][1] = &a->v[i];
    a->groups[i] = (uj_optim_group_t){&a->p[i], &a->g[i], a->st[i], &a->h[i]};
  }
}

static void adam_model_free(adam_model_t* a) {
  for (int i = 0; i < HG; i++)
    or_tensor_free(&a->p[i]), or_tensor_free(&a->g[i]), or_tensor_free(&a->m[i]), or_tensor_free(&a->v[i]),
        or_tensor_free(&a->h[i]);
}

/* Every half copy holds its parameter rounded to the copy's dtype. */
static int halves_match(const adam_model_t* a) {
  for (int i = 0; i < HG; i++)
    for (int64_t k = 0; k < HN; k++)
      if (or_get(&a->h[i], k) != hr_round(a->h[i].dtype, or_get(&a->p[i], k))) return 0;
  return 1;
}

TEST(a_half_copy_that_changes_dtype_is_bound_again) {
  uj_ctx_t* ctx = or_ctx(0);
  uj_optim_t *kept = NULL, *fresh = NULL;
  CHECK(uj_optim_new("adamw", &kept) == UJ_OK && uj_optim_new("adamw", &fresh) == UJ_OK);
  if (!ctx || !kept || !fresh) return;
  adam_model_t a, b;
  adam_model_new(&a, UJ_BF16, 7), adam_model_new(&b, UJ_BF16, 7);
  CHECK(uj_optim_step(ctx, kept, a.groups, HG, NULL) == UJ_OK);
  CHECK(uj_optim_step(ctx, fresh, b.groups, HG, NULL) == UJ_OK);
  CHECK(halves_match(&a));
  /* the same structs, same data (2 bytes an element either way), now f16 */
  for (int i = 0; i < HG; i++) a.h[i].dtype = UJ_F16, b.h[i].dtype = UJ_F16;
  uj_optim_t* again = NULL; /* a new optimizer: binds from nothing */
  CHECK(uj_optim_new("adamw", &again) == UJ_OK);
  CHECK(again && uj_optim_set_step_count(again, 1) == UJ_OK);
  for (int step = 0; step < 3; step++) {
    uj_status_t s = uj_optim_step(ctx, kept, a.groups, HG, NULL);
    CHECK(s == UJ_OK);
    if (s != UJ_OK) printf("  step %d after bf16 -> f16: %s\n", step + 2, uj_last_error());
    CHECK(uj_optim_step(ctx, again, b.groups, HG, NULL) == UJ_OK);
  }
  CHECK(halves_match(&a));
  int same = 1;
  for (int i = 0; i < HG; i++)
    same &= memcmp(a.p[i].data, b.p[i].data, HN * 4) == 0 && memcmp(a.h[i].data, b.h[i].data, HN * 2) == 0;
  CHECK(same);
  /* and back to bf16 */
  for (int i = 0; i < HG; i++) a.h[i].dtype = UJ_BF16;
  CHECK(uj_optim_step(ctx, kept, a.groups, HG, NULL) == UJ_OK);
  CHECK(halves_match(&a));
  adam_model_free(&a), adam_model_free(&b);
  uj_optim_free(kept), uj_optim_free(fresh), uj_optim_free(again);
}

TEST(a_gradient_or_state_that_changes_under_its_pointer_is_bound_again) {
  uj_ctx_t* ctx = or_ctx(0);
  uj_optim_t* opt = NULL;
  CHECK(uj_optim_new("adam", &opt) == UJ_OK);
  if (!ctx || !opt) return;
  adam_model_t a;
  adam_model_new(&a, UJ_BF16, 11);
  for (int i = 0; i < HG; i++) a.groups[i].param_half = NULL;
  CHECK(uj_optim_step(ctx, opt, a.groups, HG, NULL) == UJ_OK);
  /* gradients become bf16 (the same buffers, read as 2-byte elements) */
  for (int i = 0; i < HG; i++) {
    a.g[i].dtype = UJ_BF16;
    for (int64_t k = 0; k < HN; k++) or_set(&a.g[i], k, 0.25);
  }
  uj_status_t s = uj_optim_step(ctx, opt, a.groups, HG, NULL);
  CHECK(s == UJ_OK);
  if (s != UJ_OK) printf("  bf16 gradients: %s\n", uj_last_error());
  /* a parameter and all its tensors reshaped to rank 2 in place (7 = 7 x 1) */
  for (int i = 0; i < HG; i++) {
    uj_tensor_t* t[4] = {&a.p[i], &a.g[i], &a.m[i], &a.v[i]};
    for (int k = 0; k < 4; k++) t[k]->ndim = 2, t[k]->dims[0] = HN, t[k]->dims[1] = 1;
  }
  s = uj_optim_step(ctx, opt, a.groups, HG, NULL);
  CHECK(s == UJ_OK);
  if (s != UJ_OK) printf("  rank 2: %s\n", uj_last_error());
  /* a state alone changes rank: refused, naming it, before any write */
  a.v[1].ndim = 1;
  float before = ((float*)a.p[0].data)[0];
  CHECK(uj_optim_step(ctx, opt, a.groups, HG, NULL) == UJ_ERR_SHAPE);
  CHECK(strstr(uj_last_error(), "group 1: state v") != NULL);
  CHECK(((float*)a.p[0].data)[0] == before && uj_optim_step_count(opt) == 3);
  adam_model_free(&a);
  uj_optim_free(opt);
}

/* ---- step counts at the end of int64 ---------------------------------------------------- */

TEST(a_step_count_at_the_end_of_int64_is_refused) {
  uj_ctx_t* ctx = or_ctx(0);
  uj_optim_t* opt = NULL;
  CHECK(uj_optim_new("sgd", &opt) == UJ_OK);
  if (!ctx || !opt) return;
  int64_t n = 4;
  uj_tensor_t p = or_tensor(UJ_F32, 1, &n), g = or_tensor(UJ_F32, 1, &n);
  for (int64_t k = 0; k < n; k++) or_set(&p, k, 1), or_set(&g, k, 1);
  uj_optim_group_t group = {&p, &g, NULL, NULL};
  /* a count whose next step would be t = INT64_MAX + 1 */
  CHECK(uj_optim_set_step_count(opt, INT64_MAX) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "9223372036854775807") && strstr(uj_last_error(), "overflow"));
  CHECK(uj_optim_step_count(opt) == 0);
  CHECK(uj_optim_set_step_count(opt, INT64_MIN) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "below 0") != NULL);
  /* the last step there is: t = INT64_MAX */
  CHECK(uj_optim_set_step_count(opt, INT64_MAX - 1) == UJ_OK);
  uj_optim_report_t r = {0};
  CHECK(uj_optim_step(ctx, opt, &group, 1, &r) == UJ_OK);
  CHECK(r.t == INT64_MAX && uj_optim_step_count(opt) == INT64_MAX);
  double after = or_get(&p, 0);
  CHECK(after < 1);
  /* and none after it: refused before anything is written */
  uj_status_t s = uj_optim_step(ctx, opt, &group, 1, &r);
  CHECK(s == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "9223372036854775807") && strstr(uj_last_error(), "overflow"));
  CHECK(or_get(&p, 0) == after && uj_optim_step_count(opt) == INT64_MAX && r.t == INT64_MAX);
  /* with no groups as well (the count would still move) */
  CHECK(uj_optim_step(ctx, opt, NULL, 0, NULL) == UJ_ERR_INVALID);
  or_tensor_free(&p), or_tensor_free(&g);
  uj_optim_free(opt);
}

/* ---- [defaults] ----------------------------------------------------------------------- */

TEST(defaults_refuse_a_repeated_key_and_numbers_out_of_range) {
  static const struct {
    const char *text, *message[3];
  } cases[] = {
      {"[defaults]\nlr = 1; lr = 2\n[update]\np = p - lr*g", {"line 2, column 9", "lr", "given twice"}},
      {"[defaults]\nlr = 1\nwd = 0; lr = 3\n[update]\np = p - lr*(g + wd*p)", {"line 3, column 9", "lr", "line 2"}},
      {"[defaults]\nlr = 1e999\n[update]\np = p - lr*g", {"line 2, column 6", "lr", "out of range"}},
      {"[defaults]\nlr = -1e400\n[update]\np = p - lr*g", {"line 2, column 6", "lr", "out of range"}},
      {"[defaults]\n  lr = inf\n[update]\np = p - lr*g", {"line 2: expected name = number", "column 8", "lr's value is not a number"}},
      {"[defaults]\nlr = nan\n[update]\np = p - lr*g", {"line 2: expected name = number", "column 6", "lr's value is not a number"}},
      {"[defaults]\nlr = 0x10\n[update]\np = p - lr*g", {"line 2: expected name = number", "column 6", "lr's value is not a number"}},
      {"[update]\np = p - lr*g\n[defaults]\nlr=1;lr=1", {"line 4, column 6", "lr", "given twice"}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uj_optim_t* opt = NULL;
    uj_status_t s = uj_optim_new_source("hostile", cases[i].text, &opt);
    CHECK(s == UJ_ERR_PARSE && opt == NULL);
    int named = strstr(uj_last_error(), "updater hostile") != NULL;
    for (int k = 0; k < 3; k++) named &= strstr(uj_last_error(), cases[i].message[k]) != NULL;
    CHECK(named);
    if (!named || s != UJ_ERR_PARSE) printf("  case %zu: status %d, \"%s\"\n", i, (int)s, uj_last_error());
    uj_optim_free(opt);
  }
  /* what the expression language takes still reads: signs, exponents,
   * a number that underflows to 0 (as the language's own), comments */
  static const char ok[] =
      "[defaults]\nlr = +2.5e-3; wd = -0.0   # a comment; lr = 9\nb1 = .9; eps = 1e-400\n"
      "[update]\np = p - lr*(g + wd*p) + 0*b1*eps";
  uj_optim_t* opt = NULL;
  uj_status_t s = uj_optim_new_source("fine", ok, &opt);
  CHECK(s == UJ_OK);
  if (s != UJ_OK) printf("  %s\n", uj_last_error());
  double v = 0;
  CHECK(opt && uj_optim_get(opt, "lr", &v) == UJ_OK && v == 2.5e-3);
  CHECK(opt && uj_optim_get(opt, "b1", &v) == UJ_OK && v == 0.9);
  CHECK(opt && uj_optim_get(opt, "eps", &v) == UJ_OK && v == 0);
  uj_optim_free(opt);
}

/* ---- zero-element tensors with sizes past int64 ------------------------------------------- */

static void check_refused(uj_status_t s, const char* where, const char* tensor) {
  CHECK(s == UJ_ERR_SHAPE);
  int named = strstr(uj_last_error(), tensor) && strstr(uj_last_error(), "axis") && strstr(uj_last_error(), "overflow");
  CHECK(named);
  if (s != UJ_ERR_SHAPE || !named) printf("  %s: status %d, \"%s\"\n", where, (int)s, uj_last_error());
}

/* y = x*2 + 1 run in place on a tensor of shape dims (one float of
 * storage: it has no element) on host configuration c; *cell must stay 5. */
static uj_status_t run_empty(int c, uj_program_t* prog, const int64_t dims[3], float* cell) {
  *cell = 5;
  uj_tensor_t x = {cell, UJ_F32, UJ_CPU, 3, {dims[0], dims[1], dims[2]}};
  uj_tensor_t y = x;
  const uj_tensor_t* in[] = {&x};
  uj_tensor_t* out[] = {&y};
  return uj_program_run(or_ctx(c), prog, UJ_FORWARD, in, 1, NULL, 0, out, 1);
}

TEST(a_zero_element_tensor_whose_sizes_overflow_is_refused) {
  uj_program_t* prog = NULL;
  CHECK(uj_program_parse("y = x*2 + 1", &prog) == UJ_OK);
  if (!prog) return;
  static const int64_t overflow[][3] = {
      {0, INT64_MAX, INT64_MAX}, {INT64_MAX, INT64_MAX, 0}, {INT64_MAX / 2, 0, 3}, {0, INT64_C(1) << 62, 2}};
  /* nothing to write: no loop runs over the empty rows ({2^40, 0} would
   * be 2^40 rows of nothing) */
  static const int64_t many_empty_rows[3] = {INT64_C(1) << 40, 0, 3};
  /* what does fit still runs: zeros with sizes whose product fits */
  static const int64_t fits[3] = {0, INT64_C(1) << 30, 1 << 20};
  alarm(120); /* turns a hang over empty rows into a failure */
  /* every host engine: the tensor checks (rt/tensor.c) count sizes with
   * zeros left out, and jit/blocks.c checks its runs the same way */
  for (int c = 0; c < OR_NENGINES; c++) {
    if (or_configs[c].engine == UJ_ENGINE_CUDA) continue; /* host tensors */
    float cell;
    for (size_t k = 0; k < sizeof overflow / sizeof overflow[0]; k++) {
      char where[96];
      snprintf(where, sizeof where, "%s, shape %zu", or_configs[c].name, k);
      check_refused(run_empty(c, prog, overflow[k], &cell), where, "input 0");
      CHECK(cell == 5);
    }
    CHECK(run_empty(c, prog, many_empty_rows, &cell) == UJ_OK && cell == 5);
    uj_status_t s = run_empty(c, prog, fits, &cell);
    CHECK(s == UJ_OK && cell == 5);
    if (s != UJ_OK) printf("  %s: %s\n", or_configs[c].name, uj_last_error());
  }
  alarm(0);
  uj_program_free(prog);
}

TEST(an_optimizer_step_over_such_a_tensor_is_refused) {
  uj_ctx_t* ctx = or_ctx(0);
  uj_optim_t* opt = NULL;
  CHECK(uj_optim_new("adam", &opt) == UJ_OK);
  if (!ctx || !opt) return;
  int64_t n = 4;
  uj_tensor_t p0 = or_tensor(UJ_F32, 1, &n), g0 = or_tensor(UJ_F32, 1, &n), m0 = or_tensor(UJ_F32, 1, &n),
              v0 = or_tensor(UJ_F32, 1, &n);
  for (int64_t k = 0; k < n; k++) or_set(&p0, k, 1), or_set(&g0, k, 1);
  float cell = 0;
  uj_tensor_t big = {&cell, UJ_F32, UJ_CPU, 3, {0, INT64_MAX, INT64_MAX}};
  uj_tensor_t p1 = big, g1 = big, m1 = big, v1 = big;
  uj_tensor_t* st[2][2] = {{&m0, &v0}, {&m1, &v1}};
  uj_optim_group_t groups[2] = {{&p0, &g0, st[0], NULL}, {&p1, &g1, st[1], NULL}};
  uj_status_t s = uj_optim_step(ctx, opt, groups, 2, NULL);
  CHECK(s == UJ_ERR_SHAPE);
  int named = strstr(uj_last_error(), "group 1") && strstr(uj_last_error(), "parameter") &&
              strstr(uj_last_error(), "axis") && strstr(uj_last_error(), "overflow");
  CHECK(named);
  if (s != UJ_ERR_SHAPE || !named) printf("  status %d, \"%s\"\n", (int)s, uj_last_error());
  CHECK(or_get(&p0, 0) == 1 && uj_optim_step_count(opt) == 0);
  or_tensor_free(&p0), or_tensor_free(&g0), or_tensor_free(&m0), or_tensor_free(&v0);
  uj_optim_free(opt);
}

TEST_MAIN()
