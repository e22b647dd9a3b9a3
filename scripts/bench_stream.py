"""make bench rows for loading a model over the network (issue 24), against
Debian's nginx on 127.0.0.1 capping every connection at 62.5 MiB/s
(limit_rate 64000k, and sendfile_max_chunk 64k so that every request is
paced from its first byte), serving a 1 GiB sharded checkpoint: 4 shards of
16 tensors of 16 MiB, with its index. bench.py runs them; each repetition
runs the baseline and tensorfs back to back.

  stream-file   (formerly stream1) one reader reads every tensor file in name order, which is the
                shards' own order here, through a fresh http mount / aria2c -x16 -s16 -k1M (Debian's
                aria2) downloading the 4 shards to /dev/shm
  stream-name   the same with tensor names whose name order crosses the shards (layers.1,
                layers.10 ... layers.19, layers.2: what ls, cp -r, tar and rsync do) / the same aria2c
  waste-name    bytes the server sent / bytes read, for stream-name
  mmap-load     -o originals, each shard mmap()ed and its tensors copied out in header order (what
                safetensors' load_file does), fresh mount / read() of the same shard files whole,
                fresh mount
  mmap-threads  8 threads each copying one of 8 tensors out of one mmap()ed shard at once, fresh
                mount / 8 threads pread()ing the same ranges, fresh mount; the detail gives the
                longest wait of any thread for one MiB
  stream4       4 readers at once, one per shard / the same aria2c
  waste         bytes the server sent / bytes read, for stream1 (lower is better)
  waste-rand    bytes fetched per random 4 KiB read (direct I/O) / (2 x 4 KiB + one part)
  stream-memory the daemon's peak RSS over stream1 and stream4 / (cache_size + 64 MiB)
  warm          stream1 from the disk cache after -o warm (then a remount) / stream1 of the
                local index through tensorfs
  s3-capped     stream-file through an S3 mount (s3://models/stream/model.safetensors.index.json,
                path-style, every request signed) of the same capped nginx / the same aria2c
  cpu-http      the daemon's CPU seconds per GiB for stream-file over http / curl's CPU seconds per
                GiB fetching the same bytes from the same server (16 range requests at once)
  cpu-s3        the same for s3-capped / the same curl
  cpu-local     the daemon's CPU seconds per GiB reading the 4 shards whole through -o originals from
                an uncapped nginx serving them from its page cache / curl's CPU seconds per GiB
                fetching the same shards to /dev/null, one after the other; the binary before the
                change (TENSORFS_BENCH_BEFORE) in the same repetitions for cpu-local, cpu-http and
                cpu-s3
  s3-stream     stream1 from s3rver (s3://models/stream/) / the same bytes fetched by 16 parallel
                curl --aws-sigv4 range requests from the same s3rver
"""

import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))

from benchlib import (CAPPED, before_note, cpu_seconds, fixture, fixture_name, read_files, shards,  # noqa: E402
                      tensors, timed, triple)
from servers import Nginx, S3rver  # noqa: E402

MiB = 1 << 20
ROWS = {"s3-capped", "cpu-http", "cpu-s3", "cpu-local", "stream-file", "stream-name", "waste-name", "mmap-load", "mmap-threads", "stream4", "waste", "waste-rand",
        "stream-memory", "warm", "s3-stream"}
PART = 4 * MiB  # the default part_size
CACHE = 256 * MiB  # the default cache_size


def aria2c(ng, d, prefix=""):
    """aria2c's time to fetch the shards of d from ng's capped server (under prefix)."""
    out = tempfile.mkdtemp(dir="/dev/shm")
    urls = os.path.join(out, "urls")
    with open(urls, "w") as f:
        for s in shards(d):
            f.write(ng.url("capped", prefix + s) + "\n")
    t0 = time.perf_counter()
    subprocess.run(["aria2c", "-q", "-x16", "-s16", "-k1M", "-j1", "--file-allocation=none",
                    "--allow-overwrite=true", "-d", out, "-i", urls], check=True)
    t = time.perf_counter() - t0
    shutil.rmtree(out)
    return t


