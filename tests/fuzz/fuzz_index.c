/* tests/fuzz/fuzz_index.c: a libFuzzer target that attacks the parser of
 * index expressions (ir/index.c) and what a parsed one reaches: the
 * reindex builder (uops/reindex.c), binding of $params, size inference
 * and its overflow checks (ir/eval.c), bounds proofs, the passes and the
 * interpreter's index arithmetic, and the C, CUDA and MIR writers.
 *
 * The fuzzer's bytes are one index expression (NUL-terminated; the parser's
 * own limit of IR_IX_MAX_LENGTH bytes is exercised by inputs up to twice
 * that). It is
 *
 *   1. parsed directly with ir_ix_parse, with and without room for
 *      [=] assertions: success must give a tree and 0..IR_IX_MAX_ASSERTIONS
 *      assertions; failure UJ_ERR_PARSE (or UJ_ERR_OOM) with a message that
 *      gives the column, the caller's count untouched;
 *   2. used as the index of a reindex of a rank-2 input x [3, 4] (output
 *      shape that of x, second index i1) and as the first size of a
 *      reindex's output shape (index i0, i1), each declaring the $params the
 *      expression names, and run on the interpreter with param values from
 *      a table of edge cases (0, +-1, +-2^31, +-2^62, INT64_MAX, INT64_MIN)
 *      picked by a hash of the input; outputs of more than MAX_ELEMENTS
 *      elements are not run. The program's C, CUDA and MIR source is then
 *      printed (not compiled) with the params folded in.
 *
 * Defects (the target aborts): memory errors, undefined behaviour (ASan,
 * UBSan: signed overflow in index arithmetic included), leaks, hangs, and
 * broken contracts as above; refusals with a message (a loop index in a
 * size, a size that overflows, an assertion that fails) are answers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../include/uopjit.h"

#define FUZZ_TARGET "fuzz_index"
#include "fuzz_common.h"
#include "../../ir/ir.h"

#define MAX_TEXT (2 * IR_IX_MAX_LENGTH)
#define MAX_ELEMENTS 4096
#define MAX_PARAMS 8

/* Collects the distinct $param names of a tree ("$" in front, as the
 * program description wants them). */
static void collect_params(const ir_ix_t* ix, char names[MAX_PARAMS][72], int* n, int* too_many) {
  if (!ix) return;
  if (ix->kind == IR_IX_PARAM) {
    for (int i = 0; i < *n; i++)
      if (!strcmp(names[i] + 1, ix->name)) return;
    if (*n == MAX_PARAMS || strlen(ix->name) > 64) {
      *too_many = 1;
      return;
    }
    snprintf(names[*n], sizeof names[*n], "$%s", ix->name);
    (*n)++;
    return;
  }
  collect_params(ix->a, names, n, too_many);
  collect_params(ix->b, names, n, too_many);
}

static const int64_t param_values[] = {0, 1, -1, 2, 3, -7, INT64_C(1) << 31, -(INT64_C(1) << 31),
                                       INT64_C(1) << 62, -(INT64_C(1) << 62), INT64_MAX, INT64_MIN};
#define NVALUES (sizeof param_values / sizeof param_values[0])

/* x holds k - 5.5 for k in 0..11; a reindex reads one of those, or 0 out of range. */
static int is_element_of_x_or_zero(float v) {
  if (v == 0.0f) return 1;
  for (int k = 0; k < 12; k++)
    if (v == (float)k - 5.5f) return 1;
  return 0;
}

/* Builds out = reindex(x) with the text as index (as_shape 0) or as the
 * first size (as_shape 1), and runs it on the interpreter. */
