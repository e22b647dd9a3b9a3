#!/usr/bin/env bash
# Every C file of src/ and tests/ as .clang-format lays it out: prints the
# files that differ (clang-format -i FILE mends one) and fails if any does.
set -u
cd "$(dirname "$0")/.."
bad=0
n=0
for f in $(git ls-files 'src/*.[ch]' 'tests/*.[ch]' 2>/dev/null || find src tests -name '*.[ch]'); do
  n=$((n + 1))
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f (clang-format -i $f)"
    bad=$((bad + 1))
  fi
done
echo "$n files, $bad not formatted"
[ "$bad" -eq 0 ]
