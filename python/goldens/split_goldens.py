"""Goldens for fxcpp's split_module / split_by_tags / CapabilityBasedPartitioner.

Builds small hand-made graphs with torch.fx 1.13 (the same graphs
tests/passes/split_module_test.cpp and partitioner_test.cpp build in C++),
runs the torch.fx passes and writes tests/passes/goldens/split.json with the
resulting structure: for every graph, its nodes as (op, name, target, args,
kwargs) with Python callables mapped to ATen names.

Run: /usr/bin/python3 python/goldens/split_goldens.py   (seeded, nothing downloaded)
"""
import json
import operator
import os

import torch
import torch.fx
from torch.fx.node import _format_arg
from torch.fx.passes.split_module import split_module
from torch.fx.passes.split_utils import split_by_tags
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import create_op_support

torch.manual_seed(0)

ATEN = {
    torch.add: "aten::add",
    torch.mul: "aten::mul",
    torch.sub: "aten::sub",
    torch.relu: "aten::relu",
    torch.tanh: "aten::tanh",
    torch.sigmoid: "aten::sigmoid",
    torch.neg: "aten::neg",
    torch.clamp: "aten::clamp",
    torch.cat: "aten::cat",
    torch.max: "aten::max",
    operator.getitem: "operator.getitem",
}


def target_name(n):
    if n.op == "call_function":
        return ATEN[n.target]
    return str(n.target)


def graph_text(g):
    """One line per node: op|name|target|args|kwargs (torch.fx _format_arg)."""
    return "".join("%s|%s|%s|%s|%s\n" % (n.op, n.name, target_name(n), _format_arg(n.args), _format_arg(n.kwargs))
                   for n in g.nodes)


def module_text(gm, qualname_map=None):
    """The split module's graph, then every GraphModule child's graph in child order."""
    out = "graph:\n" + graph_text(gm.graph)
    for name, child in gm.named_children():
        if isinstance(child, torch.fx.GraphModule):
            out += "child %s:\n" % name + graph_text(child.graph)
    if qualname_map is not None:
        out += "qualname_map:\n" + "".join("%s=%s\n" % kv for kv in sorted(qualname_map.items()))
    return out


class Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)


