/* rt/threads.c: the thread pool that runs CPU kernels in parallel, and the
 * process's fork bookkeeping (rt_fork_generation, rt_fork_guard); DESIGN
 * section 9, "Thread pool".
 *
 * A CPU kernel takes (begin, end) of its outermost parallel loop, so a run
 * splits the range into contiguous chunks, one per thread (rather than
 * interleaved indices): each thread's accesses stream and the kernel
 * vectorizes its share. Workers start once and sleep between jobs, so a run
 * costs a wake-up, not a thread creation; the caller runs chunk 0 and
 * claims what no worker took (rt_pool_run). Everything a worker reads about
 * a job, and each claim, is under the crew's mutex, so a worker that wakes
 * late never runs a chunk of a finished job. In a child of fork() the crew
 * inherited from the parent is never touched: a run there starts a new one
 * (crew_t, crew_of). A fork from inside a chunk is not supported: the
 * child would wait for chunks that the parent's workers were running. */
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

/* The threads of a pool and everything they share: one per process that
 * ran the pool. The child of a fork has only the thread that called fork:
 * the pool's workers are not in it, its condition variables still count the
 * parent's sleeping workers as waiters (glibc's pthread_cond_destroy would
 * wait for them forever), and its mutex may have been held by a worker at
 * the instant of the fork, in which case it stays locked in the child for
 * good. So the threads and everything they touch (the mutex, the condition
 * variables, the job, the busy flag) live in a crew of their own, which the
 * pool (what callers hold) points to, and each crew records the fork
 * generation of the process that started it (rt_fork_generation: a
 * pthread_atfork handler changes it in every child). Nothing of an
 * abandoned crew is ever locked, waited on or signalled again, so a lock a
 * vanished thread held is harmless. */
typedef struct crew {
  unsigned generation; /* rt_fork_generation() when the threads were started */
  pid_t pid;           /* getpid() then: a second check where it is cheap (freeing) */
  int nworkers;        /* threads started, the caller not included */
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
} crew_t;

