/* tests/test_parse_grad.c: the backward pass of parsed programs.
 *
 * A parsed program's UJ_BACKWARD takes its inputs, then the gradient of
 * each output, and gives the gradient of each input. Each case parses a
 * source, fills f64 inputs of the given shapes (0-d ones broadcast, row
 * vectors broadcast along the rows), draws an upstream gradient gy_k in
 * [-1, 1] per output and checks, on every configuration of oracle.h,
 *
 *   analytic  UJ_BACKWARD, with the gradients' shapes and dtypes from
 *             uj_program_shape and uj_program_output_dtype of that pass;
 *   numeric   dL/dx_e = (L(x + h e) - L(x - h e)) / (2h) with
 *             L = sum_k sum(gy_k * y_k), y from UJ_FORWARD on the
 *             interpreter, h = 1e-6 * max(1, |x_e|), the divisor taken as
 *             the difference of the two perturbed values actually stored;
 *
 * per element |a - n| <= 1e-6 * max(1, |n|). An i32 input's gradient is
 * exactly 0. The errors of the pass name what is wrong: the count of
 * inputs, a gradient of the wrong size, a bf16 value, a program with no
 * inputs. Seeds are fixed and printed on failure. */
#include "parse_check.h"

#define PG_MAX 6
#define PG_TOL 1e-6

typedef struct {
  const char* name;
  uj_dtype_t dtype;
  int ndim;
  int64_t dims[2];
  double lo, hi;
} pg_input_t;

/* L = sum_k sum(gy_k * y_k) for the inputs in[] on the interpreter; NAN
 * when the forward run fails. */
static double pg_loss(pr_t* r, const uj_tensor_t** in, const uj_tensor_t* gy) {
  if (pr_alloc_outputs(r, in) != UJ_OK) return NAN;
  uj_tensor_t* outs[PR_MAX_IO];
  for (int k = 0; k < r->nout; k++) outs[k] = &r->out[k];
  if (or_program_run(0, r->p, UJ_FORWARD, in, r->nin, NULL, 0, outs, r->nout) != UJ_OK) return NAN;
  double L = 0;
  for (int k = 0; k < r->nout; k++)
    for (int64_t e = 0; e < or_tnumel(&r->out[k]); e++) L += or_get(&gy[k], e) * or_get(&r->out[k], e);
  return L;
}

/* The gradient of input i as uj_program_shape and uj_program_output_dtype
 * of the backward pass give it, filled with the sentinel. */
static int pg_grad_tensor(pr_t* r, const uj_tensor_t* const* bin, int i, uj_tensor_t* out) {
  int ndim = -1;
  int64_t dims[UJ_MAX_DIMS] = {0};
  uj_dtype_t dt = UJ_F32;
  uj_status_t s = uj_program_shape(r->p, UJ_BACKWARD, bin, NULL, i, &ndim, dims);
  if (s == UJ_OK) s = uj_program_output_dtype(r->p, UJ_BACKWARD, bin, i, &dt);
  if (s != UJ_OK) {
    fprintf(stderr, "  gradient %d: %s\n", i, uj_last_error());
    CHECK(s == UJ_OK);
    return 0;
  }
  *out = or_tensor(dt, ndim, dims);
  or_fill_sentinel(out);
  return 1;
}

