#!/bin/sh
# tests/run_test.sh BINARY RESULT: runs one test binary for `make test`.
#
# The binary's output goes to BINARY.log; RESULT gets one line,
#   NAME STATUS PASSED FAILED SKIPPED SECONDS CPU_SECONDS
# and the same facts are printed as one line when the binary ends, so that a
# parallel `make -j test` shows progress binary by binary. SECONDS is wall
# time; CPU_SECONDS (user + system, from the shell's `times`, the binary
# being this shell's only child) tells what a binary costs when the machine
# is shared. The counts come
# from the last "N passed, N failed, N skipped" line of the log (a crash or a
# sanitizer report can print after it). STATUS is "failed" when a check
# failed, when the binary exited non-zero, or when it printed no summary
# (then it counts as one failed test); "skipped" when it skipped everything
# it had; else "passed". The script itself always succeeds, so that make
# runs every binary; tests/test_summary.sh decides the outcome.
bin=${1:?usage: run_test.sh BINARY RESULT}
result=${2:?usage: run_test.sh BINARY RESULT}
name=$(basename "$bin")
log=$bin.log

start=$(date +%s.%N)
# A binary that runs long says so every 30 s, with the last line it logged,
# so that make test is never silent for longer.
"$bin" > "$log" 2>&1 &
pid=$!
(
  waited=0
  while sleep 30; do
    kill -0 "$pid" 2>/dev/null || exit 0
    waited=$((waited + 30))
    printf '  ... %s: %d s, at: %s\n' "$name" "$waited" "$(tail -n 1 "$log" 2>/dev/null | cut -c1-70)"
  done
) &
watcher=$!
wait "$pid"
rc=$?
kill "$watcher" 2>/dev/null
wait "$watcher" 2>/dev/null
end=$(date +%s.%N)
seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
# The second line of `times` is the children's "XmY.Zs XmY.Zs" (user,
# system). It must run in this shell, not a subshell (a forked subshell
# has no children of its own yet), hence the file.
times > "$log.times"
cpu=$(awk 'NR == 2 {
  t = 0
  for (i = 1; i <= 2; i++) { split($i, p, "m"); t += p[1] * 60 + p[2] }
  printf "%.1f", t
}' "$log.times")
rm -f "$log.times"

last=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1)
note=""
if [ -n "$last" ]; then
  set -- $last
  passed=$1 failed=$3 skipped=$5
  if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1
    note=" (exited with status $rc after its summary)"
  fi
else
  passed=0 failed=1 skipped=0
  note=" (exited with status $rc without a summary line)"
fi

if [ "$failed" -ne 0 ]; then
  status=failed
elif [ "$passed" -eq 0 ] && [ "$skipped" -ne 0 ]; then
  status=skipped
else
  status=passed
fi

echo "$name $status $passed $failed $skipped $seconds $cpu" > "$result"
printf '%-24s %-7s %4d passed, %d failed, %d skipped  %6s s (cpu %s s)%s\n' \
  "$name" "$status" "$passed" "$failed" "$skipped" "$seconds" "$cpu" "$note"
