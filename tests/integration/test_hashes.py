"""Issue 26: per-tensor hashes (user.hash.sha256, user.hash.xxh64), the
__sha256sums__.txt manifests of -o sums, and tensorfs --verify."""

import hashlib
import json
import os
import shutil
import subprocess
import time

import numpy as np
import pytest

import gen_gguf as G
from servers import Nginx
from tfsutil import BIN, EXIT_USAGE, REAL, fname, mounted, need_real, real_files, run, write_st

EXIT_MISMATCH = 6
VIEWS = [(), ("-o", "format=npy"), ("-o", "convert=f32"), ("-o", "layout=tree,format=npy,convert=f32")]
SUMS = "__sha256sums__.txt"


def tensor_files(mnt):
    """Every tensor file of a mount (the synthetic files left out)."""
    out = []
    for root, dirs, files in os.walk(mnt):
        dirs[:] = [d for d in dirs if d != "__files__"]
        out += [os.path.join(root, f) for f in files if not f.startswith("__")]
    return sorted(out)


def xxh64sum(paths):
    """xxh64sum (Debian's xxhash) of each file, by path."""
    out = {}
    for i in range(0, len(paths), 200):
        r = subprocess.run(["xxh64sum"] + paths[i:i + 200], capture_output=True, text=True, check=True)
        for line in r.stdout.splitlines():
            h, p = line.split("  ", 1)
            out[p] = h
    return out


