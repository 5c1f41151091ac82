#!/usr/bin/python3
"""Runs an optimised graph that fxcpp exported to TorchScript, in Python (issue 23).

    run_exported_optimized.py LIB OPT.pt INPUT.pt EXPECTED.pt
    run_exported_optimized.py LIB OPT.pt INPUT.pt EXPECTED.pt --bench ORIGINAL.pt [--seconds S]

`torch.ops.load_library(LIB)` (libfxcpp_onednn.so) registers fxcpp's oneDNN
operators and packed classes; `torch.jit.load(OPT.pt)` then reads the graph
`fxcpp export OPT.fx -o OPT.pt` wrote (the packed operators rebuilt by their
__setstate__, their kernels made for this CPU at the first forward). Its output
on INPUT.pt (a tuple of forward's arguments, plain torch.save) must equal
EXPECTED.pt (what `fxcpp run OPT.fx` wrote) bit for bit: prints "same as C++".

--bench also times, interleaved in this process (one forward of each per
round, 1 thread), that module's forward beside TorchScript's own
optimize_for_inference of ORIGINAL.pt (torch.jit.freeze first), and prints
their medians and ratio.
"""
import argparse
import statistics
import sys
import time

import torch


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("lib")
    p.add_argument("model")
    p.add_argument("inputs")
    p.add_argument("expected")
    p.add_argument("--bench", metavar="ORIGINAL.pt")
    p.add_argument("--seconds", type=float, default=3.0)
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.ops.load_library(a.lib)
    module = torch.jit.load(a.model)
    inputs = torch.load(a.inputs)
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    with torch.no_grad():
        out = module(*inputs)
    expected = torch.load(a.expected)
    if not isinstance(out, torch.Tensor) or out.shape != expected.shape or not torch.equal(out, expected):
        diff = (out - expected).abs().max().item() if out.shape == expected.shape else "shape"
        print(f"differs from C++: max diff {diff}")
        return 1
    print(f"same as C++: {tuple(out.shape)} {out.dtype}")
    if a.bench:
        ts_opt = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.load(a.bench).eval()))
        engines = {"fxcpp export (Python)": module, "TorchScript opt": ts_opt}
        times = {k: [] for k in engines}
        with torch.no_grad():
            for m in engines.values():
                for _ in range(2):
                    m(*inputs)
            start = time.perf_counter()
            rounds = 0
            while rounds < 3 or time.perf_counter() - start < a.seconds:
                for k, m in engines.items():
                    t0 = time.perf_counter()
                    m(*inputs)
                    times[k].append((time.perf_counter() - t0) * 1e3)
                rounds += 1
        base = statistics.median(times["TorchScript opt"])
        for k, v in times.items():
            print(f"{k:24s} median {statistics.median(v):8.3f} ms  / TS-opt {statistics.median(v) / base:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
