/* tests/parse_check.h: running expression-language sources in tests:
 * parse, bind inputs by name, allocate outputs from the program's own
 * shapes and dtypes, run on an engine configuration of oracle.h, compare.
 * Shared by test_parse.c and test_parse_inplace.c. */
#ifndef UJ_TESTS_PARSE_CHECK_H
#define UJ_TESTS_PARSE_CHECK_H

#include "oracle.h"

/* ---- running a source ------------------------------------------------------------ */

#define PR_MAX_IO 16

/* A parsed program with the outputs of its last run. */
typedef struct {
  uj_program_t* p;
  int nin, nout;
  uj_tensor_t out[PR_MAX_IO];
} pr_t;

static inline void pr_free(pr_t* r) {
  for (int i = 0; i < r->nout; i++) or_tensor_free(&r->out[i]);
  uj_program_free(r->p);
  memset(r, 0, sizeof *r);
}

/* An input by its name in the source. */
typedef struct {
  const char* name;
  const uj_tensor_t* t;
} named_t;

/* Parses src (failing the test on a parse error). */
static inline int pr_parse(pr_t* r, const char* src) {
  memset(r, 0, sizeof *r);
  uj_status_t s = uj_program_parse(src, &r->p);
  if (s != UJ_OK) {
    fprintf(stderr, "  parse of \"%s\": %s: %s\n", src, uj_status_str(s), uj_last_error());
    CHECK(s == UJ_OK);
    return 0;
  }
  r->nin = uj_program_io_count(r->p, 0);
  r->nout = uj_program_io_count(r->p, 1);
  CHECK(r->nin >= 0 && r->nin <= PR_MAX_IO && r->nout >= 1 && r->nout <= PR_MAX_IO);
  return r->nin >= 0 && r->nin <= PR_MAX_IO && r->nout >= 1 && r->nout <= PR_MAX_IO;
}

/* Binds the inputs by name into in[] (every input of the program must be
 * named). */
static inline int pr_bind(const pr_t* r, int nnamed, const named_t* named, const uj_tensor_t** in) {
  for (int i = 0; i < r->nin; i++) {
    const char* name = uj_program_io_name(r->p, 0, i);
    in[i] = NULL;
    for (int k = 0; k < nnamed; k++)
      if (name && !strcmp(name, named[k].name)) in[i] = named[k].t;
    if (!in[i]) {
      fprintf(stderr, "  no tensor for input \"%s\"\n", name ? name : "(null)");
      CHECK(in[i] != NULL);
      return 0;
    }
  }
  return 1;
}

/* Allocates the outputs in their inferred shapes and dtypes, filled with the
 * sentinel. */
static inline uj_status_t pr_alloc_outputs(pr_t* r, const uj_tensor_t** in) {
  for (int i = 0; i < r->nout; i++) or_tensor_free(&r->out[i]);
  for (int i = 0; i < r->nout; i++) {
    int ndim = 0;
    int64_t dims[UJ_MAX_DIMS] = {0};
    uj_dtype_t dt = UJ_F32;
    uj_status_t s = uj_program_shape(r->p, UJ_FORWARD, in, NULL, i, &ndim, dims);
    if (s == UJ_OK) s = uj_program_output_dtype(r->p, UJ_FORWARD, in, i, &dt);
    if (s != UJ_OK) return s;
    r->out[i] = or_tensor(dt, ndim, dims);
    or_fill_sentinel(&r->out[i]);
  }
  return UJ_OK;
}

/* Runs on configuration slot with fresh outputs (staged through the GPU
 * for the cuda one; slot 0 also compiles the program with NVRTC). */
static inline uj_status_t pr_run(pr_t* r, int slot, int nnamed, const named_t* named) {
  const uj_tensor_t* in[PR_MAX_IO];
  if (!pr_bind(r, nnamed, named, in)) return UJ_ERR_INVALID;
  uj_status_t s = pr_alloc_outputs(r, in);
  if (s != UJ_OK) return s;
  uj_tensor_t* out[PR_MAX_IO];
  for (int i = 0; i < r->nout; i++) out[i] = &r->out[i];
  if (!or_ctx(slot)) return UJ_ERR_INVALID;
  return or_program_run(slot, r->p, UJ_FORWARD, in, r->nin, NULL, 0, out, r->nout);
}

/* The output named name, or NULL. */
static inline uj_tensor_t* pr_out(pr_t* r, const char* name) {
  for (int i = 0; i < r->nout; i++) {
    const char* n = uj_program_io_name(r->p, 1, i);
    if (n && !strcmp(n, name)) return &r->out[i];
  }
  return NULL;
}

/* Compares got with ref elementwise; prints the first mismatch. */
static inline int expect_close(const char* src, const char* config, const uj_tensor_t* got, const double* ref, double tol) {
  int64_t bad = or_first_mismatch(ref, got, tol);
  if (bad >= 0) {
    char msg[512];
    snprintf(msg, sizeof msg, "\"%s\" on %s: element %lld is %.17g, expected %.17g (tol %g)", src, config,
             (long long)bad, or_get(got, bad), ref[bad], tol);
    harness_fail(__FILE__, __LINE__, msg);
  }
  return bad < 0;
}

static inline int same_dims(const uj_tensor_t* t, int ndim, const int64_t* dims) {
  if (t->ndim != ndim) return 0;
  for (int k = 0; k < ndim; k++)
    if (t->dims[k] != dims[k]) return 0;
  return 1;
}

static inline double tol_of(uj_dtype_t dt) { return dt == UJ_F64 ? OR_TOL_F64 : OR_TOL_F32; }

/* Whether the program's input (or output) names are exactly these, in order. */
static inline int io_names_are(const uj_program_t* p, int is_output, int count, const char* const* names) {
  if (uj_program_io_count(p, is_output) != count) return 0;
  for (int i = 0; i < count; i++) {
    const char* n = uj_program_io_name(p, is_output, i);
    if (!n || strcmp(n, names[i])) return 0;
  }
  return uj_program_io_name(p, is_output, count) == NULL && uj_program_io_name(p, is_output, -1) == NULL;
}

#endif
