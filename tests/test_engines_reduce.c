/* tests/test_engines_reduce.c: reductions on every available CPU engine
 * (C, MIR) against the interpreter: sum over the last axis, over the first
 * axis and over everything, max, min, mean, argmax and argmin, in f32, f64
 * and i32, each as a program of its own (so its blocks are the reduction's
 * alone) and all together in one program (fused), at the 1-D sizes and 2-D
 * shapes of engines_check.h, including those around the thread split: a
 * block whose outermost loop is the reduction itself (a whole-vector sum, a
 * sum over the rows of an Nx1 matrix) must not be split across threads, and
 * one whose outermost loop is not (a sum per row) must give the same answer
 * split or not.
 *
 * Two kinds of data. Dyadic values (multiples of 1/8 in [-8, 8]) make every
 * f32 and f64 partial sum exact whatever the order, so sums, max, min and
 * the arg ops must match the double reference exactly on every engine, and
 * they repeat often (ties: argmax/argmin take the first index). Random reals
 * check that engines agree with the interpreter within the bound that any
 * summation order guarantees, 2 (n - 1) u sum|x|. */
#include "engines_check.h"

typedef enum { RD_LAST, RD_FIRST, RD_ALL } rd_axes_t;

typedef struct {
  uj_reduce_op_t op;
  rd_axes_t axes;
  const char* name;
} rd_kind_t;

static const rd_kind_t kinds[] = {
    {UJ_REDUCE_SUM, RD_LAST, "sum(axis -1)"},       {UJ_REDUCE_SUM, RD_FIRST, "sum(axis 0)"},
    {UJ_REDUCE_SUM, RD_ALL, "sum(all)"},            {UJ_REDUCE_MAX, RD_ALL, "max(all)"},
    {UJ_REDUCE_MAX, RD_FIRST, "max(axis 0)"},       {UJ_REDUCE_MIN, RD_LAST, "min(axis -1)"},
    {UJ_REDUCE_MEAN, RD_LAST, "mean(axis -1)"},     {UJ_REDUCE_ARGMAX, RD_LAST, "argmax(axis -1)"},
    {UJ_REDUCE_ARGMAX, RD_FIRST, "argmax(axis 0)"}, {UJ_REDUCE_ARGMIN, RD_ALL, "argmin(all)"}};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

static int is_arg(uj_reduce_op_t op) { return op == UJ_REDUCE_ARGMAX || op == UJ_REDUCE_ARGMIN; }

/* The reduction of x (rank nd) for kind k, in double: out has x's shape
 * with the reduced axes set to 1; abs_sum (may be NULL) gets sum|x| per
 * output element. */
static void ref_reduce(const rd_kind_t* k, const uj_tensor_t* x, double* out, double* abs_sum, int64_t* count_out) {
  int nd = x->ndim;
  int red[2] = {0, 0};
  if (k->axes == RD_ALL || nd == 1) red[0] = red[1] = 1;
  else if (k->axes == RD_LAST) red[nd - 1] = 1;
  else red[0] = 1;
  int64_t od[2], rdims[2];
  int nr = 0;
  for (int a = 0; a < nd; a++) {
    od[a] = red[a] ? 1 : x->dims[a];
    if (red[a]) rdims[nr++] = x->dims[a];
  }
  int64_t no = or_numel(nd, od), n = or_tnumel(x), count = no ? n / no : 0;
  if (or_numel(nr, rdims) == 0) count = 0;
  double* best = or_alloc_ref(no);
  char* seen = calloc((size_t)(no ? no : 1), 1);
  for (int64_t o = 0; o < no; o++) {
    out[o] = k->op == UJ_REDUCE_MAX ? -INFINITY : k->op == UJ_REDUCE_MIN ? INFINITY : 0;
    if (abs_sum) abs_sum[o] = 0;
  }
  for (int64_t f = 0; f < n; f++) {
    int64_t idx[2], ridx[2];
    or_unravel(f, nd, x->dims, idx);
    int q = 0;
    for (int a = 0; a < nd; a++)
      if (red[a]) ridx[q++] = idx[a], idx[a] = 0;
    int64_t o = or_ravel(nd, od, idx);
    double v = or_get(x, f);
    if (abs_sum) abs_sum[o] += fabs(v);
    switch (k->op) {
      case UJ_REDUCE_SUM:
      case UJ_REDUCE_MEAN: out[o] += v; break;
      case UJ_REDUCE_MAX: out[o] = v > out[o] ? v : out[o]; break;
      case UJ_REDUCE_MIN: out[o] = v < out[o] ? v : out[o]; break;
      default:
        if (!seen[o] || (k->op == UJ_REDUCE_ARGMAX ? v > best[o] : v < best[o])) {
          seen[o] = 1, best[o] = v;
          out[o] = (double)or_ravel(nr, rdims, ridx);
        }
        break;
    }
  }
  /* i32 identities saturate: max of nothing is INT32_MIN, min INT32_MAX */
  if (x->dtype == UJ_I32 && (k->op == UJ_REDUCE_MAX || k->op == UJ_REDUCE_MIN))
    for (int64_t o = 0; o < no; o++) out[o] = isinf(out[o]) ? (out[o] < 0 ? INT32_MIN : INT32_MAX) : out[o];
  if (k->op == UJ_REDUCE_MEAN)
    for (int64_t o = 0; o < no; o++)
      out[o] = x->dtype == UJ_I32 ? (double)or_floordiv((int64_t)out[o], count) : out[o] / (double)count;
  free(best);
  free(seen);
  if (count_out) *count_out = count;
}

