/* tools/cli_help.c: the help texts of the uopjit tool and its version.
 *
 * Each command has one entry: its synopsis, what it does, its options, and
 * a set of the environment variables that change what it does. The
 * variables are described once, in one table, so that `uopjit --help`
 * (every variable) and `uopjit help CMD` (those of CMD) cannot disagree.
 * Help goes to stdout (it was asked for); a usage error goes to stderr with
 * a pointer to the help (cli_usage_error). */
#include <string.h>

#include "cli.h"

const char* cli_version(void) {
  /* the library's, at run time: a CLI run against an installed library of
   * another version says which one it got */
  return uj_version();
}

/* ---- environment variables ------------------------------------------------------------------ */

enum {
  ENV_ENGINE = 1 << 0,
  ENV_THREADS = 1 << 1,
  ENV_CACHE = 1 << 2, /* UOPJIT_CACHE, UOPJIT_CACHE_DIR, XDG_CACHE_HOME, HOME */
  ENV_CACHE_MEMORY = 1 << 3,
  ENV_CACHE_DISK = 1 << 4,
  ENV_MIR_LEVEL = 1 << 5,
  ENV_CC = 1 << 6, /* UOPJIT_CC, TMPDIR */
  ENV_DEBUG = 1 << 7,
  ENV_CUDA = 1 << 8, /* UOPJIT_NVRTC, UOPJIT_CUDA_DEVICE */
  ENV_CONV = 1 << 9, /* UOPJIT_CONV_BACKEND, UOPJIT_CONV_ISA */
  ENV_TIER = 1 << 10,
  ENV_ALL = (1 << 11) - 1
};

static const struct {
  unsigned group;
  const char* name;
  const char* meaning;
} env_vars[] = {
    {ENV_ENGINE, "UOPJIT_ENGINE", "the engine a context starts on: auto, interp, mir, c or cuda (default auto;\n"
                                  "the --engine option overrides it)"},
    {ENV_THREADS, "UOPJIT_THREADS", "threads for parallel loops and the CPU convolution backends (default: the\n"
                                    "online cores)"},
    {ENV_CACHE, "UOPJIT_CACHE", "0 switches the on-disk kernel cache off"},
    {ENV_CACHE, "UOPJIT_CACHE_DIR", "the on-disk kernel cache's directory"},
    {ENV_CACHE, "XDG_CACHE_HOME", "without UOPJIT_CACHE_DIR the cache is $XDG_CACHE_HOME/uopjit (an absolute\n"
                                  "path), else $HOME/.cache/uopjit"},
    {ENV_CACHE_MEMORY, "UOPJIT_CACHE_MEMORY_LIMIT", "bytes of compiled kernels a context keeps in memory, with an optional\n"
                                                    "K, M or G suffix (default 256M)"},
    {ENV_CACHE_DISK, "UOPJIT_CACHE_DISK_LIMIT", "bytes the on-disk kernel cache is kept under, with an optional K, M or\n"
                                                "G suffix (default 512M)"},
    {ENV_MIR_LEVEL, "UOPJIT_MIR_LEVEL", "the MIR engine's optimization level, 0 to 3 (default 2)"},
    {ENV_TIER, "UOPJIT_TIER", "auto on host tensors runs a new kernel on MIR while the C engine compiles\n"
                              "it in the background, then on C: the calls a kernel makes before its C\n"
                              "compile starts (default 1), or 0 for no tiering (auto is MIR alone)"},
    {ENV_CC, "UOPJIT_CC", "the C engine's compiler (default cc)"},
    {ENV_CC, "UOPJIT_STREAM_BYTES", "the C engine writes an output of at least this many bytes that is stored\n"
                                    "once and read nowhere else with streaming stores, past the cache, with an\n"
                                    "optional K, M or G suffix (default 32M; 0 streams all such outputs)"},
    {ENV_CC, "TMPDIR", "where the C engine compiles (default /tmp)"},
    {ENV_DEBUG, "UOPJIT_DEBUG", "words: \"passes\" prints the loop IR after each pass to stderr, \"verify\"\n"
                                "verifies it after each pass"},
    {ENV_CUDA, "UOPJIT_NVRTC", "the NVRTC library to load (default libnvrtc.so of the CUDA version built\n"
                               "against, then CUDA_DIR/lib64)"},
    {ENV_CUDA, "UOPJIT_CUDA_DEVICE", "the number of the GPU to use (default 0)"},
    {ENV_CONV, "UOPJIT_CONV_BACKEND", "a convolution backend used for every call (ref, cpu_direct, cpu_winograd,\n"
                                      "cudnn, cuda_winograd; default auto)"},
    {ENV_CONV, "UOPJIT_CONV_ISA", "the instruction set of the CPU convolution kernels: avx512, avx2 or\n"
                                  "generic (default: the best the CPU has)"},
};

