/* bench/suite.c: `uopjit bench`, the benchmark suite (make bench; make run
 * runs --quick). It measures, in one run on one machine state: STREAM copy
 * and triad on each thread count (stream.c), labelled with the bytes they
 * count; compile latency per JIT engine (cold, disk-cache hit, memory-cache
 * dispatch, time to a first result; compile.c and suite_measure.c); each
 * workload at each size on every runner, checked before timed, with its
 * traffic-matched copy kernel (the 1-D programs, the row programs, the
 * AdamW step over a model's tensors in suite_adamw.c, the 3x3
 * convolutions' backends in conv.c, the peers through bench/cpu_peers.py);
 * then it writes the report directory (suite_write.c). The kernel cache is
 * a private directory for the run, removed afterwards; the AOT kernels are
 * built at the start (aot.c). A progress line per workload goes to stderr,
 * overwritten in place on a terminal. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "suite.h"

static const program_spec_t sigmoid = {"sigmoid", 8, 1e-5, 0, &unfused_sigmoid, &hand_fused_sigmoid};
static const program_spec_t gelu = {"gelu", 8, 1e-5, 0, NULL, &hand_fused_gelu};
static const program_spec_t gelu_erf = {"gelu_erf", 8, 1e-5, 0, NULL, &hand_fused_gelu_erf};
static const program_spec_t adam = {"adam", 28, 1e-5, 0, &unfused_adam, &hand_fused_adam};
/* the interpreter adds in sequence: its f32 sum drifts with n (bench.c) */
static const program_spec_t sumsq = {"sumsq", 4, 1e-5, 1e-9, &unfused_sumsq, &hand_fused_sumsq};
static const program_spec_t* const one_d[] = {&sigmoid, &gelu, &gelu_erf, &adam, &sumsq};
static const char* const row_names[] = {"softmax", "layernorm"};
enum { ROW_COLS = 1024 };

static const char* const engine_names[SR_COUNT] = {"mir", "c", "auto", "cuda", "aot", "hand", "unfused", "peers"};

void suite_note(suite_t* s, const char* format, ...) {
  size_t used = strlen(s->notes);
  if (used + 3 >= sizeof s->notes) return;
  if (used) used += (size_t)snprintf(s->notes + used, sizeof s->notes - used, "; ");
  va_list args;
  va_start(args, format);
  vsnprintf(s->notes + used, sizeof s->notes - used, format, args);
  va_end(args);
}

suite_row_t* suite_add_row(suite_t* s, const char* workload, const char* runner, const char* kind, int64_t elements,
                           int threads) {
  if (s->nrows == s->rows_cap) {
    int cap = s->rows_cap ? 2 * s->rows_cap : 256;
    suite_row_t* grown = realloc(s->rows, (size_t)cap * sizeof *grown);
    if (!grown) return NULL;
    s->rows = grown, s->rows_cap = cap;
  }
  suite_row_t* row = &s->rows[s->nrows++];
  memset(row, 0, sizeof *row);
  snprintf(row->workload, sizeof row->workload, "%s", workload);
  snprintf(row->runner, sizeof row->runner, "%s", runner);
  snprintf(row->kind, sizeof row->kind, "%s", kind);
  snprintf(row->status, sizeof row->status, "failed");
  row->elements = elements;
  row->threads = threads;
  row->bytes = row->flops = NAN;
  return row;
}

/* --filter: comma-separated substrings of workload names; empty: all. */
int suite_wants(const suite_t* s, const char* workload) {
  if (!s->filter[0]) return 1;
  char copy[sizeof s->filter];
  snprintf(copy, sizeof copy, "%s", s->filter);
  char* rest = copy;
  for (char* word; (word = strsep(&rest, ",")) != NULL;)
    if (*word && strstr(workload, word)) return 1;
  return 0;
}

static int show_progress;

static void progress(const char* format, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char* format, ...) {
  va_list args;
  va_start(args, format);
  fprintf(stderr, show_progress ? "\r\033[Kbench: " : "bench: ");
  vfprintf(stderr, format, args);
  if (!show_progress) fputc('\n', stderr);
  va_end(args);
}