static uj_io_t build_reduce(uj_graph_t* g, const rd_kind_t* k, uj_io_t x, int nd) {
  int ax[2] = {0, 1};
  if (nd == 1) return uj_reduce(g, k->op, 1, ax, x);
  if (k->axes == RD_ALL) return uj_reduce(g, k->op, 2, ax, x);
  int a = k->axes == RD_LAST ? -1 : 0;
  return uj_reduce(g, k->op, 1, &a, x);
}

/* A program with the reductions kinds[first .. first+count) of one input. */
static uj_program_t* reduce_program(uj_dtype_t dt, int nd, int first, int count) {
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, nd, dt);
  uj_io_t outs[NKINDS];
  for (int i = 0; i < count; i++) outs[i] = build_reduce(g, &kinds[first + i], x, nd);
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 0, NULL, count, outs);
  uj_graph_free(g);
  return p;
}

static void fill_dyadic(uint64_t* st, uj_tensor_t* t) {
  int64_t n = or_tnumel(t);
  for (int64_t i = 0; i < n; i++) or_set(t, i, (double)harness_int(st, -64, 64) / (t->dtype == UJ_I32 ? 1 : 8));
}

/* Runs program p (kinds[first .. first+count)) on x everywhere. exact: the
 * double reference must be met exactly (dyadic data; f32 mean within one
 * rounding); else engines must agree with the interpreter within the
 * summation bound. */
static void reduce_case(uj_program_t* p, int first, int count, const uj_tensor_t* x, int exact, const char* tag) {
  uj_tensor_t outs[NKINDS];
  uj_tensor_t* outp[NKINDS];
  double* ref[NKINDS];
  double* abs_sum[NKINDS];
  int64_t counts[NKINDS];
  for (int i = 0; i < count; i++) {
    const rd_kind_t* k = &kinds[first + i];
    int nd = 0;
    int64_t dims[UJ_MAX_DIMS];
    const uj_tensor_t* in[] = {x};
    uj_status_t s = uj_program_shape(p, UJ_FORWARD, in, NULL, i, &nd, dims);
    if (s != UJ_OK) nd = 0, dims[0] = 1;
    CHECK(s == UJ_OK);
    outs[i] = or_tensor(is_arg(k->op) ? UJ_I32 : x->dtype, nd, dims);
    outp[i] = &outs[i];
    ref[i] = or_alloc_ref(or_tnumel(&outs[i]));
    abs_sum[i] = or_alloc_ref(or_tnumel(&outs[i]));
    ref_reduce(k, x, ref[i], abs_sum[i], &counts[i]);
  }
  char shp[64];
  or_shape_str(shp, sizeof shp, x);
  const uj_tensor_t* in[] = {x};
  double* want[NKINDS];
  uj_ctx_t* ictx = en_interp();
  int have_want = ictx != NULL;
  char what[192];
  snprintf(what, sizeof what, "%s %s %s x%s", tag, count > 1 ? "(fused)" : kinds[first].name,
           uj_dtype_name(x->dtype), shp);
  if (have_want) have_want = EN_RUN(what, "interp", ictx, p, in, 1, NULL, 0, outp, count);
  for (int i = 0; i < count; i++) want[i] = have_want ? or_to_double(&outs[i]) : NULL;
  for (int e = -1; e < EN_NENGINES; e++) {
    uj_ctx_t* ctx = e < 0 ? ictx : en_ctx(e);
    const char* name = e < 0 ? "interp" : en_engines[e].name;
    if (!ctx || (e >= 0 && !EN_RUN(what, name, ctx, p, in, 1, NULL, 0, outp, count))) continue;
    if (e < 0 && !have_want) continue;
    for (int i = 0; i < count; i++) {
      const rd_kind_t* k = &kinds[first + i];
      snprintf(what, sizeof what, "%s %s %s x%s", tag, k->name, uj_dtype_name(x->dtype), shp);
      int64_t n = or_tnumel(&outs[i]);
      if (exact) {
        /* a mean rounds once (a division, or a multiplication by 1/count) */
        double tol = k->op == UJ_REDUCE_MEAN && x->dtype == UJ_F32 ? 2.5e-7 : 0;
        EN_EXPECT_CLOSE(what, name, &outs[i], ref[i], tol);
      } else if (e >= 0 && want[i]) {
        int sumlike = k->op == UJ_REDUCE_SUM || k->op == UJ_REDUCE_MEAN;
        double u = x->dtype == UJ_F32 ? FLT_EPSILON / 2 : DBL_EPSILON / 2;
        for (int64_t o = 0; o < n; o++) {
          double g = or_get(&outs[i], o), w = want[i][o];
          double bound = sumlike ? 2.0 * (double)(counts[i] > 1 ? counts[i] - 1 : 0) * u * abs_sum[i][o] : 0;
          if (k->op == UJ_REDUCE_MEAN && counts[i]) bound = bound / (double)counts[i] + 4 * u * fabs(w);
          if (g != w && !(fabs(g - w) <= bound) && !(isnan(g) && isnan(w))) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s on %s: element %lld: got %.9g, interpreter %.9g (bound %g)", what, name,
                     (long long)o, g, w, bound);
            harness_fail(__FILE__, __LINE__, msg);
            break;
          }
        }
      }
    }
  }
  for (int i = 0; i < count; i++) or_tensor_free(&outs[i]), free(ref[i]), free(abs_sum[i]), free(want[i]);
}

