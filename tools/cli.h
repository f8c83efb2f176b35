/* tools/cli.h: what the files of the uopjit command-line tool share: the
 * command functions main() dispatches to, error reporting, the option parser
 * of the commands that take an expression-language program (run, dump, aot),
 * loading such a program and picking the build it is specialized to, and a
 * seeded generator.
 *
 * The tool uses only the public API (include/uopjit.h), except `uopjit
 * cache`, which manages the on-disk kernel cache through jit/cache.h. Exit
 * status everywhere: 0 success, 1 a failure, 2 bad usage. */
#ifndef UJ_TOOLS_CLI_H
#define UJ_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "uopjit.h"

/* ---- commands (argv[0] is the command's name) ---------------------------------------- */

int cli_cmd_info(int argc, char** argv);  /* cli_info.c */
int cli_cmd_demo(int argc, char** argv);  /* cli_demo.c */
int cli_cmd_run(int argc, char** argv);   /* cli_run.c */
int cli_cmd_dump(int argc, char** argv);  /* cli_dump.c */
int cli_cmd_aot(int argc, char** argv);   /* cli_aot.c */
int cli_cmd_cache(int argc, char** argv); /* cli_cache.c */
int cli_cmd_conv(int argc, char** argv);  /* cli_conv.c */
int cli_cmd_optim(int argc, char** argv); /* cli_optim.c */
int cli_cmd_bench(int argc, char** argv); /* cli_bench.c, running bench/suite.c */

/* ---- help (cli_help.c) ------------------------------------------------------------------ */

/* The version the tool reports (--version, info). */
const char* cli_version(void);
/* The commands, the options common to all, and every environment variable. */
void cli_print_usage(FILE* out);
/* The help of one command: usage, options, the environment variables that
 * affect it. 0 when there is no such command. */
int cli_print_command_help(FILE* out, const char* command);

/* ---- reporting -------------------------------------------------------------------------- */

/* Prints a failed API call as "uopjit: STATUS: detail" and returns 1. */
int cli_report(uj_status_t s);
/* Prints "uopjit CMD: WHAT "ARG"" (ARG may be NULL) and a pointer to
 * `uopjit CMD --help`, and returns 2. */
int cli_usage_error(const char* cmd, const char* what, const char* arg);
/* Says that engine e cannot be used here, with the library's reason;
 * returns 1. */
int cli_engine_unavailable(uj_engine_t e);
/* "[2,3]". */
void cli_print_dims(FILE* out, int ndim, const int64_t* dims);

/* Every engine: uj_engine_t runs from 0 to CLI_ENGINE_COUNT - 1, the order
 * `info` lists them in; uj_engine_name spells each (the one list of names). */
enum { CLI_ENGINE_COUNT = (int)UJ_ENGINE_CUDA + 1 };
/* 1 and *e when text names an engine, else 0. */
int cli_parse_engine(const char* text, uj_engine_t* e);
/* "--engine wants auto, interp, mir, c or cuda, got": the usage error's
 * text, from the engines' names. */
const char* cli_engine_usage(void);

/* ---- which engine served ------------------------------------------------------------------ */

/* The engine a context of the tool was asked for: --engine when given,
 * else UOPJIT_ENGINE when it names one, else AUTO. */
uj_engine_t cli_engine_asked(int engine_given, uj_engine_t engine);

/* Under AUTO the calls of one context may be served by several engines
 * (tiered: MIR at once, C once compiled), so what served a series of
 * calls is told call by call: cli_served_mark before a call, then
 * cli_served_since after it. */
typedef struct {
  int64_t mir, interp, c;
} cli_served_mark_t;
void cli_served_mark(uj_ctx_t* ctx, cli_served_mark_t* mark);
/* The engine that served ctx's calls since mark: `asked` when it is not
 * AUTO; under AUTO the quick tier's engine (MIR, else the interpreter) when
 * it served any of them, C when the calls were tiered and it served none,
 * and uj_ctx_engine(ctx) when nothing was tiered (tiering off, no C). */
uj_engine_t cli_served_since(uj_ctx_t* ctx, uj_engine_t asked, const cli_served_mark_t* mark);
/* "c", or "c (steps 1-3 on mir)", "c (4 of 10 steps on mir)": the engine
 * of the last of n calls and, when others served some of them, which and
 * how many (`call` names one: "step", "run"). */
void cli_served_summary(const uj_engine_t* served, int n, const char* call, char* out, size_t cap);


/* ---- seeded values ------------------------------------------------------------------------ */

/* splitmix64: small, seedable and identical on every platform, so that runs
 * are reproducible. */
uint64_t cli_rng_next(uint64_t* state);
/* Uniform in [-1, 1). */
float cli_rng_float(uint64_t* state);

/* ---- timing ------------------------------------------------------------------------------- */

/* Seconds on the monotonic clock. */
double cli_now_seconds(void);
/* The median of times[0..n) (n >= 1), which it sorts; of an even count the
 * mean of the two middle values. */
double cli_median(double* times, int n);

/* ---- options of the commands that take a program ------------------------------------------ */

/* Which options a command accepts besides --shape, --dtype and --scalar,
 * which all of them take (they pick the build: input ranks, dtypes, size-1
 * axes). */
enum {
  CLI_ACCEPT_RUN = 1,       /* --engine --repeat --seed --check -v */
  CLI_ACCEPT_DUMP_KIND = 2, /* --ir-raw --ir --c --mir --cuda */
  CLI_ACCEPT_OUTPUT = 4     /* -o FILE, --output FILE */
};

