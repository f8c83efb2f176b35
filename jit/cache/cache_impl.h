/* jit/cache/cache_impl.h: the kernel cache's state, shared by its parts:
 * jit/cache/cache.c (the in-memory table, statistics), jit/cache/disk.c (the
 * directory and its entries) and jit/cache/disk_space.c (the directory's
 * size limit, eviction, stale temporaries). Internal to them. */
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

  char* disk_dir; /* NULL when switched off (UOPJIT_CACHE=0) or no location is known */
  int disk_state;
  int disk_warned;
  char disk_problem[256];      /* why the directory was refused, once it was */
  const char* disk_off_reason; /* why disk_dir is NULL, for the one warning */
  int64_t disk_limit;          /* bytes; 0: the default */
  const char* disk_limit_from; /* where disk_limit came from, for reports */

  atomic_llong memory_hits, memory_misses;
  atomic_llong disk_hits, disk_misses, disk_corrupt, disk_stores;
};

/* 1 when the disk cache may be used now (the directory is created and
 * checked; the first failure disables it with one warning); 0 with the
 * error set (jit/cache/disk.c). */
int jit_disk_ready(jit_cache_t* c);

/* The files of the cache directory, by name: <32 hex digits>.<ext> (a
 * payload), <hex>.<ext>.meta, and either with a .tmp-XXXXXX suffix (a store
 * under way, or one that was interrupted). */
#define JIT_DISK_HEX_LEN 32
#define JIT_DISK_EXT_MAX_LEN 15
typedef enum { JIT_DISK_OTHER, JIT_DISK_PAYLOAD, JIT_DISK_META, JIT_DISK_TEMP } jit_disk_name_t;
/* What name is, with its extension in ext_out (jit/cache/disk.c). */
jit_disk_name_t jit_disk_classify_name(const char* name, char ext_out[JIT_DISK_EXT_MAX_LEN + 1]);

/* Makes room for an entry of `incoming` bytes in the directory open as
 * dir_fd (held under jit_disk_lock): removes temporaries and incomplete
 * entries left behind longer than JIT_DISK_STALE_SECONDS, then the least
 * recently used entries until the directory and the new entry fit under the
 * limit. The files of `stem` (<hex>.<ext>, the entry being replaced) are
 * neither counted nor removed (jit/cache/disk_space.c). */
#define JIT_DISK_STALE_SECONDS (10 * 60)
void jit_disk_make_room(jit_cache_t* c, int dir_fd, uint64_t incoming, const char* stem);

/* The directory, open and locked against the stores of other processes
 * and threads (flock), or -1 with the error set when the lock cannot be
 * had within a few seconds; where the file system cannot lock, the
 * descriptor unlocked. Close it to unlock. */
int jit_disk_lock(jit_cache_t* c);
/* The directory, open and locked, when no store holds the lock now; else
 * (locked, or no flock on this file system) -1, with no error set: for a
 * reader's tidying, which waits for nothing (jit/cache/disk_space.c). */
int jit_disk_try_lock(jit_cache_t* c);

/* The limit in bytes (the context's setting, else the default); *from
 * (may be NULL) says where it came from. */
int64_t jit_disk_limit(jit_cache_t* c, const char** from);

#endif
