/* tests/test_tier.c: tiered execution of AUTO on host tensors (jit/tier.c).
 *
 * Each test uses a private disk cache directory, so that "new to the
 * process" and "found on disk" are under its control:
 * - the switch: a sigmoid chain called repeatedly on a fresh cache runs on
 *   MIR first (the query says so, with the C compile queued), then on C
 *   once the background compile is done (polled, never timed); every
 *   output equals bit for bit the output of the engine the query names,
 *   run on its own context;
 * - the policy: with uj_ctx_set_tier(ctx, 3) the first two calls leave C
 *   waiting and the third queues it; 0 turns tiering off; bad counts and a
 *   bad UOPJIT_TIER are refused;
 * - a failing compiler (UOPJIT_CC naming a script that answers --version
 *   and fails every compile): every run succeeds on MIR and the query
 *   reports the failure with the compiler's message; a script that fails
 *   --version too: the same, the reason naming the compiler, and a kernel
 *   new to the context after that is failed at its first call;
 * - the compiler probe on a fresh cache is not the first call's: a script
 *   whose --version waits for a gate file, which the test creates only
 *   after some calls have run on MIR (the script notes when it gave up
 *   waiting instead, which is what a probe on the calling thread makes it
 *   do); then C takes over;
 * - freeing a context with compiles queued and running: nothing is left
 *   behind: no child process (waitpid finds none, so none is a zombie), no
 *   compile directory under TMPDIR, no temporary or half entry in the cache;
 * - a second context, and a second process (this binary run again with
 *   --child), on the same cache start on C at their first call. */
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <sys/stat.h>
#include <ftw.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../include/uopjit.h"
#include "harness.h"

enum { N = 1 << 16 };

static int remove_one(const char* path, const struct stat* st, int type, struct FTW* ftw) {
  (void)st, (void)type, (void)ftw;
  return remove(path);
}
static void remove_tree(const char* dir) { nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS); }

static void make_dir(char* out, size_t cap, const char* what) {
  snprintf(out, cap, "/tmp/uj-test-tier-%s-XXXXXX", what);
  if (!mkdtemp(out)) {
    perror("mkdtemp");
    exit(2);
  }
}

typedef struct {
  uj_program_t* p;
  float x[N], y[N];
  float a, b;
} sigmoid_t;

/* y = 1/(1+exp(-(a*x+b))) with `shift` in the source, so that each shift
 * is a kernel of its own. */
static int sigmoid_new(sigmoid_t* s, int shift) {
  char src[128];
  snprintf(src, sizeof src, "y = 1/(1+exp(-(a*x+b+%d)))", shift);
  if (uj_program_parse(src, &s->p) != UJ_OK) return 0;
  s->a = 0.75f, s->b = -0.25f;
  for (int i = 0; i < N; i++) s->x[i] = (float)(i % 977) / 97.0f - 5.0f;
  return 1;
}

static uj_status_t sigmoid_run(uj_ctx_t* ctx, sigmoid_t* s, float* y) {
  uj_tensor_t ta = {&s->a, UJ_F32, UJ_CPU, 0, {0}}, tb = {&s->b, UJ_F32, UJ_CPU, 0, {0}};
  uj_tensor_t tx = {s->x, UJ_F32, UJ_CPU, 1, {N}}, ty = {y, UJ_F32, UJ_CPU, 1, {N}};
  const uj_tensor_t* in[] = {&ta, &tx, &tb};
  uj_tensor_t* out[] = {&ty};
  return uj_program_run(ctx, s->p, UJ_FORWARD, in, 3, NULL, 0, out, 1);
}

static uj_ctx_t* ctx_on(uj_engine_t e, const char* cache_dir) {
  uj_ctx_t* ctx = uj_ctx_new();
  if (ctx && cache_dir && uj_ctx_set_cache_dir(ctx, cache_dir) != UJ_OK) {
    uj_ctx_free(ctx);
    return NULL;
  }
  if (ctx && !cache_dir) uj_ctx_set_cache_dir(ctx, NULL);
  if (ctx && e != UJ_ENGINE_AUTO && uj_ctx_set_engine(ctx, e) != UJ_OK) {
    uj_ctx_free(ctx);
    return NULL;
  }
  return ctx;
}

