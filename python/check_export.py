#!/usr/bin/python3
"""Checks TorchScript files written by fx::export_torchscript against PyTorch.

For every model NAME given, loads EXPORTED/NAME.pt with stock torch.jit.load
and runs it on MODELS/NAME.input.pt (the seeded input of
python/export_models.py); its output must match
  - MODELS/NAME.output.pt, the eager torchvision output (random seeded
    weights, eval mode), and
  - the original scripted model MODELS/NAME.pt on the same input, when
    there is one (a model traced in C++ has only its reference output),
within --tol (absolute and relative). Prints one line per model, exits 1 if
any model differs or fails to load or run.

Usage: check_export.py --models DIR --exported DIR NAME...
"""
import argparse
import os
import sys
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402


def max_diff(a, b):
    """The largest absolute difference between two outputs (tensors or tuples of them)."""
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
            return float("inf")
        return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
    if isinstance(a, (tuple, list)):
        if not isinstance(b, (tuple, list)) or len(a) != len(b):
            return float("inf")
        return max([max_diff(x, y) for x, y in zip(a, b)] + [0.0])
    return 0.0 if a == b else float("inf")


def close(a, b, tol):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, rtol=tol, atol=tol)
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))
    return a == b


def check(name, models, exported, tol):
    x = torch.load("%s/%s.input.pt" % (models, name))
    eager = torch.load("%s/%s.output.pt" % (models, name))
    original_path = "%s/%s.pt" % (models, name)
    with torch.no_grad():
        got = torch.jit.load("%s/%s.pt" % (exported, name))(x)
        original = torch.jit.load(original_path)(x) if os.path.exists(original_path) else None
    ok = close(got, eager, tol) and (original is None or close(got, original, tol))
    vs_original = "-" if original is None else "%.3g" % max_diff(got, original)
    print("%-20s %s  max diff vs eager %.3g, vs original .pt %s" % (name, "ok  " if ok else "FAIL",
                                                                    max_diff(got, eager), vs_original))
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", required=True, help="directory of export_models.py's files")
    p.add_argument("--exported", required=True, help="directory of the exported NAME.pt files")
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("names", nargs="+")
    a = p.parse_args()
    torch.set_num_threads(1)
    failed = []
    for name in a.names:
        try:
            if not check(name, a.models, a.exported, a.tol):
                failed.append(name)
        except Exception as e:  # a file that does not load or run: one line, then the next model
            print("%-20s FAIL  %s: %s" % (name, type(e).__name__, str(e).strip().splitlines()[0]))
            failed.append(name)
    if failed:
        print("check_export: %d of %d models differ: %s" % (len(failed), len(a.names), " ".join(failed)))
        return 1
    print("check_export: %d models match" % len(a.names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
