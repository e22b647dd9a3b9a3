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

Beside fleet-speed, each party's CPU seconds per GiB delivered (utime+stime
from /proc/PID/stat: the daemons, the cache's nginx, the origin's nginx, and
this process, whose threads are the readers), for one mount from the origin
and for the fleet, and the fleet's CPU seconds against 2 x its wall time:
a figure the machine's load barely moves, which says whether the cores, not
the code, bound the row.
"""

import os
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))

import benchlib  # noqa: E402
import subprocess  # noqa: E402
from servers import FleetCache, Nginx  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30
TICK = os.sysconf("SC_CLK_TCK")
ROWS = {"fleet-speed", "fleet-origin"}


def cpu(pid):
    """utime+stime of a process (all its threads), in seconds; 0 once gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return 0.0


def nginx_cpu(top):
    """The CPU seconds of an nginx master and its workers, and of the
    process above them if any (contrib/fleet-cache/run, which waits)."""
    total, todo = 0.0, [top]
    while todo:
        p = todo.pop()
        total += cpu(p)
        todo += map(int, subprocess.run(["pgrep", "-P", str(p)], capture_output=True, text=True).stdout.split())
    return total


def self_cpu():
    t = os.times()
    return t.user + t.system


def rows(b, reps, want):
    d = benchlib.fixture(b)
    shards = benchlib.shards(d)
    total = sum(os.path.getsize(os.path.join(d, s)) for s in shards)
    total += os.path.getsize(os.path.join(d, "model.safetensors.index.json"))
    ratios = []
    cpus = {"one": [], "fleet": []}  # per repetition: {party: CPU seconds}, wall seconds
    with Nginx(d, extra_servers=benchlib.CAPPED) as ng:
        origin = ng.url("capped").rstrip("/")
        port = ng.ports["capped"]

        def one():
            with b.Mount(origin + "/model.safetensors.index.json") as m:
                names = benchlib.tensors(m.mnt)
                c0 = (cpu(m.pid), nginx_cpu(ng.proc.pid), self_cpu())
                t0 = time.perf_counter()
                benchlib.read_files(os.path.join(m.mnt, x) for x in names)
                t = time.perf_counter() - t0
                c1 = (cpu(m.pid), nginx_cpu(ng.proc.pid), self_cpu())
                cpus["one"].append(({"daemons": c1[0] - c0[0], "cache": 0.0, "origin": c1[1] - c0[1],
                                     "readers": c1[2] - c0[2]}, t))
                return t

        def fleet():
            ng.clear_log()
            with FleetCache(origin) as cache:
                url = cache.url("model.safetensors.index.json")
                mounts = [b.Mount(url) for _ in range(4)]
                try:
                    for m in mounts:
                        m.__enter__()
                    names = benchlib.tensors(mounts[0].mnt)
                    c0 = (sum(cpu(m.pid) for m in mounts), nginx_cpu(cache.proc.pid), nginx_cpu(ng.proc.pid),
                          self_cpu())
                    th = [threading.Thread(target=benchlib.read_files,
                                           args=([os.path.join(m.mnt, x) for x in names],)) for m in mounts]
                    t = benchlib.timed(th)
                    c1 = (sum(cpu(m.pid) for m in mounts), nginx_cpu(cache.proc.pid), nginx_cpu(ng.proc.pid),
                          self_cpu())
                    cpus["fleet"].append(({"daemons": c1[0] - c0[0], "cache": c1[1] - c0[1],
                                           "origin": c1[2] - c0[2], "readers": c1[3] - c0[3]}, t))
                finally:
                    for m in mounts:
                        if hasattr(m, "mnt"):
                            m.__exit__()
            ratios.append(sum(r["sent"] for r in ng.requests() if r["port"] == port) / total)
            return t

        bt, ot, r = b.paired(reps, one, fleet)
    out = []

    def per_gib(kind, gib):
        parts = {k: b.median([c[k] for c, _ in cpus[kind]]) / gib for k in ("daemons", "cache", "origin", "readers")}
        busy = b.median([sum(c.values()) / (2 * t) for c, t in cpus[kind]])
        return parts, busy

    if "fleet-speed" in want:
        one, one_busy = per_gib("one", total / GiB)
        fl, fl_busy = per_gib("fleet", 4 * total / GiB)
        # Both runs are CPU-bound (the cap does not bind one mount's 32
        # connections), so the row is (one's CPU per GiB / the fleet's) x
        # (the share of the 2 cores the fleet got / the share one mount got).
        # On 2 cores the fleet needs at least 4 x total x its CPU per GiB / 2
        # seconds; 2.0 asks for at most twice one mount's time, so 2.0 is
        # within reach only while one mount runs at most 1 / (the fleet's CPU
        # per GiB) GiB/s.
        cap = GiB / sum(fl.values()) / MiB
        out.append(("fleet-speed", 4 / r, f"{4 * total / ot / MiB:.0f} MiB/s for 4 mounts vs "
                    f"{total / bt / MiB:.0f} MiB/s for one from the origin; CPU s per GiB delivered "
                    f"(daemons+cache+origin+readers): one {'+'.join(f'{v:.2f}' for v in one.values())}"
                    f"={sum(one.values()):.2f} on {one_busy:.0%} of 2 cores, fleet "
                    f"{'+'.join(f'{v:.2f}' for v in fl.values())}={sum(fl.values()):.2f} on {fl_busy:.0%}; "
                    f"2.0 needs one mount at <= {cap:.0f} MiB/s", "higher"))
    if "fleet-origin" in want:
        out.append(("fleet-origin", b.median(ratios), f"{b.median(ratios) * total / MiB:.0f} MiB from the origin "
                    f"for 4 x {total / MiB:.0f} MiB read", "lower"))
    return out
