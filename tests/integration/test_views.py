"""Views for tools: .npy files, exact float32 decoding of every bit pattern,
and tensorfs --inspect."""

import hashlib
import json
import math
import os
import struct
import subprocess

import numpy as np
import pytest

from tfsutil import (BIN, EXIT_FORMAT, EXIT_USAGE, REAL, fname, mounted, need_real, real_files, run,
                     write_st)

EXPECTED = os.path.join(REAL, "expected.json")

NATIVE = {"BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "U16": np.uint16, "I16": np.int16,
          "U32": np.uint32, "I32": np.int32, "U64": np.uint64, "I64": np.int64,
          "F16": np.float16, "F32": np.float32, "F64": np.float64, "C64": np.complex64}


def native_tensors():
    rng = np.random.default_rng(5)
    out = []
    for i, (dt, npt) in enumerate(NATIVE.items()):
        shape = [(3, 4), (5,), (), (2, 0, 3), (2, 3, 4)][i % 5]
        if dt == "BOOL":
            a = rng.integers(0, 2, shape).astype(np.bool_)
        elif dt == "C64":
            a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        elif np.issubdtype(npt, np.floating):
            a = rng.standard_normal(shape).astype(npt)
        else:
            info = np.iinfo(npt)
            a = rng.integers(info.min, info.max, shape, dtype=npt, endpoint=True)
        out.append((f"t.{dt.lower()}", dt, a.shape, np.ascontiguousarray(a).tobytes(), a))
    return out


def test_npy_native_dtypes_round_trip(tmp):
    path = os.path.join(tmp, "n.safetensors")
    ts = native_tensors()
    write_st(path, [t[:4] for t in ts], pad="odd")
    with mounted(path, "-o", "format=npy") as mnt:
        assert sorted(os.listdir(mnt)) == sorted([t[0] + ".npy" for t in ts] + ["__metadata__.json", "__tensors__.tsv"])
        for name, dt, shape, raw, a in ts:
            p = os.path.join(mnt, name + ".npy")
            for mode in (None, "r"):
                b = np.load(p, mmap_mode=mode)
                assert b.dtype == a.dtype and b.shape == a.shape, (name, b.dtype, b.shape)
                assert b.tobytes() == raw, name
                assert b.flags["C_CONTIGUOUS"]
            with open(p, "rb") as f:
                head = f.read(10)
            assert head[:8] == b"\x93NUMPY\x01\x00"
            hl = struct.unpack("<H", head[8:10])[0]
            assert (10 + hl) % 64 == 0
            assert os.path.getsize(p) == 10 + hl + len(raw)
            assert os.getxattr(p, "user.dtype").decode() == dt
        del b  # a live memmap would keep the mount busy


def test_npy_non_native_dtypes(tmp):
    path = os.path.join(tmp, "x.safetensors")
    write_st(path, [("bf", "BF16", (2, 3), bytes(range(12))),
                    ("f8", "F8_E4M3", (4,), b"\x01\x02\x03\x04"),
                    ("f8fnuz", "F8_E5M2FNUZ", (2, 2), b"\x05\x06\x07\x08"),
                    ("f4", "F4", (3, 2), b"\x12\x34\x56"),
                    ("f6", "F6_E2M3", (4,), b"\x01\x02\x03"),
                    ("odd", "X99", (7,), b"\x09" * 7)])
    with mounted(path, "-o", "format=npy") as mnt:
        a = np.load(os.path.join(mnt, "bf.npy"))
        assert a.dtype == np.uint16 and a.shape == (2, 3) and a.tobytes() == bytes(range(12))
        a = np.load(os.path.join(mnt, "f8.npy"), mmap_mode="r")
        assert a.dtype == np.uint8 and a.shape == (4,)
        del a
        assert np.load(os.path.join(mnt, "f8fnuz.npy")).shape == (2, 2)
        # packed sub-byte tensors and unknown dtypes: their raw bytes, uint8 (nbytes,)
        a = np.load(os.path.join(mnt, "f4.npy"))
        assert a.dtype == np.uint8 and a.shape == (3,) and a.tobytes() == b"\x12\x34\x56"
        assert os.getxattr(os.path.join(mnt, "f4.npy"), "user.shape") == b"[3,2]"
        assert np.load(os.path.join(mnt, "f6.npy")).shape == (3,)
        assert np.load(os.path.join(mnt, "odd.npy")).tobytes() == b"\x09" * 7


