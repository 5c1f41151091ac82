#!/usr/bin/python3
"""Seed corpus of the fuzz targets (fuzz/*_fuzz.cpp), generated at build time.

Usage: make_fuzz_seeds.py OUT
Writes one folder per kind of file; a fuzz target names the kinds it starts
from in its "// fuzz-seeds:" line (fuzz/README.md):
  OUT/torchscript/  small TorchScript files (scripted and traced; constants,
                    submodules, tuple outputs, an int attribute, a loop;
                    run-time control flow: a data-dependent if inside a loop
                    over a tensor's length appending to a list, an object of
                    a TorchScript class), plus the damaged ones of
                    make_corrupt_files.py
  OUT/tensors/      torch.save files: tensors of several dtypes and layouts,
                    tuples, lists, dicts, nesting, plus the damaged ones of
                    make_corrupt_files.py
  OUT/fx/           fxcpp files (fx::save's format, written by
                    python/fxcpp_bridge.py): an ATen graph from make_fx, a
                    module graph with torch.nn leaves, and the two graphs of
                    python/test_fxcpp_bridge.py (RNN leaves; kwargs)
  OUT/safetensors/  safetensors files (Hugging Face's format, written here
                    with struct and json): every dtype fxcpp reads, a
                    scalar, an empty tensor, metadata, an unpadded header
Files stay small (a few KB) so that mutations hit structure, not weights.
Deterministic; run with Debian's python3 (python3-torch).
"""
import os
import shutil
import sys
import tempfile

from typing import List

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_corrupt_files  # noqa: E402

# make_corrupt_files.py outputs that are TorchScript files; the other regular
# files are torch.save files (input.fifo is left out: reading it blocks).
TORCHSCRIPT = {"linear.pt", "short_weight.pt", "bad_code.pt", "syntax_error.pt", "bad_debug_pkl.pt",
               "bad_debug_pkl_deflated.pt"}


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 2, 3)
        self.bn = torch.nn.BatchNorm2d(2)
        self.fc = torch.nn.Linear(2, 2)
        self.scale = 3

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1)
        return self.fc(y) * self.scale, y.sum()


class Loop(torch.nn.Module):
    def forward(self, x, y):
        for _ in range(3):
            x = x + y
        if x.dim() > 1:
            x = x.transpose(0, 1)
        return torch.cat([x, x], 0)[:, :2]


class Branchy(torch.nn.Module):
    """Run-time control flow: cond_N inside loop_N, a list built across both."""

    def forward(self, x):
        outs: List[torch.Tensor] = []
        for i in range(x.size(0)):
            if bool(x[i].sum() > 0):
                outs.append(x[i] * 2)
            else:
                outs.append(-x[i])
        return torch.stack(outs)


@torch.jit.script
class Pair(object):
    def __init__(self, a: torch.Tensor, k: float):
        self.a = a
        self.k = k

    def scaled(self) -> torch.Tensor:
        return self.a * self.k


class UsesPair(torch.nn.Module):
    """An object of a TorchScript class (prim::CreateObject, SetAttr, a method)."""

    def forward(self, x):
        p = Pair(x, 2.0)
        p.k = 3.0
        return p.scaled()


