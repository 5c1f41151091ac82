#!/usr/bin/python3
"""Goldens of torch.ao.quantization 1.13 for fxcpp's quantization layer (tests/quantization).

Two modes:
  quantization_goldens.py                 writes tests/quantization/goldens/quantization.json
  quantization_goldens.py --export DIR    writes the models and data the C++ test reads:
      NAME.quant.pt        torch.jit.script of the float model (eval mode)
      NAME.calib.pt        the calibration batches, one tensor [batches, N, 3, 64, 64]
      NAME.test.pt         the test input [1, 3, 64, 64]

Models: torchvision resnet18, mobilenet_v2 and mobilenet_v3_small with random seeded weights whose
batch-norm statistics are set by a train-mode pass over seeded random data
(otherwise activations shrink to ~1e-9 and calibration measures nothing).
Mappings: get_default_qconfig_mapping("onednn") (HistogramObserver
activations, per-channel symmetric qint8 weights) and a per-tensor MinMax one.
For each: the prepared graph (node names, opcodes, targets with Python
functions spelled as ATen names), every observer's class, which observers are
one shared instance, every observer's scale / zero point after calibration,
every quantized layer's weight scale / zero point (from the reference model),
the reference model's and the quantized (onednn engine) model's outputs.
Also observers alone (MinMax, MovingAverageMinMax, PerChannelMinMax,
Histogram) on seeded data given in the file.
"""
import argparse
import copy
import json
import os
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torchvision  # noqa: E402
from torch.ao.quantization import QConfig, QConfigMapping, get_default_qconfig_mapping  # noqa: E402
from torch.ao.quantization.observer import (HistogramObserver, MinMaxObserver,  # noqa: E402
                                            MovingAverageMinMaxObserver, PerChannelMinMaxObserver)
from torch.ao.quantization.quantize_fx import convert_fx, convert_to_reference_fx, prepare_fx  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "quantization", "goldens", "quantization.json")
MODELS = ["resnet18", "mobilenet_v2", "mobilenet_v3_small"]
SIZE = 64
CALIB_BATCHES, CALIB_BATCH = 4, 2


def gen(seed):
    return torch.Generator().manual_seed(seed)


def build(name):
    """The float model in eval mode, batch-norm statistics set by a train-mode pass."""
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(weights=None)
    m.train()
    with torch.no_grad():
        for i in range(3):
            m(torch.randn(8, 3, SIZE, SIZE, generator=gen(100 + i)))
    return m.eval()


def data():
    calib = torch.stack([torch.randn(CALIB_BATCH, 3, SIZE, SIZE, generator=gen(200 + i))
                         for i in range(CALIB_BATCHES)])
    test = torch.randn(1, 3, SIZE, SIZE, generator=gen(300))
    return calib, test


def minmax_mapping():
    return QConfigMapping().set_global(QConfig(
        activation=MinMaxObserver.with_args(dtype=torch.quint8),
        weight=MinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric)))


def target_name(n):
    """A node's target as fxcpp spells it: Python functions as ATen operators."""
    if n.op == "call_function":
        return "aten::" + getattr(n.target, "__name__", str(n.target))
    if n.op == "call_method":
        return "aten::" + n.target
    return str(n.target)


