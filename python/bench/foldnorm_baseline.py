"""Python baselines of bench/foldnorm_bench.cpp: torch.fx 1.13 constant
folding (split_const_subgraphs + run_folding) and NormalizeArgs on the same
graphs. Prints one JSON object of timings in milliseconds (best of RUNS).

Run: OMP_NUM_THREADS=1 /usr/bin/python3 python/bench/foldnorm_baseline.py
"""
import json
import operator
import time

import torch
import torch.fx
import torchvision
from torch.fx.experimental.const_fold import split_const_subgraphs
from torch.fx.experimental.normalize import NormalizeArgs

RUNS = 5


def fold_graph(n):
    """x, w; n/2 constant muls of w, and a non-constant chain over x that
    adds every 10th constant (the same graph as foldnorm_bench.cpp)."""
    root = torch.nn.Module()
    root.register_buffer("w", torch.rand(4, 4))
    g = torch.fx.Graph()
    x = g.placeholder("x")
    c = g.get_attr("w")
    y = x
    for i in range(n // 2):
        c = g.call_function(torch.mul, (c, 1.0001))
        y = g.call_function(torch.add, (y, c)) if i % 10 == 0 else g.call_function(torch.neg, (y,))
    g.output(y)
    return torch.fx.GraphModule(root, g)


def add_chain(n):
    """x, y, then n nodes add(v, y, alpha=1) (normalize's input)."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    v = x
    for _ in range(n):
        v = g.call_function(torch.add, (v, y), {"alpha": 1})
    g.output(v)
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    for node in gm.graph.nodes:
        node.meta["type"] = torch.Tensor
    return gm


def best(make, run):
    times = []
    for _ in range(RUNS):
        arg = make()
        t0 = time.perf_counter()
        run(arg)
        times.append((time.perf_counter() - t0) * 1e3)
    return min(times)


def fold(gm):
    f = split_const_subgraphs(gm)
    f.run_folding()
    return f


def main():
    torch.set_num_threads(1)
    out = {}
    for n in (1000, 10000):
        out["const_fold_%d_ms" % n] = best(lambda: fold_graph(n), fold)
        out["normalize_%d_ms" % n] = best(lambda: add_chain(n), lambda gm: NormalizeArgs(gm).transform())
    resnet = torch.fx.symbolic_trace(torchvision.models.resnet50().eval())
    out["resnet50_nodes"] = len(resnet.graph.nodes)
    out["const_fold_resnet50_ms"] = best(lambda: resnet, fold)
    out["normalize_resnet50_ms"] = best(lambda: resnet, lambda gm: NormalizeArgs(gm).transform())
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}))


if __name__ == "__main__":
    main()
