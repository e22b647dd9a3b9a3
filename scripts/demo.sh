#!/usr/bin/env bash
# `make demo`: writes a small checkpoint, mounts it, and shows it. The mount
# stays up so you can look around; the last line says how to unmount.
set -euo pipefail
cd "$(dirname "$0")/.."
# A directory of the user's own, so two users on one machine never unmount
# or rewrite each other's example: TENSORFS_DEMO_DIR, else
# $XDG_RUNTIME_DIR/tensorfs-demo (the login's private runtime directory),
# else ${TMPDIR:-/tmp}/tensorfs-demo-$UID. Two checkouts of one user share
# it (the second replaces the first's mount) unless TENSORFS_DEMO_DIR
# parts them.
if [ -n "${TENSORFS_DEMO_DIR:-}" ]; then
  dir=$TENSORFS_DEMO_DIR
elif [ -n "${XDG_RUNTIME_DIR:-}" ] && [ -d "$XDG_RUNTIME_DIR" ] && [ -O "$XDG_RUNTIME_DIR" ]; then
  dir=$XDG_RUNTIME_DIR/tensorfs-demo
else
  dir=${TMPDIR:-/tmp}/tensorfs-demo-$(id -u)
fi
mkdir -p -m 0700 "$dir"
# In a shared /tmp someone else may have made it first (or planted a link).
if [ -L "$dir" ] || [ ! -O "$dir" ]; then
  echo "make demo: $dir is not a directory of yours; set TENSORFS_DEMO_DIR to one" >&2
  exit 1
fi
mnt=$dir/mnt
src=$dir/example.safetensors
mkdir -p "$mnt"
echo "make demo: in $dir (set TENSORFS_DEMO_DIR to choose another directory)"
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
# The guide's examples call tensorfs, not ./tensorfs.
if ! command -v tensorfs >/dev/null 2>&1; then
  printf 'To call it as tensorfs: sudo make install, or make install PREFIX=$HOME/.local (with ~/.local/bin on your PATH)\n'
fi
