"""Faults and limits: a killed daemon, auto_unmount, a missing /dev/fuse,
concurrent readers checked byte for byte, and the format's limits."""

import errno
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import threading
import time

import pytest

from tfsutil import (BIN, EXIT_FORMAT, EXIT_MOUNT, daemon_pids, fuse_ok, is_mounted,
                     mounted, run, unmount, vm_kb, wait_gone, write_raw, write_st)


def small(tmp):
    path = os.path.join(tmp, "s.safetensors")
    write_st(path, [("a", "U8", (3,), b"abc")])
    return path


def test_sigkill_then_remount(tmp):
    """After SIGKILL the mount point is a dead FUSE mount; the next mount
    must not hang, and says exactly how to clear it."""
    fuse_ok()
    path = small(tmp)
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    assert run([path, mnt]).returncode == 0
    pid = daemon_pids(mnt)[0]
    os.kill(pid, signal.SIGKILL)
    assert wait_gone(pid)
    with pytest.raises(OSError) as ei:
        os.listdir(mnt)
    assert ei.value.errno in (errno.ENOTCONN, errno.ECONNABORTED)
    t0 = time.time()
    r = run([path, mnt])
    assert time.time() - t0 < 10
    assert r.returncode == EXIT_MOUNT
    assert r.stderr == (f"tensorfs: {mnt}: transport endpoint is not connected (a tensorfs that died?); "
                        f"clear it with: fusermount3 -u {mnt}\n")
    subprocess.run(["fusermount3", "-u", mnt], check=True)
    with mounted(path, mnt=mnt) as m:
        assert open(os.path.join(m, "a"), "rb").read() == b"abc"


def test_auto_unmount(tmp):
    fuse_ok()
    path = small(tmp)
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    assert run(["-o", "auto_unmount", path, mnt]).returncode == 0
    assert open(os.path.join(mnt, "a"), "rb").read() == b"abc"
    pid = [p for p in daemon_pids(mnt)][0]
    os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 10
    while is_mounted(mnt) and time.time() < deadline:
        time.sleep(0.05)
    assert not is_mounted(mnt), "auto_unmount left the mount behind"


@pytest.mark.skipif(os.getuid() != 0 or not shutil.which("unshare"),
                    reason="hiding /dev/fuse needs root and unshare")
