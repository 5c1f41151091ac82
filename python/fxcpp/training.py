"""fxcpp.aot_module: a model compiled for training by fxcpp (fx::aot_module, functorch's aot_module in C++)."""
import torch
import torch.fx

from . import _C
from .convert import from_fx


class AotModule(torch.nn.Module):
    """A torch.nn.Module whose forward runs fxcpp's compiled forward graph (the GIL released) and whose backward,
    run by loss.backward() in libtorch's autograd engine, is fxcpp's backward graph.

    Its parameters() are fxcpp's tensors for the model's parameters: they share the model's storage (an
    optimizer step on them changes the model's weights too, and a change of the model's weights is seen),
    and they are where the gradients accumulate. Build the optimizer on this module's parameters()."""

    def __init__(self, compiled, graph_module):
        super().__init__()
        self._compiled = compiled  # fxcpp._C.AotModule
        self.graph_module = graph_module  # the fxcpp.GraphModule it compiles (its tensors are the model's)

    def forward(self, *args):
        return self._compiled.forward(*args)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        return _prefixed(self.graph_module.named_parameters(), prefix)

    def parameters(self, recurse=True):
        return (p for _, p in self.named_parameters())

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return _prefixed(self.graph_module.named_buffers(), prefix)

    def buffers(self, recurse=True):
        return (b for _, b in self.named_buffers())

    def train(self, mode=True):
        super().train(mode)
        self._compiled.train(mode)
        return self

    def forward_graph(self):
        """fxcpp's forward graph of the last traced input signature (an fxcpp.GraphModule)."""
        return self._compiled.forward_graph()

    def backward_graph(self):
        """fxcpp's backward graph of the last traced input signature."""
        return self._compiled.backward_graph()

    def sgd_in_backward(self, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        """Steps SGD (torch.optim.SGD's options and arithmetic, fx::FusedSGD) inside every later
        loss.backward(): each parameter is updated as soon as the compiled backward has computed its gradient
        and no longer reads the parameter, and the gradient is freed there (PyTorch's optimizer-in-backward).
        The step never holds all the gradients at once; .grad stays None, the loop has no zero_grad() and no
        step(). torch.autograd.grad through the module raises while it is set. Returns the optimizer (its
        momentum_buffer(p)); remove_optimizer_in_backward() ends it."""
        opt = _C.FusedSGD(list(self.parameters()), lr, momentum, dampening, weight_decay, nesterov)
        self._compiled.set_optimizer_in_backward(opt)
        return opt

    def remove_optimizer_in_backward(self):
        """Later backward() calls store gradients in .grad again."""
        self._compiled.set_optimizer_in_backward(None)

    def optimizer_in_backward_stats(self):
        """What the optimizer in backward did, summed over backward runs: steps, and its updates made right
        after their gradient, after later reads of the parameter, or when the graph had returned."""
        return self._compiled.optimizer_in_backward_stats()


def _prefixed(named, prefix):
    """(name, tensor) pairs with `prefix.` before each name (torch.nn.Module's named_* convention)."""
    return (((prefix + "." + name if prefix else name), t) for name, t in named)


def aot_module(model, example_inputs=None, *, partition="default", conv_forward_rewrites=False, fuse_kernels=True):
    """functorch's aot_module by fxcpp: `model` (traced by torch.fx.symbolic_trace unless it is a GraphModule)
    with its forward and backward captured as ATen graphs at the first call (again for new input shapes or
    after train() / eval()), split by `partition` ("default", "min-cut": fxcpp's, recomputing batch-norm outputs
    and activations in backward, or "functorch-min-cut"), run as one autograd node. `example_inputs` (optional)
    pick the ATen overloads of torch.* calls. The result keeps the model's mode (train() / eval()).
    conv_forward_rewrites: also run the forward's convolutions on fxcpp's kernels (Winograd, products on small
    maps; TrainingCompileOptions::conv_forward_rewrites). Off by default: the forward then computes eager's values
    to the bit, so gradients differ from eager's by the backward's rounding only, never by a ReLU whose mask
    flipped on a pre-activation within rounding of zero.
    fuse_kernels: fuse the pointwise / last-dimension reduction chains left into generated C++ kernels
    (TrainingCompileOptions::fuse_kernels, docs/compiler.md); False runs them on ATen."""
    gm = model if isinstance(model, torch.fx.GraphModule) else torch.fx.symbolic_trace(model)
    inputs = None
    if example_inputs is not None:
        inputs = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
    cgm = from_fx(gm, inputs)
    compiled = _C._aot_module(cgm, partition, conv_forward_rewrites, fuse_kernels)
    out = AotModule(compiled, cgm)
    out.train(model.training)
    return out
