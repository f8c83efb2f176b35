/* tests/test_cache.c: the kernel cache (jit/cache/cache.c), in memory and on disk.
 *
 * The disk tests each get a fresh directory under /tmp (UOPJIT_CACHE_DIR is
 * set before jit_cache_new) and damage entries on purpose: every damaged,
 * mismatching or untrustworthy entry must be refused, because what the cache
 * hands back is a shared object that will be loaded and run. (The thread
 * pool has its own tests, tests/test_threads.c.) */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../jit/cache/cache.h"
#include "../rt/rt.h"
#include "harness.h"
#include "kernel_cache_check.h"

/* ---- helpers ------------------------------------------------------------------------- */


static int remove_one(const char* path, const struct stat* st, int type, struct FTW* ftw) {
  (void)st, (void)type, (void)ftw;
  return remove(path);
}

static void remove_tree(const char* dir) { nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS); }

/* A fresh directory for one test; the cache is pointed at it (or at a path
 * under it when sub is not NULL). */
typedef struct {
  char root[64];
  char dir[256];
} temp_dir_t;

static void temp_dir_open(temp_dir_t* t, const char* sub) {
  strcpy(t->root, "/tmp/uopjit-test-XXXXXX");
  if (!mkdtemp(t->root)) {
    perror("mkdtemp");
    exit(2);
  }
  if (sub)
    snprintf(t->dir, sizeof t->dir, "%s/%s", t->root, sub);
  else
    snprintf(t->dir, sizeof t->dir, "%s", t->root);
  unsetenv("UOPJIT_CACHE");
  setenv("UOPJIT_CACHE_DIR", t->dir, 1);
}

static void temp_dir_close(temp_dir_t* t) {
  chmod(t->root, 0700);
  remove_tree(t->root);
  unsetenv("UOPJIT_CACHE_DIR");
}

static int file_exists(const char* path) { return access(path, F_OK) == 0; }

