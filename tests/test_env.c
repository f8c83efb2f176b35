/* tests/test_env.c: the UOPJIT_* variables and the context setters that
 * override them (docs/DESIGN.md section 12).
 *
 * Every variable with a set of accepted values is given one it does not
 * accept: uj_env_check, and the first call on a context that depends on
 * it, must return UJ_ERR_INVALID with a message naming the variable, the
 * value and what is accepted; a call that does not depend on it must still
 * work, and the setting's setter must make the context usable again. The
 * setters are checked for their own invalid values, and for taking effect
 * on a context whose JIT state already exists. Out-of-memory messages must
 * name what was being allocated and how many bytes. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../jit/jit.h"
#include "harness.h"

/* Every UOPJIT_* variable the tests set, cleared before and after each. */
static const char* const variables[] = {
    "UOPJIT_ENGINE",          "UOPJIT_THREADS",      "UOPJIT_MIR_LEVEL", "UOPJIT_CACHE",
    "UOPJIT_CACHE_MEMORY_LIMIT", "UOPJIT_CACHE_DISK_LIMIT", "UOPJIT_DEBUG", "UOPJIT_CONV_ISA",
    "UOPJIT_CONV_BACKEND",    "UOPJIT_CUDA_DEVICE",  "UOPJIT_TIER",
};

static void clear_variables(void) {
  for (size_t i = 0; i < sizeof variables / sizeof variables[0]; i++) unsetenv(variables[i]);
}

/* ---- uj_env_check ------------------------------------------------------------------------- */

TEST(every_invalid_value_is_refused_naming_the_variable_and_the_accepted_values) {
  static const struct {
    const char* var;
    const char* value;
    const char* accepted; /* part of what the message must list */
  } cases[] = {
      {"UOPJIT_ENGINE", "bogus", "auto, interp, mir, c or cuda"},
      {"UOPJIT_ENGINE", "MIR", "auto, interp, mir, c or cuda"},
      {"UOPJIT_THREADS", "abc", "from 1 to 1024"},
      {"UOPJIT_THREADS", "0", "from 1 to 1024"},
      {"UOPJIT_THREADS", "-3", "from 1 to 1024"},
      {"UOPJIT_THREADS", "4x", "from 1 to 1024"},
      {"UOPJIT_THREADS", "100000", "from 1 to 1024"},
      {"UOPJIT_MIR_LEVEL", "4", "0, 1, 2 or 3"},
      {"UOPJIT_MIR_LEVEL", "high", "0, 1, 2 or 3"},
      {"UOPJIT_CACHE", "off", "0 (the disk cache off) or 1"},
      {"UOPJIT_CACHE_MEMORY_LIMIT", "8MB", "K, M or G"},
      {"UOPJIT_CACHE_MEMORY_LIMIT", "99999999999999999999", "K, M or G"},
      {"UOPJIT_CACHE_DISK_LIMIT", "0", "a positive number of bytes"},
      {"UOPJIT_CACHE_DISK_LIMIT", "1.5G", "a positive number of bytes"},
      {"UOPJIT_DEBUG", "pases", "passes and verify"},
      {"UOPJIT_DEBUG", "passes,all", "passes and verify"},
      {"UOPJIT_CONV_ISA", "sse2", "generic"},
      {"UOPJIT_CONV_BACKEND", "fastest", "one of auto, ref, cpu_direct"},
      {"UOPJIT_CUDA_DEVICE", "first", "a device number"},
      {"UOPJIT_CUDA_DEVICE", "-1", "a device number"},
      {"UOPJIT_TIER", "-1", "0 (tiering off) or the calls"},
      {"UOPJIT_TIER", "soon", "0 (tiering off) or the calls"},
      {"UOPJIT_TIER", "1000000001", "up to 1000000000"},
  };
  clear_variables();
  CHECK(uj_env_check() == UJ_OK);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    setenv(cases[i].var, cases[i].value, 1);
    uj_status_t s = uj_env_check();
    char named[128];
    snprintf(named, sizeof named, "%s=\"%s\" is not valid", cases[i].var, cases[i].value);
    int ok = s == UJ_ERR_INVALID && strstr(uj_last_error(), named) && strstr(uj_last_error(), cases[i].accepted);
    if (!ok) printf("  %s=%s: %s: %s\n", cases[i].var, cases[i].value, uj_status_str(s), uj_last_error());
    CHECK(ok);
    unsetenv(cases[i].var);
  }
  CHECK(uj_env_check() == UJ_OK);
}

