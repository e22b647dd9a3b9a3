#!/usr/bin/env bash
# Installs the test tools that come from the npm registry: s3rver, at the
# versions pinned by tests/s3rver/package-lock.json, into build/npm/s3rver
# (nothing outside the checkout). Does nothing when they are there already.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=build/npm/s3rver
if [ -f "$dest/node_modules/s3rver/bin/s3rver.js" ] &&
   cmp -s tests/s3rver/package-lock.json "$dest/package-lock.json"; then
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "scripts/install-test-tools.sh: npm is missing (scripts/install-deps.sh installs it as root)" >&2
  exit 1
fi
echo "scripts/install-test-tools.sh: installing s3rver from the npm registry into $dest" >&2
rm -rf "$dest"
mkdir -p "$dest"
cp tests/s3rver/package.json tests/s3rver/package-lock.json "$dest/"
(cd "$dest" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
