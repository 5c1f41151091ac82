#!/usr/bin/python3
"""fxcpp's optimised convolutions against ONNX Runtime's, layer by layer (issue 39's tool for finding the rows).

`bench_ort.py` says which model trails ONNX Runtime; this says where. It runs one
model both ways in turn, on the files bench_ort.py uses (BUILD/ort/models: run it once
first, or python/export_onnx.py):
  - ONNX Runtime with its own profiler (bench/ort/ort_profile.js, set up as
    ort_bench.js is), per-node kernel times;
  - `fxcpp profile --optimize --trace`, per-node times of the optimised module;
then pairs the convolutions in graph order (both keep the model's order; the
count must agree) and prints a markdown table of medians: ONNX Runtime's node
(its output name and weight shape), fxcpp's node, both times and their ratio,
and the totals of all nodes. `--hold-avx2` holds both at AVX2 on an AVX-512 CPU
as `bench_ort.py --hold-avx2` does (a proxy: scripts/ort_hold_avx2.py).

Medians per node drop each node's first time (a warm-up). Times inside one
profiled process, one runtime after the other: per-layer shapes, not the
interleaved whole-model ratios of bench_ort.py.

    /usr/bin/python3 scripts/compare_layers_ort.py resnet18 [--build build] [--threads 1] [--batch 1]
                     [--runs 30] [--hold-avx2] [--cpu N]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from bench_markdown import cpu_name  # noqa: E402
from bench_ort import child_env, median, one_thread_cpu, pin  # noqa: E402

ORT_CONV_OPS = {"Conv", "FusedConv", "NchwcConv"}
FX_CONV_TARGETS = {"fxcpp::onednn_conv2d", "fxcpp::onednn_qconv2d"}


def _medians(samples):
    """{name: [times in order]} -> {name: median ms without the first time}."""
    return {k: median(v[1:] if len(v) > 1 else v) for k, v in samples.items()}


def ort_nodes(profile):
    """ONNX Runtime's profile (a list of trace events) -> [(node, op, weight shape or None, median ms)] in the
    order the nodes first ran."""
    samples, info = {}, {}
    for e in profile:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        name = e["name"][:-len("_kernel_time")]
        args = e.get("args", {})
        if name not in samples:
            shapes = [list(s.values())[0] for s in args.get("input_type_shape", []) if s]
            info[name] = (args.get("op_name", "?"), shapes[1] if len(shapes) > 1 else None)
            samples[name] = []
        samples[name].append(e["dur"] / 1000.0)
    med = _medians(samples)
    return [(k, info[k][0], info[k][1], med[k]) for k in samples]


def fx_nodes(trace):
    """`fxcpp profile --trace`'s Chrome trace -> [(node, target, median ms)] of call_function nodes in graph order."""
    samples, target = {}, {}
    for e in trace["traceEvents"]:
        if e.get("cat") != "call_function":
            continue
        name = e["name"]
        if name not in samples:
            samples[name] = []
            target[name] = e.get("args", {}).get("target", "?")
        samples[name].append(e["dur"] / 1000.0)
    med = _medians(samples)
    return [(k, target[k], med[k]) for k in samples]


def pair_convolutions(ort, fx):
    """The convolutions of both, paired in order: [(ort node, fx node)]; ValueError when the counts differ."""
    oc = [n for n in ort if n[1] in ORT_CONV_OPS]
    fc = [n for n in fx if n[1] in FX_CONV_TARGETS]
    if len(oc) != len(fc):
        raise ValueError("ONNX Runtime ran %d convolutions, fxcpp %d: they cannot be paired in order"
                         % (len(oc), len(fc)))
    return list(zip(oc, fc))


