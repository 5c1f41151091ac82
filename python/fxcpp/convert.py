"""torch.fx.GraphModule <-> fxcpp.GraphModule in memory (issue 37).

from_fx writes the fxcpp document (docs/file_format.md) of a torch.fx
GraphModule with the bridge's rules (python/fxcpp_bridge.py: ATen overloads,
torch.nn leaves by their options, TorchScript leaves for the rest, the node's
Python form in its meta) but without the file: the C++ side
(src/python/convert.cpp, fx::from_document) builds the fx::GraphModule from
the JSON and the live tensors, so parameters and buffers are shared, not
copied. to_fx is the way back: fx::to_document, then the bridge's reader over
the same tensors.
"""
import json

import torch
import torch.fx

from . import _C
from . import bridge
from .errors import FxError


class _MemoryWriter(bridge._Writer):
    """The bridge's writer, keeping the tensors instead of their bytes."""

    def storage_bytes(self, s):
        return b""


class _MemoryReader:
    """What the bridge's module builder reads from: the document's tensors themselves."""

    shares_tensors = True

    def __init__(self, tensors, torchscript):
        self.path = "<fxcpp.GraphModule>"
        self.modules = {}
        self._tensors = tensors
        self._torchscript = torchscript
        self._wrapped = None

    def tensor(self, index):
        return self._tensors[index]

    def torchscript(self):
        if self._wrapped is None:
            self._wrapped = torch.jit._recursive.wrap_cpp_module(self._torchscript)
        return self._wrapped


def document(gm, example_inputs=None):
    """(JSON text, tensors, TorchScript leaves by attribute) of a torch.fx GraphModule; FxError for what fxcpp
    cannot map (naming the node and its target)."""
    if example_inputs is not None and not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    w = _MemoryWriter(example_inputs)
    try:
        root = w.module(gm, "")
    except bridge.FxcppError as e:
        raise FxError(str(e)) from None
    finally:
        w.leaves.close()
    doc = {"format": bridge.FORMAT, "version": bridge.VERSION, "producer": "fxcpp.from_fx", "root": root}
    leaves = {attribute: m._c for attribute, m in w.leaves.modules}
    if leaves:
        doc["torchscript"] = True
    return json.dumps(doc), w.keep, leaves


def from_fx(gm, example_inputs=None):
    """The fxcpp.GraphModule of a torch.fx.GraphModule: same nodes, names, targets and code; its parameters and
    buffers are gm's tensors (a change made in Python is seen by fxcpp). `example_inputs` (optional) are run once
    through gm so that torch.* calls map to the ATen overload their argument types select."""
    if not isinstance(gm, torch.fx.GraphModule):
        raise TypeError("fxcpp.from_fx: a torch.fx.GraphModule expected, got %s" % type(gm).__name__)
    text, tensors, leaves = document(gm, example_inputs)
    return _C._from_document(text, tensors, leaves)


def to_fx(cgm):
    """The torch.fx.GraphModule of an fxcpp.GraphModule: every node, name, target, args / kwargs,
    meta['tensor_meta'], submodule and parameter (the same tensors)."""
    if not isinstance(cgm, _C.GraphModule):
        raise TypeError("fxcpp.to_fx: an fxcpp.GraphModule expected, got %s" % type(cgm).__name__)
    text, tensors, torchscript = _C._to_document(cgm)
    doc = json.loads(text)
    try:
        return bridge._module(_MemoryReader(tensors, torchscript), doc["root"])
    except bridge.FxcppError as e:
        raise FxError(str(e)) from None
