/* jit/cache/disk.c: the kernel cache on disk (docs/DESIGN.md section 8); the
 * in-memory table is jit/cache/cache.c, the shared state jit/cache/cache_impl.h.
 *
 * Every entry is two files in the cache directory, <32 hex digits of the
 * key>.<ext> (the payload: a shared object, a cubin) and <...>.<ext>.meta
 * (the full key text, the payload's size and its 128-bit checksum), both
 * written in full before either is renamed into place, the meta last: a
 * reader sees no entry or a complete one (jit_disk_store). A load reads the
 * payload once into memory and checks it there, and those bytes are what
 * the caller gets (jit_disk_load_bytes). Because a cached shared object is
 * code this process will run, the directory and every entry must belong to
 * the user and be writable by nobody else (directory_problem,
 * file_problem). Nothing here aborts: an I/O failure is UJ_ERR_IO with the
 * path and the system's reason in uj_last_error(), and the caller compiles
 * instead. */
#include "cache_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define META_MAGIC "uopjit cache entry 1\n"
#define META_MAX_BYTES (64u << 20) /* a meta is a key text plus a few lines */
#define EXT_MAX_LEN JIT_DISK_EXT_MAX_LEN
#define HEX_LEN JIT_DISK_HEX_LEN

/* Where the disk cache of these settings lives: NULL with *reason the
 * warning to give, or NULL reason when it is switched off on purpose. */
static char* disk_location(const rt_settings_t* set, const char** reason, int* oom) {
  *reason = NULL;
  *oom = 0;
  if (set->cache_off) return NULL; /* switched off on purpose: no warning */
  const char* base = set->cache_dir;
  const char* tail = "";
  if (!*base) {
    base = getenv("XDG_CACHE_HOME");
    tail = "/uopjit";
    if (!base || base[0] != '/') { /* XDG: a relative value is to be ignored */
      base = getenv("HOME");
      tail = "/.cache/uopjit";
    }
  }
  if (!base || !*base) {
    *reason =
        "uopjit: no cache directory (neither UOPJIT_CACHE_DIR nor HOME is set); not using the disk cache";
    return NULL;
  }
  size_t n = strlen(base) + strlen(tail) + 1;
  char* path = malloc(n);
  if (path) snprintf(path, n, "%s%s", base, tail);
  else *oom = 1;
  return path;
}

uj_status_t jit_disk_set_dir(jit_cache_t* c, const rt_settings_t* set) {
  const char* reason;
  int oom;
  char* dir = disk_location(set, &reason, &oom);
  if (oom) return rt_error(UJ_ERR_OOM, "out of memory copying the cache directory's path");
  pthread_mutex_lock(&c->lock);
  free(c->disk_dir);
  c->disk_dir = dir;
  c->disk_off_reason = reason;
  c->disk_problem[0] = '\0';
  c->disk_state = dir ? DISK_UNCHECKED : DISK_DISABLED;
  c->disk_warned = !dir && !reason; /* switched off on purpose: nothing to say */
  pthread_mutex_unlock(&c->lock);
  return UJ_OK;
}

/* ---- the directory ------------------------------------------------------------------ */

/* mkdir -p with mode 0700 for every directory it creates. */
static int make_directories(const char* dir) {
  char path[PATH_MAX];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(path, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (path[i] != '/' && path[i] != '\0') continue;
    char saved = path[i];
    path[i] = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return -1;
    path[i] = saved;
  }
  return 0;
}

/* Why dir must not be used, or NULL when it is fine; reason_buf holds any
 * formatted reason. Strict, because anyone who can write the directory
 * could make us dlopen and run their code: a real directory (not a symbolic
 * link), owned by the effective user, writable by neither group nor others,
 * checked again (an lstat) before every use. Its ancestors (the home
 * directory, /tmp with its sticky bit) are trusted like the rest of the
 * user's files. */
static const char* directory_problem(const char* dir, char* reason_buf, size_t cap) {
  struct stat st;
  if (lstat(dir, &st) != 0) {
    snprintf(reason_buf, cap, "cannot be used (%s)", strerror(errno));
    return reason_buf;
  }
  if (S_ISLNK(st.st_mode)) return "is a symbolic link";
  if (!S_ISDIR(st.st_mode)) return "is not a directory";
  if (st.st_uid != geteuid()) return "is owned by another user";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return "is writable by others";
  return NULL;
}

