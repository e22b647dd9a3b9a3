#!/usr/bin/env bash
# Installs the Debian packages that a target needs:
#   scripts/install-deps.sh demo    the build toolchain, FUSE, and what the
#                                   demo runs (make demo)
#   scripts/install-deps.sh [check] that and everything the tests and
#                                   benchmarks need (make check, make fuzz,
#                                   make bench)
# --list prints the target's packages, one a line, and installs nothing.
# Idempotent: asks dpkg first and calls apt-get only for what is missing,
# so `make check` on a machine that already has everything never touches
# the network.
set -euo pipefail

set_name=check
list=0
for a in "$@"; do
  case $a in
    demo|check) set_name=$a ;;
    --list) list=1 ;;
    *) echo "scripts/install-deps.sh: unknown argument '$a' (usage: scripts/install-deps.sh [demo|check] [--list])" >&2
       exit 2 ;;
  esac
done

# make: ./tensorfs.
BUILD=(
  gcc make pkg-config libc6-dev   # the build
  libfuse3-dev fuse3              # FUSE headers, library, fusermount3
  libjson-c-dev                   # __metadata__ and emitted JSON
  libcurl4-openssl-dev            # http(s), Hugging Face Hub and S3 sources
  libxxhash-dev                   # XXH3 (disk cache blocks), XXH64 (user.hash.xxh64)
  libssl-dev                      # libcrypto: SHA-256 with the CPU's SHA instructions
  libpng-dev                      # the PNG pictures of -o pictures
  liblz4-dev                      # LZ4 frames (LZ4F): the compressed chunks of Xet, the Hub's storage
)

# make demo: scripts/demo.sh writes its example with python3 (no module
# beyond the standard library) and shows it with getfattr and hexdump.
DEMO=(
  python3                         # scripts/make-example.py
  attr                            # getfattr
  bsdextrautils                   # hexdump
)

# make check (and make fuzz, make bench): the tests' and benchmarks' tools.
CHECK=(
  python3-pil                     # tests decode those pictures with an independent reader
  libgdk-pixbuf2.0-bin            # gdk-pixbuf-thumbnailer, the file managers' PNG thumbnailer, in a test
  xxhash                          # xxh64sum, the baseline of make bench's hash rows
  nginx-light libnginx-mod-http-echo  # a real HTTP server for the remote tests
  ca-certificates                 # contrib/fleet-cache checks https origins (and its tests the Hub's) against them
  curl                            # baselines in make bench
  aria2                           # the downloader baseline of the stream rows (make bench)
  python3-pytest python3-numpy    # integration tests
  python3-lz4 b3sum               # the Xet double writes LZ4 frames and hashes with BLAKE3
  python3-pytest-xdist            # ... on two workers (make check's time budget)
  python3-zarr python3-dask python3-xarray  # -o zarr's tests read the store with real Zarr readers
  clang libclang-rt-14-dev        # libFuzzer target and ASan/UBSan runtime
  clang-format                    # make check: every C file as .clang-format lays it out
  valgrind                        # memcheck runs
  psmisc                          # fuser, in the test of unmounting a busy mount
)

PKGS=("${BUILD[@]}" "${DEMO[@]}")
if [ "$set_name" = check ]; then
  PKGS+=("${CHECK[@]}")
  # Optional and heavy (about 180 packages): real PyTorch, with which a
  # test writes the checkpoints of tests/data/pytorch again and compares
  # them.
  if [ "${TENSORFS_WITH_TORCH:-}" = 1 ]; then
    PKGS+=(python3-torch)
  fi
  # s3rver, a test tool, comes from the npm registry
  # (scripts/install-test-tools.sh); Node.js and npm from Debian when the
  # machine has none.
  if ! command -v npm >/dev/null 2>&1; then
    PKGS+=(nodejs npm)
  fi
fi

if [ "$list" = 1 ]; then
  printf '%s\n' "${PKGS[@]}"
  exit 0
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/install-deps.sh: missing Debian packages: ${missing[*]}" >&2
  echo "scripts/install-deps.sh: run as root, or: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi

echo "scripts/install-deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
