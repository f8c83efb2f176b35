#!/bin/sh
# tests/stress_cache.sh: the disk-cache stress test at full size: 4 processes
# x 150 runs of `uopjit run --check --engine c` on a few programs sharing one
# cache directory, with `uopjit cache clear` in a loop and a process damaging
# the cache's files meanwhile (tests/test_cache_stress.c). `make test` runs a
# bounded version of the same test.
#
#   tests/stress_cache.sh [procs [runs]]     defaults: 4 150
#
# BUILD (default build) names the build directory; UJ_TEST_SEED fixes the
# damaging process's random choices.
set -e
cd "$(dirname "$0")/.."
build=${BUILD:-build}
make -s "$build/uopjit" "$build/tests/test_cache_stress" BUILD="$build"
exec "$build/tests/test_cache_stress" --procs "${1:-4}" --runs "${2:-150}"
