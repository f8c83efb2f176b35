/* jit/cache/cache.h: the kernel cache (docs/DESIGN.md section 8), memory and disk.
 *
 * A kernel is keyed by the 128-bit hash of its key text (the canonical IR
 * plus engine, target, compiler version, dtypes and $param values) *and* by
 * the key text itself: lookups compare the full text, so two keys whose
 * hashes collide never return each other's kernel.
 *
 * In memory (jit/cache/cache.c): a thread-safe table bounded in bytes, least
 * recently used out first. Callers hold counted references, never bare
 * values, so a kernel never disappears under a call that runs it. On disk
 * (jit/cache/disk.c, for the C and CUDA engines, whose compiles are slow):
 * a payload and a .meta per key, handed back only when key, size and
 * checksum match, and then as the bytes that were checked; only in a
 * directory nobody else can write, since a cached shared object is code
 * that will run in this process; bounded in bytes (disk_space.c). */
#ifndef UJ_JIT_CACHE_H
#define UJ_JIT_CACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../../ir/ir.h"
#include "../../rt/rt.h"

typedef struct jit_cache jit_cache_t;

/* Creates an empty cache with a context's settings: the memory and disk
 * limits, and the disk location (the disk cache off, a directory, or the
 * default: XDG_CACHE_HOME, else HOME); the directory itself is created and
 * checked on first disk use. NULL on OOM. */
jit_cache_t* jit_cache_new_with(const rt_settings_t* set);
/* The same with the settings the environment gives now (UOPJIT_CACHE,
 * UOPJIT_CACHE_DIR, UOPJIT_CACHE_MEMORY_LIMIT, UOPJIT_CACHE_DISK_LIMIT):
 * NULL with UJ_ERR_INVALID naming the variable when one is invalid. */
jit_cache_t* jit_cache_new(void);
/* Points the disk cache at the settings' location (set->cache_off: none),
 * as a new cache would; the directory is checked again on its next use.
 * UJ_ERR_OOM when the path cannot be copied (the cache unchanged). */
uj_status_t jit_disk_set_dir(jit_cache_t* c, const rt_settings_t* set);
/* Frees every in-memory value with its destructor. Files on disk stay. No
 * reference may be outstanding (no call may be running on the context). */
void jit_cache_free(jit_cache_t* c);

/* ---- in memory ------------------------------------------------------------------ */

/* The in-memory limit when the environment sets none: room for thousands of
 * kernels (a MIR kernel costs about 40 KiB, a C one about 14 KiB) while a
 * caller that varies a $param forever stays within a bounded footprint. */
#define JIT_CACHE_DEFAULT_MEMORY_LIMIT ((int64_t)256 << 20)

/* Sets the limit on the bytes the table's entries cost (0: keep nothing
 * beyond the calls using it) and evicts least-recently-used entries down to
 * it at once. UJ_ERR_INVALID for a negative limit or a NULL cache. */
uj_status_t jit_cache_set_memory_limit(jit_cache_t* c, int64_t bytes);

/* An entry of the table, as its users hold it: a counted reference. */
typedef struct cache_entry jit_cache_entry_t;

/* A reference to the entry under (key, key_text), which becomes the most
 * recently used; NULL when there is none. Counts a hit or a miss. The
 * caller releases it with jit_cache_release. */
jit_cache_entry_t* jit_cache_acquire(jit_cache_t* c, ir_hash_t key, const char* key_text);
/* A reference to the entry that is still in the table under key with this
 * serial (jit_cache_serial), or NULL when it was evicted: for a memo that
 * remembers an entry without holding it. Counts neither a hit nor a miss. */
jit_cache_entry_t* jit_cache_acquire_serial(jit_cache_t* c, ir_hash_t key, uint64_t serial);
/* Gives the reference back; an evicted entry is freed with its last
 * reference. NULL is ignored. */
void jit_cache_release(jit_cache_t* c, jit_cache_entry_t* e);

/* The entry's value, valid while the reference is held. */
void* jit_cache_value(const jit_cache_entry_t* e);
/* The entry's serial: unique among every entry the cache ever held (a
 * 64-bit counter, never reused), so that a memo holding it can never
 * mistake a new entry for an evicted one. */
uint64_t jit_cache_serial(const jit_cache_entry_t* e);
/* The hash the entry is stored under (for jit_cache_acquire_serial). */
ir_hash_t jit_cache_key(const jit_cache_entry_t* e);

