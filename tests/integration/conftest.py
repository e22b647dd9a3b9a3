import atexit
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The harness the tests share with the benches (servers, checkpoint
# writers, helpers): tests/lib, which imports no test module.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))

from tfsutil import mount_points  # noqa: E402


def _sanitizer_logs_per_worker():
    """Under pytest-xdist, each worker's daemons log into a directory of
    its own, so a sanitizer report fails the test that caused it and not
    the one running beside it on the other worker."""
    logdir = os.environ.get("TENSORFS_SAN_LOGDIR")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not logdir or not worker:
        return
    sub = os.path.join(logdir, worker)
    os.makedirs(sub, exist_ok=True)
    os.environ["TENSORFS_SAN_LOGDIR"] = sub
    for var, name in (("ASAN_OPTIONS", "asan"), ("UBSAN_OPTIONS", "ubsan")):
        if var in os.environ:
            os.environ[var] = re.sub(r"log_path=[^:]*", f"log_path={sub}/{name}", os.environ[var])


_sanitizer_logs_per_worker()

# Where there is no syslog (a container without /dev/log), a detached
# daemon keeps its lines in $XDG_STATE_HOME/tensorfs/tensorfs.log: the
# daemons the tests start keep theirs in a directory of this run's, never
# in the home directory of whoever runs the tests.
_state = tempfile.mkdtemp(prefix="tfs-state-")
os.environ["XDG_STATE_HOME"] = _state
atexit.register(shutil.rmtree, _state, True)

# A runner can start the tests with signals ignored: a shell without job
# control ignores SIGINT in a background job (`make check &`), nohup
# SIGHUP, some service managers and CI runners SIGTERM too. Every process
# under it inherits that, and libfuse keeps an ignored signal ignored: the
# daemons the tests start (in the foreground, where tensorfs keeps what it
# was given) would live through the signals the tests send. A handler of
# our own is reset to the default in every program this process starts;
# this process itself still ignores what the runner meant it to (the
# handler does nothing), and SIGINT still stops it.
signal.signal(signal.SIGINT, signal.default_int_handler)
for _sig in (signal.SIGHUP, signal.SIGTERM):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, lambda signum, frame: None)


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
