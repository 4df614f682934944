#!/usr/bin/env python3
"""Finds circles of source files that import each other, inside each named crate.

A file imports another when it names an item defined there: through a `use` (braces expanded,
`crate::`, `super::`, `self::` and child-module paths resolved) or a path written inline
(`crate::policy::NAMES`); a name re-exported with `pub use` is followed to the file that
defines it, and a `pub use` is itself an import of that file. Test code (`#[cfg(test)]`
modules, inline or in files of their own, and `tests/`) is left out. A circle (a strongly
connected set of two or more files) means none of its files can be read, tested or moved
without the others.

Files are checked, and so are rooms as `farm-studio look` draws them: a module folder
(`src/sched/`, its `mod.rs` and every file under it) is one room, any other file a room of its
own. Two files can each stand clear of the other and still tie their folders in a loop (a file
reads a name a folder's file defines, while the folder's `mod.rs` reads that file): that is a
circle too.

    python3 scripts/import-circles.py core bench cli daemon   # exit 1 if any circle
    python3 scripts/import-circles.py --all                    # every crate, report only
    python3 scripts/import-circles.py --root DIR NAME...       # crates under DIR (fixtures)
"""

import argparse
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates")

TEST_MOD_DECL = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+[a-z_][a-z0-9_]*\s*;")

MOD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*;", re.M)
USE_STMT = re.compile(r"^\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.M)
INLINE_PATH = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
ITEM_DEF = r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+|const\s+|unsafe\s+)*(?:fn|struct|enum|trait|type|const|static|union|macro_rules!)\s+{}\b"


