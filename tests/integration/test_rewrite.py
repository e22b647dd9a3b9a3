"""Rewrites with no copy (issue 27): metadata edits (-o edits=FILE) on
__metadata__.json and every generated file; model.gguf, a GGUF model's
parts merged with the edits applied, byte for byte the layout of ggml's
writer and read by the @huggingface/gguf parser from npm; the model
re-sharded as save_pretrained(max_shard_size=...) does (-o max_shard_size),
mounted again through its own index; hostile edits files refused with one
line."""

import json
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest

import gen_gguf as G
from test_gguf import KVS, model, split_files
from tfsutil import EXIT_USAGE, REAL, REPO, mounted, need_real, run, write_st

GGUF_JS = os.path.join(REPO, "build", "npm", "gguf-js")
CHECK_MJS = os.path.join(REPO, "tests", "gguf-js", "check.mjs")


def gguf_js(path):
    """What @huggingface/gguf (npm) reads from a GGUF file."""
    if not os.path.exists(os.path.join(GGUF_JS, "node_modules", "@huggingface", "gguf")) or \
            not shutil.which("node"):
        from tfsutil import missing
        missing("@huggingface/gguf (make test-tools installs it from the npm registry) and node")
    # The script imports the package by name: it runs from the tool's
    # directory, where node_modules is.
    shutil.copy(CHECK_MJS, os.path.join(GGUF_JS, "check.mjs"))
    r = subprocess.run(["node", os.path.join(GGUF_JS, "check.mjs"), path], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def write_edits(tmp, obj, name="edits.json"):
    p = os.path.join(tmp, name)
    with open(p, "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))
    return p


def tensors_of(mnt):
    return {n: open(os.path.join(mnt, n), "rb").read() for n in os.listdir(mnt) if not n.startswith("__")}


EDITS = {
    "tokenizer.chat_template": "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}",
    "general.name": "edited \u00e9",
    "llama.context_length": 8192,
    "x.u8": None,
    "x.new_f64": {"type": "FLOAT64", "value": 2.5},
    "x.new_list": ["a", "b"],
    "x.new_int": 7,
}


def edited_kvs(alignment):
    """KVS with EDITS applied as the README says: in place, new keys at the
    end in the file's order, the natural type for plain new values."""
    out = [("general.alignment", G.U32, alignment)]
    for k, t, v in KVS:
        if k in EDITS:
            e = EDITS[k]
            if e is None:
                continue
            out.append((k, t, e))
        else:
            out.append((k, t, v))
    out += [("tokenizer.chat_template", G.STR, EDITS["tokenizer.chat_template"]),
            ("x.new_f64", G.F64, 2.5), ("x.new_list", G.ARR, (G.STR, ["a", "b"])),
            ("x.new_int", G.I32, 7)]
    return out


def test_gguf_edited_and_generated(tmp):
    """model.gguf of a GGUF with edits: byte for byte what ggml's writer
    lays out for the edited pairs and the same tensors; mounted again, every
    tensor's bytes and the edited metadata are there; __metadata__.json
    shows the edits; @huggingface/gguf reads the same; the source is not
    written."""
    rng = np.random.default_rng(12)
    tensors = model(rng)
    src = os.path.join(tmp, "tiny.gguf")
    open(src, "wb").write(G.build(KVS, tensors, alignment=64))
    before = open(src, "rb").read()
    ed = write_edits(tmp, EDITS)
    want = G.build(edited_kvs(64)[1:], tensors, alignment=64)
    with mounted(src, "-o", f"export,edits={ed}") as mnt:
        meta = json.load(open(os.path.join(mnt, "__metadata__.json")))
        assert meta["general.name"] == {"type": "STRING", "value": "edited \u00e9"}
        assert meta["llama.context_length"] == {"type": "UINT32", "value": 8192}
        assert meta["tokenizer.chat_template"]["value"] == EDITS["tokenizer.chat_template"]
        assert "x.u8" not in meta
        assert meta["x.new_f64"] == {"type": "FLOAT64", "value": 2.5}
        assert meta["x.new_int"] == {"type": "INT32", "value": 7}
        assert meta["x.new_list"] == {"type": "ARRAY", "element_type": "STRING", "value": ["a", "b"]}
        gen = os.path.join(mnt, "model.gguf")
        got = open(gen, "rb").read()
        assert os.path.getsize(gen) == len(want)
        assert got == want
        # odd reads agree with the whole
        fd = os.open(gen, os.O_RDONLY)
        for off, n in [(0, 1), (7, 100), (len(want) - 33, 64), (600, 4097), (1000, 1)]:
            assert os.pread(fd, n, off) == want[off:off + n]
        os.close(fd)
        js = gguf_js(gen)
        assert js["metadata"]["tokenizer.chat_template"]["value"] == EDITS["tokenizer.chat_template"]
        assert js["metadata"]["general.name"]["value"] == "edited \u00e9"
        assert "x.u8" not in js["metadata"]
        assert [t["name"] for t in js["tensorInfos"]] == [t[0] for t in tensors]
        assert int(js["tensorDataOffset"]) % 64 == 0
        copy = os.path.join(tmp, "copy.gguf")
        shutil.copyfile(gen, copy)
    assert open(src, "rb").read() == before
    with mounted(copy, "-o", "strict") as again:
        for name, tid, ne, data in tensors:
            assert open(os.path.join(again, name), "rb").read() == data, name
        assert json.load(open(os.path.join(again, "__metadata__.json"))) == meta


def test_split_gguf_merged(tmp):
    """A 3-part split GGUF gives one model.gguf: every tensor, in part
    order, the first part's pairs without split.*; mounted again it equals
    the split model tensor by tensor; the npm parser reads it."""
    d = os.path.join(tmp, "split")
    os.mkdir(d)
    files, allt = split_files(d)
    with mounted(files[0], "-o", "export") as mnt:
        gen = os.path.join(mnt, "model.gguf")
        want = G.build([("general.architecture", G.STR, "llama")], allt)
        assert open(gen, "rb").read() == want
        js = gguf_js(gen)
        assert not any(k.startswith("split.") for k in js["metadata"])
        assert [t["name"] for t in js["tensorInfos"]] == [t[0] for t in allt]
        split = {n: open(os.path.join(mnt, n), "rb").read() for n, _, _, _ in allt}
        merged = os.path.join(tmp, "merged.gguf")
        shutil.copyfile(gen, merged)
    with mounted(merged, "-o", "strict") as again:
        for n, data in split.items():
            assert open(os.path.join(again, n), "rb").read() == data
        meta = json.load(open(os.path.join(again, "__metadata__.json")))
        assert list(meta) == ["general.architecture"]
    r = run(["--inspect", merged])
    assert r.returncode == 0 and "split" not in r.stdout


def test_split_gguf_exports_without_split_keys(tmp):
    """model.safetensors (and the re-sharded files) of a split GGUF drop
    the parts' split.* keys as model.gguf does: the file is the whole
    model, not part 1 of 3 (it kept the first part's split.no 0)."""
    d = os.path.join(tmp, "split")
    os.mkdir(d)
    for k in range(3):
        kv = [("general.architecture", G.STR, "llama"), ("split.no", G.U16, k), ("split.count", G.U16, 3),
              ("split.tensors.count", G.I32, 3)]
        t = [(f"blk.{k}.w", G.ID["F32"], [4], np.full(4, k, "<f4").tobytes())]
        open(os.path.join(d, f"m-{k + 1:05d}-of-00003.gguf"), "wb").write(G.build(kv, t))
    with mounted(d, "-o", "export,max_shard_size=1G") as mnt:
        for gen in ("model.safetensors", "__shards__/model.safetensors"):
            meta = st_header(os.path.join(mnt, gen))[0]["__metadata__"]
            assert not any(k.startswith("split.") for k in meta), (gen, meta)
            assert "llama" in meta["general.architecture"], meta


def test_gguf_only_for_typed_metadata(tmp):
    """A safetensors model gets model.safetensors and no model.gguf."""
    p = os.path.join(tmp, "a.safetensors")
    write_st(p, [("w", "F32", [2], np.ones(2, "<f4").tobytes())])
    with mounted(p, "-o", "export") as mnt:
        names = os.listdir(mnt)
        assert "model.safetensors" in names and "model.gguf" not in names


def hub_shards(tensors, max_size):
    """huggingface_hub's split_state_dict_into_shards_factory, written again
    from its documented rule: (name, nbytes) in state-dict order to a list
    of shards (lists of names)."""
    shards, cur, cur_size = [], [], 0
    for name, size in tensors:
        if size > max_size:
            shards.append([name])
            continue
        if cur and cur_size + size > max_size:
            shards.append(cur)
            cur, cur_size = [], 0
        cur.append(name)
        cur_size += size
    if cur:
        shards.append(cur)
    return shards


def st_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n


def test_resharded(tmp):
    """A sharded model re-sharded to 10 kB: the shards and index
    transformers would write (names, grouping, weight_map, total_size),
    each shard a valid safetensors file with the edited metadata, and the
    set mounted again through its index equals the source."""
    src = os.path.join(tmp, "src")
    os.mkdir(src)
    rng = np.random.default_rng(3)
    order = []
    wm = {}
    sizes = [3000, 4000, 5000, 25000, 100, 6000, 2, 9999, 1]
    for s in range(3):
        ts = []
        for k in range(3):
            n = sizes[s * 3 + k]
            name = f"layer.{s}.{k}.weight"
            a = rng.integers(0, 255, n, dtype=np.uint8)
            ts.append((name, "U8", [n], a.tobytes()))
            order.append((name, n))
            wm[name] = f"model-{s + 1:05d}-of-00003.safetensors"
        write_st(os.path.join(src, f"model-{s + 1:05d}-of-00003.safetensors"), ts, metadata={"format": "pt"})
    with open(os.path.join(src, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(sizes)}, "weight_map": wm}, f)
    ed = write_edits(tmp, {"format": "pt", "note": "resharded"})
    want = hub_shards(order, 10000)
    with mounted(src, "-o", f"max_shard_size=10KB,edits={ed}") as mnt:
        sd = os.path.join(mnt, "__shards__")
        names = [f"model-{k + 1:05d}-of-{len(want):05d}.safetensors" for k in range(len(want))]
        assert sorted(os.listdir(sd)) == sorted(names + ["model.safetensors.index.json"])
        index = json.load(open(os.path.join(sd, "model.safetensors.index.json")))
        assert index["metadata"] == {"total_size": sum(sizes)}
        assert index["weight_map"] == {n: names[k] for k, group in enumerate(want) for n in group}
        assert list(index["weight_map"]) == sorted(index["weight_map"])
        for k, group in enumerate(want):
            hdr, start = st_header(os.path.join(sd, names[k]))
            assert hdr.pop("__metadata__") == {"format": "pt", "note": "resharded"}
            assert sorted(hdr) == sorted(group)
            assert start % 8 == 0
            r = run(["--inspect", os.path.join(sd, names[k])])
            assert r.returncode == 0, r.stderr
        source = tensors_of(mnt)
        out = os.path.join(tmp, "out")
        shutil.copytree(sd, out)
    with mounted(out, "-o", "strict") as again:
        assert tensors_of(again) == source
        assert json.load(open(os.path.join(again, "__metadata__.json"))) == {"format": "pt", "note": "resharded"}


def test_resharded_one_file_and_real_model(tmp):
    """Everything under the limit: one model.safetensors and no index, as
    transformers writes; a real sharded checkpoint re-sharded at 1 MB,
    mounted again, has every tensor's bytes."""
    p = os.path.join(tmp, "a.safetensors")
    write_st(p, [("a", "F32", [4], np.arange(4, dtype="<f4").tobytes()),
                 ("b", "I64", [2], np.arange(2, dtype="<i8").tobytes())])
    with mounted(p, "-o", "max_shard_size=1G") as mnt:
        assert os.listdir(os.path.join(mnt, "__shards__")) == ["model.safetensors"]
    need_real()
    for name, limit in [("julia-safetensors-jl-sharded", "500"),
                        ("transformers_tinytimemixer_f32.safetensors", "1MB")]:
        with mounted(os.path.join(REAL, name), "-o", f"max_shard_size={limit}") as mnt:
            sd = os.path.join(mnt, "__shards__")
            files = sorted(os.listdir(sd))
            assert files[-1] == "model.safetensors.index.json" and len(files) >= 3, files
            source = tensors_of(mnt)
            out = os.path.join(tmp, "out-" + name)
            shutil.copytree(sd, out)
        with mounted(out) as again:
            assert tensors_of(again) == source


HOSTILE = [
    ("not json", "{\"a\": ", "not JSON"),
    ("trailing text", "{} x", "not JSON"),
    ("an array", "[1, 2]", "must be a JSON object"),
    ("wrong type for a UINT32 key", {"llama.context_length": "long"}, "must be an integer"),
    ("out of UINT8's range", {"x.u16": 70000}, "out of the type's range"),
    ("negative into unsigned", {"x.u16": -1}, "out of the type's range"),
    ("alignment not a power of 2", {"general.alignment": 48}, "must be a power of 2"),
    ("alignment zero", {"general.alignment": 0}, "must be a power of 2"),
    ("alignment of another type", {"general.alignment": {"type": "UINT64", "value": 32}}, "must be a UINT32"),
    ("a split key", {"split.count": 2}, "split.* keys"),
    ("nested arrays", {"a": [[1]]}, "an array may hold only"),
    ("object without a type", {"a": {"value": 1}}, "must be {\"type\": T, \"value\": V}"),
    ("unknown type", {"a": {"type": "UINT128", "value": 1}}, "unknown type"),
    ("array without element type", {"a": {"type": "ARRAY", "value": [1]}}, "element_type"),
    ("array of arrays typed", {"a": {"type": "ARRAY", "element_type": "ARRAY", "value": []}}, "element_type"),
    ("mixed array", {"a": [1, "x"]}, "no natural type"),
    ("empty plain array", {"a": []}, "no natural type"),
    ("bool as number", {"x.bool": 1}, "must be true or false"),
    ("string for an array key", {"tokenizer.ggml.tokens": "x"}, "must be an array"),
    ("float out of FLOAT32", {"x.f32": 1e300}, "out of FLOAT32's range"),
    ("empty key", {"": "x"}, "an empty key"),
    ("unknown member", {"a": {"type": "STRING", "value": "x", "extra": 1}}, "unknown member"),
]


@pytest.mark.parametrize("case,content,msg", HOSTILE, ids=[c[0] for c in HOSTILE])
def test_hostile_edits_refused(tmp, case, content, msg):
    rng = np.random.default_rng(12)
    src = os.path.join(tmp, "tiny.gguf")
    open(src, "wb").write(G.build(KVS, model(rng), alignment=64))
    ed = write_edits(tmp, content)
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = run(["-o", f"export,edits={ed}", src, mnt])
    assert r.returncode == EXIT_USAGE, (case, r.stderr)
    assert r.stderr.count("\n") == 1 and ed in r.stderr and msg in r.stderr, (case, r.stderr)
    assert not os.listdir(mnt)


def test_edits_files_and_string_metadata(tmp):
    """A missing or oversized edits file, and a non-string value for
    safetensors' string metadata: one line, exit 2. Strings are applied
    to __metadata__.json and model.safetensors."""
    p = os.path.join(tmp, "a.safetensors")
    write_st(p, [("w", "F32", [2], np.ones(2, "<f4").tobytes())], metadata={"format": "pt", "drop": "me"})
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    big = os.path.join(tmp, "big.json")
    with open(big, "wb") as f:
        f.truncate(17 << 20)
    for edits, msg in [(os.path.join(tmp, "nope.json"), "does not exist"), (big, "at most 16 MiB"),
                       (tmp, "not a regular file"),
                       (write_edits(tmp, {"n": 3}), "holds strings only")]:
        r = run(["-o", f"edits={edits}", p, mnt])
        assert r.returncode == EXIT_USAGE and r.stderr.count("\n") == 1 and msg in r.stderr, r.stderr
    ed = write_edits(tmp, {"drop": None, "new": "v", "format": {"type": "STRING", "value": "np"}})
    with mounted(p, "-o", f"export,edits={ed}") as mnt2:
        meta = json.load(open(os.path.join(mnt2, "__metadata__.json")))
        assert meta == {"format": "np", "new": "v"}
        hdr, _ = st_header(os.path.join(mnt2, "model.safetensors"))
        assert hdr["__metadata__"] == {"format": "np", "new": "v"}


@pytest.mark.parametrize("value", ["0", "-1", "5XB", "GB", "1.5GB", "99999999999999999999", ""])
def test_bad_max_shard_size(tmp, value):
    p = os.path.join(tmp, "a.safetensors")
    write_st(p, [("w", "F32", [2], np.ones(2, "<f4").tobytes())])
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = run(["-o", f"max_shard_size={value}", p, mnt])
    assert r.returncode == EXIT_USAGE and r.stderr.count("\n") == 1 and "max_shard_size" in r.stderr, r.stderr


def test_generated_names_never_meet_a_tensor(tmp):
    """Tensors named like the root's generated files keep a file of their
    own, the first '.' or '_' escaped as the name mapping does."""
    p = os.path.join(tmp, "clash.safetensors")
    names = ["model.safetensors", "model.gguf", "__shards__", "x"]
    write_st(p, [(n, "F32", [1], np.float32(i).tobytes()) for i, n in enumerate(names)])
    with mounted(p, "-o", "export,max_shard_size=1G") as mnt:
        got = sorted(os.listdir(mnt))
        assert {"model%2Esafetensors", "model%2Egguf", "%5F_shards__", "model.safetensors",
                "__shards__"} <= set(got)
        for i, f in enumerate(["model%2Esafetensors", "model%2Egguf", "%5F_shards__", "x"]):
            assert open(os.path.join(mnt, f), "rb").read() == np.float32(i).tobytes()
            assert os.getxattr(os.path.join(mnt, f), "user.name").decode() == names[i]
        assert os.listdir(os.path.join(mnt, "__shards__")) == ["model.safetensors"]


def test_export_warning_names_model_gguf(tmp):
    """The warning that model.safetensors leaves out GGUF's quantized
    tensors says that model.gguf holds every one."""
    rng = np.random.default_rng(3)
    src = os.path.join(tmp, "q.gguf")
    open(src, "wb").write(G.build([("general.architecture", G.STR, "llama")],
                                  [("q", G.ID["Q4_0"], [64], G.random_blocks(G.ID["Q4_0"], 2, rng)),
                                   ("f", 0, [2], np.ones(2, "<f4").tobytes())]))
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = run(["-o", "export", src, mnt])
    try:
        assert r.returncode == 0, r.stderr
        assert r.stderr.count("\n") == 1 and "leaves out 1 tensor" in r.stderr, r.stderr
        assert "model.gguf holds every tensor" in r.stderr, r.stderr
        assert "model.gguf" in os.listdir(mnt)
    finally:
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
