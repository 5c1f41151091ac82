"""Every rewrite of fxcpp's training compiler proven where it fires (issue 66).

For a model and a batch, fxcpp.aot_module traces and partitions the training step; the sweep then rewrites a copy of
the forward and of the backward graph as the training compiler does (fxcpp._C._rewrite_for_training, which says how
many nodes each rewrite replaced) and runs each pair on the same inputs:
  - forward: the same parameters, buffers, batch and random seed -> the logits, every value saved for backward and
    the batch-norm running statistics written into the buffers;
  - backward: the same saved values and output gradient -> the gradient of every parameter (against the partition's
    graph with its batch-norm recomputations made exact, fuse_batch_norm_activation: see prove()).
Both graphs of a pair compute one function, so they must agree to rounding at every shape; a rewrite that computes
something else shows up here, in the graph where it fired, whatever the rest of the model does. Each row prints what
fired; a rewrite that fires nowhere in a sweep fails it (a row where nothing fired proves nothing).

Then the whole step as a user runs it (compiled module vs eager PyTorch, the same seed): the loss, every gradient and
every batch-norm statistic. The compiled forward computes eager's values to the bit by default
(conv_forward_rewrites off), so the step differs from eager's by the backward's rounding only.

Tolerances, as torch.testing's rtol + atol: a gradient within 1e-4 of its own largest element, plus 1e-6 of the
largest gradient of the model (a gradient that is zero in exact arithmetic - mobilenet_v2's batch-norm biases before
another batch norm - is rounding noise in both, and only this term makes sense for it); a forward value within 1e-5
of its largest element plus 1e-5 of the median largest element of the graph's outputs.

FXCPP_SWEEP=long (make test-long: ctest -L long) runs the long sweep: resnet18, resnet50, mobilenet_v2,
mobilenet_v3_small, efficientnet_b0 and regnet_x_400mf at batch 1-32 and 32x32-224x224 with both partitions, and the
encoder at four shapes.
"""
import collections
import copy
import os

import pytest
import torch
import torchvision

import fxcpp
from fxcpp import _C

RTOL_GRAD, ATOL_GRAD = 1e-4, 1e-6
RTOL_FWD, ATOL_FWD = 1e-5, 1e-5
REWRITES = ("conv_as_winograd", "conv_weight_grad_as_matmul", "conv_as_matmul", "bmm_as_onednn_matmul",
            "bernoulli_as_fxcpp", "fuse_batch_norm_activation", "fuse_kernels", "sink_recomputation")


