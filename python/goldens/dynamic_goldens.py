#!/usr/bin/python3
"""Goldens of torch.ao.quantization.quantize_dynamic (1.13) for fxcpp's
fx::quantization::quantize_dynamic (tests/quantization/dynamic_test.cpp).

    dynamic_goldens.py --export DIR    writes, for each model NAME:
        NAME.dyn.pt       torch.jit.trace of the float model (eval mode)
        NAME.io.pt        (input, float output, dynamic-quantized output), torch.save'd tuple

Models (seeded weights, eval mode):
  encoder  nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4, 128), 2) + nn.Linear(64, 10) head,
           input [seq 16, batch 2, 64]. batch_first=False: with batch_first=True, 1.13's
           TransformerEncoderLayer.forward checks its fast path on `self.linear1.weight`, which
           is a method of the dynamic-quantized Linear, and raises AttributeError (the
           quantized model does not run at all). The trace is taken with grad enabled so that it
           records the ordinary (not the fused fast-path) attention and feed-forward.
  mlp      Linear(32, 64) → ReLU → Linear(64, 64) → GELU → Linear(64, 8), input [4, 32].

Quantization: quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8) on the onednn engine:
per-tensor symmetric qint8 weights (default_dynamic_qconfig's MinMaxObserver), activations
quantized per call to quint8 with reduce_range=True (DynamicQuantizedLinear.forward). Python
quantizes linear1 / linear2 of each layer and the head; the attention's in_proj (a Parameter
read by F.multi_head_attention_forward) and out_proj (NonDynamicallyQuantizableLinear, never
called as a module and given no qconfig) stay float.
"""
import argparse
import os
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

torch.backends.quantized.engine = "onednn"


class Encoder(nn.Module):
    def __init__(self, d_model=64, nhead=4, ff=128, layers=2, classes=10):
        super().__init__()
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d_model, nhead, ff), layers,
                                             enable_nested_tensor=False)
        self.head = nn.Linear(d_model, classes)

    def forward(self, x):
        return self.head(self.encoder(x))


def mlp():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 8))


def build(name):
    """The float model (seeded weights, eval mode) and its seeded input."""
    torch.manual_seed(0)
    data = torch.Generator().manual_seed(1)
    if name == "encoder":
        return Encoder().eval(), torch.randn(16, 2, 64, generator=data)
    return mlp().eval(), torch.randn(4, 32, generator=data)


def export(out):
    os.makedirs(out, exist_ok=True)
    for name in ["encoder", "mlp"]:
        model, x = build(name)
        traced = torch.jit.trace(model, x, check_trace=False)
        q = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
        with torch.no_grad():
            y = model(x)
            yq = q(x)
        base = os.path.join(out, name)
        traced.save(base + ".dyn.pt.tmp")
        os.replace(base + ".dyn.pt.tmp", base + ".dyn.pt")
        torch.save((x, y, yq), base + ".io.pt.tmp")
        os.replace(base + ".io.pt.tmp", base + ".io.pt")
        rel = ((yq - y).norm() / y.norm()).item()
        print(f"wrote {base}.dyn.pt, {base}.io.pt (int8 vs fp32 relative error {rel:.4f})")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--export", metavar="DIR", required=True)
    export(p.parse_args().export)


if __name__ == "__main__":
    main()
