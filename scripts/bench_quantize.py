#!/usr/bin/python3
"""`make bench`, issue 22: fxcpp's int8 against Python's int8 and both fp32 optimisers.

Per model (resnet18, resnet50, mobilenet_v2, efficientnet_b0; torchvision, random
seeded weights with honest batch-norm statistics, 224x224) and batch (1, 8), one
`fxcpp bench --json --threads 1` child whose engines run interleaved round-robin:

  fxcpp_int8       fx::quantization::quantize (calibrated on NAME.q224.calib.pt, 8 random
                   images), lowered to oneDNN int8 kernels
  python_int8      Python's quantize_fx (onednn engine) of the same model on the same
                   calibration data, traced and frozen (python/quantize_baseline.py), run by
                   libtorch's quantized kernels in the same process
  torchscript_opt  TorchScript freeze + optimize_for_inference (fp32), the reference
  fxcpp_opt        fx::optimize_for_inference (fp32)

On a CPU with AVX-512, the models again at batch 1 held at AVX2 (bench_markdown.AVX2_HELD: the
kernels of an AVX2-only CPU, without VNNI): int8 against fp32 and Python's int8 there, the int8
convolutions each side runs, and what `fxcpp quantize` says of resnet18 there. Where there is no
VNNI (held, or the CPU's own) fxcpp's int8 with 7-bit weights runs too (fxcpp_int8_7bit:
`fxcpp quantize --weight-bits 7`, oneDNN's int8 kernels instead of float32 ones). On a CPU
without AVX-512 (an AMD EPYC Zen 3: no VNNI either, issue 39) the run is saved as the part
bench_quantize_avx2 (--part overrides), with int8 against fp32 and what `fxcpp quantize`
says of resnet18 on it.

Prints a markdown table of median ms and the ratios (int8 / TS-opt, fxcpp int8 /
Python int8) naming the CPU (lscpu's model name; whether it has avx512_vnni,
avx_vnni, amx_int8) and the date and load average of the run, writes it to
SAVE_DIR/bench_quantize.md and the run to SAVE_DIR/bench_quantize.json
(--save-dir, default the build dir; `make bench` saves into docs/bench/;
--render re-prints the markdown). Models are exported to BUILD/models/NAME.q224.*
on first use.

    /usr/bin/python3 scripts/bench_quantize.py [--build build] [--save-dir DIR] [--quick] [--seconds S] [--render]
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from bench_markdown import (AVX2_HELD, add_save_args, command_line, cpu_info, cpu_name, geomean,  # noqa: E402
                            load_average, measured, print_saved, run_paths, save_run, utc_now)
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0"]
ENGINES = ["torchscript_opt", "fxcpp_opt", "python_int8", "fxcpp_int8"]
SIZE = 224


def cpu():
    """The CPU's name (bench_markdown.cpu_name), the int8 instructions it has, and whether it has AVX-512."""
    info = cpu_info()
    isa = [f for f in ("avx512_vnni", "avx_vnni", "amx_int8") if f in info["flags"]]
    return cpu_name(info), isa, "avx512f" in info["flags"]


def export(models_dir, name):
    """NAME.q224.pt (scripted fp32), .input.pt, .calib.pt, .int8.pt (Python's int8), once."""
    base = os.path.join(models_dir, name + ".q224")
    if all(os.path.exists(base + s) for s in (".pt", ".input.pt", ".calib.pt", ".int8.pt")):
        return base
    os.makedirs(models_dir, exist_ok=True)
    print(f"exporting {name} (fp32 and Python's int8)", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, os.path.join(ROOT, "python", "quantize_baseline.py"), name, "--size", str(SIZE),
                    "--calibration", base + ".calib.pt", "-o", base + ".int8.pt", "--fp32", base + ".pt",
                    "--input", base + ".input.pt"], check=True, stdout=sys.stderr,
                   env=dict(os.environ, OMP_NUM_THREADS="1"))
    return base


def int8_kernels(cmd, held=False):
    """The oneDNN int8 convolution implementations a command runs (ONEDNN_VERBOSE=1): "brgconv:avx512_core_amx_int8" ...
    (held: with AVX2_HELD's environment)."""
    env = dict(os.environ, ONEDNN_VERBOSE="1", OMP_NUM_THREADS="1", **(AVX2_HELD if held else {}))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env).stdout
    impls = set()
    for line in out.splitlines():
        f = line.split(",")
        if len(f) > 6 and f[1] == "exec" and f[3] == "convolution" and "src_u8" in f[6]:
            impls.add(f[4])
    return sorted(impls)