/* How a help text ends: the names of the variables of the groups, wrapped
 * at 80 columns, and where each is described. */
static void print_env_pointer(FILE* out, unsigned groups) {
  int column = fprintf(out, "\nenvironment:");
  for (size_t i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++) {
    if (!(env_vars[i].group & groups)) continue;
    int len = (int)strlen(env_vars[i].name);
    if (column + len + 1 > 80) column = fprintf(out, "\n ");
    column += fprintf(out, " %s", env_vars[i].name);
  }
  fprintf(out, "\nWhat each accepts: `uopjit help environment`, or docs/CONFIGURATION.md with\n"
               "each one's API setter.\n");
}

/* `uopjit help environment`: one line per variable, the meaning indented
 * under it. */
static void print_environment(FILE* out) {
  fprintf(out, "environment variables (each a context's default; its API setter overrides it,\n"
               "docs/CONFIGURATION.md):\n");
  for (size_t i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++) {
    fprintf(out, "  %s\n      ", env_vars[i].name);
    for (const char* c = env_vars[i].meaning; *c; c++) {
      fputc(*c, out);
      if (*c == '\n') fputs("      ", out);
    }
    fputc('\n', out);
  }
}

/* ---- commands ----------------------------------------------------------------------------------- */

/* The options run, dump and aot share: they pick the inputs. */
#define INPUT_OPTIONS                                                                    \
  "  --shape DIMS          the shape of every input not named otherwise, e.g. 1000000\n" \
  "                        or 64,128 (default 1000000)\n"                                \
  "  --shape NAME=DIMS     the shape of input NAME, e.g. b=128 (a row vector beside\n"   \
  "                        x=64,128) or c=64,1 (a column); repeatable\n"                 \
  "  --dtype DTYPE         f32, f64, bf16 or f16: the dtype of every input not named\n" \
  "                        otherwise (default f32; an input the program declares,\n"   \
  "                        x: f64, keeps its own)\n"                                    \
  "  --dtype NAME=DTYPE    the dtype of input NAME; repeatable\n"                        \
  "  --scalar NAME[,NAME]  those inputs are 0-d (scalars); repeatable\n"                \
  "  --file FILE           the program from FILE (- for stdin) instead of SOURCE; a\n"  \
  "                        NUL byte in it is an error naming its line and column\n"

/* What the options of run, dump and aot have in common, after them. */
#define INPUT_NOTES                                                                      \
  "\n"                                                                                   \
  "Options take their value as --name VALUE or --name=VALUE. A name that is not an\n"   \
  "input of the program, one input given two different shapes or dtypes (or a\n"        \
  "--shape beside --scalar), or a dtype other than the one the program declares are\n"  \
  "errors (exit status 2). A SOURCE that is a bare expression, such as\n"               \
  "'1/(1+exp(-x))', means 'y = EXPR'.\n"

