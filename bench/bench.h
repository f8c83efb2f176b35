/* bench/bench.h: what the parts of the benchmark program share.
 *
 * The benchmark is `uopjit bench` (tools/cli_bench.c): the suite that writes a
 * report directory (suite.h), or the text tables of bench.c (--tables,
 * --short, --rows, ...). The tables time three 1-D programs of the
 * expression language, kept in bench/<name>.uj with their CLI options in
 * bench/<name>.args, on every CPU engine and against the baselines (above
 * runner_kind_t), and two row programs, softmax and layernorm over the rows
 * of a matrix. workload.c sets up the tensors and runs and checks one
 * engine, compile.c measures compile and dispatch times, stream.c the
 * machine's STREAM copy and triad bandwidth, baseline.c holds the unfused
 * loops, report.c prints the tables and bench.c drives it all; rows.c
 * measures and prints the row programs (rows_baseline.c: their hand-written
 * kernels); tier.c is `bench --tier`, the auto engine over time. */
#ifndef BENCH_H
#define BENCH_H

#include <stdint.h>

#include "uopjit.h"

#ifndef BENCH_SOURCE_DIR
#define BENCH_SOURCE_DIR "bench"
#endif

#define BENCH_MAX_IO 16
/* Temporaries the unfused baselines may use, each as long as the input. */
#define UNFUSED_SCRATCH 3

/* ---- util.c ---------------------------------------------------------------------- */

double bench_now_ns(void);
/* The median of values[0..count) (the mean of the middle two for an even
 * count); values is left unchanged. NAN for count 0. */
double bench_median(const double* values, int count);
/* /proc/cpuinfo's first "model name" into out, else "unknown CPU". */
void bench_cpu_model(char* out, size_t size);
/* /proc/loadavg's first figure (the 1-minute load average) into out: 1;
 * else "unknown" in out, and -1 when there is no such file, 0 when it does
 * not read. */
int bench_load_average(char* out, size_t size);
/* A file's contents with trailing white space removed; NULL (and a message
 * on stderr) when it cannot be read. The caller frees. */
char* bench_read_file(const char* path);
/* Creates a fresh private directory under parent (mode 0700); NULL on failure. */
char* bench_make_dir(const char* parent, const char* prefix);
/* Removes dir and the files directly in it (the kernel cache is flat). */
void bench_remove_dir(const char* dir);

/* One call of a timed workload: 0, or -1 on a failure (message on stderr). */
typedef int (*bench_call_fn)(void* arg);
/* Median nanoseconds per call over `samples` samples (1..64), each of as
 * many calls as fill about min_sample_ns (a call slower than that is a
 * sample of its own); a negative value when a call failed. */
double bench_time_calls(bench_call_fn call, void* arg, int samples, double min_sample_ns);
/* The samples of one timing, per call. */
typedef struct {
  int samples;
  double median_ns, min_ns, max_ns;
} bench_timing_t;
/* bench_time_calls with every figure: 0, or -1 when a call failed. */
int bench_time_stats(bench_call_fn call, void* arg, int samples, double min_sample_ns, bench_timing_t* out);
/* Times `call` and `alongside` in alternation for `rounds` rounds (1..64),
 * a batch of each per round, each batch of as many calls as fill about
 * min_sample_ns, into out and alongside_out, and alongside's fastest batch
 * per call / call's fastest: 0, or -1 when a call failed. */
int bench_time_alternating(bench_call_fn call, void* arg, bench_call_fn alongside, void* alongside_arg, int rounds,
                           double min_sample_ns, bench_timing_t* out, bench_timing_t* alongside_out,
                           double* fastest_ratio);
/* Fills data[0..count) with values uniform in [0.5, 1.5) from a 64-bit
 * xorshift state (never 0), which it advances. */
void bench_fill_uniform(float* data, int64_t count, uint64_t* state);

/* ---- aot.c: the AOT kernels, built and loaded at run time ---------------------------- */

typedef int (*aot_run_fn)(void* const* inputs, const int64_t* const* input_dims, void* const* outputs,
                          const int64_t* params);
typedef int (*aot_dims_fn)(const int64_t* const* input_dims, const int64_t* params, int output, int64_t* dims);

