"""ctest driver for python/fxcpp_bridge.py (Debian's /usr/bin/python3).

    test_fxcpp_bridge.py cpp-to-python DIR [MODEL.fx INPUT.pt OUTPUT.pt]...
        Loads each fxcpp file written by C++ with the bridge, runs it on the
        input and compares with the output C++ computed (<= 1e-6 relative).
    test_fxcpp_bridge.py python-to-cpp DIR FXCPP
        Writes fxcpp files from Python GraphModules (torch.nn leaves + ATen
        ops, and a make_fx graph), runs them with `FXCPP run` and compares.
"""
import operator
import os
import subprocess
import sys

import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fxcpp_bridge  # noqa: E402


def close(actual, expected, what):
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), what
        for a, e in zip(actual, expected):
            close(a, e, what)
        return
    scale = max(1.0, expected.abs().max().item())
    diff = (actual - expected).abs().max().item()
    print("%s: max abs diff %.3g" % (what, diff))
    assert diff <= 1e-6 * scale, "%s: outputs differ by %g" % (what, diff)


def cpp_to_python(args):
    for i in range(0, len(args), 3):
        path, inp, out = args[i:i + 3]
        gm = fxcpp_bridge.load(path)
        assert isinstance(gm, torch.fx.GraphModule)
        inputs = torch.load(inp)
        inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
        with torch.no_grad():
            actual = gm(*inputs)
        close(actual, torch.load(out), os.path.basename(path))
        print(gm.code.strip().splitlines()[0])


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4 * 5 * 5, 6)


def leaf_graph():
    torch.manual_seed(0)
    root = Net().eval()
    with torch.no_grad():
        root.bn.running_mean.uniform_(-1, 1)
    g = torch.fx.Graph()
    x = g.placeholder("x")
    c = g.call_module("conv", (x,))
    b = g.call_module("bn", (c,))
    r = g.call_function(torch.ops.aten.relu.default, (b,))
    f = g.call_function(torch.ops.aten.flatten.using_ints, (r, 1))
    l = g.call_module("fc", (f,))
    s = g.call_function(operator.mul, (l, 0.5))
    t = g.call_function(torch.ops.aten.softmax.int, (s,), {"dim": -1})
    g.output((t, s))
    gm = torch.fx.GraphModule(root, g)
    return gm, (torch.randn(2, 3, 5, 5),)


class Rnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 8, padding_idx=0)
        self.lstm = torch.nn.LSTM(8, 6, num_layers=2, bidirectional=True)
        self.norm = torch.nn.LayerNorm(12, eps=1e-4)
        self.gru = torch.nn.GRU(12, 4, batch_first=False, bias=False)
        self.up = torch.nn.ConvTranspose1d(5, 3, 3, stride=2, output_padding=1)


def rnn_graph():
    torch.manual_seed(1)
    root = Rnn().eval()
    g = torch.fx.Graph()
    x = g.placeholder("x")
    e = g.call_module("emb", (x,))
    l = g.call_function(operator.getitem, (g.call_module("lstm", (e,)), 0))
    n = g.call_module("norm", (l,))
    r = g.call_function(operator.getitem, (g.call_module("gru", (n,)), 0))
    u = g.call_module("up", (g.call_function(torch.ops.aten.transpose.int, (r, 0, 1)),))
    g.output(u)
    return torch.fx.GraphModule(root, g), (torch.randint(10, (5, 2)),)


def aten_graph():
    w = torch.randn(5, 3)
    x = torch.randn(4, 3)
    gm = make_fx(lambda x, w: torch.nn.functional.linear(x, w).relu().sum(1, keepdim=True) * 2)(x, w)
    return gm, (x, w)


def python_to_cpp(args):
    out_dir, fxcpp = args
    for name, make in (("bridge_leaves", leaf_graph), ("bridge_rnn", rnn_graph), ("bridge_make_fx", aten_graph)):
        gm, inputs = make()
        with torch.no_grad():
            expected = gm(*inputs)
        path = os.path.join(out_dir, name + ".fx")
        fxcpp_bridge.save(gm, path)
        # The bridge reads its own files back, too.
        close(fxcpp_bridge.load(path)(*inputs), expected, name + " (Python round trip)")
        inp = os.path.join(out_dir, name + ".input.pt")
        out = os.path.join(out_dir, name + ".cpp_output.pt")
        torch.save(inputs, inp)
        subprocess.run([fxcpp, "run", path, "--input", inp, "--output", out], check=True)
        close(torch.load(out), expected, name + " (C++ fxcpp run)")


if __name__ == "__main__":
    {"cpp-to-python": cpp_to_python, "python-to-cpp": python_to_cpp}[sys.argv[1]](sys.argv[2:])
    print("OK")
