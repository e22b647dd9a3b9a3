"""make bench rows for loading through mmap (issue 38), from the capped nginx
of scripts/bench_stream.py serving its 1 GiB fixture, with -o originals;
every repetition runs the read() baseline, tensorfs and (with
TENSORFS_BENCH_BEFORE) the binary before the change, each on a fresh mount.

  mmap-load     each shard mmap()ed and its tensors copied out in header order (what
                safetensors' load_file does) / read() of the same shard files whole
  mmap-threads  8 threads each copying one of 8 tensors of one mmap()ed shard at once /
                8 threads pread()ing the same ranges; the detail gives the longest any thread
                waited for one MiB
"""

import json
import mmap
import os
import threading
import time

from benchlib import read_files, timed
from servers import Nginx

MiB = 1 << 20
CAPPED = {"capped": "limit_rate 64000k; sendfile_max_chunk 64k;"}


def shard_names(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))


def header(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        hdr = json.loads(f.read(n))
    hdr.pop("__metadata__", None)
    return 8 + n, hdr


def load_mmap(files):
    """safetensors' load_file: map the file, copy every tensor out in the
    header's order."""
    n = 0
    for p in files:
        start, hdr = header(p)
        with open(p, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            try:
                for t in hdr.values():
                    a, b = t["data_offsets"]
                    n += len(mm[start + a:start + b])
            finally:
                mm.close()
    return n


def eight(path, use_mmap, waits):
    """8 threads, each one of 8 tensors of the shard, in MiB pieces; the
    longest wait of any piece goes to waits."""
    start, hdr = header(path)
    ts = list(hdr.values())
    pick = [ts[i * len(ts) // 8] for i in range(8)]
    fd = os.open(path, os.O_RDONLY)
    mm = mmap.mmap(fd, 0, prot=mmap.PROT_READ) if use_mmap else None
    longest = [0.0] * 8

    def one(i):
        a, b = pick[i]["data_offsets"]
        off = start + a
        while off < start + b:
            k = min(MiB, start + b - off)
            t0 = time.perf_counter()
            got = mm[off:off + k] if mm is not None else os.pread(fd, k, off)
            longest[i] = max(longest[i], time.perf_counter() - t0)
            assert len(got) == k
            off += k
    th = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    t = timed(th)
    if mm is not None:
        mm.close()
    os.close(fd)
    waits.append(max(longest))
    return t


def rows(b, reps, want, d, triple):
    out = []
    total = sum(os.path.getsize(os.path.join(d, s)) for s in shard_names(d))
    with Nginx(d, extra_servers=CAPPED) as ng:
        url = ng.url("capped", "model.safetensors.index.json")

        def files(m):
            return [os.path.join(m.mnt, "__files__", s) for s in shard_names(d)]

        if "mmap-load" in want:
            def base():
                with b.Mount(url, "-o", "originals") as m:
                    t0 = time.perf_counter()
                    read_files(files(m))
                    return time.perf_counter() - t0

            def ours(binary):
                with b.Mount(url, "-o", "originals", binary=binary) as m:
                    t0 = time.perf_counter()
                    assert load_mmap(files(m)) > 0
                    return time.perf_counter() - t0
            bt, ot, r, bf = triple(b, reps, base, ours, ours)
            note = f"; before (main): {total / bf[0] / MiB:.0f} MiB/s, ratio {1 / bf[1]:.2f}" if bf else ""
            out.append(("mmap-load", 1 / r, f"{total / ot / MiB:.0f} MiB/s vs {total / bt / MiB:.0f} MiB/s"
                        f"{note}", "higher"))
        if "mmap-threads" in want:
            waits = {}
            size = sum(t["data_offsets"][1] - t["data_offsets"][0]
                       for t in list(header(os.path.join(d, shard_names(d)[0]))[1].values())[0::2])

            def run(binary, use_mmap):
                with b.Mount(url, "-o", "originals", binary=binary) as m:
                    return eight(files(m)[0], use_mmap, waits.setdefault((binary, use_mmap), []))
            bt, ot, r, bf = triple(b, reps, lambda: run(None, False), lambda x: run(x, True),
                                   lambda x: run(x, True))
            w = max(waits[(b.BIN, True)])
            note = ""
            if bf:
                note = (f"; before (main): {size / bf[0] / MiB:.0f} MiB/s, ratio {1 / bf[1]:.2f}, "
                        f"longest wait {max(waits[(b.BEFORE, True)]):.2f} s")
            out.append(("mmap-threads", 1 / r, f"{size / ot / MiB:.0f} MiB/s vs {size / bt / MiB:.0f} MiB/s; "
                        f"longest wait for one MiB {w:.2f} s (pread: {max(waits[(None, False)]):.2f} s)"
                        f"{note}", "higher"))
    return out