/* The output of explicit engine e (no disk cache) into y. */
static int reference(uj_engine_t e, sigmoid_t* s, float* y) {
  uj_ctx_t* ctx = ctx_on(e, NULL);
  int ok = ctx && sigmoid_run(ctx, s, y) == UJ_OK;
  uj_ctx_free(ctx);
  return ok;
}

static int have_tiers(void) {
  uj_ctx_t* ctx = uj_ctx_new();
  int ok = uj_engine_available(ctx, UJ_ENGINE_MIR) && uj_engine_available(ctx, UJ_ENGINE_C);
  uj_ctx_free(ctx);
  return ok;
}

static uj_run_info_t last_run(uj_ctx_t* ctx, sigmoid_t* s) {
  uj_run_info_t info;
  memset(&info, 0, sizeof info);
  CHECK(uj_program_last_run(ctx, s->p, UJ_FORWARD, &info) == UJ_OK);
  return info;
}

/* Runs until the query reports `until` (or a long bound, 60 s, against a
 * hang: this waits for a compile, it does not time it); each output must
 * equal the reference of the engine that served it. The runs made. */
static int run_until(uj_ctx_t* ctx, sigmoid_t* s, uj_tier_state_t until, const float* mir_ref, const float* c_ref) {
  int runs = 0;
  for (; runs < 30000; runs++) {
    CHECK(sigmoid_run(ctx, s, s->y) == UJ_OK);
    uj_run_info_t info = last_run(ctx, s);
    const float* want = info.engine == UJ_ENGINE_C ? c_ref : mir_ref;
    CHECK(info.engine == UJ_ENGINE_C || info.engine == UJ_ENGINE_MIR);
    if (memcmp(s->y, want, sizeof s->y) != 0) {
      harness_fail(__FILE__, __LINE__, "a tiered output differs from its engine's own output");
      return runs;
    }
    if (info.tier == until) return runs + 1;
    usleep(2000);
  }
  harness_fail(__FILE__, __LINE__, "the tier state was not reached after 30000 runs");
  return runs;
}

static float mir_ref[N], c_ref[N];

TEST(switches_from_mir_to_c_with_identical_results) {
  SKIP_IF(!have_tiers(), "needs both MIR and a C compiler");
  static sigmoid_t s;
  CHECK(sigmoid_new(&s, 0));
  CHECK(reference(UJ_ENGINE_MIR, &s, mir_ref));
  CHECK(reference(UJ_ENGINE_C, &s, c_ref));
  char dir[64];
  make_dir(dir, sizeof dir, "cache");
  uj_ctx_t* ctx = ctx_on(UJ_ENGINE_AUTO, dir);
  CHECK(ctx != NULL);
  uj_run_info_t before = last_run(ctx, &s);
  /* the reference's context ran it, on C; this one has not: last runs are
   * per context */
  CHECK(before.engine == UJ_ENGINE_AUTO && before.tier == UJ_TIER_NONE);
  CHECK(sigmoid_run(ctx, &s, s.y) == UJ_OK);
  uj_run_info_t first = last_run(ctx, &s);
  /* the compile was queued by this call and cannot be both done and seen
   * by it: the first call ran on MIR */
  CHECK(first.engine == UJ_ENGINE_MIR);
  CHECK(first.tier == UJ_TIER_COMPILING || first.tier == UJ_TIER_READY);
  CHECK(first.mir_ms >= 0);
  CHECK(memcmp(s.y, mir_ref, sizeof s.y) == 0);
  run_until(ctx, &s, UJ_TIER_READY, mir_ref, c_ref);
  /* the call after which the query said READY may have been served by MIR
   * just before the compile ended; the first call after that runs C */
  CHECK(sigmoid_run(ctx, &s, s.y) == UJ_OK);
  uj_run_info_t done = last_run(ctx, &s);
  CHECK(done.engine == UJ_ENGINE_C);
  CHECK(done.c_ms >= 0 && !done.c_from_disk && done.c_error[0] == 0);
  CHECK(sigmoid_run(ctx, &s, s.y) == UJ_OK); /* stays on C */
  CHECK(last_run(ctx, &s).engine == UJ_ENGINE_C);
  CHECK(memcmp(s.y, c_ref, sizeof s.y) == 0);
  uj_ctx_free(ctx);

  /* a second context on the same cache: C at its first call, from disk */
  ctx = ctx_on(UJ_ENGINE_AUTO, dir);
  CHECK(sigmoid_run(ctx, &s, s.y) == UJ_OK);
  uj_run_info_t second = last_run(ctx, &s);
  CHECK(second.engine == UJ_ENGINE_C && second.tier == UJ_TIER_READY && second.c_from_disk);
  CHECK(memcmp(s.y, c_ref, sizeof s.y) == 0);
  uj_ctx_free(ctx);

  /* a second process: this binary with --child, which runs once and exits
   * 0 only when its first call ran on C with the same output */
  pid_t pid = fork();
  if (pid == 0) {
    char* args[] = {"test_tier", "--child", dir, NULL};
    execv("/proc/self/exe", args);
    _exit(127);
  }
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  uj_program_free(s.p);
  remove_tree(dir);
}

