/* jit/cache/disk_space.c: how big the disk cache may grow (DESIGN.md
 * section 8); the entries themselves are jit/cache/disk.c.
 *
 * The directory is kept under a limit in bytes (payloads, metas and
 * temporaries together): 512 MiB unless UOPJIT_CACHE_DISK_LIMIT or
 * uj_ctx_set_disk_cache_limit says otherwise. Each store first makes room
 * (jit_disk_make_room): it removes what interrupted stores left behind,
 * then whole entries, least recently used first, until the new entry fits.
 * Stores hold an exclusive flock on the directory while they make room and
 * write, so two processes (or two contexts of one process) never both
 * count the same free space. Readers take no lock: an entry removed under
 * one is a miss, and the reader compiles. */
#include "cache_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


#define DEFAULT_LIMIT (INT64_C(512) << 20)
#define LOCK_WAIT_MS 3000

/* ---- the limit ---------------------------------------------------------------------- */

int64_t jit_disk_limit(jit_cache_t* c, const char** from) {
  pthread_mutex_lock(&c->lock);
  if (c->disk_limit <= 0) {
    c->disk_limit = DEFAULT_LIMIT;
    c->disk_limit_from = "the default";
  }
  int64_t limit = c->disk_limit;
  if (from) *from = c->disk_limit_from;
  pthread_mutex_unlock(&c->lock);
  return limit;
}

uj_status_t jit_disk_set_limit(jit_cache_t* c, int64_t bytes) {
  if (!c) return rt_error(UJ_ERR_INVALID, "jit_disk_set_limit: cache is NULL");
  if (bytes <= 0)
    return rt_error(UJ_ERR_INVALID, "the disk cache's limit must be a positive number of bytes, got %lld",
                    (long long)bytes);
  pthread_mutex_lock(&c->lock);
  c->disk_limit = bytes;
  c->disk_limit_from = "uj_ctx_set_disk_cache_limit";
  pthread_mutex_unlock(&c->lock);
  return UJ_OK;
}

/* ---- the lock ----------------------------------------------------------------------- */

/* A store that cannot have the lock within LOCK_WAIT_MS (a process stopped
 * while holding it) stores nothing; the run goes on with the kernel it
 * compiled. */
int jit_disk_lock(jit_cache_t* c) {
  int fd = open(c->disk_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    rt_error(UJ_ERR_IO, "kernel cache: cannot open %s: %s", c->disk_dir, strerror(errno));
    return -1;
  }
  for (int waited_ms = 0;; waited_ms++) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) return fd; /* no flock here (some network file systems): go on unlocked */
    if (waited_ms >= LOCK_WAIT_MS) break;
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  close(fd);
  rt_error(UJ_ERR_IO, "kernel cache: %s stayed locked by another store for %d s; not storing", c->disk_dir,
           LOCK_WAIT_MS / 1000);
  return -1;
}