/* 1 when the disk cache may be used now. Creates the directory on first use
 * and checks it on every use; the first failure disables the disk cache for
 * good, with one warning. */
int jit_disk_ready(jit_cache_t* c) {
  char reason_buf[256];
  const char* problem = NULL;
  int ready;
  pthread_mutex_lock(&c->lock);
  if (c->disk_state == DISK_UNCHECKED) {
    struct stat st;
    if (lstat(c->disk_dir, &st) != 0 && errno == ENOENT && make_directories(c->disk_dir) != 0) {
      snprintf(reason_buf, sizeof reason_buf, "cannot be created (%s)", strerror(errno));
      problem = reason_buf;
    }
  }
  if (c->disk_state != DISK_DISABLED && !problem)
    problem = directory_problem(c->disk_dir, reason_buf, sizeof reason_buf);
  if (c->disk_state != DISK_DISABLED) {
    c->disk_state = problem ? DISK_DISABLED : DISK_READY;
    if (problem) snprintf(c->disk_problem, sizeof c->disk_problem, "%s", problem);
  }
  ready = c->disk_state == DISK_READY;
  if (!ready && !c->disk_warned) {
    c->disk_warned = 1;
    if (c->disk_problem[0])
      fprintf(stderr, "uopjit: cache directory %s %s; not using it\n", c->disk_dir, c->disk_problem);
    else if (c->disk_off_reason)
      fprintf(stderr, "%s\n", c->disk_off_reason);
  }
  if (!ready) {
    if (c->disk_problem[0])
      rt_error(UJ_ERR_IO, "kernel cache directory %s %s; disk cache disabled", c->disk_dir, c->disk_problem);
    else
      rt_error(UJ_ERR_IO, "the disk cache is disabled");
  }
  pthread_mutex_unlock(&c->lock);
  return ready;
}

int jit_disk_enabled(jit_cache_t* c) { return c && jit_disk_ready(c); }

const char* jit_disk_dir(jit_cache_t* c) { return jit_disk_enabled(c) ? c->disk_dir : NULL; }

int jit_disk_writable(jit_cache_t* c) {
  if (!jit_disk_enabled(c)) return 0;
  /* effective ids, as open and rename use; EROFS for a read-only mount */
  if (faccessat(AT_FDCWD, c->disk_dir, W_OK | X_OK, AT_EACCESS) == 0) return 1;
  rt_error(UJ_ERR_IO, "kernel cache directory %s is not writable (%s)", c->disk_dir, strerror(errno));
  return 0;
}

/* ---- file helpers ----------------------------------------------------------------- */

/* "%016llx%016llx" of hi and lo, written directly: it is on every lookup. */
static void hex128(ir_hash_t h, char out[HEX_LEN + 1]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[i] = digits[(h.hi >> (60 - 4 * i)) & 15];
    out[16 + i] = digits[(h.lo >> (60 - 4 * i)) & 15];
  }
  out[HEX_LEN] = '\0';
}

static int valid_ext(const char* ext) {
  if (!ext) return 0;
  size_t n = strlen(ext);
  if (n == 0 || n > EXT_MAX_LEN) return 0;
  for (size_t i = 0; i < n; i++) {
    char ch = ext[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_'))
      return 0;
  }
  return strcmp(ext, "meta") != 0; /* would make a payload look like a meta */
}

/* "<dir>/<hex>.<ext><suffix>" into buf; 0 when it does not fit. */
static int entry_path(const jit_cache_t* c, ir_hash_t key, const char* ext, const char* suffix, char* buf,
                      size_t cap) {
  char hex[HEX_LEN + 1];
  hex128(key, hex);
  int n = snprintf(buf, cap, "%s/%s.%s%s", c->disk_dir, hex, ext, suffix);
  return n > 0 && (size_t)n < cap;
}

/* Both files of an entry (buffers of PATH_MAX); 0 with the error set when
 * they do not fit. */
static int entry_paths(const jit_cache_t* c, ir_hash_t key, const char* ext, char* payload, char* meta) {
  if (entry_path(c, key, ext, "", payload, PATH_MAX) && entry_path(c, key, ext, ".meta", meta, PATH_MAX)) return 1;
  rt_error(UJ_ERR_IO, "kernel cache: path too long under %s", c->disk_dir);
  return 0;
}

static int write_all(int fd, const void* data, size_t size) {
  const char* p = data;
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += n;
    size -= (size_t)n;
  }
  return 0;
}

