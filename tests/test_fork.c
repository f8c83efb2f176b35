/* tests/test_fork.c: contexts and thread pools across fork().
 *
 * fork() copies only the calling thread: a context whose thread pool has
 * workers leaves the child a pool whose workers do not exist, whose
 * condition variables count waiters that will never wake, and whose mutex
 * may be held by a vanished thread. Python code that calls a kernel and
 * then os.fork()s (multiprocessing's default start method on Linux) runs
 * into exactly that. The pool must notice it is in a new process: freeing
 * the context in the child must not wait for or join the parent's workers,
 * and the child's first parallel run must start a pool of its own with the
 * same thread count.
 *
 * - fork_child_runs_compiles_and_frees: on each CPU JIT engine (MIR, C), a
 *   parallel run, fork; the child runs the kernel again (right result, on
 *   a fresh pool with the parent's thread count), compiles and runs a
 *   kernel new to the process, frees the context, exits 0; the parent goes
 *   on using its own context (the old kernel and a new one) after the fork.
 * - fork_child_only_frees: a child that only frees the context.
 * - fork_child_changes_threads: uj_ctx_set_threads in the child (replaces a
 *   pool inherited from the parent), then a run and a free.
 * - fork_grandchild: a child that has rebuilt its pool forks again.
 * - fork_while_another_thread_runs_the_pool: rt-level; another thread is in
 *   the middle of a run (its workers inside chunks, the pool busy, its
 *   mutex taken and released all the time) when the main thread forks; the
 *   child's run must neither wait for that run nor touch its locks, and
 *   must still be split over new workers.
 * - fork_idle_pool_free_in_child: rt-level; an idle pool freed in the child.
 *
 * - fork_tiered_child_runs_compiles_and_frees: the same under AUTO, tiered,
 *   the fork right after the first call has queued a background C compile.
 *
 * A child that hangs is the bug this file tests for, so a hang must fail
 * rather than block the suite: every child arms alarm() first (its
 * handler prints where the child hung and exits), and the parent waits
 * with a deadline of its own and kills the child past it. Children leave with _exit: exit() would run the harness's
 * and the sanitizers' exit-time work a second time. */
#include <dirent.h>
#include <execinfo.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../include/uopjit.h"
#include "../jit/jit.h"
#include "../jit/tier.h"
#include "../rt/rt.h"
#include "harness.h"
#if HARNESS_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

/* ThreadSanitizer cannot follow a child of a multi-threaded fork that
 * starts threads: by default it kills such a child, and with
 * die_after_fork=0 (gcc 12, clang 14) it still aborts at the child's first
 * pthread_create ("dup thread with used id": its registry keeps the
 * vanished threads, whose handles the C library hands out again). That is
 * so for any program, so under TSan the tests whose children start threads
 * are skipped; those whose children only free still run. */
#if HARNESS_TSAN
#define SKIP_UNDER_TSAN() SKIP_IF(1, "the child starts threads, which ThreadSanitizer cannot follow after a fork")
#else
#define SKIP_UNDER_TSAN() ((void)0)
#endif

/* AddressSanitizer's allocator (gcc 12's runtime) is not locked across
 * fork(), unlike glibc's malloc: a child forked while another thread is
 * inside malloc finds that size class's lock held forever. Caught here
 * once in about sixty runs of the tiered test under make debug: the
 * child's tier worker waited in SizeClassAllocator64::GetFromAllocator,
 * held by the parent's compile thread at the fork. That is so for any
 * program under ASan, so there the tiered test forks with the background
 * compiles paused (jit_tier_pause); the race of a fork with a running
 * compile is tested by every other build. */
enum { PAUSE_TIER_AT_FORK = HARNESS_ASAN };

enum {
  N = 1 << 20,          /* elements: far more than the 2 x 16k a run needs to be split */
  THREADS = 3,          /* the contexts' threads: the caller and 2 workers */
  CHILD_SECONDS = 30,   /* a child's alarm (sanitized builds and a loaded machine are slow) */
  PARENT_SECONDS = 60   /* how long the parent waits before killing a child */
};

