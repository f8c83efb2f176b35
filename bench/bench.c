/* bench/bench.c: the text tables of the benchmark, `uopjit bench --short`,
 * `--rows`, `--tables`, `--tier`, `--conv`, `--gpu` (tools/cli_bench.c;
 * the report directory is bench/suite.c's; the options: usage()).
 *
 * In one run it measures, in this order: the peers (numpy, numexpr, torch:
 * peers.c runs bench/cpu_peers.py), their rows shown beside the engines' at
 * the largest size; STREAM copy and triad on 1 and 2 threads; for each
 * program its compile times on the JIT engines; then for each program and
 * size every engine's result, checked against the interpreter's before
 * anything is timed, and its throughput; the row programs (rows.c) follow
 * the 1-D ones. Everything is gathered first and printed at the end
 * (report.c), so the tables are one consistent picture of one run. The
 * kernel cache lives in a private directory under $TMPDIR (else /tmp) for
 * the length of the run and is removed afterwards, so the user's cache
 * neither helps nor is touched. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

static const program_spec_t sigmoid = {"sigmoid", 8, 1e-5, 0, &unfused_sigmoid, &hand_fused_sigmoid};
static const program_spec_t adam = {"adam", 28, 1e-5, 0, &unfused_adam, &hand_fused_adam};
/* An f32 sum of n terms depends on the order of its additions, by an error
 * that grows with n: the unfused baseline adds pairwise (accurate to about
 * 1e-7), the interpreter in sequence, which is off by about 1e-4 at 2^20
 * and 1e-2 at 2^24 on these inputs. A lost chunk of the sum still fails. */
static const program_spec_t sumsq = {"sumsq", 4, 1e-5, 1e-9, &unfused_sumsq, &hand_fused_sumsq};

static int show_progress;

/* A one-line status on a terminal's stderr, overwritten by the next. */
__attribute__((format(printf, 1, 2))) static void progress(const char* format, ...) {
  if (!show_progress) return;
  va_list args;
  va_start(args, format);
  fprintf(stderr, "\rbench: ");
  vfprintf(stderr, format, args);
  fprintf(stderr, "\033[K");
  va_end(args);
}

static throughput_row_t* add_row(bench_results_t* res, int program, int64_t n, runner_kind_t kind, int threads) {
  if (res->nrows == BENCH_MAX_ROWS) {
    fprintf(stderr, "bench: too many rows\n");
    exit(1);
  }
  throughput_row_t* row = &res->rows[res->nrows++];
  *row = (throughput_row_t){program, n, kind, threads, ROW_FAILED, 0, 0, NULL};
  return row;
}

/* Samples and minimum sample time for a runner at size n. */
static void sampling(const bench_results_t* res, runner_kind_t kind, int64_t n, int* samples, double* min_ns) {
  int large = n >= ((int64_t)1 << 20);
  *samples = large ? res->large_samples : res->small_samples;
  *min_ns = large ? 10e6 : 2e6;
  if (kind == RUNNER_INTERP && large) *samples = res->interp_large_samples, *min_ns = 0;
}

/* The peers' rows for this program and size, as measured by cpu_peers.py. */
static void add_peer_rows(bench_results_t* res, int program, int64_t n, const peer_results_t* peers) {
  const char* name = res->programs[program]->name;
  for (int k = peers_find(peers, name, n, 0); k >= 0; k = peers_find(peers, name, n, k + 1)) {
    const peer_row_t* peer = &peers->rows[k];
    throughput_row_t* row = add_row(res, program, n, RUNNER_PEER, peer->threads);
    row->peer = peer->peer;
    row->status = peer->checked_ok ? ROW_OK : ROW_MISMATCH;
    row->max_error = peer->max_error;
    row->ns_per_call = peer->ns_per_call;
  }
}

/* The interpreter's run is the reference; every other runner is checked
 * against it, then timed only if it passed. */
