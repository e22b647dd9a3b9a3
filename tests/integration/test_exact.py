"""Issue 35, part 4: numbers and names are never changed without a word.
An edits file's integer past 64 bits, U+0000, text that is not UTF-8 or a
lone surrogate is refused at mount (exit 2, one line naming the file and
the key); a key of any length is applied exactly. diff compares integers
exactly and F64 values near 1e308 without overflow, as --stats does. Every
JSON output is valid UTF-8 (bytes that are not become U+FFFD); every path a
message names is shown on one line (quoted when it must be)."""

import json
import os
import struct
import subprocess

import numpy as np
import pytest

import gen_gguf as G
from tfsutil import BIN, EXIT_USAGE, mounted, run, write_st

LONG = "x.long." + "k" * 4993  # 5,000 bytes: past the 4,096 a key once had


def gguf(tmp, kvs=(), tensors=None, name="m.gguf"):
    p = os.path.join(tmp, name)
    if tensors is None:
        tensors = [("w", 0, [8], np.arange(8, dtype=np.float32).tobytes())]
    open(p, "wb").write(G.build([("general.architecture", G.STR, "llama")] + list(kvs), tensors))
    return p


def edits(tmp, text, name="edits.json"):
    p = os.path.join(tmp, name)
    with open(p, "wb") as f:
        f.write(text if isinstance(text, bytes) else text.encode())
    return p


def metadata(src, *opts):
    with mounted(src, *opts) as mnt:
        raw = open(os.path.join(mnt, "__metadata__.json"), "rb").read()
    return json.loads(raw.decode("utf-8"))


REFUSED = [
    ("UINT64 past 2^64-1", '{"x.u64": {"type": "UINT64", "value": 18446744073709551616}}',
     "'x.u64'", "18446744073709551616 is out of range"),
    ("a natural integer past 64 bits", '{"x": 99999999999999999999999999}', "'x'",
     "99999999999999999999999999 is out of range"),
    ("below INT64's least", '{"x": {"type": "INT64", "value": -9223372036854775809}}', "'x'",
     "-9223372036854775809 is out of range"),
    ("an array element past 64 bits",
     '{"x": {"type": "ARRAY", "element_type": "UINT64", "value": [1, 18446744073709551617]}}', "'x'",
     "out of range"),
    ("a key holding NUL", '{"a\\u0000b": 1}', "'a\\x00b'", "U+0000"),
    ("a string holding NUL", '{"a": "x\\u0000y"}', "'a'", "U+0000"),
    ("bytes that are not UTF-8", b'{"a": "\xff\xfe"}', "byte 7", "not UTF-8"),
    ("a lone surrogate", '{"a": "\\ud800"}', "", "lone surrogate"),
    ("a FLOAT64 past its range", '{"a": {"type": "FLOAT64", "value": 1e400}}', "", "out of the range"),
]


