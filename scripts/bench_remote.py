"""make bench rows for remote sources (issue 10), over a real nginx on
127.0.0.1 serving the bench's own fixtures; bench.py runs them. Each row
pairs a baseline and tensorfs in every repetition, as the local rows do.

  http-read      first dd of a 1 GiB tensor through an http mount / curl -o /dev/null of the same range
  http-mount     mounting the 500,000-tensor checkpoint over http / mounting the local file
  http-requests  requests --inspect makes for a typical header and for the 62 MB one (counted)
  http-rand      random 4 KiB reads with 20 ms added latency (nginx echo_sleep) / one curl range
                 request per read
  cache-hit      the 1 GiB tensor read again after a remount with -o cache_dir / read from the
                 local file through tensorfs; also the daemon's CPU seconds per GiB of each
                 (/proc/PID/stat), which tells a change in code from a busy machine
  cache-hit-cpu  the daemon's CPU seconds per GiB for that read from the disk cache / for the same
                 read from the origin (a fresh mount without cache_dir), in the same repetitions
  memory         the daemon's peak RSS with 16 readers at once / -o cache_size=64M
  s3-read        first dd of the 1 GiB tensor through an s3:// mount of s3rver / curl --aws-sigv4 of
                 the same range from the same s3rver
  s3-mount       mounting the 500,000-tensor checkpoint from s3rver / mounting the local file
"""

import os
import random
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))

from benchlib import cpu_seconds  # noqa: E402
from servers import Nginx, S3rver  # noqa: E402

GiB = 1 << 30
MiB = 1 << 20


def curl_range(url, a, b):
    t0 = time.perf_counter()
    subprocess.run(["curl", "-s", "-f", "-o", "/dev/null", "-r", f"{a}-{b}", url], check=True)
    return time.perf_counter() - t0


