/* jit/c/c.c: the C engine: IR -> C source (jit/c/c_emit.c) -> the system
 * compiler -> a shared object -> dlopen; jit/blocks.c runs the loaded
 * blocks.
 *
 * A kernel is found in the context's in-memory cache or the disk cache
 * (jit/cache/cache.c) by its key text (key_text), else compiled
 * (build_kernel). The compiler runs as `cc -O3 -march=native ...` through
 * posix_spawn (no shell) on source that holds nothing of the user's text.
 * Its output is read into memory, stored in the disk cache and loaded from
 * that memory (load_image), so what runs is exactly what was compiled or
 * verified. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../engine.h"
#include "c_ahead.h"
#include "c.h"

extern char** environ;

typedef struct {
  jit_blocks_t blocks; /* first: the kernel is handed out as a jit_blocks_t */
  void* so;
} c_kernel_t;

/* The last two make the shared object small and quick to load, which is
 * most of a disk-cache hit: -nostartfiles drops the C runtime's start
 * files, whose init/fini code and weak references (__cxa_finalize,
 * __gmon_start__, ...) cost a symbol lookup each at dlopen and which a
 * kernel of plain loops never needs; -z noseparate-code puts code and
 * read-only data in one segment, two mappings fewer. The object shrinks
 * to about a third (less to read and checksum) and dlopen takes less
 * time. RELRO stays on.
 *
 * -mprefer-vector-width=512: on a CPU with AVX-512, gcc otherwise keeps to
 * 256-bit vectors. The inline math (exp's polynomial, the divide of a
 * sigmoid) is bound by the vector ports, and twice the width per
 * instruction made the in-cache sigmoid chain faster at no cost to compile
 * time or to memory-bound kernels (docs/ENGINES.md, "Measured"). Without AVX-512
 * the flag changes nothing. */
static const char* const cc_flags[] = {"-O3",
                                       "-march=native",
                                       "-fPIC",
                                       "-shared",
                                       "-fno-math-errno",
                                       "-ffp-contract=off",
                                       "-mprefer-vector-width=512",
                                       "-w",
                                       "-nostartfiles",
                                       "-Wl,-z,noseparate-code"};
#define NFLAGS (int)(sizeof cc_flags / sizeof *cc_flags)

/* -march=native asks the compiler, a process of its own, what the CPU can
 * do; this process may be told less. A CPU without the OS's support for
 * the wider registers, or a process under an emulator that offers no
 * AVX-512 (valgrind), would die on an instruction -march=native chose.
 * The largest instruction set this process sees is therefore also a flag,
 * and part of the key, so a kernel built for more is never loaded here. */
static const char* isa_limit(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx")) return "-mno-avx";
  if (!__builtin_cpu_supports("avx512f")) return "-mno-avx512f";
#endif
  return NULL;
}

