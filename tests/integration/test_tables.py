"""__tensors__.tsv, the table in every directory: one line per tensor or
subdirectory that agrees with the xattrs and sizes of the entries, built
when read, switchable off, and out of the way of tensors with that name."""

import json
import os
import random

import pytest

from tfsutil import REAL, fname, mounted, need_real, real_files, write_st

TABLE = "__tensors__.tsv"
SYNTHETIC = {"__metadata__.json", "__index__.json", TABLE}
HEADER = ["name", "dtype", "shape", "bytes", "offsets"]


def parse(path):
    with open(path, "rb") as f:
        text = f.read()
    assert len(text) == os.path.getsize(path)
    assert text.endswith(b"\n")
    lines = [line.split("\t") for line in text.decode().split("\n")[:-1]]
    assert lines[0] == HEADER
    for row in lines:
        assert len(row) == 5, row
    return lines[1:]


def tensor_bytes_under(d):
    total = 0
    for root, _, files in os.walk(d):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files if f not in SYNTHETIC)
    return total


def check_tree(mnt):
    """Every directory's table against its entries; returns the tensor count."""
    tensors = 0
    for root, dirs, files in os.walk(mnt):
        rows = parse(os.path.join(root, TABLE))
        names = [r[0] for r in rows]
        assert len(names) == len(set(names))
        want = sorted([d + "/" for d in dirs] + [f for f in files if f not in SYNTHETIC])
        assert sorted(names) == want
        for name, dtype, shape, nbytes, offsets in rows:
            p = os.path.join(root, name)
            if name.endswith("/"):
                assert (dtype, shape, offsets) == ("-", "-", "-")
                assert int(nbytes) == tensor_bytes_under(p)
                continue
            tensors += 1
            assert int(nbytes) == os.path.getsize(p)
            assert dtype == os.getxattr(p, "user.dtype").decode()
            assert shape == os.getxattr(p, "user.shape").decode()
            assert offsets == os.getxattr(p, "user.offsets").decode()
    return tensors


def real_sources():
    return real_files() + (["julia-safetensors-jl-sharded"] if os.path.isdir(REAL) else [])


@pytest.mark.parametrize("layout", ["flat", "tree"])
@pytest.mark.parametrize("rel", real_sources())
def test_real_tables_match_xattrs(rel, layout):
    need_real()
    with open(os.path.join(REAL, "expected.json")) as f:
        files = json.load(f)["files"]
    want = 36 if rel.endswith("sharded") else files[rel]["tensor_count"]
    with mounted(os.path.join(REAL, rel), "-o", f"layout={layout}") as mnt:
        assert check_tree(mnt) == want


@pytest.mark.parametrize("opts", ["format=npy", "convert=f32", "format=npy,convert=f32,layout=tree"])
def test_tables_follow_the_views(tmp, opts):
    path = os.path.join(tmp, "v.safetensors")
    write_st(path, [("a.w", "BF16", (2, 3), bytes(12)), ("a.b", "F32", (3,), bytes(12)),
                    ("b.c.d", "F8_E4M3", (4,), bytes(4)), ("s", "I64", (), bytes(8))], pad="odd")
    with mounted(path, "-o", opts) as mnt:
        assert check_tree(mnt) == 4


def test_table_switched_off(tmp):
    path = os.path.join(tmp, "o.safetensors")
    write_st(path, [("a.w", "U8", (1,), b"x"), ("b", "U8", (1,), b"y")])
    with mounted(path, "-o", "layout=tree,notsv") as mnt:
        for root, dirs, files in os.walk(mnt):
            assert TABLE not in files
        assert sorted(os.listdir(mnt)) == ["__metadata__.json", "a", "b"]
        assert not os.path.exists(os.path.join(mnt, TABLE))


def test_table_name_is_reserved(tmp):
    """A tensor that has the table's name gets the escaped name, as
    __metadata__.json look-alikes do, and the table lists it."""
    path = os.path.join(tmp, "r.safetensors")
    write_st(path, [(TABLE, "U8", (2,), b"hi"), ("__x__.tsv", "U8", (1,), b"x")])
    assert fname(TABLE) == "%5F_tensors__.tsv"
    with mounted(path) as mnt:
        assert sorted(os.listdir(mnt)) == sorted(["__metadata__.json", TABLE, "%5F_tensors__.tsv", "%5F_x__.tsv"])
        assert open(os.path.join(mnt, "%5F_tensors__.tsv"), "rb").read() == b"hi"
        assert os.getxattr(os.path.join(mnt, "%5F_tensors__.tsv"), "user.name").decode() == TABLE
        assert check_tree(mnt) == 2


def test_hostile_names_stay_one_line(tmp):
    """Names with tabs and newlines are escaped as file names are, and an
    unknown dtype with control characters too: every row has five fields."""
    path = os.path.join(tmp, "h.safetensors")
    hdr = {"tab\tname": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
           "new\nline": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]},
           "odd": {"dtype": "X\tY%", "shape": [1], "data_offsets": [2, 3]}}
    text = json.dumps(hdr).encode()
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"abc")
    with mounted(path) as mnt:
        rows = parse(os.path.join(mnt, TABLE))
        assert sorted(r[0] for r in rows) == ["new%0Aline", "odd", "tab%09name"]
        assert [r[1] for r in rows if r[0] == "odd"] == ["X%09Y%25"]


def test_large_table_reads_at_any_offset(tmp):
    """A table of 20,000 lines read whole and in random pieces (the pieces
    start from the saved line offsets, which this crosses many times)."""
    path = os.path.join(tmp, "big.safetensors")
    n = 20000
    write_st(path, [(f"model.layers.{i}.weight", "U8", (1, i % 7 + 1), bytes(i % 7 + 1)) for i in range(n)])
    # direct_io: every pread reaches the daemon at its own offset and size
    with mounted(path, "-o", "direct_io") as mnt:
        p = os.path.join(mnt, TABLE)
        whole = open(p, "rb").read()
        assert len(whole) == os.path.getsize(p)
        assert whole.count(b"\n") == n + 1
        rng = random.Random(5)
        with open(p, "rb", buffering=0) as f:
            for _ in range(300):
                off = rng.randrange(0, len(whole) + 50)
                k = rng.choice([1, 17, 4096, 70000])
                assert os.pread(f.fileno(), k, off) == whole[off:off + k]
        rows = parse(p)
        assert rows[12345] == ["model.layers.12345.weight", "U8", f"[1,{12345 % 7 + 1}]",
                               str(12345 % 7 + 1), os.getxattr(os.path.join(mnt, "model.layers.12345.weight"),
                                                                "user.offsets").decode()]
