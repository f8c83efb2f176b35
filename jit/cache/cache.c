/* jit/cache/cache.c: the kernel cache's in-memory table (docs/DESIGN.md section 8).
 *
 * A chained hash table behind one mutex, doubling when three-quarters full.
 * Entries are found by the 128-bit hash and confirmed by comparing the
 * whole key text, so a hash collision is a miss, never a wrong kernel.
 *
 * Bounded, least recently used first out: every entry costs what its engine
 * measured of its value plus its own record and key text, and sits on a
 * doubly linked recency list; after an insert (or a lower limit) entries go
 * from the oldest end until the total is within the limit. Users hold
 * counted references, not bare values: an entry evicted while a call runs
 * its kernel leaves the table at once and is freed by the release that
 * drops its last reference. The disk half is jit/cache/disk.c; the state
 * both share is in jit/cache/cache_impl.h. */
#include "cache_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_INITIAL_BUCKETS 64

/* ---- the in-memory table --------------------------------------------------------- */

static size_t bucket_of(ir_hash_t key, size_t nbuckets) {
  uint64_t mixed = key.lo ^ (key.hi * 0x9e3779b97f4a7c15ull);
  return (size_t)(mixed ^ (mixed >> 29)) & (nbuckets - 1);
}

static int same_key(const cache_entry_t* e, ir_hash_t key, const char* key_text, size_t key_len) {
  return e->key.lo == key.lo && e->key.hi == key.hi && e->key_len == key_len &&
         memcmp(e->key_text, key_text, key_len) == 0;
}

static void entry_free(cache_entry_t* e) {
  if (e->free_fn) e->free_fn(e->value);
  free(e);
}

jit_cache_t* jit_cache_new_with(const rt_settings_t* set) {
  jit_cache_t* c = calloc(1, sizeof *c);
  if (!c) goto oom;
  c->nbuckets = CACHE_INITIAL_BUCKETS;
  c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
  if (!c->buckets) goto oom;
  if (pthread_mutex_init(&c->lock, NULL) != 0) goto oom;
  c->limit = set->memory_cache_limit >= 0 ? set->memory_cache_limit : JIT_CACHE_DEFAULT_MEMORY_LIMIT;
  c->disk_limit = set->disk_cache_limit;
  c->disk_limit_from = set->disk_cache_limit_from;
  c->next_serial = 1;
  if (jit_disk_set_dir(c, set) != UJ_OK) goto oom;
  return c;
oom:
  if (c) free(c->buckets);
  free(c);
  rt_error(UJ_ERR_OOM, "jit_cache_new: out of memory allocating the kernel cache (%zu bytes)",
           sizeof *c + CACHE_INITIAL_BUCKETS * sizeof *c->buckets);
  return NULL;
}

jit_cache_t* jit_cache_new(void) {
  rt_settings_t set;
  char problem[RT_SETTING_COUNT][RT_PROBLEM_CAP];
  rt_settings_from_env(&set, problem);
  static const rt_setting_t used[] = {RT_SETTING_CACHE, RT_SETTING_MEMORY_CACHE_LIMIT, RT_SETTING_DISK_CACHE_LIMIT};
  for (size_t i = 0; i < sizeof used / sizeof used[0]; i++)
    if (problem[used[i]][0]) {
      rt_error(UJ_ERR_INVALID, "%s", problem[used[i]]);
      return NULL;
    }
  return jit_cache_new_with(&set);
}

