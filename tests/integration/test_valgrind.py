"""A whole mount, read and unmount cycle under valgrind memcheck: no errors,
nothing definitely lost."""

import os
import re
import shutil
import subprocess
import time

import pytest

from tfsutil import BIN, fuse_ok, is_mounted, write_st


@pytest.mark.skipif(bool(os.environ.get("TENSORFS_SAN_LOGDIR")),
                    reason="the sanitizer build cannot run under valgrind")
@pytest.mark.parametrize("threads", [["-s"], ["-o", "max_threads=4"]])
def test_memcheck_mount_cycle(tmp, threads):
    fuse_ok()
    if not shutil.which("valgrind"):
        if os.environ.get("CI") == "true":
            pytest.fail("valgrind is missing in CI (scripts/install-deps.sh installs it)")
        pytest.skip("valgrind is not installed")
    path = os.path.join(tmp, "v.safetensors")
    write_st(path, [(f"t{i}", "F32", (64, i + 1), bytes([i]) * (256 * (i + 1))) for i in range(20)]
             + [("a/b", "U8", (3,), b"xyz"), ("", "U8", (1,), b"!"), ("q" * 400, "U8", (2,), b"ok")],
             metadata={"k": "v"})
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    log = os.path.join(tmp, "vg.log")
    p = subprocess.Popen(["valgrind", "--error-exitcode=99", "--leak-check=full",
                          "--errors-for-leak-kinds=definite", f"--log-file={log}",
                          BIN, "-f", *threads, path, mnt])
    try:
        deadline = time.time() + 60
        while not is_mounted(mnt) and time.time() < deadline and p.poll() is None:
            time.sleep(0.05)
        assert is_mounted(mnt), open(log).read()[-3000:]
        names = os.listdir(mnt)
        assert len(names) == 25
        for n in names:
            with open(os.path.join(mnt, n), "rb") as f:
                assert len(f.read()) == os.path.getsize(os.path.join(mnt, n))
            if n not in ("__metadata__.json", "__tensors__.tsv"):
                os.getxattr(os.path.join(mnt, n), "user.shape")
                os.listxattr(os.path.join(mnt, n))
        os.statvfs(mnt)
    finally:
        subprocess.run(["fusermount3", "-u", mnt])
    rc = p.wait(timeout=60)
    text = open(log).read()
    assert rc == 0, text[-3000:]
    assert re.search(r"ERROR SUMMARY: 0 errors", text), text[-3000:]
    m = re.search(r"definitely lost: ([\d,]+) bytes", text)
    assert m is None or m.group(1) == "0", text[-3000:]
