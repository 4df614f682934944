#!/usr/bin/env python3
"""Check the documentation: links resolve, and every shell example is runnable or marked.

    python3 scripts/docs-check.py            # links + every shell block marked or runnable-looking
    python3 scripts/docs-check.py --run      # ... and run every unmarked block (slow: builds, demos)
    python3 scripts/docs-check.py --run --with engine,gpu   # also the blocks marked for those
    python3 scripts/docs-check.py --quiet    # print failures only

What it checks (Python 3 standard library only; run from anywhere):

1. Links. Every relative link in README.md and docs/**/*.md (inline `[text](target)`, images,
   and reference definitions `[name]: target`; not inside code) must name an existing file or
   folder inside the repository, and a `#anchor` must name a heading of the target markdown
   file (GitHub's slugs: lower case, punctuation dropped, spaces to hyphens, `-1`, `-2` for
   repeats) or an explicit `<a id=...>`/`<a name=...>`. Links to http(s) and mailto are not
   fetched. A link to a file listed in PENDING (a page another change is about to add) is
   reported, not failed, while the file is missing.

2. Shell examples. Every fenced block tagged bash, sh, shell or console in README.md and
   docs/guides/*.md is extracted and its commands listed (a console block's commands are its
   `$ ` lines; the rest is output). A block may be marked by an HTML comment on the line just
   before its fence (blank lines between are allowed):

       <!-- docs-check: needs-gpu -->         needs an NVIDIA GPU and driver
       <!-- docs-check: needs-engine -->      needs an LLM engine (llama-server, vLLM, ...)
       <!-- docs-check: skip (reason) -->     never run; the reason is required

   An unmarked block must look runnable as written: each command's program is on PATH, is a
   shell builtin, is built by this repository (`xsched`, `./target/release/xsched`), or is a
   file in the repository; a script handed to bash/python3/sh exists; and no argument is a
   placeholder (`FILE`, `DIR`, `URL`, `PID`, `...`, `a|b` alternatives, `[--optional]`).
   With --run each unmarked block runs as one `bash -eo pipefail` script from the repository
   root, with target/release on PATH, under a timeout, in a process group of its own that is
   killed afterwards (so a daemon started with `&` does not outlive its block). With
   `--with gpu` / `--with engine` the blocks marked needs-gpu / needs-engine run too.

Exit status 0 when everything passes, 1 with a list of what failed.
"""

import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Pages another change is about to add: a link to them is reported, not failed, while the file is
# missing. Remove an entry once its file lands.
PENDING: dict = {}

SHELL_TAGS = {"bash", "sh", "shell", "console"}
MARKER = re.compile(r"^\s*<!--\s*docs-check:\s*(needs-gpu|needs-engine|skip)\s*(\((.+)\))?\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(\s+\".*\")?\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")

BUILTINS = {
    "cd", "export", "for", "do", "done", "if", "then", "else", "fi", "while", "time", "set",
    "source", ".", "echo", "true", "false", "wait", "kill", "sleep", "test", "[", "exit", "unset",
    "trap", "read", "printf", "(", ")", "{", "}",
}
# Programs this repository builds (cargo build --release puts them in target/release).
BUILT = {"xsched", "./target/release/xsched", "target/release/xsched"}
PLACEHOLDER = re.compile(
    r"^(FILE|DIR|URL|PATH|PID|N|K|R|S|Q|P|TAG|ID|NAME|PORT|OLD\.json|RUN\.json|DAEMON-POD)$"
    r"|REGISTRY|\.\.\.|…|^\[--|^<[^>]*>$"
)


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def strip_code_spans(line):
    return re.sub(r"(`+)(.+?)\1", "", line)