/* ---- the machine ------------------------------------------------------------------------ */

static void first_line_of(const char* command, char* out, size_t size) {
  FILE* f = popen(command, "r");
  if (f && fgets(out, (int)size, f)) out[strcspn(out, "\n")] = '\0';
  if (f) pclose(f);
}

static void read_machine(suite_t* s) {
  bench_cpu_model(s->cpu_model, sizeof s->cpu_model);
  s->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE), l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  snprintf(s->cache_sizes, sizeof s->cache_sizes, "L1d %ld KiB, L2 %ld KiB, L3 %ld KiB", l1 / 1024, l2 / 1024,
           l3 / 1024);
  const char* cc = getenv("CC");
  char command[256];
  snprintf(s->compiler, sizeof s->compiler, "unknown");
  if (!cc || !*cc || !strchr(cc, '\'')) {
    snprintf(command, sizeof command, "'%s' --version 2>/dev/null", cc && *cc ? cc : "cc");
    first_line_of(command, s->compiler, sizeof s->compiler);
  }
  /* MIR's install records no commit; the Makefile names the library it
   * linked (BENCH_MIR_LIBRARY) */
#ifdef BENCH_MIR_LIBRARY
  snprintf(s->mir, sizeof s->mir, "available, %s (its install records no commit)", BENCH_MIR_LIBRARY);
#else
  snprintf(s->mir, sizeof s->mir, "available");
#endif
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx || !uj_engine_available(ctx, UJ_ENGINE_MIR)) snprintf(s->mir, sizeof s->mir, "not available");
  if (ctx && uj_engine_available(ctx, UJ_ENGINE_CUDA)) snprintf(s->cuda, sizeof s->cuda, "available");
  else snprintf(s->cuda, sizeof s->cuda, "no device: %s", uj_last_error());
  uj_ctx_free(ctx);
  if (bench_load_average(s->load_average, sizeof s->load_average) == 0)
    snprintf(s->load_average, sizeof s->load_average, "?");
  time_t now = time(NULL);
  strftime(s->started, sizeof s->started, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
}

/* ---- options ---------------------------------------------------------------------------- */

static int usage_error(const char* what, const char* value) {
  fprintf(stderr, "uopjit bench: %s \"%s\"; `uopjit bench --help` lists the options\n", what, value ? value : "");
  return 2;
}

/* "1,2,4" into up to max integers in [low, high]; the count, or -1. */
static int parse_list(const char* text, int* out, int max, int low, int high) {
  int count = 0;
  char copy[256];
  snprintf(copy, sizeof copy, "%s", text);
  char* rest = copy;
  for (char* word; (word = strsep(&rest, ",")) != NULL;) {
    if (strncmp(word, "2^", 2) == 0) word += 2;
    char* end;
    long value = strtol(word, &end, 10);
    if (end == word || *end || value < low || value > high || count == max) return -1;
    out[count++] = (int)value;
  }
  return count;
}

