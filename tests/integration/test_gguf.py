"""GGUF files mounted: bytes, xattrs, __metadata__.json, the views
(dequantization checked against a separate Python implementation of ggml's
formulas), --inspect, split models, and every check of ggml's reader."""

import json
import os
import struct

import numpy as np
import pytest

import gen_gguf as G
from tfsutil import EXIT_FORMAT, EXIT_USAGE, mounted, run

DEQUANT = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "MXFP4"]
RAW_ONLY = ["IQ2_XXS", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "Q8_K", "Q8_1", "IQ1_M", "NVFP4"]
NUMPY = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I8": "i1", "I16": "<i2", "I32": "<i4",
         "I64": "<i8", "BF16": "<u2"}

KVS = [("general.architecture", G.STR, "llama"), ("general.name", G.STR, "tiny \u00e9"),
       ("llama.context_length", G.U32, 4096), ("x.u8", G.U8, 255), ("x.i8", G.I8, -128),
       ("x.u16", G.U16, 65535), ("x.i16", G.I16, -32768), ("x.i32", G.I32, -7),
       ("x.f32", G.F32, 0.1), ("x.bool", G.BOOL, 1), ("x.u64", G.U64, 2 ** 64 - 1),
       ("x.i64", G.I64, -2 ** 63), ("x.f64", G.F64, 1e300), ("x.nan", G.F32, float("nan")),
       ("tokenizer.ggml.tokens", G.ARR, (G.STR, ["<s>", "a\x00b", "\u4e2d", ""])),
       ("tokenizer.ggml.scores", G.ARR, (G.F32, [0.5, -1.0])),
       ("x.empty", G.ARR, (G.I32, []))]


def model(rng, version=3, alignment=None):
    tensors = []
    for name in DEQUANT + RAW_ONLY:
        tid = G.ID[name]
        _, blk, size = G.GGML[tid]
        # three rows of three blocks
        tensors.append((f"blk.0.{name.lower()}.weight", tid, [blk * 3, 3],
                        G.random_blocks(tid, 9, rng)))
    for name, dt in NUMPY.items():
        a = (rng.standard_normal(15) * 100).astype(dt) if name[0] in "FB" else \
            rng.integers(-100, 100, 15).astype(dt)
        tensors.append((f"plain.{name.lower()}", G.ID[name], [5, 3], a.tobytes()))
    tensors.append(("scalar", 0, [], np.float32(3.5).tobytes()))
    return tensors


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    d = tmp_path_factory.mktemp("gguf")
    rng = np.random.default_rng(12)
    tensors = model(rng)
    path = str(d / "tiny.gguf")
    with open(path, "wb") as f:
        f.write(G.build(KVS, tensors, alignment=64))
    return path, tensors


def xattr(p, k):
    return os.getxattr(p, k).decode()


def test_bytes_xattrs_and_metadata(gguf):
    path, tensors = gguf
    blob = open(path, "rb").read()
    with mounted(path) as mnt:
        names = sorted(n for n in os.listdir(mnt) if not n.startswith("__"))
        assert names == sorted(t[0] for t in tensors)
        for name, tid, ne, data in tensors:
            p = os.path.join(mnt, name)
            assert open(p, "rb").read() == data, name
            assert xattr(p, "user.dtype") == G.GGML[tid][0]
            assert json.loads(xattr(p, "user.shape")) == ne[::-1]
            b, e = json.loads(xattr(p, "user.offsets"))
            assert blob[b:e] == data and b % 64 == 0
        meta = json.load(open(os.path.join(mnt, "__metadata__.json")))
    want = {k: v for k, t, v in KVS}
    assert list(meta) == ["general.alignment"] + [k for k, t, v in KVS]
    assert meta["general.alignment"] == {"type": "UINT32", "value": 64}
    for k, t, v in KVS:
        m = meta[k]
        assert m["type"] == G.TYPE_NAMES[t], k
        if t == G.ARR:
            assert m["element_type"] == G.TYPE_NAMES[v[0]]
            assert m["value"] == v[1], k
        elif k == "x.nan":
            assert m["value"] == "nan"
        elif t == G.F32:
            assert np.float32(m["value"]) == np.float32(v)  # %.9g: exact as float32
        elif t == G.BOOL:
            assert m["value"] is True
        else:
            assert m["value"] == want[k], k


def test_tsv_matches_xattrs(gguf):
    path, tensors = gguf
    with mounted(path) as mnt:
        lines = open(os.path.join(mnt, "__tensors__.tsv")).read().splitlines()
        rows = {l.split("\t")[0]: l.split("\t") for l in lines[1:]}
        for name, tid, ne, data in tensors:
            r = rows[name]
            assert r[1] == G.GGML[tid][0] and json.loads(r[2]) == ne[::-1] and int(r[3]) == len(data)