def file_sha256(p):
    with open(p, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.parametrize("rel", real_files())
def test_hash_attributes_in_every_view(rel):
    """user.hash.sha256 and user.hash.xxh64 are the hashes of the bytes each
    view serves (checked with Python's hashlib and Debian's xxh64sum), and
    in the raw view the sha256s of expected.json."""
    need_real()
    exp = json.load(open(os.path.join(REAL, "expected.json")))["files"][rel]["tensors"]
    for view in VIEWS:
        with mounted(os.path.join(REAL, rel), *view) as mnt:
            files = tensor_files(mnt)
            assert files
            xx = xxh64sum(files)
            for p in files:
                assert os.getxattr(p, "user.hash.sha256").decode() == file_sha256(p), (view, p)
                assert os.getxattr(p, "user.hash.xxh64").decode() == xx[p], (view, p)
            if not view:
                for name, t in exp.items():
                    p = os.path.join(mnt, fname(name))
                    assert os.getxattr(p, "user.hash.sha256").decode() == t["sha256"], name


def test_hashes_listed_only_once_known(tmp):
    """listxattr shows user.hash.* only after they were asked for by name,
    so getfattr -d never starts hashing; a size query answers the length."""
    src = os.path.join(tmp, "a.safetensors")
    write_st(src, [("w", "U8", (5,), b"hello"), ("v", "U8", (3,), b"abc")])
    with mounted(src) as mnt:
        w = os.path.join(mnt, "w")
        assert not [a for a in os.listxattr(w) if a.startswith("user.hash.")]
        r = subprocess.run(["getfattr", "-d", w], capture_output=True, text=True)
        assert r.returncode == 0 and "user.hash" not in r.stdout
        assert os.getxattr(w, "user.hash.xxh64").decode() == subprocess.run(
            ["xxh64sum", w], capture_output=True, text=True).stdout.split()[0]
        assert "user.hash.xxh64" in os.listxattr(w)
        assert "user.hash.sha256" not in os.listxattr(w)
        assert os.getxattr(w, "user.hash.sha256").decode() == hashlib.sha256(b"hello").hexdigest()
        assert {"user.hash.xxh64", "user.hash.sha256"} <= set(os.listxattr(w))
        # the other file's were never asked for
        assert not [a for a in os.listxattr(os.path.join(mnt, "v")) if a.startswith("user.hash.")]
        with pytest.raises(OSError):
            os.getxattr(os.path.join(mnt, "__tensors__.tsv"), "user.hash.sha256")


def test_browsing_reads_no_tensor_data(tmp):
    """ls -l, getfattr -d, __tensors__.tsv and a manifest's stat read no
    tensor byte (counted as the server's range requests); asking for a hash
    does."""
    root = os.path.join(tmp, "www")
    os.makedirs(root)
    os.chmod(tmp, 0o755)
    os.chmod(root, 0o755)
    rng = np.random.default_rng(1)
    ts = [(f"layers.{i}.w", "F32", (512, 1024), rng.standard_normal((512, 1024)).astype(np.float32).tobytes())
          for i in range(16)]
    write_st(os.path.join(root, "m.safetensors"), ts)
    os.chmod(os.path.join(root, "m.safetensors"), 0o644)
    with Nginx(root) as ng:
        with mounted(ng.url("plain", "m.safetensors"), "-o", "layout=tree,sums") as mnt:
            ng.clear_log()
            subprocess.run(["ls", "-lR", mnt], capture_output=True, check=True)
            r = subprocess.run(["getfattr", "-R", "-d", mnt], capture_output=True, text=True)
            assert r.returncode == 0 and "user.dtype" in r.stdout and "user.hash" not in r.stdout
            for d, _, files in os.walk(mnt):
                for f in files:
                    if f == "__tensors__.tsv":
                        open(os.path.join(d, f), "rb").read()
                    os.stat(os.path.join(d, f))
            assert ng.requests() == [], ng.requests()
            # the last tensor, 30 MiB into the file: never fetched before
            w = os.path.join(mnt, "layers", "15", "w")
            want = hashlib.sha256(ts[15][3]).hexdigest()
            assert os.getxattr(w, "user.hash.sha256").decode() == want
            for _ in range(50):  # nginx logs a request once it has answered it
                if ng.requests():
                    break
                time.sleep(0.1)
            assert ng.requests(), "hashing read no data: the request count proves nothing"


def sums_dirs(mnt):
    return sorted(d for d, _, files in os.walk(mnt) if SUMS in files)


@pytest.mark.parametrize("view", [("-o", "sums"), ("-o", "sums,layout=tree"),
                                  ("-o", "sums,layout=tree,format=npy,convert=f32")])
def test_manifests_pass_sha256sum(view):
    """sha256sum -c --strict run in each directory accepts its manifest,
    which names every tensor file there; its size is known before it is
    read; a damaged line is caught by sha256sum."""
    need_real()
    src = os.path.join(REAL, "julia-safetensors-jl-sharded", "model.safetensors.index.json")
    with mounted(src, *view) as mnt:
        dirs = sums_dirs(mnt)
        assert dirs
        for d in dirs:
            m = os.path.join(d, SUMS)
            size = os.stat(m).st_size
            text = open(m, "rb").read()
            assert len(text) == size
            names = sorted(line.split("  ", 1)[1] for line in text.decode().splitlines())
            here = sorted(f for f in os.listdir(d) if not f.startswith("__") and os.path.isfile(os.path.join(d, f)))
            assert names == here
            r = subprocess.run(["sha256sum", "-c", "--strict", SUMS], cwd=d, capture_output=True, text=True)
            assert r.returncode == 0, r.stdout + r.stderr
    with mounted(src, *view) as mnt:
        d = sums_dirs(mnt)[0]
        bad = bytearray(open(os.path.join(d, SUMS), "rb").read())
        bad[0] = ord("0") if bad[0] != ord("0") else ord("1")
        copy = os.path.join(os.path.dirname(mnt), "bad-sums.txt")
        open(copy, "wb").write(bytes(bad))
        try:
            r = subprocess.run(["sha256sum", "-c", copy], cwd=d, capture_output=True, text=True)
            assert r.returncode == 1 and "FAILED" in r.stdout
        finally:
            os.unlink(copy)


def test_manifest_name_is_reserved(tmp):
    """A tensor named like the manifest gets the escaped name beside it, and
    the manifest lists it under that name."""
    src = os.path.join(tmp, "r.safetensors")
    write_st(src, [(SUMS, "U8", (2,), b"hi"), ("a", "U8", (1,), b"a")])
    assert fname(SUMS) == "%5F_sha256sums__.txt"
    with mounted(src, "-o", "sums") as mnt:
        assert sorted(os.listdir(mnt)) == sorted(["__metadata__.json", "__tensors__.tsv", SUMS,
                                                  "%5F_sha256sums__.txt", "a"])
        lines = open(os.path.join(mnt, SUMS)).read().splitlines()
        assert sorted(lines) == sorted([hashlib.sha256(b"hi").hexdigest() + "  %5F_sha256sums__.txt",
                                        hashlib.sha256(b"a").hexdigest() + "  a"])


def test_no_manifest_without_the_option():
    need_real()
    with mounted(os.path.join(REAL, "tinygrad_mnist_cnn_f32.safetensors")) as mnt:
        assert SUMS not in os.listdir(mnt)


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x40]))


