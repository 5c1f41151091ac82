#!/usr/bin/python3
"""`make bench`, issue 37: fxcpp from Python (`import fxcpp`) against Python's own options and the C++ CLI.

1. Inference, 1 thread, batch 1, 224x224, random seeded weights (torchvision resnet50, mobilenet_v2,
   efficientnet_b0): in one process, interleaved round-robin, eager PyTorch, TorchScript's
   torch.jit.optimize_for_inference(torch.jit.script(m)) and of torch.jit.trace(m), torch.fx's
   optimize_for_inference, and fxcpp.optimize(m) called from Python; against `fxcpp bench --engine
   fxcpp_opt` (C++, its own process) on the same model and input (BUILD/models/NAME.bench.pt, as
   bench_optimize.py exports them). Also the cost of one call through the binding (a one-node graph).
2. Passes on resnet50's graph from Python: fxcpp (from_fx conversion + the C++ pass + what it gives back)
   against the same pass in Python torch.fx: ShapeProp, CSE (make_fx graph), split_module.

Prints markdown and saves BUILD/bench_python.{json,md} (--save-dir to change).

    /usr/bin/python3 scripts/bench_python.py [--build build] [--quick] [--save-dir DIR] [--render]
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from bench_markdown import add_save_args, cpu_name, fmt_ms, fmt_ratio, load_average, log, print_saved, run_paths, save_run  # noqa: E402,E501
from bench_optimize import export_models  # noqa: E402

MODELS = ["resnet50", "mobilenet_v2", "efficientnet_b0"]
ENGINES = ["eager", "ts_script_opt", "ts_trace_opt", "torch_fx_opt", "fxcpp_opt"]
LABELS = {"eager": "eager", "ts_script_opt": "TS-opt (script)", "ts_trace_opt": "TS-opt (trace)",
          "torch_fx_opt": "torch.fx opt", "fxcpp_opt": "fxcpp.optimize", "cpp": "C++ fxcpp_opt"}


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def engines(torch, fxcpp, m, x):
    """name -> callable, each prepared (and warmed up) on x."""
    from torch.fx.experimental.optimization import optimize_for_inference as fx_opt
    out = {"eager": m}
    with torch.no_grad():
        out["ts_script_opt"] = torch.jit.optimize_for_inference(torch.jit.script(m))
        out["ts_trace_opt"] = torch.jit.optimize_for_inference(torch.jit.trace(m, (x,)))
    out["torch_fx_opt"] = fx_opt(m)
    out["fxcpp_opt"] = fxcpp.optimize(m, (x,), threads=1)
    return out


def inference(build, name, seconds):
    import torch
    import fxcpp
    models_dir = os.path.join(build, "models")
    export_models(models_dir, [name])
    m = torch.jit.load(os.path.join(models_dir, name + ".bench.pt"))  # the same weights as the C++ run
    import torchvision
    eager = getattr(torchvision.models, name)(weights=None).eval()
    eager.load_state_dict(m.state_dict())
    x = torch.load(os.path.join(models_dir, name + ".bench.input.pt"))
    fns = engines(torch, fxcpp, eager, x)
    times = {k: [] for k in fns}
    with torch.no_grad():
        expected = eager(x)
        for k, f in fns.items():
            for _ in range(2):
                y = f(x)
            err = ((y - expected).abs().max() / expected.abs().max()).item()
            log("  %s: %.2g relative to eager" % (k, err))
        end = time.time() + seconds * len(fns)
        rounds = 0
        while time.time() < end or rounds < 5:
            for k, f in fns.items():
                t0 = time.perf_counter()
                f(x)
                times[k].append((time.perf_counter() - t0) * 1e3)
            rounds += 1
    r = {k: median(v) for k, v in times.items()}
    # fxcpp.optimize's module alone (no other engine between its calls to evict the caches) against the C++
    # CLI's, round by round (a block of Python calls, then one `fxcpp bench` run): the machine's speed drifts by
    # 10% over a minute here, so the ratio is the median of the rounds' ratios, as bench_ort.py takes its.
    cmd = [os.path.join(build, "fxcpp"), "bench", os.path.join(models_dir, name + ".bench.pt"), "--input",
           os.path.join(models_dir, name + ".bench.input.pt"), "--engine", "fxcpp_opt", "--threads", "1",
           "--seconds", str(max(1, seconds // 2)), "--json"]
    log("+ " + " ".join(cmd))
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    alone, cpp, ratios = [], [], []
    for _ in range(3 if seconds <= 1 else 5):
        block = []
        with torch.no_grad():
            end = time.time() + max(1, seconds // 2)
            while time.time() < end or len(block) < 5:
                t0 = time.perf_counter()
                fns["fxcpp_opt"](x)
                block.append((time.perf_counter() - t0) * 1e3)
        c = cpp_ms(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout))
        alone.append(median(block))
        cpp.append(c)
        ratios.append(median(block) / c)
    r["fxcpp_alone"] = median(alone)
    r["cpp"] = median(cpp)
    r["alone_over_cpp"] = median(ratios)
    r["rounds"] = rounds
    return r


def cpp_ms(result):
    """The fxcpp_opt median (ms) of a `fxcpp bench --json` result."""
    for e in result["engines"]:
        if e["engine"] == "fxcpp_opt":
            return e["median_ms"]
    raise ValueError("no fxcpp_opt engine in %s" % list(result))


def binding_cost():
    """µs per call of an fxcpp.Module and of the bare fxcpp.GraphModule on a one-node graph (tiny tensor)."""
    import torch
    import fxcpp
    gm = torch.fx.symbolic_trace(torch.nn.ReLU())
    x = torch.randn(4)
    mod = fxcpp.Module(fxcpp.from_fx(gm))
    out = {}
    with torch.no_grad():
        for key, f in (("module_us", mod), ("graph_module_us", mod.graph_module), ("eager_relu_us", torch.relu)):
            for _ in range(1000):
                f(x)
            n = 20000
            t0 = time.perf_counter()
            for _ in range(n):
                f(x)
            out[key] = (time.perf_counter() - t0) / n * 1e6
    return out


def timed(f, reps):
    best = None
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        t = (time.perf_counter() - t0) * 1e3
        best = t if best is None else min(best, t)
    return best


def passes(reps):
    import torch
    import torchvision
    import fxcpp
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.passes.dialect.common.cse_pass import CSEPass
    from torch.fx.passes.shape_prop import ShapeProp
    from torch.fx.passes.split_module import split_module
    torch.manual_seed(0)
    m = torchvision.models.resnet50().eval()
    x = torch.randn(1, 3, 224, 224)
    gm = torch.fx.symbolic_trace(m)
    with torch.no_grad():
        aten = make_fx(m)(x)
    order = {n.name: i for i, n in enumerate(gm.graph.nodes)}
    half = len(order) // 2

    def cb(n):
        return 0 if order[n.name] < half else 1
    r = {"nodes": len(order), "aten_nodes": len(aten.graph.nodes)}
    r["shape_prop"] = (timed(lambda: ShapeProp(gm).propagate(x), reps), timed(lambda: fxcpp.passes.shape_prop(gm, x), reps))
    r["cse"] = (timed(lambda: CSEPass()(aten), reps), timed(lambda: fxcpp.passes.cse(aten), reps))
    r["split_module"] = (timed(lambda: split_module(gm, gm, cb), reps),
                         timed(lambda: fxcpp.passes.split_module(gm, gm, cb), reps))
    r["from_fx"] = timed(lambda: fxcpp.from_fx(gm), reps)
    cgm, caten = fxcpp.from_fx(gm), fxcpp.from_fx(aten)
    r["to_fx"] = timed(lambda: fxcpp.to_fx(cgm), reps)
    # The same passes on fxcpp.GraphModules (converted once, results kept in fxcpp: a PassManager's pipeline).
    r["in_fxcpp"] = {"shape_prop": timed(lambda: fxcpp.passes.shape_prop(cgm, x), reps),
                     "cse": timed(lambda: fxcpp.passes.cse(caten), reps),
                     "split_module": timed(lambda: fxcpp.passes.split_module(cgm, cgm, cb), reps)}
    # What any implementation giving back torch.fx's result pays at least: ShapeProp runs the model (its
    # kernels); CSE and split_module hand back new torch.fx GraphModules, whose nodes and code Python builds.
    parts = split_module(gm, gm, cb)
    with torch.no_grad():
        r["floor"] = {"shape_prop": timed(lambda: m(x), reps),
                      "cse": timed(lambda: rebuilt(aten), reps),
                      "split_module": timed(lambda: [rebuilt(p) for p in [parts] + list(parts.children())], reps)}
    return r


def rebuilt(gm):
    """A torch.fx GraphModule with a copy of gm's graph (nodes created one by one, code generated): the Python
    work of handing back a pass's new module."""
    import torch.fx
    g, env = torch.fx.Graph(), {}
    for n in gm.graph.nodes:
        env[n] = g.node_copy(n, lambda a: env[a])
    return torch.fx.GraphModule(gm, g)


