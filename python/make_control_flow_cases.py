#!/usr/bin/python3
"""TorchScript files with run-time control flow for fxcpp's importer tests.

Writes into the directory given as argument, for every case NAME:
  NAME.pt            the TorchScript file (torch.jit.script unless said)
  NAME.input.pt      a tuple of inputs (torch.save)
  NAME.output.pt     the module's output on them (whole structure)
  NAME.input2.pt / NAME.output2.pt   a second input that takes the other
                     branch / another trip count, where the case has one
Run with Debian's python3 (python3-torch). Seeded; nothing is downloaded.
"""
import os
import sys
import warnings
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore")


class DataIf(nn.Module):
    """A branch chosen by the data, each branch with its own ops."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            y = self.lin(x) + 1
        else:
            y = x * 2
        return y.relu()


class NestedIf(nn.Module):
    """Two results, a nested data-dependent if, a shape-dependent if."""

    def forward(self, x, y):
        if x.size(0) > 2:
            a = x + y
            if bool(a.mean() > 0):
                b = a * 3
            else:
                b = a - 3
        else:
            a = x - y
            b = a
        return a, b


class LoopOverLength(nn.Module):
    """for i in range(x.size(0)): a list appended in the loop, stacked after."""

    def forward(self, x):
        outs: List[torch.Tensor] = []
        for i in range(x.size(0)):
            outs.append(x[i] * (i + 1))
        return torch.stack(outs)


class CarriedLoop(nn.Module):
    """A recurrence: h carried through a loop over time steps."""

    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(6, 3)

    def forward(self, x):
        h = torch.zeros(x.size(1), 3)
        for t in range(x.size(0)):
            h = torch.tanh(self.cell(torch.cat([x[t], h], 1)))
        return h


class WhileData(nn.Module):
    """while with a data-dependent condition and a counter."""

    def forward(self, x):
        n = 0
        while bool(x.abs().max() > 1.0):
            x = x / 2
            n += 1
        return x, n


class BreakLoop(nn.Module):
    """A loop of known length left early by the data (a break)."""

    def forward(self, x):
        for i in range(4):
            if bool(x.sum() > i * 4):
                break
            x = x + i
        return x


class EarlyReturn(nn.Module):
    def forward(self, x):
        if x.max() > 2.0:
            return x.clamp(max=2.0)
        y = x.exp()
        return y / y.sum()


class OptionalArg(nn.Module):
    def forward(self, x, bias: Optional[torch.Tensor] = None):
        if bias is not None:
            x = x + bias
        return x * 2


class DictOut(nn.Module):
    def forward(self, x) -> Dict[str, torch.Tensor]:
        out: Dict[str, torch.Tensor] = {"sum": x.sum(0)}
        if x.size(0) > 1:
            out["first"] = x[0]
        else:
            out["first"] = x.squeeze(0)
        return out


class RaisingBranch(nn.Module):
    def forward(self, x):
        if x.min() < 0:
            raise ValueError("negative input")
        return x.sqrt()


class Interpolate(nn.Module):
    """F.interpolate: torch's own rank checks (`if input.dim() == 3 ...`)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return F.interpolate(y, size=[x.size(2) * 2, x.size(3) * 2], mode="bilinear", align_corners=False)


class Lstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 8, num_layers=2)

    def forward(self, x):
        out, (h, c) = self.rnn(x)
        return out, h, c


class UsesWeightOnly(nn.Module):
    """A Linear read through its weight only (never called)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 5)

    def forward(self, x):
        return F.linear(x, self.proj.weight) * 2


@torch.jit.script
class Boxes(object):
    """A TorchScript class, as torchvision's ImageList."""

    def __init__(self, t: torch.Tensor, scale: float):
        self.t = t
        self.scale = scale

    def scaled(self) -> torch.Tensor:
        return self.t * self.scale


class UsesObject(nn.Module):
    def forward(self, x):
        b = Boxes(x, 2.0)
        alias = b
        alias.scale = 3.0  # seen through b too
        return b.scaled() + 1


