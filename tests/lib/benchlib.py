"""What the benches share (scripts/bench*.py), so that no bench imports
another or a test module: the stream fixture (a 1 GiB model in 4 shards),
the alternating runs against a baseline and the binary before, timing and
reading helpers, the GGUF fixtures and a timed cp. The checkpoint writers
are tests/lib/checkpoints.py's and the servers tests/lib/servers.py's."""

import json
import os
import subprocess
import time

LIB = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20
CAPPED = {"capped": "limit_rate 64000k; sendfile_max_chunk 64k;"}


def fixture(b, sub="stream", width=2):
    """4 shards of 16 U8 tensors of 16 MiB, made once under b.DIR/sub: the
    names "model.layers.NN.weight" (width=2, name order is shard order) or
    "model.layers.N.weight" (width=0)."""
    d = os.path.join(b.DIR, sub)
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        return d
    os.makedirs(d, exist_ok=True)
    wm = {}
    for s in range(4):
        fn = f"model-{s + 1:05d}-of-00004.safetensors"
        hdr, off = {}, 0
        for t in range(16):
            name = f"model.layers.{s * 16 + t:0{width}d}.weight"
            hdr[name] = {"dtype": "U8", "shape": [16 * MiB], "data_offsets": [off, off + 16 * MiB]}
            off += 16 * MiB
            wm[name] = fn
        text = json.dumps(hdr).encode()
        text += b" " * (-len(text) % 8)
        with open(os.path.join(d, fn), "wb") as f:
            f.write(len(text).to_bytes(8, "little") + text)
            for _ in range(16):
                f.write(os.urandom(16 * MiB))
    with open(index, "w") as f:
        json.dump({"metadata": {"total_size": 1 << 30}, "weight_map": wm}, f)
    os.chmod(d, 0o755)
    for f in os.listdir(d):
        os.chmod(os.path.join(d, f), 0o644)
    return d


def fixture_name(b):
    """The stream fixture with names whose name order crosses the shards."""
    return fixture(b, "stream-name", 0)


def triple(b, reps, base_fn, ours_fn, before_fn):
    """The baseline, tensorfs and (with TENSORFS_BENCH_BEFORE) the binary
    before the change, in turn in every repetition; returns the medians of
    the baseline, of tensorfs, of tensorfs / baseline, and (or None) of the
    binary before and of it / baseline."""
    bs, os_, rs, fs, frs = [], [], [], [], []
    for _ in range(reps):
        x = base_fn()
        y = ours_fn(b.BIN)
        bs.append(x)
        os_.append(y)
        rs.append(y / x)
        if b.BEFORE:
            z = before_fn(b.BEFORE)
            fs.append(z)
            frs.append(z / x)
    before = (b.median(fs), b.median(frs)) if fs else None
    return b.median(bs), b.median(os_), b.median(rs), before


def before_note(before, total):
    if not before:
        return ""
    return f"; before (main): {total / before[0] / MiB:.0f} MiB/s, ratio {1 / before[1]:.2f}"


def cpu_seconds(pid):
    """A process's user + system CPU seconds so far, all its threads: a
    figure the machine's load changes far less than a time (a regression in
    code changes it; a busy machine mostly does not)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def shards(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))


def timed(threads):
    """Seconds the threads take, all started at once, to their end."""
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def read_files(paths):
    n = 0
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while True:
                got = f.read(MiB)
                if not got:
                    break
                n += len(got)
    return n


def tensors(mnt):
    return sorted(n for n in os.listdir(mnt) if not n.startswith("__"))


def gguf_fixtures(d):
    g, st = os.path.join(d, "vocab.gguf"), os.path.join(d, "vocab.safetensors")
    if not (os.path.exists(g) and os.path.exists(st)):
        subprocess.run(["/usr/bin/python3", os.path.join(LIB, "gen_gguf.py"),
                        g, "--tensors", "10000", "--vocab", "150000", "--safetensors", st], check=True)
    q = os.path.join(d, "q4k.gguf")
    if not os.path.exists(q):
        import gen_gguf as G
        import numpy as np
        rng = np.random.default_rng(0)
        one = G.random_blocks(G.ID["Q4_K"], 4096, rng)  # 576 KiB, repeated
        rows = (1 << 30) // len(one)
        head = G.build([], [("q", G.ID["Q4_K"], [256 * 4096, rows], b"")])
        with open(q, "wb") as f:
            # the header as build() lays it out, then the data written in
            # pieces (build() would hold 1 GiB in memory)
            f.write(head)
            for _ in range(rows):
                f.write(one)
    return g, st, q


def cp_time(src, dst):
    t0 = time.perf_counter()
    subprocess.run(["cp", src, dst], check=True)
    t = time.perf_counter() - t0
    os.unlink(dst)
    return t
