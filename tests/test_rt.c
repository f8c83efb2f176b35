/* tests/test_rt.c: the runtime layer: error messages and statuses, the arena
 * and text buffer, size arithmetic and the checks on caller tensors. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../rt/rt.h"
#include "harness.h"

/* ---- errors ---------------------------------------------------------------------- */

TEST(error_message_and_status) {
  rt_error_clear();
  CHECK(strcmp(uj_last_error(), "") == 0);
  uj_status_t s = rt_error(UJ_ERR_SHAPE, "input %d: axis %d has size %d, expected %d", 1, 2, 5, 7);
  CHECK(s == UJ_ERR_SHAPE);
  CHECK(strcmp(uj_last_error(), "input 1: axis 2 has size 5, expected 7") == 0);
  rt_error_clear();
  CHECK(strcmp(uj_last_error(), "") == 0);
}

TEST(error_prefix) {
  rt_error(UJ_ERR_PARSE, "at column %d: expected an operand", 6);
  rt_error_prefix("index expression \"%s\" ", "i0 + ");
  CHECK(strcmp(uj_last_error(), "index expression \"i0 + \" at column 6: expected an operand") == 0);
  /* A prefix on an empty message is just the prefix. */
  rt_error_clear();
  rt_error_prefix("input %d: ", 3);
  CHECK(strcmp(uj_last_error(), "input 3: ") == 0);
}

TEST(error_wraps_itself) {
  /* Passing the current message as an argument must work (no overlap). */
  rt_error(UJ_ERR_IO, "cannot open %s", "/nonexistent");
  rt_error(UJ_ERR_IO, "cache: %s", uj_last_error());
  CHECK(strcmp(uj_last_error(), "cache: cannot open /nonexistent") == 0);
}

TEST(error_truncates) {
  char long_text[5000];
  memset(long_text, 'x', sizeof long_text - 1);
  long_text[sizeof long_text - 1] = '\0';
  rt_error(UJ_ERR_INVALID, "%s", long_text);
  size_t n = strlen(uj_last_error());
  CHECK(n > 0 && n < 5000);
  /* A prefix on a full buffer keeps the prefix and stays terminated. */
  rt_error_prefix("outer: ");
  CHECK(strncmp(uj_last_error(), "outer: xxx", 10) == 0);
  CHECK(strlen(uj_last_error()) == n);
  /* A prefix longer than the buffer is itself truncated. */
  rt_error_prefix("%s", long_text);
  CHECK(strlen(uj_last_error()) == n);
  CHECK(uj_last_error()[0] == 'x');
  rt_error_clear();
}

TEST(status_names) {
  CHECK(strcmp(uj_status_str(UJ_OK), "UJ_OK") == 0);
  CHECK(strcmp(uj_status_str(UJ_ERR_INVALID), "UJ_ERR_INVALID") == 0);
  CHECK(strcmp(uj_status_str(UJ_ERR_PARSE), "UJ_ERR_PARSE") == 0);
  CHECK(strcmp(uj_status_str(UJ_ERR_SHAPE), "UJ_ERR_SHAPE") == 0);
  CHECK(strcmp(uj_status_str(UJ_ERR_UNSUPPORTED), "UJ_ERR_UNSUPPORTED") == 0);
  CHECK(strcmp(uj_status_str(UJ_ERR_OOM), "UJ_ERR_OOM") == 0);
  CHECK(strcmp(uj_status_str(UJ_ERR_COMPILE), "UJ_ERR_COMPILE") == 0);
  CHECK(strcmp(uj_status_str(UJ_ERR_DEVICE), "UJ_ERR_DEVICE") == 0);
  CHECK(strcmp(uj_status_str(UJ_ERR_IO), "UJ_ERR_IO") == 0);
  CHECK(strcmp(uj_status_str((uj_status_t)99), "UJ_ERR_UNKNOWN") == 0);
  CHECK(strcmp(uj_status_str((uj_status_t)-1), "UJ_ERR_UNKNOWN") == 0);
}

/* uj_version() is the header's three numbers joined with dots, built from
 * the numbers themselves here so that the test does not restate the macro. */
TEST(version_string) {
  char expected[64];
  snprintf(expected, sizeof expected, "%d.%d.%d", UJ_VERSION_MAJOR, UJ_VERSION_MINOR,
           UJ_VERSION_PATCH);
  CHECK(strcmp(uj_version(), expected) == 0);
  CHECK(strcmp(UJ_VERSION, expected) == 0);
}