/* The child process: exit 0 when the first call of a new context on the
 * cache directory argv[2] runs on C (from disk) and gives C's output. */
static int child_main(char** argv) {
  static sigmoid_t s;
  if (!sigmoid_new(&s, 0) || !reference(UJ_ENGINE_C, &s, c_ref)) return 3;
  uj_ctx_t* ctx = ctx_on(UJ_ENGINE_AUTO, argv[2]);
  if (!ctx || sigmoid_run(ctx, &s, s.y) != UJ_OK) return 4;
  uj_run_info_t info;
  if (uj_program_last_run(ctx, s.p, UJ_FORWARD, &info) != UJ_OK) return 5;
  int ok = info.engine == UJ_ENGINE_C && info.c_from_disk && memcmp(s.y, c_ref, sizeof s.y) == 0;
  if (!ok) fprintf(stderr, "child: engine %s, from disk %d\n", uj_engine_name(info.engine), info.c_from_disk);
  uj_ctx_free(ctx);
  uj_program_free(s.p);
  return ok ? 0 : 1;
}

TEST(policy_counts_calls_and_turns_off) {
  SKIP_IF(!have_tiers(), "needs both MIR and a C compiler");
  uj_ctx_t* ctx = ctx_on(UJ_ENGINE_AUTO, NULL);
  CHECK(uj_ctx_set_tier(ctx, -1) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "uj_ctx_set_tier") != NULL);
  CHECK(uj_ctx_set_tier(ctx, 1000000001) == UJ_ERR_INVALID);
  CHECK(uj_ctx_set_tier(NULL, 1) == UJ_ERR_INVALID);
  CHECK(uj_ctx_set_tier(ctx, 3) == UJ_OK);
  static sigmoid_t s;
  CHECK(sigmoid_new(&s, 1));
  for (int call = 1; call <= 2; call++) {
    CHECK(sigmoid_run(ctx, &s, s.y) == UJ_OK);
    uj_run_info_t info = last_run(ctx, &s);
    CHECK(info.engine == UJ_ENGINE_MIR && info.tier == UJ_TIER_WAITING && info.c_ms < 0);
  }
  CHECK(sigmoid_run(ctx, &s, s.y) == UJ_OK);
  uj_run_info_t third = last_run(ctx, &s);
  CHECK(third.engine == UJ_ENGINE_MIR && (third.tier == UJ_TIER_COMPILING || third.tier == UJ_TIER_READY));
  uj_ctx_free(ctx);

  ctx = ctx_on(UJ_ENGINE_AUTO, NULL);
  CHECK(uj_ctx_set_tier(ctx, 0) == UJ_OK);
  CHECK(sigmoid_run(ctx, &s, s.y) == UJ_OK);
  uj_run_info_t off = last_run(ctx, &s);
  CHECK(off.engine == UJ_ENGINE_MIR && off.tier == UJ_TIER_NONE);
  uj_ctx_free(ctx);
  uj_program_free(s.p);

  /* the environment's default, and a bad value refused by the calls that
   * use it until the setter fixes it */
  setenv("UOPJIT_TIER", "often", 1);
  ctx = ctx_on(UJ_ENGINE_AUTO, NULL);
  unsetenv("UOPJIT_TIER");
  CHECK(sigmoid_new(&s, 1));
  CHECK(sigmoid_run(ctx, &s, s.y) == UJ_ERR_INVALID);
  CHECK(strstr(uj_last_error(), "UOPJIT_TIER=\"often\"") != NULL);
  CHECK(uj_ctx_set_tier(ctx, 1) == UJ_OK);
  CHECK(sigmoid_run(ctx, &s, s.y) == UJ_OK);
  uj_ctx_free(ctx);
  uj_program_free(s.p);
}

