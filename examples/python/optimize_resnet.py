"""fxcpp from Python in one page: a torchvision resnet18 traced by torch.fx, converted to fxcpp and back,
a pass run in C++, then optimised with fxcpp.optimize and timed against eager PyTorch.

    make build    # builds the extension into build/python/fxcpp
    PYTHONPATH=build/python /usr/bin/python3 examples/python/optimize_resnet.py

(after `make install PREFIX=...`, PYTHONPATH=PREFIX/lib/python3.X/dist-packages). Checks its own results.
"""
import time

import torch
import torchvision

import fxcpp

torch.manual_seed(0)
torch.set_num_threads(1)
model = torchvision.models.resnet18().eval()
x = torch.randn(1, 3, 224, 224)

# torch.fx -> fxcpp -> torch.fx, in memory: same code, the parameters shared (not copied).
gm = torch.fx.symbolic_trace(model)
cgm = fxcpp.from_fx(gm)                         # an fxcpp.GraphModule
print([n.name for n in cgm.graph.nodes][:5])    # nodes read as in torch.fx
assert fxcpp.to_fx(cgm).code == gm.code

# A torch.fx pass, run in C++: ShapeProp annotates gm's own nodes.
fxcpp.passes.shape_prop(gm, x)
print(gm.graph.nodes.__iter__().__next__().meta["tensor_meta"].shape)

# The optimised module: oneDNN kernels, batch norm folded, a memory plan; a torch.nn.Module like any other.
fast = fxcpp.optimize(model, (x,))
with torch.no_grad():
    expected = model(x)
    y = fast(x)
    assert ((y - expected).abs().max() / expected.abs().max()).item() < 1e-4

    def ms(f, n=20):
        f(x)
        t0 = time.perf_counter()
        for _ in range(n):
            f(x)
        return (time.perf_counter() - t0) / n * 1e3
    print("eager %.1f ms, fxcpp.optimize %.1f ms (1 thread, batch 1, 224x224)" % (ms(model), ms(fast)))
print("OK")