def resnet18_kernels(fxcpp, base, held=False):
    """{"fxcpp": ..., "Python": ...}: the int8 convolutions each side runs on BASE (int8_kernels)."""
    return {"fxcpp": int8_kernels([fxcpp, "run", base + ".pt", "--input", base + ".input.pt", "--quantize",
                                   "--calibration", base + ".calib.pt"], held),
            "Python": int8_kernels([fxcpp, "bench", base + ".pt", "--input", base + ".input.pt", "--int8-torchscript",
                                    base + ".int8.pt", "--engine", "python_int8", "--iters", "1", "--warmup", "0"],
                                   held)}


def bench(fxcpp, base, batch, seconds, held=False, seven_bit=False):
    """seven_bit: fxcpp's int8 with 7-bit weights too (fxcpp_int8_7bit), where there is no VNNI."""
    cmd = [fxcpp, "bench", base + ".pt", "--input", base + ".input.pt", "--calibration", base + ".calib.pt",
           "--int8-torchscript", base + ".int8.pt", "--threads", "1", "--batch", str(batch), "--seconds",
           str(seconds), "--warmup", "3", "--json"]
    for e in ENGINES + (["fxcpp_int8_7bit"] if seven_bit else []):
        cmd += ["--engine", e]
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env.update(AVX2_HELD if held else {})
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[-1]}
    result = json.loads(out.stdout)
    cpu = result.get("optimize", {}).get("cpu", "")
    if held and not cpu.startswith("oneDNN ISA avx2:"):
        return {"error": "held at AVX2, oneDNN reported %r" % cpu}
    return result


def quantize_notes(fxcpp, base, held=True, weight_bits=8):
    """What `fxcpp quantize [--weight-bits 7]` says of int8 on this CPU (held: held at AVX2): its "note:" lines (no
    VNNI; int8 timed against the float model)."""
    out = subprocess.run([fxcpp, "quantize", base + ".pt", "--calibration", base + ".calib.pt", "-o",
                          base + ".held.int8.fx", "--weight-bits", str(weight_bits)], capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1", **(AVX2_HELD if held else {})))
    if os.path.exists(base + ".held.int8.fx"):
        os.remove(base + ".held.int8.fx")
    lines = (out.stdout + out.stderr).splitlines()
    return [line.strip() for line in lines if "note:" in line] or ["exit %d: %s" % (out.returncode, lines[-1:])]


def render(data):
    """The markdown of a run (data: what main() saved)."""
    cpu_name, isa, avx512, kernels = data["cpu"], data["isa"], data.get("avx512", True), data.get("kernels")
    head = measured(data)
    seven = any(e["engine"] == "fxcpp_int8_7bit" for r in data["results"] for e in r.get("engines", []))
    lines = ["## int8 quantization: fxcpp vs Python's int8 (1 thread, 224x224)", ""] + ([head, ""] if head else [])
    lines += [f"CPU: {cpu_name}; int8 instructions: {', '.join(isa) if isa else 'none (no VNNI: int8 runs without it)'}"
              f"{'' if avx512 else '; no AVX-512'}. Medians of interleaved rounds (`fxcpp bench --engine ...`), "
              "ratios to TorchScript's freeze + optimize_for_inference (TS-opt, fp32)."
              + ("".join(f" {who} int8 convolutions (resnet18, ONEDNN_VERBOSE): {', '.join(k) or 'none'}."
                         for who, k in (kernels or {}).items())), "",
              "| model | batch | TS-opt fp32 ms | fxcpp-opt fp32 | Python int8 (TS) | fxcpp int8 | fxcpp int8 / Python int8 |"
              + (" fxcpp int8 7-bit | 7-bit / Python int8 |" if seven else ""),
              "|---|---|---|---|---|---|---|" + ("---|---|" if seven else "")]
    for r in data["results"]:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['batch']} | {r['error']} | | | | |" + (" | |" if seven else ""))
            continue
        ms = {e["engine"]: e["median_ms"] for e in r["engines"]}
        ts = ms.get("torchscript_opt")

        def cell(k):
            if k not in ms:
                return "—"
            return f"{ms[k]:.2f} ms ({ms[k] / ts:.2f}×)" if ts else f"{ms[k]:.2f} ms"
        vs = f"{ms['fxcpp_int8'] / ms['python_int8']:.2f}" if "fxcpp_int8" in ms and "python_int8" in ms else "—"
        vs7 = f"{ms['fxcpp_int8_7bit'] / ms['python_int8']:.2f}" if "fxcpp_int8_7bit" in ms and "python_int8" in ms \
            else "—"
        lines.append(f"| {r['model']} | {r['batch']} | {ts:.2f} | {cell('fxcpp_opt')} | {cell('python_int8')} | "
                     f"{cell('fxcpp_int8')} | {vs} |" + (f" {cell('fxcpp_int8_7bit')} | {vs7} |" if seven else ""))
    lines += ["", "Targets (issue 22): fxcpp int8 ≤ 0.25× TS-opt on resnet18/50, ≤ 0.40× on mobilenet_v2 and "
              "efficientnet_b0, ≤ 0.85× Python's int8 everywhere.", ""]
    if not avx512:
        lines += avx2_summary(data["results"], note_sets(data, "notes"))
    if data.get("avx2_held"):
        lines += render_avx2_held(data["avx2_held"], data.get("held_kernels") or {}, note_sets(data, "held_notes"))
    return "\n".join(lines)


