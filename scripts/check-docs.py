#!/usr/bin/python3
"""Checks the user's guide (README.md and docs/*.md) the way a reader meets
it, and exits 1 with one line per problem:

  - every relative link and image resolves to a file or directory of the
    checkout, and every #anchor to a heading of its page, by GitHub's
    rules (lowercase; letters, digits, spaces, '-' and '_' kept, other
    punctuation dropped; spaces to '-'; a repeated anchor gets -1, -2...);
  - the contents list of a page (between <!-- toc --> and <!-- /toc -->) is
    what its ## and ### headings give;
  - every -o option that `tensorfs --help` lists appears in the guide (a
    code span such as `-o layout=tree,export` or `uid=N` that names it, in
    docs/*.md or in the text waiting to be merged into them,
    docs/pending/*.md) and in the man page (a tag of its options,
    docs/tensorfs.1).

  scripts/check-docs.py [--root DIR] [--bin PATH]   check (make check runs it)
  scripts/check-docs.py --toc [--root DIR]          rewrite the contents lists

DIR is the checkout (default: this script's); PATH the binary whose --help
is read (default DIR/tensorfs)."""

import argparse
import glob
import os
import re
import subprocess
import sys

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) and ![alt](target); text may hold `code` and one level of [].
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
TOC_START, TOC_END = "<!-- toc -->", "<!-- /toc -->"


def pages(root):
    """The guide's pages, README first."""
    out = [os.path.join(root, "README.md")]
    out += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    return [p for p in out if os.path.isfile(p)]


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif line.strip().startswith(fence):
                fence = None
            continue
        if fence is None:
            yield n, line


def heading_text(raw):
    """A heading as GitHub renders it to text: links as their text, code
    spans as their content, HTML tags and emphasis marks gone."""
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    t = re.sub(r"<[^>]+>", "", t)
    t = t.replace("`", "")
    return re.sub(r"(\*\*|\*)", "", t).strip()


def anchor_of(text):
    """GitHub's anchor for a heading's text (before the -N of repeats)."""
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def headings(text):
    """[(level, text, anchor)] of a page, repeats numbered as GitHub does."""
    seen, out = {}, []
    for _, line in prose_lines(text):
        m = HEADING.match(line)
        if not m:
            continue
        title = heading_text(m.group(2))
        a = anchor_of(title)
        k = seen.get(a, 0)
        seen[a] = k + 1
        out.append((len(m.group(1)), title, a if k == 0 else f"{a}-{k}"))
    return out


def toc(text):
    """The contents list a page's ## and ### headings after it give
    (repeats numbered over the whole page, as GitHub does)."""
    every = headings(text)
    after = every[len(every) - len(headings(text.split(TOC_END, 1)[-1])):]
    return "\n".join(f"{'  ' * (level - 2)}- [{title}](#{a})" for level, title, a in after if level in (2, 3))


def with_toc(text):
    """The page with its contents list made again, or None without one."""
    if TOC_START not in text or TOC_END not in text:
        return None
    head, rest = text.split(TOC_START, 1)
    _, tail = rest.split(TOC_END, 1)
    return f"{head}{TOC_START}\n{toc(text)}\n{TOC_END}{tail}"


def check_links(root, problems):
    n_links = n_anchors = 0
    cache = {}

    def anchors_of(path):
        if path not in cache:
            cache[path] = {a for _, _, a in headings(open(path, encoding="utf-8").read())}
        return cache[path]

    for page in pages(root):
        text = open(page, encoding="utf-8").read()
        rel = os.path.relpath(page, root)
        for n, line in prose_lines(text):
            for m in LINK.finditer(CODE_SPAN.sub(lambda c: "x" * len(c.group(0)), line)):
                target = m.group(1)
                if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                    continue  # a URL (https:, mailto:) is not checked here
                n_links += 1
                path, _, frag = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
                if not os.path.realpath(dest).startswith(os.path.realpath(root) + os.sep):
                    problems.append(f"{rel}:{n}: link '{target}' leaves the checkout")
                    continue
                if not os.path.exists(dest):
                    problems.append(f"{rel}:{n}: broken link '{target}': no such file")
                    continue
                if frag:
                    n_anchors += 1
                    if not dest.endswith(".md") or os.path.isdir(dest):
                        problems.append(f"{rel}:{n}: link '{target}': an anchor into a file that is not a page")
                    elif frag not in anchors_of(dest):
                        problems.append(f"{rel}:{n}: broken anchor '{target}': no heading of "
                                        f"{os.path.relpath(dest, root)} has the anchor '#{frag}'")
        fixed = with_toc(text)
        if fixed is not None and fixed != text:
            problems.append(f"{rel}: the contents list is out of date (scripts/check-docs.py --toc rewrites it)")
    return n_links, n_anchors


