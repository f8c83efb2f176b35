/* rt/threads.c: the thread pool that runs CPU kernels in parallel.
 *
 * A CPU kernel takes (begin, end) of its outermost parallel loop, so running
 * one in parallel only needs a range split into contiguous chunks, one per
 * thread. Contiguous chunks (rather than interleaved indices) keep each
 * thread's memory accesses streaming and let the kernel vectorize its share.
 *
 * Workers are started once and sleep on a condition variable between jobs,
 * so a run costs a wake-up rather than a thread creation. Everything a worker
 * reads about a job (the function, the chunk layout, which chunk is next) is
 * read under the pool's mutex, and chunks are claimed under it too, so a
 * worker that wakes late can never run a chunk of a job that has finished.
 * Because kernels often come in quick succession, an idle worker first spins
 * briefly on the job counter before going to sleep, and the caller spins
 * briefly before sleeping on completion; both spins are bounded, so an idle
 * pool uses no CPU.
 *
 * The caller takes part: it runs chunk 0 itself and then claims any chunk no
 * worker has taken yet, so a pool of n threads starts n-1 workers and a pool
 * of 1 starts none. A pool serves one caller at a time; a call that finds the
 * pool busy (from another thread, or nested from inside a chunk) runs its
 * whole range on the calling thread, which is always correct, only slower. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"

/* Upper bound on threads (rt.h). */
#define RT_POOL_MAX_THREADS RT_MAX_THREADS
/* Iterations of the bounded spins (each one CPU relax instruction): a few
 * microseconds, enough to catch a kernel launched right after the last. */
#define RT_POOL_SPIN 2000

struct rt_pool {
  int size;     /* threads taking part in a run, the caller included */
  int nworkers; /* size - 1 */
  pthread_t* workers;

  pthread_mutex_t lock;
  pthread_cond_t job_ready; /* signalled when a job is published or on stop */
  pthread_cond_t job_done;  /* signalled when a chunk finishes */

  /* The current job; written by the caller and read by workers under lock. */
  rt_range_fn fn;
  void* fn_ctx;
  int64_t begin;
  uint64_t chunk_base; /* every chunk has chunk_base indices ... */
  uint64_t chunk_rem;  /* ... and the first chunk_rem one more */
  int nchunks;
  int next_chunk;         /* the next chunk nobody has claimed */
  atomic_int finished;    /* chunks done; changed under lock, read for the spin */
  atomic_uint job_serial; /* bumped per job, changed under lock, read for the spin */
  int stopping;

  atomic_int busy; /* a run is in progress (guards against concurrent or nested use) */
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Chunk i of the current job as [*lo, *hi). Called with the lock held. */
static void chunk_bounds(const rt_pool_t* p, int i, int64_t* lo, int64_t* hi) {
  uint64_t ui = (uint64_t)i;
  uint64_t start = ui * p->chunk_base + (ui < p->chunk_rem ? ui : p->chunk_rem);
  uint64_t len = p->chunk_base + (ui < p->chunk_rem ? 1 : 0);
  /* Unsigned arithmetic: begin + start may pass through values that would
   * overflow int64 in between (a range spanning most of int64). */
  *lo = (int64_t)((uint64_t)p->begin + start);
  *hi = (int64_t)((uint64_t)p->begin + start + len);
}

/* Claims and runs chunks of the current job until none is left. Called with
 * the lock held; returns with it held. */
static void run_unclaimed_chunks(rt_pool_t* p) {
  while (!p->stopping && p->next_chunk < p->nchunks) {
    int i = p->next_chunk++;
    rt_range_fn fn = p->fn;
    void* fn_ctx = p->fn_ctx;
    int64_t lo, hi;
    chunk_bounds(p, i, &lo, &hi);
    pthread_mutex_unlock(&p->lock);
    fn(fn_ctx, lo, hi);
    pthread_mutex_lock(&p->lock);
    if (atomic_fetch_add(&p->finished, 1) + 1 == p->nchunks) pthread_cond_broadcast(&p->job_done);
  }
}

static void* worker_main(void* arg) {
  rt_pool_t* p = arg;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    run_unclaimed_chunks(p);
    if (p->stopping) break;
    /* Idle: spin a little for the next job, then sleep. The serial is
     * re-read under the lock before waiting, and jobs are published under
     * the lock, so a job published during the spin is never missed. */
    unsigned seen = atomic_load(&p->job_serial);
    pthread_mutex_unlock(&p->lock);
    for (int spin = 0;
         spin < RT_POOL_SPIN && atomic_load_explicit(&p->job_serial, memory_order_relaxed) == seen; spin++)
      cpu_relax();
    pthread_mutex_lock(&p->lock);
    if (!p->stopping && atomic_load(&p->job_serial) == seen) pthread_cond_wait(&p->job_ready, &p->lock);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

static int online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) return 1;
  return n > RT_POOL_MAX_THREADS ? RT_POOL_MAX_THREADS : (int)n;
}