/* Child exit codes: which step failed (0: every step passed). */
enum {
  CHILD_OK = 0,
  CHILD_RUN_OLD = 10,    /* running the kernel compiled in the parent */
  CHILD_RESULT_OLD,      /* ... gave a wrong result */
  CHILD_NOT_PARALLEL,    /* the child's run did not start the pool's threads */
  CHILD_PARSE_NEW,       /* parsing a new program */
  CHILD_RUN_NEW,         /* compiling and running it */
  CHILD_RESULT_NEW,      /* ... gave a wrong result */
  CHILD_SET_THREADS,     /* uj_ctx_set_threads */
  CHILD_FORK,            /* fork() in the child */
  CHILD_GRANDCHILD,      /* the grandchild failed */
  CHILD_POOL_RESULT,     /* rt_pool_run visited an index other than once */
  CHILD_POOL_SERIAL,     /* rt_pool_run ran every chunk on the calling thread */
  CHILD_HUNG             /* the alarm rang: the child printed its stack (child_hung) */
};

static float xs[N], ys[N];

static void fill_input(float seed) {
  for (int i = 0; i < N; i++) xs[i] = (float)(i % 1000) * 0.001f + seed;
}

/* y = f(x) over N f32 elements. */
static uj_status_t run(uj_ctx_t* ctx, uj_program_t* p) {
  uj_tensor_t tx = {xs, UJ_F32, UJ_CPU, 1, {N}};
  uj_tensor_t ty = {ys, UJ_F32, UJ_CPU, 1, {N}};
  const uj_tensor_t* in[] = {&tx};
  uj_tensor_t* out[] = {&ty};
  for (int i = 0; i < N; i++) ys[i] = -12345.0f;
  return uj_program_run(ctx, p, UJ_FORWARD, in, 1, NULL, 0, out, 1);
}

/* The two programs: `old` runs in the parent before the fork, `fresh`
 * first after it (a kernel no cache of either process holds). */
static const char* const OLD_SRC = "y = x * 2 + 1";
static const char* const FRESH_SRC = "y = x * x - 3";
static float old_ref(float x) { return x * 2.0f + 1.0f; }
static float fresh_ref(float x) { return x * x - 3.0f; }

static int result_ok(float (*ref)(float)) {
  for (int i = 0; i < N; i++)
    if (ys[i] != ref(xs[i])) {
      fprintf(stderr, "  [pid %d] element %d is %.9g, expected %.9g\n", (int)getpid(), i, (double)ys[i],
              (double)ref(xs[i]));
      return 0;
    }
  return 1;
}

/* The threads of this process (Linux: /proc/self/task); -1 when unknown.
 * Checks compare it with a count taken before (a sanitizer may run
 * threads of its own). */
