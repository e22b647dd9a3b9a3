"""Every real checkpoint in shared/data/real mounts, and every tensor's bytes,
dtype and shape match expected.json (written by an independent parser)."""

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


@pytest.mark.parametrize("rel", real_files(("gguf",)))
def test_real_non_safetensors_refused(rel, tmp):
    need_real()
    r = run([os.path.join(REAL, rel), tmp])
    assert r.returncode == EXIT_FORMAT
    assert r.stderr.count("\n") == 1
    assert os.path.basename(rel) in r.stderr
    assert "not safetensors" in r.stderr
