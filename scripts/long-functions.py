#!/usr/bin/python3
"""Functions in src/ longer than LIMIT lines (default 120), longest first:
a rough scan of C's top-level definitions (a line opening a function at
column 0, up to its closing brace at column 0)."""

import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
START = re.compile(r"^[A-Za-z_].*\b([A-Za-z_][A-Za-z0-9_]*)\s*\([^;]*$")


def scan(limit):
    out = []
    for root, _, names in os.walk(SRC):
        for n in sorted(names):
            if not n.endswith(".c"):
                continue
            p = os.path.join(root, n)
            lines = open(p, encoding="utf-8").read().split("\n")
            i = 0
            while i < len(lines):
                m = START.match(lines[i])
                if m and not lines[i].rstrip().endswith(";"):
                    j = i
                    while j < len(lines) and lines[j] != "{":
                        if lines[j].rstrip().endswith(";") or (j > i and lines[j] == ""):
                            break
                        j += 1
                    if j < len(lines) and lines[j] == "{":
                        k = j
                        while k < len(lines) and lines[k] != "}":
                            k += 1
                        if k - i + 1 > limit:
                            out.append((k - i + 1, os.path.relpath(p, SRC), m.group(1)))
                        i = k
                i += 1
    return sorted(out, reverse=True)


if __name__ == "__main__":
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 120
    for n, f, name in scan(limit):
        print(f"{n:5d}  {f}  {name}")
