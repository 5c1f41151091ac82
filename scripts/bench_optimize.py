#!/usr/bin/python3
"""`make bench`, issue 9: fx::optimize_for_inference against TorchScript's.

Runs `fxcpp bench` once per configuration, each in its own child process
(models x BLAS x threads x batch, less what skip_reason leaves out: the
reference BLAS runs at batch 1 only; the engines of one configuration are
interleaved round-robin in that process): eager TorchScript, TorchScript's
optimize_for_inference (TS-opt), fxcpp's GraphModule::forward and fxcpp's
optimize_for_inference (fp32; bf16 too at threads 1, batch 1, OpenBLAS),
plus the matmul roofline (`fxcpp bench --roofline`) measured in the same
run, and Python torch.fx's optimize_for_inference where it is cheap
(OpenBLAS, threads 1, batch 1). The reference BLAS is Debian's netlib build,
selected for a child with LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/blas.
OMP_NUM_THREADS is removed from the children's environment; --threads is
explicit.

Then, where the CPU has AVX-512, the same models held at AVX2 (OpenBLAS, 1
thread, batch 1; --no-avx2 leaves it out): oneDNN, ATen and OpenBLAS told to
stop at their AVX2 kernels (ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2,
OPENBLAS_CORETYPE=Haswell), the kernels an AVX2-only CPU such as an AMD EPYC
Zen 3 runs, on this CPU's cores (not that CPU's timing): TS-opt, fxcpp-opt and
fxcpp-opt with every linear layer on oneDNN (what the timed choice of linear
kernels is worth there).

Then the peak resident memory of each engine alone: one `fxcpp bench
--engine E --iters 5` child per model and engine (OpenBLAS, 1 thread,
batch 1), whose process keeps only what that engine needs; its
peak resident memory (VmHWM of /proc/self/status, which `fxcpp bench` reports:
getrusage's ru_maxrss would carry over a parent's peak across execve)
(--memory-only: this table alone, nothing written).

Prints one markdown document (the fp32 table, the bf16 table, geomeans of
the ratios, the memory table; on a CPU without oneDNN bf16 kernels the bf16
engine keeps float32 ones, and the bf16 table says so with the optimiser's
warning) and writes it to SAVE_DIR/bench_optimize.md, with
the raw results in SAVE_DIR/bench_optimize.json (--save-dir, default the build
dir; `make bench` saves into docs/bench/; --render re-prints the markdown
from it).
Models: torchvision, random seeded weights, 224x224, exported to
BUILD/models/NAME.bench.pt (+ NAME.bench.input.pt) on first use.

    /usr/bin/python3 scripts/bench_optimize.py [--build build] [--save-dir DIR] [--quick | --all] [--render | --memory-only]
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
from bench_markdown import (AVX2_HELD, add_save_args, geomean, fmt_ms, fmt_ratio, load_average,  # noqa: E402
                            load_note, log, cpu_name, print_saved, run_paths, save_run)
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "vit_b_16"]
REFERENCE_BLAS_DIR = "/usr/lib/x86_64-linux-gnu/blas"  # Debian's netlib libblas.so.3
BLAS_LABEL = {"openblas": "OpenBLAS", "reference": "reference"}
ROOFLINE_SIZE = 1024


def skip_reason(cfg):
    """Why a configuration is left out of `make bench` (its budget: well under 25 minutes), or None.

    The reference BLAS matters at batch 1 (what a user without OpenBLAS gets;
    its rows show which engines depend on the BLAS); at batch 8 its eager
    TorchScript convolutions take 1-10 s per forward, and the reference BLAS
    is single-threaded, so vit_b_16 (~10 s per forward at batch 1) runs it
    at one thread only. --all measures these too.
    """
    if cfg["blas"] != "reference":
        return None
    if cfg["batch"] != 1:
        return "reference BLAS at batch 8"
    if cfg["model"] == "vit_b_16" and cfg["threads"] != 1:
        return "vit_b_16, reference BLAS at 2 threads"
    return None


def child_env(blas, held=False):
    env = dict(os.environ)
    if held:
        env.update(AVX2_HELD)
    env.pop("OMP_NUM_THREADS", None)
    env["FXCPP_NO_PROGRESS"] = "1"
    if blas == "reference":
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = REFERENCE_BLAS_DIR + (":" + old if old else "")
    return env


def export_models(models_dir, names):
    """NAME.bench.pt (torch.jit.script, as python/export_models.py --bench) and NAME.bench.input.pt, 224x224."""
    missing = [n for n in names if not (os.path.exists(os.path.join(models_dir, n + ".bench.pt")) and
                                        os.path.exists(os.path.join(models_dir, n + ".bench.input.pt")))]
    if not missing:
        return
    import warnings
    warnings.filterwarnings("ignore")
    import torch
    import torchvision
    os.makedirs(models_dir, exist_ok=True)
    for name in missing:
        log("exporting %s (224x224) to %s" % (name, models_dir))
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None).eval()
        x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
        torch.jit.script(model).save(os.path.join(models_dir, name + ".bench.pt"))
        torch.save(x, os.path.join(models_dir, name + ".bench.input.pt"))


def run_json(cmd, env, timeout):
    log("+ " + " ".join(cmd))
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("%s failed (exit %d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    return json.loads(p.stdout)


def roofline(fxcpp, threads):
    return run_json([fxcpp, "bench", "--roofline", "--size", str(ROOFLINE_SIZE), "--threads", str(threads), "--json"],
                    child_env("openblas"), 300)


def bench_config(fxcpp, models_dir, cfg, seconds):
    name, blas, threads, batch, bf16 = cfg["model"], cfg["blas"], cfg["threads"], cfg["batch"], cfg["bf16"]
    cmd = [fxcpp, "bench", os.path.join(models_dir, name + ".bench.pt"), "--input",
           os.path.join(models_dir, name + ".bench.input.pt"), "--threads", str(threads), "--batch", str(batch),
           "--seconds", str(seconds), "--min-rounds", "3", "--warmup", "1" if blas == "reference" else "2", "--json"]
    if bf16:
        cmd.append("--bf16")
    t0 = time.time()
    result = run_json(cmd, child_env(blas), 1800)
    result["wall_s"] = time.time() - t0
    if result["blas"] != blas:
        raise RuntimeError("%s: expected the %s BLAS, the child loaded %s (%s)" %
                           (name, blas, result["blas"], result["blas_path"]))
    return result


def bench_avx2_held(fxcpp, models_dir, name, seconds):
    """One model held at AVX2 (AVX2_HELD; OpenBLAS, 1 thread, batch 1): TS-opt, fxcpp-opt and fxcpp-opt with
    every linear layer on oneDNN, interleaved in one child."""
    cmd = [fxcpp, "bench", os.path.join(models_dir, name + ".bench.pt"), "--input",
           os.path.join(models_dir, name + ".bench.input.pt"), "--threads", "1", "--seconds", str(seconds),
           "--min-rounds", "3", "--warmup", "2", "--json", "--engine", "torchscript_opt", "--engine", "fxcpp_opt",
           "--engine", "fxcpp_opt_onednn_linear"]
    result = run_json(cmd, child_env("openblas", held=True), 1800)
    if not result["optimize"]["cpu"].startswith("oneDNN ISA avx2:"):
        raise RuntimeError("%s: held at AVX2, oneDNN reported %r" % (name, result["optimize"]["cpu"]))
    return result


def render_avx2_held(held):
    """The held-at-AVX2 table (held: model → {"result": ...} or {"error": ...})."""
    lines = ["Held at AVX2 on this CPU (oneDNN, ATen and OpenBLAS told to stop at their AVX2 kernels: "
             "`ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=Haswell`; the kernels an "
             "AVX2-only CPU runs, on these cores, not an AVX2 CPU's timing; OpenBLAS, 1 thread, batch 1, engines "
             "interleaved in one process):", "",
             "| model | TS-opt ms | fxcpp-opt ms | opt / TS-opt | every linear on oneDNN ms | / TS-opt "
             "| linear layers timed | of them on ATen (BLAS) |", "|---|---|---|---|---|---|---|---|"]
    ratios = []
    for name, r in held.items():
        if "error" in r:
            lines.append("| %s | failed: %s |" % (name, r["error"]) + " |" * 6)
            continue
        res = r["result"]
        tso, opt, one = (engine(res, k) for k in ("torchscript_opt", "fxcpp_opt", "fxcpp_opt_onednn_linear"))
        ratios.append(opt["ratio"])
        o = res["optimize"]
        lines.append("| %s | %s | %s | %s | %s | %s | %d | %d |" % (
            name, fmt_ms(tso["median_ms"]), fmt_ms(opt["median_ms"]), fmt_ratio(opt["ratio"]),
            fmt_ms(one["median_ms"]), fmt_ratio(one["ratio"]), len(o["linear_choices"]), o["aten_linears"]))
    if ratios:
        lines += ["", "Geomean of fxcpp-opt / TS-opt held at AVX2: %s over %d models." %
                  (fmt_ratio(geomean(ratios)), len(ratios))]
    return lines


MEMORY_ENGINES = [("torchscript", "TS"), ("torchscript_opt", "TS-opt"), ("fxcpp", "fxcpp"), ("fxcpp_opt", "fxcpp-opt")]
MEMORY_ITERS = 5


def peak_memory(fxcpp, models_dir, name, engine_key):
    """The peak resident memory (MB) of a `fxcpp bench --engine ENGINE` child: that engine alone, loaded,
    prepared and run (2 warm-up + MEMORY_ITERS forwards; OpenBLAS, 1 thread, batch 1); {"error": ...} if it fails."""
    cmd = [fxcpp, "bench", os.path.join(models_dir, name + ".bench.pt"), "--input",
           os.path.join(models_dir, name + ".bench.input.pt"), "--engine", engine_key, "--iters", str(MEMORY_ITERS),
           "--threads", "1", "--batch", "1", "--json"]
    try:
        return run_json(cmd, child_env("openblas"), 900)["peak_rss_mb"]
    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        log("  " + msg)
        return {"error": msg}


def memory_table(fxcpp, models_dir, models):
    """{model: {engine: peak MB or {"error": ...}}}, each engine alone in its own child process."""
    out = {}
    for name in models:
        log("peak memory of %s, each engine alone" % name)
        out[name] = {key: peak_memory(fxcpp, models_dir, name, key) for key, _ in MEMORY_ENGINES}
    return out


def render_memory(memory):
    """The markdown lines of the peak-memory table (memory: what memory_table returned)."""
    def fmt(v):
        return "failed: %s" % v["error"] if isinstance(v, dict) else "%.0f" % v
    lines = ["Peak resident memory per engine, MB: each engine alone in its own `fxcpp bench --engine E --iters %d` "
             "child process (OpenBLAS, 1 thread, batch 1), its VmHWM at its end: loading, preparing "
             "(TS-opt: freeze + optimize_for_inference; fxcpp-opt: import + optimise, the imported module then "
             "dropped) and 2 warm-up + %d timed forwards, with libtorch's own code and data. The model is imported "
             "in every child (inputs checked, FLOPs counted)." % (MEMORY_ITERS, MEMORY_ITERS), "",
             "| model | " + " | ".join("%s MB" % label for _, label in MEMORY_ENGINES) + " | fxcpp-opt / TS-opt |",
             "|---|" + "---|" * (len(MEMORY_ENGINES) + 1)]
    ratios = []
    for name, peaks in memory.items():
        opt, tso = peaks.get("fxcpp_opt"), peaks.get("torchscript_opt")
        ratio = opt / tso if isinstance(opt, float) and isinstance(tso, float) and tso > 0 else None
        if ratio is not None:
            ratios.append(ratio)
        lines.append("| %s | %s | %s |" % (name, " | ".join(fmt(peaks[k]) for k, _ in MEMORY_ENGINES),
                                          fmt_ratio(ratio)))
    lines += ["", "Geomean of fxcpp-opt / TS-opt peak memory: %s." % fmt_ratio(geomean(ratios))]
    return lines


PYFX_CHILD = r"""
import sys, time, warnings
warnings.filterwarnings("ignore")
import torch, torchvision
import torch.fx.experimental.optimization as optimization
torch.set_num_threads(1)
torch.manual_seed(0)
model = getattr(torchvision.models, sys.argv[1])(weights=None).eval()
x = torch.load(sys.argv[2])
with torch.no_grad():
    t0 = time.perf_counter()
    opt = optimization.optimize_for_inference(model)
    optimize_ms = (time.perf_counter() - t0) * 1e3
    times = []
    start = time.perf_counter()
    for i in range(1000):
        t0 = time.perf_counter()
        opt(x)
        times.append((time.perf_counter() - t0) * 1e3)
        if i >= 4 and time.perf_counter() - start > float(sys.argv[3]):
            break
