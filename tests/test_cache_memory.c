/* tests/test_cache_memory.c: the in-memory kernel cache's limit (jit/cache/cache.c)
 * and what the engines and programs do with it.
 *
 * The table alone: entries leave least recently used first when the limit
 * is passed; an entry held by a caller outlives its eviction (freed by the
 * release, not before: ASan in `make debug` watches); serials are never
 * reused, so a memo naming an evicted entry misses; the limit comes from
 * UOPJIT_CACHE_MEMORY_LIMIT or the API, and malformed values are ignored.
 *
 * Programs: a $param is folded into its kernel, so every distinct value is
 * a kernel. Thousands of values on MIR, and 80 on C (each a compile
 * the first time; UJ_TEST_CACHE_VALUES asks for more), keep the cache's
 * accounted bytes within the limit after every call, and the process's
 * memory with them: MIR's retired generations are finished, C's shared
 * objects unloaded. The numbers (accounted bytes, RSS growth from
 * /proc/self/statm) are printed. A thread keeps running one kernel while
 * others churn params with room for three kernels, so kernels are evicted
 * while other threads run them: the results stay right and nothing is used
 * after being freed. */
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../include/uopjit.h"
#include "../jit/jit.h"
#include "../uops/uops.h"
#include "kernel_cache_check.h"
#include "harness.h"
#include "../jit/c/c.h"
#include "../jit/mir/mir.h"

/* ASan keeps freed memory in quarantine and TSan keeps shadow memory and
 * the history of every freed block: under either, RSS says nothing of what
 * the cache holds, and only the cache's own accounting is checked. */
#define UNDER_SANITIZER (HARNESS_ASAN || HARNESS_TSAN)

/* ---- the table ------------------------------------------------------------------------- */


static jit_cache_counts_t counts_of_cache(jit_cache_t* c) {
  jit_cache_counts_t k;
  jit_cache_counts(c, &k);
  return k;
}

/* 1 when (key text) is in the table; a lookup, so it becomes the newest. */
static int present(jit_cache_t* c, const char* text) {
  jit_cache_entry_t* e = jit_cache_acquire(c, hash_of(text), text);
  jit_cache_release(c, e);
  return e != NULL;
}

TEST(lru_order_and_limit) {
  atomic_store(&values_freed, 0);
  jit_cache_t* c = jit_cache_new();
  CHECK(c != NULL);
  if (!c) return;
  /* keys of one length and values of one cost: every entry costs the same */
  CHECK(jit_cache_put(c, hash_of("k0"), "k0", new_int(0), free_value, 1000) == UJ_OK);
  int64_t one = counts_of_cache(c).memory_bytes;
  CHECK(one > 1000); /* the value, and the entry's record and key text */
  CHECK(jit_cache_set_memory_limit(c, 3 * one) == UJ_OK);
  CHECK(jit_cache_put(c, hash_of("k1"), "k1", new_int(1), free_value, 1000) == UJ_OK);
  CHECK(jit_cache_put(c, hash_of("k2"), "k2", new_int(2), free_value, 1000) == UJ_OK);
  CHECK(counts_of_cache(c).memory_evictions == 0);
  CHECK(present(c, "k0")); /* now the most recently used: k1 is the oldest */
  CHECK(jit_cache_put(c, hash_of("k3"), "k3", new_int(3), free_value, 1000) == UJ_OK);
  jit_cache_counts_t k = counts_of_cache(c);
  CHECK(k.memory_entries == 3 && k.memory_bytes == 3 * one && k.memory_evictions == 1);
  CHECK(atomic_load(&values_freed) == 1);
  CHECK(!present(c, "k1"));
  CHECK(present(c, "k2") && present(c, "k0") && present(c, "k3")); /* newest to oldest: k3 k0 k2 */
  /* a lower limit evicts at once, oldest first */
  CHECK(jit_cache_set_memory_limit(c, one) == UJ_OK);
  k = counts_of_cache(c);
  CHECK(k.memory_entries == 1 && k.memory_bytes == one && k.memory_limit == one && k.memory_evictions == 3);
  CHECK(present(c, "k3") && !present(c, "k0") && !present(c, "k2"));
  CHECK(atomic_load(&values_freed) == 3);
  /* an entry larger than the limit is not kept */
  CHECK(jit_cache_put(c, hash_of("big"), "big", new_int(9), free_value, 10 * (size_t)one) == UJ_OK);
  CHECK(!present(c, "big") && atomic_load(&values_freed) == 4);
  CHECK(present(c, "k3")); /* evicting stops once the total is within the limit */
  CHECK(jit_cache_set_memory_limit(c, -1) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "-1 bytes") != NULL);
  CHECK(jit_cache_set_memory_limit(NULL, 10) == UJ_ERR_INVALID);
  jit_cache_free(c);
  CHECK(atomic_load(&values_freed) == 5);
}

