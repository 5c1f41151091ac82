#!/usr/bin/python3
"""TorchScript files for fxcpp's tests of interpreter-only operators and
custom operator libraries (tests/import/script_ops_test.cpp, tests/cli/ops.cmake).

Writes into the directory given as argument, for every case NAME:
  NAME.pt          the TorchScript file (torch.jit.script)
  NAME.input.pt    inputs (a tuple, torch.save)
  NAME.output.pt   the eager module's output on them
(warn_assert.bad_input.pt: a 3-d input its assert refuses; raising.pt fails
at run time on raising.input.pt)
and torchvision_ops.txt: the path of torchvision's operator library (_C),
which registers torchvision::nms (empty if torchvision is not installed; the
nms case is then not written). Run with Debian's python3 (python3-torch,
python3-torchvision). Seeded; nothing is downloaded.
"""
import contextlib
import io
import os
import sys
import warnings

import torch
import torch.nn as nn

try:
    import torchvision
except ImportError:
    torchvision = None


class WarnAssert(nn.Module):
    """What scripted googlenet / inception_v3 do: warnings.warn, and an
    assert whose message formats an attribute ("...{}".format(self.k))."""

    def __init__(self):
        super().__init__()
        self.k = 3
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        warnings.warn("Scripted WarnAssert always returns a tensor")
        torch._assert(x.dim() == 4, "expected a 4-d input for k={}".format(self.k))
        return torch.relu(self.conv(x))


class FormatAtRunTime(nn.Module):
    """aten::format and prim::Print on values only known at run time."""

    def __init__(self):
        super().__init__()
        self.k = 7

    def forward(self, x):
        print("rows", x.size(0), "k", self.k)
        return x + 1, "{} rows, k={}, scale {}".format(x.size(0), self.k, 0.5)


class Raising(nn.Module):
    """An operator that fails at run time (view to the wrong size)."""

    def forward(self, x):
        return x.view(5)


class Nms(nn.Module):
    def forward(self, boxes, scores):
        return torchvision.ops.nms(boxes, scores, 0.5)


def save_case(out, name, module, inputs):
    module.eval()
    torch.jit.script(module).save(os.path.join(out, name + ".pt"))
    with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        y = module(*inputs)
    torch.save(tuple(inputs), os.path.join(out, name + ".input.pt"))
    torch.save(y, os.path.join(out, name + ".output.pt"))


def torchvision_library():
    if torchvision is None:
        return ""
    return torchvision.extension._get_extension_path("_C")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    save_case(out, "warn_assert", WarnAssert(), [torch.randn(1, 3, 8, 8, generator=g)])
    torch.save((torch.randn(3, 8, 8, generator=g),), os.path.join(out, "warn_assert.bad_input.pt"))
    save_case(out, "format_run_time", FormatAtRunTime(), [torch.randn(2, 3, generator=g)])
    torch.jit.script(Raising()).save(os.path.join(out, "raising.pt"))
    torch.save((torch.randn(2, 3, generator=g),), os.path.join(out, "raising.input.pt"))
    lib = torchvision_library()
    with open(os.path.join(out, "torchvision_ops.txt"), "w") as f:
        f.write(lib)
    if lib:
        xy = torch.rand(20, 2, generator=g) * 50
        wh = torch.rand(20, 2, generator=g) * 30 + 1
        boxes = torch.cat([xy, xy + wh], dim=1)
        scores = torch.rand(20, generator=g)
        save_case(out, "nms", Nms(), [boxes, scores])
    return 0


if __name__ == "__main__":
    sys.exit(main())
