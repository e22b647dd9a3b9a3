#!/usr/bin/python3
"""The include graph of src/ between modules (a module is a .c and its .h,
and its internal header X_i.h or X_int.h if it has one: src/views/tree.c
and src/views/tree.h are one), and its circles.

  scripts/include-graph.py           the circles (exit 1 if there is one)
  scripts/include-graph.py --edges   every arrow, "from -> to"
  scripts/include-graph.py --layers  the modules by layer (0 includes nothing)

make check runs it: a circle fails the build's lint stage."""

import os
import re
import sys

from graphs import circles

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_of(rel):
    stem = rel[:-2]
    for suffix in ("_int", "_i"):
        if stem.endswith(suffix) and stem not in ("tfs_i",):
            return stem[: -len(suffix)]
    return stem


def modules():
    """{module: set of modules it includes}; a module is named by its path
    under src/ without the extension."""
    files = {}
    for root, _, names in os.walk(SRC):
        for n in names:
            if n.endswith((".c", ".h")):
                p = os.path.join(root, n)
                files[os.path.relpath(p, SRC)] = p
    by_header = {}
    for rel in files:
        if rel.endswith(".h"):
            by_header[rel] = module_of(rel)
            by_header.setdefault(os.path.basename(rel), module_of(rel))
    graph = {}
    for rel, p in files.items():
        mod = module_of(rel)
        graph.setdefault(mod, set())
        with open(p, encoding="utf-8") as f:
            text = f.read()
        here = os.path.dirname(rel)
        for inc in INCLUDE.findall(text):
            target = by_header.get(os.path.normpath(os.path.join(here, inc))) or by_header.get(inc)
            if target and target != mod:
                graph[mod].add(target)
    return graph


def layers(graph):
    depth = {}

    def d(v, seen=()):
        if v in depth:
            return depth[v]
        if v in seen:
            return 0
        deps = [d(w, seen + (v,)) for w in graph[v]]
        depth[v] = 1 + max(deps) if deps else 0
        return depth[v]

    for v in graph:
        d(v)
    return depth


def main():
    g = modules()
    if "--edges" in sys.argv:
        for a in sorted(g):
            for b in sorted(g[a]):
                print(f"{a} -> {b}")
        return 0
    if "--layers" in sys.argv:
        dep = layers(g)
        for k in range(max(dep.values()) + 1):
            print(f"{k}: " + " ".join(sorted(m for m in dep if dep[m] == k)))
        return 0
    cs = circles(g)
    arrows = sum(len(v) for v in g.values())
    for c in cs:
        print("include circle: " + " <-> ".join(c))
    print(f"{len(g)} modules, {arrows} arrows, {len(cs)} circles")
    return 1 if cs else 0


if __name__ == "__main__":
    sys.exit(main())
