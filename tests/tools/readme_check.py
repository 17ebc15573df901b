#!/usr/bin/env python3
"""READMEs as doors (issue 36 item 6): print every README.md of the tree
(build/ and models/cache/ left out) that is over MAX_LINES lines, and every
markdown table cell over MAX_CELL characters, one line each as
"path:line: what". Exit status 1 when anything is printed, 0 otherwise.

    python3 tests/tools/readme_check.py [ROOT] [--lines N] [--cell N]

A RESULTS.md (a folder's dated history) is not checked: it may be long.
"""
import argparse
import os
import re
import sys

MAX_LINES = 250
MAX_CELL = 300
SKIP_DIRS = {"build", ".git", "node_modules"}


def cells(line):
    """The cells of a markdown table row (leading and trailing pipes
    dropped, `\\|` kept inside its cell)."""
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", s)]


def check_file(path, rel, max_lines, max_cell):
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    if len(lines) > max_lines:
        out.append(f"{rel}:{len(lines)}: {len(lines)} lines (at most {max_lines})")
    fence = False
    for i, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if fence or not line.lstrip().startswith("|"):
            continue
        for k, c in enumerate(cells(line), 1):
            if len(c) > max_cell:
                out.append(f"{rel}:{i}: table cell {k} is {len(c)} characters "
                           f"(at most {max_cell}): {c[:60]}...")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=".")
    ap.add_argument("--lines", type=int, default=MAX_LINES)
    ap.add_argument("--cell", type=int, default=MAX_CELL)
    a = ap.parse_args()
    if not os.path.isdir(a.root):
        print(f"readme_check: {a.root}: not a directory", file=sys.stderr)
        return 2
    found = []
    for d, dirs, files in os.walk(a.root):
        rel_d = os.path.relpath(d, a.root)
        dirs[:] = sorted(x for x in dirs
                         if x not in SKIP_DIRS and not os.path.islink(os.path.join(d, x))
                         and os.path.normpath(os.path.join(rel_d, x)) != "models/cache")
        if "README.md" in files:
            rel = os.path.normpath(os.path.join(rel_d, "README.md"))
            found += check_file(os.path.join(d, "README.md"), rel, a.lines, a.cell)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
