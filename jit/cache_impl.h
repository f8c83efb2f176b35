/* jit/cache_impl.h: the kernel cache's state, shared by its two halves:
 * jit/cache.c (the in-memory table, statistics) and jit/cache_disk.c (the
 * directory and its entries). Internal to them. */
#ifndef UJ_JIT_CACHE_IMPL_H
#define UJ_JIT_CACHE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "cache.h"

typedef struct cache_entry {
  struct cache_entry* next;
  ir_hash_t key;
  void* value;
  void (*free_fn)(void*);
  size_t key_len;
  char key_text[]; /* key_len bytes plus a NUL */
} cache_entry_t;

enum { DISK_UNCHECKED, DISK_READY, DISK_DISABLED };

struct jit_cache {
  pthread_mutex_t lock; /* the table, and the disk state */
  cache_entry_t** buckets;
  size_t nbuckets; /* a power of two */
  size_t count;

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