class Page:
    """A markdown file: its lines outside code, its anchors and its fenced blocks."""

    def __init__(self, path):
        self.path = path
        self.rel = path.relative_to(ROOT).as_posix()
        self.lines = path.read_text(encoding="utf-8").split("\n")
        self.prose = []  # (line number, text) outside fenced code
        self.blocks = []  # dicts: line, tag, body, marker, reason
        self.anchors = set()
        counts = {}
        fence = None
        body = []
        for i, line in enumerate(self.lines, 1):
            m = FENCE.match(line)
            if fence is None and m:
                fence = (m.group(2)[0], len(m.group(2)), i, m.group(3).lower())
                body = []
                continue
            if fence is not None:
                if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= fence[1] and not m.group(3):
                    self.blocks.append(self._block(fence[2], fence[3], body))
                    fence = None
                else:
                    body.append(line.strip() if line.startswith(" ") else line)
                continue
            self.prose.append((i, line))
            h = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if h:
                base = slug(h.group(1))
                n = counts.get(base, 0)
                counts[base] = n + 1
                self.anchors.add(base if n == 0 else f"{base}-{n}")
            for a in HTML_ANCHOR.findall(line):
                self.anchors.add(a)

    def _block(self, start, tag, body):
        marker = reason = None
        j = start - 2  # index of the line before the fence
        while j >= 0 and not self.lines[j].strip():
            j -= 1
        if j >= 0:
            m = MARKER.match(self.lines[j])
            if m:
                marker, reason = m.group(1), (m.group(3) or "").strip()
        return {"line": start, "tag": tag, "body": body, "marker": marker, "reason": reason}

    def links(self):
        for n, line in self.prose:
            text = strip_code_spans(line)
            for target in LINK.findall(text):
                yield n, target
            m = REFDEF.match(text)
            if m:
                yield n, m.group(1)


_pages = {}


def page(path):
    path = path.resolve()
    if path not in _pages:
        _pages[path] = Page(path)
    return _pages[path]


def check_links(pages, failures, notes):
    for p in pages:
        for n, target in p.links():
            if SCHEME.match(target) or target.startswith("//"):
                continue
            where = f"{p.rel}:{n}"
            path_part, _, anchor = target.partition("#")
            dest = (p.path.parent / path_part).resolve() if path_part else p.path
            try:
                rel = dest.relative_to(ROOT).as_posix()
            except ValueError:
                failures.append(f"{where}: link `{target}` leaves the repository")
                continue
            if not dest.exists():
                if rel in PENDING:
                    notes.append(f"{where}: link `{target}`: pending ({PENDING[rel]})")
                else:
                    failures.append(f"{where}: link `{target}`: no file {rel}")
                continue
            if anchor and dest.is_file() and dest.suffix == ".md":
                if anchor not in page(dest).anchors:
                    failures.append(f"{where}: link `{target}`: no heading #{anchor} in {rel}")


def commands(block):
    """The commands of a block, continuation lines joined."""
    out, cur = [], ""
    for raw in block["body"]:
        line = raw.rstrip()
        if block["tag"] == "console":
            if cur:
                line = line
            elif line.startswith("$ "):
                line = line[2:]
            else:
                continue
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        out.append((cur + line).strip())
        cur = ""
    if cur:
        out.append(cur.strip())
    return out


def words(command):
    """The words of a command without its trailing comment (shell-like, forgiving)."""
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return command.split()


def not_runnable(command):
    """Why a command does not look runnable as written, or None."""
    for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*|\s&\s*$", re.sub(r"\s#.*$", "", command)):
        ws = words(part)
        for w in ws:
            value = w.split("=", 1)[1] if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w) else w
            if PLACEHOLDER.search(value) or re.search(r"\w\|\w", value):
                return f"placeholder `{w}`"
        while ws and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", ws[0]):
            ws = ws[1:]  # VAR=value prefixes
        if not ws:
            continue
        prog = ws[0]
        if prog in BUILTINS or prog in BUILT or prog.startswith("$"):
            pass
        elif "/" in prog:
            if not (ROOT / prog).exists():
                return f"`{prog}` is not in the repository"
        elif shutil.which(prog) is None:
            return f"`{prog}` is not on PATH"
        if prog in ("bash", "sh", "python3", "python") and len(ws) > 1 and not ws[1].startswith("-"):
            if not (ROOT / ws[1]).exists():
                return f"`{ws[1]}` is not in the repository"
    return None