static long file_size(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Rewrites one byte of a file in place. */
static void flip_byte(const char* path, long offset) {
  int fd = open(path, O_RDWR);
  unsigned char b = 0;
  if (fd < 0 || pread(fd, &b, 1, offset) != 1) {
    if (fd >= 0) close(fd);
    return;
  }
  b ^= 0x20;
  if (pwrite(fd, &b, 1, offset) != 1) perror("pwrite");
  close(fd);
}

static const char payload_bytes[] =
    "\x7f"
    "ELF pretend shared object, 0123456789 abcdefghijklmnopqrstuvwxyz";
#define PAYLOAD_SIZE (sizeof payload_bytes - 1)
static const char key_one[] = "engine c\ntarget x86-64-v3\nfunc f(a: f32[n]) { ... }";

/* jit_disk_load_bytes with the payload copied into got (NUL-terminated,
 * "" when the load fails) and its size into *len (may be NULL). */
static uj_status_t load_copy(jit_cache_t* c, ir_hash_t h, const char* key, const char* ext, char* got, size_t cap,
                             size_t* len) {
  char* bytes = NULL;
  size_t size = 0;
  uj_status_t s = jit_disk_load_bytes(c, h, key, ext, &bytes, &size);
  got[0] = '\0';
  if (s == UJ_OK) {
    size_t n = size < cap - 1 ? size : cap - 1;
    memcpy(got, bytes, n);
    got[n] = '\0';
  }
  if (len) *len = size;
  free(bytes);
  return s;
}

/* 1 when got (from load_copy) is key_one's payload. */
static int is_payload(const char* got) { return memcmp(got, payload_bytes, PAYLOAD_SIZE + 1) == 0; }

/* Stores key_one's entry in a fresh cache and leaves its paths behind. */
static jit_cache_t* cache_with_entry(char* payload_path, char* meta_path) {
  jit_cache_t* c = jit_cache_new();
  char path[4000];
  uj_status_t s =
      jit_disk_store(c, hash_of(key_one), key_one, "so", payload_bytes, PAYLOAD_SIZE, path, sizeof path);
  CHECK(s == UJ_OK);
  if (s != UJ_OK) printf("  %s\n", uj_last_error());
  strcpy(payload_path, path);
  snprintf(meta_path, 4096, "%s.meta", path);
  return c;
}

/* ---- memory --------------------------------------------------------------------------- */

/* The value under (key, text), or NULL: a reference taken and given back
 * at once, which is safe here because nothing is evicted (the tests of the
 * limit and of references are in tests/test_cache_memory.c). */
static void* peek(jit_cache_t* c, ir_hash_t key, const char* text) {
  jit_cache_entry_t* e = jit_cache_acquire(c, key, text);
  void* value = jit_cache_value(e);
  jit_cache_release(c, e);
  return value;
}

TEST(memory_put_get) {
  atomic_store(&values_freed, 0);
  jit_cache_t* c = jit_cache_new();
  CHECK(c != NULL);
  CHECK(jit_cache_put(c, hash_of("a"), "a", new_int(1), free_value, 0) == UJ_OK);
  CHECK(jit_cache_put(c, hash_of("b"), "b", new_int(2), free_value, 0) == UJ_OK);
  int* a = peek(c, hash_of("a"), "a");
  int* b = peek(c, hash_of("b"), "b");
  CHECK(a && *a == 1);
  CHECK(b && *b == 2);
  CHECK(peek(c, hash_of("c"), "c") == NULL);
  jit_cache_counts_t k;
  jit_cache_counts(c, &k);
  CHECK(k.memory_entries == 2 && k.memory_hits == 2 && k.memory_misses == 1);
  /* A second put of the same key keeps the first value and frees the new. */
  CHECK(jit_cache_put(c, hash_of("a"), "a", new_int(10), free_value, 0) == UJ_OK);
  CHECK(atomic_load(&values_freed) == 1);
  a = peek(c, hash_of("a"), "a");
  CHECK(a && *a == 1);
  jit_cache_entry_t* resident = NULL;
  CHECK(jit_cache_insert(c, hash_of("b"), "b", new_int(20), free_value, 0, &resident) == UJ_OK);
  CHECK(jit_cache_value(resident) == b);
  jit_cache_release(c, resident);
  CHECK(jit_cache_insert(c, hash_of("d"), "d", new_int(4), free_value, 0, &resident) == UJ_OK);
  CHECK(resident && *(int*)jit_cache_value(resident) == 4);
  jit_cache_release(c, resident);
  jit_cache_free(c);
  CHECK(atomic_load(&values_freed) == 5);
}

TEST(memory_bad_arguments) {
  atomic_store(&values_freed, 0);
  jit_cache_t* c = jit_cache_new();
  CHECK(jit_cache_put(c, hash_of("a"), NULL, new_int(1), free_value, 0) == UJ_ERR_INVALID);
  CHECK(jit_cache_put(NULL, hash_of("a"), "a", new_int(1), free_value, 0) == UJ_ERR_INVALID);
  CHECK(atomic_load(&values_freed) == 2); /* ownership passes even on failure */
  CHECK(peek(c, hash_of("a"), NULL) == NULL);
  CHECK(peek(NULL, hash_of("a"), "a") == NULL);
  /* A NULL destructor: the value is not the cache's to free. */
  static int static_value = 7;
  CHECK(jit_cache_put(c, hash_of("s"), "s", &static_value, NULL, 0) == UJ_OK);
  CHECK(peek(c, hash_of("s"), "s") == &static_value);
  jit_cache_free(c);
  jit_cache_free(NULL);
}

TEST(memory_collision_is_a_miss) {
  jit_cache_t* c = jit_cache_new();
  ir_hash_t same = {0x1234, 0x5678};
  CHECK(jit_cache_put(c, same, "kernel one", new_int(1), free_value, 0) == UJ_OK);
  CHECK(peek(c, same, "kernel two") == NULL);
  CHECK(peek(c, same, "kernel one ") == NULL); /* a prefix is not equal */
  CHECK(peek(c, same, "kernel on") == NULL);
  CHECK(jit_cache_put(c, same, "kernel two", new_int(2), free_value, 0) == UJ_OK);
  int* one = peek(c, same, "kernel one");
  int* two = peek(c, same, "kernel two");
  CHECK(one && *one == 1);
  CHECK(two && *two == 2);
  /* Same text, different hash: also a different key. */
  ir_hash_t other = {0x1234, 0x5679};
  CHECK(peek(c, other, "kernel one") == NULL);
  jit_cache_free(c);
}

TEST(memory_many_entries) {
  atomic_store(&values_freed, 0);
  jit_cache_t* c = jit_cache_new();
  enum { N = 20000 };
  char text[64];
  for (int i = 0; i < N; i++) {
    snprintf(text, sizeof text, "kernel %d", i);
    /* Every fourth key shares its hash with the one before: long chains. */
    ir_hash_t h = hash_of(text);
    if (i % 4 == 1) {
      char prev[64];
      snprintf(prev, sizeof prev, "kernel %d", i - 1);
      h = hash_of(prev);
    }
    CHECK(jit_cache_put(c, h, text, new_int(i), free_value, 0) == UJ_OK);
  }
  int bad = 0;
  for (int i = 0; i < N; i++) {
    snprintf(text, sizeof text, "kernel %d", i);
    ir_hash_t h = hash_of(text);
    if (i % 4 == 1) {
      char prev[64];
      snprintf(prev, sizeof prev, "kernel %d", i - 1);
      h = hash_of(prev);
    }
    int* v = peek(c, h, text);
    if (!v || *v != i) bad++;
  }
  CHECK(bad == 0);
  jit_cache_counts_t k;
  jit_cache_counts(c, &k);
  CHECK(k.memory_entries == N);
  jit_cache_free(c);
  CHECK(atomic_load(&values_freed) == N);
}

typedef struct {
  jit_cache_t* cache;
  int thread;
  int wrong;
} cache_worker_t;

static void* cache_worker(void* arg) {
  cache_worker_t* w = arg;
  char text[64];
  /* All threads work on the same 500 keys, in different orders. */
  for (int round = 0; round < 4000; round++) {
    int id = (round * (w->thread * 2 + 1) + w->thread * 37) % 500;
    snprintf(text, sizeof text, "shared kernel %d", id);
    ir_hash_t h = hash_of(text);
    int* v = peek(w->cache, h, text);
    if (!v) {
      jit_cache_entry_t* resident = NULL;
      if (jit_cache_insert(w->cache, h, text, new_int(id), free_value, 0, &resident) != UJ_OK || !resident ||
          *(int*)jit_cache_value(resident) != id)
        w->wrong++;
      jit_cache_release(w->cache, resident);
    } else if (*v != id) {
      w->wrong++;
    }
  }
  return NULL;
}

TEST(memory_threads) {
  atomic_store(&values_freed, 0);
  jit_cache_t* c = jit_cache_new();
  pthread_t threads[4];
  cache_worker_t workers[4];
  for (int i = 0; i < 4; i++) {
    workers[i] = (cache_worker_t){c, i, 0};
    CHECK(pthread_create(&threads[i], NULL, cache_worker, &workers[i]) == 0);
  }
  for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
  for (int i = 0; i < 4; i++) CHECK(workers[i].wrong == 0);
  jit_cache_counts_t k;
  jit_cache_counts(c, &k);
  CHECK(k.memory_entries == 500);
  CHECK(k.memory_hits + k.memory_misses == 4 * 4000);
  jit_cache_free(c);
  CHECK(atomic_load(&values_freed) >= 500);
}

/* ---- disk: round trips ------------------------------------------------------------------ */

TEST(disk_store_load) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  char payload_path[4096], meta_path[4096];
  jit_cache_t* c = cache_with_entry(payload_path, meta_path);
  CHECK(jit_disk_enabled(c));
  CHECK(jit_disk_dir(c) && strcmp(jit_disk_dir(c), t.dir) == 0);
  CHECK(file_exists(payload_path) && file_exists(meta_path));
  CHECK(file_size(payload_path) == (long)PAYLOAD_SIZE);
  /* The file name is the 32 hex digits of the key and the extension. */
  const char* name = strrchr(payload_path, '/') + 1;
  CHECK(strlen(name) == 32 + 3 && strcmp(name + 32, ".so") == 0);
  struct stat st;
  CHECK(stat(payload_path, &st) == 0 && (st.st_mode & 0777) == 0600);

  char loaded[4096];
  CHECK(load_copy(c, hash_of(key_one), key_one, "so", loaded, sizeof loaded, NULL) == UJ_OK);
  CHECK(is_payload(loaded));
  /* Another extension is another entry. */
  CHECK(load_copy(c, hash_of(key_one), key_one, "cubin", loaded, sizeof loaded, NULL) == UJ_ERR_IO);
  jit_cache_counts_t k;
  jit_cache_counts(c, &k);
  CHECK(k.disk_hits == 1 && k.disk_misses == 1 && k.disk_corrupt == 0 && k.disk_stores == 1);
  jit_cache_free(c);

  /* A new cache (as a new process would make) finds it too. */
  c = jit_cache_new();
  CHECK(load_copy(c, hash_of(key_one), key_one, "so", loaded, sizeof loaded, NULL) == UJ_OK);
  CHECK(is_payload(loaded));
  jit_cache_free(c);

  /* And so does another process. */
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    jit_cache_t* child = jit_cache_new();
    char child_got[4096];
    int ok = load_copy(child, hash_of(key_one), key_one, "so", child_got, sizeof child_got, NULL) == UJ_OK &&
             is_payload(child_got);
    jit_cache_free(child);
    _exit(ok ? 0 : 1);
  }
  int status = -1;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  temp_dir_close(&t);
}