/* Writes the bytes to a fresh temporary file next to final_path, its name
 * in temp (PATH_MAX); on failure nothing is left behind. */
static uj_status_t write_temporary(const char* final_path, const void* data, size_t size, char* temp) {
  if (snprintf(temp, PATH_MAX, "%s.tmp-XXXXXX", final_path) >= PATH_MAX)
    return rt_error(UJ_ERR_IO, "kernel cache: path too long: %s", final_path);
  int fd = mkostemp(temp, O_CLOEXEC); /* not inherited by a compiler run from another thread */
  if (fd < 0) return rt_error(UJ_ERR_IO, "kernel cache: cannot create %s: %s", temp, strerror(errno));
  int err = write_all(fd, data, size) != 0 ? errno : 0;
  if (close(fd) != 0 && !err) err = errno;
  if (err) {
    unlink(temp);
    return rt_error(UJ_ERR_IO, "kernel cache: cannot write %s: %s", temp, strerror(err));
  }
  return UJ_OK;
}

static uj_status_t rename_temporary(const char* temp, const char* final_path) {
  if (rename(temp, final_path) == 0) return UJ_OK;
  int err = errno;
  unlink(temp);
  return rt_error(UJ_ERR_IO, "kernel cache: cannot rename %s to %s: %s", temp, final_path, strerror(err));
}

/* Why an opened cache file must not be trusted, or NULL. */
static const char* file_problem(const struct stat* st) {
  if (!S_ISREG(st->st_mode)) return "not a regular file";
  if (st->st_uid != geteuid()) return "owned by another user";
  if (st->st_mode & (S_IWGRP | S_IWOTH)) return "writable by others";
  return NULL;
}

/* Reads the whole of fd (at most max bytes) into a malloc'ed buffer with a
 * NUL after it. expected is the size fstat gave: the buffer starts one byte
 * larger, so a file of that size takes one read and one more to see its
 * end, with no regrowing. 0 on success; -1 with errno (EFBIG past max). */
static int read_all(int fd, size_t max, size_t expected, char** out, size_t* len) {
  size_t cap = expected < max ? expected + 1 : max, n = 0;
  if (cap == 0) cap = 1;
  char* buf = malloc(cap + 1);
  if (!buf) return -1;
  for (;;) {
    if (n == cap) {
      if (cap >= max) {
        free(buf);
        errno = EFBIG;
        return -1;
      }
      cap = cap * 2 > max ? max : cap * 2;
      char* bigger = realloc(buf, cap + 1);
      if (!bigger) {
        free(buf);
        errno = ENOMEM;
        return -1;
      }
      buf = bigger;
    }
    ssize_t got = read(fd, buf + n, cap - n);
    if (got < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      free(buf);
      errno = err;
      return -1;
    }
    if (got == 0) break;
    n += (size_t)got;
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return 0;
}

/* ---- the meta file ------------------------------------------------------------------ */

typedef struct {
  char ext[EXT_MAX_LEN + 1];
  unsigned long long size;
  char checksum[HEX_LEN + 1];
  const char* key_text; /* points into the meta's text */
  size_t key_len;
} meta_t;

static char* format_meta(const char* ext, size_t size, ir_hash_t checksum, const char* key_text,
                         size_t* len) {
  char hex[HEX_LEN + 1];
  hex128(checksum, hex);
  rt_buf_t b = {0};
  size_t key_len = strlen(key_text);
  rt_buf_printf(&b, "%sext %s\nsize %zu\nchecksum %s\nkey %zu\n%s", META_MAGIC, ext, size, hex, key_len,
                key_text);
  *len = b.len;
  return rt_buf_take(&b);
}

/* Reads "<name> <value>\n" at *p into value (at most cap-1 chars). */
static int meta_field(const char** p, const char* end, const char* name, char* value, size_t cap) {
  size_t name_len = strlen(name);
  if ((size_t)(end - *p) < name_len + 1 || memcmp(*p, name, name_len) != 0 || (*p)[name_len] != ' ') return 0;
  const char* v = *p + name_len + 1;
  const char* nl = memchr(v, '\n', (size_t)(end - v));
  if (!nl || nl == v || (size_t)(nl - v) >= cap) return 0;
  memcpy(value, v, (size_t)(nl - v));
  value[nl - v] = '\0';
  *p = nl + 1;
  return 1;
}

static int parse_decimal(const char* s, unsigned long long* out) {
  if (!*s) return 0;
  unsigned long long v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9' || v > (ULLONG_MAX - 9) / 10) return 0;
    v = v * 10 + (unsigned long long)(*s - '0');
  }
  *out = v;
  return 1;
}