/* Where compiles and probes make their directories: $TMPDIR, else /tmp. */
static const char* temp_root(void) {
  const char* tmp = getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

/* How messages name temp_root(): a TMPDIR that is missing, full or not
 * writable must not read as a missing compiler. */
static const char* temp_root_origin(void) {
  const char* tmp = getenv("TMPDIR");
  return tmp && *tmp ? "TMPDIR" : "the default; TMPDIR is not set";
}

/* A fresh private directory for a compile or a probe, under temp_root().
 * 0 on failure, with why it failed as a sentence in why[0..why_cap). */
static int make_temp_dir(char* out, size_t cap, const char* what, char* why, size_t why_cap) {
  const char* tmp = temp_root();
  const char* problem = NULL;
  if (snprintf(out, cap, "%s/uopjit-%s-XXXXXX", tmp, what) >= (int)cap) problem = "the path is too long";
  else if (!mkdtemp(out)) problem = strerror(errno);
  if (!problem) return 1;
  snprintf(why, why_cap, "cannot create a temporary directory in %.300s (%s): %s", tmp, temp_root_origin(), problem);
  return 0;
}

static const char* compiler(void) {
  const char* cc = getenv("UOPJIT_CC");
  return cc && *cc ? cc : "cc";
}

/* Runs argv (searched on PATH) with stdout and stderr into log_path; the
 * exit status, 127 when it cannot be started, or -1. -2 when log_path
 * cannot be created, with why in why[0..why_cap): that is the temporary
 * directory's fault (full, say), not the program's, and says so.
 *
 * posix_spawn, not fork: glibc starts the child with vfork semantics, so
 * this process's page tables are neither copied nor write-protected. After
 * a fork every page the caller writes again takes a copy-on-write fault,
 * which made the next disk-cache hit in the same process (the probe runs
 * once per context, the compiler on every miss) several times slower. */
static int run_command(char* const* argv, const char* log_path, char* why, size_t why_cap) {
  /* opened here rather than by the child, so that a failure to create it
   * is told apart from a program that cannot be started */
  int log = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log < 0) {
    snprintf(why, why_cap, "cannot create %.300s under %.300s (%s): %s", log_path, temp_root(), temp_root_origin(),
             strerror(errno));
    return -2;
  }
  posix_spawn_file_actions_t actions;
  if (posix_spawn_file_actions_init(&actions) != 0) {
    close(log);
    return -1;
  }
  pid_t pid;
  int rc = posix_spawn_file_actions_adddup2(&actions, log, 1);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&actions, log, 2);
  if (rc == 0) rc = posix_spawnp(&pid, argv[0], &actions, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(log);
  if (rc != 0) return 127;
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static char* read_file(const char* path, size_t* size) {
  FILE* fp = fopen(path, "rb");
  if (!fp) return NULL;
  char* data = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? cap * 2 : 65536;
      char* more = realloc(data, cap + 1);
      if (!more) break;
      data = more;
    }
    size_t got = fread(data + n, 1, cap - n, fp);
    n += got;
    if (got == 0) break;
  }
  fclose(fp);
  if (data) data[n] = 0;
  if (size) *size = n;
  return data;
}

/* First line of a file, trimmed, or NULL. */
static char* first_line(const char* path) {
  char* text = read_file(path, NULL);
  if (!text) return NULL;
  text[strcspn(text, "\n")] = 0;
  return text;
}

static char* cpu_identity(void) {
  char* info = read_file("/proc/cpuinfo", NULL);
  rt_buf_t b = {0};
  const char* keys[] = {"model name", "flags"};
  for (int i = 0; info && i < 2; i++) {
    char* at = strstr(info, keys[i]);
    if (at) rt_buf_printf(&b, "%.*s;", (int)strcspn(at, "\n"), at);
  }
  free(info);
  if (b.len == 0) rt_buf_printf(&b, "unknown cpu");
  return rt_buf_take(&b);
}

/* The C engine's slot of the JIT state: what the probe found. The probe
 * has a lock of its own, not the state's: a tiered call's MIR compile
 * takes the state's lock, and must not wait for a background probe. */
typedef struct {
  pthread_mutex_t probe_lock;
  int probe;          /* C compiler: -1 not yet known, 0 absent, 1 present */
  int recalled;       /* 1: the disk cache was asked for a remembered answer */
  char* identity;     /* the compiler's first line of --version */
  char* cpu_identity; /* the CPU's model and feature flags */
  /* probe 0 for a reason other than the compiler's (a temporary directory
   * that cannot be made or written): that reason, written before the
   * answer is published; NULL: the compiler itself did not answer */
  char* why;
} c_state_t;

static void* c_state_new(void) {
  c_state_t* st = calloc(1, sizeof *st);
  if (!st) return NULL;
  pthread_mutex_init(&st->probe_lock, NULL);
  st->probe = -1;
  return st;
}

static void c_state_free(void* p) {
  c_state_t* st = p;
  if (!st) return;
  pthread_mutex_destroy(&st->probe_lock);
  free(st->identity);
  free(st->cpu_identity);
  free(st->why);
  free(st);
}

static c_state_t* c_state(jit_state_t* js) { return jit_engine_state(js, UJ_ENGINE_C); }

