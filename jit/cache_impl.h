/* jit/cache_impl.h: the kernel cache's state, shared by its two halves:
 * jit/cache.c (the in-memory table, statistics) and jit/cache_disk.c (the
 * directory and its entries). Internal to them. */
#ifndef UJ_JIT_CACHE_IMPL_H
#define UJ_JIT_CACHE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "cache.h"

/* An in-memory entry. It is in its bucket's chain and on the recency list
 * while `linked`; refs counts the references its users hold. An entry
 * leaves the table when evicted and is freed once it is out and has no
 * reference left. All of it but the constant fields is under the lock. */
typedef struct cache_entry {
  struct cache_entry* next;                 /* the bucket's chain */
  struct cache_entry *newer, *older;        /* the recency list */
  ir_hash_t key;
  uint64_t serial;
  void* value;
  void (*free_fn)(void*);
  size_t bytes; /* what it costs: the value, this record and the key text */
  int64_t refs;
  int linked;
  size_t key_len;
  char key_text[]; /* key_len bytes plus a NUL */
} cache_entry_t;

enum { DISK_UNCHECKED, DISK_READY, DISK_DISABLED };

struct jit_cache {
  pthread_mutex_t lock; /* the table, and the disk state */
  cache_entry_t** buckets;
  size_t nbuckets; /* a power of two */
  size_t count;
  cache_entry_t *newest, *oldest; /* the recency list: every entry in the table */
  int64_t bytes;                  /* the cost of the entries in the table */
  int64_t limit;                  /* bytes is brought down to it after every insert */
  uint64_t next_serial;
  int64_t evictions, evicted_in_use;

  char* disk_dir; /* NULL when UOPJIT_CACHE=0 or no location is known */
  int disk_state;
  int disk_warned;
  char disk_problem[256];      /* why the directory was refused, once it was */
  const char* disk_off_reason; /* why disk_dir is NULL, for the one warning */

  atomic_llong memory_hits, memory_misses;
  atomic_llong disk_hits, disk_misses, disk_corrupt, disk_stores;
};

/* Where the disk cache lives, from UOPJIT_CACHE, UOPJIT_CACHE_DIR,
 * XDG_CACHE_HOME or HOME (jit/cache_disk.c); NULL with *reason the warning
 * to give, or NULL reason when the disk cache is switched off on purpose. */
char* jit_disk_location(const char** reason);

#endif
