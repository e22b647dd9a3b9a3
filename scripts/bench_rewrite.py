"""make bench rows for rewrites with no copy (issue 27), run by bench.py:

  gguf-ttfb    time from the mount command to the first byte of model.gguf
               with an edited chat template (-o export,edits=...), for a
               40 GB GGUF (sparse: 320 Q4_K tensors, a 150,000-entry
               vocabulary) / the time to mount the same file plainly:
               lower is better
  gguf-cp      cp of the generated model.gguf of a 1 GiB GGUF (fresh mount
               each time) / cp of the source file (warm), both to a file on
               tmpfs: a throughput ratio
  gguf-memory  the daemon's peak RSS after reading the first GiB of
               model.gguf (edited) of the 40 GB GGUF / of a 1 GB GGUF with
               the same header (sparse too): memory does not grow with the
               model (lower is better, 1 is flat)
"""

import json
import os
import struct
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))

GB40 = 40 * 10 ** 9


def sparse_gguf(d, total=GB40):
    """A GGUF whose tensors take `total` bytes of holes: the header is real."""
    path = os.path.join(d, f"sparse-{total // 10 ** 9}g.gguf")
    if os.path.exists(path):
        return path
    import gen_gguf as G
    vocab = [f"tok{i:06d}" for i in range(150000)]
    kvs = [("general.architecture", G.STR, "llama"), ("general.name", G.STR, "bench-40g"),
           ("llama.context_length", G.U32, 4096),
           ("tokenizer.chat_template", G.STR, "{{ messages }}"),
           ("tokenizer.ggml.tokens", G.ARR, (G.STR, vocab)),
           ("tokenizer.ggml.scores", G.ARR, (G.F32, [0.0] * len(vocab)))]
    tid = G.ID["Q4_K"]
    ne = [4096, 4096 * 7]  # 4096 x 28672 Q4_K: 126 MB
    size = G.nbytes(tid, ne)
    n = max(1, total // size)
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, n, len(kvs)))
    for k, t, v in kvs:
        out += G.gstr(k) + struct.pack("<I", t) + G.value(t, v)
    off = 0
    for i in range(n):
        out += G.gstr(f"blk.{i // 7}.ffn_{i % 7}.weight") + struct.pack("<I", 2)
        out += b"".join(struct.pack("<Q", x) for x in ne) + struct.pack("<IQ", tid, off)
        off += size + (-size) % 32
    out += b"\0" * ((-len(out)) % 32)
    with open(path + ".tmp", "wb") as f:
        f.write(out)
        f.truncate(len(out) + off)
    os.rename(path + ".tmp", path)
    return path


def edits_file(d):
    p = os.path.join(d, "chat-template.json")
    with open(p, "w") as f:
        json.dump({"tokenizer.chat_template": "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}"
                   "<|end|>\n{% endfor %}<|assistant|>\n"}, f)
    return p


def first_byte(b, src, *opts):
    """Seconds from the mount command to the first byte of model.gguf: the
    mount's own time (as the baseline's, without the bench's pgrep), then
    open and read."""
    with b.Mount(src, *opts) as m:
        t0 = time.perf_counter()
        with open(os.path.join(m.mnt, "model.gguf"), "rb") as f:
            if len(f.read(1)) != 1:
                raise RuntimeError("model.gguf is empty")
        return m.mount_time + time.perf_counter() - t0


def rows(b, reps, want):
    out = []
    import benchlib
    if "gguf-ttfb" in want or "gguf-memory" in want:
        big = sparse_gguf(b.DIR)
        ed = edits_file(b.DIR)
    if "gguf-ttfb" in want:
        with open(big, "rb") as f:
            f.read(64 << 20)  # the header, warm for both

        def base():
            with b.Mount(big) as m:
                return m.mount_time
        bt, ot, r = b.paired(reps, base, lambda: first_byte(b, big, "-o", f"export,edits={ed}"))
        out.append(("gguf-ttfb", r, f"{ot * 1e3:.0f} ms to model.gguf's first byte vs {bt * 1e3:.0f} ms "
                    f"to mount ({os.path.getsize(big) / 1e9:.0f} GB sparse)", "lower"))
    if "gguf-cp" in want:
        _, _, q = benchlib.gguf_fixtures(b.DIR)
        size = os.path.getsize(q)
        dst = os.path.join(tempfile.mkdtemp(prefix="tfs-bench-", dir="/dev/shm"), "out")

        def base():
            b.warm(q)
            return benchlib.cp_time(q, dst)

        def ours():
            with b.Mount(q, "-o", "export") as m:
                b.warm(q)
                return benchlib.cp_time(os.path.join(m.mnt, "model.gguf"), dst)
        bt, ot, r = b.paired(reps, base, ours)
        os.rmdir(os.path.dirname(dst))
        out.append(("gguf-cp", 1 / r, f"{size / ot / 1e9:.2f} GB/s vs {size / bt / 1e9:.2f} GB/s "
                    f"({size / 2 ** 30:.1f} GiB Q4_K)", "higher"))
    if "gguf-memory" in want:
        small = sparse_gguf(b.DIR, 10 ** 9)

        def peak(src):
            with b.Mount(src, "-o", f"export,edits={ed}") as m:
                b.dd(os.path.join(m.mnt, "model.gguf"), 0, 1 << 30)
                return b.vm_hwm_kb(m.pid)
        sk, bk, r = b.paired(reps, lambda: peak(small), lambda: peak(big))
        out.append(("gguf-memory", r, f"{bk / 1024:.0f} MiB for 40 GB vs {sk / 1024:.0f} MiB for 1 GB "
                    "(the same 150,000-entry header)", "lower"))
    return out
