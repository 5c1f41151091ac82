#!/usr/bin/env python3
"""Goldens for tests/passes/subgraph_rewriter_test.cpp: Python torch.fx 1.13's
subgraph_rewriter.replace_pattern on small graphs that the C++ test rebuilds.

For each case it records the rewritten graph as (opcode, name, target, args,
kwargs) rows, with Python targets mapped to ATen names, the number of
matches, and for every match whether the nodes its nodes_map points at are
still in the graph (Python 1.13 leaves erased nodes there after back-to-back
matches: pytorch/pytorch#99039). Run with /usr/bin/python3 (torch 1.13);
nothing is downloaded, nothing random.

    /usr/bin/python3 python/goldens/subgraph_rewriter_goldens.py \
        > tests/passes/goldens/subgraph_rewriter.json
"""
import json
import operator
import sys

import torch
import torch.fx as fx
from torch.fx import subgraph_rewriter

TARGETS = {
    operator.add: "aten::add", torch.add: "aten::add",
    operator.mul: "aten::mul", torch.mul: "aten::mul",
    torch.relu: "aten::relu", torch.sigmoid: "aten::sigmoid",
    torch.tanh: "aten::tanh", torch.neg: "aten::neg",
    torch.cat: "aten::cat", torch.stack: "aten::stack",
    operator.getitem: "operator.getitem",
}


def my_cat(xs, dim):
    return torch.cat(xs, dim)


def my_stack(xs, dim):
    return torch.stack(xs, dim)


fx.wrap("my_cat")
fx.wrap("my_stack")
TARGETS[my_cat] = "aten::cat"
TARGETS[my_stack] = "aten::stack"


def fmt(a):
    if isinstance(a, fx.Node):
        return "%" + a.name
    if isinstance(a, (list, tuple)):
        inner = ", ".join(fmt(x) for x in a)
        return ("[" + inner + "]") if isinstance(a, list) else ("(" + inner + ("," if len(a) == 1 else "") + ")")
    return repr(a)


def rows(graph):
    out = []
    for n in graph.nodes:
        target = n.target if isinstance(n.target, str) else TARGETS[n.target]
        out.append([n.op, n.name, target, fmt(tuple(n.args)),
                    "{" + ", ".join(f"{k}: {fmt(v)}" for k, v in n.kwargs.items()) + "}"])
    return out


def run(name, model, pattern, replacement, example):
    gm = fx.symbolic_trace(model)
    err = None
    try:
        matches = subgraph_rewriter.replace_pattern(gm, pattern, replacement)
    except Exception as e:  # recorded: Python fails where fxcpp must not
        return {"name": name, "error": f"{type(e).__name__}: {e}"}
    live = set(gm.graph.nodes)
    stale = []
    for m in matches:
        stale.append(sorted(gn.name for pn, gn in m.nodes_map.items()
                            if pn.op == "placeholder" and isinstance(gn, fx.Node) and gn not in live))
    try:
        gm.graph.lint()
        gm(*example)
    except Exception as e:
        err = f"{type(e).__name__}: {e}"
    return {"name": name, "matches": len(matches), "graph": rows(gm.graph),
            "stale_placeholder_bindings": stale, "run_error": err}


torch.manual_seed(0)
x, y, z = torch.rand(2, 3), torch.rand(2, 3), torch.rand(2, 3)
cases = []


# simple: relu(add(x, y)) -> sigmoid(mul(x, y))
class Simple(torch.nn.Module):
    def forward(self, x, y):
        a = x + y
        b = torch.relu(a)
        return b * 2


def p_add_relu(x, y):
    return torch.relu(x + y)


def r_mul_sigmoid(x, y):
    return torch.sigmoid(x * y)


cases.append(run("simple", Simple(), p_add_relu, r_mul_sigmoid, (x, y)))


# back_to_back: three chained matches, each consuming the previous one's result.
class Chain(torch.nn.Module):
    def forward(self, x, y):
        a = torch.relu(x + y)
        b = torch.relu(a + y)
        c = torch.relu(b + y)
        return c


cases.append(run("back_to_back", Chain(), p_add_relu, r_mul_sigmoid, (x, y)))


# overlapping: relu^4 with pattern relu(relu(x)): two non-overlapping matches.
class Relu4(torch.nn.Module):
    def forward(self, x):
        return torch.relu(torch.relu(torch.relu(torch.relu(x))))


def p_relu2(x):
    return torch.relu(torch.relu(x))


def r_neg(x):
    return torch.neg(x)


cases.append(run("overlapping", Relu4(), p_relu2, r_neg, (x,)))


# leaking: the add inside a candidate match is also used outside it -> not replaced.
class Leak(torch.nn.Module):
    def forward(self, x, y):
        a = x + y
        b = torch.relu(a)
        c = torch.relu(x + y)
        return b + a + c


cases.append(run("leaking", Leak(), p_add_relu, r_mul_sigmoid, (x, y)))


# literals: only x + 1 matches the pattern's literal 1.
class Lit(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x + 1) + torch.relu(x + 2)


def p_lit(x):
    return torch.relu(x + 1)


def r_lit(x):
    return torch.tanh(x * 1)


cases.append(run("literals", Lit(), p_lit, r_lit, (x,)))


# kwargs: only alpha=2 matches.
class Kw(torch.nn.Module):
    def forward(self, x, y):
        return torch.add(x, y, alpha=2) * torch.add(x, y, alpha=3)


def p_kw(x, y):
    return torch.add(x, y, alpha=2)


def r_kw(x, y):
    return torch.add(torch.add(x, y), y)


cases.append(run("kwargs", Kw(), p_kw, r_kw, (x, y)))


# multiple_outputs: a pattern with two returned values.
class Multi(torch.nn.Module):
    def forward(self, x, y):
        a = x + y
        b = torch.relu(a)
        c = torch.sigmoid(a)
        return b * c


def p_multi(x, y):
    a = x + y
    return torch.relu(a), torch.sigmoid(a)


def r_multi(x, y):
    m = x * y
    return torch.tanh(m), torch.neg(m)


cases.append(run("multiple_outputs", Multi(), p_multi, r_multi, (x, y)))


# late_input: a two-output match whose third input (tanh(y)) is defined after
# the first user of its first output. torch.fx inserts the replacement before
# that user, ahead of its input: the graph fails lint.
class Late(torch.nn.Module):
    def forward(self, x, y):
        a = x + y
        r1 = torch.relu(a)
        u = torch.neg(r1)
        w = torch.tanh(y)
        r2 = a * w
        return u, r2


def p_late(x, y, w):
    a = x + y
    return torch.relu(a), a * w


def r_late(x, y, w):
    m = x * y
    return torch.sigmoid(m), m + w


cases.append(run("late_input", Late(), p_late, r_late, (x, y)))


# cat_lists (pytorch/pytorch#159613): cat([cat([x, y], 1), z], 1) with a
# pattern whose placeholder stands for the whole tensor list. torch 1.13's
# matcher flattens args, so a placeholder cannot stand for a list: no match.
# (Newer torch matches both and the second replacement reads the erased first
# cat, the bug of #159613.)
class Cats(torch.nn.Module):
    def forward(self, x, y, z):
        a = my_cat([x, y], 1)
        return my_cat([a, z], 1)


def p_cat(xs, dim):
    return my_cat(xs, dim)


def r_cat(xs, dim):
    return my_stack(xs, dim)


cases.append(run("cat_lists", Cats(), p_cat, r_cat, (x, y, z)))

json.dump({"torch": torch.__version__, "cases": cases}, sys.stdout, indent=1)
sys.stdout.write("\n")
