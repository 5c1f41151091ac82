#!/usr/bin/python3
"""Python's int8 against its fp32 on torchvision models, for fxcpp's to be held to (issue 22).

For resnet18 and mobilenet_v2 (random seeded weights whose batch-norm statistics
are set by a train-mode pass over random data, as python/goldens/quantization_goldens.py
builds them; 64x64 inputs), into OUT_DIR:

  NAME.agree.pt          torch.jit.script of the float model (eval mode)
  NAME.agree_calib.pt    calibration data: a list of 4 tuples of one [2, 3, 64, 64] tensor
  NAME.agree_inputs.pt   64 seeded inputs: torch.save((images [64, 3, 64, 64],))
  NAME.agree.json        Python's int8 (quantize_fx, onednn, python/quantize_baseline.py,
                         calibrated on NAME.agree_calib.pt) against fp32 on those inputs:
                         relative_error = ||int8 - fp32|| / ||fp32|| (all logits), top1_agreement =
                         the fraction of inputs whose arg max is the same

    quantization_agreement.py OUT_DIR
"""
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "goldens"))
from quantization_goldens import SIZE, build, data  # noqa: E402
from quantize_baseline import python_int8  # noqa: E402

MODELS = ["resnet18", "mobilenet_v2"]
INPUTS = 64


def compare(out, ref):
    rel = float((out - ref).norm() / ref.norm())
    agree = float((out.argmax(1) == ref.argmax(1)).float().mean())
    return rel, agree


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    calib, _ = data()
    batches = [(calib[i].clone(),) for i in range(calib.size(0))]
    images = torch.randn(INPUTS, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(500))

    def atomic(path, write):
        write(path + ".tmp")
        os.replace(path + ".tmp", path)

    for name in MODELS:
        model = build(name)
        q = python_int8(model, (images[:1],), batches)
        with torch.no_grad():
            fp32 = model(images)
            int8 = q(images)
        rel, agree = compare(int8, fp32)
        base = os.path.join(out, name)
        atomic(base + ".agree.pt", torch.jit.script(model).save)
        atomic(base + ".agree_calib.pt", lambda p: torch.save(batches, p))
        atomic(base + ".agree_inputs.pt", lambda p: torch.save((images,), p))
        result = {"relative_error": rel, "top1_agreement": agree, "inputs": INPUTS, "size": SIZE}
        atomic(base + ".agree.json", lambda p: open(p, "w").write(json.dumps(result) + "\n"))
        print(name, json.dumps(result))


if __name__ == "__main__":
    main()
