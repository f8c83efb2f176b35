/* tests/test_engines_cache.c: engines and the kernel cache (docs/DESIGN.md
 * sections 7 and 8), seen from a program's point of view.
 *
 * $params: a program whose index expressions use $s and $k (a strided,
 * shifted view through reindex, reads out of range giving 0) runs with one
 * value, then another, on the same context: both answers right, the
 * context's in-memory kernel cache (reached through jit_state(ctx), as a
 * white-box check) gains exactly one entry for the new values and none for
 * a repeat or for new sizes (sizes are arguments, not part of the key); on
 * the C engine the disk cache (a private directory) gains one file too.
 *
 * Disk reuse in a new process: with a private UOPJIT_CACHE_DIR the test
 * runs a program on the C engine, then re-executes its own binary
 * (/proc/self/exe --child <seed> <dir> <file>); the child builds the same
 * program on a new context with the same directory, runs it on the same
 * data (from the seed) and writes its cache counts and its output to the
 * file. The child must have loaded the kernel from disk (a disk hit, no
 * store: nothing compiled) and got the same answer bit for bit.
 *
 * Contexts of one process that miss the same kernel at once (C, and CUDA
 * compiled with NVRTC) compile it once: one stores it, the others load it
 * from the disk cache. */
#include <ftw.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../jit/jit.h"
#include "engines_check.h"
#include "kernel_cache_check.h"

/* ---- private cache directories ------------------------------------------------------------- */

static int remove_one(const char* path, const struct stat* st, int type, struct FTW* ftw) {
  (void)st, (void)type, (void)ftw;
  return remove(path);
}
static void remove_tree(const char* dir) { nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS); }

/* A context on engine e whose kernel cache uses dir (the cache reads the
 * environment when the context's JIT state is made, which setting the
 * engine does); the environment is restored afterwards. */
static uj_ctx_t* ctx_with_cache_dir(uj_engine_t e, const char* dir) {
  const char* old = getenv("UOPJIT_CACHE_DIR");
  char* saved = old ? strdup(old) : NULL;
  const char* old_off = getenv("UOPJIT_CACHE");
  char* saved_off = old_off ? strdup(old_off) : NULL;
  setenv("UOPJIT_CACHE_DIR", dir, 1);
  unsetenv("UOPJIT_CACHE");
  uj_ctx_t* c = en_ctx_new(e);
  if (c && !jit_state(c)) uj_ctx_free(c), c = NULL;
  if (saved) setenv("UOPJIT_CACHE_DIR", saved, 1);
  else unsetenv("UOPJIT_CACHE_DIR");
  if (saved_off) setenv("UOPJIT_CACHE", saved_off, 1);
  free(saved), free(saved_off);
  return c;
}

/* Entries in the context's disk cache, -1 when it cannot be listed. */
static int disk_entries(uj_ctx_t* ctx) {
  jit_state_t* js = jit_state(ctx);
  rt_buf_t b = {0};
  if (!js || jit_disk_list(js->cache, &b) != UJ_OK) {
    rt_buf_release(&b);
    return -1;
  }
  int n = 0;
  for (size_t i = 0; i < b.len; i++) n += b.data[i] == '\n';
  rt_buf_release(&b);
  return n;
}

/* Whether some line of the disk cache's listing contains text. */
static int disk_listing_has(uj_ctx_t* ctx, const char* text) {
  jit_state_t* js = jit_state(ctx);
  rt_buf_t b = {0};
  int found = js && jit_disk_list(js->cache, &b) == UJ_OK && b.data && strstr(b.data, text);
  rt_buf_release(&b);
  return found;
}

/* ---- $params ------------------------------------------------------------------------------- */

/* y = x + x[i*$s + $k] (0 out of range), z[j] = x[j*$s] for j < ceil(n / $s). */
static uj_program_t* param_program(void) {
  static const char* const sh_y[] = {"dA0"}, *ix_y[] = {"i0*$s + $k"};
  static const char* const sh_z[] = {"(dA0 + $s - 1) / $s"}, *ix_z[] = {"i0*$s"};
  static const char* const names[] = {"$s", "$k"};
  uj_graph_t* g = uj_graph_new();
  uj_io_t x = uj_input(g, 1, UJ_F32);
  uj_io_t v = uj_reindex(g, x, 1, sh_y, 1, &x, 1, ix_y);
  uj_io_t y = uj_binary(g, UJ_BINARY_ADD, x, v);
  uj_io_t z = uj_reindex(g, x, 1, sh_z, 1, &x, 1, ix_z);
  uj_io_t outs[] = {y, z};
  uj_program_t* p = OR_PROGRAM(g, 1, &x, 2, names, 2, outs);
  uj_graph_free(g);
  return p;
}