static void pg_check(const char* src, int nin, const pg_input_t* spec, uint64_t seed) {
  uint64_t st = seed;
  pr_t r;
  if (!pr_parse(&r, src)) return;
  CHECK(r.nin == nin);
  if (r.nin != nin) {
    pr_free(&r);
    return;
  }
  /* x[i] and spec[i] in the program's order of inputs */
  pg_input_t order[PG_MAX];
  uj_tensor_t x[PG_MAX], gy[PR_MAX_IO], grad[PG_MAX];
  const uj_tensor_t* in[PG_MAX + PR_MAX_IO];
  for (int i = 0; i < nin; i++) {
    const char* name = uj_program_io_name(r.p, 0, i);
    int k = 0;
    while (k < nin && strcmp(spec[k].name, name)) k++;
    CHECK(k < nin);
    order[i] = spec[k < nin ? k : 0];
  }
  spec = order;
  for (int i = 0; i < nin; i++) {
    x[i] = or_tensor(spec[i].dtype, spec[i].ndim, spec[i].dims);
    if (spec[i].dtype == UJ_I32) or_fill_int(&st, &x[i], (int64_t)spec[i].lo, (int64_t)spec[i].hi);
    else or_fill_real(&st, &x[i], spec[i].lo, spec[i].hi);
    in[i] = &x[i];
  }
  if (pr_alloc_outputs(&r, in) != UJ_OK) {
    CHECK(!"the outputs have shapes");
    goto done;
  }
  for (int k = 0; k < r.nout; k++) {
    gy[k] = or_tensor(r.out[k].dtype, r.out[k].ndim, r.out[k].dims);
    or_fill_real(&st, &gy[k], -1, 1);
    in[nin + k] = &gy[k];
  }
  CHECK(uj_program_io_count(r.p, 0) + uj_program_io_count(r.p, 1) == nin + r.nout);
  /* numeric, per element of each float input */
  double* numeric[PG_MAX] = {0};
  for (int i = 0; i < nin; i++) {
    int64_t n = or_tnumel(&x[i]);
    numeric[i] = or_alloc_ref(n);
    for (int64_t e = 0; e < n && spec[i].dtype != UJ_I32; e++) {
      double v = or_get(&x[i], e), h = 1e-6 * (fabs(v) > 1 ? fabs(v) : 1);
      or_set(&x[i], e, v + h);
      double up = or_get(&x[i], e), Lp = pg_loss(&r, in, gy);
      or_set(&x[i], e, v - h);
      double down = or_get(&x[i], e), Lm = pg_loss(&r, in, gy);
      or_set(&x[i], e, v);
      numeric[i][e] = (Lp - Lm) / (up - down);
    }
  }
  for (int slot = 0; slot < OR_NENGINES; slot++) {
    int ok = 1;
    for (int i = 0; i < nin && ok; i++) ok = pg_grad_tensor(&r, in, i, &grad[i]);
    if (!ok) break;
    uj_tensor_t* outs[PG_MAX];
    for (int i = 0; i < nin; i++) outs[i] = &grad[i];
    uj_status_t s = or_program_run(slot, r.p, UJ_BACKWARD, in, nin + r.nout, NULL, 0, outs, nin);
    if (s != UJ_OK) fprintf(stderr, "  %s on %s: %s\n", src, or_configs[slot].name, uj_last_error());
    CHECK(s == UJ_OK);
    for (int i = 0; i < nin && s == UJ_OK; i++) {
      CHECK(grad[i].ndim == x[i].ndim && grad[i].dtype == x[i].dtype);
      for (int64_t e = 0; e < or_tnumel(&x[i]); e++) {
        double a = or_get(&grad[i], e), n = numeric[i][e];
        int good = spec[i].dtype == UJ_I32 ? a == 0 : fabs(a - n) <= PG_TOL * (fabs(n) > 1 ? fabs(n) : 1);
        if (!good) {
          fprintf(stderr, "  %s on %s: d/d%s[%lld] analytic %.12g, numeric %.12g\n", src, or_configs[slot].name,
                  spec[i].name, (long long)e, a, n);
          CHECK(good);
          break;
        }
      }
    }
    for (int i = 0; i < nin; i++) or_tensor_free(&grad[i]);
  }
  for (int i = 0; i < nin; i++) free(numeric[i]);
  for (int k = 0; k < r.nout; k++) or_tensor_free(&gy[k]);
done:
  for (int i = 0; i < nin; i++) or_tensor_free(&x[i]);
  pr_free(&r);
}

#define F64(n, lo, hi) {n, UJ_F64, 0, {0, 0}, lo, hi}
#define F64_1(n, a, lo, hi) {n, UJ_F64, 1, {a, 0}, lo, hi}
#define F64_2(n, a, b, lo, hi) {n, UJ_F64, 2, {a, b}, lo, hi}

