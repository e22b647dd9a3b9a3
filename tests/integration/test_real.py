"""Every real checkpoint in shared/data/real mounts, and every tensor's bytes,
dtype and shape match expected.json (written by an independent parser)."""

import ast
import json
import os

import pytest

from tfsutil import EXIT_FORMAT, REAL, fname, mounted, need_real, real_files, run, sha256

EXPECTED = os.path.join(REAL, "expected.json")


def expected(rel):
    with open(EXPECTED) as f:
        return json.load(f)["files"][rel]


@pytest.mark.parametrize("rel", real_files())
def test_real_checkpoint(rel):
    need_real()
    exp = expected(rel)
    src = os.path.join(REAL, rel)
    with mounted(src) as mnt:
        names = sorted(os.listdir(mnt))
        want = sorted([fname(n) for n in exp["tensors"]] + ["__metadata__.json", "__tensors__.tsv"])
        assert names == want
        assert len(exp["tensors"]) == exp["tensor_count"]
        for name, t in exp["tensors"].items():
            p = os.path.join(mnt, fname(name))
            st = os.stat(p)
            assert st.st_size == t["nbytes"]
            assert sha256(p) == t["sha256"], name
            assert os.getxattr(p, "user.dtype").decode() == t["dtype"]
            assert json.loads(os.getxattr(p, "user.shape")) == t["shape"]
            assert os.getxattr(p, "user.shape").decode() == \
                "[" + ",".join(str(d) for d in t["shape"]) + "]"
            assert os.getxattr(p, "user.name").decode() == name
            begin, end = json.loads(os.getxattr(p, "user.offsets"))
            base = 8 + exp["header_len"]
            assert [begin, end] == [base + t["data_offsets"][0], base + t["data_offsets"][1]]
            assert os.getxattr(p, "user.source").decode() == os.path.realpath(src)
        with open(os.path.join(mnt, "__metadata__.json"), "rb") as f:
            meta = json.loads(f.read())
        assert meta == (exp["metadata"] or {})


@pytest.mark.parametrize("rel", real_files())
def test_real_checkpoint_strict(rel):
    """Real files use only the 22 dtypes, so -o strict mounts them too."""
    need_real()
    with mounted(os.path.join(REAL, rel), "-o", "strict") as mnt:
        assert "__metadata__.json" in os.listdir(mnt)


GGUF_TYPES = {"string": "STRING", "u8": "UINT8", "i8": "INT8", "u16": "UINT16", "i16": "INT16",
              "u32": "UINT32", "i32": "INT32", "f32": "FLOAT32", "bool": "BOOL", "u64": "UINT64",
              "i64": "INT64", "f64": "FLOAT64", "array": "ARRAY"}


@pytest.mark.parametrize("rel", real_files(("gguf",)))
def test_real_gguf(rel):
    """A real GGUF file (llama.cpp's, written by gguf-py) mounts; its
    __metadata__.json agrees with expected.json key by key, and --inspect
    shows the architecture."""
    need_real()
    with open(os.path.join(REAL, "expected.json")) as f:
        exp = json.load(f)["files"][rel]
    src = os.path.join(REAL, rel)
    with mounted(src) as mnt:
        names = [n for n in os.listdir(mnt) if not n.startswith("__")]
        assert len(names) == exp["tensor_count"]
        meta = json.load(open(os.path.join(mnt, "__metadata__.json")))
    assert list(meta) == list(exp["kv"])
    for k, want in exp["kv"].items():
        got = meta[k]
        assert got["type"] == GGUF_TYPES[want["type"]], k
        v = want["value"]
        if want["type"] == "array":
            d = ast.literal_eval(v) if isinstance(v, str) else v
            assert got["element_type"] == GGUF_TYPES[d["array_of"]] and len(got["value"]) == d["len"], k
        elif want["type"] == "bool":
            assert got["value"] == (str(v) == "True"), k
        elif want["type"] in ("f32", "f64"):
            assert abs(got["value"] - float(v)) <= 1e-6 * abs(float(v)), k
        elif want["type"] == "string":
            assert got["value"] == v, k
        else:
            assert got["value"] == int(v), k
    r = run(["--inspect", src])
    assert r.returncode == 0 and "general.architecture: " + exp["kv"]["general.architecture"]["value"] in r.stdout
