"""Goldens for fxcpp's passes toolkit: _SplitterBase, _MinimizerBase,
get_size_of_node, lift_subgraph_as_module and the pass_manager helpers.

Builds small graphs with torch.fx 1.13 (tests/passes/passes_toolkit_test.cpp
builds exactly the same ones in C++), runs torch.fx's splitter and minimizer
and writes tests/passes/goldens/passes_toolkit.json: per case the split
structure (nodes of every submodule), the preview reports, the minimizer's
culprits, reports and results, node sizes and error texts.

Run: /usr/bin/python3 python/goldens/passes_toolkit_goldens.py   (seeded, nothing downloaded)
"""
import io
import operator
import os
import sys
import contextlib

import torch
import torch.fx
from torch.fx.node import _format_arg
from torch.fx.passes import net_min_base, splitter_base
from torch.fx.passes.graph_manipulation import get_size_of_node, replace_target_nodes_with
from torch.fx.passes.operator_support import create_op_support
from torch.fx.passes.pass_manager import loop_pass
from torch.fx.passes.shape_prop import ShapeProp
from torch.fx.passes.utils.common import lift_subgraph_as_module

sys.path.insert(0, os.path.dirname(__file__))
from golden_io import write_goldens  # noqa: E402

ATEN = {
    torch.add: "aten::add", torch.mul: "aten::mul", torch.relu: "aten::relu", torch.tanh: "aten::tanh",
    torch.sigmoid: "aten::sigmoid", torch.neg: "aten::neg", operator.getitem: "operator.getitem",
}


def target_name(n):
    return ATEN[n.target] if n.op == "call_function" else str(n.target)


def graph_text(g):
    return "".join("%s|%s|%s|%s\n" % (n.op, n.name, target_name(n), _format_arg(n.args)) for n in g.nodes)


def module_text(gm):
    out = "graph:\n" + graph_text(gm.graph)
    for name, child in gm.named_children():
        if isinstance(child, torch.fx.GraphModule):
            out += "child %s:\n" % name + graph_text(child.graph)
    return out


def aten_report(text):
    """torch.fx names torch.relu "torch.relu"; fxcpp names it "aten::relu"."""
    for fn, name in ATEN.items():
        text = text.replace("torch.%s: " % fn.__name__, name + ": ")
    return text


def quiet(fn, *args):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


# ---- splitter ------------------------------------------------------------

def g_split():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    a = g.call_function(torch.relu, (x,))
    b = g.call_function(torch.tanh, (a,))
    c = g.call_function(torch.sigmoid, (b,))     # cpu
    d = g.call_function(torch.add, (c, a))
    e = g.call_function(torch.mul, (d, y))
    f = g.call_function(torch.neg, (e,))         # cpu
    r = g.call_function(torch.relu, (f,))        # a one-node acc subgraph
    h = g.call_function(torch.neg, (r,))         # cpu
    k = g.call_function(torch.add, (h, b))
    g.output((k, d))
    return g


def g_non_tensor():
    """A supported size() feeding an unsupported view: non-tensor data flow."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.relu, (x,))
    s = g.call_method("size", (a, 0))
    v = g.call_method("view", (a, s, -1))
    t = g.call_function(torch.tanh, (v,))
    s2 = g.call_method("size", (t, 1))
    v2 = g.call_method("view", (t, s2, -1))
    m = g.call_function(torch.mul, (v2, 2.0))
    g.output(m)
    return g


SPLIT_SUPPORTED = {"aten::relu", "aten::tanh", "aten::add", "aten::mul", "size"}


def split_support(submods, n, supported=SPLIT_SUPPORTED):
    name = ATEN[n.target] if n.op == "call_function" else n.target
    return name in supported


class Settings(splitter_base._SplitterSettingBase):
    def __init__(self, min_acc_module_size=1, allow_non_tensor=False, skip_fusion=False):
        super().__init__()
        self.min_acc_module_size = min_acc_module_size
        self.allow_non_tensor = allow_non_tensor
        self.skip_fusion = skip_fusion


def split_case(goldens, key, make_graph, inputs, supported=SPLIT_SUPPORTED, **settings):
    support = create_op_support(lambda submods, n: split_support(submods, n, supported))
    gm = torch.fx.GraphModule(torch.nn.Module(), make_graph())
    sp = splitter_base._SplitterBase(gm, inputs, support, Settings(**settings))
    goldens[key + "_acc_nodes"] = ",".join(sorted(n.name for n in sp.acc_nodes))
    goldens[key + "_fusions"] = "".join(
        "%s=%s\n" % (n.name, ",".join(sorted(f.name for f in sp.fusions[n]))) for n in gm.graph.nodes if n in sp.fusions)
    goldens[key + "_node_support"] = aten_report(quiet(sp.node_support_preview))
    goldens[key + "_preview"] = quiet(sp.split_preview)
    sp = splitter_base._SplitterBase(torch.fx.GraphModule(torch.nn.Module(), make_graph()), inputs, support,
                                     Settings(**settings))
    res = quiet(sp.generate_split_results)
    text = module_text(res.split_module)
    text += "node_submodule_map:\n" + "".join("%s=%s\n" % kv for kv in sorted(sp.get_node_submodule_map().items()))
    text += "submodule_inputs:\n" + "".join(
        "%s=%s\n" % (k, ",".join(str(list(t.shape)) for t in v)) for k, v in sorted(res.submodule_inputs.items()))
    goldens[key + "_split"] = text


def g_extend():
    """tanh reads only x but feeds the second acc subgraph: extend_acc_subgraph pulls it in."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.relu, (x,))
    t = g.call_function(torch.tanh, (x,))
    s = g.call_function(torch.sigmoid, (a,))
    d = g.call_function(torch.add, (s, t))
    m = g.call_function(torch.mul, (d, a))
    g.output(m)
    return g