TEST(valid_and_empty_values_are_accepted) {
  static const struct {
    const char* var;
    const char* value;
  } cases[] = {
      {"UOPJIT_ENGINE", "interp"},           {"UOPJIT_ENGINE", ""},          {"UOPJIT_THREADS", "1"},
      {"UOPJIT_THREADS", "1024"},            {"UOPJIT_MIR_LEVEL", "0"},      {"UOPJIT_CACHE", "0"},
      {"UOPJIT_CACHE", "1"},                 {"UOPJIT_CACHE_MEMORY_LIMIT", "0"},
      {"UOPJIT_CACHE_MEMORY_LIMIT", "64k"},  {"UOPJIT_CACHE_DISK_LIMIT", "2G"},
      {"UOPJIT_DEBUG", "passes,verify"},     {"UOPJIT_DEBUG", "verify"},     {"UOPJIT_CONV_ISA", "generic"},
      {"UOPJIT_CONV_BACKEND", "auto"},       {"UOPJIT_CONV_BACKEND", "ref"}, {"UOPJIT_CUDA_DEVICE", "3"},
      {"UOPJIT_TIER", "0"},                  {"UOPJIT_TIER", "1000000000"},  {"UOPJIT_TIER", ""},
  };
  clear_variables();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    setenv(cases[i].var, cases[i].value, 1);
    uj_status_t s = uj_env_check();
    if (s != UJ_OK) printf("  %s=%s: %s\n", cases[i].var, cases[i].value, uj_last_error());
    CHECK(s == UJ_OK);
    unsetenv(cases[i].var);
  }
}

/* ---- contexts: the first call that depends on a setting ------------------------------------ */

enum { N = 64 };

typedef struct {
  uj_program_t* p;
  float x[N], y[N];
  uj_tensor_t tx, ty;
} doubling_t;

static void doubling_make(doubling_t* d) {
  memset(d, 0, sizeof *d);
  CHECK(uj_program_parse("y = x * 2", &d->p) == UJ_OK);
  for (int i = 0; i < N; i++) d->x[i] = (float)i;
  d->tx = (uj_tensor_t){d->x, UJ_F32, UJ_CPU, 1, {N}};
  d->ty = (uj_tensor_t){d->y, UJ_F32, UJ_CPU, 1, {N}};
}

/* Runs y = x * 2; UJ_OK only when y is right too. */
static uj_status_t doubling_run(doubling_t* d, uj_ctx_t* ctx) {
  const uj_tensor_t* in[] = {&d->tx};
  uj_tensor_t* out[] = {&d->ty};
  memset(d->y, 0, sizeof d->y);
  uj_status_t s = uj_program_run(ctx, d->p, UJ_FORWARD, in, 1, NULL, 0, out, 1);
  for (int i = 0; s == UJ_OK && i < N; i++)
    if (d->y[i] != 2.0f * (float)i) return UJ_ERR_INVALID;
  return s;
}

/* A context made with var=value, then var unset again (a context reads
 * the environment once, when it is made). */
static uj_ctx_t* ctx_with(const char* var, const char* value) {
  clear_variables();
  setenv(var, value, 1);
  uj_ctx_t* ctx = uj_ctx_new();
  unsetenv(var);
  CHECK(ctx != NULL); /* an invalid value does not stop the context from being made */
  return ctx;
}

static int refused(uj_status_t s, const char* var) {
  int ok = s == UJ_ERR_INVALID && strstr(uj_last_error(), var) && strstr(uj_last_error(), "expected");
  if (!ok) printf("  expected %s to be refused, got %s: %s\n", var, uj_status_str(s), uj_last_error());
  return ok;
}

/* A JIT engine of this build: MIR, else C, else none (UJ_ENGINE_INTERP). */
static uj_engine_t jit_engine(uj_ctx_t* ctx) {
  if (uj_engine_available(ctx, UJ_ENGINE_MIR)) return UJ_ENGINE_MIR;
  if (uj_engine_available(ctx, UJ_ENGINE_C)) return UJ_ENGINE_C;
  return UJ_ENGINE_INTERP;
}