struct rt_pool {
  /* Threads taking part in a run, the caller included: at most this many
   * chunks per run, whoever runs them. Fixed for the pool's life (callers
   * size per-run scratch by rt_pool_size), even where a child's new crew
   * got fewer threads. */
  int size;
  _Atomic(crew_t*) crew; /* replaced only by a run in a child of fork() */
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* ---- fork generations ---- */

static atomic_uint fork_generation;
static int atfork_registered;

/* Runs in the child of fork(), before fork returns there, while the child
 * has a single thread: nothing but an atomic add (async-signal-safe, as
 * the child side of a fork from a multi-threaded process must be). */
static void in_forked_child(void) { atomic_fetch_add_explicit(&fork_generation, 1u, memory_order_relaxed); }

/* At load, before any state that records a generation can exist, so that
 * rt_fork_generation, asked on every call, is a plain load. */
__attribute__((constructor)) static void register_atfork(void) {
  atfork_registered = pthread_atfork(NULL, NULL, in_forked_child) == 0;
}

unsigned rt_fork_generation(void) {
  /* Without the handler (pthread_atfork failed: out of memory) the pid
   * tells processes apart instead; a process never mixes the two, since
   * the choice is made once and a child inherits it. */
  return atfork_registered ? atomic_load_explicit(&fork_generation, memory_order_relaxed) : (unsigned)getpid();
}

/* ---- process-wide locks held across fork() ---- */

enum { FORK_GUARDS = 8 };
static struct {
  pthread_mutex_t* lock;
  pthread_mutex_t fresh; /* what the child's copy becomes */
} fork_guards[FORK_GUARDS];
static atomic_int fork_guard_count;
static pthread_once_t fork_guard_once = PTHREAD_ONCE_INIT;

static void guards_prepare(void) {
  int n = atomic_load_explicit(&fork_guard_count, memory_order_acquire);
  for (int i = 0; i < n; i++) pthread_mutex_lock(fork_guards[i].lock);
}
static void guards_parent(void) {
  int n = atomic_load_explicit(&fork_guard_count, memory_order_acquire);
  for (int i = n - 1; i >= 0; i--) pthread_mutex_unlock(fork_guards[i].lock);
}
/* A fresh lock, not an unlock: the child's one thread is not the thread
 * that took it (a recursive mutex would refuse), and a copy of an
 * initializer is all a mutex needs to start again. */
static void guards_child(void) {
  int n = atomic_load_explicit(&fork_guard_count, memory_order_acquire);
  for (int i = 0; i < n; i++) memcpy(fork_guards[i].lock, &fork_guards[i].fresh, sizeof fork_guards[i].fresh);
}
static void register_guards(void) { pthread_atfork(guards_prepare, guards_parent, guards_child); }

void rt_fork_guard(pthread_mutex_t* lock, const pthread_mutex_t* fresh) {
  pthread_once(&fork_guard_once, register_guards);
  int i = atomic_fetch_add_explicit(&fork_guard_count, 1, memory_order_acq_rel);
  if (i >= FORK_GUARDS) { /* a new lock's site must raise FORK_GUARDS */
    atomic_fetch_sub_explicit(&fork_guard_count, 1, memory_order_acq_rel);
    return;
  }
  fork_guards[i].lock = lock;
  fork_guards[i].fresh = *fresh;
}

/* ---- a crew: the threads and what they share ---- */

/* Chunk i of the current job as [*lo, *hi). Called with the lock held. */
static void chunk_bounds(const crew_t* c, int i, int64_t* lo, int64_t* hi) {
  uint64_t ui = (uint64_t)i;
  uint64_t start = ui * c->chunk_base + (ui < c->chunk_rem ? ui : c->chunk_rem);
  uint64_t len = c->chunk_base + (ui < c->chunk_rem ? 1 : 0);
  /* Unsigned arithmetic: begin + start may pass through values that would
   * overflow int64 in between (a range spanning most of int64). */
  *lo = (int64_t)((uint64_t)c->begin + start);
  *hi = (int64_t)((uint64_t)c->begin + start + len);
}

/* Claims and runs chunks of the current job until none is left. Called with
 * the lock held; returns with it held. */
static void run_unclaimed_chunks(crew_t* c) {
  while (!c->stopping && c->next_chunk < c->nchunks) {
    int i = c->next_chunk++;
    rt_range_fn fn = c->fn;
    void* fn_ctx = c->fn_ctx;
    int64_t lo, hi;
    chunk_bounds(c, i, &lo, &hi);
    pthread_mutex_unlock(&c->lock);
    fn(fn_ctx, lo, hi);
    pthread_mutex_lock(&c->lock);
    if (atomic_fetch_add(&c->finished, 1) + 1 == c->nchunks) pthread_cond_broadcast(&c->job_done);
  }
}

static void* worker_main(void* arg) {
  crew_t* c = arg;
  pthread_mutex_lock(&c->lock);
  for (;;) {
    run_unclaimed_chunks(c);
    if (c->stopping) break;
    /* Idle: spin a little for the next job, then sleep. The serial is
     * re-read under the lock before waiting, and jobs are published under
     * the lock, so a job published during the spin is never missed. */
    unsigned seen = atomic_load(&c->job_serial);
    pthread_mutex_unlock(&c->lock);
    for (int spin = 0;
         spin < RT_POOL_SPIN && atomic_load_explicit(&c->job_serial, memory_order_relaxed) == seen; spin++)
      cpu_relax();
    pthread_mutex_lock(&c->lock);
    if (!c->stopping && atomic_load(&c->job_serial) == seen) pthread_cond_wait(&c->job_ready, &c->lock);
  }
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

/* Stops and joins the crew's workers and frees it: only for a crew of this
 * process (crew_mine). */
static void crew_free(crew_t* c) {
  if (!c) return;
  pthread_mutex_lock(&c->lock);
  c->stopping = 1;
  pthread_cond_broadcast(&c->job_ready);
  pthread_mutex_unlock(&c->lock);
  for (int i = 0; i < c->nworkers; i++) pthread_join(c->workers[i], NULL);
  free(c->workers);
  pthread_cond_destroy(&c->job_done);
  pthread_cond_destroy(&c->job_ready);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

/* A crew inherited through fork(): its threads are not in this process.
 * Joining them, or destroying its condition variables (which count the
 * parent's sleeping workers as waiters), would block forever, and its
 * mutex may be held by a thread that no longer exists, so none of them is
 * touched: no pthread call at all, only the memory goes back. (A mutex or
 * condition variable that is never destroyed holds no resource beyond its
 * memory in a process-private pthread implementation such as glibc's or
 * musl's; the vanished threads' stacks were reclaimed by the C library in
 * the child.) */
static void crew_abandon(crew_t* c) {
  if (!c) return;
  free(c->workers);
  free(c);
}

/* 1 when c's threads were started by this process (the cheap test: the
 * fork generation; a run makes it each time). */
static int crew_mine(const crew_t* c) { return c->generation == rt_fork_generation(); }

/* A crew with up to `workers` threads besides the caller (fewer when the
 * system refuses some: a crew with fewer threads than asked for still
 * works, the caller running the chunks nobody took). NULL when out of
 * memory, with *why saying what could not be made; the error is left to
 * the caller, since a run that rebuilds a crew must not set one. */
static crew_t* crew_new(int workers, const char** why) {
  crew_t* c = calloc(1, sizeof *c);
  if (!c) {
    *why = "the pool's state";
    return NULL;
  }
  c->generation = rt_fork_generation();
  c->pid = getpid();
  if (pthread_mutex_init(&c->lock, NULL) != 0) {
    free(c);
    *why = "a mutex";
    return NULL;
  }
  if (pthread_cond_init(&c->job_ready, NULL) != 0) {
    pthread_mutex_destroy(&c->lock);
    free(c);
    *why = "a condition variable";
    return NULL;
  }
  if (pthread_cond_init(&c->job_done, NULL) != 0) {
    pthread_cond_destroy(&c->job_ready);
    pthread_mutex_destroy(&c->lock);
    free(c);
    *why = "a condition variable";
    return NULL;
  }
  atomic_init(&c->finished, 0);
  atomic_init(&c->job_serial, 0u);
  atomic_init(&c->busy, 0);

  if (workers > 0) {
    c->workers = calloc((size_t)workers, sizeof *c->workers);
    if (!c->workers) {
      crew_free(c);
      *why = "the worker handles";
      return NULL;
    }
    for (int i = 0; i < workers; i++) {
      if (pthread_create(&c->workers[i], NULL, worker_main, c) != 0) break;
      c->nworkers++;
    }
  }
  return c;
}

/* The crew of this process for p: the one it has, or, in a child of fork()
 * whose pool still points to the parent's (a crew from another
 * generation), a new one with the pool's thread count, swapped in; the
 * parent's is abandoned (crew_abandon). NULL (the run goes serial, and the
 * next one tries again) when a new crew cannot be made. */
static crew_t* crew_of(rt_pool_t* p) {
  crew_t* c = atomic_load_explicit(&p->crew, memory_order_acquire);
  if (c && crew_mine(c)) return c;
  const char* why;
  crew_t* fresh = crew_new(p->size - 1, &why);
  if (!fresh) return NULL;
  /* Several threads of the child may get here at once: one swaps its crew
   * in, the others free theirs (of this process, so freed normally) and
   * take the winner's. */
  if (atomic_compare_exchange_strong_explicit(&p->crew, &c, fresh, memory_order_acq_rel, memory_order_acquire)) {
    crew_abandon(c);
    return fresh;
  }
  crew_free(fresh);
  return c && crew_mine(c) ? c : NULL;
}

/* ---- the pool ---- */

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
  const char* why;
  crew_t* c = crew_new(nthreads - 1, &why);
  if (!c) {
    free(p);
    rt_error(UJ_ERR_OOM, "rt_pool_new: out of memory creating %s for %d threads", why, nthreads);
    return NULL;
  }
  /* Keep the workers the system gives us: a pool with fewer threads than
   * asked for is still a working pool. */
  p->size = c->nworkers + 1;
  atomic_init(&p->crew, c);
  return p;
}

void rt_pool_free(rt_pool_t* p) {
  if (!p) return;
  crew_t* c = atomic_load_explicit(&p->crew, memory_order_acquire);
  /* The pid as well as the generation: freeing is rare enough for the
   * system call, and it catches a child made without fork() handlers
   * (a raw clone, _Fork). */
  if (c && crew_mine(c) && c->pid == getpid()) crew_free(c);
  else crew_abandon(c);
  free(p);
}

int rt_pool_size(const rt_pool_t* p) { return p ? p->size : 1; }

/* The caller takes part: it runs chunk 0 itself and then claims any chunk
 * no worker has taken yet, so a pool of n threads starts n-1 workers and a
 * pool of 1 starts none. A pool serves one caller at a time; a call that
 * finds the pool busy (from another thread, or nested from inside a chunk)
 * runs its whole range on the calling thread, which is always correct, only
 * slower. Because kernels often come in quick succession, an idle worker
 * first spins briefly on the job counter before going to sleep, and the
 * caller spins briefly before sleeping on completion; both spins are
 * bounded, so an idle pool uses no CPU. */
void rt_pool_run(rt_pool_t* p, int64_t begin, int64_t end, int64_t min_chunk, rt_range_fn fn, void* ctx) {
  if (!fn || end <= begin) return;
  if (min_chunk < 1) min_chunk = 1;
  uint64_t n = (uint64_t)end - (uint64_t)begin;

  /* How many chunks: at most one per thread, each at least min_chunk long. */
  uint64_t nchunks = n / (uint64_t)min_chunk;
  if (p && nchunks > (uint64_t)p->size) nchunks = (uint64_t)p->size;
  crew_t* c = p && nchunks >= 2 ? crew_of(p) : NULL;
  if (!c) {
    fn(ctx, begin, end);
    return;
  }
  int expected = 0;
  if (!atomic_compare_exchange_strong(&c->busy, &expected, 1)) {
    fn(ctx, begin, end); /* busy: nested or concurrent use */
    return;
  }

  pthread_mutex_lock(&c->lock);
  c->fn = fn;
  c->fn_ctx = ctx;
  c->begin = begin;
  c->chunk_base = n / nchunks;
  c->chunk_rem = n % nchunks;
  c->nchunks = (int)nchunks;
  c->next_chunk = 1; /* chunk 0 is the caller's */
  atomic_store(&c->finished, 0);
  atomic_fetch_add(&c->job_serial, 1u);
  pthread_cond_broadcast(&c->job_ready);
  int64_t lo, hi;
  chunk_bounds(c, 0, &lo, &hi);
  pthread_mutex_unlock(&c->lock);

  fn(ctx, lo, hi);

  pthread_mutex_lock(&c->lock);
  atomic_fetch_add(&c->finished, 1);
  run_unclaimed_chunks(c); /* whatever the workers have not picked up yet */
  if (atomic_load(&c->finished) < c->nchunks) {
    pthread_mutex_unlock(&c->lock);
    for (int spin = 0; spin < RT_POOL_SPIN && atomic_load(&c->finished) < c->nchunks; spin++) cpu_relax();
    pthread_mutex_lock(&c->lock);
    while (atomic_load(&c->finished) < c->nchunks) pthread_cond_wait(&c->job_done, &c->lock);
  }
  pthread_mutex_unlock(&c->lock);
  atomic_store(&c->busy, 0);
}
