#!/usr/bin/env bash
# Runs every test stage of `make check` and ends with a summary: for each
# stage, how many tests ran, passed, failed and were skipped, and why each
# skipped test was skipped. Stages: the include graph, the guide's links
# and options (scripts/check-docs.py), the unit tests, the mounting
# integration tests (with a valgrind memcheck cycle), a short fuzz run, then
# unit and integration tests again with the ASan+UBSan build.
# With CI=true, a missing component (the shared data, FUSE, a server) fails.
set -u
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
FUZZ_SECS=${CHECK_FUZZ_SECONDS:-10}
SHARED_REAL=${TENSORFS_SHARED:-$PWD/../shared}/data/real
reports=$(mktemp -d /tmp/tensorfs-check.XXXXXX)
passed=0
failed=0
failed_names=()
summary=()

# stage NAME KIND COMMAND...: KIND says how to count its tests (unit,
# pytest, fuzz, plain); the count goes into the summary.
stage() {
  local name=$1 kind=$2
  shift 2
  local log="$reports/stage-$((${#summary[@]} + 1)).log" xml="$reports/stage-$((${#summary[@]} + 1)).xml"
  echo "=== $name"
  local t0=$SECONDS ok=1
  if [ "$kind" = pytest ]; then
    "$@" -rs --junitxml="$xml" 2>&1 | tee "$log"
  else
    "$@" 2>&1 | tee "$log"
  fi
  [ "${PIPESTATUS[0]}" -eq 0 ] || ok=0
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
    echo "=== $name: ok ($((SECONDS - t0))s)"
  else
    failed=$((failed + 1))
    failed_names+=("$name")
    echo "=== $name: FAILED ($((SECONDS - t0))s)"
  fi
  summary+=("$([ $ok -eq 1 ] && echo ok || echo FAILED)  $name ($((SECONDS - t0))s): ${counts//$'\n'/$'\n      '}")
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
# Two workers: most integration tests wait on mounts, servers and timeouts,
# and the two runs of the suite took over 6 of make check's 10 minutes
# one test at a time (2-core VM: 181 s -> 92 s, ASan 201 s -> 104 s).
pytest=($PY -m pytest -q -p no:cacheprovider -n 2 tests/integration)

stage "shared data" plain shared_present
stage "include graph (no circles)" plain $PY scripts/include-graph.py
stage "format (clang-format)" plain scripts/check-format.sh
stage "docs (links, anchors, -o options)" plain $PY scripts/check-docs.py
stage "unit tests (format)" unit build/test_format
stage "unit tests (sources)" unit build/test_sources
stage "unit tests (zarr)" unit build/test_zarr
stage "integration tests" pytest "${pytest[@]}"
stage "fuzz (${FUZZ_SECS}s per target)" fuzz scripts/fuzz.sh "$FUZZ_SECS"
stage "unit tests (format, ASan+UBSan)" unit env ASAN_OPTIONS=detect_leaks=1 build-san/test_format
stage "unit tests (sources, ASan+UBSan)" unit env ASAN_OPTIONS=detect_leaks=1 build-san/test_sources
stage "unit tests (zarr, ASan+UBSan)" unit env ASAN_OPTIONS=detect_leaks=1 build-san/test_zarr
stage "integration tests (ASan+UBSan)" pytest env "${san_env[@]}" "${pytest[@]}"
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
