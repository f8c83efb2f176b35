/* tools/cli_info.c: `uopjit info`, the version, the engines this build and
 * machine can use, and the devices. */
/* sysconf needs POSIX; the Makefile's _GNU_SOURCE covers it, this keeps a
 * bare `cc -std=c11` working too. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <unistd.h>

#include "cli.h"

int cli_cmd_info(int argc, char** argv) {
  if (argc > 1) return cli_usage_error("info", "takes no arguments, got", argv[1]);
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx) return cli_report(UJ_ERR_OOM);

  printf("uopjit %s\n", cli_version());
  printf("engines:\n");
  for (int i = 0; i < CLI_ENGINE_COUNT; i++)
    printf("  %-8s %s\n", uj_engine_name((uj_engine_t)i),
           uj_engine_available(ctx, (uj_engine_t)i) ? "available" : "not available");
  printf("  (this context runs on %s)\n", uj_engine_name(uj_ctx_engine(ctx)));

  printf("devices:\n");
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores > 0)
    printf("  cpu      %ld cores\n", cores);
  else
    printf("  cpu      yes\n");
  char name[256];
  int arch = 0, sms = 0;
  if (uj_ctx_device(ctx, name, sizeof name, &arch, &sms) == UJ_OK)
    printf("  cuda     %s, sm_%d, %d multiprocessors\n", name, arch, sms);
  else
    printf("  cuda     none: %s\n", uj_last_error());

  uj_ctx_free(ctx);
  return 0;
}
