#!/usr/bin/python3
"""Goldens of torch.ao.quantization 1.13's quantization-aware training (prepare_qat_fx) for fxcpp's QAT.

    qat_goldens.py --export DIR [--goldens PATH]

writes, for torchvision resnet18 and mobilenet_v2 (seeded random weights,
batch-norm statistics set by a train-mode pass; mobilenet_v2 without dropout,
whose masks would come from each program's own random stream):
    NAME.qat.pt           torch.jit.script of the float model (training mode)
    qat_data.pt           (inputs [steps, batch, 3, 64, 64], labels [steps, batch], test [2, 3, 64, 64])
and PATH (default DIR/qat.json) with what Python's prepare_qat_fx with
get_default_qat_qconfig_mapping("onednn") gives: the prepared graph (node
names, opcodes, targets spelled as ATen names), each call_module's class,
the loss of every SGD step (lr 0.01, momentum 0.9, cross-entropy), then,
after the steps, every fake quantizer's scale / zero point buffers and
calculate_qparams(), the eval-mode output on the test input, and the
reference model's (convert_to_reference_fx) weight qparams and output.
The goldens are computed on the machine that runs the tests (ctest's
quantization_qat_export fixture): fp32 training follows the CPU's kernels.
"""
import argparse
import copy
import json
import os
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision  # noqa: E402
from torch.ao.quantization import get_default_qat_qconfig_mapping  # noqa: E402
from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_qat_fx  # noqa: E402

from quantization_goldens import floats, target_name  # noqa: E402  (this folder)

MODELS = ["resnet18", "mobilenet_v2"]
SIZE, STEPS, BATCH = 64, 3, 4


def gen(seed):
    return torch.Generator().manual_seed(seed)


def build(name):
    """The float model in training mode, batch-norm statistics set by a train-mode pass."""
    torch.manual_seed(0)
    kwargs = {"dropout": 0.0} if name == "mobilenet_v2" else {}
    m = getattr(torchvision.models, name)(weights=None, **kwargs)
    m.train()
    with torch.no_grad():
        for i in range(3):
            m(torch.randn(8, 3, SIZE, SIZE, generator=gen(100 + i)))
    return m


def data():
    inputs = torch.stack([torch.randn(BATCH, 3, SIZE, SIZE, generator=gen(500 + i)) for i in range(STEPS)])
    labels = torch.randint(0, 1000, (STEPS, BATCH), generator=gen(600))
    test = torch.randn(2, 3, SIZE, SIZE, generator=gen(700))
    return inputs, labels, test


def ints(t):
    return [int(v) for v in t.detach().reshape(-1).tolist()]


def goldens_for(model, inputs, labels, test):
    prepared = prepare_qat_fx(copy.deepcopy(model), get_default_qat_qconfig_mapping("onednn"), (test,))
    nodes, types = [], {}
    for n in prepared.graph.nodes:
        nodes.append([n.name, n.op, target_name(n)])
        if n.op == "call_module":
            types[n.name] = type(prepared.get_submodule(n.target)).__name__
    opt = torch.optim.SGD(prepared.parameters(), lr=0.01, momentum=0.9)
    losses = []
    for x, y in zip(inputs, labels):
        opt.zero_grad()
        loss = F.cross_entropy(prepared(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    fake_quants = {}
    for name, mod in prepared.named_modules():
        if hasattr(mod, "fake_quant_enabled") and hasattr(mod, "activation_post_process"):
            s, z = mod.calculate_qparams()
            fake_quants[name] = {"type": type(mod).__name__, "scale": floats(mod.scale), "zero_point": ints(mod.zero_point),
                                 "qparams_scale": floats(s), "qparams_zero_point": ints(z)}
    prepared.eval()
    with torch.no_grad():
        out = prepared(test)
    ref = convert_to_reference_fx(copy.deepcopy(prepared))
    weights = {}
    for name, mod in ref.named_modules():
        if hasattr(mod, "weight_scale"):
            weights[name] = {"scale": floats(mod.weight_scale), "zero_point": ints(mod.weight_zero_point)}
    with torch.no_grad():
        ref_out = ref(test)
    return {"prepared": nodes, "module_types": types, "losses": losses, "fake_quants": fake_quants,
            "output": floats(out), "weights": weights, "reference_output": floats(ref_out)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--export", metavar="DIR", required=True, help="write the models, data and goldens here")
    p.add_argument("--goldens", metavar="PATH", help="where the goldens go (default DIR/qat.json)")
    a = p.parse_args()
    torch.set_num_threads(1)
    os.makedirs(a.export, exist_ok=True)
    inputs, labels, test = data()

    def atomic(path, write):
        write(path + ".tmp")
        os.replace(path + ".tmp", path)

    atomic(os.path.join(a.export, "qat_data.pt"), lambda p: torch.save((inputs, labels, test), p))
    goldens = {}
    for name in MODELS:
        model = build(name)
        atomic(os.path.join(a.export, name + ".qat.pt"), torch.jit.script(model).save)
        goldens[name] = goldens_for(model, inputs, labels, test)
        print("exported", name, "losses", goldens[name]["losses"])
    path = a.goldens or os.path.join(a.export, "qat.json")
    atomic(path, lambda p: open(p, "w").write(json.dumps(goldens, sort_keys=True, separators=(",", ":")) + "\n"))
    print("wrote", os.path.normpath(path))


if __name__ == "__main__":
    main()
