"""What a user names is handled once, at the edge (issue 35, parts 1-3):
every path made absolute against the caller's directory before the daemon
leaves it for /; every file the program reads or creates opened one way
(a FIFO never blocks, a directory or an oversized file is refused in one
line naming the option, a link another user planted is not followed, a
log file is the mounting user's own and 0600, -o originals never leads out
of the source's tree, a token is never trimmed or cut); the user:password@
of every URL kept out of every message and masked in argv."""

import contextlib
import errno
import hashlib
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from servers import FwdProxy, HubDouble, Nginx, S3Double
from tfsutil import (BIN, EXIT_SOURCE, EXIT_USAGE, daemon_pids, fuse_ok, hf_cache, is_mounted, missing, run,
                     unmount, write_st)

NOBODY = 65534
C1 = "1" * 40
TOKEN = "hf_edge_token"
PASSWORD = "PASSWORD-e1-secret"


def need_root():
    if os.getuid() != 0:
        missing("root (to make files and links of another user, nobody)")


@contextlib.contextmanager
def background(args, cwd, env=None):
    """tensorfs ARGS from the directory cwd, detached as a user mounts it
    (no -f): the last argument is the mount point, relative to cwd."""
    fuse_ok()
    r = subprocess.run([BIN, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    mnt = os.path.join(cwd, args[-1])
    assert is_mounted(mnt)
    pids = daemon_pids(args[-1])
    assert pids
    try:
        yield mnt, pids, r.stderr
    finally:
        unmount(mnt, pids)


def mountpoint(cwd):
    """A mount point in cwd with a name of its own (daemon_pids finds the
    daemon by its command line)."""
    name = "mp-" + os.urandom(4).hex()
    os.mkdir(os.path.join(cwd, name))
    return name


def model(d, name="a.safetensors", data=b"abcd"):
    os.makedirs(d, exist_ok=True)
    write_st(os.path.join(d, name), [("w", "U8", (len(data),), data)])
    return os.path.join(d, name)


def clean_env(tmp, **set_):
    """The caller's environment without the machine's Hub and AWS
    settings, HOME in tmp."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "HF_", "HUGGING_FACE")) and k != "XDG_CACHE_HOME"}
    env["HOME"] = tmp
    env.update(set_)
    return env


@pytest.fixture(scope="module")
def hub():
    """The Hub double, a public and a gated repository of one tensor."""
    root = tempfile.mkdtemp(prefix="tfs-edge-cdn-")
    os.chmod(root, 0o755)
    p = model(os.path.join(root, "v1"), "model.safetensors", b"v1")
    os.chmod(os.path.dirname(p), 0o755)
    os.chmod(p, 0o644)
    with Nginx(root) as cdn:
        conf = os.path.join(root, "hub.json")
        with open(conf, "w") as f:
            json.dump({"cdn": cdn.url("plain").rstrip("/"), "cdn_root": root, "token": TOKEN, "page_size": 10,
                       "repos": {"org/public": {"refs": {"main": C1}, "commits": {C1: "v1"}},
                                 "org/gated": {"gated": True, "refs": {"main": C1}, "commits": {C1: "v1"}}}},
                      f)
        with HubDouble(conf) as h:
            yield h
    shutil.rmtree(root)


def www(tmp):
    """A directory nginx may serve (its workers walk it), with a.safetensors."""
    root = os.path.join(tmp, "www")
    model(root, data=os.urandom(300000))
    os.chmod(tmp, 0o755)
    os.chmod(root, 0o755)
    os.chmod(os.path.join(root, "a.safetensors"), 0o644)
    return root


# ---- 1: relative paths, made absolute before the daemon leaves for / ----

def test_relative_source_directory_with_originals(tmp):
    """SOURCE a relative directory, mounted in the background: the
    companion files of __files__ are opened by the daemon after it moved
    to /, and read (they were EIO, and the README's from_pretrained
    example with them)."""
    d = os.path.join(tmp, "ckpt")
    model(d, "model.safetensors")
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write('{"model_type": "x"}\n')
    mp = mountpoint(tmp)
    with background(["-o", "originals", "ckpt", mp], cwd=tmp) as (mnt, _, _):
        assert open(os.path.join(mnt, "__files__", "config.json")).read() == '{"model_type": "x"}\n'
        assert open(os.path.join(mnt, "w"), "rb").read() == b"abcd"


def test_relative_cache_dir_is_the_callers(tmp):
    """-o cache_dir=REL is the caller's REL, checked and used: not /REL,
    where the daemon works from (another user's 0777 directory there got
    the blocks root reads). Another user's 0777 directory given relative
    is refused, as given absolute."""
    need_root()
    root = www(tmp)
    name = "tfs-edge-" + os.urandom(4).hex()
    theirs_at_root = os.path.join("/", name)
    os.mkdir(theirs_at_root)
    os.chown(theirs_at_root, NOBODY, NOBODY)
    os.chmod(theirs_at_root, 0o777)
    try:
        os.mkdir(os.path.join(tmp, name), 0o700)
        with Nginx(root) as ng:
            url = ng.url("plain", "a.safetensors")
            mp = mountpoint(tmp)
            with background(["-o", f"cache_dir={name}", url, mp], cwd=tmp) as (mnt, _, _):
                assert open(os.path.join(mnt, "w"), "rb").read() == open(
                    os.path.join(root, "a.safetensors"), "rb").read()[-300000:]
            blocks = [f for _, _, fs in os.walk(os.path.join(tmp, name)) for f in fs if f.endswith(".blk")]
            assert blocks, "no block in the caller's cache directory"
            assert os.listdir(theirs_at_root) == []
            theirs = os.path.join(tmp, "theirs")
            os.mkdir(theirs)
            os.chown(theirs, NOBODY, NOBODY)
            os.chmod(theirs, 0o777)
            r = subprocess.run([BIN, "-o", "cache_dir=theirs", url, mp], cwd=tmp, capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == EXIT_USAGE, r.stderr
            assert r.stderr.count("\n") == 1 and f"-o cache_dir={theirs}: refused" in r.stderr, r.stderr
            assert os.listdir(theirs) == []
    finally:
        shutil.rmtree(theirs_at_root)


def test_relative_logfile(tmp):
    """-o logfile=REL: the daemon's lines land in the caller's REL."""
    model(tmp)
    os.mkdir(os.path.join(tmp, "logs"))
    mp = mountpoint(tmp)
    with background(["-o", "logfile=logs/t.log,verbose", "a.safetensors", mp], cwd=tmp) as (mnt, _, _):
        assert open(os.path.join(mnt, "w"), "rb").read() == b"abcd"
    log = os.path.join(tmp, "logs", "t.log")
    assert "counters at unmount" in open(log).read()
    assert os.stat(log).st_mode & 0o777 == 0o600


def test_relative_edits(tmp):
    model(tmp)
    with open(os.path.join(tmp, "e.json"), "w") as f:
        json.dump({"edited": "yes"}, f)
    mp = mountpoint(tmp)
    with background(["-o", "edits=e.json", "a.safetensors", mp], cwd=tmp) as (mnt, _, _):
        assert json.load(open(os.path.join(mnt, "__metadata__.json"))) == {"edited": "yes"}


def test_relative_token_file(hub, tmp):
    with open(os.path.join(tmp, "tok"), "w") as f:
        f.write(TOKEN + "\n")
    mp = mountpoint(tmp)
    env = clean_env(tmp, HF_HOME=os.path.join(tmp, "hf"))
    with background(["-o", f"hf_endpoint={hub.endpoint},token_file=tok", "hf://org/gated", mp], cwd=tmp,
                    env=env) as (mnt, _, _):
        assert open(os.path.join(mnt, "w"), "rb").read() == b"v1"


# Each variable, relative, and where the Hugging Face cache then is.
HF_CACHE_VARS = {"HF_HOME": ("hfh", "hfh/hub"), "HF_HUB_CACHE": ("hfh/hub", "hfh/hub"),
                 "XDG_CACHE_HOME": ("xdg", "xdg/huggingface/hub"), "HOME": ("home", "home/.cache/huggingface/hub")}


@pytest.mark.parametrize("var", sorted(HF_CACHE_VARS))
def test_relative_hugging_face_cache(tmp, var):
    """HF_HOME, HF_HUB_CACHE, XDG_CACHE_HOME or HOME relative, offline,
    -o originals: files the daemon opens after it moved to / come from the
    caller's cache."""
    value, where = HF_CACHE_VARS[var]
    hub_dir = os.path.join(tmp, where)
    st = os.path.join(tmp, "src.safetensors")
    model(tmp, "src.safetensors", b"cached")
    hf_cache(hub_dir, "org/cached", C1, {"model.safetensors": open(st, "rb").read(),
                                         "config.json": b'{"from": "cache"}'})
    env = clean_env(tmp, HF_HUB_OFFLINE="1", **{var: value})
    mp = mountpoint(tmp)
    with background(["-o", "originals", "hf://org/cached", mp], cwd=tmp, env=env) as (mnt, _, _):
        assert open(os.path.join(mnt, "w"), "rb").read() == b"cached"
        assert open(os.path.join(mnt, "__files__", "config.json"), "rb").read() == b'{"from": "cache"}'


def test_relative_aws_files(tmp):
    """AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE relative."""
    s3root = os.path.join(tmp, "s3")
    model(os.path.join(s3root, "models"), "x.safetensors", b"s3!!")
    with open(os.path.join(tmp, "creds"), "w") as f:
        f.write("[edge]\naws_access_key_id = AKIDTEST\naws_secret_access_key = SECRETTEST\n")
    with open(os.path.join(tmp, "conf"), "w") as f:
        f.write("[profile edge]\nregion = us-east-1\n")
    with S3Double(s3root) as s3:
        env = clean_env(tmp, AWS_SHARED_CREDENTIALS_FILE="creds", AWS_CONFIG_FILE="conf", AWS_PROFILE="edge",
                        AWS_ENDPOINT_URL=s3.endpoint)
        mp = mountpoint(tmp)
        with background(["s3://models/x.safetensors", mp], cwd=tmp, env=env) as (mnt, _, _):
            assert open(os.path.join(mnt, "w"), "rb").read() == b"s3!!"


def test_relative_paths_of_the_tools(tmp):
    """--verify's SOURCE and MANIFEST, diff's A and B, relative."""
    model(tmp, "a.safetensors")
    model(tmp, "b.safetensors", b"abce")
    with open(os.path.join(tmp, "sums.txt"), "w") as f:
        f.write(hashlib.sha256(b"abcd").hexdigest() + "  w\n")
    r = subprocess.run([BIN, "--verify", "a.safetensors", "sums.txt"], cwd=tmp, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([BIN, "diff", "a.safetensors", "b.safetensors"], cwd=tmp, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "w" in r.stdout, (r.stdout, r.stderr)


# ---- 2: one safe open for every file the program reads or creates ----

def special(path, kind):
    """A FIFO, a directory or a file over every cap at path."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        os.mkdir(path)
    else:
        with open(path, "wb") as f:
            f.truncate((1 << 30) + 1)  # sparse: over the manifest's 1 GiB too
    return path


# what: (argv, env extras, exit code, what the line names); PATH is the file
CASES = {
    "edits": (["-o", "edits=PATH", "SRC", "MNT"], {}, EXIT_USAGE, "-o edits=PATH"),
    "logfile": (["-o", "logfile=PATH", "SRC", "MNT"], {}, EXIT_USAGE, "-o logfile=PATH"),
    "token_file": (["--inspect", "-o", "hf_endpoint=http://127.0.0.1:9,token_file=PATH", "hf://org/x"], {},
                   EXIT_USAGE, "-o token_file=PATH"),
    "hf_home_token": (["--inspect", "hf://org/x"], {"HF_HOME": "DIR", "HF_ENDPOINT": "http://127.0.0.1:9"},
                      EXIT_USAGE, "the Hub token file PATH"),
    "aws_credentials": (["--inspect", "-o", "endpoint=http://127.0.0.1:9", "s3://models/x.safetensors"],
                        {"AWS_SHARED_CREDENTIALS_FILE": "PATH"}, EXIT_USAGE, "AWS_SHARED_CREDENTIALS_FILE=PATH"),
    "aws_config": (["--inspect", "-o", "endpoint=http://127.0.0.1:9", "s3://models/x.safetensors"],
                   {"AWS_CONFIG_FILE": "PATH", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "S"},
                   EXIT_USAGE, "AWS_CONFIG_FILE=PATH"),
    "manifest": (["--verify", "SRC", "PATH"], {}, EXIT_USAGE, "PATH: cannot open the manifest"),
    "netrc": (["--inspect", "http://127.0.0.1:9/x.safetensors"], {}, EXIT_USAGE, "PATH: refused"),
    "shard": (["INDEX", "MNT"], {}, EXIT_SOURCE, "shard 'b.safetensors': is not a regular file"),
}
SIZE_CAPS = {"edits": "at most 16 MiB", "token_file": "at most 4096 bytes", "hf_home_token": "at most 4096 bytes",
             "aws_credentials": "at most 1 MiB", "aws_config": "at most 1 MiB", "manifest": "at most 1 GiB",
             "netrc": "at most 1 MiB"}


def case_paths(tmp, what):
    """Where the case's file goes."""
    if what == "hf_home_token":
        os.mkdir(os.path.join(tmp, "hfh"))
        return os.path.join(tmp, "hfh", "token")
    if what == "netrc":
        return os.path.join(tmp, ".netrc")
    if what == "shard":
        d = os.path.join(tmp, "ckpt")
        model(d, "a.safetensors")
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"weight_map": {"w": "a.safetensors", "v": "b.safetensors"}}, f)
        return os.path.join(d, "b.safetensors")
    return os.path.join(tmp, what)


# (A log grows and a shard is a checkpoint: no size cap; a shard that is
# a directory is test_shards.py's.)
@pytest.mark.parametrize("what,kind", [(w, k) for w in sorted(CASES) for k in ("fifo", "directory", "oversized")
                                       if (k != "oversized" or w in SIZE_CAPS) and (w, k) != ("shard", "directory")])
def test_every_file_read_is_a_plain_small_file(tmp, what, kind):
    """A FIFO (which used to hang the mount forever), a directory (a token
    file so silently sent no token) or a file over the cap, in the place
    of every file tensorfs reads or creates: one line naming the option or
    the variable, exit 2 (a shard: exit 3), in the foreground."""
    src = model(tmp)
    path = special(case_paths(tmp, what), kind)
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    argv, extra, code, names = CASES[what]
    sub = {"PATH": path, "SRC": src, "MNT": mnt, "INDEX": os.path.join(tmp, "ckpt", "model.safetensors.index.json"),
           "DIR": os.path.dirname(path)}

    def fill(s):
        for k, v in sub.items():
            s = s.replace(k, v)
        return s
    env = clean_env(tmp, **{k: fill(v) for k, v in extra.items()})
    r = subprocess.run([BIN, *map(fill, argv)], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == code, r.stderr
    assert r.stderr.count("\n") == 1 and fill(names) in r.stderr, r.stderr
    if what != "shard":
        want = {"fifo": "a FIFO (named pipe), not a regular file", "directory": "a directory, not a regular file",
                "oversized": SIZE_CAPS.get(what)}[kind]
        assert want in r.stderr, r.stderr
    assert not is_mounted(mnt)


def test_hugging_face_cache_ref_fifo_does_not_block(tmp):
    """refs/main of the Hugging Face cache a FIFO, offline: the revision
    is unknown, said in one line (opening it blocked forever)."""
    hub_dir = os.path.join(tmp, "hub")
    base = hf_cache(hub_dir, "org/fifo", C1, {"model.safetensors": open(model(tmp), "rb").read()})
    os.unlink(os.path.join(base, "refs", "main"))
    os.mkfifo(os.path.join(base, "refs", "main"))
    r = subprocess.run([BIN, "--inspect", "hf://org/fifo"], capture_output=True, text=True, timeout=60,
                       env=clean_env(tmp, HF_HUB_CACHE=hub_dir, HF_HUB_OFFLINE="1"))
    assert r.returncode == EXIT_SOURCE and r.stderr.count("\n") == 1, r.stderr
    assert "does not know revision 'main'" in r.stderr, r.stderr


BAD_TOKENS = {"carriage return": b"sEcReT\r\n", "line feed inside": b"sEc\nReT\n", "space inside": b"sEc ReT\n",
              "NUL": b"sEcReT\x00xy\n", "two newlines": b"sEcReT\n\n", "leading space": b" sEcReT\n",
              "empty": b"", "newline only": b"\n", "not ASCII": "sEcRéT\n".encode()}


@pytest.mark.parametrize("bad", sorted(BAD_TOKENS))
def test_token_file_refused_not_trimmed(hub, tmp, bad):
    """A token holding a CR, a LF, a space, a NUL..., or none: one line
    naming token_file, exit 2; never trimmed, cut, or silently dropped
    (the message used to say to set HF_TOKEN). The token never appears."""
    tok = os.path.join(tmp, "tok")
    with open(tok, "wb") as f:
        f.write(BAD_TOKENS[bad])
    r = subprocess.run([BIN, "--inspect", "-o", f"hf_endpoint={hub.endpoint},token_file={tok}", "hf://org/gated"],
                       capture_output=True, text=True, timeout=60, env=clean_env(tmp))
    assert r.returncode == EXIT_USAGE, r.stderr
    assert r.stderr.count("\n") == 1 and f"-o token_file={tok}: refused" in r.stderr, r.stderr
    assert "sEc" not in r.stderr and "ReT" not in r.stderr


def test_token_sources_accepted_and_refused(hub, tmp):
    """One trailing newline (echo writes it) is accepted, and so is none;
    a token of 5000 bytes is refused, not cut at 4095; HF_TOKEN with a
    space is refused naming HF_TOKEN."""
    tok = os.path.join(tmp, "tok")
    for text in (TOKEN + "\n", TOKEN):
        with open(tok, "w") as f:
            f.write(text)
        r = subprocess.run([BIN, "--inspect", "-o", f"hf_endpoint={hub.endpoint},token_file={tok}",
                            "hf://org/gated"], capture_output=True, text=True, timeout=60, env=clean_env(tmp))
        assert r.returncode == 0, r.stderr
    with open(tok, "w") as f:
        f.write("x" * 5000)
    r = subprocess.run([BIN, "--inspect", "-o", f"hf_endpoint={hub.endpoint},token_file={tok}", "hf://org/gated"],
                       capture_output=True, text=True, timeout=60, env=clean_env(tmp))
    assert r.returncode == EXIT_USAGE and "at most 4096 bytes" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    r = subprocess.run([BIN, "--inspect", "hf://org/gated"], capture_output=True, text=True, timeout=60,
                       env=clean_env(tmp, HF_ENDPOINT=hub.endpoint, HF_TOKEN=TOKEN + " x"))
    assert r.returncode == EXIT_USAGE and "HF_TOKEN: refused: the token holds a space" in r.stderr, r.stderr


@pytest.mark.parametrize("var", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"])
def test_hub_token_too_long_for_a_request_is_refused_not_cut(hub, tmp, var):
    """A token in the environment longer than a request's Authorization
    line holds (8169 bytes) is refused in one line naming the variable,
    exit 2; it was cut, and the cut token sent. The longest one is sent
    whole (the Hub double refuses it: not its token)."""
    for n, code in ((8170, EXIT_USAGE), (8169, EXIT_SOURCE)):
        r = subprocess.run([BIN, "--inspect", "hf://org/gated"], capture_output=True, text=True, timeout=60,
                           env=clean_env(tmp, HF_ENDPOINT=hub.endpoint, **{var: "t" * n}))
        assert r.returncode == code and r.stderr.count("\n") == 1, r.stderr
        assert "t" * 20 not in r.stderr, r.stderr
    r = subprocess.run([BIN, "--inspect", "hf://org/gated"], capture_output=True, text=True, timeout=60,
                       env=clean_env(tmp, HF_ENDPOINT=hub.endpoint, **{var: "t" * 8170}))
    assert f"{var}: refused: the token is 8170 bytes, longer than a request carries (8169)" in r.stderr, r.stderr


@pytest.mark.parametrize("bad", ["control character", "too long", "too long in the environment"])
def test_aws_key_refused_not_cut(tmp, bad):
    """An AWS key holding a control character, or longer than tensorfs
    keeps (it was cut at 255 bytes): one line, exit 2, the key not in it."""
    creds = os.path.join(tmp, "creds")
    secret = "ZzZz\x01ZzZz" if bad == "control character" else "Zz" * 150
    with open(creds, "w") as f:
        f.write(f"[default]\naws_access_key_id = AKID\naws_secret_access_key = {secret}\n")
    env = clean_env(tmp, AWS_SHARED_CREDENTIALS_FILE=creds)
    if bad.endswith("environment"):
        env.update(AWS_ACCESS_KEY_ID="AKID", AWS_SECRET_ACCESS_KEY=secret)
    r = subprocess.run([BIN, "--inspect", "-o", "endpoint=http://127.0.0.1:9", "s3://models/x.safetensors"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == EXIT_USAGE and r.stderr.count("\n") == 1, r.stderr
    assert "ZzZz" not in r.stderr, r.stderr
    assert {"control character": "control characters", "too long": f"{creds}: the aws_secret_access_key",
            "too long in the environment": "AWS_SECRET_ACCESS_KEY is longer"}[bad] in r.stderr, r.stderr


def sticky_dir(tmp):
    """A directory as /tmp is: sticky, everyone may write it."""
    d = os.path.join(tmp, "sticky")
    os.mkdir(d)
    os.chmod(d, 0o1777)
    os.chmod(tmp, 0o755)
    return d


def test_log_file_is_the_mounting_users_own(tmp):
    """-o logfile=: an existing file becomes 0600 (it kept 0644); a
    symbolic link, one another user planted in a sticky directory (as a
    link itself or as a directory on the way), and a file of another user
    are refused in one line, and the files they lead to are not touched."""
    need_root()
    src = model(tmp)
    mp = mountpoint(tmp)
    log = os.path.join(tmp, "old.log")
    with open(log, "w") as f:
        f.write("before\n")
    os.chmod(log, 0o644)
    with background(["-o", f"logfile={log},verbose", src, mp], cwd=tmp):
        pass
    assert os.stat(log).st_mode & 0o7777 == 0o600
    assert open(log).read().startswith("before\n")

    sticky = sticky_dir(tmp)
    victim_dir = os.path.join(tmp, "rootonly")
    os.mkdir(victim_dir, 0o700)
    victim = os.path.join(victim_dir, "victim")
    with open(victim, "w") as f:
        f.write("root's\n")
    os.chmod(victim, 0o600)
    planted = os.path.join(sticky, "planted.log")
    os.symlink(victim, planted)
    os.lchown(planted, NOBODY, NOBODY)
    through = os.path.join(sticky, "d")
    os.symlink(victim_dir, through)
    os.lchown(through, NOBODY, NOBODY)
    own_link = os.path.join(tmp, "own.log")
    os.symlink(victim, own_link)
    theirs = os.path.join(sticky, "theirs.log")
    with open(theirs, "w") as f:
        f.write("nobody's\n")
    os.chown(theirs, NOBODY, NOBODY)
    mnt = os.path.join(tmp, mp)
    for path, says in [(planted, "a symbolic link, not a regular file"),
                       (os.path.join(through, "new.log"), "another user's link is not followed"),
                       (own_link, "a symbolic link, not a regular file"),
                       (theirs, f"it belongs to uid {NOBODY}, not to the mounting user (uid 0)")]:
        r = run(["-o", f"logfile={path}", src, mnt])
        assert r.returncode == EXIT_USAGE, (path, r.stderr)
        assert r.stderr.count("\n") == 1 and f"-o logfile={path}: refused" in r.stderr and says in r.stderr, \
            (path, r.stderr)
        assert not is_mounted(mnt)
    assert open(victim).read() == "root's\n" and os.listdir(victim_dir) == ["victim"]
    assert open(theirs).read() == "nobody's\n"


# What the real file holds for each case, read through a link.
LINKED = {"edits": b'{"k": "v"}', "token_file": TOKEN.encode() + b"\n", "hf_home_token": TOKEN.encode(),
          "aws_credentials": b"[default]\naws_access_key_id = A\naws_secret_access_key = S\n",
          "aws_config": b"[default]\nregion = us-east-1\n", "manifest": b"0" * 64 + b"  w\n",
          "netrc": b"machine 127.0.0.1 login a password b\n"}


@pytest.mark.parametrize("what", sorted(LINKED) + ["shard"])
def test_link_planted_by_another_user_is_not_followed(tmp, what):
    """Every file tensorfs reads, named through a link that another user
    (nobody) planted in a sticky directory others may write, as /tmp is:
    refused in one line (the link could lead to any of root's files), exit
    2, or 3 for a shard of the source; Linux's fs.protected_symlinks is 0
    on this machine, so only tensorfs's own rule refuses it."""
    need_root()
    sticky = sticky_dir(tmp)
    src = model(tmp)
    real = os.path.join(tmp, "real-" + what)
    if what == "shard":
        shutil.copyfile(src, real)
        model(sticky, "a.safetensors")
        with open(os.path.join(sticky, "model.safetensors.index.json"), "w") as f:
            json.dump({"weight_map": {"w": "a.safetensors", "v": "b.safetensors"}}, f)
        link = os.path.join(sticky, "b.safetensors")
    else:
        with open(real, "wb") as f:
            f.write(LINKED[what])
        link = os.path.join(sticky, {"hf_home_token": "token", "netrc": ".netrc"}.get(what, what))
    os.symlink(real, link)
    os.lchown(link, NOBODY, NOBODY)
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    argv, extra, code, _ = CASES[what]
    sub = {"PATH": link, "SRC": src, "MNT": mnt, "INDEX": os.path.join(sticky, "model.safetensors.index.json"),
           "DIR": sticky}

    def fill(s):
        for k, v in sub.items():
            s = s.replace(k, v)
        return s
    env = clean_env(tmp, **{k: fill(v) for k, v in extra.items()})
    if what == "netrc":
        env["HOME"] = sticky
    r = subprocess.run([BIN, *map(fill, argv)], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == code, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert f"{link} is a symbolic link of uid {NOBODY} in a sticky directory" in r.stderr, r.stderr
    assert "another user's link is not followed" in r.stderr, r.stderr
    assert not is_mounted(mnt)


def test_own_links_in_a_sticky_directory_are_followed(tmp):
    """A link in a sticky directory that the caller (or the directory's
    owner) made is followed: only another user's is refused."""
    need_root()
    src = model(tmp)
    sticky = sticky_dir(tmp)
    real = os.path.join(tmp, "e.json")
    with open(real, "w") as f:
        json.dump({"k": "v"}, f)
    mine = os.path.join(sticky, "mine.json")
    os.symlink(real, mine)
    mp = mountpoint(tmp)
    with background(["-o", f"edits={mine}", src, mp], cwd=tmp) as (m, _, _):
        assert json.load(open(os.path.join(m, "__metadata__.json"))) == {"k": "v"}


def test_originals_never_leads_out_of_the_source(tmp):
    """-o originals shows a link only when it resolves inside the source's
    directory: tokenizer.json -> a file outside (root's 0600 secret, which
    allow_other served to everyone) is not shown, with one warning; links
    inside the directory are."""
    outside = os.path.join(tmp, "outside")
    os.mkdir(outside)
    secret = os.path.join(outside, "secret")
    with open(secret, "w") as f:
        f.write("root's secret\n")
    os.chmod(secret, 0o600)
    d = os.path.join(tmp, "ckpt")
    model(d, "model.safetensors")
    os.mkdir(os.path.join(d, "sub"))
    with open(os.path.join(d, "sub", "vocab.txt"), "w") as f:
        f.write("a b c\n")
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write("{}\n")
    os.symlink(secret, os.path.join(d, "tokenizer.json"))
    os.symlink("../ckpt/sub/vocab.txt", os.path.join(d, "vocab.txt"))
    os.symlink("config.json", os.path.join(d, "config-link.json"))
    mp = mountpoint(tmp)
    with background(["-o", "originals,allow_other", "ckpt", mp], cwd=tmp) as (mnt, _, err):
        files = sorted(os.listdir(os.path.join(mnt, "__files__")))
        assert files == ["config-link.json", "config.json", "model.safetensors", "vocab.txt"], files
        assert open(os.path.join(mnt, "__files__", "vocab.txt")).read() == "a b c\n"
    lines = err.splitlines()
    assert len(lines) == 1 and "tokenizer.json: not shown in __files__" in lines[0], err
    assert "secret" not in err.replace(secret, "")


def test_originals_of_a_hugging_face_cache_snapshot(tmp):
    """A snapshot directory of the Hugging Face cache as SOURCE: its files
    are links to ../../blobs/HASH, inside the repository's cache directory,
    and all are shown; one leading out of the repository's is not."""
    hub_dir = os.path.join(tmp, "hub")
    src = open(model(tmp, "s.safetensors", b"snap"), "rb").read()
    base = hf_cache(hub_dir, "org/snap", C1, {"model.safetensors": src, "config.json": b"{}\n",
                                              "sub/tokenizer.json": b'{"t": 1}\n'})
    snap = os.path.join(base, "snapshots", C1)
    os.symlink(os.path.join(tmp, "s.safetensors"), os.path.join(snap, "outside.json"))
    mp = mountpoint(tmp)
    with background(["-o", "originals", snap, mp], cwd=tmp) as (mnt, _, err):
        got = {n: open(os.path.join(mnt, "__files__", n), "rb").read()
               for n in os.listdir(os.path.join(mnt, "__files__"))}
        assert got == {"model.safetensors": src, "config.json": b"{}\n"}, sorted(got)
        assert open(os.path.join(mnt, "w"), "rb").read() == b"snap"
    assert err.count("\n") == 1 and "outside.json: not shown in __files__" in err, err


# ---- 3: a URL's user:password@ is in no message and not in argv ----

DEAD = f"http://user:{PASSWORD}@127.0.0.1:9"


@pytest.mark.parametrize("how", ["hf_endpoint", "HF_ENDPOINT", "endpoint", "AWS_ENDPOINT_URL"])
def test_url_password_in_no_message(tmp, how):
    """A Hub or S3 endpoint with user:PASSWORD@ that does not answer:
    mounting and --inspect say so in one line, without the password (the
    Hub's "no answer from the Hub at ..." printed it)."""
    src = "s3://models/x.safetensors" if how in ("endpoint", "AWS_ENDPOINT_URL") else "hf://org/x"
    opts = ["-o", f"{how}={DEAD},retries=0"] if how.islower() else ["-o", "retries=0"]
    env = clean_env(tmp, AWS_ACCESS_KEY_ID="AKID", AWS_SECRET_ACCESS_KEY="S",
                    HF_HOME=os.path.join(tmp, "hf"), **({how: DEAD} if how.isupper() else {}))
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    for argv in ([*opts, src, mnt], ["--inspect", *opts, src]):
        r = subprocess.run([BIN, *argv], capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == EXIT_SOURCE, r.stderr
        assert r.stderr.count("\n") == 1 and PASSWORD not in r.stderr, r.stderr
        if src.startswith("hf:"):
            assert "no answer from the Hub at http://127.0.0.1:9 " in r.stderr, r.stderr


@pytest.mark.parametrize("how", ["hf_endpoint", "endpoint"])
def test_url_password_masked_in_the_daemons_argv(hub, tmp, how):
    """-o hf_endpoint= and -o endpoint= with user:PASSWORD@: the daemon's
    /proc/PID/cmdline shows ****@ (the whole user:password), as for SOURCE, and no xattr nor
    log line holds the password."""
    log = os.path.join(tmp, "t.log")
    if how == "hf_endpoint":
        url = hub.endpoint.replace("http://", f"http://user:{PASSWORD}@")
        argv = ["-o", f"ro,{how}={url},logfile={log},verbose", "hf://org/public"]
        with background([*argv, mountpoint(tmp)], cwd=tmp, env=clean_env(tmp)) as (mnt, pids, err):
            check_daemon(mnt, pids, err)
    else:
        s3root = os.path.join(tmp, "s3")
        model(os.path.join(s3root, "models"), "x.safetensors", b"v1")
        with S3Double(s3root) as s3:
            url = s3.endpoint.replace("http://", f"http://user:{PASSWORD}@")
            argv = ["-o", f"ro,{how}={url},logfile={log},verbose", "s3://models/x.safetensors"]
            env = clean_env(tmp, AWS_ACCESS_KEY_ID="AKIDTEST", AWS_SECRET_ACCESS_KEY="SECRETTEST")
            with background([*argv, mountpoint(tmp)], cwd=tmp, env=env) as (mnt, pids, err):
                check_daemon(mnt, pids, err)
    assert PASSWORD not in open(log).read()


def check_daemon(mnt, pids, err):
    assert open(os.path.join(mnt, "w"), "rb").read() == b"v1"
    for pid in pids:
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
        assert PASSWORD.encode() not in cmdline and b"://" + b"*" * len("user:" + PASSWORD) + b"@" in cmdline, cmdline
    for name in os.listxattr(os.path.join(mnt, "w")):
        assert PASSWORD.encode() not in os.getxattr(os.path.join(mnt, "w"), name), name
    assert PASSWORD not in err


USER_TOKEN = "hf_userTOKEN1"
PROXY_TOKEN = "pxTOKEN2"


def test_token_as_the_urls_user_name_is_masked_everywhere(tmp):
    """http://TOKEN@host/... (a token given as the URL's user name, with no
    ':'), as SOURCE and as -o proxy=: masked whole in the daemon's
    /proc/PID/cmdline (only what followed a ':' was), so in --list's
    options too, and in no mount table, attribute, message or log line."""
    root = www(tmp)
    log = os.path.join(tmp, "t.log")
    with Nginx(root) as ng, FwdProxy() as px:
        url = ng.url("plain", "a.safetensors").replace("http://", f"http://{USER_TOKEN}@")
        proxy = px.url(PROXY_TOKEN)
        mp = mountpoint(tmp)
        argv = ["-o", f"ro,proxy={proxy},logfile={log},verbose", url, mp]
        with background(argv, cwd=tmp, env=clean_env(tmp)) as (mnt, pids, err):
            data = open(os.path.join(root, "a.safetensors"), "rb").read()[-300000:]
            assert open(os.path.join(mnt, "w"), "rb").read() == data
            for pid in pids:
                cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
                assert USER_TOKEN.encode() not in cmdline and PROXY_TOKEN.encode() not in cmdline, cmdline
                assert b"http://" + b"*" * len(USER_TOKEN) + b"@127.0.0.1:" in cmdline, cmdline
                assert b"proxy=http://" + b"*" * len(PROXY_TOKEN) + b"@127.0.0.1:" in cmdline, cmdline
            listed = run(["--list"])
            assert listed.returncode == 0 and mnt in listed.stdout, listed
            assert USER_TOKEN not in listed.stdout and PROXY_TOKEN not in listed.stdout, listed.stdout
            assert "proxy=http://" + "*" * len(PROXY_TOKEN) + "@" in listed.stdout, listed.stdout
            for name in os.listxattr(os.path.join(mnt, "w")):
                v = os.getxattr(os.path.join(mnt, "w"), name)
                assert USER_TOKEN.encode() not in v and PROXY_TOKEN.encode() not in v, name
            assert open("/proc/self/mountinfo").read().count(USER_TOKEN) == 0
            assert USER_TOKEN not in err and PROXY_TOKEN not in err
        # the proxy got every request, so the token was used where it goes
        assert px.get("/__seen")
    said = open(log).read()
    assert said and USER_TOKEN not in said and PROXY_TOKEN not in said, said
    # and a server that does not answer: the one line says where, not who
    dead = f"http://{USER_TOKEN}@127.0.0.1:9/a.safetensors"
    r = run(["--inspect", "-o", f"retries=0,proxy=http://{PROXY_TOKEN}@127.0.0.1:9", dead])
    assert r.returncode == EXIT_SOURCE and r.stderr.count("\n") == 1, r.stderr
    assert USER_TOKEN not in r.stderr and PROXY_TOKEN not in r.stderr and "127.0.0.1:9" in r.stderr, r.stderr


def test_hugging_face_cache_link_out_of_the_repository(tmp):
    """hf:// from the Hugging Face cache: a snapshot's file that links out
    of the repository's cache directory (to a file of root's, say) is
    refused in one line, exit 3, and never read; a companion file that does
    fails to read (EIO, and a line in the log) under -o originals, whose
    list of files is the snapshot's or the Hub's; the files that link into
    blobs/ are read. A blobs/ that is itself a link out of the repository's
    directory (moved to another disk) is refused as a snapshot's link out
    is; the repository's whole directory linked elsewhere is read."""
    hub_dir = os.path.join(tmp, "hub")
    secret = model(tmp, "secret.safetensors", b"sEcR")
    good = open(model(tmp, "good.safetensors", b"good"), "rb").read()
    base = hf_cache(hub_dir, "org/out", C1, {"ok/model.safetensors": good, "config.json": b"{}\n"})
    snap = os.path.join(base, "snapshots", C1)
    os.makedirs(os.path.join(snap, "bad"))
    os.symlink(secret, os.path.join(snap, "bad", "model.safetensors"))
    os.symlink(secret, os.path.join(snap, "ok", "tokenizer.json"))
    env = clean_env(tmp, HF_HUB_CACHE=hub_dir, HF_HUB_OFFLINE="1")
    r = subprocess.run([BIN, "--inspect", "hf://org/out/bad/model.safetensors"], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == EXIT_SOURCE and r.stderr.count("\n") == 1, r.stderr
    assert "refused: a symbolic link out of " + os.path.realpath(base) in r.stderr, r.stderr
    assert "sEcR" not in r.stdout
    mp = mountpoint(tmp)
    log = os.path.join(tmp, "log")
    with background(["-o", f"originals,logfile={log}", "hf://org/out/ok", mp], cwd=tmp, env=env) as (mnt, _, err):
        files = os.path.join(mnt, "__files__")
        assert sorted(os.listdir(files)) == ["model.safetensors", "tokenizer.json"]
        assert open(os.path.join(files, "model.safetensors"), "rb").read() == good
        assert open(os.path.join(mnt, "w"), "rb").read() == b"good"
        with pytest.raises(OSError) as e:
            open(os.path.join(files, "tokenizer.json"), "rb").read()
        assert e.value.errno == errno.EIO
    said = open(log).read()
    assert "tokenizer.json: cannot open it" in said and "refused: a symbolic link out of" in said, said
    # blobs/ moved to another disk and linked back leads out of the
    # repository's directory, as a snapshot's link would: refused the same
    # way (it made every file "inside"); the whole repository's directory
    # moved and linked back is the repository, resolved once
    moved = hf_cache(hub_dir, "org/moved", C1, {"model.safetensors": good})
    disk2 = os.path.join(tmp, "disk2")
    os.makedirs(disk2)
    shutil.move(os.path.join(moved, "blobs"), os.path.join(disk2, "blobs"))
    os.symlink(os.path.join(disk2, "blobs"), os.path.join(moved, "blobs"))
    r = subprocess.run([BIN, "--inspect", "hf://org/moved/model.safetensors"], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == EXIT_SOURCE and r.stderr.count("\n") == 1, r.stderr
    assert "refused: a symbolic link out of " + os.path.realpath(moved) in r.stderr, r.stderr
    whole = hf_cache(hub_dir, "org/whole", C1, {"model.safetensors": good})
    shutil.move(whole, os.path.join(disk2, "models--org--whole"))
    os.symlink(os.path.join(disk2, "models--org--whole"), whole)
    r = subprocess.run([BIN, "--inspect", "hf://org/whole/model.safetensors"], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0 and "w " in r.stdout, r.stderr


# Run as nobody: a repository of a shared Hugging Face cache, planted.
PLANT = r"""
import os, sys
hub, commit, secret_model, secret_text = sys.argv[1:5]
own = sys.stdin.buffer.read()
for name, files in (("tensor", {"model.safetensors": "../../blobs" + secret_model}),
                    ("files", {"config.json": "../../blobs" + secret_text})):
    repo = os.path.join(hub, "models--org--" + name)
    snap = os.path.join(repo, "snapshots", commit)
    os.makedirs(snap)
    os.makedirs(os.path.join(repo, "refs"))
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(commit)
    os.symlink("/", os.path.join(repo, "blobs"))
    for n, target in files.items():
        os.symlink(target, os.path.join(snap, n))
    if name == "files":
        with open(os.path.join(snap, "model.safetensors"), "wb") as f:
            f.write(own)
"""


def as_nobody(*argv, **kw):
    return subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv],
                          capture_output=True, timeout=60, **kw)


def test_hugging_face_cache_blobs_link_planted_by_another_user(tmp):
    """The attack of issue 44: in a Hugging Face cache others may write,
    nobody plants a repository whose blobs/ is a link to /, with snapshot
    links through it to root's 0600 files; root mounts it with -o
    originals,allow_other. The repository's own directory is the only
    root (blobs/ used to be a second one, and / held everything): the
    tensor's shard is refused in one line, exit 3, and a companion file
    under __files__ reads as EIO with a line in the log; nobody reads
    neither."""
    need_root()
    if not shutil.which("setpriv"):
        missing("setpriv (to act as another user)")
    secret_model = model(os.path.join(tmp, "rootonly"), "secret.safetensors", b"sEcR")
    secret_text = os.path.join(tmp, "rootonly", "secret.txt")
    with open(secret_text, "w") as f:
        f.write("root's secret\n")
    for p in (secret_model, secret_text):
        os.chmod(p, 0o600)
    own = open(model(os.path.join(tmp, "own"), "m.safetensors", b"mine"), "rb").read()
    shared = tempfile.mkdtemp(prefix="tfs-shared-hf-", dir="/tmp")
    mounts = []
    try:
        os.chmod(shared, 0o755)
        hub_dir = os.path.join(shared, "hub")
        os.mkdir(hub_dir)
        os.chmod(hub_dir, 0o777)
        r = as_nobody("/usr/bin/python3", "-c", PLANT, hub_dir, C1, secret_model, secret_text, input=own)
        assert r.returncode == 0, r.stderr
        assert os.lstat(os.path.join(hub_dir, "models--org--tensor", "blobs")).st_uid == NOBODY
        for name in ("tensor", "files"):  # a repository's own directory nobody's is refused whole (below)
            os.chown(os.path.join(hub_dir, "models--org--" + name), 0, 0)
            os.chmod(os.path.join(hub_dir, "models--org--" + name), 0o755)
        env = clean_env(tmp, HF_HUB_CACHE=hub_dir, HF_HUB_OFFLINE="1")
        log = os.path.join(tmp, "log")

        def mount(name):
            mp = os.path.join(shared, "mp-" + name)
            os.mkdir(mp)
            r = subprocess.run([BIN, "-o", f"originals,allow_other,logfile={log}", "hf://org/" + name, mp],
                               capture_output=True, text=True, timeout=60, env=env)
            if is_mounted(mp):
                mounts.append((mp, daemon_pids(mp)))
            return mp, r

        mp, r = mount("tensor")
        got = as_nobody("cat", os.path.join(mp, "w")).stdout if r.returncode == 0 else b""
        assert b"sEcR" not in got, "nobody read root's 0600 file as a tensor"
        assert r.returncode == EXIT_SOURCE and r.stderr.count("\n") == 1, r.stderr
        repo = os.path.realpath(os.path.join(hub_dir, "models--org--tensor"))
        assert "refused: a symbolic link out of " + repo in r.stderr, r.stderr
        mp, r = mount("files")
        assert r.returncode == 0, r.stderr
        assert as_nobody("cat", os.path.join(mp, "w")).stdout == b"mine"
        assert sorted(os.listdir(os.path.join(mp, "__files__"))) == ["config.json", "model.safetensors"]
        got = as_nobody("cat", os.path.join(mp, "__files__", "config.json"))
        assert b"secret" not in got.stdout, "nobody read root's 0600 file under __files__"
        assert got.returncode != 0 and b"Input/output error" in got.stderr, got
    finally:
        for mp, pids in mounts:
            unmount(mp, pids)
        shutil.rmtree(shared)
    said = open(log).read()
    assert "config.json: cannot open it" in said and "refused: a symbolic link out of" in said, said


# Run as nobody: a repository's directory of a shared cache, planted.
PLANT_REPO = r"""
import os, sys
hub, theirs, commit = sys.argv[1:4]
snap = os.path.join(theirs, "snapshots", commit)
os.makedirs(snap)
os.makedirs(os.path.join(theirs, "refs"))
with open(os.path.join(theirs, "refs", "main"), "w") as f:
    f.write(commit)
with open(os.path.join(snap, "model.safetensors"), "wb") as f:
    f.write(sys.stdin.buffer.read())
os.symlink(theirs, os.path.join(hub, "models--org--linked"))
os.symlink(os.path.join(hub, "models--org--linked"), os.path.join(hub, "models--org--chain"))
"""


def test_hugging_face_cache_repository_planted_by_another_user(tmp):
    """In a Hugging Face cache others may write, nobody plants a
    repository's directory: a link models--org--linked to a directory of
    theirs, a chain of links to it, a directory of theirs; root mounts
    hf://org/NAME. Each is refused in one line, exit 3, naming the
    directory and why, and nothing of nobody's is served (it was: the
    tensor read as nobody wrote it). A link of root's to a directory of
    root's is followed; a directory of root's others may write is refused."""
    need_root()
    if not shutil.which("setpriv"):
        missing("setpriv (to act as another user)")
    own = open(model(os.path.join(tmp, "own"), "m.safetensors", b"evil"), "rb").read()
    shared = tempfile.mkdtemp(prefix="tfs-shared-hf-", dir="/tmp")
    try:
        os.chmod(shared, 0o755)
        hub_dir = os.path.join(shared, "hub")
        os.mkdir(hub_dir)
        os.chmod(hub_dir, 0o1777)
        theirs = os.path.join(shared, "theirs")
        os.mkdir(theirs)
        os.chown(theirs, NOBODY, NOBODY)
        r = as_nobody("/usr/bin/python3", "-c", PLANT_REPO, hub_dir, os.path.join(theirs, "repo"), C1, input=own)
        assert r.returncode == 0, r.stderr
        r = as_nobody("cp", "-a", os.path.join(theirs, "repo"), os.path.join(hub_dir, "models--org--owned"))
        assert r.returncode == 0, r.stderr
        env = clean_env(tmp, HF_HUB_CACHE=hub_dir, HF_HUB_OFFLINE="1")
        for name, why in (("linked", "is a symbolic link of uid 65534: only the mounting user's or root's is followed"),
                          ("chain", "is a symbolic link of uid 65534"),
                          ("owned", "belongs to uid 65534, not to the mounting user (uid 0) nor root")):
            r = subprocess.run([BIN, "--inspect", "hf://org/" + name], capture_output=True, text=True, timeout=60,
                               env=env)
            assert r.returncode == EXIT_SOURCE and r.stderr.count("\n") == 1, (name, r.stderr)
            assert f"the Hugging Face cache's {hub_dir}/models--org--{name}: refused: " in r.stderr, r.stderr
            assert why in r.stderr and "w " not in r.stdout, (name, r.stderr)
        # root's own: a link to root's directory is followed; others may not write it
        mine = hf_cache(os.path.join(shared, "root"), "org/mine", C1, {"model.safetensors": own})
        os.symlink(mine, os.path.join(hub_dir, "models--org--mine"))
        r = subprocess.run([BIN, "--inspect", "hf://org/mine"], capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 0 and "w " in r.stdout, r.stderr
        os.chmod(mine, 0o777)
        r = subprocess.run([BIN, "--inspect", "hf://org/mine"], capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == EXIT_SOURCE and r.stderr.count("\n") == 1, r.stderr
        assert f"{os.path.realpath(mine)} may be written by others (and is not sticky)" in r.stderr, r.stderr
    finally:
        shutil.rmtree(shared)