times = sorted(times[2:])
print('{"median_ms": %f, "optimize_ms": %f}' % (times[len(times) // 2], optimize_ms))
"""


def pyfx(models_dir, name, seconds):
    """Python torch.fx's optimize_for_inference (OpenBLAS, one thread, batch 1), in a child process; None if it fails."""
    cmd = [sys.executable, "-c", PYFX_CHILD, name, os.path.join(models_dir, name + ".bench.input.pt"), str(seconds)]
    log("+ python torch.fx optimize_for_inference " + name)
    p = subprocess.run(cmd, env=child_env("openblas"), capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
        log("  python torch.fx failed on %s: %s" % (name, last))
        return {"error": last.split(":")[0].split(".")[-1]}  # "TraceError"
    return json.loads(p.stdout.strip().splitlines()[-1])


def configs(models, quick, blases, everything):
    out = []
    for name in models:
        if quick:
            out.append({"model": name, "blas": "openblas", "threads": 1, "batch": 1, "bf16": True})
            continue
        for blas in blases:
            for threads in (1, 2):
                for batch in (1, 8):
                    cfg = {"model": name, "blas": blas, "threads": threads, "batch": batch,
                           "bf16": blas == "openblas" and threads == 1 and batch == 1}
                    reason = None if everything else skip_reason(cfg)
                    if reason:
                        cfg["skipped"] = reason
                    out.append(cfg)
    return out


def engine(result, key):
    for e in result["engines"]:
        if e["engine"] == key:
            return e
    return None


def fmt_prepare(v):
    return "%.0f" % v if v >= 10 else "%.1f" % v


def roofline_paths(r):
    """"fp32 at::mm 83, oneDNN mkldnn_linear 194 GFLOP/s; bf16 ..." from a roofline result."""
    parts = []
    for dtype in ("fp32", "bf16"):
        paths = [p for p in r["paths"] if p["dtype"] == dtype]
        if paths:
            parts.append(dtype + " " + ", ".join("%s %.0f" % (p["path"], p["gflops"]) for p in paths) + " GFLOP/s")
    return "; ".join(parts)


def bf16_fallback(res):
    """The optimiser's warning when the row's bf16 engine kept float32 kernels (a CPU without oneDNN bf16
    kernels: `fxcpp bench --bf16` warns "bf16: ... float32 kernels", issue 39), else None. The row's report is
    the fp32 engine's with the warnings of the other optimised engines added (tools/fxcpp/bench.cpp)."""
    return next((w for w in (res.get("optimize") or {}).get("warnings", []) if w.startswith("bf16:")), None)


def fmt_pyfx(py):
    if py is None:
        return "—"
    return "fails (%s)" % py["error"] if "error" in py else fmt_ms(py["median_ms"])


def render(data):
    """The markdown document of a run (data: what main() saved)."""
    roof = {int(k): v for k, v in data["roofline"].items()}
    load = load_note(data)
    lines = ["Measured %s on %s (%s logical CPUs), libtorch %s; `%s`, wall time %.1f min.%s" %
             (data["date"], data["cpu"], data["cpus"], data["torch"], data["command"], data["wall_s"] / 60, load), "",
             "One `fxcpp bench` child process per row; in it the four engines run interleaved round-robin "
             "(one forward of each per round, after warm-up), median of at least 3 rounds; torchvision models "
             "with random seeded weights, 224×224 inputs, batch = the input repeated along dim 0.",
             "Matmul roofline (%d³, measured in the same run; the best path of each dtype counts): %s." %
             (ROOFLINE_SIZE, "; ".join("%d thread%s: %s" % (t, "" if t == 1 else "s", roofline_paths(r))
                                       for t, r in sorted(roof.items()))), "",
             "| model | BLAS | threads | batch | TS ms | TS-opt ms | fxcpp ms | fxcpp-opt ms | opt / TS-opt "
             "| GFLOP/s | % of roofline | optimise ms | max diff | Python fx-opt ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ratios, skipped = {}, {}
    for r in data["results"]:
        cfg = r["config"]
        label = BLAS_LABEL[cfg["blas"]]
        head = "| %s | %s | %d | %d |" % (cfg["model"], label, cfg["threads"], cfg["batch"])
        if "skipped" in cfg:
            skipped.setdefault(cfg["skipped"], []).append(cfg)
            continue
        if "error" in r:
            lines.append(head + " failed: %s |" % r["error"] + " |" * 9)
            continue
        res = r["result"]
        ts, tso, fx, opt = (engine(res, k) for k in ("torchscript", "torchscript_opt", "fxcpp", "fxcpp_opt"))
        ratios.setdefault(cfg["blas"], []).append(opt["ratio"])
        peak = roof.get(cfg["threads"], {}).get("fp32_gflops")
        py = r.get("pyfx")
        lines.append(head + " %s | %s | %s | %s | %s | %.1f | %s | %s | %.1e | %s |" % (
            fmt_ms(ts["median_ms"]), fmt_ms(tso["median_ms"]), fmt_ms(fx["median_ms"]), fmt_ms(opt["median_ms"]),
            fmt_ratio(opt["ratio"]), opt["gflops"], "%.0f%%" % (100 * opt["gflops"] / peak) if peak else "—",
            fmt_prepare(opt["prepare_ms"]), opt["max_rel_diff"], fmt_pyfx(py)))
    all_ratios = [v for vs in ratios.values() for v in vs]
    lines += ["", "TS: eager TorchScript (`torch::jit::load`, `forward`); TS-opt: "
              "`torch::jit::optimize_for_inference(torch::jit::freeze(module))`; fxcpp: `GraphModule::forward` of "
              "the imported module; fxcpp-opt: of `fx::optimize_for_inference`'s (example inputs given). GFLOP/s: "
              "fxcpp-opt, FLOPs of `fx::summarize_model`; % of roofline: of the fp32 matmul roofline at the same "
              "thread count; optimise ms: wall time of `fx::optimize_for_inference`; max diff: "
              "max |fxcpp-opt − TS| / max |TS|; Python fx-opt: Python torch.fx's "
              "`experimental.optimization.optimize_for_inference` (OpenBLAS, 1 thread, batch 1 only).", ""]
    for reason, cfgs in skipped.items():
        models = ", ".join(dict.fromkeys(c["model"] for c in cfgs))
        lines.append("Not measured (the budget of `make bench`; `scripts/bench_optimize.py --all` does): %s "
                     "(%d configuration%s: %s)." % (reason, len(cfgs), "" if len(cfgs) == 1 else "s", models))
    lines.append("Geomean of fxcpp-opt / TS-opt: %s over %d rows (%s)." % (
        fmt_ratio(geomean(all_ratios)), len(all_ratios),
        ", ".join("%s %s" % (BLAS_LABEL[b], fmt_ratio(geomean(v))) for b, v in sorted(ratios.items()))))
    bf16 = [r for r in data["results"] if r["config"]["bf16"] and "result" in r]
    if bf16:
        peak = roof.get(1, {}).get("bf16_gflops")
        lines += ["", "bf16 (opt-in; OpenBLAS, threads 1, batch 1; max diff: against eager fp32 TorchScript, "
                      "relative to max |output|):", "",
                  "| model | TS-opt ms (fp32) | fxcpp-opt fp32 ms | fxcpp-opt bf16 ms | bf16 / TS-opt | GFLOP/s "
                  "| % of bf16 roofline | optimise ms | max diff |",
                  "|---|---|---|---|---|---|---|---|---|"]
        bf16_ratios, fallbacks = [], {}
        for r in bf16:
            res = r["result"]
            tso, opt, b = (engine(res, k) for k in ("torchscript_opt", "fxcpp_opt", "fxcpp_opt_bf16"))
            bf16_ratios.append(b["ratio"])
            fallback = bf16_fallback(res)
            if fallback:
                fallbacks.setdefault(fallback, []).append(r["config"]["model"])
            of_peak = "— (float32 kernels)" if fallback else "%.0f%%" % (100 * b["gflops"] / peak) if peak else "—"
            lines.append("| %s | %s | %s | %s | %s | %.1f | %s | %s | %.1e |" % (
                r["config"]["model"], fmt_ms(tso["median_ms"]), fmt_ms(opt["median_ms"]), fmt_ms(b["median_ms"]),
                fmt_ratio(b["ratio"]), b["gflops"], of_peak, fmt_prepare(b["prepare_ms"]), b["max_rel_diff"]))
        lines += ["", "Geomean of fxcpp-opt bf16 / TS-opt: %s." % fmt_ratio(geomean(bf16_ratios))]
        for warning, models in fallbacks.items():
            lines += ["", "Asked for bf16, fxcpp-opt kept float32 kernels in %d of %d rows (%s), as the optimiser "
                      "warned: \"%s\". Those rows' bf16 column is float32 timing." %
                      (len(models), len(bf16), ", ".join(models), warning)]
    if data.get("avx2_held"):
        lines += [""] + render_avx2_held(data["avx2_held"])
    if data.get("memory"):
        lines += [""] + render_memory(data["memory"])
    return "\n".join(lines) + "\n"




def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true", help="one configuration per model (OpenBLAS, 1 thread, batch 1)")
    ap.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    ap.add_argument("--blas", nargs="+", default=["openblas", "reference"], choices=["openblas", "reference"])
    ap.add_argument("--seconds", type=float, default=None,
                    help="time budget of each configuration's timed rounds (default 2, --quick 1; at least 3 rounds)")
    ap.add_argument("--all", action="store_true", help="also the configurations make bench leaves out (skip_reason)")
    ap.add_argument("--no-python", action="store_true", help="leave out Python torch.fx's optimize_for_inference")
    ap.add_argument("--no-avx2", action="store_true", help="leave out the models held at AVX2")
    add_save_args(ap, "bench_optimize")
    ap.add_argument("--memory-only", action="store_true",
                    help="measure and print only the peak-memory table (writes no file)")
    args = ap.parse_args()
    json_path, md_path = run_paths(args, "bench_optimize")
    if args.render:
        print_saved(json_path, render)
        return 0
    fxcpp = os.path.join(args.build, "fxcpp")
    if not os.access(fxcpp, os.X_OK):
        sys.exit("%s: not built (ninja -C %s fxcpp_cli)" % (fxcpp, args.build))
    blases = args.blas
    if "reference" in blases and not os.path.exists(os.path.join(REFERENCE_BLAS_DIR, "libblas.so.3")):
        log("no reference BLAS in %s (Debian libblas3): measuring OpenBLAS only" % REFERENCE_BLAS_DIR)
        blases = [b for b in blases if b != "reference"]
    seconds = args.seconds or (1.0 if args.quick else 2.0)
    models_dir = os.path.join(args.build, "models")
    start = time.time()
    export_models(models_dir, args.models)
    if args.memory_only:
        print("\n".join(render_memory(memory_table(fxcpp, models_dir, args.models))))
        return 0
    import torch
    data = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "cpu": cpu_name(),
            "cpus": os.cpu_count(), "torch": torch.__version__,
            "command": "make bench" + (" (--quick)" if args.quick else ""), "load_start": load_average(),
            "roofline": {}, "results": []}
    cfgs = configs(args.models, args.quick, blases, args.all)
    for threads in sorted({c["threads"] for c in cfgs}):
        data["roofline"][threads] = roofline(fxcpp, threads)
    for i, cfg in enumerate(cfgs):
        entry = {"config": cfg}
        if "skipped" not in cfg:
            log("[%d/%d] %s, %s BLAS, %d thread(s), batch %d%s (%.0f s so far)" % (
                i + 1, len(cfgs), cfg["model"], cfg["blas"], cfg["threads"], cfg["batch"],
                ", bf16 too" if cfg["bf16"] else "", time.time() - start))
            try:
                entry["result"] = bench_config(fxcpp, models_dir, cfg, seconds)
            except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
                entry["error"] = str(e).splitlines()[0] if str(e) else type(e).__name__
                log("  " + entry["error"])
            if cfg["bf16"] and not args.no_python:
                entry["pyfx"] = pyfx(models_dir, cfg["model"], seconds)
        data["results"].append(entry)
    if not args.no_avx2 and "avx512f" in open("/proc/cpuinfo").read():
        data["avx2_held"] = {}
        for name in args.models:
            log("held at AVX2: %s (%.0f s so far)" % (name, time.time() - start))
            try:
                data["avx2_held"][name] = {"result": bench_avx2_held(fxcpp, models_dir, name, seconds)}
            except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
                data["avx2_held"][name] = {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}
                log("  " + data["avx2_held"][name]["error"])
    data["memory"] = memory_table(fxcpp, models_dir, args.models)
    save_run(data, start, json_path, md_path, render)
    failed = any("error" in r for r in data["results"]) or any(
        "error" in r for r in data.get("avx2_held", {}).values()) or any(
        isinstance(v, dict) for peaks in data["memory"].values() for v in peaks.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
