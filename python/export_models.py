#!/usr/bin/python3
"""Exports torchvision models as TorchScript for fxcpp's import checks.

For every model it writes, into --out:
  NAME.pt          torch.jit.script(model).save(...)   (random seeded weights, eval mode;
                   batch-norm statistics from a pass over random images and zero-initialised
                   heads drawn again, so outputs and activations are of order 1: honest_weights.py)
  NAME.trace.pt    torch.jit.trace(model, x) (with --trace; always for TRACED)
  NAME.input.pt    the seeded input (torch.save of a tensor)
  NAME.output.pt   the eager output of model(input)
  NAME.bf16.txt    how far PyTorch's own bf16 (CPU autocast, else the model in bf16) is from that output:
                   max |difference| / max |output| (what fxcpp's bf16 is held to)
  NAME.json        Python torch.fx.symbolic_trace: the (opcode, target) sequence with
                   targets mapped to ATen names, or the TraceError text; timings.
Also fx_resnet18.pt: torch.jit.script of the Python fx GraphModule of resnet18
(how a Python FX graph reaches C++), with its node list.

Run with Debian's python3 (python3-torch, python3-torchvision). Nothing is
downloaded: weights are random (torch.manual_seed).
"""
import argparse
import copy
import json
import operator
import os
import sys
import time
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.fx  # noqa: E402
import torchvision  # noqa: E402

import export_stamp  # noqa: E402
from honest_weights import calibrate, check_order_one  # noqa: E402

MODELS = ["alexnet", "vgg11", "resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small",
          "squeezenet1_0", "densenet121", "efficientnet_b0", "shufflenet_v2_x1_0", "vit_b_16"]
# Input side per model: small where the model allows it (tests stay fast).
SIZE = {"vit_b_16": 224}
DEFAULT_SIZE = 64
# Also exported with torch.jit.trace (the optimiser tests run on both exports).
TRACED = ("resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "vit_b_16")


def honest_model(name, size, batch=4):
    """torchvision's `name` with random seeded weights, its batch-norm statistics set by a
    pass over `batch` random images and zero-initialised heads re-drawn (honest_weights.py)."""
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    images = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(2))
    return calibrate(model, lambda m: m(images))

# Python operators → the ATen operator TorchScript records for them.
OPERATOR_TO_ATEN = {
    operator.add: "aten::add", operator.iadd: "aten::add_", operator.sub: "aten::sub",
    operator.isub: "aten::sub_", operator.mul: "aten::mul", operator.imul: "aten::mul_",
    operator.truediv: "aten::div", operator.itruediv: "aten::div_", operator.matmul: "aten::matmul",
    operator.floordiv: "aten::floor_divide", operator.neg: "aten::neg", operator.pow: "aten::pow",
    operator.getitem: "operator.getitem",
}


def aten_name(node):
    """The (opcode, target) fxcpp's importer should produce for a Python fx node,
    or None for nodes TorchScript folds away in eval mode."""
    op, t = node.op, node.target
    if op == "call_method":
        return ["call_function", "aten::" + t]
    if op != "call_function":
        return [op, str(t)]
    if t in OPERATOR_TO_ATEN:
        return [op, OPERATOR_TO_ATEN[t]]
    name = getattr(t, "__name__", str(t))
    module = getattr(t, "__module__", "") or ""
    if module.startswith("torchvision.ops.stochastic_depth"):
        # torchvision wraps stochastic_depth with torch.fx.wrap; TorchScript
        # inlines it and, in eval mode, it is the identity (no node).
        return None
    if node.kwargs.get("inplace", False) and not name.endswith("_"):
        name += "_"
    return [op, "aten::" + name]


def fx_structure(model):
    """Python torch.fx.symbolic_trace of `model`: nodes, or the error text."""
    try:
        t0 = time.perf_counter()
        gm = torch.fx.symbolic_trace(model)
        ms = (time.perf_counter() - t0) * 1e3
        for _ in range(2):  # best of three: the first run pays for warm-up
            t0 = time.perf_counter()
            torch.fx.symbolic_trace(model)
            ms = min(ms, (time.perf_counter() - t0) * 1e3)
    except Exception as e:  # TraceError and friends: what torch.fx says
        return {"ok": False, "error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0])}
    nodes = [aten_name(n) for n in gm.graph.nodes]
    return {"ok": True, "trace_ms": ms, "nodes": [n for n in nodes if n is not None],
            "python_nodes": len(gm.graph.nodes)}, gm


def export(name, out, trace):
    size = SIZE.get(name, DEFAULT_SIZE)
    model = honest_model(name, size)
    x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(1))
    check_order_one(name, model, (x,))
    with torch.no_grad():
        y = model(x)
    scripted = torch.jit.script(model)
    scripted.save(os.path.join(out, name + ".pt"))
    if trace:
        with torch.no_grad():
            torch.jit.trace(model, x).save(os.path.join(out, name + ".trace.pt"))
    torch.save(x, os.path.join(out, name + ".input.pt"))
    torch.save(y, os.path.join(out, name + ".output.pt"))
    # PyTorch's own bf16 error on this model (the C++ optimiser's bf16 is held
    # to it). Where oneDNN has no bf16 kernels (AVX2, or held there by
    # ONEDNN_MAX_CPU_ISA) PyTorch's bf16 convolution fails: no file, and the
    # test uses its default.
    bf16_path = os.path.join(out, name + ".bf16.txt")
    y16 = None
    with torch.no_grad():
        try:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y16 = model(x).float()
        except RuntimeError:  # vit_b_16: 1.13's attention fast path refuses mixed dtypes
            try:
                y16 = copy.deepcopy(model).to(torch.bfloat16)(x.to(torch.bfloat16)).float()
            except RuntimeError as e:
                print("no bf16 reference for %s here: %s" % (name, str(e).splitlines()[0]))
    if y16 is not None:
        with open(bf16_path, "w") as f:
            f.write("%.6g\n" % float((y16 - y).abs().max() / y.abs().max()))
    elif os.path.exists(bf16_path):
        os.remove(bf16_path)
    fx = fx_structure(model)
    gm = None
    if isinstance(fx, tuple):
        fx, gm = fx
    info = {"model": name, "input_shape": list(x.shape), "fx": fx}
    write_info(info, out, name)
    return gm, x, y