@pytest.mark.parametrize("case,text,where,msg", REFUSED, ids=[c[0] for c in REFUSED])
def test_edits_refuse_what_would_change(tmp, case, text, where, msg):
    """json-c saturates 2^64 to 2^64-1, cuts a key at U+0000 and takes
    invalid UTF-8 and lone surrogates: each is refused at mount, one line
    naming the file and the key, exit 2, nothing mounted."""
    src = gguf(tmp, [("x.u64", G.U64, 1)])
    ed = edits(tmp, text)
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = run(["-o", f"edits={ed}", src, mnt])
    assert r.returncode == EXIT_USAGE, (case, r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and ed in r.stderr and where in r.stderr and msg in r.stderr, r.stderr
    assert not os.listdir(mnt)


def test_edits_of_string_metadata_refuse_what_would_change(tmp):
    """safetensors' string metadata: a value that is not UTF-8, or holds
    NUL, is refused (it once reached __metadata__.json as a raw 0xFF)."""
    src = os.path.join(tmp, "m.safetensors")
    write_st(src, [("w", "F32", [2], b"\0" * 8)], metadata={"format": "pt"})
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    for text in (b'{"format": "\xff"}', '{"a": "x\\u0000y"}', '{"a\\u0000": "y"}'):
        r = run(["-o", f"edits={edits(tmp, text)}", src, mnt])
        assert r.returncode == EXIT_USAGE and r.stderr.count("\n") == 1, r.stderr


def test_edits_take_the_extremes_exactly(tmp):
    """What fits is taken exactly: 2^64-1 and -2^63."""
    src = gguf(tmp)
    ed = edits(tmp, '{"x.max": 18446744073709551615, "x.min": -9223372036854775808,'
                    ' "x.u": {"type": "UINT64", "value": 18446744073709551615}}')
    md = metadata(src, "-o", f"edits={ed}")
    assert md["x.max"] == {"type": "UINT64", "value": 18446744073709551615}
    assert md["x.min"] == {"type": "INT64", "value": -9223372036854775808}
    assert md["x.u"]["value"] == 2**64 - 1


def test_edits_long_key_set_deleted_or_refused(tmp):
    """A key of 5,000 bytes is set, deleted, or (given the wrong type)
    refused; it was left as it was, whatever the edit said."""
    src = gguf(tmp, [(LONG, G.U32, 5)])
    assert metadata(src)[LONG] == {"type": "UINT32", "value": 5}
    assert metadata(src, "-o", f"edits={edits(tmp, json.dumps({LONG: 7}))}")[LONG]["value"] == 7
    assert LONG not in metadata(src, "-o", f"edits={edits(tmp, json.dumps({LONG: None}))}")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = run(["-o", f"edits={edits(tmp, json.dumps({LONG: 'text'}))}", src, mnt])
    assert r.returncode == EXIT_USAGE and "must be an integer" in r.stderr and r.stderr.count("\n") == 1
    # and in model.gguf, which the export makes from the edited table
    with mounted(src, "-o", f"export,edits={edits(tmp, json.dumps({LONG: 9}))}") as m:
        data = open(os.path.join(m, "model.gguf"), "rb").read()
    key = LONG.encode()
    at = data.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)
    assert struct.unpack_from("<II", data, at) == (G.U32, 9)


def ints(tmp, name, dtype, values):
    p = os.path.join(tmp, name)
    a = np.array(values, dtype=dtype)
    st = {np.int32: "I32", np.int64: "I64", np.uint64: "U64"}[dtype]
    write_st(p, [("t", st, a.shape, a.tobytes())])
    return p


def diff(*args):
    r = run(["diff", "--json"] + list(args))
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)


def test_diff_compares_integers_exactly(tmp):
    """I64 [2^53, 2^62, 2^53+1] against [2^53+1, 2^62+1, 2^53] read the
    same through float64: they differ, exit 1, by exactly 1. Integers of
    different widths compare by value; U64 against I64 by 65 bits."""
    a = ints(tmp, "a.safetensors", np.int64, [2**53, 2**62, 2**53 + 1])
    b = ints(tmp, "b.safetensors", np.int64, [2**53 + 1, 2**62 + 1, 2**53])
    rc, d = diff(a, b)
    t = d["tensors"][0]
    assert rc == 1 and t["status"] == "differs" and t["max_abs"] == 1 and isinstance(t["max_abs"], int), d
    text = run(["diff", a, b])
    assert text.returncode == 1 and "max_abs 1 " in text.stdout, text.stdout
    # the same values in other widths: equal by value
    c = ints(tmp, "c.safetensors", np.int32, [-5, 7, 2**31 - 1])
    e = ints(tmp, "e.safetensors", np.int64, [-5, 7, 2**31 - 1])
    rc, d = diff(c, e)
    assert rc == 0 and d["tensors"][0]["status"] == "equal", d
    # U64's largest against I64's least: 2^64 - 1 + 2^63, exactly
    u = ints(tmp, "u.safetensors", np.uint64, [2**64 - 1, 0, 1])
    s = ints(tmp, "s.safetensors", np.int64, [-(2**63), 0, 1])
    rc, d = diff(u, s)
    assert rc == 1 and d["tensors"][0]["max_abs"] == 2**64 - 1 + 2**63, d


