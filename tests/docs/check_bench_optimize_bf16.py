#!/usr/bin/python3
"""scripts/bench_optimize.py's bf16 table on a CPU without oneDNN bf16 kernels (issue 39): a row whose bf16
engine kept float32 kernels (the optimiser's "bf16: ..." warning in the row's report) shows no % of the bf16
roofline and the table says which rows ran float32 and why; a row with bf16 kernels keeps its percentage."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from bench_optimize import bf16_fallback, render  # noqa: E402

WARNING = "bf16: oneDNN has no bfloat16 kernels on this CPU (ISA avx2; bf16 needs AVX-512): float32 kernels"


def row(model, warnings, bf16_gflops):
    engines = [{"engine": k, "median_ms": ms, "ratio": ms / 40.0, "gflops": g, "prepare_ms": 100.0,
                "max_rel_diff": 1e-7}
               for k, ms, g in (("torchscript", 50.0, 60.0), ("torchscript_opt", 40.0, 75.0), ("fxcpp", 50.0, 60.0),
                                ("fxcpp_opt", 30.0, 100.0), ("fxcpp_opt_bf16", 20.0, bf16_gflops))]
    return {"config": {"model": model, "blas": "openblas", "threads": 1, "batch": 1, "bf16": True},
            "result": {"engines": engines, "optimize": {"warnings": warnings}}}


assert bf16_fallback({"optimize": {"warnings": ["linear: x", WARNING]}}) == WARNING
assert bf16_fallback({"optimize": {"warnings": ["linear: x"]}}) is None
assert bf16_fallback({"optimize": None}) is None and bf16_fallback({}) is None

data = {"date": "d", "cpu": "c", "cpus": 2, "torch": "1.13", "command": "cmd", "wall_s": 60.0,
        "roofline": {"1": {"fp32_gflops": 100.0, "bf16_gflops": 200.0, "paths": []}},
        "results": [row("resnet18", [WARNING], 150.0), row("resnet50", [], 150.0)]}
md = render(data)
assert "| resnet18 | 40.0 | 30.0 | 20.0 | 0.50 | 150.0 | — (float32 kernels) | 100 | 1.0e-07 |" in md, md
assert "| resnet50 | 40.0 | 30.0 | 20.0 | 0.50 | 150.0 | 75% | 100 | 1.0e-07 |" in md, md
assert ("Asked for bf16, fxcpp-opt kept float32 kernels in 1 of 2 rows (resnet18), as the optimiser warned: \"%s\". "
        "Those rows' bf16 column is float32 timing." % WARNING) in md, md
assert "kept float32" not in render(dict(data, results=[row("resnet50", [], 150.0)]))
print("bench_optimize_bf16 ok")
