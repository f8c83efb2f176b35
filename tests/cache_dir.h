/* tests/cache_dir.h: a temporary directory as the disk cache of the
 * contexts a test makes from here on (UOPJIT_CACHE_DIR, with the cache on
 * and no disk limit from the environment), then removed with everything
 * in it, a directory the test made read-only included. */
#ifndef UJ_TESTS_CACHE_DIR_H
#define UJ_TESTS_CACHE_DIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
  char dir[64];
} temp_dir_t;

static int temp_dir_remove_one(const char* path, const struct stat* st, int type, struct FTW* ftw) {
  (void)st, (void)type, (void)ftw;
  return remove(path);
}

/* "/tmp/uopjit-TAG-XXXXXX"; exits the test binary when it cannot be made. */
static void temp_dir_open(temp_dir_t* t, const char* tag) {
  snprintf(t->dir, sizeof t->dir, "/tmp/uopjit-%.16s-XXXXXX", tag);
  if (!mkdtemp(t->dir)) {
    perror("mkdtemp");
    exit(2);
  }
  unsetenv("UOPJIT_CACHE");
  unsetenv("UOPJIT_CACHE_DISK_LIMIT");
  setenv("UOPJIT_CACHE_DIR", t->dir, 1);
}

static void temp_dir_close(temp_dir_t* t) {
  chmod(t->dir, 0700);
  nftw(t->dir, temp_dir_remove_one, 16, FTW_DEPTH | FTW_PHYS);
  unsetenv("UOPJIT_CACHE_DIR");
  unsetenv("UOPJIT_CACHE_DISK_LIMIT");
}

#endif
