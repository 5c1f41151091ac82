"""torch.fx's passes, run by fxcpp in C++ (names and signatures as in torch.fx).

Each takes a torch.fx.GraphModule (or an fxcpp.GraphModule), converts it in
memory (fxcpp.from_fx: tensors shared), runs the C++ pass with the GIL
released and gives back what torch.fx's pass gives back:

    fxcpp.passes.shape_prop(gm, x)                      # ShapeProp(gm).propagate(x)
    r = fxcpp.passes.cse(gm)                            # CSEPass()(gm): PassResult
    gm2 = fxcpp.passes.const_fold.split_const_subgraphs(gm)
    parts = fxcpp.passes.split_module(gm, gm, lambda n: ...)
    fxcpp.passes.subgraph_rewriter.replace_pattern(gm, pattern, replacement)
    fxcpp.passes.PassManager(["cse", "eliminate_dead_code"])(gm)
    gm2, report = fxcpp.passes.fuse_kernels(gm, x)     # fxcpp's compiler: generated kernels
"""
import types

import torch
from torch.fx.subgraph_rewriter import Match
import torch.fx
from torch.fx.passes.infra.pass_base import PassResult

from . import _C
from .convert import from_fx, to_fx


def _fxcpp(gm):
    return gm if isinstance(gm, _C.GraphModule) else from_fx(gm)


def _back(gm, cgm):
    """cgm as the kind of module gm is (torch.fx in, torch.fx out)."""
    return cgm if isinstance(gm, _C.GraphModule) else to_fx(cgm)


def shape_prop(gm, *inputs):
    """torch.fx ShapeProp(gm).propagate(*inputs): every node's meta['tensor_meta'] (set on gm's own nodes);
    returns the graph's result."""
    cgm = _fxcpp(gm)
    out = _C._shape_prop(cgm, *inputs)
    if cgm is not gm:
        metas = {n.name: n.meta for n in cgm.graph.nodes}
        for n in gm.graph.nodes:
            m = metas.get(n.name, {})
            if "tensor_meta" in m:
                n.meta["tensor_meta"] = m["tensor_meta"]
    return out


def fuse_kernels(gm, *example_inputs):
    """fxcpp's compiler (docs/compiler.md; no torch.fx counterpart): shapes propagated on `example_inputs`, then the
    chains of pointwise operators and last-dimension reductions fused into generated C++ kernels
    (torch.ops.fxcpp.fused_kernel nodes). Returns (the module, as gm's kind: an fxcpp.GraphModule is changed in
    place, a torch.fx one converted), and the report: groups, fused_nodes, kernels, compiled, compile_ms, warnings,
    programs."""
    cgm = _fxcpp(gm)
    report = _C._fuse_kernels(cgm, *example_inputs)
    return _back(gm, cgm), report


def cse(gm):
    """torch.fx CSEPass()(gm): a PassResult with a new module (common subexpressions merged)."""
    r = _C._cse(_fxcpp(gm))
    return PassResult(_back(gm, r.graph_module), r.modified)


def _split_const_subgraphs(module, skip_folding_node_fn=None):
    """torch.fx const_fold.split_const_subgraphs: a module whose constant subgraphs are folded into attributes
    (torch.fx returns a FoldedGraphModule that folds at its first call; this one is folded already)."""
    if not isinstance(module, (torch.fx.GraphModule, _C.GraphModule)):
        module = torch.fx.symbolic_trace(module)
    if skip_folding_node_fn is not None:
        raise NotImplementedError("fxcpp.passes.const_fold.split_const_subgraphs: skip_folding_node_fn")
    cgm, _, _ = _C._split_const_subgraphs(_fxcpp(module))
    return _back(module, cgm)


const_fold = types.SimpleNamespace(split_const_subgraphs=_split_const_subgraphs)


def split_module(m, root_m, split_callback, qualname_map=None, keep_original_order=False):
    """torch.fx split_module: m split into submodules submod_N by split_callback(node) (called on m's torch.fx
    nodes, once per call_* node, as torch.fx does)."""
    partitions = {n.name: int(split_callback(n)) for n in m.graph.nodes
                  if n.op not in ("placeholder", "get_attr", "output")}
    cgm, names = _C._split_module(_fxcpp(m), partitions, keep_original_order)
    if qualname_map is not None:
        qualname_map.update(names)
    return _back(m, cgm)


def _replace_pattern(gm, pattern, replacement):
    """torch.fx subgraph_rewriter.replace_pattern: gm rewritten in place; pattern and replacement are functions
    or modules (traced by torch.fx.symbolic_trace) or GraphModules. Returns torch.fx's List[Match], one per
    match replaced: `anchor` is the pattern node the match was found from, `nodes_map` maps pattern nodes to the
    graph's (the matched nodes, now erased from the graph, and the live inputs of the placeholders)."""
    p = pattern if isinstance(pattern, torch.fx.GraphModule) else torch.fx.symbolic_trace(pattern)
    r = replacement if isinstance(replacement, torch.fx.GraphModule) else torch.fx.symbolic_trace(replacement)
    cgm = _fxcpp(gm)
    before = {n.name: n for n in gm.graph.nodes}
    found = _C._replace_pattern(cgm, from_fx(p), from_fx(r))
    if cgm is not gm and found:
        new = to_fx(cgm)
        for node in new.graph.nodes:  # attributes the replacement brought (constants)
            if node.op == "get_attr" and not _has_attr(gm, node.target):
                setattr(gm, node.target, _get_attr(new, node.target))
        gm.graph = new.graph
        gm.recompile()
    after = {n.name: n for n in gm.graph.nodes}
    in_pattern = {n.name: n for n in p.graph.nodes}
    return [Match(anchor=in_pattern[anchor],
                  nodes_map={in_pattern[k]: (before if erased else after)[v] for k, v, erased in pairs})
            for anchor, pairs in found]


def _get_attr(m, target):
    for part in target.split("."):
        m = getattr(m, part)
    return m


def _has_attr(m, target):
    try:
        _get_attr(m, target)
        return True
    except AttributeError:
        return False


subgraph_rewriter = types.SimpleNamespace(replace_pattern=_replace_pattern)


class PassManager:
    """torch.fx PassManager over fxcpp's C++ passes, named as in torch.fx: "cse", "eliminate_dead_code",
    "remove_dropout", "remove_noops", "normalize_args". Calling it on a GraphModule returns a PassResult."""

    def __init__(self, passes=None, steps=1, run_checks_after_each_pass=False):
        self.passes = list(passes or [])
        self.steps = steps
        self.run_checks_after_each_pass = run_checks_after_each_pass

    def add_pass(self, name):
        self.passes.append(name)

    def __call__(self, gm):
        r = _C._run_passes(_fxcpp(gm), self.passes, self.steps, self.run_checks_after_each_pass)
        return PassResult(_back(gm, r.graph_module), r.modified)