def f64(tmp, name, values):
    p = os.path.join(tmp, name)
    a = np.array(values, np.float64)
    write_st(p, [("t", "F64", a.shape, a.tobytes())])
    return p


def test_stats_and_diff_near_the_largest_f64(tmp):
    """Values near +-1e308 overflow a square or a sum in float64: --stats
    still gives mean and std (not null), and diff max_abs (not a dash),
    rel_l2 and cosine, worked out scaled by a power of two."""
    big = f64(tmp, "big.safetensors", [1e308, -1e308, 1e308, -1e308, 1.0])
    r = run(["--stats", "--json", big])
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)["tensors"][0]["stats"]
    x = np.array([1e308, -1e308, 1e308, -1e308, 1.0])
    mean = float(np.mean(x / 2**1000)) * 2**1000
    std = float(np.std(x / 2**1000)) * 2**1000
    assert s["mean"] == pytest.approx(mean, rel=1e-12) and s["std"] == pytest.approx(std, rel=1e-12), s
    same = f64(tmp, "same.safetensors", [1.5e308, 1.5e308, 1.7e308])
    s = json.loads(run(["--stats", "--json", same]).stdout)["tensors"][0]["stats"]
    assert s["mean"] == pytest.approx(1.5e308 / 3 * 2 + 1.7e308 / 3, rel=1e-12), s
    assert s["std"] == pytest.approx(float(np.std(np.array([1.5, 1.5, 1.7]))) * 1e308, rel=1e-9), s
    assert sum(s["histogram"]["counts"]) == 3 and s["histogram"]["counts"][0] == 2, s
    table = run(["--stats", big]).stdout.splitlines()[1].split()
    assert "-" not in table, table
    # diff: |1e308 - -1e308| = 2e308 is past DBL_MAX, and is said
    other = f64(tmp, "other.safetensors", [-1e308, 1e308, 1e308, -1e308, 1.0])
    r = run(["diff", "--json", big, other])
    assert r.returncode == 1, r.stderr
    assert '"max_abs": 2.0000000000000000e+308' in r.stdout or '"max_abs": 2e+308' in r.stdout, r.stdout
    t = json.loads(r.stdout)["tensors"][0]
    assert t["rel_l2"] == pytest.approx(np.sqrt(2), rel=1e-9) and t["cosine"] == pytest.approx(0, abs=1e-9), t
    text = run(["diff", big, other]).stdout
    assert "max_abs 2e+308" in text and " - " not in text.split("\n")[0], text
    # below DBL_MAX but squares past it: rel_l2 and cosine are numbers
    rc, d = diff(f64(tmp, "p.safetensors", [1e200, 2e200]), f64(tmp, "q.safetensors", [1e200, 3e200]))
    t = d["tensors"][0]
    assert t["max_abs"] == pytest.approx(1e200) and t["rel_l2"] == pytest.approx(1 / np.sqrt(5)), t
    assert t["cosine"] == pytest.approx(7 / np.sqrt(5 * 10)), t


def strict_json(raw):
    """Valid UTF-8 (a strict decoder) and JSON."""
    return json.loads(raw.decode("utf-8", errors="strict"))