def help_options(binary):
    """The -o options `--help` lists: the first column of the lines under
    `-o opt[,opt...]`, up to the blank line ("uid=N, gid=N": uid and gid)."""
    r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise SystemExit(f"check-docs: {binary} --help exited {r.returncode}: {r.stderr.strip()}")
    lines = r.stdout.splitlines()
    start = next((i for i, l in enumerate(lines) if re.match(r"^\s*-o\s+opt", l)), None)
    if start is None:
        raise SystemExit(f"check-docs: {binary} --help lists no '-o opt[,opt...]' section")
    names = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        m = re.match(r"^ {4,10}(\S.*?)(?: {2,}|$)", line)
        if not m or line.startswith(" " * 12):
            continue  # a description's continuation line
        for part in m.group(1).split(","):
            w = re.match(r"\s*([a-z][a-z0-9_]*)", part)
            if w and w.group(1) not in names:
                names.append(w.group(1))
    if not names:
        raise SystemExit(f"check-docs: found no option in {binary} --help")
    return names


def guide_options(root):
    """Option names the guide's code spans name: `-o a=1,b`, `uid=N`, `strict`."""
    found = set()
    for page in sorted(glob.glob(os.path.join(root, "docs", "*.md")) +
                       glob.glob(os.path.join(root, "docs", "pending", "*.md"))):
        for span in re.findall(r"`([^`\n]+)`", open(page, encoding="utf-8").read()):
            span = span.strip()
            if span.startswith("-o "):
                span = span[3:]
            for part in span.split(","):
                m = re.match(r"^\s*([a-z][a-z0-9_]*)(=|$)", part)
                if m:
                    found.add(m.group(1))
    return found


def man_options(root):
    """Option names in the man page's tags (the line after each .TP)."""
    path = os.path.join(root, "docs", "tensorfs.1")
    found = set()
    if not os.path.isfile(path):
        return found
    lines = open(path, encoding="utf-8").read().splitlines()
    for prev, line in zip(lines, lines[1:]):
        if prev.strip() != ".TP" or not re.match(r"^\.B[IR]?\s", line):
            continue
        tag = re.sub(r"\\f[BIRP]|\\-|\"", "", line.split(None, 1)[1])
        words = re.findall(r"[a-z][a-z0-9_]*(?==)", tag)
        first = re.match(r"\s*([a-z][a-z0-9_]*)", tag)
        if first:
            words.append(first.group(1))
        found.update(words)
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--bin", default=None)
    ap.add_argument("--toc", action="store_true", help="rewrite the contents lists")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    if a.toc:
        for page in pages(root):
            text = open(page, encoding="utf-8").read()
            fixed = with_toc(text)
            if fixed is not None and fixed != text:
                open(page, "w", encoding="utf-8").write(fixed)
                print(f"rewrote the contents list of {os.path.relpath(page, root)}")
        return 0
    problems = []
    n_links, n_anchors = check_links(root, problems)
    opts = help_options(a.bin or os.path.join(root, "tensorfs"))
    in_guide, in_man = guide_options(root), man_options(root)
    for o in opts:
        if o not in in_guide:
            problems.append(f"docs/: -o {o} (listed by tensorfs --help) appears nowhere in the guide")
        if o not in in_man:
            problems.append(f"docs/tensorfs.1: -o {o} (listed by tensorfs --help) has no entry in the man page")
    for p in problems:
        print(p)
    print(f"{len(pages(root))} pages, {n_links} relative links ({n_anchors} with anchors), "
          f"{len(opts)} -o options: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