def main(out):
    torch.manual_seed(0)
    ts, tensors, fx_dir = (os.path.join(out, k) for k in ("torchscript", "tensors", "fx"))
    for d in (ts, tensors, fx_dir):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    with tempfile.TemporaryDirectory() as tmp:
        make_corrupt_files.main(tmp)
        for name in sorted(os.listdir(tmp)):
            src = os.path.join(tmp, name)
            if os.path.isfile(src):
                shutil.copy(src, os.path.join(ts if name in TORCHSCRIPT else tensors, name))

    torch.jit.script(Small().eval()).save(os.path.join(ts, "small_scripted.pt"))
    torch.jit.trace(Small().eval(), torch.ones(1, 1, 5, 5)).save(os.path.join(ts, "small_traced.pt"))
    # Stored (not deflated) code: mutations reach the TorchScript source itself.
    make_corrupt_files.rewrite_zip(os.path.join(ts, "small_scripted.pt"), os.path.join(ts, "small_stored.pt"),
                                   lambda n, d: d)
    torch.jit.script(Loop()).save(os.path.join(ts, "loop.pt"))
    torch.jit.script(Branchy()).save(os.path.join(ts, "branchy.pt"))
    torch.jit.script(UsesPair()).save(os.path.join(ts, "uses_pair.pt"))
    torch.jit.script(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU())).save(os.path.join(ts, "seq.pt"))

    values = {
        "float.pt": torch.arange(6.0).reshape(2, 3),
        "int64.pt": (torch.arange(5), torch.tensor(7)),
        "bool_half.pt": (torch.tensor([True, False]), torch.ones(2, dtype=torch.half)),
        "double_uint8.pt": [torch.ones(2, dtype=torch.double), torch.arange(4, dtype=torch.uint8)],
        "strided.pt": (torch.arange(12.0).reshape(3, 4).t(), torch.arange(10.0)[2:8:2]),
        "shared_storage.pt": (lambda t: (t, t[1:], t.view(2, 2)))(torch.arange(4.0)),
        "empty.pt": (torch.empty(0), torch.empty(2, 0, 3)),
        "dict.pt": {"a": torch.ones(1), "b": [torch.zeros(2), 3, 1.5, "s", None]},
        "nested.input.pt": (torch.ones(1, 1, 5, 5), (torch.ones(2), [torch.ones(1)])),
    }
    for name, v in values.items():
        torch.save(v, os.path.join(tensors, name))
    fx_seeds(fx_dir)
    safetensors_seeds(os.path.join(out, "safetensors"))


def write_safetensors(path, tensors, metadata=None, pad=True):
    """A safetensors file of (name, dtype, shape, raw bytes) tuples, as the Python library lays it out."""
    import json
    import struct
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def safetensors_seeds(out):
    import struct
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    f32 = struct.pack("<6f", *range(6))
    write_safetensors(os.path.join(out, "small.safetensors"),
                      [("model.layers.0.weight", "F32", [2, 3], f32), ("bias", "F32", [3], struct.pack("<3f", 1, 2, 3))],
                      {"format": "pt"})
    write_safetensors(os.path.join(out, "dtypes.safetensors"),
                      [("f64", "F64", [2], struct.pack("<2d", 1.5, -2)), ("f16", "F16", [2], b"\x00\x3c\x00\xc0"),
                       ("bf16", "BF16", [2], b"\x80\x3f\x00\x40"), ("i64", "I64", [1], struct.pack("<q", -7)),
                       ("i32", "I32", [2], struct.pack("<2i", 3, 4)), ("i16", "I16", [1], struct.pack("<h", 5)),
                       ("i8", "I8", [2], b"\x01\xff"), ("u8", "U8", [3], b"abc"), ("bool", "BOOL", [2], b"\x01\x00"),
                       ("scalar", "F32", [], struct.pack("<f", 2.5)), ("empty", "F32", [0, 4], b"")])
    write_safetensors(os.path.join(out, "unpadded.safetensors"), [("x", "F32", [3], struct.pack("<3f", 1, 2, 3))],
                      pad=False)


def fx_seeds(out):
    import fxcpp_bridge
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, y):
        return torch.relu(x + y).sum(1), x[:, 1:]

    fxcpp_bridge.save(make_fx(f)(torch.ones(2, 3), torch.ones(2, 3)), os.path.join(out, "aten_graph.fx"))
    seq = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(18, 2)).eval()
    fxcpp_bridge.save(torch.fx.symbolic_trace(seq), os.path.join(out, "modules.fx"))
    # The bridge test's graphs: Embedding/LSTM/LayerNorm/GRU/ConvTranspose1d
    # leaves with tuple outputs and getitem, and operator targets with kwargs.
    import test_fxcpp_bridge
    for name, make in (("rnn.fx", test_fxcpp_bridge.rnn_graph), ("leaves_kwargs.fx", test_fxcpp_bridge.leaf_graph)):
        fxcpp_bridge.save(make()[0], os.path.join(out, name))


if __name__ == "__main__":
    main(sys.argv[1])