/* The probe's answer is remembered in the disk cache, so that a new
 * process knows the compiler without running it: a tiered first call reads
 * the answer and finds the C kernel in the disk cache at once (the key
 * names the compiler; with no answer, jit/tier.c serves MIR and probes in
 * the background). The
 * entry's key names the compiler binary as found on PATH and what changes
 * when it is replaced (device, inode, size, modification time); the entry
 * holds its first line of --version. 0 when the compiler is not found as a
 * file: then it is run, and nothing is remembered. */
static int compiler_probe_key(char* out, size_t cap) {
  const char* cc = compiler();
  char path[PATH_MAX];
  struct stat sb;
  int found = 0;
  if (strchr(cc, '/')) {
    found = snprintf(path, sizeof path, "%s", cc) < (int)sizeof path && stat(path, &sb) == 0;
  } else {
    const char* dirs = getenv("PATH");
    for (const char* d = dirs ? dirs : ""; !found && *d;) {
      size_t len = strcspn(d, ":");
      if (len && snprintf(path, sizeof path, "%.*s/%s", (int)len, d, cc) < (int)sizeof path)
        found = stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0;
      d += len + (d[len] == ':');
    }
  }
  if (!found) return 0;
  return snprintf(out, cap, "engine c compiler probe\npath %s\nfile %llu %llu %lld %lld.%09ld\n", path,
                  (unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino, (long long)sb.st_size,
                  (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec) < (int)cap;
}

static char* remembered_identity(jit_state_t* js, const char* key) {
  char* bytes = NULL;
  size_t size = 0;
  if (!jit_disk_enabled(js->cache) ||
      jit_disk_load_bytes(js->cache, ir_hash_bytes(key, strlen(key)), key, "ccid", &bytes, &size) != UJ_OK) {
    rt_error_clear(); /* a miss: the compiler is asked; no error of the caller's */
    return NULL;
  }
  if (size == 0 || memchr(bytes, '\n', size) || memchr(bytes, 0, size)) { /* one line, as written */
    free(bytes);
    return NULL;
  }
  char* line = realloc(bytes, size + 1);
  if (!line) {
    free(bytes);
    return NULL;
  }
  line[size] = 0;
  return line;
}

/* Best effort: a cache that cannot be written leaves the probe to run next time. */
static void remember_identity(jit_state_t* js, const char* key, const char* identity) {
  if (!jit_disk_enabled(js->cache) || !*identity) return;
  jit_disk_store(js->cache, ir_hash_bytes(key, strlen(key)), key, "ccid", identity, strlen(identity), NULL, 0);
}

/* The answer is published once (st->probe_lock held): the identities are
 * written before it (release) and never change after, so that a reader
 * who sees it (acquire) needs no lock. */
static void publish(c_state_t* st, int found) {
  if (found && !(st->cpu_identity = cpu_identity())) found = 0;
  __atomic_store_n(&st->probe, found, __ATOMIC_RELEASE);
}

/* The disk cache's remembered answer, asked once per state (st->probe_lock
 * held): published when there is one. A stat of the compiler's file and
 * the read of a small entry, no process. */
static void recall(jit_state_t* js, c_state_t* st) {
  if (st->recalled) return;
  char probe_key[PATH_MAX + 256];
  if (compiler_probe_key(probe_key, sizeof probe_key) && (st->identity = remembered_identity(js, probe_key)))
    publish(st, 1);
  __atomic_store_n(&st->recalled, 1, __ATOMIC_RELEASE);
}

/* Once the probe has answered, the answer is read without the lock: every
 * tiered call asks (jit/tier.c). */
int jit_c_available(jit_state_t* js) {
  c_state_t* st = c_state(js);
  int known = __atomic_load_n(&st->probe, __ATOMIC_ACQUIRE);
  if (known >= 0) return known;
  pthread_mutex_lock(&st->probe_lock);
  recall(js, st);
  if (st->probe < 0) {
    char probe_key[PATH_MAX + 256];
    int keyed = compiler_probe_key(probe_key, sizeof probe_key);
    int found = 0;
    char dir[4000], why[1024] = "";
    if (make_temp_dir(dir, sizeof dir, "probe", why, sizeof why)) {
      char log[4200];
      snprintf(log, sizeof log, "%s/version", dir);
      char* argv[] = {(char*)compiler(), "--version", NULL};
      int rc = run_command(argv, log, why, sizeof why);
      char* line = rc == 0 ? first_line(log) : NULL;
      if (line && *line) {
        st->identity = line;
        found = 1;
      } else if (rc == 0) {
        /* it ran and said nothing: its answer could not be written (a
         * full TMPDIR), and an empty identity would key every kernel */
        free(line);
        snprintf(why, sizeof why, "`%.200s --version` exited 0 but its answer, written under %.300s (%s), is empty: "
                 "is that directory full?",
                 compiler(), temp_root(), temp_root_origin());
      }
      unlink(log);
      rmdir(dir);
    }
    if (found && keyed) remember_identity(js, probe_key, st->identity);
    if (!found && *why) st->why = strdup(why); /* NULL on OOM: the compiler's message instead */
    publish(st, found);
  }
  int ok = st->probe;
  pthread_mutex_unlock(&st->probe_lock);
  return ok;
}

/* Never runs the compiler, and never waits for a probe under way on
 * another thread (that probe holds the lock: the answer is not known yet).
 * Once the remembered answer has been asked for, a call costs two loads. */
int jit_c_known(jit_state_t* js) {
  c_state_t* st = c_state(js);
  int known = __atomic_load_n(&st->probe, __ATOMIC_ACQUIRE);
  if (known >= 0 || __atomic_load_n(&st->recalled, __ATOMIC_ACQUIRE)) return known;
  if (pthread_mutex_trylock(&st->probe_lock) != 0) return -1;
  recall(js, st);
  known = st->probe;
  pthread_mutex_unlock(&st->probe_lock);
  return known;
}

/* Why the engine cannot run, as a sentence (UJ_ERR_UNSUPPORTED): what
 * kept the probe from an answer, else the compiler that did not answer. */
static uj_status_t no_compiler(const c_state_t* st) {
  if (st && st->why) return rt_error(UJ_ERR_UNSUPPORTED, "%s", st->why);
  const char* cc = getenv("UOPJIT_CC");
  if (cc && *cc)
    return rt_error(UJ_ERR_UNSUPPORTED, "UOPJIT_CC=\"%.200s\" is not a working C compiler (`%.200s --version` failed)",
                    cc, cc);
  return rt_error(UJ_ERR_UNSUPPORTED, "no working C compiler (`cc --version` failed; UOPJIT_CC names another compiler)");
}

uj_status_t jit_c_check(jit_state_t* js) {
  if (jit_c_available(js)) return UJ_OK;
  uj_status_t s = no_compiler(c_state(js));
  rt_error_prefix("engine c: ");
  return s;
}

/* The dynamic loader serializes dlopen, dlclose and dl_iterate_phdr behind
 * a lock of its own, which ThreadSanitizer cannot see: it then reports the
 * loader's bookkeeping of one thread's dlclose against another's dlopen as
 * a race. Taking this lock around them as well costs nothing (they are
 * serialized anyway) and makes the order visible. */
static pthread_mutex_t loader_lock = PTHREAD_MUTEX_INITIALIZER;

/* fork(): the lock is held across it, and the child gets a fresh one
 * (rt_fork_guard). */
__attribute__((constructor)) static void guard_loader_lock_across_fork(void) {
  static const pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  rt_fork_guard(&loader_lock, &fresh);
}

static void kernel_free(void* p) {
  c_kernel_t* k = p;
  if (!k) return;
  if (k->so) {
    pthread_mutex_lock(&loader_lock);
    dlclose(k->so);
    pthread_mutex_unlock(&loader_lock);
  }
  jit_blocks_free(&k->blocks);
  free(k);
}

/* ---- loading exactly the bytes in hand ---------------------------------------------------- */

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U /* kernels with vm.memfd_noexec refuse to map a memfd without it */
#endif

/* A private file holding exactly size bytes, which nobody can change any
 * more: a memfd sealed against writes, growth and shrinking. Where memfd
 * is not available, an unlinked file under $TMPDIR made read-only (it has
 * no name, and only this process holds it). -1 with errno on failure. */
static int private_copy(const char* bytes, size_t size) {
  int fd = memfd_create("uopjit-kernel", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
  if (fd < 0 && errno == EINVAL) fd = memfd_create("uopjit-kernel", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  int sealed = fd >= 0;
  if (fd < 0) {
    const char* tmp = getenv("TMPDIR");
    char path[4096];
    if (snprintf(path, sizeof path, "%s/uopjit-so-XXXXXX", tmp && *tmp ? tmp : "/tmp") >= (int)sizeof path) {
      errno = ENAMETOOLONG;
      return -1;
    }
    if ((fd = mkostemp(path, O_CLOEXEC)) < 0) return -1;
    unlink(path);
  }
  for (size_t done = 0; done < size;) {
    ssize_t n = write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      close(fd);
      errno = err;
      return -1;
    }
    done += (size_t)n;
  }
  int locked = sealed ? fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)
                      : fchmod(fd, 0400);
  if (locked != 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

/* dlopen of the private file fd through /proc/self/fd/<n>. The dynamic
 * loader takes a name it has loaded before for that object, and the number
 * of a closed descriptor comes back for the next file, so a kernel still
 * loaded under this name would be handed back instead of ours: the
 * descriptor is then moved to a number under which nothing is loaded (no
 * one else can load under a name while this process holds that number). */
static void* open_private(int fd, char* name, size_t cap, const char** why) {
  int current = fd;
  void* so = NULL;
  *why = NULL;
  pthread_mutex_lock(&loader_lock);
  for (;;) {
    snprintf(name, cap, "/proc/self/fd/%d", current);
    void* earlier = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!earlier) {
      so = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (!so) *why = dlerror();
      break;
    }
    dlclose(earlier);
    int next = fcntl(current, F_DUPFD_CLOEXEC, current + 1);
    if (current != fd) close(current);
    if (next < 0) {
      *why = strerror(errno);
      current = fd; /* closed just above */
      break;
    }
    current = next;
  }
  pthread_mutex_unlock(&loader_lock);
  if (current != fd) close(current);
  return so;
}

/* The kernel for f from a shared object's bytes (verified by the disk cache
 * or just compiled); the bytes are the caller's still. They are copied into
 * a private, sealed memory file that is dlopen'ed through /proc/self/fd:
 * no path that another process could change, replace or remove in between
 * (a concurrent `uopjit cache clear`, a damaged file). */
static uj_status_t load_image(const char* bytes, size_t size, const ir_func_t* f, c_kernel_t** out) {
  c_kernel_t* k = calloc(1, sizeof *k);
  if (!k) return rt_error(UJ_ERR_OOM, "engine c: out of memory allocating a kernel (%zu bytes)", sizeof *k);
  uj_status_t s = jit_blocks_init(&k->blocks, f);
  if (s != UJ_OK) {
    free(k);
    return s;
  }
  int fd = private_copy(bytes, size);
  if (fd < 0) {
    s = rt_error(UJ_ERR_IO, "cannot make a private copy of a %zu-byte shared object: %s", size, strerror(errno));
    kernel_free(k);
    return s;
  }
  char name[64];
  const char* why;
  k->so = open_private(fd, name, sizeof name, &why);
  close(fd); /* the mapping keeps the file */
  if (!k->so) {
    s = rt_error(UJ_ERR_COMPILE, "dlopen of a %zu-byte shared object: %s", size, why ? why : "unknown error");
    kernel_free(k);
    return s;
  }
  for (int b = 0; b < f->nblocks; b++) {
    char sym_name[32];
    snprintf(sym_name, sizeof sym_name, "uj_block_%d", b);
    void* sym = dlsym(k->so, sym_name);
    if (!sym) {
      kernel_free(k);
      return rt_error(UJ_ERR_COMPILE, "the shared object has no symbol %s", sym_name);
    }
    memcpy(&k->blocks.fns[b], &sym, sizeof sym); /* object to function pointer, as POSIX allows */
    k->blocks.ahead_next[b] = (unsigned char)jit_c_ahead_block(f, &f->blocks[b]);
  }
  *out = k;
  return UJ_OK;
}

/* Compiles source into dir/k.so; UJ_ERR_COMPILE with the compiler's output. */
static uj_status_t compile(const char* source, const char* dir, char* so_path, size_t cap) {
  char c_path[4200], log_path[4200];
  snprintf(c_path, sizeof c_path, "%s/k.c", dir);
  snprintf(log_path, sizeof log_path, "%s/log", dir);
  snprintf(so_path, cap, "%s/k.so", dir);
  FILE* fp = fopen(c_path, "w");
  if (!fp || fputs(source, fp) < 0 || fclose(fp) != 0) {
    if (fp) fclose(fp);
    return rt_error(UJ_ERR_IO, "engine c: cannot write %s (under %s, %s): %s", c_path, temp_root(), temp_root_origin(),
                    strerror(errno));
  }
  char* argv[NFLAGS + 8];
  int n = 0;
  argv[n++] = (char*)compiler();
  for (int i = 0; i < NFLAGS; i++) argv[n++] = (char*)cc_flags[i];
  if (isa_limit()) argv[n++] = (char*)isa_limit();
  argv[n++] = "-o";
  argv[n++] = so_path;
  argv[n++] = c_path;
  argv[n++] = "-lm";
  argv[n] = NULL;
  char why[1024];
  int rc = run_command(argv, log_path, why, sizeof why);
  if (rc == -2) return rt_error(UJ_ERR_IO, "engine c: %s", why);
  if (rc != 0) {
    char* log = read_file(log_path, NULL);
    uj_status_t s;
    if (log && *log)
      s = rt_error(UJ_ERR_COMPILE, "%s exited with status %d: %.600s", argv[0], rc, log);
    else /* not even its complaint could be written */
      s = rt_error(UJ_ERR_COMPILE, "%s exited with status %d and an empty log, written under %.300s (%s): is that "
                   "directory full?",
                   argv[0], rc, temp_root(), temp_root_origin());
    free(log);
    return s;
  }
  return UJ_OK;
}

static void remove_dir(const char* dir) {
  const char* names[] = {"k.c", "k.so", "log"};
  char path[4200];
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    unlink(path);
  }
  rmdir(dir);
}

/* The key: engine and emitter version (a checksum of the emitter's source
 * files, from the Makefile), compiler identity and flags, CPU, and the
 * canonical IR with the $params folded in. Sizes are not part of it; they
 * are arguments. (jit/memo.c keeps a per-program memo in front of the
 * cache, so a repeated call does not rebuild the key.) */
static char* key_text(jit_state_t* js, const ir_func_t* f, const int64_t* params) {
  char* ir = ir_print(f, params, IR_PRINT_CANONICAL);
  if (!ir) return NULL;
  /* appended rather than formatted: the CPU's flags and the IR are
   * kilobytes, and this runs on every disk-cache hit */
  const char* parts[] = {"engine c emitter ", UJ_C_EMITTER_ID, "\ncompiler ", c_state(js)->identity, "\nflags"};
  rt_buf_t b = {0};
  for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) rt_buf_append(&b, parts[i], strlen(parts[i]));
  for (int i = 0; i < NFLAGS; i++) {
    rt_buf_putc(&b, ' ');
    rt_buf_append(&b, cc_flags[i], strlen(cc_flags[i]));
  }
  if (isa_limit()) {
    rt_buf_putc(&b, ' ');
    rt_buf_append(&b, isa_limit(), strlen(isa_limit()));
  }
  rt_buf_append(&b, "\ncpu ", 5);
  const char* cpu = c_state(js)->cpu_identity;
  rt_buf_append(&b, cpu, strlen(cpu));
  rt_buf_putc(&b, '\n');
  rt_buf_append(&b, ir, strlen(ir));
  free(ir);
  return rt_buf_take(&b);
}

typedef struct {
  jit_state_t* js;
  const ir_func_t* f;
  const int64_t* params;
  ir_hash_t h;
  const char* key;
} c_build_t;

/* jit_disk_get_build_load's build: the kernel's C source compiled, and the
 * shared object's bytes. */
static uj_status_t compile_bytes(void* arg, char** bytes, size_t* size) {
  const c_build_t* b = arg;
  uj_status_t s;
  char* source = jit_c_emit(b->f, b->params, JIT_C_FOLD_PARAMS, NULL);
  char dir[4000], why[1024];
  if (!source) s = rt_error(UJ_ERR_OOM, "engine c: out of memory writing the C source of %d blocks", b->f->nblocks);
  else if (!make_temp_dir(dir, sizeof dir, "cc", why, sizeof why))
    s = rt_error(UJ_ERR_IO, "engine c: %s", why);
  else {
    char so[4096];
    if ((s = compile(source, dir, so, sizeof so)) == UJ_OK && !(*bytes = read_file(so, size)))
      s = rt_error(UJ_ERR_IO, "cannot read the compiled %s", so);
    remove_dir(dir);
  }
  free(source);
  return s;
}

/* jit_disk_get_build_load's load: the shared object loaded from memory. */
static uj_status_t load_built(void* arg, const char* bytes, size_t size, void** out) {
  const c_build_t* b = arg;
  c_kernel_t* k = NULL;
  uj_status_t s = load_image(bytes, size, b->f, &k);
  *out = k;
  return s;
}

/* A cache miss: the disk cache's verified shared object, else a compile
 * stored in the disk cache (a failed store only costs a compile later),
 * loaded from memory; jit_disk_get_build_load lets one context of the
 * process compile a kernel that several miss at once, and compiles again
 * an entry that verifies but will not load. */
static uj_status_t build_kernel(void* arg, void** value) {
  const c_build_t* b = arg;
  size_t size = 0;
  return jit_disk_get_build_load(b->js->cache, b->h, b->key, "so", compile_bytes, load_built, arg, value, &size);
}

/* ---- what a loaded kernel costs in the memory cache ---- */

/* In the memory cache a kernel costs the pages its object maps (read from
 * the loader's program headers) plus its tables; evicting it unloads the
 * object. */

typedef struct {
  ElfW(Addr) base; /* the object's load address, from its link map */
  const char* name;
  size_t bytes;
} mapped_t;

/* dl_iterate_phdr's callback: the loadable segments of the object at
 * m->base, each rounded out to whole pages as the loader maps them. */
static int add_segments(struct dl_phdr_info* info, size_t size, void* arg) {
  (void)size;
  mapped_t* m = arg;
  if (info->dlpi_addr != m->base || !info->dlpi_name || strcmp(info->dlpi_name, m->name) != 0) return 0;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    size_t first = (size_t)ph->p_vaddr / page * page;
    size_t end = ((size_t)ph->p_vaddr + ph->p_memsz + page - 1) / page * page;
    m->bytes += end - first;
  }
  return 1;
}

