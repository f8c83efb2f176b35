/* tests/test_threads.c: the thread pool (rt/threads.c). Every index of a
 * range must be visited exactly once whatever the thread count, range length
 * (empty, one, primes) and minimum chunk; the caller must take part; chunks
 * must respect min_chunk; back-to-back and nested runs must neither lose work
 * nor deadlock. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../rt/rt.h"
#include "harness.h"

typedef struct {
  int64_t begin, end, min_chunk, pool_size;
  atomic_int* visits; /* per index */
  atomic_llong sum;
  atomic_int calls;
  atomic_int short_chunks; /* chunks shorter than min_chunk */
  pthread_t caller;
  atomic_int caller_ran_first; /* the chunk starting at begin ran on the caller */
} range_probe_t;

static void probe_range(void* ctx, int64_t lo, int64_t hi) {
  range_probe_t* p = ctx;
  atomic_fetch_add(&p->calls, 1);
  if (hi - lo < p->min_chunk) atomic_fetch_add(&p->short_chunks, 1);
  if (lo == p->begin && pthread_equal(pthread_self(), p->caller)) atomic_store(&p->caller_ran_first, 1);
  for (int64_t i = lo; i < hi; i++) {
    atomic_fetch_add(&p->visits[i - p->begin], 1);
    atomic_fetch_add(&p->sum, i);
  }
}

static int check_one_range(rt_pool_t* pool, int64_t begin, int64_t n, int64_t min_chunk) {
  range_probe_t p;
  memset(&p, 0, sizeof p);
  p.begin = begin;
  p.end = begin + n;
  p.min_chunk = min_chunk < 1 ? 1 : min_chunk;
  p.visits = calloc((size_t)(n > 0 ? n : 1), sizeof *p.visits);
  p.caller = pthread_self();
  rt_pool_run(pool, begin, begin + n, min_chunk, probe_range, &p);
  int ok = 1;
  for (int64_t i = 0; i < n; i++) ok &= atomic_load(&p.visits[i]) == 1;
  long long expected_sum = 0;
  for (int64_t i = begin; i < begin + n; i++) expected_sum += i;
  ok &= atomic_load(&p.sum) == expected_sum;
  int calls = atomic_load(&p.calls);
  if (n == 0)
    ok &= calls == 0;
  else if (n < 2 * p.min_chunk)
    ok &= calls == 1; /* one call on the caller */
  else
    ok &= calls >= 1 && calls <= rt_pool_size(pool) && atomic_load(&p.short_chunks) == 0;
  if (n > 0) ok &= atomic_load(&p.caller_ran_first) == 1;
  free(p.visits);
  if (!ok)
    printf("  range begin %lld, length %lld, min_chunk %lld: %d calls\n", (long long)begin, (long long)n,
           (long long)min_chunk, calls);
  return ok;
}

TEST(pool_every_index_once) {
  static const int thread_counts[] = {1, 2, 3, 8};
  static const int64_t lengths[] = {0, 1, 2, 3, 7, 13, 31, 97, 1009, 10007};
  static const int64_t min_chunks[] = {0, 1, 4, 100, 1000000};
  for (size_t t = 0; t < sizeof thread_counts / sizeof *thread_counts; t++) {
    rt_pool_t* pool = rt_pool_new(thread_counts[t]);
    CHECK(pool != NULL);
    CHECK(rt_pool_size(pool) == thread_counts[t]);
    for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++)
      for (size_t m = 0; m < sizeof min_chunks / sizeof *min_chunks; m++) {
        CHECK(check_one_range(pool, 0, lengths[l], min_chunks[m]));
        CHECK(check_one_range(pool, -500, lengths[l], min_chunks[m]));
      }
    rt_pool_free(pool);
  }
}

TEST(pool_splits_evenly) {
  rt_pool_t* pool = rt_pool_new(3);
  range_probe_t p;
  memset(&p, 0, sizeof p);
  p.min_chunk = 1;
  p.visits = calloc(10, sizeof *p.visits);
  p.caller = pthread_self();
  rt_pool_run(pool, 0, 10, 1, probe_range, &p);
  CHECK(atomic_load(&p.calls) == 3); /* 4 + 3 + 3 */
  free(p.visits);
  /* min_chunk 4 on 10 indices: at most 2 chunks of at least 4. */
  memset(&p, 0, sizeof p);
  p.min_chunk = 4;
  p.visits = calloc(10, sizeof *p.visits);
  p.caller = pthread_self();
  rt_pool_run(pool, 0, 10, 4, probe_range, &p);
  CHECK(atomic_load(&p.calls) == 2 && atomic_load(&p.short_chunks) == 0);
  free(p.visits);
  rt_pool_free(pool);
}

