#!/usr/bin/python3
"""Small TorchScript files for fxcpp's importer tests (tests/import).

Writes into the directory given as argument, for every case NAME:
  NAME.pt          the TorchScript file
  NAME.input.pt    inputs (a tuple of tensors, torch.save) for runnable cases
  NAME.output.pt   the module's output on them
plus bad files: not_zip.pt, truncated.pt, tensor_save.pt, no_forward.pt.
Run with Debian's python3 (python3-torch). Seeded; nothing is downloaded.
"""
import os
import sys
from typing import List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """A non-leaf module with leaves, an in-place add and a constant flag."""

    def __init__(self, c: int, residual: bool):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)
        self.residual = residual

    def forward(self, x):
        out = self.relu(self.bn(self.conv(x)))
        if self.residual:
            out += x
        return out


class Simple(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.blocks = nn.Sequential(Block(4, True), Block(4, False))
        self.fc = nn.Linear(4, 5)
        self.scale = nn.Parameter(torch.tensor(0.5))

    def forward(self, x):
        x = self.blocks(self.stem(x))
        x = F.adaptive_avg_pool2d(x, 1)
        x = torch.flatten(x, 1)
        return self.fc(x) * self.scale


class Sizes(nn.Module):
    """Sizes read at run time: getitem and operator.* nodes."""

    def forward(self, x):
        b, c, h, w = x.size()
        y = x.view(b, c * h * w // 2, 2)
        return y.sum(-1) + h // 2


class ConstLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.n = 3

    def forward(self, x):
        for i in range(self.n):
            x = x * 2 + i
        return x


class ListAppend(nn.Module):
    def forward(self, x):
        feats: List[torch.Tensor] = [x]
        for _ in range(2):
            feats.append(torch.relu(torch.cat(feats, 1)))
        return torch.cat(feats, 1)


class TupleOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x, y, alpha: float = 2.0) -> Tuple[torch.Tensor, torch.Tensor]:
        a, _ = self.attn(x, x, x, need_weights=False)
        return a + y, torch.max(x, dim=-1)[0] * alpha


class Asserting(nn.Module):
    def forward(self, x):
        torch._assert(x.dim() == 4, "expected a 4-D input")
        return x.relu()


class DataIf(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x
        return -x


class DataLoop(nn.Module):
    def forward(self, x):
        for i in range(x.size(0)):
            x = x + i
        return x


class SetsAttr(nn.Module):
    """Changes its own state in forward, depending on the data: not importable."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        if bool(x.sum() > 0):
            self.calls += 1
        return x + self.calls


def _double(x):
    return x * 2


class Forks(nn.Module):
    """torch.jit.fork / wait: run in order at import."""

    def forward(self, x):
        fut = torch.jit.fork(_double, x)
        return torch.jit.wait(fut) + 1


class WithNoGrad(nn.Module):
    """A with statement (prim::Enter / Exit): no graph form."""

    def forward(self, x):
        with torch.no_grad():
            y = x * 2
        return y


class CountsCalls(nn.Module):
    """Changes its own state in forward: imported as its first call."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x + self.calls


class NoForward(nn.Module):
    @torch.jit.export
    def other(self, x):
        return x + 1


class ListImages(nn.Module):
    """Takes a list of images, as detection models do."""

    def forward(self, images: List[torch.Tensor], scale: float = 1.0):
        return torch.cat(images, 0) * scale


class Keywords(nn.Module):
    """Parameters with defaults, for inputs saved as a dict of names."""

    def forward(self, x, y: Optional[torch.Tensor] = None, scale: float = 2.0):
        if y is not None:
            x = x + y
        return x * scale


def save_user_inputs(out, g):
    """Inputs saved the ordinary way in Python: plain torch.save of a bare
    list, a dict of named inputs, nested one-element lists and dicts (which
    Python pickles with APPEND / SETITEM); NAME.input_KIND.pt, with
    NAME.output_KIND.pt the eager output on them."""
    img = torch.randn(1, 3, 4, 4, generator=g)
    x, y = torch.randn(2, 3, generator=g), torch.randn(2, 3, generator=g)
    for name, module, kind, value, args, kwargs in [
            ("list_images", ListImages(), "list", [img], ([img],), {}),
            ("list_images", ListImages(), "dict", {"images": [img, img], "scale": 3.0}, ([img, img], 3.0), {}),
            ("keywords", Keywords(), "dict", {"x": x, "scale": 3.0}, (x,), {"scale": 3.0}),
            ("keywords", Keywords(), "dict_y", {"y": y, "x": x}, (x, y), {})]:
        torch.jit.script(module).save(os.path.join(out, name + ".pt"))
        torch.save(value, os.path.join(out, "%s.input_%s.pt" % (name, kind)))
        torch.save(module(*args, **kwargs), os.path.join(out, "%s.output_%s.pt" % (name, kind)))
    t = torch.arange(3.0)
    torch.save(([t], {"a": t, "b": 3}, [1.5, True, None, "s", (1, 2)], {"k": [t]}, [[t]], {}, [], {"n": {"m": [t, t]}}),
               os.path.join(out, "nested_values.pt"))


def save_case(out, name, module, inputs, script=True):
    module.eval()
    m = torch.jit.script(module) if script else torch.jit.trace(module, inputs)
    m.save(os.path.join(out, name + ".pt"))
    with torch.no_grad():
        y = module(*inputs)
    torch.save(tuple(inputs), os.path.join(out, name + ".input.pt"))
    torch.save(y, os.path.join(out, name + ".output.pt"))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    img = torch.randn(2, 3, 8, 8, generator=g)
    save_case(out, "simple", Simple(), [img])
    save_case(out, "simple_traced", Simple(), [img], script=False)
    save_case(out, "sizes", Sizes(), [torch.randn(2, 3, 4, 4, generator=g)])
    save_case(out, "const_loop", ConstLoop(), [torch.randn(3, generator=g)])
    save_case(out, "list_append", ListAppend(), [torch.randn(2, 3, generator=g)])
    save_case(out, "tuple_out", TupleOut(), [torch.randn(2, 4, 8, generator=g), torch.randn(2, 4, 8, generator=g)])
    save_case(out, "asserting", Asserting(), [torch.randn(1, 2, 3, 4, generator=g)])
    torch.jit.script(DataIf()).save(os.path.join(out, "data_if.pt"))
    torch.jit.script(DataLoop()).save(os.path.join(out, "data_loop.pt"))
    torch.jit.script(SetsAttr()).save(os.path.join(out, "sets_attr.pt"))
    save_case(out, "forks", Forks(), [torch.randn(3, generator=g)])
    torch.jit.script(WithNoGrad()).save(os.path.join(out, "with_no_grad.pt"))
    save_case(out, "counts_calls", CountsCalls(), [torch.randn(3, generator=g)])
    torch.jit.script(NoForward()).save(os.path.join(out, "no_forward.pt"))
    with open(os.path.join(out, "not_zip.pt"), "w") as f:
        f.write("this is not a TorchScript file\n")
    with open(os.path.join(out, "simple.pt"), "rb") as f:
        data = f.read()
    with open(os.path.join(out, "truncated.pt"), "wb") as f:
        f.write(data[: len(data) // 2])
    torch.save(torch.ones(3), os.path.join(out, "tensor_save.pt"))
    save_user_inputs(out, g)
    return 0


if __name__ == "__main__":
    sys.exit(main())
