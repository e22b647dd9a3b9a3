"""The user's guide (README.md, docs/*.md) as scripts/check-docs.py checks
it in make check: links and anchors resolve, contents lists are current,
every -o option of --help is documented in the guide and the man page; and
the checker itself fails on a broken link, a broken anchor, a stale
contents list and an undocumented option (run on a copy of the guide)."""

import os
import shutil
import stat
import subprocess
import sys

from tfsutil import BIN, REPO

SCRIPT = os.path.join(REPO, "scripts", "check-docs.py")


def check(root=REPO, binary=BIN, *extra):
    return subprocess.run([sys.executable, SCRIPT, "--root", root, "--bin", binary, *extra],
                          capture_output=True, text=True, timeout=60)


def guide_copy(tmp):
    """README.md and docs/ in a directory of their own (the guide links to
    nothing else in the checkout)."""
    root = os.path.join(tmp, "repo")
    shutil.copytree(os.path.join(REPO, "docs"), os.path.join(root, "docs"))
    shutil.copy(os.path.join(REPO, "README.md"), root)
    return root


def append(path, text):
    with open(path, "a") as f:
        f.write(text)


def test_the_guide_passes():
    r = check()
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.endswith(": 0 problems") and " 0 relative links" not in last, last


def test_a_broken_link_fails(tmp):
    root = guide_copy(tmp)
    assert check(root).returncode == 0, check(root).stdout
    append(os.path.join(root, "docs", "views.md"), "\nSee [the missing page](nothere.md).\n")
    r = check(root)
    assert r.returncode == 1, r.stdout
    assert "docs/views.md:" in r.stdout and "broken link 'nothere.md'" in r.stdout, r.stdout


def test_a_broken_anchor_fails(tmp):
    root = guide_copy(tmp)
    append(os.path.join(root, "README.md"), "\n[x](docs/mounting.md#no-such-heading)\n")
    r = check(root)
    assert r.returncode == 1 and "broken anchor 'docs/mounting.md#no-such-heading'" in r.stdout, r.stdout


def test_anchors_follow_githubs_rules(tmp):
    """Lowercase, punctuation dropped, spaces to '-', repeats numbered;
    a link inside a code span is not a link."""
    root = guide_copy(tmp)
    page = os.path.join(root, "docs", "rules.md")
    with open(page, "w") as f:
        f.write("# Rules\n\n## Exported files (`-o export`)\n\n## Notes\n\n## Notes\n\n"
                "```\n[not a link](nowhere.md)\n```\n\n`[code](nowhere.md)`\n\n"
                "[a](#exported-files--o-export) [b](#notes) [c](#notes-1) [d](rules.md#rules)\n")
    r = check(root)
    assert r.returncode == 0, r.stdout
    append(page, "[e](#notes-2)\n")
    r = check(root)
    assert r.returncode == 1 and "'#notes-2'" in r.stdout, r.stdout


def test_a_stale_contents_list_fails_and_is_rewritten(tmp):
    root = guide_copy(tmp)
    append(os.path.join(root, "docs", "tools.md"), "\n## A new section\n\nText.\n")
    r = check(root)
    assert r.returncode == 1 and "docs/tools.md: the contents list is out of date" in r.stdout, r.stdout
    r = subprocess.run([sys.executable, SCRIPT, "--root", root, "--toc"], capture_output=True, text=True)
    assert r.returncode == 0 and "docs/tools.md" in r.stdout, r.stdout
    assert "- [A new section](#a-new-section)" in open(os.path.join(root, "docs", "tools.md")).read()
    assert check(root).returncode == 0


def test_an_undocumented_option_fails(tmp):
    """An option --help lists that neither the guide nor the man page
    names: one line for each."""
    root = guide_copy(tmp)
    real = subprocess.run([BIN, "--help"], capture_output=True, text=True).stdout
    marker = "       allow_other, ..."
    assert marker in real
    fake = os.path.join(tmp, "fake-tensorfs")
    with open(fake, "w") as f:
        f.write("#!/bin/sh\ncat <<'EOF'\n" +
                real.replace(marker, "       frobnicate=N       a new option\n" + marker) + "EOF\n")
    os.chmod(fake, os.stat(fake).st_mode | stat.S_IXUSR)
    r = check(root, fake)
    assert r.returncode == 1, r.stdout
    assert "docs/: -o frobnicate" in r.stdout and "docs/tensorfs.1: -o frobnicate" in r.stdout, r.stdout
    assert r.stdout.count("frobnicate") == 2, r.stdout
    # documented in text waiting for the guide (docs/pending/), and in the
    # man page: no problem left
    os.makedirs(os.path.join(root, "docs", "pending"), exist_ok=True)
    with open(os.path.join(root, "docs", "pending", "someone.md"), "w") as f:
        f.write("## mounting\n\n`-o frobnicate=N` does this.\n")
    man = os.path.join(root, "docs", "tensorfs.1")
    text = open(man).read().replace(".SS Options of remote sources", ".TP\n.BI frobnicate= N\nA new option.\n"
                                    ".SS Options of remote sources")
    open(man, "w").write(text)
    r = check(root, fake)
    assert r.returncode == 0, r.stdout


# Debian's Python modules the guide's examples use: the system Python's
# (python3-numpy, -zarr, -dask, -xarray, -pil), which a python3 found first
# on PATH (a venv, conda, /usr/local) does not have.
DEBIAN_MODULES = ("numpy", "zarr", "dask", "xarray", "PIL")


def guide_commands():
    """Every command of the guide's console blocks (a "$ " line and the
    lines that follow it up to the next prompt or output), with its page."""
    import glob
    import re
    pages = [os.path.join(REPO, "README.md")] + sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))
    for page in pages:
        text = open(page).read()
        for block in re.findall(r"^```(?:console|sh)?\n(.*?)^```", text, flags=re.M | re.S):
            cmd = None
            for line in block.splitlines():
                if line.startswith("$ "):
                    if cmd:
                        yield page, cmd
                    cmd = line
                elif cmd is not None and cmd.count("'") % 2 == 1:
                    cmd += "\n" + line  # inside a quoted script (python3 -c '...')
                elif cmd is not None:
                    yield page, cmd
                    cmd = None
            if cmd:
                yield page, cmd


def test_examples_with_debians_modules_call_usr_bin_python3():
    """The Zarr examples called python3 where Debian's modules need
    /usr/bin/python3: every command of the guide that imports numpy, zarr,
    dask, xarray or PIL runs /usr/bin/python3, as the tests do."""
    import re
    imports = re.compile(r"\b(?:import|from) (?:%s)\b" % "|".join(DEBIAN_MODULES))
    seen, bad = 0, []
    for page, cmd in guide_commands():
        if imports.search(cmd):
            seen += 1
            if not cmd.startswith("$ /usr/bin/python3 "):
                bad.append((os.path.relpath(page, REPO), cmd.splitlines()[0]))
    assert seen >= 10 and bad == [], bad