TEST(dtype_names_and_sizes) {
  CHECK(uj_dtype_size(UJ_F32) == 4);
  CHECK(uj_dtype_size(UJ_F64) == 8);
  CHECK(uj_dtype_size(UJ_I32) == 4);
  CHECK(uj_dtype_size((uj_dtype_t)42) == 0);
  CHECK(strcmp(uj_dtype_name(UJ_F32), "f32") == 0);
  CHECK(strcmp(uj_dtype_name(UJ_F64), "f64") == 0);
  CHECK(strcmp(uj_dtype_name(UJ_I32), "i32") == 0);
  CHECK(strcmp(uj_dtype_name((uj_dtype_t)42), "?") == 0);
}

/* ---- arena -------------------------------------------------------------------------- */

static int all_zero(const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

TEST(arena_alloc_aligned_zeroed) {
  rt_arena_t a;
  rt_arena_init(&a);
  unsigned char* prev = NULL;
  for (int i = 0; i < 2000; i++) {
    size_t n = (size_t)(i % 37) + 1;
    unsigned char* p = rt_arena_alloc(&a, n);
    CHECK(p != NULL);
    if (!p) break;
    CHECK(((uintptr_t)p % 16) == 0);
    CHECK(all_zero(p, n));
    CHECK(p != prev);
    memset(p, 0xab, n); /* must not disturb other allocations */
    prev = p;
  }
  /* A zero-byte request still returns a usable distinct pointer. */
  void* z1 = rt_arena_alloc(&a, 0);
  void* z2 = rt_arena_alloc(&a, 0);
  CHECK(z1 != NULL && z2 != NULL && z1 != z2);
  rt_arena_release(&a);
  CHECK(a.head == NULL);
  rt_arena_release(&a); /* twice is harmless */
}

TEST(arena_big_allocations) {
  rt_arena_t a;
  rt_arena_init(&a);
  /* A big request first, then small ones, then another big one: all usable. */
  size_t big = (size_t)3 << 20;
  unsigned char* b1 = rt_arena_alloc(&a, big);
  CHECK(b1 != NULL);
  unsigned char* s1 = rt_arena_alloc(&a, 24);
  CHECK(s1 != NULL);
  unsigned char* b2 = rt_arena_alloc(&a, big + 5);
  CHECK(b2 != NULL);
  unsigned char* s2 = rt_arena_alloc(&a, 24);
  CHECK(s2 != NULL);
  if (b1 && b2 && s1 && s2) {
    CHECK(all_zero(b1, big) && all_zero(b2, big + 5));
    CHECK(((uintptr_t)b1 % 16) == 0 && ((uintptr_t)b2 % 16) == 0);
    memset(b1, 1, big);
    memset(b2, 2, big + 5);
    memset(s1, 3, 24);
    memset(s2, 4, 24);
    CHECK(b1[big - 1] == 1 && b2[0] == 2 && s1[23] == 3 && s2[0] == 4);
    /* The small ones share a chunk with room to spare. */
    CHECK(s2 == s1 + 32);
  }
  /* An impossible request fails cleanly. */
  CHECK(rt_arena_alloc(&a, SIZE_MAX) == NULL);
  CHECK(rt_arena_alloc(&a, SIZE_MAX - 8) == NULL);
  rt_arena_release(&a);
}

TEST(arena_dup_and_strdup) {
  rt_arena_t a;
  rt_arena_init(&a);
  int src[5] = {1, 2, 3, 4, 5};
  int* d = rt_arena_dup(&a, src, sizeof src);
  CHECK(d != NULL && d != src && memcmp(d, src, sizeof src) == 0);
  CHECK(rt_arena_dup(&a, NULL, 0) != NULL);
  char* s = rt_arena_strdup(&a, "dA1[=dB2]");
  CHECK(s != NULL && strcmp(s, "dA1[=dB2]") == 0);
  char* e = rt_arena_strdup(&a, "");
  CHECK(e != NULL && e[0] == '\0');
  CHECK(rt_arena_strdup(&a, NULL) == NULL);
  rt_arena_release(&a);
}

TEST(arena_grow) {
  rt_arena_t a;
  rt_arena_init(&a);
  int64_t* items = NULL;
  int cap = 0;
  for (int i = 0; i < 1000; i++) {
    int ok = rt_arena_grow(&a, (void**)&items, &cap, i + 1, sizeof *items);
    CHECK(ok);
    if (!ok) break;
    CHECK(cap >= i + 1);
    items[i] = (int64_t)i * 3;
  }
  int intact = 1;
  for (int i = 0; i < 1000; i++)
    if (items[i] != (int64_t)i * 3) intact = 0;
  CHECK(intact);
  /* Capacity doubles, so growing by one costs O(log n) copies. */
  CHECK(cap < 2048);
  /* Asking for no more than the capacity changes nothing. */
  int64_t* before = items;
  int old_cap = cap;
  CHECK(rt_arena_grow(&a, (void**)&items, &cap, 10, sizeof *items));
  CHECK(items == before && cap == old_cap);
  /* New slots are zeroed. */
  CHECK(rt_arena_grow(&a, (void**)&items, &cap, cap + 1, sizeof *items));
  CHECK(items[old_cap] == 0 && items[999] == 999 * 3);
  /* A request too large to represent fails and leaves the array alone. */
  before = items;
  old_cap = cap;
  CHECK(!rt_arena_grow(&a, (void**)&items, &cap, INT_MAX, SIZE_MAX / 4));
  CHECK(items == before && cap == old_cap);
  rt_arena_release(&a);
}

/* ---- text buffer ------------------------------------------------------------------ */

TEST(buf_printf_putc_take) {
  rt_buf_t b = {0};
  rt_buf_printf(&b, "block %d\n", 0);
  rt_buf_putc(&b, 'x');
  for (int i = 0; i < 500; i++) rt_buf_printf(&b, "%s", "0123456789");
  char* text = rt_buf_take(&b);
  CHECK(text != NULL);
  if (text) {
    CHECK(strncmp(text, "block 0\nx0123", 13) == 0);
    CHECK(strlen(text) == 8 + 1 + 5000);
  }
  free(text);
  /* take reset the buffer: it is reusable and empty. */
  CHECK(b.data == NULL && b.len == 0 && !b.failed);
  char* empty = rt_buf_take(&b);
  CHECK(empty != NULL && empty[0] == '\0');
  free(empty);
  rt_buf_putc(&b, 'y');
  char* y = rt_buf_take(&b);
  CHECK(y != NULL && strcmp(y, "y") == 0);
  free(y);
}

TEST(buf_failed) {
  rt_buf_t b = {0};
  rt_buf_printf(&b, "kept for nothing");
  b.failed = 1; /* as after a failed allocation */
  rt_buf_printf(&b, "dropped");
  rt_buf_putc(&b, 'z');
  CHECK(rt_buf_take(&b) == NULL);
  CHECK(b.data == NULL && !b.failed);
  rt_buf_printf(&b, "again");
  rt_buf_release(&b);
  CHECK(b.data == NULL && b.len == 0);
}

/* ---- sizes and tensors ------------------------------------------------------------ */

TEST(mul_and_numel) {
  int64_t r = 0;
  CHECK(rt_mul_i64(6, 7, &r) && r == 42);
  CHECK(rt_mul_i64(INT64_MAX, 1, &r) && r == INT64_MAX);
  r = 5;
  CHECK(!rt_mul_i64(INT64_MAX, 2, &r) && r == 5);
  CHECK(!rt_mul_i64((int64_t)1 << 32, (int64_t)1 << 31, &r));

  int64_t n = -1;
  int64_t dims[3] = {2, 3, 4};
  CHECK(rt_numel("x", 3, dims, &n) == UJ_OK && n == 24);
  CHECK(rt_numel("x", 0, dims, &n) == UJ_OK && n == 1);
  int64_t with_zero[3] = {2, 0, 4};
  CHECK(rt_numel("x", 3, with_zero, &n) == UJ_OK && n == 0);

  int64_t negative[3] = {2, 3, -3};
  n = 77;
  CHECK(rt_numel("input 0", 3, negative, &n) == UJ_ERR_SHAPE);
  CHECK(n == 77);
  CHECK(strcmp(uj_last_error(), "input 0: axis 2 has negative size -3") == 0);

  int64_t huge[3] = {(int64_t)1 << 40, (int64_t)1 << 20, 1 << 10};
  CHECK(rt_numel("input 1", 3, huge, &n) == UJ_ERR_SHAPE);
  CHECK(strstr(uj_last_error(), "input 1") && strstr(uj_last_error(), "overflow"));
  CHECK(n == 77);
  /* A zero size makes the tensor empty, but its other sizes still make its
   * strides: their product, zeros left out, must fit as well. */
  int64_t big_empty[3] = {(int64_t)1 << 40, (int64_t)1 << 20, 0};
  CHECK(rt_numel("x", 3, big_empty, &n) == UJ_OK && n == 0);
  int64_t huge_empty[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 0};
  n = 77;
  CHECK(rt_numel("x", 3, huge_empty, &n) == UJ_ERR_SHAPE && n == 77);
  CHECK(strstr(uj_last_error(), "zeros left out") != NULL);
  CHECK(rt_numel("x", 9, dims, &n) == UJ_ERR_SHAPE);
  CHECK(rt_numel("x", -1, dims, &n) == UJ_ERR_SHAPE);
}

static uj_tensor_t make_tensor(void* data, uj_dtype_t dtype, int ndim, int64_t d0, int64_t d1) {
  uj_tensor_t t = {data, dtype, UJ_CPU, ndim, {d0, d1}};
  return t;
}

TEST(tensor_check_ok) {
  float v[6] = {0};
  uj_tensor_t t = make_tensor(v, UJ_F32, 2, 2, 3);
  int64_t want[2] = {2, 3};
  CHECK(rt_tensor_check("input 0", &t, 2, UJ_F32, want) == UJ_OK);
  CHECK(rt_tensor_check("input 0", &t, 2, UJ_F32, NULL) == UJ_OK);
  /* No data is fine when there are no elements. */
  uj_tensor_t empty = make_tensor(NULL, UJ_F32, 2, 0, 3);
  int64_t want_empty[2] = {0, 3};
  CHECK(rt_tensor_check("input 0", &empty, 2, UJ_F32, want_empty) == UJ_OK);
  /* A scalar. */
  double s = 1;
  uj_tensor_t scalar = {&s, UJ_F64, UJ_CPU, 0, {0}};
  CHECK(rt_tensor_check("output 0", &scalar, 0, UJ_F64, NULL) == UJ_OK);
}

TEST(tensor_check_null) {
  CHECK(rt_tensor_check("input 0", NULL, 2, UJ_F32, NULL) == UJ_ERR_INVALID);
  CHECK(strcmp(uj_last_error(), "input 0: NULL tensor") == 0);
  uj_tensor_t t = make_tensor(NULL, UJ_F32, 2, 2, 3);
  CHECK(rt_tensor_check("input 0", &t, 2, UJ_F32, NULL) == UJ_ERR_INVALID);
  CHECK(strcmp(uj_last_error(), "input 0: data is NULL but it holds 6 elements") == 0);
}

TEST(tensor_check_rank) {
  float v[24];
  uj_tensor_t t = {v, UJ_F32, UJ_CPU, 3, {2, 3, 4}};
  CHECK(rt_tensor_check("input 1 (\"x\")", &t, 2, UJ_F32, NULL) == UJ_ERR_SHAPE);
  CHECK(strcmp(uj_last_error(), "input 1 (\"x\"): expected rank 2, got 3") == 0);
  t.ndim = 9;
  CHECK(rt_tensor_check("input 0", &t, 2, UJ_F32, NULL) == UJ_ERR_SHAPE);
  CHECK(strstr(uj_last_error(), "input 0: rank 9") != NULL);
  t.ndim = -1;
  CHECK(rt_tensor_check("input 0", &t, 2, UJ_F32, NULL) == UJ_ERR_SHAPE);
  CHECK(strstr(uj_last_error(), "input 0: rank -1") != NULL);
}

TEST(tensor_check_dtype) {
  double v[6];
  uj_tensor_t t = make_tensor(v, UJ_F64, 2, 2, 3);
  CHECK(rt_tensor_check("input 0", &t, 2, UJ_F32, NULL) == UJ_ERR_INVALID);
  CHECK(strcmp(uj_last_error(), "input 0: dtype f64, expected f32") == 0);
  t.dtype = (uj_dtype_t)17;
  CHECK(rt_tensor_check("input 0", &t, 2, UJ_F32, NULL) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "input 0") != NULL);
}

