"""The mount point: relative paths survive the daemon's chdir("/") (every
signal and fusermount3 -u unmount it, as root and as an unprivileged user),
a mount point that is already one is refused, a non-empty one is mounted
with a warning."""

import os
import shutil
import signal
import subprocess
import tempfile

import pytest

from tfsutil import (BIN, EXIT_MOUNT, daemon_pids, fuse_ok, is_mounted, mount_points, run,
                     unmount, wait_gone, write_st)

ENDINGS = ["TERM", "INT", "HUP", "fusermount3"]


def checkpoint(d):
    write_st(os.path.join(d, "model.safetensors"), [("w", "U8", (4,), b"wxyz")])


def end(how, pid, mnt_abs):
    if how == "fusermount3":
        subprocess.run(["fusermount3", "-u", mnt_abs], check=True, capture_output=True)
    else:
        os.kill(pid, getattr(signal, "SIG" + how))


@pytest.mark.parametrize("how", ENDINGS)
def test_relative_mountpoint_unmounts(tmp, how):
    """Source and mount point relative to a working directory that is not
    the test's own: the daemon keeps absolute paths, so every way of ending
    it leaves a usable directory, not a dead mount."""
    fuse_ok()
    # a name of this test's own: daemon_pids() finds daemons by their
    # command line, and the other tests of this kind may run beside it
    # (pytest -n 2) with a relative mount point too, and so may this very
    # test in another pytest (test_harness.py runs it again in one)
    mp = f"mp-{how}-{os.getpid()}"
    work = os.path.join(tmp, "work")
    os.makedirs(os.path.join(work, mp))
    checkpoint(work)
    assert os.getcwd() != work
    r = subprocess.run([BIN, "model.safetensors", mp], cwd=work, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    mnt = os.path.join(work, mp)
    assert is_mounted(mnt)
    assert open(os.path.join(mnt, "w"), "rb").read() == b"wxyz"
    pids = daemon_pids(mp)
    assert len(pids) == 1
    end(how, pids[0], mnt)
    assert wait_gone(pids[0]), "the daemon did not exit"
    assert not is_mounted(mnt)
    assert os.listdir(mnt) == []  # a plain directory again, not ENOTCONN


@pytest.mark.skipif(os.getuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"),
                    reason="an unprivileged mount is made by root in a private namespace (needs root, unshare, setpriv)")
@pytest.mark.parametrize("how", ENDINGS)
def test_relative_mountpoint_unmounts_unprivileged(tmp, how):
    """The same as uid 65534, whose mounts and unmounts go through the
    setuid fusermount3. /dev/fuse may be 0600 on this machine (Debian makes
    it 0666), so a private mount namespace gets a 0666 node of the same
    device; everything runs and is checked inside that namespace."""
    fuse_ok()
    # pytest's own temporary directories are 0700 for root: uid 65534
    # needs a path it can walk
    top = tempfile.mkdtemp(prefix="tfs-unpriv-")
    try:
        unprivileged(top, how)
    finally:
        shutil.rmtree(top)


def unprivileged(tmp, how):
    mp = f"mpu-{how}-{os.getpid()}"  # of its own, as above
    work = os.path.join(tmp, "work")
    os.makedirs(os.path.join(work, mp))
    checkpoint(work)
    node = os.path.join(tmp, "fuse-node")
    dev = os.stat("/dev/fuse").st_rdev
    os.mknod(node, 0o666 | 0o020000, dev)
    os.chmod(node, 0o666)
    for p in (tmp, work, os.path.join(work, mp)):
        os.chown(p, 65534, 65534)
        os.chmod(p, 0o755)
    os.chown(os.path.join(work, "model.safetensors"), 65534, 65534)
    if how == "fusermount3":
        stop = f"setpriv --reuid=65534 --regid=65534 --clear-groups fusermount3 -u \"$PWD/{mp}\""
    else:
        stop = f"kill -{how} $pid"
    script = f"""
set -e
mount --bind {node} /dev/fuse
cd {work}
setpriv --reuid=65534 --regid=65534 --clear-groups {BIN} model.safetensors {mp}
grep -q " $PWD/{mp} fuse.tensorfs .*user_id=65534" /proc/self/mounts
setpriv --reuid=65534 --regid=65534 --clear-groups cat {mp}/w; echo
pid=$(pgrep -u 65534 -f '^[^ ]*tensorfs model.safetensors {mp}$')
{stop}
for i in $(seq 200); do kill -0 $pid 2>/dev/null && [ "$(ps -o stat= -p $pid)" != Z ] || break; sleep 0.05; done
if grep -q " $PWD/{mp} " /proc/self/mounts; then echo STILL-MOUNTED; exit 1; fi
ls -A {mp}; echo listed
"""
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout == "wxyz\nlisted\n", r.stdout


def test_already_a_mount_point_is_refused(tmp):
    """A second tensorfs on the same mount point would hide the first and
    need two unmounts: refused with one line and exit 5, unless -o
    overmount says it is meant."""
    fuse_ok()
    checkpoint(tmp)
    src = os.path.join(tmp, "model.safetensors")
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    assert run([src, mnt]).returncode == 0
    first = daemon_pids(mnt)
    try:
        r = run([src, mnt])
        assert r.returncode == EXIT_MOUNT
        assert r.stderr == (f"tensorfs: {mnt}: already a mount point (fuse.tensorfs from {src}); "
                            "unmount it first, or pass -o overmount to mount on top of it\n")
        assert mount_points().count(mnt) == 1
        # asked for: it stacks, and the top mount answers
        r = run(["-o", "overmount", src, mnt])
        assert r.returncode == 0, r.stderr
        assert mount_points().count(mnt) == 2
        second = [p for p in daemon_pids(mnt) if p not in first]
        assert len(second) == 1
        assert open(os.path.join(mnt, "w"), "rb").read() == b"wxyz"
        subprocess.run(["fusermount3", "-u", mnt], check=True)
        assert wait_gone(second[0])
        assert is_mounted(mnt)
    finally:
        unmount(mnt, first)


@pytest.mark.skipif(os.getuid() != 0, reason="mounting a tmpfs needs root")
def test_any_filesystem_mount_point_is_refused(tmp):
    fuse_ok()
    checkpoint(tmp)
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    subprocess.run(["mount", "-t", "tmpfs", "tfs-test", mnt], check=True)
    try:
        r = run([os.path.join(tmp, "model.safetensors"), mnt])
        assert r.returncode == EXIT_MOUNT
        assert r.stderr == (f"tensorfs: {mnt}: already a mount point (tmpfs from tfs-test); "
                            "unmount it first, or pass -o overmount to mount on top of it\n")
    finally:
        # whatever is stacked there (a tensorfs that wrongly mounted too)
        for _ in range(3):
            if is_mounted(mnt):
                subprocess.run(["umount", "-l", mnt], check=True)
        assert not is_mounted(mnt)


def test_mount_point_with_a_space_is_found(tmp):
    """mountinfo escapes spaces as \\040: the check must still see the mount."""
    fuse_ok()
    checkpoint(tmp)
    src = os.path.join(tmp, "model.safetensors")
    mnt = os.path.join(tmp, "a b\tc")
    os.mkdir(mnt)
    assert run([src, mnt]).returncode == 0
    pids = daemon_pids(mnt.replace("\t", "."))
    try:
        r = run([src, mnt])
        assert r.returncode == EXIT_MOUNT and "already a mount point" in r.stderr
    finally:
        unmount(mnt, pids)


def test_non_empty_mount_point_mounts_with_a_warning(tmp):
    fuse_ok()
    checkpoint(tmp)
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    open(os.path.join(mnt, "hidden"), "w").close()
    r = run([os.path.join(tmp, "model.safetensors"), mnt])
    pids = daemon_pids(mnt)
    try:
        assert r.returncode == 0
        assert r.stderr == (f"tensorfs: {mnt}: warning: the mount point is not empty; "
                            "its files are hidden until the unmount\n")
        assert "hidden" not in os.listdir(mnt)
        assert open(os.path.join(mnt, "w"), "rb").read() == b"wxyz"
    finally:
        unmount(mnt, pids)
    assert os.listdir(mnt) == ["hidden"]
