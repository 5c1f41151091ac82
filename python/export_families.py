#!/usr/bin/python3
"""Exports the model families of issue 14 as TorchScript for fxcpp's import checks.

For every case NAME and export mode MODE (script: torch.jit.script, trace:
torch.jit.trace) it writes, into --out:
  NAME.MODE.pt           the TorchScript file (random seeded weights, eval mode;
                         batch-norm statistics from a pass over random inputs and
                         zero-initialised heads drawn again, so that the models'
                         outputs and activations are of order 1: honest_weights.py)
  NAME.MODE.input.pt     the forward arguments (torch.save of a tuple)
  NAME.MODE.output.pt    the eager output, whole (tuples, lists, dicts of
                         tensors, ints, None), shaped as that mode's forward
                         returns it (a scripted detection model returns
                         (losses, detections), a scripted googlenet a
                         GoogLeNetOutputs tuple); checked here against the
                         reloaded TorchScript file's own output
  NAME.MODE.case.txt     written last (the up-to-date stamp): what the C++
                         check needs besides the files, one setting a line:
                         "library PATH" (torchvision's operators), "qengine NAME"
tests/import/families/check_families.cpp imports the files, runs them and
writes NAME.MODE.row; --table prints the coverage table from those rows.

Run with Debian's python3 (python3-torch, python3-torchvision). Nothing is
downloaded: weights are random (torch.manual_seed), inputs small.
"""
import argparse
import glob
import io
import os
import sys
import time
import warnings
from typing import Dict, List, Optional, Tuple

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision  # noqa: E402

import export_stamp  # noqa: E402
from honest_weights import calibrate, check_order_one  # noqa: E402

QENGINE = "qnnpack"  # the engine this torch has ("fbgemm" is not built in)


# ---------------------------------------------------------------------------
# Files as users write them: plain torch.save (detection's ([image],) and
# {"out": x} hold one-element lists and dicts, which Python pickles with
# APPEND / SETITEM: fx::load_value reads those too).

def plain(value):
    """OrderedDict -> dict, named tuples -> tuples: what TorchScript's values are."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def save_value(value, path):
    torch.save(plain(value), path)


# ---------------------------------------------------------------------------
# Comparison of whole structures (what the C++ check does, too).

def max_diff(a, b, where="output"):
    """Largest abs difference of the tensors in a and b; raises when the structures differ."""
    if isinstance(b, torch.Tensor):
        if not isinstance(a, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
            raise ValueError("%s: %r differs from the expected %s %s" % (where, type(a), b.dtype, tuple(b.shape)))
        if a.is_quantized:
            a, b = a.dequantize(), b.dequantize()
        if b.numel() == 0:
            return 0.0
        if not b.is_floating_point():
            if not torch.equal(a, b):
                raise ValueError("%s: integer tensor differs" % where)
            return 0.0
        return float((a - b).abs().max())
    if isinstance(b, (tuple, list)):
        if type(a) is not type(b) and not (isinstance(a, tuple) and isinstance(b, tuple)):
            raise ValueError("%s: %s, expected %s" % (where, type(a).__name__, type(b).__name__))
        if len(a) != len(b):
            raise ValueError("%s: %d items, expected %d" % (where, len(a), len(b)))
        return max([max_diff(x, y, "%s[%d]" % (where, i)) for i, (x, y) in enumerate(zip(a, b))] + [0.0])
    if isinstance(b, dict):
        if not isinstance(a, dict) or list(a.keys()) != list(b.keys()):
            raise ValueError("%s: keys %s, expected %s" % (where, list(a.keys()) if isinstance(a, dict) else a,
                                                        list(b.keys())))
        return max([max_diff(a[k], b[k], "%s[%r]" % (where, k)) for k in b] + [0.0])
    if a != b or type(a) is not type(b):
        raise ValueError("%s: %r, expected %r" % (where, a, b))
    return 0.0


# ---------------------------------------------------------------------------
# Hand-written scripted modules: control flow and structures.

class LoopOverLength(nn.Module):
    """A loop over a tensor's length, returning the trip count (an int) too."""

    def forward(self, x):
        acc = torch.zeros_like(x[0])
        n = 0
        for i in range(x.size(0)):
            acc = acc * 0.5 + x[i]
            n += 1
        return acc, n


