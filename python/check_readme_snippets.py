#!/usr/bin/python3
"""Checks that the C++ in the README and in docs/ is code that runs, and that
their relative links lead somewhere.

    /usr/bin/python3 python/check_readme_snippets.py [SOURCE_DIR]

1. Snippets. Every ```cpp block of README.md, and every ```cpp block of a
   docs/*.md page that claims an example, must be an excerpt of an example
   that ctest builds and runs:
   - its first line is the comment `// examples/NAME.cpp` naming the file
     (a block whose first line mentions examples/... in any other form is an
     error: a claim the check could not read);
   - the file is a top-level examples/*.cpp (each one is built and run as
     ctest `example.NAME`), or a file in a subdirectory of examples/ that
     CMakeLists.txt or a tests/**/*.cmake builds (examples/deploy,
     examples/consumer);
   - every non-blank, non-comment line of the block appears in that file, in
     the same order. Lines are compared whitespace-trimmed and without a
     trailing `// comment`, so a snippet may comment differently from the
     file, but its code is the file's code.
   README.md has no other kind of ```cpp block: one without a claim fails.
2. Links. Every relative markdown link of README.md and docs/*.md
   (`[text](path)`, `![alt](path)`, `[name]: path`; not inside code) points
   to an existing file or directory; for a link to a .md file with a
   #anchor (or a bare #anchor into the page itself), the anchor is one of
   that page's headings (GitHub's slugs).

Prints one line per check and "N passed, M failed" at the end; exits 1 when
anything failed (with the page, the line of the block or link, and what is
missing), 0 otherwise. ctest runs it as docs.readme_snippets
(tests/docs/docs.cmake).
"""

import os
import pathlib
import re
import sys
import unicodedata

CLAIM = re.compile(r"^\s*//\s*(examples/[\w./-]+\.cpp)\s*$")
MENTION = re.compile(r"examples/[\w./-]+\.cpp")
FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def code_part(line):
    """The line without a trailing // comment (outside string and character
    literals), whitespace-trimmed."""
    quote = None
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif line.startswith("//", i):
            return line[:i].strip()
        i += 1
    return line.strip()


def fenced_blocks(lines):
    """(language, first line number (1-based, the line after the fence), lines)
    of every fenced block; and the set of line indexes inside fences."""
    blocks, inside = [], set()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2).lower()
        inside.add(i)
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence[0] * len(fence)):
            body.append(lines[j])
            inside.add(j)
            j += 1
        inside.add(j)
        blocks.append((lang, i + 2, body))
        i = j + 1
    return blocks, inside


def built_and_run_examples(src):
    """Example files ctest builds and runs: examples/*.cpp, and the files of
    a subdirectory of examples/ named on a non-comment line of CMakeLists.txt
    or tests/**/*.cmake."""
    files = {p.relative_to(src).as_posix() for p in (src / "examples").glob("*.cpp")}
    cmake = [src / "CMakeLists.txt"] + sorted((src / "tests").rglob("*.cmake"))
    text = "\n".join(
        line for f in cmake if f.is_file() for line in f.read_text(encoding="utf-8").splitlines()
        if not line.lstrip().startswith("#"))
    for d in (src / "examples").iterdir():
        if d.is_dir() and re.search(r"examples/" + re.escape(d.name) + r"\b", text):
            files |= {p.relative_to(src).as_posix() for p in d.rglob("*.cpp")}
    return files


def check_snippet(src, page, line_no, body, examples, require_claim):
    """None when the block is not checked (a docs block that claims nothing);
    otherwise (ok, message)."""
    where = f"{page}:{line_no}"
    first_index = next((i for i, l in enumerate(body) if l.strip()), None)
    first = body[first_index] if first_index is not None else ""
    claim = CLAIM.match(first)
    if not claim:
        if MENTION.search(first):
            return False, (f"{where}: the ```cpp block names an example on its first line, but not as the "
                           f"comment `// examples/NAME.cpp` alone: {first.strip()!r}")
        if require_claim:
            return False, (f"{where}: the ```cpp block does not start with `// examples/NAME.cpp` "
                           f"(every C++ block of {page} must be an excerpt of an example ctest runs)")
        return None
    name = claim.group(1)
    path = src / name
    if not path.is_file():
        return False, f"{where}: the ```cpp block claims {name}, which does not exist"
    if name not in examples:
        return False, f"{where}: the ```cpp block claims {name}, which ctest does not build and run"
    file_lines = [code_part(l) for l in path.read_text(encoding="utf-8").splitlines()]
    pos = 0
    checked = 0
    for offset, raw in enumerate(body):
        if offset <= first_index:
            continue  # the claim
        code = code_part(raw)
        if not code:
            continue  # blank or a comment line
        try:
            pos = file_lines.index(code, pos) + 1
        except ValueError:
            anywhere = code in file_lines
            return False, (f"{where}: the ```cpp block claiming {name}: line {line_no + offset} "
                           f"{'is out of order in' if anywhere else 'is not in'} {name}:\n    {code}")
        checked += 1
    return True, f"{where}: {checked} lines of {name}"


def slug(heading):
    """GitHub's anchor of a heading."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = text.strip().lower().replace("`", "")
    out = []
    for c in text:
        if c in " -":
            out.append("-" if c == " " else c)
        elif c == "_" or unicodedata.category(c)[0] in "LN":
            out.append(c)
    return "".join(out)


def anchors(path, cache={}):
    if path not in cache:
        lines = path.read_text(encoding="utf-8").splitlines()
        _, inside = fenced_blocks(lines)
        seen, found = {}, set()
        for i, line in enumerate(lines):
            m = re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if i in inside or not m:
                continue
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else f"{s}-{n}")
        cache[path] = found
    return cache[path]


def check_links(src, page):
    path = src / page
    lines = path.read_text(encoding="utf-8").splitlines()
    _, inside = fenced_blocks(lines)
    bad, count = [], 0
    for i, line in enumerate(lines):
        if i in inside:
            continue
        text = INLINE_CODE.sub("", line)
        targets = [m.group(1) for m in INLINE_LINK.finditer(text)]
        ref = REF_LINK.match(text)
        if ref:
            targets.append(ref.group(1))
        for target in targets:
            if SCHEME.match(target):
                continue
            count += 1
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path.resolve()
            if not dest.exists():
                bad.append(f"{page}:{i + 1}: link to {target}: {file_part} does not exist")
            elif anchor and dest.suffix == ".md" and dest.is_file() and anchor.lower() not in anchors(dest):
                bad.append(f"{page}:{i + 1}: link to {target}: {os.path.relpath(dest, src)} has no "
                           f"heading with the anchor #{anchor}")
    return bad, count


def main():
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    src = src.resolve()
    pages = ["README.md"] + sorted(p.relative_to(src).as_posix() for p in (src / "docs").glob("*.md"))
    examples = built_and_run_examples(src)
    passed, failed = 0, 0

    def report(ok, message):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok    {message}")
        else:
            failed += 1
            print(f"FAIL  {message}")

    for page in pages:
        if not (src / page).is_file():
            report(False, f"{page} does not exist")
            continue
        blocks, _ = fenced_blocks((src / page).read_text(encoding="utf-8").splitlines())
        for lang, line_no, body in blocks:
            if lang not in ("cpp", "c++", "cxx"):
                continue
            result = check_snippet(src, page, line_no, body, examples, require_claim=(page == "README.md"))
            if result is not None:
                report(*result)
        bad, count = check_links(src, page)
        if bad:
            report(False, "\n      ".join(bad))
        else:
            report(True, f"{page}: {count} relative links lead to existing files and headings")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