/* Parses the meta text strictly: every field present, in order, and exactly
 * key_len bytes of key text after them. */
static int parse_meta(const char* text, size_t len, meta_t* m) {
  const char* p = text;
  const char* end = text + len;
  size_t magic_len = strlen(META_MAGIC);
  if (len < magic_len || memcmp(p, META_MAGIC, magic_len) != 0) return 0;
  p += magic_len;
  char size_text[32], key_len_text[32];
  unsigned long long key_len;
  if (!meta_field(&p, end, "ext", m->ext, sizeof m->ext) ||
      !meta_field(&p, end, "size", size_text, sizeof size_text) ||
      !meta_field(&p, end, "checksum", m->checksum, sizeof m->checksum) ||
      !meta_field(&p, end, "key", key_len_text, sizeof key_len_text))
    return 0;
  if (!parse_decimal(size_text, &m->size) || !parse_decimal(key_len_text, &key_len)) return 0;
  if (strlen(m->checksum) != HEX_LEN || key_len != (unsigned long long)(end - p)) return 0;
  m->key_text = p;
  m->key_len = (size_t)key_len;
  return 1;
}

/* Opens and reads a cache file that must be trusted: O_NOFOLLOW, then the
 * checks of file_problem on the opened file. Returns 0 with the text, -1 when
 * absent (errno ENOENT), -2 when present but not to be trusted or unreadable
 * (*problem says why). */
static int read_trusted_file(const char* path, size_t max, char** text, size_t* len, struct stat* st,
                             const char** problem, char* problem_buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return -1;
    snprintf(problem_buf, cap, "cannot be opened (%s)", strerror(errno));
    *problem = problem_buf;
    return -2;
  }
  if (fstat(fd, st) != 0 || (*problem = file_problem(st)) != NULL) {
    if (!*problem) {
      snprintf(problem_buf, cap, "cannot be examined (%s)", strerror(errno));
      *problem = problem_buf;
    }
    close(fd);
    return -2;
  }
  if (read_all(fd, max, st->st_size > 0 ? (size_t)st->st_size : 0, text, len) != 0) {
    snprintf(problem_buf, cap, "cannot be read (%s)", strerror(errno));
    *problem = problem_buf;
    close(fd);
    return -2;
  }
  close(fd);
  return 0;
}

void (*jit_disk_verified_hook)(const char* payload_path);

/* ---- store and load ------------------------------------------------------------------ */

/* Each file goes to a fresh temporary (mkostemp: O_EXCL, mode 0600) in the
 * same directory, both in full before either is renamed over its final
 * name, the meta last and any old meta removed first, so a store that runs
 * out of space leaves the directory as it was. Nothing is fsync'ed: a crash
 * can still leave a payload that does not match its meta (rename without
 * fsync is not durable on every file system), and the checksum catches
 * that. The checksum guards against damage, not against an attacker: that
 * is the directory checks' job. A store first makes room under the
 * directory's size limit, holding a lock on it (jit/cache/disk_space.c). */