def rows(b, reps, want):
    if not shutil.which("aria2c"):
        sys.exit("bench_stream: aria2c is missing (Debian's aria2; make deps installs it)")
    if "stream1" in want:
        want = (want - {"stream1"}) | {"stream-file"}
    d = fixture(b)
    total = sum(os.path.getsize(os.path.join(d, s)) for s in shards(d))
    out = []
    if want & {"stream-name", "waste-name"}:
        out += stream_name(b, reps, fixture_name(b))
    with Nginx(d, extra_servers=CAPPED) as ng:
        url = ng.url("capped", "model.safetensors.index.json")
        t0 = time.perf_counter()
        subprocess.run(["curl", "-s", "-f", "-o", "/dev/null", ng.url("capped", shards(d)[0])], check=True)
        curl_rate = os.path.getsize(os.path.join(d, shards(d)[0])) / (time.perf_counter() - t0)
        peaks, wastes = [], []

        def one(binary=None):
            ng.clear_log()
            with b.Mount(url, binary=binary) as m:
                names = tensors(m.mnt)
                t1 = time.perf_counter()
                n = read_files(os.path.join(m.mnt, x) for x in names)
                t = time.perf_counter() - t1
                if binary in (None, b.BIN):
                    peaks.append(b.vm_hwm_kb(m.pid))
            if binary in (None, b.BIN):
                wastes.append(sum(r["bytes"] for r in ng.requests() if r["range"] != "-") / n)
            return t

        def four(binary=None):
            with b.Mount(url, binary=binary) as m:
                names = tensors(m.mnt)
                groups = [[os.path.join(m.mnt, x) for x in names[i * 16:(i + 1) * 16]] for i in range(4)]
                th = [threading.Thread(target=read_files, args=(g,)) for g in groups]
                t = timed(th)
                if binary in (None, b.BIN):
                    peaks.append(b.vm_hwm_kb(m.pid))
                return t

        if want & {"stream-file", "waste", "stream-memory"}:
            bt, ot, r, bf = triple(b, reps, lambda: aria2c(ng, d), one, one)
            out.append(("stream-file", 1 / r, f"{total / ot / MiB:.0f} MiB/s vs {total / bt / MiB:.0f} MiB/s; "
                        f"{total / ot / curl_rate:.1f} x one curl ({curl_rate / MiB:.0f} MiB/s)"
                        f"{before_note(bf, total)}", "higher"))
            out.append(("waste", b.median(wastes), f"{b.median(wastes):.4f} bytes fetched per byte read", "lower"))
        if want & {"stream4", "stream-memory"}:
            bt, ot, r, bf = triple(b, reps, lambda: aria2c(ng, d), four, four)
            out.append(("stream4", 1 / r, f"{total / ot / MiB:.0f} MiB/s vs {total / bt / MiB:.0f} MiB/s"
                        f"{before_note(bf, total)}", "higher"))
        if "stream-memory" in want and peaks:
            peak = max(peaks) * 1024
            out.append(("stream-memory", peak / (CACHE + 64 * MiB),
                        f"peak {peak / MiB:.0f} MiB vs {(CACHE + 64 * MiB) / MiB:.0f} MiB", "lower"))
        if "waste-rand" in want:
            ng.clear_log()
            rng = random.Random(4)
            with b.Mount(url, "-o", "direct_io") as m:
                p = os.path.join(m.mnt, tensors(m.mnt)[7])
                fd = os.open(p, os.O_RDONLY)
                for _ in range(200):
                    os.pread(fd, 4096, rng.randrange(0, 16 * MiB - 4096))
                os.close(fd)
            fetched = sum(r["bytes"] for r in ng.requests() if r["range"] != "-" and
                          not r["range"].startswith("bytes=0-"))
            per = fetched / 200
            out.append(("waste-rand", per / (2 * 4096 + PART),
                        f"{per / 1024:.0f} KiB fetched per 4 KiB read", "lower"))
        if "warm" in want:
            def from_cache():
                cache = tempfile.mkdtemp(prefix="tfs-warm-")
                with b.Mount(url, "-o", f"warm,cache_dir={cache}") as m:
                    deadline = time.time() + 120
                    while time.time() < deadline:
                        done, tot = map(int, os.getxattr(m.mnt, "user.warm").decode().split())
                        if done >= tot:
                            break
                        time.sleep(0.05)
                with b.Mount(url, "-o", f"cache_dir={cache}") as m:
                    t1 = time.perf_counter()
                    read_files(os.path.join(m.mnt, x) for x in tensors(m.mnt))
                    t = time.perf_counter() - t1
                shutil.rmtree(cache)
                return t

            def local():
                for s in shards(d):
                    b.warm(os.path.join(d, s))
                with b.Mount(os.path.join(d, "model.safetensors.index.json")) as m:
                    t1 = time.perf_counter()
                    read_files(os.path.join(m.mnt, x) for x in tensors(m.mnt))
                    return time.perf_counter() - t1
            bt, ot, r = b.paired(reps, local, from_cache)
            out.append(("warm", 1 / r, f"{total / ot / MiB:.0f} MiB/s vs {total / bt / MiB:.0f} MiB/s", "higher"))
    if want & {"s3-capped", "cpu-http", "cpu-s3"}:
        out += s3_capped(b, reps, d, total)
    if "cpu-local" in want:
        out += cpu_local(b, reps, d, total)
    if "s3-stream" in want:
        out += s3_stream(b, reps, d, total)
    return out


