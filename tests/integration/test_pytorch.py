"""PyTorch checkpoints and .npz files mounted without running a pickle.

Real files written by torch.save (tests/data/pytorch, from gen_torch.py
with Debian's python3-torch; regenerated and compared with what torch holds
when torch is installed), stdlib-built pickles for what torch does not
write (protocol 4, _rebuild_tensor_v3, hostile globals), damaged archives,
and .npz files written by numpy."""

import collections
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

import gen_pickle as G
from tfsutil import EXIT_FORMAT, REPO, mounted, run

DATA = os.path.join(REPO, "tests", "data", "pytorch")
EXPECTED = json.load(open(os.path.join(DATA, "expected.json")))


def refused(path, msg, tmp):
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt, exist_ok=True)
    r = run([path, mnt])
    assert r.returncode == EXIT_FORMAT, (msg, r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"tensorfs: {path}: "), r.stderr
    assert msg in r.stderr, (msg, r.stderr)
    assert not os.path.ismount(mnt)
    return r.stderr


def check_described(src, exp, *opts):
    """The mount shows exactly the tensors torch holds (bytes, dtype, shape),
    none of the hidden ones, and the plain values as metadata."""
    with mounted(src, *opts) as mnt:
        names = sorted(n for n in os.listdir(mnt) if not n.startswith("__"))
        assert names == sorted(exp["tensors"])
        for name, t in exp["tensors"].items():
            p = os.path.join(mnt, name)
            assert hashlib.sha256(open(p, "rb").read()).hexdigest() == t["sha256"], name
            assert os.getxattr(p, "user.dtype").decode() == t["dtype"], name
            assert json.loads(os.getxattr(p, "user.shape")) == t["shape"], name
        meta = json.load(open(os.path.join(mnt, "__metadata__.json")))
        if "sharded" not in src:
            assert meta == exp["metadata"]


@pytest.mark.parametrize("name", sorted(EXPECTED["files"]))
def test_torch_saved_files(name, tmp):
    """Every checkpoint torch.save wrote mounts with torch's own bytes."""
    src = os.path.join(DATA, name)
    exp = EXPECTED["files"][name]
    check_described(src, exp)
    r = run(["--inspect", "--json", src])
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["format"] == "pytorch"
    for h in exp["hidden"]:
        assert f"tensor '{h}' is not contiguous" in r.stderr
    assert r.stderr.count("\n") == len(exp["hidden"]), r.stderr


def test_torch_sharded_directory_and_tree():
    """The sharded set mounts from its directory (through the index) too,
    and the tree layout gives a directory per dotted component."""
    exp = EXPECTED["files"]["sharded/pytorch_model.bin.index.json"]
    check_described(os.path.join(DATA, "sharded"), exp)
    with mounted(os.path.join(DATA, "sharded"), "-o", "layout=tree") as mnt:
        for name, t in exp["tensors"].items():
            p = os.path.join(mnt, *name.split("."))
            assert hashlib.sha256(open(p, "rb").read()).hexdigest() == t["sha256"]


def test_torch_sharded_index_checked(tmp):
    """A weight_map that puts a tensor in the wrong shard is refused as for
    safetensors indexes."""
    d = os.path.join(tmp, "sh")
    shutil.copytree(os.path.join(DATA, "sharded"), d)
    ip = os.path.join(d, "pytorch_model.bin.index.json")
    idx = json.load(open(ip))
    name = sorted(idx["weight_map"])[0]
    other = sorted(set(idx["weight_map"].values()) - {idx["weight_map"][name]})[0]
    idx["weight_map"][name] = other
    json.dump(idx, open(ip, "w"))
    err = refused(ip, name, tmp)
    assert "index" in err
    os.remove(os.path.join(d, other))
    os.remove(ip)
    # without its index, the other shard alone mounts (a directory of .bin)
    with mounted(d) as mnt:
        assert len([n for n in os.listdir(mnt) if not n.startswith("__")]) == 3


