#!/usr/bin/env python3
"""README.md's table of contents, between the lines <!-- toc --> and
<!-- /toc -->, made from its ## and ### headings (GitHub's anchors).
With --check, exits 1 when the table is not what the headings give (the
tests run it); otherwise rewrites it in place."""

import re
import sys

PATH = __file__.rsplit("/scripts/", 1)[0] + "/README.md"


def anchor(title, seen):
    a = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
    n = seen.get(a, 0)
    seen[a] = n + 1
    return a if n == 0 else f"{a}-{n}"


def toc(text):
    lines, seen, fence = [], {}, False
    body = text.split("<!-- /toc -->", 1)[-1]
    for line in body.splitlines():
        if line.startswith("```"):
            fence = not fence
        if fence:
            continue
        m = re.match(r"(##+) (.*)", line)
        if not m or len(m.group(1)) > 3:
            continue
        title = m.group(2).strip()
        indent = "  " * (len(m.group(1)) - 2)
        lines.append(f"{indent}- [{title.replace('`', '')}](#{anchor(title, seen)})")
    return "\n".join(lines)


def main():
    text = open(PATH).read()
    head, rest = text.split("<!-- toc -->\n", 1)
    _, tail = rest.split("<!-- /toc -->", 1)
    new = f"{head}<!-- toc -->\n{toc(text)}\n<!-- /toc -->{tail}"
    if "--check" in sys.argv[1:]:
        if new != text:
            print("README.md: the table of contents is out of date (python3 scripts/readme-toc.py)",
                  file=sys.stderr)
            sys.exit(1)
        return
    open(PATH, "w").write(new)


if __name__ == "__main__":
    main()