void jit_cache_free(jit_cache_t* c) {
  if (!c) return;
  for (size_t b = 0; b < c->nbuckets; b++) {
    cache_entry_t* e = c->buckets[b];
    while (e) {
      cache_entry_t* next = e->next;
      entry_free(e);
      e = next;
    }
  }
  free(c->buckets);
  free(c->disk_dir);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

/* The recency list, under the lock. */
static void recency_unlink(jit_cache_t* c, cache_entry_t* e) {
  if (e->newer) e->newer->older = e->older;
  else c->newest = e->older;
  if (e->older) e->older->newer = e->newer;
  else c->oldest = e->newer;
  e->newer = e->older = NULL;
}

static void recency_push_newest(jit_cache_t* c, cache_entry_t* e) {
  e->newer = NULL;
  e->older = c->newest;
  if (c->newest) c->newest->newer = e;
  c->newest = e;
  if (!c->oldest) c->oldest = e;
}

static void touch(jit_cache_t* c, cache_entry_t* e) {
  if (c->newest == e) return;
  recency_unlink(c, e);
  recency_push_newest(c, e);
}

/* Takes e out of the table (under the lock); it is freed by whoever drops
 * its last reference. Returns 1 when that is nobody: the caller frees it,
 * after unlocking. */
static int unlink_entry(jit_cache_t* c, cache_entry_t* e) {
  cache_entry_t** at = &c->buckets[bucket_of(e->key, c->nbuckets)];
  while (*at != e) at = &(*at)->next;
  *at = e->next;
  e->next = NULL;
  recency_unlink(c, e);
  e->linked = 0;
  c->count--;
  c->bytes -= (int64_t)e->bytes;
  return e->refs == 0;
}

/* Evicts victim, or the least recently used entries until the table is
 * within its limit (under the lock); those that nobody holds are chained
 * on *dead for the caller to free once it has unlocked. */
static void evict(jit_cache_t* c, cache_entry_t* victim, cache_entry_t** dead) {
  c->evictions++;
  if (victim->refs > 0) c->evicted_in_use++;
  if (unlink_entry(c, victim)) {
    victim->next = *dead;
    *dead = victim;
  }
}

static void evict_to_limit(jit_cache_t* c, cache_entry_t** dead) {
  while (c->bytes > c->limit && c->oldest) evict(c, c->oldest, dead);
}

/* Destructors never run under the table's lock, since the MIR engine's
 * takes that engine's lock, which is held around inserts. */
static void free_chain(cache_entry_t* dead) {
  while (dead) {
    cache_entry_t* next = dead->next;
    entry_free(dead);
    dead = next;
  }
}

uj_status_t jit_cache_set_memory_limit(jit_cache_t* c, int64_t bytes) {
  if (!c) return rt_error(UJ_ERR_INVALID, "jit_cache_set_memory_limit: the cache is NULL");
  if (bytes < 0)
    return rt_error(UJ_ERR_INVALID, "memory cache limit of %lld bytes: it must be 0 or more", (long long)bytes);
  cache_entry_t* dead = NULL;
  pthread_mutex_lock(&c->lock);
  c->limit = bytes;
  evict_to_limit(c, &dead);
  pthread_mutex_unlock(&c->lock);
  free_chain(dead);
  return UJ_OK;
}

jit_cache_entry_t* jit_cache_acquire(jit_cache_t* c, ir_hash_t key, const char* key_text) {
  if (!c || !key_text) return NULL;
  size_t key_len = strlen(key_text);
  cache_entry_t* found = NULL;
  pthread_mutex_lock(&c->lock);
  for (cache_entry_t* e = c->buckets[bucket_of(key, c->nbuckets)]; e; e = e->next) {
    if (same_key(e, key, key_text, key_len)) {
      found = e;
      found->refs++;
      touch(c, found);
      break;
    }
  }
  pthread_mutex_unlock(&c->lock);
  atomic_fetch_add(found ? &c->memory_hits : &c->memory_misses, 1);
  return found;
}

jit_cache_entry_t* jit_cache_acquire_serial(jit_cache_t* c, ir_hash_t key, uint64_t serial) {
  if (!c || !serial) return NULL;
  cache_entry_t* found = NULL;
  pthread_mutex_lock(&c->lock);
  for (cache_entry_t* e = c->buckets[bucket_of(key, c->nbuckets)]; e; e = e->next) {
    if (e->serial == serial) {
      found = e;
      found->refs++;
      touch(c, found);
      break;
    }
  }
  pthread_mutex_unlock(&c->lock);
  return found;
}

void jit_cache_release(jit_cache_t* c, jit_cache_entry_t* e) {
  if (!c || !e) return;
  pthread_mutex_lock(&c->lock);
  int last = --e->refs == 0 && !e->linked;
  pthread_mutex_unlock(&c->lock);
  if (last) entry_free(e);
}

void* jit_cache_value(const jit_cache_entry_t* e) { return e ? e->value : NULL; }

uint64_t jit_cache_serial(const jit_cache_entry_t* e) { return e ? e->serial : 0; }

ir_hash_t jit_cache_key(const jit_cache_entry_t* e) { return e ? e->key : (ir_hash_t){0, 0}; }

/* Doubles the table; on OOM keeps the old one (longer chains, still right).
 * Called with the lock held. */
static void grow_table(jit_cache_t* c) {
  size_t nbuckets = c->nbuckets * 2;
  cache_entry_t** buckets = calloc(nbuckets, sizeof *buckets);
  if (!buckets) return;
  for (size_t b = 0; b < c->nbuckets; b++) {
    cache_entry_t* e = c->buckets[b];
    while (e) {
      cache_entry_t* next = e->next;
      size_t nb = bucket_of(e->key, nbuckets);
      e->next = buckets[nb];
      buckets[nb] = e;
      e = next;
    }
  }
  free(c->buckets);
  c->buckets = buckets;
  c->nbuckets = nbuckets;
}

uj_status_t jit_cache_insert(jit_cache_t* c, ir_hash_t key, const char* key_text, void* value,
                             void (*free_fn)(void*), size_t value_bytes, jit_cache_entry_t** resident) {
  if (resident) *resident = NULL;
  if (!c || !key_text) {
    if (free_fn) free_fn(value);
    return rt_error(UJ_ERR_INVALID, "jit_cache_put: %s is NULL", c ? "key text" : "cache");
  }
  size_t key_len = strlen(key_text);
  cache_entry_t* fresh = malloc(sizeof *fresh + key_len + 1);
  if (!fresh) {
    if (free_fn) free_fn(value);
    return rt_error(UJ_ERR_OOM, "jit_cache_put: out of memory allocating a cache entry (%zu bytes)",
                    sizeof *fresh + key_len + 1);
  }
  *fresh = (cache_entry_t){.key = key, .value = value, .free_fn = free_fn, .key_len = key_len};
  /* saturating: a cost beyond any limit only means the entry is not kept */
  size_t own = sizeof *fresh + key_len + 1;
  fresh->bytes = value_bytes > (size_t)INT64_MAX - own ? (size_t)INT64_MAX : value_bytes + own;
  memcpy(fresh->key_text, key_text, key_len + 1);

  cache_entry_t *kept = NULL, *dead = NULL;
  pthread_mutex_lock(&c->lock);
  size_t b = bucket_of(key, c->nbuckets);
  for (cache_entry_t* e = c->buckets[b]; e; e = e->next) {
    if (same_key(e, key, key_text, key_len)) {
      kept = e;
      break;
    }
  }
  if (!kept) {
    if (c->count + 1 > c->nbuckets / 4 * 3) {
      grow_table(c);
      b = bucket_of(key, c->nbuckets);
    }
    fresh->next = c->buckets[b];
    c->buckets[b] = fresh;
    fresh->serial = c->next_serial++;
    fresh->linked = 1;
    c->count++;
    c->bytes += (int64_t)fresh->bytes;
    recency_push_newest(c, fresh);
    kept = fresh;
    fresh = NULL;
  } else {
    touch(c, kept);
  }
  if (resident) kept->refs++; /* before evicting: a held entry is freed by its holder */
  /* an entry that alone exceeds the limit goes first, rather than every
   * other entry in vain */
  if (kept->bytes > (size_t)c->limit) evict(c, kept, &dead);
  evict_to_limit(c, &dead);
  pthread_mutex_unlock(&c->lock);

  if (fresh) entry_free(fresh); /* the key was there already: keep the resident value */
  free_chain(dead);
  if (resident) *resident = kept;
  return UJ_OK;
}

uj_status_t jit_cache_put(jit_cache_t* c, ir_hash_t key, const char* key_text, void* value,
                          void (*free_fn)(void*), size_t value_bytes) {
  return jit_cache_insert(c, key, key_text, value, free_fn, value_bytes, NULL);
}

uj_status_t jit_cache_get_or_build(jit_cache_t* c, pthread_mutex_t* lock, ir_hash_t key, const char* key_text,
                                   jit_cache_build_fn build, void* arg, void (*free_fn)(void*),
                                   jit_cache_entry_t** out) {
  if ((*out = jit_cache_acquire(c, key, key_text))) return UJ_OK;
  pthread_mutex_lock(lock);
  uj_status_t s = UJ_OK;
  if (!(*out = jit_cache_acquire(c, key, key_text))) { /* not built meanwhile */
    void* built = NULL;
    size_t bytes = 0;
    if ((s = build(arg, &built, &bytes)) == UJ_OK)
      s = jit_cache_insert(c, key, key_text, built, free_fn, bytes, out);
  }
  pthread_mutex_unlock(lock);
  return s;
}

/* ---- statistics ---------------------------------------------------------------------- */

void jit_cache_counts(jit_cache_t* c, jit_cache_counts_t* out) {
  memset(out, 0, sizeof *out);
  if (!c) return;
  pthread_mutex_lock(&c->lock);
  out->memory_entries = (int64_t)c->count;
  out->memory_bytes = c->bytes;
  out->memory_limit = c->limit;
  out->memory_evictions = c->evictions;
  out->memory_evicted_in_use = c->evicted_in_use;
  pthread_mutex_unlock(&c->lock);
  out->memory_hits = atomic_load(&c->memory_hits);
  out->memory_misses = atomic_load(&c->memory_misses);
  out->disk_hits = atomic_load(&c->disk_hits);
  out->disk_misses = atomic_load(&c->disk_misses);
  out->disk_corrupt = atomic_load(&c->disk_corrupt);
  out->disk_stores = atomic_load(&c->disk_stores);
}

void jit_cache_stats(jit_cache_t* c, rt_buf_t* out) {
  if (!out) return;
  jit_cache_counts_t k;
  jit_cache_counts(c, &k);
  rt_buf_printf(out,
                "kernel cache, memory: %lld entries, %lld hits, %lld misses, %lld evicted, %lld of %lld bytes\n",
                (long long)k.memory_entries, (long long)k.memory_hits, (long long)k.memory_misses,
                (long long)k.memory_evictions, (long long)k.memory_bytes, (long long)k.memory_limit);
  int enabled = 0;
  if (c) {
    pthread_mutex_lock(&c->lock);
    enabled = c->disk_state != DISK_DISABLED; /* no check (and no warning) just for a report */
    pthread_mutex_unlock(&c->lock);
  }
  if (enabled)
    rt_buf_printf(
        out, "kernel cache, disk %s: %lld hits, %lld misses, %lld corrupt entries removed, %lld stores\n",
        c->disk_dir, (long long)k.disk_hits, (long long)k.disk_misses, (long long)k.disk_corrupt,
        (long long)k.disk_stores);
  else
    rt_buf_printf(out, "kernel cache, disk: disabled\n");
}