uj_status_t jit_disk_store(jit_cache_t* c, ir_hash_t key, const char* key_text, const char* ext,
                           const void* payload, size_t size, char* path_out, size_t path_cap) {
  if (!c || !key_text || !valid_ext(ext) || (!payload && size))
    return rt_error(UJ_ERR_INVALID,
                    "jit_disk_store: bad argument (cache, key text, extension \"%s\" or payload)",
                    ext ? ext : "(null)");
  if (!jit_disk_ready(c)) return UJ_ERR_IO;
  char payload_path[PATH_MAX], meta_path[PATH_MAX];
  if (!entry_paths(c, key, ext, payload_path, meta_path)) return UJ_ERR_IO;
  if (path_out && snprintf(path_out, path_cap, "%s", payload_path) >= (int)path_cap)
    return rt_error(UJ_ERR_INVALID, "jit_disk_store: path buffer too small for %s", payload_path);

  size_t meta_len;
  char* meta = format_meta(ext, size, ir_hash_bytes(payload, size), key_text, &meta_len);
  if (!meta)
    return rt_error(UJ_ERR_OOM, "jit_disk_store: out of memory formatting an entry's meta (%zu bytes of key)",
                    strlen(key_text));
  uint64_t incoming = (uint64_t)size + meta_len;
  int64_t limit = jit_disk_limit(c, NULL);
  if (incoming > (uint64_t)limit) {
    free(meta);
    return rt_error(UJ_ERR_IO, "kernel cache: an entry of %llu bytes is larger than the disk cache's limit of %lld; not stored",
                    (unsigned long long)incoming, (long long)limit);
  }
  /* Under the directory's lock: make room, then write, so that no other
   * store counts the same free space. */
  int dir_fd = jit_disk_lock(c);
  if (dir_fd < 0) {
    free(meta);
    return UJ_ERR_IO;
  }
  const char* name = strrchr(payload_path, '/') + 1;
  jit_disk_make_room(c, dir_fd, incoming, name);
  /* Both files are written in full to temporaries before either is renamed:
   * a write that fails (a full disk, a file size limit) then leaves the
   * directory as it was, the old entry included. Only renames follow,
   * which need no space. The old meta goes first, so that no reader ever
   * pairs it with the new payload; between the renames the entry is simply
   * absent, and a payload without its meta is a miss (jit_disk_load_bytes). */
  char payload_temp[PATH_MAX], meta_temp[PATH_MAX];
  uj_status_t s = write_temporary(payload_path, payload, size, payload_temp);
  if (s == UJ_OK && (s = write_temporary(meta_path, meta, meta_len, meta_temp)) != UJ_OK) unlink(payload_temp);
  if (s == UJ_OK && unlink(meta_path) != 0 && errno != ENOENT) {
    s = rt_error(UJ_ERR_IO, "kernel cache: cannot remove %s: %s", meta_path, strerror(errno));
    unlink(payload_temp), unlink(meta_temp);
  }
  if (s == UJ_OK && (s = rename_temporary(payload_temp, payload_path)) != UJ_OK) unlink(meta_temp);
  if (s == UJ_OK) s = rename_temporary(meta_temp, meta_path);
  /* A failure past the meta's removal leaves at payload_path either the old
   * payload or the new one, without a meta: ours to remove, under the lock
   * no other store is writing it under. */
  struct stat st;
  if (s != UJ_OK && lstat(meta_path, &st) != 0 && errno == ENOENT) unlink(payload_path);
  close(dir_fd); /* and with it the lock */
  free(meta);
  if (s == UJ_OK) atomic_fetch_add(&c->disk_stores, 1);
  return s;
}

/* Marks an entry as just used, for the least-recently-used eviction of
 * jit/cache/disk_space.c: its meta's modification time becomes now. Only
 * when it is older than TOUCH_AFTER_SECONDS, which spares a system call on
 * most hits and is fine-grained enough for choosing what to evict. A
 * read-only directory stays as it is. */
#define TOUCH_AFTER_SECONDS 60
static void touch_if_old(const char* meta_path, const struct stat* st) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  if (now.tv_sec - st->st_mtim.tv_sec >= TOUCH_AFTER_SECONDS) utimensat(AT_FDCWD, meta_path, NULL, AT_SYMLINK_NOFOLLOW);
}

/* A payload without its meta is no entry: a store that failed or was
 * killed between its files, or one under way (its meta not renamed yet).
 * Readers never load it (the meta names the key and checksum) and treat it
 * as a miss; this removes it, so that it does not sit in the directory
 * until a store's sweep of stale files (jit/cache/disk_space.c). Only
 * while no store holds the directory's lock, and after looking for the
 * meta again under it: a store holds the lock from its first write to its
 * last rename, so a payload still without a meta then is an orphan and not
 * one being written. A directory that is locked, or cannot be locked, is
 * left as it is. */
static void remove_orphan_payload(jit_cache_t* c, const char* payload_path, const char* meta_path) {
  struct stat st;
  if (lstat(payload_path, &st) != 0) return; /* the usual miss: nothing there */
  int dir_fd = jit_disk_try_lock(c);
  if (dir_fd < 0) return;
  if (lstat(meta_path, &st) != 0 && errno == ENOENT) unlink(payload_path);
  close(dir_fd);
}

