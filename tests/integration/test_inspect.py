"""tensorfs --inspect of an index whose shards are missing (what the index
alone tells, exit 0), and the table's rendering of empty and wide names."""

import json
import os
import shutil
import subprocess
import unicodedata

import pytest

from tfsutil import BIN, EXIT_SOURCE, REAL, need_real, run, write_st

INDEX_ONLY = ["gopu-inc_agentV1_phi3", "jasonfr6_AI7_mistral7b"]
JULIA = os.path.join(REAL, "julia-safetensors-jl-sharded")


def inspect(*args):
    return subprocess.run([BIN, "--inspect", *args], capture_output=True, text=True, timeout=60)


def expected(rel):
    with open(os.path.join(REAL, "expected.json")) as f:
        return json.load(f)["files"][rel]


@pytest.mark.parametrize("which", INDEX_ONLY)
@pytest.mark.parametrize("as_dir", [False, True])
def test_index_alone(which, as_dir):
    """The real indexes whose shards were Git LFS pointers: per-shard
    counts, total_size and the missing shards, from the index alone."""
    need_real()
    rel = f"index-only/{which}/model.safetensors.index.json"
    exp = expected(rel)
    idx = os.path.join(REAL, rel)
    src = os.path.dirname(idx) if as_dir else idx
    r = inspect(src)
    assert r.returncode == 0, r.stderr
    missing = ", ".join(exp["shards"])
    assert r.stderr == (f"tensorfs: {idx}: warning: 2 of 2 shards missing ({missing}): "
                        "showing what the index alone tells\n")
    lines = r.stdout.splitlines()
    assert lines[0] == f"{src}: 2 of 2 shards missing; what the index alone tells:"
    rows = {l.split()[0]: l.split()[1:] for l in lines[2:4]}
    assert rows == {s: [str(n), "missing"] for s, n in exp["tensors_per_shard"].items()}
    assert f"{exp['weight_map_count']} tensors in 2 shards, metadata.total_size {exp['total_size']} bytes" in r.stdout
    j = inspect("--json", src)
    assert j.returncode == 0
    d = json.loads(j.stdout)
    assert d["index_only"] is True
    assert d["tensor_count"] == exp["weight_map_count"]
    assert d["total_size"] == exp["total_size"]
    assert d["index_metadata"] == exp["metadata"]
    assert d["missing_shards"] == exp["shards"]
    assert {s["name"]: (s["tensors"], s["present"]) for s in d["shards"]} == \
        {s: (n, False) for s, n in exp["tensors_per_shard"].items()}


def test_some_shards_missing(tmp):
    """One shard of the real sharded set removed: the index view, with the
    present ones marked; mounting it still fails (exit 3)."""
    need_real()
    d = os.path.join(tmp, "part")
    shutil.copytree(JULIA, d)
    os.remove(os.path.join(d, "model-00003-of-00006.safetensors"))
    exp = expected("julia-safetensors-jl-sharded/model.safetensors.index.json")
    r = inspect("--json", d)
    assert r.returncode == 0
    assert r.stderr.count("\n") == 1 and "1 of 6 shards missing (model-00003-of-00006.safetensors)" in r.stderr
    j = json.loads(r.stdout)
    assert j["missing_shards"] == ["model-00003-of-00006.safetensors"]
    assert j["tensor_count"] == 36 and j["total_size"] == 4305
    present = {s["name"]: s["present"] for s in j["shards"]}
    assert present == {s: s != "model-00003-of-00006.safetensors" for s in exp["shards"]}
    assert sum(s["tensors"] for s in j["shards"]) == 36
    m = os.path.join(tmp, "m")
    os.mkdir(m)
    r = run([d, m])
    assert r.returncode == EXIT_SOURCE and "model-00003-of-00006.safetensors" in r.stderr


def test_all_shards_present_gives_the_full_table():
    need_real()
    r = inspect(JULIA)
    assert r.returncode == 0 and r.stderr == ""
    assert "36 tensors in 6 shards" in r.stdout and "missing" not in r.stdout
    assert len(r.stdout.splitlines()) > 36