def test_verify_catches_a_flipped_byte(tmp):
    """--verify prints a manifest that --verify and sha256sum's format
    agree on; a byte flipped in a copy is caught, naming the tensor and the
    two hashes (exit 6), in text and in --json."""
    need_real()
    src = os.path.join(tmp, "m.safetensors")
    shutil.copyfile(os.path.join(REAL, "transformers_tinytimemixer_f32.safetensors"), src)
    exp = json.load(open(os.path.join(REAL, "expected.json")))["files"]["transformers_tinytimemixer_f32.safetensors"]
    r = run(["--verify", src])
    assert r.returncode == 0, r.stderr
    man = os.path.join(tmp, "sums.txt")
    open(man, "w").write(r.stdout)
    lines = dict(reversed(line.split("  ", 1)) for line in r.stdout.splitlines())
    assert {k: v["sha256"] for k, v in exp["tensors"].items()} == lines
    ok = run(["--verify", src, man])
    assert ok.returncode == 0 and ok.stdout == "", ok.stdout + ok.stderr
    assert f"{len(lines)} checked, 0 mismatched" in ok.stderr
    info = json.loads(run(["--inspect", "--json", src]).stdout)
    victim = max(info["tensors"], key=lambda t: t["bytes"])
    flip(src, victim["offsets"][0] + victim["bytes"] // 2)
    bad = run(["--verify", src, man])
    assert bad.returncode == EXIT_MISMATCH, bad.stderr
    out = bad.stdout.splitlines()
    assert len(out) == 1 and victim["name"] in out[0] and exp["tensors"][victim["name"]]["sha256"] in out[0]
    now = hashlib.sha256(open(src, "rb").read()[victim["offsets"][0]:victim["offsets"][1]]).hexdigest()
    assert now in out[0]
    js = run(["--verify", "--json", src, man])
    assert js.returncode == EXIT_MISMATCH
    doc = json.loads(js.stdout)
    assert doc["ok"] is False and [m["name"] for m in doc["mismatches"]] == [victim["name"]]
    assert doc["mismatches"][0]["actual"] == now


def test_verify_reads_llama_gguf_hash_manifests(tmp):
    """A manifest in llama-gguf-hash's form (ALGO  HASH  FILE:TENSOR, with
    the whole-model line and algorithms it does not check skipped) is
    checked by xxh64 and sha256; xxh64 sums agree with xxh64sum."""
    rng = np.random.default_rng(3)
    ts = [(f"blk.{i}.w", 0, [32, 4], rng.standard_normal(128).astype(np.float32).tobytes()) for i in range(3)]
    p = os.path.join(tmp, "m.gguf")
    open(p, "wb").write(G.build([("general.architecture", G.STR, "test")], ts))
    with mounted(p) as mnt:
        xx = xxh64sum([os.path.join(mnt, t[0]) for t in ts])
    lines = ["xxh64     0123456789abcdef  m.gguf"]
    for name, _, _, data in ts:
        lines.append(f"xxh64     {xx[os.path.join(mnt, name)]}  m.gguf:{name}")
        lines.append(f"sha1      {hashlib.sha1(data).hexdigest()}  m.gguf:{name}")
        lines.append(f"sha256    {hashlib.sha256(data).hexdigest()}  m.gguf:{name}")
    man = os.path.join(tmp, "m.manifest")
    open(man, "w").write("\n".join(lines) + "\n")
    r = run(["--verify", p, man])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "6 checked, 0 mismatched" in r.stderr
    x = run(["--verify", "--xxh64", p])
    assert x.returncode == 0
    assert sorted(x.stdout.split()) == sorted([xx[os.path.join(mnt, t[0])] for t in ts] + [t[0] for t in ts])
    lines[1] = lines[1].replace(lines[1].split()[1], "f" * 16)
    open(man, "w").write("\n".join(lines) + "\n")
    r = run(["--verify", p, man])
    assert r.returncode == EXIT_MISMATCH and "blk.0.w" in r.stdout and "xxh64" in r.stdout


def test_verify_refusals(tmp):
    src = os.path.join(tmp, "a.safetensors")
    write_st(src, [("w", "U8", (2,), b"ab")])
    empty = os.path.join(tmp, "empty.txt")
    open(empty, "w").write("no checksums here\n")
    for args, says in [(["--verify"], "missing SOURCE"),
                       (["--verify", src, os.path.join(tmp, "nope.txt")], "cannot open the manifest"),
                       (["--verify", src, empty], "no checksum line"),
                       (["--verify", "--inspect", src], "separate tools"),
                       (["--verify", src, empty, "extra"], "unexpected argument")]:
        r = run(args)
        assert r.returncode == EXIT_USAGE, (args, r.stderr)
        assert says in r.stderr and len(r.stderr.splitlines()) == 1, (args, r.stderr)
    gone = os.path.join(tmp, "nope.safetensors")
    assert run(["--verify", gone]).returncode == 3
    missing_tensor = os.path.join(tmp, "m.txt")
    open(missing_tensor, "w").write("0" * 64 + "  not_there\n")
    r = run(["--verify", src, missing_tensor])
    assert r.returncode == EXIT_MISMATCH and "not_there" in r.stdout and "not in the checkpoint" in r.stdout


def test_hashes_kept_in_the_disk_cache(tmp):
    """Over http with cache_dir, a tensor's hash worked out once (by
    --verify) is kept beside its blocks: a later mount answers it with no
    data read, even with every block file gone, and so does diff, which
    then reads only the tensor whose hashes differ."""
    root = os.path.join(tmp, "www")
    os.makedirs(root)
    for p in (tmp, root):
        os.chmod(p, 0o755)
    rng = np.random.default_rng(9)
    # more tensors than the memo's first index holds (it grows)
    ts = [(f"t{i}", "F32", (64, 256), rng.standard_normal((64, 256)).astype(np.float32).tobytes()) for i in range(40)]
    write_st(os.path.join(root, "a.safetensors"), ts)
    changed = bytearray(ts[2][3])
    changed[100] ^= 0x40
    write_st(os.path.join(root, "b.safetensors"), ts[:2] + [("t2", "F32", (64, 256), bytes(changed))] + ts[3:])
    for f in os.listdir(root):
        os.chmod(os.path.join(root, f), 0o644)
    cache = os.path.join(tmp, "cache")
    with Nginx(root) as ng:
        a, b = ng.url("plain", "a.safetensors"), ng.url("plain", "b.safetensors")
        for u in (a, b):
            r = run(["--verify", "-o", f"cache_dir={cache}", u])
            assert r.returncode == 0, r.stderr
        blocks = [os.path.join(d, f) for d, _, fs in os.walk(cache) for f in fs if f.endswith(".blk")]
        assert blocks and [f for d, _, fs in os.walk(cache) for f in fs if f == "memo"]
        for p in blocks:
            os.unlink(p)
        ng.clear_log()
        with mounted(a, "-o", f"cache_dir={cache}") as mnt:
            for name, _, _, data in ts:
                assert os.getxattr(os.path.join(mnt, name), "user.hash.sha256").decode() == \
                    hashlib.sha256(data).hexdigest()
        # the mount's first request only: no tensor byte
        assert len(ng.requests()) == 1, ng.requests()
        ng.clear_log()
        r = run(["diff", "--json", "-o", f"cache_dir={cache}", a, b])
        assert r.returncode == 1, r.stderr
        d = json.loads(r.stdout)
        assert [t["name"] for t in d["tensors"] if t["status"] != "identical"] == ["t2"]
        assert d["bytes_read"] == 2 * len(ts[2][3])
        # without the memo, diff compares every tensor's bytes
        r = run(["diff", "--json", a, b])
        assert json.loads(r.stdout)["bytes_read"] > 2 * len(ts[2][3])
