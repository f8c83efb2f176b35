/* tests/test_c_ahead.c: the C engine's flat elementwise loops in groups with
 * software prefetch ahead (jit/c/c_ahead.c).
 *
 * The source: a flat elementwise program's loop runs in groups of 32 and
 * prefetches each tensor it streams, to read where it only reads it and
 * to write where it writes it, near its end the next piece of a
 * multi-tensor call, and runs the rest in a group of 16, one of 8 and one
 * by one; the groups that store a streamed output
 * (jit/c/c_stream.c) prefetch the other tensors; a 0-d scalar is not
 * prefetched; a row-wise program (two loops) and a reduction keep their
 * own loops.
 * The values: on every size around the group, the rest's groups of 16 and
 * 8 and the prefetch distance (0, 1, 7, 8, 9, ..., 31, 32, 33, 55, 56, 63,
 * 287, 288, 289, ...) and at random sizes, on 1 and 2
 * threads (the second thread's range starts anywhere), separate outputs
 * and in place, streamed past the cache or not, the C engine's result is bit for bit the interpreter's (a
 * program of correctly rounded operations only, so any missed, repeated or
 * reordered iteration shows), in f32 and f64, and with bf16 storage. */
#include "oracle.h"

static char* c_source(const char* text, uj_dtype_t dtype, int ndim, const int64_t* dims, int ninputs) {
  uj_program_t* p = NULL;
  uj_ctx_t* ctx = uj_ctx_new();
  char* src = NULL;
  uj_tensor_t t[4];
  const uj_tensor_t* in[4];
  for (int i = 0; i < ninputs; i++) t[i] = or_tensor(dtype, i == ninputs - 1 ? 0 : ndim, dims), in[i] = &t[i];
  uj_tensor_t y = or_tensor(dtype, ndim, dims);
  uj_tensor_t* out[] = {&y};
  for (int i = 0; i < ninputs; i++) memset(t[i].data, 0, (size_t)uj_dtype_size(dtype));
  /* the dump shows the build last run: the interpreter runs this one */
  if (ctx && uj_program_parse(text, &p) == UJ_OK && uj_ctx_set_engine(ctx, UJ_ENGINE_INTERP) == UJ_OK &&
      uj_program_run(ctx, p, UJ_FORWARD, in, ninputs, NULL, 0, out, 1) == UJ_OK)
    src = uj_program_dump(ctx, p, UJ_FORWARD, UJ_DUMP_C, NULL);
  for (int i = 0; i < ninputs; i++) or_tensor_free(&t[i]);
  or_tensor_free(&y);
  uj_program_free(p);
  uj_ctx_free(ctx);
  return src;
}

static int count(const char* s, const char* what) {
  int n = 0;
  for (; s && (s = strstr(s, what)); s++) n++;
  return n;
}

TEST(flat_loop_source_prefetches_its_streams) {
  int64_t n = 1000;
  /* inputs x, a (streams) and s (0-d, the last input): y written, and
   * streamed when large (jit/c/c_stream.c): its groups of 16 prefetch x and
   * a, one line each; the loop for a small y, in groups of 32, prefetches
   * x and a to read and y to write, two lines each */
  char* src = c_source("y = (x * a + s) / (sqrt(a) + 1)", UJ_F32, 1, &n, 3);
  CHECK(src != NULL);
  CHECK(count(src, "for (; uj_e - uj_g >= 32; uj_g += 32) {") == 1);
  CHECK(count(src, "if (uj_e - uj_g >= 288) {") == 1);
  CHECK(count(src, "if (uj_e - uj_g >= 272) { __builtin_prefetch(&t0[uj_g + 256], 0); "
                   "__builtin_prefetch(&t1[uj_g + 256], 0); }") == 1);
  CHECK(count(src, "__builtin_prefetch(") == 2 * 8); /* ahead, and into the next piece */
  CHECK(count(src, "], 0);") == 2 * 6);
  CHECK(count(src, "], 1);") == 2 * 2);
  CHECK(count(src, "__builtin_prefetch(&t0[uj_g + 272], 0);") == 1);
  /* the rest after the groups of 32: a group of 16, one of 8, then one by one */
  CHECK(count(src, "if (uj_e - uj_g >= 16) {") == 1 && count(src, "uj_g += 16;\n") == 1);
  CHECK(count(src, "if (uj_e - uj_g >= 8) {") == 1 && count(src, "uj_g += 8;\n") == 1);
  CHECK(count(src, "uj_l < 4;") == 0);
  /* near its end the loop prefetches the next piece of a multi-tensor
   * call instead, in the groups that stream and in those that do not */
  CHECK(count(src, "const uj_i64 uj_nx = dims[") == 1);
  CHECK(count(src, "} else if (uj_nx > 0) { const uj_i64 uj_o = uj_g + 256 - uj_e;") == 2);
  CHECK(count(src, "__builtin_prefetch(&uj_n0[uj_o + 0], 0);") == 2);
  free(src);
  /* f64: one line of 8 per streamed group, four per group of 32 */
  src = c_source("y = x + s", UJ_F64, 1, &n, 2);
  CHECK(src && count(src, "__builtin_prefetch(") == 2 * 9);
  free(src);
  /* in place (Adam's m, v, p): no group streams, every tensor is prefetched */
  src = c_source("x = x * s", UJ_F32, 1, &n, 2);
  CHECK(src && count(src, "for (; end - uj_g >= 32; uj_g += 32) {") + count(src, "for (; uj_e - uj_g >= 32; uj_g += 32) {") == 1);
  free(src);
  /* rows: two loops, none of this */
  int64_t dims[2] = {8, 64};
  src = c_source("y = x * 2 + s", UJ_F32, 2, dims, 2);
  CHECK(src && count(src, "- uj_g >= 32; uj_g += 32) {") == 0);
  free(src);
  /* a reduction keeps its lanes */
  src = c_source("y = x * sum(x) + s", UJ_F32, 1, &n, 2);
  CHECK(src && count(src, "uj_e > uj_g") >= 1);
  free(src);
}

