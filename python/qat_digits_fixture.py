#!/usr/bin/python3
"""The quantization-aware-training fixture of issue 35: a depthwise-separable CNN on real data.

sklearn's digits split as python/digits_fixture.py splits them; a mobilenet-style
net (conv-bn-relu6 stem, two depthwise-separable blocks with ReLU6, width 8 —
the kind whose int8 accuracy drops) trained with a fixed seed, then, into OUT_DIR:

  dw.script.pt     torch.jit.script of the model (eval mode)
  dw.trace.pt      torch.jit.trace of it
  dw.json          {"fp32_accuracy", "python_reference_int8_accuracy", "python_int8_accuracy",
                    "python_qat_reference_int8_accuracy", "python_qat_losses", ...} on the
                   500 held-out images:
                   Python's post-training int8 (prepare_fx, onednn, calibrated on the first
                   4 x 64 training images) as its reference model (convert_to_reference_fx)
                   and as its onednn int8 model (convert_fx), and Python's own QAT
                   (prepare_qat_fx, the recipe of tests/quantization/qat_digits_test.cpp)
                   as a reference model, with the loss of each of its training steps
  digits_qat.json  the same for digits_fixture.py's CNN (digits.script.pt, which
                   digits_fixture.py writes first: ctest runs that fixture before this one)

The training split, held-out split and calibration data are digits_fixture.py's
files (digits.train_data.pt, digits.test.pt, digits.calib.pt), which this
fixture also writes when they are missing.

    qat_digits_fixture.py OUT_DIR
    qat_digits_fixture.py OUT_DIR --losses-only SUFFIX

--losses-only trains nothing new: Python's QAT of the models saved before
(dw.script.pt, digits.script.pt) again, writing only the losses of its steps to
dw{SUFFIX}.json and digits_qat{SUFFIX}.json. Run with oneDNN held at another
ISA (ONEDNN_MAX_CPU_ISA=AVX2: ctest's quantization_qat_digits_AVX2), these are
the losses of that ISA's fp32 kernels, which the C++ test held there compares with.
"""
import copy
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.ao.quantization import get_default_qat_qconfig_mapping, get_default_qconfig_mapping  # noqa: E402
from torch.ao.quantization.quantize_fx import convert_fx, convert_to_reference_fx, prepare_fx, prepare_qat_fx  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from digits_fixture import SEED, DigitsNet, accuracy, calibration_batches, fit, save, save_jit, start  # noqa: E402

WIDTH = 8
QAT_EPOCHS, QAT_LR, QAT_BATCH = 3, 1e-3, 32


def conv_bn(cin, cout, k, groups=1):
    return [nn.Conv2d(cin, cout, k, padding=k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout), nn.ReLU6()]


