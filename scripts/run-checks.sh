#!/usr/bin/env bash
# Runs every test stage of `make check` and ends with a summary: for each
# stage, how many tests ran, passed, failed and were skipped, and why each
# skipped test was skipped. Stages: the include graph, the call graph (on
# the objects built), the C files' layout, the guide's links and options
# (scripts/check-docs.py), the unit
# tests (also with the ASan+UBSan build), then at once the mounting
# integration tests (with a valgrind memcheck cycle), the same with the
# ASan+UBSan build, and a short fuzz run.
# With CI=true, a missing component (the shared data, FUSE, a server) fails.
set -u
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
FUZZ_SECS=${CHECK_FUZZ_SECONDS:-10}
SHARED_REAL=${TENSORFS_SHARED:-$PWD/../shared}/data/real
# make check built with WERROR=1: a make that a test runs (make install in
# test_system.py) must see the same flags, or it rebuilds every object and
# relinks ./tensorfs while the other tests run it (EACCES mid-link).
export WERROR=1
reports=$(mktemp -d /tmp/tensorfs-check.XXXXXX)
passed=0
failed=0
failed_names=()
summary=()

# stage_start NAME KIND COMMAND...: starts a stage in the background, its
# output in a log of its own; KIND says how to count its tests (unit,
# pytest, fuzz, plain). stage_end prints the oldest started stage's log
# once it ends, and its count into the summary, so the summary keeps the
# stages' order whatever order they end in. stage NAME KIND COMMAND...
# runs one stage to its end.
names=()
kinds=()
pids=()
rcs=()
next_end=0
stage_start() {
  local i=${#names[@]}
  names+=("$1")
  kinds+=("$2")
  shift 2
  local log="$reports/stage-$i.log" xml="$reports/stage-$i.xml"
  echo "=== ${names[$i]}: started"
  (
    date +%s > "$log.t0"
    if [ "${kinds[$i]}" = pytest ]; then
      # pytest's temporary directories apart from those of the stage
      # running beside it
      "$@" -rs --junitxml="$xml" --basetemp="$reports/pt$i" > "$log" 2>&1
    else
      "$@" > "$log" 2>&1
    fi
    rc=$?
    date +%s > "$log.t1"
    exit $rc
  ) &
  pids+=($!)
}

stage_end() {
  local i=$next_end
  next_end=$((i + 1))
  local name=${names[$i]} kind=${kinds[$i]} ok=1
  local log="$reports/stage-$i.log" xml="$reports/stage-$i.xml"
  # (a stage waited for already has its status kept)
  if [ -n "${rcs[$i]:-}" ]; then
    [ "${rcs[$i]}" -eq 0 ] || ok=0
  else
    wait "${pids[$i]}" || ok=0
  fi
  local secs=$(($(cat "$log.t1") - $(cat "$log.t0")))
  echo "=== $name"
  cat "$log"
  local counts
  case $kind in
    pytest) counts=$($PY scripts/stage-summary.py "$xml") || ok=0 ;;
    unit) counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
          [ -n "$counts" ] || { counts="no count printed"; ok=0; } ;;
    fuzz) counts="$(grep -c '^fuzz_.*: [0-9]*s$' "$log") targets, $(awk '/number_of_executed_units/ {n += $2} END {print n + 0}' "$log") inputs run" ;;
    *) counts=$(tail -1 "$log") ;;
  esac
  if [ $ok -eq 1 ]; then
    passed=$((passed + 1))
    echo "=== $name: ok (${secs}s)"
  else
    failed=$((failed + 1))
    failed_names+=("$name")
    echo "=== $name: FAILED (${secs}s)"
  fi
  summary+=("$([ $ok -eq 1 ] && echo ok || echo FAILED)  $name (${secs}s): ${counts//$'\n'/$'\n      '}")
}

stage() {
  stage_start "$@"
  stage_end
}

