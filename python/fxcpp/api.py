"""fxcpp.optimize, fxcpp.quantize, fxcpp.load / fxcpp.save: fxcpp's C++ modules as torch.nn.Modules."""
import warnings

import torch
import torch.fx

from . import _C
from . import bridge
from .convert import from_fx
from .errors import FxError


class Module(torch.nn.Module):
    """A torch.nn.Module whose forward runs an fxcpp GraphModule: fxcpp's compiled plan, the GIL released,
    Python tensors in and out (also under torch.no_grad)."""

    def __init__(self, graph_module, report=None):
        super().__init__()
        self.graph_module = graph_module  # the fxcpp.GraphModule
        self.report = report  # what the optimiser / quantizer did (optimize: a dict; quantize: text)

    def forward(self, *args):
        return self.graph_module(*args)

    @property
    def code(self):
        """The generated forward of the fxcpp graph (torch.fx gm.code)."""
        return self.graph_module.code

    @property
    def graph(self):
        return self.graph_module.graph


def _inputs(example_inputs):
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    return tuple(example_inputs)


def _traced(model):
    return model if isinstance(model, torch.fx.GraphModule) else torch.fx.symbolic_trace(model)


def _captured(model, inputs, caller):
    """The fxcpp.GraphModule of a model: torch.fx.symbolic_trace's graph through the bridge; where symbolic_trace
    fails (Python that needs real values, as torchvision's shufflenet's `batch, channels, h, w = x.size()`),
    torch.jit.trace's module on `inputs` through fxcpp's TorchScript importer, said in one warning."""
    try:
        gm = _traced(model)
    except Exception as e:  # noqa: BLE001 - torch.fx's TraceError, or the model's Python failing on a Proxy
        reason = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        with torch.no_grad():
            traced = torch.jit.trace(model, inputs)
        warnings.warn("fxcpp.%s: torch.fx.symbolic_trace failed (%s); used torch.jit.trace and fxcpp's TorchScript "
                      "importer instead" % (caller, reason), stacklevel=3)
        return _C._import_torchscript(traced._c, inputs)
    return from_fx(gm, inputs)


def optimize(model_or_gm, example_inputs, *, dtype=None, threads=None, linear_kernel="auto"):
    """fx::optimize_for_inference of a model (traced by torch.fx.symbolic_trace unless it is a GraphModule, in
    eval mode; where symbolic_trace fails, traced by torch.jit.trace on example_inputs and imported, with a
    warning saying so): a torch.nn.Module running oneDNN kernels with packed weights, batch norm folded, activations and
    residual adds fused, a static memory plan. Kernels are made and weights packed for example_inputs' shapes
    now. dtype: None / torch.float32, or torch.bfloat16 (bf16 kernels where the CPU has them). threads: sets
    libtorch's intra-op threads (process-wide, as torch.set_num_threads). The model is not changed; folded and
    packed weights are new (a later change of its parameters is not seen). linear_kernel: which kernel runs
    float32 linear layers: "auto" (oneDNN's on AVX-512; below it the faster of oneDNN's and ATen's BLAS for each
    layer's shape, timed now: report["linear_choices"]; on more than one thread beside Debian's OpenBLAS, whose
    threads compete with OpenMP's, oneDNN's untimed: report["linear_note"]), "onednn" or "aten"."""
    inputs = _inputs(example_inputs)
    if dtype not in (None, torch.float32, torch.bfloat16):
        raise ValueError("fxcpp.optimize: dtype must be None, torch.float32 or torch.bfloat16, not %r" % (dtype,))
    cgm = _captured(model_or_gm, inputs, "optimize")
    out, report = _C._optimize(cgm, inputs, "bfloat16" if dtype == torch.bfloat16 else "float32", threads or 0,
                               linear_kernel)
    return Module(out, report)


def quantize(model, calibration, example_inputs=None, weight_bits=8):
    """int8 post-training quantization (fx::quantization::quantize: prepare, calibrate, convert, oneDNN int8
    kernels) of a model in eval mode. calibration: batches, each a tensor or a tuple of forward arguments;
    example_inputs default to the first batch. weight_bits 7 quantizes the weights to [-64, 63]
    (PerChannelMinMaxObserver.with_args(quant_min=-64, quant_max=63)), which oneDNN's int8 kernels run exactly
    on CPUs without VNNI, where 8-bit weights compute in float32. Returns a torch.nn.Module (its .report: per
    node, quantized or float, and why)."""
    batches = [b if isinstance(b, (tuple, list)) else (b,) for b in calibration]
    if not batches:
        raise ValueError("fxcpp.quantize: no calibration batches")
    inputs = _inputs(example_inputs) if example_inputs is not None else tuple(batches[0])
    cgm = from_fx(_traced(model), inputs)
    out, report = _C._quantize(cgm, inputs, batches, weight_bits)
    return Module(out, report)


def load(path):
    """The model in the fxcpp file at `path`: a torch.fx.GraphModule when the Python bridge can read it (what
    fxcpp.save and fx::save write of torch.fx-style graphs), else (optimised or int8 files, control flow) an
    fxcpp.Module running it with fxcpp."""
    try:
        return bridge.load(path)
    except bridge.FxcppError:  # what the bridge cannot give back as torch.fx (packed kernels), fx::load runs
        return Module(_C._load(path))


def save(gm, path, example_inputs=None, kernel_objects=False):
    """Writes a torch.fx.GraphModule (the Python bridge), an fxcpp.GraphModule or an fxcpp.Module (fx::save).

    kernel_objects (fxcpp modules): store each generated kernel's compiled object beside its program
    (fx::SaveOptions::kernel_objects, `fxcpp optimize --aot`), so the file runs its kernels where no
    compiler does; returns how many were stored."""
    if isinstance(gm, Module):
        gm = gm.graph_module
    if isinstance(gm, _C.GraphModule):
        return _C._save(gm, path, kernel_objects)
    if kernel_objects:
        raise FxError("kernel_objects: a torch.fx.GraphModule has no generated kernels; fxcpp.optimize it first")
    bridge.save(gm, path, example_inputs)
