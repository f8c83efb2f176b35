/* tests/test_parse_limits.c: the expression language's limits, as the
 * docs/LANGUAGE.md states them. Nesting (parentheses, function calls, unary '-' and
 * '+', the exponent of '**') is allowed to 256 levels: a source at exactly
 * 256 parses and runs, one level more is UJ_ERR_PARSE naming the line and
 * column of the token that opens level 257. A flat chain of binary
 * operators is no nesting at all: a sum of 10,000 terms parses, and builds
 * and runs on every CPU engine as far as the pass pipeline's limit on
 * operations (8192), past which building is refused with a message that
 * states the limit, quickly, whatever the size of the source. */
#include <time.h>

#include "oracle.h"

/* "y = " (after `before`), then `open` n times, `core`, `close` n times. */
static char* nested(const char* before, const char* open, int n, const char* core, const char* close) {
  size_t cap = strlen(before) + 8 + (size_t)n * (strlen(open) + strlen(close)) + strlen(core);
  char* s = malloc(cap);
  if (!s) return NULL;
  char* at = s + sprintf(s, "%sy = ", before);
  for (int i = 0; i < n; i++) at += sprintf(at, "%s", open);
  at += sprintf(at, "%s", core);
  for (int i = 0; i < n; i++) at += sprintf(at, "%s", close);
  return s;
}

/* "y = " then `count` terms joined by `op` (" + "). */
static char* chain(const char* head, const char* term, const char* op, int count, const char* tail) {
  size_t cap = strlen(head) + strlen(tail) + 8 + (size_t)count * (strlen(term) + strlen(op));
  char* s = malloc(cap);
  if (!s) return NULL;
  char* at = s + sprintf(s, "y = %s%s", head, term);
  for (int i = 1; i < count; i++) at += sprintf(at, "%s%s", op, term);
  sprintf(at, "%s", tail);
  return s;
}

static int parses(const char* src) {
  uj_program_t* p = NULL;
  uj_status_t s = uj_program_parse(src, &p);
  if (s != UJ_OK) fprintf(stderr, "  \"%.40s...\": %s: %s\n", src, uj_status_str(s), uj_last_error());
  uj_program_free(p);
  return s == UJ_OK;
}

/* UJ_ERR_PARSE at line:column saying the nesting limit, nothing made. */
static int fails_at(const char* src, int line, int column) {
  uj_program_t* sentinel = (uj_program_t*)&sentinel;
  uj_program_t* p = sentinel;
  uj_status_t s = uj_program_parse(src, &p);
  char where[64];
  snprintf(where, sizeof where, "program line %d, column %d: ", line, column);
  const char* msg = uj_last_error();
  int ok = s == UJ_ERR_PARSE && p == sentinel && strstr(msg, where) && strstr(msg, "nested deeper than 256 levels");
  if (!ok) fprintf(stderr, "  \"%.40s...\": %s \"%s\", expected %s\n", src, uj_status_str(s), msg, where);
  if (p != sentinel) uj_program_free(p);
  return ok;
}

/* Each kind of level at exactly 256 parses; at 257 the error points at the
 * token that opens the 257th. Columns count from 1; "y = " takes 4. */
TEST(nesting_limit_is_256_levels) {
  static const struct {
    const char *open, *core, *close;
    int width; /* characters of one `open` */
  } kinds[] = {{"(", "x", ")", 1},          {"exp(", "x", ")", 4},   {"-", "x", "", 1}, {"+", "x", "", 1},
               {"x**", "x", "", 3},         {"abs(-", "x", ")", 5},  {"sum(", "x", ")", 4},
               {"where(x, x, ", "x", ")", 12}};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    /* "abs(-" opens two levels per repetition */
    int per = strcmp(kinds[k].open, "abs(-") == 0 ? 2 : 1;
    int reps = 256 / per;
    char* ok = nested("", kinds[k].open, reps, kinds[k].core, kinds[k].close);
    char* over = nested("", kinds[k].open, reps + 1, kinds[k].core, kinds[k].close);
    char* later = nested("z = 1\n", kinds[k].open, reps + 1, kinds[k].core, kinds[k].close);
    if (!ok || !over || !later) {
      free(ok), free(over), free(later);
      CHECK(0);
      return;
    }
    CHECK(parses(ok));
    /* "x**" opens its level at the "**", two characters in */
    int offset = strcmp(kinds[k].open, "x**") == 0 ? 1 : 0;
    CHECK(fails_at(over, 1, 5 + reps * kinds[k].width + offset));
    CHECK(fails_at(later, 2, 5 + reps * kinds[k].width + offset));
    free(ok), free(over), free(later);
  }
  /* "abs(-" past 256 by its '-' alone: the level is the '-', one in */
  char* src = nested("", "abs(-", 128, "-x", ")");
  CHECK(src && fails_at(src, 1, 5 + 128 * 5));
  free(src);
}

/* Operators in a chain cost nothing: 255 terms (what used to be refused
 * already) and 10,000 parse, also 256 levels deep. */