/* Every kind alone and all of them fused, over the sizes (1-D) or shapes
 * (2-D), dyadic data (exact) and, for the floats, random reals. */
static void reduce_sweep(uj_dtype_t dt, int nd, uint64_t* st) {
  uj_program_t* single[NKINDS];
  for (int k = 0; k < NKINDS; k++) single[k] = reduce_program(dt, nd, k, 1);
  uj_program_t* fused = reduce_program(dt, nd, 0, NKINDS);
  int ncases = nd == 1 ? EN_NSIZES : EN_NSHAPES2;
  for (int c = 0; c < ncases; c++) {
    const int64_t* dims = nd == 1 ? &en_sizes[c] : en_shapes2[c];
    uj_tensor_t x = or_tensor(dt, nd, dims);
    for (int pass = 0; pass < (dt == UJ_I32 ? 1 : 2); pass++) {
      if (pass == 0) fill_dyadic(st, &x);
      else or_fill_real(st, &x, -1.0, 1.0);
      for (int k = 0; k < NKINDS; k++)
        if (single[k]) reduce_case(single[k], k, 1, &x, pass == 0, pass ? "reals" : "dyadic");
      if (fused) reduce_case(fused, 0, NKINDS, &x, pass == 0, pass ? "reals" : "dyadic");
    }
    or_tensor_free(&x);
  }
  for (int k = 0; k < NKINDS; k++) uj_program_free(single[k]);
  uj_program_free(fused);
}

TEST(reduce_1d_sizes) {
  uint64_t seed = en_seed(7101), st = seed;
  HARNESS_SEED(seed);
  SKIP_IF(en_count() == 0, "no JIT engine available");
  reduce_sweep(UJ_F32, 1, &st);
  reduce_sweep(UJ_F64, 1, &st);
  reduce_sweep(UJ_I32, 1, &st);
}

TEST(reduce_2d_shapes) {
  uint64_t seed = en_seed(7102), st = seed;
  HARNESS_SEED(seed);
  SKIP_IF(en_count() == 0, "no JIT engine available");
  reduce_sweep(UJ_F32, 2, &st);
  reduce_sweep(UJ_F64, 2, &st);
  reduce_sweep(UJ_I32, 2, &st);
}

/* Reductions in a chain: softmax over the last axis (max, exp, sum, divide)
 * from the expression language, f64 (libm on every engine) at shapes
 * around the split; engines within 1e-12 of the interpreter. */
TEST(reduce_softmax_chain) {
  uint64_t seed = en_seed(7103), st = seed;
  HARNESS_SEED(seed);
  SKIP_IF(en_count() == 0, "no JIT engine available");
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("x: f64\n_e = exp(x - amax(x, 1)); y = _e / sum(_e, 1)", &p) == UJ_OK);
  if (!p) return;
  for (int c = 0; c < EN_NSHAPES2; c++) {
    uj_tensor_t x = or_tensor(UJ_F64, 2, en_shapes2[c]), y = or_tensor(UJ_F64, 2, en_shapes2[c]);
    or_fill_real(&st, &x, -5, 5);
    char what[96], shp[64];
    or_shape_str(shp, sizeof shp, &x);
    snprintf(what, sizeof what, "softmax f64 x%s", shp);
    const uj_tensor_t* in[] = {&x};
    uj_tensor_t* out[] = {&y};
    if (EN_RUN(what, "interp", en_interp(), p, in, 1, NULL, 0, out, 1)) {
      double* want = or_to_double(&y);
      for (int e = 0; e < EN_NENGINES; e++) {
        uj_ctx_t* ctx = en_ctx(e);
        if (ctx && EN_RUN(what, en_engines[e].name, ctx, p, in, 1, NULL, 0, out, 1))
          EN_EXPECT_CLOSE(what, en_engines[e].name, &y, want, 1e-12);
      }
      free(want);
    }
    or_tensor_free(&x), or_tensor_free(&y);
  }
  uj_program_free(p);
}

EN_TEST_MAIN()
