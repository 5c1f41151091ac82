"""The markdown of the bench scripts (scripts/bench_*.py): their number
formats, the date, CPU, command and load-average note of a run, saving a run
(SAVE_DIR/NAME.json and the markdown in SAVE_DIR/NAME.md; --save-dir, by
default the build dir; `make bench` saves into docs/bench/, from which
scripts/bench_docs.py renders docs/benchmarks.md) and re-printing it
(--render).
"""
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def load_average():
    """The 1-minute load average (other work on the machine skews every row, threads 2 most)."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def fmt_ms(v):
    return "—" if v is None else ("%.1f" % v if v >= 10 else "%.2f" % v)


def fmt_ratio(v):
    return "—" if v is None else "%.2f" % v


def utc_now():
    """The date of a run as its render prints it ("2026-11-26 04:34 UTC")."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def cpu_info():
    """This CPU as lscpu names it: {"name", "family", "model", "flags"} (/proc/cpuinfo's model name where there
    is no lscpu; family and model empty when unknown). "AMD EPYC" alone does not say which generation: the
    family and model do (25/1 a Zen 3, 25/17 a Zen 4, 26/2 a Zen 5)."""
    info = {"name": platform.processor() or "unknown CPU", "family": "", "model": "", "flags": set()}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        field = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines())}
        info.update(name=field.get("Model name", info["name"]), family=field.get("CPU family", ""),
                    model=field.get("Model", ""), flags=set(field.get("Flags", "").split()))
    except (OSError, subprocess.CalledProcessError):
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("model name"):
                        info["name"] = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass
    return info


# The environment that holds a child process at AVX2 on an AVX-512 CPU: oneDNN (fxcpp's kernels,
# TorchScript's ideep, Python's int8 onednn engine), ATen's vectorised kernels and OpenBLAS stop at
# their AVX2 code, the kernels an AVX2-only CPU (AMD EPYC Zen 3) runs, at this CPU's timing.
AVX2_HELD = {"ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2",
             "OPENBLAS_CORETYPE": "Haswell"}


def cpu_name(info=None):
    """The CPU's model name with its family and model: "AMD EPYC (family 26 model 2)" (of `info`, cpu_info()'s
    answer, when a caller has it already)."""
    info = info or cpu_info()
    return info["name"] + (f" (family {info['family']} model {info['model']})" if info["family"] else "")


def command_line(script):
    """How the run was started: "/usr/bin/python3 scripts/SCRIPT ARGS..." (the script's own arguments)."""
    return " ".join(["/usr/bin/python3", "scripts/" + os.path.basename(script)] + sys.argv[1:])


def add_save_args(ap, name):
    """--save-dir and --render of a bench script that saves its run as NAME.json and NAME.md."""
    ap.add_argument("--save-dir", default=None,
                    help="where the run is saved, as %s.json and %s.md (default: the build dir; `make bench`: "
                         "docs/bench, the parts of docs/benchmarks.md)" % (name, name))
    ap.add_argument("--render", action="store_true",
                    help="re-print the markdown of the run saved in SAVE_DIR/%s.json" % name)


def run_paths(args, name):
    """(json path, markdown path) of a run: NAME.json and NAME.md in --save-dir, else in --build."""
    d = args.save_dir or args.build
    return os.path.join(d, name + ".json"), os.path.join(d, name + ".md")


def measured(data):
    """"Measured DATE on CPU (N logical CPUs); `COMMAND`, wall time M min. Load average ..." of a saved run;
    None for a run saved without them (before save_run recorded them)."""
    if not data.get("date") or "wall_s" not in data:
        return None
    return "Measured %s on %s (%s logical CPUs); `%s`, wall time %.1f min.%s" % (
        data["date"], data.get("cpu", "unknown CPU"), data.get("cpus", "?"), data.get("command", "?"),
        data.get("wall_s", 0) / 60, load_note(data))


def load_note(data):
    """" Load average (1 min) A at the start, B at the end." of a run that recorded it, else ""."""
    if data.get("load_start") is None:
        return ""
    return " Load average (1 min) %.1f at the start, %.1f at the end." % (data["load_start"], data["load_end"])


def print_saved(json_path, render):
    """--render: prints render() of the run saved in json_path (exits when there is none)."""
    if not os.path.exists(json_path):
        sys.exit("%s: no results yet (run without --render first)" % json_path)
    with open(json_path) as f:
        print(render(json.load(f)), end="")


def save_run(data, start, json_path, md_path, render):
    """Ends a run begun at `start` (time.time()): its wall time and the load
    average now go into data, saved to json_path; render(data) goes to md_path
    and stdout."""
    data["wall_s"] = time.time() - start
    data["load_end"] = load_average()
    for path in (json_path, md_path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(json_path, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    text = render(data)
    with open(md_path, "w") as f:
        f.write(text)
    print(text, end="")
    log("wrote %s and %s" % (md_path, json_path))
