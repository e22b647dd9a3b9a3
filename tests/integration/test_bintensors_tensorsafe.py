"""bintensors and tensorsafe files mounted: the byte sequences of
bintensors' specification, generated files of every dtype, appended
tensorsafe files, and every invalid or damaged file refused with one line."""

import json
import os
import struct

import numpy as np
import pytest

import gen_formats as F
from tfsutil import EXIT_FORMAT, mounted, run

DTYPES = {"BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16,
          "F16": np.float16, "BF16": np.uint16, "I32": np.int32, "U32": np.uint32,
          "F32": np.float32, "F64": np.float64, "I64": np.int64, "U64": np.uint64,
          "F8_E5M2": np.uint8, "F8_E4M3": np.uint8}


def tensors(rng):
    out = []
    for i, (dt, npt) in enumerate(DTYPES.items()):
        shape = [(3, 4), (5,), (), (2, 0, 3), (2, 3, 4)][i % 5]
        a = rng.integers(0, 2 if dt == "BOOL" else 100, shape).astype(npt)
        out.append((f"layer.{i}.{dt.lower()}", dt, list(a.shape), a.tobytes()))
    return out


def check_mount(path, ts, metadata, fmt):
    blob = open(path, "rb").read()
    with mounted(path) as mnt:
        assert sorted(n for n in os.listdir(mnt) if not n.startswith("__")) == sorted(t[0] for t in ts)
        for name, dt, shape, data in ts:
            p = os.path.join(mnt, name)
            assert open(p, "rb").read() == data, name
            assert os.getxattr(p, "user.dtype").decode() == dt
            assert json.loads(os.getxattr(p, "user.shape")) == shape
            b, e = json.loads(os.getxattr(p, "user.offsets"))
            assert blob[b:e] == data
        assert json.load(open(os.path.join(mnt, "__metadata__.json"))) == (metadata or {})
    r = run(["--inspect", "--json", path])
    assert r.returncode == 0 and json.loads(r.stdout)["format"] == fmt


def refused(tmp, blob, msg, name="bad"):
    p = os.path.join(tmp, name)
    open(p, "wb").write(blob)
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt, exist_ok=True)
    r = run([p, mnt])
    assert r.returncode == EXIT_FORMAT, (msg, r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"tensorfs: {p}: "), r.stderr
    assert msg in r.stderr, (msg, r.stderr)


# ---- bintensors ----

def test_bintensors_specification_bytes(tmp):
    """The byte sequences of specs/encoding.md, tensor.rs's test and the
    Python binding's empty file, as they are written there."""
    spec = (b"\x18\0\0\0\0\0\0\0" + b"\x00\x01\x08weight_1\x00\x02\x02\x02\x00\x04" + b"\x20" * 7 +
            b"\x01\x00\x00\x01")
    p = os.path.join(tmp, "spec.bt")
    open(p, "wb").write(spec)
    check_mount(p, [("weight_1", "BOOL", [2, 2], b"\x01\x00\x00\x01")], None, "bintensors")
    rs = b"\x10\0\0\0\0\0\0\0" + b"\x00\x01\x04test\x00\x02\x02\x02\x00\x04" + b"\x20" * 3 + b"\0" * 4
    open(p, "wb").write(rs)
    check_mount(p, [("test", "BOOL", [2, 2], b"\0" * 4)], None, "bintensors")
    empty = b"\x08\0\0\0\0\0\0\0" + b"\x00\x00" + b"\x20" * 6
    open(p, "wb").write(empty)
    check_mount(p, [], None, "bintensors")


def test_bintensors_generated(tmp):
    rng = np.random.default_rng(2)
    ts = tensors(rng)
    meta = {"format": "pt", "z": "\u00e9", "a": ""}
    p = os.path.join(tmp, "model.bt")
    open(p, "wb").write(F.bt_file(ts, meta))
    check_mount(p, ts, meta, "bintensors")
    # a big header: varints of 2, 4 and 8 bytes
    big = [("w" * 252, "U8", [70000], bytes(70000))]
    open(p, "wb").write(F.bt_file(big))
    check_mount(p, big, None, "bintensors")