TEST(a_bad_engine_fails_the_first_run_until_set) {
  doubling_t d;
  doubling_make(&d);
  uj_ctx_t* ctx = ctx_with("UOPJIT_ENGINE", "bogus");
  if (!ctx || !d.p) return;
  CHECK(refused(doubling_run(&d, ctx), "UOPJIT_ENGINE=\"bogus\""));
  CHECK(refused(doubling_run(&d, ctx), "UOPJIT_ENGINE")); /* every call, not only the first */
  CHECK(uj_ctx_set_engine(ctx, UJ_ENGINE_INTERP) == UJ_OK);
  CHECK(doubling_run(&d, ctx) == UJ_OK);
  uj_ctx_free(ctx);
  uj_program_free(d.p);
}

TEST(a_bad_thread_count_fails_the_jit_engines_only_until_set) {
  doubling_t d;
  doubling_make(&d);
  uj_ctx_t* ctx = ctx_with("UOPJIT_THREADS", "abc");
  if (!ctx || !d.p) return;
  uj_engine_t e = jit_engine(ctx);
  SKIP_IF(e == UJ_ENGINE_INTERP, "no JIT engine in this build");
  CHECK(uj_ctx_set_engine(ctx, UJ_ENGINE_INTERP) == UJ_OK);
  CHECK(doubling_run(&d, ctx) == UJ_OK); /* the interpreter runs on the calling thread */
  CHECK(uj_ctx_set_engine(ctx, e) == UJ_OK);
  CHECK(refused(doubling_run(&d, ctx), "UOPJIT_THREADS=\"abc\""));
  CHECK(uj_ctx_set_threads(ctx, 3) == UJ_OK);
  CHECK(doubling_run(&d, ctx) == UJ_OK);
  jit_state_t* js = jit_state(ctx);
  CHECK(js && rt_pool_size(js->pool) == 3);
  /* a later setting replaces the pool of the existing state */
  CHECK(uj_ctx_set_threads(ctx, 2) == UJ_OK);
  CHECK(js && rt_pool_size(js->pool) == 2);
  CHECK(doubling_run(&d, ctx) == UJ_OK);
  uj_ctx_free(ctx);
  uj_program_free(d.p);
}

TEST(the_environment_is_the_default_of_each_setting) {
  clear_variables();
  setenv("UOPJIT_THREADS", "3", 1);
  setenv("UOPJIT_MIR_LEVEL", "1", 1);
  setenv("UOPJIT_CACHE_MEMORY_LIMIT", "5M", 1);
  setenv("UOPJIT_TIER", "4", 1);
  uj_ctx_t* ctx = uj_ctx_new();
  clear_variables();
  if (!ctx) return;
  CHECK(ctx->set.threads == 3 && ctx->set.mir_level == 1 && ctx->set.memory_cache_limit == 5 << 20);
  CHECK(ctx->set.tier_calls == 4);
  jit_state_t* js = jit_state(ctx);
  CHECK(js && rt_pool_size(js->pool) == 3);
  jit_cache_counts_t k;
  if (js) jit_cache_counts(js->cache, &k);
  CHECK(js && k.memory_limit == 5 << 20);
  /* setters win over it */
  CHECK(uj_ctx_set_threads(ctx, 1) == UJ_OK && js && rt_pool_size(js->pool) == 1);
  CHECK(uj_ctx_set_mir_level(ctx, 3) == UJ_OK && ctx->set.mir_level == 3);
  CHECK(uj_ctx_set_tier(ctx, 0) == UJ_OK && ctx->set.tier_calls == 0);
  uj_ctx_free(ctx);
}

TEST(a_bad_mir_level_fails_mir_runs_until_set_and_the_level_keys_kernels) {
  doubling_t d;
  doubling_make(&d);
  uj_ctx_t* ctx = ctx_with("UOPJIT_MIR_LEVEL", "9");
  if (!ctx || !d.p) return;
  SKIP_IF(!uj_engine_available(ctx, UJ_ENGINE_MIR), "no MIR in this build");
  CHECK(uj_ctx_set_engine(ctx, UJ_ENGINE_MIR) == UJ_OK);
  CHECK(refused(doubling_run(&d, ctx), "UOPJIT_MIR_LEVEL=\"9\""));
  CHECK(uj_ctx_set_mir_level(ctx, 0) == UJ_OK);
  CHECK(doubling_run(&d, ctx) == UJ_OK);
  jit_state_t* js = jit_state(ctx);
  jit_cache_counts_t before, after;
  if (js) jit_cache_counts(js->cache, &before);
  CHECK(uj_ctx_set_mir_level(ctx, 2) == UJ_OK);
  CHECK(doubling_run(&d, ctx) == UJ_OK); /* another level: another kernel */
  if (js) jit_cache_counts(js->cache, &after);
  CHECK(js && after.memory_entries == before.memory_entries + 1);
  uj_ctx_free(ctx);
  uj_program_free(d.p);
}