/* The bytes the loaded object maps (its segments), the loader's record of
 * it (about a page, a fixed estimate) and the kernel's own tables. */
static size_t kernel_bytes(const c_kernel_t* k) {
  enum { LOADER_RECORD = 4096 };
  size_t bytes = sizeof *k + jit_blocks_bytes(&k->blocks) + LOADER_RECORD;
  struct link_map* map = NULL;
  pthread_mutex_lock(&loader_lock);
  if (k->so && dlinfo(k->so, RTLD_DI_LINKMAP, &map) == 0 && map) {
    mapped_t m = {map->l_addr, map->l_name, 0};
    dl_iterate_phdr(add_segments, &m);
    bytes += m.bytes;
  }
  pthread_mutex_unlock(&loader_lock);
  return bytes;
}

/* build_kernel, and the kernel's cost for the memory cache. */
static uj_status_t build_measured(void* arg, void** value, size_t* bytes) {
  uj_status_t s = build_kernel(arg, value);
  if (s == UJ_OK) *bytes = kernel_bytes(*value);
  return s;
}

uj_status_t jit_c_build(jit_state_t* js, const ir_func_t* f, const int64_t* params, pthread_mutex_t* lock,
                        jit_cache_entry_t** out) {
  *out = NULL;
  uj_status_t usable = jit_c_check(js);
  if (usable != UJ_OK) return usable;
  char* key = key_text(js, f, params);
  if (!key) return rt_error(UJ_ERR_OOM, "engine c: out of memory printing the kernel's key text");
  c_build_t b = {js, f, params, ir_hash_bytes(key, strlen(key)), key};
  uj_status_t s = jit_cache_get_or_build(js->cache, lock, b.h, key, build_measured, &b, kernel_free, out);
  free(key);
  return s;
}

