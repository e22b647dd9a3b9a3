"""-o zarr: __zarr__/ at the mount root, a Zarr store of every tensor.

Read back by Debian's zarr-python 2 (python3-zarr), by dask.array.from_zarr
and xarray, and through the format 3 metadata alone by a decoder written
here (chunk key -> file -> bytes). What each array must hold comes from
outside the store: the tensor's stored bytes from the source file itself
(user.source, user.offsets), or for the dtypes NumPy lacks the tensor's
file under -o convert=f32 (the exact float32 conversion the store uses)."""

import json
import math
import os
import shutil
import struct

import numpy as np
import pytest

import gen_gguf as gg
from servers import Nginx
from checkpoints import write_sized
from tfsutil import EXIT_USAGE, REAL, SANITIZED, fname, mounted, need_real, real_files, run, unmount, write_st

try:
    import zarr
except ImportError:  # pragma: no cover - reported by each test
    zarr = None

NATIVE = {"BOOL": "|b1", "U8": "|u1", "I8": "|i1", "I16": "<i2", "U16": "<u2", "F16": "<f2",
          "I32": "<i4", "U32": "<u4", "F32": "<f4", "C64": "<c8", "F64": "<f8", "I64": "<i8",
          "U64": "<u8", "C128": "<c16"}
V3_TYPES = {"bool": "|b1", "uint8": "|u1", "int8": "|i1", "int16": "<i2", "uint16": "<u2",
            "float16": "<f2", "int32": "<i4", "uint32": "<u4", "float32": "<f4",
            "complex64": "<c8", "float64": "<f8", "int64": "<i8", "uint64": "<u8",
            "complex128": "<c16"}
# ggml block types convert=f32 leaves as they are: shown as their bytes.
RAW = {"IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "IQ1_M",
       "TQ1_0", "TQ2_0", "NVFP4", "Q8_K"}
META_FILES = {".zarray", ".zattrs", "zarr.json"}


def need_zarr():
    if zarr is None:
        from tfsutil import missing
        missing("zarr-python 2 (Debian's python3-zarr)")


# ---- what the store must hold, from outside it ----

def tensor_files(mnt):
    """Tensor name -> its file at the mount root (flat layout), by user.name."""
    out = {}
    for f in os.listdir(mnt):
        p = os.path.join(mnt, f)
        if os.path.isfile(p):
            try:
                out[os.getxattr(p, "user.name").decode("utf-8", "surrogateescape")] = p
            except OSError:
                pass  # __metadata__.json, __tensors__.tsv
    return out


def expected_bytes(path):
    """What the array of the tensor file at `path` (mounted with
    convert=f32) must hold: the stored bytes, read from the source file,
    for the NumPy dtypes; the float32 file for the converted ones; the
    stored bytes for the rest."""
    dtype = (os.getxattr(path, "user.source_dtype") if "user.source_dtype" in os.listxattr(path)
             else os.getxattr(path, "user.dtype")).decode()
    if dtype in NATIVE or dtype in RAW:
        src = os.getxattr(path, "user.source").decode()
        begin, end = json.loads(os.getxattr(path, "user.offsets"))
        with open(src, "rb") as f:
            f.seek(begin)
            return dtype, f.read(end - begin)
    with open(path, "rb") as f:
        return dtype, f.read()


def zpath(name, names):
    """The array's path in the store as the issue fixes it: the dotted
    components as the tree layout maps them, ".tensor" after a leaf that
    a group also has; None where a component is hashed (long names)."""
    comps = name.split(".")
    parts = [fname(c) for c in comps]
    if any(p is None or len(p) > 255 - 16 for p in parts):
        return None
    if any(n.startswith(name + ".") for n in names):
        parts[-1] += ".tensor"
    return "/".join(parts)


def arrays_in(store):
    """Every array directory of the store: tensor name -> relative path,
    from each array's own .zattrs (tensor_name)."""
    out = {}
    for root, dirs, files in os.walk(store):
        if ".zarray" in files:
            with open(os.path.join(root, ".zattrs"), "rb") as f:
                name = json.loads(f.read())["tensor_name"]
            assert name not in out, name
            out[name] = os.path.relpath(root, store)
            assert not dirs, f"an array holds directories: {root}"
        else:
            assert {".zgroup", ".zattrs", "zarr.json"} <= set(files), root
            with open(os.path.join(root, "zarr.json")) as f:
                assert json.load(f)["node_type"] == "group"
    return out


# ---- the format 3 reader of this test ----

