#!/usr/bin/env bash
# `make demo`: writes a small checkpoint, mounts it, and shows it. The mount
# stays up so you can look around; the last line says how to unmount.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${TENSORFS_DEMO_DIR:-/tmp/tensorfs-demo}
mnt=$dir/mnt
src=$dir/example.safetensors
mkdir -p "$mnt"
if findmnt -n "$mnt" >/dev/null 2>&1; then
  fusermount3 -u "$mnt" || fusermount3 -uz "$mnt"
fi
/usr/bin/python3 scripts/make-example.py "$src"

show() { printf '\n$ %s\n' "$*"; "$@"; }
show ./tensorfs "$src" "$mnt"
show ls -l "$mnt"
show getfattr -d "$mnt/model.layers.0.self_attn.q_proj.weight"
show hexdump -C "$mnt/model.embed_tokens.weight"
show cat "$mnt/__metadata__.json"
show cat "$mnt/__tensors__.tsv"
show ./tensorfs --inspect "$src"
printf '\nThe checkpoint %s is mounted at %s.\nUnmount with: fusermount3 -u %s\n' "$src" "$mnt" "$mnt"