def run_block(block, timeout):
    """Run a block's commands as one bash script; (exit status or "timed out", output tail)."""
    import tempfile
    script = "set -eo pipefail\n" + "\n".join(commands(block)) + "\n"
    env = dict(os.environ)
    env["PATH"] = f"{ROOT / 'target' / 'release'}{os.pathsep}{env.get('PATH', '')}"
    # Output to a file, not a pipe: a job the block starts with `&` (a daemon, a server) keeps a
    # pipe open after the script ends; the script's own exit is what is waited for.
    with tempfile.TemporaryFile(mode="w+") as out:
        proc = subprocess.Popen(["bash", "-c", script], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            status = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = f"timed out after {timeout:g} s"
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the block's own group: its background jobs
        except ProcessLookupError:
            pass
        proc.wait()
        out.seek(0)
        return status, out.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", action="store_true", help="run every unmarked shell block")
    ap.add_argument("--with", dest="with_", default="", help="with --run: also run blocks marked "
                    "needs-gpu / needs-engine (comma-separated: gpu,engine)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per block with --run")
    ap.add_argument("--quiet", "-q", action="store_true", help="print failures only")
    ap.add_argument("--except", dest="except_", action="append", default=[], metavar="TEXT",
                    help="with --run: do not run blocks whose commands contain TEXT (repeated; "
                    "e.g. `bash scripts/test.sh`, which CI runs anyway)")
    args = ap.parse_args()
    extra = {f"needs-{w.strip()}" for w in args.with_.split(",") if w.strip()}

    docs = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
    pages = [page(d) for d in docs if d.is_file()]
    failures, notes = [], []
    check_links(pages, failures, notes)

    runnable = [p for p in pages if p.rel == "README.md" or re.match(r"docs/guides/[^/]+\.md$", p.rel)]
    counts = {"run": 0, "needs-gpu": 0, "needs-engine": 0, "skip": 0}
    for p in runnable:
        for b in p.blocks:
            if b["tag"] not in SHELL_TAGS:
                continue
            where = f"{p.rel}:{b['line']}"
            kind = b["marker"] or "run"
            counts[kind] += 1
            cmds = commands(b)
            if kind == "skip" and not b["reason"]:
                failures.append(f"{where}: `docs-check: skip` needs a reason in parentheses")
            if not args.quiet:
                label = kind + (f" ({b['reason']})" if b["reason"] else "")
                print(f"{where} [{label}]")
                for c in cmds:
                    print(f"    {c}")
            if kind == "run":
                for c in cmds:
                    why = not_runnable(c)
                    if why:
                        failures.append(f"{where}: `{c}`: {why}; run it as written, or mark the "
                                        "block (needs-gpu, needs-engine, skip (reason))")
            excepted = any(t in c for t in args.except_ for c in cmds)
            if args.run and (kind == "run" or kind in extra) and not excepted:
                status, out = run_block(b, args.timeout)
                if status != 0:
                    tail = "\n".join(("      " + l) for l in (out or "").rstrip().split("\n")[-15:])
                    failures.append(f"{where}: block exited {status}:\n{tail}")
                elif not args.quiet:
                    print("    -> ran, exit 0")

    for n in notes:
        print(f"note: {n}")
    total = sum(counts.values())
    summary = (f"{len(pages)} pages, links checked; {total} shell blocks: {counts['run']} runnable, "
               f"{counts['needs-gpu']} need a GPU, {counts['needs-engine']} need an engine, "
               f"{counts['skip']} skipped" + ("; unmarked blocks run" if args.run else ""))
    if failures:
        print(f"\ndocs-check: {len(failures)} failure(s) ({summary}):", file=sys.stderr)
        for f in failures:
            print(f"  - {f}", file=sys.stderr)
        return 1
    print(f"docs-check: ok ({summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
