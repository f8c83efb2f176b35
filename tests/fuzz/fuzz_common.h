/* tests/fuzz/fuzz_common.h: what the fuzz targets share: how a broken
 * contract stops the run (an abort, which libFuzzer reports and saves the
 * input of, like a sanitizer's report), the rule that every failing call
 * leaves a message, and one interpreter context for the process.
 * FUZZ_TARGET names the target in the reports. */
#ifndef UJ_FUZZ_COMMON_H
#define UJ_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include "../../include/uopjit.h"

static void defect(const char* what, const char* detail) {
  fprintf(stderr, "%s: %s: %s\n", FUZZ_TARGET, what, detail);
  abort();
}

/* Every failing call must leave a message. */
static void expect_message(uj_status_t s, const char* call) {
  if (s != UJ_OK && uj_last_error()[0] == '\0') defect(call, "failed without a message");
}

/* The process's interpreter context, made on first use. */
static uj_ctx_t* interp_ctx(void) {
  static uj_ctx_t* ctx;
  if (!ctx) {
    ctx = uj_ctx_new();
    if (!ctx || uj_ctx_set_engine(ctx, UJ_ENGINE_INTERP) != UJ_OK) defect("uj_ctx_new", "no interpreter context");
  }
  return ctx;
}

#endif