def extend_case(goldens):
    support = create_op_support(split_support)
    gm = torch.fx.GraphModule(torch.nn.Module(), g_extend())
    sp = splitter_base._SplitterBase(gm, [torch.randn(3, 4)], support, Settings())
    sp.tag(quiet(sp.put_nodes_into_subgraphs))
    before = "".join("%s=%s\n" % (n.name, n.tag) for n in gm.graph.nodes if hasattr(n, "tag"))
    sp.extend_acc_subgraph("_run_on_acc_2")
    after = "".join("%s=%s\n" % (n.name, n.tag) for n in gm.graph.nodes if hasattr(n, "tag"))
    goldens["split_extend"] = "before:\n" + before + "after:\n" + after + module_text(sp.split())


# ---- minimizer -----------------------------------------------------------

def g_min():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.relu, (x,))
    b = g.call_function(torch.tanh, (a,))
    c = g.call_function(torch.mul, (b, x))
    d = g.call_function(torch.add, (c, a))
    e = g.call_function(torch.neg, (d,))
    f = g.call_function(torch.sigmoid, (e,))
    g.output(f)
    return g


class Perturb(torch.fx.Interpreter):
    """Runs a module adding 1 to the values of the nodes named in `bad`."""

    def __init__(self, mod, bad):
        super().__init__(mod)
        self.bad = bad

    def run_node(self, n):
        r = super().run_node(n)
        return r + 1.0 if n.name in self.bad else r


def flat(v):
    return [v] if isinstance(v, torch.Tensor) else [t for e in v for t in flat(e)]


def compare(a, b, names):
    diff = max(float((x - y).abs().max()) for x, y in zip(flat(a), flat(b)))
    return diff, diff < 1e-4


class Minimizer(net_min_base._MinimizerBase):
    def __init__(self, mod, inputs, settings, bad=(), crash=()):
        super().__init__(mod, inputs, compare, settings)
        self.bad = set(bad)
        self.crash = set(crash)

    def run_a(self, mod, inputs):
        return mod(*inputs)

    def run_b(self, mod, inputs):
        if any(n.name in self.crash for n in mod.graph.nodes if n.op == "call_function"):
            raise net_min_base.FxNetMinimizerRunFuncError("lowering failed")
        return Perturb(mod, self.bad).run(*inputs)


def minimizer_case(goldens, key, settings, bad=(), crash=(), start=None, end=None):
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    m = Minimizer(torch.fx.GraphModule(torch.nn.Module(), g_min()), [x], settings, bad, crash)
    culprits = quiet(m.minimize, start, end)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        m.print_reports()
    goldens[key + "_culprits"] = ",".join(sorted(n.name for n in culprits))
    goldens[key + "_reports"] = out.getvalue()
    goldens[key + "_results"] = "".join("%s=%r\n" % (str(k), v) for k, v in sorted(m.results.items(), key=str))


def run_nodes_case(goldens, key, settings, bad, start=None, end=None):
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    m = Minimizer(torch.fx.GraphModule(torch.nn.Module(), g_min()), [x], settings, bad)
    quiet(m.run_nodes, start, end)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        m.print_reports()
    goldens[key + "_reports"] = out.getvalue()
    goldens[key + "_results"] = "".join("%s=%r\n" % (str(k), v) for k, v in sorted(m.results.items(), key=str))


