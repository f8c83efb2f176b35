/* tests/test_cache_disk_space.c: the disk cache's size (jit/cache/disk_space.c)
 * and a directory it can only read.
 *
 * Each test points UOPJIT_CACHE_DIR at a fresh directory under /tmp, stores
 * entries of known sizes, and sets the files' modification times by hand
 * (recency is what eviction orders by), so that which entry goes is decided
 * by the test, never by a clock. Sizes count payload and meta, so the tests
 * read the sizes back from the directory instead of assuming a meta's. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../jit/cache/cache.h"
#include "../jit/jit.h"
#include "cli_binary.h"
#include "cache_dir.h"
#include "harness.h"

/* ---- helpers ------------------------------------------------------------------------- */

static ir_hash_t hash_of(const char* text) { return ir_hash_bytes(text, strlen(text)); }

/* "<dir>/<hex of key>.so" and its meta. */
static void paths_of(const temp_dir_t* t, const char* key, char* payload, char* meta) {
  ir_hash_t h = hash_of(key);
  snprintf(payload, PATH_MAX, "%s/%016llx%016llx.so", t->dir, (unsigned long long)h.hi, (unsigned long long)h.lo);
  snprintf(meta, PATH_MAX, "%s.meta", payload);
}

static int exists(const char* path) { return access(path, F_OK) == 0; }