/* One program's AOT kernel: `uopjit aot` C compiled into a shared object. */
typedef struct {
  char name[32];
  aot_run_fn run;
  aot_dims_fn dims;
} aot_kernel_t;

/* For each program bench/<name>.uj: writes `uopjit aot` C for it (with its
 * .args) into dir, compiles it as a user would ($CC, else cc, -O3
 * -march=native -shared) and loads it. A program that fails is left out and
 * named in note (the compiler's messages go to stderr). The number loaded. */
int aot_build(const char* const* names, int count, const char* dir, char* note, size_t note_size);
/* The loaded kernel of a program, or NULL. */
const aot_kernel_t* aot_find(const char* name);

/* ---- baseline.c ---------------------------------------------------------------------- */

/* An unfused baseline works on the program's tensors by name: tensors[k]
 * is the tensor called names[k] (an in-place output is its input), each
 * scalar a 1-element array, each vector n elements long. */
typedef void (*unfused_fn)(float* const* tensors, int64_t n, float* const* scratch);
typedef struct {
  int count;
  const char* names[BENCH_MAX_IO];
  unfused_fn run;
} unfused_baseline_t;

extern const unfused_baseline_t unfused_sigmoid, unfused_adam, unfused_sumsq;

/* ---- hand.c: the hand-written fused loops (same calling convention) ---- */

extern const unfused_baseline_t hand_fused_sigmoid, hand_fused_gelu, hand_fused_gelu_erf, hand_fused_adam,
    hand_fused_sumsq;
/* AdamW on one tensor in place; hyper = b1, b2, lr, eps, wd. */
void hand_adamw_step(float* m, const float* g, float* v, float* p, int64_t n, const float* hyper);

/* ---- traffic.c: the traffic-matched copy kernel ---- */

/* Arrays of n 4-byte elements: each read array is read once, each written
 * array written once (a written array may be a read one: in place). */
typedef struct {
  const void* reads[BENCH_MAX_IO];
  int nreads;
  void* writes[BENCH_MAX_IO];
  int nwrites;
  int64_t n;
  int threads;
} traffic_t;
/* One pass of the copy kernel: 0, or -1 without a read array. */
int traffic_copy(const traffic_t* t);
/* One pass over `count` tensors' traffic (each part's own arrays and n; its
 * threads field unused) as one job on `threads` threads, split by elements
 * of the concatenation: 0, or -1 for no elements or a part without a read
 * array. */
int traffic_copy_all(const traffic_t* parts, int count, int threads);
/* Outputs not in place of at least `bytes` are written with streaming
 * stores, as the C engine writes them (default UOPJIT_STREAM_BYTES, else
 * the library's default; negative: back to that). */
void traffic_set_stream_bytes(int64_t bytes);

/* ---- stream.c ------------------------------------------------------------------------ */

typedef struct {
  double copy_gbs, triad_gbs;           /* medians */
  double copy_best_gbs, triad_best_gbs; /* the fastest repetition, as STREAM reports */
} stream_result_t;

/* STREAM copy (c = a) and triad (a = b + q*c) on arrays of `length`
 * doubles split over `threads` (1..64) pthreads. 0, or -1 when memory could
 * not be had (a thread that cannot start ends the program). */
int stream_measure(int threads, int64_t length, int repetitions, stream_result_t* out);

/* ---- workload.c ------------------------------------------------------------------------ */

/* One benchmarked program: its name (bench/<name>.uj and .args) and what
 * the bench needs to know beside the source. */
typedef struct {
  const char* name;
  int bytes_per_element; /* memory traffic per element, counted as STREAM does */
  /* the largest |got - ref| / max(1, |ref|) that passes at size n:
   * max(tolerance, n * tolerance_per_element) */
  double tolerance, tolerance_per_element;
  const unfused_baseline_t* unfused; /* NULL: none */
  const unfused_baseline_t* hand;    /* the hand-written fused loop; NULL: none */
} program_spec_t;

/* An input's shape from `--shape NAME=D0,D1,...` in the .args, or the
 * shape of every input not named when name is NULL (`--shape D0,D1`). */
