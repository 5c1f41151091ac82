"""Python torch.fx 1.13 timings for bench/split_bench.cpp's workloads.

Prints one JSON object: milliseconds of CPU time (time.process_time; compare
with fx_bench's CPU column), best of several runs, single thread.
Run: OMP_NUM_THREADS=1 /usr/bin/python3 python/bench/split_baseline.py
Graphs larger than 10k nodes are not built: Python torch.fx 1.13 names
nodes in O(n) each, so building a 100k-node graph alone takes minutes, and
its partitioner keeps every node's ancestor set (O(n^2) memory).
"""
import json
import time

import torch
import torch.fx
import torchvision
from torch.fx.passes.split_module import split_module
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import create_op_support

torch.set_num_threads(1)


def best_ms(fn, runs):
    """CPU time (the machine is shared; fx_bench's CPU column is the match)."""
    best = float("inf")
    for _ in range(runs):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best * 1e3


def add_chain(n, unsupported_every=0):
    g = torch.fx.Graph()
    x = g.placeholder("x")
    v = x
    for i in range(n):
        odd = unsupported_every > 0 and i % unsupported_every == unsupported_every - 1
        v = g.call_function(torch.mul if odd else torch.add, (v, x))
    g.output(v)
    return torch.fx.GraphModule(torch.nn.Module(), g)


def ladder(n):
    g = torch.fx.Graph()
    x = g.placeholder("x")
    v = x
    for _ in range(n // 2):
        u = g.call_function(torch.mul, (v, x))
        v = g.call_function(torch.add, (v, u))
    g.output(v)
    return torch.fx.GraphModule(torch.nn.Module(), g)


def side_outputs(n):
    g = torch.fx.Graph()
    x = g.placeholder("x")
    v = g.call_function(torch.add, (x, x))
    sides = []
    for _ in range(n // 2):
        nxt = g.call_function(torch.add, (v, x))
        sides.append(g.call_function(torch.mul, (v, x)))
        v = nxt
    sides.append(v)
    g.output(tuple(sides))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def split_chunks(gm, root, size):
    counter = [0]

    def cb(_):
        p = counter[0] // size
        counter[0] += 1
        return p
    return split_module(gm, root, cb)


ADD_ONLY = create_op_support(lambda submods, n: n.op == "call_function" and n.target is torch.add)


def partition(make, n):
    gm = make(n)  # built outside the timing, as in C++
    t = time.process_time()
    p = CapabilityBasedPartitioner(gm, ADD_ONLY)
    p.fuse_partitions(p.propose_partitions())
    return (time.process_time() - t) * 1e3


def main():
    out = {}
    torch.manual_seed(0)
    model = torchvision.models.resnet50()
    gm = torch.fx.symbolic_trace(model)
    out["split_module_resnet50_nodes"] = len(gm.graph.nodes)
    out["split_module_resnet50_ms"] = best_ms(lambda: split_chunks(gm, model, 20), 20)
    for n, runs in ((1000, 5), (10000, 3)):
        chain = add_chain(n)
        out["split_module_chain_%d_ms" % n] = best_ms(lambda: split_chunks(chain, chain, 100), runs)
    for n, runs in ((1000, 3), (2000, 2)):
        out["partitioner_chain_%d_ms" % n] = min(partition(lambda k: add_chain(k, 50), n) for _ in range(runs))
        out["partitioner_ladder_%d_ms" % n] = min(partition(ladder, n) for _ in range(runs))
        out["partitioner_side_outputs_%d_ms" % n] = min(partition(side_outputs, n) for _ in range(runs))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
