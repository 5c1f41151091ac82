"""Goldens for fxcpp's constant folding and normalization passes.

Builds small graphs with the torch.fx Graph API, runs torch.fx 1.13's
experimental.const_fold.split_const_subgraphs and experimental.normalize.
NormalizeArgs on them, and writes tests/passes/goldens/foldnorm.json with the
resulting nodes (opcode, ATen target, args, kwargs) and output values. The
C++ tests (tests/passes/const_fold_test.cpp, normalize_test.cpp) build the
same graphs and compare. Values are deterministic (no RNG needed).

Run: /usr/bin/python3 python/goldens/foldnorm_goldens.py
"""
import json
import operator
import os

import torch
import torch.fx
from torch.fx.experimental.const_fold import split_const_subgraphs
from torch.fx.experimental.normalize import NormalizeArgs

ATEN = {
    operator.add: "aten::add", torch.add: "aten::add", operator.mul: "aten::mul", torch.mul: "aten::mul",
    torch.relu: "aten::relu", torch.mm: "aten::mm", torch.sum: "aten::sum", torch.t: "aten::t",
    torch.rand: "aten::rand", torch.tanh: "aten::tanh", torch.neg: "aten::neg", torch.sigmoid: "aten::sigmoid",
    torch.transpose: "aten::transpose", torch.cat: "aten::cat", torch.clamp: "aten::clamp",
    torch.softmax: "aten::softmax", operator.getitem: "operator.getitem",
}


def ramp(*shape, scale=0.1, offset=0.0):
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=torch.float32).reshape(*shape) * scale + offset)


def fmt(a, folded):
    if isinstance(a, torch.fx.Node):
        return folded.get(a, "%" + a.name)
    if isinstance(a, (list, tuple)):
        return [fmt(x, folded) for x in a]
    if isinstance(a, torch.dtype):
        return str(a)
    return a


def flat(v):
    if isinstance(v, (list, tuple)):
        return [x for e in v for x in flat(e)]
    return [float(x) for x in v.detach().reshape(-1).tolist()]


# ---- constant folding ---------------------------------------------------
def root_wb():
    root = torch.nn.Module()
    root.register_buffer("w", ramp(3, 3, offset=-0.4))
    root.register_buffer("b", ramp(3, scale=0.5))
    return root


def cf_mixed():
    """relu(w) + 1 and sum(w) fold (two attributes); add(x, b) does not."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    w = g.get_attr("w")
    relu = g.call_function(torch.relu, (w,))
    add = g.call_function(operator.add, (relu, 1.0))
    b = g.get_attr("b")
    add_1 = g.call_function(torch.add, (x, b))
    mm = g.call_function(torch.mm, (add_1, add))
    s = g.call_function(torch.sum, (w,))
    add_2 = g.call_function(operator.add, (mm, s))
    g.output(add_2)
    return root_wb(), g


def cf_single():
    """x * t(w * 2): one folded attribute."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    w = g.get_attr("w")
    mul = g.call_function(operator.mul, (w, 2.0))
    t = g.call_function(torch.t, (mul,))
    out = g.call_function(torch.mm, (x, t))
    g.output(out)
    return root_wb(), g


def cf_chain_skip():
    """tanh(neg(w)) + x, with the skip predicate rejecting neg."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    w = g.get_attr("w")
    neg = g.call_function(torch.neg, (w,))
    tanh = g.call_function(torch.tanh, (neg,))
    sig = g.call_function(torch.sigmoid, (w,))
    add = g.call_function(operator.add, (x, tanh))
    add_1 = g.call_function(operator.add, (add, sig))
    g.output(add_1)
    return root_wb(), g


def cf_nothing():
    """Only get_attr nodes are constant: nothing to fold."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    w = g.get_attr("w")
    add = g.call_function(operator.add, (x, w))
    g.output(add)
    return root_wb(), g


