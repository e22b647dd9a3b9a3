"""Loading a model from the network: many ranges in flight, read-ahead
past the tensor and into the next shard in checkpoint order, a random
reader that gets no more than it asks, correct bytes under faults at high
concurrency, the warm-up into the disk cache, and the options' checks."""

import hashlib
import json
import os
import random
import subprocess
import tempfile
import threading
import time

import pytest

from servers import FaultProxy, Hostile, Nginx
from tfsutil import BIN, EXIT_USAGE, fuse_ok, is_mounted, mounted, run, write_st

MiB = 1 << 20


def sharded(root, nshards=4, per=4, size=2 * MiB, seed=3):
    """A sharded checkpoint with its index, as transformers writes one;
    returns {tensor name: bytes} in checkpoint order."""
    rng = random.Random(seed)
    out, wm = {}, {}
    for s in range(nshards):
        fn = f"model-{s + 1:05d}-of-{nshards:05d}.safetensors"
        ts = []
        for t in range(per):
            name = f"model.layers.{s * per + t:02d}.weight"
            raw = rng.randbytes(size)
            ts.append((name, "U8", (size,), raw))
            out[name] = raw
            wm[name] = fn
        write_st(os.path.join(root, fn), ts)
    with open(os.path.join(root, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": nshards * per * size}, "weight_map": wm}, f)
    for f in os.listdir(root):
        os.chmod(os.path.join(root, f), 0o644)
    return out


@pytest.fixture
def www(tmp):
    root = os.path.join(tmp, "www")
    os.makedirs(root)
    os.chmod(root, 0o755)
    with Hostile(root) as h:
        h.root = root
        yield h


def data_ranges(seen, path):
    out = []
    for s in seen:
        if s["method"] == "GET" and s["path"] == path and s["range"]:
            a, b = s["range"][6:].split("-")
            if int(a) >= 100000:
                out.append((int(a), int(b)))
    return out


@pytest.mark.parametrize("opt,bad", [("concurrency", "0"), ("concurrency", "257"), ("concurrency", "many"),
                                     ("concurrency", "4K"), ("part_size", "100K"), ("part_size", "65M"),
                                     ("part_size", "300K"), ("part_size", "-4M"), ("concurrency", "+4"),
                                     ("concurrency", " 4"), ("part_size", "8M "), ("cache_size", "5 "),
                                     ("cache_size", "64MB"), ("retries", "-1"), ("timeout", "+5")])
def test_options_validated(www, opt, bad):
    sharded(www.root, nshards=1, per=1, size=1000)
    r = run(["--inspect", "-o", f"{opt}={bad}", www.url("model.safetensors.index.json")])
    assert r.returncode == EXIT_USAGE, r.stderr
    assert r.stderr.count("\n") == 1 and f"-o {opt}= takes" in r.stderr and bad in r.stderr, r.stderr


def test_warm_needs_a_cache_dir(www):
    sharded(www.root, nshards=1, per=1, size=1000)
    r = run(["--inspect", "-o", "warm", www.url("model.safetensors.index.json")])
    assert r.returncode == EXIT_USAGE and "-o warm needs -o cache_dir=DIR" in r.stderr, r.stderr


def test_reads_ahead_in_checkpoint_order_with_many_requests_in_flight(www):
    """One reader through the tensors in name order: the read-ahead keeps
    many ranges in flight (each answer is delayed), goes past each tensor's
    end and into the next shard before the reader opens it, fetches every
    byte once, and the bytes are right."""
    want = sharded(www.root)
    www.mode(delay=0.05)
    with mounted(www.url("model.safetensors.index.json"), "-o", "part_size=1M,concurrency=32") as mnt:
        names = sorted(n for n in os.listdir(mnt) if not n.startswith("__"))
        assert names == list(want)
        first_shard = [n for n in names if int(n.split(".")[2]) < 4]
        for n in first_shard:
            assert open(os.path.join(mnt, n), "rb").read() == want[n]
        deadline = time.time() + 5  # the read-ahead runs on its own threads
        while not data_ranges(www.seen(), "/model-00002-of-00004.safetensors") and time.time() < deadline:
            time.sleep(0.05)
        ahead = data_ranges(www.seen(), "/model-00002-of-00004.safetensors")
        assert ahead, "nothing of the next shard was fetched ahead of its reader"
        for n in names[len(first_shard):]:
            assert open(os.path.join(mnt, n), "rb").read() == want[n]
    assert json.loads(subprocess.run(["curl", "-s", www.url("__inflight")], capture_output=True,
                                     text=True).stdout) >= 8
    for s in range(4):
        rs = sorted(data_ranges(www.seen(), f"/model-{s + 1:05d}-of-00004.safetensors"))
        for (a0, a1), (b0, b1) in zip(rs, rs[1:]):
            assert a1 < b0, rs  # no byte twice
        assert all(b - a + 1 <= MiB for a, b in rs)  # parts of part_size at most


def test_random_reader_gets_what_it_asks(www):
    """4 KiB reads at random offsets (direct I/O, so the kernel adds no
    readahead): each fetches its own 256 KiB block, never a stream."""
    want = sharded(www.root, nshards=1, per=1, size=64 * MiB)
    raw = want["model.layers.00.weight"]
    with mounted(www.url("model.safetensors.index.json"), "-o", "direct_io") as mnt:
        fd = os.open(os.path.join(mnt, "model.layers.00.weight"), os.O_RDONLY)
        rng = random.Random(9)
        blocks = set()
        try:
            for _ in range(40):
                off = rng.randrange(0, len(raw) - 4096)
                assert os.pread(fd, 4096, off) == raw[off:off + 4096]
                blocks.add((off + 8 + 80) // (256 << 10))
        finally:
            os.close(fd)
    rs = data_ranges(www.seen(), "/model-00001-of-00001.safetensors")
    # a block each (two where a read crosses a block's end), and in all at
    # most one part (4 MiB) of read-ahead more
    fetched = sum(b - a + 1 for a, b in rs)
    assert fetched <= 40 * (512 << 10) + 4 * MiB, [(a, b - a + 1) for a, b in rs]


def test_correct_bytes_under_faults_at_high_concurrency(tmp):
    """Resets, 503 with Retry-After, cut bodies and a stall, mid-stream,
    with 64 requests allowed in flight: every byte right."""
    root = os.path.join(tmp, "www")
    os.makedirs(root)
    os.chmod(root, 0o755)
    want = sharded(root, nshards=2, per=4, size=4 * MiB)
    with Nginx(root) as ng, FaultProxy(ng.ports["plain"]) as fp:
        with mounted(fp.url("model.safetensors.index.json"),
                     "-o", "concurrency=64,part_size=1M,timeout=2,retries=5") as mnt:
            fp.faults({"match": "model-", "fault": "reset", "times": 4, "after": 3000},
                      {"match": "model-", "fault": "status", "status": 503, "retry_after": 1, "times": 4},
                      {"match": "model-", "fault": "truncate", "times": 4, "after": 70000},
                      {"match": "model-", "fault": "stall", "seconds": 4, "times": 2})
            got = {}
            for n in want:
                got[n] = hashlib.sha256(open(os.path.join(mnt, n), "rb").read()).hexdigest()
        assert got == {n: hashlib.sha256(v).hexdigest() for n, v in want.items()}
        assert sum(v for k, v in fp.stats().items() if "model-" in k) >= 14


def test_warm_up_fills_the_cache_and_survives_a_remount(www, tmp):
    """-o warm streams the whole checkpoint into cache_dir in the
    background, with a log line per 10 % and user.warm on the mount's
    root; the mount answers meanwhile; a later mount reads no tensor byte
    over the network."""
    want = sharded(www.root)
    cache = os.path.join(tmp, "cache")
    fuse_ok()
    mnt = tempfile.mkdtemp(dir=tmp)
    url = www.url("model.safetensors.index.json")
    p = subprocess.Popen([BIN, "-f", "-o", f"warm,cache_dir={cache}", url, mnt], stderr=subprocess.PIPE,
                         text=True)
    try:
        deadline = time.time() + 20
        while not is_mounted(mnt) and time.time() < deadline:
            time.sleep(0.01)
        name = list(want)[5]
        assert open(os.path.join(mnt, name), "rb").read() == want[name]  # usable meanwhile
        while time.time() < deadline:
            done, total = map(int, os.getxattr(mnt, "user.warm").decode().split())
            if done >= total:
                break
            time.sleep(0.05)
        shards = [f for f in os.listdir(www.root) if f.endswith(".safetensors")]
        assert done == total == sum(os.path.getsize(os.path.join(www.root, f)) for f in shards), (done, total)
        assert "user.warm" in os.listxattr(mnt)
    finally:
        subprocess.run(["fusermount3", "-u", mnt])
        err = p.communicate(timeout=30)[1]
    lines = [l for l in err.splitlines() if "warm-up:" in l]
    assert [l.split("warm-up: ")[1].split("%")[0] for l in lines[:-1]] == [str(k) for k in range(10, 101, 10)], err
    assert "done" in lines[-1]
    before = len(www.seen())
    with mounted(url, "-o", f"cache_dir={cache}") as m2:
        for n, v in want.items():
            assert open(os.path.join(m2, n), "rb").read() == v
        assert "user.warm" not in os.listxattr(m2)
    later = www.seen()[before:]
    assert not any(data_ranges(later, f"/model-{s + 1:05d}-of-00004.safetensors") for s in range(4)), later


def warm_cache(www, cache, url):
    with mounted(url, "-o", f"warm,cache_dir={cache}") as mnt:
        deadline = time.time() + 30
        while time.time() < deadline:
            done, total = map(int, os.getxattr(mnt, "user.warm").decode().split())
            if done >= total:
                break
            time.sleep(0.05)
        assert done == total, (done, total)


@pytest.mark.parametrize("opts", [[], ["-o", "nosplice"], ["-o", "direct_io"]])
def test_warm_blocks_served_from_their_files(www, tmp, opts):
    """Blocks the warm-up wrote are served from their files (spliced, or
    copied with nosplice): exact bytes for reads of every size and
    alignment, across block and tensor ends, with no tensor byte fetched;
    a block file cut short or with a damaged header is fetched again."""
    want = sharded(www.root, nshards=2, per=3, size=MiB + 12345)
    cache = os.path.join(tmp, "cache")
    url = www.url("model.safetensors.index.json")
    warm_cache(www, cache, url)
    rng = random.Random(5)
    before = len(www.seen())
    with mounted(url, "-o", f"cache_dir={cache}", *opts) as mnt:
        for n, v in want.items():
            assert open(os.path.join(mnt, n), "rb").read() == v, n
            fd = os.open(os.path.join(mnt, n), os.O_RDONLY)
            try:
                for _ in range(40):
                    off = rng.randrange(0, len(v))
                    size = rng.choice([1, 4095, 4096, 65537, 256 << 10, (256 << 10) + 3, MiB])
                    assert os.pread(fd, size, off) == v[off:off + size], (n, off, size)
            finally:
                os.close(fd)
    later = www.seen()[before:]
    assert not any(data_ranges(later, f"/model-{s + 1:05d}-of-00002.safetensors") for s in range(2)), later
    blocks = sorted(os.path.join(r, f) for r, _, fs in os.walk(cache) for f in fs if f.endswith(".blk"))
    assert len(blocks) >= 10
    with open(blocks[3], "r+b") as f:  # cut short
        f.truncate(os.path.getsize(blocks[3]) - 100)
    with open(blocks[7], "r+b") as f:  # a header that does not check out
        f.seek(20)
        f.write(b"\xff")
    before = len(www.seen())
    with mounted(url, "-o", f"cache_dir={cache}", *opts) as mnt:
        for n, v in want.items():
            assert open(os.path.join(mnt, n), "rb").read() == v, n
    got = [r for s in range(2) for r in data_ranges(www.seen()[before:], f"/model-{s + 1:05d}-of-00002.safetensors")]
    assert 2 <= len(got) <= 4, got


def test_blocks_served_as_they_land(tmp):
    """A block of a read-ahead part is served once its bytes have landed,
    before the rest of the part: a server that holds every part after its
    first MiB lets a sequential reader through the part's first three
    blocks (the fourth waits for a byte past it), not stuck at its first."""
    root = os.path.join(tmp, "www")
    os.makedirs(root)
    os.chmod(root, 0o755)
    want = sharded(root, nshards=1, per=1, size=24 * MiB)
    shard = os.path.join(root, "model-00001-of-00001.safetensors")
    with open(shard, "rb") as f:
        data_at = 8 + int.from_bytes(f.read(8), "little")
    name, raw = next(iter(want.items()))
    with Nginx(root) as ng, FaultProxy(ng.ports["plain"]) as fp:
        # direct I/O: each read is the reader's own 64 KiB, not the
        # kernel's readahead of up to a MiB that may reach past the landed
        with mounted(fp.url("model.safetensors.index.json"), "-o", "part_size=4M,direct_io") as mnt:
            fp.faults({"match": "model-00001", "fault": "slow", "after": MiB, "seconds": 6})
            pos = [0]
            fd = os.open(os.path.join(mnt, name), os.O_RDONLY)

            def reader():
                while pos[0] < len(raw):
                    got = os.pread(fd, 64 << 10, pos[0])
                    assert got == raw[pos[0]:pos[0] + len(got)]
                    pos[0] += len(got)

            t = threading.Thread(target=reader, daemon=True)
            t.start()
            try:
                # bounded: until the reader has stood still for a second
                last, still, deadline = -1, 0, time.time() + 15
                while time.time() < deadline and still < 10:
                    still = still + 1 if pos[0] == last else 0
                    last = pos[0]
                    time.sleep(0.1)
                slowed = [tuple(map(int, r[6:].split("-"))) for r in fp.stats().get("__slowed", [])]
                at = data_at + pos[0]
                held = [(a, b) for a, b in slowed if a <= at <= b]
                assert held, (at, slowed)
                a, b = held[0]
                # stuck only at the read that reaches into the fourth block
                assert at + (64 << 10) > a + 3 * (256 << 10), (at - a, slowed)
            finally:
                fp.faults()
                t.join(60)
                os.close(fd)
            assert not t.is_alive() and pos[0] == len(raw)


@pytest.mark.parametrize("opts", [[], ["-o", "nosplice"]])
def test_export_over_http_from_the_disk_cache(www, tmp, opts):
    """A generated file over http whose reads span many small tensors held
    in the disk cache's block files (a reply of many pieces, most of them
    file ranges): byte for byte what a local mount generates."""
    rng = random.Random(11)
    ts = [(f"blk.{i:03d}.w", "U8", (rng.randrange(1000, 9000),), None) for i in range(300)]
    ts = [(n, dt, sh, rng.randbytes(sh[0])) for n, dt, sh, _ in ts]
    write_st(os.path.join(www.root, "small.safetensors"), ts)
    os.chmod(os.path.join(www.root, "small.safetensors"), 0o644)
    cache = os.path.join(tmp, "cache")
    url = www.url("small.safetensors")
    with mounted(os.path.join(www.root, "small.safetensors"), "-o", "export") as m:
        want = open(os.path.join(m, "model.safetensors"), "rb").read()
    warm_cache(www, cache, url)
    with mounted(url, "-o", f"export,cache_dir={cache}", *opts) as m:
        p = os.path.join(m, "model.safetensors")
        assert open(p, "rb").read() == want
        fd = os.open(p, os.O_RDONLY)
        try:
            for _ in range(50):
                off = rng.randrange(0, len(want))
                size = rng.choice([4096, 131072, 524288])
                assert os.pread(fd, size, off) == want[off:off + size], (off, size)
        finally:
            os.close(fd)


def crossing(root, nshards=4, per=8, size=2 * MiB, seed=5):
    """A sharded checkpoint whose orders all differ: tensors layers.0 ...
    layers.N in shard order, so that name order crosses the shards
    (layers.1, layers.10 ... layers.19, layers.2), each shard's header
    listing its tensors backwards (the table's order is not the file's).
    Returns ({name: bytes}, [names in table order])."""
    rng = random.Random(seed)
    want, wm, table = {}, {}, []
    for s in range(nshards):
        fn = f"model-{s + 1:05d}-of-{nshards:05d}.safetensors"
        names = [f"layers.{s * per + t}" for t in range(per)]
        data = [rng.randbytes(size) for _ in names]
        hdr = {n: {"dtype": "U8", "shape": [size], "data_offsets": [i * size, (i + 1) * size]}
               for i, n in reversed(list(enumerate(names)))}
        text = json.dumps(hdr).encode()
        text += b" " * (-len(text) % 8)
        with open(os.path.join(root, fn), "wb") as f:
            f.write(len(text).to_bytes(8, "little") + text + b"".join(data))
        for n, d in zip(names, data):
            want[n] = d
            wm[n] = fn
        table += list(reversed(names))
    with open(os.path.join(root, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": nshards * per * size}, "weight_map": wm}, f)
    for f in os.listdir(root):
        os.chmod(os.path.join(root, f), 0o644)
    return want, table


@pytest.mark.parametrize("order", ["name", "file", "index", "reverse", "random"])
def test_each_order_right_bytes_and_bounded_fetches(tmp, order):
    """One reader through every tensor file in one order, with a cache
    smaller than the model (what is fetched too early is evicted and
    fetched again): the bytes are right, and the server (its access log
    counts every range) sends at most 1/8 more than was read (the binary
    before the read-ahead across files sent 1.18 in index and reverse
    order; this one 1.00-1.04, and up to 1.09 while make check ran two
    tests at once on a loaded machine: a few parts fetched twice, as when
    a reader's own block pushes out one fetched ahead that was not read
    yet), or for a reader at random at most one part (1 MiB) more per
    tensor."""
    root = os.path.join(tmp, "www")
    os.makedirs(root)
    os.chmod(root, 0o755)
    want, table = crossing(root)
    by_file = list(want)  # layers.0 ... in shard and offset order
    seq = {"name": sorted(want), "file": by_file, "index": table, "reverse": sorted(want, reverse=True),
           "random": random.Random(11).sample(by_file, len(by_file))}[order]
    with Nginx(root) as ng:
        with mounted(ng.url("plain", "model.safetensors.index.json"),
                     "-o", "part_size=1M,cache_size=24M,concurrency=8") as mnt:
            assert sorted(n for n in os.listdir(mnt) if not n.startswith("__")) == sorted(want)
            ng.clear_log()
            n = 0
            for name in seq:
                with open(os.path.join(mnt, name), "rb") as f:
                    got = f.read()
                assert got == want[name], name
                n += len(got)
        fetched = sum(int(r["bytes"]) for r in ng.requests() if r["range"] != "-")
    if order == "random":
        assert fetched <= n + len(seq) * MiB, (fetched, n)
    else:
        assert fetched <= n * 1.125, (fetched, n, fetched / n)


def test_mmap_eight_threads_under_faults(tmp):
    """An mmap loader: 8 threads each copying one of 8 tensors out of one
    mapped shard (-o originals) at once, through a server that resets
    connections, answers 503 with Retry-After and stalls past the timeout:
    every byte right, and no thread waits on one MiB longer than the
    documented bound of a read (docs/remote.md, "How long a read can
    take": (retries + 1) x timeout x (2 + MiB asked), plus the backoffs;
    a hang detector, not a speed test)."""
    root = os.path.join(tmp, "www")
    os.makedirs(root)
    os.chmod(root, 0o755)
    want = sharded(root, nshards=1, per=8, size=4 * MiB)
    names = list(want)
    start = 8 + int.from_bytes(open(os.path.join(root, "model-00001-of-00001.safetensors"), "rb").read(8), "little")
    offsets, off = [], start
    for n in names:
        offsets.append(off)
        off += len(want[n])
    retries, timeout, part = 5, 2, 1
    bound = (retries + 1) * timeout * (2 + part) + retries * 5 + 5
    with Nginx(root) as ng, FaultProxy(ng.ports["plain"]) as fp:
        with mounted(fp.url("model.safetensors.index.json"), "-o",
                     f"originals,concurrency=16,part_size={part}M,timeout={timeout},retries={retries}") as mnt:
            fp.faults({"match": "model-", "fault": "reset", "times": 3, "after": 3000},
                      {"match": "model-", "fault": "status", "status": 503, "retry_after": 1, "times": 3},
                      {"match": "model-", "fault": "stall", "seconds": 4, "times": 2})
            import mmap
            fd = os.open(os.path.join(mnt, "__files__", "model-00001-of-00001.safetensors"), os.O_RDONLY)
            mm = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
            got, longest, errors = {}, [0.0] * 8, []

            def one(i):
                try:
                    a, parts = offsets[i], []
                    for k in range(0, len(want[names[i]]), MiB):
                        t0 = time.monotonic()
                        parts.append(mm[a + k:a + k + MiB])
                        longest[i] = max(longest[i], time.monotonic() - t0)
                    got[names[i]] = b"".join(parts)
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(repr(e))
            th = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(8)]
            for t in th:
                t.start()
            for t in th:
                t.join(timeout=bound * len(want[names[0]]) // MiB)
            assert not any(t.is_alive() for t in th), "a thread never finished"
            mm.close()
            os.close(fd)
            assert not errors, errors
            for n in names:
                assert got[n] == want[n], n
            assert max(longest) <= bound, longest
        assert sum(v for k, v in fp.stats().items() if "model-" in k) >= 3