shared_present() {
  if [ -f "$SHARED_REAL/expected.json" ]; then
    echo "$SHARED_REAL: present"
    return 0
  fi
  echo "$SHARED_REAL is absent: the real-checkpoint tests are skipped"
  if [ "${CI:-}" = true ]; then
    echo "CI=true: the shared data must be there"
    return 1
  fi
  return 0
}

san_logs=$(mktemp -d /tmp/tensorfs-san.XXXXXX)
san_env=(
  TENSORFS_BIN="$PWD/build-san/tensorfs"
  TENSORFS_SAN_LOGDIR="$san_logs"
  ASAN_OPTIONS="log_path=$san_logs/asan:detect_leaks=1:abort_on_error=0"
  UBSAN_OPTIONS="log_path=$san_logs/ubsan:print_stacktrace=1:halt_on_error=1"
)
# Two workers each: most integration tests wait on mounts, servers and
# timeouts, and the two runs of the suite took over 6 of make check's 10
# minutes one test at a time (2-core VM: 181 s -> 92 s, ASan 201 s -> 104 s).
pytest=($PY -m pytest -q -p no:cacheprovider -n 2 tests/integration)

stage "shared data" plain shared_present
stage "include graph (no circles)" plain $PY scripts/include-graph.py
stage "rooms (views are plug-ins in their own files, cli/ and fuse/ reach them through the registry)" plain $PY scripts/check-rooms.py
# On the objects make check has just built: which files call which (nm).
stage "call graph (no two files call each other)" plain $PY scripts/call-graph.py
stage "docs (links, anchors, -o options)" plain $PY scripts/check-docs.py
# Every unit test the Makefile builds (UNIT_TESTS, handed in by make check).
unit_tests=(${CHECK_UNIT_TESTS:-$(cd tests/unit && ls test_*.c | sed "s/^test_//; s/\.c$//")})
for t in "${unit_tests[@]}"; do
  stage "unit tests ($t)" unit build/test_$t
done
# The long stages overlap: the two runs of the suite spend most of their
# time waiting (mounts, servers, timeouts), and the sanitizer build (make
# check hands its command in CHECK_BUILD_REST) and the fuzzers use the
# cores meanwhile. Every test keeps its own ports, mount points and
# temporary directories, so the runs never meet. One after the other they
# took 195 + 239 + 56 s of the 10 minutes, plus the builds.
stage_start "integration tests" pytest "${pytest[@]}"
stage_start "format (clang-format)" plain scripts/check-format.sh
if [ -n "${CHECK_BUILD_REST:-}" ]; then
  stage_start "build (ASan+UBSan, fuzzers)" plain sh -c "$CHECK_BUILD_REST && echo built"
  build=$((${#pids[@]} - 1))
  wait "${pids[$build]}"
  build_ok=$?
  rcs[$build]=$build_ok
else
  build_ok=0
fi
if [ "$build_ok" -eq 0 ]; then
  for t in "${unit_tests[@]}"; do
    stage_start "unit tests ($t, ASan+UBSan)" unit env ASAN_OPTIONS=detect_leaks=1 build-san/test_$t
  done
  stage_start "integration tests (ASan+UBSan)" pytest env "${san_env[@]}" "${pytest[@]}"
  stage_start "fuzz (${FUZZ_SECS}s per target)" fuzz scripts/fuzz.sh "$FUZZ_SECS"
fi
while [ "$next_end" -lt "${#names[@]}" ]; do
  stage_end
done
# Each pytest worker logs into a directory of its own (conftest.py).
san_reports=$(find "$san_logs" -type f)
if [ -n "$san_reports" ]; then
  echo "sanitizer reports:"; head -50 $san_reports
  failed=$((failed + 1)); failed_names+=("sanitizer reports")
  summary+=("FAILED  sanitizer reports: $(echo "$san_reports" | wc -l) files")
fi
rm -rf "$san_logs" "$reports"

echo
echo "=== summary"
printf '%s\n' "${summary[@]}"
[ "$failed" -eq 0 ] || echo "failed stages: ${failed_names[*]}"
echo "check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