def table(ort, fx, title):
    pairs = pair_convolutions(ort, fx)
    lines = [title, "", "| # | ONNX Runtime node | weight | ORT ms | fxcpp node | fxcpp ms | fxcpp / ORT |",
             "|---|---|---|---|---|---|---|"]
    for i, (o, f) in enumerate(pairs):
        lines.append("| %d | %s | %s | %.3f | %s | %.3f | %.2f |" % (
            i, o[0], "×".join(map(str, o[2])) if o[2] else "—", o[3], f[0], f[2], f[2] / o[3] if o[3] else 0))
    ort_conv, fx_conv = sum(o[3] for o, _ in pairs), sum(f[2] for _, f in pairs)
    ort_all, fx_all = sum(n[3] for n in ort), sum(n[2] for n in fx)
    lines += ["", "Convolutions: ORT %.2f ms, fxcpp %.2f ms (%.2f); all nodes: ORT %.2f ms, fxcpp %.2f ms (%.2f)." % (
        ort_conv, fx_conv, fx_conv / ort_conv if ort_conv else 0, ort_all, fx_all, fx_all / ort_all if ort_all else 0)]
    others = ["%s %.3f" % (n[0], n[3]) for n in ort if n[1] not in ORT_CONV_OPS]
    fx_others = ["%s %.3f" % (n[0], n[2]) for n in fx if n[1] not in FX_CONV_TARGETS]
    lines += ["Other nodes, ORT: " + (", ".join(others) or "none") + ".",
              "Other nodes, fxcpp: " + (", ".join(fx_others) or "none") + "."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--hold-avx2", action="store_true", help="both held at AVX2 (an AVX-512 CPU; a proxy)")
    ap.add_argument("--cpu", type=int, default=None,
                    help="at 1 thread, run both on this CPU (default: the first this process may run on; -1: "
                         "not pinned), as bench_ort.py does")
    args = ap.parse_args()
    cpu = one_thread_cpu(args.cpu) if args.threads == 1 else None
    models = os.path.join(args.build, "ort", "models")
    stem = os.path.join(models, "%s.b%d" % (args.model, args.batch))
    needed = [os.path.join(models, args.model + ".pt"), os.path.join(models, args.model + ".input.pt"),
              stem + ".onnx", stem + ".input.bin", stem + ".json"]
    missing = [p for p in needed if not os.path.exists(p)]
    if missing:
        sys.exit("compare_layers_ort.py: %s missing (scripts/bench_ort.py --models %s --batch %d makes it)"
                 % (missing[0], args.model, args.batch))
    pkg = os.path.join(args.build, "ort", "node_modules", "onnxruntime-node")
    if args.hold_avx2:
        from ort_hold_avx2 import make_held_copy
        try:
            pkg = make_held_copy(pkg, os.path.join(args.build, "ort_avx2"))
        except (OSError, ValueError) as e:
            sys.exit("compare_layers_ort.py --hold-avx2: %s" % e)
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run(["node", os.path.join(ROOT, "bench", "ort", "ort_profile.js"), "--ort", os.path.abspath(pkg),
                            "--model", stem + ".onnx", "--input", stem + ".input.bin", "--info", stem + ".json",
                            "--prefix", os.path.join(tmp, "ort"), "--threads", str(args.threads),
                            "--runs", str(args.runs)], capture_output=True, text=True, preexec_fn=pin(cpu))
        if p.returncode != 0:
            sys.exit((p.stderr.strip().splitlines() or ["ort_profile.js failed"])[-1])
        with open(p.stdout.strip()) as f:
            ort = ort_nodes(json.load(f))
        trace = os.path.join(tmp, "fxcpp.json")
        p = subprocess.run([os.path.join(args.build, "fxcpp"), "profile", needed[0], "--input", needed[1], "--optimize",
                            "--threads", str(args.threads), "--batch", str(args.batch), "--runs", str(args.runs),
                            "--warmup", "1", "--trace", trace], capture_output=True, text=True,
                           env=child_env(args.hold_avx2), preexec_fn=pin(cpu))
        if p.returncode != 0:
            sys.exit((p.stderr.strip().splitlines() or ["fxcpp profile failed"])[-1])
        with open(trace) as f:
            fx = fx_nodes(json.load(f))
    title = "%s, batch %d, %d thread%s%s, on %s%s; %d runs each (`%s`)" % (
        args.model, args.batch, args.threads, "" if args.threads == 1 else "s",
        "" if cpu is None else " (both on CPU %d)" % cpu, cpu_name(),
        " held at AVX2 (a proxy)" if args.hold_avx2 else "", args.runs,
        "/usr/bin/python3 scripts/compare_layers_ort.py " + " ".join(sys.argv[1:]))
    try:
        print(table(ort, fx, title), end="")
    except ValueError as e:
        sys.exit("compare_layers_ort.py: %s" % e)


if __name__ == "__main__":
    main()
