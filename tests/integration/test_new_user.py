"""What a new user met (issue 35, section 7): options and URL schemes
nobody takes, tool flags without their tool; over http, the times of
directories and generated files, re-reads of a generated file served from
the cache, and a server that ignores Range requests (python3 -m
http.server), against real servers on 127.0.0.1."""

import json
import os
import subprocess

import numpy as np
import pytest

from test_http import gen, web  # noqa: F401 (the nginx fixture)
from tfsutil import BIN, EXIT_USAGE, fuse_ok, is_mounted, mounted, run, write_st


@pytest.mark.parametrize("args,says", [
    (["--json", "{src}", "{mnt}"], "--json goes with --inspect, --verify, --stats or diff"),
    (["--xxh64", "{src}", "{mnt}"], "--xxh64 goes with --verify"),
    (["--inspect", "--xxh64", "{src}"], "--xxh64 goes with --verify"),
    (["--bogus", "{src}", "{mnt}"], "unknown option '--bogus'"),
    (["--bogus", "{tmp}/nothing.safetensors", "{mnt}"], "unknown option '--bogus'"),
    (["--verify-all", "{src}"], "unknown option '--verify-all'"),
    (["--inspect", "-x", "{src}"], "unknown option '-x'"),
    (["ftp://host/x.safetensors", "{mnt}"], "unknown URL scheme 'ftp://'"),
    (["--inspect", "ftp://user:secret@host/x"], "unknown URL scheme 'ftp://'"),
    (["--inspect", "gopher+x://host/x"], "unknown URL scheme 'gopher+x://'"),
])
def test_unknown_options_and_schemes_are_named(args, says, tmp):
    """Each gets one line naming it and exit 2, before the source is looked
    at: --json used to mount and be ignored, --bogus to report the source,
    --verify-all to say "missing MOUNTPOINT", ftp:// to be looked for as a
    local path."""
    fuse_ok()
    src = os.path.join(tmp, "a.safetensors")
    write_st(src, [("w", "U8", [4], b"abcd")])
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = run([a.format(src=src, mnt=mnt, tmp=tmp) for a in args])
    assert r.returncode == EXIT_USAGE, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("tensorfs: ") and says in r.stderr, r.stderr
    assert "secret" not in r.stderr
    if "scheme" in says:
        for scheme in ("http://", "https://", "hf://", "s3://"):
            assert scheme in r.stderr
    assert not is_mounted(mnt)
    # a local path that looks so is still reachable
    if args[0].startswith("ftp://"):
        os.makedirs(os.path.join(tmp, "ftp:", "host"))
        os.rename(src, os.path.join(tmp, "ftp:", "host", "x.safetensors"))
        r = run(["--inspect", "./ftp://host/x.safetensors"], cwd=tmp)
        assert r.returncode == 0 and "1 tensors" in r.stdout, (r.stdout, r.stderr)


def test_times_of_directories_and_generated_files(web, tmp):  # noqa: F811
    """Over http every file and directory carries the time of what SOURCE
    named (its Last-Modified), as tensor files did; directories and
    generated files showed 1970-01-01. For an index, the index's time."""
    rng = np.random.default_rng(3)
    one = gen(web, "times/one.safetensors", [("a.w", "F32", [64], rng.random(64, "<f4").tobytes())],
              metadata={"k": "v"})
    os.utime(one, (1_700_000_000, 1_700_000_000))
    with mounted(web.url("plain", "gen/times/one.safetensors"), "-o", "export,sums,layout=tree") as mnt:
        names = []
        for root, dirs, files in os.walk(mnt):
            names += [os.path.join(root, n) for n in dirs + files]
        names.append(mnt)
        assert {"model.safetensors", "a.safetensors", "__metadata__.json", "__tensors__.tsv"} <= \
            set(os.listdir(mnt)) and "__sha256sums__.txt" in os.listdir(os.path.join(mnt, "a"))
        times = {os.path.relpath(p, mnt): os.stat(p).st_mtime for p in names}
        assert set(times.values()) == {1_700_000_000}, times
    # an index and two shards, each with its own time: the index's is the mount's
    d = os.path.join(web.root, "gen", "times")
    for i, t in ((1, 1_600_000_000), (2, 1_650_000_000)):
        p = gen(web, f"times/s-{i}.safetensors", [(f"t{i}", "U8", [4], bytes([i]) * 4)])
        os.utime(p, (t, t))
    idx = os.path.join(d, "s.safetensors.index.json")
    json.dump({"metadata": {}, "weight_map": {"t1": "s-1.safetensors", "t2": "s-2.safetensors"}},
              open(idx, "w"))
    os.chmod(idx, 0o644)
    os.utime(idx, (1_690_000_000, 1_690_000_000))
    with mounted(web.url("plain", "gen/times/s.safetensors.index.json"), "-o", "export") as mnt:
        assert os.stat(mnt).st_mtime == 1_690_000_000
        assert os.stat(os.path.join(mnt, "__metadata__.json")).st_mtime == 1_690_000_000
        assert os.stat(os.path.join(mnt, "model.safetensors")).st_mtime == 1_690_000_000
        assert os.stat(os.path.join(mnt, "t1")).st_mtime == 1_600_000_000
        assert os.stat(os.path.join(mnt, "t2")).st_mtime == 1_650_000_000


