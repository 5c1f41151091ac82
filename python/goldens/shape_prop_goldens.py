#!/usr/bin/python3
"""Goldens for tests/passes/shape_prop_test.cpp: Python torch.fx 1.13 ShapeProp
on hand-built graphs that the C++ test builds node for node.

Writes tests/passes/goldens/shape_prop.json: for every graph, one line per
node: "<opcode> <target> <tensor_meta> type=<type>", targets mapped to ATen
names, tensor_meta as TensorMetadata's repr ("none" without a tensor; tuples
and lists flattened to "[tm, tm]", the format fxcpp stores).

memory_format: torch.fx picks the first format of a Python *set* the tensor is
contiguous in, so a tensor contiguous in two formats ([N, C, 1, 1]) gets
either, depending on the process's hashes. The goldens canonicalize to the
first of contiguous_format, channels_last, channels_last_3d (what fxcpp
records), after checking that torch.fx's pick is one of the formats the
tensor is contiguous in.

Run: /usr/bin/python3 python/goldens/shape_prop_goldens.py (seeded; nothing downloaded).
"""
import json
import operator
import os
import sys

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata

torch.manual_seed(0)
aten = torch.ops.aten

TARGETS = {
    torch.max: "aten::max", operator.getitem: "operator.getitem", torch.reshape: "aten::reshape",
    aten.split.Tensor: "aten::split.Tensor", torch.t: "aten::t", aten.slice.Tensor: "aten::slice.Tensor",
    torch.unsqueeze: "aten::unsqueeze", torch.add: "aten::add", torch.conv2d: "aten::conv2d",
    torch.batch_norm: "aten::batch_norm", torch.relu: "aten::relu",
    torch.nn.functional.adaptive_avg_pool2d: "aten::adaptive_avg_pool2d", torch.flatten: "aten::flatten",
    torch.nn.functional.linear: "aten::linear", torch.softmax: "aten::softmax", torch.mean: "aten::mean",
    torch.permute: "aten::permute", torch.cat: "aten::cat", torch.topk: "aten::topk",
}
FORMATS = [torch.contiguous_format, torch.channels_last, torch.channels_last_3d]


def canonical(tm):
    probe = torch.empty_strided(tm.shape, tm.stride, dtype=tm.dtype, device="meta")
    ok = [f for f in FORMATS if (f is torch.contiguous_format or probe.dim() == (4 if f is torch.channels_last else 5))
          and probe.is_contiguous(memory_format=f)]
    assert tm.memory_format in ok + ([None] if not ok else []), (tm, ok)
    return tm._replace(memory_format=ok[0] if ok else None)


def meta_str(m):
    if m is None:
        return "none"
    if isinstance(m, TensorMetadata):
        return repr(canonical(m))
    flat = []

    def walk(v):
        if isinstance(v, TensorMetadata):
            flat.append(repr(canonical(v)))
        elif isinstance(v, (tuple, list)):
            for e in v:
                walk(e)
        elif isinstance(v, dict):
            for e in v.values():
                walk(e)
    walk(m)
    return "[" + ", ".join(flat) + "]"


def type_name(t):
    # fxcpp's values are IValues: size() gives an int list, named tuples
    # (torch.return_types.max) are tuples, a Parameter is a tensor.
    if t is torch.Size:
        return "list"
    if t.__module__ == "torch.return_types":
        return "tuple"
    if issubclass(t, torch.Tensor):
        return "torch.Tensor"
    return t.__name__ if t.__module__ == "builtins" else t.__module__ + "." + t.__name__


def lines(gm):
    out = []
    for n in gm.graph.nodes:
        target = n.target if n.op in ("placeholder", "get_attr", "call_module", "call_method", "output") \
            else TARGETS.get(n.target, str(n.target))
        out.append("%s %s %s type=%s" % (n.op, target, meta_str(n.meta.get("tensor_meta")), type_name(n.meta["type"])))
    return out