def render(data):
    lines = ["# fxcpp from Python (`import fxcpp`)", "",
             "Measured %s on %s (%s logical CPUs), torch %s; `%s`, wall time %.1f min." % (
                 data["date"], data["cpu"], data["cpus"], data["torch"], data["command"], data["wall_s"] / 60), "",
             "## Inference: 1 thread, batch 1, 224x224 (ms, median; one process, engines interleaved)", "",
             "| model | " + " | ".join(LABELS[e] for e in ENGINES) + " | fxcpp.optimize alone | C++ fxcpp_opt "
             "| Python alone / C++ (median of rounds) |", "|---|" + "---:|" * (len(ENGINES) + 3)]
    for name, r in data["inference"].items():
        lines.append("| %s | %s | %s | %s | %s |" % (name, " | ".join(fmt_ms(r[e]) for e in ENGINES),
                                                    fmt_ms(r["fxcpp_alone"]), fmt_ms(r["cpp"]),
                                                    fmt_ratio(r.get("alone_over_cpp", r["fxcpp_alone"] / r["cpp"]))))
    b = data["binding"]
    lines += ["", "One call through the binding (ReLU of 4 floats): fxcpp.Module %.1f µs, fxcpp.GraphModule %.1f µs "
              "(torch.relu itself %.1f µs)." % (b["module_us"], b["graph_module_us"], b["eager_relu_us"]), "",
              "## Passes on resnet50's graph (%d nodes; CSE on its make_fx graph, %d nodes), ms" % (
                  data["passes"]["nodes"], data["passes"]["aten_nodes"]), "",
              "| pass | Python torch.fx | fxcpp from Python (conversion included) | speed-up "
              "| fxcpp on an fxcpp.GraphModule | speed-up | floor for a torch.fx result | speed-up at the floor |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for k in ("shape_prop", "cse", "split_module"):
        py, cpp = data["passes"][k]
        row = "| %s | %s | %s | %s" % (k, fmt_ms(py), fmt_ms(cpp), fmt_ratio(py / cpp))
        if "in_fxcpp" in data["passes"]:
            inside, floor = data["passes"]["in_fxcpp"][k], data["passes"]["floor"][k]
            row += " | %s | %s | %s | %s" % (fmt_ms(inside), fmt_ratio(py / inside), fmt_ms(floor),
                                             fmt_ratio(py / floor))
        lines.append(row + " |")
    lines += ["", "Conversion alone: from_fx %s ms, to_fx %s ms." % (fmt_ms(data["passes"]["from_fx"]),
                                                                     fmt_ms(data["passes"]["to_fx"]))]
    if "floor" in data["passes"]:
        lines += ["", "Floor: what any implementation that gives back torch.fx's result must spend, however fast "
                  "its own pass is: ShapeProp runs the model, so its floor is the model's eager forward; "
                  "CSE and split_module return new torch.fx GraphModules, so theirs is building those modules "
                  "(`Graph.node_copy` of every node, then `GraphModule(root, graph)` with its code generation)."]
    lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true", help="shorter timing (1 s per engine and model)")
    add_save_args(ap, "bench_python")
    args = ap.parse_args()
    json_path, md_path = run_paths(args, "bench_python")
    if args.render:
        print_saved(json_path, render)
        return 0
    sys.path.insert(0, os.path.join(args.build, "python"))
    os.environ.pop("OMP_NUM_THREADS", None)
    import torch
    torch.set_num_threads(1)
    start = time.time()
    data = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "cpu": cpu_name(),
            "cpus": os.cpu_count(), "torch": torch.__version__, "command": "make bench",
            "load_start": load_average(), "inference": {}}
    seconds = 1.0 if args.quick else 3.0
    for name in MODELS:
        log("inference: %s" % name)
        data["inference"][name] = inference(args.build, name, seconds)
    data["binding"] = binding_cost()
    log("passes on resnet50")
    data["passes"] = passes(3 if args.quick else 5)
    save_run(data, start, json_path, md_path, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
