/* tools/cli_info.c: `uopjit info`, the version, the engines this build and
 * machine can use (and why not, for those it cannot), what auto does with
 * them, and the devices. */
/* sysconf needs POSIX; the Makefile's _GNU_SOURCE covers it, this keeps a
 * bare `cc -std=c11` working too. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* Why engine e cannot run: the library's sentence, from choosing it on a
 * context (which fails and leaves the context as it was). */
static const char* unavailable_reason(uj_ctx_t* ctx, uj_engine_t e) {
  static const char prefix[] = "engine ";
  if (uj_ctx_set_engine(ctx, e) == UJ_OK) return "";
  const char* why = uj_last_error();
  /* "engine c is not available: REASON": the line names the engine already */
  const char* colon = strncmp(why, prefix, sizeof prefix - 1) == 0 ? strstr(why, ": ") : NULL;
  return colon ? colon + 2 : why;
}

/* UOPJIT_TIER as the library reads it (uj_env_check has vouched for it):
 * calls a kernel makes before its C compile starts, 0 for no tiering. */
static long tier_calls(void) {
  const char* text = getenv("UOPJIT_TIER");
  return text && *text ? strtol(text, NULL, 10) : 1;
}

/* What auto does on this machine, as jit/engine.c and jit/tier.c decide:
 * on host tensors tiered (a quick tier first, C once compiled) when
 * tiering is on and C works, else the first engine that runs of mir, c,
 * interp; on GPU tensors cuda. One engine's name would be wrong for tiered
 * auto, whose kernels run on one engine and then on another. */
static void print_auto(uj_ctx_t* ctx) {
  int mir = uj_engine_available(ctx, UJ_ENGINE_MIR), c = uj_engine_available(ctx, UJ_ENGINE_C);
  long calls = tier_calls();
  printf("  %-8s available: ", uj_engine_name(UJ_ENGINE_AUTO));
  if (calls > 0 && c && mir)
    printf("mir, then c once a kernel is compiled in the background");
  else if (calls > 0 && c) /* docs/ENGINES.md: the interpreter only where it beats waiting for the compiler */
    printf("interp while c compiles in the background (calls under 65536 elements), else c at once");
  else
    printf("%s alone (%s)", mir ? "mir" : c ? "c" : "interp", !c ? "c is not available" : "UOPJIT_TIER=0");
  if (calls > 1 && c) printf(" (the compile starts after %ld calls: UOPJIT_TIER)", calls);
  if (uj_engine_available(ctx, UJ_ENGINE_CUDA)) printf("; cuda for GPU tensors");
  printf("\n");
}

int cli_cmd_info(int argc, char** argv) {
  if (argc > 1) return cli_usage_error("info", "takes no arguments, got", argv[1]);
  uj_ctx_t* ctx = uj_ctx_new();
  if (!ctx) return cli_report(UJ_ERR_OOM);

  printf("uopjit %s\n", cli_version());
  printf("engines:\n");
  for (int i = 0; i < CLI_ENGINE_COUNT; i++) {
    uj_engine_t e = (uj_engine_t)i;
    if (e == UJ_ENGINE_AUTO) print_auto(ctx);
    else if (uj_engine_available(ctx, e)) printf("  %-8s available\n", uj_engine_name(e));
    else printf("  %-8s not available: %s\n", uj_engine_name(e), unavailable_reason(ctx, e));
  }
  uj_engine_t from_env = cli_engine_asked(0, UJ_ENGINE_AUTO);
  if (from_env != UJ_ENGINE_AUTO) printf("  (UOPJIT_ENGINE: a new context runs on %s)\n", uj_engine_name(from_env));

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