static long size_of(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Sets a file's modification time to `age` seconds ago. */
static void age_file(const char* path, long age) {
  struct timespec times[2];
  clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= age;
  times[1] = times[0];
  CHECK(utimensat(AT_FDCWD, path, times, AT_SYMLINK_NOFOLLOW) == 0);
}

static void make_file(const char* path, size_t bytes) {
  FILE* f = fopen(path, "wb");
  for (size_t i = 0; f && i < bytes; i++) fputc('x', f);
  if (f) fclose(f);
  chmod(path, 0600);
}

static char payload_of_size[4096];

/* Stores key with a payload of `bytes` bytes; the entry's size on disk. */
static long store(jit_cache_t* c, const temp_dir_t* t, const char* key, size_t bytes, long age) {
  memset(payload_of_size, 'p', sizeof payload_of_size);
  uj_status_t s = jit_disk_store(c, hash_of(key), key, "so", payload_of_size, bytes, NULL, 0);
  CHECK(s == UJ_OK);
  if (s != UJ_OK) printf("  store %s: %s\n", key, uj_last_error());
  char payload[PATH_MAX], meta[PATH_MAX];
  paths_of(t, key, payload, meta);
  if (age) age_file(payload, age), age_file(meta, age);
  return size_of(payload) + size_of(meta);
}

static int present(const temp_dir_t* t, const char* key) {
  char payload[PATH_MAX], meta[PATH_MAX];
  paths_of(t, key, payload, meta);
  return exists(payload) && exists(meta);
}

static int64_t usage_bytes(jit_cache_t* c) {
  jit_disk_usage_t u;
  return jit_disk_usage(c, &u) == UJ_OK ? u.bytes : -1;
}

/* ---- least recently used eviction --------------------------------------------------------- */

TEST(disk_evicts_least_recently_used) {
  temp_dir_t t;
  temp_dir_open(&t, "space");
  jit_cache_t* c = jit_cache_new();
  /* four entries, "a" the oldest; room for exactly three */
  long each = store(c, &t, "a", 1000, 4000);
  store(c, &t, "b", 1000, 3000);
  store(c, &t, "c", 1000, 2000);
  CHECK(each > 1000);
  CHECK(jit_disk_set_limit(c, 3 * each) == UJ_OK);
  /* a hit makes "a" the most recent: now "b" is the oldest */
  char* bytes = NULL;
  size_t size = 0;
  CHECK(jit_disk_load_bytes(c, hash_of("a"), "a", "so", &bytes, &size) == UJ_OK && size == 1000);
  free(bytes);
  store(c, &t, "d", 1000, 0);
  CHECK(present(&t, "a"));
  CHECK(!present(&t, "b"));
  CHECK(present(&t, "c"));
  CHECK(present(&t, "d"));
  CHECK(usage_bytes(c) <= 3 * each);
  /* two more: "c" goes, then "a" (touched, but longer ago than "d" and "e") */
  store(c, &t, "e", 1000, 0);
  CHECK(!present(&t, "c") && present(&t, "a") && present(&t, "d") && present(&t, "e"));
  char payload[PATH_MAX], meta[PATH_MAX];
  paths_of(&t, "d", payload, meta);
  age_file(meta, 100), age_file(payload, 100); /* "d" older than "a" now */
  store(c, &t, "f", 1000, 0);
  CHECK(!present(&t, "d") && present(&t, "a") && present(&t, "e") && present(&t, "f"));
  CHECK(usage_bytes(c) <= 3 * each);
  jit_cache_free(c);
  temp_dir_close(&t);
}

TEST(disk_limit_held_while_filling) {
  temp_dir_t t;
  temp_dir_open(&t, "space");
  setenv("UOPJIT_CACHE_DISK_LIMIT", "16K", 1);
  jit_cache_t* c = jit_cache_new();
  jit_disk_usage_t u;
  CHECK(jit_disk_usage(c, &u) == UJ_OK && u.limit == 16384 && strcmp(u.limit_from, "UOPJIT_CACHE_DISK_LIMIT") == 0);
  char key[32];
  for (int i = 0; i < 60; i++) {
    snprintf(key, sizeof key, "kernel %d", i);
    store(c, &t, key, 700 + 37 * (size_t)(i % 11), 0);
    CHECK(usage_bytes(c) <= 16384);
  }
  CHECK(present(&t, "kernel 59")); /* the newest is kept */
  /* a store that replaces its own entry does not evict for it */
  int64_t before = usage_bytes(c);
  store(c, &t, "kernel 59", 700 + 37 * (59 % 11), 0);
  CHECK(usage_bytes(c) == before);
  jit_cache_free(c);
  temp_dir_close(&t);
}

TEST(disk_entry_larger_than_the_limit) {
  temp_dir_t t;
  temp_dir_open(&t, "space");
  jit_cache_t* c = jit_cache_new();
  store(c, &t, "small", 10, 0);
  CHECK(jit_disk_set_limit(c, 2000) == UJ_OK);
  CHECK(jit_disk_store(c, hash_of("big"), "big", "so", payload_of_size, 3000, NULL, 0) == UJ_ERR_IO);
  CHECK(strstr(uj_last_error(), "larger than the disk cache's limit of 2000") != NULL);
  CHECK(!present(&t, "big"));
  CHECK(present(&t, "small")); /* nothing evicted for an entry that is not stored */
  jit_cache_free(c);
  temp_dir_close(&t);
}

/* Children that store at the same time: the lock makes each count the
 * others' entries, so the limit holds when they are all done. */
TEST(disk_limit_held_by_concurrent_stores) {
  temp_dir_t t;
  temp_dir_open(&t, "space");
  fflush(stdout), fflush(stderr);
  pid_t kids[4];
  for (int k = 0; k < 4; k++) {
    if ((kids[k] = fork()) == 0) {
      jit_cache_t* c = jit_cache_new();
      int ok = c && jit_disk_set_limit(c, 20000) == UJ_OK;
      char key[48];
      for (int i = 0; ok && i < 40; i++) {
        snprintf(key, sizeof key, "child %d kernel %d", k, i);
        ok = jit_disk_store(c, hash_of(key), key, "so", payload_of_size, 900 + (size_t)(k * 50), NULL, 0) == UJ_OK;
      }
      jit_cache_free(c);
      _exit(ok ? 0 : 1);
    }
  }
  for (int k = 0; k < 4; k++) {
    int status = -1;
    CHECK(kids[k] > 0 && waitpid(kids[k], &status, 0) == kids[k]);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  jit_cache_t* c = jit_cache_new();
  int64_t bytes = usage_bytes(c);
  CHECK(bytes > 0 && bytes <= 20000);
  jit_cache_free(c);
  temp_dir_close(&t);
}

/* ---- what interrupted stores leave ------------------------------------------------------------ */

TEST(disk_stale_temporaries_removed_fresh_kept) {
  temp_dir_t t;
  temp_dir_open(&t, "space");
  jit_cache_t* c = jit_cache_new();
  char payload[PATH_MAX], meta[PATH_MAX];
  char stale_payload_tmp[PATH_MAX + 16], stale_meta_tmp[PATH_MAX + 16], live_tmp[PATH_MAX + 16];
  paths_of(&t, "interrupted", payload, meta);
  snprintf(stale_payload_tmp, sizeof stale_payload_tmp, "%s.tmp-Ab1234", payload);
  snprintf(stale_meta_tmp, sizeof stale_meta_tmp, "%s.tmp-Cd5678", meta);
  paths_of(&t, "under way", payload, meta);
  snprintf(live_tmp, sizeof live_tmp, "%s.tmp-Ef9012", payload);
  make_file(stale_payload_tmp, 300), make_file(stale_meta_tmp, 30), make_file(live_tmp, 300);
  age_file(stale_payload_tmp, 2 * 3600), age_file(stale_meta_tmp, 11 * 60);
  /* incomplete entries: a payload whose meta never came, long ago, and a
   * payload just renamed into place, its meta about to follow */
  char orphan[PATH_MAX], orphan_meta[PATH_MAX], fresh_orphan[PATH_MAX];
  paths_of(&t, "orphan", orphan, orphan_meta);
  paths_of(&t, "renamed just now", fresh_orphan, meta);
  make_file(orphan, 100), make_file(fresh_orphan, 100);
  age_file(orphan, 3600);
  /* a file that is not the cache's, however old, is left alone */
  char other[PATH_MAX];
  snprintf(other, sizeof other, "%s/notes.txt", t.dir);
  make_file(other, 10);
  age_file(other, 30 * 24 * 3600);

  store(c, &t, "new", 100, 0);
  CHECK(!exists(stale_payload_tmp));
  CHECK(!exists(stale_meta_tmp));
  CHECK(exists(live_tmp));
  CHECK(!exists(orphan));
  CHECK(exists(fresh_orphan));
  CHECK(exists(other));
  CHECK(present(&t, "new"));
  /* the fresh temporary still counts toward the size */
  CHECK(usage_bytes(c) >= size_of(live_tmp) + size_of(fresh_orphan));
  jit_cache_free(c);
  temp_dir_close(&t);
}

/* ---- the limit's settings ---------------------------------------------------------------------- */

TEST(disk_limit_from_environment) {
  static const struct {
    const char* text;
    int64_t bytes; /* 0: malformed (an error), or empty (the default) */
  } cases[] = {
      {"1048576", 1048576},  {"64K", 65536},   {"64k", 65536}, {"3M", 3 << 20}, {"2G", INT64_C(2) << 30},
      {"12x", 0},            {"", 0},          {"0", 0},       {"-5M", 0},      {"5 M", 0},
      {"99999999999999G", 0}, {"M", 0},        {"1.5G", 0},
  };
  temp_dir_t t;
  temp_dir_open(&t, "space");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    setenv("UOPJIT_CACHE_DISK_LIMIT", cases[i].text, 1);
    jit_cache_t* c = jit_cache_new();
    if (!cases[i].bytes && cases[i].text[0]) { /* malformed: an error naming the variable */
      CHECK(c == NULL);
      CHECK(strstr(uj_last_error(), "UOPJIT_CACHE_DISK_LIMIT=") && strstr(uj_last_error(), "positive number"));
      jit_cache_free(c);
      continue;
    }
    jit_disk_usage_t u;
    CHECK(jit_disk_usage(c, &u) == UJ_OK);
    int64_t want = cases[i].bytes ? cases[i].bytes : INT64_C(512) << 20;
    if (u.limit != want) {
      printf("  UOPJIT_CACHE_DISK_LIMIT=\"%s\": limit %lld, want %lld\n", cases[i].text, (long long)u.limit,
             (long long)want);
      CHECK(0);
    }
    CHECK(strcmp(u.limit_from, cases[i].bytes ? "UOPJIT_CACHE_DISK_LIMIT" : "the default") == 0);
    jit_cache_free(c);
  }
  temp_dir_close(&t);
}

TEST(disk_limit_through_the_api) {
  temp_dir_t t;
  temp_dir_open(&t, "space");
  setenv("UOPJIT_CACHE_DISK_LIMIT", "1M", 1);
  CHECK(uj_ctx_set_disk_cache_limit(NULL, 1000) == UJ_ERR_INVALID);
  uj_ctx_t* ctx = uj_ctx_new();
  CHECK(uj_ctx_set_disk_cache_limit(ctx, 0) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "positive") != NULL);
  CHECK(uj_ctx_set_disk_cache_limit(ctx, -1) == UJ_ERR_INVALID);
  CHECK(uj_ctx_set_disk_cache_limit(ctx, 123456) == UJ_OK); /* the API wins over the environment */
  jit_state_t* js = jit_state(ctx);
  jit_disk_usage_t u;
  CHECK(js && jit_disk_usage(js->cache, &u) == UJ_OK && u.limit == 123456);
  CHECK(js && strcmp(u.limit_from, "uj_ctx_set_disk_cache_limit") == 0);
  CHECK(jit_disk_set_limit(NULL, 5) == UJ_ERR_INVALID);
  uj_ctx_free(ctx);
  temp_dir_close(&t);
}