TEST(held_entry_outlives_eviction) {
  atomic_store(&values_freed, 0);
  jit_cache_t* c = jit_cache_new();
  if (!c) return;
  jit_cache_entry_t* held = NULL;
  CHECK(jit_cache_insert(c, hash_of("kernel"), "kernel", new_int(42), free_value, 100, &held) == UJ_OK);
  CHECK(held && *(int*)jit_cache_value(held) == 42);
  uint64_t serial = jit_cache_serial(held);
  CHECK(serial != 0);
  jit_cache_entry_t* again = jit_cache_acquire_serial(c, hash_of("kernel"), serial);
  CHECK(again == held);
  jit_cache_release(c, again);
  CHECK(jit_cache_set_memory_limit(c, 0) == UJ_OK);
  jit_cache_counts_t k = counts_of_cache(c);
  CHECK(k.memory_entries == 0 && k.memory_bytes == 0 && k.memory_evicted_in_use == 1);
  /* out of the table, but still the holder's */
  CHECK(atomic_load(&values_freed) == 0);
  CHECK(held && *(int*)jit_cache_value(held) == 42);
  CHECK(jit_cache_acquire(c, hash_of("kernel"), "kernel") == NULL);
  CHECK(jit_cache_acquire_serial(c, hash_of("kernel"), serial) == NULL);
  jit_cache_release(c, held);
  CHECK(atomic_load(&values_freed) == 1);
  /* inserted beyond the limit, held by the inserter until it lets go */
  CHECK(jit_cache_insert(c, hash_of("kernel"), "kernel", new_int(43), free_value, 100, &held) == UJ_OK);
  CHECK(held && *(int*)jit_cache_value(held) == 43 && atomic_load(&values_freed) == 1);
  /* the same key again is a new entry with a new serial: the old one never answers */
  CHECK(jit_cache_serial(held) > serial);
  jit_cache_release(c, held);
  CHECK(atomic_load(&values_freed) == 2);
  jit_cache_release(c, NULL);
  jit_cache_free(c);
}

TEST(serials_are_not_reused) {
  jit_cache_t* c = jit_cache_new();
  if (!c) return;
  uint64_t last = 0;
  int increasing = 1;
  for (int round = 0; round < 50; round++) {
    jit_cache_entry_t* e = NULL;
    CHECK(jit_cache_insert(c, hash_of("same"), "same", new_int(round), free_value, 0, &e) == UJ_OK);
    increasing &= jit_cache_serial(e) > last;
    last = jit_cache_serial(e);
    jit_cache_release(c, e);
    CHECK(jit_cache_set_memory_limit(c, 0) == UJ_OK); /* evicted: the next insert makes a new entry */
    CHECK(jit_cache_set_memory_limit(c, 1 << 20) == UJ_OK);
  }
  CHECK(increasing);
  jit_cache_free(c);
}

/* The limit a fresh cache takes from UOPJIT_CACHE_MEMORY_LIMIT=text. */
static int64_t limit_from(const char* text) {
  if (text) setenv("UOPJIT_CACHE_MEMORY_LIMIT", text, 1);
  else unsetenv("UOPJIT_CACHE_MEMORY_LIMIT");
  jit_cache_t* c = jit_cache_new();
  int64_t limit = c ? counts_of_cache(c).memory_limit : -1;
  jit_cache_free(c);
  unsetenv("UOPJIT_CACHE_MEMORY_LIMIT");
  return limit;
}

