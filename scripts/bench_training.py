#!/usr/bin/python3
"""Training steps: fxcpp's aot_module against eager libtorch, and Python's
eager PyTorch and functorch aot_module for reference (issue 34).

One step is zero_grad, forward, loss, backward, SGD step (momentum 0.9), at
1 thread, batch 8 and 32: resnet18 and mobilenet_v2 (64x64 images,
cross-entropy) and a TransformerEncoderLayer (d 64, 4 heads, feed-forward
256, sequence 32, mean square).

  C++ (build/fx_bench BM_TrainStep, repetitions randomly interleaved in one
  process): eager libtorch, aot_module with default_partition, functorch's
  min cut, fxcpp's min cut (batch-norm outputs and activations recomputed),
  and that with AotOptions::memory_format = channels_last (NHWC); then eager
  and the NHWC min cut with fx::FusedSGD instead of torch::optim::SGD (one
  pass per parameter, gradients set to none by zero_grad), and that last one
  without fuse_batch_norm_activation (TrainingCompileOptions), to show what
  the pass is worth; the last, that step with the FusedSGD stepped inside
  the backward (AotModule::set_optimizer_in_backward: no zero_grad, no step).
  Memory (BM_TrainStepMemory, one process per engine): the peak of the
  tensor bytes three steps allocate beyond those alive before them (the
  CPU allocator's count, as libtorch reports it to a memory profiler).
  Python (one process, engines interleaved round by round): eager PyTorch,
  functorch.compile.aot_module with the min-cut partition and the nop
  compiler, and with ts_compile (TorchScript's NNC fusion).

    /usr/bin/python3 scripts/bench_training.py --build build [--quick] [--save-dir docs/bench]

Writes BUILD/bench_training.md, and with --save-dir SAVE/training.md (the
"Training steps" section of docs/benchmarks.md).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_markdown import cpu_info  # noqa: E402

MODELS = ["resnet18", "mobilenet_v2", "encoder"]
ENGINES = ["eager", "aot default", "aot functorch min-cut", "aot fxcpp min-cut", "aot fxcpp min-cut NHWC",
           "eager + FusedSGD", "aot fxcpp min-cut NHWC + FusedSGD",
           "the same without fuse_batch_norm_activation", "the same without conv_as_winograd",
           "the same with conv_forward_rewrites", "the same without fuse_kernels",
           "the same without sink_recomputation", "the same with FusedSGD in backward"]


def cpu_name():
    """lscpu's model name, family and model, ISA and vCPUs (bench_markdown.cpu_info)."""
    info = cpu_info()
    isa = "AVX-512" if "avx512f" in info["flags"] else ("AVX2" if "avx2" in info["flags"] else "SSE")
    kind = f"family {info['family']} model {info['model']}, " if info["family"] else ""
    return f"{info['name']} ({kind}{isa}, {os.cpu_count()} vCPUs)"


def write_markdown(text, build, build_name, save_dir=None, part_name=None):
    """`text` to BUILD/build_name, to SAVE_DIR/part_name too (a part of docs/benchmarks.md), and to stdout."""
    with open(os.path.join(build, build_name), "w") as f:
        f.write(text)
    if save_dir:
        with open(os.path.join(save_dir, part_name), "w") as f:
            f.write(text)
    sys.stdout.write(text)