/* x, a of n elements (a in [0.5, 2)), y = (x * a + s) / (sqrt(a) + 1) on
 * the C engine with `threads` threads against the interpreter, bit for bit;
 * in_place: y is x. 1 when they agree. */
static int agrees(uj_program_t* p, uj_dtype_t dtype, int64_t n, int threads, int in_place, int stream, uint64_t* st) {
  uj_tensor_t x = or_tensor(dtype, 1, &n), a = or_tensor(dtype, 1, &n), s = or_tensor(dtype, 0, &n);
  uj_tensor_t x2 = or_tensor(dtype, 1, &n), y = or_tensor(dtype, 1, &n), want = or_tensor(dtype, 1, &n);
  or_fill_real(st, &x, -3, 3);
  or_fill_real(st, &a, 0.5, 2);
  or_fill_real(st, &s, -1, 1);
  size_t bytes = (size_t)n * (size_t)uj_dtype_size(dtype);
  if (n) memcpy(x2.data, x.data, bytes);
  uj_ctx_t* interp = uj_ctx_new();
  uj_ctx_t* c = uj_ctx_new();
  int ok = interp && c && uj_ctx_set_engine(interp, UJ_ENGINE_INTERP) == UJ_OK &&
           uj_ctx_set_engine(c, UJ_ENGINE_C) == UJ_OK && uj_ctx_set_threads(c, threads) == UJ_OK &&
           (!stream || uj_ctx_set_stream_bytes(c, 1) == UJ_OK);
  const uj_tensor_t* in[] = {&x, &a, &s};
  const uj_tensor_t* in2[] = {&x2, &a, &s};
  uj_tensor_t* out_want[] = {&want};
  uj_tensor_t* out[] = {in_place ? &x2 : &y};
  ok = ok && uj_program_run(interp, p, UJ_FORWARD, in, 3, NULL, 0, out_want, 1) == UJ_OK;
  ok = ok && uj_program_run(c, p, UJ_FORWARD, in2, 3, NULL, 0, out, 1) == UJ_OK;
  if (!ok) fprintf(stderr, "  run failed: %s\n", uj_last_error());
  if (ok && n && memcmp(out[0]->data, want.data, bytes) != 0) {
    for (int64_t i = 0; i < n; i++)
      if (or_get(out[0], i) != or_get(&want, i) && !(or_get(out[0], i) != or_get(out[0], i))) {
        fprintf(stderr, "  %s n=%lld threads %d%s%s: element %lld is %.9g, the interpreter's %.9g\n",
                uj_dtype_name(dtype), (long long)n, threads, in_place ? " in place" : "", stream ? " streamed" : "",
                (long long)i,
                or_get(out[0], i), or_get(&want, i));
        break;
      }
    ok = 0;
  }
  uj_ctx_free(interp);
  uj_ctx_free(c);
  or_tensor_free(&x), or_tensor_free(&a), or_tensor_free(&s);
  or_tensor_free(&x2), or_tensor_free(&y), or_tensor_free(&want);
  return ok;
}

TEST(flat_loops_match_the_interpreter) {
  SKIP_IF(!or_engine_available(UJ_ENGINE_C), "the C engine is unavailable");
  uint64_t seed = 0xa4eadULL;
  const char* env = getenv("UJ_TEST_SEED");
  if (env) seed = strtoull(env, NULL, 0) | 1;
  HARNESS_SEED(seed);
  uint64_t st = seed;
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("y = (x * a + s) / (sqrt(a) + 1)", &p) == UJ_OK);
  /* every way into the rest's groups of 16 and 8 and one by one, after no
   * group of 32 and after some */
  int64_t sizes[28] = {0, 1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 55, 56, 63, 287, 288, 289, 320, 4097, 40000, 70001};
  int nsizes = 24;
  while (nsizes < 28) {
    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
    sizes[nsizes++] = 1 + (int64_t)(st % 200000);
  }
  static const uj_dtype_t dtypes[] = {UJ_F32, UJ_F64, UJ_BF16};
  for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++)
    for (int k = 0; k < nsizes; k++)
      for (int threads = 1; threads <= 2; threads++)
        for (int in_place = 0; in_place <= 1; in_place++)
          for (int stream = 0; stream <= 1; stream++)
            CHECK(agrees(p, dtypes[d], sizes[k], threads, in_place, stream, &st));
  uj_program_free(p);
}

TEST_MAIN()
