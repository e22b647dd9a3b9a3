"""Sharded checkpoints as one tree (index file, directory with an index,
directory of shards, Hugging Face cache symlinks), consistency refusals, and
the tree layout."""

import json
import os
import subprocess

import pytest

from checkpoints import write_sharded
from tfsutil import (EXIT_FORMAT, EXIT_SOURCE, REAL, daemon_pids, fname, fuse_ok,
                     is_mounted, mounted, need_real, run, sha256, unmount, write_st)

JULIA = os.path.join(REAL, "julia-safetensors-jl-sharded")
EXPECTED = os.path.join(REAL, "expected.json")


def make_sharded(d, shards, index=True, metadata=None, shard_meta=None, weight_map=None):
    """shards: {file name: [(name, dtype, shape, bytes)]}. Returns the index path."""
    os.makedirs(d, exist_ok=True)
    wm = {}
    total = 0
    for sname, tensors in shards.items():
        write_st(os.path.join(d, sname), tensors,
                 metadata=(shard_meta or {}).get(sname, {"format": "pt"}))
        for t in tensors:
            wm[t[0]] = sname
            total += len(t[3])
    path = os.path.join(d, "model.safetensors.index.json")
    if index:
        with open(path, "w") as f:
            json.dump({"metadata": metadata if metadata is not None else {"total_size": total},
                       "weight_map": weight_map if weight_map is not None else wm}, f, indent=2)
    return path


def tensors_for(i, n=3):
    return [(f"model.layers.{i}.w{k}", "U8", (k + 1,), bytes([i % 256]) * (k + 1)) for k in range(n)]


def read_all(mnt):
    """{user.name: (relative path, bytes, user.source)} over the whole tree."""
    out = {}
    for root, dirs, files in os.walk(mnt):
        for f in files:
            p = os.path.join(root, f)
            if (root == mnt and f in ("__metadata__.json", "__index__.json")) or f == "__tensors__.tsv":
                continue
            name = os.getxattr(p, "user.name").decode("utf-8", "surrogatepass")
            assert name not in out, f"tensor {name!r} reachable twice"
            with open(p, "rb") as fh:
                out[name] = (os.path.relpath(p, mnt), fh.read(), os.getxattr(p, "user.source").decode())
    return out


@pytest.mark.parametrize("as_index", [False, True])
def test_real_sharded(as_index):
    need_real()
    exp = json.load(open(EXPECTED))["files"]
    src = os.path.join(JULIA, "model.safetensors.index.json") if as_index else JULIA
    want = {}
    for rel, e in exp.items():
        if rel.startswith("julia-safetensors-jl-sharded/") and e["kind"] == "safetensors":
            for name, t in e["tensors"].items():
                want[name] = (os.path.basename(rel), t)
    assert len(want) == 36
    with mounted(src) as mnt:
        assert sorted(os.listdir(mnt)) == sorted([fname(n) for n in want] +
                                                 ["__metadata__.json", "__index__.json", "__tensors__.tsv"])
        for name, (shard, t) in want.items():
            p = os.path.join(mnt, fname(name))
            assert sha256(p) == t["sha256"], name
            assert os.getxattr(p, "user.dtype").decode() == t["dtype"]
            assert json.loads(os.getxattr(p, "user.shape")) == t["shape"]
            assert os.getxattr(p, "user.source").decode() == os.path.join(os.path.realpath(JULIA), shard)
        with open(os.path.join(mnt, "__index__.json")) as f:
            assert json.load(f) == json.load(open(os.path.join(JULIA, "model.safetensors.index.json")))
        with open(os.path.join(mnt, "__metadata__.json")) as f:
            assert json.load(f) == {"format": "pt"}