TEST(tensor_check_device) {
  float v[6];
  uj_tensor_t t = make_tensor(v, UJ_F32, 2, 2, 3);
  t.device = UJ_CUDA;
  CHECK(rt_tensor_check("input 0", &t, 2, UJ_F32, NULL) == UJ_ERR_UNSUPPORTED);
  CHECK(strcmp(uj_last_error(), "input 0: is on the GPU; this engine runs on the CPU") == 0);
  t.device = (uj_device_t)5;
  CHECK(rt_tensor_check("input 0", &t, 2, UJ_F32, NULL) == UJ_ERR_INVALID);
}

TEST(tensor_check_sizes) {
  float v[35];
  uj_tensor_t t = make_tensor(v, UJ_F32, 2, 7, 5);
  int64_t want[2] = {7, 7};
  CHECK(rt_tensor_check("output 0", &t, 2, UJ_F32, want) == UJ_ERR_SHAPE);
  CHECK(strcmp(uj_last_error(), "output 0: axis 1 has size 5, expected 7") == 0);

  uj_tensor_t neg = {v, UJ_F32, UJ_CPU, 3, {1, 2, -3}};
  CHECK(rt_tensor_check("input 0", &neg, 3, UJ_F32, NULL) == UJ_ERR_SHAPE);
  CHECK(strcmp(uj_last_error(), "input 0: axis 2 has negative size -3") == 0);

  uj_tensor_t huge = {v, UJ_F32, UJ_CPU, 3, {(int64_t)1 << 40, (int64_t)1 << 30, 1 << 10}};
  CHECK(rt_tensor_check("input 2", &huge, 3, UJ_F32, NULL) == UJ_ERR_SHAPE);
  CHECK(strstr(uj_last_error(), "input 2") && strstr(uj_last_error(), "overflow"));
  /* The element count fits but the byte count does not. */
  uj_tensor_t bytes = {v, UJ_F64, UJ_CPU, 1, {(int64_t)1 << 61}};
  CHECK(rt_tensor_check("input 3", &bytes, 1, UJ_F64, NULL) == UJ_ERR_SHAPE);
}

