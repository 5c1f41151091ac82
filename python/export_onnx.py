#!/usr/bin/python3
"""Exports the bench models to ONNX for the ONNX Runtime comparison (scripts/bench_ort.py).

The models are torchvision's with honest random weights (python/export_models.py's
honest_model: seeded weights, batch-norm statistics from a pass over random
images, zero-initialised heads drawn again, outputs checked to be of order 1;
the optimiser table's NAME.bench.pt files keep torchvision's initialisation,
where vit_b_16's output is identically 0 and efficientnet_b0's of order 1e-14,
nothing to check an engine against), 224x224. Into --out, per model:

  NAME.pt              torch.jit.script of the model (what fxcpp and TorchScript run)
  NAME.input.pt        the seeded input, 1x3x224x224 (the optimiser bench's: randn, seed 1)

and for every batch B (the input repeated along dim 0, as `fxcpp bench --batch` does):

  NAME.bB.onnx         torch.onnx.export, opset 14, static shapes (input "input", output "output")
  NAME.bB.input.bin    the batched input, float32 little-endian, C order
  NAME.bB.output.bin   the eager output of the torchvision model on it (what ORT is checked against)
  NAME.bB.json         {"input_shape", "output_shape", "max_rel_diff_script"}: the eager output's
                       max |difference| from the scripted model's, relative to max |output|

vit_b_16 is exported with grad enabled: in no-grad eval mode its attention
takes PyTorch's fused fast path, which has no ONNX form.
Files newer than the scripts that make them are kept (--force: export anyway).

    /usr/bin/python3 python/export_onnx.py --out build/ort/models [--batch 1 8] [resnet18 ...]
"""
import argparse
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402

from export_models import honest_model  # noqa: E402
from honest_weights import check_order_one  # noqa: E402

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "vit_b_16"]
GRAD_EXPORT = ("vit_b_16",)  # exported with grad enabled (see the module comment)
SIZE = 224
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = [os.path.join(HERE, f) for f in ("export_onnx.py", "export_models.py", "honest_weights.py")]


def paths(out, name, batch):
    stem = os.path.join(out, "%s.b%d" % (name, batch))
    return {k: stem + ext for k, ext in
            (("onnx", ".onnx"), ("input", ".input.bin"), ("output", ".output.bin"), ("info", ".json"))}


def up_to_date(files, sources):
    newest = max(os.path.getmtime(s) for s in sources)
    return all(os.path.exists(f) and os.path.getmtime(f) > newest for f in files)


def bench_model(out, name):
    """The honest model, its scripted twin and the input: NAME.pt and NAME.input.pt written when out of date."""
    model = honest_model(name, SIZE)
    x = torch.randn(1, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(1))
    check_order_one(name, model, (x,))
    script_path, input_path = os.path.join(out, name + ".pt"), os.path.join(out, name + ".input.pt")
    if not up_to_date([script_path, input_path], SOURCES):
        torch.jit.script(model).save(script_path + ".tmp")
        os.replace(script_path + ".tmp", script_path)
        torch.save(x, input_path)
        print("exported %s to %s" % (name, script_path), flush=True)
    return model, torch.jit.load(script_path).eval(), x


def rel_diff(a, b):
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


def export(out, name, batches, force):
    files = [os.path.join(out, name + ".pt"), os.path.join(out, name + ".input.pt")]
    todo = [b for b in batches if force or not up_to_date(list(paths(out, name, b).values()) + files, SOURCES)]
    if not todo:
        print("up to date", name, flush=True)
        return
    model, scripted, x1 = bench_model(out, name)
    for batch in todo:
        p = paths(out, name, batch)
        x = x1.repeat(batch, *([1] * (x1.dim() - 1)))
        with torch.no_grad():
            y = model(x)
            y_script = scripted(x)
        diff = rel_diff(y, y_script)
        if diff > 1e-4:
            raise RuntimeError("%s: the scripted model differs from the eager one by %.1e" % (name, diff))
        with torch.set_grad_enabled(name in GRAD_EXPORT):
            torch.onnx.export(model, x, p["onnx"] + ".tmp", opset_version=14, input_names=["input"],
                              output_names=["output"], do_constant_folding=True)
        os.replace(p["onnx"] + ".tmp", p["onnx"])
        x.contiguous().numpy().astype("<f4").tofile(p["input"])
        y.contiguous().numpy().astype("<f4").tofile(p["output"])
        with open(p["info"], "w") as f:
            json.dump({"model": name, "batch": batch, "opset": 14, "input_shape": list(x.shape),
                       "output_shape": list(y.shape), "max_rel_diff_script": diff}, f)
        print("exported %s batch %d to %s" % (name, batch, p["onnx"]), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--force", action="store_true")
    ap.add_argument("names", nargs="*", default=MODELS)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    for name in a.names:
        if name not in MODELS:
            sys.exit("export_onnx.py: unknown model '%s' (valid: %s)" % (name, ", ".join(MODELS)))
        export(a.out, name, a.batch, a.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