/* ---- a directory that can only be read ---------------------------------------------------------- */


static int give_away(const char* path, const struct stat* st, int type, struct FTW* ftw) {
  (void)st, (void)type, (void)ftw;
  return lchown(path, 65534, 65534);
}

/* In a child: becomes the owner of t's directory when running as root (root
 * writes any directory), makes it read-only, and checks the library's view
 * and `uopjit cache stats` (its output into out_path). Exit status 0 when
 * the library says the directory is not writable yet still loads from it. */
static int read_only_child(const temp_dir_t* t, const char* cli, const char* out_path) {
  int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return 9;
  if (geteuid() == 0) {
    if (nftw(t->dir, give_away, 16, FTW_PHYS) != 0) return 10;
    if (setgid(65534) != 0 || setuid(65534) != 0) return 11;
  }
  if (chmod(t->dir, 0500) != 0) return 12;
  jit_cache_t* c = jit_cache_new();
  char* bytes = NULL;
  size_t size = 0;
  int rc = 0;
  if (!jit_disk_enabled(c)) rc = 13;
  else if (jit_disk_writable(c) || !strstr(uj_last_error(), "not writable")) rc = 14;
  else if (jit_disk_load_bytes(c, hash_of("k"), "k", "so", &bytes, &size) != UJ_OK || size != 5) rc = 15;
  free(bytes);
  jit_cache_free(c);
  if (rc || !cli[0]) return rc;
  dup2(out, 1), dup2(out, 2);
  execl(cli, "uopjit", "cache", "stats", (char*)NULL);
  return 17;
}