def stream_name(b, reps, d):
    """stream-name and waste-name: every tensor file in name order, which
    crosses the shards, through a fresh mount of the capped server."""
    total = sum(os.path.getsize(os.path.join(d, s)) for s in shards(d))
    wastes = {}
    with Nginx(d, extra_servers=CAPPED) as ng:
        url = ng.url("capped", "model.safetensors.index.json")

        def one(binary):
            with b.Mount(url, binary=binary) as m:
                names = tensors(m.mnt)
                ng.clear_log()
                t1 = time.perf_counter()
                n = read_files(os.path.join(m.mnt, x) for x in names)
                t = time.perf_counter() - t1
            wastes.setdefault(binary, []).append(sum(r["bytes"] for r in ng.requests() if r["range"] != "-") / n)
            return t
        bt, ot, r, bf = triple(b, reps, lambda: aria2c(ng, d), one, one)
    w = b.median(wastes[b.BIN])
    wb = f"; before (main): {b.median(wastes[b.BEFORE]):.3f}" if b.BEFORE in wastes else ""
    return [("stream-name", 1 / r, f"{total / ot / MiB:.0f} MiB/s vs {total / bt / MiB:.0f} MiB/s"
             f"{before_note(bf, total)}", "higher"),
            ("waste-name", w, f"{w:.3f} bytes fetched per byte read{wb}", "lower")]


def s3_capped(b, reps, d, total):
    """s3-capped, cpu-http, cpu-s3: the capped nginx as a path-style S3
    endpoint (nginx ignores the signature; every request is signed all the
    same), in every repetition aria2c, tensorfs and the binary before over
    S3, tensorfs over http, and 16 curl range requests (for their CPU)."""
    import resource
    root = os.path.join(b.DIR, "s3root")
    os.makedirs(os.path.join(root, "models"), exist_ok=True)
    link = os.path.join(root, "models", "stream")
    if not os.path.islink(link):
        os.symlink(d, link)
    for p in (root, os.path.join(root, "models")):
        os.chmod(p, 0o755)
    GiB = 1 << 30
    cpu = {"http": [], "s3": [], "curl": [], "http-before": [], "s3-before": []}
    saved = dict(os.environ)
    with Nginx(root, extra_servers=CAPPED) as ng:
        ep = ng.url("capped", "").rstrip("/")
        os.environ.update(AWS_ACCESS_KEY_ID="BENCH", AWS_SECRET_ACCESS_KEY="BENCH", AWS_ENDPOINT_URL=ep)
        try:
            def load(src, binary, kind):
                with b.Mount(src, binary=binary) as m:
                    t1 = time.perf_counter()
                    read_files(os.path.join(m.mnt, x) for x in tensors(m.mnt))
                    t = time.perf_counter() - t1
                    cpu[kind + ("" if binary == b.BIN else "-before")].append(cpu_seconds(m.pid) / (total / GiB))
                return t

            def ours(binary):
                t = load("s3://models/stream/model.safetensors.index.json", binary, "s3")
                load(ng.url("capped", "models/stream/model.safetensors.index.json"), binary, "http")
                if binary == b.BIN:
                    curl_cpu()
                return t

            def curl_cpu():
                parts = []
                for s in shards(d):
                    size = os.path.getsize(os.path.join(d, s))
                    step = (size + 3) // 4
                    parts += [(s, a, min(a + step, size) - 1) for a in range(0, size, step)]
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                procs = [subprocess.Popen(["curl", "-s", "-f", "-o", "/dev/null", "-r", f"{a}-{e}",
                                           ng.url("capped", f"models/stream/{s}")]) for s, a, e in parts]
                for p in procs:
                    if p.wait() != 0:
                        raise RuntimeError("curl failed")
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu["curl"].append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / (total / GiB))

            bt, ot, r, bf = triple(b, reps, lambda: aria2c(ng, d, "models/stream/"), ours, ours)
        finally:
            os.environ.clear()
            os.environ.update(saved)
    c = b.median(cpu["curl"])
    return [("s3-capped", 1 / r, f"{total / ot / MiB:.0f} MiB/s vs {total / bt / MiB:.0f} MiB/s"
             f"{before_note(bf, total)}", "higher"),
            ("cpu-http", b.median(cpu["http"]) / c, f"{b.median(cpu['http']):.2f} s/GiB vs curl {c:.2f} s/GiB"
             f"{cpu_before(b, cpu['http-before'], c)}", "lower"),
            ("cpu-s3", b.median(cpu["s3"]) / c, f"{b.median(cpu['s3']):.2f} s/GiB vs curl {c:.2f} s/GiB"
             f"{cpu_before(b, cpu['s3-before'], c)}", "lower")]