/* ---- context ----------------------------------------------------------------------- */

static int freed_state;
static void free_state(void* p) {
  freed_state += *(int*)p;
  free(p);
}

TEST(ctx_env_and_free) {
  uj_ctx_free(NULL);
  unsetenv("UOPJIT_ENGINE");
  uj_ctx_t* ctx = uj_ctx_new();
  CHECK(ctx != NULL);
  /* A fresh context runs the optimized IR and has no JIT state yet. */
  if (ctx) CHECK(ctx->set.engine == UJ_ENGINE_AUTO && !ctx->raw_ir && ctx->jit_state == NULL);
  uj_ctx_free(ctx);

  static const struct {
    const char* value;
    uj_engine_t engine;
  } cases[] = {{"interp", UJ_ENGINE_INTERP}, {"mir", UJ_ENGINE_MIR}, {"c", UJ_ENGINE_C},
               {"cuda", UJ_ENGINE_CUDA},     {"auto", UJ_ENGINE_AUTO}, {"", UJ_ENGINE_AUTO}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    setenv("UOPJIT_ENGINE", cases[i].value, 1);
    ctx = uj_ctx_new();
    CHECK(ctx != NULL);
    if (ctx) CHECK(ctx->set.engine == cases[i].engine && !ctx->problem[RT_SETTING_ENGINE][0]);
    uj_ctx_free(ctx);
  }
  /* an unknown engine is kept as a problem (tests/test_env.c runs with it) */
  setenv("UOPJIT_ENGINE", "bogus", 1);
  ctx = uj_ctx_new();
  if (ctx) CHECK(ctx->set.engine == UJ_ENGINE_AUTO && strstr(ctx->problem[RT_SETTING_ENGINE], "UOPJIT_ENGINE"));
  uj_ctx_free(ctx);
  unsetenv("UOPJIT_ENGINE");

  /* The JIT's slot is released through its own function. */
  ctx = uj_ctx_new();
  CHECK(ctx != NULL);
  if (ctx) {
    int* state = malloc(sizeof *state);
    CHECK(state != NULL);
    if (state) {
      *state = 3;
      ctx->jit_state = state;
      ctx->jit_state_free = free_state;
    }
  }
  freed_state = 0;
  uj_ctx_free(ctx);
  CHECK(freed_state == 3);
}

TEST_MAIN()
