/* tools/uopjit.c: the uopjit command-line tool's entry point: the table of
 * commands, the usage text and the dispatch. Each command lives in a file
 * of its own (tools/cli_<command>.c); what they share is in tools/cli.h.
 * The tool uses only the public API (include/uopjit.h), so it doubles as an
 * example of a complete client; `uopjit cache` alone reaches into the
 * library's kernel cache (jit/cache.h).
 *
 *   uopjit info    version, engines and devices
 *   uopjit demo    a 2-D convolution written as uops, run on the interpreter
 *                  and checked against plain loops
 *   uopjit run     an expression-language program on random inputs: timing,
 *                  or (--check) a comparison against the interpreter in f64
 *   uopjit dump    the loop IR or engine code of an expression-language program
 *   uopjit aot     an expression-language program as a self-contained C file
 *   uopjit cache   the on-disk kernel cache: stats, list, clear
 *   uopjit conv    one 2-D convolution on a chosen or automatic backend:
 *                  timing, or (--check) a comparison with the reference in f64
 *
 * A new command is a new function plus a row in the table. Exit status: 0
 * success, 1 a failure, 2 bad usage (an invalid UOPJIT_* value included). */
#include <string.h>

#include "cli.h"

typedef struct {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv); /* argv[0] is the command name */
} command_t;

static const command_t commands[] = {
    {"info", "version, engines and devices", cli_cmd_info},
    {"demo", "a 2-D convolution by uops, checked against plain loops", cli_cmd_demo},
    {"run", "an expression-language program on random inputs: timing or --check", cli_cmd_run},
    {"dump", "the loop IR or engine code of an expression-language program", cli_cmd_dump},
    {"aot", "an expression-language program as a self-contained C file", cli_cmd_aot},
    {"cache", "the on-disk kernel cache: stats, list or clear", cli_cmd_cache},
    {"conv", "a 2-D convolution on a backend: timing or --check", cli_cmd_conv},
};

static int usage(void) {
  fprintf(stderr, "usage: uopjit <command> [arguments]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(stderr, "  %-8s %s\n", commands[i].name, commands[i].summary);
  fprintf(stderr,
          "\n"
          "  uopjit run 'SOURCE' [--shape 1000000 | --shape 64,128] [--scalar NAME[,NAME...]]\n"
          "             [--dtype f32|f64] [--engine auto|interp|mir|c|cuda] [--repeat N] [--seed S]\n"
          "             [--check]\n"
          "      Inputs are seeded random values in [0.5, 1.5) of the given shape (default\n"
          "      1000000) and dtype (default f32); --scalar inputs are 0-d (lr 1e-3, b1 0.9,\n"
          "      b2 0.999, eps 1e-8 by name). Prints the median time of N runs (default 5),\n"
          "      ns/element and GB/s; --check instead compares every output with the\n"
          "      interpreter in f64.\n"
          "  uopjit dump [--ir-raw | --ir | --c | --mir | --cuda] 'SOURCE' [--shape ...]\n"
          "              [--scalar ...] [--dtype ...]\n"
          "      The program as emitted (--ir-raw), after the passes (--ir, the default) or\n"
          "      as engine code; --shape, --scalar and --dtype pick the specialization.\n"
          "  uopjit aot 'SOURCE' -o FILE [--scalar NAME[,NAME...]] [--dtype f32|f64]\n"
          "             [--shape ...]\n"
          "      Writes FILE, a C file that needs only the C library, with the entry points\n"
          "      uopjit_kernel_run and uopjit_kernel_output_dims (see UJ_DUMP_C_AOT in\n"
          "      uopjit.h). --scalar inputs are 0-d, the others have --shape's rank\n"
          "      (default 1) and size-1 axes where --shape has a 1; sizes are run-time\n"
          "      arguments. FILE is replaced whole or not at all.\n"
          "  uopjit cache stats | list | clear\n"
          "      The on-disk kernel cache of the C and CUDA engines: its directory, whether\n"
          "      it is usable, entries and bytes per kind (stats); one line per entry\n"
          "      (list); every entry removed (clear). The directory is $UOPJIT_CACHE_DIR,\n"
          "      else $XDG_CACHE_HOME/uopjit, else ~/.cache/uopjit; UOPJIT_CACHE=0 turns\n"
          "      the cache off.\n"
          "  uopjit conv [--n 1] [--hw 56 | --h H --w W] [--c 64] [--k 64] [--kernel 3]\n"
          "              [--stride 1] [--pad KERNEL/2] [--bias] [--backend auto|ref|cpu_direct|...]\n"
          "              [--op forward|backward-data|backward-filter] [--dtype f32|f64]\n"
          "              [--engine auto|interp|mir|c] [--cache-filter] [--repeat 5] [--seed 1] [--check]\n"
          "      x [N,H,W,C] and w [K,KERNEL,KERNEL,C] (and dy) get seeded values in [-1, 1).\n"
          "      Prints the backend that ran and the median time of the runs with GFLOP/s;\n"
          "      --check instead compares with the ref backend in f64 (on --engine), each\n"
          "      element within 1e-6 (cpu_winograd: 1e-5) * KERNEL^2*C * max|x| * max|w|.\n"
          "      --cache-filter passes a filter_key, so a backend keeps its filter transform.\n"
          "  A SOURCE that is a bare expression, such as '1/(1+exp(-x))', means 'y = EXPR'.\n"
          "\n"
          "  e.g. uopjit run --check '1/(1+exp(-(a*x+b)))' --scalar a,b\n"
          "       uopjit aot '1/(1+exp(-(a*x+b)))' --scalar a,b -o sigmoid.c\n");
  return 2;
}

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  /* an invalid UOPJIT_* value is bad usage, refused before any work */
  if (uj_env_check() != UJ_OK) {
    fprintf(stderr, "uopjit: %s\n", uj_last_error());
    return 2;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "uopjit: unknown command \"%s\"\n", argv[1]);
  return usage();
}