TEST(bad_cache_settings_fail_the_c_engine_until_set) {
  doubling_t d;
  doubling_make(&d);
  static const struct {
    const char *var, *value;
  } cases[] = {{"UOPJIT_CACHE", "no"}, {"UOPJIT_CACHE_MEMORY_LIMIT", "lots"}, {"UOPJIT_CACHE_DISK_LIMIT", "-1"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0] && d.p; i++) {
    uj_ctx_t* ctx = ctx_with(cases[i].var, cases[i].value);
    if (!ctx) continue;
    if (!uj_engine_available(ctx, UJ_ENGINE_C)) {
      uj_ctx_free(ctx);
      SKIP_IF(1, "no C compiler");
    }
    CHECK(uj_ctx_set_engine(ctx, UJ_ENGINE_C) == UJ_OK);
    CHECK(refused(doubling_run(&d, ctx), cases[i].var));
    uj_status_t fixed = i == 0 ? uj_ctx_set_cache_dir(ctx, NULL)
                        : i == 1 ? uj_ctx_set_memory_cache_limit(ctx, 1 << 20)
                                 : uj_ctx_set_disk_cache_limit(ctx, 1 << 20);
    CHECK(fixed == UJ_OK);
    CHECK(doubling_run(&d, ctx) == UJ_OK);
    uj_ctx_free(ctx);
  }
  uj_program_free(d.p);
}

TEST(the_cache_directory_setter) {
  clear_variables();
  CHECK(uj_ctx_set_cache_dir(NULL, "/tmp") == UJ_ERR_INVALID);
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx) return;
  CHECK(uj_ctx_set_cache_dir(ctx, "") == UJ_ERR_INVALID && strstr(uj_last_error(), "path is empty"));
  char* long_path = malloc(5000);
  if (long_path) {
    memset(long_path, 'a', 4999);
    long_path[4999] = '\0';
    CHECK(uj_ctx_set_cache_dir(ctx, long_path) == UJ_ERR_INVALID && strstr(uj_last_error(), "4999 characters"));
    free(long_path);
  }
  char dir[] = "/tmp/uopjit-test-env-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char sub[sizeof dir + 8];
  snprintf(sub, sizeof sub, "%s/cache", dir);
  /* before the JIT state exists, and then on the existing one */
  CHECK(uj_ctx_set_cache_dir(ctx, sub) == UJ_OK);
  jit_state_t* js = jit_state(ctx);
  const char* used = js ? jit_disk_dir(js->cache) : NULL;
  CHECK(used && strcmp(used, sub) == 0); /* made on first use */
  CHECK(uj_ctx_set_cache_dir(ctx, NULL) == UJ_OK);
  CHECK(js && jit_disk_dir(js->cache) == NULL);
  CHECK(uj_ctx_set_cache_dir(ctx, dir) == UJ_OK);
  used = js ? jit_disk_dir(js->cache) : NULL;
  CHECK(used && strcmp(used, dir) == 0);
  uj_ctx_free(ctx);
  rmdir(sub);
  rmdir(dir);
}

TEST(setters_refuse_bad_values_naming_the_parameter) {
  CHECK(uj_ctx_set_threads(NULL, 1) == UJ_ERR_INVALID);
  CHECK(uj_ctx_set_mir_level(NULL, 1) == UJ_ERR_INVALID);
  clear_variables();
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx) return;
  CHECK(uj_ctx_set_threads(ctx, -1) == UJ_ERR_INVALID && strstr(uj_last_error(), "uj_ctx_set_threads: threads is -1"));
  CHECK(uj_ctx_set_threads(ctx, 1025) == UJ_ERR_INVALID && strstr(uj_last_error(), "1 to 1024"));
  CHECK(ctx->set.threads == 0);
  CHECK(uj_ctx_set_threads(ctx, 0) == UJ_OK); /* one per online core */
  CHECK(uj_ctx_set_mir_level(ctx, 4) == UJ_ERR_INVALID && strstr(uj_last_error(), "uj_ctx_set_mir_level: level is 4"));
  CHECK(uj_ctx_set_mir_level(ctx, -1) == UJ_ERR_INVALID);
  CHECK(ctx->set.mir_level == 2);
  uj_ctx_free(ctx);
}

