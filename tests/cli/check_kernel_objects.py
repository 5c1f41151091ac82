"""fxcpp optimize --aot (issue 68): an optimised file that carries its
generated kernels' compiled objects runs them where no compiler does.

A block tail as transformer layers end (residual add, LayerNorm, GELU-tanh,
scaled softmax), scripted, is optimised twice: with --aot and without. Then,
with no compiler on the PATH the kernels can use (FXCPP_CXX points nowhere)
and an empty kernel cache, the deployment example (examples/deploy: fx::load
and forward, with fxcpp_serialize's libraries only) runs
  - the --aot file: no warning, and its output is byte for byte what `fxcpp
    run` computes from the plain file with a compiler (the same kernel);
  - the plain file: the one warning that the kernels run as ATen operators;
  - the --aot file made writable by its group: the objects are refused in one
    line naming why (native code only from a file this user alone may
    write), and the kernels run as ATen operators, within 1e-5.
The cache stays empty throughout: nothing was compiled.

usage: check_kernel_objects.py FXCPP DEPLOY WORKDIR
"""
import os
import re
import shutil
import subprocess
import sys

import torch

fxcpp, deploy, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


class Tail(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(256)

    def forward(self, x, r):
        h = torch.nn.functional.gelu(self.ln(x + r), approximate="tanh")
        return torch.softmax(h * 0.125, -1)


torch.manual_seed(0)
model = Tail().eval()
with torch.no_grad():
    model.ln.weight.uniform_(0.5, 1.5)
    model.ln.bias.uniform_(-0.5, 0.5)
torch.jit.script(model).save(f"{work}/tail.pt")
inputs = (torch.randn(4, 32, 256), torch.randn(4, 32, 256))
torch.save(inputs, f"{work}/in.pt")


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    return p


aot = run([fxcpp, "optimize", f"{work}/tail.pt", "--input", f"{work}/in.pt", "--aot", "-o", f"{work}/tail.aot.fx"])
print(aot.stdout.strip().splitlines()[-1].replace(work + "/", ""))
run([fxcpp, "optimize", f"{work}/tail.pt", "--input", f"{work}/in.pt", "-o", f"{work}/tail.fx"])
run([fxcpp, "run", f"{work}/tail.fx", "--input", f"{work}/in.pt", "-o", f"{work}/reference.pt"])
os.chmod(f"{work}/tail.aot.fx", 0o600)

cache = f"{work}/empty_cache"
os.makedirs(cache, mode=0o700)
no_compiler = dict(os.environ, FXCPP_CXX="/nonexistent/g++", FXCPP_KERNEL_CACHE=cache)


def warnings(stderr):
    """The warning lines, without glog's prefix (W... file:line] ) and the lambda's suffix."""
    out = []
    for line in stderr.splitlines():
        if "Warning: " in line:
            text = line.split("Warning: ", 1)[1].replace(work + "/", "")
            out.append(re.sub(r" \(function .*\)$", "", text))
    return out


def deployed(name, out):
    p = run([deploy, f"{work}/{name}", f"{work}/in.pt", f"{work}/{out}"], env=no_compiler)
    if "libfxcpp_passes" in p.stdout or "libfxcpp_compiler" in p.stdout:
        sys.exit("the deployment mapped the passes or the fusion pass:\n" + p.stdout)
    return p


p = deployed("tail.aot.fx", "aot.out.pt")
print("aot file:", warnings(p.stderr), "libfxcpp_kernels" in p.stdout)
print("same bytes as fxcpp run:", open(f"{work}/aot.out.pt", "rb").read() == open(f"{work}/reference.pt", "rb").read())

p = deployed("tail.fx", "plain.out.pt")
print("plain file:", warnings(p.stderr))

os.chmod(f"{work}/tail.aot.fx", 0o660)
p = deployed("tail.aot.fx", "shared.out.pt")
print("group-writable aot file:", warnings(p.stderr))
ref = torch.load(f"{work}/reference.pt")
for name in ("plain.out.pt", "shared.out.pt"):
    diff = (torch.load(f"{work}/{name}") - ref).abs().max().item()
    print(name, "within 1e-5:", diff <= 1e-5 * ref.abs().max().item())
print("cache entries:", len(os.listdir(cache)))
