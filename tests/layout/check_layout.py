#!/usr/bin/env python3
"""check_layout.py — the size and layout rules of issue 28 (../shared/STYLE.md), kept by ctest.

Fails, with one line per offence, when under src/ or include/:
  - a file is longer than MAX_FILE_LINES lines;
  - a function is longer than MAX_FUNCTION_LINES lines and carries no reason: a comment
    "/* long: <reason> */" on the line before it, or on any line from its signature to its
    first body line;
  - a header include/tern/<m>/*.h has no src/<m>/ (a module may have header-only headers, but the
    module must exist in src/);
  - the includes between modules make a cycle: module b includes "tern/a/..." in any file of
    src/b/ or include/tern/b/ gives the edge b -> a; every cycle is reported with the include
    lines that make it;
  - the includes between files make a cycle (inside a module too), unless the pair is a
    loop/handler pair listed in ALLOWED_FILE_EDGES.

Functions are found with Universal Ctags when it is installed (its JSON output gives each
function's first and last line), else with a brace-matching scan of the C text (comments,
strings and preprocessor lines stripped). --scanner forces one of them.

Usage: check_layout.py [--root DIR] [--scanner ctags|braces] [--verbose]
Exit status: 0 clean, 1 offences (listed on stdout), 2 the checker itself failed.
Python 3 standard library only.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

# STYLE.md: "Past ~800 lines, ask what the second concern is"; issue 28's acceptance: no file over
# ~1,200 lines. 1,200 is the hard line; the 800 question is for review, not for a test.
MAX_FILE_LINES = 1200
# Issue 28's acceptance: no function over ~120 lines without a reason written beside it.
MAX_FUNCTION_LINES = 120

# ---- exemptions ------------------------------------------------------------------------------
# An offence that must stay gets an entry here with its reason; an entry that no longer matches
# anything is reported as "stale exemption" (a note), so the lists only shrink. Empty since issue
# 28 split the last offenders (loader.c, redis_source.c, xfr.c, config.c, answer_parsed(), main()).
# A long function may instead carry its reason in a "/* long: ... */" comment beside it.

# Files longer than MAX_FILE_LINES: path -> reason.
EXEMPT_FILES = set()

# Functions longer than MAX_FUNCTION_LINES: (path, function name).
EXEMPT_FUNCTIONS = set()

# Include edges between modules left out of the cycle search, each with its reason:
# (from module, to module). None: issue 28 removed the last (conf -> health, conf -> xfr).
EXEMPT_EDGES = set()

# A loop and its handler may know each other (STYLE.md allows that one cycle inside a module):
# (including file, included file) pairs left out of the file-level cycle search, each with its
# reason. None today.
ALLOWED_FILE_EDGES = set()

# ---- sources -----------------------------------------------------------------------------------

SOURCE_EXT = (".c", ".h")


def rel(root, path):
    return os.path.relpath(path, root).replace(os.sep, "/")


def source_files(root):
    """Every .c and .h under src/ and include/, sorted, as paths relative to root."""
    out = []
    for top in ("src", "include"):
        base = os.path.join(root, top)
        # os.walk visits each directory once: bounded by the tree
        for d, dirs, files in os.walk(base):
            dirs.sort()
            for f in sorted(files):
                if f.endswith(SOURCE_EXT):
                    out.append(rel(root, os.path.join(d, f)))
    return out


def read_lines(root, path):
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as fh:
        return fh.read().split("\n")


def line_count(lines):
    """Lines as wc -l counts them (the text ends with a newline: no empty last line)."""
    return len(lines) - 1 if lines and lines[-1] == "" else len(lines)


def module_of(path):
    """src/<m>/... and include/tern/<m>/... belong to module m; src/main.c and src/ternctl.c are
    programs, not modules (None)."""
    parts = path.split("/")
    if parts[0] == "src" and len(parts) >= 3:
        return parts[1]
    if parts[0] == "include" and len(parts) >= 4 and parts[1] == "tern":
        return parts[2]
    return None


# ---- functions -------------------------------------------------------------------------------


def functions_ctags(root, paths):
    """(path, name, first line, last line) of every function definition, by Universal Ctags."""
    cmd = ["ctags", "--output-format=json", "--fields=+ne", "--kinds-C=f", "--langmap=C:.c.h",
           "--languages=C", "-f", "-"] + paths
    res = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError("ctags failed: " + res.stderr.strip())
    out = []
    for line in res.stdout.splitlines():
        tag = json.loads(line)
        if tag.get("_type") != "tag" or tag.get("kind") != "function" or "end" not in tag:
            continue
        out.append((tag["path"], tag["name"], int(tag["line"]), int(tag["end"])))
    return out


def strip_c(text):
    """text with comments, string and character literals and preprocessor lines blanked (each
    character replaced by a space, newlines kept), so that line numbers stay and braces count."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    # one character (or one token) per pass: bounded by len(text)
    while i < n:
        c = text[i]
        if at_line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if at_line_start and c == "#":
            # a preprocessor line, with its backslash continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("  \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        at_line_start = False
        if c == "\n":
            out.append(c)
            at_line_start = True
            i += 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            # to the closing quote, skipping escapes: bounded by len(text)
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