static atomic_llong repeat_total;

static void add_range(void* ctx, int64_t lo, int64_t hi) {
  (void)ctx;
  atomic_fetch_add(&repeat_total, hi - lo);
}

TEST(pool_many_runs) {
  /* Back-to-back jobs exercise publishing, the spin and the sleep. */
  rt_pool_t* pool = rt_pool_new(4);
  atomic_store(&repeat_total, 0);
  long long expected = 0;
  for (int run = 0; run < 20000; run++) {
    int64_t n = 1 + run % 37;
    rt_pool_run(pool, 0, n, 1, add_range, NULL);
    expected += n;
    if (run % 5000 == 4999) usleep(2000); /* let the workers fall asleep */
  }
  CHECK(atomic_load(&repeat_total) == expected);
  rt_pool_free(pool);
}

typedef struct {
  rt_pool_t* pool;
  atomic_llong inner;
} nested_t;

static void nested_outer(void* ctx, int64_t lo, int64_t hi) {
  nested_t* n = ctx;
  for (int64_t i = lo; i < hi; i++) {
    /* The pool is busy: this runs on the calling thread, no deadlock. */
    rt_pool_run(n->pool, 0, 100, 1, add_range, NULL);
    atomic_fetch_add(&n->inner, 1);
  }
}

TEST(pool_nested_run) {
  nested_t n = {rt_pool_new(4), 0};
  rt_pool_run(n.pool, 0, 16, 1, nested_outer, &n);
  CHECK(atomic_load(&n.inner) == 16);
  rt_pool_free(n.pool);
}

typedef struct {
  pthread_mutex_t lock;
  int n;
  int64_t chunks[8][2];
} span_t;

static void record_span(void* ctx, int64_t lo, int64_t hi) {
  span_t* s = ctx;
  pthread_mutex_lock(&s->lock);
  if (s->n < 8) {
    s->chunks[s->n][0] = lo;
    s->chunks[s->n][1] = hi;
  }
  s->n++;
  pthread_mutex_unlock(&s->lock);
}

TEST(pool_sizes_and_null) {
  rt_pool_t* one = rt_pool_new(1);
  CHECK(rt_pool_size(one) == 1);
  rt_pool_free(one);

  /* 0 or less: one per online core (a context's UOPJIT_THREADS is read
   * with its other settings, tests/test_env.c) */
  rt_pool_t* fallback = rt_pool_new(-1);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  CHECK(rt_pool_size(fallback) == (cores < 1 ? 1 : cores));
  rt_pool_free(fallback);

  /* A NULL pool runs the range serially; an empty or reversed range runs
   * nothing. */
  CHECK(rt_pool_size(NULL) == 1);
  CHECK(check_one_range(NULL, 3, 50, 1));
  atomic_store(&repeat_total, 0);
  rt_pool_t* pool = rt_pool_new(2);
  rt_pool_run(pool, 10, 5, 1, add_range, NULL);
  rt_pool_run(pool, 10, 10, 1, add_range, NULL);
  CHECK(atomic_load(&repeat_total) == 0);
  /* A range spanning nearly all of int64 splits without overflow. */
  span_t span = {PTHREAD_MUTEX_INITIALIZER, 0, {{0}}};
  rt_pool_run(pool, INT64_MIN + 1, INT64_MAX, INT64_MAX / 4, record_span, &span);
  CHECK(span.n == 2);
  if (span.n == 2) {
    int first = span.chunks[0][0] < span.chunks[1][0] ? 0 : 1;
    CHECK(span.chunks[first][0] == INT64_MIN + 1);
    CHECK(span.chunks[first][1] == span.chunks[1 - first][0]);
    CHECK(span.chunks[1 - first][1] == INT64_MAX);
  }
  rt_pool_free(pool);
  rt_pool_free(NULL);
}

TEST_MAIN()
