/* jit/tier.c: tiered execution of AUTO on host tensors.
 *
 * A kernel new to the process runs on MIR at once (the interpreter without
 * MIR, on small calls), and after the context's tier count of calls its C
 * compile is queued, once the call that reached the count has run, on a
 * small pool of background threads; the first call after the C kernel is
 * ready runs it, and a C kernel already cached serves from the first call.
 * Each kernel has a record, found by the hash of its IR with its $params,
 * holding its state, call count and compile times; the program's memo keeps
 * the pick, settled on C, asking the record (tier_still) while on MIR.
 * Workers compile under a lock of their own, so a caller never waits for a
 * background compile or the compiler's probe. On the seam this is a
 * choosing row (jit_chooser_t), not an engine. docs/DESIGN.md section 7
 * ("Tiering in detail") states the policy, the probe, the bounds and what
 * happens at exit. */
#include "tier.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memo.h"
#include "c/c.h"

enum {
  JIT_TIER_WORKERS = 2,
  JIT_TIER_QUEUE = 64,
  JIT_TIER_RECORDS = 4096,
  JIT_TIER_BUCKETS = 256,
  JIT_TIER_INTERP_ELEMENTS = 1 << 16
};

typedef struct tier_record tier_record_t;
struct tier_record {
  ir_hash_t key;           /* ir_hash_params of the kernel; key.lo is the record's id */
  uint64_t mir_serial;     /* the MIR kernel that serves meanwhile (its cache serial), 0 none */
  uj_tier_state_t state;
  int64_t calls;           /* calls served while waiting */
  double mir_ms, c_ms;     /* -1: not measured */
  int from_disk;
  int reloads;             /* ready, then gone from the memory cache with no disk cache to find it in */
  char* error;             /* UJ_TIER_FAILED: the compile's message */
  ir_func_t* func;         /* queued or compiling: what to compile, owned */
  int64_t* params;
  tier_record_t *next_by_key, *next_by_serial, *next_queued;
  tier_record_t *older, *newer; /* the records in order of creation */
};

typedef struct {
  jit_state_t* js;
  pthread_mutex_t lock;
  pthread_cond_t work;     /* a compile was queued, or stop, or the pause ended */
  pthread_cond_t quiet;    /* running dropped to 0 */
  tier_record_t* by_key[JIT_TIER_BUCKETS];
  tier_record_t* by_serial[JIT_TIER_BUCKETS];
  tier_record_t *oldest, *newest;
  int nrecords;
  tier_record_t *queue_head, *queue_tail;
  int queued, idle, nworkers;
  int running; /* compiles under way */
  int paused;  /* jit_tier_pause calls not yet resumed: no compile starts */
  int stop;
  pthread_t workers[JIT_TIER_WORKERS];
  /* for jit_tier_served: calls the quick tier served, on MIR and on the
   * interpreter, and picks of a C kernel (a memo hit on a C kernel is a
   * settled pick that never comes here, so C's calls are not counted) */
  _Atomic int64_t served_mir, served_interp, picked_c;
} jit_tier_t;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static size_t bucket(uint64_t v) { return (size_t)((v ^ (v >> 29)) * 0x9e3779b97f4a7c15ull >> 56) % JIT_TIER_BUCKETS; }

/* ---- records (the caller holds t->lock) -------------------------------------------------- */

static tier_record_t* find_by_key(jit_tier_t* t, ir_hash_t key) {
  for (tier_record_t* r = t->by_key[bucket(key.lo)]; r; r = r->next_by_key)
    if (r->key.lo == key.lo && r->key.hi == key.hi) return r;
  return NULL;
}

static tier_record_t* find_by_id(jit_tier_t* t, uint64_t id) {
  for (tier_record_t* r = t->by_key[bucket(id)]; r; r = r->next_by_key)
    if (r->key.lo == id) return r;
  return NULL;
}

static tier_record_t* find_by_serial(jit_tier_t* t, uint64_t serial) {
  for (tier_record_t* r = t->by_serial[bucket(serial)]; r; r = r->next_by_serial)
    if (r->mir_serial == serial) return r;
  return NULL;
}

