/* tests/harness.h: the test harness shared by every tests/test_<module>.c.
 *
 *   TEST(name) { CHECK(x == 1); CHECK_NEAR(y, 2.0, 1e-12); }
 *   TEST(gpu)  { SKIP_IF(!have_gpu, "no GPU"); ... }
 *   TEST_MAIN()
 *
 * Tests register themselves (a constructor per TEST), run in file order, and
 * keep going after a failed CHECK (each failure prints file:line and the
 * expression). A randomized test prints its seed with HARNESS_SEED(seed) so
 * that a failure names it. `./test_x name` runs only the tests whose name
 * contains `name`. The last line printed is "N passed, N failed, N skipped". */
#ifndef UJ_TESTS_HARNESS_H
#define UJ_TESTS_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*harness_fn)(void);
typedef struct {
  const char* name;
  harness_fn fn;
} harness_test_t;

/* Which sanitizer instruments this build, 1 or 0: gcc says so with
 * __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__, clang with __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define HARNESS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HARNESS_ASAN 1
#endif
#endif
#ifndef HARNESS_ASAN
#define HARNESS_ASAN 0
#endif
#if defined(__SANITIZE_THREAD__)
#define HARNESS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HARNESS_TSAN 1
#endif
#endif
#ifndef HARNESS_TSAN
#define HARNESS_TSAN 0
#endif

#define HARNESS_MAX_TESTS 512
static harness_test_t harness_tests[HARNESS_MAX_TESTS];
static int harness_count;
static int harness_failed_checks; /* failures in the running test */
static int harness_skipped;       /* the running test skipped */
static uint64_t harness_seed;     /* the seed of the running randomized test */
static int harness_seed_set;
/* Called after each test, while its failures still count as its own (a
 * check a test queued to do in bulk: tests/oracle.h's NVRTC batches). */
static void (*harness_after_test)(void);

static void harness_register(const char* name, harness_fn fn) {
  if (harness_count < HARNESS_MAX_TESTS) {
    harness_tests[harness_count].name = name;
    harness_tests[harness_count].fn = fn;
    harness_count++;
  } else {
    fprintf(stderr, "harness: too many tests, %s not registered\n", name);
  }
}

#define TEST(name)                                                                   \
  static void test_##name(void);                                                     \
  __attribute__((constructor)) static void harness_reg_##name(void) {                \
    harness_register(#name, test_##name);                                            \
  }                                                                                  \
  static void test_##name(void)

static void harness_fail(const char* file, int line, const char* what) {
  harness_failed_checks++;
  if (harness_seed_set)
    fprintf(stderr, "  FAIL %s:%d: %s (seed %llu)\n", file, line, what,
            (unsigned long long)harness_seed);
  else
    fprintf(stderr, "  FAIL %s:%d: %s\n", file, line, what);
}

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) harness_fail(__FILE__, __LINE__, #cond);                            \
  } while (0)

/* |a - b| <= tol * max(1, |b|): a relative tolerance that turns absolute near 0.
 * NaN on either side fails. */
#define CHECK_NEAR(a, b, tol)                                                        \
  do {                                                                               \
    double harness_a_ = (double)(a), harness_b_ = (double)(b);                       \
    double harness_s_ = fabs(harness_b_) > 1.0 ? fabs(harness_b_) : 1.0;             \
    if (!(fabs(harness_a_ - harness_b_) <= (tol) * harness_s_)) {                    \
      char harness_m_[256];                                                          \
      snprintf(harness_m_, sizeof harness_m_, "%s ~ %s: %.17g vs %.17g (tol %g)", #a, \
               #b, harness_a_, harness_b_, (double)(tol));                           \
      harness_fail(__FILE__, __LINE__, harness_m_);                                  \
    }                                                                                \
  } while (0)

#define SKIP_IF(cond, reason)                                                        \
  do {                                                                               \
    if (cond) {                                                                      \
      printf("  skip: %s\n", (reason));                                              \
      harness_skipped = 1;                                                           \
      return;                                                                        \
    }                                                                                \
  } while (0)

/* Records the seed of a randomized test so that failures print it. */
#define HARNESS_SEED(s)                                                              \
  do {                                                                               \
    harness_seed = (uint64_t)(s);                                                    \
    harness_seed_set = 1;                                                            \
  } while (0)

/* A small deterministic generator for randomized tests (splitmix64). */
static inline uint64_t harness_next(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
/* Uniform in [lo, hi]. */
static inline int64_t harness_int(uint64_t* state, int64_t lo, int64_t hi) {
  return lo + (int64_t)(harness_next(state) % (uint64_t)(hi - lo + 1));
}
/* Uniform in [lo, hi). */
static inline double harness_real(uint64_t* state, double lo, double hi) {
  return lo + (hi - lo) * (double)(harness_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

static int harness_main(int argc, char** argv) {
  int passed = 0, failed = 0, skipped = 0;
  const char* filter = argc > 1 ? argv[1] : NULL;
  for (int i = 0; i < harness_count; i++) {
    if (filter && !strstr(harness_tests[i].name, filter)) continue;
    harness_failed_checks = 0;
    harness_skipped = 0;
    harness_seed_set = 0;
    printf("%s\n", harness_tests[i].name);
    fflush(stdout);
    harness_tests[i].fn();
    if (harness_after_test) harness_after_test();
    if (harness_failed_checks) {
      failed++;
      printf("  FAILED (%d checks)\n", harness_failed_checks);
    } else if (harness_skipped) {
      skipped++;
    } else {
      passed++;
    }
    fflush(stdout);
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}

#define TEST_MAIN()                                                                  \
  int main(int argc, char** argv) { return harness_main(argc, argv); }

#endif