class SetsObjectInBranch(nn.Module):
    """An object's attribute set inside a data-dependent branch: not importable."""

    def forward(self, x):
        b = Boxes(x, 2.0)
        if bool(x.sum() > 0):
            b.scale = 3.0
        return b.scaled()


def _shifted(t: torch.Tensor, by: torch.Tensor) -> torch.Tensor:
    """A helper inlined inside the loop body and the branch."""
    return t + by.size(0) + by.mean()


class AttrInLoop(nn.Module):
    """As RAFT's CorrBlock: forward assigns a list of tensors to a module
    attribute; a run-time loop (and a data-dependent if) calls a method that
    reads it through an inlined helper: values of the enclosing graph that
    are no TorchScript value of the loop body."""

    def __init__(self):
        super().__init__()
        self.pyramid: List[torch.Tensor] = [torch.zeros(1)]

    def build(self, x):
        self.pyramid = [x * 2]
        self.pyramid.append(x.mean(0, keepdim=True))

    def read(self, y):
        out = y
        for level in self.pyramid:
            out = _shifted(out, level)
        return out

    def forward(self, x, n: int):
        self.build(x)
        y = x
        for _ in range(n):
            y = self.read(y) * 0.5
            if bool(y.mean() > 100):  # a branch in the body: read through two graphs
                y = self.read(y) * 0.1
        if bool(y.sum() > 0):
            y = y - 1
        else:
            y = self.read(y)  # only the false branch reads the pyramid
        return y


def save(out, name, module, inputs, inputs2=None, trace=False):
    module.eval()
    torch.manual_seed(0)
    m = torch.jit.trace(module, tuple(inputs)) if trace else torch.jit.script(module)
    m.save(os.path.join(out, name + ".pt"))
    for suffix, ins in (("", inputs), ("2", inputs2)):
        if ins is None:
            continue
        with torch.no_grad():
            y = module(*ins)
        torch.save(tuple(ins), os.path.join(out, name + ".input%s.pt" % suffix))
        torch.save(y, os.path.join(out, name + ".output%s.pt" % suffix))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    save(out, "data_if", DataIf(), [r(2, 4).abs()], [-r(2, 4).abs()])
    save(out, "nested_if", NestedIf(), [r(3, 4).abs(), r(3, 4).abs()], [r(2, 4), r(2, 4)])
    save(out, "loop_over_length", LoopOverLength(), [r(3, 4)], [r(5, 4)])
    save(out, "carried_loop", CarriedLoop(), [r(5, 2, 3)], [r(2, 2, 3)])
    save(out, "while_data", WhileData(), [r(3) * 10], [r(3) * 0.1])
    save(out, "break_loop", BreakLoop(), [torch.full((3,), -1.0)], [torch.full((3,), 2.0)])
    save(out, "early_return", EarlyReturn(), [r(4) + 5], [r(4) * 0.1])
    save(out, "optional_arg", OptionalArg(), [r(3), r(3)], [r(3)])
    save(out, "dict_out", DictOut(), [r(3, 2)], [r(1, 2)])
    save(out, "raising_branch", RaisingBranch(), [r(3).abs()])
    save(out, "interpolate", Interpolate(), [r(1, 3, 5, 6)], [r(2, 3, 4, 4)])
    save(out, "lstm", Lstm(), [r(5, 2, 4)], [r(3, 1, 4)])
    save(out, "lstm_traced", Lstm(), [r(5, 2, 4)], [r(5, 2, 4)], trace=True)
    save(out, "uses_object", UsesObject(), [r(3)])
    torch.jit.script(SetsObjectInBranch()).save(os.path.join(out, "sets_object_in_branch.pt"))
    save(out, "weight_only_traced", UsesWeightOnly(), [r(2, 4)], trace=True)
    save(out, "attr_in_loop", AttrInLoop(), [r(3, 4) + 300, 2], [-r(2, 4).abs() - 30, 3])
    return 0


if __name__ == "__main__":
    sys.exit(main())