def avx2_summary(results, notes):
    """On a CPU without AVX-512 (issue 39): int8 against fp32 and Python's int8, and what `fxcpp quantize` says."""
    ratios = [({e["engine"]: e["median_ms"] for e in r["engines"]}) for r in results if "error" not in r]
    sevens = [(ms["fxcpp_int8_7bit"] / ms["fxcpp_opt"], ms["fxcpp_int8_7bit"] / ms["python_int8"]) for ms in ratios
              if all(k in ms for k in ("fxcpp_int8_7bit", "fxcpp_opt", "python_int8"))]
    ratios = [(ms["fxcpp_int8"] / ms["fxcpp_opt"], ms["fxcpp_int8"] / ms["python_int8"]) for ms in ratios
              if all(k in ms for k in ("fxcpp_int8", "fxcpp_opt", "python_int8"))]
    lines = []
    if ratios:
        slower = sum(1 for a, _ in ratios if a > 1)
        lines += [f"On this CPU without AVX-512 or VNNI, geomeans over {len(ratios)} rows: fxcpp int8 / fxcpp-opt fp32 "
                  f"{geomean([a for a, _ in ratios]):.2f} (int8 slower than fp32 in {slower}), fxcpp int8 / Python "
                  f"int8 {geomean([b for _, b in ratios]):.2f}.", ""]
    if sevens:
        slower = sum(1 for a, _ in sevens if a > 1)
        lines += [f"With 7-bit weights (`fxcpp quantize --weight-bits 7`: oneDNN's int8 kernels), over {len(sevens)} "
                  f"rows: fxcpp int8 7-bit / fxcpp-opt fp32 {geomean([a for a, _ in sevens]):.2f} (slower than fp32 "
                  f"in {slower}), fxcpp int8 7-bit / Python int8 {geomean([b for _, b in sevens]):.2f}.", ""]
    for title, ns in notes:
        lines += [f"What `{title}` says of resnet18 on this CPU:", ""] + [f"    {n}" for n in ns] + [""]
    return lines


def note_sets(data, key):
    """The saved "note:" lines of `fxcpp quantize` (key) and of `--weight-bits 7` (key + "_7bit"), titled."""
    sets = [("fxcpp quantize", data.get(key) or [])]
    if data.get(key + "_7bit"):
        sets.append(("fxcpp quantize --weight-bits 7", data[key + "_7bit"]))
    return [(t, ns) for t, ns in sets if ns]


