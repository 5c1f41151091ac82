#!/usr/bin/python3
"""The int8 accuracy fixture of issue 22: a small CNN trained on real data.

sklearn's digits (sklearn.datasets.load_digits, Debian's python3-sklearn: 1,797
8x8 images of handwritten digits, 0-16 scaled to 0-1), split with a fixed seed
into 1,297 training and 500 held-out images. A CNN (conv-bn-relu x2, max pool,
linear) is trained on the training split with a fixed seed (a few seconds on
one thread), then, into OUT_DIR:

  digits.script.pt    torch.jit.script of the model (eval mode)
  digits.trace.pt     torch.jit.trace of it
  digits.test.pt      the held-out split: torch.save((images [500, 1, 8, 8], labels [500] int64))
  digits.input.pt     the first 64 held-out images: torch.save((images,))  (fxcpp run --input)
  digits.calib.pt     calibration data, 4 batches of 64 training images: torch.save([(images,), ...])
  digits.train_data.pt  the training split: torch.save((images [1297, 1, 8, 8], labels [1297] int64))
                      (training through fx::aot_module, tests/aot/digits_training_test.cpp)
  digits.int8.pt      Python's int8 of the model (python/quantize_baseline.py: quantize_fx,
                      onednn, calibrated on digits.calib.pt), traced and frozen
  digits.json         {"fp32_accuracy", "python_int8_accuracy", "python_int8_7bit_accuracy" (7-bit
                      weights), "train_seconds", ...} on the held-out split
  digits.train.pt     torch.jit.script of the model in training mode (which quantize refuses)
  bad_arity.pt, bad_shape.pt, bad_element.pt, corrupt.pt
                      calibration files fxcpp quantize refuses (tests/cli/quantize.cmake): two
                      arguments for a one-input model, 3-channel images, a list holding a bare
                      tensor, and a torch.save file cut in half

    digits_fixture.py OUT_DIR
"""
import copy
import json
import os
import sys
import time
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quantize_baseline import python_int8, save_int8_torchscript  # noqa: E402

SEED = 0
TEST = 500
CALIB_BATCHES, CALIB_BATCH = 4, 64


class DigitsNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.relu2 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        x = self.relu1(self.bn1(self.conv1(x)))
        x = self.pool(self.relu2(self.bn2(self.conv2(x))))
        return self.fc(torch.flatten(x, 1))


def data():
    from sklearn.datasets import load_digits
    d = load_digits()
    images = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(d.target, dtype=torch.int64)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(SEED))
    test, train = order[:TEST], order[TEST:]
    return (images[train], labels[train]), (images[test], labels[test])


def accuracy(model, images, labels):
    with torch.no_grad():
        return float((model(images).argmax(1) == labels).float().mean())


def save(path, value):
    torch.save(value, path + ".tmp")
    os.replace(path + ".tmp", path)


def save_jit(m, path):
    """A TorchScript module written beside `path` and renamed over it."""
    m.save(path + ".tmp")
    os.replace(path + ".tmp", path)


def fit(model, xtr, ytr, lr, epochs):
    """Adam on cross-entropy, batches of 32 in an order drawn from a generator seeded with SEED."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(SEED)
    for _ in range(epochs):
        model.train()
        perm = torch.randperm(len(ytr), generator=g)
        for i in range(0, len(ytr), 32):
            idx = perm[i:i + 32]
            opt.zero_grad()
            nn.functional.cross_entropy(model(xtr[idx]), ytr[idx]).backward()
            opt.step()
    model.eval()


def calibration_batches(xtr):
    """CALIB_BATCHES batches of CALIB_BATCH training images, as forward-argument tuples."""
    return [(xtr[i * CALIB_BATCH:(i + 1) * CALIB_BATCH].clone(),) for i in range(CALIB_BATCHES)]


def start():
    """A fixture run's start: the output directory (argv[1], default digits; created), 1 thread, the seed set,
    then data(): (out, (xtr, ytr), (xte, yte))."""
    out = sys.argv[1] if len(sys.argv) > 1 else "digits"
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    return (out,) + data()


def main():
    out, (xtr, ytr), (xte, yte) = start()
    model = DigitsNet()
    t0 = time.time()
    fit(model, xtr, ytr, 3e-3, 15)
    train_seconds = time.time() - t0
    fp32 = accuracy(model, xte, yte)

    example = (xte[:1],)
    calib = calibration_batches(xtr)
    q = python_int8(model, example, calib)
    int8 = accuracy(q, xte, yte)
    # 7-bit weights (quant_min -64, quant_max 63), fxcpp's with_weight_range(-64, 63).
    int8_7bit = accuracy(python_int8(model, example, calib, weight_range=(-64, 63)), xte, yte)

    save_jit(torch.jit.script(model), os.path.join(out, "digits.script.pt"))
    save_jit(torch.jit.script(copy.deepcopy(model).train()), os.path.join(out, "digits.train.pt"))
    with torch.no_grad():
        save_jit(torch.jit.trace(model, example), os.path.join(out, "digits.trace.pt"))
    save_int8_torchscript(q, example, os.path.join(out, "digits.int8.pt"))
    save(os.path.join(out, "digits.test.pt"), (xte.clone(), yte.clone()))
    save(os.path.join(out, "digits.train_data.pt"), (xtr.clone(), ytr.clone()))
    save(os.path.join(out, "digits.input.pt"), (xte[:64].clone(),))
    save(os.path.join(out, "digits.calib.pt"), calib)
    save(os.path.join(out, "bad_arity.pt"), (xtr[:8].clone(), xtr[:8].clone()))
    save(os.path.join(out, "bad_shape.pt"), (torch.zeros(8, 3, 8, 8),))
    save(os.path.join(out, "bad_element.pt"), [(xtr[:8].clone(),), xtr[8:16].clone()])
    with open(os.path.join(out, "digits.calib.pt"), "rb") as f:
        whole = f.read()
    with open(os.path.join(out, "corrupt.pt.tmp"), "wb") as f:
        f.write(whole[:len(whole) // 2])
    os.replace(os.path.join(out, "corrupt.pt.tmp"), os.path.join(out, "corrupt.pt"))
    result = {"fp32_accuracy": fp32, "python_int8_accuracy": int8, "python_int8_7bit_accuracy": int8_7bit,
              "test_images": len(yte),
              "train_images": len(ytr), "train_seconds": round(train_seconds, 2),
              "calibration": [CALIB_BATCHES, CALIB_BATCH]}
    with open(os.path.join(out, "digits.json.tmp"), "w") as f:
        json.dump(result, f, indent=1)
    os.replace(os.path.join(out, "digits.json.tmp"), os.path.join(out, "digits.json"))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
