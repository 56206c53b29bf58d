#!/usr/bin/env python3
"""Size rules of the tree: no source file over 1 500 lines, no function over 150.

A reader should be able to hold one file and one function in their head; past
these sizes a file has more than one job and a function more than one step.
The rule covers C and CUDA sources (.c, .h, .cu, .cuh) in core/ sim/ gpu/ ui/ app/.

Output is TAP (one line per checked file), so meson counts it as a test.

A folder in REPORT_ONLY has its violations printed as TAP "# SKIP" lines
(which never fail; a "not ok # TODO" line would be counted as a failure by
tools/count_tests.py): for a folder in the middle of a rewrite.  Every folder
complies today, so the list is empty.

Functions are found with a brace counter, not a C parser: a function is a
top-level "{ ... }" block whose opening line (or the line before it) ends a
parameter list ")".  Comments, strings and character literals are skipped.
Good enough for this tree's style; a false reading shows up as a named
function with an odd size, which is easy to check by eye.

Usage: check_sizes.py [--root DIR] [--max-file N] [--max-function N]
"""
import argparse
import os
import re
import sys

FOLDERS = ("core", "sim", "gpu", "ui", "app")
REPORT_ONLY = ()
SUFFIXES = (".c", ".h", ".cu", ".cuh")

NAME_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\([^;{}]*\)\s*(?:const\s*)?$", re.S)


def strip_code(text):
    """Blank out comments, strings and char literals, keeping line breaks."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text):
    """Yield (name, first line, line count) for each top-level function body."""
    code = strip_code(text)
    depth = 0
    start = None
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            if depth == 0:
                head = code[max(0, i - 400):i]
                # drop preprocessor lines between the signature and the brace
                head = "\n".join(l for l in head.split("\n") if not l.lstrip().startswith("#"))
                m = NAME_RE.search(head.rstrip())
                start = (m.group(1), line) if m and m.group(1) not in ("if", "for", "while", "switch") else None
            depth += 1
        elif c == "}":
            depth = max(0, depth - 1)
            if depth == 0 and start:
                name, first = start
                yield name, first, line - first + 1
                start = None


def sources(root):
    for folder in FOLDERS:
        base = os.path.join(root, folder)
        for dirpath, _, names in os.walk(base):
            for name in sorted(names):
                if name.endswith(SUFFIXES):
                    yield folder, os.path.relpath(os.path.join(dirpath, name), root)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.environ.get("NC_SOURCE_DIR",
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")))
    ap.add_argument("--max-file", type=int, default=1500)
    ap.add_argument("--max-function", type=int, default=150)
    args = ap.parse_args()

    files = sorted(sources(args.root), key=lambda fp: fp[1])
    print("TAP version 13")
    print(f"1..{len(files)}")
    failed = 0
    for n, (folder, path) in enumerate(files, 1):
        with open(os.path.join(args.root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        problems = []
        lines = text.count("\n")
        if lines > args.max_file:
            problems.append(f"{lines} lines (max {args.max_file})")
        for name, first, count in functions(text):
            if count > args.max_function:
                problems.append(f"{name}() at line {first}: {count} lines (max {args.max_function})")
        if not problems:
            print(f"ok {n} - {path}")
        elif folder in REPORT_ONLY:
            print(f"ok {n} - {path} # SKIP report-only folder, not yet enforced: " + "; ".join(problems))
        else:
            failed += 1
            print(f"not ok {n} - {path}")
            for p in problems:
                print(f"#   {p}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