/* Deletes both files of a damaged entry and reports it. */
static uj_status_t reject_entry(jit_cache_t* c, const char* meta_path, const char* payload_path,
                                const char* why) {
  unlink(meta_path);
  unlink(payload_path);
  atomic_fetch_add(&c->disk_corrupt, 1);
  return rt_error(UJ_ERR_IO, "kernel cache entry %s: %s; entry removed", meta_path, why);
}

/* The checksum is taken over the bytes read, which are what the caller
 * gets: the engines load them from memory (jit/c/c.c through a sealed
 * memfd), never the file again, so nothing done to the directory after the
 * check reaches what runs. An entry that fails a check (an entry not a
 * regular file of the user's, opened with O_NOFOLLOW; a wrong key, size or
 * checksum) is deleted and recompiled, never loaded. A hit touches the meta
 * (least-recently-used order). */
uj_status_t jit_disk_load_bytes(jit_cache_t* c, ir_hash_t key, const char* key_text, const char* ext,
                                char** bytes, size_t* size) {
  if (!bytes || !size) return rt_error(UJ_ERR_INVALID, "jit_disk_load_bytes: bytes and size must not be NULL");
  *bytes = NULL;
  *size = 0;
  if (!c || !key_text || !valid_ext(ext))
    return rt_error(UJ_ERR_INVALID, "jit_disk_load_bytes: bad argument (cache, key text or extension \"%s\")",
                    ext ? ext : "(null)");
  if (!jit_disk_ready(c)) return UJ_ERR_IO;
  char payload_path[PATH_MAX], meta_path[PATH_MAX];
  if (!entry_paths(c, key, ext, payload_path, meta_path)) return UJ_ERR_IO;

  char problem_buf[256], why[384];
  const char* problem = NULL;
  char* meta_text = NULL;
  size_t meta_len;
  struct stat meta_st, st;
  int r = read_trusted_file(meta_path, META_MAX_BYTES, &meta_text, &meta_len, &meta_st, &problem, problem_buf,
                            sizeof problem_buf);
  if (r == -1) {
    remove_orphan_payload(c, payload_path, meta_path);
    atomic_fetch_add(&c->disk_misses, 1);
    return rt_error(UJ_ERR_IO, "kernel cache: no entry %s", meta_path);
  }
  if (r == -2) {
    snprintf(why, sizeof why, "meta %s", problem);
    return reject_entry(c, meta_path, payload_path, why);
  }
  meta_t m;
  if (!parse_meta(meta_text, meta_len, &m) || strcmp(m.ext, ext) != 0) {
    free(meta_text);
    return reject_entry(c, meta_path, payload_path, "malformed meta");
  }
  if (m.key_len != strlen(key_text) || memcmp(m.key_text, key_text, m.key_len) != 0) {
    free(meta_text);
    return reject_entry(c, meta_path, payload_path, "stored key text differs");
  }

  /* Read once, into memory: the checksum is taken over these bytes and
   * these bytes are what the caller gets, so nothing that happens to the
   * file afterwards can reach what runs. */
  char* payload = NULL;
  size_t payload_len;
  size_t limit = m.size < SIZE_MAX - 1 ? (size_t)m.size + 1 : SIZE_MAX - 1; /* +1: see a longer file */
  r = read_trusted_file(payload_path, limit, &payload, &payload_len, &st, &problem, problem_buf,
                        sizeof problem_buf);
  if (r != 0) {
    free(meta_text);
    snprintf(why, sizeof why, "payload %s", r == -1 ? "missing" : problem);
    return reject_entry(c, meta_path, payload_path, why);
  }
  char checksum[HEX_LEN + 1];
  hex128(ir_hash_bytes(payload, payload_len), checksum);
  int size_ok = payload_len == m.size;
  int checksum_ok = strcmp(checksum, m.checksum) == 0;
  free(meta_text);
  if (!size_ok || !checksum_ok) {
    free(payload);
    return reject_entry(c, meta_path, payload_path,
                        !size_ok ? "payload size differs from the meta" : "payload checksum mismatch");
  }
  touch_if_old(meta_path, &meta_st);
  if (jit_disk_verified_hook) jit_disk_verified_hook(payload_path);
  *bytes = payload;
  *size = payload_len;
  atomic_fetch_add(&c->disk_hits, 1);
  return UJ_OK;
}