TEST(a_bad_debug_word_fails_the_pass_pipeline) {
  doubling_t d;
  doubling_make(&d);
  clear_variables();
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx || !d.p) return;
  CHECK(uj_ctx_set_engine(ctx, UJ_ENGINE_INTERP) == UJ_OK);
  setenv("UOPJIT_DEBUG", "verfiy", 1);
  CHECK(refused(doubling_run(&d, ctx), "UOPJIT_DEBUG=\"verfiy\""));
  setenv("UOPJIT_DEBUG", "verify", 1);
  CHECK(doubling_run(&d, ctx) == UJ_OK);
  unsetenv("UOPJIT_DEBUG");
  uj_ctx_free(ctx);
  uj_program_free(d.p);
}

TEST(a_bad_conv_isa_fails_convolutions) {
  clear_variables();
  setenv("UOPJIT_CONV_ISA", "avx9000", 1); /* read at the context's first convolution */
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx) return;
  float xv[1 * 4 * 4 * 2] = {0}, wv[2 * 3 * 3 * 2] = {0}, yv[1 * 4 * 4 * 2];
  uj_tensor_t x = {xv, UJ_F32, UJ_CPU, 4, {1, 4, 4, 2}};
  uj_tensor_t w = {wv, UJ_F32, UJ_CPU, 4, {2, 3, 3, 2}};
  uj_tensor_t y = {yv, UJ_F32, UJ_CPU, 4, {1, 4, 4, 2}};
  uj_conv2d_desc_t desc = {.stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1};
  CHECK(refused(uj_conv2d(ctx, &desc, &x, &w, NULL, &y, "cpu_direct"), "UOPJIT_CONV_ISA=\"avx9000\""));
  unsetenv("UOPJIT_CONV_ISA");
  uj_ctx_free(ctx);
  /* a bad thread count fails them too: they run on the context's threads */
  ctx = ctx_with("UOPJIT_THREADS", "many");
  if (!ctx) return;
  CHECK(refused(uj_conv2d(ctx, &desc, &x, &w, NULL, &y, "cpu_direct"), "UOPJIT_THREADS"));
  CHECK(uj_ctx_set_threads(ctx, 2) == UJ_OK);
  CHECK(uj_conv2d(ctx, &desc, &x, &w, NULL, &y, "cpu_direct") == UJ_OK);
  uj_ctx_free(ctx);
}

TEST(a_compiler_that_does_not_run_is_named) {
  clear_variables();
  setenv("UOPJIT_CC", "/nonexistent/uopjit-cc", 1); /* read at each compiler probe */
  uj_ctx_t* ctx = uj_ctx_new();
  if (ctx) {
    CHECK(uj_ctx_set_engine(ctx, UJ_ENGINE_C) == UJ_ERR_UNSUPPORTED);
    CHECK(strstr(uj_last_error(), "UOPJIT_CC=\"/nonexistent/uopjit-cc\" is not a working C compiler") != NULL);
  }
  unsetenv("UOPJIT_CC");
  uj_ctx_free(ctx);
}

/* ---- out of memory ----------------------------------------------------------------------------- */

#if HARNESS_ASAN
/* AddressSanitizer stops the process on an allocation it cannot serve
 * unless told to fail it as the C library does, which is what is tested. */
const char* __asan_default_options(void);
const char* __asan_default_options(void) { return "allocator_may_return_null=1"; }
#endif

TEST(out_of_memory_names_the_bytes) {
  clear_variables();
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx) return;
  /* 2^46 f32 elements: 256 TiB, more than any machine running this test
   * can map, yet a size the checks accept */
  int64_t dims[2] = {INT64_C(1) << 23, INT64_C(1) << 23};
  uj_tensor_t t;
  uj_status_t s = uj_tensor_alloc(ctx, UJ_CPU, UJ_F32, 2, dims, &t);
  if (s == UJ_OK) uj_tensor_free(ctx, &t);
  CHECK(s == UJ_ERR_OOM);
  CHECK(strstr(uj_last_error(), "281474976710656 bytes") != NULL);
  uj_ctx_free(ctx);
}

TEST_MAIN()
