/* bench/aot.c: the AOT side of the comparison, built at run time the way a
 * user builds it. For each program bench/<name>.uj this runs the CLI itself
 * (`uopjit aot SOURCE ARGS -o aot_<name>.c`, with the options in
 * bench/<name>.args), compiles the file with the system compiler at -O3
 * -march=native into a shared object and dlopens it: the same fused kernel
 * the JIT engines compile, ahead of time. The bench runs inside the CLI, so
 * it cannot link the CLI's own output at build time; loading it keeps both
 * in one process and one run.
 *
 * Each shared object is opened RTLD_LOCAL, so every file keeps its entry
 * points' plain names (uopjit_kernel_run, uopjit_kernel_output_dims). The
 * compiles run side by side (one shell, `&` and `wait`). Nothing from the
 * command line enters the generated C: the CLI writes the program's own
 * identifiers, and the shell is given only paths the bench made. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

enum { AOT_MAX = 16 };

static aot_kernel_t loaded[AOT_MAX];
static int nloaded;

const aot_kernel_t* aot_find(const char* name) {
  for (int k = 0; k < nloaded; k++)
    if (strcmp(loaded[k].name, name) == 0) return &loaded[k];
  return NULL;
}

/* Appends "; text" (or text) to note. */
static void note_add(char* note, size_t size, const char* text) {
  size_t used = strlen(note);
  if (used + 1 < size) snprintf(note + used, size - used, "%s%s", used ? "; " : "", text);
}

/* Whether text can sit between single quotes in a shell command. */
static int shell_safe(const char* text) { return strchr(text, '\'') == NULL; }

int aot_build(const char* const* names, int count, const char* dir, char* note, size_t note_size) {
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) {
    note_add(note, note_size, "no AOT rows: /proc/self/exe cannot be read to run `uopjit aot`");
    return 0;
  }
  self[len] = '\0';
  const char* cc = getenv("CC");
  if (!cc || !*cc) cc = "cc";
  if (!shell_safe(self) || !shell_safe(dir) || !shell_safe(BENCH_SOURCE_DIR) || !shell_safe(cc)) {
    note_add(note, note_size, "no AOT rows: a path or $CC holds a single quote");
    return 0;
  }
  /* one shell line per program, all in the background, then wait */
  size_t cap = 4096 + (size_t)count * 3 * 4200;
  char* script = malloc(cap);
  if (!script) return 0;
  size_t used = 0;
  for (int k = 0; k < count; k++) {
    if (strspn(names[k], "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(names[k]) || strlen(names[k]) > 24)
      continue; /* the bench's own names: never the case */
    used += (size_t)snprintf(script + used, cap - used,
                             "( '%s' aot \"$(cat '%s/%s.uj')\" $(cat '%s/%s.args') -o '%s/aot_%s.c' && "
                             "'%s' -O3 -march=native -std=c11 -shared -fPIC -o '%s/aot_%s.so' '%s/aot_%s.c' -lm ) &\n",
                             self, BENCH_SOURCE_DIR, names[k], BENCH_SOURCE_DIR, names[k], dir, names[k], cc, dir,
                             names[k], dir, names[k]);
  }
  snprintf(script + used, cap - used, "wait\n");
  fflush(stdout);
  int shell_status = system(script);
  free(script);
  if (shell_status == -1) note_add(note, note_size, "no AOT rows: cannot start a shell");
  int built = 0;
  for (int k = 0; k < count && nloaded < AOT_MAX; k++) {
    char path[4400], text[256];
    snprintf(path, sizeof path, "%s/aot_%s.so", dir, names[k]);
    void* handle = access(path, R_OK) == 0 ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    aot_kernel_t* kernel = &loaded[nloaded];
    if (handle) {
      *(void**)&kernel->run = dlsym(handle, "uopjit_kernel_run");
      *(void**)&kernel->dims = dlsym(handle, "uopjit_kernel_output_dims");
    }
    if (!handle || !kernel->run || !kernel->dims) {
      snprintf(text, sizeof text, "no AOT kernel for %s (`uopjit aot` or %s failed; its messages are above)",
               names[k], cc);
      note_add(note, note_size, text);
      continue;
    }
    snprintf(kernel->name, sizeof kernel->name, "%s", names[k]);
    nloaded++;
    built++;
  }
  return built;
}