/* Runs the param program at size n with ($s, $k) and checks the answer. */
static void param_run(uj_ctx_t* ctx, const char* engine, uj_program_t* p, uint64_t* st, int64_t n, int64_t s,
                      int64_t k) {
  int64_t m = (n + s - 1) / s;
  uj_tensor_t x = or_tensor(UJ_F32, 1, &n), y = or_tensor(UJ_F32, 1, &n), z = or_tensor(UJ_F32, 1, &m);
  or_fill_real(st, &x, -1, 1);
  double *ry = or_alloc_ref(n), *rz = or_alloc_ref(m);
  for (int64_t i = 0; i < n; i++) {
    int64_t j = i * s + k;
    ry[i] = (double)(float)(or_get(&x, i) + (j >= 0 && j < n ? or_get(&x, j) : 0.0));
  }
  for (int64_t j = 0; j < m; j++) rz[j] = or_get(&x, j * s);
  const uj_tensor_t* in[] = {&x};
  uj_tensor_t* out[] = {&y, &z};
  int64_t pv[] = {s, k};
  char what[96];
  snprintf(what, sizeof what, "params $s=%lld $k=%lld at [%lld]", (long long)s, (long long)k, (long long)n);
  if (EN_RUN(what, engine, ctx, p, in, 1, pv, 2, out, 2)) {
    EN_EXPECT_CLOSE(what, engine, &y, ry, 0);
    EN_EXPECT_CLOSE(what, engine, &z, rz, 0);
  }
  or_tensor_free(&x), or_tensor_free(&y), or_tensor_free(&z);
  free(ry), free(rz);
}

TEST(params_new_value_new_entry) {
  uint64_t seed = en_seed(7301), st = seed;
  HARNESS_SEED(seed);
  SKIP_IF(en_count() == 0, "no JIT engine available");
  uj_program_t* p = param_program();
  if (!p) return;
  /* the interpreter first: the same answers, no kernels */
  param_run(en_interp(), "interp", p, &st, 1021, 2, 1);
  param_run(en_interp(), "interp", p, &st, 1021, 3, -2);
  for (int e = 0; e < EN_NENGINES; e++) {
    if (!en_available(e)) continue;
    const char* name = en_engines[e].name;
    int disk = en_engines[e].engine == UJ_ENGINE_C; /* MIR keeps no disk cache */
    char dir[] = "/tmp/uopjit-engines-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    uj_ctx_t* ctx = ctx_with_cache_dir(en_engines[e].engine, dir);
    CHECK(ctx != NULL);
    if (!ctx) continue;
    jit_cache_counts_t k0 = counts_of(ctx);
    CHECK(k0.memory_entries == 0);
    param_run(ctx, name, p, &st, 1021, 2, 1);
    jit_cache_counts_t k1 = counts_of(ctx);
    int d1 = disk ? disk_entries(ctx) : 0;
    CHECK(k1.memory_entries >= 1);
    if (disk) CHECK(d1 >= 1);
    /* other sizes, the same values: the same kernel */
    param_run(ctx, name, p, &st, 0, 2, 1);
    param_run(ctx, name, p, &st, 1, 2, 1);
    param_run(ctx, name, p, &st, 65537, 2, 1);
    CHECK(counts_of(ctx).memory_entries == k1.memory_entries);
    /* a new value: one new entry, and the new answer */
    param_run(ctx, name, p, &st, 1021, 3, -2);
    jit_cache_counts_t k2 = counts_of(ctx);
    if (k2.memory_entries != k1.memory_entries + 1) {
      char msg[256];
      snprintf(msg, sizeof msg, "%s: memory entries %lld after ($s,$k) = (2,1), %lld after (3,-2): want one more",
               name, (long long)k1.memory_entries, (long long)k2.memory_entries);
      harness_fail(__FILE__, __LINE__, msg);
    }
    if (disk) {
      int d2 = disk_entries(ctx);
      if (d2 != d1 + 1) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s: disk entries %d after (2,1), %d after (3,-2): want one more", name, d1, d2);
        harness_fail(__FILE__, __LINE__, msg);
      }
    }
    /* back to the first value: right again, and no new entry */
    param_run(ctx, name, p, &st, 4099, 2, 1);
    param_run(ctx, name, p, &st, 17, 3, -2);
    jit_cache_counts_t k3 = counts_of(ctx);
    CHECK(k3.memory_entries == k2.memory_entries);
    CHECK(k3.memory_hits > k2.memory_hits);
    /* a value whose view reads nothing in range: all zeros added */
    param_run(ctx, name, p, &st, 33, 1, 1000);
    CHECK(counts_of(ctx).memory_entries == k2.memory_entries + 1);
    uj_ctx_free(ctx);
    remove_tree(dir);
  }
  uj_program_free(p);
}