typedef struct {
  char* name;
  int ndim;
  int64_t dims[UJ_MAX_DIMS];
} input_shape_t;

/* The program's source, the inputs its .args make 0-d and the shapes it
 * gives (the row programs' matrices; the 1-D programs give none). */
typedef struct {
  const program_spec_t* spec;
  char* source;
  char* args;
  int nscalars;
  char* scalars[BENCH_MAX_IO];
  int nshapes;
  input_shape_t shapes[BENCH_MAX_IO];
} program_text_t;

int program_text_load(const program_spec_t* spec, program_text_t* text);
/* The shape the .args give input `name` (its own, else the default one):
 * 1, or 0 when they give none. */
int program_text_shape(const program_text_t* text, const char* name, input_shape_t* shape);
/* The value a 0-d input called name gets (lr, b1, b2, eps: 1e-3, 0.9, 0.999, 1e-8, as the CLI gives them): 1, or 0 for
 * any other name. */
int bench_named_scalar(const char* name, float* value);
void program_text_free(program_text_t* text);

/* The tensors of one program at one size. Inputs get seeded values in
 * [0.5, 1.5) (scalars named lr, b1, b2, eps get 1e-3, 0.9, 0.999, 1e-8, as
 * the CLI gives them); an output with an input's name is that input's memory
 * (an in-place update). */
typedef struct {
  const program_text_t* text;
  int64_t n;
  int ninputs, noutputs;
  uj_tensor_t inputs[BENCH_MAX_IO], outputs[BENCH_MAX_IO];
  int64_t input_numel[BENCH_MAX_IO], output_numel[BENCH_MAX_IO];
  int output_alias[BENCH_MAX_IO]; /* the input an output updates in place, else -1 */
  float* pristine[BENCH_MAX_IO];  /* the inputs' initial values */
  float* reference[BENCH_MAX_IO]; /* the interpreter's outputs from the initial values */
  float* scratch[UNFUSED_SCRATCH];
  float* unfused_tensors[BENCH_MAX_IO]; /* the unfused baseline's tensors, by its names */
  float* hand_tensors[BENCH_MAX_IO];    /* the hand-written loop's */
  int aot_dims_agree;                   /* the AOT kernel infers the outputs' shapes as the library does */
} workspace_t;

/* Builds the tensors (shapes from a parse of the source, through the
 * interpreter). 0, or -1 with a message on stderr. */
int workspace_new(const program_text_t* text, int64_t n, workspace_t* ws);
void workspace_free(workspace_t* ws);
/* Puts the initial values back into every input and NaN into every output
 * that is not in place, so an engine that writes nothing cannot pass. */
void workspace_reset(workspace_t* ws);

/* The runners:
 *
 *   interp, mir, c   through the public API (uj_program_run), 1 and 2 threads
 *   aot              the C that `uopjit aot` writes for it, compiled with the
 *                    system compiler at -O3 -march=native and loaded at run
 *                    time (aot.c; 1 thread)
 *   unfused          plain C loops, one pass per op writing a temporary
 *                    array, as NumPy evaluates an expression (1 thread)
 *   hand             a hand-written fused kernel (the row programs,
 *                    bench/rows_baseline.c)
 *   peer             a row measured by bench/cpu_peers.py (numpy, numexpr,
 *                    torch; peers.c runs it in the same run when a python3
 *                    imports numpy)
 *
 * The row programs (softmax and layernorm over the rows of a 4096x4096
 * matrix, shapes from --shape in their .args) run on mir and c, aot, hand
 * and the peers. */
typedef enum {
  RUNNER_INTERP,
  RUNNER_MIR,
  RUNNER_C,
  RUNNER_AOT,
  RUNNER_UNFUSED,
  RUNNER_HAND,
  RUNNER_PEER,
  RUNNER_AUTO /* the tiered auto engine, timed once its top tier serves */
} runner_kind_t;

/* One way of running a workspace's program. */
typedef struct {
  runner_kind_t kind;
  int threads;
  uj_ctx_t* ctx;         /* the JIT engines' context */
  uj_program_t* program; /* parsed for this runner alone */
} runner_t;