TEST(limit_from_environment) {
  const int64_t def = JIT_CACHE_DEFAULT_MEMORY_LIMIT;
  CHECK(def == (int64_t)256 << 20);
  CHECK(limit_from(NULL) == def);
  CHECK(limit_from("123456") == 123456);
  CHECK(limit_from("0") == 0);
  CHECK(limit_from("64K") == 64 << 10);
  CHECK(limit_from("8m") == 8 << 20);
  CHECK(limit_from("2G") == (int64_t)2 << 30);
  CHECK(limit_from("") == def); /* empty is unset */
  /* malformed: an error naming the variable, never a silent default */
  const char* bad[] = {"abc", "-5", "8MB", "8 M", "M", "1.5G", "99999999999999999999", "9999999999999G"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    int64_t got = limit_from(bad[i]);
    if (got != -1) printf("  UOPJIT_CACHE_MEMORY_LIMIT=\"%s\" gave %lld\n", bad[i], (long long)got);
    CHECK(got == -1);
    CHECK(strstr(uj_last_error(), "UOPJIT_CACHE_MEMORY_LIMIT=") && strstr(uj_last_error(), "K, M or G"));
  }
}

TEST(limit_through_the_api) {
  CHECK(uj_ctx_set_memory_cache_limit(NULL, 1) == UJ_ERR_INVALID);
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx) return;
  CHECK(uj_ctx_set_memory_cache_limit(ctx, -2) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "-2 bytes") != NULL);
  CHECK(uj_ctx_set_memory_cache_limit(ctx, 12345) == UJ_OK);
  jit_state_t* js = jit_state(ctx);
  CHECK(js && counts_of_cache(js->cache).memory_limit == 12345);
  uj_ctx_free(ctx);
  /* the environment sets the default of a new context */
  setenv("UOPJIT_CACHE_MEMORY_LIMIT", "3M", 1);
  ctx = uj_ctx_new();
  js = ctx ? jit_state(ctx) : NULL;
  CHECK(js && counts_of_cache(js->cache).memory_limit == 3 << 20);
  unsetenv("UOPJIT_CACHE_MEMORY_LIMIT");
  uj_ctx_free(ctx);
}

/* ---- programs ---------------------------------------------------------------------------- */


static int64_t resident_bytes(void) {
  long pages = 0, resident = 0;
  FILE* fp = fopen("/proc/self/statm", "r");
  if (!fp) return 0;
  if (fscanf(fp, "%ld %ld", &pages, &resident) != 2) resident = 0;
  fclose(fp);
  return (int64_t)resident * sysconf(_SC_PAGESIZE);
}

/* How many distinct $param values a churn test runs: `fallback`, or more
 * with UJ_TEST_CACHE_VALUES for a longer run on demand. */
static int values_to_run(int fallback) {
  const char* v = getenv("UJ_TEST_CACHE_VALUES");
  int n = v ? atoi(v) : 0;
  return n > 0 ? n : fallback;
}

/* Runs p on ctx for $k = 1 .. values; returns the calls whose results were
 * wrong, and counts in *over the calls after which the cache's accounted
 * bytes exceeded its limit. */
static int churn(uj_ctx_t* ctx, uj_program_t* p, const float* xv, int64_t n, int values, int* over) {
  int bad = 0;
  *over = 0;
  for (int64_t k = 1; k <= values; k++) {
    bad += !run_shift(ctx, p, xv, n, k);
    jit_cache_counts_t c = counts_of(ctx);
    *over += c.memory_bytes > c.memory_limit;
  }
  return bad;
}