/* ---- disk reuse in a new process --------------------------------------------------------------- */

static const char disk_src[] =
    "_e = exp(x - amax(x, 1)); y = _e / sum(_e, 1)\n"
    "z = tanh(x) * sigmoid(x) + log(1 + x*x)\n";
static const int64_t disk_dims[2] = {37, 1021};

/* The disk program's input for a seed. */
static uj_tensor_t disk_input(uint64_t seed) {
  uint64_t st = seed;
  uj_tensor_t x = or_tensor(UJ_F32, 2, disk_dims);
  or_fill_real(&st, &x, -6, 6);
  return x;
}

/* Runs the disk program on ctx into y and z (allocated here). */
static uj_status_t disk_run(uj_ctx_t* ctx, uj_program_t* p, const uj_tensor_t* x, uj_tensor_t* y, uj_tensor_t* z) {
  *y = or_tensor(UJ_F32, 2, disk_dims), *z = or_tensor(UJ_F32, 2, disk_dims);
  or_fill_sentinel(y), or_fill_sentinel(z);
  const uj_tensor_t* in[] = {x};
  uj_tensor_t* out[] = {y, z};
  return uj_program_run(ctx, p, UJ_FORWARD, in, 1, NULL, 0, out, 2);
}

/* In the child: argv = exe --child seed dir file. Writes four int64 counts
 * (disk hits, disk misses, disk stores, memory entries) then y and z. */
static int child_main(char** argv) {
  uint64_t seed = strtoull(argv[2], NULL, 0);
  const char* dir = argv[3];
  uj_program_t* p = NULL;
  if (uj_program_parse(disk_src, &p) != UJ_OK) {
    fprintf(stderr, "child: parse: %s\n", uj_last_error());
    return 2;
  }
  uj_ctx_t* ctx = ctx_with_cache_dir(UJ_ENGINE_C, dir);
  if (!ctx) {
    fprintf(stderr, "child: no C engine context\n");
    uj_program_free(p);
    return 3;
  }
  uj_tensor_t x = disk_input(seed), y, z;
  uj_status_t s = disk_run(ctx, p, &x, &y, &z);
  int rc = 0;
  if (s != UJ_OK) {
    fprintf(stderr, "child: run: %s: %s\n", uj_status_str(s), uj_last_error());
    rc = 4;
  } else {
    jit_cache_counts_t k = counts_of(ctx);
    int64_t c[4] = {k.disk_hits, k.disk_misses, k.disk_stores, k.memory_entries};
    size_t bytes = (size_t)or_tnumel(&y) * 4;
    FILE* fp = fopen(argv[4], "wb");
    if (!fp || fwrite(c, sizeof c, 1, fp) != 1 || fwrite(y.data, bytes, 1, fp) != 1 ||
        fwrite(z.data, bytes, 1, fp) != 1)
      rc = 5;
    if (fp && fclose(fp) != 0) rc = 5;
  }
  or_tensor_free(&x), or_tensor_free(&y), or_tensor_free(&z);
  uj_ctx_free(ctx);
  uj_program_free(p);
  return rc;
}

