#!/usr/bin/env bash
# Runs the libFuzzer targets for SECONDS each (default 60), as many at once
# as the machine has cores (FUZZ_JOBS to say otherwise): each target is one
# process on one core, so two cores halve the stage's time. New inputs go
# to a scratch corpus so the committed seeds stay as they are; a crash
# leaves its input in build/fuzz-artifacts/ and fails the run. Each
# target's lines are printed whole once it ends, in the order they end.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
art=build/fuzz-artifacts
mkdir -p "$art"
# Every target there is (tests/fuzz/fuzz_NAME.c), unless FUZZ_TARGETS names some.
all=$(ls tests/fuzz/fuzz_*.c | sed 's|.*/fuzz_||; s|\.c$||')
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}

one() { # TARGET: runs it; its report on stdout, the failure on stderr
  local target=$1 work=build/fuzz-corpus-$1
  mkdir -p "$work"
  if ! build/fuzz_"$target" -max_total_time="$secs" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$art/$target-" -print_final_stats=1 \
      "$work" "tests/fuzz/corpus_$target" 2>build/fuzz-"$target".log; then
    tail -40 build/fuzz-"$target".log >&2
    echo "fuzz_$target: FAILED (see build/fuzz-$target.log and $art/)" >&2
    return 1
  fi
  echo "fuzz_$target: ${secs}s"
  grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb" \
    build/fuzz-"$target".log || true
}

failed=0
running=0
for target in ${FUZZ_TARGETS:-$all}; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  # a target's report in one piece: written to a file, printed when done
  (
    rc=0
    one "$target" >build/fuzz-"$target".out || rc=$?
    cat build/fuzz-"$target".out
    exit $rc
  ) &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
exit $failed
