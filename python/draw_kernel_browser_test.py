#!/usr/bin/python3
"""A fused kernel's source one click away in the interactive graph page (issue 68), in real headless Chromium.

1. A transformer block's tail (add, LayerNorm, GELU tanh, scaled softmax) written in Python, traced by torch.fx,
   fused by fxcpp.passes.fuse_kernels into one fxcpp::fused_kernel node, saved as .fx.
2. `fxcpp draw KERNEL.fx -o OUT/kernel.html`.
3. `chromium --headless=new --dump-dom file://.../kernel.html#selftest`: the page's self-test selects the first node
   with details, checks its C++ is hidden, clicks the last "show" link and reports what became visible.

Checks: the kernel node is the one with details, its C++ was hidden before the click and is shown after it, and it is
the C++ fx::compiler::kernel_source generates (at::vec::Vectorized loops). Skipped (exit 77) without chromium or a
C++ compiler.

    /usr/bin/python3 python/draw_kernel_browser_test.py --fxcpp build/fxcpp --python build/python --out build/draw
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from draw_browser_test import SKIP, chromium_binary, fail, selftest  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fxcpp", required=True)
    ap.add_argument("--python", required=True, help="the folder of the fxcpp Python module")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    binary = chromium_binary()
    if binary is None:
        print("draw_kernel_browser_test: chromium not installed (Debian package chromium); skipped")
        return SKIP
    sys.path.insert(0, a.python)
    import torch
    import fxcpp
    if not fxcpp._C._fuse_kernels_available():
        print("draw_kernel_browser_test: no C++ compiler; skipped")
        return SKIP

    class Tail(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(64)

        def forward(self, x, y):
            h = torch.nn.functional.gelu(self.norm(x + y), approximate="tanh")
            return torch.softmax(h * 0.125, dim=-1)

    torch.manual_seed(0)
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    gm = fxcpp.passes._fxcpp(torch.fx.symbolic_trace(Tail()))
    gm, report = fxcpp.passes.fuse_kernels(gm, x, y)
    if report["groups"] != 1:
        fail("expected one fused group, report: %r" % report)
    os.makedirs(a.out, exist_ok=True)
    model = os.path.join(a.out, "kernel.fx")
    page = os.path.abspath(os.path.join(a.out, "kernel.html"))
    fxcpp.save(gm, model)
    r = subprocess.run([a.fxcpp, "draw", model, "-o", page], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=300)
    if r.returncode != 0:
        fail("fxcpp draw exited %d: %s" % (r.returncode, r.stderr.strip()))
    res = selftest(binary, page)
    shown = res.get("details_shown") or ""
    print("draw_kernel_browser_test: details of %r, %d characters shown after the click" %
          (res.get("details_node"), len(shown)))
    program = report["programs"][0]
    want = fxcpp._C._kernel_source(program)
    checks = [
        (res.get("details_node", "").startswith("fused_kernel"), "details on %r" % res.get("details_node")),
        (res.get("details_hidden_before") is True, "the C++ was visible before the click"),
        ("at::vec::Vectorized" in shown, "the C++ shown lacks at::vec::Vectorized: %r" % shown[:300]),
        (shown == want, "the C++ shown is not kernel_source(program)"),
    ]
    bad = [msg for ok, msg in checks if not ok]
    if bad:
        fail("; ".join(bad))
    print("draw_kernel_browser_test: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