class LoopToList(nn.Module):
    """A loop over a tensor's length appending to a list: a list output of data-dependent length."""

    def forward(self, x) -> List[torch.Tensor]:
        outs: List[torch.Tensor] = []
        for i in range(x.size(0)):
            outs.append(x[i].sum(0) * float(i + 1))
        return outs


class EarlyReturn(nn.Module):
    """A return inside a data-dependent if."""

    def forward(self, x):
        if bool(x.sum() > 0):
            return x * 2.0
        y = torch.relu(x)
        return y - 1.0


class Structures(nn.Module):
    """A tuple of a list and a dict."""

    def forward(self, x, y) -> Tuple[List[torch.Tensor], Dict[str, torch.Tensor]]:
        return [x + y, x * y, y.t()], {"sum": (x + y).sum(0), "max": torch.maximum(x, y)}


class ListInput(nn.Module):
    """A List[Tensor] argument, as detection models take their images (a one-element list here)."""

    def forward(self, xs: List[torch.Tensor]):
        return torch.cat(xs, 0) * 2.0


class OptionalArgs(nn.Module):
    """Optional arguments tested against None."""

    def forward(self, x, bias: Optional[torch.Tensor] = None, scale: Optional[float] = None):
        if bias is not None:
            x = x + bias
        if scale is not None:
            x = x * scale
        return x


class GPTBlock(nn.Module):
    """A small GPT block: causal self-attention (mask built from the length) and an MLP."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (c // self.heads) ** 0.5)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), diagonal=1)
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class Recurrent(nn.Module):
    """nn.LSTM / nn.GRU inside a model (their forward is overloaded: TorchScript
    has forward__0 / forward__1 and no forward, so they cannot be the root)."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        return self.rnn(x)