def test_npy_names_and_layouts(tmp):
    path = os.path.join(tmp, "y.safetensors")
    long_name = "w" * 300
    write_st(path, [("model.a.weight", "U8", (1,), b"1"), ("a/b", "U8", (1,), b"2"),
                    (long_name, "U8", (1,), b"3"), ("model.a", "U8", (1,), b"4")])
    with mounted(path, "-o", "format=npy") as mnt:
        names = os.listdir(mnt)
        assert {"model.a.weight.npy", "a%2Fb.npy", "model.a.npy", "__metadata__.json"} <= set(names)
        longf = [n for n in names if n.startswith("www")][0]
        assert longf.endswith(".npy") and len(longf.encode()) <= 255 and "%~" in longf
        assert np.load(os.path.join(mnt, longf)).tolist() == [ord("3")]
    with mounted(path, "-o", "format=npy,layout=tree") as mnt:
        assert np.load(os.path.join(mnt, "model", "a", "weight.npy")).tolist() == [ord("1")]
        assert np.load(os.path.join(mnt, "model", "a.tensor.npy")).tolist() == [ord("4")]


# ---- float32 decoding, written again from the definitions ----

def generic(s, e, m, ebits, mbits, bias):
    if e == 0:
        v = m / (1 << mbits) * 2.0 ** (1 - bias)
    else:
        v = (1 + m / (1 << mbits)) * 2.0 ** (e - bias)
    return -v if s else v


def ref_decode(dt, v):
    if dt == "BF16":
        return struct.unpack("<f", struct.pack("<I", v << 16))[0]
    if dt == "F16":
        return float(np.frombuffer(struct.pack("<H", v), np.float16)[0])
    if dt == "F8_E5M2":
        return float(np.frombuffer(struct.pack("<H", v << 8), np.float16)[0])
    if dt == "F8_E4M3":
        if v & 0x7F == 0x7F:
            return math.nan
        return generic(v >> 7, (v >> 3) & 15, v & 7, 4, 3, 7)
    if dt == "F8_E4M3FNUZ":
        return math.nan if v == 0x80 else generic(v >> 7, (v >> 3) & 15, v & 7, 4, 3, 8)
    if dt == "F8_E5M2FNUZ":
        return math.nan if v == 0x80 else generic(v >> 7, (v >> 2) & 31, v & 3, 5, 2, 16)
    if dt == "F8_E8M0":
        return math.nan if v == 255 else 2.0 ** (v - 127)
    if dt == "F4":
        return generic(v >> 3, (v >> 1) & 3, v & 1, 2, 1, 1)
    if dt == "F6_E2M3":
        return generic(v >> 5, (v >> 3) & 3, v & 7, 2, 3, 1)
    if dt == "F6_E3M2":
        return generic(v >> 5, (v >> 2) & 7, v & 3, 3, 2, 3)
    raise ValueError(dt)


BITS = {"BF16": 16, "F16": 16, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8,
        "F8_E5M2FNUZ": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}


def pack(dt, values):
    """Stored bytes: little-endian words; F4 two per byte (first element in
    the low nibble); F6 as a little-endian bit stream, LSB first."""
    bits = BITS[dt]
    if bits == 16:
        return struct.pack(f"<{len(values)}H", *values)
    if bits == 8:
        return bytes(values)
    acc, nbits, out = 0, 0, bytearray()
    for v in values:
        acc |= v << nbits
        nbits += bits
        while nbits >= 8:
            out.append(acc & 0xFF)
            acc >>= 8
            nbits -= 8
    assert nbits == 0
    return bytes(out)


def same_f32(got, want):
    if math.isnan(want):
        return math.isnan(got)
    return struct.pack("<f", got) == struct.pack("<f", want)


