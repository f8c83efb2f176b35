#!/bin/sh
# tests/test_fuzz_replay.sh: the fuzz targets of tests/fuzz/, each run once
# over every input of its committed seed corpus (`make fuzz-replay`), as one
# entry of `make debug`, the sanitizer run.
#
# The targets are built with clang, ASan and UBSan and libFuzzer (see the
# Makefile's fuzz section), under build/fuzz, whatever the build's own
# flags. clang's UBSan reports what gcc's does not (a zero offset applied to
# a null pointer, for one), so a seed that trips a sanitizer fails here
# rather than only in a later `make fuzz`. Skipped (one skipped test, saying
# why) where $FUZZ_CC (clang) or its libFuzzer runtime is missing (Debian:
# libclang-rt-14-dev).
#
# make debug runs this from the source root as $(BUILD)/tests/test_fuzz_replay,
# with UJ_TEST_MAKE_ARGS set. The closing line follows tests/harness.h.
set -u
build=$(dirname "$(dirname "$0")")
make_args=${UJ_TEST_MAKE_ARGS:-BUILD=$build}
fuzz_cc=${FUZZ_CC:-clang}

skip() {
  echo "skipped: $*"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
}

command -v "$fuzz_cc" >/dev/null 2>&1 || skip "no $fuzz_cc to build the fuzz targets with"
probe=$(mktemp -d)
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
  'int LLVMFuzzerTestOneInput(const uint8_t* d, size_t n) { (void)d; (void)n; return 0; }' > "$probe/probe.c"
if ! "$fuzz_cc" -fsanitize=fuzzer,address,undefined -o "$probe/probe" "$probe/probe.c" >/dev/null 2>&1; then
  rm -rf "$probe"
  skip "$fuzz_cc cannot link -fsanitize=fuzzer (no libFuzzer runtime; Debian: libclang-rt-14-dev)"
fi
rm -rf "$probe"

echo "fuzz_targets_replay_their_seed_corpus"
# shellcheck disable=SC2086  # make_args is one word per variable
if make --no-print-directory -s $make_args DEBUG=0 TSAN=0 fuzz-replay; then
  echo "1 passed, 0 failed, 0 skipped"
else
  echo "  FAIL tests/test_fuzz_replay.sh: a fuzz target failed on its seed corpus (output above)"
  echo "0 passed, 1 failed, 0 skipped"
fi
