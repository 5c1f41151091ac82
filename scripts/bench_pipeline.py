#!/usr/bin/python3
"""`make bench`, issue 25: pipeline-parallel inference of resnet50 over c10d Gloo on this machine.

Every number comes from the fxcpp command line, each configuration in its own
processes, all talking over 127.0.0.1 only:
  - one process, 1 thread: `fxcpp pipeline --stages 1` (the whole batch of 8
    in one forward), and for reference one process with 2 threads;
  - 2 stages x 1 thread: `fxcpp launch --nproc 2 -- fxcpp pipeline --stages 2
    --microbatches M` for M = 4 and 8 (GPipe fill-drain per batch; --check:
    the output equals one process on the same microbatches, bit for bit);
  - 2 data-parallel ranks x 1 thread (`fxcpp data-parallel`), for comparison;
each plain (ATen kernels) and --optimize'd (fx::optimize_for_inference per
stage). Reported: images/s (mean over the timed batches), the speedup over
one process (1 thread, same kernels), the time per transfer and bytes of each
boundary, and the stage balance (max/mean compute per microbatch).

Then how the pipeline would scale to N machines: the link measured with
`fxcpp pingpong` (Gloo send/recv over loopback), and `fxcpp pipeline-plan`
for 4, 8 and 16 stages (stage times measured on this machine, one microbatch
at a time) simulated over that link and over 10 and 100 Gb Ethernet.

Prints one markdown document and writes it to SAVE_DIR/bench_pipeline.md, the
raw results to SAVE_DIR/bench_pipeline.json (--save-dir, default the build dir;
`make bench` saves into docs/bench/; --render re-prints the markdown).

Model: torchvision resnet50 as python/export_models.py exports it
(BUILD/models/resnet50.pt), on a 224x224 image (BUILD/models/resnet50.pipeline.input.pt,
written on first use), repeated to a batch of 8 (--batch 8).

    /usr/bin/python3 scripts/bench_pipeline.py [--build build] [--save-dir DIR] [--quick] [--runs N] [--render]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_markdown import (add_save_args, command_line, load_average, measured, print_saved, run_paths,  # noqa: E402
                            cpu_name, save_run, utc_now)
BATCH = 8


def log(msg):
    print("bench_pipeline: " + msg, file=sys.stderr, flush=True)




def child_env():
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)  # --threads is explicit; fxcpp launch sets 1 per rank
    env["FXCPP_NO_PROGRESS"] = "1"
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(k, None)
    return env


def runnable():
    """Threads running or ready to run on the machine now (/proc/loadavg), this script's own excluded."""
    with open("/proc/loadavg") as f:
        return int(f.read().split()[3].split("/")[0]) - 1


def wait_quiet(limit):
    """Waits (up to `limit` seconds) until nothing else runs for 3 s: the machine may be shared."""
    deadline = time.time() + limit
    quiet = 0
    while time.time() < deadline and quiet < 3:
        quiet = quiet + 1 if runnable() == 0 else 0
        time.sleep(1)


LOADS = []


def run_json(cmd, timeout=3600, quiet_wait=0):
    if quiet_wait:
        wait_quiet(quiet_wait)
    with open("/proc/loadavg") as f:
        LOADS.append(float(f.read().split()[0]))
    p = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, (p.stderr or p.stdout).strip()[-2000:]))
    for line in reversed(p.stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("%s printed no JSON: %s" % (" ".join(cmd), p.stdout[-2000:]))


def ensure_model(models):
    model = os.path.join(models, "resnet50.pt")
    if not os.path.exists(model):
        log("exporting resnet50 to " + models)
        subprocess.run([sys.executable, os.path.join(SRC, "python", "export_models.py"), "--out", models, "resnet50"],
                       check=True)
    image = os.path.join(models, "resnet50.pipeline.input.pt")
    if not os.path.exists(image):
        import torch
        torch.save(torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1)), image)
    return model, image


