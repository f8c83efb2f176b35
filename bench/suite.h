/* bench/suite.h: `uopjit bench`, the suite that writes a report directory
 * (results.json, report.md, PNG plots): what its files share.
 *
 * suite.c parses the options and drives the measurements; suite_measure.c
 * measures one workload at one size on every runner (the 1-D programs, the
 * row programs, the multi-tensor AdamW step) with its traffic-matched copy
 * kernel; suite_write.c writes results.json and report.md and runs
 * bench/plots.py. The JSON's schema is bench/results.schema.json. */
#ifndef BENCH_SUITE_H
#define BENCH_SUITE_H

#include "bench.h"

#define SUITE_MAX_SIZES 16
#define SUITE_MAX_THREADS 4
#define SUITE_MAX_COMPILE 64

/* The runners the suite knows, in report order; --engines picks among them. */
typedef enum {
  SR_MIR,
  SR_C,
  SR_AUTO,
  SR_CUDA,
  SR_AOT,
  SR_HAND,
  SR_UNFUSED,
  SR_PEERS,
  SR_COUNT
} suite_runner_t;

/* One measurement: a runner on a workload at one size and thread count. */
typedef struct {
  char workload[16];
  char runner[24];   /* mir, c, auto, aot, hand, unfused, numpy, ..., copy */
  char kind[12];     /* jit, aot, baseline, peer, limit */
  char shape[40];    /* "2^20", "1024x1024", "GPT-2 small, 148 tensors" */
  int64_t elements;  /* per call */
  int threads;
  char status[16];   /* ok, mismatch, failed, unavailable */
  bench_timing_t timing;
  /* the copy kernel on this row's traffic and threads, timed in alternation
   * with it (bench_time_alternating); samples 0: not timed so (peers,
   * convolutions, the limit rows themselves) */
  bench_timing_t limit_timing;
  double limit_ratio; /* the copy kernel's fastest batch over those rounds / this row's fastest */
  double max_error;
  double bytes; /* per call: each array the workload reads counted once, each it writes once; NAN: not memory-bound */
  double flops; /* per call, where the workload counts them (convolutions); else NAN */
  int median_only; /* the figure came with its median alone (peers, convolutions): no min, max or sample count */
} suite_row_t;

typedef struct {
  char workload[16];
  char engine[8];
  int ok;
  double cold_ms, disk_ms, dispatch_us, first_result_ms;
  int64_t first_result_elements;
} suite_compile_t;

typedef struct {
  /* options */
  int quick, plots;
  const char* out_dir;
  char filter[256];
  int nthreads, threads[SUITE_MAX_THREADS];
  int nsizes;
  int sizes_log2[SUITE_MAX_SIZES];
  int engines[SR_COUNT]; /* 1: measured */
  int samples;
  int alternation_rounds; /* rounds of a row timed in alternation with its copy kernel */
  double min_sample_ns;
  /* the machine */
  char cpu_model[128], cache_sizes[128], compiler[128], mir[128], cuda[160], load_average[32], started[32];
  int cores;
  /* results */
  int nrows, rows_cap;
  suite_row_t* rows;
  int ncompile;
  suite_compile_t compile[SUITE_MAX_COMPILE];
  int stream_ok[SUITE_MAX_THREADS];
  stream_result_t stream[SUITE_MAX_THREADS];
  int64_t stream_length;
  char notes[2048]; /* what was skipped and why, "; "-separated */
  char plots_note[512];
  double seconds;
} suite_t;

void suite_note(suite_t* s, const char* format, ...) __attribute__((format(printf, 2, 3)));
/* A new row (zeroed, status "failed"); NULL when out of memory. */
suite_row_t* suite_add_row(suite_t* s, const char* workload, const char* runner, const char* kind, int64_t elements,
                           int threads);
int suite_wants(const suite_t* s, const char* workload);

/* suite_measure.c: 0, or 1 when something failed or mismatched */
int suite_measure_1d(suite_t* s, const program_spec_t* spec, int64_t n);
int suite_measure_rows(suite_t* s, const char* name, int64_t n, int64_t cols);
int suite_measure_adamw(suite_t* s);
int suite_measure_conv(suite_t* s);
void suite_add_peers(suite_t* s, const peer_results_t* peers);
void suite_measure_compile(suite_t* s, const program_spec_t* spec, int64_t first_result_n, const char* cache_root);

/* suite_write.c: 0, or 1 when a file could not be written */
int suite_write(suite_t* s);
/* The summary table on stdout (what `make run` ends with). */
void suite_print_summary(const suite_t* s);

#endif
