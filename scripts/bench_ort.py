#!/usr/bin/python3
"""`make bench`, issue 24: fxcpp's optimize_for_inference against ONNX Runtime (optional).

ONNX Runtime (the npm package onnxruntime-node 1.30, installed into BUILD/ort by
scripts/setup_ort.sh; skipped, with the reason, when it cannot be had) runs
under Node.js in bench/ort/ort_bench.js: CPU execution provider, sequential
execution, N intra-op threads, one inter-op thread, graph optimisation level
'all', on torch.onnx.export's opset-14 file of the model (python/export_onnx.py,
static shapes). fxcpp's engines run in `fxcpp bench-worker`: TorchScript's
optimize_for_inference (TS-opt) and fxcpp's (fxcpp-opt, fp32). Both processes
are loaded, checked against the eager PyTorch output and warmed up; then this
driver interleaves them: one forward of each engine per round, the engine that
goes first rotating, each process waiting on its pipe while the other runs
(and a short pause, --gap-ms, between two requests, so that one runtime's
spinning pool threads are asleep before the other starts). At 1 thread both
processes are pinned to one CPU (--cpu): unpinned, each stayed on the CPU it
last ran on, and a VM's vCPUs can differ in speed. Medians of the rounds;
fxcpp-opt / ORT is the median of the per-round ratios.

Models: torchvision resnet18, resnet50, mobilenet_v2, efficientnet_b0,
vit_b_16 with honest random weights (python/export_onnx.py), 224x224;
batch 1 and 8, 1 and 2 threads (--quick: batch 1, 1 thread). Writes
SAVE_DIR/bench_ort.md and SAVE_DIR/bench_ort.json (--save-dir, default the build
dir; `make bench` saves into docs/bench/; --render re-prints the markdown).

    /usr/bin/python3 scripts/bench_ort.py [--build build] [--save-dir DIR] [--quick] [--models ...] [--cpu N] [--render]
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
from bench_markdown import (AVX2_HELD, add_save_args, cpu_info, cpu_name, geomean, fmt_ms, fmt_ratio, load_average,  # noqa: E402
                            load_note, log, print_saved, run_paths, save_run)
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "vit_b_16"]
ENGINES = [("ort", "ORT"), ("fxcpp_opt", "fxcpp-opt"), ("torchscript_opt", "TS-opt")]
ISA_FLAGS = ["avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"]
TARGET_RATIO = 0.90  # issue 24: fxcpp-opt at most 0.90x ORT
AVX2_TARGET_GEOMEAN, AVX2_TARGET_ROW = 1.0, 1.1  # issue 39, on an AVX2-only CPU: geomean and every row


def child_env(held=False):
    env = dict(os.environ)
    if held:
        env.update(AVX2_HELD)
    env.pop("OMP_NUM_THREADS", None)
    env["FXCPP_NO_PROGRESS"] = "1"
    return env


def pin(cpu):
    """A preexec_fn that pins a child process to CPU `cpu` (None: no pinning)."""
    return None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))


def one_thread_cpu(requested):
    """The CPU both processes of a 1-thread row are pinned to: `requested` (-1: none), by default the first
    this process may run on. Unpinned, the scheduler kept each process on the CPU it had last run on, and the
    two vCPUs of a VM can run at different speeds (an AMD EPYC Zen 5, held at AVX2: resnet18's fxcpp-opt
    took 28 ms on one and 35 on the other, three times each, `taskset -c N fxcpp bench`): the ratio was then
    of two CPUs."""
    if requested is not None:
        return None if requested < 0 else requested
    return min(os.sched_getaffinity(0))


def cpu():
    """(this CPU's name with its family and model, the flags of ISA_FLAGS it has)."""
    info = cpu_info()
    return cpu_name(info), [f for f in ISA_FLAGS if f in info["flags"]]


# The parts a run can be saved as, one per kind of CPU (docs/benchmarks.md keeps a section of each).
PARTS = {
    "bench_ort": "an Intel Xeon with AMX",
    "bench_ort_avx2": "a CPU without AVX-512",
    "bench_ort_amd_avx512": "an AMD EPYC Zen 4",
    "bench_ort_amd_zen5": "an AMD EPYC Zen 5",
    "bench_ort_xeon_no_amx": "an Intel Xeon with AVX-512 and no AMX",
    "bench_ort_held_avx2": "an AVX-512 CPU held at AVX2 (--hold-avx2's proxy)",
}


def part_name(isa):
    """The part a run is saved as: bench_ort on an AVX-512 CPU, bench_ort_avx2 on one without (an AMD EPYC
    Zen 3, most cloud x86): docs/benchmarks.md keeps a table of each, since a ratio measured on one CPU
    says nothing of the other."""
    return "bench_ort" if "avx512f" in isa else "bench_ort_avx2"


class Worker:
    """A child process answering 'run ENGINE K' with one JSON line (fxcpp bench-worker, ort_bench.js)."""

    def __init__(self, label, cmd, held=False, cpu=None):
        log("+ " + ("taskset -c %d " % cpu if cpu is not None else "") + " ".join(cmd))
        self.label = label
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=child_env(held), bufsize=1, preexec_fn=pin(cpu))
        self.ready = self.read()
        if not self.ready.get("ready"):
            raise RuntimeError("%s: not ready: %s" % (label, self.ready))

    def read(self):
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=10)
            err = (self.proc.stderr.read().strip().splitlines() or ["exit %s" % self.proc.returncode])[-1]
            raise RuntimeError("%s failed: %s" % (self.label, err))
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError("%s: %s" % (self.label, reply["error"]))
        return reply

    def run(self, engine, count=1):
        self.proc.stdin.write("run %s %d\n" % (engine, count))
        self.proc.stdin.flush()
        return self.read()["ms"]

    def close(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def median(values):
    v = sorted(values)
    n = len(v)
    return None if n == 0 else (v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2)


def bench_config(fxcpp, ort_pkg, models, cfg, args):
    """One row: both workers up, warm-up rounds, then timed rounds of one forward per engine (ort_pkg: the
    onnxruntime-node package directory; args.hold_avx2: fxcpp's process held at AVX2 too)."""
    name, threads, batch = cfg["model"], cfg["threads"], cfg["batch"]
    stem = os.path.join(models, "%s.b%d" % (name, batch))
    pinned = args.cpu if threads == 1 else None  # at 1 thread both processes on one CPU
    workers = []
    try:
        fx = Worker("fxcpp bench-worker", [fxcpp, "bench-worker", os.path.join(models, name + ".pt"), "--input",
                                           os.path.join(models, name + ".input.pt"), "--threads", str(threads),
                                           "--batch", str(batch)], held=args.hold_avx2, cpu=pinned)
        workers.append(fx)
        ort = Worker("ort_bench.js", ["node", os.path.join(ROOT, "bench", "ort", "ort_bench.js"), "--ort",
                                      os.path.abspath(ort_pkg),
                                      "--model", stem + ".onnx", "--input", stem + ".input.bin", "--output",
                                      stem + ".output.bin", "--info", stem + ".json", "--threads", str(threads)],
                     cpu=pinned)
        workers.append(ort)
        by_engine = {"ort": ort, "fxcpp_opt": fx, "torchscript_opt": fx}
        keys = [k for k, _ in ENGINES]
        samples = {k: [] for k in keys}
        paired = []  # fxcpp-opt / ORT within each round
        gap = args.gap_ms / 1e3
        # With several threads a turn is a block of forwards, then a pause:
        # a runtime's pool threads spin for a while after their last task
        # (libgomp's barriers, ONNX Runtime's pool), and on a machine with as
        # many cores as threads the spinning of the process that just ran
        # took the cores of the one that runs next (resnet18, 2 threads,
        # batch 1: fxcpp-opt 29 ms interleaved forward by forward, 12 ms
        # alone). One forward per turn at one thread, as before.
        block, pause = 1, gap
        if threads > 1:
            pause = max(gap, args.block_pause_ms / 1e3)

        def one_round(r, timed):
            medians = {}
            for i in range(len(keys)):
                key = keys[(r + i) % len(keys)]
                ms = by_engine[key].run(key, block)
                medians[key] = median(ms)
                if timed:
                    samples[key] += ms
                time.sleep(pause)
            if timed:
                paired.append(medians["fxcpp_opt"] / medians["ort"])
        for r in range(args.warmup):
            one_round(r, False)
        if threads > 1:  # blocks of about --block-ms of the slowest engine
            slowest = max(median(samples_of) for samples_of in [by_engine[k].run(k, 2) for k in keys])
            block = max(1, min(20, int(round(args.block_ms / slowest))))
        start, rounds = time.time(), 0
        while rounds < args.min_rounds or (time.time() - start < args.seconds and rounds < args.max_rounds):
            one_round(rounds, True)
            rounds += 1
        fx_engines = {e["engine"]: e for e in fx.ready["engines"]}
        out = {"rounds": rounds, "flops": fx.ready["flops"], "ort_version": ort.ready["ort"],
               "paired_ratio": median(paired),
               "ort_load_ms": ort.ready["load_ms"], "engines": {}}
        for key in keys:
            diff = ort.ready["max_rel_diff"] if key == "ort" else fx_engines[key]["max_rel_diff"]
            out["engines"][key] = {"median_ms": median(samples[key]), "min_ms": min(samples[key]),
                                   "max_rel_diff": diff}
        return out
    finally:
        for w in workers:
            w.close()


def pinned_note(data):
    """How a run placed its 1-thread processes (runs before the field: unpinned)."""
    cpu = data.get("one_thread_cpu")
    if cpu is None:
        return ""
    return " (at 1 thread both pinned to CPU %d: two vCPUs can run at different speeds)" % cpu


def render(data):
    roof = {int(k): v for k, v in data["roofline"].items()}
    isa = ", ".join(data["isa"]) or "none of " + ", ".join(ISA_FLAGS)
    held = data.get("held_avx2", False)
    if held:
        isa = "held at AVX2; the CPU has " + isa
    load = load_note(data)
    lines = ["Measured %s on %s (%s logical CPUs; %s%s), libtorch %s, ONNX Runtime %s (npm onnxruntime-node, CPU "
             "execution provider); `%s` (in `make bench`), wall time %.1f min.%s" % (
                 data["date"], data["cpu"], data["cpus"], isa, "" if "amx_tile" in data["isa"] else "; no AMX",
                 data["torch"], data.get("ort_version", "?"), data["command"], data["wall_s"] / 60, load), ""]
    if held:
        lines += ["Held at AVX2 (`--hold-avx2`): fxcpp's and TorchScript's process with oneDNN, ATen and OpenBLAS held "
                  "by the environment (%s), ONNX Runtime with a copy of its library whose MLAS skips its AVX-512 "
                  "kernels (`scripts/ort_hold_avx2.py`). A proxy: AVX2 code on an AVX-512 core, whose caches, "
                  "clocks and execution units are not an AVX2 CPU's; issue 39's targets are measured on an "
                  "AVX2-only CPU." % " ".join("%s=%s" % kv for kv in sorted(AVX2_HELD.items())), ""]
    lines += [
             "Two processes per row, both loaded, checked and warmed up, then interleaved: one forward of each "
             "engine per round at 1 thread, a block of forwards (about 150 ms) then a 100 ms pause at 2 threads "
             "(a runtime's pool threads spin after their last task and took the cores of the other process) "
             "(the first engine rotating), each process idle on its pipe while the other runs%s; "
             "medians of at least %d rounds; fxcpp-opt / ORT is the median of the rounds' ratios (a burst of load from elsewhere hits both engines of a round alike), fxcpp-opt / TS-opt the ratio of the medians. ORT: ONNX Runtime on torch.onnx.export's opset-14 file (static "
             "shapes), sequential, N intra-op threads, 1 inter-op thread, graph optimisation 'all'; fxcpp-opt: "
             "`fx::optimize_for_inference` (fp32); TS-opt: `torch::jit::optimize_for_inference(freeze(...))`. "
             "torchvision models with honest random weights (python/export_onnx.py), 224×224, batch = the input "
             "repeated along dim 0. Max diff: max |engine − eager PyTorch| / max |eager|." % (
                 pinned_note(data), data["min_rounds"]),
             "Matmul roofline (1024³, `fxcpp bench --roofline`, same run): %s." % "; ".join(
                 "%d thread%s fp32 %.0f GFLOP/s" % (t, "" if t == 1 else "s", r["fp32_gflops"])
                 for t, r in sorted(roof.items())), "",
             "| model | batch | threads | ORT ms | fxcpp-opt ms | TS-opt ms | fxcpp-opt / ORT | fxcpp-opt / TS-opt "
             "| fxcpp-opt GFLOP/s | % of roofline | max diff ORT | max diff fxcpp-opt |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ratios, ms = {}, {}
    met_ort = met_ts = rows = 0
    for r in data["results"]:
        cfg = r["config"]
        head = "| %s | %d | %d |" % (cfg["model"], cfg["batch"], cfg["threads"])
        if "error" in r:
            lines.append(head + " failed: %s |" % r["error"] + " |" * 8)
            continue
        e = r["result"]["engines"]
        o, f, t = (e[k]["median_ms"] for k in ("ort", "fxcpp_opt", "torchscript_opt"))
        ms[(cfg["model"], cfg["batch"], cfg["threads"])] = (o, f, t)
        ratio = r["result"].get("paired_ratio") or f / o
        ratios.setdefault((cfg["threads"], cfg["batch"]), []).append(ratio)
        rows += 1
        met_ort += ratio <= TARGET_RATIO
        met_ts += f <= t
        gflops = r["result"]["flops"] / (f * 1e6)
        peak = roof.get(cfg["threads"], {}).get("fp32_gflops")
        lines.append(head + " %s | %s | %s | %s | %s | %.1f | %s | %.1e | %.1e |" % (
            fmt_ms(o), fmt_ms(f), fmt_ms(t), fmt_ratio(ratio), fmt_ratio(f / t), gflops,
            "%.0f%%" % (100 * gflops / peak) if peak else "—", e["ort"]["max_rel_diff"],
            e["fxcpp_opt"]["max_rel_diff"]))
    all_ratios = [v for vs in ratios.values() for v in vs]
    summary = "Geomean of fxcpp-opt / ORT: %s over %d rows (%s)." % (
        fmt_ratio(geomean(all_ratios)), len(all_ratios),
        ", ".join("%d thread%s batch %d: %s" % (t, "" if t == 1 else "s", b, fmt_ratio(geomean(v)))
                  for (t, b), v in sorted(ratios.items())))
    if "avx512f" in data["isa"] and not held:
        summary += " Issue 24's targets: fxcpp-opt ≤ %.2f× ORT in %d of %d rows; fxcpp-opt no slower than TS-opt " \
                   "in %d of %d rows." % (TARGET_RATIO, met_ort, rows, met_ts, rows)
    else:  # issue 39: an AVX2-only CPU
        summary += (" Issue 39's targets on AVX2 (here a proxy of them):" if held else " Issue 39's targets on AVX2:") + \
            " a geomean ≤ %.2f and no row above %.2f× ORT (%d rows above); " \
                   "fxcpp-opt no slower than TS-opt in %d of %d rows." % (
                       AVX2_TARGET_GEOMEAN, AVX2_TARGET_ROW, sum(r > AVX2_TARGET_ROW for r in all_ratios), met_ts, rows)
    lines += ["", summary]
    scaling = []
    for (model, batch, threads), one in ms.items():
        two = ms.get((model, batch, 2))
        if threads == 1 and two:
            scaling.append("| %s | %d | %s |" % (model, batch, " | ".join(
                "%.2f×" % (a / b) for a, b in zip(one, two))))
    if scaling:
        lines += ["", "Scaling from 1 to 2 threads (ms at 1 thread / ms at 2 threads, same table):", "",
                  "| model | batch | ORT | fxcpp-opt | TS-opt |", "|---|---|---|---|---|"] + scaling
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true", help="batch 1, 1 thread only")
    ap.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    ap.add_argument("--threads", type=int, nargs="+", default=None, help="default 1 2 (--quick: 1)")
    ap.add_argument("--batch", type=int, nargs="+", default=None, help="default 1 8 (--quick: 1)")
    ap.add_argument("--seconds", type=float, default=None, help="time budget of a row's timed rounds (default 3, "
                    "--quick 1; at least --min-rounds rounds)")
    ap.add_argument("--min-rounds", type=int, default=5)
    ap.add_argument("--max-rounds", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--gap-ms", type=float, default=5.0, help="pause between two requests (default 5)")
    ap.add_argument("--block-ms", type=float, default=150.0,
                    help="with several threads: a turn runs forwards for about this long (default 150)")
    ap.add_argument("--block-pause-ms", type=float, default=100.0,
                    help="with several threads: pause after each turn (default 100)")
    ap.add_argument("--cpu", type=int, default=None,
                    help="at 1 thread, pin both processes to this CPU (default: the first this process may run "
                         "on; -1: not pinned)")
    add_save_args(ap, "bench_ort")
    ap.add_argument("--hold-avx2", action="store_true",
                    help="on an AVX-512 CPU, everything held at AVX2: fxcpp and TorchScript by the environment "
                         "(oneDNN, ATen, OpenBLAS), ONNX Runtime by a copy of its library whose MLAS skips its "
                         "AVX-512 kernels (scripts/ort_hold_avx2.py; BUILD/ort_avx2); saved as "
                         "bench_ort_held_avx2. A proxy for issue 39's AVX2 targets, not an AVX2 CPU's figures")
    ap.add_argument("--part", choices=sorted(PARTS), default=None,
                    help="the name the run is saved (or --render reads) under; default: bench_ort on an AVX-512 "
                         "CPU, bench_ort_avx2 on one without, bench_ort_held_avx2 with --hold-avx2; the others: " +
                         ", ".join("%s: %s" % (k, v) for k, v in PARTS.items()
                                   if k not in ("bench_ort", "bench_ort_avx2", "bench_ort_held_avx2")))
    args = ap.parse_args()
    name, isa = cpu()
    if args.hold_avx2 and "avx512f" not in isa:
        sys.exit("bench_ort.py --hold-avx2: this CPU has no AVX-512; run without it (bench_ort_avx2)")
    json_path, md_path = run_paths(args, args.part or ("bench_ort_held_avx2" if args.hold_avx2 else part_name(isa)))
    if args.render:
        print_saved(json_path, render)
        return 0
    fxcpp = os.path.join(args.build, "fxcpp")
    if not os.access(fxcpp, os.X_OK):
        sys.exit("%s: not built (cmake --build %s --target fxcpp_cli)" % (fxcpp, args.build))
    ort_dir = os.path.join(args.build, "ort")
    setup = subprocess.run(["bash", os.path.join(ROOT, "scripts", "setup_ort.sh"), ort_dir],
                           capture_output=True, text=True)
    if setup.returncode != 0:
        reason = (setup.stderr.strip().splitlines() or ["setup_ort.sh failed"])[-1]
        print("fxcpp vs ONNX Runtime: skipped (optional; %s)" % reason)
        return 0
    ort_pkg = os.path.join(ort_dir, "node_modules", "onnxruntime-node")
    if args.hold_avx2:
        from ort_hold_avx2 import make_held_copy
        try:
            ort_pkg = make_held_copy(ort_pkg, os.path.join(args.build, "ort_avx2"))
        except (OSError, ValueError) as e:
            sys.exit("bench_ort.py --hold-avx2: %s" % e)
    threads = args.threads or ([1] if args.quick else [1, 2])
    batches = args.batch or ([1] if args.quick else [1, 8])
    seconds = args.seconds or (1.0 if args.quick else 3.0)
    models = os.path.join(ort_dir, "models")
    start = time.time()
    export = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "python", "export_onnx.py"), "--out", models,
                             "--batch"] + [str(b) for b in batches] + ["--"] + args.models, stdout=sys.stderr)
    if export.returncode != 0:
        sys.exit("bench_ort.py: python/export_onnx.py failed")
    import torch
    data = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "cpu": name,
            "isa": isa, "held_avx2": args.hold_avx2, "cpus": os.cpu_count(), "torch": torch.__version__, "min_rounds": args.min_rounds,
            "command": "/usr/bin/python3 scripts/bench_ort.py" + " ".join([""] + sys.argv[1:]),
            "load_start": load_average(), "roofline": {}, "results": [],
            "one_thread_cpu": one_thread_cpu(args.cpu)}
    for t in threads:
        p = subprocess.run([fxcpp, "bench", "--roofline", "--size", "1024", "--threads", str(t), "--json"],
                           capture_output=True, text=True, env=child_env(args.hold_avx2), timeout=300,
                           preexec_fn=pin(data["one_thread_cpu"] if t == 1 else None))
        if p.returncode == 0:
            data["roofline"][t] = json.loads(p.stdout)
    cfgs = [{"model": m, "threads": t, "batch": b} for m in args.models for t in threads for b in batches]
    for i, cfg in enumerate(cfgs):
        log("[%d/%d] %s, %d thread(s), batch %d (%.0f s so far)" % (i + 1, len(cfgs), cfg["model"], cfg["threads"],
                                                                   cfg["batch"], time.time() - start))
        entry = {"config": cfg}
        try:
            opts = argparse.Namespace(warmup=args.warmup, min_rounds=args.min_rounds, max_rounds=args.max_rounds,
                                      seconds=seconds, gap_ms=args.gap_ms, block_ms=args.block_ms,
                                      block_pause_ms=args.block_pause_ms, hold_avx2=args.hold_avx2,
                                      cpu=data["one_thread_cpu"])
            try:
                entry["result"] = bench_config(fxcpp, ort_pkg, models, cfg, opts)
            except (RuntimeError, OSError) as e:  # once more: fxcpp may have been relinking (Permission denied)
                log("  %s; trying again in 20 s" % (str(e).splitlines()[0] if str(e) else type(e).__name__))
                time.sleep(20)
                entry["result"] = bench_config(fxcpp, ort_pkg, models, cfg, opts)
            data["ort_version"] = entry["result"]["ort_version"]
            e = entry["result"]["engines"]
            log("  ORT %.2f ms, fxcpp-opt %.2f ms, TS-opt %.2f ms" % tuple(
                e[k]["median_ms"] for k in ("ort", "fxcpp_opt", "torchscript_opt")))
        except (RuntimeError, subprocess.TimeoutExpired, ValueError, OSError) as e:
            entry["error"] = str(e).splitlines()[0] if str(e) else type(e).__name__
            log("  " + entry["error"])
        data["results"].append(entry)
    save_run(data, start, json_path, md_path, render)
    return 1 if any("error" in r for r in data["results"]) else 0


if __name__ == "__main__":
    sys.exit(main())