TEST(flat_chains_are_not_nesting) {
  static const char* const ops[] = {" + ", " - ", " * ", " / ", "+", "*"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    char* short_chain = chain("", "x", ops[i], 255, "");
    char* long_chain = chain("", "x", ops[i], 10000, "");
    CHECK(short_chain && parses(short_chain));
    CHECK(long_chain && parses(long_chain));
    free(short_chain), free(long_chain);
  }
  /* products within sums, a comparison between two chains */
  char* mixed = chain("", "a*b*c", " + ", 5000, " < x - x - x");
  CHECK(mixed && parses(mixed));
  free(mixed);
  /* a chain inside 256 levels */
  char* inner = chain("", "x", " + ", 2000, "");
  char* deep = inner ? nested("", "(", 256, inner + 4, ")") : NULL;
  CHECK(deep && parses(deep));
  free(inner), free(deep);
}

/* Runs src (one input x, one output y, both [n]) on engine e; the status,
 * with y's first element in *y0. */
static uj_status_t run_on(uj_engine_t e, const char* src, double x0, double* y0) {
  uj_program_t* p = NULL;
  uj_status_t s = uj_program_parse(src, &p);
  const int64_t n = 37;
  uj_tensor_t x = or_tensor(UJ_F32, 1, &n), y = or_tensor(UJ_F32, 1, &n);
  for (int64_t i = 0; i < n; i++) or_set(&x, i, x0);
  or_fill_sentinel(&y);
  const uj_tensor_t* in[1] = {&x};
  uj_tensor_t* out[1] = {&y};
  uj_ctx_t* ctx = s == UJ_OK ? uj_ctx_new() : NULL;
  if (ctx && (s = uj_ctx_set_engine(ctx, e)) == UJ_OK) s = uj_program_run(ctx, p, UJ_FORWARD, in, 1, NULL, 0, out, 1);
  *y0 = or_get(&y, 0);
  for (int64_t i = 1; s == UJ_OK && i < n; i++)
    if (or_get(&y, i) != *y0) *y0 = NAN; /* every element alike */
  uj_ctx_free(ctx);
  uj_program_free(p);
  or_tensor_free(&x);
  or_tensor_free(&y);
  return s;
}

static const uj_engine_t cpu_engines[] = {UJ_ENGINE_INTERP, UJ_ENGINE_MIR, UJ_ENGINE_C};

/* Long chains and the deepest nesting build and run on every CPU engine,
 * exactly: the values are small integers. */
TEST(long_chains_and_deep_nesting_run_on_every_cpu_engine) {
  char* sum = chain("", "x", " + ", 1000, "");                    /* 999 additions */
  char* folded = chain("x * (", "1", " + ", 10000, ")");          /* folded into 10000 while building */
  char* deep = nested("", "-abs(", 128, "x + x + x", ")");        /* 256 levels around a chain */
  const char* srcs[] = {sum, folded, deep};
  const double want[] = {1000 * 0.5, 10000 * 0.5, -1.5};
  for (size_t e = 0; e < sizeof cpu_engines / sizeof cpu_engines[0]; e++) {
    if (!or_engine_available(cpu_engines[e])) continue;
    for (int i = 0; i < 3; i++) {
      double y0 = 0;
      uj_status_t s = srcs[i] ? run_on(cpu_engines[e], srcs[i], 0.5, &y0) : UJ_ERR_OOM;
      if (s != UJ_OK || y0 != want[i])
        fprintf(stderr, "  source %d on %s: %s \"%s\", y %g (want %g)\n", i, uj_engine_name(cpu_engines[e]),
                uj_status_str(s), s ? uj_last_error() : "", y0, want[i]);
      CHECK(s == UJ_OK && y0 == want[i]);
    }
  }
  free(sum), free(folded), free(deep);
}

/* Past the pass pipeline's 8192 operations a build is refused, with the
 * count and the limit in the message: a sum of 10,000 terms parses but
 * does not build; 8193 terms (8192 additions) do. A megabyte of one sum
 * (250,000 terms) is refused as quickly: before lowering, whose checks
 * take time that grows with the square of the operations. */
TEST(operations_past_the_pipeline_limit_are_refused_quickly) {
  char* at_limit = chain("", "x", " + ", 8193, "");
  char* over = chain("", "x", "+", 8194, "");
  char* huge = chain("", "x", "+", 250000, "");
  double y0 = 0;
  uj_status_t s = at_limit ? run_on(UJ_ENGINE_INTERP, at_limit, 0.5, &y0) : UJ_ERR_OOM;
  CHECK(s == UJ_OK && y0 == 8193 * 0.5);
  const char* const refused[] = {over, huge};
  const int needed[] = {8193, 249999};
  for (int i = 0; i < 2; i++) {
    CHECK(refused[i] && parses(refused[i]));
    clock_t start = clock();
    s = refused[i] ? run_on(UJ_ENGINE_INTERP, refused[i], 0.5, &y0) : UJ_ERR_OOM;
    double seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
    char count[64];
    snprintf(count, sizeof count, "the program has %d operations", needed[i]);
    if (s != UJ_ERR_UNSUPPORTED || !strstr(uj_last_error(), count) || !strstr(uj_last_error(), "at most 8192"))
      fprintf(stderr, "  %d terms: %s \"%s\"\n", needed[i] + 1, uj_status_str(s), uj_last_error());
    CHECK(s == UJ_ERR_UNSUPPORTED);
    CHECK(strstr(uj_last_error(), count) && strstr(uj_last_error(), "at most 8192 operations"));
    /* it used to take minutes (the verifier); seconds leave room for a loaded machine and ASan */
    CHECK(seconds < 20);
  }
  free(at_limit), free(over), free(huge);
}

TEST_MAIN()
