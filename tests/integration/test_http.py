"""http(s) sources against a real nginx from Debian (a generated
configuration on free ports of 127.0.0.1), with the fault proxy for what
nginx cannot do: every real checkpoint in every view, the header in one or
two requests, checked ranges, a server that ignores Range, redirects and
loops, retries after 503/Retry-After, resets, short bodies, a wrong
Content-Range, stalls, a file that changes while mounted, and a dead
server that must not hang ls, stat, reads or the unmount."""

import hashlib
import json
import re
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
import time

import pytest

from servers import FaultProxy, Nginx
from tfsutil import (BIN, EXIT_SOURCE, SANITIZED, EXIT_USAGE, REAL, REPO, daemon_pids, fname, fuse_ok,
                     is_mounted, mounted, need_real, real_files, run, sha256, unmount, vm_kb, wait_gone,
                     write_st)

VIEWS = [(), ("-o", "format=npy"), ("-o", "convert=f32"), ("-o", "layout=tree,format=npy,convert=f32")]


@pytest.fixture(scope="module")
def web():
    """nginx over a document root holding the real checkpoints (real/) and
    files the tests write (gen/)."""
    root = tempfile.mkdtemp(prefix="tfs-www-")
    os.chmod(root, 0o755)
    if os.path.isdir(REAL):
        shutil.copytree(REAL, os.path.join(root, "real"))
    os.makedirs(os.path.join(root, "gen"))
    with Nginx(root) as ng:
        yield ng
    shutil.rmtree(root)


def gen(web, name, tensors, **kw):
    """Writes a checkpoint into the served root; returns its local path."""
    path = os.path.join(web.root, "gen", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_st(path, tensors, **kw)
    os.chmod(path, 0o644)
    return path


def tree_bytes(mnt):
    out = {}
    for root, dirs, files in os.walk(mnt):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, mnt)] = hashlib.sha256(fh.read()).hexdigest()
    return out


@pytest.mark.parametrize("rel", real_files() + ["julia-safetensors-jl-sharded/model.safetensors.index.json"])
def test_real_checkpoints_over_http_in_every_view(web, rel):
    """The same bytes, xattrs and listing as mounting the local file, in
    every view; the raw tensors match expected.json."""
    need_real()
    local = os.path.join(REAL, rel)
    url = web.url("plain", "real/" + rel)
    exp = json.load(open(os.path.join(REAL, "expected.json")))["files"]
    for view in VIEWS:
        with mounted(local, *view) as a, mounted(url, *view) as b:
            assert tree_bytes(a) == tree_bytes(b), view
            if not view:
                for r, e in exp.items():
                    if e["kind"] != "safetensors" or (r != rel and not (
                            rel.endswith("index.json") and r.startswith(os.path.dirname(rel) + "/"))):
                        continue
                    for name, t in e["tensors"].items():
                        p = os.path.join(b, fname(name))
                        assert sha256(p) == t["sha256"], name
                        assert os.getxattr(p, "user.source").decode().startswith(web.url("plain", "real/"))
                        etag = os.getxattr(p, "user.etag").decode()
                        assert etag.startswith('"') and etag.endswith('"')
    ia = run(["--inspect", "--json", local])
    ib = run(["--inspect", "--json", url])
    assert ia.returncode == ib.returncode == 0
    da, db = json.loads(ia.stdout), json.loads(ib.stdout)
    da.pop("source"), db.pop("source")
    assert da == db


def requests_for(web, uri_part):
    return [r for r in web.requests() if uri_part in r["uri"]]


def test_header_in_one_request_or_two(web, tmp):
    """A header inside the first 100,000 bytes costs one request; a larger
    one exactly two; --inspect reads headers only."""
    small = gen(web, "small.safetensors", [("w", "U8", (300000,), os.urandom(300000))])
    names = [(f"t{i:06d}." + "x" * 60, "U8", (1,), b"a") for i in range(3000)]  # a ~250 KB header
    big = gen(web, "bighdr.safetensors", names)
    web.clear_log()
    assert run(["--inspect", web.url("plain", "gen/small.safetensors")]).returncode == 0
    reqs = requests_for(web, "small.safetensors")
    assert [r["range"] for r in reqs] == ["bytes=0-99999"]
    web.clear_log()
    r = run(["--inspect", web.url("plain", "gen/bighdr.safetensors")])
    assert r.returncode == 0 and "3000 tensors" in r.stdout
    reqs = requests_for(web, "bighdr.safetensors")
    assert len(reqs) == 2 and reqs[0]["range"] == "bytes=0-99999"
    n = int.from_bytes(open(big, "rb").read(8), "little")
    a, b = map(int, reqs[1]["range"][6:].split("-"))
    assert a < 100000 < 8 + n - 1 <= b, reqs  # the rest of the header, in one request
    # every data request carries the pinned ETag and asks for one range
    with mounted(web.url("plain", "gen/small.safetensors")) as mnt:
        assert open(os.path.join(mnt, "w"), "rb").read() == open(small, "rb").read()[-300000:]
    etag = '"%x-%x"' % (int(os.stat(small).st_mtime), os.path.getsize(small))
    data = [r for r in requests_for(web, "small.safetensors") if r["range"] != "bytes=0-99999"]
    assert data and all(r["if_match"] == etag and r["status"] == 206 and "," not in r["range"] for r in data)


