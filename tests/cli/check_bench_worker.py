#!/usr/bin/python3
"""cli.bench_worker: `fxcpp bench-worker` (the fxcpp side of scripts/bench_ort.py) speaks its protocol.

    check_bench_worker.py FXCPP MODEL.pt IN.pt

The ready line names both engines, each within 1e-4 of eager TorchScript
(relative to max |output|), with the FLOPs and the batched input shape;
'run ENGINE K' gets K positive times; bad requests get one error line and
the worker goes on; 'quit' and the end of the input both end it with status 0.
Prints "bench worker ok" or exits 1 with what differed.
"""
import json
import subprocess
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    fxcpp, model, inputs = sys.argv[1:4]
    cmd = [fxcpp, "bench-worker", model, "--input", inputs, "--threads", "1", "--batch", "2"]
    requests = "run fxcpp_opt 3\nrun torchscript_opt 1\nrun foo 1\nrun fxcpp_opt 0\n\nquit\nrun fxcpp_opt 1\n"
    p = subprocess.run(cmd, input=requests, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        fail("exit status %d: %s" % (p.returncode, p.stderr.strip()))
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    if len(lines) != 5:
        fail("expected 5 lines (ready, 2 timings, 2 errors; nothing after quit), got %d: %s" % (len(lines), lines))
    ready = lines[0]
    if not ready.get("ready") or ready["batch"] != 2 or ready["threads"] != 1 or ready["inputs"] != "[2, 3, 64, 64]":
        fail("ready line: %s" % ready)
    if ready["flops"] <= 0:
        fail("flops %s" % ready["flops"])
    engines = [e["engine"] for e in ready["engines"]]
    if engines != ["torchscript_opt", "fxcpp_opt"]:
        fail("engines %s" % engines)
    for e in ready["engines"]:
        if not 0 <= e["max_rel_diff"] < 1e-4 or e["prepare_ms"] <= 0:
            fail("engine %s" % e)
    for line, (engine, count) in zip(lines[1:3], [("fxcpp_opt", 3), ("torchscript_opt", 1)]):
        if line.get("engine") != engine or len(line["ms"]) != count or min(line["ms"]) <= 0:
            fail("timing line %s" % line)
    expected = [{"error": "engine 'foo' is not prepared"},
                {"error": "bad request 'run fxcpp_opt 0' (expected 'run ENGINE K' or 'quit')"}]
    if lines[3:] != expected:
        fail("error lines %s" % lines[3:])
    # The end of the input ends it too, after its ready line.
    p = subprocess.run(cmd + ["--engine", "fxcpp_opt"], input="", capture_output=True, text=True, timeout=120)
    out = [json.loads(line) for line in p.stdout.splitlines()]
    if p.returncode != 0 or len(out) != 1 or [e["engine"] for e in out[0]["engines"]] != ["fxcpp_opt"]:
        fail("end of input: exit %d, %s" % (p.returncode, out))
    print("bench worker ok")


if __name__ == "__main__":
    main()