TEST(parsed_backward_elementwise_and_broadcast) {
  HARNESS_SEED(3101);
  const pg_input_t in[] = {F64_2("x", 3, 4, -1.5, 1.5), F64_1("w", 4, -2, 2)};
  pg_check("y = x*x*sin(w) + exp(-x)/(1 + w*w)", 2, in, 3101);
  const pg_input_t sig[] = {F64_2("x", 2, 5, -3, 3), F64("a", 0.5, 2), F64("b", -1, 1)};
  pg_check("y = 1/(1 + exp(-(a*x + b)))", 3, sig, 3102);
  const pg_input_t pw[] = {F64_1("x", 7, 0.5, 2), F64_1("w", 7, -2, 2)};
  pg_check("y = pow(x, w) + sqrt(x)*tanh(w) + log(x)*abs(w) + rsqrt(x)", 2, pw, 3103);
}

TEST(parsed_backward_reductions) {
  HARNESS_SEED(3104);
  const pg_input_t two[] = {F64_2("x", 3, 5, -2, 2), F64_1("w", 5, -1, 1)};
  pg_check("y = sum(x*w, 1); z = tanh(x) - y", 2, two, 3104);
  const pg_input_t soft[] = {F64_2("x", 4, 6, -3, 3)};
  pg_check("m = amax(x, 1); e = exp(x - m); y = e/sum(e, 1)", 1, soft, 3105);
  const pg_input_t norm[] = {F64_2("x", 3, 8, -2, 2), F64_1("g", 8, 0.5, 1.5)};
  pg_check("_mu = mean(x, 1); _d = x - _mu; _v = mean(_d*_d, 1); y = g*_d*rsqrt(_v + 0.00001)", 2, norm, 3106);
  const pg_input_t all[] = {F64_2("x", 3, 4, -1, 1)};
  pg_check("s = sum(x*x); q = mean(x)", 1, all, 3107);
}

/* Away from the kinks: where's condition and relu's corner are not crossed
 * by the perturbation. */
TEST(parsed_backward_where_and_kinks) {
  HARNESS_SEED(3108);
  const pg_input_t in[] = {F64_1("x", 9, 0.1, 2), F64_1("z", 9, -2, -0.1)};
  pg_check("y = where(x > 1, x*x, 0.1*x) + relu(z) + relu(x) + max(x, z) + min(x*z, z)", 2, in, 3108);
}

/* One node for two outputs, an output that is its input, and an update in
 * place: every output's gradient counts. */
TEST(parsed_backward_shared_outputs_and_in_place) {
  HARNESS_SEED(3109);
  const pg_input_t one[] = {F64_1("x", 5, -1, 1)};
  pg_check("a = x*2; b = a", 1, one, 3109);
  pg_check("y = x; z = x*3", 1, one, 3110);
  const pg_input_t upd[] = {F64_1("p", 6, -1, 1), F64("lr", 0.01, 0.1), F64_1("g", 6, -1, 1)};
  pg_check("p = p - lr*g*p", 3, upd, 3111);
}

/* An i32 input carries no gradient: exactly 0. A dtype hint casts. */
TEST(parsed_backward_integer_and_hinted_inputs) {
  HARNESS_SEED(3112);
  const pg_input_t in[] = {F64_1("x", 6, -2, 2), {"k", UJ_I32, 1, {6, 0}, -3, 3}};
  pg_check("y = x * k", 2, in, 3112);
  const pg_input_t hinted[] = {F64_1("x", 4, -2, 2), F64_1("w", 4, -2, 2)};
  pg_check("w: f64; y = x*w + x", 2, hinted, 3113);
}

static int message_has(const char* what) {
  int ok = strstr(uj_last_error(), what) != NULL;
  if (!ok) fprintf(stderr, "  expected \"%s\" in: %s\n", what, uj_last_error());
  return ok;
}