/* Runs this binary as the child; its exit status, or -1. */
static int spawn_child(uint64_t seed, const char* dir, const char* file) {
  char seed_text[32];
  snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
  fflush(stdout), fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    char* args[] = {"test_engines_cache", "--child", seed_text, (char*)dir, (char*)file, NULL};
    execv("/proc/self/exe", args);
    _exit(126);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(disk_reuse_in_new_process) {
  uint64_t seed = en_seed(7302);
  HARNESS_SEED(seed);
  int c_slot = -1;
  for (int e = 0; e < EN_NENGINES; e++)
    if (en_engines[e].engine == UJ_ENGINE_C && en_available(e)) c_slot = e;
  SKIP_IF(c_slot < 0, "the C engine is not available");
  SKIP_IF(access("/proc/self/exe", X_OK) != 0, "no /proc/self/exe to re-execute");
  char dir[] = "/tmp/uopjit-engines-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char file[64];
  snprintf(file, sizeof file, "%s.out", dir);
  uj_program_t* p = NULL;
  CHECK(uj_program_parse(disk_src, &p) == UJ_OK);
  uj_ctx_t* ctx = ctx_with_cache_dir(UJ_ENGINE_C, dir);
  CHECK(ctx != NULL);
  if (!p || !ctx) {
    uj_ctx_free(ctx), uj_program_free(p), remove_tree(dir);
    return;
  }
  uj_tensor_t x = disk_input(seed), y, z, iy, iz;
  CHECK(disk_run(ctx, p, &x, &y, &z) == UJ_OK);
  jit_cache_counts_t k = counts_of(ctx);
  CHECK(k.disk_stores >= 1); /* compiled here, and stored */
  CHECK(k.disk_hits == 0);
  CHECK(disk_entries(ctx) >= 1);
  /* the key names the emitter that wrote the entry, so that a library with a
   * changed emitter misses instead of loading an older build's code */
  CHECK(disk_listing_has(ctx, " engine c emitter " UJ_C_EMITTER_ID "\n"));
  /* the parent's answer is the interpreter's, within the inline-math bound */
  CHECK(disk_run(en_interp(), p, &x, &iy, &iz) == UJ_OK);
  double *wy = or_to_double(&iy), *wz = or_to_double(&iz);
  EN_EXPECT_CLOSE("disk program y", "c", &y, wy, 2e-6);
  EN_EXPECT_CLOSE("disk program z", "c", &z, wz, 2e-6);
  free(wy), free(wz);

  int rc = spawn_child(seed, dir, file);
  if (rc != 0) {
    char msg[128];
    snprintf(msg, sizeof msg, "the child exited with status %d", rc);
    harness_fail(__FILE__, __LINE__, msg);
  } else {
    size_t bytes = (size_t)or_tnumel(&y) * 4;
    int64_t c[4] = {0};
    char* got = malloc(2 * bytes);
    FILE* fp = fopen(file, "rb");
    int ok = fp && fread(c, sizeof c, 1, fp) == 1 && fread(got, 2 * bytes, 1, fp) == 1;
    if (fp) fclose(fp);
    CHECK(ok);
    if (ok) {
      if (!(c[0] >= 1 && c[2] == 0)) {
        char msg[256];
        snprintf(msg, sizeof msg, "child: disk hits %lld, misses %lld, stores %lld: want a hit and no compile",
                 (long long)c[0], (long long)c[1], (long long)c[2]);
        harness_fail(__FILE__, __LINE__, msg);
      }
      CHECK(c[3] >= 1);
      if (memcmp(got, y.data, bytes) != 0 || memcmp(got + bytes, z.data, bytes) != 0)
        harness_fail(__FILE__, __LINE__, "the child's answer differs from the parent's (bit for bit)");
    }
    free(got);
  }
  unlink(file);
  or_tensor_free(&x), or_tensor_free(&y), or_tensor_free(&z), or_tensor_free(&iy), or_tensor_free(&iz);
  uj_ctx_free(ctx);
  uj_program_free(p);
  remove_tree(dir);
}

/* ---- the disk cache changing between check and load ------------------------------------------- *
 *
 * jit_disk_verified_hook runs right after the disk cache verified an entry
 * and before the engine uses it; these tests change the directory at that
 * moment, as a concurrent `uopjit cache clear`, another process or damage
 * could, and the run must still give the right kernel's answer. Filling the
 * cache loads two kernels at once in one process, which also checks that
 * jit/c/c.c never gets the earlier kernel back from the dynamic loader when a
 * descriptor number (part of the name it loads by) is reused. */

static const char times_three[] = "y = x*3 + 0.25";
static const char times_five[] = "y = x*5 - 1.5";
static const int64_t race_n = 1000;

static char race_payload[4096]; /* the entry the hook acts on */
static char race_other[4096];   /* what "replace" puts in its place */

static void hook_delete(const char* payload_path) {
  if (strcmp(payload_path, race_payload) != 0) return;
  char meta[4200];
  snprintf(meta, sizeof meta, "%s.meta", payload_path);
  unlink(payload_path);
  unlink(meta);
}

static void hook_replace(const char* payload_path) {
  if (strcmp(payload_path, race_payload) != 0) return;
  char temp[4200];
  snprintf(temp, sizeof temp, "%s.swap", payload_path);
  FILE* in = fopen(race_other, "rb");
  FILE* out = fopen(temp, "wb");
  char buf[4096];
  size_t n;
  while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, out);
  if (in) fclose(in);
  if (out && fclose(out) == 0) rename(temp, payload_path);
}