TEST(failed_compile_leaves_mir_serving_and_is_reported) {
  SKIP_IF(!have_tiers(), "needs both MIR and a C compiler");
  char dir[64], cc[128];
  make_dir(dir, sizeof dir, "cc");
  snprintf(cc, sizeof cc, "%s/broken-cc", dir);
  FILE* fp = fopen(cc, "w");
  CHECK(fp != NULL);
  if (!fp) return;
  fputs("#!/bin/sh\n[ \"$1\" = --version ] && { echo broken-cc 1.0; exit 0; }\n"
        "echo 'broken-cc: cannot compile anything' >&2\nexit 1\n",
        fp);
  fclose(fp);
  chmod(cc, 0700);
  static sigmoid_t s;
  CHECK(sigmoid_new(&s, 2));
  CHECK(reference(UJ_ENGINE_MIR, &s, mir_ref));
  setenv("UOPJIT_CC", cc, 1); /* read when the context probes and compiles */
  uj_ctx_t* ctx = ctx_on(UJ_ENGINE_AUTO, NULL);
  run_until(ctx, &s, UJ_TIER_FAILED, mir_ref, mir_ref);
  uj_run_info_t info = last_run(ctx, &s);
  CHECK(info.engine == UJ_ENGINE_MIR && info.tier == UJ_TIER_FAILED);
  CHECK(strstr(info.c_error, "cannot compile anything") != NULL);
  CHECK(sigmoid_run(ctx, &s, s.y) == UJ_OK); /* MIR for good */
  CHECK(last_run(ctx, &s).engine == UJ_ENGINE_MIR);
  CHECK(memcmp(s.y, mir_ref, sizeof s.y) == 0);
  uj_ctx_free(ctx);
  unsetenv("UOPJIT_CC");
  uj_program_free(s.p);
  remove_tree(dir);
}

/* A shell script at path with this body, made executable. */
static int write_script(const char* path, const char* body) {
  FILE* fp = fopen(path, "w");
  if (!fp) return 0;
  fputs(body, fp);
  fclose(fp);
  return chmod(path, 0700) == 0;
}