static int parse_options(suite_t* s, int argc, char** argv) {
  int explicit_sizes = 0, explicit_threads = 0;
  for (int k = 0; k < SR_COUNT; k++) s->engines[k] = 1;
  s->plots = 1;
  for (int i = 1; i < argc; i++) {
    const char* arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(arg, "--quick")) {
      s->quick = 1;
    } else if (!strcmp(arg, "--no-plots")) {
      s->plots = 0;
    } else if (!strcmp(arg, "--out") || !strcmp(arg, "--filter") || !strcmp(arg, "--threads") ||
               !strcmp(arg, "--sizes") || !strcmp(arg, "--engines")) {
      if (!value) return usage_error("missing the value of", arg);
      i++;
      if (!strcmp(arg, "--out")) {
        s->out_dir = value;
      } else if (!strcmp(arg, "--filter")) {
        snprintf(s->filter, sizeof s->filter, "%s", value);
      } else if (!strcmp(arg, "--threads")) {
        if ((s->nthreads = parse_list(value, s->threads, SUITE_MAX_THREADS, 1, 64)) < 1)
          return usage_error("--threads wants up to 4 counts from 1 to 64, e.g. 1,2, got", value);
        explicit_threads = 1;
      } else if (!strcmp(arg, "--sizes")) {
        if ((s->nsizes = parse_list(value, s->sizes_log2, SUITE_MAX_SIZES, 4, 28)) < 1)
          return usage_error("--sizes wants up to 16 powers of two as exponents from 4 to 28 (10,16 or 2^10,2^16), got",
                             value);
        explicit_sizes = 1;
      } else {
        for (int k = 0; k < SR_COUNT; k++) s->engines[k] = 0;
        char copy[256];
        snprintf(copy, sizeof copy, "%s", value);
        char* rest = copy;
        for (char* word; (word = strsep(&rest, ",")) != NULL;) {
          int found = 0;
          for (int k = 0; k < SR_COUNT; k++)
            if (!strcmp(word, engine_names[k])) s->engines[k] = found = 1;
          if (!found)
            return usage_error("--engines wants a list of mir, c, auto, cuda, aot, hand, unfused, peers; got", word);
        }
      }
    } else {
      return usage_error("unknown option", arg);
    }
  }
  if (!s->out_dir) s->out_dir = s->quick ? "bench-report-quick" : "bench-report";
  if (!explicit_threads) {
    s->threads[0] = 1;
    s->nthreads = 1;
    if (s->cores > 1) s->threads[s->nthreads++] = s->cores > 64 ? 64 : s->cores;
  }
  if (!explicit_sizes) {
    static const int quick_sizes[] = {10, 16, 20}, full_sizes[] = {10, 12, 14, 16, 18, 20, 22, 24, 26};
    const int* sizes = s->quick ? quick_sizes : full_sizes;
    s->nsizes = s->quick ? 3 : 9;
    memcpy(s->sizes_log2, sizes, (size_t)s->nsizes * sizeof(int));
  }
  s->samples = s->quick ? 3 : 5;
  /* A row and its copy kernel take the fastest of their batches over these
   * rounds (bench_time_alternating): more rounds than samples, so that
   * under load each side likely has a batch no other process held back;
   * quick's 9 rounds of 3 ms batches keep a row under 0.1 s. */
  s->alternation_rounds = s->quick ? 9 : 7;
  s->min_sample_ns = s->quick ? 3e6 : 10e6;
  return 0;
}

/* ---- the run ------------------------------------------------------------------------------ */

static void join_sizes(const suite_t* s, char* out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (int k = 0; k < s->nsizes && used < size; k++)
    used += (size_t)snprintf(out + used, size - used, "%s%lld", k ? "," : "", 1LL << s->sizes_log2[k]);
}

static void join_workloads(const suite_t* s, char* out, size_t size) {
  static const char* const peer_workloads[] = {"sigmoid", "gelu", "adam", "sumsq", "softmax", "layernorm"};
  size_t used = 0;
  out[0] = '\0';
  for (size_t k = 0; k < sizeof peer_workloads / sizeof peer_workloads[0]; k++)
    if (suite_wants(s, peer_workloads[k]))
      used += (size_t)snprintf(out + used, size - used, "%s%s", used ? "," : "", peer_workloads[k]);
}