static void unlink_serial(jit_tier_t* t, tier_record_t* r) {
  if (!r->mir_serial) return;
  for (tier_record_t** at = &t->by_serial[bucket(r->mir_serial)]; *at; at = &(*at)->next_by_serial)
    if (*at == r) {
      *at = r->next_by_serial;
      break;
    }
  r->mir_serial = 0;
}

static void set_serial(jit_tier_t* t, tier_record_t* r, uint64_t serial) {
  if (r->mir_serial == serial) return;
  unlink_serial(t, r);
  r->mir_serial = serial;
  r->next_by_serial = t->by_serial[bucket(serial)];
  t->by_serial[bucket(serial)] = r;
}

static void record_free(tier_record_t* r) {
  ir_func_free(r->func);
  free(r->params);
  free(r->error);
  free(r);
}

static void drop_record(jit_tier_t* t, tier_record_t* r) {
  for (tier_record_t** at = &t->by_key[bucket(r->key.lo)]; *at; at = &(*at)->next_by_key)
    if (*at == r) {
      *at = r->next_by_key;
      break;
    }
  unlink_serial(t, r);
  if (r->older) r->older->newer = r->newer;
  else t->oldest = r->newer;
  if (r->newer) r->newer->older = r->older;
  else t->newest = r->older;
  t->nrecords--;
  record_free(r);
}

/* A new record for key, waiting; the oldest idle record goes when there
 * are too many. NULL on OOM. */
static tier_record_t* add_record(jit_tier_t* t, ir_hash_t key) {
  if (t->nrecords >= JIT_TIER_RECORDS)
    for (tier_record_t* r = t->oldest; r; r = r->newer)
      if (r->state != UJ_TIER_COMPILING) {
        drop_record(t, r);
        break;
      }
  tier_record_t* r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->key = key;
  r->state = UJ_TIER_WAITING;
  r->mir_ms = r->c_ms = -1;
  r->next_by_key = t->by_key[bucket(key.lo)];
  t->by_key[bucket(key.lo)] = r;
  r->older = t->newest;
  if (t->newest) t->newest->newer = r;
  else t->oldest = r;
  t->newest = r;
  t->nrecords++;
  return r;
}

static void fail_record(tier_record_t* r, const char* why) {
  free(r->error);
  r->error = strdup(why);
  r->state = UJ_TIER_FAILED;
}

/* ---- the workers --------------------------------------------------------------------------- */

static void* worker_main(void* arg) {
  jit_tier_t* t = arg;
  /* a lock of this worker's own for jit_c_build: compiles of different
   * workers run side by side, and no caller ever waits on it */
  pthread_mutex_t compile_lock;
  pthread_mutex_init(&compile_lock, NULL);
  pthread_mutex_lock(&t->lock);
  while (!t->stop) {
    tier_record_t* r = t->queue_head;
    if (!r || t->paused) {
      t->idle++;
      pthread_cond_wait(&t->work, &t->lock);
      t->idle--;
      continue;
    }
    t->queue_head = r->next_queued;
    if (!t->queue_head) t->queue_tail = NULL;
    t->queued--;
    ir_func_t* f = r->func;
    int64_t* params = r->params;
    t->running++;
    pthread_mutex_unlock(&t->lock);

    double start = now_ms();
    jit_cache_entry_t* kernel = NULL;
    uj_status_t s = jit_c_build(t->js, f, params, &compile_lock, &kernel);
    double ms = now_ms() - start;
    jit_cache_release(t->js->cache, kernel); /* the memory cache keeps it for the caller */

    pthread_mutex_lock(&t->lock);
    if (--t->running == 0) pthread_cond_broadcast(&t->quiet);
    /* the record stayed while compiling: add_record never drops one */
    r->func = NULL;
    r->params = NULL;
    ir_func_free(f);
    free(params);
    r->c_ms = ms;
    r->from_disk = 0;
    if (s == UJ_OK) r->state = UJ_TIER_READY;
    else fail_record(r, uj_last_error());
  }
  pthread_mutex_unlock(&t->lock);
  pthread_mutex_destroy(&compile_lock);
  return NULL;
}

/* Queues r's compile with copies of f and params (t->lock held). A full
 * queue or OOM leaves r waiting, to be queued by a later call; no thread
 * at all fails r. */
