#!/usr/bin/python3
"""Opens the page `fxcpp draw` writes in real headless Chromium and checks it.

1. `fxcpp draw MODEL -o OUT/NAME.html --input IN --profile IN` (shapes and a
   heat map); its summary line gives the node count.
2. `chromium --headless=new --dump-dom file://.../NAME.html#selftest`: on
   `#selftest` the page clicks its first call node, zooms with a wheel event,
   pans with a mouse drag and searches the last node, then writes what it saw as JSON into
   <pre id="selftest">. This script checks: one SVG node per graph node, the
   side panel empty before the click and showing the clicked node's opcode,
   target, tensor_meta and time after it, wheel zoom, drag pan, the search
   hit, the heat-map legend.
3. With --screenshot PNG: a screenshot of the page with its slowest node
   selected (`#node=NAME`), for the README (`make docs`).

Exits 77 (ctest SKIP_RETURN_CODE) when chromium is not installed, 1 on a
failed check. Standard library only; run with /usr/bin/python3.
"""
import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def fail(msg):
    print("draw_browser_test: FAIL: " + msg)
    sys.exit(1)


def chromium_binary():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium(binary, profile_dir, *args, timeout=120):
    cmd = [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", "--disable-extensions", "--user-data-dir=" + profile_dir, *args]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)


def selftest(binary, page):
    """Opens `page`#selftest in headless Chromium: the page's self-test result (a dict)."""
    with tempfile.TemporaryDirectory() as profile:
        r = chromium(binary, profile, "--dump-dom", "file://" + page + "#selftest")
    m = re.search(r'<pre id="selftest"[^>]*>(.*?)</pre>', r.stdout, re.S)
    if not m or not m.group(1).strip():
        fail("no self-test result in the DOM (chromium exit %d): %s" % (r.returncode, r.stderr[-2000:]))
    return json.loads(html.unescape(m.group(1)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fxcpp", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--out", required=True, help="directory for the page")
    ap.add_argument("--screenshot", help="also write a PNG screenshot here")
    a = ap.parse_args()

    binary = chromium_binary()
    if binary is None:
        print("draw_browser_test: chromium not installed (Debian package chromium); skipped")
        return SKIP

    os.makedirs(a.out, exist_ok=True)
    name = os.path.splitext(os.path.basename(a.model))[0]
    page = os.path.abspath(os.path.join(a.out, name + ".html"))
    r = subprocess.run([a.fxcpp, "draw", a.model, "-o", page, "--input", a.input, "--profile", a.input,
                        "--runs", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    if r.returncode != 0:
        fail("fxcpp draw exited %d: %s" % (r.returncode, r.stderr.strip()))
    m = re.search(r"wrote .*: (\d+) nodes, (\d+) edges", r.stdout)
    if not m:
        fail("unexpected fxcpp draw output: " + r.stdout)
    nodes = int(m.group(1))
    with open(page, encoding="utf-8") as f:
        text = f.read()
    if re.search(r"https?://", text):
        fail("the page refers to a URL")

    res = selftest(binary, page)
    print("draw_browser_test: self-test result:", json.dumps({k: v for k, v in res.items() if k != "panel_text"}))

    checks = [
        (res["svg_nodes"] == nodes, "SVG nodes %d, graph nodes %d" % (res["svg_nodes"], nodes)),
        (res["data_nodes"] == nodes, "node records %d, graph nodes %d" % (res["data_nodes"], nodes)),
        (res["clusters"] > 0, "no module clusters"),
        (res["clicked"] not in res["panel_before"], "the panel showed the node before the click"),
        (res["panel_title"] == "%" + res["clicked"], "panel title %r after clicking %r" % (res["panel_title"],
                                                                                          res["clicked"])),
        (res["clicked_op"] in res["panel_text"], "panel lacks the opcode %r" % res["clicked_op"]),
        (res["clicked_target"] in res["panel_text"], "panel lacks the target %r" % res["clicked_target"]),
        ("tensor_meta" in res["panel_text"] and "shape=(" in res["panel_text"], "panel lacks the tensor_meta"),
        ("time" in res["panel_text"], "panel lacks the node time"),
        (res["zoomed_in"] is True, "the mouse wheel did not zoom in"),
        (res["panned"] is True, "dragging did not pan"),
        (res["search_hit"] is not None and res["highlighted"] >= 1, "search found nothing"),
        (res["legend"] is True, "no heat-map legend"),
        (res["hottest"] is not None, "no node times in the page"),
    ]
    for ok, msg in checks:
        if not ok:
            fail(msg)
    print("draw_browser_test: %d nodes drawn, clicked %s: panel shows %s %s" %
          (nodes, res["clicked"], res["clicked_op"], res["clicked_target"]))

    if a.screenshot:
        shot = os.path.abspath(a.screenshot)
        os.makedirs(os.path.dirname(shot), exist_ok=True)
        tmp = shot + ".tmp.png"
        with tempfile.TemporaryDirectory() as profile:
            r = chromium(binary, profile, "--screenshot=" + tmp, "--window-size=1600,1000",
                         "--hide-scrollbars", "file://" + page + "#node=" + (res["hottest"] or res["clicked"]))
        if not os.path.exists(tmp):
            fail("no screenshot (chromium exit %d): %s" % (r.returncode, r.stderr[-2000:]))
        with open(tmp, "rb") as f:
            if f.read(8) != b"\x89PNG\r\n\x1a\n":
                fail("the screenshot is not a PNG")
        os.replace(tmp, shot)
        print("draw_browser_test: wrote", shot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