const char* runner_name(runner_kind_t kind);
/* Sets a runner up; UOPJIT_THREADS is set to `threads` before the context's
 * thread pool exists. 1 when ready, 0 when the engine is unavailable here,
 * -1 on an error (message on stderr). */
int runner_open(runner_t* r, runner_kind_t kind, int threads, const program_text_t* text);
void runner_close(runner_t* r);
/* One run on the workspace; 0, or -1 with a message on stderr. */
int runner_run(runner_t* r, workspace_t* ws);
/* program run forward in ctx on the workspace's inputs and outputs:
 * uj_program_run's status. */
uj_status_t workspace_run(uj_ctx_t* ctx, uj_program_t* program, workspace_t* ws);
/* Keeps the current outputs as the reference. */
void workspace_keep_reference(workspace_t* ws);
/* The reference from the program run in f64 on the interpreter, from the
 * initial values widened, rounded to f32: exact enough to judge any order
 * of a long f32 sum (an f32 interpreter's sequential sum of 2^26 terms is
 * off by tens of percent). 0, or -1 with a message. */
int workspace_reference_f64(workspace_t* ws);
/* The largest relative error of the outputs against the reference
 * (INFINITY for a NaN). */
double workspace_max_error(const workspace_t* ws);
/* The largest error that passes for the workspace's program and size. */
double workspace_tolerance(const workspace_t* ws);
/* Median nanoseconds per call over `samples` samples, each of as many calls
 * as fit in about min_sample_ns; a negative value on a failed run. */
double runner_time_ns(runner_t* r, workspace_t* ws, int samples, double min_sample_ns);
/* A runner and its workspace, as one bench_call_fn argument (runner_call). */
typedef struct {
  runner_t* runner;
  workspace_t* ws;
} runner_call_t;
int runner_call(void* arg);
/* For the auto engine: calls `call` until the C tier serves the runner's
 * program (or the tiering failed, or 5 s passed), so that what is timed is
 * the steady state; does nothing for another runner. */
void runner_warm_auto(runner_t* r, bench_call_fn call, void* arg);

/* ---- compile.c ------------------------------------------------------------------------ */

typedef struct {
  int available;      /* 0: the engine is not in this build or on this machine */
  int failed;         /* a run failed (message on stderr) */
  double cold_ms;     /* median first run in a new context with an empty disk cache */
  double disk_ms;     /* median first run in a new context, same disk cache (NAN: no disk cache) */
  double kernel_ms;   /* median first run of the parsed, optimized program in a new context: the
                         engine's compile of the kernel alone */
  double dispatch_us; /* median per-call time of a run on a tiny tensor, kernel in memory */
} compile_times_t;

/* Measures an engine's compile times for a program, with its disk cache in
 * fresh directories under cache_root. */
void compile_measure(const program_text_t* text, uj_engine_t engine, const char* cache_root, int repetitions,
                     compile_times_t* out);

/* ---- the results, gathered by bench.c and printed by report.c ---------------------------- */

#define BENCH_MAX_PROGRAMS 8
#define BENCH_MAX_SIZES 4
#define BENCH_MAX_ROWS 256
#define BENCH_THREAD_COUNTS 2 /* the JIT engines run on 1 and on 2 threads */

typedef enum { ROW_OK, ROW_REFERENCE, ROW_MISMATCH, ROW_UNAVAILABLE, ROW_FAILED } row_status_t;

/* One engine on one program at one size. */
typedef struct {
  int program; /* index into bench_results_t.programs */
  int64_t n;
  runner_kind_t kind;
  int threads;
  row_status_t status;
  double max_error;
  double ns_per_call; /* median; meaningful for ROW_OK and ROW_REFERENCE */
  const char* peer;   /* RUNNER_PEER: the peer's name (numpy, numexpr, torch) */
} throughput_row_t;

