#!/usr/bin/python3
"""Which files of src/ call which, measured on the built objects: for each
build/X.o, the functions and data it uses (nm: undefined, U) that another
object defines (T, D, B, R, and their weak kinds). A file that uses another's
symbol depends on it; files that depend on each other, directly or round a
longer circle, are one thing cut in two, and fail the check.

  scripts/call-graph.py [BUILD]             pairs that call each other (exit 1 on
                                            one not allowed), longer circles
  scripts/call-graph.py --circles [BUILD]   the same, failing on longer circles too
  scripts/call-graph.py --edges [BUILD]     every arrow, "from -> to: symbols"
  scripts/call-graph.py --pairs [BUILD]     only the pairs

BUILD is build/ by default: make check runs it after building. Pairs listed in
scripts/callgraph-allow.txt (one a line, two files separated by a space) pass,
with a note; every other pair fails. The include graph
(scripts/include-graph.py) sees only #include lines, which a file may need
without calling anything, or skip by declaring what it calls itself."""

import os
import subprocess
import sys

from graphs import circles

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALLOW = os.path.join(ROOT, "scripts", "callgraph-allow.txt")
DEFINED = set("TDBRVWGS")


def objects(build):
    out = []
    for root, _, names in os.walk(build):
        for n in names:
            if n.endswith(".o"):
                out.append(os.path.join(root, n))
    return sorted(out)


def graph(build):
    """{file: {file it uses: set of symbols}}; a file is named by its path
    under build/ without .o (sources/cache)."""
    defs, uses = {}, {}
    objs = objects(build)
    if not objs:
        sys.exit(f"call-graph: no object files under {build}: build first (make all)")
    for o in objs:
        mod = os.path.relpath(o, build)[:-2]
        uses[mod] = set()
        text = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in DEFINED:
                defs.setdefault(parts[2], mod)
            elif len(parts) == 2 and parts[0] == "U":
                uses[mod].add(parts[1])
    g = {m: {} for m in uses}
    for m, syms in uses.items():
        for s in syms:
            d = defs.get(s)
            if d and d != m:
                g[m].setdefault(d, set()).add(s)
    return g


def allowed():
    """The pairs let pass for now: frozensets of two files."""
    out = []
    if os.path.exists(ALLOW):
        with open(ALLOW, encoding="utf-8") as f:
            for line in f:
                line = line.split("#", 1)[0].split()
                if line:
                    out.append(frozenset(line))
    return out


def how(g, c):
    """How each member of a circle reaches the others: where to cut it."""
    out = []
    for a in c:
        for b in c:
            if b in g[a]:
                syms = sorted(g[a][b])
                out.append(f"    {a} -> {b} ({', '.join(syms[:3])}{', ...' if len(syms) > 3 else ''})")
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    build = args[0] if args else os.path.join(ROOT, "build")
    g = graph(build)
    if "--edges" in sys.argv:
        for a in sorted(g):
            for b in sorted(g[a]):
                print(f"{a} -> {b}: {' '.join(sorted(g[a][b]))}")
        return 0
    pairs = sorted({tuple(sorted((a, b))) for a in g for b in g[a] if a in g.get(b, {})})
    if "--pairs" in sys.argv:
        for a, b in pairs:
            print(f"{a} <-> {b}")
        print(f"{len(pairs)} pairs")
        return 0
    strict = "--circles" in sys.argv
    allow = allowed()
    bad = 0
    for a, b in pairs:
        if frozenset((a, b)) in allow:
            print(f"allowed for now (scripts/callgraph-allow.txt): {a} <-> {b}")
        else:
            bad += 1
            print(f"files that call each other: {a} <-> {b}")
        print("\n".join(how(g, (a, b))))
    for a in allow:
        if tuple(sorted(a)) not in pairs:
            print("no longer a pair, remove it from scripts/callgraph-allow.txt: " + " ".join(sorted(a)))
    # Longer circles (a registry that names its plug-ins, which call back
    # into what walks the registry) are listed; --circles fails on them.
    longer = [c for c in circles(g) if len(c) > 2 or tuple(c) not in pairs]
    for c in longer:
        print(f"circle of {len(c)} files{'' if strict else ' (a note: --circles fails on it)'}: "
              + " <-> ".join(c))
        print("\n".join(how(g, c)))
    bad += len(longer) if strict else 0
    arrows = sum(len(v) for v in g.values())
    print(f"{len(g)} files, {arrows} arrows, {len(pairs)} pairs that call each other "
          f"({sum(frozenset(p) in allow for p in pairs)} allowed), "
          f"{len(longer)} longer circles")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