def describe(meta):
    what = "%s%s, %d thread%s" % (meta["kind"], " (optimised)" if meta["optimize"] else "", meta["threads"],
                                  "s" if meta["threads"] > 1 else "")
    if meta.get("microbatches"):
        what += ", %d microbatches" % meta["microbatches"]
    if meta.get("stream"):
        what += ", %d batches streamed" % meta["stream"]
    return what


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build")
    p.add_argument("--quick", action="store_true", help="2 timed batches per configuration, fewer simulations")
    p.add_argument("--runs", type=int, default=0, help="timed batches per configuration (default 5, --quick 2)")
    p.add_argument("--rounds", type=int, default=0, help="rounds over all configurations; each keeps its best (default 2, --quick 1)")
    p.add_argument("--quiet-wait", type=float, default=60,
                   help="before each configuration, wait up to this many seconds for the machine to be idle (default 60)")
    add_save_args(p, "bench_pipeline")
    a = p.parse_args()
    json_path, md_path = run_paths(a, "bench_pipeline")
    if a.render:
        print_saved(json_path, render)
        return 0
    qw = a.quiet_wait
    runs = a.runs or (2 if a.quick else 5)
    rounds = a.rounds or (1 if a.quick else 2)
    fxcpp = os.path.join(os.path.abspath(a.build), "fxcpp")
    models = os.path.join(os.path.abspath(a.build), "models")
    start = time.time()
    model, image = ensure_model(models)
    common = ["--input", image, "--batch", str(BATCH), "--runs", str(runs), "--warmup", "1", "--json"]

    results = {"date": utc_now(), "cpu": cpu_name(), "cores": os.cpu_count(), "cpus": os.cpu_count(),
               "command": command_line(__file__), "load_start": load_average(), "runs": runs, "rounds": rounds,
               "batch": BATCH, "rows": []}
    log("measuring the link (fxcpp pingpong over 127.0.0.1)")
    link = run_json([fxcpp, "launch", "--nproc", "2", "--", "fxcpp", "pingpong", "--sizes", "64K,1M,4M,16M",
                     "--iters", "10", "--json"])
    results["link"] = link["results"]
    link_gbps = max(r["gb_per_s"] for r in link["results"])
    small = min(link["results"], key=lambda r: r["bytes"])
    results["link_latency_us"] = small["one_way_ms"] * 1000.0

    # The configurations, each run once per round; rounds interleave them, and
    # each keeps the round whose best batch was fastest (the machine may be shared).
    configs = []
    for optimize in (False, True):
        opt = ["--optimize"] if optimize else []
        single = [fxcpp, "pipeline", model, "--stages", "1"]
        launch = [fxcpp, "launch", "--nproc", "2", "--", "fxcpp"]
        configs.append(({"kind": "one process", "optimize": optimize, "threads": 1},
                        single + ["--microbatches", "1"] + common + opt))
        configs.append(({"kind": "one process", "optimize": optimize, "threads": 2},
                        single + ["--microbatches", "1", "--threads", "2"] + common + opt))
        configs.append(({"kind": "one process", "optimize": optimize, "threads": 1, "microbatches": 8},
                        single + ["--microbatches", "8"] + common + opt))
        for m in (4, 8):
            configs.append(({"kind": "pipeline", "optimize": optimize, "threads": 1, "microbatches": m},
                            launch + ["pipeline", model, "--stages", "2", "--microbatches", str(m), "--check"] + common + opt))
        for m in (1, 4):
            configs.append(({"kind": "pipeline", "optimize": optimize, "threads": 1, "microbatches": m, "stream": 8},
                            launch + ["pipeline", model, "--stages", "2", "--microbatches", str(m), "--stream", "8",
                                      "--check"] + common + opt))
        configs.append(({"kind": "data parallel", "optimize": optimize, "threads": 1},
                        launch + ["data-parallel", model, "--check"] + common + opt))
    best = [None] * len(configs)
    for rnd in range(rounds):
        for i, (meta, cmd) in enumerate(configs):
            log("round %d/%d: %s" % (rnd + 1, rounds, describe(meta)))
            r = run_json(cmd, quiet_wait=qw)
            r["load_average"] = LOADS[-1]
            if best[i] is None or r["best_throughput"] > best[i]["best_throughput"]:
                best[i] = r
    for (meta, _), r in zip(configs, best):
        results["rows"].append(dict(meta, result=r))

    # N machines: measured stage times, simulated links.
    results["plans"] = []
    for stages in ((4, 8) if a.quick else (4, 8, 16)):
        log("planning %d stages (stage times measured, links simulated)" % stages)
        plan = run_json([fxcpp, "pipeline-plan", model, "--input", image, "--batch", str(BATCH), "--stages", str(stages),
                         "--microbatches", str(BATCH), "--runs", "1" if a.quick else "2", "--optimize",
                         "--bandwidth", "%.3f,1.25,12.5" % link_gbps, "--latency-us", "%.1f" % results["link_latency_us"],
                         "--simulate-microbatches", "%d,%d" % (4 * stages, 16 * stages), "--json"], quiet_wait=qw)
        results["plans"].append(plan)

    results["load_averages"] = LOADS
    save_run(results, start, json_path, md_path, render)
    return 0