# A function definition's head: a name, its parameter list, optional attribute macros, then "{".
FUNC_HEAD = re.compile(r"([A-Za-z_]\w*)\s*\((?:[^()]|\([^()]*\))*\)\s*(?:[A-Z_][A-Z0-9_]*(?:\([^()]*\))?\s*)*$")
NOT_FUNC = re.compile(r"^\s*(?:typedef\b|struct\b|union\b|enum\b)|=")


def functions_braces(root, paths):
    """(path, name, first line, last line) of every function definition, by matching braces."""
    out = []
    for path in paths:
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as fh:
            text = strip_c(fh.read())
        depth = 0
        stmt, stmt_line = [], None
        cur = None  # (name, first line) of the function being read
        line = 1
        for c in text:  # one character per pass: bounded by the file
            if c == "\n":
                line += 1
            if depth == 0:
                if c == "{":
                    head = "".join(stmt).strip()
                    m = FUNC_HEAD.search(head)
                    if m and not NOT_FUNC.search(head):
                        cur = (m.group(1), stmt_line)
                    depth = 1
                    stmt, stmt_line = [], None
                elif c == ";" or c == "}":
                    stmt, stmt_line = [], None
                else:
                    if stmt_line is None and not c.isspace():
                        stmt_line = line
                    stmt.append(c)
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    if cur:
                        out.append((path, cur[0], cur[1], line))
                    cur = None
    return out


LONG_REASON = re.compile(r"/\*\s*long:\s*\S.*\*/")


def has_reason(lines, first, last):
    """A "/* long: <reason> */" on the line before the function, or on its head or first body
    line (lines are 1-based)."""
    lo = max(first - 1, 1)
    hi = first
    # the head may span lines: go to the line with the opening brace, then one more
    while hi <= last and "{" not in lines[hi - 1]:
        hi += 1
    hi = min(hi + 1, last)
    return any(LONG_REASON.search(lines[k - 1]) for k in range(lo, hi + 1))


# ---- include graph -----------------------------------------------------------------------------

INCLUDE = re.compile(r'^\s*#\s*include\s*"tern/([^/"]+)/[^"]*"')


def module_edges(root, paths):
    """{(b, a): [(path, line, text)]}: files of module b that include a header of module a."""
    edges = {}
    for path in paths:
        b = module_of(path)
        if b is None:
            continue
        for no, text in enumerate(read_lines(root, path), 1):
            m = INCLUDE.match(text)
            if m and m.group(1) != b:
                edges.setdefault((b, m.group(1)), []).append((path, no, text.strip()))
    return edges


def graph_of(edges):
    """{node: set of nodes} from (from, to) pairs."""
    graph = {}
    for b, a in edges:
        graph.setdefault(b, set()).add(a)
        graph.setdefault(a, set())
    return graph


def cycles(graph):
    """The strongly connected components of more than one node (Tarjan), each with a shortest
    cycle through its first node: [(sorted component, [start, ..., start])]."""
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = [0]

    def strong(v):
        # recursion depth bounded by the number of nodes (modules, or the ~300 source files)
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:  # pops down to v: bounded by the stack
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    out = []
    for comp in comps:
        start = comp[0]
        # breadth-first from start back to start inside comp: a shortest cycle
        prev, frontier, found = {start: None}, [start], None
        while frontier and not found:  # each module enters the frontier once
            nxt = []
            for v in frontier:
                for w in sorted(graph[v]):
                    if w not in comp:
                        continue
                    if w == start:
                        found = v
                        break
                    if w not in prev:
                        prev[w] = v
                        nxt.append(w)
                if found:
                    break
            frontier = nxt
        path = [start]
        v = found
        while v is not None and v != start:  # back along prev: bounded by comp
            path.append(v)
            v = prev[v]
        path = [start] + list(reversed(path[1:])) + [start]
        out.append((comp, path))
    return out


FILE_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def file_edges(root, paths):
    """{(file, included file): line}: the quoted includes that resolve to a file of the tree
    ("tern/..." under include/, anything else beside the including file)."""
    known = set(paths)
    edges = {}
    for path in paths:
        for no, text in enumerate(read_lines(root, path), 1):
            m = FILE_INCLUDE.match(text)
            if not m:
                continue
            name = m.group(1)
            if name.startswith("tern/"):
                target = "include/" + name
            else:
                target = os.path.normpath(os.path.join(os.path.dirname(path), name))
                target = target.replace(os.sep, "/")
            if target in known and target != path:
                edges.setdefault((path, target), no)
    return edges


# ---- the checks --------------------------------------------------------------------------------