TEST(disk_store_replaces) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  jit_cache_t* c = jit_cache_new();
  char path[4096];
  CHECK(jit_disk_store(c, hash_of(key_one), key_one, "so", "old", 3, path, sizeof path) == UJ_OK);
  CHECK(jit_disk_store(c, hash_of(key_one), key_one, "so", "newer", 5, path, sizeof path) == UJ_OK);
  size_t len = 0;
  CHECK(load_copy(c, hash_of(key_one), key_one, "so", path, sizeof path, &len) == UJ_OK);
  CHECK(len == 5 && strcmp(path, "newer") == 0);
  /* An empty payload is a valid one. */
  CHECK(jit_disk_store(c, hash_of("empty"), "empty", "bin", NULL, 0, path, sizeof path) == UJ_OK);
  CHECK(load_copy(c, hash_of("empty"), "empty", "bin", path, sizeof path, &len) == UJ_OK);
  CHECK(len == 0);
  jit_cache_free(c);
  temp_dir_close(&t);
}

TEST(disk_bad_arguments) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  jit_cache_t* c = jit_cache_new();
  char path[4096];
  const char* bad_exts[] = {"", "../so", "s/o", "a.b", "meta", "waytoolongextension", NULL};
  for (int i = 0; i < 7; i++) {
    CHECK(jit_disk_store(c, hash_of("k"), "k", bad_exts[i], "x", 1, path, sizeof path) == UJ_ERR_INVALID);
    CHECK(load_copy(c, hash_of("k"), "k", bad_exts[i], path, sizeof path, NULL) == UJ_ERR_INVALID);
  }
  CHECK(jit_disk_store(c, hash_of("k"), NULL, "so", "x", 1, path, sizeof path) == UJ_ERR_INVALID);
  char tiny[8];
  CHECK(jit_disk_store(c, hash_of("k"), "k", "so", "x", 1, tiny, sizeof tiny) == UJ_ERR_INVALID);
  jit_cache_free(c);
  temp_dir_close(&t);
}