def test_every_json_output_is_utf8(tmp):
    """GGUF names and strings may hold any bytes: every --json output and
    every generated JSON file writes each byte that is not UTF-8 as U+FFFD
    (json-c's writer and the old one passed them through)."""
    data = np.arange(8, dtype=np.float32).tobytes()
    src = os.path.join(tmp, "bad.gguf")
    open(src, "wb").write(G.build([("general.architecture", G.STR, "llama"),
                                   ("general.name", G.STR, b"caf\xe9 \xff"),
                                   ("x.list", G.ARR, (G.STR, [b"\xc3", b"ok"]))],
                                  [(b"w\xff\xfe", 0, [8], data), ("plain", 0, [8], data)]))
    outs = {}
    for args in (["--stats", "--json"], ["--inspect", "--json"], ["--verify", "--json"]):
        r = subprocess.run([BIN] + args + [src], capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
        outs[args[0]] = strict_json(r.stdout)
    names = [t["name"] for t in outs["--stats"]["tensors"]]
    assert "w\ufffd\ufffd" in names, names
    assert "w\ufffd\ufffd" in json.dumps(outs["--inspect"], ensure_ascii=False)
    assert "caf\ufffd \ufffd" in json.dumps(outs["--inspect"], ensure_ascii=False)
    r = subprocess.run([BIN, "diff", "--json", src, src], capture_output=True, timeout=60)
    assert r.returncode == 0 and "w\ufffd\ufffd" in [t["name"] for t in strict_json(r.stdout)["tensors"]]
    manifest = os.path.join(tmp, "m.sha256")
    with open(manifest, "w") as f:
        f.write("0" * 64 + "  w%FF\n")
    r = subprocess.run([BIN, "--verify", "--json", src, manifest], capture_output=True,
                       timeout=60)
    assert r.returncode == 6 and strict_json(r.stdout)["ok"] is False, r.stderr
    with mounted(src, "-o", "stats") as mnt:
        md = strict_json(open(os.path.join(mnt, "__metadata__.json"), "rb").read())
        assert md["general.name"]["value"] == "caf\ufffd \ufffd"
        assert md["x.list"]["value"] == ["\ufffd", "ok"]
        for f in os.listdir(mnt):
            if f.endswith(".json"):
                strict_json(open(os.path.join(mnt, f), "rb").read())


def test_verify_quotes_names_without_a_manifest(tmp):
    """--verify SOURCE prints a manifest whose names are file names (the
    mapping of "File names": a control byte as %XX), so an escape sequence
    in a hostile name never reaches the terminal."""
    data = np.arange(4, dtype=np.float32).tobytes()
    src = os.path.join(tmp, "hostile.gguf")
    open(src, "wb").write(G.build([("general.architecture", G.STR, "llama")],
                                  [(b"x\x1b[31mred\x07", 0, [4], data), (b"line\nbreak", 0, [4], data)]))
    r = subprocess.run([BIN, "--verify", src], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert b"\x1b" not in r.stdout and b"\x07" not in r.stdout and r.stdout.count(b"\n") == 2, r.stdout
    assert b"x%1B[31mred%07" in r.stdout and b"line%0Abreak" in r.stdout, r.stdout


def test_paths_with_a_newline_stay_on_one_line(tmp):
    """A path the user gives that holds a newline (or any control
    character) is quoted in every message: each stays one line."""
    d = os.path.join(tmp, "a\nb")
    os.mkdir(d)
    good = os.path.join(d, "m.safetensors")
    write_st(good, [("x", "F32", [2], b"\0" * 8)])
    bad = os.path.join(d, "bad.safetensors")
    open(bad, "wb").write(b"garbage garbage garbage")
    mnt = os.path.join(d, "mnt")
    os.mkdir(mnt)
    ne = os.path.join(d, "ne")
    os.mkdir(ne)
    open(os.path.join(ne, "f"), "w").close()
    ed = edits(d, "{bad")
    man = os.path.join(d, "man.txt")
    open(man, "w").write("nothing\n")
    cases = [
        [os.path.join(d, "missing.safetensors"), mnt],
        [bad, mnt],
        [good, os.path.join(d, "nomnt")],
        [good, good],
        ["--inspect", os.path.join(d, "missing")],
        ["--stats", bad],
        ["--verify", good, os.path.join(d, "noman")],
        ["--verify", good, man],
        ["diff", good, os.path.join(d, "nob")],
        ["-o", f"edits={ed}", good, mnt],
        ["-o", f"edits={os.path.join(d, 'noed')}", good, mnt],
        [d, mnt],
    ]
    for c in cases:
        r = run(c)
        assert r.returncode != 0 and r.stderr.count("\n") == 1 and "a\\x0ab" in r.stderr, (c, r.stderr)
    r = run([good, ne])  # a warning (not empty), then mounted
    try:
        assert r.returncode == 0 and r.stderr.count("\n") == 1 and "a\\x0ab" in r.stderr, r.stderr
    finally:
        subprocess.run(["fusermount3", "-u", ne], capture_output=True)