def check(root, scanner, verbose):
    errors, notes = [], []
    paths = source_files(root)
    if not paths:
        raise RuntimeError("no sources under %s/src or %s/include" % (root, root))
    texts = {p: read_lines(root, p) for p in paths}

    # 1. file sizes
    used_files = set()
    for p in paths:
        n = line_count(texts[p])
        if n > MAX_FILE_LINES:
            if p in EXEMPT_FILES:
                used_files.add(p)
                notes.append("%s: %d lines (exempt: being split in issue 28)" % (p, n))
            else:
                errors.append("%s: %d lines, more than %d: split it by concern (STYLE.md)"
                              % (p, n, MAX_FILE_LINES))
    for p in sorted(EXEMPT_FILES - used_files):
        notes.append("stale exemption: %s is no longer over %d lines; remove it from "
                     "EXEMPT_FILES" % (p, MAX_FILE_LINES))

    # 2. function sizes
    use_ctags = scanner == "ctags" or (scanner is None and shutil.which("ctags"))
    funcs = functions_ctags(root, paths) if use_ctags else functions_braces(root, paths)
    if verbose:
        notes.append("%d functions found by %s" % (len(funcs), "ctags" if use_ctags else
                                                    "the brace scan"))
    used_funcs = set()
    for p, name, first, last in sorted(funcs):
        n = last - first + 1
        if n <= MAX_FUNCTION_LINES or has_reason(texts[p], first, last):
            continue
        if (p, name) in EXEMPT_FUNCTIONS:
            used_funcs.add((p, name))
            notes.append("%s:%d: %s() is %d lines (exempt: being split in issue 28)"
                         % (p, first, name, n))
            continue
        errors.append("%s:%d: %s() is %d lines, more than %d, with no /* long: <reason> */ "
                      "before it: split it into named passes, or say why it is one"
                      % (p, first, name, n, MAX_FUNCTION_LINES))
    for p, name in sorted(EXEMPT_FUNCTIONS - used_funcs):
        notes.append("stale exemption: %s %s() is no longer over %d lines (or is gone); "
                     "remove it from EXEMPT_FUNCTIONS" % (p, name, MAX_FUNCTION_LINES))

    # 3. include/tern/<m>/ mirrors src/<m>/
    for p in paths:
        parts = p.split("/")
        if parts[0] != "include":
            continue
        if len(parts) < 4 or parts[1] != "tern":
            errors.append("%s: public headers live in include/tern/<module>/" % p)
        elif not os.path.isdir(os.path.join(root, "src", parts[2])):
            errors.append("%s: include/tern/%s/ has no src/%s/: a header's module lives in src/"
                          % (p, parts[2], parts[2]))

    # 4. no include cycle between modules
    edges = module_edges(root, paths)
    used_edges = {e for e in EXEMPT_EDGES if e in edges}
    for e in sorted(EXEMPT_EDGES - used_edges):
        notes.append("stale exemption: no file of module %s includes tern/%s/ any more; remove "
                     "it from EXEMPT_EDGES" % e)
    kept = {e: v for e, v in edges.items() if e not in EXEMPT_EDGES}
    for comp, cyc in cycles(graph_of(kept)):
        lines = ["include cycle between modules %s: %s" % (", ".join(comp), " -> ".join(cyc))]
        for b, a in zip(cyc, cyc[1:]):
            where = kept[(b, a)]
            for path, no, text in where[:3]:
                lines.append("    %s:%d: %s" % (path, no, text))
            if len(where) > 3:
                lines.append("    ... and %d more includes of tern/%s/ in module %s"
                             % (len(where) - 3, a, b))
        errors.append("\n".join(lines))

    # 5. no include cycle between files, inside a module or across (include guards hide one, and
    # then which declarations a file sees depends on who included whom first)
    fedges = {e: no for e, no in file_edges(root, paths).items() if e not in ALLOWED_FILE_EDGES}
    for comp, cyc in cycles(graph_of(fedges)):
        lines = ["include cycle between files: %s" % " -> ".join(cyc)]
        for b, a in zip(cyc, cyc[1:]):
            lines.append("    %s:%d: includes %s" % (b, fedges[(b, a)], a))
        errors.append("\n".join(lines))
    return errors, notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")),
                    help="the source tree (default: two levels above this script)")
    ap.add_argument("--scanner", choices=("ctags", "braces"),
                    help="how to find functions (default: ctags when installed, else braces)")
    ap.add_argument("--verbose", action="store_true", help="also list exempt offences")
    args = ap.parse_args()
    try:
        errors, notes = check(os.path.abspath(args.root), args.scanner, args.verbose)
    except (OSError, RuntimeError, ValueError) as exc:
        print("check_layout: %s" % exc)
        return 2
    for n in notes:
        if args.verbose or n.startswith("stale"):
            print("note: " + n)
    for e in errors:
        print(e)
    if errors:
        print("layout: %d offence%s (limits: %d lines a file, %d a function)"
              % (len(errors), "" if len(errors) == 1 else "s", MAX_FILE_LINES,
                 MAX_FUNCTION_LINES))
        return 1
    print("layout: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