/* ---- disk: damaged entries are refused and removed ---------------------------------- */

static void check_refused(jit_cache_t* c, const char* payload_path, const char* meta_path) {
  char loaded[4096] = "";
  CHECK(load_copy(c, hash_of(key_one), key_one, "so", loaded, sizeof loaded, NULL) == UJ_ERR_IO);
  CHECK(strstr(uj_last_error(), "removed") != NULL);
  CHECK(loaded[0] == '\0');
  CHECK(!file_exists(payload_path));
  CHECK(!file_exists(meta_path));
  jit_cache_counts_t k;
  jit_cache_counts(c, &k);
  CHECK(k.disk_corrupt == 1 && k.disk_hits == 0);
  /* Now it is simply absent. */
  CHECK(load_copy(c, hash_of(key_one), key_one, "so", loaded, sizeof loaded, NULL) == UJ_ERR_IO);
  jit_cache_counts(c, &k);
  CHECK(k.disk_corrupt == 1 && k.disk_misses == 1);
}

TEST(disk_flipped_byte) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  char payload_path[4096], meta_path[4096];
  jit_cache_t* c = cache_with_entry(payload_path, meta_path);
  flip_byte(payload_path, 20);
  check_refused(c, payload_path, meta_path);
  CHECK(strstr(uj_last_error(), meta_path) != NULL);
  jit_cache_free(c);
  temp_dir_close(&t);
}

