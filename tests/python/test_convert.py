"""fxcpp.from_fx / fxcpp.to_fx: torch.fx GraphModules to fxcpp and back, in memory, tensors shared."""
import json

import pytest
import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

import fxcpp
import fxcpp.convert
from conftest import classifier, close_to_eager


def same_nodes(a, b):
    ka = [(n.name, n.op, n.target, str(n.args), str(n.kwargs)) for n in a.graph.nodes]
    kb = [(n.name, n.op, n.target, str(n.args), str(n.kwargs)) for n in b.graph.nodes]
    assert ka == kb


def test_classifier_round_trip(model_name, rel):
    m, x = classifier(model_name)
    gm = torch.fx.symbolic_trace(m)
    cgm = fxcpp.from_fx(gm)
    back = fxcpp.to_fx(cgm)
    assert back.code == gm.code
    same_nodes(gm, back)
    with torch.no_grad():
        expected = m(x)
        assert rel(cgm(x), expected) < 1e-5
        assert rel(back(x), expected) < 1e-5


def test_classifier_optimize(model_name):
    m, x = classifier(model_name)
    fast = fxcpp.optimize(m, (x,))
    assert isinstance(fast, torch.nn.Module)
    with torch.no_grad():
        assert close_to_eager(m, (x,), fast(x), 1e-4)
    assert close_to_eager(m, (x,), fast(x), 1e-4)  # outside no_grad too


def test_make_fx_round_trip(rel):
    m, x = classifier("resnet18")
    with torch.no_grad():
        gm = make_fx(m)(x)
    back = fxcpp.to_fx(fxcpp.from_fx(gm))
    assert back.code == gm.code
    same_nodes(gm, back)
    with torch.no_grad():
        assert rel(back(x), m(x)) < 1e-5
        assert rel(fxcpp.from_fx(gm)(x), m(x)) < 1e-5
        assert rel(fxcpp.optimize(gm, (x,))(x), m(x)) < 1e-4


def test_parameters_are_shared():
    import copy
    m, x = classifier("resnet18")
    m = copy.deepcopy(m)  # its own copy to mutate
    gm = torch.fx.symbolic_trace(m)
    cgm = fxcpp.from_fx(gm)
    params = dict(cgm.named_parameters())
    assert params["conv1.weight"].data_ptr() == m.conv1.weight.data_ptr()
    with torch.no_grad():
        before = cgm(x)
        m.fc.bias.add_(1.0)  # changed in Python: fxcpp sees it
        after = cgm(x)
        assert torch.allclose(after, before + 1.0, atol=1e-5)
        assert torch.allclose(after, m(x), atol=1e-5)
    back = fxcpp.to_fx(cgm)
    assert back.fc.bias.data_ptr() == m.fc.bias.data_ptr()


class Plain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4))
        self.register_buffer("b", torch.randn(4))

    def forward(self, x):
        return torch.relu(x @ self.w + self.b).sum(dim=1, keepdim=True) * 2


def test_nodes_readable_as_in_torch_fx():
    gm = torch.fx.symbolic_trace(Plain())
    cgm = fxcpp.from_fx(gm)
    nodes = list(cgm.graph.nodes)
    assert [n.name for n in nodes] == [n.name for n in gm.graph.nodes]
    assert [n.op for n in nodes] == [n.op for n in gm.graph.nodes]
    w = nodes[1]
    assert (w.op, w.target) == ("get_attr", "w")
    matmul = nodes[2]
    assert matmul.args[0].name == "x" and matmul.args[1] is not None and matmul.args[1].name == "w"
    s = [n for n in nodes if n.name == "sum_1"][0]
    assert s.kwargs == {"dim": 1, "keepdim": True}
    assert [u.name for u in nodes[0].users] == ["matmul"]
    assert "graph():" in str(cgm.graph)
    assert "def forward(self, x):" in cgm.code
    x = torch.randn(3, 4)
    assert torch.allclose(cgm(x), gm(x))
    assert fxcpp.to_fx(cgm).w is gm.w  # the Parameter itself