uj_status_t jit_c_get(jit_state_t* js, const ir_func_t* f, const int64_t* params, jit_cache_entry_t** out) {
  return jit_c_build(js, f, params, &js->lock, out);
}

uj_status_t jit_c_find(jit_state_t* js, const ir_func_t* f, const int64_t* params, int disk,
                       jit_cache_entry_t** out) {
  *out = NULL;
  uj_status_t usable = jit_c_check(js);
  if (usable != UJ_OK) return usable;
  char* key = key_text(js, f, params);
  if (!key) return rt_error(UJ_ERR_OOM, "engine c: out of memory printing the kernel's key text");
  ir_hash_t h = ir_hash_bytes(key, strlen(key));
  uj_status_t s = UJ_OK;
  char* bytes = NULL;
  size_t size = 0;
  if (!(*out = jit_cache_acquire(js->cache, h, key)) && disk) {
    if (jit_disk_load_bytes(js->cache, h, key, "so", &bytes, &size) == UJ_OK) {
      c_kernel_t* k = NULL;
      /* a verified entry that will not load is a miss here: a compile replaces it */
      if (load_image(bytes, size, f, &k) == UJ_OK)
        s = jit_cache_insert(js->cache, h, key, k, kernel_free, kernel_bytes(k), out);
      free(bytes);
    }
    if (s == UJ_OK && !*out) rt_error_clear(); /* a miss is no failure: the caller's call succeeds */
  }
  free(key);
  return s;
}