TEST(disk_truncated_payload) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  char payload_path[4096], meta_path[4096];
  jit_cache_t* c = cache_with_entry(payload_path, meta_path);
  CHECK(truncate(payload_path, (off_t)PAYLOAD_SIZE - 1) == 0);
  check_refused(c, payload_path, meta_path);
  jit_cache_free(c);
  temp_dir_close(&t);
}

TEST(disk_longer_payload) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  char payload_path[4096], meta_path[4096];
  jit_cache_t* c = cache_with_entry(payload_path, meta_path);
  FILE* f = fopen(payload_path, "ab");
  fputs("appended", f);
  fclose(f);
  check_refused(c, payload_path, meta_path);
  jit_cache_free(c);
  temp_dir_close(&t);
}

TEST(disk_meta_key_differs) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  char payload_path[4096], meta_path[4096];
  jit_cache_t* c = cache_with_entry(payload_path, meta_path);
  /* The last byte of the meta is the last byte of the key text. */
  flip_byte(meta_path, file_size(meta_path) - 1);
  check_refused(c, payload_path, meta_path);
  jit_cache_free(c);
  temp_dir_close(&t);
}

TEST(disk_same_hash_other_key) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  char payload_path[4096], meta_path[4096];
  jit_cache_t* c = cache_with_entry(payload_path, meta_path);
  /* The same hash with another key text (a collision) must not load it. */
  char loaded[4096];
  CHECK(load_copy(c, hash_of(key_one), "engine c\nsomething else", "so", loaded, sizeof loaded, NULL) ==
        UJ_ERR_IO);
  CHECK(strstr(uj_last_error(), "key text differs") != NULL);
  CHECK(!file_exists(payload_path));
  jit_cache_free(c);
  temp_dir_close(&t);
}

TEST(disk_malformed_meta) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  char payload_path[4096], meta_path[4096];
  jit_cache_t* c = cache_with_entry(payload_path, meta_path);
  flip_byte(meta_path, 3); /* inside the magic line */
  check_refused(c, payload_path, meta_path);
  jit_cache_free(c);
  temp_dir_close(&t);
}

TEST(disk_missing_meta) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  char payload_path[4096], meta_path[4096];
  jit_cache_t* c = cache_with_entry(payload_path, meta_path);
  CHECK(unlink(meta_path) == 0);
  char loaded[4096] = "";
  CHECK(load_copy(c, hash_of(key_one), key_one, "so", loaded, sizeof loaded, NULL) == UJ_ERR_IO);
  CHECK(loaded[0] == '\0');
  jit_cache_counts_t k;
  jit_cache_counts(c, &k);
  CHECK(k.disk_misses == 1 && k.disk_hits == 0);
  /* A store over the orphan makes a whole entry again. */
  CHECK(jit_disk_store(c, hash_of(key_one), key_one, "so", payload_bytes, PAYLOAD_SIZE, NULL, 0) == UJ_OK);
  CHECK(load_copy(c, hash_of(key_one), key_one, "so", loaded, sizeof loaded, NULL) == UJ_OK);
  jit_cache_free(c);
  temp_dir_close(&t);
}

TEST(disk_missing_payload) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  char payload_path[4096], meta_path[4096];
  jit_cache_t* c = cache_with_entry(payload_path, meta_path);
  CHECK(unlink(payload_path) == 0);
  check_refused(c, payload_path, meta_path);
  jit_cache_free(c);
  temp_dir_close(&t);
}

TEST(disk_untrusted_entry_files) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  char payload_path[4096], meta_path[4096];
  /* A payload others can write. */
  jit_cache_t* c = cache_with_entry(payload_path, meta_path);
  CHECK(chmod(payload_path, 0666) == 0);
  check_refused(c, payload_path, meta_path);
  jit_cache_free(c);
  /* A meta that is a symbolic link to a real meta elsewhere. */
  c = cache_with_entry(payload_path, meta_path);
  char elsewhere[4096];
  snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere.meta", t.dir);
  CHECK(rename(meta_path, elsewhere) == 0);
  CHECK(symlink(elsewhere, meta_path) == 0);
  char loaded[4096];
  CHECK(load_copy(c, hash_of(key_one), key_one, "so", loaded, sizeof loaded, NULL) == UJ_ERR_IO);
  CHECK(!file_exists(payload_path));
  jit_cache_free(c);
  temp_dir_close(&t);
}

/* ---- disk: the directory -------------------------------------------------------------- */

