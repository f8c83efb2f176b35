/* bench/stream.c: the machine's memory bandwidth, measured in the same run
 * as the kernels so that ratios to it mean something on a shared or noisy
 * machine. STREAM's copy (c[i] = a[i]) and triad (a[i] = b[i] + q*c[i])
 * kernels over arrays of doubles, split into one contiguous chunk per
 * thread; each thread first-touches its own chunk, as STREAM's OpenMP
 * version does.
 *
 * Bytes are counted as STREAM counts them: 2 words per element for copy, 3
 * for triad, with no write-allocate traffic (the stores' destination lines
 * are read too, but not counted). Every repetition is timed from a barrier
 * that releases all threads to the barrier where the last one finishes; the
 * median and the fastest repetition (STREAM's figure) are both kept. The
 * Makefile compiles this file with -O3 -march=native and without gcc's
 * rewriting of the copy loop into memcpy (which may use non-temporal stores
 * and so measure something else). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

enum { KERNEL_INIT, KERNEL_COPY, KERNEL_TRIAD, KERNEL_STOP };

typedef struct {
  double *a, *b, *c;
  int64_t length;
  int threads;
  int kernel; /* what the next round runs; written by thread 0 between rounds */
  pthread_barrier_t start, finish;
} stream_team_t;

typedef struct {
  stream_team_t* team;
  int index;
} stream_worker_t;

static void run_chunk(stream_team_t* t, int index) {
  int64_t lo = t->length * index / t->threads, hi = t->length * (index + 1) / t->threads;
  double *a = t->a, *b = t->b, *c = t->c;
  const double q = 3.0;
  switch (t->kernel) {
    case KERNEL_INIT:
      for (int64_t i = lo; i < hi; i++) a[i] = 1.0, b[i] = 2.0, c[i] = 0.0;
      break;
    case KERNEL_COPY:
      for (int64_t i = lo; i < hi; i++) c[i] = a[i];
      break;
    case KERNEL_TRIAD:
      for (int64_t i = lo; i < hi; i++) a[i] = b[i] + q * c[i];
      break;
  }
}

static void* worker_main(void* arg) {
  stream_worker_t* w = arg;
  for (;;) {
    pthread_barrier_wait(&w->team->start);
    if (w->team->kernel == KERNEL_STOP) return NULL;
    run_chunk(w->team, w->index);
    pthread_barrier_wait(&w->team->finish);
  }
}

/* One round of `kernel` on every thread; thread 0 is the caller. Returns
 * the round's wall time in nanoseconds. */
static double round_ns(stream_team_t* t, int kernel) {
  t->kernel = kernel;
  double start = bench_now_ns();
  pthread_barrier_wait(&t->start);
  run_chunk(t, 0);
  pthread_barrier_wait(&t->finish);
  return bench_now_ns() - start;
}

int stream_measure(int threads, int64_t length, int repetitions, stream_result_t* out) {
  enum { MAX_THREADS = 64 };
  if (threads < 1 || threads > MAX_THREADS || repetitions < 1) return -1;
  stream_team_t team = {.length = length, .threads = threads};
  team.a = malloc((size_t)length * sizeof(double));
  team.b = malloc((size_t)length * sizeof(double));
  team.c = malloc((size_t)length * sizeof(double));
  double* copy_ns = malloc((size_t)repetitions * sizeof(double));
  double* triad_ns = malloc((size_t)repetitions * sizeof(double));
  if (!team.a || !team.b || !team.c || !copy_ns || !triad_ns) {
    fprintf(stderr, "bench: no memory for STREAM arrays of %lld doubles\n", (long long)length);
    free(team.a), free(team.b), free(team.c), free(copy_ns), free(triad_ns);
    return -1;
  }
  pthread_barrier_init(&team.start, NULL, (unsigned)threads);
  pthread_barrier_init(&team.finish, NULL, (unsigned)threads);
  pthread_t ids[MAX_THREADS];
  stream_worker_t workers[MAX_THREADS];
  for (int i = 1; i < threads; i++) {
    workers[i] = (stream_worker_t){&team, i};
    if (pthread_create(&ids[i], NULL, worker_main, &workers[i]) != 0) {
      /* the threads already started wait for a full barrier that can no
       * longer fill: nothing to do but stop */
      fprintf(stderr, "bench: STREAM could not start %d threads\n", threads);
      exit(1);
    }
  }
  round_ns(&team, KERNEL_INIT);
  round_ns(&team, KERNEL_COPY); /* a warm-up round of each */
  round_ns(&team, KERNEL_TRIAD);
  for (int r = 0; r < repetitions; r++) {
    copy_ns[r] = round_ns(&team, KERNEL_COPY);
    triad_ns[r] = round_ns(&team, KERNEL_TRIAD);
  }
  team.kernel = KERNEL_STOP;
  pthread_barrier_wait(&team.start);
  for (int i = 1; i < threads; i++) pthread_join(ids[i], NULL);
  pthread_barrier_destroy(&team.start);
  pthread_barrier_destroy(&team.finish);

  double copy_bytes = 2.0 * sizeof(double) * (double)length, triad_bytes = 3.0 * sizeof(double) * (double)length;
  double copy_best = copy_ns[0], triad_best = triad_ns[0];
  for (int r = 1; r < repetitions; r++) {
    if (copy_ns[r] < copy_best) copy_best = copy_ns[r];
    if (triad_ns[r] < triad_best) triad_best = triad_ns[r];
  }
  out->copy_gbs = copy_bytes / bench_median(copy_ns, repetitions);
  out->triad_gbs = triad_bytes / bench_median(triad_ns, repetitions);
  out->copy_best_gbs = copy_bytes / copy_best;
  out->triad_best_gbs = triad_bytes / triad_best;
  free(team.a), free(team.b), free(team.c), free(copy_ns), free(triad_ns);
  return 0;
}