typedef struct {
  int short_run;
  int online_cores;
  char cpu_model[128];
  char load_average[32]; /* /proc/loadavg's 1-minute figure when the run began */
  int nprograms;
  const program_spec_t* programs[BENCH_MAX_PROGRAMS];
  int nsizes;
  int64_t sizes[BENCH_MAX_SIZES];
  int compile_repetitions, large_samples, small_samples, interp_large_samples;
  int64_t stream_length;
  int stream_repetitions;
  int stream_ok[BENCH_THREAD_COUNTS];
  stream_result_t stream[BENCH_THREAD_COUNTS]; /* [threads - 1] */
  compile_times_t compile[BENCH_MAX_PROGRAMS][3]; /* [program][0: interp, 1: mir, 2: c] */
  int nrows;
  throughput_row_t rows[BENCH_MAX_ROWS];
} bench_results_t;

void report_print(const bench_results_t* results);

/* ---- peers.c: bench/cpu_peers.py's numpy, numexpr and torch rows, in this run ---- */

#define PEERS_MAX_ROWS 1024

/* One peer measurement; workload is a program's name (sigmoid, adam, softmax, layernorm). */
typedef struct {
  char workload[16];
  char peer[16];
  int threads;
  int64_t elements;
  int checked_ok; /* the peer's result agreed with its f64 reference (cpu_peers.py says how) */
  double max_error;
  double ns_per_call;
} peer_row_t;

typedef struct {
  int ran;         /* 0: skipped; note says why */
  char note[256];  /* the versions measured, or why there are no peers */
  int nrows;
  peer_row_t rows[PEERS_MAX_ROWS];
} peer_results_t;

/* Runs cpu_peers.py (when a python3 imports numpy) on `workloads` (a
 * comma-separated list of sigmoid, gelu, gelu_erf, adam, sumsq, softmax, layernorm):
 * the 1-D ones at each of `elements` (comma-separated counts), the row ones
 * on rows x cols (rows <= 0: elements / cols at each size), on each of
 * `threads` (comma-separated). Never fails the bench: a helper that cannot
 * run leaves a note. */
void peers_measure(const char* workloads, const char* elements, int64_t rows, int64_t cols, int samples,
                   const char* threads, peer_results_t* out);
/* The peer rows of one workload and size, in the helper's order: the index
 * of the next one at or after `from`, or -1. */
int peers_find(const peer_results_t* peers, const char* workload, int64_t elements, int from);

/* ---- rows.c: softmax and layernorm over the rows of a matrix ---- */

/* The hand-written fused kernels (rows_baseline.c): y from x[rows, cols]
 * and, for layernorm, w[cols] and b[cols] (NULL for softmax). */
typedef void (*hand_rows_fn)(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols);
void hand_softmax_rows(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols);
void hand_layernorm_rows(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols);

#define ROWS_MAX_PROGRAMS 4
#define ROWS_MAX_RESULTS 64

/* What rows_measure gathers; each result is a throughput_row_t whose
 * `program` indexes names[] and whose n is rows * cols. */
typedef struct {
  int short_run;
  int64_t rows, cols;
  int nprograms;
  const char* names[ROWS_MAX_PROGRAMS];
  int nresults;
  throughput_row_t results[ROWS_MAX_RESULTS];
} rows_results_t;

/* The matrix the row programs run on: the shape bench/softmax.args gives x,
 * a quarter of its rows for --short. 0, or -1 with a message. */
int rows_matrix_shape(int short_run, int64_t* rows, int64_t* cols);
/* Checks and times every row program on every runner, and takes the
 * peers' rows for them. 0, or 1 when a row failed or mismatched. */
int rows_measure(const peer_results_t* peers, int short_run, rows_results_t* out);
void rows_print(const rows_results_t* results, const peer_results_t* peers);

/* One row program on one rows x cols matrix (w and b of cols), with its f64
 * reference made: for the suite, which sweeps the size. */
typedef struct row_case row_case_t;
int row_case_new(const char* name, int64_t rows, int64_t cols, row_case_t** out);
void row_case_free(row_case_t* c);
/* A call timed in alternation with a runner, and where its timing goes. */
typedef struct {
  bench_call_fn call;
  void* arg;
  bench_timing_t* timing;
  double* fastest_ratio;
} bench_paired_t;
/* Opens a runner, checks its result, then times it: alone
 * (bench_time_stats), or with `alongside` when not NULL
 * (bench_time_alternating), `samples` being then its rounds. */