TEST(failed_probe_leaves_mir_serving_and_is_reported) {
  SKIP_IF(!have_tiers(), "needs both MIR and a C compiler");
  char dir[64], cache[64], cc[128];
  make_dir(dir, sizeof dir, "cc");
  make_dir(cache, sizeof cache, "cache");
  snprintf(cc, sizeof cc, "%s/no-cc", dir);
  CHECK(write_script(cc, "#!/bin/sh\necho 'no-cc: not a compiler' >&2\nexit 1\n"));
  static sigmoid_t s, later;
  CHECK(sigmoid_new(&s, 3));
  CHECK(sigmoid_new(&later, 4));
  static float later_ref[N];
  CHECK(reference(UJ_ENGINE_MIR, &s, mir_ref));
  CHECK(reference(UJ_ENGINE_MIR, &later, later_ref));
  setenv("UOPJIT_CC", cc, 1);
  uj_ctx_t* ctx = ctx_on(UJ_ENGINE_AUTO, cache); /* a fresh cache: no remembered answer */
  run_until(ctx, &s, UJ_TIER_FAILED, mir_ref, mir_ref);
  uj_run_info_t info = last_run(ctx, &s);
  CHECK(info.engine == UJ_ENGINE_MIR && info.tier == UJ_TIER_FAILED);
  CHECK(strstr(info.c_error, "is not a working C compiler") != NULL);
  CHECK(strstr(info.c_error, "no-cc") != NULL);
  CHECK(sigmoid_run(ctx, &s, s.y) == UJ_OK); /* MIR for good, still reported */
  info = last_run(ctx, &s);
  CHECK(info.engine == UJ_ENGINE_MIR && info.tier == UJ_TIER_FAILED);
  CHECK(memcmp(s.y, mir_ref, sizeof s.y) == 0);
  /* the compiler is known missing now: a new kernel fails at once */
  CHECK(sigmoid_run(ctx, &later, later.y) == UJ_OK);
  info = last_run(ctx, &later);
  CHECK(info.engine == UJ_ENGINE_MIR && info.tier == UJ_TIER_FAILED);
  CHECK(strstr(info.c_error, "is not a working C compiler") != NULL);
  CHECK(memcmp(later.y, later_ref, sizeof later.y) == 0);
  uj_ctx_free(ctx);
  unsetenv("UOPJIT_CC");
  uj_program_free(s.p);
  uj_program_free(later.p);
  remove_tree(dir);
  remove_tree(cache);
}

/* Lines in a file (0 when it does not exist). */
static int file_lines(const char* path) {
  FILE* fp = fopen(path, "r");
  int n = 0;
  for (int c; fp && (c = fgetc(fp)) != EOF;) n += c == '\n';
  if (fp) fclose(fp);
  return n;
}

/* The compiler's --version answer is kept in the disk cache: a new context
 * (or process) on the same cache does not run the compiler to probe it, so
 * a tiered first call does not wait for that, until the compiler's file
 * changes. */
TEST(compiler_probe_is_remembered_until_the_compiler_changes) {
  uj_ctx_t* ctx = uj_ctx_new();
  int have_c = ctx && uj_engine_available(ctx, UJ_ENGINE_C);
  uj_ctx_free(ctx);
  SKIP_IF(!have_c, "needs a C compiler");
  char dir[64], cache[64], cc[128], calls[128];
  make_dir(dir, sizeof dir, "cc");
  make_dir(cache, sizeof cache, "probe");
  snprintf(cc, sizeof cc, "%s/counting-cc", dir);
  snprintf(calls, sizeof calls, "%s/calls", dir);
  FILE* fp = fopen(cc, "w");
  CHECK(fp != NULL);
  if (!fp) return;
  fprintf(fp, "#!/bin/sh\necho \"$1\" >> '%s'\nexec cc \"$@\"\n", calls);
  fclose(fp);
  chmod(cc, 0700);
  setenv("UOPJIT_CC", cc, 1);
  for (int i = 0; i < 3; i++) {
    ctx = ctx_on(UJ_ENGINE_AUTO, cache);
    CHECK(ctx && uj_engine_available(ctx, UJ_ENGINE_C));
    uj_ctx_free(ctx);
  }
  CHECK(file_lines(calls) == 1); /* asked once, remembered twice */
  struct timespec times[2] = {{0, UTIME_OMIT}, {1000000000, 0}}; /* a new modification time: a changed compiler */
  CHECK(utimensat(AT_FDCWD, cc, times, 0) == 0);
  ctx = ctx_on(UJ_ENGINE_AUTO, cache);
  CHECK(ctx && uj_engine_available(ctx, UJ_ENGINE_C));
  uj_ctx_free(ctx);
  CHECK(file_lines(calls) == 2);
  unsetenv("UOPJIT_CC");
  remove_tree(dir);
  remove_tree(cache);
}