static void enqueue(jit_tier_t* t, tier_record_t* r, const ir_func_t* f, const int64_t* params) {
  if (t->queued >= JIT_TIER_QUEUE) return;
  size_t pbytes = (size_t)f->nparams * sizeof *params;
  int64_t* copy = pbytes ? malloc(pbytes) : NULL;
  ir_func_t* clone = ir_func_clone(f);
  if (!clone || (pbytes && !copy)) {
    ir_func_free(clone);
    free(copy);
    return;
  }
  if (pbytes) memcpy(copy, params, pbytes);
  if (t->idle == 0 && t->nworkers < JIT_TIER_WORKERS &&
      pthread_create(&t->workers[t->nworkers], NULL, worker_main, t) == 0)
    t->nworkers++;
  if (t->nworkers == 0) {
    ir_func_free(clone);
    free(copy);
    fail_record(r, "cannot start a thread for background compiles");
    return;
  }
  r->func = clone;
  r->params = copy;
  r->state = UJ_TIER_COMPILING;
  r->next_queued = NULL;
  if (t->queue_tail) t->queue_tail->next_queued = r;
  else t->queue_head = r;
  t->queue_tail = r;
  t->queued++;
  pthread_cond_signal(&t->work);
}

/* A call served while r waits: counts it; 1 when the count is reached,
 * so that the call queues the compile once it has run (t->lock held). */
static int count_call(uj_ctx_t* ctx, tier_record_t* r) {
  if (r->state != UJ_TIER_WAITING) return 0;
  if (r->calls < ctx->set.tier_calls) r->calls++;
  return r->calls >= ctx->set.tier_calls;
}

/* ---- the state's lifetime: the JIT state's tier slot ---------------------------------------- */

static void tier_free(void* p) {
  jit_tier_t* t = p;
  if (!t) return;
  pthread_mutex_lock(&t->lock);
  t->stop = 1;
  /* the queued compiles are dropped: their copies go with the records */
  t->queue_head = t->queue_tail = NULL;
  t->queued = 0;
  pthread_cond_broadcast(&t->work);
  pthread_mutex_unlock(&t->lock);
  for (int i = 0; i < t->nworkers; i++) pthread_join(t->workers[i], NULL);
  while (t->oldest) drop_record(t, t->oldest);
  pthread_cond_destroy(&t->work);
  pthread_cond_destroy(&t->quiet);
  pthread_mutex_destroy(&t->lock);
  free(t);
}

/* The state's tiering state, made on first use (no thread is started until
 * the first compile is queued); NULL (error set) on OOM. Threads may race
 * to make it: one wins. */
