#!/usr/bin/python3
"""Models with run-time control flow through the fxcpp command line.

    check_control_flow_cli.py FXCPP WORKDIR MAKE_CASES_SCRIPT NAME...

Writes the cases of python/make_control_flow_cases.py into WORKDIR, then for
every NAME: `fxcpp convert NAME.pt -o NAME.fx`, `fxcpp run NAME.fx` on each
input of the case (a fresh process: targets registered at import must be
registered again by fx::load), `fxcpp export NAME.fx -o exported/NAME.pt`
and Python's torch.jit.load of that file on each input; every output must be
the eager one. Prints one line per case and "N control-flow cases ok", or
exits 1 naming what differs.
"""
import os
import subprocess
import sys
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402


def close(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype and \
            torch.allclose(a, b, rtol=1e-5, atol=1e-5)
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    return a == b


def run(*args):
    p = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if p.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(args[:2]), p.stdout.strip()))
    return p.stdout


def check(fxcpp, d, name):
    fx = os.path.join(d, name + ".fx")
    exported = os.path.join(d, "exported", name + ".pt")
    run(fxcpp, "convert", os.path.join(d, name + ".pt"), "-o", fx)
    run(fxcpp, "export", fx, "-o", exported)
    script = torch.jit.load(exported)
    for suffix in ("", "2"):
        inputs = os.path.join(d, "%s.input%s.pt" % (name, suffix))
        if not os.path.exists(inputs):
            continue
        eager = torch.load(os.path.join(d, "%s.output%s.pt" % (name, suffix)))
        out = os.path.join(d, "%s.fx_out%s.pt" % (name, suffix))
        run(fxcpp, "run", fx, "--input", inputs, "--output", out)
        if not close(torch.load(out), eager):
            raise RuntimeError("fxcpp run of the .fx on input%s differs from eager" % suffix)
        with torch.no_grad():
            got = script(*torch.load(inputs))
        if not close(got, eager):
            raise RuntimeError("the exported TorchScript on input%s differs from eager" % suffix)


def main():
    fxcpp, d, make_cases, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    os.makedirs(os.path.join(d, "exported"), exist_ok=True)
    subprocess.check_call(["/usr/bin/python3", make_cases, d])
    torch.set_num_threads(1)
    failed = []
    for name in names:
        try:
            check(fxcpp, d, name)
            print("%-20s ok" % name)
        except Exception as e:  # one line per case, then the next
            print("%-20s FAIL %s" % (name, str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__))
            failed.append(name)
    if failed:
        print("control-flow cli: %d of %d cases fail: %s" % (len(failed), len(names), " ".join(failed)))
        return 1
    print("%d control-flow cases ok" % len(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