@pytest.mark.parametrize("which", ["gopu-inc_agentV1_phi3", "jasonfr6_AI7_mistral7b"])
def test_real_index_only_refused(which, tmp):
    need_real()
    d = os.path.join(REAL, "index-only", which)
    r = run([d, tmp])
    idx = os.path.join(d, "model.safetensors.index.json")
    assert r.returncode == EXIT_SOURCE
    assert r.stderr == f"tensorfs: {idx}: shard 'model-00001-of-00002.safetensors': cannot open: No such file or directory (tensorfs --inspect shows what the index alone tells)\n"


@pytest.mark.parametrize("index", [True, False])
def test_64_shards(tmp, index):
    d = os.path.join(tmp, "m")
    shards = {f"model-{i + 1:05d}-of-00064.safetensors": tensors_for(i) for i in range(64)}
    idx = make_sharded(d, shards, index=index)
    with mounted(idx if index else d) as mnt:
        got = read_all(mnt)
        assert len(got) == 64 * 3
        for sname, ts in shards.items():
            for name, _, _, raw in ts:
                rel, data, source = got[name]
                assert data == raw and rel == name
                assert source == os.path.join(os.path.realpath(d), sname)
        assert ("__index__.json" in os.listdir(mnt)) == index
        assert json.load(open(os.path.join(mnt, "__metadata__.json"))) == {"format": "pt"}


def test_hf_cache_symlinks(tmp):
    """snapshots/<rev>/x.safetensors -> ../../blobs/<sha>, as the HF cache does."""
    staging = os.path.join(tmp, "staging")
    shards = {f"model-0000{i + 1}-of-00003.safetensors": tensors_for(i) for i in range(3)}
    make_sharded(staging, shards)
    repo = os.path.join(tmp, "models--org--name")
    blobs = os.path.join(repo, "blobs")
    snap = os.path.join(repo, "snapshots", "0123abcd")
    os.makedirs(blobs)
    os.makedirs(snap)
    for f in os.listdir(staging):
        digest = sha256(os.path.join(staging, f))
        os.rename(os.path.join(staging, f), os.path.join(blobs, digest))
        os.symlink(os.path.join("..", "..", "blobs", digest), os.path.join(snap, f))
    for src in (snap, os.path.join(snap, "model.safetensors.index.json")):
        with mounted(src) as mnt:
            got = read_all(mnt)
            assert len(got) == 9
            for sname, ts in shards.items():
                for name, _, _, raw in ts:
                    assert got[name][1] == raw
                    # user.source names the shard, not the blob
                    assert got[name][2] == os.path.join(os.path.realpath(snap), sname)


def refused(src, tmp, code=EXIT_FORMAT):
    fuse_ok()
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt, exist_ok=True)
    r = run([src, mnt])
    assert r.returncode == code, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert not is_mounted(mnt)
    return r.stderr


