#!/usr/bin/python3
"""docs/benchmarks.md from its saved runs in docs/bench/ (issue 38).

The page is a fixed header (HEADER, then a table of contents made from
SECTIONS) and one section per entry of SECTIONS, in that order: "## TITLE",
then the section's part in docs/bench/:

  PART.json  a bench script's saved run (what scripts/bench_markdown.py's
             save_run writes when `make bench` runs the script with
             --save-dir docs/bench), rendered by that script's render();
             its headings go one level down, below the section's "##";
  PART.md    otherwise: the section's text as it is (without its "## TITLE"
             line), for measurements no bench script saves (yet).

A saved run wins over the text of the same part. Nothing comes from the
clock: dates are those of the saved runs, so the page renders the same
from the same parts.

    /usr/bin/python3 scripts/bench_docs.py --render   writes docs/benchmarks.md
    /usr/bin/python3 scripts/bench_docs.py --check    exits 1, with a unified diff, if
                                                      docs/benchmarks.md is not what --render writes

`make bench` ends with --render; ctest's docs.benchmarks_render runs --check.
"""
import argparse
import difflib
import importlib
import json
import os
import re
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "scripts")
PARTS = os.path.join(ROOT, "docs", "bench")
PAGE = os.path.join(ROOT, "docs", "benchmarks.md")

# (part in docs/bench/, section title, the bench script whose saved run the part can be; None: text only).
# A script's part is the name it saves its run under (BUILD/NAME.json; bench_table.py: bench).
SECTIONS = [
    ("build_times", "Build times", None),
    ("bench_optimize", "Optimised inference: fxcpp vs TorchScript", "bench_optimize"),
    ("memory_planning", "Memory planning", None),
    ("bench_ort", "fxcpp vs ONNX Runtime", "bench_ort"),
    ("bench_ort_avx2", "fxcpp vs ONNX Runtime on an AVX2-only CPU", "bench_ort"),
    ("bench_ort_held_avx2", "fxcpp vs ONNX Runtime held at AVX2 on an AVX-512 CPU (a proxy)", "bench_ort"),
    ("bench_ort_amd_avx512", "fxcpp vs ONNX Runtime on an AMD EPYC with AVX-512", "bench_ort"),
    ("bench_ort_xeon_no_amx", "fxcpp vs ONNX Runtime on an Intel Xeon without AMX", "bench_ort"),
    ("bench_ort_amd_zen5", "fxcpp vs ONNX Runtime on an AMD EPYC Zen 5", "bench_ort"),
    ("bench_cold_start", "Cold start and deployment", "bench_cold_start"),
    ("bench_quantize", "int8: fxcpp vs Python's quantize_fx", "bench_quantize"),
    ("bench_quantize_avx2", "int8 on an AVX2-only CPU: fxcpp vs fp32 and Python's quantize_fx", "bench_quantize"),
    ("bench_quantize_7bit", "int8 with 7-bit weights: oneDNN's int8 kernels without VNNI", "bench_quantize"),
    ("bench_python", "fxcpp from Python: import fxcpp", "bench_python"),
    ("quantize_dynamic", "Dynamic int8 linear layers", None),
    ("bench_pipeline", "Pipeline and data parallelism", "bench_pipeline"),
    ("bench_decoder", "Decoder LLMs: fxcpp generate vs llama.cpp", "bench_decoder"),
    ("fused_kernels", "Fused kernels", None),
    ("training", "Training steps", None),
    ("training_memory", "Training steps: resident memory", None),
    ("qat", "Quantization-aware training", None),
    ("import_torchvision", "TorchScript import: torchvision models", None),
    ("import_families", "TorchScript import: model families", None),
    ("families_speed", "Imported model families: speed", None),
    ("bench", "Graph operations and passes: fxcpp vs Python torch.fx", "bench_table"),
    ("tracing", "Tracing", None),
]

HEADER = """# Benchmarks

This page is generated: `make bench` saves each bench script's run in
[docs/bench/](bench/), and `scripts/bench_docs.py --render` (the last step
of `make bench`) writes the page from the saved runs there, one part per
section (`NAME.json`, a script's saved run, rendered by that script; else
`NAME.md`, the section's text). Edit the parts, not this page: ctest's
`docs.benchmarks_render` (`scripts/bench_docs.py --check`) fails when the
page differs from what its parts render.

Every measurement of fxcpp in one place: one section per comparison, each
with the command that produces it, when it was measured and on what. For
how to use what is measured here, see the user guide ([index](README.md)).

The machine is a 2-core KVM guest (lscpu: "Intel(R) Xeon(R) Processor")
shared with other jobs, so absolute times drift from run to run and from day
to day: compare ratios of engines measured side by side in the same run,
not milliseconds across tables. Where a section names no date or load, none
was recorded with it.

`make bench` runs all of it (`QUICK=1`: the short versions; see the
[Makefile](../Makefile)): `scripts/bench_table.py`, `bench_optimize.py`,
`bench_cold_start.py`, `bench_pipeline.py`, `bench_quantize.py` and, when
ONNX Runtime is installed, `bench_ort.py`.
"""