static void measure_size(bench_results_t* res, int program, const program_text_t* text, int64_t n,
                         const peer_results_t* peers) {
  workspace_t ws;
  if (workspace_new(text, n, &ws) != 0) {
    add_row(res, program, n, RUNNER_INTERP, 1);
    return;
  }
  static const struct {
    runner_kind_t kind;
    int threads;
  } plan[] = {{RUNNER_INTERP, 1}, {RUNNER_MIR, 1}, {RUNNER_MIR, 2}, {RUNNER_C, 1},
              {RUNNER_C, 2},      {RUNNER_AOT, 1}, {RUNNER_UNFUSED, 1}};
  int have_reference = 0;
  for (size_t k = 0; k < sizeof plan / sizeof plan[0]; k++) {
    throughput_row_t* row = add_row(res, program, n, plan[k].kind, plan[k].threads);
    progress("%s 2^%lld %s, %d thread(s)", text->spec->name, (long long)__builtin_ctzll((unsigned long long)n),
             runner_name(plan[k].kind), plan[k].threads);
    runner_t runner;
    int opened = runner_open(&runner, plan[k].kind, plan[k].threads, text);
    if (opened <= 0) {
      row->status = opened == 0 ? ROW_UNAVAILABLE : ROW_FAILED;
      continue;
    }
    workspace_reset(&ws);
    if (runner_run(&runner, &ws) != 0) {
      runner_close(&runner);
      continue;
    }
    if (plan[k].kind == RUNNER_INTERP) {
      workspace_keep_reference(&ws);
      have_reference = 1;
      row->status = ROW_REFERENCE;
    } else if (have_reference) {
      row->max_error = workspace_max_error(&ws);
      row->status = row->max_error <= workspace_tolerance(&ws) ? ROW_OK : ROW_MISMATCH;
    }
    if (row->status == ROW_OK || row->status == ROW_REFERENCE) {
      int samples;
      double min_ns;
      sampling(res, plan[k].kind, n, &samples, &min_ns);
      row->ns_per_call = runner_time_ns(&runner, &ws, samples, min_ns);
      if (row->ns_per_call < 0) row->status = ROW_FAILED;
    }
    runner_close(&runner);
  }
  workspace_free(&ws);
  add_peer_rows(res, program, n, peers);
}

/* Without an option: sizes 2^16 and 2^24, 7 compile repetitions, 7+
 * samples; --short: sizes 2^16 and 2^20, fewer repetitions. */
static void usage(FILE* f) {
  fprintf(f,
          "usage: uopjit bench --tables | --short | --rows | --tier | --conv | --gpu\n"
          "  Times the programs in %s/*.uj on the interpreter, MIR and C JIT engines,\n"
          "  their AOT C and an unfused or hand-written baseline, with compile times and\n"
          "  STREAM bandwidth, and numpy, numexpr and torch through cpu_peers.py when a\n"
          "  python3 imports numpy (UOPJIT_BENCH_PYTHON chooses the interpreter).\n"
          "  --short  sizes 2^16 and 2^20, a quarter of the rows, fewer repetitions\n"
          "  --rows   only softmax and layernorm over the rows of a matrix, with their peers\n"
          "  --groups [--short]  instead, an AdamW step over many tensors (groups.c)\n"
          "  --tier   instead, the tiered auto engine beside MIR and C: first call, per call\n"
          "           after 0.5 s of calls, a second process's first call (tier.c)\n"
          "  --conv [--threads N]  instead, the convolution backends on network layers (conv.c)\n"
          "  --gpu [--quick]  instead, the GPU section in full (gpu.c, gpu_rows.c; --quick: 2^24 only)\n"
          "           and the GPU convolutions\n",
          BENCH_SOURCE_DIR);
}

