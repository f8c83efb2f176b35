/* tests/fuzz/fuzz_expr.c: a libFuzzer target that attacks the expression
 * language (lang/parse.c, lang/build.c) and everything a parsed
 * program reaches on tiny inputs: the uop builders, the loop IR emitter, the
 * pass pipeline, the interpreter and the writers of C, CUDA and MIR source.
 *
 * The fuzzer's bytes are the program's source, as given (NUL-terminated;
 * inputs over MAX_SOURCE bytes are skipped: the 1 MiB limit has its own
 * test in tests/test_parse_errors.c). A source that parses is run twice on
 * the interpreter:
 *
 *   1. every input an f32 tensor of shape [2, 3];
 *   2. a signature picked from a hash of the source: per input a rank 0..3,
 *      sizes 1..3 (so size-1 axes broadcast), a dtype f32, f64 or i32
 *      (a `x: f64` hint wins), values from a table with zeros of both signs,
 *      infinities, NaN, subnormals and the f32 and i32 range edges.
 *
 * A build that succeeds also prints its loop IR (raw and optimized) and its
 * C, CUDA and (when the build has MIR) MIR source, without compiling them.
 *
 * What counts as a defect (the target aborts, and libFuzzer keeps the
 * input): a memory error or undefined behaviour (ASan, UBSan), a leak, a
 * hang past libFuzzer's -timeout, and broken contracts: a failing call
 * without a message, a parse failure that is not UJ_ERR_PARSE or that
 * writes *out, a run on the interpreter failing with a status that only
 * engines or devices give, an output whose shape differs between
 * uj_program_shape and what the run accepted, or a dump missing after a
 * successful run. Refusals (UJ_ERR_SHAPE for operands that do not
 * broadcast, UJ_ERR_INVALID for a dtype an op refuses, UJ_ERR_UNSUPPORTED
 * for a program too large) are answers, not defects. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../include/uopjit.h"

#define FUZZ_TARGET "fuzz_expr"
#include "fuzz_common.h"

#define MAX_SOURCE 8192
#define MAX_IO 32
#define MAX_ELEMENTS 4096 /* outputs larger than this (from hostile shapes) are not run */

/* FNV-1a over the source: the second signature's choices. */
static uint64_t hash_bytes(const uint8_t* data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 1099511628211ull;
  return h;
}
static uint64_t next_choice(uint64_t* h) {
  *h = *h * 6364136223846793005ull + 1442695040888963407ull;
  return *h >> 33;
}

static const double special_values[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.0, 1e-45, -1e-40, 1.17549435e-38,
                                        3.4028235e38, -3.4028235e38, 1e300, 1e-300, 2147483647.0, -2147483648.0,
                                        88.7, -103.0, 1.0 / 0.0, -1.0 / 0.0, 0.0 / 0.0};
#define NSPECIAL (sizeof special_values / sizeof special_values[0])

static void fill(uj_tensor_t* t, uint64_t* h) {
  int64_t n = 1;
  for (int k = 0; k < t->ndim; k++) n *= t->dims[k];
  for (int64_t i = 0; i < n; i++) {
    double v = special_values[next_choice(h) % NSPECIAL];
    switch (t->dtype) {
      case UJ_F32: ((float*)t->data)[i] = (float)v; break;
      case UJ_F64: ((double*)t->data)[i] = v; break;
      default: ((int32_t*)t->data)[i] = v != v ? 0 : v >= 2147483647.0 ? INT32_MAX
                                         : v <= -2147483648.0 ? INT32_MIN : (int32_t)v;
    }
  }
}

