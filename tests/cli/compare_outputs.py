#!/usr/bin/python3
"""Compares two torch.save'd outputs of `fxcpp run` (tensors, or tuples/lists of them).

    compare_outputs.py A.pt B.pt TOLERANCE

Prints "max diff D, max |A| M: D/M = R" and "within tolerance" when every
tensor has the same shape and dtype in both and R <= TOLERANCE; otherwise
says what differs and exits 1.
"""
import sys

import torch


def tensors(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (tuple, list)):
        return [t for e in v for t in tensors(e)]
    if isinstance(v, dict):
        return [t for e in v.values() for t in tensors(e)]
    return []


def main():
    a_path, b_path, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
    a, b = tensors(torch.load(a_path)), tensors(torch.load(b_path))
    if not a or len(a) != len(b):
        print(f"different structure: {len(a)} tensors in {a_path}, {len(b)} in {b_path}")
        return 1
    diff = scale = 0.0
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape or x.dtype != y.dtype:
            print(f"tensor {i}: {tuple(x.shape)} {x.dtype} vs {tuple(y.shape)} {y.dtype}")
            return 1
        diff = max(diff, (x.double() - y.double()).abs().max().item())
        scale = max(scale, x.double().abs().max().item())
    ratio = diff / scale if scale > 0 else diff
    print(f"max diff {diff:.3g}, max |A| {scale:.3g}: D/M = {ratio:.3g}")
    if ratio > tol:
        print(f"not within tolerance {tol:g}")
        return 1
    print("within tolerance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