def cpu_before(b, xs, curl):
    if not xs:
        return ""
    return f"; before (main): {b.median(xs):.2f} s/GiB, ratio {b.median(xs) / curl:.2f}"


def cpu_local(b, reps, d, total):
    """cpu-local: the daemon's CPU for whole shards through -o originals
    from an nginx with no cap, serving from its page cache, against curl's
    receiving the same bytes to /dev/null: what each byte costs the daemon
    beyond the network's part, with nothing waiting on the network."""
    import resource
    GiB = 1 << 30
    cpu = {"curl": [], "ours": [], "before": []}
    for s in shards(d):
        subprocess.run(["cat", os.path.join(d, s)], stdout=subprocess.DEVNULL, check=True)
    with Nginx(d) as ng:
        def curl():
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            for s in shards(d):
                subprocess.run(["curl", "-s", "-f", "-o", "/dev/null", ng.url("plain", s)], check=True)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu["curl"].append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / (total / GiB))

        def load(binary, kind):
            with b.Mount(ng.url("plain", "model.safetensors.index.json"), "-o", "originals", binary=binary) as m:
                c0 = cpu_seconds(m.pid)
                read_files(os.path.join(m.mnt, "__files__", s) for s in shards(d))
                cpu[kind].append((cpu_seconds(m.pid) - c0) / (total / GiB))

        for _ in range(reps):
            curl()
            load(b.BIN, "ours")
            if b.BEFORE:
                load(b.BEFORE, "before")
    c, o = b.median(cpu["curl"]), b.median(cpu["ours"])
    return [("cpu-local", o / c, f"{o:.2f} s/GiB vs curl {c:.2f} s/GiB{cpu_before(b, cpu['before'], c)}", "lower")]


def s3_stream(b, reps, d, total):
    srv = S3rver()
    with srv:
        for f in os.listdir(d):
            srv.put("stream/" + f, os.path.join(d, f))
        saved = dict(os.environ)
        os.environ.update(AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER", AWS_ENDPOINT_URL=srv.endpoint)
        try:
            # 16 ranges of the same bytes, as a parallel downloader asks
            parts = []
            for s in shards(d):
                size = os.path.getsize(os.path.join(d, s))
                step = (size + 3) // 4
                parts += [(s, a, min(a + step, size) - 1) for a in range(0, size, step)]

            def base():
                t0 = time.perf_counter()
                procs = [subprocess.Popen(["curl", "-s", "-f", "-o", "/dev/null", "--aws-sigv4", "aws:amz:us-east-1:s3",
                                           "-u", "S3RVER:S3RVER", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                                           "-r", f"{a}-{e}", f"{srv.endpoint}/models/stream/{s}"])
                         for s, a, e in parts]
                for p in procs:
                    if p.wait() != 0:
                        raise RuntimeError("curl failed")
                return time.perf_counter() - t0

            def ours():
                with b.Mount("s3://models/stream/") as m:
                    t1 = time.perf_counter()
                    read_files(os.path.join(m.mnt, x) for x in tensors(m.mnt))
                    return time.perf_counter() - t1
            bt, ot, r = b.paired(reps, base, ours)
        finally:
            os.environ.clear()
            os.environ.update(saved)
    return [("s3-stream", 1 / r, f"{total / ot / MiB:.0f} MiB/s vs {total / bt / MiB:.0f} MiB/s", "higher")]
