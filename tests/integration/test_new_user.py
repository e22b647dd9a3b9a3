"""What a new user met (issue 35, section 7): options and URL schemes
nobody takes, tool flags without their tool; over http, the times of
directories and generated files, re-reads of a generated file served from
the cache, and a server that ignores Range requests (python3 -m
http.server), against real servers on 127.0.0.1."""

import json
import os

import numpy as np
import pytest

from test_http import gen, web  # noqa: F401 (the nginx fixture)
from tfsutil import EXIT_USAGE, fuse_ok, is_mounted, mounted, run, write_st


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