def render(res):
    out = []
    w = out.append
    w("## Pipeline-parallel resnet50 over c10d Gloo (127.0.0.1)\n")
    head = measured(res)
    if head:
        w(head + "\n")
    w("%s, %d cores; batch %d of 224x224 images; %d timed batches after one warm-up, per configuration and round; "
      "%d round%s over all configurations, each keeping its best round.\n" %
      (res["cpu"], res["cores"], res["batch"], res["runs"], res.get("rounds", 1), "s" if res.get("rounds", 1) > 1 else ""))
    link = max(res["link"], key=lambda r: r["gb_per_s"])
    w("Link (fxcpp pingpong, Gloo send/recv over loopback): %.2f GB/s at %s, %.0f us one way for 64 KB.\n" %
      (link["gb_per_s"], human(link["bytes"]), res["link_latency_us"]))
    for optimize in (False, True):
        rows = [r for r in res["rows"] if r["optimize"] == optimize]
        base = next(r for r in rows if r["kind"] == "one process" and r["threads"] == 1 and not r.get("microbatches"))
        base = base["result"]["best_throughput"]
        w("\n### %s\n" % ("fx::optimize_for_inference per stage (--optimize)" if optimize else "ATen kernels (no --optimize)"))
        w("| configuration | images/s (mean) | speedup | stage compute ms/microbatch | balance (max/mean) | boundary 0->1 | outputs 1->0 | bitwise | load |")
        w("|---|---:|---:|---|---:|---|---|---|---:|")
        for r in rows:
            x = r["result"]
            if r["kind"] == "one process":
                name = "1 process x %d thread%s" % (r["threads"], "s" if r["threads"] > 1 else "")
                if r.get("microbatches"):
                    name += ", %d microbatches in turn" % r["microbatches"]
                stages = balance = b01 = b10 = bit = ""
            elif r["kind"] == "pipeline":
                name = "2 stages x 1 thread, %d microbatch%s" % (r["microbatches"], "es" if r["microbatches"] > 1 else "")
                if r.get("stream"):
                    name += " per batch, %d batches streamed" % r["stream"]
                stages = " / ".join("%.1f" % k["compute_ms_per_microbatch"] for k in x["ranks"])
                balance = "%.3f" % x["imbalance"]
                b = x["boundaries"]
                b01 = "%s in %.2f ms" % (human(b[0]["bytes_per_microbatch"]), b[0]["transfer_ms_per_microbatch"])
                b10 = "%s in %.2f ms" % (human(b[1]["bytes_per_microbatch"]), b[1]["transfer_ms_per_microbatch"])
                bit = "yes" if x.get("bitwise_equal") else "no"
            else:
                name = "2 data-parallel ranks x 1 thread"
                stages = " / ".join("%.1f" % k["compute_ms_per_batch"] for k in x["per_rank"])
                balance = b01 = b10 = ""
                bit = "yes" if x.get("bitwise_equal") else "no"
            w("| %s | %.2f (%.2f) | %.2fx | %s | %s | %s | %s | %s | %.1f |" % (
                name, x["best_throughput"], x["throughput"], x["best_throughput"] / base, stages, balance, b01, b10, bit,
                x.get("load_average", 0)))
    w("\nimages/s: from the fastest timed batch (the mean of the timed batches in parentheses); speedup: of the "
      "fastest batch over one process's fastest, 1 thread, same kernels, the batch of 8 in one forward. Stage compute: per microbatch on each rank "
      "(data parallel: per batch). Boundary: bytes per microbatch and the time of one transfer (header to last byte, "
      "measured where it is received). Bitwise: the output equals one process run on the same microbatches "
      "(shards), bit for bit. Streamed: each timed run sends 8 batches through the pipeline without draining "
      "between them (images/s per batch; the fill and drain are paid once per 8 batches). Load: the 1-minute "
      "load average when the kept round started (other jobs may share the machine).\n")
    w("\n### Scaling to N machines (simulated from measured stage times)\n")
    w("Stage times: each stage of `fxcpp pipeline-plan --optimize` timed on one image (a microbatch of 1) on this "
      "machine; links: the loopback measured above, 10 Gb and 100 Gb Ethernet (50 us latency unless measured). "
      "GPipe fill-drain per batch.\n")
    links = sorted({s["gb_per_s"] for p in res["plans"] for s in p["simulation"]})
    w("| stages | stage ms max / mean | microbatches = batch | bubble | " +
      " | ".join("images/s at %.3g GB/s" % g for g in links) + " | speedup at %.3g GB/s |" % links[len(links) // 2])
    w("|---:|---:|---:|---:|" + "---:|" * len(links) + "---:|")
    for plan in res["plans"]:
        by_m = {}
        for s in plan["simulation"]:
            by_m.setdefault(s["microbatches"], {})[s["gb_per_s"]] = s
        for m, sims in sorted(by_m.items()):
            mid = sims[links[len(links) // 2]]
            w("| %d | %.1f / %.1f | %d | %.0f%% | %s | %.2fx |" % (
                plan["stages"], max(plan["stage_ms"]), sum(plan["stage_ms"]) / len(plan["stage_ms"]), m,
                100 * mid["bubble_fraction"], " | ".join("%.1f" % sims[g]["throughput"] for g in links), mid["speedup"]))
    w("\nOne process (1 thread, optimised, batch 8 in one forward) runs %.1f images/s in these plans' measurements." %
      (res["plans"][0]["batch"] / res["plans"][0]["single_process_ms"] * 1000.0))
    return "\n".join(out) + "\n"


def human(n):
    n = float(n)
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= f:
            return "%.2f %s" % (n / f, unit)
    return "%d B" % n


if __name__ == "__main__":
    sys.exit(main())
