"""The harness itself. The test servers: a port free_port() gives can be
taken by another test's server before ours binds it (pytest -n 2, or two
checkouts testing at once); a test must then get its own server on another
port, never talk to the other one. The signals: a runner that ignores some
(nohup, a shell without job control, some service managers and CI runners)
must not make the daemons the tests start ignore the signals the tests
send."""
import os
import signal
import socket
import subprocess
import sys
import urllib.request

import servers
from tfsutil import REPO

HERE = os.path.dirname(os.path.abspath(__file__))
# The signals the tests send to the daemons they start.
SENT = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)


def test_a_taken_port_is_never_shared(tmp, monkeypatch):
    other = socket.socket()
    other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    other.bind(("127.0.0.1", 0))
    other.listen(5)
    taken = other.getsockname()[1]
    real = servers.free_ports
    handed = []

    def first_taken(n):
        ports = real(n)
        if not handed:
            ports[0] = taken
        handed.extend(ports)
        return ports

    monkeypatch.setattr(servers, "free_ports", first_taken)
    with open(os.path.join(tmp, "x"), "w") as f:
        f.write("ours")
    try:
        with servers.Nginx(tmp) as n:
            assert taken in handed
            assert taken not in n.ports.values()
            for name in n.ports:
                if name == "plain":
                    assert urllib.request.urlopen(n.url(name, "x"), timeout=10).read() == b"ours"
    finally:
        other.close()


def test_the_ports_of_one_server_differ():
    """A port picked and let go can come back at once: ports picked one by
    one for one nginx were once the same, and its 503 server answered for
    the one a test used. 500 picks one by one repeat one almost surely."""
    ports = servers.free_ports(500)
    assert len(set(ports)) == len(ports)


def test_programs_the_tests_start_take_the_signals_the_tests_send():
    """A program the tests start (a daemon, a shell) has the default
    action for SIGHUP, SIGINT and SIGTERM, whatever the runner ignores."""
    out = subprocess.run(["grep", "^SigIgn:", "/proc/self/status"], capture_output=True, text=True).stdout
    mask = int(out.split()[1], 16)
    assert [s.name for s in SENT if mask & (1 << (s - 1))] == [], out


def test_the_signal_tests_pass_under_a_runner_that_ignores_them(tmp):
    """make check under nohup (SIGHUP ignored), some service managers and
    CI runners failed the three tests that send SIGHUP: libfuse keeps an
    inherited ignored signal ignored, and the tests assumed the default.
    They run here in a pytest of their own started with SIGHUP, SIGINT and
    SIGTERM ignored, the foreground test (SIGTERM to tensorfs -f) too."""

    def ignore():
        for s in SENT:
            signal.signal(s, signal.SIG_IGN)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    tests = ["test_harness.py::test_programs_the_tests_start_take_the_signals_the_tests_send",
             "test_mount.py::test_signals_unmount", "test_mount.py::test_foreground_exit_status",
             "test_mountpoint.py::test_relative_mountpoint_unmounts",
             "test_mountpoint.py::test_relative_mountpoint_unmounts_unprivileged"]
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "--basetemp", os.path.join(tmp, "base")] + [os.path.join(HERE, t) for t in tests],
                       preexec_fn=ignore, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " failed" not in r.stdout and " passed" in r.stdout, r.stdout[-2000:]