/* The C engine's slot in en_engines, or -1. */
static int c_engine_slot(void) {
  for (int e = 0; e < EN_NENGINES; e++)
    if (en_engines[e].engine == UJ_ENGINE_C && en_available(e)) return e;
  return -1;
}

/* Runs src on ctx against the interpreter; 1 when it ran and agreed. */
static int race_run(uj_ctx_t* ctx, const char* src, const char* what) {
  uj_program_t* p = NULL;
  if (uj_program_parse(src, &p) != UJ_OK) return 0;
  uint64_t st = 99;
  uj_tensor_t x = or_tensor(UJ_F32, 1, &race_n), y = or_tensor(UJ_F32, 1, &race_n),
              ry = or_tensor(UJ_F32, 1, &race_n);
  or_fill_real(&st, &x, -4, 4);
  const uj_tensor_t* in[] = {&x};
  uj_tensor_t* out[] = {&y};
  uj_tensor_t* ref_out[] = {&ry};
  int ok = uj_program_run(en_interp(), p, UJ_FORWARD, in, 1, NULL, 0, ref_out, 1) == UJ_OK;
  if (ok && EN_RUN(what, "c", ctx, p, in, 1, NULL, 0, out, 1)) {
    double* ref = or_to_double(&ry);
    ok = EN_EXPECT_CLOSE(what, "c", &y, ref, 0);
    free(ref);
  } else {
    ok = 0;
  }
  or_tensor_free(&x), or_tensor_free(&y), or_tensor_free(&ry);
  uj_program_free(p);
  return ok;
}

/* The payload path of the "so" entry the listing has and `seen` (the
 * previous listing, updated here) had not. */
static int new_entry_path(uj_ctx_t* ctx, const char* dir, char* seen, size_t seen_cap, char* path, size_t cap) {
  jit_state_t* js = jit_state(ctx);
  rt_buf_t b = {0};
  int found = 0;
  if (js && jit_disk_list(js->cache, &b) == UJ_OK && b.data) {
    for (const char* line = b.data; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
      if (strlen(line) > 36 && strncmp(line + 32, " so ", 4) == 0 && !memmem(seen, strlen(seen), line, 32)) {
        snprintf(path, cap, "%s/%.32s.so", dir, line);
        found = 1;
      }
    }
    snprintf(seen, seen_cap, "%s", b.data);
  }
  rt_buf_release(&b);
  return found;
}

typedef enum { RACE_DELETE, RACE_REPLACE, RACE_UNLOADABLE } race_kind_t;