def counters(mnt):
    return {k: int(v) for k, v in (f.split("=") for f in os.getxattr(mnt, "user.counters").decode().split())}


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("opts", [(), ("-o", "cache_size=1G"), ("-o", "export_cache"), ("-o", "direct_io")])
def test_generated_file_read_again_from_the_cache(web, opts):  # noqa: F811
    """model.safetensors read three times fetches the source once: its
    reader keeps no copy (direct I/O, or pages dropped behind it), so the
    block cache keeps what was read instead of recycling it first (each
    read downloaded the source again). With -o direct_io a tensor's file
    too."""
    n = 12 << 20
    rng = np.random.default_rng(8)
    tensors = [("a", "U8", [n], rng.bytes(n)), ("b", "U8", [n], rng.bytes(n))]
    size = os.path.getsize(gen(web, "reread.safetensors", tensors))
    with mounted(web.url("plain", "gen/reread.safetensors"), "-o", "export", *opts) as mnt:
        model = os.path.join(mnt, "model.safetensors")
        want = read_all(model)
        hl = 8 + int.from_bytes(want[:8], "little")
        assert want[hl:] == tensors[0][3] + tensors[1][3]
        first = counters(mnt)
        assert size - 100000 <= first["bytes_fetched"] <= size + (1 << 20), first
        for _ in range(2):
            assert read_all(model) == want
        assert counters(mnt)["bytes_fetched"] == first["bytes_fetched"], (first, counters(mnt))
        assert counters(mnt)["requests"] == first["requests"]
        if "direct_io" in opts:
            for _ in range(2):
                assert read_all(os.path.join(mnt, "a")) == tensors[0][3]
            assert counters(mnt)["bytes_fetched"] == first["bytes_fetched"]


class HttpServer:
    """python3 -m http.server on a free port of 127.0.0.1 (it answers every
    Range request with 200 and the whole file); its log says every GET."""

    def __init__(self, root):
        import tempfile
        self.root = root
        self.log = tempfile.mktemp(prefix="tfs-httpserver-", suffix=".log")

    def __enter__(self):
        import subprocess
        import sys
        from servers import free_port, start_retrying, wait_port

        def start():
            self.port = free_port()
            self.logf = open(self.log, "w")
            self.proc = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1",
                                          "--directory", self.root, str(self.port)],
                                         stdout=subprocess.DEVNULL, stderr=self.logf)
            wait_port(self.port, self.proc)
            return self

        def again():
            self.proc.wait()
            self.logf.close()

        return start_retrying(start, again)

    def __exit__(self, *a):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.logf.close()
        os.unlink(self.log)

    def url(self, path):
        return f"http://127.0.0.1:{self.port}/{path}"

    def gets(self):
        """The paths of every GET so far, in order."""
        import re
        with open(self.log) as f:
            return re.findall(r'"GET /(\S*) HTTP/1\.[01]" \d+', f.read())