class DepthwiseNet(nn.Module):
    def __init__(self, w=WIDTH):
        super().__init__()
        self.features = nn.Sequential(
            *conv_bn(1, w, 3),
            *conv_bn(w, w, 3, groups=w), *conv_bn(w, 2 * w, 1),
            nn.MaxPool2d(2),
            *conv_bn(2 * w, 2 * w, 3, groups=2 * w), *conv_bn(2 * w, 2 * w, 1),
            nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(2 * w, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


def qat_finetune(model, xtr, ytr, example):
    """The C++ test's recipe: prepare_qat, SGD (momentum 0.9) for QAT_EPOCHS epochs of
    seeded batches, batch-norm statistics frozen after the first epoch. Returns the
    reference model (converted before anything else runs the trained model: in eval
    mode its fake quantizers still observe) and the loss of every step."""
    qat = prepare_qat_fx(copy.deepcopy(model).train(), get_default_qat_qconfig_mapping("onednn"), example)
    opt = torch.optim.SGD(qat.parameters(), lr=QAT_LR, momentum=0.9)
    g = torch.Generator().manual_seed(SEED + 1)
    losses = []
    for epoch in range(QAT_EPOCHS):
        if epoch == 1:
            qat.apply(torch.nn.intrinsic.qat.freeze_bn_stats)
        perm = torch.randperm(len(ytr), generator=g)
        for i in range(0, len(ytr), QAT_BATCH):
            idx = perm[i:i + QAT_BATCH]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(qat(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            losses.append(loss.item())
    qat.eval()
    return convert_to_reference_fx(qat), losses


def report(model, xtr, ytr, xte, yte, calib):
    """fp32, Python's post-training int8 (reference and onednn) and Python's QAT reference accuracy."""
    example = (xte[:1],)
    prepared = prepare_fx(copy.deepcopy(model), get_default_qconfig_mapping("onednn"), example)
    with torch.no_grad():
        for (b,) in calib:
            prepared(b)
    torch.backends.quantized.engine = "onednn"
    qat_reference, qat_losses = qat_finetune(model, xtr, ytr, example)
    return {"fp32_accuracy": accuracy(model, xte, yte),
            "python_reference_int8_accuracy": accuracy(convert_to_reference_fx(copy.deepcopy(prepared)), xte, yte),
            "python_int8_accuracy": accuracy(convert_fx(copy.deepcopy(prepared)), xte, yte),
            "python_qat_reference_int8_accuracy": accuracy(qat_reference, xte, yte),
            "python_qat_losses": qat_losses,
            "test_images": len(yte),
            "qat_recipe": {"epochs": QAT_EPOCHS, "lr": QAT_LR, "batch": QAT_BATCH, "momentum": 0.9,
                           "freeze_bn_after_epoch": 1}}


def losses_only(out, suffix):
    torch.set_num_threads(1)
    xtr, ytr = torch.load(os.path.join(out, "digits.train_data.pt"))
    xte = torch.load(os.path.join(out, "digits.test.pt"))[0]
    for net, script, name in ((DepthwiseNet(), "dw.script.pt", "dw"), (DigitsNet(), "digits.script.pt", "digits_qat")):
        net.load_state_dict(torch.jit.load(os.path.join(out, script)).state_dict())
        _, losses = qat_finetune(net.eval(), xtr, ytr, (xte[:1],))
        write_json(os.path.join(out, name + suffix + ".json"), {"python_qat_losses": losses})


def main():
    if len(sys.argv) == 4 and sys.argv[2] == "--losses-only":
        losses_only(sys.argv[1], sys.argv[3])
        return
    out, (xtr, ytr), (xte, yte) = start()
    model = DepthwiseNet()
    fit(model, xtr, ytr, 1e-2, 30)
    example = (xte[:1],)
    calib = calibration_batches(xtr)
    result = report(model, xtr, ytr, xte, yte, calib)
    result["width"] = WIDTH
    save_jit(torch.jit.script(model), os.path.join(out, "dw.script.pt"))
    save_jit(torch.jit.trace(model, example), os.path.join(out, "dw.trace.pt"))
    if not os.path.exists(os.path.join(out, "digits.train_data.pt")):
        save(os.path.join(out, "digits.train_data.pt"), (xtr.clone(), ytr.clone()))
        save(os.path.join(out, "digits.test.pt"), (xte.clone(), yte.clone()))
        save(os.path.join(out, "digits.calib.pt"), calib)
    write_json(os.path.join(out, "dw.json"), result)
    cnn_path = os.path.join(out, "digits.script.pt")
    if os.path.exists(cnn_path):
        cnn = DigitsNet()
        cnn.load_state_dict(torch.jit.load(cnn_path).state_dict())
        write_json(os.path.join(out, "digits_qat.json"), report(cnn.eval(), xtr, ytr, xte, yte, calib))


def write_json(path, value):
    with open(path + ".tmp", "w") as f:
        json.dump(value, f, indent=1)
    os.replace(path + ".tmp", path)
    print(os.path.basename(path), json.dumps(value))


if __name__ == "__main__":
    main()