class EmbeddingBagMean(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.bag = nn.EmbeddingBag(50, 16, mode="mean")

    def forward(self, tokens, flat, offsets):
        return self.emb(tokens), self.bag(flat, offsets)


# ---------------------------------------------------------------------------
# The cases: NAME -> (family, build, modes). build() returns a dict:
#   model, inputs (tuple), optional script_output(eager) (the scripted forward's
#   structure of the eager result), library (needs torchvision's operators),
#   qengine, trace_inputs (when tracing takes other arguments).

def gen(seed=1):
    return torch.Generator().manual_seed(seed)


def image(size, batch=1):
    return torch.randn(batch, 3, size, size, generator=gen())


def tv(fn, calibration=None, **kw):
    """torchvision model `fn` with random seeded weights; with `calibration` (random inputs, a
    tuple), its batch-norm statistics come from a pass over them and zero-initialised heads are
    drawn again (honest_weights.py: outputs and activations of order 1)."""
    torch.manual_seed(0)
    model = fn(weights=None, **kw).eval()
    if calibration is not None:
        calibrate(model, lambda m: m(*calibration))
    return model


def segmentation(name):
    def build():
        return {"model": tv(getattr(torchvision.models.segmentation, name), (image(64, batch=2),),
                            weights_backbone=None),
                "inputs": (image(64),)}
    return build


def detection(name, **kw):
    def build():
        model = tv(getattr(torchvision.models.detection, name), (list(image(64, batch=2)),),
                   weights_backbone=None, **kw)
        return {"model": model, "inputs": ([image(64)[0]],), "library": True,
                # scripted detection models return (losses, detections); eval: no losses
                "script_output": lambda y: ({}, y)}
    return build


def optical_flow(name):
    def build():
        # two frames; RAFT needs sides divisible by 8, and 128 keeps its
        # smallest correlation level wider than one pixel (64 gives NaN)
        return {"model": tv(getattr(torchvision.models.optical_flow, name)),
                "inputs": (image(128), torch.randn(1, 3, 128, 128, generator=gen(2)))}
    return build


def video(name):
    def build():
        return {"model": tv(getattr(torchvision.models.video, name), (torch.randn(2, 3, 4, 32, 32, generator=gen(3)),)),
                "inputs": (torch.randn(1, 3, 4, 32, 32, generator=gen()),)}
    return build


def quantized(name):
    def build():
        import torch.ao.quantization as q
        torch.backends.quantized.engine = QENGINE
        torch.manual_seed(0)
        model = getattr(torchvision.models.quantization, name)(weights=None, quantize=False).eval()
        calibrate(model, lambda m: m(image(64, batch=2)))  # batch norms, before they are fused
        model.fuse_model()
        model.qconfig = q.get_default_qconfig(QENGINE)
        q.prepare(model, inplace=True)
        with torch.no_grad():
            for s in range(4):  # calibration on random images
                model(torch.randn(2, 3, 64, 64, generator=gen(10 + s)))
        q.convert(model, inplace=True)
        return {"model": model, "inputs": (image(64),), "qengine": QENGINE}
    return build


def classifier(name, size, script_output=None):
    def build():
        kw = {"init_weights": True} if name in ("googlenet", "inception_v3") else {}
        c = {"model": tv(getattr(torchvision.models, name), (image(size, batch=8),), **kw), "inputs": (image(size),)}
        if script_output:
            c["script_output"] = script_output
        return c
    return build


def module(make, inputs, trace_inputs=None):
    def build():
        torch.manual_seed(0)
        c = {"model": calibrate(make().eval(), lambda m: m(*inputs())), "inputs": inputs()}
        if trace_inputs:
            c["trace_inputs"] = trace_inputs()
        return c
    return build


def seq(t=6, d=32, batch=2, seed=1):
    return torch.randn(batch, t, d, generator=gen(seed))


BOTH = ("script", "trace")
CASES = {
    # segmentation: dict outputs
    "fcn_resnet50": ("segmentation", segmentation("fcn_resnet50"), BOTH),
    "deeplabv3_mobilenet_v3_large": ("segmentation", segmentation("deeplabv3_mobilenet_v3_large"), BOTH),
    "lraspp_mobilenet_v3_large": ("segmentation", segmentation("lraspp_mobilenet_v3_large"), BOTH),
    # detection (scripted only): lists of dicts, loops, data-dependent shapes (faster R-CNN with 5
    # classes: with 91, random weights give every score under the 0.05 threshold, no detections)
    "fasterrcnn_mobilenet_v3_large_320_fpn": ("detection", detection(
        "fasterrcnn_mobilenet_v3_large_320_fpn", min_size=64, max_size=64,
        num_classes=5), ("script",)),
    "retinanet_resnet50_fpn": ("detection", detection("retinanet_resnet50_fpn", min_size=64, max_size=64),
                               ("script",)),
    "ssdlite320_mobilenet_v3_large": ("detection", detection("ssdlite320_mobilenet_v3_large"), ("script",)),
    # optical flow: a run-time loop (num_flow_updates) whose body reads a pyramid forward assigned to a module
    "raft_small": ("optical_flow", optical_flow("raft_small"), BOTH),
    # video
    "r3d_18": ("video", video("r3d_18"), BOTH),
    "mc3_18": ("video", video("mc3_18"), BOTH),
    # quantized int8 (post-training static quantization)
    "quantized_resnet18": ("quantized", quantized("resnet18"), BOTH),
    "quantized_mobilenet_v2": ("quantized", quantized("mobilenet_v2"), BOTH),
    # sequence
    "lstm": ("sequence", module(lambda: Recurrent(nn.LSTM(16, 24, num_layers=2, batch_first=True)),
                                lambda: (seq(d=16),)), BOTH),
    "gru": ("sequence", module(lambda: Recurrent(nn.GRU(16, 24, batch_first=True)), lambda: (seq(d=16),)), BOTH),
    "transformer_encoder": ("sequence", module(
        lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 2),
        lambda: (seq(),)), BOTH),
    "multihead_attention": ("sequence", module(lambda: nn.MultiheadAttention(32, 4, batch_first=True),
                                               lambda: (seq(seed=1), seq(seed=2), seq(seed=3))), BOTH),
    "gpt_block": ("sequence", module(GPTBlock, lambda: (seq(),)), BOTH),
    "embedding_bag": ("sequence", module(EmbeddingBagMean, lambda: (
        torch.randint(0, 50, (2, 5), generator=gen()), torch.randint(0, 50, (7,), generator=gen(2)),
        torch.tensor([0, 3], dtype=torch.int64))), BOTH),
    # classifiers with auxiliary outputs, windows
    "googlenet": ("classifier", classifier("googlenet", 64, lambda y: (y, None, None)), BOTH),
    "inception_v3": ("classifier", classifier("inception_v3", 80, lambda y: (y, None)), BOTH),
    "swin_t": ("classifier", classifier("swin_t", 64), BOTH),
    # scripted control flow and structures
    "loop_over_length": ("control", module(LoopOverLength, lambda: (seq(t=5, d=3, batch=4),)), ("script",)),
    "loop_to_list": ("control", module(LoopToList, lambda: (seq(t=5, d=3, batch=4),)), BOTH),
    "early_return": ("control", module(EarlyReturn, lambda: (-seq(t=3, d=4, batch=1).abs(),)), BOTH),
    "structures": ("control", module(Structures, lambda: (seq(4, 4, 1)[0], seq(4, 4, 1, seed=2)[0])), BOTH),
    "list_input": ("control", module(ListInput, lambda: ([seq(3, 4, 1)[0]],)), BOTH),
    "optional_args": ("control", module(OptionalArgs, lambda: (seq(3, 4, 1)[0], seq(3, 4, 1, seed=2)[0], 2.0),
                                        trace_inputs=lambda: (seq(3, 4, 1)[0], seq(3, 4, 1, seed=2)[0])), BOTH),
    "optional_default": ("control", module(OptionalArgs, lambda: (seq(3, 4, 1)[0],)), ("script",)),
}


