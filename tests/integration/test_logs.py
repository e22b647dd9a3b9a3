"""Where a detached daemon's messages go (issue 44, item 14): syslog when
there is one; where there is none (a container without /dev/log, where
syslog() drops every line in silence), the user's own log file under
$XDG_STATE_HOME, so that the line a failed read leaves can be read.

Each case runs in a private mount namespace whose /dev holds only the
devices a mount needs, and a /dev/log socket of the test's own when the
case has syslog: the machine's own /dev/log (or its absence) decides
nothing."""

import json
import os
import pwd
import shutil
import subprocess
import sys

import pytest

from tfsutil import BIN, fuse_ok, wait_gone, write_st

pytestmark = pytest.mark.skipif(
    os.getuid() != 0 or not shutil.which("unshare"),
    reason="a /dev without /dev/log is made in a private mount namespace (needs root and unshare)")

# Run inside the namespace: /dev made again without log (or with the
# test's own socket), a mount, a read that fails (the source changed in
# place: EIO, and one line from the daemon), what reached the socket, the
# unmount. Prints a JSON object.
INSIDE = r'''
import errno, json, os, select, socket, subprocess, sys, time
a = json.loads(sys.argv[1])
old = os.path.join(a["tmp"], "olddev")
os.mkdir(old)
subprocess.run(["mount", "--make-rprivate", "/"], check=True)
subprocess.run(["mount", "--bind", "/dev", old], check=True)
subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tensorfs-test-dev", "/dev"], check=True)
for n in ("null", "zero", "fuse", "urandom", "random"):
    if os.path.exists(os.path.join(old, n)):
        open("/dev/" + n, "w").close()
        subprocess.run(["mount", "--bind", os.path.join(old, n), "/dev/" + n], check=True)
subprocess.run(["umount", "-l", old], check=True)
out = {"syslog": []}
log = None
if a["syslog"]:
    log = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    log.bind("/dev/log")
r = subprocess.run([a["bin"]] + a["args"] + [a["src"], a["mnt"]], env=a["env"], capture_output=True,
                   text=True, timeout=60)
out["rc"], out["stderr"] = r.returncode, r.stderr
if r.returncode == 0:
    pid = int(subprocess.run(["pgrep", "-f", "^[^ ]*tensorfs .* " + a["mnt"] + "$"], capture_output=True,
                             text=True).stdout.split()[0])
    out["pid"] = pid
    try:
        os.utime(a["src"], (1, 1))
        try:
            open(os.path.join(a["mnt"], "w"), "rb").read()
            out["read"] = "read"
        except OSError as e:
            out["read"] = errno.errorcode[e.errno]
        deadline = time.time() + 30
        while log is not None and time.time() < deadline and not out["syslog"]:
            if select.select([log], [], [], 0.5)[0]:
                out["syslog"].append(log.recv(65536).decode(errors="replace"))
    finally:
        subprocess.run(["umount", a["mnt"]], check=True)
print(json.dumps(out))
'''