def test_torch_shared_storage_same_bytes():
    """Tensors over one storage are separate files over the same bytes."""
    src = os.path.join(DATA, "shared.pt")
    blob = open(src, "rb").read()
    with mounted(src) as mnt:
        offs = {n: json.loads(os.getxattr(os.path.join(mnt, n), "user.offsets"))
                for n in ("base", "tied", "grid", "row", "slice")}
        assert offs["base"] == offs["tied"] == offs["grid"]
        assert offs["row"][0] == offs["base"][0] + 12 * 4
        assert offs["slice"][0] == offs["base"][0] + 5 * 4
        base = np.frombuffer(blob[offs["base"][0]:offs["base"][1]], np.float32)
        assert (base == np.arange(24)).all()
        assert (np.fromfile(os.path.join(mnt, "row"), np.float32) == np.arange(12, 18)).all()
        m = np.memmap(os.path.join(mnt, "grid"), np.float32, mode="r", shape=(4, 6))
        assert (m == np.arange(24).reshape(4, 6)).all()
        del m


def test_torch_regenerated_with_real_torch(tmp):
    """Optional (python3-torch is about 180 Debian packages): torch.save
    writes the set again, and every tensor tensorfs serves equals the bytes
    torch.load gives back."""
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip("optional: python3-torch is not installed (heavy; see tests/data/pytorch/README.md)")
    import gen_torch
    out = os.path.join(tmp, "pt")
    gen_torch.main(out)
    for name in sorted(EXPECTED["files"]):
        src = os.path.join(out, name)
        exp = json.load(open(os.path.join(out, "expected.json")))["files"][name]
        assert sorted(exp["tensors"]) == sorted(EXPECTED["files"][name]["tensors"])
        if name.endswith(".json"):
            continue
        obj = torch.load(src)
        held = gen_torch.describe(obj)
        with mounted(src) as mnt:
            for tname in held["tensors"]:
                t = obj
                if tname != "tensor":
                    t = dig(obj, tname)
                assert open(os.path.join(mnt, tname), "rb").read() == gen_torch.raw(t), (name, tname)


def dig(obj, dotted):
    """obj[a][b]... for a dotted name whose keys may themselves hold dots."""
    if dotted in obj if isinstance(obj, dict) else False:
        return obj[dotted]
    for k, v in (obj.items() if isinstance(obj, dict) else enumerate(obj)):
        k = str(k)
        if dotted == k:
            return v
        if dotted.startswith(k + "."):
            try:
                return dig(v, dotted[len(k) + 1:])
            except KeyError:
                pass
    raise KeyError(dotted)


# ---- stdlib-built checkpoints: what torch 1.13 does not write ----

def test_protocol4_and_rebuild_v3(tmp):
    """Protocol 4 pickles (FRAME, SHORT_BINUNICODE, STACK_GLOBAL, MEMOIZE)
    and _rebuild_tensor_v3 over an UntypedStorage (float8, uint16), and a
    byteorder record saying little."""
    sd = G.StateDict()
    raw = np.arange(64, dtype=np.uint8)
    st = sd.storage(raw, "UntypedStorage")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    obj = collections.OrderedDict([
        ("f8", G.Tensor(st, 0, (4, 4), (4, 1), dtype="float8_e4m3fn", func="_rebuild_tensor_v3")),
        ("e5m2", G.Tensor(st, 16, (2, 8), (8, 1), dtype="float8_e5m2", func="_rebuild_tensor_v3")),
        ("u16", G.Tensor(st, 16, (4,), (1,), dtype="uint16", func="_rebuild_tensor_v3")),
        ("bf16", G.Tensor(st, 8, (2, 2), (2, 1), dtype="bfloat16", func="_rebuild_tensor_v3")),
        ("plain", sd.tensor(a)),
        ("nested", {"deeper": [sd.tensor(a[0]), sd.tensor(a[1])]}),
    ])
    p = os.path.join(tmp, "p4.bin")
    G.write(p, obj, sd, protocol=4, byteorder=b"little")
    with mounted(p) as mnt:
        got = lambda n: open(os.path.join(mnt, n), "rb").read()  # noqa: E731
        assert got("f8") == raw[:16].tobytes()
        assert got("e5m2") == raw[16:32].tobytes()
        assert got("u16") == raw[32:40].tobytes()
        assert got("bf16") == raw[16:24].tobytes()
        assert got("plain") == a.tobytes()
        assert got("nested.deeper.0") == a[0].tobytes() and got("nested.deeper.1") == a[1].tobytes()
        dt = lambda n: os.getxattr(os.path.join(mnt, n), "user.dtype").decode()  # noqa: E731
        assert [dt(n) for n in ("f8", "e5m2", "u16", "bf16")] == ["F8_E4M3", "F8_E5M2", "U16", "BF16"]
        assert json.loads(os.getxattr(os.path.join(mnt, "e5m2"), "user.shape")) == [2, 8]


