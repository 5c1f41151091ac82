#!/usr/bin/python3
"""Python torch.fx 1.13 timings of the passes fxcpp benchmarks in bench/cse_bench.cpp.

Prints one JSON object (best of several runs, ms), also written to --json:
  cse_ms[N]         CSEPass on the N-node duplicate chain (x -> relu, relu -> add ...)
  cse_resnet50_ms   CSEPass on symbolic_trace(torchvision resnet50)
Run with Debian's python3:  /usr/bin/python3 python/bench/passes_baseline.py [--quick] [--json OUT]
"""
import argparse
import json
import time

import torch
import torch.fx as fx
import torchvision
from torch.fx.passes.dialect.common.cse_pass import CSEPass, get_CSE_banned_ops


def best_of(fn, runs):
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def duplicate_chain(nodes):
    g = fx.Graph()
    v = g.placeholder("x")
    for _ in range(nodes // 3):
        a = g.call_function(torch.ops.aten.relu.default, (v,))
        b = g.call_function(torch.ops.aten.relu.default, (v,))
        v = g.call_function(torch.ops.aten.add.Tensor, (a, b))
    g.output(v)
    return fx.GraphModule(torch.nn.Module(), g)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cse = CSEPass(banned_ops=get_CSE_banned_ops())
    out = {"cse_ms": {}}
    for n, runs in ((1000, 3), (10000, 1)):
        if args.quick and n > 1000:
            continue
        gm = duplicate_chain(n)
        out["cse_ms"][str(n)] = best_of(lambda: cse(gm), runs)
    gm = fx.symbolic_trace(torchvision.models.resnet50())
    out["cse_resnet50_ms"] = best_of(lambda: cse(gm), 3)
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