def inside(tmp, args=(), syslog=False, env=None):
    fuse_ok()
    src = os.path.join(tmp, "m.safetensors")
    write_st(src, [("w", "U8", [4], b"abcd")])
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    a = {"tmp": tmp, "bin": BIN, "args": list(args), "src": src, "mnt": mnt, "syslog": syslog,
         "env": env if env is not None else dict(os.environ)}
    r = subprocess.run(["unshare", "-m", sys.executable, "-c", INSIDE, json.dumps(a)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    if "pid" in out:
        assert wait_gone(out["pid"]), "the daemon outlived its unmount"
    return src, out


def changed_line(src):
    return (f"{src}: changed since it was mounted (size or mtime); its tensors now fail with EIO: remount to "
            "see the new contents")


def env_with(**kw):
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_STATE_HOME", "HOME")}
    env.update({k: v for k, v in kw.items() if v is not None})
    return env


def log_lines(path):
    with open(path) as f:
        return [line.split(": ", 1)[1].rstrip("\n") for line in f]


def test_without_syslog_the_lines_go_to_the_state_directory(tmp):
    """No /dev/log: the line a failed read leaves was lost (syslog() drops
    it in silence). It is now appended to $XDG_STATE_HOME/tensorfs/
    tensorfs.log (the directory made 0700, the file 0600), stamped as -o
    logfile stamps it; a mount that works still says nothing."""
    state = os.path.join(tmp, "state")
    src, out = inside(tmp, env=env_with(XDG_STATE_HOME=state, HOME=os.path.join(tmp, "home")))
    assert (out["rc"], out["stderr"], out["read"]) == (0, "", "EIO"), out
    log = os.path.join(state, "tensorfs", "tensorfs.log")
    assert log_lines(log) == [changed_line(src)]
    assert open(log).read().split(" ", 1)[1].startswith(f"tensorfs[{out['pid']}]: "), open(log).read()
    assert os.stat(os.path.join(state, "tensorfs")).st_mode & 0o777 == 0o700
    assert os.stat(log).st_mode & 0o777 == 0o600
    assert not os.path.exists(os.path.join(tmp, "home"))


def test_without_syslog_or_xdg_state_home_the_lines_go_under_home(tmp):
    """XDG_STATE_HOME unset (or relative, which the XDG spec says to
    ignore): ~/.local/state/tensorfs/tensorfs.log, the directories made
    0700 as the spec asks."""
    home = os.path.join(tmp, "home")
    os.mkdir(home)
    for state in (None, "relative/state"):
        src, out = inside(tmp, env=env_with(HOME=home, XDG_STATE_HOME=state))
        assert (out["rc"], out["stderr"], out["read"]) == (0, "", "EIO"), out
        log = os.path.join(home, ".local", "state", "tensorfs", "tensorfs.log")
        assert log_lines(log)[-1] == changed_line(src)
        for d in (".local", ".local/state", ".local/state/tensorfs"):
            assert os.stat(os.path.join(home, d)).st_mode & 0o777 == 0o700, d
        os.rmdir(os.path.join(tmp, "mnt"))
        os.remove(src)
        shutil.rmtree(os.path.join(tmp, "olddev"))
    assert len(log_lines(log)) == 2  # appended, not replaced


def test_the_state_directorys_log_is_kept_under_16_mib(tmp):
    """At mount, a log over 16 MiB moves to tensorfs.log.1 (replacing an
    older one) and a new one starts."""
    state = os.path.join(tmp, "state")
    os.makedirs(os.path.join(state, "tensorfs"), 0o700)
    log = os.path.join(state, "tensorfs", "tensorfs.log")
    with open(log, "wb") as f:
        f.truncate((16 << 20) + 1)
    open(log + ".1", "w").write("older\n")
    src, out = inside(tmp, env=env_with(XDG_STATE_HOME=state))
    assert (out["rc"], out["stderr"], out["read"]) == (0, "", "EIO"), out
    assert os.path.getsize(log + ".1") == (16 << 20) + 1
    assert log_lines(log) == [changed_line(src)]


def test_with_syslog_the_lines_go_to_syslog(tmp):
    """With a /dev/log that answers, the lines go there as before, and no
    file is made."""
    state = os.path.join(tmp, "state")
    src, out = inside(tmp, syslog=True, env=env_with(XDG_STATE_HOME=state))
    assert (out["rc"], out["stderr"], out["read"]) == (0, "", "EIO"), out
    assert len(out["syslog"]) == 1 and out["syslog"][0].endswith(f"tensorfs[{out['pid']}]: {changed_line(src)}"), \
        out["syslog"]
    assert not os.path.exists(state)


def test_without_syslog_and_a_log_refused_the_mount_says_so(tmp):
    """A log file that the safe open refuses (another user's) keeps no
    line: the mount says so in one warning, naming -o logfile, and
    mounts."""
    state = os.path.join(tmp, "state")
    os.makedirs(os.path.join(state, "tensorfs"), 0o700)
    log = os.path.join(state, "tensorfs", "tensorfs.log")
    open(log, "w").close()
    nobody = pwd.getpwnam("nobody")
    os.chown(log, nobody.pw_uid, nobody.pw_gid)
    src, out = inside(tmp, env=env_with(XDG_STATE_HOME=state))
    assert out["rc"] == 0 and out["read"] == "EIO", out
    assert out["stderr"] == (
        f"tensorfs: warning: no syslog here (/dev/log), and the log {log}: refused: it belongs to uid "
        f"{nobody.pw_uid}, not to the mounting user (uid 0): the daemon's messages are lost; give -o "
        "logfile=PATH\n"), out["stderr"]
    assert open(log).read() == ""


def test_logfile_is_as_before(tmp):
    """-o logfile=PATH takes every line, syslog or not, and the state
    directory's file is not made."""
    state = os.path.join(tmp, "state")
    mine = os.path.join(tmp, "mine.log")
    src, out = inside(tmp, args=["-o", f"logfile={mine}"], env=env_with(XDG_STATE_HOME=state))
    assert (out["rc"], out["stderr"], out["read"]) == (0, "", "EIO"), out
    assert log_lines(mine) == [changed_line(src)]
    assert not os.path.exists(state)
