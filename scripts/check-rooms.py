#!/usr/bin/python3
"""The rooms of src/ (docs/architecture.md, "The floors"), checked from the
#include lines and the view declarations:

- no file of cli/ or fuse/ includes a header of views/ other than the
  registry's interface (views/view.h) and the tree's (views/tree.h);
- every .c file of views/ other than the tree's (tree*.c) and the
  registry's (registry.c, view.c) is a plug-in: it declares one view,
  `const struct tfs_view_ops tfs_view_NAME` with `.name = "NAME"`, NAME
  being the file's name; a view with an on/off option of its own is named
  after it (-o pictures: pictures.c) or its negation (-o notsv: tsv.c);
  registry.c names it;
- every header of views/ is the tree's, the registry's, or a plug-in's own;
- no plug-in includes another plug-in's header;
- compute/ includes nothing of views/, tools/, fs/, cli/ or fuse/; tools/
  nothing of cli/ or fuse/ and no plug-in's header;
- no bench (scripts/bench_*.py) imports another bench or reaches into
  tests/integration: what they share with the tests is tests/lib.

make check runs it (exit 1 and a line per broken rule)."""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
VIEW = re.compile(r"const struct tfs_view_ops tfs_view_(\w+)\s*=\s*\{(.*?)\n\};", re.S)
IMPORT = re.compile(r"^\s*(?:import|from)\s+(\w+)", re.M)
OPTS = re.compile(r"static const struct tfs_opt_spec opts\[\]\s*=\s*\{(.*?)\n\};", re.S)
OPT = re.compile(r'\{"(\w+)",\s*(\d),\s*(NULL|")')


def files(folder):
    d = os.path.join(SRC, folder)
    return sorted(n for n in os.listdir(d) if n.endswith((".c", ".h"))) if os.path.isdir(d) else []


def read(folder, name):
    with open(os.path.join(SRC, folder, name), encoding="utf-8") as f:
        return f.read()


def infrastructure(name):
    stem = name[:-2]
    return stem.startswith("tree") or stem in ("registry", "view")


def main():
    bad = []
    plugins = {n[:-2] for n in files("views") if n.endswith(".c") and not infrastructure(n)}
    registry = read("views", "registry.c")
    for n in files("views"):
        stem, text = n[:-2], read("views", n)
        if n.endswith(".h") and not infrastructure(n) and stem not in plugins:
            bad.append(f"views/{n}: a header of views/ that is neither the tree's, the registry's nor a plug-in's")
        for inc in INCLUDE.findall(text):
            if inc.startswith("views/") and inc[6:-2] in plugins and inc[6:-2] != stem:
                bad.append(f"views/{n}: includes {inc}, another plug-in's header")
        if not n.endswith(".c") or infrastructure(n):
            continue
        views = VIEW.findall(text)
        if len(views) != 1:
            bad.append(f"views/{n}: a plug-in declares one struct tfs_view_ops, not {len(views)}")
            continue
        ident, body = views[0]
        m = re.search(r'\.name\s*=\s*"([^"]*)"', body)
        if ident != stem or not m or m.group(1) != stem:
            bad.append(f"views/{n}: its view is tfs_view_{ident} named {m.group(1) if m else None!r}, "
                       f"not tfs_view_{stem} named {stem!r}")
        o = OPTS.search(text)
        # (an option listed without help is another view's, followed)
        switches = [k for k, v, h in OPT.findall(o.group(1)) if v == "0" and h != "NULL"] if o else []
        if switches and stem not in switches and "no" + stem not in switches:
            bad.append(f"views/{n}: named after none of its on/off options ({', '.join(switches)})")
        if f"&tfs_view_{stem}," not in registry:
            bad.append(f"views/{n}: not in views/registry.c")
    for folder in ("cli", "fuse"):
        for n in files(folder):
            for inc in INCLUDE.findall(read(folder, n)):
                if inc.startswith("views/") and inc not in ("views/view.h", "views/tree.h"):
                    bad.append(f"{folder}/{n}: includes {inc}: only the registry (views/view.h) and "
                               f"the tree (views/tree.h) of views/")
    for folder, banned in (("compute", ("views/", "tools/", "fs/", "cli/", "fuse/")),
                           ("tools", ("cli/", "fuse/"))):
        for n in files(folder):
            for inc in INCLUDE.findall(read(folder, n)):
                if inc.startswith(banned) or (inc.startswith("views/") and inc[6:-2] in plugins):
                    bad.append(f"{folder}/{n}: includes {inc}")
    scripts = os.path.join(ROOT, "scripts")
    benches = {n[:-3] for n in os.listdir(scripts) if n.startswith("bench_") and n.endswith(".py")}
    for n in sorted(benches):
        with open(os.path.join(scripts, n + ".py"), encoding="utf-8") as f:
            text = f.read()
        for m in IMPORT.findall(text):
            if m in benches and m != n:
                bad.append(f"scripts/{n}.py: imports {m}, another bench (share it in tests/lib)")
        if re.search(r'"tests",\s*"integration"|tests/integration', text):
            bad.append(f"scripts/{n}.py: reaches into tests/integration (share it in tests/lib)")
    for line in bad:
        print(line)
    if bad:
        print(f"check-rooms: {len(bad)} rule(s) broken (docs/architecture.md, \"The floors\")")
        return 1
    print(f"check-rooms: {len(plugins)} plug-ins, each in its room")
    return 0


if __name__ == "__main__":
    sys.exit(main())