def export_case(name, mode, out):
    family, build, modes = CASES[name]
    c = build()
    model = c["model"]
    inputs = c["trace_inputs"] if mode == "trace" and "trace_inputs" in c else c["inputs"]
    base = os.path.join(out, "%s.%s" % (name, mode))
    if family != "control":  # models (the control cases are small functions of their inputs)
        check_order_one(name, model, inputs)
    t0 = time.perf_counter()
    with torch.no_grad():
        expected = model(*inputs)
        if mode == "script":
            exported = torch.jit.script(model)
            if "script_output" in c:
                expected = c["script_output"](expected)
        else:
            exported = torch.jit.trace(model, inputs, strict=False, check_trace=False)
    exported.save(base + ".pt")
    # The expected output must be what the saved file itself gives.
    with torch.no_grad():
        got = torch.jit.load(base + ".pt")(*inputs)
    diff = max_diff(got, expected)
    if diff > 1e-4:
        raise RuntimeError("%s.%s: TorchScript differs from eager by %g" % (name, mode, diff))
    save_value(tuple(inputs), base + ".input.pt")
    save_value(expected, base + ".output.pt")
    with open(base + ".case.txt", "w") as f:
        f.write("family %s\n" % family)
        if c.get("library"):
            f.write("library %s\n" % glob.glob(os.path.join(os.path.dirname(torchvision.__file__), "_C*.so"))[0])
        if c.get("qengine"):
            f.write("qengine %s\n" % c["qengine"])
    return time.perf_counter() - t0


def all_cases():
    return ["%s.%s" % (n, m) for n, (_, _, modes) in CASES.items() for m in modes]


