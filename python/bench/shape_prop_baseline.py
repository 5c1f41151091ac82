#!/usr/bin/python3
"""Python baseline of bench/shape_prop_bench.cpp: torch.fx 1.13 ShapeProp on
torchvision resnet50 (random seeded weights, eval mode), batch 1, 224x224,
one thread. Prints one JSON object of timings in ms, best of several runs:

  forward_ms      eager model(x) under torch.no_grad()
  shape_prop_ms   ShapeProp(gm).propagate(x): real data, autograd on
  shape_prop_meta_ms
                  ShapeProp on the meta device: gm moved to meta once
                  (not timed; fxcpp needs no such copy), input x.to("meta");
                  Python's meta kernels (torch/_meta_registrations.py) run
  meta_over_forward  shape_prop_meta_ms / forward_ms

Run with Debian's /usr/bin/python3 (python3-torch, python3-torchvision).
Nothing is downloaded.
"""
import copy
import json
import sys
import time
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.fx  # noqa: E402
import torchvision  # noqa: E402
from torch.fx.passes.shape_prop import ShapeProp  # noqa: E402


def best_ms(fn, runs):
    fn()  # warm-up
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval()
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(1, 3, 224, 224)

    def forward():
        with torch.no_grad():
            model(x)

    meta_gm = copy.deepcopy(gm).to("meta")
    meta_x = x.to("meta")
    result = {
        "torch": torch.__version__,
        "model": "resnet50",
        "nodes": len(gm.graph.nodes),
        "forward_ms": best_ms(forward, 5),
        "shape_prop_ms": best_ms(lambda: ShapeProp(gm).propagate(x), 5),
        "shape_prop_meta_ms": best_ms(lambda: ShapeProp(meta_gm).propagate(meta_x), 10),
    }
    result["meta_over_forward"] = result["shape_prop_meta_ms"] / result["forward_ms"]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