static jit_tier_t* tier_of(jit_state_t* js) {
  jit_tier_t* t = __atomic_load_n(&js->tier, __ATOMIC_ACQUIRE);
  if (t) return t;
  if (!(t = calloc(1, sizeof *t))) {
    rt_error(UJ_ERR_OOM, "out of memory creating the tiering state (%zu bytes)", sizeof *t);
    return NULL;
  }
  t->js = js;
  pthread_mutex_init(&t->lock, NULL);
  pthread_cond_init(&t->work, NULL);
  pthread_cond_init(&t->quiet, NULL);
  __atomic_store_n(&js->tier_free, tier_free, __ATOMIC_RELAXED); /* the same value from every racer */
  void* expected = NULL;
  if (!__atomic_compare_exchange_n(&js->tier, &expected, t, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    tier_free(t);
    return expected;
  }
  return t;
}

void jit_tier_pause(jit_state_t* js) {
  jit_tier_t* t = js ? __atomic_load_n(&js->tier, __ATOMIC_ACQUIRE) : NULL;
  if (!t) return;
  pthread_mutex_lock(&t->lock);
  t->paused++;
  while (t->running) pthread_cond_wait(&t->quiet, &t->lock);
  pthread_mutex_unlock(&t->lock);
}

void jit_tier_resume(jit_state_t* js) {
  jit_tier_t* t = js ? __atomic_load_n(&js->tier, __ATOMIC_ACQUIRE) : NULL;
  if (!t) return;
  pthread_mutex_lock(&t->lock);
  if (t->paused > 0 && --t->paused == 0) pthread_cond_broadcast(&t->work);
  pthread_mutex_unlock(&t->lock);
}

int jit_tier_applies(uj_ctx_t* ctx) {
  if (ctx->set.tier_calls <= 0) return 0;
  jit_state_t* js = jit_state(ctx);
  return js && (jit_c_known(js) != 0 || __atomic_load_n(&js->tier, __ATOMIC_ACQUIRE));
}

/* ---- serving a call ------------------------------------------------------------------------ */

static int64_t largest_tensor(const ir_func_t* f, const ir_buffer_t* buf) {
  int64_t most = 0;
  for (int t = 0; t < f->ntensors; t++)
    if (buf[t].numel > most) most = buf[t].numel;
  return most;
}

static void serve_c(jit_tier_t* t, jit_cache_entry_t* kernel, ir_hash_t key, jit_served_t* out) {
  *out = (jit_served_t){kernel, &jit_engine_c, 1, key.lo, 0};
  atomic_fetch_add_explicit(&t->picked_c, 1, memory_order_relaxed);
}

/* Why C cannot serve, once the probe has found no compiler: jit_c_check's
 * sentence, into why (the error is cleared: the run succeeds). */
static void no_compiler_reason(jit_state_t* js, char* why, size_t cap) {
  jit_c_check(js);
  snprintf(why, cap, "%s", uj_last_error());
  rt_error_clear();
}

/* The quick tier for r's kernel: MIR (its compile time noted), else the
 * interpreter (no kernel). start: the call reached the count. */
static uj_status_t serve_quick(uj_ctx_t* ctx, jit_state_t* js, jit_tier_t* t, tier_record_t* r, ir_hash_t key,
                               const ir_func_t* f, const int64_t* params, int start, jit_served_t* out) {
  /* r is only compared, never read, outside t->lock: it may be dropped meanwhile */
  *out = (jit_served_t){NULL, &jit_engine_interp, 0, key.lo, start};
  if (!jit_engine_mir.available(ctx)) {
    atomic_fetch_add_explicit(&t->served_interp, 1, memory_order_relaxed);
    return UJ_OK;
  }
  double begin = now_ms();
  uj_status_t s = jit_engine_mir.get(ctx, js, f, params, &out->kernel);
  double ms = now_ms() - begin;
  if (s != UJ_OK) return s;
  out->engine = &jit_engine_mir;
  atomic_fetch_add_explicit(&t->served_mir, 1, memory_order_relaxed);
  pthread_mutex_lock(&t->lock);
  /* r may have been dropped meanwhile (too many records): look again */
  if (find_by_id(t, out->record) == r) {
    if (r->mir_ms < 0) r->mir_ms = ms;
    set_serial(t, r, jit_cache_serial(out->kernel));
  }
  pthread_mutex_unlock(&t->lock);
  return UJ_OK;
}

/* No MIR, and a call the interpreter would take longer over than the
 * compile: C compiled on the calling thread, waited for. UJ_OK with no
 * kernel when that compile failed (recorded in r: the interpreter serves). */
static uj_status_t compile_here(jit_state_t* js, jit_tier_t* t, tier_record_t* r, ir_hash_t key, const ir_func_t* f,
                                const int64_t* params, jit_served_t* out) {
  jit_cache_entry_t* kernel = NULL;
  double start = now_ms();
  uj_status_t s = jit_c_get(js, f, params, &kernel);
  double ms = now_ms() - start;
  if (s == UJ_ERR_OOM) return s;
  char why[512];
  snprintf(why, sizeof why, "%s", s == UJ_OK ? "" : uj_last_error());
  pthread_mutex_lock(&t->lock);
  if (find_by_key(t, key) == r && r->state != UJ_TIER_COMPILING) {
    r->c_ms = ms;
    if (s == UJ_OK) r->state = UJ_TIER_READY;
    else fail_record(r, why);
  }
  pthread_mutex_unlock(&t->lock);
  if (s == UJ_OK) serve_c(t, kernel, key, out);
  else rt_error_clear(); /* reported through the record */
  return UJ_OK;
}

/* jit_engine_t.choose: the C kernel when the memory or disk cache has it,
 * else the quick tier (or, without MIR, a compile waited for). Fails only
 * where the quick tier itself fails: a C compile's failure is recorded,
 * never returned. The caches are asked only once the compiler's answer is
 * known (or remembered): the C key names the compiler. */
static uj_status_t tier_choose(uj_ctx_t* ctx, jit_state_t* js, const ir_func_t* f, const int64_t* params,
                               const ir_buffer_t* buf, jit_served_t* out) {
  *out = (jit_served_t){NULL, &jit_engine_interp, 0, 0, 0};
  jit_tier_t* t = tier_of(js);
  if (!t) return UJ_ERR_OOM;
  ir_hash_t key = ir_hash_params(f, params);
  int compiler = jit_c_known(js); /* -1: the background worker will probe */
  jit_cache_entry_t* c_kernel = NULL;
  uj_status_t s;
  /* the memory cache first: cheap, and what a ready compile left */
  if (compiler == 1 && (s = jit_c_find(js, f, params, 0, &c_kernel)) != UJ_OK) return s;
  char why[512] = "";
  if (compiler == 0) no_compiler_reason(js, why, sizeof why);
  pthread_mutex_lock(&t->lock);
  tier_record_t* r = find_by_key(t, key);
  int fresh = !r;
  if (!r && !(r = add_record(t, key))) {
    pthread_mutex_unlock(&t->lock);
    jit_cache_release(js->cache, c_kernel);
    return rt_error(UJ_ERR_OOM, "out of memory recording a kernel's tiering (%zu bytes)", sizeof *r);
  }
  if (c_kernel && r->state != UJ_TIER_COMPILING) r->state = UJ_TIER_READY;
  if (compiler == 0 && r->state == UJ_TIER_WAITING) fail_record(r, why);
  uj_tier_state_t state = r->state;
  pthread_mutex_unlock(&t->lock);

  if (compiler == 1 && !c_kernel && (fresh || state == UJ_TIER_READY)) {
    /* new here, or ready but evicted from memory since: the disk cache */
    double start = now_ms();
    s = jit_c_find(js, f, params, 1, &c_kernel);
    double ms = now_ms() - start;
    int disk = jit_disk_enabled(js->cache); /* before t->lock: it takes the cache's */
    pthread_mutex_lock(&t->lock);
    if (find_by_key(t, key) == r) {
      if (c_kernel && fresh) {
        r->c_ms = ms;
        r->from_disk = 1;
      }
      if (c_kernel && r->state != UJ_TIER_COMPILING) r->state = UJ_TIER_READY;
      else if (!c_kernel && r->state == UJ_TIER_READY && !disk && ++r->reloads > 2)
        fail_record(r, "the C kernel does not stay in the memory cache (its limit) and there is no disk cache to "
                       "find it in again: MIR serves rather than compile it over and over");
      else if (!c_kernel && r->state == UJ_TIER_READY) r->state = UJ_TIER_WAITING, r->calls = 0; /* gone: compile again */
      state = r->state;
    }
    pthread_mutex_unlock(&t->lock);
    if (s != UJ_OK) return s;
  }
  if (c_kernel) {
    serve_c(t, c_kernel, key, out);
    return UJ_OK;
  }
  if (state != UJ_TIER_FAILED && !jit_engine_mir.available(ctx) && largest_tensor(f, buf) >= JIT_TIER_INTERP_ELEMENTS) {
    s = compile_here(js, t, r, key, f, params, out);
    if (s != UJ_OK || out->kernel) return s;
  }
  pthread_mutex_lock(&t->lock);
  int start = find_by_key(t, key) == r && count_call(ctx, r);
  pthread_mutex_unlock(&t->lock);
  return serve_quick(ctx, js, t, r, key, f, params, start, out);
}

/* jit_engine_t.still: a memo hit on the quick tier's MIR kernel of cache
 * serial `serial` serves while its record is not ready (C waiting,
 * compiling or failed); the call is counted. 0 when the caller should
 * choose again (C ready, or no record any more). */
static int tier_still(uj_ctx_t* ctx, jit_state_t* js, uint64_t serial, jit_served_t* served) {
  jit_tier_t* t = __atomic_load_n(&js->tier, __ATOMIC_ACQUIRE);
  if (!t) return 0;
  pthread_mutex_lock(&t->lock);
  tier_record_t* r = find_by_serial(t, serial);
  int still = r && r->state != UJ_TIER_READY;
  if (still) {
    served->record = r->key.lo;
    served->after_run = count_call(ctx, r);
  }
  pthread_mutex_unlock(&t->lock);
  if (still) atomic_fetch_add_explicit(&t->served_mir, 1, memory_order_relaxed); /* the memo's MIR kernel */
  return still;
}

/* jit_engine_t.after_run: the call that reached the count has run; its
 * kernel's C compile is queued now (a queue, a thread signalled or
 * started: the caller never waits for the compile). */
static void tier_after_run(uj_ctx_t* ctx, jit_state_t* js, const ir_func_t* f, const int64_t* params,
                           const jit_served_t* served) {
  jit_tier_t* t = __atomic_load_n(&js->tier, __ATOMIC_ACQUIRE);
  if (!t) return;
  pthread_mutex_lock(&t->lock);
  tier_record_t* r = find_by_id(t, served->record);
  if (r && r->state == UJ_TIER_WAITING && r->calls >= ctx->set.tier_calls) enqueue(t, r, f, params);
  pthread_mutex_unlock(&t->lock);
}

static int tier_mir_level(const uj_ctx_t* ctx) { return ctx->set.mir_level; }

static const jit_chooser_t tier_chooser = {tier_choose, tier_still, tier_after_run};

const jit_engine_t jit_engine_tiered = {
    .device = UJ_CPU,
    .settings = 1u << RT_SETTING_THREADS | 1u << RT_SETTING_MEMORY_CACHE_LIMIT | 1u << RT_SETTING_CACHE |
                1u << RT_SETTING_DISK_CACHE_LIMIT | 1u << RT_SETTING_MIR_LEVEL | 1u << RT_SETTING_TIER |
                1u << RT_SETTING_STREAM,
    .key_setting = tier_mir_level,
    .chooser = &tier_chooser,
};

/* ---- what served --------------------------------------------------------------------------- */

uj_status_t uj_program_last_run(uj_ctx_t* ctx, uj_program_t* p, uj_pass_t pass, uj_run_info_t* out) {
  if (!ctx || !p || !out) return rt_error(UJ_ERR_INVALID, "uj_program_last_run: ctx, p and out must not be NULL");
  if (pass != UJ_FORWARD && pass != UJ_BACKWARD)
    return rt_error(UJ_ERR_INVALID, "uj_program_last_run: pass %d is neither UJ_FORWARD nor UJ_BACKWARD", (int)pass);
  memset(out, 0, sizeof *out);
  const jit_engine_t* engine;
  uint64_t id;
  jit_memo_last_run(p, pass, ctx->id, &engine, &id);
  out->engine = engine ? jit_engine_id(engine) : UJ_ENGINE_AUTO;
  out->tier = UJ_TIER_NONE;
  out->mir_ms = out->c_ms = -1;
  jit_state_t* js = jit_state_existing(ctx);
  jit_tier_t* t = js ? __atomic_load_n(&js->tier, __ATOMIC_ACQUIRE) : NULL;
  if (!t || !id) return UJ_OK;
  pthread_mutex_lock(&t->lock);
  tier_record_t* r = find_by_id(t, id);
  if (r) {
    out->tier = r->state;
    out->mir_ms = r->mir_ms;
    out->c_ms = r->c_ms;
    out->c_from_disk = r->from_disk;
    if (r->error) snprintf(out->c_error, sizeof out->c_error, "%s", r->error);
  }
  pthread_mutex_unlock(&t->lock);
  return UJ_OK;
}

/* ---- what served a context's tiered calls --------------------------------------------------- */

int jit_tier_served(uj_ctx_t* ctx, int64_t* mir, int64_t* interp, int64_t* c) {
  jit_state_t* js = ctx ? jit_state_existing(ctx) : NULL;
  jit_tier_t* t = js ? __atomic_load_n(&js->tier, __ATOMIC_ACQUIRE) : NULL;
  *mir = t ? atomic_load_explicit(&t->served_mir, memory_order_relaxed) : 0;
  *interp = t ? atomic_load_explicit(&t->served_interp, memory_order_relaxed) : 0;
  *c = t ? atomic_load_explicit(&t->picked_c, memory_order_relaxed) : 0;
  return t != NULL;
}