def strip_tests_and_comments(text):
    """The file's text without comments and without `#[cfg(test)]` modules."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return TEST_MOD_DECL.sub("", "".join(out))


def expand_use(tree):
    """`a::{b, c::{d, e as f}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+as\s+[A-Za-z_][A-Za-z0-9_]*", "", tree)
    tree = re.sub(r"\s+", "", tree)
    if "{" not in tree:
        return [tree]
    head, rest = tree.split("{", 1)
    body = rest[: rest.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    if cur:
        parts.append(cur)
    paths = []
    for p in parts:
        for sub in expand_use(p):
            paths.append(head + sub if sub != "self" else head.rstrip(":"))
    return paths


class Crate:
    def __init__(self, src):
        self.src = src
        self.modules = {}  # module path tuple -> file
        self.files = {}  # file -> module path tuple
        self.text = {}
        self.walk((), os.path.join(src, "lib.rs") if os.path.exists(os.path.join(src, "lib.rs")) else os.path.join(src, "main.rs"))

    def walk(self, path, file):
        if not os.path.exists(file) or file in self.files:
            return
        self.modules[path] = file
        self.files[file] = path
        with open(file, encoding="utf-8") as f:
            self.text[file] = strip_tests_and_comments(f.read())
        base = os.path.dirname(file)
        name = os.path.basename(file)
        if name not in ("lib.rs", "main.rs", "mod.rs"):
            base = os.path.join(base, name[:-3])
        for m in MOD_DECL.finditer(self.text[file]):
            child = m.group(1)
            for cand in (os.path.join(base, child + ".rs"), os.path.join(base, child, "mod.rs")):
                if os.path.exists(cand):
                    self.walk(path + (child,), cand)
                    break

    def absolute(self, file, path):
        """A use path's segments from the crate root, or None for another crate."""
        segs = [s for s in path.split("::") if s]
        here = list(self.files[file])
        if not segs:
            return None
        if segs[0] == "crate":
            return segs[1:]
        if segs[0] in ("self", "super"):
            cur = here
            while segs and segs[0] in ("self", "super"):
                if segs.pop(0) == "super":
                    cur = cur[:-1]
            return cur + segs
        if tuple(here + [segs[0]]) in self.modules:  # a child module named directly
            return here + segs
        return None

    def resolve(self, segs, seen=None):
        """The file that defines the item named by `segs` (crate-root segments)."""
        seen = seen or set()
        key = tuple(segs)
        if key in seen:
            return None
        seen.add(key)
        for cut in range(len(segs), -1, -1):
            mod = tuple(segs[:cut])
            if mod not in self.modules:
                continue
            file = self.modules[mod]
            rest = segs[cut:]
            if not rest or rest[0] == "*":
                return file
            name = rest[0]
            if re.search(ITEM_DEF.format(re.escape(name)), self.text[file], re.M):
                return file
            for m in USE_STMT.finditer(self.text[file]):
                if not m.group(1):
                    continue
                for p in expand_use(m.group(2)):
                    last = p.split("::")[-1]
                    if last == name:
                        target = self.absolute(file, p)
                        if target is None:
                            return None  # another crate's item, handed on
                        found = self.resolve(target + rest[1:], seen)
                        if found:
                            return found
            return file
        return None

    def arrows(self):
        edges = {f: set() for f in self.files}
        for file, text in self.text.items():
            paths = []
            for m in USE_STMT.finditer(text):
                paths += expand_use(m.group(2))
            paths += [m.group(1) for m in INLINE_PATH.finditer(text)]
            for p in paths:
                segs = self.absolute(file, p)
                if segs is None:
                    continue
                target = self.resolve(segs)
                if target and target != file:
                    edges[file].add(target)
        return edges


def rooms(src, edges):
    """`edges` between rooms: a module folder under `src` (its `mod.rs` and every file below
    it) is one room, named by the folder; any other file is its own."""

    def room(f):
        rel = os.path.relpath(f, src)
        top = rel.split(os.sep)[0]
        return os.path.join(src, top) + os.sep if os.sep in rel else f

    out = {}
    for f, targets in edges.items():
        out.setdefault(room(f), set()).update(room(t) for t in targets)
    for r, targets in out.items():
        targets.discard(r)
        for t in targets:
            out.setdefault(t, set())
    return out


def circles(edges):
    """Tarjan's strongly connected components of two or more files."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    return out


def found(root, name):
    """The kinds of circle (`files`, `rooms`) in crate `name` under `root`."""
    src = os.path.join(root, name, "src")
    edges = Crate(src).arrows()
    kinds = {"files"} if circles(edges) else set()
    return kinds | ({"rooms"} if circles(rooms(src, edges)) else set())


def self_test():
    """Each fixture crate (scripts/fixtures/import-circles/README.md) seen as it must be."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "import-circles")
    want = {"files": {"files", "rooms"}, "rooms": {"rooms"}, "testmod": set(), "clean": set()}
    bad = [f"{n}: {sorted(found(root, n))}, not {sorted(w)}" for n, w in want.items()
           if found(root, n) != w]
    for b in bad:
        print(f"self-test FAILED  {b}", file=sys.stderr)
    if not bad:
        print(f"self-test ok ({len(want)} fixture crates)")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("crates", nargs="*", help="crate folders under crates/ that must have no circle")
    ap.add_argument("--all", action="store_true", help="report every crate's circles, fail on none")
    ap.add_argument("--root", default=ROOT, help="the folder the crates are in (default: crates/)")
    ap.add_argument("--self-test", action="store_true", help="check the checker on its fixtures")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    root = args.root
    names = sorted(os.listdir(root)) if args.all else args.crates
    if not names:
        ap.error("name crates (core bench ...) or --all")
    found = False
    for name in names:
        src = os.path.join(root, name, "src")
        if not os.path.isdir(src):
            print(f"no crate at crates/{name}", file=sys.stderr)
            return 2
        crate = Crate(src)
        edges = crate.arrows()
        by_room = rooms(src, edges)
        found_here = [("files", edges, c) for c in circles(edges)]
        same = [set(c) for _, _, c in found_here]
        found_here += [("rooms", by_room, c) for c in circles(by_room) if set(c) not in same]
        rel = lambda f: os.path.relpath(f, os.path.join(root, ".."))
        if not found_here:
            print(f"ok      {os.path.basename(root)}/{name}: {len(crate.files)} files, no circle")
            continue
        found = True
        for kind, graph, c in found_here:
            print(f"CIRCLE  {os.path.basename(root)}/{name}: {len(c)} {kind}")
            members = set(c)
            for f in c:
                for t in sorted(graph[f] & members):
                    print(f"          {rel(f)} -> {rel(t)}")
    return 1 if found and not args.all else 0


if __name__ == "__main__":
    sys.exit(main())
