#!/usr/bin/env python3
"""Python torch.fx 1.13 baseline for bench/subgraph_rewriter_bench.cpp.

replace_pattern of conv2d -> batch_norm -> relu (replaced by conv2d -> relu)
on the same graphs fx_bench rewrites:
  - synthetic: x, then B blocks conv2d(v, w) -> batch_norm(., w, b, rm, rv,
    False, 0.1, 1e-05, False) -> relu, weights as get_attr nodes (8 nodes a
    block), for about 1k / 10k / 100k nodes;
  - resnet50: torchvision's resnet50 (no weights downloaded) traced, with its
    conv / bn / relu modules turned into the same functional calls on
    get_attr weights (33 matches).
Prints one JSON object of best-of-N CPU times (process_time) in milliseconds (the graph is
rebuilt outside the timed region). torch.fx's matcher checks every match for
cycles with a recursive DFS to the end of the graph (quadratic, and deeper
than Python's default recursion limit), so the limit is raised here; the
100k graph is only run with --full (it takes minutes).

    /usr/bin/python3 python/bench/subgraph_rewriter_baseline.py [--full]
"""
import argparse
import json
import sys
import threading
import time

import torch
import torch.fx as fx
from torch.fx import subgraph_rewriter


def pattern(x, w, bw, bb, rm, rv):
    return torch.relu(torch.batch_norm(torch.conv2d(x, w), bw, bb, rm, rv, False, 0.1, 1e-05, False))


def replacement(x, w, bw, bb, rm, rv):
    return torch.relu(torch.conv2d(x, w, bb))


class Root(torch.nn.Module):
    pass


def synthetic(blocks):
    # All blocks read the same five attributes through their own get_attr nodes.
    root = Root()
    t = torch.empty(1)
    root.register_buffer("w", t)
    root.bn = torch.nn.Module()
    names = ["w", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"]
    for n in names[1:]:
        root.bn.register_buffer(n[3:], t)
    g = fx.Graph()
    v = g.placeholder("x")
    for i in range(blocks):
        w, bw, bb, rm, rv = [g.get_attr(n) for n in names]
        c = g.call_function(torch.conv2d, (v, w))
        b = g.call_function(torch.batch_norm, (c, bw, bb, rm, rv, False, 0.1, 1e-05, False))
        v = g.call_function(torch.relu, (b,))
    g.output(v)
    return root, g


def functional_resnet50():
    import torchvision
    m = torchvision.models.resnet50()
    gm = fx.symbolic_trace(m)
    g = fx.Graph()
    env = {}
    for n in gm.graph.nodes:
        if n.op == "call_module":
            mod = gm.get_submodule(n.target)
            x = env[n.args[0]]
            if isinstance(mod, torch.nn.Conv2d):
                env[n] = g.call_function(torch.conv2d, (x, g.get_attr(n.target + ".weight")))
                continue
            if isinstance(mod, torch.nn.BatchNorm2d):
                ws = [g.get_attr(n.target + "." + a) for a in ("weight", "bias", "running_mean", "running_var")]
                env[n] = g.call_function(torch.batch_norm, (x, *ws, False, 0.1, 1e-05, False))
                continue
            if isinstance(mod, torch.nn.ReLU):
                env[n] = g.call_function(torch.relu, (x,))
                continue
        env[n] = g.node_copy(n, lambda a: env[a])
    return gm, g


def best_ms(make, runs):
    best = float("inf")
    count = None
    for _ in range(runs):
        root, g = make()
        gm = fx.GraphModule(root, g)
        t0 = time.process_time()
        matches = subgraph_rewriter.replace_pattern(gm, pattern, replacement)
        best = min(best, (time.process_time() - t0) * 1e3)
        count = len(matches)
    return best, count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="also the 100k-node graph")
    args = ap.parse_args()
    torch.set_num_threads(1)
    sys.setrecursionlimit(1_000_000)
    out = {"torch": torch.__version__, "synthetic_ms": {}, "synthetic_matches": {}}
    root50, g50 = functional_resnet50()
    out["resnet50_nodes"] = len(g50.nodes)

    def make50():
        g = fx.Graph()
        env = {}
        g.graph_copy(g50, env)
        g.output(env[[n for n in g50.nodes if n.op == "output"][0].args[0]])
        return root50, g
    out["resnet50_ms"], out["resnet50_matches"] = best_ms(make50, 5)
    sizes = [1000, 10000] + ([100000] if args.full else [])
    for n in sizes:
        blocks = n // 8
        ms, count = best_ms(lambda: synthetic(blocks), 5 if n <= 1000 else (3 if n <= 10000 else 1))
        out["synthetic_ms"][str(n)] = ms
        out["synthetic_matches"][str(n)] = count
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    threading.stack_size(512 * 1024 * 1024)  # the deep recursive DFS needs a big stack
    t = threading.Thread(target=main)
    t.start()
    t.join()
