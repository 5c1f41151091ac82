#!/usr/bin/python3
"""ctest entries on an emulated CPU: qemu-user (Debian's qemu-user) runs them as another x86-64 CPU.

    emulated_cpu.py [--build build] [--cpu EPYC-Milan] [-R REGEX] [--list]

Why: fxcpp must pass its tests on every x86-64 CPU users run it on (issue 39), and
the machines it is developed on may all have AVX-512. Holding oneDNN and ATen at
AVX2 (ONEDNN_MAX_CPU_ISA=AVX2 ..., the *_AVX2 ctest entries) covers the kernels
those libraries choose, but not what reads the CPU itself: `cpuid` in
fxcpp's own code, fbgemm, MLAS, OpenBLAS's core detection, glibc. Under
`qemu-x86_64 -cpu EPYC-Milan` the program runs on QEMU's emulated AMD EPYC Zen 3:
AVX2 and FMA, no AVX-512, no VNNI — every one of those sees that CPU. It is
~15x slower than the host, so this runs the ISA-dependent entries, not the suite.

The selected entries run with their fixtures' set-ups first (the Python exports and
goldens are then computed on the emulated CPU too, as on a real one). The models
directory the set-ups write is moved aside first and put back at the end, so the
host's own runs keep the host's files. A command that is an x86-64 program or
Debian's python3 runs under qemu, and so does every x86-64 program it is given as an
argument (the fxcpp of a `sh -c` entry or of a checking script); the report marks
"host" an entry of which nothing ran under qemu.
Exits 1 when an entry fails, 2 when qemu-x86_64 is missing.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

# The ISA-dependent entries (what issue 39 found failing on an AVX2-only CPU, and
# the kernels that choose by CPU): oneDNN's bf16 / Winograd / layouts, the int8
# kernels, the quantization goldens, the minimizer, one model end to end.
DEFAULT = ("^(OnednnCpu|OptimizeForInference|LowerToOneDnn|OptimizeLayout|LinearKernel|MinimizerBase|"
           "Cases/QConvKernel|QLinearKernel|LowerInt8|OnednnQuantize|"
           "aot_winograd_isa_AVX2|optimize_models_resnet18|quantization_models|quantization_agreement|"
           "cli\\.(run_optimize_bf16|bench_json_bf16|optimized_bf16_file_on_avx2|quantized_file_on_avx2))$")


# oneDNN's effective ISA (dnnl_get_effective_cpu_isa of the libdnnl.so.2 libtorch loads), by name.
ONEDNN_ISA = ("import ctypes; v = ctypes.CDLL('libdnnl.so.2').dnnl_get_effective_cpu_isa(); "
              "print({0x7: 'AVX2', 0x407: 'AVX2 VNNI', 0x27: 'AVX-512', 0x67: 'AVX-512 VNNI', 0xe7: 'AVX-512 bf16', "
              "0x3e7: 'AMX'}.get(v, hex(v)))")


def properties(test):
    return {p["name"]: p["value"] for p in test.get("properties", [])}


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def with_setups(tests, selected):
    """`selected` (names) and the set-ups of the fixtures they require: the set-ups first, each after the
    set-ups it needs itself, then the selected entries, in ctest's order."""
    by_name = {t["name"]: t for t in tests}
    by_fixture = {}
    for t in tests:
        for f in properties(t).get("FIXTURES_SETUP", []):
            by_fixture.setdefault(f, []).append(t["name"])
    order, seen = [], set()

    def visit(name):  # depth first: an entry after every set-up it requires
        if name in seen:
            return
        seen.add(name)
        for f in properties(by_name[name]).get("FIXTURES_REQUIRED", []):
            for setup in by_fixture.get(f, []):
                visit(setup)
        order.append(by_name[name])

    for name in selected:
        visit(name)
    return ([t for t in order if properties(t).get("FIXTURES_SETUP")] +
            [t for t in order if not properties(t).get("FIXTURES_SETUP")])


def without_unemulated(cpu):
    """`cpu` less the features QEMU's TCG does not emulate (it warns of each, for every thread; none is one
    a kernel chooses by): "EPYC-Milan,-3dnowprefetch,...,-xsaves"."""
    p = subprocess.run(["qemu-x86_64", "-cpu", cpu, "/bin/true"], stderr=subprocess.PIPE)
    missing = sorted(set(re.findall(r"TCG doesn't support requested feature: CPUID\.[^.]+\.([\w-]+)",
                                    p.stderr.decode())))
    return ",".join([cpu] + ["-" + f for f in missing])