/* Runs p on the interpreter with tensors of the given signature. */
static void run_signature(uj_ctx_t* ctx, uj_program_t* p, int nin, int nout, const int* ndim,
                          const int64_t (*dims)[UJ_MAX_DIMS], const uj_dtype_t* dtype, uint64_t* h) {
  uj_tensor_t in[MAX_IO], out[MAX_IO];
  const uj_tensor_t* inp[MAX_IO];
  uj_tensor_t* outp[MAX_IO];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  for (int i = 0; i < nin; i++) {
    in[i].dtype = dtype[i];
    in[i].device = UJ_CPU;
    in[i].ndim = ndim[i];
    for (int k = 0; k < ndim[i]; k++) in[i].dims[k] = dims[i][k];
    in[i].data = calloc(27, 8); /* at most 3*3*3 elements of 8 bytes */
    fill(&in[i], h);
    inp[i] = &in[i];
  }
  int runnable = 1;
  for (int o = 0; o < nout && runnable; o++) {
    int r = -1;
    int64_t shape[UJ_MAX_DIMS];
    uj_dtype_t dt;
    uj_status_t s = uj_program_shape(p, UJ_FORWARD, inp, NULL, o, &r, shape);
    expect_message(s, "uj_program_shape");
    if (s == UJ_OK) {
      s = uj_program_output_dtype(p, UJ_FORWARD, inp, o, &dt);
      expect_message(s, "uj_program_output_dtype");
      if (s != UJ_OK) defect("uj_program_output_dtype", "failed after uj_program_shape succeeded");
    }
    if (s != UJ_OK) {
      if (s == UJ_ERR_COMPILE || s == UJ_ERR_DEVICE || s == UJ_ERR_IO) defect("uj_program_shape", uj_last_error());
      runnable = 0;
      break;
    }
    if (r < 0 || r > UJ_MAX_DIMS) defect("uj_program_shape", "rank out of range");
    int64_t n = 1;
    for (int k = 0; k < r; k++) {
      if (shape[k] < 0) defect("uj_program_shape", "negative size");
      n = shape[k] > MAX_ELEMENTS ? MAX_ELEMENTS + 1 : n * shape[k];
      if (n > MAX_ELEMENTS) n = MAX_ELEMENTS + 1;
    }
    if (n > MAX_ELEMENTS) runnable = 0;
    out[o].dtype = dt;
    out[o].device = UJ_CPU;
    out[o].ndim = r;
    memcpy(out[o].dims, shape, sizeof shape[0] * (size_t)r);
    out[o].data = calloc((size_t)(n > 0 ? n : 1), 8);
    outp[o] = &out[o];
  }
  if (runnable) {
    uj_status_t s = uj_program_run(ctx, p, UJ_FORWARD, inp, nin, NULL, 0, outp, nout);
    expect_message(s, "uj_program_run");
    /* the interpreter compiles nothing and touches no device or file */
    if (s == UJ_ERR_COMPILE || s == UJ_ERR_DEVICE || s == UJ_ERR_IO || s == UJ_ERR_PARSE)
      defect("uj_program_run on the interpreter", uj_last_error());
    if (s == UJ_OK) {
      static const uj_dump_t dumps[] = {UJ_DUMP_IR_RAW, UJ_DUMP_IR, UJ_DUMP_C, UJ_DUMP_C_AOT, UJ_DUMP_CUDA,
                                        UJ_DUMP_MIR};
      for (size_t d = 0; d < sizeof dumps / sizeof dumps[0]; d++) {
        char* text = uj_program_dump(ctx, p, UJ_FORWARD, dumps[d], NULL);
        /* MIR's dump needs MIR in the build; CUDA's needs CUDA in the build */
        if (!text && dumps[d] != UJ_DUMP_MIR && dumps[d] != UJ_DUMP_CUDA) defect("uj_program_dump", uj_last_error());
        free(text);
      }
    }
  }
  for (int i = 0; i < nin; i++) free(in[i].data);
  for (int o = 0; o < nout; o++) free(out[o].data);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > MAX_SOURCE) return 0;
  char* src = malloc(size + 1);
  if (!src) return 0;
  memcpy(src, data, size);
  src[size] = '\0';

  uj_program_t* sentinel = (uj_program_t*)&sentinel;
  uj_program_t* p = sentinel;
  uj_status_t s = uj_program_parse(src, &p);
  free(src);
  expect_message(s, "uj_program_parse");
  if (s != UJ_OK) {
    if (p != sentinel) defect("uj_program_parse", "wrote *out on failure");
    if (s != UJ_ERR_PARSE && s != UJ_ERR_OOM) defect("uj_program_parse: not UJ_ERR_PARSE", uj_last_error());
    return 0;
  }
  if (p == sentinel || !p) defect("uj_program_parse", "succeeded without a program");
  int nin = uj_program_io_count(p, 0), nout = uj_program_io_count(p, 1);
  if (nin < 0 || nout < 1) defect("uj_program_io_count", "no outputs after a successful parse");
  for (int i = 0; i < nin; i++)
    if (!uj_program_io_name(p, 0, i)) defect("uj_program_io_name", "an input without a name");
  for (int o = 0; o < nout; o++)
    if (!uj_program_io_name(p, 1, o)) defect("uj_program_io_name", "an output without a name");

  if (nin <= MAX_IO && nout <= MAX_IO) {
    uj_ctx_t* ctx = interp_ctx();
    int ndim[MAX_IO];
    int64_t dims[MAX_IO][UJ_MAX_DIMS];
    uj_dtype_t dtype[MAX_IO];
    uint64_t h = hash_bytes(data, size);
    /* 1: every input [2, 3] f32 (or its hint) */
    for (int i = 0; i < nin; i++) {
      ndim[i] = 2, dims[i][0] = 2, dims[i][1] = 3;
      if (!uj_program_input_dtype(p, i, &dtype[i])) dtype[i] = UJ_F32;
    }
    run_signature(ctx, p, nin, nout, ndim, (const int64_t (*)[UJ_MAX_DIMS])dims, dtype, &h);
    /* 2: ranks, sizes and dtypes from the hash */
    static const uj_dtype_t dtypes[] = {UJ_F32, UJ_F64, UJ_I32, UJ_F32};
    for (int i = 0; i < nin; i++) {
      ndim[i] = (int)(next_choice(&h) % 4);
      for (int k = 0; k < ndim[i]; k++) dims[i][k] = 1 + (int64_t)(next_choice(&h) % 3);
      if (!uj_program_input_dtype(p, i, &dtype[i])) dtype[i] = dtypes[next_choice(&h) % 4];
    }
    run_signature(ctx, p, nin, nout, ndim, (const int64_t (*)[UJ_MAX_DIMS])dims, dtype, &h);
  }
  uj_program_free(p);
  return 0;
}
