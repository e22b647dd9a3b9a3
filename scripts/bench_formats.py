"""make bench rows for the container formats (issue 12), run by bench.py:

  gguf-mount  time until a GGUF file with 10,000 tensors and a 150,000-entry
              vocabulary is mounted / the same tensors as safetensors
  dequant     read throughput (bytes a second) of a 1 GiB Q4_K tensor's
              convert=f32 view / of its raw bytes, both through the mount
  bin-mount   time until a PyTorch .bin with 10,000 tensors is mounted / the
              same tensors as safetensors (issue 13); where python3-torch is
              installed, the note also gives torch.load's time for the file
              (torch 1.13 has no mmap=True), which is not the ratio's base
"""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))

from benchlib import gguf_fixtures  # noqa: E402,F401


def bin_fixtures(d):
    """A 10,000-tensor .bin (the stdlib writer of gen_pickle.py) and the
    same tensors, in the same order, as safetensors."""
    pb, st = os.path.join(d, "many.bin"), os.path.join(d, "many-bin.safetensors")
    if not (os.path.exists(pb) and os.path.exists(st)):
        import gen_pickle
        import checkpoints
        arrays = gen_pickle.many(pb, 10000)
        checkpoints.write_st(st, [(k, "F32", list(a.shape), a.tobytes()) for k, a in arrays.items()])
    return pb, st


def torch_load_time(path, reps):
    code = ("import sys,time,torch; t=time.perf_counter(); torch.load(sys.argv[1]); "
            "print(time.perf_counter()-t)")
    try:
        ts = [float(subprocess.run(["/usr/bin/python3", "-c", code, path], capture_output=True,
                                   text=True, check=True, timeout=300).stdout) for _ in range(reps)]
    except (subprocess.CalledProcessError, ValueError):
        return None
    return sorted(ts)[len(ts) // 2]


def rows(b, reps, want):
    g, st, q = gguf_fixtures(b.DIR)
    out = []
    if "gguf-mount" in want:
        b.warm(g)
        b.warm(st)

        def base():
            with b.Mount(st) as m:
                return m.mount_time

        def ours():
            with b.Mount(g) as m:
                return m.mount_time
        bt, ot, r = b.paired(reps, base, ours)
        out.append(("gguf-mount", r, f"{ot * 1e3:.0f} ms vs {bt * 1e3:.0f} ms", "lower"))
    if "dequant" in want:
        b.warm(q)

        def read(*opts):
            # a fresh mount each time: the kernel's page cache of the
            # mount would otherwise answer the second read
            with b.Mount(q, *opts) as m:
                p = os.path.join(m.mnt, "q")
                return b.dd(p) / os.path.getsize(p)
        bt, ot, r = b.paired(reps, read, lambda: read("-o", "convert=f32"))
        out.append(("dequant", 1 / r, f"{1 / ot / 1e9:.2f} GB/s of float32 ({1 / ot / 4e9:.2f} G elements/s) "
                    f"vs {1 / bt / 1e9:.2f} GB/s of Q4_K", "higher"))
    if "bin-mount" in want:
        pb, st = bin_fixtures(b.DIR)
        b.warm(pb)
        b.warm(st)

        def mount_time(p):
            with b.Mount(p) as m:
                return m.mount_time
        bt, ot, r = b.paired(reps, lambda: mount_time(st), lambda: mount_time(pb))
        note = f"{ot * 1e3:.0f} ms vs {bt * 1e3:.0f} ms as safetensors"
        tl = torch_load_time(pb, 3)
        if tl is not None:
            note += f"; torch.load {tl * 1e3:.0f} ms"
        out.append(("bin-mount", r, note, "lower"))
    return out