rt_pool_t* rt_pool_new(int nthreads) {
  if (nthreads <= 0) nthreads = online_cores();
  if (nthreads > RT_POOL_MAX_THREADS) nthreads = RT_POOL_MAX_THREADS;

  rt_pool_t* p = calloc(1, sizeof *p);
  if (!p) {
    rt_error(UJ_ERR_OOM, "rt_pool_new: out of memory allocating the thread pool (%zu bytes)", sizeof *p);
    return NULL;
  }
  if (pthread_mutex_init(&p->lock, NULL) != 0) {
    free(p);
    rt_error(UJ_ERR_OOM, "rt_pool_new: cannot create a mutex");
    return NULL;
  }
  if (pthread_cond_init(&p->job_ready, NULL) != 0) {
    pthread_mutex_destroy(&p->lock);
    free(p);
    rt_error(UJ_ERR_OOM, "rt_pool_new: cannot create a condition variable");
    return NULL;
  }
  if (pthread_cond_init(&p->job_done, NULL) != 0) {
    pthread_cond_destroy(&p->job_ready);
    pthread_mutex_destroy(&p->lock);
    free(p);
    rt_error(UJ_ERR_OOM, "rt_pool_new: cannot create a condition variable");
    return NULL;
  }
  atomic_init(&p->finished, 0);
  atomic_init(&p->job_serial, 0u);
  atomic_init(&p->busy, 0);

  if (nthreads > 1) {
    p->workers = calloc((size_t)(nthreads - 1), sizeof *p->workers);
    if (!p->workers) {
      rt_pool_free(p);
      rt_error(UJ_ERR_OOM, "rt_pool_new: out of memory allocating %d worker handles (%zu bytes)", nthreads - 1,
               (size_t)(nthreads - 1) * sizeof *p->workers);
      return NULL;
    }
    /* Keep the workers the system gives us: a pool with fewer threads
     * than asked for is still a working pool. */
    for (int i = 0; i < nthreads - 1; i++) {
      if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) break;
      p->nworkers++;
    }
  }
  p->size = p->nworkers + 1;
  return p;
}

void rt_pool_free(rt_pool_t* p) {
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  p->stopping = 1;
  pthread_cond_broadcast(&p->job_ready);
  pthread_mutex_unlock(&p->lock);
  for (int i = 0; i < p->nworkers; i++) pthread_join(p->workers[i], NULL);
  free(p->workers);
  pthread_cond_destroy(&p->job_done);
  pthread_cond_destroy(&p->job_ready);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

int rt_pool_size(const rt_pool_t* p) { return p ? p->size : 1; }

void rt_pool_run(rt_pool_t* p, int64_t begin, int64_t end, int64_t min_chunk, rt_range_fn fn, void* ctx) {
  if (!fn || end <= begin) return;
  if (min_chunk < 1) min_chunk = 1;
  uint64_t n = (uint64_t)end - (uint64_t)begin;

  /* How many chunks: at most one per thread, each at least min_chunk long. */
  uint64_t nchunks = n / (uint64_t)min_chunk;
  if (p && nchunks > (uint64_t)p->size) nchunks = (uint64_t)p->size;
  if (!p || nchunks < 2) {
    fn(ctx, begin, end);
    return;
  }
  int expected = 0;
  if (!atomic_compare_exchange_strong(&p->busy, &expected, 1)) {
    fn(ctx, begin, end); /* busy: nested or concurrent use */
    return;
  }

  pthread_mutex_lock(&p->lock);
  p->fn = fn;
  p->fn_ctx = ctx;
  p->begin = begin;
  p->chunk_base = n / nchunks;
  p->chunk_rem = n % nchunks;
  p->nchunks = (int)nchunks;
  p->next_chunk = 1; /* chunk 0 is the caller's */
  atomic_store(&p->finished, 0);
  atomic_fetch_add(&p->job_serial, 1u);
  pthread_cond_broadcast(&p->job_ready);
  int64_t lo, hi;
  chunk_bounds(p, 0, &lo, &hi);
  pthread_mutex_unlock(&p->lock);

  fn(ctx, lo, hi);

  pthread_mutex_lock(&p->lock);
  atomic_fetch_add(&p->finished, 1);
  run_unclaimed_chunks(p); /* whatever the workers have not picked up yet */
  if (atomic_load(&p->finished) < p->nchunks) {
    pthread_mutex_unlock(&p->lock);
    for (int spin = 0; spin < RT_POOL_SPIN && atomic_load(&p->finished) < p->nchunks; spin++) cpu_relax();
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->finished) < p->nchunks) pthread_cond_wait(&p->job_done, &p->lock);
  }
  pthread_mutex_unlock(&p->lock);
  atomic_store(&p->busy, 0);
}
