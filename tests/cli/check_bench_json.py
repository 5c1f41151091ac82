#!/usr/bin/python3
"""Checks the structure of `fxcpp bench --json` output read from stdin (not speed).

    fxcpp bench M.pt --input I.pt --iters 2 --json | check_bench_json.py ROUNDS [--bf16]
    fxcpp bench M.pt --input I.pt --iters 2 --engine E... --json | check_bench_json.py ROUNDS --engines E,...
    fxcpp bench --roofline --json | check_bench_json.py --roofline

Every engine is there (--engines: exactly those), in order, with positive
times (min <= median), as many samples as rounds, ratio = median /
TorchScript-opt median (null without TorchScript-opt), GFLOP/s = FLOPs /
median, and outputs equal to eager TorchScript within tolerance (bf16: 5e-2
of max |output|; null without eager TorchScript); the process's peak
resident memory is positive. Prints "bench json ok" or the first problem (exit 1).
"""
import json
import math
import sys

ENGINES = ["torchscript", "torchscript_opt", "fxcpp", "fxcpp_opt"]
FP32_TOL = 1e-4
BF16_TOL = 5e-2
BLAS_KINDS = {"openblas", "reference", "mkl", "blis", "atlas", "other", "none"}


def fail(msg):
    print("bench json: " + msg)
    sys.exit(1)


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def check_blas(d):
    # OpenBLAS names its kernel set; the warning names the Prescott fallback only.
    if (d["blas_core"] != "") != (d["blas"] == "openblas"):
        fail("blas %r with core %r" % (d["blas"], d["blas_core"]))
    if (d["blas_warning"] != "") != (d["blas_core"] == "Prescott"):
        fail("core %r with warning %r" % (d["blas_core"], d["blas_warning"]))


def check_roofline(d):
    if d.get("roofline") is not True or d["blas"] not in BLAS_KINDS:
        fail("not a roofline object: %r" % d)
    check_blas(d)
    paths = {(p["dtype"], p["path"]) for p in d["paths"]}
    if ("fp32", "at::mm") not in paths or d["fp32_gflops"] <= 0:
        fail("no fp32 at::mm rate: %r" % d)
    if d["fp32_gflops"] != max(p["gflops"] for p in d["paths"] if p["dtype"] == "fp32"):
        fail("fp32_gflops is not the best fp32 path")


def check_bench(d, rounds, want):
    names = [e["engine"] for e in d["engines"]]
    if names != want:
        fail("engines %r, expected %r" % (names, want))
    if d["rounds"] != rounds or d["ratio_to"] != "torchscript_opt" or d["blas"] not in BLAS_KINDS:
        fail("header: rounds %r ratio_to %r blas %r" % (d["rounds"], d["ratio_to"], d["blas"]))
    check_blas(d)
    if d["flops"] <= 0:
        fail("no FLOPs counted")
    if not d["peak_rss_mb"] > 0:
        fail("peak_rss_mb %r" % d["peak_rss_mb"])
    if (d["optimize"] is None) == any(n.startswith("fxcpp_opt") for n in want):
        fail("optimize report %r with engines %r" % (d["optimize"], want))
    if d["optimize"] is not None:
        # What this CPU runs: with --bf16 where oneDNN has no bf16 kernels, the warning says so.
        opt = d["optimize"]
        no_bf16 = "bf16 kernels no" in opt.get("cpu", "")
        warned = any(w.startswith("bf16: oneDNN has no bfloat16 kernels") for w in opt.get("warnings", []))
        if not opt.get("cpu", "").startswith("oneDNN ISA ") or warned != (no_bf16 and "fxcpp_opt_bf16" in want):
            fail("optimize report's cpu %r / warnings %r with engines %r" % (opt.get("cpu"), opt.get("warnings"), want))
        # Linear layers left to ATen (BLAS), and one line per shape timed (none on AVX-512).
        choices = opt.get("linear_choices")
        if not isinstance(opt.get("aten_linears"), int) or opt["aten_linears"] < 0 or not isinstance(choices, list):
            fail("optimize report's aten_linears %r / linear_choices %r" % (opt.get("aten_linears"), choices))
        if opt["cpu"].startswith("oneDNN ISA avx512") and choices:
            fail("linear kernels timed on AVX-512: %r" % choices)
    by_name = {e["engine"]: e for e in d["engines"]}
    ts_opt = by_name["torchscript_opt"]["median_ms"] if "torchscript_opt" in by_name else None
    for e in d["engines"]:
        name = e["engine"]
        if not (0 < e["min_ms"] <= e["median_ms"]) or e["samples"] != rounds:
            fail("%s: min %r median %r samples %r" % (name, e["min_ms"], e["median_ms"], e["samples"]))
        if ts_opt is None:
            if e["ratio"] is not None:
                fail("%s: ratio %r without TorchScript-opt (expected null)" % (name, e["ratio"]))
        elif not close(e["ratio"], e["median_ms"] / ts_opt):
            fail("%s: ratio %r != %r / %r" % (name, e["ratio"], e["median_ms"], ts_opt))
        if not close(e["gflops"], d["flops"] / (e["median_ms"] * 1e6)):
            fail("%s: gflops %r != flops / median" % (name, e["gflops"]))
        tol = BF16_TOL if name.endswith("bf16") else FP32_TOL
        if "torchscript" not in by_name:
            if e["max_rel_diff"] is not None:
                fail("%s: max_rel_diff %r without eager TorchScript (expected null)" % (name, e["max_rel_diff"]))
        elif not 0 <= e["max_rel_diff"] <= tol:
            fail("%s: output differs from eager TorchScript by %r of max |output|" % (name, e["max_rel_diff"]))
        if e["prepare_ms"] <= 0 and not name.startswith("fxcpp_opt"):
            fail("%s: prepare_ms %r" % (name, e["prepare_ms"]))
    if "torchscript" in by_name and by_name["torchscript"]["max_rel_diff"] != 0:
        fail("eager TorchScript must be the reference")
    if ts_opt is not None and not close(by_name["torchscript_opt"]["ratio"], 1.0):
        fail("TorchScript-opt ratio must be 1")


def main():
    text = sys.stdin.read()
    try:
        d = json.loads(text)
    except ValueError as e:
        fail("not one JSON object (%s): %r" % (e, text[:200]))
    if sys.argv[1] == "--roofline":
        check_roofline(d)
    else:
        rest = sys.argv[2:]
        if "--engines" in rest:
            want = rest[rest.index("--engines") + 1].split(",")
        else:
            want = ENGINES + (["fxcpp_opt_bf16"] if "--bf16" in rest else [])
        check_bench(d, int(sys.argv[1]), want)
    print("bench json ok")


if __name__ == "__main__":
    main()
