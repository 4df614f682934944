#!/usr/bin/env python3
"""Lists the longest non-test functions of the workspace, or of one crate, by lines.

A function runs from its `fn` line to the line of its closing brace; test code (`tests/`,
`benches/`, `#[cfg(test)]` modules inline or in their own files, `#[test]` functions) is left
out. Braces inside strings,
chars and comments are skipped, so the count is the source's, not a guess.

    python3 scripts/longest-fns.py                  # the ten longest in crates/
    python3 scripts/longest-fns.py -n 20 gateway    # the twenty longest in crates/gateway
    python3 scripts/longest-fns.py --max 80 gateway # exit 1 if any is longer than 80 lines
    python3 scripts/longest-fns.py --root DIR       # another checkout's crates/
"""

import argparse
import os
import re
import sys

FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")


def code_only(text):
    """`text` with comments, strings and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and not re.match(r"\w", text[i - 1 : i]):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            end = '"' + hashes
            j = text.find(end, i + 2 + len(hashes))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and re.match(r"'(\\.[^']*|[^\\'])'", text[i:]):
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            out.append(" " * len(m.group(0)))
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def block_end(code, start):
    """The index of the brace closing the block that opens at or after `start`."""
    depth, i = 0, code.index("{", start)
    while i < len(code):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(code) - 1


def test_spans(code):
    """Character spans of `#[cfg(test)]` modules and `#[test]` functions."""
    spans = []
    for m in re.finditer(r"#\[(cfg\(test\)|test|tokio::test[^\]]*)\]", code):
        brace, semi = code.find("{", m.end()), code.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):
            # An item without a body (`#[cfg(test)] mod tests;`): its file is skipped whole.
            spans.append((m.start(), semi if semi >= 0 else len(code) - 1))
            continue
        spans.append((m.start(), block_end(code, m.end())))
    return spans


def functions(path):
    text = open(path, encoding="utf-8").read()
    code = code_only(text)
    skip = test_spans(code)
    for m in FN.finditer(code):
        if any(a <= m.start() <= b for a, b in skip):
            continue
        brace, semi = code.find("{", m.end()), code.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):
            continue  # a declaration without a body (a trait's, an extern's)
        end = block_end(code, m.end())
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, end) + 1
        yield m.group(1), first, last - first + 1


def test_only_files(base):
    """Files declared as modules under `#[cfg(test)]` (`#[cfg(test)] mod fuzz_tests;`)."""
    out = set()
    for dirpath, dirs, files in os.walk(base):
        for f in files:
            if not f.endswith(".rs"):
                continue
            text = open(os.path.join(dirpath, f), encoding="utf-8").read()
            here = dirpath if f in ("lib.rs", "main.rs", "mod.rs") else os.path.join(dirpath, f[:-3])
            for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text):
                out.add(os.path.join(here, m.group(1) + ".rs"))
                out.add(os.path.join(here, m.group(1), "mod.rs"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("crate", nargs="?", help="one crate under crates/ (default: all)")
    ap.add_argument("-n", type=int, default=10, help="how many to list")
    ap.add_argument("--max", type=int, help="exit 1 if any function is longer")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    args = ap.parse_args()
    base = os.path.join(args.root, "crates", args.crate or "")
    found = []
    skip = test_only_files(base)
    for dirpath, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if d not in ("tests", "benches", "target")]
        for f in files:
            p = os.path.join(dirpath, f)
            if f.endswith(".rs") and p not in skip:
                rel = os.path.relpath(p, os.path.join(args.root, "crates"))
                found += [(n, rel, line, name) for name, line, n in functions(p)]
    found.sort(key=lambda t: -t[0])
    for n, rel, line, name in found[: args.n]:
        print(f"{n:5}  {name}  {rel}:{line}")
    if args.max is not None:
        over = [f for f in found if f[0] > args.max]
        if over:
            print(f"{len(over)} function(s) longer than {args.max} lines", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