static void race_test(race_kind_t kind) {
  SKIP_IF(c_engine_slot() < 0, "the C engine is not available");
  char dir[] = "/tmp/uopjit-race-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  uj_ctx_t* filler = ctx_with_cache_dir(UJ_ENGINE_C, dir);
  CHECK(filler != NULL);
  char listed[4096] = "";
  if (filler) {
    CHECK(race_run(filler, times_three, "filling the cache (x*3)"));
    CHECK(new_entry_path(filler, dir, listed, sizeof listed, race_payload, sizeof race_payload));
    CHECK(race_run(filler, times_five, "filling the cache (x*5)"));
    CHECK(new_entry_path(filler, dir, listed, sizeof listed, race_other, sizeof race_other));
  }
  if (kind == RACE_UNLOADABLE && filler) {
    /* a well-formed entry for the right key whose payload is no shared
     * object: verified, yet it cannot be loaded */
    char meta[4200];
    snprintf(meta, sizeof meta, "%s.meta", race_payload);
    FILE* fp = fopen(meta, "rb");
    char text[65536];
    size_t len = fp ? fread(text, 1, sizeof text - 1, fp) : 0;
    if (fp) fclose(fp);
    text[len] = '\0';
    char* key_line = strstr(text, "\nkey ");
    char* key = key_line ? strchr(key_line + 1, '\n') : NULL;
    CHECK(key != NULL);
    if (key) {
      key++;
      CHECK(jit_disk_store(jit_state(filler)->cache, ir_hash_bytes(key, strlen(key)), key, "so", "not ELF", 7,
                           NULL, 0) == UJ_OK);
    }
  }
  /* freed first: a shared object still loaded under the same path would
   * hide what happens to the file */
  uj_ctx_free(filler);
  uj_ctx_t* ctx = ctx_with_cache_dir(UJ_ENGINE_C, dir);
  CHECK(ctx != NULL);
  if (ctx) {
    jit_disk_verified_hook = kind == RACE_DELETE ? hook_delete : kind == RACE_REPLACE ? hook_replace : NULL;
    CHECK(race_run(ctx, times_three, kind == RACE_DELETE    ? "entry deleted after its check"
                                     : kind == RACE_REPLACE ? "entry replaced after its check"
                                                            : "entry verified but not loadable"));
    jit_disk_verified_hook = NULL;
    jit_cache_counts_t k = counts_of(ctx);
    /* an unloadable entry is compiled again, and the good kernel stored */
    if (kind == RACE_UNLOADABLE) CHECK(k.disk_stores == 1);
    /* and once more, from whatever the directory now holds */
    uj_ctx_t* again = ctx_with_cache_dir(UJ_ENGINE_C, dir);
    CHECK(again && race_run(again, times_three, "after the race"));
    uj_ctx_free(again);
  }
  uj_ctx_free(ctx);
  remove_tree(dir);
}

TEST(disk_entry_deleted_after_check) { race_test(RACE_DELETE); }
TEST(disk_entry_replaced_after_check) { race_test(RACE_REPLACE); }
TEST(disk_entry_verified_but_not_loadable) { race_test(RACE_UNLOADABLE); }

/* ---- one compile for contexts that miss at once ------------------------------------------ */

/* Threads on contexts of their own that share a disk cache run (C) or
 * compile for sm_90 (CUDA, with NVRTC) the same new kernel at the same
 * moment: one compiles and stores it, the others wait for that and load
 * it from the disk (jit/cache/claim.c). Counted by the contexts' caches:
 * one store in all (every compile stores), and a disk hit for each other
 * context. */
enum { SHARERS = 6, SHARED_N = 64 };

typedef struct {
  uj_ctx_t* ctx;
  uj_program_t* p;
  pthread_barrier_t* start;
  int cuda; /* compile for the GPU instead of running */
  uj_status_t s;
  int reused;
  float y[SHARED_N];
} sharer_t;

static void* share_one(void* arg) {
  sharer_t* t = arg;
  float x[SHARED_N];
  for (int i = 0; i < SHARED_N; i++) x[i] = (float)i * 0.5f;
  uj_tensor_t tx = {x, UJ_F32, UJ_CPU, 1, {SHARED_N}}, ty = {t->y, UJ_F32, UJ_CPU, 1, {SHARED_N}};
  const uj_tensor_t* in[] = {&tx};
  uj_tensor_t* out[] = {&ty};
  pthread_barrier_wait(t->start);
  if (t->cuda) {
    int kernels = 0;
    t->s = uj_program_compile_cuda(t->ctx, t->p, UJ_FORWARD, in, 1, NULL, 0, "sm_90", &kernels, &t->reused);
  } else {
    t->s = uj_program_run(t->ctx, t->p, UJ_FORWARD, in, 1, NULL, 0, out, 1);
  }
  return NULL;
}