int jit_disk_try_lock(jit_cache_t* c) {
  int fd = open(c->disk_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  int r;
  while ((r = flock(fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
  }
  if (r == 0) return fd;
  close(fd);
  return -1;
}

/* ---- the directory's files ---------------------------------------------------------------- */

#define STEM_CAP (JIT_DISK_HEX_LEN + 1 + JIT_DISK_EXT_MAX_LEN + 1)

/* One file of the cache, or (after merging) one entry. */
typedef struct {
  char stem[STEM_CAP]; /* <hex>.<ext> */
  jit_disk_name_t kind;
  uint64_t bytes;
  int64_t newest_ns; /* modification time */
  int has_payload, has_meta;
} file_t;

typedef struct {
  file_t* files;
  size_t n, cap;
  uint64_t temp_bytes; /* fresh temporaries: counted, never removed here */
} listing_t;

static int64_t mtime_ns(const struct stat* st) {
  return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* Lists the cache's files in dir_fd, removing stale temporaries on the way;
 * 0 on OOM or when the directory cannot be read. */
static int list_files(int dir_fd, int64_t stale_before_ns, listing_t* out) {
  int fd = dup(dir_fd);
  DIR* d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0) close(fd);
    return 0;
  }
  rewinddir(d);
  struct dirent* e;
  char ext[JIT_DISK_EXT_MAX_LEN + 1];
  int ok = 1;
  while (ok && (e = readdir(d)) != NULL) {
    jit_disk_name_t kind = jit_disk_classify_name(e->d_name, ext);
    struct stat st;
    if (kind == JIT_DISK_OTHER || fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (kind == JIT_DISK_TEMP) {
      if (mtime_ns(&st) < stale_before_ns && unlinkat(dir_fd, e->d_name, 0) == 0) continue;
      out->temp_bytes += (uint64_t)st.st_size;
      continue;
    }
    if (out->n == out->cap) {
      size_t cap = out->cap ? out->cap * 2 : 64;
      file_t* grown = realloc(out->files, cap * sizeof *grown);
      if (!grown) {
        ok = 0;
        break;
      }
      out->files = grown, out->cap = cap;
    }
    file_t* f = &out->files[out->n++];
    memset(f, 0, sizeof *f);
    snprintf(f->stem, sizeof f->stem, "%.*s.%s", JIT_DISK_HEX_LEN, e->d_name, ext);
    f->kind = kind;
    f->bytes = (uint64_t)st.st_size;
    f->newest_ns = mtime_ns(&st);
    f->has_payload = kind == JIT_DISK_PAYLOAD;
    f->has_meta = kind == JIT_DISK_META;
  }
  closedir(d);
  return ok;
}

static int by_stem(const void* a, const void* b) {
  return strcmp(((const file_t*)a)->stem, ((const file_t*)b)->stem);
}

/* Oldest first; the stem breaks ties so that the order is the same in
 * every process. */
static int by_age(const void* a, const void* b) {
  const file_t *x = a, *y = b;
  if (x->newest_ns != y->newest_ns) return x->newest_ns < y->newest_ns ? -1 : 1;
  return strcmp(x->stem, y->stem);
}

/* Merges the files of each stem into one entry (in place); the number of
 * entries. */
static size_t merge_entries(file_t* files, size_t n) {
  if (n == 0) return 0; /* files may be NULL, which qsort must not see */
  qsort(files, n, sizeof *files, by_stem);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (m > 0 && strcmp(files[m - 1].stem, files[i].stem) == 0) {
      file_t* e = &files[m - 1];
      e->bytes += files[i].bytes;
      if (files[i].newest_ns > e->newest_ns) e->newest_ns = files[i].newest_ns;
      e->has_payload |= files[i].has_payload;
      e->has_meta |= files[i].has_meta;
    } else {
      files[m++] = files[i];
    }
  }
  return m;
}

/* Removes an entry's files, the meta first: from then on readers see no
 * entry rather than one without its payload. */
static void remove_entry(int dir_fd, const file_t* e) {
  char name[STEM_CAP + 8];
  snprintf(name, sizeof name, "%s.meta", e->stem);
  unlinkat(dir_fd, name, 0);
  unlinkat(dir_fd, e->stem, 0);
}

/* Leftovers (temporaries, payloads without a meta, metas without a
 * payload) go once older than JIT_DISK_STALE_SECONDS: a store renames its
 * temporaries within moments, and removing a slow one's only fails that
 * store. An entry's recency is the newest modification time of its two
 * files: a store writes both, and a disk hit touches the meta. Listing is
 * O(files) per store, small beside the compile that precedes every store. */
void jit_disk_make_room(jit_cache_t* c, int dir_fd, uint64_t incoming, const char* stem) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t stale_before = ((int64_t)now.tv_sec - JIT_DISK_STALE_SECONDS) * 1000000000 + now.tv_nsec;
  listing_t l = {0};
  if (!list_files(dir_fd, stale_before, &l)) {
    free(l.files);
    return; /* store anyway: the next store tries again */
  }
  size_t n = merge_entries(l.files, l.n);
  uint64_t total = l.temp_bytes;
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    file_t* e = &l.files[i];
    if (strcmp(e->stem, stem) == 0) continue; /* being replaced */
    if (!(e->has_payload && e->has_meta) && e->newest_ns < stale_before) {
      remove_entry(dir_fd, e); /* what an interrupted store or removal left */
      continue;
    }
    total += e->bytes;
    l.files[kept++] = *e;
  }
  uint64_t limit = (uint64_t)jit_disk_limit(c, NULL);
  if (total + incoming > limit && kept > 0) {
    qsort(l.files, kept, sizeof *l.files, by_age);
    for (size_t i = 0; i < kept && total + incoming > limit; i++) {
      remove_entry(dir_fd, &l.files[i]);
      total -= l.files[i].bytes;
    }
  }
  free(l.files);
}

uj_status_t jit_disk_usage(jit_cache_t* c, jit_disk_usage_t* out) {
  if (!c || !out) return rt_error(UJ_ERR_INVALID, "jit_disk_usage: %s is NULL", c ? "out" : "cache");
  memset(out, 0, sizeof *out);
  out->limit = jit_disk_limit(c, &out->limit_from);
  if (!jit_disk_ready(c)) return UJ_ERR_IO;
  int dir_fd = open(c->disk_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  listing_t l = {0};
  int ok = dir_fd >= 0 && list_files(dir_fd, INT64_MIN, &l); /* removes nothing */
  int err = errno;
  if (dir_fd >= 0) close(dir_fd);
  if (!ok) {
    free(l.files);
    return rt_error(UJ_ERR_IO, "kernel cache: cannot list %s: %s", c->disk_dir, strerror(err));
  }
  out->bytes = (int64_t)l.temp_bytes;
  for (size_t i = 0; i < l.n; i++) out->bytes += (int64_t)l.files[i].bytes;
  free(l.files);
  return UJ_OK;
}