class PartError(Exception):
    pass


def anchor(title):
    """GitHub's anchor of a heading (as python/check_readme_snippets.py computes it)."""
    out = []
    for c in title.strip().lower().replace("`", ""):
        if c in " -":
            out.append("-" if c == " " else c)
        elif c == "_" or unicodedata.category(c)[0] in "LN":
            out.append(c)
    return "".join(out)


def demote_headings(text):
    """Every markdown heading of a script's render one level down when it has a "##" (the section's own level)."""
    lines = text.split("\n")
    fence = False
    levels = []
    for line in lines:
        if line.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"(#{1,6}) ", line)
        if m:
            levels.append(len(m.group(1)))
    shift = max(0, 3 - min(levels)) if levels else 0
    if not shift:
        return text
    out, fence = [], False
    for line in lines:
        if line.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"(#{1,6}) ", line)
        out.append("#" * min(6, len(m.group(1)) + shift) + line[len(m.group(1)):] if m else line)
    return "\n".join(out)


def section_body(part, script):
    """The text of one section below its "## TITLE" line, ending in one newline."""
    json_path, md_path = os.path.join(PARTS, part + ".json"), os.path.join(PARTS, part + ".md")
    if script and os.path.exists(json_path):
        if SCRIPTS not in sys.path:
            sys.path.insert(0, SCRIPTS)
        render = importlib.import_module(script).render
        with open(json_path, encoding="utf-8") as f:
            data = json.load(f)
        text = demote_headings(render(data))
    elif os.path.exists(md_path):
        with open(md_path, encoding="utf-8") as f:
            text = f.read()
        first = text.split("\n", 1)[0]
        if first.startswith("## "):
            raise PartError("%s starts with a heading (%r): the section's title comes from SECTIONS in "
                            "scripts/bench_docs.py; the part holds what comes below it" %
                            (os.path.relpath(md_path, ROOT), first))
    else:
        raise PartError("no part for the section %r: neither %s nor %s" % (
            part, os.path.relpath(json_path, ROOT), os.path.relpath(md_path, ROOT)) if script else
            "no part for the section %r: %s" % (part, os.path.relpath(md_path, ROOT)))
    return text.strip("\n") + "\n"


def stray_parts():
    """Files of docs/bench/ that no section reads (a misspelt part would be left out silently)."""
    known = {p + ext for p, _, script in SECTIONS for ext in ([".md", ".json"] if script else [".md"])}
    return sorted(f for f in os.listdir(PARTS) if f not in known) if os.path.isdir(PARTS) else []


def render_page():
    toc = "".join("- [%s](#%s)\n" % (title, anchor(title)) for _, title, _ in SECTIONS)
    out = [HEADER, "\n", toc]
    for part, title, script in SECTIONS:
        out.append("\n## %s\n\n%s" % (title, section_body(part, script)))
    return "".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--render", action="store_true", help="write docs/benchmarks.md from docs/bench/")
    mode.add_argument("--check", action="store_true",
                      help="render in memory; exit 1 with a unified diff if docs/benchmarks.md differs")
    args = ap.parse_args()
    try:
        page = render_page()
    except PartError as e:
        print("bench_docs.py: %s" % e, file=sys.stderr)
        if args.check:
            print("0 passed, 1 failed")
        return 1
    stray = stray_parts()
    if args.render:
        with open(PAGE, "w", encoding="utf-8") as f:
            f.write(page)
        print("wrote %s from %s" % (os.path.relpath(PAGE, ROOT), os.path.relpath(PARTS, ROOT)), file=sys.stderr)
        for f in stray:
            print("bench_docs.py: docs/bench/%s belongs to no section (SECTIONS)" % f, file=sys.stderr)
        return 1 if stray else 0
    with open(PAGE, encoding="utf-8") as f:
        current = f.read()
    failed = False
    if current != page:
        sys.stdout.writelines(difflib.unified_diff(
            current.splitlines(True), page.splitlines(True), "docs/benchmarks.md",
            "docs/benchmarks.md rendered from docs/bench/ (scripts/bench_docs.py --render)"))
        print("docs/benchmarks.md differs from its parts: edit docs/bench/, then "
              "/usr/bin/python3 scripts/bench_docs.py --render")
        failed = True
    for f in stray:
        print("docs/bench/%s belongs to no section (SECTIONS in scripts/bench_docs.py)" % f)
        failed = True
    print("0 passed, 1 failed" if failed else "1 passed, 0 failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