static const struct {
  const char* name;
  const char* summary;
  const char* text;
  unsigned env;
} help_entries[] = {
    {"info", "version, engines and devices",
     "usage: uopjit info\n"
     "\n"
     "Prints the version, which engines this build and machine can use (and why not,\n"
     "for each it cannot), what auto runs on (tiered: mir, then c once a kernel is\n"
     "compiled), the engine UOPJIT_ENGINE gives a new context, the CPU cores and the\n"
     "CUDA device.\n",
     ENV_ENGINE | ENV_CC | ENV_CUDA | ENV_TIER},
    {"demo", "a 2-D convolution by uops, checked against plain loops",
     "usage: uopjit demo\n"
     "\n"
     "Builds a small 2-D convolution out of uops, runs it on the interpreter, prints\n"
     "its fused loop IR and checks the result against plain loops (exit status 1 when\n"
     "it differs by more than 1e-5).\n",
     ENV_THREADS | ENV_DEBUG},
    {"run", "an expression-language program on random inputs: timing or --check",
     "usage: uopjit run 'SOURCE' [options]\n"
     "       uopjit run --file FILE [options]\n"
     "\n"
     "Runs the program on seeded random inputs in [0.5, 1.5) (--scalar inputs named\n"
     "lr, b1, b2 and eps get 1e-3, 0.9, 0.999 and 1e-8). Prints the median time of\n"
     "the runs after one warm-up run that compiles, in ms; in ns per element of the\n"
     "largest tensor, which the line names (the output of an elementwise program,\n"
     "the input a reduction reads); and in GB/s counting every input read and every\n"
     "output written once.\n"
     "\n"
     "--check instead compares every output element with the interpreter run in f64\n"
     "on the same values: it agrees when |got - ref| <= tol * max(1, |ref|), tol 1e-5\n"
     "for f32 and 1e-12 for f64 results; both NaN, or the same infinity, agree. In a\n"
     "program with sum or mean, an output with fewer elements than the largest input\n"
     "is a reduction of n = (elements of that input) / (elements of the output) terms\n"
     "per element, and its bound adds gamma_n * sum|terms|, gamma_n = n*u/(1 - n*u)\n"
     "(u = 2^-24 for f32, 2^-53 for f64): the worst case of a sum in any order.\n"
     "sum|terms| comes from the program run in f64 with every sum and mean taken over\n"
     "the absolute values of its terms. Such outputs get a line \"bound: ...\"; a\n"
     "failure names the element, both values and the bound (exit status 1).\n"
     "\n"
     "options:\n" INPUT_OPTIONS
     "  --engine auto|interp|mir|c|cuda\n"
     "                        the engine (default UOPJIT_ENGINE, else auto); an engine\n"
     "                        this build or machine lacks is an error. cuda runs on GPU\n"
     "                        copies of the inputs\n"
     "  --repeat N            timed runs (default 5)\n"
     "  --seed S              the inputs' seed (default 1)\n"
     "  --check               compare with the interpreter in f64 instead of timing\n"
     "  -v, --verbose         then print the engine that served the last run and, for\n"
     "                        auto (tiered: MIR at once, C when compiled), each tier's\n"
     "                        compile time and the C compile's state\n" INPUT_NOTES
     "\n"
     "e.g. uopjit run --check '1/(1+exp(-(a*x+b)))' --scalar a,b\n"
     "     uopjit run 'y = max(x + b, 0) * s' --shape x=64,130 --shape b=130 --scalar s --check\n",
     ENV_ALL & ~ENV_CONV},
    {"dump", "the loop IR or engine code of an expression-language program",
     "usage: uopjit dump [--ir-raw | --ir | --c | --mir | --cuda] 'SOURCE' [options]\n"
     "       uopjit dump [--ir-raw | --ir | --c | --mir | --cuda] --file FILE [options]\n"
     "\n"
     "Prints the program's loop IR as emitted (--ir-raw) or after the passes (--ir,\n"
     "the default), or the code the C, MIR or CUDA engine generates (--cuda needs\n"
     "neither a GPU nor NVRTC). Without --shape, --dtype or --scalar it shows the\n"
     "build for rank-1 f32 inputs; with them, the build they describe (the ranks,\n"
     "dtypes and size-1 axes matter, not the sizes).\n"
     "\n"
     "options:\n" INPUT_OPTIONS INPUT_NOTES,
     ENV_DEBUG},
    {"aot", "an expression-language program as a self-contained C file",
     "usage: uopjit aot 'SOURCE' -o FILE [options]\n"
     "       uopjit aot --file FILE -o FILE [options]\n"
     "\n"
     "Writes FILE, a C file that needs only the C library, with the entry points\n"
     "uopjit_kernel_run and uopjit_kernel_output_dims (see UJ_DUMP_C_AOT in\n"
     "uopjit.h). Its first comment lists the inputs and outputs in the order the\n"
     "entry points take them, with their dtypes and ranks. The inputs have the\n"
     "ranks, dtypes and size-1 axes the options give (default: rank 1, f32); sizes\n"
     "are run-time arguments. FILE is replaced whole or not at all.\n"
     "\n"
     "options:\n"
     "  -o FILE, --output FILE  the file to write\n" INPUT_OPTIONS INPUT_NOTES
     "\n"
     "e.g. uopjit aot '1/(1+exp(-(a*x+b)))' --scalar a,b -o sigmoid.c\n",
     ENV_DEBUG},
    {"cache", "the on-disk kernel cache: stats, list or clear",
     "usage: uopjit cache stats | list | clear\n"
     "\n"
     "The on-disk kernel cache of the C and CUDA engines: its directory, whether it\n"
     "is usable, entries and bytes per kind (stats); one line per entry (list);\n"
     "every entry removed (clear).\n",
     ENV_CACHE | ENV_CACHE_DISK},
    {"conv", "a 2-D convolution on a backend: timing or --check",
     "usage: uopjit conv [options]\n"
     "\n"
     "x [N,H,W,C] and w [K,KERNEL,KERNEL,C] (and dy) get seeded values in [-1, 1).\n"
     "Prints the backend that ran and the median time of the runs with GFLOP/s;\n"
     "--check instead compares with the ref backend in f64 (on --engine), each\n"
     "element within 1e-6 (cpu_winograd: 1e-5) * KERNEL^2*C * max|x| * max|w|.\n"
     "\n"
     "options:\n"
     "  --n N                 batch (default 1)\n"
     "  --hw S | --h H --w W  input height and width (default 56)\n"
     "  --c C, --k K          input channels and filters (default 64)\n"
     "  --kernel R            filter height and width (default 3)\n"
     "  --stride S, --pad P   (default 1 and KERNEL/2)\n"
     "  --bias                add a bias [K]\n"
     "  --backend NAME        auto (default), ref, cpu_direct, cpu_winograd, cudnn,\n"
     "                        cuda_winograd\n"
     "  --op forward|backward-data|backward-filter\n"
     "  --dtype f32|f64       (default f32)\n"
     "  --engine auto|interp|mir|c\n"
     "                        the engine of the ref backend (default UOPJIT_ENGINE,\n"
     "                        else auto)\n"
     "  --cache-filter        pass a filter_key, so a backend keeps its filter transform\n"
     "  --repeat N, --seed S  (default 5 and 1)\n"
     "  --check               compare with the ref backend in f64 instead of timing\n",
     ENV_ALL & ~ENV_DEBUG},
    {"optim", "an optimizer step over many tensors: timing or --check",
     "usage: uopjit optim --updater NAME|TEXT [options]\n"
     "       uopjit optim --check NAME [options]\n"
     "\n"
     "Steps an updater over parameter groups (uj_optim_step): parameters in [-1, 1),\n"
     "state at zero, new gradients in [-1, 1) each step. Prints the median step time\n"
     "(the first step, which compiles, apart) and GB/s of the bytes a step must move\n"
     "(p, g and the state read, p and the state written). --check instead compares\n"
     "every step with the same updater on the interpreter in f64, from the values\n"
     "the step started from: an element agrees when |got - ref| <= 8u|ref| +\n"
     "1e-4 (|ref - before| + the mean such change of that tensor in that group)\n"
     "(u = 2^-24); max_rel_err is the largest |got - ref| /\n"
     "max(1, |ref|). It prints, per engine (every CPU engine\n"
     "unless --engine names one), \"ENGINE: check: ok max_rel_err=...\" or the\n"
     "first failing step, group and element (exit status 1).\n"
     "\n"
     "Built-in updaters: sgd sgd_momentum adam adam_amsgrad adamw adamw_amsgrad\n"
     "adagrad rmsprop rmsprop_centered rmsprop_momentum rmsprop_centered_momentum\n"
     "lion lamb. Any other --updater is an updater text (docs/OPTIMIZERS.md).\n"
     "\n"
     "options:\n"
     "  --updater NAME|TEXT   a built-in updater or an updater text (--source TEXT too)\n"
     "  --check [NAME]        check against f64 instead of timing; NAME: the updater\n"
     "  --groups 37|gpt2|N    N groups of random ranks and sizes (default 37), or GPT-2\n"
     "                        small's 148 parameter shapes (124M elements)\n"
     "  --tensors N           the same as --groups N\n"
     "  --sizes MIN..MAX      elements per random group (default 1..65536)\n"
     "  --shapes-file FILE    one shape per line: 768 or 768,2304\n"
     "  --steps K             (default 3 with --check, else 10)\n"
     "  --scalar NAME=VALUE   a hyperparameter, e.g. lr=3e-4; repeatable\n"
     "  --grad-scale S        gradients carry a loss scale S: unscaled in the update,\n"
     "                        a step with a non-finite gradient skipped\n"
     "  --max-grad-norm X     clip the gradients by their global norm\n"
     "  --dtype f32|bf16|f16  bf16/f16: half parameters with f32 master weights: half\n"
     "                        gradients, and a half copy of each parameter the step\n"
     "                        writes; --check wants it to be the new master rounded,\n"
     "                        and within one unit of the f64 result rounded\n"
     "  --master f32          the master weights' dtype (f32)\n"
     "  --engine auto|interp|mir|c\n"
     "  --reference interp|mir|c\n"
     "                        the engine of the f64 reference (default interp; c is\n"
     "                        far faster for GPT-2's 124M elements)\n"
     "  --seed S              (default 1)\n",
     ENV_ENGINE | ENV_THREADS | ENV_CACHE | ENV_CACHE_MEMORY | ENV_CACHE_DISK | ENV_MIR_LEVEL | ENV_CC | ENV_TIER},
    {"bench", "the benchmark suite: JIT against AOT, baselines and peers, as a report",
     "usage: uopjit bench [--quick] [--out DIR] [--filter W,...] [--threads N,...]\n"
     "                    [--sizes E,...] [--engines LIST] [--no-plots]\n"
     "       uopjit bench --short | --rows | --tables | --tier | --conv | --gpu [--quick]\n"
     "\n"
     "Times the workloads (sigmoid, gelu in tanh and erf forms, adam, sumsq, softmax\n"
     "and layernorm over rows of 1024, adamw: one step over GPT-2 small's tensors) on\n"
     "every JIT engine, their\n"
     "`uopjit aot` C compiled with $CC (else cc) -O3, hand-written C and numpy,\n"
     "numexpr and torch (bench/cpu_peers.py, when a python imports numpy), each\n"
     "checked before it is timed, beside a copy kernel with the workload's memory\n"
     "traffic, STREAM and each engine's compile latency. Writes DIR/results.json\n"
     "(schema: bench/results.schema.json), DIR/report.md and PNG plots\n"
     "(bench/plots.py, matplotlib), then prints the summary.\n"
     "\n"
     "options:\n"
     "  --quick           sizes 2^10, 2^16, 2^20, a small model, fewer samples\n"
     "  --out DIR         the report directory (default bench-report, or\n"
     "                    bench-report-quick with --quick)\n"
     "  --filter W,...    only workloads whose names contain one of these\n"
     "  --threads N,...   thread counts of the JIT engines (default 1 and the cores)\n"
     "  --sizes E,...     sizes 2^E (default 10,12,...,26)\n"
     "  --engines LIST    among mir, c, auto, cuda, aot, hand, unfused, peers\n"
     "  --no-plots        no PNGs\n"
     "The second form prints the earlier text tables (bench/bench.c): --short, --rows\n"
     "and --tables (all of them), --tier (the tiered engine over time), --conv (the\n"
     "convolution backends), --gpu (the GPU section).\n"
     "\n"
     "UOPJIT_BENCH_PYTHON: the Python for the peers and the plots (default: python3\n"
     "or /usr/bin/python3, whichever imports numpy; /usr/bin/python3 for the plots).\n"
     "CC: the compiler of the AOT kernels (default cc).\n",
     ENV_THREADS | ENV_CC},
};
enum { HELP_ENTRY_COUNT = sizeof help_entries / sizeof help_entries[0] };

void cli_print_usage(FILE* out) {
  fprintf(out,
          "usage: uopjit <command> [arguments]\n"
          "       uopjit help <command> | uopjit <command> --help\n"
          "       uopjit help environment\n"
          "       uopjit --help | --version\n"
          "\ncommands:\n");
  for (int i = 0; i < HELP_ENTRY_COUNT; i++) fprintf(out, "  %-8s %s\n", help_entries[i].name, help_entries[i].summary);
  fprintf(out, "\nExit status: 0 success, 1 a failure (a run, a check, a file), 2 bad usage.\n");
  print_env_pointer(out, ENV_ALL);
}

int cli_print_command_help(FILE* out, const char* command) {
  if (strcmp(command, "environment") == 0) {
    print_environment(out);
    return 1;
  }
  for (int i = 0; i < HELP_ENTRY_COUNT; i++)
    if (strcmp(command, help_entries[i].name) == 0) {
      fputs(help_entries[i].text, out);
      print_env_pointer(out, help_entries[i].env);
      return 1;
    }
  return 0;
}
