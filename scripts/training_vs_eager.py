#!/usr/bin/python3
"""One training step of torchvision models compiled by fxcpp.aot_module against eager PyTorch, as issue 66's snippet
runs it, with eager against itself in channels-last beside it (how far eager's own gradients move when only the
rounding changes).

For each model, batch and size (train mode, seeded weights, 10 classes, cross-entropy, the same seed before each
run): how many gradients differ from eager's by more than 1e-4 of their own largest element, the worst of them, the
worst difference relative to the model's largest gradient, the worst running statistic; then the same for eager
PyTorch on a channels-last copy of the model.

    /usr/bin/python3 scripts/training_vs_eager.py --build build [--models resnet18 mobilenet_v2]
        [--batches 1 8 32] [--sizes 64 224] [--partition default]
"""
import argparse
import copy
import os
import sys

import torch
import torchvision


def step(model, x, y):
    torch.manual_seed(1)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    return ({k: p.grad for k, p in model.named_parameters()},
            {k: b for k, b in model.named_buffers() if b.is_floating_point()})


def compare(grads, buffers, want_grads, want_buffers):
    own = [(float((grads[k] - g).abs().max() / g.abs().max().clamp_min(1e-30)), k) for k, g in want_grads.items()]
    largest = max(float(g.abs().max()) for g in want_grads.values())
    model_scale = max(float((grads[k] - g).abs().max()) / largest for k, g in want_grads.items())
    buf = max((float((buffers[k].double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30))
               for k, b in want_buffers.items()), default=0.0)
    worst = max(own)
    return "%3d of %d above 1e-4 (worst %.1e %s); %.1e of the largest gradient; buffers %.1e" % (
        sum(e > 1e-4 for e, _ in own), len(own), worst[0], worst[1], model_scale, buf)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--models", nargs="+", default=["resnet18", "mobilenet_v2"])
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 8, 32])
    ap.add_argument("--sizes", nargs="+", type=int, default=[64, 224])
    ap.add_argument("--partition", default="default")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    import fxcpp
    torch.set_num_threads(1)
    for name in args.models:
        for n in args.batches:
            for size in args.sizes:
                torch.manual_seed(0)
                eager = getattr(torchvision.models, name)(num_classes=10).train()
                compiled = fxcpp.aot_module(copy.deepcopy(eager), partition=args.partition)
                channels_last = copy.deepcopy(eager).to(memory_format=torch.channels_last)
                x, y = torch.randn(n, 3, size, size), torch.randint(0, 10, (n,))
                want = step(eager, x, y)
                got = step(compiled, x, y)
                cl = step(channels_last, x.contiguous(memory_format=torch.channels_last), y)
                print("%-12s batch %2d %3dx%-3d fxcpp: %s" % (name, n, size, size, compare(*got, *want)))
                print("%-12s                eager channels-last: %s" % ("", compare(*cl, *want)), flush=True)


if __name__ == "__main__":
    main()