class Encoder(torch.nn.Module):
    """A TransformerEncoderLayer with dropout and a classifier head (the encoder of issue 66)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(64, 4, 256, dropout=0.1, batch_first=True)
        self.head = torch.nn.Linear(64, num_classes)

    def forward(self, x):
        return self.head(self.layer(x)).mean(1)


def make(name):
    torch.manual_seed(0)
    if name == "encoder":
        return Encoder().train()
    return getattr(torchvision.models, name)(num_classes=10).train()


def batch(name, n, size):
    g = torch.Generator().manual_seed(n * 1000 + size)
    x = torch.randn(n, size, 64, generator=g) if name == "encoder" else torch.randn(n, 3, size, size, generator=g)
    return x, torch.randint(0, 10, (n,), generator=g)


def placeholders(gm):
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def flat(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def worst(pairs, rtol, atol_scale):
    """(largest excess over the tolerance, its index) of tensor pairs (got, want): 0 when every pair passes."""
    maxima = [float(w.abs().max()) for _, w in pairs if w.numel()]
    scale = atol_scale(maxima) if maxima else 0.0
    out = (0.0, -1)
    for i, (got, want) in enumerate(pairs):
        if want.numel() == 0:
            continue
        allowed = rtol * float(want.abs().max()) + scale
        excess = float((got.double() - want.double()).abs().max()) / allowed if allowed > 0 else float(
            not torch.equal(got, want))
        out = max(out, (excess, i))
    return out


def compare_graph(reference, rewritten, inputs, seed, what):
    """Runs both graphs on copies of `inputs` with `seed`; checks every output and every input they write."""
    runs = []
    for gm in (reference, rewritten):
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in inputs]
        torch.manual_seed(seed)
        outs = flat(gm(*args))
        runs.append((outs, args))
    (want, want_in), (got, got_in) = runs
    assert len(got) == len(want)
    floats, exact = [], []
    for i, (a, b) in enumerate(list(zip(got, want)) + list(zip(got_in, want_in))):
        if not isinstance(b, torch.Tensor):
            assert a is None and b is None, "%s: output %d" % (what, i)
            continue
        (floats if b.is_floating_point() else exact).append((a, b, i))
    for a, b, i in exact:  # masks, indices, counters: the same to the bit
        assert torch.equal(a, b), "%s: value %d (%s) differs" % (what, i, b.dtype)
    return want, [(a, b) for a, b, _ in floats]


def prove(name, n, size, partition="default", forward_rewrites=False, counts=None):
    """The per-graph proof and the whole-step check of one (model, batch, size). Returns the row's counts."""
    eager = make(name)
    model = copy.deepcopy(eager)
    am = fxcpp.aot_module(model, partition=partition, conv_forward_rewrites=forward_rewrites)
    x, y = batch(name, n, size)
    params0 = {k: v.detach().clone() for k, v in am.graph_module.named_buffers()}

    # The whole step, as a user runs it.
    torch.manual_seed(1)
    want_loss = torch.nn.functional.cross_entropy(eager(x), y)
    want_loss.backward()
    torch.manual_seed(1)
    got_loss = torch.nn.functional.cross_entropy(am(x), y)
    got_loss.backward()
    assert abs(float(got_loss) - float(want_loss)) <= 1e-6 * abs(float(want_loss)), (name, n, size)
    eager_grads = dict(eager.named_parameters())
    grads = [(p.grad, eager_grads[k].grad) for k, p in am.named_parameters()]
    excess, i = worst(grads, RTOL_GRAD, lambda m: ATOL_GRAD * max(m))
    names = [k for k, _ in am.named_parameters()]
    assert excess <= 1, "%s b%d %d: whole step: %s's gradient off by %.2fx the tolerance" % (
        name, n, size, names[i], excess)
    eager_buffers = dict(eager.named_buffers())
    for k, b in am.named_buffers():
        want = eager_buffers[k]
        if want.is_floating_point():  # running statistics: the forward's batch statistics
            assert float((b - want).abs().max()) <= 1e-5 * float(want.abs().max()) + 1e-7, (name, n, size, k)
        else:
            assert torch.equal(b, want), (name, n, size, k)

    # Each graph against its rewritten copy, on the same inputs.
    fw, bw = am.forward_graph(), am.backward_graph()
    fw_rw, fw_counts = _C._rewrite_for_training(fw, conv_forward_rewrites=forward_rewrites)
    bw_rw, bw_counts = _C._rewrite_for_training(bw, conv_forward_rewrites=forward_rewrites)
    # The min-cut backward recomputes batch-norm outputs; the partition's own recomputation rounds otherwise than the
    # forward did, so a ReLU / ReLU6 mask of it can differ from the forward's where a value sits within rounding of a
    # kink (mobilenet_v2 at batch 8, 224x224: a gradient 22x the tolerance off). fuse_batch_norm_activation makes it
    # the forward's values to the bit (the whole step above, eager's masks); the reference has that rewrite too.
    bw_ref, _ = _C._rewrite_for_training(bw, only=["fuse_batch_norm_activation"])
    primals = [p.detach() for _, p in am.graph_module.named_parameters()]
    primals += [params0[k] for k, _ in am.graph_module.named_buffers()] + [x]
    assert len(primals) == len(placeholders(fw)), (len(primals), len(placeholders(fw)))
    fw_out, pairs = compare_graph(fw, fw_rw, primals, 7, "%s forward" % name)
    excess, i = worst(pairs, RTOL_FWD, lambda m: ATOL_FWD * sorted(m)[len(m) // 2])
    assert excess <= 1, "%s b%d %d: forward value %d off by %.2fx the tolerance" % (name, n, size, i, excess)

    logits = fw_out[0].detach().requires_grad_()
    torch.nn.functional.cross_entropy(logits, y).backward()
    saved = fw_out[1:]
    bw_inputs = saved + [logits.grad]
    assert len(bw_inputs) == len(placeholders(bw))
    _, pairs = compare_graph(bw_ref, bw_rw, bw_inputs, 7, "%s backward" % name)
    excess, i = worst(pairs, RTOL_GRAD, lambda m: ATOL_GRAD * max(m))
    assert excess <= 1, "%s b%d %d: backward gradient %d off by %.2fx the tolerance" % (name, n, size, i, excess)

    row = collections.Counter(fw_counts) + collections.Counter(bw_counts)
    shape = "%d tokens" % size if name == "encoder" else "%dx%d" % (size, size)
    print("%-18s batch %2d %-9s %-8s fired: %s" % (name, n, shape, partition,
                                                      ", ".join("%s %d" % (k, row[k]) for k in REWRITES if row[k])
                                                      or "nothing"))
    if counts is not None:
        counts.update(row)
    return row


def rows(long):
    quick = [("resnet18", 8, 64, "default"), ("resnet18", 32, 64, "min-cut"), ("mobilenet_v2", 8, 64, "default"),
             ("encoder", 2, 8, "default"), ("encoder", 8, 32, "min-cut")]
    if not long:
        return quick
    out = []
    for name in ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "regnet_x_400mf"):
        for n, size in ((1, 64), (2, 96), (8, 32), (8, 64), (32, 64), (1, 224), (8, 224)):
            out += [(name, n, size, partition) for partition in ("default", "min-cut")]
    out += [("encoder", n, t, p) for n, t in ((1, 8), (2, 8), (8, 32), (32, 16)) for p in ("default", "min-cut")]
    return out


LONG = os.environ.get("FXCPP_SWEEP") == "long"


def test_every_rewrite_fires_and_computes_what_it_replaces():
    """The sweep: each row alone in this process, one after another, so it also runs compiled modules of the same
    classes at other shapes before each (issue 66's state carried between compiled modules)."""
    counts = collections.Counter()
    for name, n, size, partition in rows(LONG):
        prove(name, n, size, partition, counts=counts)
    missing = [r for r in REWRITES if counts[r] == 0]
    # bernoulli_as_fxcpp and bmm_as_onednn_matmul fire in the encoder; Winograd only where oneDNN has its kernels
    # (AVX-512): elsewhere it cannot fire, and the sweep says so instead of failing.
    if "conv_as_winograd" in missing and not _C._has_winograd_kernels():
        print("conv_as_winograd cannot fire here: oneDNN has no Winograd kernels on this CPU")
        missing.remove("conv_as_winograd")
    assert not missing, "rewrites that fired nowhere in the sweep: %s" % missing


def test_forward_rewrites_compute_what_they_replace():
    """conv_forward_rewrites (opt-in): the forward's convolutions on Winograd kernels and products, proven per graph
    where they fire (resnet18 at batch 8, 64x64: Winograd on layer1-2, products on layer4's 2x2 maps)."""
    row = prove_forward("resnet18", 8, 64)
    assert row["conv_as_matmul"] > 0


def prove_forward(name, n, size):
    eager = make(name)
    am = fxcpp.aot_module(copy.deepcopy(eager), conv_forward_rewrites=True)
    x, y = batch(name, n, size)
    buffers0 = [b.detach().clone() for _, b in am.graph_module.named_buffers()]
    torch.manual_seed(1)
    torch.nn.functional.cross_entropy(am(x), y).backward()
    fw = am.forward_graph()
    fw_rw, counts = _C._rewrite_for_training(fw, conv_forward_rewrites=True)
    primals = [p.detach() for _, p in am.graph_module.named_parameters()] + buffers0 + [x]
    _, pairs = compare_graph(fw, fw_rw, primals, 7, "%s forward" % name)
    excess, i = worst(pairs, RTOL_FWD, lambda m: ATOL_FWD * sorted(m)[len(m) // 2])
    assert excess <= 1, "%s b%d %d: forward value %d off by %.2fx the tolerance" % (name, n, size, i, excess)
    return collections.Counter(counts)


def test_a_second_compiled_module_of_the_same_class_runs_as_eager():
    """Issue 66: a TransformerEncoderLayer compiled after another of its class (at another shape) drew other dropout
    masks than eager: its TorchScript leaf ran TorchScript's optimised plan (native_dropout), which the class's first
    module had made. Leaves now run without TorchScript's graph optimizer."""
    torch.manual_seed(0)
    first = fxcpp.aot_module(Encoder().train())
    x0, _ = batch("encoder", 8, 32)
    for _ in range(3):
        first(x0).sum().backward()
    eager = make("encoder")
    am = fxcpp.aot_module(copy.deepcopy(eager))
    x, y = batch("encoder", 2, 8)
    for step in range(3):
        torch.manual_seed(10 + step)
        want = torch.nn.functional.cross_entropy(eager(x), y)
        want.backward()
        torch.manual_seed(10 + step)
        got = torch.nn.functional.cross_entropy(am(x), y)
        got.backward()
        assert float(got) == pytest.approx(float(want), rel=1e-6), step
        eager_grads = dict(eager.named_parameters())
        for k, p in am.named_parameters():
            assert torch.allclose(p.grad, eager_grads[k].grad, rtol=1e-5, atol=1e-7), (step, k)
            p.grad = None
            eager_grads[k].grad = None
    targets = collections.Counter(str(n.target) for n in am.forward_graph().graph.nodes if n.op == "call_function")
    assert targets["aten::bernoulli_.float"] == 4 and targets["aten::native_dropout"] == 0, targets