def small(tmp, name="x.bin", protocol=2, **kw):
    sd = G.StateDict()
    obj = collections.OrderedDict(w=sd.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)))
    p = os.path.join(tmp, name)
    G.write(p, obj, sd, protocol=protocol, **kw)
    return p, sd


# Globals a pickle may name to run code: each is refused by name. The
# ones with a command are also loaded by Python's own pickle in a child
# process, to show that the same bytes do run a command there.
LIVE = [("os", "system"), ("posix", "system"), ("subprocess", "getoutput"),
        ("builtins", "eval"), ("builtins", "exec")]
DEAD = [("builtins", "getattr"), ("builtins", "open"), ("builtins", "__import__"),
        ("__builtin__", "eval"), ("runpy", "_run_code"), ("torch", "load"),
        ("numpy.core.multiarray", "_reconstruct"), ("__torch__", "MyModule"),
        ("collections", "namedtuple"), ("torch._utils", "_rebuild_sparse_tensor")]


def command_for(mod, name, marker):
    if (mod, name) in (("builtins", "eval"), ("builtins", "exec")):
        return f"__import__('os').system('touch {marker}')"
    return f"touch {marker}"


@pytest.mark.parametrize("protocol", [2, 4])
@pytest.mark.parametrize("glob", LIVE + DEAD, ids=lambda g: ".".join(g))
def test_hostile_global_refused_and_nothing_runs(glob, protocol, tmp):
    mod, name = glob
    marker = os.path.join(tmp, "ran")
    pkl = G.hostile(mod, name, command_for(mod, name, marker), protocol)
    p = os.path.join(tmp, "evil.bin")
    G.archive(p, pkl, [])
    err = refused(p, f"refused the global '{mod}.{name}'", tmp)
    assert "nothing was imported or run" in err
    assert not os.path.exists(marker)
    r = run(["--inspect", p])
    assert r.returncode == EXIT_FORMAT and not os.path.exists(marker)
    if glob in LIVE:
        # the payload is live: Python's pickle runs it
        subprocess.run([sys.executable, "-c", "import pickle,sys; pickle.loads(sys.stdin.buffer.read())"],
                       input=pkl, capture_output=True, timeout=30)
        assert os.path.exists(marker), "the test's payload does not run under pickle.loads"


def test_hostile_global_inside_a_real_state_dict(tmp):
    """A real checkpoint whose pickle also calls os.system (the way a
    poisoned pytorch_model.bin does): refused, nothing runs."""
    marker = os.path.join(tmp, "ran")
    sd = G.StateDict()

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    obj = collections.OrderedDict([("w", sd.tensor(np.ones(4, np.float32))), ("x", Evil())])
    p = os.path.join(tmp, "poisoned.bin")
    G.archive(p, G.dumps(obj), sd.storages)
    refused(p, "refused the global 'posix.system'", tmp)
    assert not os.path.exists(marker)


@pytest.mark.parametrize("body,msg", [
    (b"\x80\x02(X\x01\x00\x00\x00xios\nsystem\n.", "imports or calls a class by itself"),
    (b"\x80\x02(X\x01\x00\x00\x00xcos\nsystem\no.", "refused the global 'os.system'"),
    (b"\x80\x02X\x01\x00\x00\x00x\x82\x01.", "imports or calls"),
    (b"\x80\x02S'x'\n.", "does not read"),
    (b"\x80\x02}q\x00", "truncated"),
    (b"\x80\x02}r\xff\xff\xff\x7f.", "memo index larger than the pickle"),
    (b"\x80\x02h\x05.", "memo entry that was never stored"),
    (b"\x80\x02}}.", "2 objects on the stack"),
    (b"\x80\x02s.", "stack is empty"),
    (b"\x80\x02X\x05\x00\x00\x00\xff\xfe\xfd\xfc\xfb.", "not UTF-8"),
    (b"\x80\x02\x8a\x09" + b"\x01" * 9 + b".", "wider than 64 bits"),
    (b"\x80\x02K\x05.", "not a state dict"),
    (b"\x80\x06}.", "newer than 5"),
    (b"\x80\x02" + b"]q\x00" + b"h\x00a" * 1 + b".", "deep"),
    (b"\x80\x02" + b"]" * 100 + b"a" * 99 + b".", "deep"),
])
def test_damaged_and_hostile_pickles(body, msg, tmp):
    p = os.path.join(tmp, "bad.bin")
    G.archive(p, body, [])
    refused(p, msg, tmp)