TEST(disk_directory_created) {
  temp_dir_t t;
  temp_dir_open(&t, "a/b/cache");
  jit_cache_t* c = jit_cache_new();
  CHECK(jit_disk_enabled(c));
  struct stat st;
  CHECK(stat(t.dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
  char parent[300];
  snprintf(parent, sizeof parent, "%s/a", t.root);
  CHECK(stat(parent, &st) == 0 && (st.st_mode & 0077) == 0);
  jit_cache_free(c);
  temp_dir_close(&t);
}

TEST(disk_directory_from_xdg_and_home) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  unsetenv("UOPJIT_CACHE_DIR");
  char* saved_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  char* saved_xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
  char expected[300];

  setenv("XDG_CACHE_HOME", t.root, 1);
  jit_cache_t* c = jit_cache_new();
  snprintf(expected, sizeof expected, "%s/uopjit", t.root);
  CHECK(jit_disk_dir(c) && strcmp(jit_disk_dir(c), expected) == 0);
  jit_cache_free(c);

  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", t.root, 1);
  c = jit_cache_new();
  snprintf(expected, sizeof expected, "%s/.cache/uopjit", t.root);
  CHECK(jit_disk_dir(c) && strcmp(jit_disk_dir(c), expected) == 0);
  CHECK(file_exists(expected));
  jit_cache_free(c);

  if (saved_home)
    setenv("HOME", saved_home, 1);
  else
    unsetenv("HOME");
  if (saved_xdg)
    setenv("XDG_CACHE_HOME", saved_xdg, 1);
  else
    unsetenv("XDG_CACHE_HOME");
  free(saved_home);
  free(saved_xdg);
  temp_dir_close(&t);
}

static void check_directory_refused(const char* what) {
  jit_cache_t* c = jit_cache_new();
  CHECK(!jit_disk_enabled(c));
  CHECK(jit_disk_dir(c) == NULL);
  char path[4096];
  CHECK(jit_disk_store(c, hash_of(key_one), key_one, "so", payload_bytes, PAYLOAD_SIZE, path, sizeof path) ==
        UJ_ERR_IO);
  CHECK(load_copy(c, hash_of(key_one), key_one, "so", path, sizeof path, NULL) == UJ_ERR_IO);
  CHECK(jit_disk_clear(c) == UJ_ERR_IO);
  CHECK(strstr(uj_last_error(), "disabled") != NULL);
  if (what && !strstr(uj_last_error(), what)) {
    printf("  expected \"%s\" in: %s\n", what, uj_last_error());
    CHECK(0);
  }
  jit_cache_free(c);
}

TEST(disk_directory_group_writable) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  CHECK(chmod(t.dir, 0770) == 0);
  check_directory_refused("is writable by others");
  temp_dir_close(&t);
}

TEST(disk_directory_other_writable) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  CHECK(chmod(t.dir, 0707) == 0);
  check_directory_refused("is writable by others");
  temp_dir_close(&t);
}

TEST(disk_directory_becomes_writable) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  char payload_path[4096], meta_path[4096];
  jit_cache_t* c = cache_with_entry(payload_path, meta_path);
  CHECK(jit_disk_enabled(c));
  CHECK(chmod(t.dir, 0777) == 0); /* checked again on every use */
  char loaded[4096];
  CHECK(load_copy(c, hash_of(key_one), key_one, "so", loaded, sizeof loaded, NULL) == UJ_ERR_IO);
  CHECK(!jit_disk_enabled(c));
  CHECK(chmod(t.dir, 0700) == 0); /* disabled for good, once refused */
  CHECK(!jit_disk_enabled(c));
  jit_cache_free(c);
  temp_dir_close(&t);
}

TEST(disk_directory_other_owner) {
  SKIP_IF(geteuid() != 0, "needs root to give the directory away");
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  CHECK(chown(t.dir, 65534, 65534) == 0);
  check_directory_refused("is owned by another user");
  temp_dir_close(&t);
}

TEST(disk_directory_symlink) {
  temp_dir_t t;
  temp_dir_open(&t, "link");
  char real[300];
  snprintf(real, sizeof real, "%s/real", t.root);
  CHECK(mkdir(real, 0700) == 0);
  CHECK(symlink(real, t.dir) == 0);
  check_directory_refused("is a symbolic link");
  temp_dir_close(&t);
}

