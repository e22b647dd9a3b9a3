"""Issue 35, part 6: every manifest tensorfs writes is read back, by
--verify and by sha256sum -c, and checks every tensor. One rule for the
names in it: a tensor's file name in a flat mount (README, "File names"),
which --verify reads back with the mapping undone when a mount's views
renamed it (x.png shown as x%2Epng beside the pictures), and the empty
name as %empty."""

import json
import os
import struct
import subprocess

import numpy as np
import pytest

from tfsutil import fname, mounted, run, write_st

# Names that meet each rule: a view's suffix, the empty name, '/', '%',
# a backslash (sha256sum's escaped form), a control character.
NAMES = ["x", "x.png", "y", "y.stats.json", "", "a/b", "c%d", "back\\slash", "tab\there", "plain.weight"]


def source(tmp):
    rng = np.random.default_rng(8)
    ts = [(n, "F32", (3, 5), rng.standard_normal((3, 5)).astype(np.float32).tobytes()) for n in NAMES]
    src = os.path.join(tmp, "m.safetensors")
    write_st(src, ts)
    return src


def verify(src, manifest):
    r = run(["--verify", src, manifest])
    return r.returncode, r.stdout, r.stderr


def test_a_mounts_own_manifest_round_trips(tmp):
    """-o sums with -o pictures and stats: the root's __sha256sums__.txt
    names x.png and y.stats.json x%2Epng and y%2Estats.json (their own
    names are the pictures' and statistics' of x and y). sha256sum -c in
    the mount checks every file, and --verify reads every line back to its
    tensor: all checked, none missing (they were reported missing, exit
    6)."""
    src = source(tmp)
    man = os.path.join(tmp, "mount.sha256")
    with mounted(src, "-o", "sums,pictures,stats") as mnt:
        text = open(os.path.join(mnt, "__sha256sums__.txt"), "rb").read()
        assert b"  x%2Epng\n" in text and b"  y%2Estats.json\n" in text and b"  %empty\n" in text, text
        open(man, "wb").write(text)
        r = subprocess.run(["sha256sum", "--strict", "-c", "__sha256sums__.txt"], cwd=mnt, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.count(": OK") == len(NAMES), r.stdout + r.stderr
    rc, out, err = verify(src, man)
    assert rc == 0 and f"{len(NAMES)} checked, 0 mismatched" in err and not out, (out, err)


def flip_tensor(src, tmp, name):
    """A copy of src with one byte of tensor `name` changed."""
    raw = open(src, "rb").read()
    n = struct.unpack_from("<Q", raw)[0]
    hdr = json.loads(raw[8:8 + n])
    at = 8 + n + hdr[name]["data_offsets"][0]
    bad = bytearray(raw)
    bad[at] ^= 0x40
    out = os.path.join(tmp, "bad.safetensors")
    open(out, "wb").write(bytes(bad))
    return out


def test_verify_output_round_trips(tmp):
    """--verify SOURCE writes each tensor by its flat file name, the empty
    name as %empty (it was 'HASH  ', which no reader takes: that tensor was
    never checked): --verify reads all of it back, a changed byte of the
    empty-named tensor is caught, and sha256sum -c checks it in a mount's
    root."""
    src = source(tmp)
    r = run(["--verify", src])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(NAMES) and all(line.split("  ", 1)[1] for line in lines), lines
    names = {line.split("  ", 1)[1] for line in lines if not line.startswith("\\")}
    assert "%empty" in names and "a%2Fb" in names and "c%25d" in names and "tab%09here" in names, names
    man = os.path.join(tmp, "m.sha256")
    open(man, "w").write(r.stdout)
    rc, out, err = verify(src, man)
    assert rc == 0 and f"{len(NAMES)} checked, 0 mismatched" in err, err
    rc, out, err = verify(flip_tensor(src, tmp, ""), man)
    assert rc == 6 and out.startswith("'': sha256 differs"), (out, err)
    with mounted(src) as mnt:
        r = subprocess.run(["sha256sum", "--strict", "-c", man], cwd=mnt, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0 and r.stdout.count(": OK") == len(NAMES), r.stdout + r.stderr
        assert sorted(os.listdir(mnt)) == sorted([fname(n) for n in NAMES] + ["__metadata__.json",
                                                                                "__tensors__.tsv"])


TREE = ["model.layers.0.w", "model.layers.0.b", "model.layers.1.w", "model.layers.1.b", "model.norm", "lm_head",
        "model.layers.10.w"]


def test_a_tree_mounts_directory_manifests_round_trip(tmp):
    """-o layout=tree,sums writes __sha256sums__.txt in each directory,
    naming that directory's files alone (w, b: the same names in every
    layer). sha256sum -c checks each where it is, and --verify reads each
    against the directory its own path ends in: in the mount, and copied
    under the same directories elsewhere (they were all reported missing,
    exit 6, and layers/0's 'w' could only be ambiguous). A copy with no such
    directories reports its names missing; a changed byte is caught, naming
    the tensor."""
    rng = np.random.default_rng(9)
    src = os.path.join(tmp, "t.safetensors")
    write_st(src, [(n, "F32", (2, 3), rng.standard_normal((2, 3)).astype(np.float32).tobytes()) for n in TREE])
    copies = os.path.join(tmp, "copies")
    seen = {}
    with mounted(src, "-o", "layout=tree,sums") as mnt:
        for d, _, files in os.walk(mnt):
            if "__sha256sums__.txt" not in files:
                continue
            rel = os.path.relpath(d, mnt)
            text = open(os.path.join(d, "__sha256sums__.txt"), "rb").read()
            seen[rel] = text.count(b"\n")
            r = subprocess.run(["sha256sum", "--strict", "-c", "__sha256sums__.txt"], cwd=d, capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 0 and r.stdout.count(": OK") == seen[rel], (rel, r.stdout + r.stderr)
            rc, out, err = verify(src, os.path.join(d, "__sha256sums__.txt"))
            assert rc == 0 and not out and f"{seen[rel]} checked, 0 mismatched" in err, (rel, out, err)
            os.makedirs(os.path.join(copies, "x", rel))
            open(os.path.join(copies, "x", rel, "__sha256sums__.txt"), "wb").write(text)
        # a path with "." and ".." in it names the same directory
        rc, out, err = verify(src, os.path.join(mnt, "model", "layers", "1", "..", ".", "0", "__sha256sums__.txt"))
        assert rc == 0 and "2 checked, 0 mismatched" in err, (out, err)
    assert seen == {".": 1, "model": 1, "model/layers/0": 2, "model/layers/1": 2, "model/layers/10": 1}, seen
    for rel, n in seen.items():
        rc, out, err = verify(src, os.path.join(copies, "x", rel, "__sha256sums__.txt"))
        assert rc == 0 and f"{n} checked, 0 mismatched" in err, (rel, out, err)
    lone = os.path.join(tmp, "lone.sha256")
    open(lone, "wb").write(open(os.path.join(copies, "x", "model/layers/1", "__sha256sums__.txt"), "rb").read())
    rc, out, err = verify(src, lone)
    assert rc == 6 and "'w': in the manifest, not in the checkpoint" in out, (out, err)
    rc, out, err = verify(flip_tensor(src, tmp, "model.layers.1.b"),
                          os.path.join(copies, "x", "model/layers/1", "__sha256sums__.txt"))
    assert rc == 6 and out.startswith("'model.layers.1.b': sha256 differs") and out.count("\n") == 1, (out, err)


@pytest.mark.parametrize("views", ["format=npy", "convert=f32", "format=npy,convert=f32,layout=tree"])
def test_a_manifest_of_npy_and_f32_files_round_trips(tmp, views):
    """-o sums with format=npy or convert=f32 hashes the files the mount
    shows (x.npy, the float32 values): --verify with the same -o reads each
    such manifest back and checks every line (it hashed the raw bytes and
    found none of the names, exit 6), and prints the same manifest itself."""
    rng = np.random.default_rng(10)
    src = os.path.join(tmp, "v.safetensors")
    write_st(src, [(n, "BF16", (2, 3), rng.integers(0, 1 << 16, 6, dtype=np.uint16).tobytes()) for n in TREE])
    opts = views.split(",")
    with mounted(src, "-o", ",".join(["sums"] + opts)) as mnt:
        mans = [os.path.join(d, "__sha256sums__.txt") for d, _, fs in os.walk(mnt) if "__sha256sums__.txt" in fs]
        assert mans
        for man in mans:
            lines = open(man, "rb").read().count(b"\n")
            r = subprocess.run(["sha256sum", "--strict", "-c", "__sha256sums__.txt"], cwd=os.path.dirname(man),
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0 and r.stdout.count(": OK") == lines, r.stdout + r.stderr
            r = run(["--verify", "-o", views, src, man])
            assert r.returncode == 0 and f"{lines} checked, 0 mismatched" in r.stderr, (man, r.stdout, r.stderr)
            r = run(["--verify", src, man])
            assert r.returncode == 6, (man, r.stderr)
        if "layout=tree" not in opts:
            printed = run(["--verify", "-o", views, src])
            assert printed.returncode == 0 and printed.stdout == open(mans[0]).read(), printed.stdout


def test_older_manifests_still_read(tmp):
    """Tensor names as they are (llama-gguf-hash's, a list made by hand,
    tensorfs's own before the rule) are still found; and an empty name
    after the two spaces is the empty tensor's."""
    src = source(tmp)
    r = run(["--verify", "--json", src])
    hashes = {t["name"]: t["sha256"] for t in json.loads(r.stdout)["tensors"]}
    man = os.path.join(tmp, "raw.sha256")
    with open(man, "w") as f:
        for n, h in hashes.items():
            if "\\" not in n and "\t" not in n:
                f.write(f"{h}  {n}\n")
    rc, out, err = verify(src, man)
    assert rc == 0 and f"{len(NAMES) - 2} checked, 0 mismatched" in err, (out, err)


def test_a_line_whose_name_holds_a_nul_is_checked(tmp):
    """A line whose name holds a NUL byte was skipped in silence ("0
    checked, 0 mismatched", exit 0) where sha256sum -c fails it. The NUL is
    a byte of the name like any other (a tensor's name may hold one; its
    file name has %00): the line names a tensor that is not there, a
    mismatch (exit 6), or the tensor of that very name, which is checked.
    sha256sum -c reads the name only up to the NUL; --verify never takes
    'x\\0y' for 'x'."""
    src = os.path.join(tmp, "n.safetensors")
    write_st(src, [("x", "F32", (2,), b"\1" * 8), ("n\0ul", "F32", (2,), b"\2" * 8)])
    r = run(["--verify", "--json", src])
    hashes = {t["name"]: t["sha256"] for t in json.loads(r.stdout)["tensors"]}
    assert set(hashes) == {"x", "n\0ul"}
    man = os.path.join(tmp, "nul.sha256")
    for want, line, out in [
            (6, "0" * 64 + "  x\0y\n", "'x\\x00y': in the manifest, not in the checkpoint\n"),
            (6, hashes["x"] + "  x\0y\n", "'x\\x00y': in the manifest, not in the checkpoint\n"),
            (0, hashes["n\0ul"] + "  n\0ul\n", ""),
            (6, hashes["x"] + "  n\0ul\n",
             f"'n\\x00ul': sha256 differs: expected {hashes['x']}, got {hashes['n' + chr(0) + 'ul']}\n")]:
        open(man, "wb").write(line.encode())
        rc, o, err = verify(src, man)
        assert (rc, o) == (want, out), (line, rc, o, err)
        checked = 0 if "x\0y" in line else 1
        assert err.endswith(f": {checked} checked, {int(bool(want))} mismatched\n"), (line, err)
    # beside a good line (it was "1 checked, 0 mismatched", exit 0)
    open(man, "wb").write((hashes["x"] + "  x\n" + "0" * 64 + "  n\0ul\n").encode())
    rc, o, err = verify(src, man)
    assert rc == 6 and o.startswith("'n\\x00ul': sha256 differs") and err.endswith(": 2 checked, 1 mismatched\n")
    # what sha256sum -c makes of the first line, in a mount's root
    open(man, "wb").write(("0" * 64 + "  x\0y\n").encode())
    with mounted(src) as mnt:
        r = subprocess.run(["sha256sum", "-c", man], cwd=mnt, capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and "x: FAILED" in r.stdout, r.stdout + r.stderr
    # a NUL in the digest: no checksum line, as for sha256sum
    open(man, "wb").write((hashes["x"] + "  x\n" + "0" * 10 + "\0" + "0" * 53 + "  x\n").encode())
    rc, o, err = verify(src, man)
    assert rc == 0 and err.endswith(": 1 checked, 0 mismatched (some manifest lines were not checksum "
                                    "lines)\n"), err


@pytest.mark.parametrize("n", [1, 3])
def test_a_manifest_of_npy_files_says_which_option_wrote_it(tmp, n):
    """A manifest written with -o format=npy names every tensor's file
    NAME.npy: checked without the option it was "of another model" (and a
    one-line manifest had no hint at all). The first line now says which -o
    wrote it; the lines and the exit code stay; with the option it checks."""
    names = [f"model.layers.{i}.w" for i in range(n)]
    src = os.path.join(tmp, "p.safetensors")
    write_st(src, [(name, "F32", (2,), bytes([i]) * 8) for i, name in enumerate(names)])
    r = run(["--verify", "-o", "format=npy", src])
    assert r.returncode == 0 and r.stdout.count(".npy\n") == n, r.stdout
    man = os.path.join(tmp, "npy.sha256")
    open(man, "w").write(r.stdout)
    rc, out, err = verify(src, man)
    assert rc == 6 and out.count("in the manifest, not in the checkpoint") == n, (out, err)
    assert err.splitlines()[0] == (
        f"tensorfs: {man}: its names are the tensors' names with .npy added: it was written with -o "
        "format=npy; check it with the same -o (tensorfs --verify -o format=npy SOURCE MANIFEST)"), err
    assert "another model" not in err
    r = run(["--verify", "-o", "format=npy", src, man])
    assert r.returncode == 0 and f"{n} checked, 0 mismatched" in r.stderr, r.stderr
    # names of another model with .npy added are still another model's
    other = os.path.join(tmp, "o.safetensors")
    write_st(other, [(f"transformer.h.{i}.w", "F32", (2,), b"\0" * 8) for i in range(3)])
    rc, out, err = verify(other, man)
    assert rc == 6 and "with .npy added" not in err, err
