#!/bin/sh
# tests/test_python.sh: the Python package's pytest suite (python/tests),
# against the shared library of this build, as one entry of `make test`.
#
# The interpreter is the first of $UJ_TEST_PYTHON, python3 and
# /usr/bin/python3 that imports numpy and pytest; with none, the suite is
# skipped (one skipped test), as it is in sanitizer builds, whose library
# cannot be loaded into an interpreter not built with the sanitizer. The
# package is imported from python/ (PYTHONPATH) and loads
# $(BUILD)/libuopjit.so through UOPJIT_LIBRARY. pytest's closing counts
# become the closing line of tests/harness.h, "N passed, N failed, N
# skipped" (errors count as failed).
#
# make test runs this from the source root as $(BUILD)/tests/test_python,
# with UJ_TEST_SANFLAGS and UOPJIT_CACHE_DIR set.
set -u
build=$(cd "$(dirname "$(dirname "$0")")" && pwd)

if [ -n "${UJ_TEST_SANFLAGS:-}" ]; then
  echo "skipped: a sanitizer build's libuopjit.so does not load into python"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
fi
python=""
for candidate in ${UJ_TEST_PYTHON:-} python3 /usr/bin/python3; do
  if "$candidate" -c "import numpy, pytest" >/dev/null 2>&1; then
    python=$candidate
    break
  fi
done
if [ -z "$python" ]; then
  echo "skipped: no python3 that imports numpy and pytest (apt-get install python3-numpy python3-pytest)"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
fi

# AUTO tiers a kernel from its fourth call on (UOPJIT_TIER=4; the library's
# default is its first). Most of the suite's kernels are called a few times
# and finish their test on MIR before a background C compile of them could
# (a compile takes a few hundred milliseconds), so those compiles mostly
# checked nothing, and they were two fifths of the suite's CPU time on a
# cold cache. A kernel a test calls more often, a training loop's, still
# moves to C mid-test (test_kernel.py checks that it does and what C
# computes); test_fork.py runs its tiered scenario with the default.
log=$(mktemp)
UOPJIT_TIER=${UOPJIT_TIER:-4} UOPJIT_LIBRARY="$build/libuopjit.so" PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}" \
  "$python" -m pytest -p no:cacheprovider -q -rfEs python/tests > "$log" 2>&1
rc=$?
cat "$log"
# The last line reads e.g. "1 failed, 36 passed, 2 skipped, 1 error in 3.1s".
summary=$(tail -n 1 "$log")
rm -f "$log"
count() {
  printf '%s\n' "$summary" | tr -d '=,' |
    awk -v word="$1" '{ for (i = 1; i < NF; i++) if ($(i + 1) ~ "^" word) { print $i; exit } }'
}
passed=$(count passed) failed=$(count failed) skipped=$(count skipped) errors=$(count error)
passed=${passed:-0} failed=$((${failed:-0} + ${errors:-0})) skipped=${skipped:-0}
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
  echo "pytest exited with status $rc"
  failed=1
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
