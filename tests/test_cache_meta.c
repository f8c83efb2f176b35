/* tests/test_cache_meta.c: a disk cache entry's payload and meta as a pair
 * (jit/cache/disk.c). A store that cannot write its meta (a full disk)
 * must leave no payload without one, and must leave an older entry under
 * the same name as it was; a reader that meets a payload without its meta
 * must treat it as a miss and remove it, unless a store holds the
 * directory's lock (it may be writing that very entry).
 *
 * A full disk is simulated with RLIMIT_FSIZE in a child process: writes
 * past the limit fail with EFBIG (SIGXFSZ ignored), which the store meets
 * exactly where it would meet ENOSPC. The entry's payload is small and its
 * key text large, so the payload fits under the limit and the meta does
 * not. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../jit/cache/cache.h"
#include "cache_dir.h"
#include "harness.h"

static ir_hash_t hash_of(const char* text) { return ir_hash_bytes(text, strlen(text)); }

static void paths_of(const temp_dir_t* t, ir_hash_t h, char* payload, char* meta) {
  snprintf(payload, PATH_MAX, "%s/%016llx%016llx.so", t->dir, (unsigned long long)h.hi, (unsigned long long)h.lo);
  snprintf(meta, PATH_MAX, "%s/%016llx%016llx.so.meta", t->dir, (unsigned long long)h.hi, (unsigned long long)h.lo);
}

static int exists(const char* path) { return access(path, F_OK) == 0; }

/* The files in the directory: how many, and how many are temporaries. */
static int count_files(const temp_dir_t* t, int* temps) {
  DIR* d = opendir(t->dir);
  int n = 0;
  *temps = 0;
  for (struct dirent* e; d && (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    n++;
    *temps += strstr(e->d_name, ".tmp-") != NULL;
  }
  if (d) closedir(d);
  return n;
}

static const char small_payload[] = "\x7f" "ELF a small pretend shared object";
static const char other_payload[] = "\x7f" "ELF the payload of a store that fails";
#define LIMIT_BYTES 4096

/* A key text that makes a meta far larger than LIMIT_BYTES. */
static char* big_key(void) {
  size_t n = 4 * LIMIT_BYTES;
  char* key = malloc(n + 1);
  if (!key) exit(2);
  memcpy(key, "engine c\n", 9);
  memset(key + 9, 'k', n - 9);
  key[n] = '\0';
  return key;
}

/* In a child: a store of `h` with the big key under RLIMIT_FSIZE. Exits 0
 * when it failed with UJ_ERR_IO naming the meta's temporary and why. */
static int failing_store_child(ir_hash_t h) {
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit rl = {LIMIT_BYTES, LIMIT_BYTES};
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0) return 10;
  jit_cache_t* c = jit_cache_new();
  if (!c) return 11;
  char* key = big_key();
  uj_status_t s = jit_disk_store(c, h, key, "so", other_payload, sizeof other_payload - 1, NULL, 0);
  int rc = s != UJ_ERR_IO ? 12 : !strstr(uj_last_error(), ".so.meta.tmp-") ? 13 : !strstr(uj_last_error(), strerror(EFBIG)) ? 14 : 0;
  if (rc) fprintf(stderr, "  the store said (status %d): %s\n", (int)s, uj_last_error());
  free(key);
  jit_cache_free(c);
  return rc;
}

static void run_failing_store(ir_hash_t h) {
  fflush(stdout), fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) _exit(failing_store_child(h));
  int status = -1;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  CHECK(rc == 0);
  if (rc != 0) printf("  the failing store's child exited with %d\n", rc);
}

TEST(a_store_whose_meta_cannot_be_written_leaves_no_payload) {
  temp_dir_t t;
  temp_dir_open(&t, "meta");
  ir_hash_t h = hash_of("a key of its own");
  run_failing_store(h);
  char payload[PATH_MAX], meta[PATH_MAX];
  paths_of(&t, h, payload, meta);
  int temps = 0, n = count_files(&t, &temps);
  CHECK(!exists(payload) && !exists(meta));
  CHECK(n == 0 && temps == 0);
  if (n) printf("  %d files left (%d temporaries), payload %s\n", n, temps, exists(payload) ? "left" : "gone");
  temp_dir_close(&t);
}