TEST(disk_directory_is_a_file) {
  temp_dir_t t;
  temp_dir_open(&t, "file");
  FILE* f = fopen(t.dir, "w");
  if (f) fclose(f);
  check_directory_refused("is not a directory");
  temp_dir_close(&t);
}

TEST(disk_disabled_by_environment) {
  temp_dir_t t;
  temp_dir_open(&t, "unused");
  setenv("UOPJIT_CACHE", "0", 1);
  check_directory_refused(NULL);
  CHECK(!file_exists(t.dir)); /* not even created */
  unsetenv("UOPJIT_CACHE");
  temp_dir_close(&t);
}

/* ---- disk: clear, list, stats ------------------------------------------------------------ */

TEST(disk_clear_and_list) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  jit_cache_t* c = jit_cache_new();
  CHECK(jit_disk_store(c, hash_of("k1"), "first kernel\nmore lines", "so", "abc", 3, NULL, 0) == UJ_OK);
  CHECK(jit_disk_store(c, hash_of("k2"), "second kernel", "cubin", "defgh", 5, NULL, 0) == UJ_OK);
  char path[4096];
  CHECK(jit_disk_store(c, hash_of("k3"), "third", "so", "x", 1, path, sizeof path) == UJ_OK);
  /* A stale temporary, an orphan payload and a file that is not ours. */
  char stale[4200], other[4200];
  snprintf(stale, sizeof stale, "%s.tmp-AbC123", path);
  snprintf(other, sizeof other, "%s/notes.txt", t.dir);
  FILE* f = fopen(stale, "w");
  if (f) fclose(f);
  f = fopen(other, "w");
  if (f) fclose(f);

  rt_buf_t out = {0};
  CHECK(jit_disk_list(c, &out) == UJ_OK);
  char* text = rt_buf_take(&out);
  CHECK(text != NULL);
  if (text) {
    char hex[40];
    ir_hash_t h = hash_of("k1");
    snprintf(hex, sizeof hex, "%016llx%016llx", (unsigned long long)h.hi, (unsigned long long)h.lo);
    char line[200];
    snprintf(line, sizeof line, "%s so 3 first kernel\n", hex);
    CHECK(strstr(text, line) != NULL);
    CHECK(strstr(text, " cubin 5 second kernel\n") != NULL);
    CHECK(strstr(text, " so 1 third\n") != NULL);
    CHECK(strstr(text, "more lines") == NULL);
    int lines = 0;
    for (char* p = text; *p; p++) lines += *p == '\n';
    CHECK(lines == 3);
  }
  free(text);

  CHECK(jit_disk_clear(c) == UJ_OK);
  CHECK(!file_exists(path));
  CHECK(!file_exists(stale));
  CHECK(file_exists(other));
  out = (rt_buf_t){0};
  CHECK(jit_disk_list(c, &out) == UJ_OK);
  CHECK(out.len == 0);
  rt_buf_release(&out);
  CHECK(load_copy(c, hash_of("k1"), "first kernel\nmore lines", "so", path, sizeof path, NULL) == UJ_ERR_IO);
  jit_cache_free(c);
  temp_dir_close(&t);
}

TEST(cache_stats_text) {
  temp_dir_t t;
  temp_dir_open(&t, NULL);
  char payload_path[4096], meta_path[4096];
  jit_cache_t* c = cache_with_entry(payload_path, meta_path);
  CHECK(peek(c, hash_of("x"), "x") == NULL);
  char loaded[4096];
  CHECK(load_copy(c, hash_of(key_one), key_one, "so", loaded, sizeof loaded, NULL) == UJ_OK);
  rt_buf_t out = {0};
  jit_cache_stats(c, &out);
  char* text = rt_buf_take(&out);
  CHECK(text && strstr(text, "memory: 0 entries, 0 hits, 1 misses"));
  CHECK(text && strstr(text, "1 hits, 0 misses, 0 corrupt entries removed, 1 stores"));
  free(text);
  jit_cache_free(c);

  setenv("UOPJIT_CACHE", "0", 1);
  c = jit_cache_new();
  out = (rt_buf_t){0};
  jit_cache_stats(c, &out);
  text = rt_buf_take(&out);
  CHECK(text && strstr(text, "disk: disabled"));
  free(text);
  jit_cache_free(c);
  unsetenv("UOPJIT_CACHE");
  temp_dir_close(&t);
}

TEST_MAIN()
