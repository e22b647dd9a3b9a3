"""GGUF files for the tests, written from the layout in ggml's docs/gguf.md
(Python standard library and numpy), and ggml's dequantization written again
in numpy, independently of the C code, for checking convert=f32.

Also a command: python3 gen_gguf.py OUT.gguf [--tensors N] [--vocab N]
writes a large file for the benchmark."""

import struct
import sys

import numpy as np

# value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
PACK = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
        BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}
TYPE_NAMES = ["UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
              "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"]

# ggml type id: (name, block elements, block bytes), from ggml.h and
# ggml-common.h
GGML = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2),
    26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17), 40: ("NVFP4", 64, 36),
}
ID = {v[0]: k for k, v in GGML.items()}
REMOVED = {4: "Q4_2", 5: "Q4_3", 31: "Q4_0_4_4", 32: "Q4_0_4_8", 33: "Q4_0_8_8",
           36: "IQ4_NL_4_4", 37: "IQ4_NL_4_8", 38: "IQ4_NL_8_8"}


def gstr(s):
    if isinstance(s, str):
        s = s.encode()
    return struct.pack("<Q", len(s)) + s


def value(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        out = struct.pack("<IQ", et, len(items))
        return out + b"".join(value(et, x) for x in items)
    return struct.pack(PACK[t], v)


def nbytes(type_id, ne):
    name, blk, size = GGML[type_id]
    n = 1
    for d in ne[1:]:
        n *= d
    return ne[0] // blk * size * n


def build(kvs=(), tensors=(), version=3, alignment=None, offsets=None, magic=b"GGUF",
          n_tensors=None, n_kv=None, truncate=None, tail=b""):
    """kvs: (key, type, value); tensors: (name, type_id, ne, data bytes).
    Offsets are laid out as ggml's writer does unless `offsets` is given."""
    kvs = list(kvs)
    align = 32
    if alignment is not None:
        kvs.insert(0, ("general.alignment", U32, alignment))
        align = alignment
    out = bytearray(magic + struct.pack("<I", version))
    out += struct.pack("<QQ", len(tensors) if n_tensors is None else n_tensors,
                       len(kvs) if n_kv is None else n_kv)
    for k, t, v in kvs:
        out += gstr(k) + struct.pack("<I", t) + value(t, v)
    off = 0
    offs = []
    for i, (name, tid, ne, data) in enumerate(tensors):
        o = offsets[i] if offsets is not None else off
        offs.append(o)
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", tid, o)
        off += len(data) + (-len(data)) % align
    out += b"\0" * ((-len(out)) % align)
    base = len(out)
    for (name, tid, ne, data), o in zip(tensors, offs):
        need = base + o
        if len(out) < need:
            out += b"\0" * (need - len(out))
        out[need:need + len(data)] = data
    out += b"\0" * ((-len(out)) % align) if tensors else b""
    out += tail
    if truncate is not None:
        out = out[:truncate]
    return bytes(out)


# ---- random blocks with finite scales ----

def f16(x):
    return np.float16(x).tobytes()


def random_blocks(type_id, nblocks, rng):
    name, blk, size = GGML[type_id]
    raw = bytearray(rng.integers(0, 256, size=nblocks * size, dtype=np.uint8).tobytes())
    # fp16 scales: finite, of either sign, small
    def scale(pos):
        for b in range(nblocks):
            p = b * size + pos
            raw[p:p + 2] = f16(rng.uniform(-2, 2) * 2.0 ** rng.integers(-12, 2))
    if name in ("Q4_0", "Q5_0", "Q8_0", "Q4_1", "Q5_1", "Q4_K", "Q5_K"):
        scale(0)
    if name in ("Q4_1", "Q5_1", "Q4_K", "Q5_K"):
        scale(2)
    if name == "Q2_K":
        scale(80)
        scale(82)
    if name == "Q3_K":
        scale(108)
    if name == "Q6_K":
        scale(208)
    return bytes(raw)


# ---- ggml's dequantize_row_* again, in float32 numpy ----

def _h(b, off):
    return np.frombuffer(b[off:off + 2], dtype="<f2")[0].astype(np.float32)


def _f(x):
    return np.float32(x)


def deq_block(name, b):
    y = np.zeros(256 if name.endswith("_K") else 32, dtype=np.float32)
    if name == "Q8_0":
        d = _h(b, 0)
        q = np.frombuffer(b[2:34], dtype=np.int8).astype(np.float32)
        return q * d
    if name in ("Q4_0", "Q4_1", "Q5_0", "Q5_1"):
        d = _h(b, 0)
        has_m = name in ("Q4_1", "Q5_1")
        m = _h(b, 2) if has_m else None
        p = 4 if has_m else 2
        hi = None
        if name.startswith("Q5"):
            hi = int.from_bytes(b[p:p + 4], "little")
            p += 4
        qs = b[p:p + 16]
        for j in range(32):
            byte = qs[j % 16]
            q = byte & 15 if j < 16 else byte >> 4
            if hi is not None:
                q |= ((hi >> j) & 1) << 4
            if name in ("Q4_0",):
                q -= 8
            if name == "Q5_0":
                q -= 16
            v = _f(q) * d
            y[j] = v + m if has_m else v
        return y
    if name == "MXFP4":
        e = b[0]
        bits = (0x00200000 << e) if e < 2 else (e - 1) << 23
        d = np.frombuffer(struct.pack("<I", bits), dtype="<f4")[0]
        kv = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]
        for j in range(32):
            byte = b[1 + j % 16]
            y[j] = _f(kv[byte & 15 if j < 16 else byte >> 4]) * d
        return y
    if name == "Q2_K":
        d, mn = _h(b, 80), _h(b, 82)
        for k in range(256):
            half, r = divmod(k, 128)          # which 32-byte run of qs
            group, l = divmod(r, 16)          # 8 groups of 16 per half
            shift = (group // 2) * 2
            qi = 32 * half + (group % 2) * 16 + l
            sc = b[half * 8 + group]
            q = (b[16 + qi] >> shift) & 3
            y[k] = (d * _f(sc & 15)) * _f(q) - (mn * _f(sc >> 4))
        return y
    if name == "Q3_K":
        d = _h(b, 108)
        s = b[96:108]
        sc = []
        for i in range(16):
            # the 4 low bits, then 2 high bits, of a 6-bit value (ggml's
            # kmask shuffle of the 12 bytes)
            lo = (s[i] & 15) if i < 8 else (s[i - 8] >> 4)
            hi = (s[8 + i % 4] >> (2 * (i // 4))) & 3
            sc.append(((hi << 4) | lo) - 32)
        for k in range(256):
            half, r = divmod(k, 128)
            group, l = divmod(r, 16)
            shift = (group // 2) * 2
            idx = (group % 2) * 16 + l
            q = (b[32 + 32 * half + idx] >> shift) & 3
            bit = 1 << (half * 4 + group // 2)
            q -= 0 if b[idx] & bit else 4
            y[k] = (d * _f(sc[half * 8 + group])) * _f(q)
        return y
    if name in ("Q4_K", "Q5_K"):
        d, mn = _h(b, 0), _h(b, 2)
        s = b[4:16]

        def sm(j):
            if j < 4:
                return s[j] & 63, s[j + 4] & 63
            return (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)
        for k in range(256):
            sub, l = divmod(k, 32)
            chunk = sub // 2
            sc, m = sm(sub)
            if name == "Q4_K":
                byte = b[16 + 32 * chunk + l]
                q = byte & 15 if sub % 2 == 0 else byte >> 4
            else:
                byte = b[48 + 32 * chunk + l]
                q = byte & 15 if sub % 2 == 0 else byte >> 4
                q += 16 if b[16 + l] & (1 << sub) else 0
            y[k] = (d * _f(sc)) * _f(q) - (mn * _f(m))
        return y
    if name == "Q6_K":
        d = _h(b, 208)
        sc = np.frombuffer(b[192:208], dtype=np.int8)
        for k in range(256):
            half, r = divmod(k, 128)
            quarter, l = divmod(r, 32)
            ql = b[64 * half + l + (32 if quarter in (1, 3) else 0)]
            low = ql & 15 if quarter < 2 else ql >> 4
            hb = (b[128 + 32 * half + l] >> (2 * quarter)) & 3
            q = (low | (hb << 4)) - 32
            y[k] = (d * _f(sc[8 * half + quarter * 2 + l // 16])) * _f(q)
        return y
    raise ValueError(name)


def dequant(name, raw):
    tid = ID[name]
    _, blk, size = GGML[tid]
    if name == "F16":
        return np.frombuffer(raw, dtype="<f2").astype(np.float32)
    if name == "BF16":
        u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return u.view(np.float32)
    return np.concatenate([deq_block(name, raw[i:i + size]) for i in range(0, len(raw), size)])


def main(argv):
    """OUT [--tensors N] [--vocab N] [--safetensors OUT2]: the benchmark's
    model, F32 tensors of 64 elements and a vocabulary of N strings; the
    same tensors as safetensors for the baseline."""
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--tensors", type=int, default=10000)
    ap.add_argument("--vocab", type=int, default=150000)
    ap.add_argument("--safetensors")
    a = ap.parse_args(argv)
    vocab = [f"tok{i:06d}" for i in range(a.vocab)]
    kvs = [("general.architecture", STR, "llama"), ("general.name", STR, "bench"),
           ("llama.context_length", U32, 4096),
           ("tokenizer.ggml.tokens", ARR, (STR, vocab)),
           ("tokenizer.ggml.scores", ARR, (F32, [0.0] * a.vocab))]
    data = np.zeros(64, dtype=np.float32).tobytes()
    tensors = [(f"blk.{i // 10}.t{i % 10}.weight", 0, [64], data) for i in range(a.tensors)]
    with open(a.out, "wb") as f:
        f.write(build(kvs, tensors))
    if a.safetensors:
        import checkpoints  # (which imports this module: here, not at the top)
        checkpoints.write_st(a.safetensors, [(name, "F32", ne[::-1], d) for name, _, ne, d in tensors])


if __name__ == "__main__":
    main(sys.argv[1:])