def test_server_that_ignores_range_is_refused(web, tmp):
    n = 256 << 20
    gen(web, "r.safetensors", [("w", "U8", (n,), b"\1" * n)])
    r = run([web.url("norange", "gen/r.safetensors"), tmp])
    assert r.returncode == EXIT_SOURCE
    assert r.stderr.count("\n") == 1
    assert "the server ignores Range requests" in r.stderr and "r.safetensors" in r.stderr
    # and it was stopped, not downloaded whole (nginx logs what it could
    # send before the connection closed)
    time.sleep(0.5)
    reqs = [x for x in web.requests() if x["port"] == web.ports["norange"]]
    assert reqs and all(x["bytes"] < n // 2 for x in reqs), reqs
    os.remove(os.path.join(web.root, "gen", "r.safetensors"))


def test_redirects_followed_loops_refused(web, tmp):
    gen(web, "d.safetensors", [("w", "U8", (4,), b"abcd")])
    extra = {"to_plain": f"return 302 http://127.0.0.1:{web.ports['plain']}$uri;"}
    with Nginx(web.root, extra_servers=extra) as ng2:
        with mounted(ng2.url("to_plain", "gen/d.safetensors")) as mnt:
            assert open(os.path.join(mnt, "w"), "rb").read() == b"abcd"
    r = run([web.url("loop", "gen/d.safetensors"), tmp])
    assert r.returncode == EXIT_SOURCE and r.stderr.count("\n") == 1
    assert "too many redirects" in r.stderr


def test_errors_at_mount_time(web, tmp):
    gen(web, "e.safetensors", [("w", "U8", (4,), b"abcd")])
    cases = [
        (web.url("plain", "gen/nothing.safetensors"), EXIT_SOURCE, "not found (HTTP 404)"),
        (web.url("unavailable", "gen/e.safetensors"), EXIT_SOURCE, "HTTP 503"),
        ("http://127.0.0.1:9/x.safetensors", EXIT_SOURCE, "onnect"),
        (web.url("plain", "gen/"), EXIT_SOURCE, "HTTP has no directory listing"),
        ("http://127.0.0.1:9/a b.safetensors", EXIT_USAGE, "spaces or control characters"),
    ]
    for url, code, want in cases:
        t0 = time.time()
        r = run(["-o", "retries=1", url, tmp])
        assert r.returncode == code, (url, r.returncode, r.stderr)
        assert r.stderr.count("\n") == 1 and want in r.stderr, (url, r.stderr)
        assert r.stderr.startswith(f"tensorfs: {url}"), r.stderr
        assert time.time() - t0 < 20
    # a 503 with Retry-After: 1 is retried, after a second each time
    web.clear_log()
    t0 = time.time()
    r = run(["-o", "retries=2", web.url("unavailable", "gen/e.safetensors"), tmp])
    assert r.returncode == EXIT_SOURCE and time.time() - t0 >= 2
    # nginx logs a request once it has answered it: the last line may
    # land a moment after the client is gone
    for _ in range(40):
        tries = [x for x in web.requests() if x["port"] == web.ports["unavailable"]]
        if len(tries) >= 3:
            break
        time.sleep(0.05)
    assert len(tries) == 3, tries
    for bad in ("retries=x", "timeout=0", "cache_size=1K", "cache_dir"):
        r = run(["-o", bad, web.url("plain", "gen/e.safetensors"), tmp])
        assert r.returncode == EXIT_USAGE or r.returncode == EXIT_SOURCE, (bad, r.stderr)
        assert r.stderr.count("\n") == 1, r.stderr


@pytest.fixture
def proxied(web):
    with FaultProxy(web.ports["plain"]) as p:
        yield p


def big_checkpoint(web, name, n=3 << 20):
    raw = os.urandom(n)
    gen(web, name, [("w", "U8", (n,), raw)], pad="odd")
    return raw


def read_in(mnt, name="w"):
    with open(os.path.join(mnt, name), "rb") as f:
        return f.read()


@pytest.mark.parametrize("fault", ["reset", "truncate"])
def test_resets_and_short_bodies_are_retried(web, proxied, fault):
    raw = big_checkpoint(web, f"f-{fault}.safetensors")
    with mounted(proxied.url(f"gen/f-{fault}.safetensors")) as mnt:
        proxied.faults({"match": f"f-{fault}", "fault": fault, "times": 3, "after": 5000})
        assert read_in(mnt) == raw
    assert proxied.stats()[f"/gen/f-{fault}.safetensors"] >= 4


@pytest.mark.parametrize("fault", ["reset", "truncate", "badrange", "status", "length"])
def test_persistent_faults_give_eio_and_a_log_line(web, proxied, tmp, fault):
    """Retried a bounded number of times, then EIO, never wrong bytes, and
    one log line saying why; the mount goes on answering."""
    raw = big_checkpoint(web, f"p-{fault}.safetensors")
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    p = subprocess.Popen([BIN, "-f", "-o", "retries=2", proxied.url(f"gen/p-{fault}.safetensors"), mnt],
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 20
        while not is_mounted(mnt) and time.time() < deadline:
            time.sleep(0.02)
        assert is_mounted(mnt)
        proxied.faults({"match": f"p-{fault}", "fault": fault, "after": 5000, "status": 500})
        with pytest.raises(OSError) as ei:
            read_in(mnt)
        assert ei.value.errno == 5  # EIO
        assert "__metadata__.json" in os.listdir(mnt)
        proxied.faults()  # the server heals: the mount reads again
        # once the failure is older than the hold that answers the
        # kernel's immediate re-read of a failed page (docs/remote.md)
        time.sleep(1.2)
        assert read_in(mnt) == raw
    finally:
        subprocess.run(["fusermount3", "-u", mnt])
        err = p.communicate(timeout=30)[1]
    lines = [l for l in err.splitlines() if f"p-{fault}" in l]
    assert lines, err
    want = {"reset": "", "truncate": "", "badrange": "answered another range", "status": "HTTP 500",
            "length": ""}[fault]
    assert any(want in l for l in lines), lines


BLK = 256 << 10


def block_files(cache_dir):
    """The disk cache's block files, as (block index, data): a header of
    48 bytes (magic, key length, data length, index, ...), the key, the
    data (sources/cache_disk.c)."""
    out = []
    for root, _, files in os.walk(cache_dir):
        for f in files:
            if f.endswith(".blk"):
                with open(os.path.join(root, f), "rb") as fh:
                    raw = fh.read()
                key_len, _, idx = struct.unpack_from("<IIQ", raw, 8)
                out.append((idx, raw[48 + key_len:]))
    return out


def whole_blocks_checkpoint(web, name, blocks=12):
    """One random tensor `w` in a file of exactly `blocks` cache blocks;
    returns the file's bytes and where w starts."""
    path = os.path.join(web.root, "gen", name)
    n = blocks * BLK
    for _ in range(4):  # the header's length depends on n's digits
        start = write_st(path, [("w", "U8", (n,), bytes(n))], pad=False)
        n = blocks * BLK - start
    raw = os.urandom(n)
    assert write_st(path, [("w", "U8", (n,), raw)], pad=False) == start
    os.chmod(path, 0o644)
    data = open(path, "rb").read()
    assert len(data) == blocks * BLK
    return data, start


@pytest.mark.parametrize("fault", ["gzip", "overrun"])
def test_an_encoded_or_overlong_answer_is_a_failed_one(web, proxied, tmp, fault):
    """A proxy that gzips the range answers (Content-Encoding: gzip) though
    no one asked (tensorfs sends no Accept-Encoding), or a server that
    sends more than the range: a failed answer. A read fails (EIO) with a
    line in the log saying why, never with the compressed bytes; nothing
    of an encoded answer is kept in memory, and nothing of a failed answer
    in cache_dir (the warm-up's blocks of such answers were served from
    memory, and written there, as they landed: the compressed bytes as
    tensor bytes); once the server heals, the file reads right. (A block
    of an answer that runs on past its range was served as its bytes and
    one more landed, as any block: its bytes are the range's.)"""
    name = f"enc-{fault}.safetensors"
    data, start = whole_blocks_checkpoint(web, name)
    cache = os.path.join(tmp, "cache")
    os.mkdir(cache, 0o700)
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    # the first request (100,000 bytes) passes: the mount comes up
    proxied.faults({"match": name, "fault": fault, "min": 100001})
    p = subprocess.Popen([BIN, "-f", "-o", f"retries=1,direct_io,warm,cache_dir={cache}",
                          proxied.url("gen/" + name), mnt], stderr=subprocess.PIPE, text=True)
    wrong = []
    try:
        deadline = time.time() + 20
        while not is_mounted(mnt) and time.time() < deadline and p.poll() is None:
            time.sleep(0.02)
        assert is_mounted(mnt)
        for _ in range(600):  # the warm-up goes through every block (a bound, not a timing)
            done, total = map(int, os.getxattr(mnt, "user.warm").decode().split())
            if done >= total:
                break
            time.sleep(0.05)
        assert done >= total
        fd = os.open(os.path.join(mnt, "w"), os.O_RDONLY)
        try:
            failed = 0
            for k in range(1, 12, 2):
                off = k * BLK - start
                try:
                    got = os.pread(fd, 4096, off)
                    if got != data[start + off:start + off + 4096]:
                        wrong.append(off)
                except OSError as e:
                    assert e.errno == 5
                    failed += 1
            assert not wrong, f"wrong bytes served at {wrong}"
            assert failed == 6 if fault == "gzip" else failed >= 1
            # every answer after the first failed: not one block of them
            # kept (the disk cache is written as blocks are loaded)
            kept = block_files(cache)
            assert kept == [], f"blocks {sorted(i for i, _ in kept)} of failed answers in cache_dir"
            proxied.faults()  # the server heals: the right bytes, not kept wrong ones
            time.sleep(1.2)  # past the hold of a failed block (docs/remote.md)
            assert os.pread(fd, len(data) - start, 0) == data[start:]
        finally:
            os.close(fd)
    finally:
        subprocess.run(["fusermount3", "-u", mnt])
        err = p.communicate(timeout=30)[1]
    assert "__accept_encoding" not in proxied.stats()
    said = {"gzip": "(Content-Encoding: gzip)", "overrun": "more bytes than the range asked for"}[fault]
    lines = [l for l in err.splitlines() if name in l and "bytes " in l]
    assert len(lines) >= failed and all(said in l for l in lines), err
    if fault == "gzip":
        # the first answer encoded too: the mount is refused, in one line
        proxied.faults({"match": name, "fault": fault})
        r = run(["--inspect", proxied.url("gen/" + name)])
        assert r.returncode == EXIT_SOURCE and r.stderr.count("\n") == 1, r.stderr
        assert "(Content-Encoding: gzip)" in r.stderr, r.stderr
    # after the heal, the blocks of the answers that ended well (an
    # overrun's blocks served as they landed were not fetched again)
    kept = block_files(cache)
    assert fault != "gzip" or sorted(i for i, _ in kept) == list(range(12)), sorted(i for i, _ in kept)
    assert kept and all(d == data[i * BLK:(i + 1) * BLK] for i, d in kept), "wrong bytes in cache_dir"


def test_a_transfer_coding_is_undone(web, proxied, tmp):
    """Transfer-Encoding: gzip, chunked on every answer (hop by hop, unlike
    Content-Encoding): libcurl undoes it, and the bytes are the file's."""
    raw = big_checkpoint(web, "te-gzip.safetensors")
    proxied.faults({"match": "te-gzip", "fault": "te_gzip"})
    with mounted(proxied.url("gen/te-gzip.safetensors")) as mnt:
        assert read_in(mnt) == raw
    assert "__accept_encoding" not in proxied.stats()


def test_which_numpy_calls_see_a_failed_read(web, proxied, tmp):
    """A read of a remote mount that fails for good is EIO. numpy 1.24
    (Debian 12) ignores it in np.fromfile: the array comes back whole, with
    zeros where the reads failed, and no error (with an offset, an empty
    array). open().read() raises OSError (EIO), so np.frombuffer over it
    never sees wrong bytes, and np.load of a -o format=npy file raises. The
    guide, where it suggests np.fromfile, says so and shows those."""
    import numpy as np
    n = 16 << 20  # 64 MiB: far more than a read-ahead fetches before the faults start
    v = np.arange(1, n + 1, dtype=np.float32)
    gen(web, "np/a.safetensors", [("w", "F32", [n], v.tobytes())])
    url = proxied.url("gen/np/a.safetensors")
    for opts in ("retries=0", "retries=0,format=npy"):
        with mounted(url, "-o", opts) as mnt:
            proxied.faults({"match": "np/a.safetensors", "fault": "status", "status": 500})
            try:
                if "npy" in opts:
                    with pytest.raises(ValueError):
                        np.load(os.path.join(mnt, "w.npy"))
                    continue
                path = os.path.join(mnt, "w")
                a = np.fromfile(path, np.float32)  # no error
                assert a.size == n and (a == 0).any() and not np.array_equal(a, v), (a.size, int((a == 0).sum()))
                assert np.fromfile(path, np.float32, count=4, offset=n * 2).size == 0
                with pytest.raises(OSError) as ei:
                    np.frombuffer(open(path, "rb").read(), np.float32)
                assert ei.value.errno == 5  # EIO
                with open(path, "rb") as f, pytest.raises(OSError) as ei:
                    f.seek(n * 2)
                    np.frombuffer(f.read(16), np.float32)
                assert ei.value.errno == 5
            finally:
                proxied.faults()
    for page in ("README.md", "docs/recipes.md", "docs/remote.md", "docs/troubleshooting.md"):
        text = open(os.path.join(REPO, page)).read()
        assert "np.fromfile" in text and "zeros" in text and "np.frombuffer(open(" in text and "np.load" in text, \
            page


def test_stalled_server_times_out(web, proxied, tmp):
    """A server that stops sending fails a read after -o timeout= seconds
    per attempt, not never; meanwhile ls and stat answer at once."""
    raw = big_checkpoint(web, "stall.safetensors")
    with mounted(proxied.url("gen/stall.safetensors"), "-o", "timeout=1,retries=1") as mnt:
        proxied.faults({"match": "stall", "fault": "stall", "seconds": 30})
        done = {}

        def reader():
            t0 = time.time()
            try:
                read_in(mnt)
                done["r"] = "read"
            except OSError as e:
                done["r"] = e.errno
            done["t"] = time.time() - t0
        th = threading.Thread(target=reader)
        th.start()
        time.sleep(0.3)
        t0 = time.time()
        assert sorted(os.listdir(mnt))[0] == "__metadata__.json"
        os.stat(os.path.join(mnt, "w"))
        os.getxattr(os.path.join(mnt, "w"), "user.shape")
        assert time.time() - t0 < 1
        th.join(30)
        assert not th.is_alive()
        assert done["r"] == 5 and done["t"] < 15, done
        proxied.faults()
        time.sleep(1.2)  # past the hold of a failed block (docs/remote.md)
        assert read_in(mnt) == raw


def test_dead_server_never_holds_up_sigterm(web, proxied, tmp):
    """A read waiting on a server that stalls: SIGTERM still unmounts at
    once (the transfers are stopped), and the reader gets EIO."""
    big_checkpoint(web, "dead.safetensors")
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    assert run(["-o", "timeout=60", proxied.url("gen/dead.safetensors"), mnt]).returncode == 0
    pid = daemon_pids(mnt)[0]
    proxied.faults({"match": "dead", "fault": "stall", "seconds": 120})
    res = {}

    def reader():
        try:
            read_in(mnt)
            res["r"] = "read"
        except OSError as e:
            res["r"] = e.errno
    th = threading.Thread(target=reader)
    th.start()
    time.sleep(0.5)
    t0 = time.time()
    os.kill(pid, signal.SIGTERM)
    assert wait_gone(pid, 10), "the daemon did not exit"
    took = time.time() - t0
    print(f"SIGTERM to exit: {took:.3f} s")
    # docs/remote.md, "When the network fails": within about 0.1 s; a bound with
    # room for a loaded machine (it was about 2 s before aborts shut the
    # transfers' sockets)
    assert took < 1.0, took
    th.join(10)
    assert not th.is_alive() and res["r"] != "read"
    assert not is_mounted(mnt)


def test_file_changed_while_mounted(web, tmp):
    """nginx serves a new version (new ETag): every read of bytes not yet
    cached fails with EIO (the If-Match gets 412), one line is logged,
    and bytes of the two versions are never mixed."""
    n = 4 << 20
    old = os.urandom(n)
    path = gen(web, "chg.safetensors", [("w", "U8", (n,), old)])
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    p = subprocess.Popen([BIN, "-f", "-o", "cache_size=4M", web.url("plain", "gen/chg.safetensors"), mnt],
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 20
        while not is_mounted(mnt) and time.time() < deadline:
            time.sleep(0.02)
        with open(os.path.join(mnt, "w"), "rb") as f:
            head = f.read(65536)
            assert head == old[:65536]
            new = os.urandom(n)
            write_st(path + ".new", [("w", "U8", (n,), new)])
            os.chmod(path + ".new", 0o644)
            os.utime(path + ".new", (time.time() + 5, time.time() + 5))
            os.rename(path + ".new", path)
            try:
                rest = f.read()
                # whatever came must be the old version's bytes
                assert head + rest == old[:len(head) + len(rest)]
                assert len(rest) < n - 65536, "read past the change without an error"
            except OSError as e:
                assert e.errno == 5
        web_412 = [r for r in web.requests() if "chg.safetensors" in r["uri"] and r["status"] == 412]
        assert web_412
    finally:
        subprocess.run(["fusermount3", "-u", mnt])
        err = p.communicate(timeout=30)[1]
    assert sum("changed since it was mounted" in l for l in err.splitlines()) == 1, err


def test_sequential_read_prefetches_and_random_reads_fetch_blocks(web):
    """A sequential read is served by growing prefetch requests (fewer,
    larger ranges than the kernel's requests); random 4 KiB reads fetch one
    256 KiB block each, not more."""
    n = 32 << 20
    raw = os.urandom(n)
    gen(web, "seq.safetensors", [("w", "U8", (n,), raw)])
    web.clear_log()
    with mounted(web.url("plain", "gen/seq.safetensors")) as mnt:
        assert read_in(mnt) == raw
    reqs = [r for r in requests_for(web, "seq.safetensors") if r["range"] != "bytes=0-99999"]
    assert sum(r["bytes"] for r in reqs) >= n - 100000
    assert len(reqs) < n // (512 << 10), len(reqs)  # fewer than one per FUSE read
    assert max(r["bytes"] for r in reqs) > (1 << 20)  # the window grew
    # random reads across 1 GiB (sparse: holes read as zeros)
    big = 1 << 30
    path = os.path.join(web.root, "gen", "rand.safetensors")
    text = json.dumps({"w": {"dtype": "U8", "shape": [big], "data_offsets": [0, big]}}).encode()
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        f.truncate(8 + len(text) + big)
    web.clear_log()
    with mounted(web.url("plain", "gen/rand.safetensors"), "-o", "direct_io") as mnt:
        fd = os.open(os.path.join(mnt, "w"), os.O_RDONLY)
        import random
        rng = random.Random(3)
        for _ in range(20):
            off = rng.randrange(0, big - 4096)
            assert os.pread(fd, 4096, off) == bytes(4096)
        os.close(fd)
    reqs = [r for r in requests_for(web, "rand.safetensors") if r["range"] != "bytes=0-99999"]
    assert reqs and all(r["bytes"] <= 2 * (256 << 10) for r in reqs), reqs
    os.remove(path)


def test_memory_bounded_with_16_readers(web):
    """16 readers of 8 MiB tensors at once, with -o cache_size=16M: the
    daemon's peak RSS stays under the cache plus 64 MiB."""
    tensors = [(f"t{i}", "U8", (8 << 20,), os.urandom(8 << 20)) for i in range(16)]
    gen(web, "mem.safetensors", tensors)
    with mounted(web.url("plain", "gen/mem.safetensors"), "-o", "cache_size=16M") as mnt:
        pid = daemon_pids(mnt)[0]
        errors = []

        def reader(name, raw):
            try:
                if read_in(mnt, name) != raw:
                    errors.append(name)
            except OSError as e:
                errors.append((name, e))
        ths = [threading.Thread(target=reader, args=(t[0], t[3])) for t in tensors]
        for t in ths:
            t.start()
        for t in ths:
            t.join(120)
        assert errors == []
        if not SANITIZED:
            hwm = vm_kb(pid, "VmHWM") * 1024
            assert hwm < (16 << 20) + (64 << 20), hwm


M64 = (1 << 64) - 1


def _tfs_hash(b, seed):
    """core/hash.h's tfs_hash, to write a block header the daemon accepts."""
    def mix(a, m):
        r = a * m
        return (r & M64) ^ (r >> 64)
    n = len(b)
    h = seed ^ ((n * 0x9e3779b97f4a7c15) & M64)
    i = 0
    while n - i >= 8:
        h = mix(h ^ int.from_bytes(b[i:i + 8], "little"), 0xa0761d6478bd642f)
        i += 8
    w = int.from_bytes(b[i:].ljust(8, b"\0"), "little")
    h = mix(h ^ w ^ 0xe7037ed1a0b428db, 0x8ebc6af09c88c6e3)
    return mix(h, seed ^ 0x589965cc75374cc3)


def block_header(blk, flags):
    """A disk cache block's 48-byte header (sources/cache_disk.c) with new
    flags and a header hash that checks out."""
    seed = 0x3c6ef372fe94f82b
    key_len = int.from_bytes(blk[8:12], "little")
    h = bytearray(blk[:48])
    h[32:40] = flags.to_bytes(8, "little")
    h[40:48] = bytes(8)
    key = bytes(blk[48:48 + key_len])
    h[40:48] = (_tfs_hash(bytes(h), seed) ^ _tfs_hash(key, seed + 1)).to_bytes(8, "little")
    return bytes(h)


def test_disk_cache_survives_remounts(web, tmp):
    """-o cache_dir: a second mount of the same file reads no tensor data
    over the network (only the first request, which checks the version);
    two mounts share the directory; a damaged block file is refetched."""
    n = 3 << 20
    raw = os.urandom(n)
    gen(web, "dc.safetensors", [("w", "U8", (n,), raw)])
    cache = os.path.join(tmp, "cache")
    url = web.url("plain", "gen/dc.safetensors")
    with mounted(url, "-o", f"cache_dir={cache}") as mnt:
        assert read_in(mnt) == raw
        # the reader's replies do not wait for the blocks' files: wait for
        # all of them, one per 256 KiB of the file (a block being written
        # is a .tmp file: only named blocks are looked at)
        nblocks = -(-os.path.getsize(os.path.join(web.root, "gen", "dc.safetensors")) // (256 << 10))
        for _ in range(200):
            named = sorted(os.path.join(r, f) for r, _, fs in os.walk(cache) for f in fs if f.endswith(".blk"))
            if len(named) == nblocks:
                break
            time.sleep(0.05)
        assert len(named) == nblocks
        # never synced, never marked: every read checks a block (flags, a
        # u64 at offset 32, stays 0)
        assert all(int.from_bytes(open(b, "rb").read(40)[32:40], "little") == 0 for b in named)
    blocks = [os.path.join(r, f) for r, _, fs in os.walk(cache) for f in fs]
    assert sorted(blocks) == named and all(b.endswith(".blk") for b in blocks)
    web.clear_log()
    with mounted(url, "-o", f"cache_dir={cache}") as a, mounted(url, "-o", f"cache_dir={cache}") as b:
        assert read_in(a) == raw and read_in(b) == raw
    assert [r["range"] for r in requests_for(web, "dc.safetensors")] == ["bytes=0-99999"] * 2
    # damage a block's header: it is noticed, dropped and fetched again
    victim = sorted(blocks)[len(blocks) // 2]
    data = bytearray(open(victim, "rb").read())
    data[20] ^= 0xFF
    open(victim, "wb").write(bytes(data))
    web.clear_log()
    with mounted(url, "-o", f"cache_dir={cache}") as mnt:
        assert read_in(mnt) == raw
    assert len(requests_for(web, "dc.safetensors")) == 2
    # a flipped data byte is refetched (block_header's hash is the daemon's)
    victim = sorted(blocks)[len(blocks) // 3]
    data = bytearray(open(victim, "rb").read())
    assert block_header(data, flags=0) == bytes(data[:48])
    data[-10] ^= 0xFF
    open(victim, "wb").write(bytes(data))
    web.clear_log()
    with mounted(url, "-o", f"cache_dir={cache}") as mnt:
        assert read_in(mnt) == raw
    assert len(requests_for(web, "dc.safetensors")) == 2
    # a limit: the directory is kept under it
    with mounted(url, "-o", f"cache_dir={cache}2,cache_max=1M") as mnt:
        assert read_in(mnt) == raw
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(cache + "2") for f in fs)
    assert total <= (1 << 20) + (256 << 10) + 4096, total


@pytest.mark.parametrize("opts", [[], ["-o", "nosplice"]])
def test_a_flipped_byte_in_the_disk_cache_is_never_served(web, tmp, opts):
    """One byte flipped in a block file's data, whatever its header's flags
    say (DURABLE, bit 0 of the u64 at offset 32, under a header hash that
    checks out: the blocks that were never checked again): every read from
    the disk cache checks the block's data against its checksum, so the
    block is dropped and fetched again, and the reader gets the file's
    bytes, with nosplice or without."""
    n = 3 << 20
    raw = os.urandom(n)
    name = "flip-" + ("nosplice" if opts else "splice") + ".safetensors"
    gen(web, name, [("w", "U8", (n,), raw)])
    cache = os.path.join(tmp, "cache")
    url = web.url("plain", "gen/" + name)
    nblocks = -(-os.path.getsize(os.path.join(web.root, "gen", name)) // (256 << 10))
    with mounted(url, "-o", f"cache_dir={cache}", *opts) as mnt:
        assert read_in(mnt) == raw
        for _ in range(200):  # a block's file is written after its reply
            named = sorted(os.path.join(r, f) for r, _, fs in os.walk(cache) for f in fs if f.endswith(".blk"))
            if len(named) == nblocks:
                break
            time.sleep(0.05)
    assert len(named) == nblocks
    victims = named[1:nblocks - 1:3]
    for victim in victims:
        data = bytearray(open(victim, "rb").read())
        data[:48] = block_header(data, flags=1)
        data[48 + int.from_bytes(data[8:12], "little") + 1000] ^= 0x01
        open(victim, "wb").write(bytes(data))
    for again in range(2):  # dropped and fetched again, then kept as fetched
        web.clear_log()
        with mounted(url, "-o", f"cache_dir={cache}", *opts) as mnt:
            assert read_in(mnt) == raw
            with open(os.path.join(mnt, "w"), "rb") as f:
                for k in range(0, n, 99991):
                    assert os.pread(f.fileno(), 7, k) == raw[k:k + 7]
        got = requests_for(web, name)
        assert len(got) == 1 + (0 if again else len(victims)), [r["range"] for r in got]


def test_credentials_never_shown(web, tmp):
    """user:password in a URL is used, and shown nowhere: not in
    user.source, the mount's device name, nor a message."""
    gen(web, "cred.safetensors", [("w", "U8", (4,), b"abcd")])
    url = web.url("plain", "gen/cred.safetensors").replace("http://", "http://alice:s3cret@")
    with mounted(url) as mnt:
        assert read_in(mnt) == b"abcd"
        src = os.getxattr(os.path.join(mnt, "w"), "user.source").decode()
        assert src == web.url("plain", "gen/cred.safetensors")
        with open("/proc/self/mountinfo") as f:
            info = f.read()
        assert "s3cret" not in info and "alice" not in info
    bad = url.replace("cred.safetensors", "none.safetensors")
    r = run([bad, tmp])
    assert r.returncode == EXIT_SOURCE and "s3cret" not in r.stderr and "alice" not in r.stderr
    assert r.stderr.startswith("tensorfs: " + web.url("plain", "gen/none.safetensors")), r.stderr


def test_index_over_http_with_escaped_shard_names(web):
    """Shards are resolved relative to the index URL, each name escaped."""
    d = os.path.join(web.root, "gen", "sh")
    os.makedirs(d, exist_ok=True)
    wm = {}
    for i, name in enumerate(["a b.safetensors", "c%d.safetensors", "é.safetensors"]):
        write_st(os.path.join(d, name), [(f"t{i}", "U8", (1,), bytes([i]))])
        wm[f"t{i}"] = name
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    for x in os.listdir(d):
        os.chmod(os.path.join(d, x), 0o644)
    with mounted(web.url("plain", "gen/sh/model.safetensors.index.json")) as mnt:
        for i in range(3):
            assert read_in(mnt, f"t{i}") == bytes([i])
    uris = {r["uri"] for r in requests_for(web, "/gen/sh/")}
    assert "/gen/sh/a b.safetensors" in uris  # nginx logs the decoded path


def test_one_version_everywhere(web, tmp):
    """The User-Agent of every request names the version --version prints
    (one version, defined once in core/version.h)."""
    v = run(["--version"])
    assert v.returncode == 0
    version = v.stdout.split()[1]
    gen(web, "ua.safetensors", [("w", "U8", (4,), b"abcd")])
    web.clear_log()
    with mounted(web.url("plain", "gen/ua.safetensors")) as mnt:
        assert read_in(mnt) == b"abcd"
    agents = {r["agent"] for r in requests_for(web, "ua.safetensors")}
    assert agents == {f"tensorfs/{version}"}, agents


def counters(mnt):
    return {k: int(v) for k, v in (f.split("=") for f in os.getxattr(mnt, "user.counters").decode().split())}


def wait_for(path, text, seconds=10):
    for _ in range(int(seconds * 20)):
        if os.path.exists(path) and text in open(path).read():
            return True
        time.sleep(0.05)
    return False


def test_counters_log_file_and_sigusr1(web, proxied, tmp):
    """user.counters on the root says what the sources did (requests,
    bytes fetched, retries, cache hits and misses); SIGUSR1 writes the same
    to -o logfile=, as do retries and, with -o verbose, the counters at
    unmount."""
    n = 3 << 20
    raw = os.urandom(n)
    gen(web, "cnt.safetensors", [("w", "U8", (n,), raw)])
    log = os.path.join(tmp, "tfs.log")
    # the server fails the first request once: retried, and said in the log
    proxied.faults({"match": "cnt", "fault": "status", "status": 503, "times": 1})
    with mounted(proxied.url("gen/cnt.safetensors"), "-o", f"logfile={log},verbose,direct_io") as mnt:
        assert "user.counters" in os.listxattr(mnt)
        c0 = counters(mnt)
        assert c0["requests"] >= 2 and c0["retries"] == 1, c0
        assert wait_for(log, "retrying (1 of 3)")
        assert read_in(mnt) == raw
        c1 = counters(mnt)
        # every block the reader asked for was fetched for it or ahead of it
        assert c1["bytes_fetched"] >= n and c1["cache_misses"] >= 1, c1
        assert c1["cache_hits"] + c1["cache_misses"] >= n // (256 << 10), c1
        assert read_in(mnt) == raw  # direct_io: the daemon is asked again
        c2 = counters(mnt)
        assert c2["cache_hits"] + c2["cache_misses"] >= c1["cache_hits"] + c1["cache_misses"] + n // (256 << 10)
        assert c2["requests"] >= c1["requests"] and c2["bytes_fetched"] >= c1["bytes_fetched"], (c1, c2)
        os.kill(daemon_pids(mnt)[0], signal.SIGUSR1)
        assert wait_for(log, "counters (SIGUSR1): requests=")
    assert wait_for(log, "counters at unmount: requests=")
    text = open(log).read()
    assert all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} tensorfs\[\d+\]: ", l) for l in text.splitlines()), text
    assert oct(os.stat(log).st_mode & 0o777) == "0o600"


def test_retries_said_on_a_terminal(web, proxied, tmp):
    """On a terminal the command says what it is waiting for ("...;
    retrying (1 of 3)"), and a final failure says how many tries were
    made; without a terminal (a pipe) stderr stays one line."""
    import shutil
    if not shutil.which("script"):
        from tfsutil import missing
        missing("script (util-linux), for a terminal")
    gen(web, "tty.safetensors", [("w", "U8", (4,), b"abcd")])
    url = proxied.url("gen/tty.safetensors")
    proxied.faults({"match": "tty", "fault": "status", "status": 503, "times": 1})
    r = subprocess.run(["script", "-qec", f"{BIN} --inspect {url}", "/dev/null"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout
    assert "HTTP 503; retrying (1 of 3)" in r.stdout, r.stdout
    proxied.faults({"match": "tty", "fault": "status", "status": 503})
    r = run(["-o", "retries=2", "--inspect", url])
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "(3 tries)" in r.stderr, r.stderr
    proxied.faults()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_single_threaded_mount_ends_on_a_signal_while_idle(web, tmp, sig):
    """-f -s over http: once a read has started the cache's 32 workers, a
    signal sent to the daemon must reach the loop's one thread, not a
    worker (which took it, flagged the session and left the loop waiting
    on /dev/fuse until the next request): the daemon unmounts and exits
    while the mount is idle. Bounded: 60 s is a hang, not a timing."""
    raw = big_checkpoint(web, "single.safetensors", 8 << 20)
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    p = subprocess.Popen([BIN, "-f", "-s", web.url("plain", "gen/single.safetensors"), mnt],
                         stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(400):  # mounted (bounded)
            if is_mounted(mnt):
                break
            time.sleep(0.05)
        assert is_mounted(mnt)
        with open(os.path.join(mnt, "w"), "rb") as f:
            assert f.read(1 << 20) == raw[:1 << 20]  # the workers run from here on
        time.sleep(0.5)  # idle
        p.send_signal(sig)
        p.wait(timeout=60)
        assert not is_mounted(mnt)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
            subprocess.run(["fusermount3", "-u", "-z", mnt])
