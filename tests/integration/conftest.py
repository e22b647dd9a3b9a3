import glob
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tfsutil import mount_points  # noqa: E402


@pytest.fixture(autouse=True)
def no_sanitizer_reports():
    """Under the ASan+UBSan build, every report the daemon writes (it has
    no terminal once detached) fails the test that caused it."""
    logdir = os.environ.get("TENSORFS_SAN_LOGDIR")
    before = set(glob.glob(os.path.join(logdir, "*"))) if logdir else set()
    yield
    if logdir:
        new = sorted(set(glob.glob(os.path.join(logdir, "*"))) - before)
        if new:
            text = "".join(open(p, errors="replace").read()[:4000] for p in new)
            pytest.fail(f"sanitizer reports: {new}\n{text}")


@pytest.fixture
def tmp(tmp_path):
    """A temporary directory; any tensorfs mount a test leaves under it
    (say, a refusal that did not happen) is taken down afterwards, so one
    failure cannot leak into later tests."""
    yield str(tmp_path)
    root = os.path.realpath(str(tmp_path))
    for m in mount_points("fuse.tensorfs"):
        if m.startswith(root + "/") or m == root:
            subprocess.run(["fusermount3", "-uz", m], capture_output=True)
