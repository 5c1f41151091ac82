"""Goldens for tests/exec/api_surface_test.cpp (issue #15): the public API of
torch.fx 1.13's Node, Graph, GraphModule, Interpreter and Transformer, and
what each method observably does on small graphs — printed graphs, code,
names, error texts, values — written to tests/exec/goldens/api_surface.json.

"surface" lists every public method and attribute of the five classes; the
C++ test maps each one to the test that compares it, or to its entry in
docs/torch_fx_differences.md, so a method can be neither forgotten nor
silently different. torch targets are mapped to fxcpp's ATen names
(torch.add -> aten::add). Run with /usr/bin/python3; nothing random, nothing
downloaded.
"""
import contextlib
import io
import operator
import os
import re

import warnings

import torch
import torch.fx as fx

from golden_io import write_goldens

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "exec", "goldens",
                   "api_surface.json")
FUNCS = ["relu", "neg", "add", "sin"]


def aten(s):
    """torch.add -> aten::add in str(graph)/format_node, torch.ops.aten.add in code."""
    for f in FUNCS:
        s = s.replace(f"target=torch.{f}]", f"target=aten::{f}]")
        s = s.replace(f"<built-in method {f} of type object at", "<aten::" + f)
    s = re.sub(r"<aten::(\w+) 0x[0-9a-f]+>", r"aten::\1", s)
    s = re.sub(r"(= )torch\.(" + "|".join(FUNCS) + r")\(", r"\1torch.ops.aten.\2(", s)
    return s


def public_names(obj):
    keep = {"__init__", "__repr__", "__str__", "__call__"}
    return sorted(n for n in vars(obj) if not n.startswith("_") or n in keep)


def surface():
    g = fx.Graph()
    node = g.placeholder("x")
    interp = fx.Interpreter(fx.GraphModule(torch.nn.Module(), g))
    lines = []
    for cls in [fx.Node, fx.Graph, fx.GraphModule, fx.Interpreter, fx.Transformer]:
        lines.append(cls.__name__ + ": " + " ".join(public_names(cls)))
    # Attributes set in __init__.
    lines.append("Node attributes: " + " ".join(public_names(node)))
    lines.append("Interpreter attributes: " + " ".join(public_names(interp)))
    return "\n".join(lines)


def node_surgery():
    out = []
    g = fx.Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    a = g.call_function(torch.add, (x, y), {"alpha": 2})
    r = g.call_function(torch.relu, (a,))
    o = g.output(r)
    for n in g.nodes:
        out.append(f"{repr(n)}: {n.format_node()} | inputs={[m.name for m in n.all_input_nodes]} "
                   f"users={[m.name for m in n.users]} prev={n.prev.name if n.prev.op != 'root' else '-'} "
                   f"next={n.next.name if n.next.op != 'root' else '-'} impure={n.is_impure()}")
    a.update_arg(1, x)
    out.append("update_arg:\n" + str(g))
    a.update_kwarg("alpha", 3)
    out.append("update_kwarg:\n" + str(g))
    a.replace_input_with(x, y)
    out.append("replace_input_with:\n" + str(g))
    n = g.call_function(torch.neg, (x,))  # appended after output
    out.append("appended:\n" + str(g))
    r.prepend(n)
    out.append("prepend:\n" + str(g))
    a.append(n)
    out.append("append:\n" + str(g))
    replaced = a.replace_all_uses_with(n, delete_user_cb=lambda u: u.op != "output")
    out.append(f"replace_all_uses_with -> {[u.name for u in replaced]}:\n" + str(g))
    replaced = r.replace_all_uses_with(n)
    out.append(f"replace_all_uses_with -> {[u.name for u in replaced]}:\n" + str(g))
    n.stack_trace = '  File "m.py", line 3, in forward\n    return x.neg()'
    out.append("stack_trace: " + repr(n.stack_trace) + " meta=" + repr(sorted(n.meta)))
    out.append(f"args={n.args} kwargs={a.kwargs} op={n.op} type={n.type} target_name={o.target}")
    return aten("\n".join(out))


def graph_building():
    out = []
    g = fx.Graph()
    x = g.placeholder("x")
    x1 = g.placeholder("x")
    w = g.get_attr("layer.weight")
    m = g.call_module("layer.0", (x,))
    v = g.call_method("view", (x, -1))
    a = g.call_function(torch.add, (x, x1))
    a1 = g.call_function(torch.add, (a, w))
    named = g.create_node("call_function", torch.add, (a1, m), name="add_1")
    with g.inserting_before(a):
        b = g.call_function(torch.sin, (x,))
    with g.inserting_after(x):
        c = g.call_function(torch.neg, (x,))
    g.output((named, v, b, c))
    out.append("built:\n" + str(g))
    out.append("code:" + g.python_code("self").src)
    try:
        g.erase_node(a)
    except RuntimeError as e:
        out.append("erase_node: " + str(e))
    g2 = fx.Graph()
    env = {}
    for n in [x, x1]:
        env[n] = g2.node_copy(n)
    env[a] = g2.node_copy(a, lambda n: env[n])
    g2.output(env[a])
    out.append("node_copy:\n" + str(g2))
    g3 = fx.Graph()
    g3.placeholder("x")
    val_map = {}
    ret = g3.graph_copy(g, val_map)
    g3.output(ret)
    out.append(f"graph_copy -> {ret} ({len(val_map)} mapped):\n" + str(g3))
    g4 = fx.Graph()
    p = g4.placeholder("p")
    g4.call_function(torch.relu, (p,))
    g4.output(p)
    changed = g4.eliminate_dead_code()
    out.append(f"eliminate_dead_code -> {changed}:\n" + str(g4))
    g.lint()
    return aten("\n".join(out))


