"""make bench rows for knowing what is in a checkpoint (issue 26), run by
bench.py. The fixture: a 4 GiB checkpoint of 16 F32 tensors of 256 MiB,
and a copy whose last tensor differs in its last element; both are read
once first, so every row reads from the page cache.

  verify-sha   tensorfs --verify (SHA-256 of every tensor, on every core) /
               sha256sum of the whole file (throughput ratio)
  verify-xxh   tensorfs --verify --xxh64 / xxh64sum of the whole file
  stats        tensorfs --stats of a checkpoint holding one 256 MiB F32
               tensor / numpy computing the same figures (min, max, mean,
               std, abs max, zeros, NaN, Inf, a 64-bin histogram) on the same
               array already in memory (throughput ratio)
  diff-cmp     tensorfs diff of the two 4 GiB files / cmp of them (cmp reads
               up to the difference, in the last tensor: nearly all of it)
  diff-read    the two files over http (nginx on 127.0.0.1) after tensorfs
               --verify -o cache_dir of each (their tensors' hashes in the disk
               cache's memo): bytes tensorfs diff -o cache_dir reads / the
               bytes of the two differing tensors (1.0: only they are read)
  picture      cat of layers.00.weight.png (-o pictures, a fresh mount: the
               heatmap of a [16384, 4096] F32 tensor, sampled) / dd of the
               tensor's 256 MiB from the source: what a picture costs next
               to reading its tensor (lower is better)
  picture-hist the same for w.png of the 1-D tensor (a histogram, sampled)
"""

import json
import os
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))

import checkpoints  # noqa: E402

N, ELEMS = 16, 64 << 20  # 16 x 256 MiB


def write(path, arrays):
    """A safetensors file of F32 arrays [(name, array)], written a tensor at
    a time (tests/lib/checkpoints.py), whole before it is there."""
    checkpoints.write_st(path + ".tmp", [(name, "F32", list(v.shape), np.ascontiguousarray(v)) for name, v in arrays])
    os.replace(path + ".tmp", path)