class Root(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.param = torch.nn.Parameter(torch.rand(3, 4))
        self.linear = torch.nn.Linear(4, 5)
        self.layer = torch.nn.Module()
        self.layer.sub = Nested()
        self.register_buffer("buf", torch.rand(3, 4))


# ---- graphs (the C++ tests build exactly these) -------------------------

def g_docstring():
    """torch.fx's split_module docstring example, built by hand."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    p = g.get_attr("param")
    a = g.call_function(torch.add, (x, p))
    l = g.call_module("linear", (a,))
    c = g.call_function(torch.clamp, (l,), {"min": 0.0, "max": 1.0})
    l1 = g.call_module("linear", (y,))
    c1 = g.call_function(torch.clamp, (l1,), {"min": 0.0, "max": 1.0})
    s = g.call_function(torch.add, (c, c1))
    g.output(s)
    return g


def g_multi():
    """Values used across several partitions, several outputs, get_attr in
    two partitions and in the output, a node-valued kwarg, a nested module."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    b = g.get_attr("buf")
    r = g.call_function(torch.relu, (x,))
    t = g.call_function(torch.tanh, (y,))
    m = g.call_function(torch.mul, (r, b))
    a = g.call_function(torch.add, (r, t), {"alpha": 2})
    lo = g.call_function(torch.neg, (t,))
    cl = g.call_function(torch.clamp, (a,), {"min": lo})
    n = g.call_module("layer.sub.lin", (m,))
    s = g.call_function(torch.sub, (n, r))
    sg = g.call_function(torch.sigmoid, (cl,))
    z = g.call_function(torch.add, (s, b))
    g.output((z, sg, r, b))
    return g, {"relu": 0, "tanh": 1, "mul": 0, "add": 1, "neg": 2, "clamp": 2,
               "layer_sub_lin": 3, "sub": 3, "sigmoid": 2, "add_1": 3}


def g_order():
    """Two independent partitions and a third using both: the topological
    order (a stack) differs from the original order."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.relu, (x,))
    b = g.call_function(torch.neg, (x,))
    c = g.call_function(torch.add, (a, b))
    g.output(c)
    return g, {"relu": 0, "neg": 1, "add": 2}


def g_tags():
    """split_by_tags: three tags, a get_attr used by two, multiple outputs."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    b = g.get_attr("buf")
    r = g.call_function(torch.relu, (x,))
    m = g.call_function(torch.mul, (r, b))
    t = g.call_function(torch.tanh, (y,))
    a = g.call_function(torch.add, (m, t))
    s = g.call_function(torch.sub, (a, r))
    n = g.call_function(torch.neg, (s,))
    k = g.call_function(torch.mul, (n, b))
    g.output((k, a, b))
    return g, {"relu": "a", "mul": "a", "tanh": "b", "add": "b", "sub": "c", "neg": "c", "mul_1": "c"}


def g_partition():
    """Partitioner graph: chains of supported ops with an unsupported op in
    the middle (a -> unsupported -> b tempts a cycle), a branch, getitem."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    a = g.call_function(torch.relu, (x,))
    a2 = g.call_function(torch.tanh, (a,))
    u = g.call_function(torch.sigmoid, (a2,))        # unsupported
    b = g.call_function(torch.add, (u, a2))          # reads a2 directly too: cycle bait
    b2 = g.call_function(torch.mul, (b, y))
    c = g.call_function(torch.neg, (y,))
    c2 = g.call_function(torch.relu, (c,))
    d = g.call_function(torch.add, (b2, c2))
    mx = g.call_function(torch.max, (d, 0))
    v = g.call_function(operator.getitem, (mx, 0))
    i = g.call_function(operator.getitem, (mx, 1))
    e = g.call_function(torch.tanh, (v,))
    s1 = g.call_function(torch.sigmoid, (e,))       # unsupported
    n1 = g.call_function(torch.neg, (s1,))           # a single-node partition
    s2 = g.call_function(torch.sigmoid, (n1,))       # unsupported
    g.output((s2, i))
    return g


class Lcg:
    """The same 64-bit LCG as partitioner_test.cpp, so both build the same graphs."""

    def __init__(self, seed):
        self.state = seed

    def pick(self, n):
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return (self.state >> 33) % n


UNARY = [torch.relu, torch.tanh, torch.sigmoid, torch.neg]
BINARY = [torch.add, torch.mul, torch.sub]
RANDOM_SUPPORTED = {"aten::relu", "aten::tanh", "aten::add", "aten::mul"}


def g_random(seed, ops=40):
    """A pseudo-random DAG of unary/binary ops (supported and not)."""
    rng = Lcg(seed)
    g = torch.fx.Graph()
    values = [g.placeholder("x"), g.placeholder("y")]
    for _ in range(ops):
        # Mostly recent values: long chains with branches and joins.
        a = values[len(values) - 1 - rng.pick(min(len(values), 6))]
        if rng.pick(2) == 0:
            values.append(g.call_function(UNARY[rng.pick(len(UNARY))], (a,)))
        else:
            b = values[rng.pick(len(values))]
            values.append(g.call_function(BINARY[rng.pick(len(BINARY))], (a, b)))
    outs = [values[-1], values[2 + rng.pick(ops)], values[2 + rng.pick(ops)]]
    g.output(tuple(outs))
    return g


def run_split(g, assign, keep=False):
    root = Root()
    gm = torch.fx.GraphModule(root, g)
    qual = {}
    out = split_module(gm, root, lambda n: assign[n.name], qual, keep_original_order=keep)
    return module_text(out, qual)


def main():
    goldens = {}
    counter = [0]

    def mod3(n):
        p = counter[0] % 3
        counter[0] += 1
        return p

    g = g_docstring()
    root = Root()
    gm = torch.fx.GraphModule(root, g)
    goldens["split_docstring"] = module_text(split_module(gm, root, mod3))

    g, assign = g_multi()
    goldens["split_multi"] = run_split(g, assign)
    goldens["split_multi_keep"] = run_split(g_multi()[0], assign, keep=True)

    g, assign = g_order()
    goldens["split_order"] = run_split(g, assign)
    goldens["split_order_keep"] = run_split(g_order()[0], assign, keep=True)

    g, tags = g_tags()
    for n in g.nodes:
        if n.name in tags:
            n.tag = tags[n.name]
    gm = torch.fx.GraphModule(Root(), g)
    goldens["split_by_tags"] = module_text(split_by_tags(gm, ["a", "b", "c"]))

    supported = {"aten::relu", "aten::tanh", "aten::add", "aten::mul", "aten::neg", "aten::max", "operator.getitem"}

    def is_supported(submods, n):
        # torch.fx 1.13 would also put placeholders and the output node into
        # partitions (OperatorSupport says True for them); fxcpp never does.
        return n.op == "call_function" and ATEN[n.target] in supported

    for single in (False, True):
        gm = torch.fx.GraphModule(Root(), g_partition())
        p = CapabilityBasedPartitioner(gm, create_op_support(is_supported), allows_single_node_partition=single)
        parts = p.propose_partitions()
        key = "partition_single" if single else "partition"
        # Partitions in order, each as its sorted node names (torch.fx keeps a set).
        text = "partitions:\n" + "".join(",".join(sorted(n.name for n in part.nodes)) + "\n" for part in parts)
        fused = p.fuse_partitions(parts)
        # The fused graph's (op, target) multiset (node order inside torch.fx's
        # fused modules follows set order, so only the top level is compared).
        text += "fused_ops:\n" + "".join("%s|%s\n" % t for t in sorted((n.op, target_name(n)) for n in fused.graph.nodes))
        text += "fused_children:\n" + "".join(
            "%s\n" % name for name, _ in fused.named_children() if name.startswith("fused_"))
        goldens[key] = text

    def random_supported(submods, n):
        return n.op == "call_function" and ATEN[n.target] in RANDOM_SUPPORTED

    # Partitions of 30 pseudo-random graphs. torch.fx 1.13 sometimes proposes
    # partitions that need each other's outputs: its fuse_partitions then
    # fails ("Input graph has cycles"). Those graphs are listed apart; fxcpp
    # must partition them differently (and fuse them).
    text, cyclic = "", ""
    for seed in range(30):
        gm = torch.fx.GraphModule(torch.nn.Module(), g_random(seed))
        p = CapabilityBasedPartitioner(gm, create_op_support(random_supported))
        parts = p.propose_partitions()
        rows = "".join(",".join(sorted(n.name for n in part.nodes)) + "\n" for part in parts)
        try:
            p.fuse_partitions(parts)
            text += "graph %d:\n" % seed + rows
        except Exception as e:  # noqa: BLE001
            cyclic += "%d: %s\n" % (seed, str(e).splitlines()[0][:60])
    goldens["partition_random"] = text
    goldens["partition_random_torch_fx_fails"] = cyclic

    path = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "passes", "goldens", "split.json")
    with open(path, "w") as f:
        json.dump(goldens, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", os.path.normpath(path))


if __name__ == "__main__":
    main()
