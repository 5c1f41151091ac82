"""Goldens for tests/core/api_fidelity_golden_test.cpp (issue #15).

Builds small graphs with Python torch.fx 1.13, records what it prints
(str(graph), python_code, print_tabular, verbose code) and the node order of
loops that erase or insert while iterating, and writes
tests/core/goldens/api_fidelity.json. torch targets are mapped to the ATen
names fxcpp uses (torch.relu -> aten::relu, printed torch.ops.aten.relu in
code). Run with /usr/bin/python3 (torch 1.13 + tabulate); nothing is
downloaded, nothing is random.
"""
import contextlib
import io
import operator
import os
import re

import torch
import torch.fx as fx

from golden_io import write_goldens

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "core", "goldens", "api_fidelity.json")
FUNCS = ["relu", "neg", "sin", "cos", "add"]


def aten(s):
    """torch.relu -> aten::relu in str(graph)/tabular, torch.ops.aten.relu in code."""
    for f in FUNCS:
        s = s.replace(f"target=torch.{f}]", f"target=aten::{f}]")
    # code lines "name = torch.relu(...)", not the stack-trace comments
    s = re.sub(r"^(\s+\w+(?: : [\w.]+)? = )torch\.(" + "|".join(FUNCS) + r")\(", r"\1torch.ops.aten.\2(", s,
               flags=re.M)
    return s


def iteration_erase():
    g = fx.Graph()
    x = g.placeholder("x")
    neg = g.call_function(torch.neg, (x,))
    relu = g.call_function(torch.relu, (neg,))
    g.output(g.call_function(torch.sin, (x,)))
    seen = []
    for n in g.nodes:
        seen.append(n.name)
        if n is neg:
            g.erase_node(relu)
            g.erase_node(neg)
    return " ".join(seen)


def iteration_insert():
    g = fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(torch.neg, (x,)))
    seen = []
    for n in g.nodes:
        seen.append(n.name)
        if n is x:
            with g.inserting_after(x):
                g.call_function(torch.relu, (x,))
    return " ".join(seen)


def two_outputs():
    g = fx.Graph()
    x = g.placeholder("x")
    g.call_function(torch.neg, (x,))
    g.call_function(torch.relu, (x,))
    g.lint()  # no output: fine in torch.fx
    changed = g.eliminate_dead_code()
    g.output(x)
    g.output(x)
    g.lint()
    return changed, str(g), g.python_code("self").src


def slices():
    g = fx.Graph()
    x = g.placeholder("x")
    size = g.call_method("size", (x, 1))
    a = g.call_function(operator.getitem, (x, (slice(None, None, None), slice(1, size, 2), Ellipsis, None)))
    b = g.call_function(operator.getitem, ([x, x, x], slice(None, -1, None)))
    g.output((a, b))
    return str(g), g.python_code("self").src


def tabular():
    g = fx.Graph()
    x = g.placeholder("x")
    # A call_method: its target prints the same in both (a function target
    # would print as <built-in method relu ...> in torch.fx).
    g.output(g.call_method("relu", (x,)))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        g.print_tabular()
    return buf.getvalue()


def verbose():
    g = fx.Graph()
    x = g.placeholder("x")
    relu = g.call_function(torch.relu, (x,))
    relu.stack_trace = '  File "m.py", line 4, in forward\n    y = torch.relu(x)\n'
    neg = g.call_function(torch.neg, (relu,))
    neg.stack_trace = relu.stack_trace
    sin = g.call_function(torch.sin, (neg,))
    cos = g.call_function(torch.cos, (sin,))
    cos.stack_trace = 'ctx line\n  File "n.py", line 9, in f\n    return z.cos()'
    g.output(cos)
    return g.python_code("self", verbose=True).src


def types():
    g = fx.Graph()
    y = g.placeholder("y", type_expr=torch.Tensor)
    r = g.create_node("call_function", torch.relu, (y,), type_expr=torch.Tensor)
    g.output(r, type_expr=torch.Tensor)
    return str(g), g.python_code("self").src


def normalized():
    """Node.normalized_arguments / normalize_function on ATen overloads and torch.nn modules."""
    from torch.fx.node import _format_arg
    from torch.fx.operator_schemas import normalize_function
    aten = torch.ops.aten
    root = torch.nn.Module()
    root.lin = torch.nn.Linear(2, 2)
    root.lstm = torch.nn.LSTM(2, 2)
    root.mha = torch.nn.MultiheadAttention(4, 2)
    root.sub = torch.nn.Module()
    root.sub.relu = torch.nn.ReLU()
    g = fx.Graph()
    x, y, w = g.placeholder("x"), g.placeholder("y"), g.placeholder("w")
    nodes = [
        g.call_function(aten.add.Tensor, (x, y)),
        g.call_function(aten.conv2d.default, (x, w)),
        g.call_function(aten.sum.dim_IntList, (x, [1]), {"keepdim": True}),
        g.call_function(aten.add.Tensor, (x,), {"other": y}),
        g.call_function(operator.add, (x, y)),
        g.call_module("lin", (x,)),
        g.call_module("lstm", (x,)),
        g.call_module("mha", (x, x, x), {"need_weights": False}),
        g.call_module("sub.relu", (x,)),
        g.call_function(aten.add.Tensor, (x, y, 2, 3)),
        g.call_function(aten.to.dtype, (x, torch.float16)),
        x,
    ]

    def fmt(r):
        return "None" if r is None else f"{_format_arg(r.args)} {_format_arg(r.kwargs)}"

    lines = [f"{i}: {fmt(n.normalized_arguments(root))}" for i, n in enumerate(nodes)]
    lines.append("only_kwargs: " + fmt(normalize_function(aten.conv2d.default, (x, w), {"groups": 2},
                                                          normalize_to_only_use_kwargs=True)))
    lines.append("typed_scalar: " + fmt(normalize_function(aten.add, (x, 2), arg_types=(torch.Tensor, int))))
    lines.append("typed_tensor: " + fmt(normalize_function(aten.add, (x, y), arg_types=(torch.Tensor, torch.Tensor))))
    try:
        g.call_module("nope", (x,)).normalized_arguments(root)
    except RuntimeError as e:
        lines.append("missing: " + str(e))
    return "\n".join(lines)


def main():
    changed, two_str, two_code = two_outputs()
    slice_str, slice_code = slices()
    types_str, types_code = types()
    goldens = {
        "iteration_erase": iteration_erase(),
        "iteration_insert": iteration_insert(),
        "no_output_dce": str(changed),
        "two_outputs_str": two_str,
        "two_outputs_code": two_code,
        "slice_str": slice_str,
        "slice_code": slice_code,
        "tabular": tabular(),
        "verbose_code": aten(verbose()),
        "types_str": aten(types_str),
        "types_code": aten(types_code),
        "normalized": normalized(),
    }
    write_goldens(OUT, goldens)


if __name__ == "__main__":
    main()