def test_inconsistent_index(tmp):
    base = {"a.safetensors": [("x", "U8", (1,), b"1"), ("y", "U8", (1,), b"2")],
            "b.safetensors": [("z", "U8", (1,), b"3")]}

    def case(name, **kw):
        d = os.path.join(tmp, name)
        return make_sharded(d, base, **kw)

    idx = case("missing", weight_map={"x": "a.safetensors", "y": "a.safetensors",
                                      "z": "b.safetensors", "ghost": "b.safetensors"})
    msg = refused(idx, tmp)
    assert msg == f"tensorfs: {idx}: weight_map puts tensor 'ghost' in shard 'b.safetensors', which does not hold it (no shard does)\n"

    idx = case("wrong", weight_map={"x": "a.safetensors", "y": "b.safetensors", "z": "b.safetensors"})
    msg = refused(idx, tmp)
    assert msg == f"tensorfs: {idx}: weight_map puts tensor 'y' in shard 'b.safetensors', which does not hold it (shard 'a.safetensors' does)\n"

    idx = case("unlisted", weight_map={"x": "a.safetensors", "z": "b.safetensors"})
    msg = refused(idx, tmp)
    assert msg == f"tensorfs: {idx}: shard 'a.safetensors' holds tensor 'y', which weight_map does not list for it\n"

    for bad in ("/etc/passwd", "../a.safetensors", "sub/a.safetensors", "..", ".", ""):
        idx = case("path" + str(abs(hash(bad))), weight_map={"x": bad, "y": "a.safetensors", "z": "b.safetensors"})
        msg = refused(idx, tmp)
        assert msg.startswith(f"tensorfs: {idx}: weight_map puts tensor 'x' in shard ")
        assert "a shard must be a plain file name in the index's directory" in msg

    idx = case("gone")
    os.unlink(os.path.join(os.path.dirname(idx), "b.safetensors"))
    msg = refused(idx, tmp, EXIT_SOURCE)
    assert msg == f"tensorfs: {idx}: shard 'b.safetensors': cannot open: No such file or directory (tensorfs --inspect shows what the index alone tells)\n"

    idx = case("dangling")
    os.unlink(os.path.join(os.path.dirname(idx), "b.safetensors"))
    os.symlink("../../blobs/nothing", os.path.join(os.path.dirname(idx), "b.safetensors"))
    msg = refused(idx, tmp, EXIT_SOURCE)
    assert msg.startswith(f"tensorfs: {idx}: shard 'b.safetensors': cannot open")

    idx = case("shard-is-dir")
    os.unlink(os.path.join(os.path.dirname(idx), "b.safetensors"))
    os.mkdir(os.path.join(os.path.dirname(idx), "b.safetensors"))
    msg = refused(idx, tmp, EXIT_SOURCE)
    assert msg == f"tensorfs: {idx}: shard 'b.safetensors': is a directory, not a checkpoint file\n"

    idx = case("bad-shard")
    with open(os.path.join(os.path.dirname(idx), "b.safetensors"), "r+b") as f:
        f.truncate(20)
    msg = refused(idx, tmp)
    assert msg.startswith(f"tensorfs: {idx}: shard 'b.safetensors': truncated file")

    idx = case("bad-json")
    with open(idx, "w") as f:
        f.write('{"weight_map": {"x": "a.safetensors",}}')
    msg = refused(idx, tmp)
    assert msg.startswith(f"tensorfs: {idx}: invalid index JSON")

    idx = case("no-weight-map")
    with open(idx, "w") as f:
        f.write('{"metadata": {}}')
    assert "no \"weight_map\" object" in refused(idx, tmp)


def test_tensor_in_two_shards(tmp):
    d = os.path.join(tmp, "two")
    make_sharded(d, {"a.safetensors": [("x", "U8", (1,), b"1")],
                     "b.safetensors": [("x", "U8", (1,), b"2")]}, index=False)
    msg = refused(d, tmp)
    assert msg == (f"tensorfs: {d}: tensor 'x' is in two shards, 'a.safetensors' and 'b.safetensors': "
                   "the directory seems to hold more than one model; mount one file\n")


def test_several_indexes_refused(tmp):
    d = os.path.join(tmp, "many")
    make_sharded(d, {"a.safetensors": [("x", "U8", (1,), b"1")]})
    os.link(os.path.join(d, "model.safetensors.index.json"),
            os.path.join(d, "diffusion_pytorch_model.safetensors.index.json"))
    msg = refused(d, tmp)
    assert msg == (f"tensorfs: {d}: the directory holds 2 index files (diffusion_pytorch_model.safetensors.index.json, "
                   "model.safetensors.index.json); pass the one to mount\n")
    with mounted(os.path.join(d, "diffusion_pytorch_model.safetensors.index.json")) as mnt:
        assert open(os.path.join(mnt, "x"), "rb").read() == b"1"


def test_total_size_warning(tmp):
    d = os.path.join(tmp, "ts")
    idx = make_sharded(d, {"a.safetensors": [("x", "U8", (3,), b"abc")]}, metadata={"total_size": 99})
    fuse_ok()
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = run([idx, mnt])
    try:
        assert r.returncode == 0
        assert r.stderr == f"tensorfs: {idx}: warning: metadata.total_size is 99 but the shards' tensors hold 3 bytes\n"
        assert open(os.path.join(mnt, "x"), "rb").read() == b"abc"
    finally:
        unmount(mnt, daemon_pids(mnt))