int bench_main(int argc, char** argv) {
  static bench_results_t res; /* large: static rather than on the stack */
  static peer_results_t peers;
  static rows_results_t rows;
  int rows_only = 0;
  if (argc > 1 && strcmp(argv[1], "--conv") == 0) return bench_conv_main(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "--groups") == 0) return bench_groups(argc > 2 && !strcmp(argv[2], "--short"));
  if (argc > 1 && strncmp(argv[1], "--tier", 6) == 0) return bench_tier_main(argc, argv, &sigmoid);
  if ((argc == 2 || (argc == 3 && strcmp(argv[2], "--quick") == 0)) && strcmp(argv[1], "--gpu") == 0) {
    const program_spec_t* programs[] = {&sigmoid, &adam, &sumsq};
    int status = bench_gpu(programs, 3, argc == 3 ? BENCH_GPU_QUICK : BENCH_GPU_FULL);
    return bench_conv_gpu() != 0 ? 1 : status;
  }
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--short") == 0) {
      res.short_run = 1;
    } else if (strcmp(argv[i], "--rows") == 0) {
      rows_only = 1;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  show_progress = isatty(2);
  res.online_cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  bench_cpu_model(res.cpu_model, sizeof res.cpu_model);
  bench_load_average(res.load_average, sizeof res.load_average);
  res.sizes[0] = (int64_t)1 << 16;
  res.sizes[1] = (int64_t)1 << (res.short_run ? 20 : 24);
  res.nsizes = 2;
  int64_t largest = res.sizes[1];
  char largest_text[24];
  snprintf(largest_text, sizeof largest_text, "%lld", (long long)largest);
  int samples = res.short_run ? 3 : 7;
  res.compile_repetitions = res.short_run ? 3 : 7;
  res.large_samples = res.short_run ? 3 : 7;
  res.small_samples = res.short_run ? 5 : 11;
  res.interp_large_samples = res.short_run ? 1 : 3;
  res.stream_length = (int64_t)1 << 25;
  res.stream_repetitions = res.short_run ? 4 : 10;
  res.programs[res.nprograms++] = &sigmoid;
  res.programs[res.nprograms++] = &adam;
  res.programs[res.nprograms++] = &sumsq;

  const char* tmp = getenv("TMPDIR");
  char* cache_root = bench_make_dir(tmp && *tmp ? tmp : "/tmp", "uopjit-bench");
  char* run_cache = cache_root ? bench_make_dir(cache_root, "run") : NULL;
  if (!run_cache) return 1;
  setenv("UOPJIT_CACHE_DIR", run_cache, 1);
  unsetenv("UOPJIT_ENGINE");
  unsetenv("UOPJIT_CACHE");
  progress("AOT kernels (uopjit aot, then the system compiler)");
  char* aot_dir = bench_make_dir(cache_root, "aot");
  char aot_note[1024] = "";
  static const char* const aot_names[] = {"sigmoid", "adam", "sumsq", "softmax", "layernorm"};
  if (aot_dir) aot_build(aot_names, 5, aot_dir, aot_note, sizeof aot_note);
  if (*aot_note) fprintf(stderr, "bench: %s\n", aot_note);
  if (aot_dir) bench_remove_dir(aot_dir);
  free(aot_dir);

  int64_t matrix_rows = 1, matrix_cols = 1;
  int have_rows = rows_matrix_shape(res.short_run, &matrix_rows, &matrix_cols) == 0;
  int status = !have_rows;
  if (rows_only) {
    progress("peers (cpu_peers.py)");
    if (have_rows) peers_measure("softmax,layernorm", largest_text, matrix_rows, matrix_cols, samples, "1,2", &peers);
    progress("row programs");
    if (have_rows && rows_measure(&peers, res.short_run, &rows) != 0) status = 1;
    if (show_progress) fprintf(stderr, "\r\033[K");
    if (have_rows) rows_print(&rows, &peers);
    bench_remove_dir(run_cache);
    bench_remove_dir(cache_root);
    free(run_cache);
    free(cache_root);
    return status;
  }
  for (int t = 1; t <= BENCH_THREAD_COUNTS; t++) {
    progress("STREAM, %d thread(s)", t);
    res.stream_ok[t - 1] = stream_measure(t, res.stream_length, res.stream_repetitions, &res.stream[t - 1]) == 0;
  }
  progress("peers (cpu_peers.py)");
  peers_measure(have_rows ? "sigmoid,adam,softmax,layernorm" : "sigmoid,adam", largest_text, matrix_rows, matrix_cols,
                samples, "1,2", &peers);
  for (int p = 0; p < res.nprograms; p++) {
    program_text_t text;
    if (program_text_load(res.programs[p], &text) != 0) {
      status = 1;
      for (int s = 0; s < res.nsizes; s++) add_row(&res, p, res.sizes[s], RUNNER_INTERP, 1);
      continue;
    }
    static const uj_engine_t compiled[3] = {UJ_ENGINE_INTERP, UJ_ENGINE_MIR, UJ_ENGINE_C};
    for (int e = 0; e < 3; e++) {
      progress("%s, compile times on %s", text.spec->name, uj_engine_name(compiled[e]));
      compile_measure(&text, compiled[e], cache_root, res.compile_repetitions, &res.compile[p][e]);
    }
    for (int s = 0; s < res.nsizes; s++) measure_size(&res, p, &text, res.sizes[s], &peers);
    program_text_free(&text);
  }
  progress("row programs");
  if (have_rows && rows_measure(&peers, res.short_run, &rows) != 0) status = 1;
  if (show_progress) fprintf(stderr, "\r\033[K");
  bench_remove_dir(run_cache);
  bench_remove_dir(cache_root);
  free(run_cache);
  free(cache_root);

  report_print(&res);
  if (rows.nprograms > 0) rows_print(&rows, &peers);
  if (!peers.ran) printf("\npeers: %s\n", peers.note);
  if (bench_gpu(res.programs, res.nprograms, res.short_run ? BENCH_GPU_SHORT : BENCH_GPU_FULL) != 0) status = 1;
  for (int r = 0; r < res.nrows; r++)
    if (res.rows[r].status == ROW_MISMATCH || res.rows[r].status == ROW_FAILED) status = 1;
  return status;
}