def floats(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def goldens_for(model, mapping, calib, test):
    prepared = prepare_fx(copy.deepcopy(model), mapping, (test,))
    nodes, types, shared, first_of = [], {}, {}, {}
    for n in prepared.graph.nodes:
        nodes.append([n.name, n.op, target_name(n)])
        if n.op == "call_module":
            mod = prepared.get_submodule(n.target)
            types[n.name] = type(mod).__name__
            if "activation_post_process" in n.target:
                shared[n.target] = first_of.setdefault(id(mod), n.target)
    with torch.no_grad():
        for batch in calib:
            prepared(batch)
    observers = {}
    for n in prepared.graph.nodes:
        if n.op == "call_module" and "activation_post_process" in n.target:
            s, z = prepared.get_submodule(n.target).calculate_qparams()
            observers[n.target] = [float(s), int(z)]
    ref = convert_to_reference_fx(copy.deepcopy(prepared))
    weights = {}
    for name, mod in ref.named_modules():
        if hasattr(mod, "weight_scale"):
            weights[name] = {"scale": floats(mod.weight_scale),
                             "zero_point": [int(v) for v in mod.weight_zero_point.reshape(-1).tolist()]}
    torch.backends.quantized.engine = "onednn"
    quantized = convert_fx(copy.deepcopy(prepared))
    with torch.no_grad():
        ref_out = ref(test)
        q_out = quantized(test)
    last = [n for n in prepared.graph.nodes if n.op == "call_module" and "activation_post_process" in n.target][-1]
    return {"prepared": nodes, "module_types": types, "shared": shared, "observers": observers,
            "weights": weights, "reference_output": floats(ref_out), "quantized_output": floats(q_out),
            "output_scale": observers[last.target][0]}


def observer_goldens():
    """Observers alone on seeded data (the data is in the goldens)."""
    xs = [torch.randn(3, 40, generator=gen(400 + i)) * (1 + i) + 0.3 * i for i in range(4)]
    cases = {
        "MinMaxObserver": MinMaxObserver(),
        "MinMaxObserver_symmetric_qint8": MinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric),
        "MovingAverageMinMaxObserver": MovingAverageMinMaxObserver(),
        "PerChannelMinMaxObserver": PerChannelMinMaxObserver(dtype=torch.qint8, qscheme=torch.per_channel_symmetric),
        "PerChannelMinMaxObserver_affine": PerChannelMinMaxObserver(ch_axis=1),
        "HistogramObserver": HistogramObserver(),
        "HistogramObserver_reduce_range": HistogramObserver(reduce_range=True),
    }
    out = {"inputs": [[floats(x), list(x.shape)] for x in xs]}
    for name, obs in cases.items():
        for x in xs:
            obs(x)
        s, z = obs.calculate_qparams()
        out[name] = {"scale": floats(s), "zero_point": [int(v) for v in z.reshape(-1).tolist()]}
        if isinstance(obs, HistogramObserver):
            out[name]["min_val"] = float(obs.min_val)
            out[name]["max_val"] = float(obs.max_val)
            out[name]["histogram_sum"] = float(obs.histogram.sum())
    return out


def export(out):
    """Each file written beside its place and renamed over it: a test reading
    the files while they are exported again sees old or new ones, never a part."""
    os.makedirs(out, exist_ok=True)
    calib, test = data()

    def atomic(path, write):
        write(path + ".tmp")
        os.replace(path + ".tmp", path)

    for name in MODELS:
        model = build(name)
        base = os.path.join(out, name)
        atomic(base + ".quant.pt", torch.jit.script(model).save)
        atomic(base + ".calib.pt", lambda p: torch.save(calib, p))
        atomic(base + ".test.pt", lambda p: torch.save(test, p))
        print("exported", name)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--export", metavar="DIR", help="write the models and data the C++ test reads")
    p.add_argument("--goldens", metavar="PATH", default=OUT,
                   help="where the goldens go (default: the checked-in file); with --export, also write them "
                        "there, computed on this machine: observer scales depend on the CPU's fp32 kernels")
    a = p.parse_args()
    torch.set_num_threads(1)
    if a.export:
        export(a.export)
        if a.goldens == OUT:
            return
    calib, test = data()
    goldens = {"observers": observer_goldens()}
    for name in MODELS:
        model = build(name)
        goldens[name] = {
            "weight_sum": float(sum(p.double().abs().sum() for p in model.state_dict().values()
                                    if p.is_floating_point())),
            "onednn": goldens_for(model, get_default_qconfig_mapping("onednn"), calib, test),
        }
        # A global MinMax qconfig on mobilenet_v3's hardsigmoid is a ValueError in Python
        # (fixed-qparams ops need their observer); fxcpp keeps such an op float instead.
        if name != "mobilenet_v3_small":
            goldens[name]["minmax"] = goldens_for(model, minmax_mapping(), calib, test)
    # Mostly long float lists: one compact line (write_goldens' indented form is twice the size).
    os.makedirs(os.path.dirname(os.path.abspath(a.goldens)), exist_ok=True)
    with open(a.goldens + ".tmp", "w") as f:
        json.dump(goldens, f, sort_keys=True, separators=(",", ":"))
        f.write("\n")
    os.replace(a.goldens + ".tmp", a.goldens)
    print(f"wrote {os.path.normpath(a.goldens)}")


if __name__ == "__main__":
    main()