def emulate(command, cpu, wrappers):
    """`command` with its programs under qemu: the command itself when it is an x86-64 program or Debian's
    python3, and every argument that is an x86-64 program (a `sh -c` entry's "$0", a checking script's fxcpp)
    replaced by a script in `wrappers` that runs it under qemu. Returns (command, emulated?)."""
    out, emulated = [], False
    for i, arg in enumerate(command):
        if i == 0 and (is_elf(arg) or arg == "/usr/bin/python3"):
            out += ["qemu-x86_64", "-cpu", cpu, arg]
            emulated = True
        elif i > 0 and os.path.isabs(arg) and os.access(arg, os.X_OK) and is_elf(arg):
            wrapper = os.path.join(wrappers, os.path.basename(arg))
            with open(wrapper, "w") as f:
                f.write('#!/bin/sh\nexec qemu-x86_64 -cpu %s "%s" "$@"\n' % (cpu, arg))
            os.chmod(wrapper, 0o755)
            out.append(wrapper)
            emulated = True
        else:
            out.append(arg)
    return out, emulated


def run(test, cpu, scale, wrappers):
    props = properties(test)
    command, emulated = emulate(test["command"], cpu, wrappers)
    env = dict(os.environ)
    for kv in props.get("ENVIRONMENT", []):
        k, _, v = kv.partition("=")
        env[k] = v
    timeout = float(props.get("TIMEOUT", 1500)) * scale
    start = time.time()
    try:
        p = subprocess.run(command, cwd=props.get("WORKING_DIRECTORY"), env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout)
        out, rc = p.stdout.decode(errors="replace"), p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode(errors="replace") + "\n(timed out)", -1
    seconds = time.time() - start
    # (re.S: CMake's "." matches a newline too.)
    if any(re.search(r, out, re.S) for r in props.get("SKIP_REGULAR_EXPRESSION", [])):
        verdict = "skipped"
    elif props.get("PASS_REGULAR_EXPRESSION"):
        verdict = "passed" if any(re.search(r, out, re.S) for r in props["PASS_REGULAR_EXPRESSION"]) else "FAILED"
    else:
        verdict = "passed" if (rc == 0) != bool(props.get("WILL_FAIL")) else "FAILED"
    return verdict, seconds, emulated, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--cpu", default="EPYC-Milan", help="a CPU model of `qemu-x86_64 -cpu help`")
    ap.add_argument("-R", "--regex", default=DEFAULT, help="ctest names to run (their fixtures' set-ups come first)")
    ap.add_argument("--timeout-scale", type=float, default=20.0, help="times each entry's ctest TIMEOUT")
    ap.add_argument("--list", action="store_true", help="print what would run, and stop")
    args = ap.parse_args()
    if not shutil.which("qemu-x86_64"):
        print("emulated_cpu: qemu-x86_64 is missing (Debian's qemu-user: scripts/setup.sh installs it)")
        return 2
    cpu = without_unemulated(args.cpu)
    build = os.path.abspath(args.build)
    listing = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, check=True, stdout=subprocess.PIPE)
    tests = json.loads(listing.stdout)["tests"]
    selected = [t["name"] for t in tests if re.search(args.regex, t["name"])]
    if not selected:
        print("emulated_cpu: no ctest entry matches %r" % args.regex)
        return 2
    plan = with_setups(tests, selected)
    if args.list:
        for t in plan:
            print(t["name"])
        return 0
    isa = subprocess.run(["qemu-x86_64", "-cpu", cpu, "/usr/bin/python3", "-c", ONEDNN_ISA],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode().strip()
    print("emulated CPU: qemu-x86_64 -cpu %s, oneDNN's ISA there: %s; %d entries" % (args.cpu, isa or "?", len(plan)),
          flush=True)
    models = os.path.join(build, "models")
    aside = models + ".host"
    moved = any(properties(t).get("FIXTURES_SETUP") for t in plan) and os.path.isdir(models)
    if moved:
        if os.path.exists(aside):
            print("emulated_cpu: %s exists (an interrupted run?): put it back as %s first" % (aside, models))
            return 2
        os.rename(models, aside)
    failed = []
    wrappers = tempfile.mkdtemp(prefix="emulated_cpu.")
    try:
        for t in plan:
            verdict, seconds, emulated, out = run(t, cpu, args.timeout_scale, wrappers)
            print("%-8s %7.1f s  %-5s %s" % (verdict, seconds, "qemu" if emulated else "host", t["name"]), flush=True)
            if verdict == "FAILED":
                failed.append(t["name"])
                print("\n".join(out.splitlines()[-40:]))
    finally:
        if moved:
            shutil.rmtree(models, ignore_errors=True)
            os.rename(aside, models)
        shutil.rmtree(wrappers, ignore_errors=True)
    print("%d of %d entries failed on the emulated %s%s" % (len(failed), len(plan), args.cpu,
                                                            ": " + " ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
