/* jit/cache/claim.c: one build of a kernel at a time in a process.
 *
 * Contexts keep memory caches of their own and share the disk cache. When
 * threads on several contexts miss the same kernel at once, each would
 * compile it, in the system compiler or NVRTC, the slowest step of a call.
 * Instead the first claims the key and builds; the others wait for
 * its claim to end, then find its object in the disk cache
 * (jit_disk_get_or_build). Only builds that store to a disk cache claim:
 * without one a waiter would find nothing and compile all the same.
 *
 * The claims are a short list under one process-wide lock, with one
 * condition variable that every release broadcasts (builds are few and
 * long: a waiter woken for another key costs nothing). fork(): the lock is
 * held across it (rt_fork_guard); a child drops its parent's claims and
 * makes the condition variable anew (claims_here). */
#include <stdlib.h>

#include "cache_impl.h"

typedef struct claim {
  ir_hash_t key;
  struct claim* next;
} claim_t;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t ended; /* broadcast by every release */
  claim_t* claims;
  unsigned generation; /* rt_fork_generation() the list and ended belong to */
} builds = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0};

__attribute__((constructor)) static void guard_builds_lock_across_fork(void) {
  static const pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  rt_fork_guard(&builds.lock, &fresh);
}

/* With the lock held: in a child of fork() the parent's claims are
 * abandoned (their nodes stay allocated; their threads are gone). */
static void claims_here(void) {
  unsigned now = rt_fork_generation();
  if (builds.generation == now) return;
  builds.claims = NULL;
  pthread_cond_init(&builds.ended, NULL);
  builds.generation = now;
}

static claim_t** find(ir_hash_t key) {
  claim_t** at = &builds.claims;
  while (*at && ((*at)->key.lo != key.lo || (*at)->key.hi != key.hi)) at = &(*at)->next;
  return at;
}

/* 1 when the caller now holds the claim on key (it builds, then calls
 * release); 0 after another thread's claim on key has ended (the caller
 * looks in the disk cache again). Out of memory, the caller builds
 * unclaimed (1), as it would have without claims. */
static int claim(ir_hash_t key) {
  pthread_mutex_lock(&builds.lock);
  claims_here();
  int waited = 0;
  while (*find(key)) {
    pthread_cond_wait(&builds.ended, &builds.lock);
    waited = 1;
  }
  if (!waited) {
    claim_t* c = malloc(sizeof *c);
    if (c) *c = (claim_t){key, builds.claims}, builds.claims = c;
  }
  pthread_mutex_unlock(&builds.lock);
  return !waited;
}

static void release(ir_hash_t key) {
  pthread_mutex_lock(&builds.lock);
  claims_here();
  claim_t** at = find(key);
  if (*at) {
    claim_t* gone = *at;
    *at = gone->next;
    free(gone);
  }
  pthread_cond_broadcast(&builds.ended);
  pthread_mutex_unlock(&builds.lock);
}

/* jit_disk_get_or_build, the disk cache looked in first unless use_disk is 0. */
static uj_status_t get_or_build(jit_cache_t* c, ir_hash_t key, const char* key_text, const char* ext, int use_disk,
                                jit_disk_build_fn build, void* arg, char** bytes, size_t* size, int* from_disk) {
  *from_disk = 0;
  *bytes = NULL;
  *size = 0;
  int disk = jit_disk_enabled(c);
  for (;;) {
    if (use_disk && disk && jit_disk_load_bytes(c, key, key_text, ext, bytes, size) == UJ_OK) {
      *from_disk = 1;
      return UJ_OK;
    }
    if (!disk || claim(key)) break;
  }
  uj_status_t s = build(arg, bytes, size);
  if (s == UJ_OK && disk) jit_disk_store(c, key, key_text, ext, *bytes, *size, NULL, 0);
  if (disk) release(key);
  return s;
}

uj_status_t jit_disk_get_or_build(jit_cache_t* c, ir_hash_t key, const char* key_text, const char* ext,
                                  jit_disk_build_fn build, void* arg, char** bytes, size_t* size, int* from_disk) {
  return get_or_build(c, key, key_text, ext, 1, build, arg, bytes, size, from_disk);
}

uj_status_t jit_disk_get_build_load(jit_cache_t* c, ir_hash_t key, const char* key_text, const char* ext,
                                    jit_disk_build_fn build, jit_disk_load_fn load, void* arg, void** out,
                                    size_t* size) {
  char* bytes = NULL;
  int from_disk = 0;
  *out = NULL;
  uj_status_t s = get_or_build(c, key, key_text, ext, 1, build, arg, &bytes, size, &from_disk);
  if (s == UJ_OK) s = load(arg, bytes, *size, out);
  if (s != UJ_OK && from_disk) { /* verified yet not loadable: build afresh */
    free(bytes);
    s = get_or_build(c, key, key_text, ext, 0, build, arg, &bytes, size, &from_disk);
    if (s == UJ_OK) s = load(arg, bytes, *size, out);
  }
  free(bytes);
  return s;
}
