"""One pipeline (issue 36, item 3): the mount, --inspect, --verify, --stats
and diff open a checkpoint the same way (fs/mount.c), so -o edits= is read
and applied by every one of them, not by the mount alone."""

import json
import os

from tfsutil import mounted, run, write_st


def model(tmp, name, meta):
    path = os.path.join(tmp, name)
    write_st(path, [("w", "F32", [2], b"\x00\x00\x80\x3f\x00\x00\x00\x40")], metadata=meta)
    return path


def edits(tmp, obj):
    path = os.path.join(tmp, "edits.json")
    with open(path, "w") as f:
        json.dump(obj, f)
    return path


def test_inspect_sees_the_edits_the_mount_sees(tmp):
    a = model(tmp, "a.safetensors", {"k": "old", "gone": "x"})
    ed = edits(tmp, {"k": "new", "gone": None})
    r = run(["--inspect", "--json", "-o", f"edits={ed}", a])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    text = json.dumps(out)
    assert '"new"' in text and '"old"' not in text and '"gone"' not in text, text
    with mounted(a, "-o", f"edits={ed}") as mnt:
        meta = json.load(open(os.path.join(mnt, "__metadata__.json")))
    assert meta == {"k": "new"}
    # without the edits, the file as it is
    r = run(["--inspect", "--json", a])
    assert r.returncode == 0 and '"old"' in r.stdout


def test_diff_reads_the_edits(tmp):
    """diff compares tensors, which edits never change: with good edits
    the answer is the same; a broken edits file is trouble (2), as diff(1)
    says, in one line naming it."""
    a = model(tmp, "a.safetensors", {"k": "1"})
    b = model(tmp, "b.safetensors", {"k": "2"})
    assert run(["diff", a, b]).returncode == 0
    ed = edits(tmp, {"k": "3"})
    assert run(["diff", "-o", f"edits={ed}", a, b]).returncode == 0
    bad = os.path.join(tmp, "bad.json")
    open(bad, "w").write("{not json")
    r = run(["diff", "-o", f"edits={bad}", a, b])
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "bad.json" in r.stderr, r.stderr


def test_tools_refuse_a_bad_edits_file(tmp):
    """--verify and --stats read the edits too: a broken file is one line
    and the usage exit, as for a mount."""
    a = model(tmp, "a.safetensors", {"k": "1"})
    bad = os.path.join(tmp, "bad.json")
    open(bad, "w").write("{not json")
    mount = run(["-o", f"edits={bad}", a, tmp])
    assert mount.returncode != 0 and "bad.json" in mount.stderr
    for tool in (["--verify"], ["--stats"], ["--inspect"]):
        r = run(tool + ["-o", f"edits={bad}", a])
        assert r.returncode == mount.returncode and r.stderr.count("\n") == 1 and "bad.json" in r.stderr, \
            (tool, r.stderr)
