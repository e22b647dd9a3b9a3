#!/usr/bin/env bash
# The manual check of -o pictures in a real file manager (README, "Manual
# checks"): mounts a small checkpoint with pictures, opens the mount in
# PCManFM on a virtual X display (Xvfb) in thumbnail view, takes a
# screenshot and checks that the thumbnails show the tensors' colours.
# Not part of make check: PCManFM and its GTK stack are about a hundred
# packages. Needs (Debian): xvfb pcmanfm x11-apps dbus imagemagick.
#   scripts/filemanager-check.sh [SCREENSHOT.png]
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
shot="${1:-$PWD/pcmanfm-pictures.png}"
for tool in Xvfb pcmanfm xwd dbus-run-session /usr/bin/convert; do
  command -v "$tool" >/dev/null || { echo "filemanager-check: $tool is missing (apt-get install xvfb pcmanfm x11-apps dbus imagemagick)" >&2; exit 2; }
done

work="$(mktemp -d)"
display=":$((90 + RANDOM % 9))"
cleanup() {
  # pcmanfm, its session bus and the gvfs daemons the bus started: one
  # process group (setsid)
  [ -n "${fm:-}" ] && { kill -- "-$fm" 2>/dev/null; wait "$fm" 2>/dev/null; } || true
  [ -n "${xvfb:-}" ] && kill "$xvfb" 2>/dev/null || true
  fusermount3 -u "$work/mnt" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# A checkpoint whose pictures are easy to tell apart: waves, a diagonal,
# a low-rank product, columns growing, and 1-D and 4-D tensors (histograms).
/usr/bin/python3 - "$work/demo.safetensors" <<'EOF'
import json, struct, sys
import numpy as np
rng = np.random.default_rng(0)
y, x = np.mgrid[0:512, 0:512]
ts = {
    "layers.0.attn.q_proj.weight": rng.standard_normal((512, 512)) * 0.02 + 0.05 * np.sin(x / 40) * np.cos(y / 30),
    "layers.0.attn.k_proj.weight": np.eye(512) * 0.5 + rng.standard_normal((512, 512)) * 0.05,
    "layers.0.mlp.up_proj.weight": rng.standard_normal((1024, 8)) @ rng.standard_normal((8, 768)) * 0.01,
    "layers.0.mlp.down_proj.weight": rng.standard_normal((768, 1024)) * np.linspace(0.01, 0.1, 1024),
    "layers.0.norm.weight": 1 + rng.standard_normal(512) * 0.1,
    "layers.0.conv.weight": rng.laplace(size=(64, 3, 3, 3)),
}
hdr, data = {}, b""
for name, a in ts.items():
    b = a.astype("<f4").tobytes()
    hdr[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [len(data), len(data) + len(b)]}
    data += b
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + data)
EOF

mkdir -p "$work/mnt" "$work/home/.config/libfm" "$work/home/.config/pcmanfm/default"
"$here/tensorfs" -o pictures "$work/demo.safetensors" "$work/mnt"
# Thumbnails on for every file (FUSE mounts count as remote to some
# settings), large, and the window in thumbnail view.
cat > "$work/home/.config/libfm/libfm.conf" <<'EOF'
[config]
show_thumbnail=1
thumbnail_local=0
thumbnail_max=4096
[ui]
big_icon_size=128
thumbnail_size=256
EOF
cat > "$work/home/.config/pcmanfm/default/pcmanfm.conf" <<'EOF'
[ui]
win_width=1200
win_height=800
view_mode=thumbnail
sort=name;ascending;
EOF

Xvfb "$display" -screen 0 1280x900x24 >/dev/null 2>&1 &
xvfb=$!
sleep 1
# (GVFS_DISABLE_FUSE: no gvfs FUSE mount left in the temporary home)
HOME="$work/home" XDG_CACHE_HOME="$work/home/.cache" DISPLAY="$display" GVFS_DISABLE_FUSE=1 \
  setsid dbus-run-session -- pcmanfm --no-desktop "$work/mnt" >/dev/null 2>&1 &
fm=$!
# The thumbnails are made in the background: look until they show (at
# most 30 s).
for _ in $(seq 30); do
  sleep 1
  DISPLAY="$display" xwd -root -silent | /usr/bin/convert xwd:- "$shot"
  counts="$(/usr/bin/python3 - "$shot" <<'EOF'
import sys
from PIL import Image
px = Image.open(sys.argv[1]).convert("RGB").getdata()
red = sum(1 for r, g, b in px if r > 150 and b < 120 and g < 140)
blue = sum(1 for r, g, b in px if b > 150 and r < 120 and g < 170)
dark = sum(1 for p in px if p == (34, 34, 38))
print(red, blue, dark)
EOF
)"
  read -r red blue dark <<<"$counts"
  if [ "$red" -gt 5000 ] && [ "$blue" -gt 5000 ] && [ "$dark" -gt 5000 ]; then
    echo "filemanager-check: PCManFM shows the pictures as thumbnails (red $red, blue $blue, histogram background $dark pixels): $shot"
    exit 0
  fi
done
echo "filemanager-check: no thumbnails of the pictures after 30 s (red $red, blue $blue, dark $dark pixels): $shot" >&2
exit 1