TEST(a_failed_store_leaves_the_older_entry_loadable) {
  temp_dir_t t;
  temp_dir_open(&t, "meta");
  ir_hash_t h = hash_of("a key of its own");
  jit_cache_t* c = jit_cache_new();
  CHECK(jit_disk_store(c, h, "engine c\nsmall", "so", small_payload, sizeof small_payload - 1, NULL, 0) == UJ_OK);
  run_failing_store(h); /* the same name, a meta too large to write */
  char payload[PATH_MAX], meta[PATH_MAX];
  paths_of(&t, h, payload, meta);
  CHECK(exists(payload) == exists(meta)); /* never a payload alone */
  char* bytes = NULL;
  size_t size = 0;
  uj_status_t s = jit_disk_load_bytes(c, h, "engine c\nsmall", "so", &bytes, &size);
  CHECK(s == UJ_OK && size == sizeof small_payload - 1 && bytes && memcmp(bytes, small_payload, size) == 0);
  if (s != UJ_OK) printf("  %s\n", uj_last_error());
  free(bytes);
  int temps = 0;
  CHECK(count_files(&t, &temps) == 2 && temps == 0);
  jit_cache_free(c);
  temp_dir_close(&t);
}

/* A payload whose meta is gone, as a store killed between its renames
 * leaves it. */
static void make_orphan(jit_cache_t* c, const temp_dir_t* t, ir_hash_t h, char* payload, char* meta) {
  CHECK(jit_disk_store(c, h, "engine c\nsmall", "so", small_payload, sizeof small_payload - 1, NULL, 0) == UJ_OK);
  paths_of(t, h, payload, meta);
  CHECK(unlink(meta) == 0 && exists(payload));
}

TEST(a_payload_without_its_meta_is_a_miss_and_removed) {
  temp_dir_t t;
  temp_dir_open(&t, "meta");
  ir_hash_t h = hash_of("orphan");
  jit_cache_t* c = jit_cache_new();
  char payload[PATH_MAX], meta[PATH_MAX];
  make_orphan(c, &t, h, payload, meta);
  /* a store holds the lock (it may be writing this very entry): kept */
  int held = open(t.dir, O_RDONLY | O_DIRECTORY);
  CHECK(held >= 0 && flock(held, LOCK_EX) == 0);
  char* bytes = NULL;
  size_t size = 0;
  CHECK(jit_disk_load_bytes(c, h, "engine c\nsmall", "so", &bytes, &size) == UJ_ERR_IO && !bytes);
  CHECK(strstr(uj_last_error(), "no entry") != NULL);
  CHECK(exists(payload));
  close(held);
  /* no store under way: a miss, and the orphan goes */
  CHECK(jit_disk_load_bytes(c, h, "engine c\nsmall", "so", &bytes, &size) == UJ_ERR_IO && !bytes);
  CHECK(strstr(uj_last_error(), "no entry") != NULL);
  CHECK(!exists(payload) && !exists(meta));
  jit_cache_counts_t k;
  jit_cache_counts(c, &k);
  CHECK(k.disk_misses == 2 && k.disk_hits == 0 && k.disk_corrupt == 0);
  /* and a store makes a whole entry again */
  CHECK(jit_disk_store(c, h, "engine c\nsmall", "so", small_payload, sizeof small_payload - 1, NULL, 0) == UJ_OK);
  CHECK(jit_disk_load_bytes(c, h, "engine c\nsmall", "so", &bytes, &size) == UJ_OK && size == sizeof small_payload - 1);
  free(bytes);
  jit_cache_free(c);
  temp_dir_close(&t);
}

TEST(a_whole_entry_is_never_taken_for_an_orphan) {
  temp_dir_t t;
  temp_dir_open(&t, "meta");
  jit_cache_t* c = jit_cache_new();
  /* a miss on one key leaves another key's whole entry alone */
  ir_hash_t h = hash_of("whole");
  CHECK(jit_disk_store(c, h, "engine c\nwhole", "so", small_payload, sizeof small_payload - 1, NULL, 0) == UJ_OK);
  char* bytes = NULL;
  size_t size = 0;
  CHECK(jit_disk_load_bytes(c, hash_of("absent"), "engine c\nabsent", "so", &bytes, &size) == UJ_ERR_IO);
  char payload[PATH_MAX], meta[PATH_MAX];
  paths_of(&t, h, payload, meta);
  CHECK(exists(payload) && exists(meta));
  CHECK(jit_disk_load_bytes(c, h, "engine c\nwhole", "so", &bytes, &size) == UJ_OK);
  free(bytes);
  jit_cache_free(c);
  temp_dir_close(&t);
}

TEST_MAIN()
