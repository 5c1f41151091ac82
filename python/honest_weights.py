"""Random weights that give the model tests something to compare (issue 24).

torchvision models with random weights and default batch-norm statistics
(mean 0, variance 1) give degenerate outputs: max |output| is 3.4e-9 for
mobilenet_v2 and 3.7e-14 for efficientnet_b0, so every activation after the
first few layers is next to 0 (where SiLU, sigmoid or hardswish are nearly
linear), and vit_b_16's head is zero-initialised (every output 0). So:

  calibrate(model, run)  every batch norm's running statistics from one
                         train-mode pass over random data (run(model), the
                         batch norms alone in training mode, the rest in eval:
                         dropout off, detection models in inference mode),
                         and zero-initialised weights (heads, class tokens)
                         drawn again;
  check_order_one(...)   the outputs and a sample of the intermediate
                         activations have max |value| of order 1, else
                         RuntimeError: a degenerate model fails its export.
"""
import torch
from torch import nn

# max |value| of an output, and of a sampled intermediate activation.
OUTPUT_RANGE = (1e-2, 1e3)
ACTIVATION_RANGE = (1e-2, 1e4)


def redraw_zero_weights(model):
    """Weights torchvision initialises to zero (ViT's head, its class token) drawn again:
    a layer's weight by the layer's own reset_parameters, other parameters N(0, 0.02)."""
    with torch.no_grad():
        for m in model.modules():
            w = getattr(m, "weight", None)
            if (isinstance(w, torch.Tensor) and w.dim() >= 2 and w.is_floating_point() and not bool(w.any())
                    and hasattr(m, "reset_parameters")):
                m.reset_parameters()
        for p in model.parameters():
            if p.dim() >= 2 and p.is_floating_point() and not bool(p.any()):
                p.normal_(0, 0.02)


def calibrate(model, run):
    """Zero weights re-drawn, then batch-norm statistics from run(model) (see the module comment)."""
    model.eval()
    redraw_zero_weights(model)
    norms = [m for m in model.modules()
             if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
    if not norms:
        return model
    momenta = []
    for m in norms:
        momenta.append(m.momentum)
        m.reset_running_stats()
        m.momentum = None  # a cumulative average: after one pass, that pass's statistics
        m.train()
    with torch.no_grad():
        run(model)
    for m, momentum in zip(norms, momenta):
        m.momentum = momentum
        m.eval()
    return model


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)


def _max_abs(value):
    """max |v| over the floating-point tensors in value (dequantized), or None if there are none."""
    m = None
    for t in _tensors(value):
        if t.is_quantized:
            t = t.dequantize()
        if t.is_floating_point() and t.numel() > 0:
            v = float(t.detach().abs().max())
            m = v if m is None else max(m, v)
    return m


def check_order_one(name, model, inputs, samples=12):
    """Runs model(*inputs) (eval mode, no grad); RuntimeError unless the output's and
    up to `samples` leaf modules' outputs (spread over the model) have max |value|
    within OUTPUT_RANGE / ACTIVATION_RANGE. Returns the output's max |value|."""
    leaves = [(n, m) for n, m in model.named_modules() if not list(m.children())]
    step = max(1, len(leaves) // samples)
    seen = {}

    def hook(name):
        def record(module, args, out):
            seen.setdefault(name, _max_abs(out))  # returns None: the output stays as it is
        return record
    hooks = [m.register_forward_hook(hook(n)) for n, m in leaves[step // 2::step]]
    try:
        with torch.no_grad():
            out = model(*inputs)
    finally:
        for h in hooks:
            h.remove()
    top = _max_abs(out)
    lo, hi = OUTPUT_RANGE
    if top is not None and not lo <= top <= hi:
        raise RuntimeError("%s: max |output| is %g, not of order 1 (%g to %g): degenerate weights"
                           % (name, top, lo, hi))
    lo, hi = ACTIVATION_RANGE
    for n, v in seen.items():
        if v is not None and not lo <= v <= hi:
            raise RuntimeError("%s: max |%s output| is %g, not of order 1 (%g to %g): degenerate weights"
                               % (name, n, v, lo, hi))
    return top
