/* bench/groups_copy.c: the memory-traffic limit of an optimizer step over a
 * list of tensors: a loop that moves the step's bytes and computes nothing
 * worth the name (reads p, g, m and v, writes p, m and v: p += g, m += g,
 * v += g), over the same tensors, split across threads by elements as
 * multi-tensor execution splits them (each thread one contiguous run of the
 * concatenated elements). The Makefile compiles it with -O3 -march=native,
 * as bench/stream.c, so the loop is as fast as the compiler makes it. */
#include <pthread.h>

#include "bench.h"

typedef struct {
  float* const* p;
  float* const* g;
  float* const* m;
  float* const* v;
  const int64_t* numel;
  int count;
  int64_t lo, hi; /* elements of the concatenation */
} copy_part_t;

static void copy_tensor(float* restrict p, const float* restrict g, float* restrict m, float* restrict v, int64_t lo,
                        int64_t hi) {
  for (int64_t i = lo; i < hi; i++) {
    float x = g[i];
    p[i] += x;
    m[i] += x;
    v[i] += x;
  }
}

static void* copy_part(void* arg) {
  const copy_part_t* c = arg;
  int64_t base = 0;
  for (int t = 0; t < c->count && base < c->hi; base += c->numel[t], t++) {
    int64_t lo = c->lo > base ? c->lo - base : 0, hi = c->hi - base < c->numel[t] ? c->hi - base : c->numel[t];
    if (hi > lo) copy_tensor(c->p[t], c->g[t], c->m[t], c->v[t], lo, hi);
  }
  return NULL;
}

double groups_copy_ns(float* const* p, float* const* g, float* const* m, float* const* v, const int64_t* numel,
                      int count, int threads, int repetitions) {
  enum { MAX_THREADS = 64, MAX_REPS = 64 };
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  if (repetitions > MAX_REPS) repetitions = MAX_REPS;
  int64_t total = 0;
  for (int t = 0; t < count; t++) total += numel[t];
  copy_part_t parts[MAX_THREADS];
  for (int k = 0; k < threads; k++)
    parts[k] = (copy_part_t){p, g, m, v, numel, count, total * k / threads, total * (k + 1) / threads};
  double times[MAX_REPS];
  for (int r = 0; r < repetitions; r++) {
    pthread_t tid[MAX_THREADS];
    double t0 = bench_now_ns();
    int started[MAX_THREADS] = {0};
    for (int k = 1; k < threads; k++) started[k] = pthread_create(&tid[k], NULL, copy_part, &parts[k]) == 0;
    copy_part(&parts[0]);
    for (int k = 1; k < threads; k++)
      if (started[k]) pthread_join(tid[k], NULL);
      else copy_part(&parts[k]); /* no thread for it: this one does its part */
    times[r] = bench_now_ns() - t0;
  }
  return bench_median(times, repetitions);
}