static void run_reindex(const char* text, int as_shape, char names[MAX_PARAMS][72], int nparams, uint64_t h) {
  uj_graph_t* g = uj_graph_new();
  if (!g) return;
  uj_io_t x = uj_input(g, 2, UJ_F32);
  const char* shape_idx[2] = {"dA0", "dA1"};
  const char* shape_size[2] = {text, "dA1"};
  const char* index_idx[2] = {text, "i1"};
  const char* index_plain[2] = {"i0", "i1"};
  uj_io_t y = uj_reindex(g, x, 2, as_shape ? shape_size : shape_idx, 1, &x, 2, as_shape ? index_plain : index_idx);
  if (y < 0) {
    expect_message(UJ_ERR_PARSE, "uj_reindex");
    uj_graph_free(g);
    return;
  }
  const char* params[MAX_PARAMS];
  for (int i = 0; i < nparams; i++) params[i] = names[i];
  uj_program_desc_t desc = {.input_count = 1, .inputs = &x, .param_count = nparams, .params = params,
                            .output_count = 1, .outputs = &y};
  uj_program_t* p = NULL;
  uj_status_t s = uj_program_new(g, &desc, &p);
  uj_graph_free(g);
  expect_message(s, "uj_program_new");
  if (s != UJ_OK) return;

  int64_t values[MAX_PARAMS];
  for (int i = 0; i < nparams; i++, h >>= 4) values[i] = param_values[(h & 15) % NVALUES];
  float xv[12];
  for (int i = 0; i < 12; i++) xv[i] = (float)i - 5.5f;
  uj_tensor_t tx = {xv, UJ_F32, UJ_CPU, 2, {3, 4}};
  const uj_tensor_t* in[] = {&tx};
  int r = 0;
  int64_t dims[UJ_MAX_DIMS];
  uj_ctx_t* ctx = interp_ctx();
  s = uj_program_shape(p, UJ_FORWARD, in, values, 0, &r, dims);
  expect_message(s, "uj_program_shape");
  if (s == UJ_OK) {
    if (r != 2 || dims[0] < 0 || dims[1] != 4) defect("uj_program_shape", "not the shape the reindex gives");
    if (dims[0] <= MAX_ELEMENTS / 4) {
      float* yv = calloc((size_t)(dims[0] * 4 + 1), sizeof *yv);
      uj_tensor_t ty = {yv, UJ_F32, UJ_CPU, 2, {dims[0], 4}};
      uj_tensor_t* out[] = {&ty};
      s = uj_program_run(ctx, p, UJ_FORWARD, in, 1, values, nparams, out, 1);
      expect_message(s, "uj_program_run");
      if (s != UJ_OK && s != UJ_ERR_SHAPE && s != UJ_ERR_OOM) defect("uj_program_run on the interpreter", uj_last_error());
      for (int64_t i = 0; s == UJ_OK && i < dims[0] * 4; i++)
        if (!is_element_of_x_or_zero(yv[i])) defect("uj_program_run", "an output that is neither an element of x nor 0");
      free(yv);
      static const uj_dump_t dumps[] = {UJ_DUMP_IR, UJ_DUMP_C, UJ_DUMP_C_AOT, UJ_DUMP_CUDA, UJ_DUMP_MIR};
      for (size_t d = 0; s == UJ_OK && d < sizeof dumps / sizeof dumps[0]; d++) {
        char* dump = uj_program_dump(ctx, p, UJ_FORWARD, dumps[d], dumps[d] == UJ_DUMP_C_AOT ? NULL : values);
        if (!dump && dumps[d] != UJ_DUMP_MIR && dumps[d] != UJ_DUMP_CUDA) defect("uj_program_dump", uj_last_error());
        free(dump);
      }
    }
  }
  uj_program_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > MAX_TEXT) return 0;
  char* text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 1099511628211ull;

  rt_arena_t arena;
  rt_arena_init(&arena);
  ir_ix_t* ix = NULL;
  ir_ix_assertion_t asserts[IR_IX_MAX_ASSERTIONS];
  int nasserts = 0; /* in and out: the count already in asserts[] */
  uj_status_t s = ir_ix_parse(&arena, text, &ix, NULL, NULL);
  expect_message(s, "ir_ix_parse without assertions");
  uj_status_t s2 = ir_ix_parse(&arena, text, &ix, asserts, &nasserts);
  expect_message(s2, "ir_ix_parse");
  if (s2 == UJ_OK) {
    if (!ix) defect("ir_ix_parse", "succeeded without a tree");
    if (nasserts < 0 || nasserts > IR_IX_MAX_ASSERTIONS) defect("ir_ix_parse", "assertion count out of range");
  } else {
    if (s2 != UJ_ERR_PARSE && s2 != UJ_ERR_OOM) defect("ir_ix_parse: not UJ_ERR_PARSE", uj_last_error());
    if (nasserts != 0) defect("ir_ix_parse", "wrote the assertion count on failure");
    if (s2 == UJ_ERR_PARSE && !strstr(uj_last_error(), "column")) defect("ir_ix_parse: no column", uj_last_error());
  }
  /* with nowhere to put assertions, only texts with assertions may newly fail */
  if (s2 != UJ_OK && s == UJ_OK) defect("ir_ix_parse", "fails with room for assertions, succeeds without");

  if (s2 == UJ_OK) {
    char names[MAX_PARAMS][72];
    int nparams = 0, too_many = 0;
    collect_params(ix, names, &nparams, &too_many);
    if (!too_many) {
      run_reindex(text, 0, names, nparams, h);
      run_reindex(text, 1, names, nparams, h >> 32);
    }
  }
  rt_arena_release(&arena);
  free(text);
  return 0;
}