def export_fx_graph_module(gm, x, y, name, out):
    """torch.jit.script of a Python fx GraphModule: its nodes must come back one for one."""
    scripted = torch.jit.script(gm)
    scripted.save(os.path.join(out, name + ".pt"))
    torch.save(x, os.path.join(out, name + ".input.pt"))
    torch.save(y, os.path.join(out, name + ".output.pt"))
    nodes = [aten_name(n) for n in gm.graph.nodes]
    info = {"model": name, "input_shape": list(x.shape),
            "fx": {"ok": True, "trace_ms": 0.0, "nodes": [n for n in nodes if n is not None],
                   "python_nodes": len(gm.graph.nodes)}}
    write_info(info, out, name)


def write_info(info, out, name):
    """NAME.json, and NAME.fx.txt for the C++ driver: 'ok MS' or 'error TEXT', then 'opcode target' lines."""
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(info, f)
    fx = info["fx"]
    with open(os.path.join(out, name + ".fx.txt"), "w") as f:
        if fx["ok"]:
            f.write("ok %.3f\n" % fx["trace_ms"])
            for op, target in fx["nodes"]:
                f.write("%s %s\n" % (op, target))
        else:
            f.write("error %s\n" % fx["error"].replace("\n", " "))


def bench(out):
    """Python baselines for bench/import_bench.cpp: symbolic_trace and eager forward, 224×224, one thread."""
    torch.set_num_threads(1)
    result = {}
    for name in ["resnet50", "mobilenet_v2"]:
        model = honest_model(name, 224, batch=2)
        x = torch.randn(1, 3, 224, 224)
        torch.jit.script(model).save(os.path.join(out, name + ".bench.pt"))
        trace = []
        for _ in range(5):
            t0 = time.perf_counter()
            torch.fx.symbolic_trace(model)
            trace.append((time.perf_counter() - t0) * 1e3)
        fwd = []
        with torch.no_grad():
            for _ in range(3):
                model(x)
            for _ in range(10):
                t0 = time.perf_counter()
                model(x)
                fwd.append((time.perf_counter() - t0) * 1e3)
        trace.sort()
        fwd.sort()
        result[name] = {"symbolic_trace_ms": trace[len(trace) // 2], "eager_forward_ms": fwd[len(fwd) // 2]}
    with open(os.path.join(out, "bench_python.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))


def table(out):
    """The coverage table: header and the rows check_models wrote."""
    print("| model                | nodes | max diff  | import ms | load ms | fx trace | structure = torch.fx |")
    print("|----------------------|-------|-----------|-----------|---------|----------|----------------------|")
    missing = []
    for name in MODELS + ["fx_resnet18"]:
        path = os.path.join(out, name + ".row")
        if os.path.exists(path):
            print(open(path).read().rstrip())
        else:
            missing.append(name)
    if missing:
        print("not checked:", " ".join(missing))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--trace", action="store_true", help="also save torch.jit.trace files")
    p.add_argument("--bench", action="store_true", help="write the Python baselines of the benchmark")
    p.add_argument("--table", action="store_true", help="print the coverage table from the checks' NAME.row files")
    p.add_argument("--force", action="store_true", help="export even when the files are up to date")
    p.add_argument("models", nargs="*", default=None)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(1)
    if a.table:
        return table(a.out)
    if a.bench:
        bench(a.out)
        return
    for name in a.models or MODELS:
        stamp = os.path.join(a.out, name + ".fx.txt")
        sources = max(os.path.getmtime(__file__), os.path.getmtime(sys.modules[calibrate.__module__].__file__))
        if not a.force and export_stamp.up_to_date(stamp, __file__, sys.modules[calibrate.__module__].__file__):
            print("up to date", name)
            continue
        if name == "fx_resnet18":
            model = honest_model("resnet18", DEFAULT_SIZE)
            x = torch.randn(1, 3, DEFAULT_SIZE, DEFAULT_SIZE, generator=torch.Generator().manual_seed(1))
            check_order_one(name, model, (x,))
            with torch.no_grad():
                y = model(x)
            export_fx_graph_module(torch.fx.symbolic_trace(model), x, y, name, a.out)
        else:
            export(name, a.out, a.trace or name in TRACED)
        export_stamp.mark(stamp)
        print("exported", name, flush=True)


if __name__ == "__main__":
    sys.exit(main())