static void contexts_share_one_compile(int cuda) {
  char dir[] = "/tmp/uopjit-sharers-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  uj_program_t* p = NULL;
  CHECK(uj_program_parse("y = x*1.75 - 0.125", &p) == UJ_OK);
  if (!cuda) { /* the C engine keeps the compiler's identity in the disk cache too: stored now, not in the race */
    uj_ctx_t* first = uj_ctx_new();
    uj_program_t* other = NULL;
    float one = 1, two = 0;
    uj_tensor_t tx = {&one, UJ_F32, UJ_CPU, 0, {0}}, ty = {&two, UJ_F32, UJ_CPU, 0, {0}};
    const uj_tensor_t* in[] = {&tx};
    uj_tensor_t* out[] = {&ty};
    CHECK(first && uj_ctx_set_cache_dir(first, dir) == UJ_OK && uj_ctx_set_engine(first, UJ_ENGINE_C) == UJ_OK &&
          uj_program_parse("y = x + 1", &other) == UJ_OK &&
          uj_program_run(first, other, UJ_FORWARD, in, 1, NULL, 0, out, 1) == UJ_OK && two == 2);
    uj_program_free(other), uj_ctx_free(first);
  }
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, SHARERS);
  sharer_t t[SHARERS];
  pthread_t threads[SHARERS];
  int made = 0;
  for (int i = 0; i < SHARERS; i++) {
    t[i] = (sharer_t){uj_ctx_new(), p, &start, cuda, UJ_OK, 0, {0}};
    CHECK(t[i].ctx && uj_ctx_set_cache_dir(t[i].ctx, dir) == UJ_OK &&
          (cuda || uj_ctx_set_engine(t[i].ctx, UJ_ENGINE_C) == UJ_OK));
  }
  for (int i = 0; i < SHARERS && p; i++) made += pthread_create(&threads[i], NULL, share_one, &t[i]) == 0;
  CHECK(made == SHARERS || !p);
  for (int i = 0; i < made; i++) pthread_join(threads[i], NULL);
  int64_t stores = 0, hits = 0, reused = 0;
  for (int i = 0; i < SHARERS; i++) {
    CHECK(t[i].s == UJ_OK);
    if (t[i].s != UJ_OK) printf("  context %d: %s: %s\n", i, uj_status_str(t[i].s), uj_last_error());
    for (int k = 0; !cuda && k < SHARED_N; k++) CHECK(t[i].y[k] == (float)k * 0.5f * 1.75f - 0.125f);
    jit_cache_counts_t c = counts_of(t[i].ctx);
    stores += c.disk_stores, hits += c.disk_hits, reused += t[i].reused;
    uj_ctx_free(t[i].ctx);
  }
  printf("  %s: %d contexts at once: %lld compiled and stored, %lld loaded from the disk\n", cuda ? "cuda" : "c",
         SHARERS, (long long)stores, (long long)hits);
  CHECK(stores == 1);
  CHECK(hits >= SHARERS - 1);
  CHECK(!cuda || reused == SHARERS - 1);
  pthread_barrier_destroy(&start);
  uj_program_free(p);
  remove_tree(dir);
}

TEST(contexts_missing_a_kernel_at_once_compile_it_once) {
  SKIP_IF(c_engine_slot() < 0, "the C engine is not available");
  contexts_share_one_compile(0);
}

TEST(contexts_compiling_for_the_gpu_at_once_compile_once) {
  uj_ctx_t* probe = uj_ctx_new();
  uj_program_t* p = NULL;
  int kernels = 0, reused = 0;
  uj_status_t s = probe && uj_program_parse("y = x", &p) == UJ_OK && uj_ctx_set_cache_dir(probe, NULL) == UJ_OK
                      ? uj_program_compile_cuda(probe, p, UJ_FORWARD, NULL, 0, NULL, 0, "sm_90", &kernels, &reused)
                      : UJ_ERR_OOM;
  uj_program_free(p), uj_ctx_free(probe);
  SKIP_IF(s == UJ_ERR_UNSUPPORTED, "no NVRTC");
  contexts_share_one_compile(1);
}

int main(int argc, char** argv) {
  if (argc >= 5 && !strcmp(argv[1], "--child")) return child_main(argv);
  setenv("UOPJIT_THREADS", "3", 0);
  return harness_main(argc, argv);
}