def cf_rand():
    """x + rand(3, 3) * 0: torch.fx folds torch.rand (a random op!)."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    r = g.call_function(torch.rand, ((3, 3),))
    z = g.call_function(operator.mul, (r, 0.0))
    add = g.call_function(operator.add, (x, z))
    g.output(add)
    return root_wb(), g


def const_fold_case(make, skip=None):
    root, g = make()
    gm = torch.fx.GraphModule(root, g)
    x = ramp(3, 3, offset=-0.3)
    ref = gm(x)
    folded_gm = split_const_subgraphs(gm, skip_folding_node_fn=skip)
    out = folded_gm(x)
    assert torch.allclose(out, ref) or make is cf_rand
    folded_names, folded = [], {}
    if folded_gm.const_subgraph_module is not None:
        folded_names = [n.name for n in folded_gm.const_subgraph_module.graph.nodes
                        if n.op in ("call_function", "call_method")]
    attr = folded_gm.fx_const_folded_attrs_name
    calls, get_attrs = [], []
    for n in folded_gm.graph.nodes:
        if n.op == "get_attr" and n.target == attr:
            folded[n] = "folded:0"
        elif n.op == "call_function" and n.target is operator.getitem and n.args[0] in folded:
            folded[n] = "folded:%d" % n.args[1]
    for n in folded_gm.graph.nodes:
        if n in folded:
            continue
        if n.op == "get_attr":
            get_attrs.append(n.target)
        elif n.op in ("call_function", "output"):
            tgt = ATEN[n.target] if n.op == "call_function" else "output"
            calls.append([n.op, tgt, fmt(n.args, folded), {k: fmt(v, folded) for k, v in n.kwargs.items()}])
    return {"folded": folded_names, "num_folded_attrs": len(set(folded.values())), "calls": calls,
            "get_attrs": sorted(get_attrs), "input": flat(x), "output": flat(ref)}


# ---- normalization -------------------------------------------------------
def norm_graph():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    add = g.call_function(torch.add, (x, y), {"alpha": 2})
    relu = g.call_function(torch.relu, (add,))
    s = g.call_function(torch.sum, (relu,), {"dim": 1, "keepdim": True})
    tr = g.call_function(torch.transpose, (s, 0, 1))
    cat = g.call_function(torch.cat, ([x, y],), {"dim": 0})
    mm = g.call_function(torch.mm, (x, y))
    cl = g.call_function(torch.clamp, (mm,), {"min": 0.5})
    sm = g.call_function(torch.softmax, (cl, 1))
    g.output((add, relu, s, tr, cat, mm, cl, sm))
    return g


def normalize_case(only_kwargs):
    gm = torch.fx.GraphModule(torch.nn.Module(), norm_graph())
    for n in gm.graph.nodes:
        n.meta["type"] = torch.Tensor
    x, y = ramp(3, 3, offset=-0.3), ramp(3, 3, scale=-0.2, offset=0.5)
    ref = gm(x, y)
    ngm = NormalizeArgs(gm, normalize_to_only_use_kwargs=only_kwargs).transform()
    out = ngm(x, y)
    assert all(torch.allclose(a, b) for a, b in zip(out, ref))
    nodes = []
    for n in ngm.graph.nodes:
        if n.op != "call_function":
            continue
        # torch's Python signatures call ATen's `self` `input`.
        kw = [["self" if k == "input" else k, fmt(v, {})] for k, v in n.kwargs.items()]
        nodes.append([n.name, ATEN[n.target], fmt(n.args, {}), kw])
    return {"nodes": nodes, "inputs": [flat(x), flat(y)], "output": flat(ref)}


def module_case(only_kwargs):
    """call_module of torch.nn layers: Python binds forward's `input`."""
    root = torch.nn.Module()
    root.lin = torch.nn.Linear(3, 3)
    root.act = torch.nn.ReLU()
    g = torch.fx.Graph()
    x = g.placeholder("x")
    lin = g.call_module("lin", (x,))
    act = g.call_module("act", (lin,))
    g.output(act)
    ngm = NormalizeArgs(torch.fx.GraphModule(root, g), normalize_to_only_use_kwargs=only_kwargs).transform()
    return [[n.name, fmt(n.args, {}), [[k, fmt(v, {})] for k, v in n.kwargs.items()]]
            for n in ngm.graph.nodes if n.op == "call_module"]


def main():
    torch.manual_seed(0)
    goldens = {
        "torch_version": torch.__version__,
        "const_fold": {
            "mixed": const_fold_case(cf_mixed),
            "single": const_fold_case(cf_single),
            "chain_skip": const_fold_case(cf_chain_skip, skip=lambda n: n.target is torch.neg),
            "nothing": const_fold_case(cf_nothing),
            "rand": const_fold_case(cf_rand),
        },
        "normalize": {
            "kwargs_only": normalize_case(True),
            "positional": normalize_case(False),
            "modules_kwargs_only": module_case(True),
            "modules_positional": module_case(False),
        },
    }
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "tests", "passes", "goldens", "foldnorm.json")
    with open(path, "w") as f:
        json.dump(goldens, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", os.path.normpath(path))


if __name__ == "__main__":
    main()