def test_pickle_memory_is_bounded(tmp):
    """Each one-byte EMPTY_DICT makes an object: two million of them need
    more than the machine's bound (16 bytes per pickle byte, plus 16 MiB),
    so the pickle is refused rather than allowed to grow."""
    body = b"\x80\x02" + b"}" * 2_000_000 + b"."
    p = os.path.join(tmp, "big.bin")
    G.archive(p, body, [])
    refused(p, "memory bound", tmp)
    # a million references to one object are within it; the plain values
    # shown as metadata stop at 10,000, and --inspect says so
    ok = b"\x80\x02K\x07q\x000]q\x01(" + b"h\x00" * 1_000_000 + b"e."
    G.archive(p, ok, [])
    r = run(["--inspect", p])
    assert r.returncode == 0, r.stderr
    assert "metadata: 990000 plain values beyond the first 10000 not shown" in r.stdout


@pytest.mark.parametrize("case,msg", [
    ("big_endian", "big-endian"),
    ("byteorder_junk", "neither \"little\" nor \"big\""),
    ("deflated_pickle", "record data.pkl is compressed"),
    ("deflated_record", "is compressed (zip method 8)"),
    ("no_pickle", "no data.pkl"),
    ("outside_top", "outside the archive's top directory"),
    ("missing_record", "has no record data/"),
    ("short_record", "holds 20 bytes, but the storage is 6 elements of F32 (24 bytes)"),
    ("past_storage", "run past its storage"),
    ("quantized", "quantized"),
    ("legacy", "legacy format"),
    ("bare_pickle", "a bare pickle"),
])
def test_refused_checkpoints(case, msg, tmp):
    p = os.path.join(tmp, "bad.bin")
    sd = G.StateDict()
    w = sd.tensor(np.arange(6, dtype=np.float32))
    obj = {"w": w}
    kw = {}
    if case == "big_endian":
        kw["byteorder"] = b"big"
    elif case == "byteorder_junk":
        kw["byteorder"] = b"middle"
    elif case == "deflated_pickle":
        kw["compress"] = ("data.pkl",)
    elif case == "deflated_record":
        kw["compress"] = ("data/0",)
    elif case == "outside_top":
        kw["extra_entries"] = [("other/file", b"x")]
    elif case == "missing_record":
        sd.storages[0].key = "7"
        G.archive(p, G.dumps(obj), [])
    elif case == "short_record":
        sd.storages[0].data = sd.storages[0].data[:20]
    elif case == "past_storage":
        obj = {"w": G.Tensor(sd.storages[0], 2, (6,), (1,))}
    elif case == "quantized":
        sd.storages[0].cls = "QInt8Storage"
    if case == "no_pickle":
        with zipfile.ZipFile(p, "w") as z:
            z.writestr("archive/version", b"3\n")
    elif case == "legacy":
        # what torch.save(..., _use_new_zipfile_serialization=False) starts with
        open(p, "wb").write(b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03.")
    elif case == "bare_pickle":
        open(p, "wb").write(pickle_of_dict())
    elif case != "missing_record":
        G.write(p, obj, sd, **kw)
    refused(p, msg, tmp)


def pickle_of_dict():
    import pickle
    return pickle.dumps({"a": 1}, protocol=2)


def zip_bytes(tmp):
    p, _ = small(tmp, "ok.bin")
    return p, bytearray(open(p, "rb").read())


def test_truncated_archives(tmp):
    """Every cut of a valid checkpoint is refused with one line (or, for a
    cut inside nothing that matters, cannot exist: the end record is last)."""
    p, blob = zip_bytes(tmp)
    q = os.path.join(tmp, "cut.bin")
    for n in sorted({0, 1, 4, 21, 22, 30, 64, len(blob) // 2, len(blob) - 23, len(blob) - 22,
                     len(blob) - 1}):
        open(q, "wb").write(blob[:n])
        mnt = os.path.join(tmp, "mnt")
        os.makedirs(mnt, exist_ok=True)
        r = run([q, mnt])
        assert r.returncode == EXIT_FORMAT, (n, r.returncode, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"tensorfs: {q}: "), (n, r.stderr)


def central(blob):
    """Offsets of the central directory entries and the end record."""
    eocd = blob.rindex(b"PK\x05\x06")
    cd_off = struct.unpack_from("<I", blob, eocd + 16)[0]
    n = struct.unpack_from("<H", blob, eocd + 10)[0]
    out, pos = [], cd_off
    for _ in range(n):
        out.append(pos)
        nl, xl, cl = struct.unpack_from("<HHH", blob, pos + 28)
        pos += 46 + nl + xl + cl
    return out, eocd


@pytest.mark.parametrize("case,msg", [
    ("overlap", "overlap"),
    ("past_end", "run past the data area"),
    ("lho_past", "past the data area"),
    ("encrypted", "encrypted"),
    ("name_mismatch", "names another entry"),
    ("count", "more than its"),
    ("cd_outside", "not inside the file"),
])
def test_damaged_archives(case, msg, tmp):
    p, blob = zip_bytes(tmp)
    ents, eocd = central(blob)
    last = ents[-1]
    if case == "overlap":
        lho0 = struct.unpack_from("<I", blob, ents[0] + 42)[0]
        struct.pack_into("<I", blob, ents[1] + 42, lho0 + 8)
    elif case == "past_end":
        struct.pack_into("<II", blob, last + 20, 1 << 30, 1 << 30)
    elif case == "lho_past":
        struct.pack_into("<I", blob, last + 42, len(blob))
    elif case == "encrypted":
        struct.pack_into("<H", blob, last + 8, 1)
    elif case == "name_mismatch":
        lho = struct.unpack_from("<I", blob, last + 42)[0]
        blob[lho + 30] ^= 0x20
    elif case == "count":
        struct.pack_into("<HH", blob, eocd + 8, 60000, 60000)
    elif case == "cd_outside":
        struct.pack_into("<I", blob, eocd + 16, len(blob))
    q = os.path.join(tmp, "bad.bin")
    open(q, "wb").write(bytes(blob))
    refused(q, msg, tmp)


def test_zip64_archive(tmp):
    """A ZIP64 archive (Python writes the ZIP64 records when told to)."""
    sd = G.StateDict()
    a = np.arange(10, dtype=np.int16)
    obj = {"a": sd.tensor(a)}
    p = os.path.join(tmp, "z64.bin")
    pkl = G.dumps(obj)
    with zipfile.ZipFile(p, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for name, data in (("archive/data.pkl", pkl), ("archive/data/0", sd.storages[0].data)):
            with z.open(name, "w", force_zip64=True) as f:
                f.write(data)
    blob = open(p, "rb").read()
    assert b"PK\x06\x06" in blob or b"\x01\x00\x10\x00" in blob
    with mounted(p) as mnt:
        assert open(os.path.join(mnt, "a"), "rb").read() == a.tobytes()


def test_bin_over_http(tmp):
    """The format is independent of the source: a .bin over HTTP."""
    from servers import Nginx
    with Nginx(DATA) as ng:
        check_described(ng.url(path="pytorch_model.bin"), EXPECTED["files"]["pytorch_model.bin"])
        check_described(ng.url(path="sharded/pytorch_model.bin.index.json"),
                        EXPECTED["files"]["sharded/pytorch_model.bin.index.json"])


def test_many_tensors(tmp):
    p = os.path.join(tmp, "many.bin")
    arrays = G.many(p, 2000)
    with mounted(p, "-o", "layout=tree") as mnt:
        for name in list(arrays)[::97]:
            got = np.fromfile(os.path.join(mnt, *name.split(".")), np.float32).reshape(4, 8)
            assert (got == arrays[name]).all()


# ---- .npz ----

NPZ_DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
              np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128]
ST_NAME = {np.bool_: "BOOL", np.int8: "I8", np.uint8: "U8", np.int16: "I16", np.uint16: "U16",
           np.int32: "I32", np.uint32: "U32", np.int64: "I64", np.uint64: "U64", np.float16: "F16",
           np.float32: "F32", np.float64: "F64", np.complex64: "C64", np.complex128: "C128"}


def test_npz_every_dtype(tmp):
    rng = np.random.default_rng(3)
    arrays = {}
    for i, dt in enumerate(NPZ_DTYPES):
        shape = [(3, 4), (5,), (), (2, 0, 3), (2, 3, 4)][i % 5]
        arrays[f"a.{np.dtype(dt).name}"] = (rng.standard_normal(shape) * 50).astype(dt)
    arrays["dir/slash"] = np.arange(3, dtype=np.int32)
    p = os.path.join(tmp, "arrays.npz")
    np.savez(p, **arrays)
    loaded = np.load(p)
    with mounted(p) as mnt:
        names = sorted(n for n in os.listdir(mnt) if not n.startswith("__"))
        assert names == sorted(k.replace("/", "%2F") for k in arrays)
        for k, a in arrays.items():
            f = os.path.join(mnt, k.replace("/", "%2F"))
            assert open(f, "rb").read() == loaded[k].tobytes() == a.tobytes(), k
            assert os.getxattr(f, "user.dtype").decode() == ST_NAME[a.dtype.type]
            assert json.loads(os.getxattr(f, "user.shape")) == list(a.shape)
    r = run(["--inspect", "--json", p])
    assert r.returncode == 0 and json.loads(r.stdout)["format"] == "npz"


def test_npz_fortran_order_shown_transposed(tmp):
    a = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    v = np.asfortranarray(np.arange(5, dtype=np.float32))
    p = os.path.join(tmp, "f.npz")
    np.savez(p, a=a, v=v)
    with mounted(p) as mnt:
        f = os.path.join(mnt, "a")
        assert json.loads(os.getxattr(f, "user.shape")) == [4, 3]
        assert (np.fromfile(f, np.float32).reshape(4, 3) == a.T).all()
        assert json.loads(os.getxattr(os.path.join(mnt, "v"), "user.shape")) == [5]
    r = run(["--inspect", p])
    assert "Fortran order" in r.stderr and "fortran_order" in r.stdout
    # format=npy: the NPY header says fortran_order True with the stored
    # shape, so np.load gives the original array back; the raw file and
    # user.shape stay the transpose
    b = np.asfortranarray(np.arange(24, dtype=np.int16).reshape(2, 3, 4))
    p2 = os.path.join(tmp, "f3.npz")
    np.savez(p2, a=a, v=v, b=b)
    with mounted(p2, "-o", "format=npy") as mnt:
        for name, want in (("a", a), ("v", v), ("b", b)):
            got = np.load(os.path.join(mnt, name + ".npy"))
            assert got.shape == want.shape and (got == want).all(), name
            assert got.flags.f_contiguous
        assert json.loads(os.getxattr(os.path.join(mnt, "a.npy"), "user.shape")) == [4, 3]


def npz_with_members(path, members, method=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", method) as z:
        for name, data in members:
            z.writestr(name, data)


def npy_bytes(a, version):
    import io
    b = io.BytesIO()
    np.lib.format.write_array(b, a, version=version)
    return b.getvalue()


def test_npz_header_versions_and_python2_longs(tmp):
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    win = "/usr/lib/python3/dist-packages/numpy/lib/tests/data/win64python2.npy"
    members = [("v1.npy", npy_bytes(a, (1, 0))), ("v2.npy", npy_bytes(a, (2, 0))),
               ("v3.npy", npy_bytes(a, (3, 0))), ("README.txt", b"not an array")]
    if os.path.exists(win):
        members.append(("win64python2.npy", open(win, "rb").read()))
    p = os.path.join(tmp, "v.npz")
    npz_with_members(p, members)
    with mounted(p) as mnt:
        for v in ("v1", "v2", "v3"):
            assert open(os.path.join(mnt, v), "rb").read() == a.tobytes()
        assert "README.txt" not in os.listdir(mnt)
        if os.path.exists(win):
            w = np.load(win)
            assert open(os.path.join(mnt, "win64python2"), "rb").read() == w.tobytes()
            assert json.loads(os.getxattr(os.path.join(mnt, "win64python2"), "user.shape")) == [2]


@pytest.mark.parametrize("case,msg", [
    ("compressed", "np.savez_compressed"),
    ("object", "object array"),
    ("object_sample", "object array"),
    ("big_endian", "big-endian"),
    ("strings", "has no tensor equivalent"),
    ("structured", "structured array"),
    ("short", "truncated"),
    ("extra_key", "is not one of descr"),
    ("header_too_big", "over numpy's 10000-byte limit"),
    ("bad_magic", "no \\x93NUMPY magic"),
    ("negative", "non-negative"),
])
def test_npz_refused(case, msg, tmp):
    p = os.path.join(tmp, "bad.npz")
    a = np.arange(6, dtype=np.float32)
    if case == "compressed":
        np.savez_compressed(p, a=a)
    elif case == "object":
        np.savez(p, a=np.array([{"x": 1}, None], dtype=object))
    elif case == "object_sample":
        s = "/usr/lib/python3/dist-packages/numpy/lib/tests/data/py3-objarr.npz"
        assert os.path.exists(s), "numpy's sample file"
        shutil.copy(s, p)
    elif case == "big_endian":
        np.savez(p, a=a.astype(">f4"))
    elif case == "strings":
        np.savez(p, a=np.array(["x", "yz"]))
    elif case == "structured":
        np.savez(p, a=np.zeros(3, dtype=[("x", "<f4"), ("y", "<i4")]))
    elif case == "short":
        npz_with_members(p, [("a.npy", npy_bytes(a, (1, 0))[:-4])])
    elif case == "extra_key":
        h = b"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}"
        h += b" " * (-(len(h) + 11) % 64) + b"\n"
        npz_with_members(p, [("a.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + a.tobytes())])
    elif case == "header_too_big":
        h = b"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}" + b" " * 20000 + b"\n"
        npz_with_members(p, [("a.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", len(h)) + h + a.tobytes())])
    elif case == "bad_magic":
        npz_with_members(p, [("a.npy", b"\x93NUMPX" + npy_bytes(a, (1, 0))[6:])])
    elif case == "negative":
        h = b"{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}"
        h += b" " * (-(len(h) + 11) % 64) + b"\n"
        npz_with_members(p, [("a.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + a.tobytes())])
    refused(p, msg, tmp)


# ---- views that are not one byte range, shared objects, plain values ----

def test_expanded_and_strided_views(tmp):
    """Every stride pattern: what the strides reach inside the storage is
    hidden with a warning (stride 0 as expand() writes, negative,
    overlapping), the rest shown; only a reach outside the storage is
    refused."""
    sd = G.StateDict()
    st = sd.storage(np.arange(4, dtype=np.float32))
    w = np.arange(6, dtype=np.float32)
    obj = collections.OrderedDict([
        ("w", sd.tensor(w)),
        ("expanded", G.Tensor(st, 0, (3, 4), (0, 1))),       # torch.arange(4.).expand(3, 4)
        ("position_ids", G.Tensor(st, 0, (1, 4), (0, 1))),   # BERT's (1, n): one range
        ("backwards", G.Tensor(st, 3, (4,), (-1,))),
        ("overlapping", G.Tensor(st, 0, (2, 3), (1, 1))),
        ("broadcast_scalar", G.Tensor(st, 2, (5, 5), (0, 0))),
    ])
    p = os.path.join(tmp, "views.pt")
    G.write(p, obj, sd)
    r = run(["--inspect", p])
    assert r.returncode == 0, r.stderr
    hidden = ("expanded", "backwards", "overlapping", "broadcast_scalar")
    for h in hidden:
        assert f"tensor '{h}' is not contiguous" in r.stderr, r.stderr
    assert r.stderr.count("\n") == len(hidden)
    with mounted(p) as mnt:
        assert sorted(n for n in os.listdir(mnt) if not n.startswith("__")) == ["position_ids", "w"]
        assert np.fromfile(os.path.join(mnt, "position_ids"), np.float32).tolist() == [0, 1, 2, 3]
        assert np.fromfile(os.path.join(mnt, "w"), np.float32).tolist() == w.tolist()
    for name, t in [("past_end", G.Tensor(st, 1, (3, 4), (0, 1))),
                    ("before_start", G.Tensor(st, 2, (4,), (-1,))),
                    ("offset_outside", G.Tensor(st, 4, (2,), (0,))),
                    ("huge_stride", G.Tensor(st, 0, (2,), (1 << 62,)))]:
        sd2 = G.StateDict()
        st2 = sd2.storage(np.arange(4, dtype=np.float32))
        t.args = (st2,) + t.args[1:]
        q = os.path.join(tmp, f"{name}.pt")
        G.write(q, {name: t}, sd2)
        refused(q, "run past its storage", tmp)


def shared_tuples(leaf, levels=60):
    x = leaf
    for _ in range(levels):
        x = (x, x)
    return x


def limit_memory():
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.parametrize("leaf", ["tensor", "int", "torch"])
def test_pickle_whose_paths_never_end(leaf, tmp):
    """x = (x, x) sixty times through the memo: under a kilobyte, 2^60
    paths. Refused in well under a second, memory bounded (it ran for ever,
    and with a tensor leaf grew until the OOM killer)."""
    from tfsutil import BIN, SANITIZED
    if leaf == "torch":
        p = os.path.join(DATA, "bomb.pt")  # written by torch.save (gen_torch.py)
    else:
        sd = G.StateDict()
        x = sd.tensor(np.ones(1, np.float32)) if leaf == "tensor" else 7
        p = os.path.join(tmp, "bomb.pt")
        G.write(p, {"x": shared_tuples(x)}, sd)
    assert os.path.getsize(p) < 2000
    for argv in (["--inspect", p], [p, os.path.join(tmp, "m")]):
        os.makedirs(os.path.join(tmp, "m"), exist_ok=True)
        t0 = time.time()
        r = subprocess.run([BIN] + argv, capture_output=True, text=True, timeout=30,
                           preexec_fn=None if SANITIZED else limit_memory)
        assert time.time() - t0 < 5
        assert r.returncode == EXIT_FORMAT, r.stderr
        assert r.stderr.count("\n") == 1 and "shared so often" in r.stderr, r.stderr
    # tied weights, and a sub-dict saved twice (a model and its EMA copy
    # being one object), still mount
    sd = G.StateDict()
    t = sd.tensor(np.arange(3, dtype=np.float32))
    inner = {"a": t, "b": sd.tensor(np.ones(2, np.float32))}
    p = os.path.join(tmp, "tied.pt")
    G.write(p, {"model": inner, "ema": inner, "tied": t}, sd)
    with mounted(p) as mnt:
        names = sorted(n for n in os.listdir(mnt) if not n.startswith("__"))
        assert names == ["ema.a", "ema.b", "model.a", "model.b", "tied"]


def test_floats_as_python_repr(tmp):
    """Every plain float of a checkpoint is written as Python's repr():
    a few thousand random doubles (random bits, powers of two, rounded
    decimals) and the edge cases, compared with what this Python prints."""
    import math
    import random
    rng = random.Random(5)
    vals = [10.0, 100.0, 1.2345e15, 1e16, 1e-5, 1e-4, -0.0, 0.0, float("nan"), -float("nan"),
            float("inf"), -float("inf"), 5e-324, 1.7976931348623157e308, 0.1, 1 / 3, 1e22, 2.0 ** 63]
    while len(vals) < 3000:
        k = rng.randrange(3)
        if k == 0:
            v = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        elif k == 1:
            v = math.ldexp(1.0, rng.randrange(-1074, 1024)) * rng.choice([1, -1])
        else:
            v = round(rng.uniform(-1e6, 1e6), rng.randrange(0, 8))
        vals.append(v)
    sd = G.StateDict()
    obj = {"w": sd.tensor(np.ones(1, np.float32)), "f": {f"v{i}": v for i, v in enumerate(vals)}}
    p = os.path.join(tmp, "floats.pt")
    G.write(p, obj, sd)
    with mounted(p) as mnt:
        meta = json.load(open(os.path.join(mnt, "__metadata__.json")))
    wrong = [(repr(v), meta[f"f.v{i}"]) for i, v in enumerate(vals) if meta[f"f.v{i}"] != repr(v)]
    assert not wrong, wrong[:10]


def test_long_text_values(tmp):
    """Text values are kept whole up to 1 MiB (configs and chat templates
    run to tens of KB); a longer one is cut at a character boundary, says
    so at its end and in one warning."""
    sd = G.StateDict()
    big = "é" * (1 << 20)  # 2 MiB of UTF-8
    mid = "{" + "x" * 70000 + "}"
    obj = {"w": sd.tensor(np.ones(1, np.float32)), "big": big, "mid": mid}
    p = os.path.join(tmp, "text.pt")
    G.write(p, obj, sd)
    mnt = os.path.join(tmp, "m")
    os.makedirs(mnt)
    r = run([p, mnt])
    try:
        assert r.returncode == 0, r.stderr
        assert r.stderr.count("\n") == 1 and "metadata value 'big' has 2097152 bytes" in r.stderr, r.stderr
        meta = json.load(open(os.path.join(mnt, "__metadata__.json")))
        assert meta["mid"] == mid
        head, mark = meta["big"][:-len(" [... cut by tensorfs: 2097152 bytes in all]")], meta["big"][-45:]
        assert mark.endswith(" [... cut by tensorfs: 2097152 bytes in all]"), mark
        assert head == big[:len(head)] and len(head.encode()) == 1 << 20
    finally:
        subprocess.run(["fusermount3", "-u", mnt])