def fixtures(b):
    os.makedirs(b.DIR, exist_ok=True)
    a, c, one = (os.path.join(b.DIR, f) for f in ("know-a.safetensors", "know-b.safetensors", "know-one.safetensors"))
    if not os.path.exists(a):
        print("writing", a, "(4 GiB)", file=sys.stderr)
        rng = np.random.default_rng(26)
        base = rng.standard_normal(ELEMS).astype(np.float32).reshape(ELEMS // 4096, 4096)

        class Lazy:  # each tensor made as it is written: 256 MiB at a time
            def __init__(self, i):
                self.i, self.shape, self.nbytes = i, base.shape, base.nbytes

            def tobytes(self):
                return (base + np.float32(self.i)).tobytes()

        write(a, [(f"layers.{i:02d}.weight", Lazy(i)) for i in range(N)])
    if not os.path.exists(c):
        subprocess.run(["cp", a, c], check=True)
        with open(c, "r+b") as f:
            f.seek(-4, 2)
            f.write(np.float32(12345.0).tobytes())
    if not os.path.exists(one):
        rng = np.random.default_rng(1)
        v = rng.standard_normal(ELEMS).astype(np.float32)
        v[::100000] = np.nan
        write(one, [("w", v)])
    for p in (a, c, one):
        b.warm(p)
    return a, c, one


def timed(args, **kw):
    t0 = time.perf_counter()
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    t = time.perf_counter() - t0
    assert r.returncode in (0, 1), (args, r.returncode, r.stderr[-300:])
    return t, r


def numpy_stats(a):
    fin = a[np.isfinite(a)]
    return (fin.min(), fin.max(), fin.mean(dtype=np.float64), fin.std(dtype=np.float64), np.abs(fin).max(),
            int((fin == 0).sum()), int(np.isnan(a).sum()), int(np.isinf(a).sum()),
            np.histogram(fin.astype(np.float64), 64))


def rows(b, reps, want):
    out = []
    a, c, one = fixtures(b)
    size = os.path.getsize(a)
    if "verify-sha" in want:
        bt, ot, r = b.paired(reps, lambda: timed(["sha256sum", a])[0], lambda: timed([b.BIN, "--verify", a])[0])
        out.append(("verify-sha", 1 / r, f"{size / ot / 1e9:.2f} GB/s vs {size / bt / 1e9:.2f} GB/s", "higher"))
    if "verify-xxh" in want:
        bt, ot, r = b.paired(reps, lambda: timed(["xxh64sum", a])[0],
                             lambda: timed([b.BIN, "--verify", "--xxh64", a])[0])
        out.append(("verify-xxh", 1 / r, f"{size / ot / 1e9:.2f} GB/s vs {size / bt / 1e9:.2f} GB/s", "higher"))
    if "stats" in want:
        start = b.header_info(one)[0]
        arr = np.fromfile(one, np.float32, offset=start)

        def base():
            t0 = time.perf_counter()
            numpy_stats(arr)
            return time.perf_counter() - t0

        bt, ot, r = b.paired(reps, base, lambda: timed([b.BIN, "--stats", "--json", one])[0])
        del arr
        out.append(("stats", 1 / r, f"{ELEMS * 4 / ot / 1e9:.2f} GB/s vs numpy {ELEMS * 4 / bt / 1e9:.2f} GB/s",
                    "higher"))
    for row, src, name in (("picture", a, "layers.00.weight"), ("picture-hist", one, "w")):
        if row not in want:
            continue
        start, hdr = b.header_info(src)
        lo, hi = hdr[name]["data_offsets"]

        def ours(src=src, name=name):
            with b.Mount(src, "-o", "pictures") as m:
                t0 = time.perf_counter()
                with open(os.path.join(m.mnt, name + ".png"), "rb") as f:
                    n = len(f.read())
                t = time.perf_counter() - t0
                assert n > 0
                return t

        bt, ot, r = b.paired(reps, lambda: b.dd(src, start + lo, hi - lo), ours)
        out.append((row, r, f"{ot * 1e3:.0f} ms for the picture vs {bt * 1e3:.0f} ms to read the "
                    f"{(hi - lo) >> 20} MiB tensor", "lower"))
    if "diff-read" in want:
        import shutil
        import tempfile
        from servers import Nginx
        cache = tempfile.mkdtemp(prefix="know-cache-", dir=b.DIR)
        try:
            with Nginx(b.DIR) as ng:
                ua, uc = ng.url("plain", os.path.basename(a)), ng.url("plain", os.path.basename(c))
                for u in (ua, uc):
                    timed([b.BIN, "--verify", "-o", f"cache_dir={cache},cache_max=1G", u])
                t, res = timed([b.BIN, "diff", "--json", "-o", f"cache_dir={cache},cache_max=1G", ua, uc])
                d = json.loads(res.stdout)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        differing = 2 * ELEMS * 4
        out.append(("diff-read", d["bytes_read"] / differing,
                    f"{d['bytes_read'] / 1e9:.2f} GB read for {differing / 1e9:.2f} GB of differing tensors "
                    f"({d['summary']['differs']} differs, {d['summary']['identical']} identical, {t:.1f} s)", "lower"))
    if "diff-cmp" in want:
        got = {}

        def ours():
            t, res = timed([b.BIN, "diff", "--json", a, c])
            got["d"] = json.loads(res.stdout)
            return t

        bt, ot, r = b.paired(reps, lambda: timed(["cmp", a, c])[0], ours)
        out.append(("diff-cmp", 1 / r, f"{2 * size / ot / 1e9:.2f} GB/s vs cmp {2 * size / bt / 1e9:.2f} GB/s "
                    f"(both files, {got['d']['bytes_read'] / 1e9:.2f} GB read)", "higher"))
    return out