def run_cpp(build, quick):
    reps = 1 if quick else 5
    cmd = [os.path.join(build, "fx_bench"), "--benchmark_filter=BM_TrainStep/",
           "--benchmark_enable_random_interleaving=true", f"--benchmark_repetitions={reps}",
           "--benchmark_format=json", "--benchmark_min_time=0.5" if quick else "--benchmark_min_time=1"]
    if quick:
        cmd[1] = "--benchmark_filter=BM_TrainStep/.*/batch:8"
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True,
                                    env=dict(os.environ, OMP_NUM_THREADS="1")).stdout)
    times = {}
    for b in out["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b["run_name"] if "run_name" in b else b["name"]
        parts = dict(p.split(":") for p in name.split("/")[1:4])
        key = (int(parts["model"]), int(parts["engine"]), int(parts["batch"]))
        times.setdefault(key, []).append(b["real_time"])
    return {k: statistics.median(v) for k, v in times.items()}


def run_memory(build, quick):
    mem = {}
    for m in range(3):
        for e in range(len(ENGINES)):
            for batch in ([8] if quick else [8, 32]):
                cmd = [os.path.join(build, "fx_bench"),
                       f"--benchmark_filter=BM_TrainStepMemory/model:{m}/engine:{e}/batch:{batch}/",
                       "--benchmark_format=json"]
                out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True,
                                                env=dict(os.environ, OMP_NUM_THREADS="1")).stdout)
                b = out["benchmarks"][0]
                mem[(m, e, batch)] = (b["kept_MB"], b["step_MB"], b.get("hwm_MB", 0.0))
    return mem


PYTHON_BENCH = r'''
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import torch, torchvision
from functorch.compile import aot_module, min_cut_rematerialization_partition, nop, ts_compile
torch.set_num_threads(1)
batches, rounds = json.loads(sys.argv[1]), int(sys.argv[2])

def model(name):
    torch.manual_seed(0)
    if name == "resnet18": return torchvision.models.resnet18()
    if name == "mobilenet_v2": return torchvision.models.mobilenet_v2()
    return torch.nn.TransformerEncoderLayer(64, 4, 256)

def trainer(name, engine, batch):
    m = model(name).train()
    f = m
    if engine == "aot_nop":
        f = aot_module(m, fw_compiler=nop, bw_compiler=nop, partition_fn=min_cut_rematerialization_partition)
    elif engine == "aot_ts":
        f = aot_module(m, fw_compiler=ts_compile, bw_compiler=ts_compile, partition_fn=min_cut_rematerialization_partition)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    if name == "encoder":
        x = torch.randn(32, batch, 64)
        loss = lambda y: y.pow(2).mean()
    else:
        x = torch.randn(batch, 3, 64, 64)
        labels = torch.randint(0, 1000, (batch,))
        loss = lambda y: torch.nn.functional.cross_entropy(y, labels)
    def step():
        opt.zero_grad()
        loss(f(x)).backward()
        opt.step()
    return step

out = {}
for name in ["resnet18", "mobilenet_v2", "encoder"]:
    for batch in batches:
        steps = {e: trainer(name, e, batch) for e in ["eager", "aot_nop", "aot_ts"]}
        for s in steps.values():
            s(); s()
        times = {e: [] for e in steps}
        for _ in range(rounds):
            for e, s in steps.items():
                t0 = time.perf_counter(); s(); times[e].append((time.perf_counter() - t0) * 1e3)
        for e, t in times.items():
            t.sort()
            out[f"{name}/{e}/{batch}"] = t[len(t) // 2]
print(json.dumps(out))
'''