TEST(parsed_backward_errors) {
  int64_t n4 = 4, n3 = 3;
  uj_tensor_t x = or_tensor(UJ_F64, 1, &n4), gy = or_tensor(UJ_F64, 1, &n3), gx = or_tensor(UJ_F64, 1, &n4);
  uj_ctx_t* ctx = or_ctx(0);
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("y = x*x", &p) == UJ_OK);
  const uj_tensor_t* in[2] = {&x, &gy};
  uj_tensor_t* out[1] = {&gx};
  /* the inputs without the gradients */
  CHECK(uj_program_run(ctx, p, UJ_BACKWARD, in, 1, NULL, 0, out, 1) == UJ_ERR_INVALID);
  CHECK(message_has("backward pass takes 2 inputs (its inputs, then the gradient of each output), got 1"));
  /* a gradient of another size than its output */
  CHECK(uj_program_run(ctx, p, UJ_BACKWARD, in, 2, NULL, 0, out, 1) == UJ_ERR_SHAPE);
  CHECK(message_has("ingrad 1"));
  CHECK(or_get(&gx, 0) == 0); /* nothing written */
  uj_program_free(p);
  /* bf16 values have no backward pass */
  p = NULL;
  CHECK(uj_program_parse("y: bf16; y = x*2", &p) == UJ_OK);
  uj_tensor_t gy4 = or_tensor(UJ_BF16, 1, &n4);
  in[1] = &gy4;
  CHECK(uj_program_run(ctx, p, UJ_BACKWARD, in, 2, NULL, 0, out, 1) == UJ_ERR_UNSUPPORTED);
  CHECK(message_has("bf16"));
  uj_program_free(p);
  /* nothing to differentiate */
  p = NULL;
  CHECK(uj_program_parse("y = 2", &p) == UJ_OK);
  uj_tensor_t y0 = or_tensor(UJ_F64, 0, NULL);
  const uj_tensor_t* only[1] = {&y0};
  CHECK(uj_program_run(ctx, p, UJ_BACKWARD, only, 1, NULL, 0, out, 0) == UJ_ERR_INVALID);
  CHECK(message_has("no inputs"));
  uj_program_free(p);
  or_tensor_free(&x), or_tensor_free(&gy), or_tensor_free(&gx), or_tensor_free(&gy4), or_tensor_free(&y0);
}

/* The backward pass dumps, and both passes of one program live side by
 * side in its cache of builds. */
TEST(parsed_backward_dump_and_both_passes) {
  uj_ctx_t* ctx = or_ctx(0);
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("y = exp(x)*w", &p) == UJ_OK);
  char* ir = uj_program_dump(ctx, p, UJ_BACKWARD, UJ_DUMP_IR, NULL);
  CHECK(ir != NULL);
  if (ir) CHECK(strstr(ir, "exp") != NULL);
  free(ir);
  int64_t n = 5;
  uj_tensor_t x = or_tensor(UJ_F64, 1, &n), w = or_tensor(UJ_F64, 1, &n), y = or_tensor(UJ_F64, 1, &n);
  uj_tensor_t gy = or_tensor(UJ_F64, 1, &n), gx = or_tensor(UJ_F64, 1, &n), gw = or_tensor(UJ_F64, 1, &n);
  for (int i = 0; i < n; i++) or_set(&x, i, 0.1 * i), or_set(&w, i, 1 + i), or_set(&gy, i, 1);
  const uj_tensor_t* fin[2] = {&x, &w};
  const uj_tensor_t* bin[3] = {&x, &w, &gy};
  uj_tensor_t* fout[1] = {&y};
  uj_tensor_t* bout[2] = {&gx, &gw};
  for (int round = 0; round < 2; round++) {
    CHECK(uj_program_run(ctx, p, UJ_FORWARD, fin, 2, NULL, 0, fout, 1) == UJ_OK);
    CHECK(uj_program_run(ctx, p, UJ_BACKWARD, bin, 3, NULL, 0, bout, 2) == UJ_OK);
  }
  for (int i = 0; i < n; i++) {
    CHECK_NEAR(or_get(&y, i), exp(0.1 * i) * (1 + i), 1e-12);
    CHECK_NEAR(or_get(&gx, i), exp(0.1 * i) * (1 + i), 1e-12);
    CHECK_NEAR(or_get(&gw, i), exp(0.1 * i), 1e-12);
  }
  uj_tensor_t* all[] = {&x, &w, &y, &gy, &gx, &gw};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) or_tensor_free(all[i]);
  uj_program_free(p);
}

TEST_MAIN()