static int thread_count_now(void) {
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  for (struct dirent* e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* The threads of this process, once the count holds still: a thread that
 * was joined a moment ago (a freed context's worker) may still be listed
 * under /proc/self/task until the kernel has finished its exit. */
static int thread_count(void) {
  struct timespec nap = {0, 5 * 1000 * 1000};
  int last = thread_count_now();
  for (int tries = 0; tries < 200; tries++) {
    nanosleep(&nap, NULL);
    int now = thread_count_now();
    if (now == last) return now;
    last = now;
  }
  return last;
}

/* A context on engine e with THREADS threads and no disk cache (the C
 * engine's kernels are compiled, never found on disk); NULL when e is not
 * available here. */
static uj_ctx_t* ctx_on(uj_engine_t e) {
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx) return NULL;
  if (!uj_engine_available(ctx, e) || uj_ctx_set_engine(ctx, e) != UJ_OK || uj_ctx_set_threads(ctx, THREADS) != UJ_OK ||
      uj_ctx_set_cache_dir(ctx, NULL) != UJ_OK) {
    uj_ctx_free(ctx);
    return NULL;
  }
  return ctx;
}

/* Waits for the child; 1 when it exited with status 0. A child still
 * running after PARENT_SECONDS is killed and counts as failed; anything
 * else is printed. */
static int child_succeeded(pid_t pid, const char* what) {
  if (pid < 0) {
    fprintf(stderr, "  %s: fork failed: %s\n", what, strerror(errno));
    return 0;
  }
  int status = 0;
  struct timespec nap = {0, 10 * 1000 * 1000};
  for (int waited = 0;; waited++) {
    pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) break;
    if (got < 0 && errno != EINTR) {
      fprintf(stderr, "  %s: waitpid: %s\n", what, strerror(errno));
      return 0;
    }
    if (waited >= PARENT_SECONDS * 100) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      fprintf(stderr, "  %s: the child still ran after %d s (hung): killed\n", what, PARENT_SECONDS);
      return 0;
    }
    nanosleep(&nap, NULL);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 1;
  if (WIFEXITED(status))
    fprintf(stderr, "  %s: the child exited with %d (the step that failed)\n", what, WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    fprintf(stderr, "  %s: the child died of signal %d (%s)%s\n", what, WTERMSIG(status), strsignal(WTERMSIG(status)),
            WTERMSIG(status) == SIGALRM ? ": it hung" : "");
  return 0;
}

/* A child that hangs says where before it dies: the alarm's handler
 * prints the stack of the child's first thread, the one that runs the
 * steps (an alarm taken by another thread is passed on to it). Under ASan
 * the sanitizer prints it symbolized; elsewhere glibc's backtrace, as
 * binary+offset for addr2line (warmed up by fork_child, so that the
 * handler loads nothing). */
static pthread_t child_main;

static void child_hung(int sig) {
  if (!pthread_equal(pthread_self(), child_main)) {
    pthread_kill(child_main, sig);
    return;
  }
  static const char say[] = "  child: hung; the stack of its steps when the alarm rang:\n";
  if (write(2, say, sizeof say - 1) < 0) _exit(CHILD_HUNG);
#if HARNESS_ASAN
  __sanitizer_print_stack_trace();
#else
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
#endif
  _exit(CHILD_HUNG);
}

/* fork() with stdio flushed first, so that nothing buffered is written twice;
 * the child arms its alarm before anything else. */
static pid_t fork_child(void) {
  void* warm[1];
  backtrace(warm, 1);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    child_main = pthread_self();
    signal(SIGALRM, child_hung);
    alarm(CHILD_SECONDS);
  }
  return pid;
}

/* The child of fork_child_runs_compiles_and_frees: the steps in order, the
 * first failure's code as the exit status. */
static int child_steps(uj_ctx_t* ctx, uj_program_t* old, int count_threads) {
  int before = thread_count(); /* the pool's threads are not among them */
  fill_input(0.25f);
  if (run(ctx, old) != UJ_OK) {
    fprintf(stderr, "  child: run: %s\n", uj_last_error());
    return CHILD_RUN_OLD;
  }
  if (!result_ok(old_ref)) return CHILD_RESULT_OLD;
  /* THREADS - 1 new workers: the pool was rebuilt, not left serial (the
   * parent's workers are not in this process) */
  int threads = thread_count();
  if (count_threads && before >= 0 && threads != before + THREADS - 1) {
    fprintf(stderr, "  child: %d threads after a parallel run, expected %d\n", threads, before + THREADS - 1);
    return CHILD_NOT_PARALLEL;
  }
  uj_program_t* fresh = NULL;
  if (uj_program_parse(FRESH_SRC, &fresh) != UJ_OK) return CHILD_PARSE_NEW;
  uj_status_t s = run(ctx, fresh);
  if (s != UJ_OK) fprintf(stderr, "  child: run of a new kernel: %s\n", uj_last_error());
  int ok = s == UJ_OK && result_ok(fresh_ref);
  uj_program_free(fresh);
  if (s != UJ_OK) return CHILD_RUN_NEW;
  if (!ok) return CHILD_RESULT_NEW;
  uj_ctx_free(ctx);
  return CHILD_OK;
}

static void fork_and_run_on(uj_engine_t e) {
  int before = thread_count();
  uj_ctx_t* ctx = ctx_on(e);
  if (!ctx) {
    printf("  engine %s unavailable: skipped\n", uj_engine_name(e));
    return;
  }
  uj_program_t* old = NULL;
  CHECK(uj_program_parse(OLD_SRC, &old) == UJ_OK);
  fill_input(0.5f);
  CHECK(run(ctx, old) == UJ_OK);
  CHECK(result_ok(old_ref));
  CHECK(e == UJ_ENGINE_AUTO || before < 0 || thread_count() == before + THREADS - 1); /* AUTO: the tier's threads too */

  int paused = e == UJ_ENGINE_AUTO && PAUSE_TIER_AT_FORK;
  if (paused) jit_tier_pause(jit_state(ctx));
  pid_t pid = fork_child();
  if (pid == 0) {
    int code = child_steps(ctx, old, e != UJ_ENGINE_AUTO);
    uj_program_free(old);
    _exit(code);
  }
  if (paused) jit_tier_resume(jit_state(ctx));
  CHECK(child_succeeded(pid, uj_engine_name(e)));

  /* the parent's context, pool and caches are untouched by the child */
  fill_input(0.75f);
  CHECK(run(ctx, old) == UJ_OK);
  CHECK(result_ok(old_ref));
  uj_program_t* fresh = NULL;
  CHECK(uj_program_parse(FRESH_SRC, &fresh) == UJ_OK);
  CHECK(run(ctx, fresh) == UJ_OK);
  CHECK(result_ok(fresh_ref));
  CHECK(e == UJ_ENGINE_AUTO || before < 0 || thread_count() == before + THREADS - 1); /* AUTO: the tier's threads too */
  uj_program_free(fresh);
  uj_program_free(old);
  uj_ctx_free(ctx);
}

TEST(fork_child_runs_compiles_and_frees) {
  SKIP_UNDER_TSAN();
  fork_and_run_on(UJ_ENGINE_MIR);
  fork_and_run_on(UJ_ENGINE_C);
}

/* AUTO on the CPU is tiered: the first call queues a C compile on a
 * background thread of jit/tier.c (no disk cache, so it is compiled), and
 * the fork comes right after it, while that compile may hold the JIT
 * state's locks. The child abandons the parent's JIT state and makes its
 * own; freeing the context must not join the parent's compile threads.
 * The child's thread count is not checked: its tier starts threads of its
 * own. Under ASan the compiles are paused at the fork (PAUSE_TIER_AT_FORK). */
TEST(fork_tiered_child_runs_compiles_and_frees) {
  SKIP_UNDER_TSAN();
  uj_ctx_t* probe = uj_ctx_new();
  int tiers = probe && uj_engine_available(probe, UJ_ENGINE_MIR) && uj_engine_available(probe, UJ_ENGINE_C);
  uj_ctx_free(probe);
  SKIP_IF(!tiers, "tiering needs the MIR and C engines");
  fork_and_run_on(UJ_ENGINE_AUTO);
}

/* The first engine of MIR, C that is available, as a context; NULL (and a
 * note) when neither is. */
static uj_ctx_t* jit_ctx(void) {
  uj_ctx_t* ctx = ctx_on(UJ_ENGINE_MIR);
  if (!ctx) ctx = ctx_on(UJ_ENGINE_C);
  if (!ctx) printf("  neither MIR nor C available\n");
  return ctx;
}

/* The parent's side before each fork: OLD_SRC parsed and run on ctx (its
 * pool's workers started). */
static uj_program_t* parent_ran(uj_ctx_t* ctx) {
  uj_program_t* old = NULL;
  CHECK(uj_program_parse(OLD_SRC, &old) == UJ_OK);
  fill_input(0.5f);
  CHECK(run(ctx, old) == UJ_OK);
  return old;
}

TEST(fork_child_only_frees) {
  uj_ctx_t* ctx = jit_ctx();
  SKIP_IF(!ctx, "no JIT engine");
  uj_program_t* old = parent_ran(ctx);
  pid_t pid = fork_child();
  if (pid == 0) {
    uj_ctx_free(ctx);
    _exit(CHILD_OK);
  }
  CHECK(child_succeeded(pid, "free only"));
  /* and the parent's pool still works */
  fill_input(0.125f);
  CHECK(run(ctx, old) == UJ_OK);
  CHECK(result_ok(old_ref));
  uj_program_free(old);
  uj_ctx_free(ctx);
}

TEST(fork_child_changes_threads) {
  SKIP_UNDER_TSAN();
  uj_ctx_t* ctx = jit_ctx();
  SKIP_IF(!ctx, "no JIT engine");
  uj_program_t* old = parent_ran(ctx);
  pid_t pid = fork_child();
  if (pid == 0) {
    int before = thread_count();
    /* replaces (frees) the pool inherited from the parent */
    int code = uj_ctx_set_threads(ctx, THREADS + 1) != UJ_OK ? CHILD_SET_THREADS : CHILD_OK;
    fill_input(2.0f);
    if (!code && run(ctx, old) != UJ_OK) code = CHILD_RUN_OLD;
    if (!code && !result_ok(old_ref)) code = CHILD_RESULT_OLD;
    if (!code && before >= 0 && thread_count() != before + THREADS) code = CHILD_NOT_PARALLEL;
    if (!code) uj_ctx_free(ctx);
    _exit(code);
  }
  CHECK(child_succeeded(pid, "set threads"));
  uj_program_free(old);
  uj_ctx_free(ctx);
}

TEST(fork_grandchild) {
  SKIP_UNDER_TSAN();
  uj_ctx_t* ctx = jit_ctx();
  SKIP_IF(!ctx, "no JIT engine");
  uj_program_t* old = parent_ran(ctx);
  pid_t pid = fork_child();
  if (pid == 0) {
    /* the child rebuilds its pool, then forks with its own workers running */
    fill_input(1.5f);
    if (run(ctx, old) != UJ_OK) _exit(CHILD_RUN_OLD);
    if (!result_ok(old_ref)) _exit(CHILD_RESULT_OLD);
    pid_t grandchild = fork_child();
    if (grandchild == 0) {
      int code = child_steps(ctx, old, 1);
      _exit(code);
    }
    if (!child_succeeded(grandchild, "grandchild")) _exit(CHILD_GRANDCHILD);
    fill_input(3.0f);
    if (run(ctx, old) != UJ_OK) _exit(CHILD_RUN_OLD);
    if (!result_ok(old_ref)) _exit(CHILD_RESULT_OLD);
    uj_ctx_free(ctx);
    _exit(CHILD_OK);
  }
  CHECK(child_succeeded(pid, "child"));
  uj_program_free(old);
  uj_ctx_free(ctx);
}

/* ---- the pool itself, forked while another thread runs it ---- */

/* The distinct threads that ran chunks of one run. */
typedef struct {
  pthread_mutex_t lock;
  pthread_t seen[16];
  int nseen;
  atomic_int visits[256];
  atomic_int entered;
  int wait_ms;
} spread_t;

static void spread_chunk(void* ctx, int64_t lo, int64_t hi) {
  spread_t* s = ctx;
  pthread_t self = pthread_self();
  pthread_mutex_lock(&s->lock);
  int known = 0;
  for (int i = 0; i < s->nseen; i++) known |= pthread_equal(s->seen[i], self);
  if (!known && s->nseen < 16) s->seen[s->nseen++] = self;
  pthread_mutex_unlock(&s->lock);
  atomic_fetch_add(&s->entered, 1);
  /* wait for a second chunk to start (on a worker, if the pool has any) */
  struct timespec ms = {0, 1000 * 1000};
  for (int t = 0; t < s->wait_ms && atomic_load(&s->entered) < 2; t++) nanosleep(&ms, NULL);
  for (int64_t i = lo; i < hi; i++) atomic_fetch_add(&s->visits[i], 1);
}

/* One run of [0, n) on the pool; CHILD_OK when every index was visited once
 * and at least two threads ran chunks. */
static int spread_run(rt_pool_t* pool, int n, int wait_ms) {
  static spread_t s;
  memset(&s, 0, sizeof s);
  pthread_mutex_init(&s.lock, NULL);
  s.wait_ms = wait_ms;
  rt_pool_run(pool, 0, n, 1, spread_chunk, &s);
  int code = CHILD_OK;
  for (int i = 0; i < n; i++)
    if (atomic_load(&s.visits[i]) != 1) code = CHILD_POOL_RESULT;
  if (!code && s.nseen < 2) code = CHILD_POOL_SERIAL;
  pthread_mutex_destroy(&s.lock);
  return code;
}

typedef struct {
  rt_pool_t* pool;
  atomic_int stop, runs;
} busy_t;

static void slow_chunk(void* ctx, int64_t lo, int64_t hi) {
  (void)ctx;
  (void)lo;
  (void)hi;
  struct timespec t = {0, 200 * 1000}; /* 0.2 ms: workers are mostly inside chunks */
  nanosleep(&t, NULL);
}

static void* keep_pool_busy(void* arg) {
  busy_t* b = arg;
  while (!atomic_load(&b->stop)) {
    rt_pool_run(b->pool, 0, 64, 1, slow_chunk, NULL);
    atomic_fetch_add(&b->runs, 1);
  }
  return NULL;
}

TEST(fork_while_another_thread_runs_the_pool) {
  SKIP_UNDER_TSAN();
  rt_pool_t* pool = rt_pool_new(THREADS);
  CHECK(pool && rt_pool_size(pool) == THREADS);
  if (!pool) return;
  busy_t b = {pool, 0, 0};
  pthread_t runner;
  CHECK(pthread_create(&runner, NULL, keep_pool_busy, &b) == 0);
  while (atomic_load(&b.runs) < 3) sched_yield(); /* the workers are up and working */
  pid_t pid = fork_child();
  if (pid == 0) {
    /* the runner thread and the workers are gone; the pool was busy with
     * the runner's job, its mutex possibly held by a worker */
    int code = rt_pool_size(pool) == THREADS ? CHILD_OK : CHILD_NOT_PARALLEL;
    if (!code) code = spread_run(pool, 64, 2000);
    if (!code) code = spread_run(pool, 200, 2000); /* the new pool again */
    if (!code) rt_pool_free(pool);
    _exit(code);
  }
  CHECK(child_succeeded(pid, "pool busy at fork"));
  atomic_store(&b.stop, 1);
  pthread_join(runner, NULL);
  /* the parent's pool is as it was */
  CHECK(spread_run(pool, 64, 2000) == CHILD_OK);
  rt_pool_free(pool);
}

/* A pool forked while idle: the child frees it without running anything. */
TEST(fork_idle_pool_free_in_child) {
  rt_pool_t* pool = rt_pool_new(THREADS);
  CHECK(pool != NULL);
  if (!pool) return;
  CHECK(spread_run(pool, 64, 2000) == CHILD_OK);
  pid_t pid = fork_child();
  if (pid == 0) {
    rt_pool_free(pool);
    _exit(CHILD_OK);
  }
  CHECK(child_succeeded(pid, "idle pool freed in the child"));
  CHECK(spread_run(pool, 64, 2000) == CHILD_OK);
  rt_pool_free(pool);
}

TEST_MAIN()
