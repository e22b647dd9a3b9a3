#!/usr/bin/env bash
# Installs the test tools that come from the npm registry, each at the
# versions pinned by tests/TOOL/package-lock.json, into build/npm/TOOL
# (nothing outside the checkout): s3rver (the S3 server of the tests),
# gguf-js (the @huggingface/gguf parser, run on every generated GGUF) and
# hub-js (@huggingface/hub, the reference Xet reader the Xet double is
# checked against).
# Does nothing for a tool that is there already.
set -euo pipefail
cd "$(dirname "$0")/.."
install_tool() { # NAME FILE-THAT-SHOWS-IT-IS-THERE
  local dest=build/npm/$1
  if [ -f "$dest/node_modules/$2" ] &&
     cmp -s "tests/$1/package-lock.json" "$dest/package-lock.json"; then
    return 0
  fi
  if ! command -v npm >/dev/null; then
    echo "scripts/install-test-tools.sh: npm is missing (scripts/install-deps.sh installs it as root)" >&2
    exit 1
  fi
  echo "scripts/install-test-tools.sh: installing $1 from the npm registry into $dest" >&2
  rm -rf "$dest"
  mkdir -p "$dest"
  cp "tests/$1/package.json" "tests/$1/package-lock.json" "$dest/"
  (cd "$dest" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}
install_tool s3rver s3rver/bin/s3rver.js
install_tool gguf-js @huggingface/gguf/package.json
install_tool hub-js @huggingface/hub/package.json
