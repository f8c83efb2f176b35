/* bench/traffic.c: the traffic-matched copy kernel, each workload's memory
 * limit. It reads exactly the arrays a workload reads and writes exactly
 * the arrays it writes, each once per element, in place where the workload
 * is in place, with no arithmetic: every output element is the XOR of the
 * bits of the inputs' elements (one integer instruction per input, so that
 * no load can be dropped as dead). Whatever the hardware does for that
 * traffic (write-allocate reads of the outputs' lines, the prefetchers) it
 * does for the workload too, so a kernel's time over this one's is the
 * fraction of the reachable bandwidth it gets; STREAM's byte counts, which
 * leave write-allocate out, are not (see stream.c).
 *
 * The loop takes eight elements at a time: every input's lanes loaded and
 * XORed, then stored to every output, so the inputs of an element are all
 * read before an in-place output overwrites one. On several
 * threads the elements are taken in chunks (an eighth of a thread's share)
 * by threads kept between calls.
 * The Makefile compiles this file with -O3 -march=native. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { BLOCK = 1024, MAX_THREADS = 64, LANES = 8 };

/* Eight 4-byte lanes loaded and stored whole: explicit vectors, so that an
 * in-place output (the same pointer as an input) costs no fallback to
 * scalar code, which the compiler's overlap checks would take. aligned(4):
 * the arrays need not be 32-byte aligned. */
typedef uint32_t lanes_t __attribute__((vector_size(LANES * sizeof(uint32_t)), aligned(4)));

/* Keeps the XOR of outputs that nobody stores (a workload with no
 * per-element output, as a sum), so its loads stay. */
static volatile uint32_t traffic_sink;

/* The copy of [begin, end) with `reads` inputs and `writes` outputs; always
 * inlined with constant counts, so each case gets its own loop with the
 * inner loops unrolled and everything in registers. */
static inline __attribute__((always_inline)) void copy_fixed(const traffic_t* t, int64_t begin, int64_t end,
                                                             const int reads, const int writes) {
  const uint32_t* in[BENCH_MAX_IO];
  uint32_t* out[BENCH_MAX_IO];
  for (int r = 0; r < reads; r++) in[r] = t->reads[r];
  for (int w = 0; w < writes; w++) out[w] = t->writes[w];
  lanes_t fold = {0};
  int64_t i = begin;
  for (; i + LANES <= end; i += LANES) {
    lanes_t x = *(const lanes_t*)(in[0] + i);
    for (int r = 1; r < reads; r++) x ^= *(const lanes_t*)(in[r] + i);
    for (int w = 0; w < writes; w++) *(lanes_t*)(out[w] + i) = x;
    if (writes == 0) fold ^= x;
  }
  uint32_t tail_fold = 0;
  for (; i < end; i++) {
    uint32_t x = in[0][i];
    for (int r = 1; r < reads; r++) x ^= in[r][i];
    for (int w = 0; w < writes; w++) out[w][i] = x;
    tail_fold ^= x;
  }
  if (writes == 0) {
    for (int k = 0; k < LANES; k++) tail_fold ^= fold[k];
    traffic_sink ^= tail_fold;
  }
}

/* The general case, for counts no workload has yet: the XOR of a block of
 * inputs in a buffer, then each output's block stored from it. */
static void copy_blocks(const traffic_t* t, int64_t begin, int64_t end) {
  uint32_t block[BLOCK], fold = 0;
  for (int64_t start = begin; start < end; start += BLOCK) {
    int64_t count = end - start < BLOCK ? end - start : BLOCK;
    const uint32_t* first = (const uint32_t*)t->reads[0] + start;
    for (int64_t i = 0; i < count; i++) block[i] = first[i];
    for (int r = 1; r < t->nreads; r++) {
      const uint32_t* in = (const uint32_t*)t->reads[r] + start;
      for (int64_t i = 0; i < count; i++) block[i] ^= in[i];
    }
    for (int w = 0; w < t->nwrites; w++) {
      uint32_t* out = (uint32_t*)t->writes[w] + start;
      for (int64_t i = 0; i < count; i++) out[i] = block[i];
    }
    if (t->nwrites == 0)
      for (int64_t i = 0; i < count; i++) fold ^= block[i];
  }
  traffic_sink ^= fold;
}