TEST(mir_param_values_stay_within_the_limit) {
  SKIP_IF(!uj_engine_available(NULL, UJ_ENGINE_MIR), "this build has no MIR");
  const int64_t limit = 8 << 20;
  int values = values_to_run(3000);
  int64_t N = values + 1000; /* $k shifts by up to `values` */
  float* xv = malloc(sizeof *xv * (size_t)N);
  for (int64_t i = 0; xv && i < N; i++) xv[i] = (float)i * 0.5f - 100.0f;
  uj_ctx_t* ctx = uj_ctx_new();
  uj_program_t* p = shifted_double();
  CHECK(xv && ctx && p && uj_ctx_set_engine(ctx, UJ_ENGINE_MIR) == UJ_OK);
  CHECK(uj_ctx_set_memory_cache_limit(ctx, limit) == UJ_OK);
  if (!xv || !ctx || !p) {
    uj_program_free(p), uj_ctx_free(ctx), free(xv);
    return;
  }
  CHECK(run_shift(ctx, p, xv, N, 0)); /* the engine and its first generation set up */
  int64_t rss_before = resident_bytes();
  int live_before = jit_mir_generations_live();
  int over = 0;
  CHECK(churn(ctx, p, xv, N, values, &over) == 0);
  CHECK(over == 0);
  int64_t growth = resident_bytes() - rss_before;
  int live = jit_mir_generations_live() - live_before;
  jit_cache_counts_t k = counts_of(ctx);
  printf("  mir: %d values, cache %lld of %lld bytes in %lld kernels (%lld evicted), RSS grew %.1f MiB, "
         "%d more MIR generations live (of %d made)\n",
         values, (long long)k.memory_bytes, (long long)k.memory_limit, (long long)k.memory_entries,
         (long long)k.memory_evictions, (double)growth / (1 << 20), live, jit_mir_generations());
  CHECK(k.memory_entries + k.memory_evictions == values + 1);
  /* a generation takes 64 kernels and each costs at least a 64th of the
   * generation's setup (about 12 KiB): the cached kernels fill at most
   * 8 MiB / (64 * 12 KiB) + 1 generations, plus the one taking modules
   * now and one partly evicted. Without eviction it would be values / 64. */
  CHECK(live <= 13);
  /* unbounded, 3,000 values grew the process by about 100 MiB */
  if (!UNDER_SANITIZER) CHECK(growth < 3 * limit);
  /* the memo's kernel was evicted long ago: it misses, and compiles again */
  int64_t misses = k.memory_misses;
  CHECK(run_shift(ctx, p, xv, N, 1));
  CHECK(counts_of(ctx).memory_misses > misses);
  uj_program_free(p);
  uj_ctx_free(ctx);
  free(xv);
}

/* dl_iterate_phdr's callback: counts the objects loaded from under
 * `prefix` (the disk cache, or the compiler's temporary directories). */
typedef struct {
  const char* prefix;
  int count;
} loaded_t;

static int count_loaded(struct dl_phdr_info* info, size_t size, void* arg) {
  (void)size;
  loaded_t* l = arg;
  if (info->dlpi_name && strstr(info->dlpi_name, l->prefix)) l->count++;
  return 0;
}

static int kernels_loaded(const char* prefix) {
  loaded_t l = {prefix, 0};
  dl_iterate_phdr(count_loaded, &l);
  return l.count;
}