/* What --shape, --dtype and --scalar say about one input (named), or
 * about every input not named (the plain forms). See cli_inputs.c. */
typedef struct {
  const char* name; /* into argv, name_len bytes; NULL for the plain forms */
  int name_len;
  int has_shape, is_scalar, ndim;
  int64_t dims[UJ_MAX_DIMS];
  int has_dtype;
  uj_dtype_t dtype;
} cli_input_spec_t;

enum { CLI_MAX_NAMED_INPUTS = 64 };

typedef struct {
  cli_input_spec_t all; /* the plain forms; defaults [1000000] and f32 */
  cli_input_spec_t named[CLI_MAX_NAMED_INPUTS];
  int named_count;
  int specialized; /* --shape, --scalar or --dtype was given */
} cli_inputs_t;

/* The shape and dtype one input of a program gets. */
typedef struct {
  uj_dtype_t dtype;
  int ndim;
  int64_t dims[UJ_MAX_DIMS];
} cli_input_t;

void cli_inputs_init(cli_inputs_t* in);
/* Records option ("--shape", "--dtype" or "--scalar") with its value; 0,
 * or the exit status of a usage error (malformed, conflicting) after
 * printing it. */
int cli_inputs_option(const char* cmd, const char* option, const char* value, cli_inputs_t* in);
/* 0 when every name the options use is an input of p, else 2 after
 * printing the name and p's inputs. */
int cli_check_input_names(const char* cmd, const uj_program_t* p, const cli_inputs_t* in);
/* out[i] for each input i of p; 0, or 2 after printing a conflict with a
 * dtype the program declares. */
int cli_resolve_inputs(const char* cmd, const uj_program_t* p, const cli_inputs_t* in, cli_input_t* out);

typedef struct {
  const char* source;      /* the SOURCE argument; NULL with source_file */
  const char* source_file; /* --file FILE ("-": stdin); NULL for none */
  cli_inputs_t inputs;
  /* run */
  uj_engine_t engine;
  int engine_given; /* else the context's default: UOPJIT_ENGINE, else auto */
  int repeat;
  uint64_t seed;
  int check;
  int verbose; /* -v: what served the last run, and each tier's compile time */
  /* dump */
  uj_dump_t dump;
  /* aot */
  const char* output_path; /* NULL when not given */
} cli_options_t;

/* Options come as "--name value" or "--name=value" (and "-o FILE"); the
 * one other argument is the program source, unless --file names a file
 * that holds it. Returns 0, or the exit status of a usage error after
 * printing it. */
int cli_parse_options(const char* cmd, int argc, char** argv, unsigned accepted, cli_options_t* o);

/* ---- programs ------------------------------------------------------------------------------- */

/* Parses the options' source, the argument or --file's text (a bare
 * expression such as '1/(1+exp(-x))' is taken as 'y = EXPR'), checks that every name in --shape, --dtype and
 * --scalar is an input and resolves each input's shape and dtype into
 * *inputs (malloc'ed, one per input; the caller frees it). parsed, when
 * not NULL, receives the text that parsed (the source, or 'y = ' and the
 * source; malloc'ed). Returns 0 with *p set, or the exit status after
 * printing the problem (*p, *inputs and *parsed are then NULL). */
int cli_load_program(const char* cmd, const cli_options_t* o, uj_program_t** p, cli_input_t** inputs,
                     char** parsed);

/* The magnitude form of a source that parsed, for the error bound of a
 * reduction (see cli_magnitude.c): every sum(E...) and mean(E...) becomes
 * sum(abs(E)...), mean(abs(E)...). *reductions receives how many calls
 * were rewritten. malloc'ed; NULL when out of memory. */
char* cli_magnitude_source(const char* source, int* reductions);

/* Makes a parsed program build the uop program for these inputs (their
 * dtypes, ranks and size-1 axes) without running it, so that
 * uj_program_dump shows that build. */
uj_status_t cli_specialize(uj_program_t* p, const cli_input_t* inputs);

/* The options' program as uj_program_dump(what) gives it, for the build
 * the options describe (always, or only when --shape, --scalar or --dtype
 * was given: otherwise a dump shows the default build); UJ_DUMP_C_AOT's
 * text opens with a comment naming the inputs and outputs in the entry
 * points' order, with their dtypes and ranks. Returns 0 with
 * *text set (the caller frees it), or the exit status after printing the
 * problem. */
int cli_program_text(const char* cmd, const cli_options_t* o, uj_dump_t what, int always_specialize, char** text);

/* ---- memory (cli_memory.c) ------------------------------------------------------------------ */

/* 0 when `bytes` fit in what this process can still allocate (available
 * memory, and the room ulimit -v or -d leaves); else 1 after printing the
 * bytes needed and available in bytes and GiB. overflow: the count itself
 * overflowed. */
int cli_check_memory(const char* cmd, uint64_t bytes, int overflow);
/* cli_check_memory for what `run` will allocate for p with these inputs:
 * inputs, outputs and, with check, their f64 copies. */
int cli_check_run_memory(const char* cmd, uj_program_t* p, const cli_input_t* inputs, int check);
/* Prints "uopjit: out of memory allocating WHAT (N bytes)" and returns 1:
 * for the tool's own allocations, which leave no library message. */
int cli_out_of_memory(const char* what, uint64_t bytes);

#endif
