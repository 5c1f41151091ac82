"""Python torch.fx 1.13 timings for bench/passes_toolkit_bench.cpp's workloads.

Prints one JSON object: milliseconds of CPU time (time.process_time; compare
with fx_bench's CPU column), best of several runs, single thread: the
splitter on a 1k / 10k node ladder (graph built outside the timing), the
minimizer finding a planted bug at the end of a 100 / 400 node add chain.
Run: OMP_NUM_THREADS=1 /usr/bin/python3 python/bench/passes_toolkit_baseline.py
"""
import contextlib
import io
import json
import time

import torch
import torch.fx
from torch.fx.passes import net_min_base, splitter_base
from torch.fx.passes.operator_support import create_op_support

torch.set_num_threads(1)


def best_ms(fn, runs, setup=lambda: None):
    best = float("inf")
    for _ in range(runs):
        arg = setup()
        t = time.process_time()
        with contextlib.redirect_stdout(io.StringIO()):
            fn(arg)
        best = min(best, time.process_time() - t)
    return best * 1e3


def ladder(n):
    g = torch.fx.Graph()
    x = g.placeholder("x")
    v = x
    for _ in range(n // 2):
        u = g.call_function(torch.mul, (v, x))
        v = g.call_function(torch.add, (v, u))
    g.output(v)
    return torch.fx.GraphModule(torch.nn.Module(), g)


class Settings(splitter_base._SplitterSettingBase):
    def __init__(self):
        super().__init__()
        self.min_acc_module_size = 1


def split(gm):
    support = create_op_support(lambda submods, n: n.target is torch.add)
    splitter_base._SplitterBase(gm, [torch.ones(1)], support, Settings())()


class Perturb(torch.fx.Interpreter):
    def __init__(self, mod, bad):
        super().__init__(mod)
        self.bad = bad

    def run_node(self, n):
        r = super().run_node(n)
        return r + 1.0 if n.name == self.bad else r


class Minimizer(net_min_base._MinimizerBase):
    def __init__(self, mod, bad, method):
        super().__init__(mod, [torch.ones(1)], self.compare,
                         net_min_base._MinimizerSettingBase(traverse_method=method))
        self.bad = bad

    @staticmethod
    def compare(a, b, names):
        d = float((a - b).abs().max())
        return d, d < 1e-4

    def run_a(self, mod, inputs):
        return mod(*inputs)

    def run_b(self, mod, inputs):
        return Perturb(mod, self.bad).run(*inputs)


def chain(n):
    g = torch.fx.Graph()
    x = g.placeholder("x")
    v = x
    for _ in range(n):
        v = g.call_function(torch.add, (v, x))
    g.output(v)
    return torch.fx.GraphModule(torch.nn.Module(), g), v.name


def minimize(method, n):
    gm, bad = chain(n)

    def run(_):
        assert len(Minimizer(gm, bad, method).minimize()) == 1
    return run


def main():
    out = {}
    for n, runs in ((1000, 3), (10000, 1)):
        out["splitter_ladder_%d" % n] = best_ms(split, runs, lambda: ladder(n))
    for method in ("sequential", "binary"):
        for n in (100, 400):
            out["minimizer_%s_chain_%d" % (method, n)] = best_ms(minimize(method, n), 2 if n == 400 else 3)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