def table(out):
    """The coverage table: header and the rows check_families wrote."""
    print("| model | mode | nodes | subgraphs | max diff | import ms | status |")
    print("|-------|------|-------|-----------|----------|-----------|--------|")
    missing = []
    for case in all_cases():
        path = os.path.join(out, case + ".row")
        if os.path.exists(path):
            print(open(path).read().rstrip())
        else:
            missing.append(case)
    if missing:
        print("not checked:", " ".join(missing))
    return 1 if missing else 0


def pyfx(names, seconds):
    """Python torch.fx on the same models and inputs, for the README's speed
    table beside `fxcpp bench`: symbolic_trace (or its error), then eager,
    the traced GraphModule and torch.fx.experimental.optimization's
    optimize_for_inference, one forward of each per round (interleaved), one
    thread; median ms."""
    import statistics
    from torch.fx.experimental.optimization import optimize_for_inference
    print("| model | eager ms | torch.fx GraphModule ms | torch.fx optimize_for_inference ms |")
    print("|---|---|---|---|")
    for name in names:
        c = CASES[name][1]()
        model, inputs = c["model"], c["inputs"]
        try:
            gm = torch.fx.symbolic_trace(model)
        except Exception as e:  # TraceError and friends: what torch.fx says
            print("| %s | - | - | %s: %s |" % (name, type(e).__name__, str(e).splitlines()[0].split(". ")[0]))
            continue
        engines = [model, gm]
        opt_error = None
        try:
            engines.append(optimize_for_inference(gm))
        except Exception as e:  # it traces again, with its own tracer
            opt_error = "%s: %s" % (type(e).__name__, str(e).splitlines()[0].split(". ")[0])
        times = [[] for _ in engines]
        with torch.no_grad():
            for e in engines:
                e(*inputs)  # warm-up
            end = time.perf_counter() + seconds
            while time.perf_counter() < end or len(times[0]) < 3:
                for t, e in zip(times, engines):
                    t0 = time.perf_counter()
                    e(*inputs)
                    t.append((time.perf_counter() - t0) * 1e3)
        cells = ["%.3g" % statistics.median(t) for t in times] + ([opt_error] if opt_error else [])
        print("| %s | %s |" % (name, " | ".join(cells)), flush=True)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="the directory of the files (required unless --list)")
    p.add_argument("--table", action="store_true", help="print the coverage table from the checks' .row files")
    p.add_argument("--force", action="store_true", help="export even when the files are up to date")
    p.add_argument("--list", action="store_true", help="print the cases (NAME.MODE)")
    p.add_argument("--pyfx", action="store_true",
                   help="time Python torch.fx on the named cases (NAME; no files written)")
    p.add_argument("--seconds", type=float, default=3.0, help="time budget per model of --pyfx")
    p.add_argument("cases", nargs="*", help="NAME.MODE or NAME (all its modes); default: all")
    a = p.parse_args()
    if a.list:
        print("\n".join(all_cases()))
        return 0
    if a.pyfx:
        torch.set_num_threads(1)
        return pyfx([c.partition(".")[0] for c in a.cases] or list(CASES), a.seconds)
    if not a.out:
        p.error("--out is required")
    os.makedirs(a.out, exist_ok=True)
    if a.table:
        return table(a.out)
    torch.set_num_threads(1)
    wanted = []
    for c in a.cases or all_cases():
        name, _, mode = c.partition(".")
        if name not in CASES or (mode and mode not in CASES[name][2]):
            p.error("unknown case %s (see --list)" % c)
        wanted += ["%s.%s" % (name, m) for m in ([mode] if mode else CASES[name][2])]
    for case in wanted:
        name, mode = case.split(".")
        stamp = os.path.join(a.out, case + ".case.txt")
        if not a.force and export_stamp.up_to_date(stamp, __file__):
            print("up to date", case)
            continue
        seconds = export_case(name, mode, a.out)
        export_stamp.mark(stamp)
        print("exported %s (%.1f s)" % (case, seconds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