/* On a fresh cache the compiler has no remembered answer: the first call
 * serves MIR without running the probe, which the background worker runs
 * before its compile. The script's --version waits (30 s at most) for a
 * gate file that the test creates only after calls have returned. */
TEST(first_call_does_not_wait_for_the_compiler_probe) {
  SKIP_IF(!have_tiers(), "needs both MIR and a C compiler");
  char dir[64], cache[64], cc[128], gate[128], late[128], body[1024];
  make_dir(dir, sizeof dir, "cc");
  make_dir(cache, sizeof cache, "cache");
  snprintf(cc, sizeof cc, "%s/gated-cc", dir);
  snprintf(gate, sizeof gate, "%s/gate", dir);
  snprintf(late, sizeof late, "%s/late", dir);
  snprintf(body, sizeof body,
           "#!/bin/sh\nif [ \"$1\" = --version ]; then\n  i=0\n"
           "  while [ ! -e '%s' ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\n"
           "  [ -e '%s' ] || echo 'answered before the gate opened' >> '%s'\nfi\nexec cc \"$@\"\n",
           gate, gate, late);
  CHECK(write_script(cc, body));
  static sigmoid_t s;
  CHECK(sigmoid_new(&s, 5));
  CHECK(reference(UJ_ENGINE_MIR, &s, mir_ref));
  CHECK(reference(UJ_ENGINE_C, &s, c_ref));
  setenv("UOPJIT_CC", cc, 1);
  uj_ctx_t* ctx = ctx_on(UJ_ENGINE_AUTO, cache);
  for (int call = 0; call < 3; call++) {
    CHECK(sigmoid_run(ctx, &s, s.y) == UJ_OK);
    uj_run_info_t info = last_run(ctx, &s);
    CHECK(info.engine == UJ_ENGINE_MIR && info.tier == UJ_TIER_COMPILING);
    CHECK(memcmp(s.y, mir_ref, sizeof s.y) == 0);
  }
  FILE* fp = fopen(gate, "w");
  CHECK(fp != NULL);
  if (fp) fclose(fp);
  run_until(ctx, &s, UJ_TIER_READY, mir_ref, c_ref);
  CHECK(sigmoid_run(ctx, &s, s.y) == UJ_OK);
  CHECK(last_run(ctx, &s).engine == UJ_ENGINE_C);
  CHECK(memcmp(s.y, c_ref, sizeof s.y) == 0);
  CHECK(file_lines(late) == 0);
  uj_ctx_free(ctx);
  unsetenv("UOPJIT_CC");
  uj_program_free(s.p);
  remove_tree(dir);
  remove_tree(cache);
}

/* Entries in dir whose names contain `part`. */
static int count_named(const char* dir, const char* part) {
  DIR* d = opendir(dir);
  int n = 0;
  for (struct dirent* e; d && (e = readdir(d));) n += strstr(e->d_name, part) != NULL;
  if (d) closedir(d);
  return n;
}

TEST(freeing_a_context_with_compiles_in_flight_is_clean) {
  SKIP_IF(!have_tiers(), "needs both MIR and a C compiler");
  char cache[64], tmp[64];
  make_dir(cache, sizeof cache, "cache");
  make_dir(tmp, sizeof tmp, "tmp");
  setenv("TMPDIR", tmp, 1); /* where the compiles' directories go */
  enum { KERNELS = 6 };
  static sigmoid_t s[KERNELS];
  uj_ctx_t* ctx = ctx_on(UJ_ENGINE_AUTO, cache);
  for (int k = 0; k < KERNELS; k++) {
    CHECK(sigmoid_new(&s[k], 10 + k));
    CHECK(sigmoid_run(ctx, &s[k], s[k].y) == UJ_OK);
  }
  uj_ctx_free(ctx); /* some compiles queued, some running */
  unsetenv("TMPDIR");
  errno = 0;
  CHECK(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD); /* no child at all, so no zombie */
  CHECK(count_named(tmp, "uopjit-") == 0);
  CHECK(count_named(cache, ".tmp-") == 0);
  /* every payload with its meta: a complete entry or none */
  int metas = count_named(cache, ".so.meta"), payloads = count_named(cache, ".so") - metas;
  CHECK(metas == payloads);
  for (int k = 0; k < KERNELS; k++) uj_program_free(s[k].p);
  remove_tree(cache);
  remove_tree(tmp);
}