@pytest.mark.parametrize("dt", sorted(BITS))
def test_convert_every_bit_pattern(tmp, dt):
    n = 1 << BITS[dt]
    values = list(range(n))
    path = os.path.join(tmp, "c.safetensors")
    write_st(path, [("pad", "U8", (3,), b"abc"), ("all", dt, (n,), pack(dt, values))], pad="odd")
    want = [ref_decode(dt, v) for v in values]
    with mounted(path, "-o", "convert=f32") as mnt:
        p = os.path.join(mnt, "all")
        assert os.path.getsize(p) == 4 * n
        assert os.getxattr(p, "user.dtype") == b"F32"
        assert os.getxattr(p, "user.source_dtype").decode() == dt
        assert "user.source_dtype" in os.listxattr(p)
        got = np.fromfile(p, np.float32)
        bad = [v for v in values if not same_f32(float(got[v]), want[v])]
        assert bad == [], f"{dt}: {len(bad)} patterns differ, first {bad[:5]}"
        # any offset, any length: the same bytes as the whole
        whole = got.tobytes()
        fd = os.open(p, os.O_RDONLY)
        try:
            for off, ln in [(1, 5), (6, 10), (4 * n - 3, 10), (2, 4 * n), (4 * (n // 2) + 3, 9)]:
                assert os.pread(fd, ln, off) == whole[off:off + ln], (off, ln)
        finally:
            os.close(fd)
        # untouched dtypes are served as stored, without source_dtype
        assert open(os.path.join(mnt, "pad"), "rb").read() == b"abc"
        assert "user.source_dtype" not in os.listxattr(os.path.join(mnt, "pad"))


def test_convert_with_npy(tmp):
    vals = np.array([[1.5, -2.25, 3e-3], [65504.0, -0.0, 7.0]], np.float32)
    bf = (vals.view(np.uint32) >> 16).astype(np.uint16)
    path = os.path.join(tmp, "b.safetensors")
    write_st(path, [("w", "BF16", (2, 3), bf.tobytes()), ("i", "I32", (2,), struct.pack("<2i", 7, -7))])
    with mounted(path, "-o", "format=npy,convert=f32") as mnt:
        for mode in (None, "r"):
            a = np.load(os.path.join(mnt, "w.npy"), mmap_mode=mode)
            assert a.dtype == np.float32 and a.shape == (2, 3)
            assert (a.view(np.uint32) == (bf.astype(np.uint32) << 16)).all()
            del a
        assert np.load(os.path.join(mnt, "i.npy")).tolist() == [7, -7]


def test_view_option_errors(tmp):
    path = os.path.join(tmp, "e.safetensors")
    write_st(path, [("x", "U8", (1,), b"1")])
    for opt in ("format=zip", "convert=f16"):
        r = run(["-o", opt, path, tmp])
        assert r.returncode == EXIT_USAGE and opt.split("=")[0] in r.stderr


# ---- the real checkpoints in every view ----

def expected(rel):
    return json.load(open(EXPECTED))["files"][rel]


@pytest.mark.parametrize("rel", real_files())
def test_real_in_every_view(rel):
    need_real()
    exp = expected(rel)
    src = os.path.join(REAL, rel)
    with mounted(src, "-o", "format=npy") as mnt:
        for name, t in exp["tensors"].items():
            a = np.load(os.path.join(mnt, fname(name) + ".npy"), mmap_mode="r")
            assert hashlib.sha256(a.tobytes()).hexdigest() == t["sha256"], name
            if t["dtype"] in NATIVE:
                assert list(a.shape) == t["shape"]
            del a
    with mounted(src, "-o", "convert=f32,layout=tree") as mnt:
        for name, t in exp["tensors"].items():
            p = os.path.join(mnt, *[fname(c) for c in name.split(".")])
            if not os.path.exists(p):
                p += ".tensor"
            data = open(p, "rb").read()
            if t["dtype"] not in BITS:
                assert hashlib.sha256(data).hexdigest() == t["sha256"], name
                continue
            raw = open(src, "rb").read()[8 + exp["header_len"]:][t["data_offsets"][0]:t["data_offsets"][1]]
            got = np.frombuffer(data, np.float32)
            if BITS[t["dtype"]] == 16:
                words = struct.unpack(f"<{len(raw) // 2}H", raw)
            else:
                words = list(raw)
            assert len(got) == len(words)
            for g, w in zip(got, words):
                assert same_f32(float(g), ref_decode(t["dtype"], w)), (name, w)


@pytest.mark.parametrize("rel", real_files())
def test_inspect_json_agrees_with_expected(rel):
    need_real()
    exp = expected(rel)
    r = subprocess.run([BIN, "--inspect", "--json", os.path.join(REAL, rel)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["parameters_per_dtype"] == exp["params_per_dtype"]
    assert d["bytes_per_dtype"] == exp["bytes_per_dtype"]
    assert d["tensor_count"] == exp["tensor_count"]
    assert d["total_parameters"] == exp["total_params"]
    assert d["metadata"] == (exp["metadata"] or {})
    got = {t["name"]: t for t in d["tensors"]}
    for name, t in exp["tensors"].items():
        assert got[name]["dtype"] == t["dtype"] and got[name]["shape"] == t["shape"]
        assert got[name]["bytes"] == t["nbytes"]
    table = subprocess.run([BIN, "--inspect", os.path.join(REAL, rel)], capture_output=True,
                           text=True, timeout=60).stdout
    assert f"{exp['tensor_count']} tensors, {exp['total_params']} parameters" in table


def test_inspect_sharded():
    need_real()
    files = json.load(open(EXPECTED))["files"]
    params = {}
    for rel, e in files.items():
        if rel.startswith("julia-safetensors-jl-sharded/") and e["kind"] == "safetensors":
            for dt, n in e["params_per_dtype"].items():
                params[dt] = params.get(dt, 0) + n
    d = json.loads(subprocess.run([BIN, "--inspect", "--json", os.path.join(REAL, "julia-safetensors-jl-sharded")],
                                  capture_output=True, text=True, check=True).stdout)
    assert d["parameters_per_dtype"] == params
    assert len(d["shards"]) == 6 and d["tensor_count"] == 36
    assert {t["shard"] for t in d["tensors"]} == set(d["shards"])


def test_inspect_errors_and_hostile_names(tmp):
    bad = os.path.join(tmp, "bad.safetensors")
    with open(bad, "wb") as f:
        f.write(b"<html>nope</html>")
    r = subprocess.run([BIN, "--inspect", bad], capture_output=True, text=True)
    assert r.returncode == EXIT_FORMAT and r.stderr.count("\n") == 1 and r.stdout == ""
    r = subprocess.run([BIN, "--inspect"], capture_output=True, text=True)
    assert r.returncode == EXIT_USAGE
    path = os.path.join(tmp, "h.safetensors")
    write_st(path, [("a\nb\x00c", "U8", (1,), b"1"), ("s", "I64", (), b"\0" * 8)],
             metadata={"k": "v"})
    r = subprocess.run([BIN, "--inspect", path], capture_output=True, text=True, check=True)
    assert "a\\x0ab\\x00c" in r.stdout
    rows = r.stdout.splitlines()
    assert rows[0].split() == ["name", "dtype", "shape", "bytes"]
    assert rows[1].split() == ["a\\x0ab\\x00c", "U8", "[1]", "1"]  # one line, escaped
    assert rows[2].split() == ["s", "I64", "[]", "8"]
    assert "2 tensors, 2 parameters, 9 bytes" in r.stdout
    assert r.stdout.endswith('__metadata__: {\n  "k": "v"\n}\n')
    d = json.loads(subprocess.run([BIN, "--inspect", "--json", path], capture_output=True,
                                  text=True, check=True).stdout)
    assert d["tensors"][0]["name"] == "a\nb\x00c"
    assert d["parameters_per_dtype"] == {"I64": 1, "U8": 1}  # a scalar counts 1
    assert d["metadata"] == {"k": "v"}


def test_npy_version_2_header(tmp):
    """A shape whose header passes 64 KiB needs NPY 2.0 (32-bit length)."""
    path = os.path.join(tmp, "v2.safetensors")
    shape = [1] * 24999 + [3]
    write_st(path, [("deep", "I16", shape, struct.pack("<3h", 1, -2, 3))])
    with mounted(path, "-o", "format=npy") as mnt:
        p = os.path.join(mnt, "deep.npy")
        with open(p, "rb") as f:
            head = f.read(12)
        assert head[:8] == b"\x93NUMPY\x02\x00"
        hl = struct.unpack("<I", head[8:12])[0]
        assert hl > 65535 and (12 + hl) % 64 == 0
        # numpy arrays stop at 32 dimensions, so only numpy's header reader
        # can check a header this long (given max_header_size)
        with open(p, "rb") as f:
            assert np.lib.format.read_magic(f) == (2, 0)
            got_shape, fortran, dtype = np.lib.format.read_array_header_2_0(f, max_header_size=200000)
            assert got_shape == tuple(shape) and not fortran and dtype == np.dtype("<i2")
            assert f.tell() == 12 + hl
            assert struct.unpack("<3h", f.read()) == (1, -2, 3)
