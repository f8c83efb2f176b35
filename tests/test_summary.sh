#!/bin/sh
# tests/test_summary.sh RESULT...: the end of `make test`.
#
# Reads the one-line results tests/run_test.sh wrote (NAME STATUS PASSED
# FAILED SKIPPED SECONDS CPU_SECONDS), prints the full log of every binary that failed,
# the slowest binaries, and last the line "N passed, N failed, N skipped"
# summed over all of them. Exits non-zero when anything failed or a result
# is missing (a binary that never ran).
passed=0 failed=0 skipped=0 bad=""
for result in "$@"; do
  if [ ! -f "$result" ]; then
    echo "no result: $result"
    failed=$((failed + 1))
    bad="$bad $(basename "$result" .result)"
    continue
  fi
  read -r name status p f s _ _ < "$result"
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  if [ "$status" = failed ]; then
    bad="$bad $name"
    log=${result%.result}.log
    echo "==== $name failed; its output ($log):"
    cat "$log"
    echo "==== end of $name"
  fi
done

# The three slowest, which set the wall time of a parallel run.
slowest=$(cat "$@" 2>/dev/null | sort -k6 -n -r | head -n 3 |
          awk '{ printf "%s%s %s s (cpu %s s)", sep, $1, $6, $7; sep = ", " }')
[ -n "$slowest" ] && echo "slowest: $slowest"
[ -n "$bad" ] && echo "failing:$bad"
echo "$passed passed, $failed failed, $skipped skipped"
[ -z "$bad" ] && [ "$failed" -eq 0 ]
