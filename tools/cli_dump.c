/* tools/cli_dump.c: `uopjit dump`, an expression-language program as loop IR
 * (as emitted or after the passes) or as an engine's code, for the build
 * --shape, --scalar and --dtype pick. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int dump_main(const cli_options_t* o, uj_program_t** p, uj_ctx_t** ctx, char** text) {
  int rc = cli_load_program("dump", o, p);
  if (rc) return rc;
  uj_status_t s;
  if (o->specialized && (s = cli_specialize(*p, o)) != UJ_OK) return cli_report(s);
  if (!(*ctx = uj_ctx_new())) return cli_report(UJ_ERR_OOM);
  *text = uj_program_dump(*ctx, *p, UJ_FORWARD, o->dump, NULL);
  if (!*text) {
    /* Only these two need an engine; the others fail for the usual reasons. */
    if (o->dump == UJ_DUMP_MIR) return cli_engine_unavailable(UJ_ENGINE_MIR);
    if (o->dump == UJ_DUMP_CUDA) return cli_engine_unavailable(UJ_ENGINE_CUDA);
    return cli_report(UJ_ERR_INVALID);
  }
  fputs(*text, stdout);
  if ((*text)[0] && (*text)[strlen(*text) - 1] != '\n') putchar('\n');
  return 0;
}

int cli_cmd_dump(int argc, char** argv) {
  cli_options_t o;
  int rc = cli_parse_options("dump", argc, argv, CLI_ACCEPT_DUMP_KIND, &o);
  if (rc) return rc;
  uj_program_t* p = NULL;
  uj_ctx_t* ctx = NULL;
  char* text = NULL;
  rc = dump_main(&o, &p, &ctx, &text);
  free(text);
  uj_ctx_free(ctx);
  uj_program_free(p);
  return rc;
}