def test_tensor_meta_round_trip():
    from torch.fx.passes.shape_prop import ShapeProp
    gm = torch.fx.symbolic_trace(Plain())
    x = torch.randn(3, 4)
    ShapeProp(gm).propagate(x)
    cgm = fxcpp.from_fx(gm)
    for a, b in zip(gm.graph.nodes, cgm.graph.nodes):
        assert a.meta.get("tensor_meta") == b.meta.get("tensor_meta"), a.name
    back = fxcpp.to_fx(cgm)
    for a, b in zip(gm.graph.nodes, back.graph.nodes):
        assert a.meta.get("tensor_meta") == b.meta.get("tensor_meta"), a.name


def test_errors_name_the_node():
    def f(x):
        return torch.nn.functional.linear(x, torch.ones(3, 5))
    cgm = fxcpp.from_fx(torch.fx.symbolic_trace(f))
    with pytest.raises(fxcpp.FxError) as e:
        cgm(torch.randn(2, 4))
    assert isinstance(e.value, RuntimeError)
    assert e.value.node == "linear", str(e.value)


def test_unmappable_target_refused():
    def f(x):
        return x + 1
    gm = torch.fx.symbolic_trace(f)
    node = [n for n in gm.graph.nodes if n.op == "call_function"][0]
    node.target = (lambda a, b: a + b)  # not importable by name
    gm.recompile()
    with pytest.raises(fxcpp.FxError) as e:
        fxcpp.from_fx(gm)
    assert e.value.node == "add" and "add" in str(e.value)


def test_gil_released_forward_runs_in_threads():
    import threading
    m, x = classifier("resnet18")
    cgm = fxcpp.from_fx(torch.fx.symbolic_trace(m))
    with torch.no_grad():
        expected = cgm(x)
    results = []

    def run():
        with torch.no_grad():
            results.append(cgm(x))
    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(torch.equal(r, expected) for r in results)


def test_conversion_draws_no_random_weights():
    """from_fx and to_fx build torch.nn leaves only to hold the model's tensors: neither side draws the random
    initial weights a constructor would (fx::from_document's SkipInitGuard, the bridge's meta-device build), so
    converting takes no random numbers from the generator and the tensors are the model's."""
    model, x = classifier("resnet18")
    gm = torch.fx.symbolic_trace(model)
    torch.manual_seed(21)
    expected = torch.rand(4)
    torch.manual_seed(21)
    cgm = fxcpp.from_fx(gm)
    back = fxcpp.to_fx(cgm)
    assert torch.equal(torch.rand(4), expected)
    for (name, a), (_, b) in zip(gm.named_parameters(), back.named_parameters()):
        assert a.data_ptr() == b.data_ptr(), name
    with torch.no_grad():
        assert torch.allclose(back(x), model(x), rtol=1e-5, atol=1e-6)


class _RecurrentAndPooling(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 8, batch_first=True)
        self.max1 = torch.nn.MaxPool1d(2)
        self.max2 = torch.nn.MaxPool2d(3, stride=2, padding=1)
        self.avg2 = torch.nn.AvgPool2d((2, 1), divisor_override=3)
        self.adaptive = torch.nn.AdaptiveAvgPool2d((None, 3))
        self.indices = torch.nn.MaxPool2d(2, return_indices=True)

    def forward(self, x):
        y = self.lstm(x)[0]
        img = y.unsqueeze(1)
        return self.max1(y), self.max2(img), self.avg2(img), self.adaptive(img), self.indices(img)[1]


def test_recurrent_and_pooling_leaves_round_trip():
    """An LSTM given back by to_fx runs on the model's own weights (its _flat_weights refreshed, not the
    placeholders its shell was built with), and the parameter-free pooling layers are registered C++ layers
    (no TorchScript leaf), given back with the options they had; MaxPool2d(return_indices=True), which C++'s
    MaxPool2d cannot return, stays a TorchScript leaf."""
    torch.manual_seed(3)
    m = _RecurrentAndPooling()
    gm = torch.fx.symbolic_trace(m)
    x = torch.randn(2, 6, 4)
    text, _, leaves = fxcpp.convert.document(gm)
    assert list(leaves) == ["leaf0"]
    kinds = {name: (doc["kind"], doc.get("type")) for name, doc in json.loads(text)["root"]["children"]}
    assert kinds["max2"] == ("registered", "torch.nn.MaxPool2d")
    assert kinds["avg2"] == ("registered", "torch.nn.AvgPool2d")
    assert kinds["adaptive"] == ("registered", "torch.nn.AdaptiveAvgPool2d")
    assert kinds["indices"][0] == "torchscript"
    cgm = fxcpp.from_fx(gm)
    back = fxcpp.to_fx(cgm)
    assert back.lstm.weight_ih_l0.data_ptr() == gm.lstm.weight_ih_l0.data_ptr()
    assert [w.data_ptr() for w in back.lstm._flat_weights] == [w.data_ptr() for w in gm.lstm._flat_weights]
    for name in ("max1", "max2", "avg2", "adaptive"):
        assert repr(getattr(back, name)) == repr(getattr(gm, name)), name
    with torch.no_grad():
        expected = m(x)
        for got in (cgm(x), back(x)):
            assert len(got) == len(expected)
            for a, b in zip(got, expected):
                assert torch.equal(a, b)