/* A successful tiered call leaves no error message behind: the disk
 * cache's misses (no remembered compiler answer, no C kernel yet) are no
 * failures. A sentinel error from a refused setting may stay or go, but
 * nothing of the cache's may replace it. */
TEST(successful_tiered_calls_leave_no_error) {
  SKIP_IF(!have_tiers(), "needs both MIR and a C compiler");
  char cache[64];
  make_dir(cache, sizeof cache, "error");
  static sigmoid_t s;
  CHECK(sigmoid_new(&s, 31));
  uj_ctx_t* ctx = ctx_on(UJ_ENGINE_AUTO, cache);
  CHECK(ctx != NULL);
  CHECK(ctx && uj_ctx_set_mir_level(ctx, 99) == UJ_ERR_INVALID); /* the sentinel */
  CHECK(ctx && sigmoid_run(ctx, &s, s.y) == UJ_OK);
  CHECK(strstr(uj_last_error(), "cache") == NULL);
  if (strstr(uj_last_error(), "cache")) printf("  left behind: %s\n", uj_last_error());
  uj_ctx_free(ctx);
  uj_program_free(s.p);
  remove_tree(cache);
}

/* Changing the cache directory while background compiles run: the workers
 * pause for it (a compile reads the directory's name; ThreadSanitizer saw
 * that read race the setter's free before). */
TEST(cache_dir_changes_while_compiles_run) {
  SKIP_IF(!have_tiers(), "needs both MIR and a C compiler");
  char a[64], b[64];
  make_dir(a, sizeof a, "dir-a");
  make_dir(b, sizeof b, "dir-b");
  uj_ctx_t* ctx = ctx_on(UJ_ENGINE_AUTO, a);
  CHECK(ctx != NULL);
  static sigmoid_t s;
  for (int i = 0; ctx && i < 4; i++) {
    CHECK(sigmoid_new(&s, 40 + i));
    CHECK(sigmoid_run(ctx, &s, s.y) == UJ_OK); /* queues the C compile */
    CHECK(uj_ctx_set_cache_dir(ctx, i % 2 ? a : b) == UJ_OK);
    CHECK(sigmoid_run(ctx, &s, s.y) == UJ_OK);
    uj_program_free(s.p);
  }
  uj_ctx_free(ctx);
  remove_tree(a);
  remove_tree(b);
}

/* No disk cache and a memory cache that keeps no C kernel: a ready kernel
 * is gone by the next call and cannot be found again; after a few tries
 * the kernel is given up on (MIR serves, the query says why) rather than
 * compiled on every other call for good. */
TEST(no_cache_to_keep_c_gives_up_on_c) {
  SKIP_IF(!have_tiers(), "needs both MIR and a C compiler");
  static sigmoid_t s;
  static float mir_ref[N], c_ref[N];
  CHECK(sigmoid_new(&s, 50));
  CHECK(reference(UJ_ENGINE_MIR, &s, mir_ref));
  CHECK(reference(UJ_ENGINE_C, &s, c_ref));
  uj_ctx_t* ctx = ctx_on(UJ_ENGINE_AUTO, NULL);
  CHECK(ctx && uj_ctx_set_memory_cache_limit(ctx, 0) == UJ_OK);
  if (ctx) run_until(ctx, &s, UJ_TIER_FAILED, mir_ref, c_ref);
  uj_run_info_t info = last_run(ctx, &s);
  CHECK(info.tier == UJ_TIER_FAILED && strstr(info.c_error, "memory cache") != NULL);
  uj_ctx_free(ctx);
  uj_program_free(s.p);
}

int main(int argc, char** argv) {
  if (argc >= 3 && !strcmp(argv[1], "--child")) return child_main(argv);
  return harness_main(argc, argv);
}
