"""make bench row for -o zarr (issue 40), run by bench.py:

  zarr-read   zarr.open_group(MNT/__zarr__)["w"][:] of a 1 GiB F32 tensor /
              np.fromfile of its raw tensor file, both through the same fresh
              mount (-o zarr, 64 MiB chunks), in alternating order: a
              throughput ratio (zarr-python 2, Debian's python3-zarr)
"""

import os
import time

MiB = 1 << 20


def one_gib_f32(b):
    path = os.path.join(b.DIR, "zarr-1g.safetensors")
    if not os.path.exists(path):
        # 65,536 rows of 4,096 float32: 16 chunks of 4,096 rows (64 MiB)
        b.write_checkpoint(path, [("w", "F32", [65536, 4096], 1 << 30)], fill=True)
    return path


def rows(b, reps, want):
    import numpy as np
    import zarr
    out = []
    if "zarr-read" not in want:
        return out
    src = one_gib_f32(b)
    size = os.path.getsize(src)
    base_t, ours_t, ratios = [], [], []
    for k in range(reps):
        with b.Mount(src, "-o", "zarr") as m:
            b.warm(src)

            def raw():
                t0 = time.perf_counter()
                a = np.fromfile(os.path.join(m.mnt, "w"), dtype="<f4")
                t = time.perf_counter() - t0
                assert a.size == 1 << 28
                return t

            def zr():
                t0 = time.perf_counter()
                a = zarr.open_group(os.path.join(m.mnt, "__zarr__"), mode="r")["w"][:]
                t = time.perf_counter() - t0
                assert a.shape == (65536, 4096)
                return t
            # each side reads its own files cold (a fresh mount), in turn first
            if k % 2 == 0:
                bt, ot = raw(), zr()
            else:
                ot, bt = zr(), raw()
        base_t.append(bt)
        ours_t.append(ot)
        ratios.append(bt / ot)
    bt, ot, r = b.median(base_t), b.median(ours_t), b.median(ratios)
    out.append(("zarr-read", r, f"{(1 << 30) / ot / 1e9:.2f} GB/s vs {(1 << 30) / bt / 1e9:.2f} GB/s "
                f"(zarr-python 2 vs np.fromfile, same mount; source {size >> 20} MiB)", "higher"))
    return out