/* ---- the engine's row (jit/engine.h) ---- */

static int c_available(uj_ctx_t* ctx) {
  jit_state_t* js = ctx ? jit_state(ctx) : NULL;
  return js && jit_c_available(js);
}

static uj_status_t c_check(uj_ctx_t* ctx) {
  jit_state_t* js = jit_state(ctx);
  if (!js) return UJ_ERR_OOM;
  return jit_c_available(js) ? UJ_OK : no_compiler(c_state(js));
}

static uj_status_t c_get(uj_ctx_t* ctx, jit_state_t* js, const ir_func_t* f, const int64_t* params,
                         jit_cache_entry_t** out) {
  (void)ctx;
  return jit_c_get(js, f, params, out);
}

/* C source needs no compiler to be written */
static char* c_dump(const ir_func_t* f, const int64_t* params, uj_dump_t what) {
  int flags = what == UJ_DUMP_C_AOT ? JIT_C_AOT : params ? JIT_C_FOLD_PARAMS : 0;
  char* text = jit_c_emit(f, params, flags, "uopjit_kernel");
  if (!text) rt_error(UJ_ERR_OOM, "uj_program_dump: out of memory writing the C source of %d blocks", f->nblocks);
  return text;
}

const jit_engine_t jit_engine_c = {
    .device = UJ_CPU,
    .settings = 1u << RT_SETTING_THREADS | 1u << RT_SETTING_MEMORY_CACHE_LIMIT | 1u << RT_SETTING_CACHE |
                1u << RT_SETTING_DISK_CACHE_LIMIT | 1u << RT_SETTING_STREAM,
    .chain_scratch = 1,
    .dumps = 1u << UJ_DUMP_C | 1u << UJ_DUMP_C_AOT,
    .available = c_available,
    .check = c_check,
    .get = c_get,
    .run = jit_engine_run_blocks,
    .dump = c_dump,
    .state_new = c_state_new,
    .state_free = c_state_free,
};