TEST(disk_read_only_directory_is_reported) {
  temp_dir_t t;
  temp_dir_open(&t, "space");
  chmod(t.dir, 0755);
  jit_cache_t* c = jit_cache_new();
  CHECK(jit_disk_writable(c));
  CHECK(jit_disk_store(c, hash_of("k"), "k", "so", "bytes", 5, NULL, 0) == UJ_OK);
  jit_cache_free(c);
  char cli[PATH_MAX], out_path[128];
  find_cli(cli, sizeof cli);
  snprintf(out_path, sizeof out_path, "%s.stats", t.dir);
  fflush(stdout), fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) _exit(read_only_child(&t, cli, out_path));
  int status = -1;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    printf("  the read-only child exited with status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    CHECK(0);
  } else if (cli[0]) {
    FILE* f = fopen(out_path, "r");
    char text[4096] = "";
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f) fclose(f);
    CHECK(strstr(text, "usable: yes") == NULL);
    CHECK(strstr(text, "usable: for loading only") != NULL);
    CHECK(strstr(text, "entries: 1\n") != NULL);
    CHECK(strstr(text, "limit: 536870912 bytes") != NULL);
    if (!strstr(text, "usable: for loading only")) printf("  cache stats said:\n%s", text);
  }
  unlink(out_path);
  temp_dir_close(&t);
}

TEST_MAIN()