def main():
    goldens = {}
    torch.manual_seed(0)
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    split_case(goldens, "split", g_split, [x, y])
    split_case(goldens, "split_min2", g_split, [x, y], min_acc_module_size=2)
    split_case(goldens, "split_non_tensor", g_non_tensor, [torch.randn(2, 6)])
    split_case(goldens, "split_non_tensor_allowed", g_non_tensor, [torch.randn(2, 6)], allow_non_tensor=True)
    # size() and view() supported: {size_1, view_1} is a fusion group.
    split_case(goldens, "split_fusion", g_non_tensor, [torch.randn(2, 6)],
               supported={"aten::relu", "size", "view", "aten::mul"})
    extend_case(goldens)

    S = net_min_base._MinimizerSettingBase
    for method in ("sequential", "binary", "accumulate"):
        for acc_err in (False, True):
            tag = "min_%s%s" % (method, "_accerr" if acc_err else "")
            minimizer_case(goldens, tag, S(accumulate_error=acc_err, traverse_method=method), bad={"mul"})
        if method != "accumulate":
            minimizer_case(goldens, "min_%s_findall" % method, S(traverse_method=method, find_all=True),
                           bad={"tanh", "neg"})
            minimizer_case(goldens, "min_%s_crash" % method, S(traverse_method=method), crash={"tanh"})
    minimizer_case(goldens, "min_sequential_range", S(), bad={"tanh", "neg"}, start="add", end="sigmoid")
    minimizer_case(goldens, "min_clean", S(traverse_method="binary"))
    run_nodes_case(goldens, "run_nodes", S(return_intermediate=True), {"mul"}, "tanh", "add")
    run_nodes_case(goldens, "run_nodes_last", S(), {"neg"}, "add")
    goldens["min_settings"] = str(S(traverse_method="binary", find_all=True))

    # get_size_of_node on a module call, a get_attr, a float64 value.
    class Root(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 5)
            self.param = torch.nn.Parameter(torch.rand(3, 5))
            self.layer = torch.nn.Module()
            self.layer.sub = torch.nn.Linear(5, 2)

    g = torch.fx.Graph()
    xn = g.placeholder("x")
    lin = g.call_module("linear", (xn,))
    p = g.get_attr("param")
    ad = g.call_function(torch.add, (lin, p))
    sub = g.call_module("layer.sub", (ad,))
    dbl = g.call_method("double", (sub,))
    g.output(dbl)
    gm = torch.fx.GraphModule(Root(), g)
    ShapeProp(gm).propagate(torch.randn(3, 4))
    goldens["size_of_nodes"] = "".join(
        "%s|%d|%d\n" % ((n.name,) + tuple(get_size_of_node(gm, n))) for n in gm.graph.nodes if n.op != "output")

    # replace_target_nodes_with: relu -> sigmoid (call_function), and a
    # call_method turned into a call_function.
    rg = torch.fx.Graph()
    rx = rg.placeholder("x")
    r1 = rg.call_function(torch.relu, (rx,))
    ra = rg.call_function(torch.add, (r1, rx), {"alpha": 2})
    rn = rg.call_method("neg", (ra,))
    r2 = rg.call_function(torch.relu, (rn,))
    rg.output(r2)
    rgm = torch.fx.GraphModule(torch.nn.Module(), rg)
    replace_target_nodes_with(rgm, "call_function", torch.relu, "call_function", torch.sigmoid)
    replace_target_nodes_with(rgm, "call_method", "neg", "call_function", torch.neg)
    goldens["replace_target_nodes_with"] = "".join(
        "%s|%s|%s|%s|%s\n" % (n.op, n.name, target_name(n), _format_arg(n.args), _format_arg(n.kwargs))
        for n in rgm.graph.nodes)

    # lift_subgraph_as_module: a subgraph reading a nested module and a parameter.
    sg = torch.fx.Graph()
    a = sg.placeholder("a")
    pp = sg.get_attr("param")
    s = sg.call_function(torch.add, (a, pp))
    o = sg.call_module("layer.sub", (s,))
    sg.output(o)
    lifted = lift_subgraph_as_module(gm, sg, "Lifted")
    goldens["lift_subgraph"] = (
        "class=%s\n" % type(lifted).__name__ +
        "modules=%s\n" % ",".join(n for n, _ in lifted.named_modules()) +
        "parameters=%s\n" % ",".join("%s%s" % (n, list(t.shape)) for n, t in lifted.named_parameters()) +
        "shares=%s\n" % (lifted.param is gm.param and lifted.layer.sub is gm.layer.sub))

    errors = []
    try:
        loop_pass(lambda m: m)
    except AssertionError as e:
        errors.append(str(e))
    try:
        loop_pass(lambda m: m, n_iter=0)(None)
    except RuntimeError as e:
        errors.append(str(e))
    goldens["loop_pass_errors"] = "\n".join(errors) + "\n"

    write_goldens(os.path.join(os.path.dirname(__file__), "..", "..", "tests", "passes", "goldens",
                               "passes_toolkit.json"), goldens)


if __name__ == "__main__":
    main()
