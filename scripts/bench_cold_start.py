#!/usr/bin/python3
"""Cold start of an optimised model (issue 23), each start its own process.

    bench_cold_start.py [--build BUILD] [--save-dir DIR] [--models NAME...] [--runs N] [--render]

For each model (torchvision, random seeded weights, 224x224, batch 1; the
NAME.bench.pt files of scripts/bench_optimize.py, exported on first use):
`fxcpp optimize NAME.bench.pt -o NAME.opt.fx` once, then N runs of each, alternating:

  fxcpp:        examples/deploy NAME.opt.fx        fx::load + first forward
  TorchScript:  examples/deploy --torchscript      torch::jit::load + freeze + optimize_for_inference
                NAME.bench.pt                      + first forward

with OMP_NUM_THREADS=1. Prints a markdown table of the medians: load, first
forward, cold start (their sum) and its ratio fxcpp / TorchScript, a steady
forward, and each process's peak resident memory (getrusage), with the date,
the CPU and the load average of the run; writes it to SAVE_DIR/bench_cold_start.md
and the run to SAVE_DIR/bench_cold_start.json (--save-dir, default the build
dir; `make bench` saves into docs/bench/; --render re-prints the markdown).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import bench_optimize  # noqa: E402  (export_models, log: the same bench models)
from bench_markdown import (add_save_args, command_line, cpu_name, load_average, measured, print_saved,  # noqa: E402
                            run_paths, save_run, utc_now)

LINE = re.compile(r"loaded \S+ in ([0-9.]+) ms; first forward ([0-9.]+) ms, then ([0-9.]+) ms; "
                  r"peak resident memory ([0-9.]+) MB")


def run(cmd):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    m = LINE.search(out.stdout)
    if out.returncode != 0 or not m:
        raise SystemExit("bench_cold_start: %s failed:\n%s%s" % (" ".join(cmd), out.stdout, out.stderr))
    return [float(g) for g in m.groups()]  # load, first, steady, peak MB


# The columns of a row: (key in the saved run, format).
COLUMNS = [("fx_load_ms", "%.1f"), ("fx_first_ms", "%.1f"), ("fx_cold_ms", "%.1f"), ("ts_load_ms", "%.1f"),
           ("ts_first_ms", "%.1f"), ("ts_cold_ms", "%.1f"), ("cold_ratio", "%.2f"), ("fx_steady_ms", "%.2f"),
           ("ts_steady_ms", "%.2f"), ("fx_peak_mb", "%.0f"), ("ts_peak_mb", "%.0f")]


def render(data):
    """The markdown of a run (data: what main() saved)."""
    head = measured(data)
    lines = [head, ""] if head else []
    lines += ["Cold start, %s, 1 thread, batch 1, 224x224, median of %d runs each (own process per run)" %
              (data["cpu"], data["runs"]), "",
              "| model | fxcpp load | first fwd | cold | TS load+freeze+opt | first fwd | cold | fxcpp / TS | "
              "steady fxcpp | steady TS | peak MB fxcpp | peak MB TS |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        lines.append("| %s | %s |" % (r["model"], " | ".join(f % r[k] for k, f in COLUMNS)))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", nargs="+", default=["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0"])
    ap.add_argument("--runs", type=int, default=5)
    add_save_args(ap, "bench_cold_start")
    a = ap.parse_args()
    json_path, md_path = run_paths(a, "bench_cold_start")
    if a.render:
        print_saved(json_path, render)
        return 0
    fxcpp = os.path.join(a.build, "fxcpp")
    deploy = os.path.join(a.build, "examples", "deploy")
    models_dir = os.path.join(a.build, "models")
    start = time.time()
    bench_optimize.export_models(models_dir, a.models)
    data = {"date": utc_now(), "cpu": cpu_name(), "cpus": os.cpu_count(), "command": command_line(__file__),
            "runs": a.runs, "load_start": load_average(), "rows": []}
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
        values = (med(fx, 0), med(fx, 1), cold_fx, med(ts, 0), med(ts, 1), cold_ts, cold_fx / cold_ts,
                  med(fx, 2), med(ts, 2), med(fx, 3), med(ts, 3))
        data["rows"].append(dict({"model": name}, **{k: v for (k, _), v in zip(COLUMNS, values)}))
        bench_optimize.log("%s: cold start fxcpp %.1f ms, TorchScript %.1f ms" % (name, cold_fx, cold_ts))
    save_run(data, start, json_path, md_path, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
