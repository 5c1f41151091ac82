#!/usr/bin/python3
"""Quantization-aware training: fxcpp's prepare_qat step against Python's
prepare_qat_fx and eager float steps, and the QAT int8 model against the
post-training one (issue 35).

One step is zero_grad, forward, cross-entropy, backward, SGD step (momentum
0.9), 1 thread, batch 32, on torchvision resnet18 and mobilenet_v2 (64x64
images; python/goldens/qat_goldens.py's exports, random seeded weights) and
the depthwise-separable digits net of python/qat_digits_fixture.py (8x8).
C++: build/fx_bench BM_QatStep (the imported float GraphModule and its
prepare_qat module) and BM_QatInt8 (post-training and QAT int8 forward, the
same oneDNN kernels). Python: the same networks as nn.Modules, eager and
prepare_qat_fx. C++ and Python runs alternate round by round (the order
flips each round); each figure is the median over rounds.

    /usr/bin/python3 scripts/bench_qat.py --build build [--quick] [--save-dir docs/bench]

Writes BUILD/bench_qat.md, and with --save-dir SAVE/qat.md (the
"Quantization-aware training" section of docs/benchmarks.md).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_training import cpu_name, write_markdown  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["resnet18", "mobilenet_v2", "digits_dw"]

PYTHON_BENCH = r'''
import json, os, sys, time, warnings
warnings.filterwarnings("ignore")
import torch, torchvision
from torch.ao.quantization import get_default_qat_qconfig_mapping
from torch.ao.quantization.quantize_fx import prepare_qat_fx
sys.path.insert(0, sys.argv[3])
from qat_digits_fixture import DepthwiseNet
torch.set_num_threads(1)
steps, digits_dir = int(sys.argv[1]), sys.argv[2]

def model(name):
    torch.manual_seed(0)
    if name == "digits_dw":
        m = DepthwiseNet()
        m.load_state_dict(torch.jit.load(os.path.join(digits_dir, "dw.script.pt")).state_dict())
        return m
    kwargs = {"dropout": 0.0} if name == "mobilenet_v2" else {}
    return getattr(torchvision.models, name)(weights=None, **kwargs)

out = {}
for name in ["resnet18", "mobilenet_v2", "digits_dw"]:
    torch.manual_seed(0)
    x = torch.rand(32, 1, 8, 8) if name == "digits_dw" else torch.randn(32, 3, 64, 64)
    labels = torch.randint(0, 10 if name == "digits_dw" else 1000, (32,))
    for engine in ["eager", "qat"]:
        m = model(name).train()
        if engine == "qat":
            m = prepare_qat_fx(m, get_default_qat_qconfig_mapping("onednn"), (x[:1],))
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        def step():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(m(x), labels).backward()
            opt.step()
        step(); step()
        n = steps if name != "digits_dw" else steps * 50
        t = []
        for _ in range(n):
            t0 = time.perf_counter(); step(); t.append((time.perf_counter() - t0) * 1e3)
        t.sort()
        out[f"{name}/{engine}"] = t[len(t) // 2]
print(json.dumps(out))
'''


def ensure_models(build):
    """The exports the benchmarks read (the ctest fixtures write the same files)."""
    qat_dir = os.path.join(build, "models", "qat")
    digits_dir = os.path.join(build, "models", "digits")
    py = "/usr/bin/python3"
    if not os.path.exists(os.path.join(qat_dir, "resnet18.qat.pt")):
        subprocess.run([py, os.path.join(ROOT, "python", "goldens", "qat_goldens.py"), "--export", qat_dir], check=True,
                       capture_output=True)
    if not os.path.exists(os.path.join(digits_dir, "digits.script.pt")):
        subprocess.run([py, os.path.join(ROOT, "python", "digits_fixture.py"), digits_dir], check=True, capture_output=True)
    if not os.path.exists(os.path.join(digits_dir, "dw.script.pt")):
        subprocess.run([py, os.path.join(ROOT, "python", "qat_digits_fixture.py"), digits_dir], check=True,
                       capture_output=True)
    return digits_dir


def run_cpp(build, quick):
    cmd = [os.path.join(build, "fx_bench"), "--benchmark_filter=BM_Qat", "--benchmark_format=json",
           "--benchmark_min_time=0.2" if quick else "--benchmark_min_time=1"]
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True,
                                    env=dict(os.environ, OMP_NUM_THREADS="1")).stdout)
    res = {}
    for b in out["benchmarks"]:
        if b.get("error_occurred"):
            raise SystemExit(b["name"] + ": " + b.get("error_message", "failed"))
        parts = dict(p.split(":") for p in b["name"].split("/")[1:3])
        res[(b["name"].split("/")[0], int(parts["model"]), int(parts["engine"]))] = b["real_time"]
    return res


def run_python(digits_dir, quick):
    res = subprocess.run(["/usr/bin/python3", "-c", PYTHON_BENCH, "2" if quick else "5", digits_dir,
                          os.path.join(ROOT, "python")],
                         capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if res.returncode != 0:
        raise SystemExit("Python's bench failed: " + (res.stderr.strip().splitlines() or ["?"])[-1])
    return json.loads(res.stdout.strip().splitlines()[-1])


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def render(cpu, cpp_runs, py_runs, quick, rounds):
    lines = [f"Machine: {cpu}; 1 thread, batch 32. Measured {time.strftime('%Y-%m-%d')} by "
             f"`scripts/bench_qat.py{' --quick' if quick else ''}` ({rounds} rounds, C++ and Python alternating; "
             "medians over rounds).", "",
             "One training step (zero_grad, forward, cross-entropy, backward, SGD with momentum), milliseconds. "
             "fxcpp: the imported float GraphModule and its `prepare_qat` module; Python 1.13: the same network "
             "as an eager `nn.Module` and its `prepare_qat_fx` module. resnet18 and mobilenet_v2 on 64x64 images, "
             "the depthwise digits net on 8x8.", "",
             "| model | PyTorch eager fp32 | Python prepare_qat_fx | fxcpp fp32 | fxcpp prepare_qat | "
             "fxcpp QAT / Python QAT | fxcpp QAT / eager fp32 |", "|---|---:|---:|---:|---:|---:|---:|"]
    for m, name in enumerate(MODELS):
        pe, pq = median_of(py_runs, f"{name}/eager"), median_of(py_runs, f"{name}/qat")
        cf, cq = median_of(cpp_runs, ("BM_QatStep", m, 0)), median_of(cpp_runs, ("BM_QatStep", m, 1))
        lines.append(f"| {name} | {pe:.2f} | {pq:.2f} | {cf:.2f} | {cq:.2f} | {cq / pq:.2f} | {cq / pe:.2f} |")
    lines += ["", "int8 forward of the converted models (fxcpp, batch 32, milliseconds): the QAT model converts to "
              "the same reference graph and lowers to the same oneDNN int8 kernels as the post-training one.", "",
              "| model | post-training int8 | QAT int8 | ratio |", "|---|---:|---:|---:|"]
    for m, name in enumerate(MODELS):
        a, b = median_of(cpp_runs, ("BM_QatInt8", m, 0)), median_of(cpp_runs, ("BM_QatInt8", m, 1))
        lines.append(f"| {name} | {a:.3f} | {b:.3f} | {b / a:.2f} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--save-dir")
    args = ap.parse_args()
    digits_dir = ensure_models(args.build)
    rounds = 2 if args.quick else 5
    cpp_runs, py_runs = [], []
    for r in range(rounds):
        if r % 2 == 0:
            cpp_runs.append(run_cpp(args.build, args.quick))
            py_runs.append(run_python(digits_dir, args.quick))
        else:
            py_runs.append(run_python(digits_dir, args.quick))
            cpp_runs.append(run_cpp(args.build, args.quick))
    write_markdown(render(cpu_name(), cpp_runs, py_runs, args.quick, rounds), args.build, "bench_qat.md",
                   args.save_dir, "qat.md")


if __name__ == "__main__":
    main()
