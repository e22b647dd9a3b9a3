"""make bench rows for a fleet behind the shipped cache (issue 39): the 1 GiB
sharded checkpoint of the stream rows (scripts/bench_stream.py) on Debian's
nginx capping every connection at 62.5 MiB/s, with contrib/fleet-cache/run
(its defaults: 8 MiB slices) in front of it on 127.0.0.1, a fresh cache in
every repetition. bench.py runs them; each repetition runs the baseline and
the fleet back to back.

  fleet-speed   4 tensorfs daemons (4 mount points) behind the cache, each reading every
                tensor file in name order, at once: their total throughput / one mount
                straight from the capped origin reading the same (higher is better)
  fleet-origin  bytes the origin sent (nginx's $bytes_sent, headers included) / the
                checkpoint's bytes, over those same 4-mount runs (lower is better)
"""

import os
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import bench_stream  # noqa: E402
from servers import FleetCache, Nginx  # noqa: E402

MiB = 1 << 20
ROWS = {"fleet-speed", "fleet-origin"}


def rows(b, reps, want):
    d = bench_stream.fixture(b)
    shards = bench_stream.shards(d)
    total = sum(os.path.getsize(os.path.join(d, s)) for s in shards)
    total += os.path.getsize(os.path.join(d, "model.safetensors.index.json"))
    ratios = []
    with Nginx(d, extra_servers=bench_stream.CAPPED) as ng:
        origin = ng.url("capped").rstrip("/")
        port = ng.ports["capped"]

        def one():
            with b.Mount(origin + "/model.safetensors.index.json") as m:
                names = bench_stream.tensors(m.mnt)
                t0 = time.perf_counter()
                bench_stream.read_files(os.path.join(m.mnt, x) for x in names)
                return time.perf_counter() - t0

        def fleet():
            ng.clear_log()
            with FleetCache(origin) as cache:
                url = cache.url("model.safetensors.index.json")
                mounts = [b.Mount(url) for _ in range(4)]
                try:
                    for m in mounts:
                        m.__enter__()
                    names = bench_stream.tensors(mounts[0].mnt)
                    th = [threading.Thread(target=bench_stream.read_files,
                                           args=([os.path.join(m.mnt, x) for x in names],)) for m in mounts]
                    t0 = time.perf_counter()
                    for t in th:
                        t.start()
                    for t in th:
                        t.join()
                    t = time.perf_counter() - t0
                finally:
                    for m in mounts:
                        if hasattr(m, "mnt"):
                            m.__exit__()
            ratios.append(sum(r["sent"] for r in ng.requests() if r["port"] == port) / total)
            return t

        bt, ot, r = b.paired(reps, one, fleet)
    out = []
    if "fleet-speed" in want:
        out.append(("fleet-speed", 4 / r, f"{4 * total / ot / MiB:.0f} MiB/s for 4 mounts vs "
                    f"{total / bt / MiB:.0f} MiB/s for one from the origin", "higher"))
    if "fleet-origin" in want:
        out.append(("fleet-origin", b.median(ratios), f"{b.median(ratios) * total / MiB:.0f} MiB from the origin "
                    f"for 4 x {total / MiB:.0f} MiB read", "lower"))
    return out