def cols(s):
    """Terminal columns, by Unicode's East Asian width (independent of the
    C library's wcwidth)."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in s)


def test_empty_and_wide_names_align(tmp):
    path = os.path.join(tmp, "w.safetensors")
    names = ["", "ascii.weight", "日本語の重み", "e\u0301cole", "''"]
    write_st(path, [(n, "U8", (i + 1,), bytes(i + 1)) for i, n in enumerate(names)])
    r = inspect(path)
    assert r.returncode == 0, r.stderr
    rows = r.stdout.splitlines()[:len(names) + 1]
    shown = [row[:row.index("  U8")] if "  U8" in row else row[:row.index("  dtype")] for row in rows]
    # the dtype column starts at the same terminal column on every row
    assert len({cols(s) for s in shown}) == 1, rows
    assert [s.rstrip() for s in shown[1:]] == ["''", "ascii.weight", "日本語の重み", "e\u0301cole", "\\x27\\x27"]


def old_text_rule(b):
    """What tensorfs took for text before: eight bytes each printable,
    a tab or line end, or 0x80 and above."""
    return all(0x20 <= c < 0x7f or c in (9, 10, 13) or c >= 0x80 for c in b[:8])


def test_binary_data_is_not_called_text(tmp):
    """Random bytes, a raw float32 dump and a mounted tensor's file are not
    "a text file" (bytes of 0x80 and more count as text only inside valid
    UTF-8); a UTF-8 text file still is."""
    import numpy as np
    from tfsutil import EXIT_FORMAT, mounted
    rnd = np.random.default_rng(6).bytes(4096)
    floats = np.full(1024, -1234.5678, "<f4").tobytes()
    assert old_text_rule(rnd) and old_text_rule(floats)  # what used to be "a text file"
    paths = []
    for name, data in (("random.dat", rnd), ("weights.f32", floats)):
        paths.append(os.path.join(tmp, name))
        open(paths[-1], "wb").write(data)
    st = os.path.join(tmp, "m.safetensors")
    write_st(st, [("w", "F32", [1024], floats)])
    with mounted(st) as mnt:
        for p in paths + [os.path.join(mnt, "w")]:
            r = inspect(p)
            assert r.returncode == EXIT_FORMAT, (p, r.stderr)
            assert r.stderr.count("\n") == 1 and p in r.stderr, r.stderr
            assert "text" not in r.stderr, r.stderr
    txt = os.path.join(tmp, "notes.safetensors")
    open(txt, "w", encoding="utf-8").write("Gewichte für das Modell: ß, é, 中文, ✓\n" * 20)
    r = inspect(txt)
    assert r.returncode == EXIT_FORMAT and "this is a text file, not safetensors" in r.stderr, r.stderr


@pytest.mark.parametrize("kind", ["pickle", "zip", "random"])
def test_format_is_chosen_by_content_then_name(kind, tmp):
    """The same bytes get the same message whatever their name (.pt, .pth,
    .bin, none): a bare pickle and a zip that is not a checkpoint are the
    PyTorch reader's; bytes no reader knows go to the reader the name
    points at, so .pt and .pth are PyTorch's as .bin is."""
    import pickle
    import zipfile
    from tfsutil import EXIT_FORMAT
    if kind == "pickle":
        data = pickle.dumps({"w": [1.0, 2.0]}, protocol=2)
        want, names = "a bare pickle, not a torch.save zip archive", ["x.pt", "x.pth", "x.bin", "x", "x.pkl"]
    elif kind == "zip":
        z = os.path.join(tmp, "z")
        with zipfile.ZipFile(z, "w") as zf:
            zf.writestr("notes.txt", "hello")
        data = open(z, "rb").read()
        want, names = "a zip archive but not a PyTorch checkpoint", ["x.pt", "x.pth", "x.bin", "x.zip"]
    else:
        data = bytes(range(256)) * 16
        want, names = "not a PyTorch checkpoint: neither a zip archive", ["x.pt", "x.pth", "x.bin"]
    for name in names:
        p = os.path.join(tmp, name)
        open(p, "wb").write(data)
        r = inspect(p)
        assert r.returncode == EXIT_FORMAT, (name, r.stderr)
        assert r.stderr == f"tensorfs: {p}: {r.stderr.split(': ', 2)[2]}" and r.stderr.count("\n") == 1
        assert want in r.stderr, (name, r.stderr)
