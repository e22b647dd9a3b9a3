"""-o export: model.safetensors (and, in the tree layout, D.safetensors
beside every directory D) generated from the tensor table, data read from
the source ranges. Every generated file is checked against a minimal reader
and a straightforward writer written here (json + struct), independent of
the C code, and against the source read the same way."""

import json
import os
import random
import shutil
import struct
import subprocess
import time

import numpy as np
import pytest

import gen_gguf as G
from tfsutil import (BIN, DTYPE_BYTES, REAL, fname, fuse_ok, is_mounted, kernel_at_least, mounted,
                     need_real, real_files, run, sha256, unmount, vm_kb, write_st)

# safetensors' dtypes in declaration order: its writer orders by this,
# widest first
DECL = ["BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
        "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64",
        "F64", "I64", "U64"]
RANK = {d: i for i, d in enumerate(DECL)}
NUMPY = {"BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16,
         "F16": np.float16, "BF16": np.uint16, "I32": np.int32, "U32": np.uint32,
         "F32": np.float32, "C64": np.complex64, "F64": np.float64, "I64": np.int64,
         "U64": np.uint64}
for _d in DECL:
    NUMPY.setdefault(_d, np.uint8)


def parse(blob):
    """A minimal safetensors reader: (metadata or None, {name: (dtype,
    shape, bytes)}, header names in order, absolute data starts)."""
    n = struct.unpack_from("<Q", blob)[0]
    text = blob[8:8 + n].decode("utf-8")
    hdr = json.loads(text)
    meta = hdr.pop("__metadata__", None)
    base = 8 + n
    at = 0
    out, starts = {}, {}
    for name, t in sorted(hdr.items(), key=lambda kv: kv[1]["data_offsets"]):
        b, e = t["data_offsets"]
        assert b == at, f"hole or overlap at {name}"
        at = e
        out[name] = (t["dtype"], t["shape"], bytes(blob[base + b:base + e]))
        starts[name] = base + b
    assert base + at == len(blob), "trailing or missing bytes"
    return meta, out, list(hdr), starts


def read_source(path):
    """The tensors of a checkpoint file, or of every shard in a directory."""
    if os.path.isdir(path):
        meta, out = None, {}
        for f in sorted(os.listdir(path)):
            if f.endswith(".safetensors"):
                m, t, _, _ = parse(open(os.path.join(path, f), "rb").read())
                meta = m if meta is None else meta
                out.update(t)
        return meta, out
    m, t, _, _ = parse(open(path, "rb").read())
    return m, t


def order_key(name, t):
    """The documented order: sizes that are multiples of 8 first, then
    safetensors' writer order (widest dtype first), then the name's bytes."""
    dtype, _, raw = t
    return (len(raw) % 8 != 0, -RANK[dtype], name.encode())


