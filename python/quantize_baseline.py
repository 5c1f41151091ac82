#!/usr/bin/python3
"""Python's own int8 of a model: the baseline of fxcpp's quantization (issue 22).

torch.ao.quantization.quantize_fx: prepare_fx with get_default_qconfig_mapping("onednn"),
a forward on every calibration batch, convert_fx on the onednn quantized engine
(torch.backends.quantized.engine = "onednn"), then torch.jit.trace + torch.jit.freeze,
saved: the quantized TorchScript that `fxcpp bench --engine python_int8
--int8-torchscript FILE` runs beside fxcpp's int8 (scripts/bench_quantize.py),
and the accuracy baseline of the digits test (python/digits_fixture.py).

As a library: python_int8(model, example, batches) and save_int8_torchscript(q, example, path).
As a command, on a torchvision model with random seeded weights whose batch-norm
statistics come from a train-mode pass (python/honest_weights.py, as
python/export_models.py builds them):

    quantize_baseline.py NAME --size 224 --calibration DATA.pt -o OUT.int8.pt [--fp32 OUT.pt --input IN.pt]

DATA.pt is what `fxcpp quantize --calibration` reads: a tuple of forward arguments
whose tensors hold samples along dim 0, or a list of such tuples.
"""
import argparse
import copy
import os
import sys
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402
from torch.ao.quantization import PerChannelMinMaxObserver, QConfig, get_default_qconfig_mapping  # noqa: E402
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def calibration_batches(value):
    """The batches of a calibration file's value: a tuple is one batch, a list of tuples one each."""
    if isinstance(value, tuple):
        return [value]
    if isinstance(value, list) and all(isinstance(v, tuple) for v in value):
        return value
    raise ValueError("calibration data must be a tuple of forward arguments or a list of such tuples")


def python_int8(model, example, batches, backend="onednn", weight_range=None):
    """prepare_fx / calibrate / convert_fx of a copy of `model` (eval mode) on the `backend` engine.

    weight_range (quant_min, quant_max), e.g. (-64, 63) for 7-bit weights: the global qconfig's
    weight observer gets that custom range, as fx::quantization::with_weight_range does."""
    torch.backends.quantized.engine = backend
    mapping = get_default_qconfig_mapping(backend)
    if weight_range is not None:
        g = mapping.global_qconfig
        weight = PerChannelMinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_channel_symmetric,
                                                    quant_min=weight_range[0], quant_max=weight_range[1])
        mapping.set_global(QConfig(activation=g.activation, weight=weight))
    prepared = prepare_fx(copy.deepcopy(model).eval(), mapping, example)
    with torch.no_grad():
        for batch in batches:
            prepared(*batch)
    return convert_fx(prepared)


def save_int8_torchscript(quantized, example, path):
    """torch.jit.trace + torch.jit.freeze of the quantized model, saved atomically."""
    with torch.no_grad():
        traced = torch.jit.freeze(torch.jit.trace(quantized, example).eval())
    traced.save(path + ".tmp")
    os.replace(path + ".tmp", path)
    return traced


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="torchvision model name (random seeded weights, honest batch-norm statistics)")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--calibration", required=True, help="DATA.pt (written if missing: 8 seeded random images)")
    p.add_argument("-o", "--output", required=True, help="the quantized TorchScript")
    p.add_argument("--fp32", help="also write the float model here (torch.jit.script)")
    p.add_argument("--input", help="also write a seeded input [1, 3, size, size] here")
    a = p.parse_args()
    torch.set_num_threads(1)
    from export_models import honest_model
    model = honest_model(a.model, a.size)
    if not os.path.exists(a.calibration):
        calib = (torch.randn(8, 3, a.size, a.size, generator=torch.Generator().manual_seed(11)),)
        torch.save(calib, a.calibration)
    batches = calibration_batches(torch.load(a.calibration))
    example = tuple(t[:1] if isinstance(t, torch.Tensor) else t for t in batches[0])
    q = python_int8(model, example, batches)
    save_int8_torchscript(q, example, a.output)
    if a.fp32:
        torch.jit.script(model).save(a.fp32)
    if a.input:
        torch.save(torch.randn(1, 3, a.size, a.size, generator=torch.Generator().manual_seed(12)), a.input)
    print("wrote", a.output)


if __name__ == "__main__":
    main()