def test_convert_f32_matches_ggml_formulas(gguf):
    """Every dequantized element against the Python implementation, whole
    and through reads at odd offsets and lengths (whole blocks are read
    whatever the range)."""
    path, tensors = gguf
    rng = np.random.default_rng(3)
    with mounted(path, "-o", "convert=f32") as mnt:
        for name, tid, ne, data in tensors:
            tname = G.GGML[tid][0]
            p = os.path.join(mnt, name)
            if tname in DEQUANT or tname in ("F16", "BF16"):
                want = G.dequant(tname, data).astype("<f4").tobytes()
                got = open(p, "rb").read()
                assert got == want, tname
                assert xattr(p, "user.dtype") == "F32" and xattr(p, "user.source_dtype") == tname
                fd = os.open(p, os.O_RDONLY)
                try:
                    for _ in range(20):
                        off = int(rng.integers(0, len(want)))
                        ln = int(rng.integers(1, len(want) - off + 1))
                        assert os.pread(fd, ln, off) == want[off:off + ln], (tname, off, ln)
                finally:
                    os.close(fd)
            else:
                # IQ, TQ, Q8_K, NVFP4 and native types: served as stored
                assert open(p, "rb").read() == data, tname
                assert xattr(p, "user.dtype") == tname


def test_npy_view(gguf):
    path, tensors = gguf
    with mounted(path, "-o", "format=npy") as mnt:
        for name, tid, ne, data in tensors:
            tname, blk, size = G.GGML[tid]
            a = np.load(os.path.join(mnt, name + ".npy"))
            if tname in NUMPY:
                assert a.dtype == np.dtype(NUMPY[tname]) and list(a.shape) == ne[::-1]
            elif tname == "F32":
                assert a.dtype == np.float32
            else:
                assert a.dtype == np.uint8 and a.shape == (len(data) // size, size)
            assert a.tobytes() == data


def test_inspect(gguf):
    path, tensors = gguf
    r = run(["--inspect", path])
    assert r.returncode == 0, r.stderr
    assert "format: gguf\n" in r.stdout
    assert "general.architecture: llama\n" in r.stdout
    assert "llama.context_length: 4096\n" in r.stdout
    assert "general.name: tiny \u00e9\n" in r.stdout
    r = run(["--inspect", "--json", path])
    j = json.loads(r.stdout)
    assert j["format"] == "gguf" and j["facts"]["general.architecture"] == "llama"
    per = {}
    for name, tid, ne, data in tensors:
        per[G.GGML[tid][0]] = per.get(G.GGML[tid][0], 0) + len(data)
    assert j["bytes_per_dtype"] == per
    assert j["parameters_per_dtype"]["Q4_K"] == 256 * 3 * 3


def test_version_2_and_forced_input(tmp):
    rng = np.random.default_rng(4)
    t = [("w", G.ID["Q8_0"], [64], G.random_blocks(G.ID["Q8_0"], 2, rng))]
    p = os.path.join(tmp, "v2.bin")  # the name says nothing: the bytes do
    open(p, "wb").write(G.build([], t, version=2))
    with mounted(p) as mnt:
        assert open(os.path.join(mnt, "w"), "rb").read() == t[0][3]
    with mounted(p, "-o", "input=gguf") as mnt:
        assert os.listdir(mnt)
    r = run(["-o", "input=bintensors", "--inspect", p])
    assert r.returncode == EXIT_FORMAT and r.stderr.count("\n") == 1
    r = run(["-o", "input=nosuch", "--inspect", p])
    assert r.returncode == EXIT_USAGE and "gguf" in r.stderr


def test_large_vocabulary_is_lazy(tmp):
    """150,000 tokens: the mount does not write them; the first read of
    __metadata__.json does, all of them."""
    vocab = [f"t{i}" for i in range(150000)]
    p = os.path.join(tmp, "v.gguf")
    open(p, "wb").write(G.build([("tokenizer.ggml.tokens", G.ARR, (G.STR, vocab))],
                                [("w", 0, [4], b"\0" * 16)]))
    with mounted(p) as mnt:
        m = json.load(open(os.path.join(mnt, "__metadata__.json")))
        assert m["tokenizer.ggml.tokens"]["value"] == vocab
    r = run(["--inspect", p])
    assert r.returncode == 0 and "bytes of JSON" in r.stdout and "t149999" not in r.stdout


def split_files(d, parts=3):
    rng = np.random.default_rng(9)
    out = []
    allt = []
    for k in range(parts):
        kv = [("split.no", G.U16, k), ("split.count", G.U16, parts), ("split.tensors.count", G.I32, parts * 2)]
        if k == 0:
            kv.insert(0, ("general.architecture", G.STR, "llama"))
        ts = [(f"blk.{k}.{j}", G.ID["Q4_K"], [256], G.random_blocks(G.ID["Q4_K"], 1, rng)) for j in range(2)]
        allt += ts
        p = os.path.join(d, f"m-{k + 1:05d}-of-{parts:05d}.gguf")
        open(p, "wb").write(G.build(kv, ts))
        out.append(p)
    return out, allt


def test_split_model(tmp):
    d = os.path.join(tmp, "split")
    os.mkdir(d)
    files, allt = split_files(d)
    for src in (files[0], d):
        with mounted(src) as mnt:
            got = sorted(n for n in os.listdir(mnt) if not n.startswith("__"))
            assert got == sorted(t[0] for t in allt)
            for name, tid, ne, data in allt:
                p = os.path.join(mnt, name)
                assert open(p, "rb").read() == data
                k = int(name.split(".")[1])
                assert os.getxattr(p, "user.source").decode().endswith(os.path.basename(files[k]))
            meta = json.load(open(os.path.join(mnt, "__metadata__.json")))
            assert meta["general.architecture"]["value"] == "llama"
    r = run(["--inspect", files[1]])
    assert r.returncode == EXIT_FORMAT and "part 2 of a 3-part split" in r.stderr
    os.unlink(files[2])
    r = run(["--inspect", files[0]])
    assert r.returncode != 0 and "m-00003-of-00003.gguf" in r.stderr and r.stderr.count("\n") == 1
    r = run(["--inspect", d])
    assert r.returncode == EXIT_FORMAT and "split into 3 parts but 2" in r.stderr


def invalid_cases():
    rng = np.random.default_rng(1)
    q = G.random_blocks(G.ID["Q4_0"], 2, rng)
    ok = [("w", G.ID["Q4_0"], [64], q)]
    good = G.build([], ok)
    cases = {
        "big-endian": (b"GGUF" + struct.pack(">I", 3) + good[8:], "big-endian"),
        "version 1": (G.build([], ok, version=1), "version 1 is not supported"),
        "version 4": (G.build([], ok, version=4), "version 4 is not supported"),
        "truncated header": (good[:40], "truncated file: it ends inside the header"),
        "truncated data": (good[:-30], "truncated file: tensor 'w' ends"),
        "duplicate key": (G.build([("a", G.U8, 1), ("a", G.U8, 2)], ok), "key 'a' appears twice"),
        "duplicate tensor": (G.build([], ok + ok), "tensor 'w': the name is used twice"),
        "removed type": (G.build([], [("w", 4, [32], b"\0" * 20)]), "ggml type 4 (Q4_2) was removed"),
        "unknown type": (G.build([], [("w", 57, [32], b"\0" * 20)]), "tensor 'w': ggml type 57 is unknown"),
        "row not whole blocks": (G.build([], [("w", G.ID["Q4_0"], [33], b"\0" * 18)]),
                                 "33 elements per row, not a multiple of Q4_0's block of 32"),
        "alignment not a power of 2": (G.build([], ok, alignment=48), "general.alignment 48 is not a power of 2"),
        "alignment of the wrong type": (G.build([("general.alignment", G.U64, 32)], ok),
                                        "general.alignment is of type UINT64"),
        "misaligned offset": (G.build([], ok + [("v", 0, [1], b"\0" * 4)], offsets=[0, 40]),
                              "tensor 'v': offset 40 is not a multiple of the alignment 32"),
        "offset out of order": (G.build([], [("v", 0, [1], b"\0" * 4)] + ok, offsets=[32, 0]),
                                "tensor 'v': offset 32, but ggml's reader expects 0"),
        "array of arrays": (G.build([("a", G.ARR, (G.ARR, []))], ok), "an array of arrays"),
        "five dimensions": (G.build([], [("w", 0, [1, 1, 1, 1, 1], b"\0" * 4)]), "5 dimensions"),
        "negative dimension": (G.build([], [("w", 0, [2 ** 64 - 1], b"")]), "dimension 0 is negative"),
        "name too long": (G.build([], [("n" * 64, 0, [1], b"\0" * 4)]), "the name is 64 bytes"),
        "count too large": (G.build([], ok, n_tensors=2 ** 60), "more than a"),
        "empty key": (G.build([("", G.U8, 1)], ok), "has an empty key"),
        "elements overflow": (G.build([], [("w", 0, [2 ** 32, 2 ** 32], b"")]), "elements overflow"),
    }
    # a value type beyond FLOAT64: write the pair by hand
    bad = bytearray(G.build([("a", G.U8, 1)], ok))
    pos = 24 + 8 + 1  # magic, version, counts; the key's length and byte
    bad[pos:pos + 4] = struct.pack("<I", 13)
    cases["invalid value type"] = (bytes(bad), "key 'a' has invalid value type 13")
    return cases


def test_invalid_files_refused(tmp):
    for name, (blob, msg) in invalid_cases().items():
        p = os.path.join(tmp, "bad.gguf")
        open(p, "wb").write(blob)
        mnt = os.path.join(tmp, "mnt")
        os.makedirs(mnt, exist_ok=True)
        r = run([p, mnt])
        assert r.returncode == EXIT_FORMAT, (name, r.returncode, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"tensorfs: {p}: "), (name, r.stderr)
        assert msg in r.stderr, (name, r.stderr)
