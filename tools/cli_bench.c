/* tools/cli_bench.c: `uopjit bench`, the benchmark. The suite (bench/suite.c)
 * writes a report directory; the earlier text-only modes of the bench
 * program stay reachable under the same command: --short and --rows (the
 * tables of bench/bench.c), --tier, --conv and --gpu (bench/gpu_device.sh
 * runs `uopjit bench --gpu`), and --groups for bench.c's multi-tensor
 * tables. The bench's sources live in bench/ and are linked into the tool;
 * they read the programs bench/<name>.uj at run time from the source tree
 * the tool was built in. */
#include <string.h>

#include "cli.h"

int bench_main(int argc, char** argv);       /* bench/bench.c */
int bench_suite_main(int argc, char** argv); /* bench/suite.c */

int cli_cmd_bench(int argc, char** argv) {
  static const char* const table_modes[] = {"--short", "--rows", "--tier", "--tier-child", "--conv", "--gpu", "--tables",
                                            "--groups"};
  if (argc > 1)
    for (size_t k = 0; k < sizeof table_modes / sizeof table_modes[0]; k++)
      if (strcmp(argv[1], table_modes[k]) == 0) {
        if (strcmp(argv[1], "--tables") == 0) argv[1] = argv[0], argv++, argc--;
        return bench_main(argc, argv);
      }
  return bench_suite_main(argc, argv);
}
