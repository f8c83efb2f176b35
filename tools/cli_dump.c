/* tools/cli_dump.c: `uopjit dump`, an expression-language program as loop IR
 * (as emitted or after the passes) or as an engine's code, for the build
 * --shape, --scalar and --dtype pick. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_cmd_dump(int argc, char** argv) {
  cli_options_t o;
  int rc = cli_parse_options("dump", argc, argv, CLI_ACCEPT_DUMP_KIND, &o);
  if (rc) return rc;
  char* text;
  if ((rc = cli_program_text("dump", &o, o.dump, 0, &text)) != 0) return rc;
  fputs(text, stdout);
  if (text[0] && text[strlen(text) - 1] != '\n') putchar('\n');
  free(text);
  return 0;
}