def run_python(quick):
    batches = [8] if quick else [8, 32]
    rounds = 3 if quick else 7
    res = subprocess.run(["/usr/bin/python3", "-c", PYTHON_BENCH, json.dumps(batches), str(rounds)],
                         capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if res.returncode != 0:
        return None, res.stderr.strip().splitlines()[-1] if res.stderr.strip() else "failed"
    return json.loads(res.stdout.strip().splitlines()[-1]), None


def render(cpu, cpp, mem, py, py_error, quick):
    batches = [8] if quick else [8, 32]
    lines = [f"Machine: {cpu}; 1 thread. Measured {time.strftime('%Y-%m-%d')} by "
             f"`scripts/bench_training.py{' --quick' if quick else ''}`.", "",
             "One training step (zero_grad, forward, loss, backward, SGD step with momentum), milliseconds "
             "(median of interleaved repetitions); in brackets the ratio to eager libtorch.", ""]
    lines.append("| model | batch | eager libtorch | " + " | ".join(ENGINES[1:]) + " |"
                 + (" PyTorch eager | functorch aot (nop) | functorch aot (ts_compile) |" if py else ""))
    lines.append("|---|---:|---:|" + "---:|" * (len(ENGINES) - 1) + ("---:|---:|---:|" if py else ""))
    for m, name in enumerate(MODELS):
        for batch in batches:
            eager = cpp.get((m, 0, batch))
            if eager is None:
                continue
            row = [name, str(batch), f"{eager:.1f}"]
            for e in range(1, len(ENGINES)):
                t = cpp.get((m, e, batch))
                row.append(f"{t:.1f} ({t / eager:.2f})" if t else "-")
            if py:
                pe = py.get(f"{name}/eager/{batch}")
                for e in ("eager", "aot_nop", "aot_ts"):
                    t = py.get(f"{name}/{e}/{batch}")
                    row.append(f"{t:.1f}" + (f" ({t / pe:.2f}×PyTorch)" if e != "eager" else "") if t else "-")
            lines.append("| " + " | ".join(row) + " |")
    if py_error:
        lines += ["", f"Python's functorch could not be measured: {py_error}"]
    lines += ["", "Memory, MB (libtorch's CPU allocator's count of tensor bytes, as it reports them to a memory "
              "profiler; one process per engine): **kept**, what the forward keeps alive for the backward (the "
              "activations); **step**, the peak of a step beyond what was alive after its zero_grad (parameters, "
              "optimizer state, and the gradients, unless zero_grad set them to none as FusedSGD's does): the "
              "activations, temporaries, the memory plan's arena, and the new gradients (before they are "
              "accumulated into `.grad`: all at once for a compiled backward, one by one in eager mode). In "
              "brackets the ratio to eager.", ""]
    lines.append("| model | batch | eager kept | " + " | ".join(ENGINES[1:]) + " | eager step | "
                 + " | ".join(ENGINES[1:]) + " |")
    lines.append("|---|---:|" + "---:|" * (2 * len(ENGINES)))
    for m, name in enumerate(MODELS):
        for batch in batches:
            if (m, 0, batch) not in mem:
                continue
            row = [name, str(batch)]
            for k in (0, 1):
                eager = mem[(m, 0, batch)][k]
                row.append(f"{eager:.1f}")
                for e in range(1, len(ENGINES)):
                    v = mem.get((m, e, batch))
                    row.append(f"{v[k]:.1f} ({v[k] / eager:.2f})" if v is not None and eager > 0 else "-")
            lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Peak resident memory of the process, MB (VmHWM after the three measured steps, one process per "
              "engine: the model, the libraries, and what the allocator's count above misses, such as oneDNN's and "
              "fxcpp's per-thread scratch buffers).", ""]
    lines.append("| model | batch | eager | " + " | ".join(ENGINES[1:]) + " |")
    lines.append("|---|---:|---:|" + "---:|" * (len(ENGINES) - 1))
    for m, name in enumerate(MODELS):
        for batch in batches:
            if (m, 0, batch) not in mem or len(mem[(m, 0, batch)]) < 3:
                continue
            eager = mem[(m, 0, batch)][2]
            row = [name, str(batch), f"{eager:.0f}"]
            for e in range(1, len(ENGINES)):
                v = mem.get((m, e, batch))
                row.append(f"{v[2]:.0f} ({v[2] / eager:.2f})" if v is not None and eager > 0 else "-")
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--save-dir")
    args = ap.parse_args()
    cpu = cpu_name()
    cpp = run_cpp(args.build, args.quick)
    mem = run_memory(args.build, args.quick)
    py, py_error = run_python(args.quick)
    write_markdown(render(cpu, cpp, mem, py, py_error, args.quick), args.build, "bench_training.md", args.save_dir,
                   "training.md")


if __name__ == "__main__":
    main()