/* Stores value under (key, key_text), costing value_bytes (the value's
 * memory as its engine measures it) plus the entry and its key text; the
 * cache takes ownership of value in every case and frees it with free_fn
 * (which may be NULL) when the entry is evicted or the cache freed. If the
 * key is already present, the resident value is kept and the new one is
 * freed at once (two threads that compiled the same kernel then share the
 * first one). Then entries are evicted, least recently used first, until
 * the table is within its limit; an entry that alone exceeds the limit is
 * evicted at once instead, leaving the others. UJ_ERR_OOM (value freed) when the entry cannot
 * be allocated; UJ_ERR_INVALID for a NULL cache or key text. */
uj_status_t jit_cache_put(jit_cache_t* c, ir_hash_t key, const char* key_text, void* value,
                          void (*free_fn)(void*), size_t value_bytes);

/* jit_cache_put that also hands back a reference to the entry now in the
 * cache under the key (the caller's value, or the one already resident),
 * to be released; *resident is NULL when the call fails. */
uj_status_t jit_cache_insert(jit_cache_t* c, ir_hash_t key, const char* key_text, void* value,
                             void (*free_fn)(void*), size_t value_bytes, jit_cache_entry_t** resident);

/* A reference to the entry under (key, key_text), built on a miss: what
 * every engine does. A hit costs one lookup. On a miss, build(arg, &value,
 * &value_bytes) runs with `lock` held (one compile at a time: a second
 * thread asking for the same kernel waits and then finds it) and its value
 * is inserted with free_fn; the reference handed back is to the resident
 * entry. build's failure is returned as it is, with nothing inserted. */
typedef uj_status_t (*jit_cache_build_fn)(void* arg, void** value, size_t* value_bytes);
uj_status_t jit_cache_get_or_build(jit_cache_t* c, pthread_mutex_t* lock, ir_hash_t key, const char* key_text,
                                   jit_cache_build_fn build, void* arg, void (*free_fn)(void*),
                                   jit_cache_entry_t** out);

/* ---- on disk -------------------------------------------------------------------- */

/* 1 when the disk cache can be used: not disabled with UOPJIT_CACHE=0, and
 * the directory exists (created if needed, mode 0700), is a real directory
 * (not a symbolic link), is owned by the current user and is writable by
 * neither group nor others. Otherwise 0, after a one-time warning on stderr
 * naming the directory and the reason. */
int jit_disk_enabled(jit_cache_t* c);
/* The directory the disk cache uses, or NULL when it is disabled. */
const char* jit_disk_dir(jit_cache_t* c);

/* Writes payload as <32 hex digits of key>.<ext> and its description as
 * <hex>.<ext>.meta, each through a temporary file renamed into place, the
 * meta last (so a reader sees either no entry or a complete one). ext is
 * 1-15 characters of [A-Za-z0-9_], not "meta" ("so", "cubin"). path_out (may be NULL)
 * receives the payload's path. UJ_ERR_IO with the path and the system's
 * reason when a file cannot be written or the disk cache is disabled;
 * UJ_ERR_INVALID for a bad argument. */
uj_status_t jit_disk_store(jit_cache_t* c, ir_hash_t key, const char* key_text, const char* ext,
                           const void* payload, size_t size, char* path_out, size_t path_cap);

/* Looks the entry up and hands back its payload (malloc'ed, the caller
 * frees it): UJ_OK only when the meta exists, names exactly key_text, and
 * the payload has the recorded size and checksum; both must be regular files
 * owned by the user and writable by neither group nor others. The payload is
 * read once and the checksum taken over the very bytes handed back, so
 * nothing done to the files afterwards (a `cache clear`, a replaced or
 * damaged file) can change what the caller uses: load these bytes, never
 * the file again. A damaged or mismatching entry is deleted and counted as
 * corrupt; it and an absent entry both give UJ_ERR_IO (a miss: compile, then
 * store). */
uj_status_t jit_disk_load_bytes(jit_cache_t* c, ir_hash_t key, const char* key_text, const char* ext,
                                char** bytes, size_t* size);

/* What a cache miss of the C or CUDA engine gets (jit/cache/claim.c): the
 * disk cache's verified bytes for key (*from_disk 1), else what build
 * makes, stored to the disk cache. Among this process's contexts one
 * thread at a time builds a key: another that misses it meanwhile waits,
 * then takes the stored bytes. *bytes is malloc'ed; on failure NULL, with
 * build's status. */
