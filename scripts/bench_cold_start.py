#!/usr/bin/python3
"""Cold start of an optimised model (issue 23), each start its own process.

    bench_cold_start.py [--build BUILD] [--models NAME...] [--runs N]

For each model (torchvision, random seeded weights, 224x224, batch 1; the
NAME.bench.pt files of scripts/bench_optimize.py, exported on first use):
`fxcpp optimize NAME.bench.pt -o NAME.opt.fx` once, then N runs of each, alternating:

  fxcpp:        examples/deploy NAME.opt.fx        fx::load + first forward
  TorchScript:  examples/deploy --torchscript      torch::jit::load + freeze + optimize_for_inference
                NAME.bench.pt                      + first forward

with OMP_NUM_THREADS=1. Prints a markdown table of the medians: load, first
forward, cold start (their sum) and its ratio fxcpp / TorchScript, a steady
forward, and each process's peak resident memory (getrusage). Names the CPU.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import bench_optimize  # noqa: E402  (export_models, log: the same bench models)

LINE = re.compile(r"loaded \S+ in ([0-9.]+) ms; first forward ([0-9.]+) ms, then ([0-9.]+) ms; "
                  r"peak resident memory ([0-9.]+) MB")


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def run(cmd):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    m = LINE.search(out.stdout)
    if out.returncode != 0 or not m:
        raise SystemExit("bench_cold_start: %s failed:\n%s%s" % (" ".join(cmd), out.stdout, out.stderr))
    return [float(g) for g in m.groups()]  # load, first, steady, peak MB


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", nargs="+", default=["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0"])
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    fxcpp = os.path.join(a.build, "fxcpp")
    deploy = os.path.join(a.build, "examples", "deploy")
    models_dir = os.path.join(a.build, "models")
    bench_optimize.export_models(models_dir, a.models)
    rows = []
    for name in a.models:
        pt = os.path.join(models_dir, name + ".bench.pt")
        inp = os.path.join(models_dir, name + ".bench.input.pt")
        fx_file = os.path.join(models_dir, name + ".opt.fx")
        subprocess.run([fxcpp, "optimize", pt, "--input", inp, "-o", fx_file], check=True, capture_output=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
        fx, ts = [], []
        for _ in range(a.runs):
            fx.append(run([deploy, fx_file, inp]))
            ts.append(run([deploy, "--torchscript", pt, inp]))
        med = lambda runs, i: statistics.median(r[i] for r in runs)  # noqa: E731
        cold_fx = statistics.median(r[0] + r[1] for r in fx)
        cold_ts = statistics.median(r[0] + r[1] for r in ts)
        rows.append((name, med(fx, 0), med(fx, 1), cold_fx, med(ts, 0), med(ts, 1), cold_ts, cold_fx / cold_ts,
                     med(fx, 2), med(ts, 2), med(fx, 3), med(ts, 3)))
        bench_optimize.log("%s: cold start fxcpp %.1f ms, TorchScript %.1f ms" % (name, cold_fx, cold_ts))
    print("Cold start, %s, 1 thread, batch 1, 224x224, median of %d runs each (own process per run)\n" %
          (cpu_name(), a.runs))
    print("| model | fxcpp load | first fwd | cold | TS load+freeze+opt | first fwd | cold | fxcpp / TS | "
          "steady fxcpp | steady TS | peak MB fxcpp | peak MB TS |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.0f | %.0f |" % r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
