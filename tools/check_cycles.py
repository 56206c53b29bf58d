#!/usr/bin/env python3
"""Dependency rules of the tree (docs/DESIGN.md, "Layers of the tree"):

  1. no circle between source files: when a.c calls a function that b.c
     defines, b.c (and whatever it calls) never calls back into a.c;
  2. nothing in core/ or sim/ calls a function that gpu/ defines (the GPU
     engine plugs into sim/'s engine table, never the other way round);
  3. outside gpu/, no file of core/ sim/ ui/ app/ lib/ includes a gpu/ header
     (the GPU engine registers itself from gpu/nc_gpu_register.c).

"Calls" is read from the text: the names of the non-static functions each
.c/.cu file defines, and which of those names another file mentions.  Good
enough for this tree, where every shared function carries its module's
prefix; a static function of the same name in two files is not a call.

Output is TAP (one line per rule), so meson counts it as a test.

Usage: check_cycles.py [--root DIR]
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_sizes import strip_code  # noqa: E402  (the same comment and string stripping)

FOLDERS = ("core", "sim", "gpu", "ui", "app", "lib")
# Circles that lie wholly inside a folder listed here are printed as TAP
# "# SKIP" lines (never a failure): gpu/, whose files still share the
# options of nc_gpu_register.c, which in turn creates the engine.
REPORT_ONLY = ("gpu",)
NAME_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\([^;{}]*\)\s*$", re.S)
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NOT_CALLS = {"main", "if", "for", "while", "switch"}


PREPROCESSOR_RE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)


def definitions(code):
    """The non-static functions a stripped source file defines."""
    code = PREPROCESSOR_RE.sub(lambda m: "\n" * m.group(0).count("\n"), code)  # macros are no definitions
    names, depth, last_end = set(), 0, 0
    for i, c in enumerate(code):
        if c == "{":
            if depth == 0:
                head = code[last_end:i]
                m = NAME_RE.search(head.rstrip())
                name = m.group(1) if m else ""
                # macros that define things (G_DEFINE_TYPE, __attribute__) are not functions
                macro = name.startswith("__") or not re.search("[a-z]", name)
                if m and not macro and name not in NOT_CALLS and not re.search(r"\bstatic\b", head[:m.start()]):
                    names.add(name)
            depth += 1
        elif c == "}":
            depth = max(0, depth - 1)
            if depth == 0:
                last_end = i + 1
        elif c == ";" and depth == 0:
            last_end = i + 1
    return names


def read_tree(root):
    files = {}
    for folder in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if name.endswith((".c", ".cu", ".h", ".cuh")):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8", errors="replace") as f:
                        files[os.path.relpath(path, root)] = f.read()
    return files


def call_graph(files):
    owner = {}
    code = {p: strip_code(t) for p, t in files.items() if p.endswith((".c", ".cu"))}
    for path, text in code.items():
        for name in definitions(text):
            owner.setdefault(name, set()).add(path)
    graph = {p: set() for p in code}
    for path, text in code.items():
        for name in set(IDENT_RE.findall(text)):
            for target in owner.get(name, ()):
                if target != path:
                    graph[path].add(target)
    return graph


def circles(graph):
    """The strongly connected groups of more than one file (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.environ.get("NC_SOURCE_DIR",
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")))
    args = ap.parse_args()
    files = read_tree(args.root)
    graph = call_graph(files)

    results = []
    groups = circles(graph)
    inside = [g for g in groups if all(p.split("/")[0] in REPORT_ONLY for p in g)]
    results.append(("no circle between source files",
                    [" <-> ".join(g) for g in groups if g not in inside]))
    for folder in REPORT_ONLY:
        mine = [" <-> ".join(g) for g in inside if g[0].startswith(folder + "/")]
        results.append((f"no circle between the files of {folder}/", mine, "report-only folder, not yet enforced"))
    up = [f"{a} calls into {b}" for a in sorted(graph) for b in sorted(graph[a])
          if a.split("/")[0] in ("core", "sim") and b.startswith("gpu/")]
    results.append(("core/ and sim/ call nothing in gpu/", up))
    includes = [f"{p} includes {inc}" for p, text in sorted(files.items()) if not p.startswith("gpu/")
                for inc in re.findall(r'#\s*include\s+"([^"]*gpu/[^"]*)"', text)]
    results.append(("outside gpu/, no gpu/ header is included", includes))

    print("TAP version 13")
    print(f"1..{len(results)}")
    failed = 0
    for n, (name, problems, *report_only) in enumerate(results, 1):
        if problems and report_only:
            print(f"ok {n} - {name} # SKIP {report_only[0]}: " + "; ".join(problems))
            continue
        print(f"{'not ok' if problems else 'ok'} {n} - {name}")
        for p in problems:
            print(f"#   {p}")
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