typedef uj_status_t (*jit_disk_build_fn)(void* arg, char** bytes, size_t* size);
uj_status_t jit_disk_get_or_build(jit_cache_t* c, ir_hash_t key, const char* key_text, const char* ext,
                                  jit_disk_build_fn build, void* arg, char** bytes, size_t* size, int* from_disk);

/* jit_disk_get_or_build's bytes handed to load, which makes the engine's
 * kernel (*out, NULL on failure). Bytes from the disk that verify but will
 * not load (written by another build of the loader, say) are built afresh,
 * the new bytes replacing the entry. *size: the loaded bytes' size. */
typedef uj_status_t (*jit_disk_load_fn)(void* arg, const char* bytes, size_t size, void** out);
uj_status_t jit_disk_get_build_load(jit_cache_t* c, ir_hash_t key, const char* key_text, const char* ext,
                                    jit_disk_build_fn build, jit_disk_load_fn load, void* arg, void** out,
                                    size_t* size);

/* For tests: when not NULL, called with an entry's payload path right after
 * a disk load verified the entry and before the caller uses it: the moment
 * at which a concurrent `cache clear`, a replaced file or damage would do
 * the most harm. Set it only while no disk load runs. */
extern void (*jit_disk_verified_hook)(const char* payload_path);

/* 1 when this process can also write the directory (create and remove
 * entries); 0 with the reason in uj_last_error() for a directory that is
 * only readable (entries still load, new kernels are not stored) or not
 * usable at all. */
int jit_disk_writable(jit_cache_t* c);

/* ---- the disk cache's size (jit/cache/disk_space.c) ---------------------------------- */

/* Every store keeps the directory under a limit in bytes (payloads, metas
 * and temporaries): it removes temporaries and incomplete entries older than
 * ten minutes, then whole entries, least recently used first (a store or a
 * hit makes an entry recent), until the new entry fits; an entry larger than
 * the limit is not stored. The limit is 512 MiB unless the context's
 * setting (uj_ctx_set_disk_cache_limit, by default UOPJIT_CACHE_DISK_LIMIT:
 * bytes, or a number with K, M or G, powers of 1024) says otherwise.
 * Stores of several processes take turns (a lock on the directory). */

/* Sets the limit for this cache's later stores (the directory is brought
 * under it at the next store). UJ_ERR_INVALID for a NULL cache or bytes <= 0. */
uj_status_t jit_disk_set_limit(jit_cache_t* c, int64_t bytes);

typedef struct {
  int64_t limit;          /* bytes */
  const char* limit_from; /* "the default", "UOPJIT_CACHE_DISK_LIMIT" or "uj_ctx_set_disk_cache_limit" */
  int64_t bytes;          /* the cache's files now: payloads, metas and temporaries */
} jit_disk_usage_t;

/* The limit, and the directory's size now. UJ_ERR_IO (limit still filled in)
 * when the disk cache is disabled or the directory cannot be listed. */
uj_status_t jit_disk_usage(jit_cache_t* c, jit_disk_usage_t* out);

/* Removes every entry (payloads with or without a meta, metas) and any
 * temporary left by an interrupted store. Other files are left alone. */
uj_status_t jit_disk_clear(jit_cache_t* c);

/* Appends one line per entry to out: "<hex> <ext> <size> <first line of key>",
 * sorted by file name; an unreadable meta is listed as "<hex> <ext> ? (bad
 * meta)". */
uj_status_t jit_disk_list(jit_cache_t* c, rt_buf_t* out);

/* ---- statistics ------------------------------------------------------------------ */

typedef struct {
  int64_t memory_entries;
  int64_t memory_hits, memory_misses;
  int64_t memory_bytes;     /* what the entries in the table cost */
  int64_t memory_limit;     /* the limit on memory_bytes */
  int64_t memory_evictions; /* entries evicted to keep within it */
  int64_t memory_evicted_in_use; /* of those, held by a call then (freed when it released them) */
  int64_t disk_hits, disk_misses, disk_corrupt, disk_stores;
} jit_cache_counts_t;

void jit_cache_counts(jit_cache_t* c, jit_cache_counts_t* out);
/* Appends the counts as two readable lines (memory, disk) to out. */
void jit_cache_stats(jit_cache_t* c, rt_buf_t* out);

#endif
