/* tests/cli_binary.h: the uopjit binary that belongs to a test binary: the
 * one next to the test's directory (build/tests/test_x runs build/uopjit,
 * build/debug/tests/test_x runs build/debug/uopjit). */
#ifndef UJ_TESTS_CLI_BINARY_H
#define UJ_TESTS_CLI_BINARY_H

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Its path into out, or "" when it is not there. */
static inline void find_cli(char* out, size_t cap) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  out[0] = '\0';
  if (n <= 0) return;
  exe[n] = '\0';
  for (int up = 0; up < 2; up++) {
    char* slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
  }
  if (snprintf(out, cap, "%s/uopjit", exe) >= (int)cap || access(out, X_OK) != 0) out[0] = '\0';
}

#endif
