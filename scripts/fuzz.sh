#!/usr/bin/env bash
# Runs the libFuzzer targets for SECONDS each (default 60). New inputs go to a
# scratch corpus so the committed seeds stay as they are; a crash leaves its
# input in build/fuzz-artifacts/ and fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
art=build/fuzz-artifacts
mkdir -p "$art"
# Every target there is (tests/fuzz/fuzz_NAME.c), unless FUZZ_TARGETS names some.
all=$(ls tests/fuzz/fuzz_*.c | sed 's|.*/fuzz_||; s|\.c$||')
for target in ${FUZZ_TARGETS:-$all}; do
  bin=build/fuzz_$target
  work=build/fuzz-corpus-$target
  mkdir -p "$work"
  echo "fuzz_$target: ${secs}s"
  "$bin" -max_total_time="$secs" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$art/$target-" -print_final_stats=1 \
    "$work" "tests/fuzz/corpus_$target" 2>build/fuzz-$target.log || {
      tail -40 build/fuzz-$target.log >&2
      echo "fuzz_$target: FAILED (see build/fuzz-$target.log and $art/)" >&2
      exit 1
    }
  grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb" build/fuzz-$target.log || true
done