/* ---- clear and list ----------------------------------------------------------------- */

jit_disk_name_t jit_disk_classify_name(const char* name, char ext_out[EXT_MAX_LEN + 1]) {
  for (int i = 0; i < HEX_LEN; i++) {
    char ch = name[i];
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return JIT_DISK_OTHER;
  }
  const char* p = name + HEX_LEN;
  if (*p++ != '.') return JIT_DISK_OTHER;
  size_t n = 0;
  while (n < EXT_MAX_LEN && p[n] && p[n] != '.') n++;
  if (n == 0 || (p[n] && p[n] != '.')) return JIT_DISK_OTHER;
  memcpy(ext_out, p, n);
  ext_out[n] = '\0';
  if (!valid_ext(ext_out)) return JIT_DISK_OTHER;
  const char* rest = p + n;
  if (strncmp(rest, ".meta", 5) == 0) {
    rest += 5;
    if (!*rest) return JIT_DISK_META;
  } else if (!*rest) {
    return JIT_DISK_PAYLOAD;
  }
  if (strncmp(rest, ".tmp-", 5) == 0 && strlen(rest + 5) == 6) return JIT_DISK_TEMP;
  return JIT_DISK_OTHER;
}

uj_status_t jit_disk_clear(jit_cache_t* c) {
  if (!c) return rt_error(UJ_ERR_INVALID, "jit_disk_clear: cache is NULL");
  if (!jit_disk_ready(c)) return UJ_ERR_IO;
  struct dirent** names = NULL;
  int n = scandir(c->disk_dir, &names, NULL, alphasort);
  if (n < 0) return rt_error(UJ_ERR_IO, "kernel cache: cannot list %s: %s", c->disk_dir, strerror(errno));
  uj_status_t s = UJ_OK;
  char ext[EXT_MAX_LEN + 1], path[PATH_MAX];
  for (int i = 0; i < n; i++) {
    if (jit_disk_classify_name(names[i]->d_name, ext) != JIT_DISK_OTHER && s == UJ_OK) {
      snprintf(path, sizeof path, "%s/%s", c->disk_dir, names[i]->d_name);
      if (unlink(path) != 0 && errno != ENOENT)
        s = rt_error(UJ_ERR_IO, "kernel cache: cannot remove %s: %s", path, strerror(errno));
    }
    free(names[i]);
  }
  free(names);
  return s;
}

uj_status_t jit_disk_list(jit_cache_t* c, rt_buf_t* out) {
  if (!c || !out) return rt_error(UJ_ERR_INVALID, "jit_disk_list: %s is NULL", c ? "out" : "cache");
  if (!jit_disk_ready(c)) return UJ_ERR_IO;
  struct dirent** names = NULL;
  int n = scandir(c->disk_dir, &names, NULL, alphasort);
  if (n < 0) return rt_error(UJ_ERR_IO, "kernel cache: cannot list %s: %s", c->disk_dir, strerror(errno));
  char ext[EXT_MAX_LEN + 1], path[PATH_MAX], problem_buf[256];
  for (int i = 0; i < n; i++) {
    const char* name = names[i]->d_name;
    if (jit_disk_classify_name(name, ext) == JIT_DISK_META) {
      snprintf(path, sizeof path, "%s/%s", c->disk_dir, name);
      char* text = NULL;
      size_t len;
      struct stat st;
      const char* problem = NULL;
      meta_t m;
      if (read_trusted_file(path, META_MAX_BYTES, &text, &len, &st, &problem, problem_buf,
                            sizeof problem_buf) == 0 &&
          parse_meta(text, len, &m)) {
        const char* nl = memchr(m.key_text, '\n', m.key_len);
        int first_line = (int)(nl ? (size_t)(nl - m.key_text) : m.key_len);
        rt_buf_printf(out, "%.*s %s %llu %.*s\n", HEX_LEN, name, ext, m.size, first_line, m.key_text);
      } else {
        rt_buf_printf(out, "%.*s %s ? (bad meta)\n", HEX_LEN, name, ext);
      }
      free(text);
    }
    free(names[i]);
  }
  free(names);
  return out->failed ? rt_error(UJ_ERR_OOM, "jit_disk_list: out of memory growing the listing past %zu bytes", out->cap)
                     : UJ_OK;
}