def test_missing_dev_fuse(tmp):
    path = small(tmp)
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    # a private mount namespace whose /dev has no fuse device
    r = subprocess.run(["unshare", "-m", "sh", "-c",
                        f"mount -t tmpfs none /dev && exec {BIN} {path} {mnt}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == EXIT_MOUNT, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("tensorfs: /dev/fuse: No such file"), r.stderr


def test_concurrent_readers_byte_exact(tmp):
    """16 threads read random ranges of random tensors for a fixed budget;
    every byte is compared with a direct read of the source."""
    path = os.path.join(tmp, "c.safetensors")
    rng = random.Random(11)
    tensors = []
    for i in range(40):
        n = rng.choice([1, 7, 4096, 65537, 300000, 1 << 20])
        tensors.append((f"t{i}", "U8", (n,), os.urandom(n)))
    write_st(path, tensors, pad="odd")
    errors = []
    reads = [0]
    with mounted(path) as mnt:
        offs = {t[0]: json.loads(os.getxattr(os.path.join(mnt, t[0]), "user.offsets")) for t in tensors}
        stop = time.time() + 4

        def worker(seed):
            r = random.Random(seed)
            src = os.open(path, os.O_RDONLY)
            fds = {}
            try:
                while time.time() < stop:
                    name, _, _, raw = r.choice(tensors)
                    fd = fds.get(name) or fds.setdefault(name, os.open(os.path.join(mnt, name), os.O_RDONLY))
                    off = r.randrange(0, len(raw) + 10)
                    n = r.choice([1, 100, 4096, 70000, 1 << 20])
                    got = os.pread(fd, n, off)
                    want = os.pread(src, max(0, min(n, len(raw) - off)), offs[name][0] + off) if off < len(raw) else b""
                    if got != want:
                        errors.append((name, off, n))
                    reads[0] += 1
            except Exception as e:  # noqa: BLE001 - any failure is a test failure
                errors.append(repr(e))
            finally:
                for fd in fds.values():
                    os.close(fd)
                os.close(src)

        threads = [threading.Thread(target=worker, args=(s,)) for s in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert reads[0] > 1000
        assert open(os.path.join(mnt, "t0"), "rb").read() == tensors[0][3]  # still answering


def test_one_million_tensors_memory_bounded(tmp):
    path = os.path.join(tmp, "million.safetensors")
    n = 1_000_000
    parts = ['{']
    for i in range(n):
        parts.append(f'{"," if i else ""}"t{i}":{{"dtype":"U8","shape":[1],"data_offsets":[{i},{i + 1}]}}')
    parts.append('}')
    hdr = "".join(parts).encode()
    write_raw(path, hdr, bytes(i & 0xFF for i in range(n)))
    with mounted(path) as mnt:
        for i in (0, 999_999, 123_456):
            assert open(os.path.join(mnt, f"t{i}"), "rb").read() == bytes([i & 0xFF])
        pid = daemon_pids(mnt)[0]
        hwm = vm_kb(pid, "VmHWM") * 1024
        # bounded by the header plus a fixed cost per tensor
        assert hwm < len(hdr) + 250 * n + (64 << 20), (hwm, len(hdr))


def test_header_at_the_cap(tmp):
    fuse_ok()
    body = b'{"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}'
    at = os.path.join(tmp, "cap.safetensors")
    write_raw(at, body + b" " * (100_000_000 - len(body)), b"hi")
    with mounted(at) as mnt:
        assert open(os.path.join(mnt, "x"), "rb").read() == b"hi"
    over = os.path.join(tmp, "over.safetensors")
    write_raw(over, body + b" " * (100_000_001 - len(body)), b"hi")
    r = run([over, tmp])
    assert r.returncode == EXIT_FORMAT
    assert "header length 100000001 is over the 100000000-byte limit" in r.stderr


def test_long_names_and_many_dimensions(tmp):
    path = os.path.join(tmp, "l.safetensors")
    long_name = "n" * 100_000
    huge_name = "h" * 70_000 + ".weight"
    shape64 = [1] * 64
    shape1000 = [1] * 999 + [3]
    write_st(path, [(long_name, "U8", (2,), b"LN"), (huge_name, "U8", (1,), b"H"),
                    ("dims64", "F32", shape64, b"\0\0\x80\x3f"), ("dims1000", "U8", shape1000, b"xyz")])
    with mounted(path) as mnt:
        names = os.listdir(mnt)
        assert len(names) == 6 and "__tensors__.tsv" in names
        by_size = {}
        for e in set(names) - {"__tensors__.tsv"}:
            by_size[os.path.getsize(os.path.join(mnt, e))] = e
        ln = os.path.join(mnt, by_size[2])
        assert open(ln, "rb").read() == b"LN" and "%~" in by_size[2]
        # a name of 100,000 bytes is more than Linux passes as an xattr
        with pytest.raises(OSError) as ei:
            os.getxattr(ln, "user.name")
        assert ei.value.errno in (errno.E2BIG, errno.ERANGE)
        assert json.loads(os.getxattr(os.path.join(mnt, "dims64"), "user.shape")) == shape64
        assert json.loads(os.getxattr(os.path.join(mnt, "dims1000"), "user.shape")) == shape1000
        assert open(os.path.join(mnt, "dims1000"), "rb").read() == b"xyz"
    with mounted(path, "-o", "layout=tree") as mnt:
        dirs = [e for e in os.listdir(mnt) if os.path.isdir(os.path.join(mnt, e))]
        assert len(dirs) == 1 and dirs[0].startswith("h" * 100) and "%~" in dirs[0]


def test_allow_other_only_when_asked(tmp):
    """Other users see the mount only with -o allow_other, and the kernel
    then checks permissions (default_permissions is always on)."""
    path = small(tmp)

    def opts(mnt):
        with open("/proc/self/mounts") as f:
            return next(l.split()[3] for l in f if l.split()[1] == os.path.realpath(mnt)).split(",")
    with mounted(path) as mnt:
        o = opts(mnt)
        assert "allow_other" not in o and "default_permissions" in o and "ro" in o
    with mounted(path, "-o", "allow_other") as mnt:
        o = opts(mnt)
        assert "allow_other" in o and "default_permissions" in o
        if os.getuid() == 0:
            # another user can read a 0444 file, and cannot write it
            r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                "cat", os.path.join(mnt, "a")], capture_output=True)
            assert r.returncode == 0 and r.stdout == b"abc"