def render_avx2_held(results, kernels, notes):
    """The table of the models held at AVX2 (AVX2_HELD): int8 without VNNI against fp32 and Python's int8."""
    seven = any(e["engine"] == "fxcpp_int8_7bit" for r in results for e in r.get("engines", []))
    lines = ["Held at AVX2 on this CPU (`ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 "
             "OPENBLAS_CORETYPE=Haswell`: the kernels an AVX2-only CPU runs, without VNNI, at this CPU's timing; "
             "batch 1, engines interleaved in one process)."
             + "".join(f" {who} int8 convolutions (resnet18, ONEDNN_VERBOSE): {', '.join(k) or 'none'}."
                       for who, k in kernels.items()), "",
             "| model | TS-opt fp32 ms | fxcpp-opt fp32 ms | Python int8 ms | fxcpp int8 ms"
             + (" | fxcpp int8 7-bit ms" if seven else "") + " | fxcpp int8 / fxcpp-opt fp32 | fxcpp int8 / Python int8"
             + (" | 7-bit / fxcpp-opt fp32 | 7-bit / Python int8" if seven else "") + " |",
             "|---|---|---|---|---|---|---|" + ("---|---|---|" if seven else "")]
    ratios = {k: [] for k in ("a", "b", "c", "d")}
    for r in results:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['error']} | | | | | |" + (" | | |" if seven else ""))
            continue
        ms = {e["engine"]: e["median_ms"] for e in r["engines"]}
        f = lambda k: f"{ms[k]:.2f}" if k in ms else "—"  # noqa: E731
        q = lambda x, y: ms[x] / ms[y] if x in ms and y in ms else None  # noqa: E731
        row = {"a": q("fxcpp_int8", "fxcpp_opt"), "b": q("fxcpp_int8", "python_int8"),
               "c": q("fxcpp_int8_7bit", "fxcpp_opt"), "d": q("fxcpp_int8_7bit", "python_int8")}
        for k, v in row.items():
            ratios[k] += [v] if v else []
        cells = " | ".join(f"{row[k]:.2f}" if row[k] else "—" for k in ("a", "b", "c", "d")[:4 if seven else 2])
        lines.append(f"| {r['model']} | {f('torchscript_opt')} | {f('fxcpp_opt')} | {f('python_int8')} | "
                     f"{f('fxcpp_int8')} | " + (f"{f('fxcpp_int8_7bit')} | " if seven else "") + f"{cells} |")
    if ratios["a"]:
        lines += ["", f"Geomeans held at AVX2: fxcpp int8 / fxcpp-opt fp32 {geomean(ratios['a']):.2f}, fxcpp int8 / "
                  f"Python int8 {geomean(ratios['b']):.2f} over {len(ratios['a'])} models."
                  + (f" With 7-bit weights (`--weight-bits 7`): / fxcpp-opt fp32 {geomean(ratios['c']):.2f}, / Python "
                     f"int8 {geomean(ratios['d']):.2f}." if ratios["c"] else "")]
    for title, ns in notes:
        lines += ["", f"What `{title}` says of resnet18 held at AVX2:", ""] + [f"    {n}" for n in ns]
    return lines + [""]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--quick", action="store_true", help="batch 1 only, 1 s per configuration")
    p.add_argument("--seconds", type=float, default=4.0, help="timed seconds per configuration")
    p.add_argument("--models", nargs="*", default=MODELS)
    add_save_args(p, "bench_quantize")
    p.add_argument("--part", choices=["bench_quantize", "bench_quantize_avx2", "bench_quantize_7bit"], default=None,
                   help="the part the run is saved as (default: bench_quantize on an AVX-512 CPU, "
                        "bench_quantize_avx2 on one without; bench_quantize_7bit: the first run with 7-bit "
                        "weights held at AVX2, on an Intel Xeon without AMX)")
    a = p.parse_args()
    cpu_name, isa, avx512 = cpu()
    vnni = bool(isa)  # avx512_vnni / avx_vnni / amx_int8: without, fxcpp_int8_7bit runs too
    json_path, md_path = run_paths(a, a.part or ("bench_quantize" if avx512 else "bench_quantize_avx2"))
    if a.render:
        print_saved(json_path, render)
        return 0
    build = os.path.abspath(a.build)
    fxcpp = os.path.join(build, "fxcpp")
    start = time.time()
    data = {"date": utc_now(), "cpu": cpu_name, "cpus": os.cpu_count(), "isa": isa, "avx512": avx512,
            "command": command_line(__file__), "load_start": load_average(), "results": []}
    for name in a.models:
        base = export(os.path.join(build, "models"), name)
        for batch in ([1] if a.quick else [1, 8]):
            print(f"bench {name} batch {batch}", file=sys.stderr, flush=True)
            r = bench(fxcpp, base, batch, 1.0 if a.quick else a.seconds, seven_bit=not vnni)
            r.update({"model": name, "batch": batch})
            data["results"].append(r)
    kernels = {}
    if "resnet18" in a.models:
        kernels = resnet18_kernels(fxcpp, export(os.path.join(build, "models"), "resnet18"))
    data["kernels"] = kernels
    if not avx512 and "resnet18" in a.models:
        base = export(os.path.join(build, "models"), "resnet18")
        data["notes"] = quantize_notes(fxcpp, base, held=False)
        data["notes_7bit"] = quantize_notes(fxcpp, base, held=False, weight_bits=7)
    if avx512:
        # The same models held at AVX2: int8 without VNNI (issue 39), batch 1.
        data["avx2_held"] = []
        for name in a.models:
            base = export(os.path.join(build, "models"), name)
            print(f"bench {name} batch 1 held at AVX2", file=sys.stderr, flush=True)
            r = bench(fxcpp, base, 1, 1.0 if a.quick else a.seconds, held=True, seven_bit=True)
            r.update({"model": name, "batch": 1})
            data["avx2_held"].append(r)
        if "resnet18" in a.models:
            base = export(os.path.join(build, "models"), "resnet18")
            data["held_kernels"] = resnet18_kernels(fxcpp, base, held=True)
            data["held_notes"] = quantize_notes(fxcpp, base)
            data["held_notes_7bit"] = quantize_notes(fxcpp, base, weight_bits=7)
    save_run(data, start, json_path, md_path, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
