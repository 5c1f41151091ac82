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
import json
import operator
import os
import re

import torch
import torch.fx as fx

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
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(goldens, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {os.path.normpath(OUT)} ({len(goldens)} goldens)")


if __name__ == "__main__":
    main()
