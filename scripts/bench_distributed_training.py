#!/usr/bin/python3
"""`make bench`, issue 36: distributed training over c10d Gloo on this machine, 1 thread per rank.

Every number comes from the fxcpp command line (`fxcpp train-dp`,
`fxcpp train-pipeline`, under `fxcpp launch` for 2 ranks), each
configuration in its own processes, over 127.0.0.1:
  - data parallel (DataParallelTrainer, DDP's design): one process at the
    per-rank batch against 2 ranks at twice that batch (the same work per
    rank), on torchvision resnet18 (BUILD/models/resnet18.pt, 224x224) and
    a transformer encoder (4 layers, d 256, 64 tokens, scripted here):
    samples/s, the speedup, and how long the gradient all-reduce ran per step
    and how much of it while backward still ran (DDP's overlap);
  - pipeline (PipelineTrainer): resnet50 (BUILD/models/resnet50.bench.pt),
    batch 32 in 8 microbatches, one process (the same microbatches,
    gradients accumulated) against 2 stages under GPipe and 1F1B: samples/s,
    the speedup, rank 0's peak resident memory (VmHWM: stage 0 holds the
    most activations) and the schedules simulated on the measured stage times.

Prints one markdown document and writes it to SAVE_DIR/bench_distributed_training.md,
the raw results to SAVE_DIR/bench_distributed_training.json (--save-dir, default the build dir).

    /usr/bin/python3 scripts/bench_distributed_training.py [--build build] [--save-dir DIR] [--quick] [--render]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_markdown import (add_save_args, command_line, cpu_name, load_average, measured, print_saved,  # noqa: E402
                            run_paths, save_run, utc_now)

NAME = "bench_distributed_training"


def log(msg):
    print("bench_distributed_training: " + msg, file=sys.stderr, flush=True)


def child_env():
    env = dict(os.environ, FXCPP_NO_PROGRESS="1", OMP_NUM_THREADS="1")
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(k, None)
    return env


def run(cmd):
    log(" ".join(cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env())
    if p.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stdout))
    return p.stdout


def number(pattern, text):
    m = re.search(pattern, text, re.M)
    if not m:
        sys.exit("no match for %r in:\n%s" % (pattern, text))
    return float(m.group(1))


def make_inputs(tmp, quick):
    """The images (224x224, 1000 classes) and the encoder with its tokens, as torch.save / torch.jit.script write them."""
    import torch

    class Encoder(torch.nn.Module):
        def __init__(self, layers=4, d=256, classes=10):
            super().__init__()
            self.layers = torch.nn.ModuleList(
                [torch.nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, batch_first=True) for _ in range(layers)])
            self.head = torch.nn.Linear(d, classes)

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return self.head(x.mean(1))

    torch.manual_seed(0)
    torch.save((torch.randn(64, 3, 224, 224), torch.randint(0, 1000, (64,))), tmp + "/images.pt")
    torch.save((torch.randn(64, 64, 256), torch.randint(0, 10, (64,))), tmp + "/tokens.pt")
    torch.jit.script(Encoder(2 if quick else 4)).save(tmp + "/encoder.pt")


def data_parallel(fxcpp, model, data, per_rank, steps):
    common = ["--data", data, "--steps", str(steps), "--lr", "0.001"]
    one = run([fxcpp, "train-dp", model, "--batch", str(per_rank)] + common)
    two = run([fxcpp, "launch", "--nproc", "2", "--", "fxcpp", "train-dp", model, "--batch", str(2 * per_rank)] + common)
    r = {"one": number(r"^throughput: ([0-9.]+) samples/s", one), "two": number(r"^throughput: ([0-9.]+) samples/s", two)}
    r["speedup"] = r["two"] / r["one"]
    r["allreduce_ms"] = number(r"^gradient all-reduce: ([0-9.e+-]+) ms per step", two)
    r["overlap_ms"] = number(r"ms per step, ([0-9.e+-]+) ms of it while backward ran", two)
    r["backward_ms"] = number(r"\(backward ([0-9.e+-]+) ms", two)
    r["buckets"] = int(number(r"([0-9]+) gradient buckets?", two))
    return r


def pipeline(fxcpp, model, data, batch, microbatches, steps):
    common = ["--data", data, "--steps", str(steps), "--batch", str(batch), "--microbatches", str(microbatches),
              "--lr", "0.001"]
    out = {}
    text = run([fxcpp, "train-pipeline", model] + common)
    out["one"] = {"throughput": number(r"^throughput: ([0-9.]+) samples/s", text),
                  "peak_mib": number(r"peak resident memory ([0-9.]+) MiB", text)}
    for schedule in ("gpipe", "1f1b"):
        text = run([fxcpp, "launch", "--nproc", "2", "--", "fxcpp", "train-pipeline", model, "--schedule", schedule]
                   + common)
        out[schedule] = {
            "throughput": number(r"^throughput: ([0-9.]+) samples/s", text),
            "peak_mib": number(r"peak resident memory ([0-9.]+) MiB", text),
            "kept": int(number(r"stage 0 kept at most ([0-9]+) microbatches", text)),
            "simulated": re.search(r"^simulated on these stage times.*$", text, re.M).group(0),
        }
        out[schedule]["speedup"] = out[schedule]["throughput"] / out["one"]["throughput"]
    return out


def render(d):
    lines = ["## Distributed training (`scripts/bench_distributed_training.py`)", ""]
    m = measured(d)
    if m:
        lines += [m, ""]
    lines += ["Data parallel: one process at the per-rank batch vs 2 ranks (`fxcpp launch --nproc 2 -- fxcpp train-dp`) "
              "at twice the batch, 1 thread per rank; samples/s over the steps after the first.", "",
              "| model | per-rank batch | 1 process | 2 ranks | speedup | all-reduce per step | of it while backward ran | backward | buckets |",
              "|---|---|---|---|---|---|---|---|---|"]
    for name, r in d["data_parallel"].items():
        lines.append("| %s | %d | %.2f | %.2f | %.2fx | %.1f ms | %.1f ms | %.1f ms | %d |" % (
            name, r["per_rank"], r["one"], r["two"], r["speedup"], r["allreduce_ms"], r["overlap_ms"],
            r["backward_ms"], r["buckets"]))
    p = d["pipeline"]
    lines += ["", "Pipeline: resnet50, batch %d in %d microbatches; one process accumulating the same microbatches vs "
              "2 stages (`fxcpp train-pipeline`), 1 thread per rank." % (p["batch"], p["microbatches"]), "",
              "| run | samples/s | speedup | stage 0 keeps | rank 0 peak resident memory |", "|---|---|---|---|---|",
              "| 1 process | %.2f | 1.00x | %d | %.0f MiB |" % (p["one"]["throughput"], p["microbatches"], p["one"]["peak_mib"])]
    for schedule in ("gpipe", "1f1b"):
        s = p[schedule]
        lines.append("| 2 stages, %s | %.2f | %.2fx | %d microbatches | %.0f MiB |" % (
            schedule, s["throughput"], s["speedup"], s["kept"], s["peak_mib"]))
    lines += ["", "Simulated on the measured stage times (2 stages, links free): " + p["1f1b"]["simulated"].split(": ", 1)[1], ""]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--quick", action="store_true", help="fewer steps, a 2-layer encoder")
    add_save_args(ap, NAME)
    args = ap.parse_args()
    json_path, md_path = run_paths(args, NAME)
    if args.render:
        return print_saved(json_path, render)
    fxcpp = os.path.join(args.build, "fxcpp")
    models = os.path.join(args.build, "models")
    for f in ("resnet18.pt", "resnet50.bench.pt"):
        if not os.path.exists(os.path.join(models, f)):
            sys.exit("%s: missing (ctest -L models, or make test, exports it)" % os.path.join(models, f))
    start = time.time()
    data = {"date": utc_now(), "cpu": cpu_name(), "cpus": os.cpu_count(), "command": command_line(__file__),
            "load_start": load_average(), "data_parallel": {}}
    steps = 3 if args.quick else 6
    with tempfile.TemporaryDirectory() as tmp:
        make_inputs(tmp, args.quick)
        for name, model, d, per_rank in (("resnet18", os.path.join(models, "resnet18.pt"), tmp + "/images.pt", 8),
                                         ("transformer encoder", tmp + "/encoder.pt", tmp + "/tokens.pt", 16)):
            r = data_parallel(fxcpp, model, d, per_rank, steps)
            r["per_rank"] = per_rank
            data["data_parallel"][name] = r
        p = pipeline(fxcpp, os.path.join(models, "resnet50.bench.pt"), tmp + "/images.pt", 32, 8, 2 if args.quick else 4)
        p.update(batch=32, microbatches=8)
        data["pipeline"] = p
    save_run(data, start, json_path, md_path, render)


if __name__ == "__main__":
    main()