def read_v3(adir):
    """The array's bytes from its zarr.json alone: the chunk grid and key
    encoding name every chunk's file, the codecs say how to decode it."""
    with open(os.path.join(adir, "zarr.json")) as f:
        meta = json.load(f)
    assert meta["zarr_format"] == 3 and meta["node_type"] == "array"
    shape = meta["shape"]
    grid = meta["chunk_grid"]
    assert grid["name"] == "regular"
    cs = grid["configuration"]["chunk_shape"]
    assert len(cs) == len(shape) and all(c >= 1 for c in cs)
    assert cs[1:] == [max(1, d) for d in shape[1:]], "every axis but the first whole"
    enc = meta["chunk_key_encoding"]
    assert enc["name"] == "v2"
    sep = enc["configuration"]["separator"]
    codecs = meta["codecs"]
    assert len(codecs) == 1 and codecs[0]["name"] == "bytes"
    dt = np.dtype(V3_TYPES[meta["data_type"]])
    if dt.itemsize > 1:
        assert codecs[0]["configuration"]["endian"] == "little"
    fill = meta["fill_value"]
    assert fill in (0, False) or fill == [0.0, 0.0]
    if math.prod(shape) == 0:
        assert sorted(os.listdir(adir)) == sorted(META_FILES | {".zattrs"}), "an empty array has no chunk"
        return dt, shape, b""
    if not shape:
        with open(os.path.join(adir, "0"), "rb") as f:
            return dt, shape, f.read()
    rows = shape[0]
    n = -(-rows // cs[0])
    parts = []
    chunk_bytes = math.prod(cs) * dt.itemsize
    for c in range(n):
        key = sep.join([str(c)] + ["0"] * (len(shape) - 1))
        with open(os.path.join(adir, key), "rb") as f:
            data = f.read()
        assert len(data) == chunk_bytes, key
        parts.append(data)
    assert not os.path.exists(os.path.join(adir, sep.join([str(n)] + ["0"] * (len(shape) - 1))))
    whole = b"".join(parts)
    used = rows * math.prod(shape[1:]) * dt.itemsize
    assert whole[used:] == bytes(len(whole) - used), "the last slab's rows past the tensor are zeros"
    return dt, shape, whole[:used]


# ---- the check of one mount ----

def check_store(mnt, names=None, chunk=64 << 20, zarr_ok=lambda rel: True):
    """Every tensor of the mount (flat layout, -o zarr,convert=f32) is an
    array of __zarr__ equal to it, read by zarr-python 2, by the v3
    reader above, by dask, and chunk file by chunk file."""
    import dask.array as da
    store = os.path.join(mnt, "__zarr__")
    files = tensor_files(mnt)
    if names is not None:
        assert sorted(files) == sorted(names)
    arrays = arrays_in(store)
    assert sorted(arrays) == sorted(files), "one array per tensor"
    group = zarr.open_group(store, mode="r")
    checked = 0
    for name, rel in arrays.items():
        want_path = zpath(name, files)
        if want_path is not None:
            assert rel == want_path, (name, rel)
        adir = os.path.join(store, rel)
        tpath = files[name]
        dtype, want = expected_bytes(tpath)
        shape = json.loads(os.getxattr(tpath, "user.shape"))
        with open(os.path.join(adir, ".zarray")) as f:
            z2 = json.load(f)
        with open(os.path.join(adir, ".zattrs")) as f:
            attrs = json.load(f)
        assert attrs["tensor_dtype"] == dtype and attrs["tensor_shape"] == shape
        typestr = NATIVE.get(dtype, "|u1" if dtype in RAW else "<f4")
        zshape = [len(want)] if dtype in RAW else shape
        assert z2["zarr_format"] == 2 and z2["dtype"] == typestr and z2["shape"] == zshape
        assert z2["compressor"] is None and z2["filters"] is None and z2["order"] == "C"
        assert z2["dimension_separator"] == "."
        # slabs: the row count nearest the target, at least one
        if zshape and math.prod(zshape) > 0:
            row = math.prod(zshape[1:]) * np.dtype(typestr).itemsize
            k = min(zshape[0], max(1, (chunk + row // 2) // row))
            assert z2["chunks"] == [k] + zshape[1:], (name, z2["chunks"])
            assert abs(k * row - chunk) <= row or k == zshape[0] or k == 1
        # zarr-python 2, through the group
        if zarr_ok(rel):
            a = group[rel]
        else:
            a = zarr.open_array(zarr.DirectoryStore(adir), mode="r")
        got = a[...]
        assert got.dtype == np.dtype(typestr) and list(got.shape) == zshape
        assert got.tobytes() == want, name
        # the v3 metadata alone
        with open(os.path.join(adir, "zarr.json")) as f:
            z3 = json.load(f)
        assert z3["shape"] == zshape and z3["data_type"] in V3_TYPES
        assert z3["attributes"] == {k: v for k, v in attrs.items() if k != "_ARRAY_DIMENSIONS"}
        assert z3["attributes"]["tensor_name"] == name and z3["attributes"]["tensor_dtype"] == dtype
        assert z3["dimension_names"] == attrs["_ARRAY_DIMENSIONS"]
        assert z3["chunk_grid"]["configuration"]["chunk_shape"] == z2["chunks"]
        dt, v3shape, v3bytes = read_v3(adir)
        assert dt == np.dtype(typestr) and v3shape == zshape and v3bytes == want, name
        # every chunk file: the same bytes as the tensor's range, then zeros
        if zshape and math.prod(zshape) > 0:
            cb = math.prod(z2["chunks"]) * np.dtype(typestr).itemsize
            n = -(-zshape[0] // z2["chunks"][0])
            for c in range(n):
                key = ".".join([str(c)] + ["0"] * (len(zshape) - 1))
                part = want[c * cb:(c + 1) * cb]
                with open(os.path.join(adir, key), "rb") as f:
                    assert f.read() == part + bytes(cb - len(part)), (name, key)
        # dask
        if got.size:
            d = da.from_zarr(zarr.open_array(zarr.DirectoryStore(adir), mode="r"))
            assert d.compute().tobytes() == want
        checked += 1
    return arrays, checked


# ---- generated checkpoints ----

DTYPES = {  # dtype: (shape, bytes per element or None for packed)
    "BOOL": (7, 3), "U8": (7, 3), "I8": (7, 3), "I16": (7, 3), "U16": (7, 3), "F16": (7, 3),
    "BF16": (7, 3), "I32": (7, 3), "U32": (7, 3), "F32": (7, 3), "C64": (7, 3), "F64": (7, 3),
    "I64": (7, 3), "U64": (7, 3), "F8_E5M2": (7, 3), "F8_E4M3": (7, 3), "F8_E8M0": (7, 3),
    "F8_E4M3FNUZ": (7, 3), "F8_E5M2FNUZ": (7, 3), "F4": (8, 6), "F6_E2M3": (4, 6), "F6_E3M2": (4, 6),
}
BITS = {"BOOL": 8, "U8": 8, "I8": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32,
        "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64, "F4": 4, "F6_E2M3": 6,
        "F6_E3M2": 6}

HOSTILE = ["sp ace.ü.x%y", "line\nbreak.w", "", "a..b", "slash/name", "__files__.x", "ctl\x01.\x7f",
           "q\"uote'.t", "back\\slash.w", "é" * 130 + ".long", "x." + "y" * 300, "__metadata__.json",
           "__tensors__.tsv"]


def element_bytes(dtype, n, rng):
    bits = BITS.get(dtype, 8)
    nb = n * bits // 8
    raw = rng.integers(0, 256, size=nb, dtype=np.uint8)
    if dtype == "BOOL":
        raw = raw & 1
    return raw.tobytes()


def fixture(path, rng):
    tensors = []
    for dt, shape in DTYPES.items():
        tensors.append((f"dtype.{dt}", dt, shape, element_bytes(dt, math.prod(shape), rng)))
    tensors += [
        ("model.layers.0.mlp.weight", "F32", (6, 4), rng.standard_normal(24).astype("<f4").tobytes()),
        ("model.layers.0.mlp.bias", "F32", (6,), rng.standard_normal(6).astype("<f4").tobytes()),
        ("model.layers.1.mlp.weight", "F32", (6, 4), rng.standard_normal(24).astype("<f4").tobytes()),
        ("scalar", "F64", (), struct.pack("<d", -7.25)),
        ("scalar_i64", "I64", (), struct.pack("<q", -3)),
        ("empty", "F32", (0, 4), b""),
        ("empty_inner", "I16", (3, 0, 2), b""),
        # several chunks at -o zarr_chunk_size=10K, the last one partial,
        # a prime row count
        ("several", "F32", (1009, 33), rng.standard_normal(1009 * 33).astype("<f4").tobytes()),
        ("several_bf16", "BF16", (1001, 7), element_bytes("BF16", 7007, rng)),
        ("rowbig", "U8", (3, 20000), element_bytes("U8", 60000, rng)),
        ("a.b", "I32", (2, 2), element_bytes("I32", 4, rng)),
        ("a.b.c", "U16", (5,), element_bytes("U16", 5, rng)),
        ("__zarr__", "U8", (3,), b"zrr"),
        (".", "U8", (1,), b"."),
    ]
    for i, h in enumerate(HOSTILE):
        tensors.append((h, "U8", (2, i + 1), element_bytes("U8", 2 * (i + 1), rng)))
    write_st(path, tensors, metadata={"format": "pt", "note": "zarr \u00e9 \"q\""})
    return tensors


def zarr_addressable(rel):
    # zarr-python 2 reads a '\' in a key as '/' (normalize_storage_path):
    # such an array is opened through its own directory instead.
    return "\\" not in rel


def test_generated_every_dtype_and_shape(tmp):
    need_zarr()
    rng = np.random.default_rng(40)
    src = os.path.join(tmp, "gen.safetensors")
    tensors = fixture(src, rng)
    with mounted(src, "-o", "zarr,convert=f32,zarr_chunk_size=10K") as mnt:
        # the tensor named __zarr__ is still there, escaped
        assert os.path.isdir(os.path.join(mnt, "__zarr__"))
        assert open(os.path.join(mnt, "%5F_zarr__"), "rb").read() == b"zrr"
        arrays, n = check_store(mnt, [t[0] for t in tensors], chunk=10 << 10, zarr_ok=zarr_addressable)
        assert n == len(tensors)
        store = os.path.join(mnt, "__zarr__")
        assert arrays["__zarr__"] == "__zarr__"
        assert arrays["a.b"] == "a/b.tensor" and arrays["a.b.c"] == "a/b/c"
        assert arrays["model.layers.0.mlp.weight"] == "model/layers/0/mlp/weight"
        assert arrays["."] == "%empty/%empty" and arrays[""] == "%empty.tensor"
        # several chunks, a partial last one, none past it
        several = os.path.join(store, "several")
        z = json.load(open(os.path.join(several, ".zarray")))
        assert z["chunks"] == [78, 33]  # 10240 / 132 = 77.6 rows
        keys = sorted((f for f in os.listdir(several) if f not in META_FILES), key=lambda k: int(k.split(".")[0]))
        assert keys == [f"{c}.0" for c in range(13)]
        assert all(os.path.getsize(os.path.join(several, k)) == 78 * 132 for k in keys)
        # a row over the target: one row per chunk
        assert json.load(open(os.path.join(store, "rowbig", ".zarray")))["chunks"] == [1, 20000]
        # the scalar: one chunk named 0; empty arrays: no chunk
        assert sorted(os.listdir(os.path.join(store, "scalar"))) == sorted(META_FILES | {"0"})
        assert zarr.open_group(store, mode="r")["scalar"][()] == -7.25
        for e in ("empty", "empty_inner"):
            assert sorted(os.listdir(os.path.join(store, e))) == sorted(META_FILES)
            assert zarr.open_group(store, mode="r")[e][...].size == 0
        # the root's attributes are the checkpoint's __metadata__, in both formats
        meta = json.load(open(os.path.join(mnt, "__metadata__.json")))
        assert json.load(open(os.path.join(store, ".zattrs"))) == meta
        assert dict(zarr.open_group(store, mode="r").attrs) == meta
        root3 = json.load(open(os.path.join(store, "zarr.json")))
        assert root3 == {"zarr_format": 3, "node_type": "group", "attributes": meta}
        assert json.load(open(os.path.join(store, ".zgroup"))) == {"zarr_format": 2}
        # sizes in listings read no tensor data: every chunk file's size is
        # the chunk's, stat'ed before any read of this mount's data
    with mounted(src, "-o", "zarr,zarr_chunk_size=10K,direct_io") as mnt:
        st = os.stat(os.path.join(mnt, "__zarr__", "several", "12.0"))
        assert st.st_size == 78 * 132


def store_files(mnt):
    out = {}
    for root, dirs, files in os.walk(os.path.join(mnt, "__zarr__")):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                out[os.path.relpath(os.path.join(root, f), mnt)] = fh.read()
    return out


def test_other_options_do_not_change_the_store(tmp):
    """The layout and the tensor files' views leave the store as it is."""
    rng = np.random.default_rng(44)
    src = os.path.join(tmp, "o.safetensors")
    fixture(src, rng)
    with mounted(src, "-o", "zarr,zarr_chunk_size=10K") as mnt:
        plain = store_files(mnt)
    with mounted(src, "-o", "zarr,zarr_chunk_size=10K,layout=tree,format=npy,convert=f32,stats") as mnt:
        assert store_files(mnt) == plain
    assert len(plain) > 150


def test_read_by_another_user(tmp):
    """Mounted by root with allow_other, the store is read by nobody."""
    need_zarr()
    if os.getuid() != 0:
        from tfsutil import missing
        missing("root (to read the mount as nobody)")
    import pwd
    import subprocess
    nobody = pwd.getpwnam("nobody").pw_uid
    os.chmod(tmp, 0o755)
    src = os.path.join(tmp, "n.safetensors")
    w = np.arange(12, dtype="<f4").reshape(3, 4)
    write_st(src, [("a.w", "F32", w.shape, w.tobytes())])
    os.chmod(src, 0o644)
    # (pytest's own temporary directories are closed to other users)
    import tempfile
    base = tempfile.mkdtemp(prefix="tfs-zarr-nobody-")
    os.chmod(base, 0o755)
    mnt = os.path.join(base, "mnt")
    os.mkdir(mnt)
    with mounted(src, "-o", "zarr,allow_other", mnt=mnt):
        code = (f"import zarr; a = zarr.open_group({os.path.join(mnt, '__zarr__')!r}, mode='r')['a/w'][...]; "
                "print(a.sum(), a.shape)")
        r = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True, timeout=60,
                           preexec_fn=lambda: (os.setgid(nobody), os.setuid(nobody)), cwd="/")
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "66.0 (3, 4)"
    shutil.rmtree(base)


def test_xarray_opens_a_group(tmp):
    need_zarr()
    try:
        import xarray as xr
    except ImportError:
        from tfsutil import missing
        missing("xarray (Debian's python3-xarray)")
    rng = np.random.default_rng(41)
    src = os.path.join(tmp, "x.safetensors")
    w = rng.standard_normal((6, 4)).astype("<f4")
    b = rng.standard_normal(6).astype("<f4")
    write_st(src, [("mlp.weight", "F32", w.shape, w.tobytes()), ("mlp.bias", "F32", b.shape, b.tobytes()),
                   ("mlp.scale", "BF16", (), b"\x80\x3f")])
    with mounted(src, "-o", "zarr") as mnt:
        ds = xr.open_zarr(os.path.join(mnt, "__zarr__", "mlp"), consolidated=False)
        assert set(ds.data_vars) == {"weight", "bias", "scale"}
        assert ds["weight"].dims == ("weight.0", "weight.1")
        np.testing.assert_array_equal(ds["weight"].values, w)
        np.testing.assert_array_equal(ds["bias"].values, b)
        assert float(ds["scale"].values) == 1.0
        assert ds["scale"].attrs["tensor_dtype"] == "BF16"


def test_gguf_quantized_through_f32(tmp):
    """GGUF's block types through convert=f32's decoding (ggml's, written
    again in gen_gguf), the others as their bytes; F16 as it is."""
    need_zarr()
    rng = np.random.default_rng(42)
    tensors = []
    for name in ("Q4_0", "Q8_0", "Q4_K", "Q6_K", "MXFP4", "IQ2_XXS"):
        tid = gg.ID[name]
        _, blk, size = gg.GGML[tid]
        ne = [blk * 2, 3]
        tensors.append((f"blk.0.{name.lower()}", tid, ne, gg.random_blocks(tid, 6, rng)))
    tensors.append(("blk.0.f16", gg.ID["F16"], [8, 2], rng.standard_normal(16).astype("<f2").tobytes()))
    src = os.path.join(tmp, "q.gguf")
    with open(src, "wb") as f:
        f.write(gg.build(kvs=[("general.architecture", gg.STR, "llama")], tensors=tensors))
    with mounted(src, "-o", "zarr,convert=f32,zarr_chunk_size=1K") as mnt:
        arrays, n = check_store(mnt, [t[0] for t in tensors], chunk=1 << 10)
        assert n == len(tensors)
        store = os.path.join(mnt, "__zarr__")
        g = zarr.open_group(store, mode="r")
        for name, tid, ne, data in tensors:
            a = g[arrays[name]]
            tname = gg.GGML[tid][0]
            if tname in ("F16",):
                assert a.dtype == np.float16
            elif tname in RAW:
                assert a.dtype == np.uint8 and a.shape == (len(data),)
            else:
                want = gg.dequant(tname, data).reshape(a.shape)
                np.testing.assert_array_equal(a[...], want)
            assert g[arrays[name]].attrs["tensor_dtype"] == tname
        assert json.load(open(os.path.join(store, ".zattrs"))) == \
            json.load(open(os.path.join(mnt, "__metadata__.json")))


@pytest.mark.parametrize("rel", real_files())
def test_real_checkpoints(rel):
    need_real()
    need_zarr()
    with open(os.path.join(REAL, "expected.json")) as f:
        exp = json.load(f)["files"][rel]
    with mounted(os.path.join(REAL, rel), "-o", "zarr,convert=f32") as mnt:
        arrays, n = check_store(mnt, list(exp["tensors"]))
        assert n == exp["tensor_count"]
        store = os.path.join(mnt, "__zarr__")
        assert dict(zarr.open_group(store, mode="r").attrs) == (exp["metadata"] or {})
        # the raw tensor files agree with expected.json's hashes; the arrays
        # of the NumPy dtypes hold exactly those bytes
        import hashlib
        g = zarr.open_group(store, mode="r")
        for name, t in exp["tensors"].items():
            if t["dtype"] in NATIVE:
                assert hashlib.sha256(g[arrays[name]][...].tobytes()).hexdigest() == t["sha256"], name


def test_real_sharded_and_gguf():
    """A sharded set (its index): one store of every shard's tensors; the
    real GGUF file (a vocabulary, no tensors): its metadata as the root's
    attributes."""
    need_real()
    need_zarr()
    index = os.path.join(REAL, "julia-safetensors-jl-sharded", "model.safetensors.index.json")
    with mounted(index, "-o", "zarr,convert=f32") as mnt:
        arrays, n = check_store(mnt)
        assert n > 30
    gguf = os.path.join(REAL, "llama.cpp_ggml-vocab-bert-bge_vocabonly.gguf")
    with mounted(gguf, "-o", "zarr") as mnt:
        store = os.path.join(mnt, "__zarr__")
        meta = json.load(open(os.path.join(mnt, "__metadata__.json")))
        assert json.load(open(os.path.join(store, ".zattrs"))) == meta
        assert json.load(open(os.path.join(store, "zarr.json")))["attributes"] == meta
        assert dict(zarr.open_group(store, mode="r").attrs) == meta


def test_bad_chunk_size(tmp):
    src = os.path.join(tmp, "t.safetensors")
    write_st(src, [("w", "F32", (1,), b"\0" * 4)])
    for bad in ("0", "-1", "12Q", "2T", ""):
        r = run(["-o", f"zarr,zarr_chunk_size={bad}", src, tmp])
        assert r.returncode == EXIT_USAGE, (bad, r.stderr)
        assert r.stderr.count("\n") == 1 and "zarr_chunk_size" in r.stderr, r.stderr


def test_without_the_option_nothing_changes(tmp):
    src = os.path.join(tmp, "t.safetensors")
    write_st(src, [("__zarr__", "U8", (1,), b"z"), ("w", "U8", (1,), b"w")])
    with mounted(src) as mnt:
        assert sorted(os.listdir(mnt)) == ["__metadata__.json", "__tensors__.tsv", "__zarr__", "w"]
        assert open(os.path.join(mnt, "__zarr__"), "rb").read() == b"z"
    with mounted(src, "-o", "zarr,layout=tree") as mnt:
        assert open(os.path.join(mnt, "%5F_zarr__"), "rb").read() == b"z"
        assert zarr is None or zarr.open_group(os.path.join(mnt, "__zarr__"), mode="r")["__zarr__"][0] == ord("z")


def test_source_changed_gives_eio(tmp):
    """A source rewritten while mounted: its chunks fail with EIO, as its
    tensors' files do, never giving other bytes."""
    need_zarr()
    src = os.path.join(tmp, "c.safetensors")
    write_st(src, [("w", "F32", (4, 2), np.arange(8, dtype="<f4").tobytes())])
    with mounted(src, "-o", "zarr,direct_io") as mnt:
        chunk = os.path.join(mnt, "__zarr__", "w", "0.0")
        assert open(chunk, "rb").read() == np.arange(8, dtype="<f4").tobytes()
        st = os.stat(src)
        os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        with pytest.raises(OSError) as e:
            open(chunk, "rb").read()
        assert e.value.errno == 5
        with pytest.raises(OSError):
            open(os.path.join(mnt, "w"), "rb").read()


def test_over_http_chunks_go_through_the_cache(tmp):
    """Over http (nginx), reading an array through zarr fetches the
    tensor's bytes once: no more requests than the tensor file's own read
    would make, and a second read (zarr, then the raw file) none at all."""
    need_zarr()
    root = os.path.join(tmp, "www")
    os.makedirs(root)
    os.chmod(tmp, 0o755)
    os.chmod(root, 0o755)
    rng = np.random.default_rng(43)
    w = rng.standard_normal((4099, 256)).astype("<f4")  # 4 MiB, a prime row count
    path = os.path.join(root, "m.safetensors")
    write_st(path, [("w", "F32", w.shape, w.tobytes())])
    os.chmod(path, 0o644)
    with Nginx(root) as web:
        web.clear_log()
        with mounted(web.url("plain", "m.safetensors"), "-o", "zarr,zarr_chunk_size=512K,direct_io") as mnt:
            store = os.path.join(mnt, "__zarr__")
            first = [r for r in web.requests() if r["uri"] == "/m.safetensors"]
            g = zarr.open_group(store, mode="r")
            assert len(os.listdir(os.path.join(store, "w"))) == 3 + 9  # 4099 / 512 rows
            np.testing.assert_array_equal(g["w"][...], w)
            reqs = [r for r in web.requests() if r["uri"] == "/m.safetensors"][len(first):]
            fetched = sum(r["bytes"] for r in reqs)
            assert reqs and w.nbytes <= fetched < w.nbytes + (1 << 20), (len(reqs), fetched)
            # fewer requests than chunks' FUSE reads: the cache's read-ahead
            assert len(reqs) < w.nbytes // (128 << 10), len(reqs)
            web.clear_log()
            np.testing.assert_array_equal(g["w"][...], w)
            with open(os.path.join(mnt, "w"), "rb") as f:
                assert f.read() == w.tobytes()
            assert [r for r in web.requests() if r["uri"] == "/m.safetensors"] == []
    shutil.rmtree(root)


# ---- issue 44: hostile shapes and sizes ----

def test_many_dimensions(tmp):
    """Tensors of 33 to 64 dimensions: each chunk key (over 64 bytes from
    33 dimensions on) is a file that holds the chunk, as zarr-python 2
    names it and as the format 3 metadata does; zarr found no chunk and
    read zeros. Over 64 dimensions (NumPy's most) a tensor is left out of
    the store, with one warning."""
    need_zarr()
    tensors = []
    for nd in (32, 33, 47, 64):
        shape = [5] + [1] * (nd - 2) + [3]
        tensors.append((f"d{nd}", "F32", shape, (np.arange(15, dtype="<f4") + nd).tobytes()))
    tensors.append(("d65", "F32", [2] + [1] * 64, np.arange(2, dtype="<f4").tobytes()))
    src = os.path.join(tmp, "nd.safetensors")
    write_st(src, tensors)
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    # 12-byte rows in slabs of 2: chunks 0.0...0, 1.0...0 and 2.0...0
    r = run(["-o", "zarr,zarr_chunk_size=24", src, mnt])
    assert r.returncode == 0, r.stderr
    try:
        store = os.path.join(mnt, "__zarr__")
        for name, dt, shape, data in tensors[:-1]:
            adir = os.path.join(store, name)
            a = zarr.open_array(adir, mode="r")
            assert a.shape == tuple(shape) and a.chunks == (2,) + tuple(shape[1:]) and a.nchunks == 3
            for c in range(3):
                key = a._chunk_key((c,) + (0,) * (len(shape) - 1))
                part = data[c * 24:(c + 1) * 24]
                assert a.store[key] == part + bytes(24 - len(part)), (name, key)
            assert a.nchunks_initialized == 3, name
            dt3, shape3, got = read_v3(adir)
            assert shape3 == shape and got == data, name
            if len(shape) <= 32:  # NumPy 1's most
                assert a[...].tobytes() == data
        assert sorted(arrays_in(store)) == ["d32", "d33", "d47", "d64"]
        warns = [line for line in r.stderr.splitlines() if "warning" in line]
        assert len(warns) == 1 and "'d65'" in warns[0] and "64 dimensions" in warns[0], r.stderr
    finally:
        unmount(mnt)


def big_sparse(path, sizes):
    """A safetensors file of U8 tensors of these sizes, its data a hole."""
    write_sized(path, [(name, "U8", [n], n) for name, n in sizes])


def daemon_hwm_kb(mnt):
    from tfsutil import daemon_pids, vm_kb
    return vm_kb(daemon_pids(mnt)[0], "VmHWM")


def test_chunk_directories_are_generated(tmp):
    """A 100-byte header declaring 5 TiB (a sparse file): an array of
    524,288 chunks is a directory whose entries are made when listed or
    looked up, never held (the daemon stays small: it held 2.6 million
    nodes, 268 MB); one of 2,097,152 chunks, over the bound of a listing,
    is left out with one warning instead of millions of entries."""
    src = os.path.join(tmp, "big.safetensors")
    big_sparse(src, [("a", 1 << 40), ("b", 1 << 42)])
    assert os.path.getsize(src) > 1 << 42
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = run(["-o", "zarr,zarr_chunk_size=2M", src, mnt])
    assert r.returncode == 0, r.stderr
    try:
        warns = [line for line in r.stderr.splitlines() if "warning" in line]
        assert len(warns) == 1 and "'b'" in warns[0] and "1,000,000" in warns[0], r.stderr
        store = os.path.join(mnt, "__zarr__")
        assert sorted(os.listdir(store)) == [".zattrs", ".zgroup", "a", "zarr.json"]
        a = os.path.join(store, "a")
        names = os.listdir(a)
        assert len(names) == 3 + (1 << 19) and len(set(names)) == len(names)
        assert set(names) == META_FILES | {str(c) for c in range(1 << 19)}
        assert os.stat(os.path.join(a, str((1 << 19) - 1))).st_size == 2 << 20
        for bad in (str(1 << 19), "00", "01", "-1", "1.0", "+1", "1 ", "0x1", str(1 << 64)):
            assert not os.path.exists(os.path.join(a, bad)), bad
        with open(os.path.join(a, "12345"), "rb") as f:
            f.seek((2 << 20) - 4096)
            assert f.read() == bytes(4096)
        z = json.load(open(os.path.join(a, ".zarray")))
        assert z["shape"] == [1 << 40] and z["chunks"] == [2 << 20]
        inos = {os.stat(os.path.join(a, n)).st_ino for n in ("0", "1", ".zarray", str((1 << 19) - 1))}
        assert len(inos) == 4
        if not SANITIZED:
            assert daemon_hwm_kb(mnt) < 48 << 10
    finally:
        unmount(mnt)


def test_lying_server_claiming_2_56_bytes(tmp):
    """An http server that claims 2^56 bytes for a header declaring a
    tensor of that size: the mount comes up small with one warning (the
    daemon ran out of memory in seconds), and an array the same server's
    bytes can hold is there."""
    from servers import Hostile
    root = os.path.join(tmp, "www")
    os.makedirs(root)
    hdr = {"huge": {"dtype": "U8", "shape": [1 << 56], "data_offsets": [0, 1 << 56]}}
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(root, "m.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    import resource
    import subprocess
    from tfsutil import BIN

    def limit():  # the machine is shared: what main did must not take it all
        if not SANITIZED:
            resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    with Hostile(root) as srv:
        srv.mode(size=8 + len(h) + (1 << 56))
        r = subprocess.run([BIN, "-o", "zarr", srv.url("m.safetensors"), mnt], capture_output=True,
                           text=True, timeout=120, preexec_fn=limit)
        assert r.returncode == 0, r.stderr
        try:
            warns = [line for line in r.stderr.splitlines() if "warning" in line]
            assert len(warns) == 1 and "'huge'" in warns[0], r.stderr
            store = os.path.join(mnt, "__zarr__")
            assert sorted(os.listdir(store)) == [".zattrs", ".zgroup", "zarr.json"]
            assert os.stat(os.path.join(mnt, "huge")).st_size == 1 << 56
            if not SANITIZED:
                assert daemon_hwm_kb(mnt) < 48 << 10
        finally:
            unmount(mnt)


def test_long_documents_read_in_small_pieces_by_many_readers(tmp):
    """A tensor of a 2 MB name (6 MB in an array's metadata, written in
    ASCII) and 2 MB of metadata (the root group's attributes): 8 readers
    at once read every document in 16 KiB pieces under direct_io (every
    piece a request). Each document was made whole again for every piece:
    the daemon grew with the readers and took minutes. The pieces make
    the same text as one read, that json and zarr read back."""
    need_zarr()
    import threading
    name = "g." + "\u00e9" * (1 << 20)
    meta = {f"k{i}": "\u00e8" * 1000 for i in range(1000)}
    src = os.path.join(tmp, "long.safetensors")
    write_st(src, [(name, "F32", (2, 2), np.arange(4, dtype="<f4").tobytes()),
                   ("w", "U8", (1,), b"w")], metadata=meta)
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = run(["-o", "zarr,direct_io", src, mnt])
    assert r.returncode == 0, r.stderr
    try:
        store = os.path.join(mnt, "__zarr__")
        g = [d for d in os.listdir(os.path.join(store, "g")) if d not in {".zgroup", ".zattrs", "zarr.json"}]
        assert len(g) == 1 and "%~" in g[0]
        docs = [os.path.join(store, "g", g[0], f) for f in (".zattrs", "zarr.json", ".zarray")] + \
               [os.path.join(store, f) for f in (".zattrs", "zarr.json")]
        whole = {p: open(p, "rb").read() for p in docs}
        assert len(whole[docs[0]]) > 6 << 20 and len(whole[docs[3]]) > 5 << 20
        assert json.loads(whole[docs[0]])["tensor_name"] == name
        assert json.loads(whole[docs[1]])["attributes"]["tensor_name"] == name
        assert json.loads(whole[docs[3]]) == meta
        assert all(len(whole[p]) == os.stat(p).st_size for p in docs)
        assert max(whole[docs[0]]) < 0x80, "ASCII"
        errors = []

        def reader(k):
            try:
                for p in docs[k % 2::2] + docs[:k % 2]:
                    parts = []
                    with open(p, "rb", buffering=0) as f:
                        while True:
                            b = f.read(16 << 10)
                            if not b:
                                break
                            parts.append(b)
                    if b"".join(parts) != whole[p]:
                        errors.append(p)
            except Exception as e:  # reported below
                errors.append(repr(e))
        threads = [threading.Thread(target=reader, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        import time
        deadline = time.time() + 300  # a bound on a hang, not a timing
        for t in threads:
            t.join(max(0, deadline - time.time()))
        assert not any(t.is_alive() for t in threads), "readers still reading after 300 s"
        assert not errors, errors[:3]
        a = zarr.open_group(store, mode="r")["g/" + g[0]]
        assert a.attrs["tensor_name"] == name and a[...].tolist() == [[0, 1], [2, 3]]
        if not SANITIZED:
            assert daemon_hwm_kb(mnt) < 56 << 10, "the documents made whole for each piece"
    finally:
        unmount(mnt)
