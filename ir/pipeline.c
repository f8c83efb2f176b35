/* ir/pipeline.c: the pass pipeline, in order (the table below; DESIGN
 * section 6 says what each pass does and why it sits where it does).
 *
 * It runs on a copy, so that the raw IR stays printable (UJ_DUMP_IR_RAW)
 * beside the optimized one (UJ_DUMP_IR). Every run verifies its result
 * once; UOPJIT_DEBUG can print and verify after every pass (ir_pipeline). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct {
  const char* name;
  uj_status_t (*run)(ir_func_t* f);
} pass_entry_t;

static const pass_entry_t pipeline[] = {
    {"bounds", ir_pass_bounds}, {"dce", ir_pass_dce},     {"scalars", ir_pass_scalars},
    {"dce", ir_pass_dce},       {"fuse", ir_pass_fuse},
    {"subst", ir_pass_subst},   {"into_output", ir_pass_into_output},
    {"recompute", ir_pass_recompute}, {"dce", ir_pass_dce},
    {"powers", ir_pass_powers}, {"cse", ir_pass_cse},      {"chain_local", ir_pass_chain_local},
};

uj_status_t ir_debug_from_env(unsigned* flags) {
  static const char* const words[] = {"passes", "verify"};
  return rt_env_words("UOPJIT_DEBUG", words, 2, "a list of passes and verify, separated by commas", flags);
}

static uj_status_t verify_after(ir_func_t* f, const char* pass) {
  if (ir_verify(f) == UJ_OK) return UJ_OK;
  rt_error_prefix("internal error after pass %s: ", pass);
  return UJ_ERR_INVALID;
}

/* PIPELINE_MAX_BLOCKS and PIPELINE_MAX_TENSORS: ir.h says why.
 * UOPJIT_DEBUG is a comma-separated list (any other word there is an
 * error): "passes" prints the IR after each pass to stderr; "verify", like
 * debug builds (UJ_VERIFY_PASSES, set by `make debug`), verifies after
 * every pass, which names the pass that broke the IR but costs as much as
 * the passes themselves on the compile path, so builds verify only once. */
uj_status_t ir_pipeline(const ir_func_t* raw, ir_func_t** out) {
  if (raw->nblocks > PIPELINE_MAX_BLOCKS || raw->ntensors > PIPELINE_MAX_TENSORS)
    return rt_error(UJ_ERR_UNSUPPORTED,
                    "the program has %d operations over %d tensors once lowered; programs of at most %d operations "
                    "and %d tensors are compiled",
                    raw->nblocks, raw->ntensors, PIPELINE_MAX_BLOCKS, PIPELINE_MAX_TENSORS);
  unsigned flags;
  uj_status_t env = ir_debug_from_env(&flags);
  if (env != UJ_OK) return env;
  ir_func_t* f = ir_func_clone(raw);
  if (!f)
    return rt_error(UJ_ERR_OOM, "pass pipeline: out of memory copying the IR (%d operations over %d tensors)",
                    raw->nblocks, raw->ntensors);
  int debug = (flags & IR_DEBUG_PASSES) != 0;
#ifdef UJ_VERIFY_PASSES
  int verify_each = 1;
#else
  int verify_each = (flags & IR_DEBUG_VERIFY) != 0;
#endif
  size_t npasses = sizeof pipeline / sizeof *pipeline;
  for (size_t i = 0; i < npasses; i++) {
    uj_status_t s = pipeline[i].run(f);
    if (s == UJ_OK && (verify_each || i + 1 == npasses)) s = verify_after(f, pipeline[i].name);
    if (s != UJ_OK) {
      ir_func_free(f);
      return s;
    }
    if (debug) {
      char* text = ir_print(f, NULL, 0);
      fprintf(stderr, "== after %s ==\n%s", pipeline[i].name, text ? text : "(out of memory)\n");
      free(text);
    }
  }
  *out = f;
  return UJ_OK;
}