row_status_t row_case_measure(row_case_t* c, runner_kind_t kind, int threads, int samples, double min_sample_ns,
                              const bench_paired_t* alongside, bench_timing_t* timing, double* max_error);
/* The copy kernel of the row program's traffic: x read, y written (w and b,
 * one row, stay in cache). */
void row_case_traffic(const row_case_t* c, int threads, traffic_t* t);

/* ---- tier.c: `bench --tier`, the tiered auto engine against MIR and C over time ---- */

int bench_tier_main(int argc, char** argv, const program_spec_t* sigmoid);

/* ---- conv.c: `bench --conv`, the convolution backends on network layers ---- */

int bench_conv_main(int argc, char** argv);

/* One backend's figures on one layer, for the suite. */
typedef struct {
  const char* backend; /* ref, cpu_direct, cpu_winograd */
  int no_key;          /* cpu_winograd transforming its filter in every call */
  int ok;              /* ran, and agreed with ref */
  double ms;           /* median (ref: see note) */
  double worst;        /* largest |got - ref| / bound (ref: 0) */
  const char* note;    /* how it was timed, or why it has no time */
  double flops;
  int64_t outputs;     /* elements of y */
  const char* engine;  /* ref: the JIT engine it ran on; else NULL */
} bench_conv_row_t;
enum { BENCH_CONV_LAYERS = 4, BENCH_CONV_ROWS = 4 };
/* Layer `layer` (0: 56x56x64 .. 3: 7x7x512) at `batch` on `threads`, every
 * backend checked against ref, then timed, as in the tables; shape gets
 * the layer's name. 0, or -1 on bad arguments or no memory. */
int bench_conv_layer(int layer, int batch, int threads, bench_conv_row_t* rows, char* shape, size_t shape_size);
/* The GPU rows of bench --conv (bench/conv_gpu.c): 0, or 1 when a row failed. */
int bench_conv_gpu(void);

/* ---- gpu.c: the GPU section, printed after the tables; 0, or 1 on a failure ---- */
/* short: 2^24 only; quick: 2^24 and the rows; full: 2^24 to 2^28 and the rows */
typedef enum { BENCH_GPU_SHORT, BENCH_GPU_QUICK, BENCH_GPU_FULL } bench_gpu_mode_t;
int bench_gpu(const program_spec_t* const* programs, int nprograms, bench_gpu_mode_t mode);

/* ---- gpu_rows.c: programs on given shapes, and a model's Adam step, on the GPU ---- */

/* An input by name: its shape, and a fixed value (scalars) or seeded values in [0.5, 1.5). */
typedef struct {
  const char* name;
  int ndim;
  int64_t dims[2];
  float value;
  int fixed;
} gpu_input_t;

typedef struct {
  const char* label;       /* the row's name */
  const char* shape_label; /* how the row prints its size */
  const char* source;
  int ninputs;
  gpu_input_t inputs[8];
  double bytes;     /* what the program must move: each input read once, each output written once */
  double tolerance; /* the largest |got - ref| / max(1, |ref|) that passes */
} gpu_case_t;

/* One call (or step) of a timed GPU workload: 0, or -1 on a failure. */
typedef int (*gpu_step_fn)(void* arg);
/* Median ns per step over `samples` batches (each a few ms of queued steps, then a synchronize); -1 on a failure. */
double gpu_time_batches(uj_ctx_t* ctx, gpu_step_fn step, void* arg, int samples);
/* Checks the case against the CPU, times it and prints its row; the ns per call, or -1. */
double gpu_case_row(uj_ctx_t* ctx, const gpu_case_t* c, double copy_gbs, int samples);
/* One Adam step (adam_source, one call per tensor) over GPT-2 small's parameters: 0, or -1. */
int gpu_gpt2_adam_row(uj_ctx_t* ctx, const char* adam_source, double copy_gbs, int samples);

/* ---- groups.c -------------------------------------------------------------------------- */

/* `bench --groups [--short]`: an AdamW step through uj_program_run_groups
 * over GPT-2 small's 148 tensors and over 10,000 small ones, against the
 * traffic limit and torch.optim.AdamW in the same run; prints its tables
 * to stdout. 0, or 1 when it could not run. */
int bench_groups(int short_run);

#endif
