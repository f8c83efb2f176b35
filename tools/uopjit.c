/* tools/uopjit.c: the uopjit command-line tool's entry point: the table of
 * commands and the dispatch, help and version included (docs/CLI.md, DESIGN
 * section 14). Each command lives in a file of its own
 * (tools/cli_<command>.c), its help text, which says what it does, in
 * tools/cli_help.c; what they share is in tools/cli.h. The tool uses only
 * the public API (include/uopjit.h), so it doubles as an example of a
 * complete client; `uopjit cache` alone reaches into the library's kernel
 * cache (jit/cache/cache.h).
 *
 * `uopjit --help`, `uopjit help CMD` and `uopjit CMD --help` print help to
 * stdout and exit 0; `uopjit --version` the version. A new command is a new
 * function, a row in the table below and an entry in cli_help.c. Exit
 * status: 0 success, 1 a failure, 2 bad usage (an invalid UOPJIT_* value
 * included). */
#include <string.h>

#include "cli.h"

typedef struct {
  const char* name;
  int (*run)(int argc, char** argv); /* argv[0] is the command name */
} command_t;

static const command_t commands[] = {
    {"info", cli_cmd_info}, {"demo", cli_cmd_demo},   {"run", cli_cmd_run},   {"dump", cli_cmd_dump},
    {"aot", cli_cmd_aot},   {"cache", cli_cmd_cache}, {"conv", cli_cmd_conv}, {"optim", cli_cmd_optim},
    {"bench", cli_cmd_bench},
};

/* `uopjit help [CMD]` (`uopjit help --help` is the general help too). */
static int help(int argc, char** argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    cli_print_usage(stdout);
    return 0;
  }
  if (argc > 2) {
    fprintf(stderr, "uopjit help: takes one command, got also \"%s\"\n", argv[2]);
    return 2;
  }
  if (cli_print_command_help(stdout, argv[1])) return 0;
  fprintf(stderr, "uopjit help: unknown command \"%s\"; `uopjit --help` lists them\n", argv[1]);
  return 2;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    cli_print_usage(stderr);
    return 2;
  }
  const char* first = argv[1];
  if (strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0) return help(1, argv + 1);
  if (strcmp(first, "--version") == 0 || strcmp(first, "-V") == 0) {
    printf("uopjit %s\n", cli_version());
    return 0;
  }
  if (strcmp(first, "help") == 0) return help(argc - 1, argv + 1);
  /* an invalid UOPJIT_* value is bad usage, refused before any work (help
   * and the version still answer, and the help lists the variables) */
  if (uj_env_check() != UJ_OK) {
    fprintf(stderr, "uopjit: %s\n", uj_last_error());
    return 2;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    if (strcmp(first, commands[i].name) != 0) continue;
    /* "--help" anywhere asks for help (a program source never starts with
     * "--"); "-h" does not, since for run, dump and aot it is a source
     * (y = -h). */
    for (int k = 2; k < argc; k++)
      if (strcmp(argv[k], "--help") == 0) {
        cli_print_command_help(stdout, first);
        return 0;
      }
    return commands[i].run(argc - 1, argv + 1);
  }
  fprintf(stderr, "uopjit: unknown %s \"%s\"; `uopjit --help` lists the commands\n",
          first[0] == '-' ? "option" : "command", first);
  return 2;
}
