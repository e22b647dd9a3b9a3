"""Issue 26: tensorfs --stats (against numpy, every dtype) and tensorfs diff
(across formats and sources, figures against numpy)."""

import json
import os
import shutil

import numpy as np
import pytest

import gen_gguf as G
from servers import Nginx
from tfsutil import EXIT_USAGE, REAL, mounted, need_real, run, write_st


def bf16_bits(a):
    """float32 -> bfloat16 bit patterns (round to nearest even)."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def special_f32(rng, n):
    a = rng.standard_normal(n).astype(np.float32) * 3
    a[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -3e-45, np.float32(3.4e38)]
    return a


def stats_tensors():
    """(name, dtype, values as stored) for every dtype numpy knows, with
    NaN, Inf, subnormals, zeros, empty and constant tensors."""
    rng = np.random.default_rng(26)
    out = [("f32", "F32", special_f32(rng, 1000).reshape(10, 100)),
           ("f64", "F64", np.concatenate([[np.nan, -np.inf, 5e-324, 0.0], rng.standard_normal(500) * 1e6])),
           ("f16", "F16", np.concatenate([np.array([np.nan, np.inf, 6e-8, -0.0], np.float16),
                                          rng.standard_normal(300).astype(np.float16)])),
           ("empty", "F32", np.zeros((0, 3), np.float32)),
           ("constant", "F32", np.full(17, 2.5, np.float32)),
           ("scalar", "F64", np.array(-7.25)),
           ("all_nan", "F32", np.full(4, np.nan, np.float32)),
           ("bool", "BOOL", rng.integers(0, 2, 99).astype(np.bool_))]
    for dt, npt in [("U8", np.uint8), ("I8", np.int8), ("U16", np.uint16), ("I16", np.int16),
                    ("U32", np.uint32), ("I32", np.int32), ("U64", np.uint64), ("I64", np.int64)]:
        info = np.iinfo(npt)
        out.append((dt.lower(), dt, rng.integers(info.min, info.max, 257, dtype=npt, endpoint=True)))
    bits = bf16_bits(special_f32(rng, 512))
    out.append(("bf16", "BF16", bits))
    return out


def reference(v):
    with np.errstate(invalid="ignore"):  # signalling NaNs (F8_E5M2's) cast quietly
        v = np.asarray(v, np.float64).ravel()
    fin = v[np.isfinite(v)]
    ref = {"count": v.size, "finite": fin.size, "nan": int(np.isnan(v).sum()), "inf": int(np.isinf(v).sum()),
           "zeros": int((fin == 0).sum())}
    if fin.size:
        counts, edges = np.histogram(fin, 64)
        ref.update(min=fin.min(), max=fin.max(), mean=fin.mean(), std=fin.std(), absmax=np.abs(fin).max(),
                   counts=counts.tolist(), lo=edges[0], hi=edges[-1])
    return ref


def test_stats_against_numpy(tmp):
    """--stats --json: counts, min, max, abs max and the 64-bin histogram as
    numpy gives them (np.histogram of the finite values as float64), mean and
    std to 1e-12; a table without --json."""
    ts = stats_tensors()
    src = os.path.join(tmp, "s.safetensors")
    write_st(src, [(n, dt, a.shape, np.ascontiguousarray(a).tobytes()) for n, dt, a in ts])
    r = run(["--stats", "--json", src])
    assert r.returncode == 0, r.stderr
    got = {t["name"]: t for t in json.loads(r.stdout)["tensors"]}
    assert set(got) == {n for n, _, _ in ts}
    for name, dt, a in ts:
        vals = bf16_values(a) if dt == "BF16" else a
        ref, s = reference(vals), got[name]["stats"]
        assert got[name]["dtype"] == dt
        for k in ("count", "finite", "nan", "inf", "zeros"):
            assert s[k] == ref[k], (name, k)
        if not ref["finite"]:
            assert s["min"] is None and s["histogram"]["counts"] == []
            continue
        for k in ("min", "max", "absmax"):
            assert s[k] == ref[k], (name, k)
        for k in ("mean", "std"):
            assert s[k] == pytest.approx(ref[k], rel=1e-12, abs=1e-300), (name, k)
        h = s["histogram"]
        assert (h["lo"], h["hi"]) == (ref["lo"], ref["hi"]), name
        assert h["counts"] == ref["counts"], name
    table = run(["--stats", src])
    assert table.returncode == 0
    lines = table.stdout.splitlines()
    assert lines[0].split()[:3] == ["name", "dtype", "count"] and len(lines) == len(ts) + 1


def test_stats_of_quantized_gguf_through_the_f32_decoder(tmp):
    """Block types are counted as their exact float32 values, the ones the
    convert=f32 view serves."""
    rng = np.random.default_rng(7)
    blocks = G.random_blocks(2, 8, rng)
    p = os.path.join(tmp, "q.gguf")
    open(p, "wb").write(G.build([], [("q", 2, [256], blocks)]))
    with mounted(p, "-o", "convert=f32") as mnt:
        vals = np.fromfile(os.path.join(mnt, "q"), np.float32)
    r = run(["--stats", "--json", p])
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)["tensors"][0]["stats"]
    ref = reference(vals)
    assert s["count"] == 256 and s["min"] == ref["min"] and s["max"] == ref["max"]
    assert s["histogram"]["counts"] == ref["counts"]


def figures(a, b):
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    d = a - b
    return {"max_abs": np.abs(d).max(), "rel_l2": np.linalg.norm(d) / np.linalg.norm(a),
            "cosine": float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))}


@pytest.fixture
def pair(tmp):
    rng = np.random.default_rng(11)
    tensors = {f"layers.{i}.w": rng.standard_normal((32, 48)).astype(np.float32) for i in range(4)}
    tensors["bias"] = rng.standard_normal(48).astype(np.float32)
    a = os.path.join(tmp, "a.safetensors")
    write_st(a, [(n, "F32", v.shape, v.tobytes()) for n, v in tensors.items()])
    return a, tensors


def diff(*args):
    r = run(["diff", "--json"] + list(args))
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)


def test_diff_same_file_reads_nothing(pair):
    a, tensors = pair
    rc, d = diff(a, a)
    assert rc == 0 and d["same"] and d["bytes_read"] == 0
    assert d["summary"]["identical"] == len(tensors)
    t = run(["diff", a, a])
    assert t.returncode == 0 and t.stdout.splitlines()[-1].startswith(f"{len(tensors)} identical")


def test_diff_finds_the_changed_tensor(pair, tmp):
    """A copy with one changed tensor: that tensor differs, with the figures
    numpy gives; the others are identical by their bytes; exit 1."""
    a, tensors = pair
    b = os.path.join(tmp, "b.safetensors")
    changed = dict(tensors)
    w = tensors["layers.2.w"].copy()
    w[3, 5] += 0.25
    w[7] *= 1.001
    changed["layers.2.w"] = w
    write_st(b, [(n, "F32", v.shape, v.tobytes()) for n, v in changed.items()])
    rc, d = diff(a, b)
    assert rc == 1 and not d["same"]
    rows = {t["name"]: t for t in d["tensors"]}
    assert [n for n, t in rows.items() if t["status"] != "identical"] == ["layers.2.w"]
    t, ref = rows["layers.2.w"], figures(tensors["layers.2.w"], w)
    assert t["status"] == "differs"
    assert t["max_abs"] == pytest.approx(ref["max_abs"], rel=1e-12)
    assert t["rel_l2"] == pytest.approx(ref["rel_l2"], rel=1e-9)
    assert t["cosine"] == pytest.approx(ref["cosine"], rel=1e-12)
    assert t["nan_a"] == t["nan_b"] == 0
    text = run(["diff", a, b])
    assert text.returncode == 1 and "differs" in text.stdout and "layers.2.w" in text.stdout


def test_diff_against_its_export(pair):
    a, tensors = pair
    with mounted(a, "-o", "export") as mnt:
        rc, d = diff(a, os.path.join(mnt, "model.safetensors"))
    assert rc == 0 and d["summary"]["identical"] == len(tensors)


def test_diff_by_value_across_dtypes_and_formats(tmp):
    """A BF16 checkpoint equals its F32 twin and a GGUF of the same values
    by value (exit 0); NaNs at the same places are equal."""
    rng = np.random.default_rng(5)
    vals = {f"t{i}": special_f32(rng, 256).reshape(16, 16) for i in range(3)}
    bits = {n: bf16_bits(v) for n, v in vals.items()}
    f32 = {n: bf16_values(b).reshape(16, 16) for n, b in bits.items()}
    a = os.path.join(tmp, "bf16.safetensors")
    write_st(a, [(n, "BF16", (16, 16), b.tobytes()) for n, b in bits.items()])
    b = os.path.join(tmp, "f32.safetensors")
    write_st(b, [(n, "F32", (16, 16), v.tobytes()) for n, v in f32.items()])
    g = os.path.join(tmp, "f32.gguf")
    open(g, "wb").write(G.build([], [(n, 0, [16, 16], v.tobytes()) for n, v in f32.items()]))
    for other in (b, g):
        rc, d = diff(a, other)
        assert rc == 0, d
        assert d["summary"]["equal"] == 3 and all(t["status"] == "equal" for t in d["tensors"])
        for t in d["tensors"]:
            v = f32[t["name"]]
            assert t["nan_a"] == t["nan_b"] == np.isnan(v).sum() == 1
            assert t["inf_a"] == t["inf_b"] == np.isinf(v).sum() >= 2
    # the f32 view of the BF16 file, raw: compare the bytes of one tensor
    with mounted(a, "-o", "convert=f32") as mnt:
        assert open(os.path.join(mnt, "t0"), "rb").read() == f32["t0"].tobytes()


def test_diff_names_and_shapes(pair, tmp):
    a, tensors = pair
    b = os.path.join(tmp, "b.safetensors")
    t = dict(tensors)
    del t["bias"]
    t["extra"] = np.zeros(3, np.float32)
    t["layers.0.w"] = tensors["layers.0.w"].reshape(48, 32)
    write_st(b, [(n, "F32", v.shape, v.tobytes()) for n, v in t.items()])
    rc, d = diff(a, b)
    rows = {x["name"]: x["status"] for x in d["tensors"]}
    assert rc == 1 and rows["bias"] == "only_a" and rows["extra"] == "only_b" and rows["layers.0.w"] == "shape"


def test_diff_trouble_and_usage(pair, tmp):
    a, _ = pair
    r = run(["diff", a, os.path.join(tmp, "nope.safetensors")])
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    r = run(["diff", a])
    assert r.returncode == EXIT_USAGE and "missing B" in r.stderr


def test_diff_over_http_knows_the_same_version(pair, tmp):
    """The same URL and ETag on both sides: identical, with no data read
    (only the first request of each mount's file)."""
    a, tensors = pair
    root = os.path.join(tmp, "www")
    os.makedirs(root)
    shutil.copy(a, os.path.join(root, "a.safetensors"))
    for p in (tmp, root, os.path.join(root, "a.safetensors")):
        os.chmod(p, 0o755)
    with Nginx(root) as ng:
        url = ng.url("plain", "a.safetensors")
        ng.clear_log()
        rc, d = diff(url, url)
        assert rc == 0 and d["bytes_read"] == 0
        size = os.path.getsize(a)
        assert all(r["range"] in ("bytes=0-99999", f"bytes=0-{size - 1}") or r["range"] == "" for r in ng.requests()) \
            and len(ng.requests()) == 2, ng.requests()
        rc, d = diff(url, a)
        assert rc == 0 and d["summary"]["identical"] == len(tensors) and d["bytes_read"] > 0


def test_stats_files_beside_tensors(tmp):
    """-o stats: NAME.stats.json beside every tensor file, of a fixed size
    known before it is read, holding what --stats --json says; a tensor
    named like a statistics file keeps its own file (its '.' as %2E); a name
    with no room for the suffix gets __stats_INODE__.json."""
    ts = stats_tensors()
    long = "x" * 250
    extra = [("f32.stats.json", "F32", np.arange(4, dtype=np.float32)), (long, "U8", np.arange(3, dtype=np.uint8))]
    src = os.path.join(tmp, "s.safetensors")
    write_st(src, [(n, dt, a.shape, np.ascontiguousarray(a).tobytes()) for n, dt, a in ts + extra])
    want = {t["name"]: t["stats"] for t in json.loads(run(["--stats", "--json", src]).stdout)["tensors"]}
    with mounted(src, "-o", "stats") as mnt:
        files = set(os.listdir(mnt))
        for name, _, _ in ts:
            p = os.path.join(mnt, name + ".stats.json")
            size = os.stat(p).st_size
            text = open(p, "rb").read()
            assert len(text) == size and text.endswith(b"\n")
            assert json.loads(text) == want[name], name
        assert "f32%2Estats.json" in files and "f32.stats.json" in files
        assert os.getxattr(os.path.join(mnt, "f32%2Estats.json"), "user.name").decode() == "f32.stats.json"
        assert json.load(open(os.path.join(mnt, "f32%2Estats.json.stats.json"))) == want["f32.stats.json"]
        assert json.load(open(os.path.join(mnt, "f32.stats.json"))) == want["f32"]
        fallback = [f for f in files if f.startswith("__stats_")]
        assert len(fallback) == 1 and json.load(open(os.path.join(mnt, fallback[0]))) == want[long]
    with mounted(src, "-o", "stats,layout=tree,format=npy") as mnt:
        assert json.load(open(os.path.join(mnt, "f16.npy.stats.json"))) == want["f16"]


def test_stats_option_off_by_default(tmp):
    src = os.path.join(tmp, "s.safetensors")
    write_st(src, [("w", "F32", (2,), np.ones(2, np.float32).tobytes())])
    with mounted(src) as mnt:
        assert sorted(os.listdir(mnt)) == ["__metadata__.json", "__tensors__.tsv", "w"]


def test_diff_against_its_f32_view():
    """A real BF16 checkpoint against the export of its convert=f32 view:
    every tensor equal by value, exit 0; against its raw export: identical."""
    need_real()
    src = os.path.join(REAL, "diffusers_sd15_lora_naruto_bf16.safetensors")
    with mounted(src, "-o", "convert=f32,export") as mnt:
        rc, d = diff(src, os.path.join(mnt, "model.safetensors"))
    assert rc == 0 and d["summary"]["equal"] == len(d["tensors"]) > 100
    assert all(t["dtype_a"] == "BF16" and t["dtype_b"] == "F32" and t["max_abs"] == 0 for t in d["tensors"])
    with mounted(src, "-o", "export") as mnt:
        rc, d = diff(src, os.path.join(mnt, "model.safetensors"))
    assert rc == 0 and d["summary"]["identical"] > 100 and d["summary"]["equal"] == 0


@pytest.mark.parametrize("dt", ["F8_E4M3", "F8_E5M2", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ"])
def test_stats_of_f8_through_the_f32_decoder(tmp, dt):
    """The F8 family (every bit pattern, NaN and Inf where the type has
    them) counts as the float32 values the convert=f32 view serves."""
    raw = bytes(range(256)) * 3
    src = os.path.join(tmp, "f8.safetensors")
    write_st(src, [("w", dt, (len(raw),), raw)])
    with mounted(src, "-o", "convert=f32") as mnt:
        vals = np.fromfile(os.path.join(mnt, "w"), np.float32)
    r = run(["--stats", "--json", src])
    assert r.returncode == 0, r.stderr
    s, ref = json.loads(r.stdout)["tensors"][0]["stats"], reference(vals)
    for k in ("count", "finite", "nan", "inf", "zeros", "min", "max", "absmax", "counts"):
        assert (s["histogram"]["counts"] if k == "counts" else s[k]) == ref[k], (dt, k)
    assert s["mean"] == pytest.approx(ref["mean"], rel=1e-12) and s["std"] == pytest.approx(ref["std"], rel=1e-12)
