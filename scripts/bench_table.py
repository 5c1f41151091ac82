#!/usr/bin/env python3
"""`make bench`: fxcpp's Google Benchmark programs beside Python torch.fx.

Runs python/pyfx_baseline.py (the shared Python torch.fx baseline, copied into the repo) with Debian's system python3 (the one
python3-torch installs into) and build/fx_bench in one go, then prints one
markdown table with both numbers and their ratio (Python / fxcpp: above 1
means fxcpp is faster), with the date, CPU and load average of the run. The
table is also written to SAVE_DIR/bench.md and the run to SAVE_DIR/bench.json
(--save-dir, default the build dir; `make bench` saves into docs/bench/;
--render re-prints the markdown).

    python3 scripts/bench_table.py [--build build] [--save-dir DIR] [--quick] [--render]
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from bench_markdown import (add_save_args, command_line, cpu_name, load_average, measured, print_saved,  # noqa: E402
                            run_paths, save_run, utc_now)
BASELINE = os.path.join(ROOT, "python", "pyfx_baseline.py")  # a copy of ../shared/bench/pyfx_baseline.py
SYSTEM_PYTHON = "/usr/bin/python3"  # python3-torch lives here, not in pyenv's python3

# (row label, fx_bench benchmark, what to read, scale to the unit, python key path, unit)
# what to read: a counter name, "time" (wall ms) or "cpu" (CPU ms: robust on a shared machine). Counters "per_node"/"per_op" are
# seconds. python key path: keys into pyfx_baseline's JSON; None when Python has
# no such figure.
ROWS = [
    ("build add chain, 1k nodes", "BM_BuildAddChain/1000", "per_node", 1e9, ["build_ns_per_node", "1000"], "ns/node"),
    ("build add chain, 16k nodes", "BM_BuildAddChain/16000", "per_node", 1e9, ["build_ns_per_node", "16000"], "ns/node"),
    ("build add chain, 1M nodes", "BM_BuildAddChain/1000000", "per_node", 1e9, None, "ns/node"),
    ("lint, 16k nodes", "BM_Lint", "time", 1, ["lint_ms"], "ms"),
    ("python_code, 16k nodes", "BM_PythonCode", "time", 1, ["codegen_ms"], "ms"),
    ("graph_copy, 16k nodes", "BM_GraphCopy", "time", 1, ["graph_copy_ms"], "ms"),
    ("eliminate_dead_code, 16k nodes", "BM_EliminateDeadCode", "time", 1, ["dce_ms"], "ms"),
    ("2k-add chain: eager (C++ at::add loop / Python loop)", "BM_Chain_Eager", "per_op", 1e6,
     ["chain_us_per_op", "eager"], "µs/op"),
    ("2k-add chain: TorchScript (C++ torch::jit)", "BM_Chain_TorchScript", "per_op", 1e6, None, "µs/op"),
    ("2k-add chain: GraphModule forward", "BM_Chain_GraphModule", "per_op", 1e6, ["chain_us_per_op", "graph_module"],
     "µs/op"),
    ("2k-add chain: Interpreter run", "BM_Chain_Interpreter", "per_op", 1e6, ["chain_us_per_op", "interpreter"], "µs/op"),
    ("symbolic_trace resnet50 (fxcpp runs one eager forward)", "BM_Trace_ResNet50/iterations:7", "time", 1,
     ["trace_ms", "resnet50"], "ms"),
    ("import resnet50 .pt (vs Python symbolic_trace)", "BM_ImportTorchScript/resnet50", "time", 1,
     ["trace_ms", "resnet50"], "ms"),
    ("import mobilenet_v2 .pt (vs Python symbolic_trace)", "BM_ImportTorchScript/mobilenet_v2", "time", 1,
     ["trace_ms", "mobilenet_v2"], "ms"),
    # Passes (python/bench/passes_baseline.py)
    ("CSEPass, 1k-node duplicate chain", "BM_CSE_Chain/1000", "cpu", 1, ["passes", "cse_ms", "1000"], "ms"),
    ("CSEPass, 10k-node duplicate chain", "BM_CSE_Chain/10000", "cpu", 1, ["passes", "cse_ms", "10000"], "ms"),
    ("CSEPass, 100k-node duplicate chain", "BM_CSE_Chain/100000", "cpu", 1, None, "ms"),
    ("CSEPass, ResNet-50 graph", "BM_CSE_ResNet50", "cpu", 1, ["passes", "cse_resnet50_ms"], "ms"),
    # python/bench/shape_prop_baseline.py: resnet50, 224x224
    ("resnet50 eager forward (the reference)", "BM_ShapePropForward/min_time:2.000", "cpu", 1, ["shape_prop", "forward_ms"], "ms"),
    ("ShapeProp resnet50, real data", "BM_ShapePropReal/min_time:2.000", "cpu", 1, ["shape_prop", "shape_prop_ms"], "ms"),
    ("ShapeProp resnet50, meta (no data)", "BM_ShapePropMeta/min_time:2.000", "cpu", 1, ["shape_prop", "shape_prop_meta_ms"], "ms"),
    # python/bench/foldnorm_baseline.py
    ("split_const_subgraphs, 1k nodes", "BM_ConstFold/1000", "cpu", 1, ["foldnorm", "const_fold_1000_ms"], "ms"),
    ("split_const_subgraphs, 10k nodes", "BM_ConstFold/10000", "cpu", 1, ["foldnorm", "const_fold_10000_ms"], "ms"),
    ("split_const_subgraphs, resnet50", "BM_ConstFoldResNet50", "cpu", 1, ["foldnorm", "const_fold_resnet50_ms"], "ms"),
    ("NormalizeArgs, 1k nodes", "BM_Normalize/1000", "cpu", 1, ["foldnorm", "normalize_1000_ms"], "ms"),
    ("NormalizeArgs, 10k nodes", "BM_Normalize/10000", "cpu", 1, ["foldnorm", "normalize_10000_ms"], "ms"),
    ("NormalizeArgs, resnet50", "BM_NormalizeResNet50", "cpu", 1, ["foldnorm", "normalize_resnet50_ms"], "ms"),
    # python/bench/split_baseline.py (CPU time on both sides)
    ("split_module resnet50 (20 nodes per part)", "BM_SplitModuleResnet50", "cpu", 1,
     ["split", "split_module_resnet50_ms"], "ms"),
    ("split_module, 1k-node chain", "BM_SplitModuleChain/1000", "cpu", 1, ["split", "split_module_chain_1000_ms"], "ms"),
    ("split_module, 10k-node chain", "BM_SplitModuleChain/10000", "cpu", 1, ["split", "split_module_chain_10000_ms"],
     "ms"),
    ("split_module, 100k-node chain", "BM_SplitModuleChain/100000", "cpu", 1, None, "ms"),
    ("CapabilityBasedPartitioner, 1k chain", "BM_PartitionerChain/1000", "cpu", 1,
     ["split", "partitioner_chain_1000_ms"], "ms"),
    ("CapabilityBasedPartitioner, 1k ladder", "BM_PartitionerLadder/1000", "cpu", 1,
     ["split", "partitioner_ladder_1000_ms"], "ms"),
    ("CapabilityBasedPartitioner, 1k side outputs", "BM_PartitionerSideOutputs/1000", "cpu", 1,
     ["split", "partitioner_side_outputs_1000_ms"], "ms"),
    ("CapabilityBasedPartitioner, 100k chain", "BM_PartitionerChain/100000", "cpu", 1, None, "ms"),
    ("GraphModule construction, 10k get_attr targets", "BM_GraphModuleConstruct/10000", "cpu", 1, None, "ms"),
    # python/bench/subgraph_rewriter_baseline.py: conv2d -> batch_norm -> relu replaced by conv2d -> relu
    ("replace_pattern, 1k-node synthetic", "BM_ReplacePattern_Synthetic/nodes:1000/recompile:0", "cpu", 1,
     ["subgraph_rewriter", "synthetic_ms", "1000"], "ms"),
    ("replace_pattern, 10k-node synthetic", "BM_ReplacePattern_Synthetic/nodes:10000/recompile:0", "cpu", 1,
     ["subgraph_rewriter", "synthetic_ms", "10000"], "ms"),
    ("replace_pattern, 100k-node synthetic", "BM_ReplacePattern_Synthetic/nodes:100000/recompile:0", "cpu", 1, None, "ms"),
    ("replace_pattern, resnet50 (33 matches)", "BM_ReplacePattern_ResNet50/recompile:0", "cpu", 1,
     ["subgraph_rewriter", "resnet50_ms"], "ms"),
    ("replace_pattern + recompile, resnet50", "BM_ReplacePattern_ResNet50/recompile:1", "cpu", 1,
     ["subgraph_rewriter", "resnet50_ms"], "ms"),
]
PASS_BASELINES = os.path.join(ROOT, "python", "bench")


def run_python(build, quick):
    out = os.path.join(build, "pyfx_baseline.json")
    chain = os.path.join(build, "chain.pt")
    cmd = [SYSTEM_PYTHON, BASELINE, "--json", out, "--export-chain", chain]
    if quick:
        cmd.append("--quick")
    print("+", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f), chain


def run_pass_baselines(quick):
    """Every python/bench/NAME_baseline.py prints one JSON object: {NAME: {...}}."""
    out = {}
    for f in sorted(os.listdir(PASS_BASELINES)):
        if not f.endswith("_baseline.py"):
            continue
        cmd = [SYSTEM_PYTHON, os.path.join(PASS_BASELINES, f)] + (["--quick"] if quick else [])
        print("+", " ".join(cmd), file=sys.stderr)
        text = subprocess.run(cmd, check=True, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1")).stdout
        out[f[: -len("_baseline.py")]] = json.loads(text[text.index("{"):])
    return out


def run_fx(build, chain):
    out = os.path.join(build, "fx_bench.json")
    env = dict(os.environ, FX_CHAIN_PT=chain, OMP_NUM_THREADS="1")
    cmd = [os.path.join(build, "fx_bench"), "--benchmark_format=json", "--benchmark_out=" + out,
           "--benchmark_out_format=json"]
    print("+", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(out) as f:
        data = json.load(f)
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
    results = {}
    for b in data["benchmarks"]:
        name = b["name"]
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") != "min":
                continue
            name = b["run_name"].split("/repeats:")[0]  # repeated benchmarks report their minimum
        r = dict(b)
        r["time"] = b["real_time"] * scale[b["time_unit"]]  # ms
        r["cpu"] = b["cpu_time"] * scale[b["time_unit"]]  # ms of this thread's CPU
        results[name] = r
    return results


def lookup(d, path):
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def fmt(v):
    if v is None:
        return "—"
    return f"{v:.3g}" if v < 1000 else f"{v:,.0f}"


def render(data):
    """The markdown of a run (data: what main() saved)."""
    head = measured(data)
    lines = ([head, ""] if head else []) + [
        f"Python torch.fx {data.get('torch')} (Python {data.get('python')}) vs fxcpp, one run, single thread.",
        "",
        "| workload | unit | Python torch.fx | fxcpp | Python / fxcpp |",
        "|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        pv, fv = r["python"], r["fxcpp"]
        ratio = f"{pv / fv:.1f}×" if pv and fv else "—"
        lines.append(f"| {r['label']} | {r['unit']} | {fmt(pv)} | {fmt(fv)} | {ratio} |")
    if data.get("per_op"):
        lines.append("")
        lines.append("fxcpp per-op cost relative to the eager C++ at::add loop: " + ", ".join(
            f"{name} {ratio:.2f}×" for name, ratio in data["per_op"]))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true", help="pyfx_baseline --quick")
    add_save_args(ap, "bench")
    args = ap.parse_args()
    json_path, md_path = run_paths(args, "bench")
    if args.render:
        print_saved(json_path, render)
        return 0
    start = time.time()
    data = {"date": utc_now(), "cpu": cpu_name(), "cpus": os.cpu_count(), "command": command_line(__file__),
            "load_start": load_average()}
    py, chain = run_python(args.build, args.quick)
    py.update(run_pass_baselines(args.quick))
    fx = run_fx(args.build, chain)
    data["torch"], data["python"] = py.get("torch"), py.get("python")
    data["rows"] = []
    for label, name, counter, scale, path, unit in ROWS:
        r = fx.get(name)
        fv = None if r is None or r.get(counter) is None else r[counter] * scale
        pv = lookup(py, path) if path else None
        data["rows"].append({"label": label, "unit": unit, "python": pv, "fxcpp": fv})
    if "BM_Chain_Eager" in fx:
        eager = fx["BM_Chain_Eager"]["per_op"]
        data["per_op"] = [[n[len("BM_Chain_"):], fx[n]["per_op"] / eager] for n in
                          ["BM_Chain_TorchScript", "BM_Chain_GraphModule", "BM_Chain_Interpreter"] if n in fx]
    save_run(data, start, json_path, md_path, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
