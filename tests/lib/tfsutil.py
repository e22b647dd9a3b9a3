"""Helpers for the integration tests: writing safetensors files, the name
mapping written again independently of the C code, and real mounts."""

import contextlib
import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("TENSORFS_BIN", os.path.join(REPO, "tensorfs"))
SHARED = os.environ.get("TENSORFS_SHARED", os.path.join(os.path.dirname(REPO), "shared"))
REAL = os.path.join(SHARED, "data", "real")

DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
    "F8_E4M3FNUZ": 1, "F8_E5M2FNUZ": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4, "C64": 8, "F64": 8, "I64": 8, "U64": 8,
}

# Under the ASan+UBSan build the daemon's memory is the sanitizer's too
# (shadow memory, quarantine): bounds on RSS are checked without it.
SANITIZED = bool(os.environ.get("TENSORFS_SAN_LOGDIR"))

# Exit codes, as documented in the README.
EXIT_USAGE, EXIT_SOURCE, EXIT_FORMAT, EXIT_MOUNT = 2, 3, 4, 5


# The checkpoint writers are tests/lib/checkpoints.py's (shared with the
# benches); the tests take them from here too.
from checkpoints import write_raw, write_st  # noqa: E402,F401


def fname(name):
    """The documented mapping from a tensor name (str) to a file name."""
    b = name.encode("utf-8", "surrogatepass")
    if b == b"":
        return "%empty"
    if b == b".":
        return "%2E"
    if b == b"..":
        return "%2E%2E"
    out = bytearray()
    start = 0
    if (len(b) >= 9 and b.startswith(b"__") and b.endswith(b"__.json")) or \
            (len(b) >= 8 and b.startswith(b"__") and b.endswith((b"__.tsv", b"__.txt"))) or b == b"__files__":
        out += b"%5F"
        start = 1
    for c in b[start:]:
        if c in (0x25, 0x2F) or c < 0x20 or c == 0x7F:
            out += b"%%%02X" % c
        else:
            out.append(c)
    if len(out) <= 255:
        return out.decode()
    return None  # hashed: checked through user.name instead


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def hf_cache(hub_dir, repo, commit, files, ref="main"):
    """The Hugging Face cache's layout under hub_dir (HF_HUB_CACHE), as
    huggingface_hub writes it: blobs named by hash, snapshots/COMMIT/NAME
    -> ../../blobs/HASH, refs/REF; files: {name: bytes}."""
    base = os.path.join(hub_dir, "models--" + repo.replace("/", "--"))
    os.makedirs(os.path.join(base, "blobs"), exist_ok=True)
    os.makedirs(os.path.join(base, "refs"), exist_ok=True)
    with open(os.path.join(base, "refs", ref), "w") as f:
        f.write(commit)
    for name, data in files.items():
        blob = hashlib.sha256(data).hexdigest()
        with open(os.path.join(base, "blobs", blob), "wb") as f:
            f.write(data)
        link = os.path.join(base, "snapshots", commit, name)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(os.path.relpath(os.path.join(base, "blobs", blob), os.path.dirname(link)), link)
    return base


def missing(what):
    """A component the test needs is absent: a failure in CI (CI=true),
    where everything must be there, and elsewhere a skip that says what."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {what} is missing")
    pytest.skip(f"missing: {what}")


def fuse_ok():
    if os.path.exists("/dev/fuse") and shutil.which("fusermount3"):
        return True
    missing("/dev/fuse or fusermount3")


def kernel_at_least(major, minor):
    """The running kernel is major.minor or later (for FUSE features the
    kernel offers at INIT, which tests cannot install)."""
    nums = []
    for part in os.uname().release.split(".")[:2]:
        digits = "".join(itertools.takewhile(str.isdigit, part))
        nums.append(int(digits or 0))
    return tuple(nums) >= (major, minor)


def real_files(kinds=("safetensors",)):
    """The real files of expected.json of the given kinds; when the shared
    data is absent, one placeholder, so that the test runs and need_real()
    reports it (an empty parameter list would hide it)."""
    exp = os.path.join(REAL, "expected.json")
    if not os.path.exists(exp):
        return ["(shared data absent)"]
    with open(exp) as f:
        files = json.load(f)["files"]
    return sorted(k for k, v in files.items() if v["kind"] in kinds)


def need_real():
    """The real checkpoints of ../shared/data/real (CI always has them)."""
    if not os.path.exists(os.path.join(REAL, "expected.json")):
        missing(f"{REAL} (the shared data beside the clone)")


def run(args, **kw):
    return subprocess.run([BIN] + list(args), capture_output=True, text=True,
                          timeout=60, **kw)


def vm_kb(pid, key):
    """A figure of /proc/PID/status in KiB (VmRSS, VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError(key)


def daemon_pids(mnt):
    # argv[0] must be tensorfs itself: fusermount3's command line for
    # auto_unmount also holds "tensorfs" and the mount point
    out = subprocess.run(["pgrep", "-f", f"^[^ ]*tensorfs .* {mnt}$"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def mount_points(fstype=None):
    """Mount points from /proc/self/mounts, with the kernel's \\ooo escapes
    (space, tab, newline, backslash) undone."""
    out = []
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split(" ")
            if fstype is None or fields[2] == fstype:
                out.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1]))
    return out


def is_mounted(mnt):
    return os.path.realpath(mnt) in mount_points()


def alive(pid):
    """True while the process runs; a zombie has finished (the init of some
    containers reaps late)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(l.startswith("State:") and "Z" in l for l in f)
    except FileNotFoundError:
        return False


def wait_gone(pid, timeout=60):
    # A bound on a hang, not a timing: an ASan daemon's leak check on a
    # loaded machine took over 20 s to exit.
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.01)
    return False


def unmount(mnt, pids=()):
    if is_mounted(mnt):
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-uz", mnt], capture_output=True)
    for pid in pids:
        assert wait_gone(pid), f"daemon {pid} still running after unmount"


@contextlib.contextmanager
def mounted(source, *opts, mnt=None):
    """Mounts with tensorfs (daemon mode), yields the mount point, unmounts."""
    fuse_ok()
    own = mnt is None
    if own:
        mnt = tempfile.mkdtemp(prefix="tfs-mnt-")
    r = run(list(opts) + [source, mnt])
    assert r.returncode == 0, f"mount failed ({r.returncode}): {r.stderr}"
    assert is_mounted(mnt), "tensorfs exited 0 but nothing is mounted"
    pids = daemon_pids(mnt)
    try:
        yield mnt
    finally:
        unmount(mnt, pids)
        assert not is_mounted(mnt)
        if own:
            os.rmdir(mnt)