static int run_suite(suite_t* s, const char* cache_root) {
  int failed = 0;
  s->stream_length = (int64_t)1 << (s->quick ? 23 : 25);
  for (int t = 0; t < s->nthreads; t++) {
    progress("STREAM on %d thread(s)", s->threads[t]);
    s->stream_ok[t] = stream_measure(s->threads[t], s->stream_length, s->quick ? 3 : 10, &s->stream[t]) == 0;
  }
  int64_t first_n = (int64_t)1 << s->sizes_log2[s->nsizes - 1];
  for (size_t p = 0; p < sizeof one_d / sizeof one_d[0]; p++) {
    if (!suite_wants(s, one_d[p]->name)) continue;
    if (!s->quick || p == 0 || p == 2) {
      progress("%s: compile latency", one_d[p]->name);
      suite_measure_compile(s, one_d[p], first_n, cache_root);
    }
    for (int k = 0; k < s->nsizes; k++) {
      progress("%s: 2^%d", one_d[p]->name, s->sizes_log2[k]);
      failed |= suite_measure_1d(s, one_d[p], (int64_t)1 << s->sizes_log2[k]);
    }
  }
  for (size_t p = 0; p < sizeof row_names / sizeof row_names[0]; p++) {
    if (!suite_wants(s, row_names[p])) continue;
    for (int k = 0; k < s->nsizes; k++) {
      progress("%s: 2^%d", row_names[p], s->sizes_log2[k]);
      failed |= suite_measure_rows(s, row_names[p], (int64_t)1 << s->sizes_log2[k], ROW_COLS);
    }
  }
  if (suite_wants(s, "adamw")) {
    progress("adamw: one step over a model's tensors");
    failed |= suite_measure_adamw(s);
  }
  if (suite_wants(s, "conv3x3")) {
    progress("conv3x3: the convolution backends");
    failed |= suite_measure_conv(s);
  }
  char workloads[128], sizes[512], threads[64] = "";
  join_workloads(s, workloads, sizeof workloads);
  join_sizes(s, sizes, sizeof sizes);
  for (int t = 0; t < s->nthreads; t++)
    snprintf(threads + strlen(threads), sizeof threads - strlen(threads), "%s%d", t ? "," : "", s->threads[t]);
  if (s->engines[SR_PEERS] && workloads[0]) {
    progress("peers (bench/cpu_peers.py)");
    static peer_results_t peers;
    peers_measure(workloads, sizes, 0, ROW_COLS, s->samples, threads, &peers);
    suite_note(s, "peers: %s", peers.note);
    suite_add_peers(s, &peers);
  }
  if (s->engines[SR_CUDA])
    suite_note(s, "cuda: %s", strncmp(s->cuda, "available", 9) == 0
                                  ? "a device is present: its rows come from `uopjit bench --gpu` (bench/gpu.c)"
                                  : s->cuda);
  return failed;
}

int bench_suite_main(int argc, char** argv) {
  static suite_t s;
  memset(&s, 0, sizeof s);
  read_machine(&s);
  int status = parse_options(&s, argc, argv);
  if (status) return status;
  show_progress = isatty(2);
  double start = bench_now_ns();
  const char* tmp = getenv("TMPDIR");
  char* cache_root = bench_make_dir(tmp && *tmp ? tmp : "/tmp", "uopjit-bench");
  char* run_cache = cache_root ? bench_make_dir(cache_root, "run") : NULL;
  char* aot_dir = run_cache ? bench_make_dir(cache_root, "aot") : NULL;
  if (!aot_dir) {
    fprintf(stderr, "uopjit bench: cannot make a private directory under %s\n", tmp && *tmp ? tmp : "/tmp");
    return 1;
  }
  setenv("UOPJIT_CACHE_DIR", run_cache, 1);
  unsetenv("UOPJIT_ENGINE");
  unsetenv("UOPJIT_CACHE");
  if (s.engines[SR_AOT]) {
    progress("AOT kernels: `uopjit aot`, then the system compiler at -O3");
    static const char* const names[] = {"sigmoid", "gelu", "gelu_erf", "adam", "sumsq", "softmax", "layernorm", "adamw"};
    char note[1024] = "";
    aot_build(names, (int)(sizeof names / sizeof names[0]), aot_dir, note, sizeof note);
    if (note[0]) suite_note(&s, "%s", note);
  }
  status = run_suite(&s, cache_root);
  if (show_progress) fprintf(stderr, "\r\033[K");
  bench_remove_dir(aot_dir);
  bench_remove_dir(run_cache);
  bench_remove_dir(cache_root);
  free(aot_dir), free(run_cache), free(cache_root);
  s.seconds = (bench_now_ns() - start) / 1e9;
  if (suite_write(&s) != 0) status = 1;
  suite_print_summary(&s);
  free(s.rows);
  return status;
}