TEST(c_param_values_stay_within_the_limit) {
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx) return;
  SKIP_IF(uj_ctx_set_engine(ctx, UJ_ENGINE_C) != UJ_OK, "no C compiler");
  const int64_t limit = 1 << 19; /* about 37 of these kernels: each value is a compile the first time */
  int values = values_to_run(80);  /* twice as many: most of them evicted */
  int64_t N = values + 1000;
  float* xv = malloc(sizeof *xv * (size_t)N);
  for (int64_t i = 0; xv && i < N; i++) xv[i] = (float)i * 0.25f + 3.0f;
  uj_program_t* p = shifted_double();
  CHECK(xv && p && uj_ctx_set_memory_cache_limit(ctx, limit) == UJ_OK);
  if (!xv || !p) {
    uj_program_free(p), uj_ctx_free(ctx), free(xv);
    return;
  }
  CHECK(run_shift(ctx, p, xv, N, 0));
  int64_t rss_before = resident_bytes();
  int over = 0;
  CHECK(churn(ctx, p, xv, N, values, &over) == 0);
  CHECK(over == 0);
  int64_t growth = resident_bytes() - rss_before;
  jit_cache_counts_t k = counts_of(ctx);
  /* kernels are loaded from private memory files through /proc/self/fd (jit/c/c.c) */
  const char* prefix = "/proc/self/fd/";
  int loaded = kernels_loaded(prefix);
  printf("  c: %d values, cache %lld of %lld bytes in %lld kernels (%lld evicted), %d shared objects loaded, "
         "RSS grew %.1f MiB\n",
         values, (long long)k.memory_bytes, (long long)k.memory_limit, (long long)k.memory_entries,
         (long long)k.memory_evictions, loaded, (double)growth / (1 << 20));
  CHECK(k.memory_entries + k.memory_evictions == values + 1);
  CHECK(k.memory_evictions > 0);
  /* an evicted kernel's object is unloaded: what stays loaded is what the cache holds */
  CHECK(loaded == k.memory_entries);
  if (!UNDER_SANITIZER) CHECK(growth < 3 * limit + (4 << 20));
  uj_program_free(p);
  uj_ctx_free(ctx);
  CHECK(kernels_loaded(prefix) == 0); /* and freeing the context unloads the rest */
  free(xv);
}

/* ---- a kernel evicted while it runs ----------------------------------------------------- */

/* Runs the kernel e (compiled from f, $k = k) on x (n elements) the way
 * uj_program_run does; 1 when every output is 2 x[i + k]. */
static int run_held(jit_state_t* js, const jit_cache_entry_t* e, const ir_func_t* f, const float* xv, int64_t n,
                    int64_t k) {
  ir_buffer_t* buf = calloc((size_t)f->ntensors + 1, sizeof *buf);
  if (!buf) return 0;
  for (int t = 0; t < f->ntensors; t++)
    if (f->tensors[t].role == IR_TENSOR_INPUT) buf[t].dims[0] = n, buf[t].data = (void*)xv;
  int ok = ir_func_sizes(f, &k, buf) == UJ_OK;
  const float* y = NULL;
  for (int t = 0; ok && t < f->ntensors; t++) {
    const ir_tensor_t* tt = &f->tensors[t];
    if (tt->role == IR_TENSOR_INPUT || (tt->role == IR_TENSOR_TEMP && tt->noalloc)) continue;
    ok = (buf[t].data = malloc((size_t)buf[t].numel * (size_t)uj_dtype_size(tt->dtype) + 1)) != NULL;
    if (tt->role == IR_TENSOR_OUTPUT) y = buf[t].data;
  }
  ok = ok && y && jit_blocks_run(js, jit_blocks_of(e), f, buf, &k) == UJ_OK;
  for (int64_t i = 0; ok && i < n - k; i++) ok = y[i] == 2.0f * xv[i + k];
  for (int t = 0; t < f->ntensors; t++)
    if (f->tensors[t].role != IR_TENSOR_INPUT) free(buf[t].data);
  free(buf);
  return ok;
}

typedef struct {
  uj_ctx_t* ctx;
  uj_program_t* p;
  const float* xv;
  int64_t n;
  int64_t first_k, nk; /* $k cycles through first_k .. first_k + nk - 1 */
  int rounds;
  atomic_int* finished; /* churners done */
  int wrong;
} churner_t;

static void* churn_worker(void* arg) {
  churner_t* r = arg;
  for (int i = 0; i < r->rounds; i++) r->wrong += !run_shift(r->ctx, r->p, r->xv, r->n, r->first_k + i % r->nk);
  atomic_fetch_add(r->finished, 1);
  return NULL;
}

/* This thread holds the kernel for $k = 0, as a running call does, and
 * keeps running it while other threads run other values of $k on the
 * same context and program with room for about three kernels: every new
 * kernel evicts the oldest, the held one included. It must stay usable
 * until released, then be freed (ASan in `make debug` checks both). */