class _StochasticDepth(torch.nn.Module):
    def __init__(self):
        import torchvision
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 3, 1)
        self.drop = torchvision.ops.StochasticDepth(0.2, "row")  # as efficientnet's blocks: a wrapped call

    def forward(self, x):
        return x + self.drop(self.conv(x))


def test_stochastic_depth_in_eval_mode_is_its_input():
    """torchvision's stochastic_depth traced in eval mode (training=False) returns its input: it becomes
    aten::dropout(x, p, False), which fxcpp's optimiser removes, not a TorchScript leaf (whose calls cost a
    layout change each in an optimised channels-last graph); traced in training mode it stays a leaf. to_fx gives
    back the Python call either way."""
    torch.manual_seed(4)
    m = _StochasticDepth()
    x = torch.randn(2, 3, 5, 5)
    m.eval()
    gm = torch.fx.symbolic_trace(m)
    text, _, leaves = fxcpp.convert.document(gm)
    assert not leaves
    targets = [n["target"] for n in json.loads(text)["root"]["graph"]["nodes"]]
    assert "aten::dropout" in targets
    back = fxcpp.to_fx(fxcpp.from_fx(gm))
    assert back.code == gm.code
    with torch.no_grad():
        assert torch.equal(fxcpp.from_fx(gm)(x), m(x))
        fast = fxcpp.optimize(gm, (x,))
        assert "dropout" not in fast.code and torch.allclose(fast(x), m(x), rtol=1e-5, atol=1e-6)
    m.train()
    _, _, leaves = fxcpp.convert.document(torch.fx.symbolic_trace(m))
    assert len(leaves) == 1


def test_reductions_over_one_dim_given_as_an_int():
    """torch.mean(x, dim=-1, keepdim=True): an int where the schema takes int[1]? (RMSNorm as gpt-fast writes it)."""

    class RMSNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(8))

        def forward(self, x):
            return x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-5) * self.weight + x.sum(dim=1, keepdim=True)

    gm = torch.fx.symbolic_trace(RMSNorm())
    cgm = fxcpp.from_fx(gm)
    assert "torch.ops.aten.mean.dim(mul, [-1], True)" in cgm.code
    x = torch.randn(3, 8, 8)
    with torch.no_grad():
        assert torch.allclose(cgm(x), gm(x), rtol=1e-6, atol=1e-6)


def test_buffer_indexing_reads_and_writes_in_place():
    """x.__getitem__ / x.__setitem__ as torch.fx records indexing of a buffer (it proxies the index, not the buffer):
    the fxcpp module reads and writes the shared buffer as eager PyTorch does."""

    class Cache(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mask", torch.tril(torch.ones(8, 8, dtype=torch.bool)))
            self.register_buffer("cache", torch.zeros(1, 2, 8, 4))

        def forward(self, x, pos):
            self.cache[:, :, pos] = x
            return self.mask[None, None, pos].float() * 2 + x.sum()

    gm = torch.fx.symbolic_trace(Cache())
    targets = [(n.op, n.target) for n in gm.graph.nodes if n.op == "call_method"]
    assert ("call_method", "__setitem__") in targets and ("call_method", "__getitem__") in targets
    cgm = fxcpp.from_fx(gm)
    x, pos = torch.randn(1, 2, 3, 4), torch.tensor([1, 2, 5])
    eager = Cache()
    with torch.no_grad():
        expected = eager(x, pos)
        assert torch.equal(cgm(x, pos), expected)
    assert torch.equal(gm.cache, eager.cache)  # written in place, through the tensor fxcpp shares
    assert torch.equal(gm.cache[:, :, 5], x[:, :, 2])
