/* tools/cli_aot.c: `uopjit aot SOURCE -o FILE`, an expression-language
 * program as a self-contained C file (uj_program_dump's UJ_DUMP_C_AOT) with
 * the entry points uopjit_kernel_run and uopjit_kernel_output_dims, to be
 * compiled ahead of time into a program that does not link uopjit.
 *
 * The file is for one build of the program: --dtype, --scalar and --shape
 * (plain or per input) pick the input dtypes, which inputs are 0-d and the
 * other inputs' ranks (and which of their axes have size 1); the sizes
 * themselves stay run-time arguments. Its first comment lists the inputs
 * and outputs in the entry points' order. The generated code holds no text
 * from the command line: the library prints identifiers of its own, and
 * the comment's names are the program's input and output names, which the
 * parser admits only as identifiers (and which are checked again before
 * they are written), so any source is safe to compile. */
/* mkstemp, fchmod, umask, lstat and realpath need POSIX; the Makefile's
 * _GNU_SOURCE covers them, this keeps a bare `cc -std=c11` working too. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* Writes text to f and closes it: 0, else the errno of the first failure
 * (fclose flushes: a full disk may only show there). */
static int write_and_close(FILE* f, const char* text) {
  size_t len = strlen(text);
  int err = fwrite(text, 1, len, f) == len ? 0 : errno;
  if (fclose(f) != 0 && !err) err = errno;
  return err;
}

/* Writes text to path (a device, a pipe: what is there already, written
 * through). 0, or 1 after saying why. */
static int write_through(const char* path, const char* text) {
  FILE* f = fopen(path, "w");
  int err = f ? write_and_close(f, text) : errno;
  if (err) fprintf(stderr, "uopjit aot: cannot write %s: %s\n", path, strerror(err));
  return err != 0;
}

/* Writes text to path through a temporary file in the same directory that
 * is renamed into place, so that path is either left as it was or holds
 * the whole text, never a part. The file gets the usual 0666 less umask
 * (mkstemp alone would make it 0600). 0, or 1 after saying why. */
static int write_file_whole(const char* path, const char* text) {
  static const char suffix[] = ".tmp-XXXXXX";
  size_t path_len = strlen(path);
  char* temp = malloc(path_len + sizeof suffix);
  if (!temp) return cli_out_of_memory("a temporary path", path_len + sizeof suffix);
  memcpy(temp, path, path_len);
  memcpy(temp + path_len, suffix, sizeof suffix);

  int fd = mkstemp(temp);
  if (fd < 0) {
    fprintf(stderr, "uopjit aot: cannot write %s: %s\n", path, strerror(errno));
    free(temp);
    return 1;
  }
  const char* failed_step = NULL;
  int err = 0;
  mode_t mask = umask(0);
  umask(mask);
  FILE* f = fchmod(fd, 0666 & ~mask) == 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    failed_step = "cannot set up the temporary file";
    err = errno;
    close(fd);
  } else if ((err = write_and_close(f, text)) != 0) {
    failed_step = "cannot write the temporary file";
  } else if (rename(temp, path) != 0) {
    failed_step = "cannot rename the temporary file into place";
    err = errno;
  }
  if (failed_step) {
    unlink(temp);
    fprintf(stderr, "uopjit aot: cannot write %s: %s (%s)\n", path, failed_step, strerror(err));
  }
  free(temp);
  return failed_step ? 1 : 0;
}

int cli_cmd_aot(int argc, char** argv) {
  cli_options_t o;
  int rc = cli_parse_options("aot", argc, argv, CLI_ACCEPT_OUTPUT, &o);
  if (rc) return rc;
  if (!o.output_path) return cli_usage_error("aot", "missing -o FILE, the C file to write", NULL);
  /* always specialized, even without options: the file is for the build
   * that the options (or their defaults) describe, not whichever ran last */
  char* text;
  if ((rc = cli_program_text("aot", &o, UJ_DUMP_C_AOT, 1, &text)) != 0) return rc;
  /* A regular file (or none yet) is replaced whole. A symbolic link stays
   * one: what it names is written instead. Anything else (/dev/null, a
   * pipe) is written through: renaming a file over it would replace it. */
  struct stat st;
  char* target = lstat(o.output_path, &st) == 0 && S_ISLNK(st.st_mode) ? realpath(o.output_path, NULL) : NULL;
  const char* path = target ? target : o.output_path;
  if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) rc = write_through(path, text);
  else rc = write_file_whole(path, text);
  free(target);
  free(text);
  return rc;
}
