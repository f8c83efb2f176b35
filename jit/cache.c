/* jit/cache.c: the kernel cache's in-memory table (docs/DESIGN.md section 8).
 *
 * In memory it is a chained hash table behind one mutex, doubling when it is
 * three-quarters full. Entries are found by the 128-bit hash and confirmed by
 * comparing the whole key text, so a hash collision is a miss, never a wrong
 * kernel.
 *
 * The disk half, with its rules, is jit/cache_disk.c; the state both
 * share is in jit/cache_impl.h. */
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

jit_cache_t* jit_cache_new(void) {
  jit_cache_t* c = calloc(1, sizeof *c);
  if (!c) goto oom;
  c->nbuckets = CACHE_INITIAL_BUCKETS;
  c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
  if (!c->buckets) goto oom;
  if (pthread_mutex_init(&c->lock, NULL) != 0) goto oom;
  c->disk_dir = jit_disk_location(&c->disk_off_reason);
  if (!c->disk_dir) {
    c->disk_state = DISK_DISABLED;
    if (!c->disk_off_reason) c->disk_warned = 1; /* UOPJIT_CACHE=0: nothing to say */
  } else {
    c->disk_state = DISK_UNCHECKED;
  }
  return c;
oom:
  if (c) free(c->buckets);
  free(c);
  rt_error(UJ_ERR_OOM, "jit_cache_new: out of memory");
  return NULL;
}

void jit_cache_free(jit_cache_t* c) {
  if (!c) return;
  for (size_t b = 0; b < c->nbuckets; b++) {
    cache_entry_t* e = c->buckets[b];
    while (e) {
      cache_entry_t* next = e->next;
      if (e->free_fn) e->free_fn(e->value);
      free(e);
      e = next;
    }
  }
  free(c->buckets);
  free(c->disk_dir);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

void* jit_cache_get(jit_cache_t* c, ir_hash_t key, const char* key_text) {
  if (!c || !key_text) return NULL;
  size_t key_len = strlen(key_text);
  void* value = NULL;
  int found = 0;
  pthread_mutex_lock(&c->lock);
  for (cache_entry_t* e = c->buckets[bucket_of(key, c->nbuckets)]; e; e = e->next) {
    if (same_key(e, key, key_text, key_len)) {
      value = e->value;
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&c->lock);
  atomic_fetch_add(found ? &c->memory_hits : &c->memory_misses, 1);
  return value;
}

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
                             void (*free_fn)(void*), void** resident) {
  if (resident) *resident = NULL;
  if (!c || !key_text) {
    if (free_fn) free_fn(value);
    return rt_error(UJ_ERR_INVALID, "jit_cache_put: %s is NULL", c ? "key text" : "cache");
  }
  size_t key_len = strlen(key_text);
  cache_entry_t* fresh = malloc(sizeof *fresh + key_len + 1);
  if (!fresh) {
    if (free_fn) free_fn(value);
    return rt_error(UJ_ERR_OOM, "jit_cache_put: out of memory");
  }
  fresh->key = key;
  fresh->value = value;
  fresh->free_fn = free_fn;
  fresh->key_len = key_len;
  memcpy(fresh->key_text, key_text, key_len + 1);

  void* kept = NULL;
  pthread_mutex_lock(&c->lock);
  size_t b = bucket_of(key, c->nbuckets);
  for (cache_entry_t* e = c->buckets[b]; e; e = e->next) {
    if (same_key(e, key, key_text, key_len)) {
      kept = e->value;
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
    c->count++;
    kept = value;
    fresh = NULL;
  }
  pthread_mutex_unlock(&c->lock);

  if (fresh) { /* the key was there already: keep the resident value */
    free(fresh);
    if (free_fn) free_fn(value);
  }
  if (resident) *resident = kept;
  return UJ_OK;
}

uj_status_t jit_cache_put(jit_cache_t* c, ir_hash_t key, const char* key_text, void* value,
                          void (*free_fn)(void*)) {
  return jit_cache_insert(c, key, key_text, value, free_fn, NULL);
}

uj_status_t jit_cache_get_or_build(jit_cache_t* c, pthread_mutex_t* lock, ir_hash_t key, const char* key_text,
                                   jit_cache_build_fn build, void* arg, void (*free_fn)(void*), void** value) {
  *value = jit_cache_get(c, key, key_text);
  if (*value) return UJ_OK;
  pthread_mutex_lock(lock);
  uj_status_t s = UJ_OK;
  if (!(*value = jit_cache_get(c, key, key_text))) { /* not built meanwhile */
    void* built = NULL;
    if ((s = build(arg, &built)) == UJ_OK) s = jit_cache_insert(c, key, key_text, built, free_fn, value);
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
  rt_buf_printf(out, "kernel cache, memory: %lld entries, %lld hits, %lld misses\n",
                (long long)k.memory_entries, (long long)k.memory_hits, (long long)k.memory_misses);
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