def test_bintensors_invalid(tmp):
    ok = [("a", "F32", [2], b"\0" * 8), ("b", "U8", [3], b"\1\2\3")]
    cases = [
        (F.bt_file(ok, header=b"\x02" + F.bt_header(ok)[1:]), "Option tag is not 0 or 1"),
        (F.bt_file([("a", 15, [2], b"\0" * 8)]), "tensor 'a': unknown dtype id 15"),
        (F.bt_file(ok, offsets=[(0, 8), (9, 12)]), "tensor 'b': offsets [9, 12] are not contiguous"),
        (F.bt_file([("a", "F32", [3], b"\0" * 8)]), "tensor 'a': 8 bytes between its offsets"),
        (F.bt_file(ok, tail=b"x"), "requires the file to end with the last tensor"),
        (F.bt_file(ok)[:-1], "truncated file"),
        (F.bt_file([ok[0], ok[0]], offsets=[(0, 8), (8, 16)]), "tensor 'a' appears twice"),
        (F.bt_file(ok, n=100000001), "over the 100000000-byte limit"),
        (F.bt_file(ok, n=10 ** 6), "truncated file: the header length says"),
        (F.bt_file(ok, header=b"\x00\x01\x01\xff\x0b\x01\x02\x00\x08"), "not UTF-8"),
        (F.bt_file(ok, header=b"\x00\xfe" + b"\0" * 16), "the tensor count"),
        (F.bt_file(ok, header=b"\x00\x02\x01a\x0b\x01\x02\x00"), "bad header"),
    ]
    for blob, msg in cases:
        refused(tmp, blob, msg, "bad.bt")


# ---- tensorsafe ----

def test_tensorsafe_and_appends(tmp):
    rng = np.random.default_rng(8)
    ts = tensors(rng)
    meta = {"author": "me"}
    blob, hdr = F.ts_file(ts, meta)
    p = os.path.join(tmp, "model.tensorsafe")
    open(p, "wb").write(blob)
    check_mount(p, ts, meta, "tensorsafe")
    # two appends: a new tensor, then a replacement of an old one
    blob, hdr = F.ts_append(blob, [("new.t", "F32", [4], np.arange(4, dtype=np.float32).tobytes())], hdr)
    repl = ("layer.0.bool", "I32", [2], struct.pack("<ii", 7, -7))
    blob, hdr = F.ts_append(blob, [repl], hdr)
    open(p, "wb").write(blob)
    want = [t for t in ts if t[0] != repl[0]] + [
        ("new.t", "F32", [4], np.arange(4, dtype=np.float32).tobytes()), repl]
    check_mount(p, want, meta, "tensorsafe")
    r = run(["--inspect", p])
    assert "appends: 2\n" in r.stdout


def test_tensorsafe_damaged(tmp):
    ts = [("a", "F32", [2], b"\1" * 8), ("b", "U8", [3], b"\2" * 3)]
    good, hdr = F.ts_file(ts)
    meta_len = struct.unpack("<Q", good[-32:-24])[0]
    cases = [
        (good + b"\0" * 100, "does not end with a tensorsafe footer"),  # an append cut short
        (good[:-40] + b"X" + good[-39:], "checksum does not match"),
        (good[:-24] + struct.pack("<Q", 60) + good[-16:], "(byte 60) does not point at a footer"),
        (good[:-24] + struct.pack("<Q", 10 ** 6) + good[-16:], "points outside the file's earlier part"),
        (good[:-32] + struct.pack("<Q", 5000) + good[-24:], "more than the file holds"),
        (good[:-32] + struct.pack("<Q", 2 ** 40) + good[-24:], "over the 100000000-byte limit"),
        (b"XNSRSAFE" + good[8:], "does not start with its magic"),
        (F.ts_file(ts, version=2)[0], "version 2 is not supported"),
        (F.ts_file(ts, flags=1)[0], "flags 0x1 are not supported"),
    ]
    for blob, msg in cases:
        refused(tmp, blob, msg, "bad.tensorsafe")

    def with_meta(h):
        body = good[:len(good) - 32 - meta_len]
        m = json.dumps(h).encode()
        return body + m + F.footer(m)
    over = dict(hdr, b=dict(hdr["b"], data_offsets=[hdr["a"]["data_offsets"][0] + 4,
                                                    hdr["a"]["data_offsets"][0] + 7]))
    refused(tmp, with_meta(over), "tensors 'a' and 'b' overlap")
    out = dict(hdr, b=dict(hdr["b"], data_offsets=[10 ** 6, 10 ** 6 + 3]))
    refused(tmp, with_meta(out), "tensor 'b': data_offsets [1000000, 1000003] are not within the data")
    size = dict(hdr, b=dict(hdr["b"], shape=[4]))
    refused(tmp, with_meta(size), "tensor 'b': 3 bytes between its offsets")
    dt = dict(hdr, b=dict(hdr["b"], dtype="F7"))
    refused(tmp, with_meta(dt), "tensor 'b': unknown dtype 'F7'")
    refused(tmp, with_meta([1]), "not a JSON object")