def tuple_list():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    mx = g.call_function(torch.max, (x, 1))
    v = g.call_function(operator.getitem, (mx, 0))
    i = g.call_function(operator.getitem, (mx, 1))
    sp = g.call_function(aten.split.Tensor, (x, 2, 2))
    s1 = g.call_function(operator.getitem, (sp, 1))
    n = g.call_method("size", (x, 0))
    r = g.call_function(torch.reshape, (v, [n, -1]))
    g.output((r, i, s1, n))
    return torch.fx.GraphModule(torch.nn.Module(), g), [torch.randn(2, 3, 4)]


def views():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    t = g.call_function(torch.t, (x,))
    sl = g.call_function(aten.slice.Tensor, (x, 1, 1, 5, 2))
    u = g.call_function(torch.unsqueeze, (x, 0))
    e = g.call_method("expand", (u, [3, 4, 6]))
    c = g.call_method("contiguous", (t,))
    a = g.call_function(torch.add, (t, t))
    p = g.call_function(torch.permute, (e, [2, 0, 1]))
    cat = g.call_function(torch.cat, ([sl, sl], 1))
    g.output((t, sl, e, c, a, p, cat))
    return torch.fx.GraphModule(torch.nn.Module(), g), [torch.randn(4, 6)]


class ConvRoot(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 3, 3, 3))
        self.bias = torch.nn.Parameter(torch.randn(4))
        self.register_buffer("running_mean", torch.zeros(4))
        self.register_buffer("running_var", torch.ones(4))


def channels_last():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    w = g.get_attr("weight")
    b = g.get_attr("bias")
    rm = g.get_attr("running_mean")
    rv = g.get_attr("running_var")
    conv = g.call_function(torch.conv2d, (x, w, b, [1, 1], [1, 1]))
    bn = g.call_function(torch.batch_norm, (conv, None, None, rm, rv, False, 0.1, 1e-5, False))
    r = g.call_function(torch.relu, (bn,))
    a = g.call_function(torch.add, (r, r))
    pool = g.call_function(torch.nn.functional.adaptive_avg_pool2d, (a, [1, 1]))
    f = g.call_function(torch.flatten, (pool, 1))
    g.output(f)
    x = torch.randn(2, 3, 8, 8).to(memory_format=torch.channels_last)
    return torch.fx.GraphModule(ConvRoot(), g), [x]


class LinearRoot(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 8))
        self.bias = torch.nn.Parameter(torch.randn(4))


def mlp():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    w = g.get_attr("weight")
    b = g.get_attr("bias")
    lin = g.call_function(torch.nn.functional.linear, (x, w, b))
    sm = g.call_function(torch.softmax, (lin, 1))
    top = g.call_function(torch.topk, (sm, 2))
    idx = g.call_function(operator.getitem, (top, 1))
    m = g.call_function(torch.mean, (sm,))
    g.output((m, idx, top))
    return torch.fx.GraphModule(LinearRoot(), g), [torch.randn(5, 8)]


def model_lines(name, x):
    """torchvision `name` (as python/export_models.py exports it for the C++
    side): its call_module nodes and output, which fxcpp's TorchScript import
    keeps one for one (other nodes differ: TorchScript records in-place adds)."""
    import torchvision
    torch.manual_seed(0)
    gm = torch.fx.symbolic_trace(getattr(torchvision.models, name)(weights=None).eval())
    ShapeProp(gm).propagate(x)
    return [line for n, line in zip(gm.graph.nodes, lines(gm)) if n.op in ("call_module", "output")]


def main():
    out = {"torch": torch.__version__, "graphs": {}}
    for build in (tuple_list, views, channels_last, mlp):
        gm, inputs = build()
        ShapeProp(gm).propagate(*inputs)
        out["graphs"][build.__name__] = lines(gm)
    x = torch.randn(1, 3, 64, 64)
    for name in ("resnet18", "mobilenet_v2"):
        out["graphs"][name] = model_lines(name, x)
        out["graphs"][name + "_channels_last"] = model_lines(name, x.to(memory_format=torch.channels_last))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "passes", "goldens",
                        "shape_prop.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", os.path.normpath(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