def write_reference(tensors, metadata):
    """A straightforward writer: the tensors in the documented order, the
    header as json.dumps writes it compactly, spaces to a multiple of 8."""
    names = sorted(tensors, key=lambda n: order_key(n, tensors[n]))
    hdr = {}
    if metadata is not None:
        hdr["__metadata__"] = metadata
    off = 0
    for n in names:
        dtype, shape, raw = tensors[n]
        hdr[n] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    text = json.dumps(hdr, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(tensors[n][2] for n in names)


def generated(mnt, tensors, tree):
    """{path of every generated file: the names it must hold}."""
    out = {os.path.join(mnt, "model.safetensors"): set(tensors)}
    if not tree:
        return out
    for name in tensors:
        parts = name.split(".")
        for k in range(1, len(parts)):
            dirs = [fname(p) for p in parts[:k]]
            sib = dirs[-1] + (".dir.safetensors" if k == 1 and dirs[-1] == "model" else ".safetensors")
            out.setdefault(os.path.join(mnt, *dirs[:-1], sib), set()).add(name)
    return out


def check_file(path, want, meta, src_inspect):
    blob = open(path, "rb").read()
    # our own strict parser accepts it, and --inspect agrees with the source
    r = run(["--inspect", "--json", "-o", "strict", path])
    assert r.returncode == 0, r.stderr
    got = {t["name"]: (t["dtype"], t["shape"], t["bytes"]) for t in json.loads(r.stdout)["tensors"]}
    assert got == {n: src_inspect[n] for n in want.keys()}
    # the minimal reader: same tensors, same bytes, same metadata
    gmeta, gt, order, starts = parse(blob)
    assert gt == want
    assert gmeta == meta
    assert order == sorted(want, key=lambda n: order_key(n, want[n]))
    # byte for byte what a straightforward writer makes of the same tensors
    assert blob == write_reference(want, meta)
    # alignment: every tensor at a multiple of its element size, and those
    # whose size is a multiple of 8 at a multiple of 8
    assert (8 + struct.unpack_from("<Q", blob)[0]) % 8 == 0
    for n, (dtype, shape, raw) in want.items():
        assert starts[n] % max(1, DTYPE_BYTES.get(dtype, 1)) == 0, n
        if len(raw) % 8 == 0:
            assert starts[n] % 8 == 0, n
    # numpy on the generated file (mapped) agrees with the source bytes
    for n, (dtype, shape, raw) in list(want.items())[:64]:
        if not raw or dtype in ("F4", "F6_E2M3", "F6_E3M2"):
            continue
        dt = NUMPY[dtype]
        mm = np.memmap(path, dtype=dt, mode="r", offset=starts[n], shape=(len(raw) // np.dtype(dt).itemsize,))
        assert (np.asarray(mm).view(np.uint8) == np.frombuffer(raw, np.uint8)).all(), n
        del mm
    return blob


def inspect_rows(src):
    r = run(["--inspect", "--json", src])
    assert r.returncode == 0, r.stderr
    return {t["name"]: (t["dtype"], t["shape"], t["bytes"]) for t in json.loads(r.stdout)["tensors"]}


def random_reads(path, blob, n=300, seed=1):
    rng = random.Random(seed)
    fd = os.open(path, os.O_RDONLY)
    try:
        for _ in range(n):
            off = rng.randrange(0, len(blob) + 16)
            ln = rng.choice([1, 7, 8, 100, 4096, 65536, 300000, 1 << 20])
            assert os.pread(fd, ln, off) == blob[off:off + ln], (off, ln)
    finally:
        os.close(fd)


SOURCES = [r for r in real_files() if "/" not in r] + ["julia-safetensors-jl-sharded"]


@pytest.mark.parametrize("layout", ["flat", "tree"])
@pytest.mark.parametrize("rel", SOURCES)
def test_export_real(rel, layout, tmp):
    need_real()
    src = os.path.join(REAL, rel)
    meta, tensors = read_source(src)
    src_inspect = inspect_rows(src)
    with mounted(src, "-o", f"export,layout={layout}") as mnt:
        files = generated(mnt, tensors, layout == "tree")
        on_disk = set()
        for d, _, fs in os.walk(mnt):
            on_disk |= {os.path.join(d, f) for f in fs if f.endswith(".safetensors")}
        assert on_disk == set(files)
        for path, names in files.items():
            check_file(path, {n: tensors[n] for n in names}, meta, src_inspect)
        root = open(os.path.join(mnt, "model.safetensors"), "rb").read()
    # reads at random offsets through a fresh mount that caches nothing
    with mounted(src, "-o", f"export,layout={layout},direct_io") as mnt:
        random_reads(os.path.join(mnt, "model.safetensors"), root)
        files = generated(mnt, tensors, layout == "tree")
        if len(files) > 1:
            p = sorted(files)[1]
            random_reads(p, write_reference({n: tensors[n] for n in files[p]}, meta), n=50)
    # the generated file mounts again, with the same bytes per tensor
    copy = os.path.join(tmp, "copy.safetensors")
    with open(copy, "wb") as f:
        f.write(root)
    with mounted(copy) as mnt:
        for n, (dtype, shape, raw) in tensors.items():
            p = os.path.join(mnt, fname(n))
            assert open(p, "rb").read() == raw, n
            assert os.getxattr(p, "user.dtype").decode() == dtype


def test_export_sharded_cp_matches_writer(tmp):
    """cp of model.safetensors from the mounted sharded set equals, byte for
    byte, what the straightforward writer makes of the shards' tensors."""
    need_real()
    src = os.path.join(REAL, "julia-safetensors-jl-sharded")
    meta, tensors = read_source(src)
    assert len({f for f in os.listdir(src) if f.endswith(".safetensors")}) > 1
    out = os.path.join(tmp, "merged.safetensors")
    with mounted(os.path.join(src, "model.safetensors.index.json"), "-o", "export") as mnt:
        subprocess.run(["cp", os.path.join(mnt, "model.safetensors"), out], check=True)
    assert open(out, "rb").read() == write_reference(tensors, meta)


def test_export_over_http(tmp):
    """A remote source: the same bytes as the local export."""
    need_real()
    from servers import Nginx
    src = os.path.join(REAL, "julia-safetensors-jl-sharded")
    meta, tensors = read_source(src)
    with Nginx(REAL) as ng:
        url = ng.url(path="julia-safetensors-jl-sharded/model.safetensors.index.json")
        with mounted(url, "-o", "export,layout=tree") as mnt:
            got = open(os.path.join(mnt, "model.safetensors"), "rb").read()
    assert got == write_reference(tensors, meta)


def raw_bytes(dtype, shape, rng):
    n = 1
    for d in shape:
        n *= d
    return rng.integers(0, 256, n * DTYPE_BYTES[dtype], dtype=np.uint8).tobytes()


def test_export_names_order_alignment(tmp):
    """Hostile names, zero-size and scalar tensors, odd sizes, mixed
    dtypes; the flat layout's tensor named model.safetensors; a root
    directory named model in the tree layout."""
    rng = np.random.default_rng(5)
    specs = [("model.safetensors", "U8", [3]), ('quo"te\\back', "F32", [3]), ("tab\there\n", "I16", [5]),
             ("ctl\x01\x1f\x7f", "BOOL", [7]), ("ünïcode.名前", "BF16", [2, 2]), ("empty", "F64", [0]),
             ("scalar", "I64", []), ("a.b", "F16", [3]), ("a.b.c", "U64", [2]), ("model.layers.0.w", "F32", [4, 4]),
             ("model.layers.1.w", "F32", [3]), ("z", "C64", [1]), ("odd8", "I8", [9])]
    tensors = {n: (d, s, raw_bytes(d, s, rng)) for n, d, s in specs}
    src = os.path.join(tmp, "h.safetensors")
    write_st(src, [(n, d, s, raw) for n, (d, s, raw) in tensors.items()], metadata={"k": "v\n\"x\""})
    src_inspect = inspect_rows(src)
    meta = {"k": "v\n\"x\""}
    with mounted(src, "-o", "export") as mnt:
        names = os.listdir(mnt)
        assert "model.safetensors" in names and "model%2Esafetensors" in names
        assert open(os.path.join(mnt, "model%2Esafetensors"), "rb").read() == tensors["model.safetensors"][2]
        check_file(os.path.join(mnt, "model.safetensors"), tensors, meta, src_inspect)
    with mounted(src, "-o", "export,layout=tree") as mnt:
        files = generated(mnt, tensors, True)
        assert os.path.join(mnt, "model.dir.safetensors") in files
        for path, want in files.items():
            check_file(path, {n: tensors[n] for n in want}, meta, src_inspect)
        # a.b is a tensor beside the directory a/b: a/b.safetensors holds a.b.c
        assert set(parse(open(os.path.join(mnt, "a", "b.safetensors"), "rb").read())[1]) == {"a.b.c"}
        assert set(parse(open(os.path.join(mnt, "a.safetensors"), "rb").read())[1]) == {"a.b", "a.b.c"}


def test_export_shards_disagree(tmp):
    """Shards whose metadata differ: every key, in order of first
    appearance; a key the shards give different values keeps the first
    shard's value."""
    d = os.path.join(tmp, "set")
    os.mkdir(d)
    write_st(os.path.join(d, "a.safetensors"), [("x", "U8", [2], b"ab")], metadata={"format": "pt", "k": "1"})
    write_st(os.path.join(d, "b.safetensors"), [("y", "U8", [3], b"cde")], metadata={"format": "pt", "k": "2", "j": "3"})
    with mounted(d, "-o", "export") as mnt:
        meta, t, _, _ = parse(open(os.path.join(mnt, "model.safetensors"), "rb").read())
    assert meta == {"format": "pt", "k": "1", "j": "3"}
    assert list(meta) == ["format", "k", "j"]
    assert t == {"x": ("U8", [2], b"ab"), "y": ("U8", [3], b"cde")}


def test_export_no_metadata_stays_absent(tmp):
    p = os.path.join(tmp, "n.safetensors")
    write_st(p, [("x", "F32", [2], b"\0" * 8)])
    with mounted(p, "-o", "export") as mnt:
        blob = open(os.path.join(mnt, "model.safetensors"), "rb").read()
    assert b"__metadata__" not in blob
    assert blob == write_reference({"x": ("F32", [2], b"\0" * 8)}, None)


def test_export_gguf_quantized_left_out_or_converted(tmp):
    rng = np.random.default_rng(2)
    f32 = rng.standard_normal(64).astype(np.float32)
    f16 = rng.standard_normal(32).astype(np.float16)
    q4 = G.random_blocks(G.ID["Q4_0"], 2, rng)
    q8 = G.random_blocks(G.ID["Q8_0"], 1, rng)
    blob = G.build(kvs=[("general.architecture", G.STR, "llama"), ("llama.block_count", G.U32, 2)],
                   tensors=[("blk.0.f32", G.ID["F32"], [64], f32.tobytes()),
                            ("blk.0.f16", G.ID["F16"], [32], f16.tobytes()),
                            ("blk.1.q4", G.ID["Q4_0"], [64], q4), ("blk.1.q8", G.ID["Q8_0"], [32], q8)])
    src = os.path.join(tmp, "m.gguf")
    open(src, "wb").write(blob)
    fuse_ok()
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = run(["-o", "export,layout=tree", src, mnt])
    assert r.returncode == 0, r.stderr
    try:
        assert "-o export leaves out 2 tensors that safetensors cannot hold" in r.stderr
        meta, t, _, _ = parse(open(os.path.join(mnt, "model.safetensors"), "rb").read())
        assert set(t) == {"blk.0.f32", "blk.0.f16"}
        assert t["blk.0.f32"] == ("F32", [64], f32.tobytes())
        assert t["blk.0.f16"] == ("F16", [32], f16.tobytes())
        # GGUF's typed values become strings: the JSON text of each, as
        # __metadata__.json shows it
        assert json.loads(meta["general.architecture"]) == {"type": "STRING", "value": "llama"}
        assert json.loads(meta["llama.block_count"]) == {"type": "UINT32", "value": 2}
        assert set(parse(open(os.path.join(mnt, "blk", "1.safetensors"), "rb").read())[1]) == set()
    finally:
        unmount(mnt)
    with mounted(src, "-o", "export,convert=f32") as mnt:
        _, t, _, _ = parse(open(os.path.join(mnt, "model.safetensors"), "rb").read())
        assert set(t) == {"blk.0.f32", "blk.0.f16", "blk.1.q4", "blk.1.q8"}
        for n, (dtype, shape, raw) in t.items():
            assert dtype == "F32"
            assert raw == open(os.path.join(mnt, n), "rb").read(), n
        assert np.frombuffer(t["blk.0.f16"][2], np.float32).tolist() == f16.astype(np.float32).tolist()


def test_export_leaves_out_names_that_are_not_utf8(tmp):
    """GGUF names are any bytes; safetensors' are JSON text. A tensor whose
    name is not UTF-8 keeps its own file but is left out of the exports,
    the warning shows the bad byte escaped (the line stays UTF-8), and a
    directory holding only such tensors exports a file with none."""
    a = np.arange(4, dtype=np.float32)
    blob = G.build(tensors=[("blk.0.good", G.ID["F32"], [4], a.tobytes()),
                            (b"blk.0.bad\xff", G.ID["F32"], [4], (a + 1).tobytes()),
                            (b"blk.\xfe.x", G.ID["F32"], [4], (a + 2).tobytes())])
    src = os.path.join(tmp, "n.gguf")
    open(src, "wb").write(blob)
    fuse_ok()
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = subprocess.run([BIN, "-o", "export,layout=tree", src, mnt], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    try:
        err = r.stderr.decode("utf-8")  # strict: one byte 0xff would fail here
        assert "leaves out 2 tensors that safetensors cannot hold ('blk.0.bad\\xff': its name is not UTF-8, and more)" in err, err
        _, t, _, _ = parse(open(os.path.join(mnt, "model.safetensors"), "rb").read())
        assert t == {"blk.0.good": ("F32", [4], a.tobytes())}
        assert parse(open(os.path.join(mnt, "blk", "0.safetensors"), "rb").read())[1] == t
        bad_dir = os.path.join(os.fsencode(mnt), b"blk", b"\xfe.safetensors")
        assert parse(open(bad_dir, "rb").read())[1] == {}
        # the tensors' own files are there, with their bytes
        assert open(os.path.join(os.fsencode(mnt), b"blk", b"0", b"bad\xff"), "rb").read() == (a + 1).tobytes()
        assert open(os.path.join(os.fsencode(mnt), b"blk", b"\xfe", b"x"), "rb").read() == (a + 2).tobytes()
    finally:
        unmount(mnt)


def test_export_pytorch_and_npz(tmp):
    """Other formats: native dtypes as they are; complex128 (which
    safetensors has no name for) left out."""
    data = os.path.join(os.path.dirname(__file__), "..", "data", "pytorch", "pytorch_model.bin")
    with mounted(data, "-o", "export") as mnt:
        _, t, _, _ = parse(open(os.path.join(mnt, "model.safetensors"), "rb").read())
        assert t
        for n, (dtype, shape, raw) in t.items():
            p = os.path.join(mnt, fname(n))
            assert raw == open(p, "rb").read(), n
            assert dtype == os.getxattr(p, "user.dtype").decode()
    npz = os.path.join(tmp, "a.npz")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = np.arange(3, dtype=np.complex128)
    np.savez(npz, a=a, c=c)
    with mounted(npz, "-o", "export") as mnt:
        _, t, _, _ = parse(open(os.path.join(mnt, "model.safetensors"), "rb").read())
    assert t == {"a": ("F32", [2, 3], a.tobytes())}


def test_export_source_changed(tmp):
    p = os.path.join(tmp, "c.safetensors")
    write_st(p, [("x", "F32", [2], b"\1" * 8)])
    with mounted(p, "-o", "export") as mnt:
        g = os.path.join(mnt, "model.safetensors")
        assert len(open(g, "rb").read()) == os.stat(g).st_size
        with open(p, "ab") as f:
            f.write(b"\0")
        with pytest.raises(OSError) as ei:
            open(g, "rb").read()
        assert ei.value.errno == 5


def test_export_header_over_limit(tmp):
    """Two shards whose merged header would pass safetensors' 100,000,000
    bytes: the file shows size 0 and opening it fails; the rest works."""
    d = os.path.join(tmp, "big")
    os.mkdir(d)
    for i in range(2):
        write_st(os.path.join(d, f"s{i}.safetensors"), [(str(i) * 51_000_000, "U8", [1], b"x")])
    with mounted(d, "-o", "export") as mnt:
        g = os.path.join(mnt, "model.safetensors")
        assert os.stat(g).st_size == 0
        with pytest.raises(OSError) as ei:
            open(g, "rb")
        assert ei.value.errno == 5
        assert len(os.listdir(mnt)) == 5


def test_export_stable_across_reads(tmp):
    """Many directories in the tree layout: reading every generated file
    twice in different orders gives the same bytes (the header cache may
    drop and remake them)."""
    rng = np.random.default_rng(9)
    tensors = {f"layers.{i}.{k}": ("F32", [i % 5 + 1], raw_bytes("F32", [i % 5 + 1], rng))
               for i in range(300) for k in ("w", "b")}
    src = os.path.join(tmp, "s.safetensors")
    write_st(src, [(n, d, s, raw) for n, (d, s, raw) in tensors.items()])
    with mounted(src, "-o", "export,layout=tree") as mnt:
        files = generated(mnt, tensors, True)
        first = {p: open(p, "rb").read() for p in sorted(files)}
        for p in sorted(files, reverse=True):
            assert open(p, "rb").read() == first[p]
            assert first[p] == write_reference({n: tensors[n] for n in files[p]}, None)


def test_export_with_npy_view(tmp):
    """format=npy changes the tensors' files, not the export's data."""
    p = os.path.join(tmp, "v.safetensors")
    t = {"w": ("F32", [2, 2], b"\1" * 16), "b": ("BF16", [3], b"\2" * 6)}
    write_st(p, [(n, d, s, raw) for n, (d, s, raw) in t.items()])
    with mounted(p, "-o", "export,format=npy") as mnt:
        assert open(os.path.join(mnt, "model.safetensors"), "rb").read() == write_reference(t, None)


def test_export_memory_bounded(tmp):
    """200,000 tensors in 20,000 directories, every generated file read,
    with the header cache cut to 4 MiB: the daemon's memory grows by about
    the largest header (the one in use), not by the sum of all, and a file
    whose header was dropped is made again with the same bytes."""
    from tfsutil import SANITIZED, daemon_pids
    if SANITIZED:
        pytest.skip("memory bounds are checked without the sanitizer's own memory")
    n = 200000
    src = os.path.join(tmp, "many.safetensors")
    write_st(src, [(f"layers.{i // 10}.w{i % 10}", "U8", [1], bytes([i % 251])) for i in range(n)])
    fuse_ok()
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    env = dict(os.environ, TENSORFS_EXPORT_BUDGET_MB="4")
    r = run(["-o", "export,layout=tree", src, mnt], env=env)
    assert r.returncode == 0, r.stderr
    pids = daemon_pids(mnt)
    try:
        base = vm_kb(pids[0], "VmRSS")
        root = open(os.path.join(mnt, "model.safetensors"), "rb").read()
        meta, t, _, _ = parse(root)
        assert len(t) == n and meta is None
        with_root = vm_kb(pids[0], "VmHWM")
        layers = os.path.join(mnt, "layers")
        names = sorted(f for f in os.listdir(layers) if f.endswith(".safetensors"))
        assert len(names) == n // 10
        for f in names:
            i = int(f.split(".")[0])
            _, small, _, _ = parse(open(os.path.join(layers, f), "rb").read())
            assert small == {f"layers.{i}.w{k}": ("U8", [1], bytes([(i * 10 + k) % 251])) for k in range(10)}
        layers_file = open(os.path.join(mnt, "layers.safetensors"), "rb").read()
        assert parse(layers_file)[1] == t
        # the root's header was dropped by now: made again, the same bytes
        assert open(os.path.join(mnt, "model.safetensors"), "rb").read() == root
        peak, now = vm_kb(pids[0], "VmHWM"), vm_kb(pids[0], "VmRSS")
        # one 200,000-tensor header in use (about 9 MiB with its order)
        # beside the 4 MiB cache; all of them together would be 3 times that
        assert peak - base < 2 * (with_root - base) + 16 * 1024, (base, with_root, peak)
        # and the dropped headers' memory is given back, not kept by the
        # allocator (it was, 60-100 MiB, until tfs_mem_init)
        assert now - base < with_root - base, (base, with_root, now)
    finally:
        unmount(mnt, pids)


def resident_pages(path):
    """Which pages of a file are in the page cache (mincore on a shared
    read-only mapping, which reads nothing)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = os.stat(path).st_size
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        page = os.sysconf("SC_PAGE_SIZE")
        vec = (ctypes.c_ubyte * ((size + page - 1) // page))()
        try:
            assert libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
        finally:
            libc.munmap(addr, size)
        return [bool(v & 1) for v in vec], page
    finally:
        os.close(fd)


def big_checkpoint(tmp, mib=96):
    rng = np.random.default_rng(5)
    t = {f"layers.{i}.w": ("F32", [1 << 19], rng.bytes(2 << 20)) for i in range(mib // 2)}
    src = os.path.join(tmp, "big.safetensors")
    write_st(src, [(n, d, s, raw) for n, (d, s, raw) in t.items()])
    return src, write_reference(t, None)


def test_export_drops_pages_behind_a_sequential_reader(tmp):
    """A cp-like read of a 96 MiB generated file leaves only the last few
    MiB of it in the page cache (the source's pages are not copied a second
    time into memory), and the bytes are right, read again and mapped."""
    import hashlib
    src, want = big_checkpoint(tmp)
    with mounted(src, "-o", "export,export_cache,readahead_kb=512") as mnt:
        g = os.path.join(mnt, "model.safetensors")
        h = hashlib.sha256()
        with open(g, "rb", buffering=0) as f:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
            while chunk := f.read(1 << 20):
                h.update(chunk)
        assert h.hexdigest() == hashlib.sha256(want).hexdigest()
        pages, page = resident_pages(g)
        resident = sum(pages) * page
        # 8 MiB kept behind the furthest request, up to 8 more before the
        # next drop, and readahead in flight; all of it would be 96 MiB
        assert resident <= 24 << 20, resident
        assert not any(pages[:len(pages) // 2]), "the first half is still cached"
        assert open(g, "rb").read() == want
        m = np.memmap(g, dtype=np.uint8, mode="r")
        assert hashlib.sha256(m.tobytes()).hexdigest() == hashlib.sha256(want).hexdigest()
        del m


def cached_pages(path):
    """How many pages of a file are in the page cache, by cachestat(2)
    (Linux 6.5): unlike mincore it maps nothing, and mapping a direct_io
    file drops its cached pages."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    rng = (ctypes.c_uint64 * 2)(0, 0)  # offset 0, length 0: to the end
    stat = (ctypes.c_uint64 * 5)()
    fd = os.open(path, os.O_RDONLY)
    try:
        r = libc.syscall(451, fd, ctypes.byref(rng), ctypes.byref(stat), 0)
        assert r == 0, os.strerror(ctypes.get_errno())
    finally:
        os.close(fd)
    return stat[0]


def test_export_reads_bypass_the_page_cache(tmp):
    """Where the kernel lets a direct_io file be mapped shared (Linux 6.6),
    generated files are read with direct I/O: a sequential read caches no
    page of them, and np.memmap and mmap(MAP_SHARED) still read the right
    bytes. -o export_cache keeps them in the page cache (which is how this
    test knows it can see cached pages at all)."""
    import hashlib
    import mmap
    if not kernel_at_least(6, 6):
        pytest.skip("kernel before 6.6: no FUSE_DIRECT_IO_ALLOW_MMAP, generated files use the page cache")
    src, want = big_checkpoint(tmp, mib=32)
    digest = hashlib.sha256(want).hexdigest()
    for opts, cached in (("export", False), ("export,export_cache", True)):
        with mounted(src, "-o", opts) as mnt:
            g = os.path.join(mnt, "model.safetensors")
            with open(g, "rb", buffering=0) as f:
                got = b"".join(iter(lambda: f.read(1 << 20), b""))
            assert hashlib.sha256(got).hexdigest() == digest, opts
            n = cached_pages(g)
            assert (n > len(want) // 8192) if cached else n == 0, (opts, n)
            m = np.memmap(g, dtype=np.uint8, mode="r")
            assert hashlib.sha256(m.tobytes()).hexdigest() == digest, opts
            del m
            with open(g, "rb") as f:
                mm = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
                off = len(want) // 3
                assert mm[off:off + 4096] == want[off:off + 4096]
                # reads through read() stay right while a mapping is open
                assert os.pread(f.fileno(), 4096, off + 1) == want[off + 1:off + 4097]
                mm.close()


def test_export_keeps_pages_of_a_reader_that_jumps(tmp):
    """Reads that jump around the file (tensor by tensor, as a loader that
    maps the file does) are not taken for a sequential run: every page
    read stays cached."""
    src, want = big_checkpoint(tmp)
    size = len(want)
    half = size // 2
    offs = [o for i in range(16) for o in (i * (3 << 20), half + i * (3 << 20))]
    with mounted(src, "-o", "export,export_cache,readahead_kb=512") as mnt:
        g = os.path.join(mnt, "model.safetensors")
        with open(g, "rb", buffering=0) as f:
            for o in offs:
                f.seek(o)
                assert f.read(65536) == want[o:o + 65536]
        pages, page = resident_pages(g)
        gone = [o for o in offs if not all(pages[o // page:(o + 65536) // page])]
        assert not gone, f"pages dropped at {gone}"


@pytest.mark.parametrize("opts", ["export,export_cache", "export"])
def test_export_drop_behind_single_thread_ends_on_sigterm(tmp, opts):
    """With -s one thread answers every request: two readers, one far
    behind the other, and a SIGTERM in the middle. The drops are made by
    a thread of their own, so nothing waits on itself: the bytes read are
    right and the daemon ends, unmounted. The same with direct I/O."""
    import threading
    from tfsutil import daemon_pids, wait_gone
    src, want = big_checkpoint(tmp)
    fuse_ok()
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = run(["-s", "-o", opts + ",readahead_kb=512", src, mnt])
    assert r.returncode == 0, r.stderr
    pids = daemon_pids(mnt)
    g = os.path.join(mnt, "model.safetensors")
    try:
        got = {}

        def reader(k, pause):
            out = bytearray()
            with open(g, "rb", buffering=0) as f:
                while chunk := f.read(1 << 20):
                    out += chunk
                    if pause:
                        pause.wait(0.002)
            got[k] = bytes(out)
        slow = threading.Event()
        ts = [threading.Thread(target=reader, args=("fast", None)),
              threading.Thread(target=reader, args=("slow", slow))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        assert not any(t.is_alive() for t in ts), "a reader hung"
        assert got["fast"] == want and got["slow"] == want

        # and once more, ended while a reader is in the middle of the file
        stop = threading.Thread(target=lambda: subprocess.run(["cat", g], capture_output=True,
                                                              timeout=60))
        stop.start()
        import time
        time.sleep(0.05)
        os.kill(pids[0], 15)
        assert wait_gone(pids[0], timeout=20), "the daemon did not end after SIGTERM"
        stop.join(60)
        assert not stop.is_alive()
        assert not is_mounted(mnt)
    finally:
        unmount(mnt, pids)


def test_export_leaves_out_a_tensor_named_metadata(tmp):
    """An .npz (or GGUF, or pickle) may hold a tensor named __metadata__,
    the key safetensors keeps for its metadata: it keeps its own file and
    is left out of every generated file with the warning, which stays valid
    by the reference rules (one __metadata__ key, an object of strings)."""
    src = os.path.join(tmp, "m.npz")
    a = np.arange(6, dtype=np.float32)
    np.savez(src, **{"__metadata__": np.ones(3, np.float32), "w": a})
    fuse_ok()
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = subprocess.run([BIN, "-o", "export", src, mnt], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    try:
        assert "leaves out 1 tensor that safetensors cannot hold ('__metadata__': the name safetensors keeps for its metadata)" in r.stderr, r.stderr
        blob = open(os.path.join(mnt, "model.safetensors"), "rb").read()
        n = struct.unpack("<Q", blob[:8])[0]
        pairs = json.loads(blob[8:8 + n], object_pairs_hook=lambda kv: kv)
        assert [k for k, _ in pairs].count("__metadata__") <= 1
        meta, t, _, _ = parse(blob)
        assert t == {"w": ("F32", [6], a.tobytes())}
        assert all(isinstance(v, str) for v in (meta or {}).values())
        # its own file is there (the escaped name), with its bytes
        own = [f for f in os.listdir(mnt) if "metadata" in f and f != "__metadata__.json"]
        assert len(own) == 1 and open(os.path.join(mnt, own[0]), "rb").read() == np.ones(3, np.float32).tobytes()
    finally:
        unmount(mnt)


def test_export_gguf_metadata_not_utf8_left_out_and_logged(tmp):
    """A GGUF key (or string value) that is not UTF-8: __metadata__.json
    shows it with U+FFFD, the generated files leave it out, and the log
    says so, as the README promises."""
    a = np.arange(4, dtype=np.float32)
    blob = G.build(kvs=[("general.name", G.STR, "ok"), (b"bad.key\xff", G.U32, 7),
                        ("bad.value", G.STR, b"x\xfey"), ("good.arr", G.ARR, (G.STR, ["a", "b"]))],
                   tensors=[("w", G.ID["F32"], [4], a.tobytes())])
    src = os.path.join(tmp, "k.gguf")
    open(src, "wb").write(blob)
    fuse_ok()
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    p = subprocess.Popen([BIN, "-f", "-o", "export", src, mnt], stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 20
        while not is_mounted(mnt) and time.time() < deadline:
            time.sleep(0.02)
        meta = json.load(open(os.path.join(mnt, "__metadata__.json")))
        assert "bad.key\ufffd" in meta and meta["bad.value"]["value"] == "x\ufffdy"
        emeta, t, _, _ = parse(open(os.path.join(mnt, "model.safetensors"), "rb").read())
        assert t == {"w": ("F32", [4], a.tobytes())}
        assert sorted(emeta) == ["general.name", "good.arr"], emeta
        assert not any("\ufffd" in k or "\ufffd" in v for k, v in emeta.items())
    finally:
        subprocess.run(["fusermount3", "-u", mnt])
        err = p.communicate(timeout=30)[1].decode()
    assert "metadata key 'bad.key\\xff' is not UTF-8 text and is left out" in err, err
    assert "metadata key 'bad.value' is not UTF-8 text and is left out" in err, err


@pytest.mark.parametrize("n", [230, 239, 240, 243, 244, 250, 255])
def test_tree_paths_do_not_depend_on_export(tmp, n):
    """A directory name of 240-255 bytes took the hashed short form only
    with -o export (room for '.dir.safetensors'): the room is now kept
    always, so a tensor has one path either way."""
    d = "d" * n
    name = f"{d}.w"
    src = os.path.join(tmp, "t.safetensors")
    write_st(src, [(name, "U8", (3,), b"abc"), ("x.y", "U8", (1,), b"z")])
    paths = []
    for opts in ([], ["-o", "export"]):
        with mounted(src, "-o", "layout=tree", *opts) as mnt:
            dirs = [e for e in os.listdir(mnt) if os.path.isdir(os.path.join(mnt, e)) and e != "x"]
            assert len(dirs) == 1
            p = os.path.join(mnt, dirs[0], "w")
            assert open(p, "rb").read() == b"abc"
            assert os.getxattr(p, "user.name").decode() == name
            paths.append(os.path.relpath(p, mnt))
            if opts:
                assert os.path.exists(os.path.join(mnt, dirs[0] + ".safetensors"))
    assert paths[0] == paths[1]
    assert (len(paths[0].split("/")[0]) == n) == (n <= 239)
