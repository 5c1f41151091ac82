#!/usr/bin/python3
"""Resident memory of a training step: fxcpp.aot_module against eager PyTorch, as a user sees it (issue 66).

One process per (model, engine), 1 thread: resnet18 and mobilenet_v2 (batch 8, 64x64, cross-entropy) and a
TransformerEncoderLayer (d 64, 4 heads, feed-forward 256, dropout 0.1, batch 8 x 32 tokens, a linear head), SGD with
momentum and torch 1.13's zero_grad() (gradients zeroed, not set to None). VmRSS is read before the first step; the
table gives the high-water mark (VmHWM, reset through /proc/self/clear_refs) over the first four steps (which trace and
compile) and over steps 6-8 (steady state), each minus that first reading: what a step needs beyond the model and its
data, gradients and momentum buffers included (they are the same in both engines). The last engine steps SGD inside
the compiled backward (AotModule.sgd_in_backward): each gradient is freed once its parameter is updated, so the
gradients are never all held at once.

    /usr/bin/python3 scripts/bench_training_memory.py --build build [--save-dir docs/bench]

Writes BUILD/bench_training_memory.md, and with --save-dir SAVE/training_memory.md (a part of docs/benchmarks.md).
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_training import cpu_name, write_markdown  # noqa: E402

MODELS = ["resnet18", "mobilenet_v2", "encoder"]
ENGINES = ["eager", "fxcpp min-cut", "fxcpp default", "fxcpp min-cut, SGD in backward"]

CHILD = r'''
import json, sys, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[3])
import torch, torchvision
import fxcpp
torch.set_num_threads(1)
name, engine = sys.argv[1], sys.argv[2]

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024.0

def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")

class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(64, 4, 256, dropout=0.1, batch_first=True)
        self.head = torch.nn.Linear(64, 10)
    def forward(self, x):
        return self.head(self.layer(x)).mean(1)

torch.manual_seed(0)
if name == "encoder":
    model, x = Encoder().train(), torch.randn(8, 32, 64)
else:
    model, x = getattr(torchvision.models, name)(num_classes=10).train(), torch.randn(8, 3, 64, 64)
y = torch.randint(0, 10, (x.shape[0],))
in_backward = engine.endswith("SGD in backward")
if engine != "eager":
    model = fxcpp.aot_module(model, partition="default" if engine == "fxcpp default" else "min-cut")
if in_backward:
    opt = model.sgd_in_backward(lr=0.01, momentum=0.9)
else:
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
before = status("VmRSS")
reset_peak()
peaks = {}
for i in range(8):
    if not in_backward:
        opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    if not in_backward:
        opt.step()
    if i == 3:
        peaks["compile"] = status("VmHWM") - before
    if i == 4:
        reset_peak()
peaks["steady"] = status("VmHWM") - before
peaks["accumulating"] = model._compiled.num_accumulating_backwards() if engine != "eager" else None
peaks["in_backward"] = model.optimizer_in_backward_stats() if in_backward else None
print(json.dumps(peaks))
'''


def measure(build, model, engine):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(["/usr/bin/python3", "-c", CHILD, model, engine, os.path.join(build, "python")],
                         capture_output=True, text=True, env=env, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def render(cpu, rows):
    lines = [f"Machine: {cpu}; 1 thread. Measured {time.strftime('%Y-%m-%d')} by "
             "`scripts/bench_training_memory.py`.", "",
             "Resident memory a training step needs beyond the model and its data, MB: VmRSS before the first step "
             "to the high-water mark of the first four steps (which trace and compile) and of steps 6-8 (steady "
             "state); one process per engine; SGD with momentum, `zero_grad()` (torch 1.13's default: gradients "
             "zeroed, not set to None), so the gradients and the momentum buffers are counted in every column; "
             "in the last, SGD steps inside the compiled backward (`AotModule.sgd_in_backward`, no `.grad` kept: "
             "each gradient is freed once its parameter is updated). In brackets the ratio to eager PyTorch.", "",
             "| model | eager, steps 1-4 | " + " | ".join(e + ", steps 1-4" for e in ENGINES[1:]) +
             " | eager, steps 6-8 | " + " | ".join(e + ", steps 6-8" for e in ENGINES[1:]) + " |",
             "|---|" + "---:|" * (2 * len(ENGINES))]
    for model in MODELS:
        r = rows[model]
        cells = [model]
        for phase in ("compile", "steady"):
            eager = r["eager"][phase]
            cells.append(f"{eager:.0f}")
            cells += [f"{r[e][phase]:.0f} ({r[e][phase] / eager:.2f})" for e in ENGINES[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "The compiled backward added each gradient into `.grad` as computed in "
              + ", ".join(f"{m} {rows[m]['fxcpp min-cut']['accumulating']}" for m in MODELS)
              + " of 8 steps (min-cut; every step after the first, whose parameters had no `.grad` yet). SGD in "
              "backward stepped " + ", ".join(
                  f"{m} {rows[m][ENGINES[3]]['in_backward']['steps']} times "
                  f"({rows[m][ENGINES[3]]['in_backward']['updates_at_gradient']} updates right after their gradient, "
                  f"{rows[m][ENGINES[3]]['in_backward']['updates_after_reads']} after later reads, "
                  f"{rows[m][ENGINES[3]]['in_backward']['updates_at_end']} at the end)" for m in MODELS) + "."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--save-dir")
    args = ap.parse_args()
    rows = {m: {e: measure(args.build, m, e) for e in ENGINES} for m in MODELS}
    write_markdown(render(cpu_name(), rows), args.build, "bench_training_memory.md", args.save_dir,
                   "training_memory.md")


if __name__ == "__main__":
    main()