static void copy_part(const traffic_t* t, int64_t begin, int64_t end) {
  switch (t->nreads * 16 + t->nwrites) {
    case 1 * 16 + 0: copy_fixed(t, begin, end, 1, 0); break;
    case 1 * 16 + 1: copy_fixed(t, begin, end, 1, 1); break;
    case 2 * 16 + 1: copy_fixed(t, begin, end, 2, 1); break;
    case 3 * 16 + 1: copy_fixed(t, begin, end, 3, 1); break;
    case 4 * 16 + 3: copy_fixed(t, begin, end, 4, 3); break;
    default: copy_blocks(t, begin, end);
  }
}

/* The helper threads, kept between calls (as the JIT engines keep their
 * pool), so that a call costs no thread start: `size` threads in all, the
 * caller being the first; each round starts and ends at a barrier. */
static struct {
  int size;
  pthread_t ids[MAX_THREADS];
  pthread_barrier_t start, finish;
  const traffic_t* job; /* NULL: stop */
} pool;

/* The next chunk of the current job; threads take chunks until none is
 * left, so that a thread the machine holds back (another process on its
 * core) leaves its share to the others rather than making every call wait
 * for it, as the JIT engines' pool does. */
static _Atomic int64_t next_chunk;

static void run_share(const traffic_t* t, int index, int threads) {
  (void)index;
  int64_t chunk = t->n / (8 * threads);
  chunk = chunk < 16 * BLOCK ? 16 * BLOCK : chunk / BLOCK * BLOCK;
  for (;;) {
    int64_t begin = atomic_fetch_add(&next_chunk, chunk);
    if (begin >= t->n) return;
    copy_part(t, begin, begin + chunk < t->n ? begin + chunk : t->n);
  }
}

static void* pool_main(void* arg) {
  int index = (int)(intptr_t)arg;
  for (;;) {
    pthread_barrier_wait(&pool.start);
    const traffic_t* job = pool.job;
    if (!job) return NULL;
    run_share(job, index, pool.size);
    pthread_barrier_wait(&pool.finish);
  }
}

static void pool_stop(void) {
  if (pool.size <= 1) return;
  pool.job = NULL;
  pthread_barrier_wait(&pool.start);
  for (int k = 1; k < pool.size; k++) pthread_join(pool.ids[k], NULL);
  pthread_barrier_destroy(&pool.start);
  pthread_barrier_destroy(&pool.finish);
  pool.size = 1;
}

/* Makes the pool `threads` strong. A thread that cannot start ends the
 * program, as in stream.c: the ones started wait at a barrier that can no
 * longer fill. */
static void pool_resize(int threads) {
  if (pool.size == threads) return;
  pool_stop();
  pool.size = 1;
  if (threads <= 1) return;
  pthread_barrier_init(&pool.start, NULL, (unsigned)threads);
  pthread_barrier_init(&pool.finish, NULL, (unsigned)threads);
  for (int k = 1; k < threads; k++)
    if (pthread_create(&pool.ids[k], NULL, pool_main, (void*)(intptr_t)k) != 0) {
      fprintf(stderr, "bench: the copy kernel could not start %d threads\n", threads);
      exit(1);
    }
  pool.size = threads;
}

int traffic_copy(const traffic_t* t) {
  if (t->nreads < 1 || t->n < 1) return -1;
  int threads = t->threads < 1 ? 1 : t->threads > MAX_THREADS ? MAX_THREADS : t->threads;
  if (threads == 1 || t->n < (int64_t)threads * BLOCK) {
    copy_part(t, 0, t->n);
    return 0;
  }
  pool_resize(threads);
  atomic_store(&next_chunk, 0);
  pool.job = t;
  pthread_barrier_wait(&pool.start);
  run_share(t, 0, threads);
  pthread_barrier_wait(&pool.finish);
  return 0;
}
