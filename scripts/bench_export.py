"""make bench rows for -o export (issue 14), run by bench.py:

  export-cp    cp of the generated model.safetensors of a 1 GiB checkpoint
               (through a fresh mount each time) / cp of the source file
               (warm), both to a file on tmpfs: a throughput ratio
  export-open  time to open model.safetensors of the 500,000-tensor mount and
               read its first byte (a fresh mount each time; the header is
               made then) / the time that mount took: lower is better
"""

import os
import subprocess
import tempfile
import time

MiB = 1 << 20


def one_gib(b):
    """1 GiB in 262 tensors of the sizes a transformer has: 4 to 16 MiB
    BF16 matrices, with biases of odd lengths among them."""
    path = os.path.join(b.DIR, "export-1g.safetensors")
    if not os.path.exists(path):
        spec, total, i = [], 0, 0
        while total < (1 << 30) - 16 * MiB:
            n = (4 << (i % 3)) * MiB
            spec.append((f"model.layers.{i // 4}.w{i % 4}.weight", "BF16", [n // 2], n))
            spec.append((f"model.layers.{i // 4}.w{i % 4}.bias", "F32", [1023], 4092))
            total += n + 4092
            i += 1
        b.write_checkpoint(path, spec, fill=True)
    return path


from benchlib import cp_time  # noqa: E402,F401


def rows(b, reps, want):
    out = []
    shm = tempfile.mkdtemp(prefix="tfs-bench-export-", dir="/dev/shm")
    dst = os.path.join(shm, "copy.safetensors")
    try:
        if "export-cp" in want:
            src = one_gib(b)
            b.warm(src)

            # The source warmed before each side: this machine's page
            # cache is reclaimed eagerly (kdamond), and a cold source
            # would measure the disk, not the mount.
            def base():
                b.warm(src)
                return cp_time(src, dst)

            def ours():
                with b.Mount(src, "-o", "export") as m:
                    b.warm(src)
                    return cp_time(os.path.join(m.mnt, "model.safetensors"), dst)
            bt, ot, r = b.paired(reps, base, ours)
            size = os.path.getsize(src)
            out.append(("export-cp", 1 / r, f"{size / ot / 1e9:.2f} GB/s vs {size / bt / 1e9:.2f} GB/s "
                        f"(cp to tmpfs)", "higher"))
        if "export-open" in want:
            many = b.many_fixture(500000)
            b.warm(many)
            mounts = []

            def ours():
                with b.Mount(many, "-o", "export") as m:
                    mounts.append(m.mount_time)
                    t0 = time.perf_counter()
                    with open(os.path.join(m.mnt, "model.safetensors"), "rb") as f:
                        f.read(1)
                    return time.perf_counter() - t0
            bt, ot, r = b.paired(reps, lambda: 1.0, ours)
            mt = b.median(mounts)
            out.append(("export-open", ot / mt, f"{ot * 1e3:.0f} ms to open and read 1 byte vs "
                        f"{mt * 1e3:.0f} ms to mount", "lower"))
    finally:
        subprocess.run(["rm", "-rf", shm], check=False)
    return out