def test_metadata_disagreeing_shards(tmp):
    d = os.path.join(tmp, "md")
    make_sharded(d, {"a.safetensors": [("x", "U8", (1,), b"1")], "b.safetensors": [("y", "U8", (1,), b"2")]},
                 shard_meta={"a.safetensors": {"format": "pt"}, "b.safetensors": {"format": "np", "k": "v"}})
    with mounted(d) as mnt:
        with open(os.path.join(mnt, "__metadata__.json")) as f:
            text = f.read()
        assert json.loads(text) == {"a.safetensors": {"format": "pt"}, "b.safetensors": {"format": "np", "k": "v"}}
        assert text.startswith('{\n  "a.safetensors": {\n    "format": "pt"\n  },\n')
    # same keys in another order still agree
    d2 = os.path.join(tmp, "md2")
    make_sharded(d2, {"a.safetensors": [("x", "U8", (1,), b"1")], "b.safetensors": [("y", "U8", (1,), b"2")]},
                 shard_meta={"a.safetensors": {"p": "1", "q": "2"}, "b.safetensors": {"q": "2", "p": "1"}})
    with mounted(d2) as mnt:
        assert json.load(open(os.path.join(mnt, "__metadata__.json"))) == {"p": "1", "q": "2"}


def tree_path(name, all_names):
    """The documented tree layout, written again in Python."""
    comps = name.split(".")
    path = [fname(c) for c in comps]
    if any(n.startswith(name + ".") for n in all_names):
        path[-1] += ".tensor"
    return "/".join(path)


TREE_NAMES = [
    "model.layers.0.mlp.down_proj.weight", "model.layers.0.mlp.up_proj.weight",
    "model.layers.1.mlp.down_proj.weight", "model.layers.1.self_attn.q_proj.weight",
    "model.embed_tokens.weight", "lm_head.weight",
    "a.b", "a.b.c", "a.b.c.d",              # a tensor that is also a directory, twice
    "x..y", ".lead", "trail.", "..", ".", "",  # empty components
    "p/q.r", "%.s", "\u00e9.e\u0301",        # components that need escaping, forms kept apart
    "__metadata__.json", "__index__.json",  # synthetic look-alikes
    "plain", "z" * 300 + ".leaf",           # a long component
    "dup.json", "dup.json.x",
]


