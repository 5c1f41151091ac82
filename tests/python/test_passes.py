"""fxcpp.passes from Python: the same results as the same passes in Python torch.fx."""
import pytest
import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.dialect.common.cse_pass import CSEPass
from torch.fx.passes.shape_prop import ShapeProp
from torch.fx.passes.split_module import split_module

import fxcpp
from conftest import classifier


def same_meta(a, b):
    """TensorMetadata equal; the memory format may differ where both hold (a [1, C, 1, 1] value is contiguous
    and channels_last: torch.fx takes the first format of a Python set that is, fxcpp the first of
    contiguous, channels_last, channels_last_3d)."""
    if a is None or b is None or a.memory_format == b.memory_format:
        return a == b
    t = torch.empty_strided(a.shape, a.stride)
    return (a._replace(memory_format=None) == b._replace(memory_format=None)
            and t.is_contiguous(memory_format=a.memory_format) and t.is_contiguous(memory_format=b.memory_format))


def test_shape_prop_equals_torch_fx(model_name):
    m, x = classifier(model_name)
    expected, actual = torch.fx.symbolic_trace(m), torch.fx.symbolic_trace(m)
    ShapeProp(expected).propagate(x)
    out = fxcpp.passes.shape_prop(actual, x)
    assert out.shape == m(x).shape
    for a, b in zip(expected.graph.nodes, actual.graph.nodes):
        assert same_meta(a.meta.get("tensor_meta"), b.meta.get("tensor_meta")), a.name


def duplicated(x):
    a = torch.relu(x)
    b = torch.relu(x)
    c = torch.sin(a + b) + torch.sin(a + b)
    return c * torch.cos(x) + torch.cos(x)


def test_cse_equals_torch_fx():
    gm = make_fx(duplicated)(torch.randn(3, 4))
    expected = CSEPass()(gm)
    actual = fxcpp.passes.cse(gm)
    assert actual.modified == expected.modified is True
    assert actual.graph_module.code == expected.graph_module.code


def test_cse_keeps_random_calls_apart():
    # torch.fx 1.13's CSEPass merges two rand_like calls (two draws become one); fxcpp's does not.
    gm = make_fx(lambda x: torch.rand_like(x) + torch.rand_like(x))(torch.randn(3))
    code = fxcpp.passes.cse(gm).graph_module.code
    assert code.count("rand_like.default(") == 2


def test_split_module_equals_torch_fx():
    m, x = classifier("resnet18")
    gm = torch.fx.symbolic_trace(m)
    order = {n.name: i for i, n in enumerate(gm.graph.nodes)}
    cut = order["layer3_0_conv1"]

    def callback(n):
        return 0 if order[n.name] < cut else 1
    expected_names, actual_names = {}, {}
    expected = split_module(gm, gm, callback, expected_names)
    actual = fxcpp.passes.split_module(gm, gm, callback, actual_names)
    assert actual.code == expected.code
    for name in ("submod_0", "submod_1"):
        assert getattr(actual, name).code == getattr(expected, name).code
    assert actual_names == expected_names
    with torch.no_grad():
        assert torch.allclose(actual(x), m(x), atol=1e-5)


class Folded(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.randn(4, 4))
        self.b = torch.nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        return x @ (self.a + self.b).relu()


def test_const_fold():
    m = Folded()
    gm = torch.fx.symbolic_trace(m)
    folded = fxcpp.passes.const_fold.split_const_subgraphs(gm)
    ops = [n.op for n in folded.graph.nodes]
    assert ops.count("call_function") == 1  # only the matmul is left
    x = torch.randn(2, 4)
    assert torch.allclose(folded(x), m(x), atol=1e-5)


def pattern(x, y):
    return torch.relu(x + y)


def replacement(x, y):
    return torch.sigmoid(x - y)


def rewritten(x, y, z):
    return torch.relu(x + y) * torch.relu(y + z)


def test_replace_pattern_with_python_patterns():
    expected, actual = torch.fx.symbolic_trace(rewritten), torch.fx.symbolic_trace(rewritten)
    matches = torch.fx.subgraph_rewriter.replace_pattern(expected, pattern, replacement)
    before = {n.name: n for n in actual.graph.nodes}
    found = fxcpp.passes.subgraph_rewriter.replace_pattern(actual, pattern, replacement)
    # torch.fx's Match objects: the pattern's anchor, and pattern nodes mapped to the graph's as torch.fx maps them.
    assert len(found) == len(matches) == 2
    for mine, theirs in zip(found, matches):
        assert isinstance(mine, torch.fx.subgraph_rewriter.Match)
        assert mine.anchor.name == theirs.anchor.name
        assert {k.name: v.name for k, v in mine.nodes_map.items()} == {k.name: v.name for k, v in theirs.nodes_map.items()}
        for k, v in mine.nodes_map.items():
            assert v is before[v.name] if k.op != "placeholder" else v.graph is actual.graph
    args = [torch.randn(3) for _ in range(3)]
    assert torch.allclose(actual(*args), expected(*args))
    # The same nodes; the replacement's calls come back as the ATen operators fxcpp calls (torch.sigmoid ->
    # torch.ops.aten.sigmoid): C++ made them.
    assert [(n.name, n.op) for n in actual.graph.nodes] == [(n.name, n.op) for n in expected.graph.nodes]


def test_pass_manager_runs_cpp_passes():
    gm = make_fx(duplicated)(torch.randn(3, 4))  # noqa: the same graph as test_cse_equals_torch_fx
    result = fxcpp.passes.PassManager(["cse", "eliminate_dead_code"], steps=2)(gm)
    assert result.modified
    assert result.graph_module.code == CSEPass()(gm).graph_module.code
    cgm = fxcpp.from_fx(gm)
    r = fxcpp.passes.PassManager(["cse"])(cgm)  # an fxcpp.GraphModule stays one
    assert isinstance(r.graph_module, fxcpp.GraphModule)


class _BlockTail(torch.nn.Module):
    """A transformer block's tail: residual add, LayerNorm (a module: kept), GELU (tanh), scaled softmax."""

    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(64)

    def forward(self, x, r):
        return torch.softmax(torch.nn.functional.gelu(self.ln(x + r), approximate="tanh") * 0.125, -1)


def test_fuse_kernels_fuses_a_chain_and_matches_eager():
    torch.manual_seed(0)
    m = _BlockTail().eval()
    x, r = torch.randn(4, 16, 64), torch.randn(4, 16, 64)
    fused, report = fxcpp.passes.fuse_kernels(torch.fx.symbolic_trace(m), x, r)
    if report["warnings"]:
        pytest.skip(report["warnings"][0])
    assert report["groups"] == 1 and report["fused_nodes"] == 3, report
    assert report["programs"][0].startswith("inputs 1; %1 = gelu_tanh(%0); %2 = mul(%1, 0.125); %3 = max(%2);")
    kernels = [n for n in fused.graph.nodes if n.target is torch.ops.fxcpp.fused_kernel]
    assert len(kernels) == 1
    torch.testing.assert_close(fused(x, r), m(x, r), rtol=1e-5, atol=1e-6)
    x3, r3 = torch.randn(3, 5, 64), torch.randn(3, 5, 64)  # another batch and length: the same kernel
    torch.testing.assert_close(fused(x3, r3), m(x3, r3), rtol=1e-5, atol=1e-6)
