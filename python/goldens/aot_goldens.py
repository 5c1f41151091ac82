"""Goldens for fx::make_fx and AOT autograd (tests/aot): what Python 1.13's
make_fx and functorch's aot_module make of the same functions and models.

Writes tests/aot/goldens/aot.json:
  make_fx/<case>:  the call_function targets of make_fx(f)(*inputs), sorted
                   ("aten::mm", "aten::sum.dim_IntList" ...);
  aot/<model>:     functorch.compile.aot_module of a torchvision model in
                   train mode (batch 2, 64x64): the joint graph's targets
                   (sorted), how many values default_partition saves and
                   their bytes, and the bytes min_cut_rematerialization_partition
                   saves (networkx, python3-networkx).
The C++ tests build the same functions and models (tests/aot/aot_models.h).
Run with Debian's python3: /usr/bin/python3 python/goldens/aot_goldens.py
"""
import os
import sys

import torch
import torch.nn.functional as F
import torchvision
from functorch.compile import aot_module, default_partition, min_cut_rematerialization_partition
from torch.fx.experimental.proxy_tensor import make_fx

sys.path.insert(0, os.path.dirname(__file__))
from golden_io import write_goldens  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "aot", "goldens", "aot.json")


def target_name(t):
    """aten.sum.dim_IntList → aten::sum.dim_IntList; aten.mm.default → aten::mm."""
    if hasattr(t, "_schema"):
        s = t._schema
        return s.name + ("." + s.overload_name if s.overload_name else "")
    if t.__module__ == "_operator":
        return "operator." + t.__name__
    return str(t)


def targets(graph):
    # In-place ops are compared by their functional name: fxcpp functionalises
    # (aten::add_ → aten::add), Python 1.13's make_fx records them as written.
    out = []
    for n in graph.nodes:
        if n.op != "call_function":
            continue
        name = target_name(n.target)
        base, _, overload = name.partition(".")
        if base.endswith("_") and not base.endswith("__"):
            name = base[:-1] + ("." + overload if overload else "")
        out.append(name)
    return sorted(out)


def gelu_mm_grad(x, w):
    y = F.gelu(x @ w).sum()
    return torch.autograd.grad([y], [w])


def cross_entropy_grad(x, w, target):
    loss = F.cross_entropy(x @ w, target)
    return torch.autograd.grad([loss], [w])


def layer_norm_grads(x, w, b):
    y = F.layer_norm(x, [8], w, b)
    return torch.autograd.grad([(y * y).sum()], [x, w, b])


def conv_bn_relu_grad(x, cw, bw, bb, rm, rv):
    y = F.relu(F.batch_norm(F.conv2d(x, cw, None, 1, 1), rm, rv, bw, bb, True, 0.1, 1e-5))
    return torch.autograd.grad([y.sum()], [cw, bw, bb])


def make_fx_cases():
    torch.manual_seed(0)
    g = {}
    g["make_fx/gelu_mm_grad"] = targets(make_fx(gelu_mm_grad)(torch.randn(3, 4),
                                                              torch.randn(4, 5, requires_grad=True)).graph)
    g["make_fx/cross_entropy_grad"] = targets(make_fx(cross_entropy_grad)(
        torch.randn(6, 4), torch.randn(4, 5, requires_grad=True), torch.tensor([0, 1, 2, 3, 4, 0])).graph)
    g["make_fx/layer_norm_grads"] = targets(make_fx(layer_norm_grads)(
        torch.randn(3, 8, requires_grad=True), torch.randn(8, requires_grad=True),
        torch.randn(8, requires_grad=True)).graph)
    g["make_fx/conv_bn_relu_grad"] = targets(make_fx(conv_bn_relu_grad)(
        torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3, requires_grad=True), torch.randn(4, requires_grad=True),
        torch.randn(4, requires_grad=True), torch.zeros(4), torch.ones(4)).graph)
    return g


def size_of(node):
    m = node.meta.get("tensor_meta")
    if m is None:
        return 0
    n = 1
    for s in m.shape:
        n *= s
    return n * torch.empty((), dtype=m.dtype).element_size()


def aot_case(name, model, x):
    model.train()
    seen = {}

    def partition(which):
        def fn(joint, joint_inputs):
            if which == "default":
                seen["joint"] = targets(joint.graph)
            fw, bw = (default_partition if which == "default" else min_cut_rematerialization_partition)(
                joint, joint_inputs)
            bw_inputs = [n for n in bw.graph.nodes if n.op == "placeholder" and "tangents" not in n.target]
            seen[which] = (len(bw_inputs), sum(size_of(n) for n in bw_inputs))
            return fw, bw
        return fn

    for which in ("default", "min_cut"):
        state = {k: v.clone() for k, v in model.state_dict().items()}
        compiled = aot_module(model, fw_compiler=lambda gm, _: gm, bw_compiler=lambda gm, _: gm,
                              partition_fn=partition(which))
        compiled(x).sum().backward()
        model.load_state_dict(state)
    return {
        f"aot/{name}/joint": seen["joint"],
        f"aot/{name}/default_saved": seen["default"][0],
        f"aot/{name}/default_saved_bytes": seen["default"][1],
        f"aot/{name}/min_cut_saved_bytes": seen["min_cut"][1],
    }


def main():
    import warnings
    warnings.filterwarnings("ignore")
    g = make_fx_cases()
    torch.manual_seed(0)
    x = torch.randn(2, 3, 64, 64)
    g.update(aot_case("resnet18", torchvision.models.resnet18(), x))
    g.update(aot_case("mobilenet_v2", torchvision.models.mobilenet_v2(), x))
    write_goldens(OUT, g)


if __name__ == "__main__":
    main()