def test_tree_layout(tmp):
    path = os.path.join(tmp, "tree.safetensors")
    tensors = [(n, "U8", (i + 1,), bytes([i]) * (i + 1)) for i, n in enumerate(TREE_NAMES)]
    write_st(path, tensors)
    with mounted(path, "-o", "layout=tree") as mnt:
        got = read_all(mnt)
        assert sorted(got) == sorted(TREE_NAMES)  # every tensor exactly once
        for i, n in enumerate(TREE_NAMES):
            rel, data, _ = got[n]
            assert data == bytes([i]) * (i + 1)
            if len(n) < 200:
                assert rel == tree_path(n, TREE_NAMES), (n, rel)
        assert got["model.layers.0.mlp.down_proj.weight"][0] == "model/layers/0/mlp/down_proj/weight"
        assert got["a.b"][0] == "a/b.tensor" and got["a.b.c"][0] == "a/b/c.tensor"
        assert got["a.b.c.d"][0] == "a/b/c/d"
        assert got["x..y"][0] == "x/%empty/y" and got[".lead"][0] == "%empty/lead"
        # "" is a file at the root, but ".lead" makes a root directory "%empty"
        assert got["trail."][0] == "trail/%empty" and got[""][0] == "%empty.tensor"
        assert got["."][0] == "%empty/%empty.tensor" and got[".."][0] == "%empty/%empty/%empty"
        assert got["p/q.r"][0] == "p%2Fq/r"
        assert got["__metadata__.json"][0] == "__metadata__/json"
        assert "%~" in got["z" * 300 + ".leaf"][0]
        # the synthetic file and the directories of look-alike tensors coexist
        root = set(os.listdir(mnt))
        assert {"__metadata__.json", "__metadata__", "__index__", "%empty", "%empty.tensor"} <= root
        assert "__index__.json" not in root  # one file, no index: no synthetic index
        assert stat_is_dir(os.path.join(mnt, "model", "layers"))
        # du -sb per layer gives each layer's bytes
        du = subprocess.run(["du", "-sb"] + sorted(os.path.join(mnt, "model", "layers", x)
                                                   for x in os.listdir(os.path.join(mnt, "model", "layers"))
                                                   if x != "__tensors__.tsv"),
                            capture_output=True, text=True, check=True).stdout.splitlines()
        sizes = {os.path.basename(l.split("\t")[1]): int(l.split("\t")[0]) for l in du}
        # du counts each directory's __tensors__.tsv too
        for layer in sizes:
            for root, _, files in os.walk(os.path.join(mnt, "model", "layers", layer)):
                sizes[layer] -= os.path.getsize(os.path.join(root, "__tensors__.tsv"))
        want0 = sum(len(t[3]) for t in tensors if t[0].startswith("model.layers.0."))
        want1 = sum(len(t[3]) for t in tensors if t[0].startswith("model.layers.1."))
        assert sizes == {"0": want0, "1": want1}
        # directories: 0555, nlink counts subdirectories
        st = os.stat(os.path.join(mnt, "model"))
        assert oct(st.st_mode & 0o777) == "0o555" and st.st_nlink == 2 + 2  # layers, embed_tokens
        with pytest.raises(OSError):
            open(os.path.join(mnt, "model", "layers"), "rb").read()


def stat_is_dir(p):
    import stat as st
    return st.S_ISDIR(os.stat(p).st_mode)


def test_tree_layout_sharded(tmp):
    d = os.path.join(tmp, "s")
    shards = {f"model-{i + 1:05d}-of-00004.safetensors": tensors_for(i) for i in range(4)}
    make_sharded(d, shards)
    with mounted(d, "-o", "layout=tree") as mnt:
        assert sorted(os.listdir(mnt)) == ["__index__.json", "__metadata__.json", "__tensors__.tsv", "model"]
        assert sorted(os.listdir(os.path.join(mnt, "model", "layers"))) == ["0", "1", "2", "3", "__tensors__.tsv"]
        for i in range(4):
            for k in range(3):
                p = os.path.join(mnt, "model", "layers", str(i), f"w{k}")
                assert open(p, "rb").read() == bytes([i]) * (k + 1)
    r = run(["-o", "layout=spiral", d, tmp])
    assert r.returncode == 2 and "layout" in r.stderr


def test_500_shards_500k_tensors(tmp):
    """The scale of issue 3: 500 shards, 1,000 tensors each, with an index.
    (The time against json.loads is in make bench, not here.)"""
    d = os.path.join(tmp, "big")
    os.mkdir(d)
    write_sharded(d, [[(f"model.layers.{s}.experts.{k}.w", "U8", [1], bytes([(s + k) % 256])) for k in range(1000)]
                      for s in range(500)], pad=False)
    wm = {f"model.layers.{s}.experts.{k}.w": f"model-{s + 1:05d}-of-00500.safetensors"
          for s in range(500) for k in range(1000)}
    with mounted(d, "-o", "layout=tree") as mnt:
        layers = os.listdir(os.path.join(mnt, "model", "layers"))
        assert len(layers) == 501 and "__tensors__.tsv" in layers
        for s in (0, 1, 250, 499):
            for k in (0, 999):
                p = os.path.join(mnt, "model", "layers", str(s), "experts", str(k), "w")
                assert open(p, "rb").read() == bytes([(s + k) % 256])
        idx = json.load(open(os.path.join(mnt, "__index__.json")))
        assert idx["weight_map"] == wm and idx["metadata"] == {"total_size": 500000}
