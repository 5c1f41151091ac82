"""The markdown of the bench scripts (bench_optimize.py, bench_ort.py): their
number formats, the load-average note of a run, saving a run (BUILD/NAME.json
and the markdown in BUILD/NAME.md) and re-printing it (--render).
"""
import json
import math
import os
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
    with open(json_path, "w") as f:
        json.dump(data, f, indent=1)
    text = render(data)
    with open(md_path, "w") as f:
        f.write(text)
    print(text, end="")
    log("wrote %s and %s" % (md_path, json_path))