def rows(b, reps, want):
    """b: the bench module (Mount, dd, paired, header_info, fixtures...)."""
    big = os.path.join(b.DIR, "big.safetensors")
    many = b.many_fixture(500000)
    out = []
    os.chmod(b.DIR, 0o755)
    for f in (big, many):
        os.chmod(f, 0o644)
    start, hdr = b.header_info(big)
    wb, we = hdr["big.weight"]["data_offsets"]
    with Nginx(b.DIR, latency_ms=20) as ng:
        url = ng.url("plain", "big.safetensors")
        b.warm(big)
        if "http-read" in want:
            def base():
                return curl_range(url, start + wb, start + we - 1)

            def ours():
                with b.Mount(url) as m:
                    return b.dd(os.path.join(m.mnt, "big.weight"))
            bt, ot, r = b.paired(reps, base, ours)
            out.append(("http-read", 1 / r, f"{GiB / ot / 1e9:.2f} GB/s vs {GiB / bt / 1e9:.2f} GB/s", "higher"))
        if "http-mount" in want:
            b.warm(many)

            def base():
                with b.Mount(many) as m:
                    return m.mount_time

            def ours():
                with b.Mount(ng.url("plain", os.path.basename(many))) as m:
                    return m.mount_time
            bt, ot, r = b.paired(reps, base, ours)
            out.append(("http-mount", r, f"{ot * 1e3:.0f} ms vs {bt * 1e3:.0f} ms", "lower"))
        if "http-requests" in want:
            counts = []
            for f in (big, many):
                ng.clear_log()
                subprocess.run([b.BIN, "--inspect", ng.url("plain", os.path.basename(f))],
                               stdout=subprocess.DEVNULL, check=True)
                counts.append(len(ng.requests()))
            out.append(("http-requests", counts, f"{counts[0]} for a {start - 8} B header, {counts[1]} for "
                        f"{b.header_info(many)[0] - 8} B", "count"))
        if "http-rand" in want and ng.has_echo:
            lat = ng.url("latency", "big.safetensors")
            rng = random.Random(9)
            picks = [rng.randrange(0, we - wb - 4096) for _ in range(100)]

            def base():
                t0 = time.perf_counter()
                for off in picks:
                    subprocess.run(["curl", "-s", "-f", "-o", "/dev/null", "-r",
                                    f"{start + wb + off}-{start + wb + off + 4095}", lat], check=True)
                return time.perf_counter() - t0

            def ours():
                with b.Mount(lat) as m:
                    fd = os.open(os.path.join(m.mnt, "big.weight"), os.O_RDONLY)
                    t0 = time.perf_counter()
                    for off in picks:
                        os.pread(fd, 4096, off)
                    t = time.perf_counter() - t0
                    os.close(fd)
                    return t
            bt, ot, r = b.paired(reps, base, ours)
            out.append(("http-rand", 1 / r, f"{len(picks) / ot:.1f} vs {len(picks) / bt:.1f} reads/s "
                        f"(20 ms latency)", "higher"))
        if "cache-hit" in want:
            cache = tempfile.mkdtemp(prefix="tfs-bench-cache-", dir=b.DIR)
            with b.Mount(url, "-o", f"cache_dir={cache}") as m:
                b.dd(os.path.join(m.mnt, "big.weight"))

            cpu = {"base": [], "ours": [], "origin": []}

            def base():
                with b.Mount(big) as m:
                    c0 = cpu_seconds(m.pid)
                    t = b.dd(os.path.join(m.mnt, "big.weight"))
                    cpu["base"].append(cpu_seconds(m.pid) - c0)
                with b.Mount(url) as m:
                    c0 = cpu_seconds(m.pid)
                    b.dd(os.path.join(m.mnt, "big.weight"))
                    cpu["origin"].append(cpu_seconds(m.pid) - c0)
                return t

            def ours():
                ng.clear_log()
                with b.Mount(url, "-o", f"cache_dir={cache}") as m:
                    c0 = cpu_seconds(m.pid)
                    t = b.dd(os.path.join(m.mnt, "big.weight"))
                    cpu["ours"].append(cpu_seconds(m.pid) - c0)
                # No byte of the tensor came over the network: the first
                # request only, and the read-ahead past the tensor's end
                # into the next ones (issue 24), which the first mount's
                # unmount may have cut short.
                for r in ng.requests()[1:]:
                    a, z = map(int, r["range"][6:].split("-"))
                    assert a >= start + we or z < start + wb, f"the remount fetched the tensor's bytes {a}-{z}"
                return t
            bt, ot, r = b.paired(reps, base, ours)
            subprocess.run(["rm", "-rf", cache])
            out.append(("cache-hit", 1 / r, f"{GiB / ot / 1e9:.2f} GB/s vs {GiB / bt / 1e9:.2f} GB/s; daemon CPU "
                        f"{b.median(cpu['ours']):.2f} s vs {b.median(cpu['base']):.2f} s per GiB", "higher"))
            hit, org = b.median(cpu["ours"]), b.median(cpu["origin"])
            out.append(("cache-hit-cpu", hit / org if org else 0.0,
                        f"daemon CPU {hit:.2f} s per GiB from the disk cache vs {org:.2f} s from the origin",
                        "lower"))
        if "memory" in want:
            names = [f"layers.{i}.weight" for i in range(8)]
            peak = 0
            for _ in range(reps):
                with b.Mount(url, "-o", "cache_size=64M") as m:
                    ths = [threading.Thread(target=b.dd, args=(os.path.join(m.mnt, n),)) for n in names * 2]
                    for t in ths:
                        t.start()
                    for t in ths:
                        t.join()
                    peak = max(peak, b.vm_hwm_kb(m.pid) * 1024)
            out.append(("memory", peak / (64 * MiB), f"peak RSS {peak / MiB:.0f} MiB with 16 readers, "
                        f"cache_size 64 MiB: {peak / MiB - 64:.0f} MiB over it", "lower"))
    if want & {"s3-read", "s3-mount"}:
        out += s3_rows(b, reps, want, big, many, start, wb, we)
    return out


def s3_rows(b, reps, want, big, many, start, wb, we):
    out = []
    srv = S3rver()
    with srv:
        for f in (big, many):
            srv.put(os.path.basename(f), f)
        env = dict(os.environ, AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER",
                   AWS_ENDPOINT_URL=srv.endpoint)
        saved = dict(os.environ)
        os.environ.update(env)
        try:
            if "s3-read" in want:
                def base():
                    t0 = time.perf_counter()
                    subprocess.run(["curl", "-s", "-f", "-o", "/dev/null", "--aws-sigv4", "aws:amz:us-east-1:s3",
                                    "-u", "S3RVER:S3RVER", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                                    "-r", f"{start + wb}-{start + we - 1}", f"{srv.endpoint}/models/big.safetensors"],
                                   check=True)
                    return time.perf_counter() - t0

                def ours():
                    with b.Mount("s3://models/big.safetensors") as m:
                        return b.dd(os.path.join(m.mnt, "big.weight"))
                bt, ot, r = b.paired(reps, base, ours)
                out.append(("s3-read", 1 / r, f"{GiB / ot / 1e9:.2f} GB/s vs {GiB / bt / 1e9:.2f} GB/s", "higher"))
            if "s3-mount" in want:
                b.warm(many)

                def base():
                    with b.Mount(many) as m:
                        return m.mount_time

                def ours():
                    with b.Mount("s3://models/" + os.path.basename(many)) as m:
                        return m.mount_time
                bt, ot, r = b.paired(reps, base, ours)
                out.append(("s3-mount", r, f"{ot * 1e3:.0f} ms vs {bt * 1e3:.0f} ms", "lower"))
        finally:
            os.environ.clear()
            os.environ.update(saved)
    return out
