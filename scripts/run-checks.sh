#!/usr/bin/env bash
# Runs every test stage of `make check` and ends with one summary line.
# Stages: the format layer's unit tests, the mounting integration tests (with
# a valgrind memcheck cycle), a short fuzz run, then unit and integration
# tests again with the ASan+UBSan build.
set -u
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
FUZZ_SECS=${CHECK_FUZZ_SECONDS:-10}
passed=0
failed=0
failed_names=()

stage() {
  local name=$1
  shift
  echo "=== $name"
  local t0=$SECONDS
  if "$@"; then
    passed=$((passed + 1))
    echo "=== $name: ok ($((SECONDS - t0))s)"
  else
    failed=$((failed + 1))
    failed_names+=("$name")
    echo "=== $name: FAILED ($((SECONDS - t0))s)"
  fi
}

san_logs=$(mktemp -d /tmp/tensorfs-san.XXXXXX)
san_env=(
  TENSORFS_BIN="$PWD/build-san/tensorfs"
  TENSORFS_SAN_LOGDIR="$san_logs"
  ASAN_OPTIONS="log_path=$san_logs/asan:detect_leaks=1:abort_on_error=0"
  UBSAN_OPTIONS="log_path=$san_logs/ubsan:print_stacktrace=1:halt_on_error=1"
)

stage "unit tests" build/test_format
stage "integration tests" $PY -m pytest -q -p no:cacheprovider tests/integration
stage "fuzz (${FUZZ_SECS}s per target)" scripts/fuzz.sh "$FUZZ_SECS"
stage "unit tests (ASan+UBSan)" env ASAN_OPTIONS=detect_leaks=1 build-san/test_format
stage "integration tests (ASan+UBSan)" env "${san_env[@]}" \
  $PY -m pytest -q -p no:cacheprovider tests/integration
if [ -n "$(ls -A "$san_logs")" ]; then
  echo "sanitizer reports:"; head -50 "$san_logs"/*
  failed=$((failed + 1)); failed_names+=("sanitizer reports")
fi
rm -rf "$san_logs"

[ "$failed" -eq 0 ] || echo "failed stages: ${failed_names[*]}"
echo "check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