def sharded(root, big_header_shard=1, index_pad=0):
    """Three shards (one with a header over the first request's 100,000
    bytes) and their index; returns {tensor name: bytes}, {shard: size}."""
    rng = np.random.default_rng(11)
    tensors, sizes, wm = {}, {}, {}
    for k in range(3):
        ts = [(f"s{k}.w{j}", "F32", [300000], rng.random(300000, "<f4").tobytes()) for j in range(4)]
        if k == big_header_shard:
            ts += [(f"s{k}.small{j:05d}." + "x" * 60, "U8", [1], bytes([j % 256])) for j in range(2000)]
        name = f"model-{k + 1:05d}-of-00003.safetensors"
        write_st(os.path.join(root, name), ts)
        sizes[name] = os.path.getsize(os.path.join(root, name))
        for t in ts:
            tensors[t[0]] = t[3]
            wm[t[0]] = name
    json.dump({"metadata": {"total_size": sum(len(v) for v in tensors.values()), "pad": "p" * index_pad},
               "weight_map": wm}, open(os.path.join(root, "model.safetensors.index.json"), "w"))
    return tensors, sizes


def test_python_http_server_served_from_one_download(tmp):
    """python3 -m http.server, which answers a range with 200 and the whole
    file, was refused (exit 3), --inspect too. The header is read from the
    start of an answer, stopped there; each shard's data comes from one
    download of it, when first read, kept in memory, with one warning at
    mount; every tensor is byte-exact, and reading everything again sends
    nothing."""
    import urllib.request
    from tfsutil import daemon_pids, unmount
    fuse_ok()
    root = os.path.join(tmp, "www")
    os.mkdir(root)
    tensors, sizes = sharded(root, index_pad=150000)
    total = sum(sizes.values())
    with HttpServer(root) as srv:
        req = urllib.request.Request(srv.url(next(iter(sizes))), headers={"Range": "bytes=0-9"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200  # it ignores Range: what this test is about
        index = srv.url("model.safetensors.index.json")
        before = len(srv.gets())
        r = run(["--inspect", index])
        assert r.returncode == 0 and not r.stderr, r.stderr
        assert f"{len(tensors)} tensors" in r.stdout, r.stdout
        seen = srv.gets()[before:]
        # headers only: one request a shard, two for the longer header
        assert sorted(seen) == sorted(["model.safetensors.index.json"] * 2 + list(sizes) +
                                      ["model-00002-of-00003.safetensors"]), seen
        mnt = os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        before = len(srv.gets())
        r = run([index, mnt])
        assert r.returncode == 0, r.stderr
        pids = daemon_pids(mnt)
        try:
            lines = r.stderr.splitlines()
            assert len(lines) == 1 and "ignores Range requests" in lines[0] and "3 files" in lines[0], r.stderr
            for name, data in tensors.items():
                assert read_all(os.path.join(mnt, name)) == data, name
            c = counters(mnt)
            gets = srv.gets()[before:]
            # the probe (stopped after its start) and one download per shard,
            # and for the one whose header is longer, the rest of the header
            for s in sizes:
                assert gets.count(s) == (3 if s == "model-00002-of-00003.safetensors" else 2), (s, gets)
            assert total <= c["bytes_fetched"] < total + (4 << 20), (c, total)
            for name, data in tensors.items():
                assert read_all(os.path.join(mnt, name)) == data, name
            assert srv.gets()[before:] == gets and counters(mnt)["bytes_fetched"] == c["bytes_fetched"]
        finally:
            unmount(mnt, pids)


def test_python_http_server_file_over_cache_size(tmp):
    """A shard that cache_size cannot hold is refused at mount with one line
    saying what to add (exit 3); with -o cache_dir it is kept there, and
    served byte-exact."""
    from tfsutil import EXIT_SOURCE
    fuse_ok()
    root = os.path.join(tmp, "www")
    os.mkdir(root)
    tensors, sizes = sharded(root)
    with HttpServer(root) as srv:
        index = srv.url("model.safetensors.index.json")
        mnt = os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        r = run(["-o", "cache_size=4M", index, mnt])
        assert r.returncode == EXIT_SOURCE and r.stderr.count("\n") == 1, r.stderr
        assert "ignores Range requests" in r.stderr and "cache_size=4M" in r.stderr and \
            "add -o cache_dir=DIR" in r.stderr, r.stderr
        assert not is_mounted(mnt)
        cdir = os.path.join(tmp, "cache")
        os.mkdir(cdir, 0o700)
        with mounted(index, "-o", f"cache_size=4M,cache_dir={cdir}") as m:
            for name, data in tensors.items():
                assert read_all(os.path.join(m, name)) == data, name
            assert counters(m)["bytes_fetched"] < sum(sizes.values()) + (4 << 20)


def test_whole_download_never_holds_up_sigterm(tmp):
    """A read waiting for a whole-file download from a server that ignores
    Range and trickles (nginx: max_ranges 0, 16 KiB/s after the first
    256 KiB, so the download would take minutes): SIGTERM unmounts at
    once and the reader gets an error."""
    import signal
    import threading
    from servers import Nginx
    from tfsutil import daemon_pids, wait_gone
    fuse_ok()
    root = os.path.join(tmp, "www")
    os.mkdir(root)
    os.chmod(tmp, 0o755)
    os.chmod(root, 0o755)
    n = 4 << 20
    write_st(os.path.join(root, "slow.safetensors"), [("a", "U8", [n], b"a" * n), ("b", "U8", [n], b"b" * n)])
    os.chmod(os.path.join(root, "slow.safetensors"), 0o644)
    extra = {"trickle": "max_ranges 0; limit_rate_after 256k; limit_rate 16k;"}
    with Nginx(root, extra_servers=extra) as ng:
        mnt = os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        r = run([ng.url("trickle", "slow.safetensors"), mnt])
        assert r.returncode == 0 and "ignores Range requests" in r.stderr, r.stderr
        pid = daemon_pids(mnt)[0]
        res = {}

        def reader():
            try:
                res["r"] = read_all(os.path.join(mnt, "b"))
            except OSError as e:
                res["r"] = e.errno
        th = threading.Thread(target=reader)
        th.start()
        th.join(1)
        assert th.is_alive()  # waiting for the download
        os.kill(pid, signal.SIGTERM)
        assert wait_gone(pid, 20), "the daemon did not exit"
        th.join(20)
        assert not th.is_alive() and isinstance(res["r"], int), res.get("r", b"")[:10]
        assert not is_mounted(mnt)


# ---- issue 44: every option checked once, for every command, before SOURCE ----

COMMANDS = {  # a command's words before its options, and after them
    "mount": ([], ["{src}", "{mnt}"]),
    "--inspect": (["--inspect"], ["{src}"]),
    "--verify": (["--verify"], ["{src}"]),
    "--stats": (["--stats"], ["{src}"]),
    "diff": (["diff"], ["{src}", "{src}"]),
}


def command(cmd, opts, **kw):
    before, after = COMMANDS[cmd]
    return before + list(opts) + [a.format(**kw) for a in after]


@pytest.mark.parametrize("cmd", list(COMMANDS))
@pytest.mark.parametrize("bad", ["abc", "0", "-1"])
def test_view_option_values_are_refused_by_every_command(cmd, bad, tmp):
    """-o zarr_chunk_size=abc, =0, =-1: the mount refused them and the
    tools (--inspect, --verify, --stats, diff) went on without a word."""
    src = os.path.join(tmp, "a.safetensors")
    write_st(src, [("w", "U8", [4], b"abcd")])
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = run(command(cmd, ["-o", f"zarr,zarr_chunk_size={bad}"], src=src, mnt=mnt))
    assert r.returncode == EXIT_USAGE, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and f"-o zarr_chunk_size={bad}: expected a size" in r.stderr, r.stderr
    assert r.stdout == "" and not is_mounted(mnt)


@pytest.mark.parametrize("args,says", [
    (["-o", "layout", "{src}", "{mnt}"], "-o layout takes a value (-o layout=flat|tree)"),
    (["-o", "layout", "tree", "{src}", "{mnt}"], "-o layout tree: an option's value follows '=' (-o layout=tree)"),
    (["-o", "zarr,layout", "tree", "{src}", "{mnt}"], "(-o layout=tree)"),
    (["--inspect", "-o", "layout", "tree", "{src}"], "(-o layout=tree)"),
    (["-o", "zarr_chunk_size", "{src}", "{mnt}"], "-o zarr_chunk_size takes a value (-o zarr_chunk_size=SIZE)"),
    (["-o", "edits", "{src}", "{mnt}"], "-o edits takes a value (-o edits=FILE)"),
    (["-o", "export=1", "{src}", "{mnt}"], "-o export takes no value (-o export)"),
    (["-o", "strict=yes", "{src}", "{mnt}"], "-o strict takes no value (-o strict)"),
    (["-o", "zar", "{src}", "{mnt}"], "unknown option '-o zar': did you mean '-o zarr'?"),
    (["-o", "layuot=tree", "{src}", "{mnt}"], "did you mean '-o layout=tree'?"),
    (["-o", "direct-io", "{src}", "{mnt}"], "did you mean '-o direct_io'?"),
    (["-o", "cachedir=/x", "{src}", "{mnt}"], "did you mean '-o cache_dir=/x'?"),
    (["-o", "alow_other", "{src}", "{mnt}"], "did you mean '-o allow_other'?"),
    (["--stats", "-o", "zarr_chunksize=1M", "{src}"], "did you mean '-o zarr_chunk_size=1M'?"),
    (["--inpsect", "{src}"], "unknown option '--inpsect': did you mean '--inspect'?"),
    (["-o", "nonempty", "{src}", "{mnt}"], "unknown option '-o nonempty' (see tensorfs --help)"),
    (["--inspect", "-o", "allow_other", "{src}"], "-o allow_other is a mount option: --inspect mounts nothing"),
    (["-o", "max_threads=many", "{src}", "{mnt}"], "-o max_threads=many: libfuse refuses this value"),
])
def test_option_messages(args, says, tmp):
    """-o layout was called an unknown option, -o layout tree an
    unexpected argument, and a near-miss got no "did you mean"."""
    fuse_ok()
    src = os.path.join(tmp, "a.safetensors")
    write_st(src, [("w", "U8", [4], b"abcd")])
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = run([a.format(src=src, mnt=mnt) for a in args])
    assert r.returncode == EXIT_USAGE, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("tensorfs: ") and says in r.stderr, r.stderr
    if "unknown" in says and "did you mean" not in says:
        assert "did you mean" not in r.stderr
    assert r.stdout == "" and not is_mounted(mnt)


def test_options_of_libfuse_still_mount(tmp):
    """What libfuse takes (asked of libfuse itself) still mounts."""
    src = os.path.join(tmp, "a.safetensors")
    write_st(src, [("w", "U8", [4], b"abcd")])
    with mounted(src, "-o", "max_threads=4,clone_fd,noatime,default_permissions,ro") as mnt:
        assert open(os.path.join(mnt, "w"), "rb").read() == b"abcd"


@pytest.mark.parametrize("cmd", list(COMMANDS))
def test_a_mistake_is_said_before_the_source_is_asked(cmd, tmp):
    """A server that never answers: a typo, a view's bad value, a missing
    value, a source driver's bad value, an edits file that is not there
    are each said at once, and the server is asked nothing (a typo and the
    edits file used to be said after the source, so the user waited on
    the server to learn of them)."""
    from servers import Hostile
    root = os.path.join(tmp, "www")
    os.makedirs(root)
    write_st(os.path.join(root, "m.safetensors"), [("w", "U8", [4], b"abcd")])
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    with Hostile(root) as srv:
        srv.mode(stall_from=0, stall_seconds=600)
        for opts, says in ((["-o", "zar"], "did you mean '-o zarr'"),
                           (["-o", "zarr,zarr_chunk_size=abc"], "zarr_chunk_size=abc"),
                           (["-o", "layout", "tree"], "-o layout"),
                           (["-o", "retries=abc"], "-o retries= takes a number"),
                           (["-o", "edits=" + os.path.join(tmp, "none.json")], "does not exist")):
            r = subprocess.run([BIN] + command(cmd, opts, src=srv.url("m.safetensors"), mnt=mnt),
                               capture_output=True, text=True, timeout=60)  # a bound on a hang
            assert r.returncode == EXIT_USAGE and says in r.stderr, (opts, r.stderr)
            assert r.stderr.count("\n") == 1, r.stderr
        assert [s for s in srv.seen() if s["path"] == "/m.safetensors"] == []
    assert not is_mounted(mnt)