def make_root():
    root = torch.nn.Module()
    root.lin = torch.nn.Linear(3, 3)
    root.seq = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Sigmoid())
    root.unused = torch.nn.Tanh()
    with torch.no_grad():
        root.lin.weight.copy_(torch.arange(9.0).reshape(3, 3) / 10)
        root.lin.bias.copy_(torch.tensor([0.5, -1.0, 0.25]))
    return root


def module_graph():
    g = fx.Graph()
    x = g.placeholder("x")
    l = g.call_module("lin", (x,))
    s = g.call_module("seq.0", (l,))
    w = g.get_attr("lin.bias")
    a = g.call_function(torch.add, (s, w))
    g.output(a)
    return g


def graph_module():
    out = []
    gm = fx.GraphModule(make_root(), module_graph())
    out.append("modules: " + " ".join(n for n, _ in gm.named_modules() if n))
    out.append("code:" + gm.code)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        gm.print_readable()
    out.append("print_readable:" + buf.getvalue())
    gm.add_submodule("extra.inner", torch.nn.ReLU())
    out.append("add_submodule: " + " ".join(n for n, _ in gm.named_modules() if n))
    out.append(f"delete_submodule: {gm.delete_submodule('extra.inner')} {gm.delete_submodule('nothing')}")
    out.append("after delete: " + " ".join(n for n, _ in gm.named_modules() if n))
    gm.add_submodule("extra2", torch.nn.ReLU())
    gm.delete_all_unused_submodules()
    out.append("delete_all_unused_submodules: " + " ".join(n for n, _ in gm.named_modules() if n))
    out_node = list(gm.graph.nodes)[-1]
    with gm.graph.inserting_before(out_node):
        n = gm.graph.call_function(torch.neg, (out_node.args[0],))
    out_node.args = (n,)
    gm.recompile()
    out.append("recompile:" + gm.code)
    return aten("\n".join(out))


def values(t):
    return " ".join(f"{v:.4f}" for v in t.flatten().tolist())


def interpreter():
    out = []
    gm = fx.GraphModule(make_root(), module_graph())
    x = torch.tensor([[1.0, -2.0, 3.0], [0.5, 0.25, -1.0]])

    class Recorder(fx.Interpreter):
        def run_node(self, n):
            self.seen.append(f"{n.op}:{n.name}")
            return super().run_node(n)

    rec = Recorder(gm, garbage_collect_values=False)
    rec.seen = []
    res = rec.run(x)
    out.append("run: " + values(res) + " | order " + " ".join(rec.seen))
    add = [n for n in gm.graph.nodes if n.name == "add"][0]
    args, kwargs = rec.fetch_args_kwargs_from_env(add)
    out.append(f"fetch_args_kwargs_from_env: {len(args)} args, {len(kwargs)} kwargs, "
               f"{values(args[0])} / {values(args[1])}")
    mapped = rec.map_nodes_to_values((add.args[1], [add.args[1]]), add)
    out.append(f"map_nodes_to_values: {type(mapped).__name__} {values(mapped[0])} "
               f"{'list' if isinstance(mapped[1], list) else type(mapped[1]).__name__}")
    out.append("fetch_attr: " + values(rec.fetch_attr("lin.bias")))
    env_keys = sorted(n.name for n in rec.env)
    out.append("env after run (no gc): " + " ".join(env_keys))
    gc = fx.Interpreter(gm)
    gc.run(x)
    out.append("env after run (gc): " + " ".join(sorted(n.name for n in gc.env)))
    init = {[n for n in gm.graph.nodes if n.name == "seq_0"][0]: torch.zeros(2, 3)}
    out.append("initial_env: " + values(fx.Interpreter(gm).run(x, initial_env=init)))
    g = fx.Graph()
    p = g.placeholder("x")
    g.output(g.call_method("sum", (g.call_method("view", (p, -1)),), {"dtype": torch.float64}))
    out.append("call_method: " + values(fx.Interpreter(fx.GraphModule(torch.nn.Module(), g)).run(x)))
    # torch.fx ignores extra arguments; fxcpp refuses them (docs/torch_fx_differences.md).
    out.append("too many: accepted, " + values(fx.Interpreter(gm).run(x, x)))
    return "\n".join(out)


def transformer():
    out = []
    gm = fx.GraphModule(make_root(), module_graph())

    class ReluToNeg(fx.Transformer):
        def call_module(self, target, args, kwargs):
            if target == "seq.0":
                return self.tracer.create_proxy("call_function", torch.neg, args, kwargs)
            return super().call_module(target, args, kwargs)

    new = ReluToNeg(gm).transform()
    out.append("transform:" + new.code)
    out.append("modules: " + " ".join(n for n, _ in new.named_modules() if n))
    x = torch.tensor([[1.0, -2.0, 3.0], [0.5, 0.25, -1.0]])
    out.append("value: " + values(new(x)))
    out.append("plain transform:" + fx.Transformer(gm).transform().code)
    return aten("\n".join(out))


def main():
    warnings.simplefilter("ignore", UserWarning)  # append of a node already in place: a no-op, warned
    goldens = {
        "surface": surface(),
        "node_surgery": node_surgery(),
        "graph_building": graph_building(),
        "graph_module": graph_module(),
        "interpreter": interpreter(),
        "transformer": transformer(),
    }
    write_goldens(OUT, goldens)


if __name__ == "__main__":
    main()