static void evicted_while_running(uj_engine_t engine, int churn_rounds, int churn_values) {
  enum { N = 1 << 16, CHURNERS = 3 };
  uj_ctx_t* ctx = uj_ctx_new();
  uj_program_t* p = shifted_double();
  float* xv = malloc(sizeof *xv * N);
  CHECK(ctx && p && xv && uj_ctx_set_engine(ctx, engine) == UJ_OK);
  jit_state_t* js = ctx ? jit_state(ctx) : NULL;
  const ir_func_t* f = p ? uop_program_func(p, UJ_FORWARD, 1) : NULL;
  if (!js || !f || !xv) {
    uj_program_free(p), uj_ctx_free(ctx), free(xv);
    return;
  }
  for (int i = 0; i < N; i++) xv[i] = (float)(i % 1000) * 0.125f;
  int64_t k0 = 0;
  jit_cache_entry_t* held = NULL;
  uj_status_t s = engine == UJ_ENGINE_MIR ? jit_mir_get(js, f, &k0, 2, &held) : jit_c_get(js, f, &k0, &held);
  CHECK(s == UJ_OK && held);
  if (!held) {
    uj_program_free(p), uj_ctx_free(ctx), free(xv);
    return;
  }
  CHECK(uj_ctx_set_memory_cache_limit(ctx, 3 * counts_of(ctx).memory_bytes) == UJ_OK);
  churner_t churners[CHURNERS];
  pthread_t threads[CHURNERS];
  atomic_int finished = 0;
  int started = 0;
  for (int t = 0; t < CHURNERS; t++) {
    churners[t] = (churner_t){ctx, p, xv, N, 1 + t * churn_values, churn_values, churn_rounds, &finished, 0};
    if (pthread_create(&threads[t], NULL, churn_worker, &churners[t]) == 0) started++;
  }
  CHECK(started == CHURNERS);
  int wrong = 0, runs = 0;
  do { /* the held kernel runs for as long as the others churn */
    wrong += !run_held(js, held, f, xv, N, 0);
    runs++;
  } while (atomic_load(&finished) < started);
  for (int t = 0; t < started; t++) {
    pthread_join(threads[t], NULL);
    CHECK(churners[t].wrong == 0);
  }
  /* never looked up again, it became the oldest and was evicted: out of
   * the table, yet still this thread's to run */
  CHECK(jit_cache_acquire_serial(js->cache, jit_cache_key(held), jit_cache_serial(held)) == NULL);
  wrong += !run_held(js, held, f, xv, N, 0);
  CHECK(wrong == 0);
  jit_cache_release(js->cache, held);
  jit_cache_counts_t k = counts_of(ctx);
  printf("  %s: %d runs of the held kernel, %lld kernels evicted, %lld of them while held by a call\n",
         uj_engine_name(engine), runs, (long long)k.memory_evictions, (long long)k.memory_evicted_in_use);
  CHECK(k.memory_evicted_in_use > 0);
  CHECK(k.memory_bytes <= k.memory_limit);
  /* and a program's call for $k = 0 compiles it again, rightly */
  CHECK(run_shift(ctx, p, xv, N, 0));
  uj_program_free(p);
  uj_ctx_free(ctx);
  free(xv);
}

TEST(mir_kernel_evicted_while_running) {
  SKIP_IF(!uj_engine_available(NULL, UJ_ENGINE_MIR), "this build has no MIR");
  evicted_while_running(UJ_ENGINE_MIR, 200, 50);
}

TEST(c_kernel_evicted_while_running) {
  uj_ctx_t* probe = uj_ctx_new();
  int have_c = probe && uj_engine_available(probe, UJ_ENGINE_C);
  uj_ctx_free(probe);
  SKIP_IF(!have_c, "no C compiler");
  /* a few values, compiled once and then loaded again from the disk cache
   * each time they come back: every load and unload races the runs */
  evicted_while_running(UJ_ENGINE_C, 40, 4);
}

TEST_MAIN()
