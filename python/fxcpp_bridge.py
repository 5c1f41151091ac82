"""Read and write fxcpp files (fx::save / fx::load) from Python torch.fx.

Pure Python (zipfile, json, torch); no build step. The format is described
in docs/file_format.md. Its parts python/fxcpp/_bridge_*.py (FxcppError; how
a Python call is written) are imported with it, and their names are its own.

    import fxcpp_bridge                     # or, installed: import fxcpp
    gm = fxcpp_bridge.load("model.fx")      # a torch.fx.GraphModule
    fxcpp_bridge.save(gm, "model2.fx")      # readable by fx::load in C++
    fxcpp_bridge.save(torch.fx.symbolic_trace(model), "m.fx", (x,))   # `fxcpp run m.fx --input x.pt`

load(): ATen targets become torch.ops.aten.<op>.<overload> (or the packet
when the file names no overload), builtins operator.*, registered C++ leaves
(torch.nn.Linear, Conv2d, BatchNorm2d, LSTM ...) torch.nn modules rebuilt
from their options and given the stored parameters, TorchScript leaves
attributes of the file's TorchScript module (a file with TorchScript leaves
is also their torch.jit.save archive; torch.jit.load reads it). Tensor constants inside arguments become
get_attr nodes of attributes _tensor_constant<N> (torch.fx cannot print a
tensor literal in generated code).

save(gm, path, example_inputs=None): what torch.fx.symbolic_trace, make_fx
and quantize_fx.convert_fx make. ATen ops (OpOverload / packet) and
operator.* / getattr / torch._assert as they are; torch.* and
torch.nn.functional.* calls as the ATen overload their arguments bind to (the
operator's TorchScript schemas; example_inputs, run once, give the type of
each node's value); a function no single operator does (F.interpolate, a
torch.fx.wrap'ped library function such as torchvision.ops.stochastic_depth)
as a call of a scripted TorchScript leaf that calls it; torch.nn leaves of the
table below from their options, every other called module (AdaptiveAvgPool2d,
quantized modules, user leaves) as a scripted TorchScript leaf; modules that
only contain others as plain modules. The node's Python form is kept in its
meta and load() gives it back while the node is unchanged, so Python -> C++ ->
Python keeps names, targets and code. What cannot be carried (a function or
module TorchScript cannot compile, arguments that bind to no schema) is one
FxcppError naming the node and its target; nothing is approximated.
After `make install`, `import fxcpp` is this module (fxcpp.save, fxcpp.load).
"""

import importlib
import inspect
import json
import math
import operator
import os
import re
import zipfile

import torch
import torch.fx

FORMAT = "fxcpp"
VERSION = 2
_DOCUMENT = "extra/fxcpp.json"
_STORAGE = "extra/fxdata/%d"


def _part(name):
    """A part of this module, python/fxcpp/<name>.py: fxcpp.<name> when this file is fxcpp.bridge (installed, or
    linked into build/python/fxcpp); imported from the source tree as fxcpp_bridge, the same file as a module of
    the package _fxcpp_bridge (not fxcpp: that name may be the built package, which loads its extension)."""
    if __package__:
        return importlib.import_module("." + name, __package__)
    import sys
    import types
    if "_fxcpp_bridge" not in sys.modules:
        package = types.ModuleType("_fxcpp_bridge")
        package.__path__ = [os.path.join(os.path.dirname(os.path.realpath(__file__)), "fxcpp")]
        sys.modules["_fxcpp_bridge"] = package
    return importlib.import_module("_fxcpp_bridge." + name)


FxcppError = _part("_bridge_error").FxcppError
FxcppError.__module__ = __name__  # named (tracebacks, pickle) as fxcpp_bridge.FxcppError / fxcpp.bridge.FxcppError
# How save() writes a Python call, node kinds and meta (python/fxcpp/_bridge_lowering.py): its names are this
# module's too, for the code below and for whoever imports them from here.
globals().update({k: v for k, v in vars(_part("_bridge_lowering")).items()
                  if not k.startswith("__") and not inspect.ismodule(v)})


# ---- torch.nn leaves: registry name <-> module class and options ----------

def _conv_options(m):
    padding = m.padding if isinstance(m.padding, str) else list(m.padding)
    return {"in_channels": m.in_channels, "out_channels": m.out_channels,
            "kernel_size": list(m.kernel_size), "stride": list(m.stride), "padding": padding,
            "dilation": list(m.dilation), "output_padding": list(m.output_padding), "groups": m.groups,
            "bias": m.bias is not None, "padding_mode": "k" + m.padding_mode.capitalize()}


def _conv_make(cls, transposed):
    def make(o, **factory):
        kw = dict(in_channels=o["in_channels"], out_channels=o["out_channels"],
                  kernel_size=tuple(o["kernel_size"]), stride=tuple(o["stride"]),
                  padding=o["padding"] if isinstance(o["padding"], str) else tuple(o["padding"]),
                  dilation=tuple(o["dilation"]), groups=o["groups"], bias=o["bias"],
                  padding_mode=o["padding_mode"][1:].lower())
        if transposed:
            kw["output_padding"] = tuple(o["output_padding"])
        return cls(**kw, **factory)
    return make


def _bn_options(m):
    return {"num_features": m.num_features, "eps": m.eps, "momentum": m.momentum, "affine": m.affine,
            "track_running_stats": m.track_running_stats}


def _rnn_options(m):
    o = {"input_size": m.input_size, "hidden_size": m.hidden_size, "num_layers": m.num_layers, "bias": m.bias,
         "batch_first": m.batch_first, "dropout": float(m.dropout), "bidirectional": m.bidirectional,
         "proj_size": getattr(m, "proj_size", 0)}
    if isinstance(m, torch.nn.RNN):
        o["nonlinearity"] = m.nonlinearity
    return o


def _rnn_make(cls):
    def make(o, **factory):
        kw = {k: o[k] for k in ("input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout",
                                "bidirectional")}
        if cls is torch.nn.LSTM:
            kw["proj_size"] = o.get("proj_size", 0)
        if cls is torch.nn.RNN:
            kw["nonlinearity"] = o.get("nonlinearity", "tanh")
        return cls(**kw, **factory)
    return make


_nn = torch.nn
_LEAVES = {
    "torch.nn.Linear": (_nn.Linear, lambda m: {"in_features": m.in_features, "out_features": m.out_features,
                                               "bias": m.bias is not None},
                        lambda o, **f: _nn.Linear(o["in_features"], o["out_features"], bias=o["bias"], **f)),
    "torch.nn.LayerNorm": (_nn.LayerNorm, lambda m: {"normalized_shape": list(m.normalized_shape), "eps": m.eps,
                                                     "elementwise_affine": m.elementwise_affine},
                           lambda o, **f: _nn.LayerNorm(o["normalized_shape"], eps=o["eps"],
                                                        elementwise_affine=o["elementwise_affine"], **f)),
    "torch.nn.GroupNorm": (_nn.GroupNorm, lambda m: {"num_groups": m.num_groups, "num_channels": m.num_channels,
                                                     "eps": m.eps, "affine": m.affine},
                           lambda o, **f: _nn.GroupNorm(o["num_groups"], o["num_channels"], eps=o["eps"],
                                                        affine=o["affine"], **f)),
    "torch.nn.Embedding": (_nn.Embedding, lambda m: {"num_embeddings": m.num_embeddings,
                                                     "embedding_dim": m.embedding_dim, "padding_idx": m.padding_idx,
                                                     "max_norm": m.max_norm, "norm_type": m.norm_type,
                                                     "scale_grad_by_freq": m.scale_grad_by_freq,
                                                     "sparse": m.sparse},
                           lambda o, **f: _nn.Embedding(o["num_embeddings"], o["embedding_dim"],
                                                        padding_idx=o["padding_idx"], max_norm=o["max_norm"],
                                                        norm_type=o["norm_type"],
                                                        scale_grad_by_freq=o["scale_grad_by_freq"], sparse=o["sparse"],
                                                        **f)),
    "torch.nn.ReLU": (_nn.ReLU, lambda m: {"inplace": m.inplace}, lambda o, **f: _nn.ReLU(inplace=o["inplace"])),
    "torch.nn.Dropout": (_nn.Dropout, lambda m: {"p": m.p, "inplace": m.inplace},
                         lambda o, **f: _nn.Dropout(o["p"], inplace=o["inplace"])),
    "torch.nn.Flatten": (_nn.Flatten, lambda m: {"start_dim": m.start_dim, "end_dim": m.end_dim},
                         lambda o, **f: _nn.Flatten(o["start_dim"], o["end_dim"])),
    "torch.nn.Softmax": (_nn.Softmax, lambda m: {"dim": m.dim}, lambda o, **f: _nn.Softmax(o["dim"])),
    "torch.nn.Identity": (_nn.Identity, lambda m: {}, lambda o, **f: _nn.Identity()),
    "torch.nn.Sigmoid": (_nn.Sigmoid, lambda m: {}, lambda o, **f: _nn.Sigmoid()),
    "torch.nn.Tanh": (_nn.Tanh, lambda m: {}, lambda o, **f: _nn.Tanh()),
}
for _d in (1, 2, 3):
    _c = getattr(_nn, "Conv%dd" % _d)
    _t = getattr(_nn, "ConvTranspose%dd" % _d)
    _b = getattr(_nn, "BatchNorm%dd" % _d)
    _LEAVES["torch.nn.Conv%dd" % _d] = (_c, _conv_options, _conv_make(_c, False))
    _LEAVES["torch.nn.ConvTranspose%dd" % _d] = (_t, _conv_options, _conv_make(_t, True))
    _LEAVES["torch.nn.BatchNorm%dd" % _d] = (
        _b, _bn_options,
        (lambda cls: lambda o, **f: cls(o["num_features"], eps=o["eps"], momentum=o["momentum"], affine=o["affine"],
                                        track_running_stats=o["track_running_stats"], **f))(_b))
for _name, _cls in (("LSTM", _nn.LSTM), ("GRU", _nn.GRU), ("RNN", _nn.RNN)):
    _LEAVES["torch.nn." + _name] = (_cls, _rnn_options, _rnn_make(_cls))


def _size(v):
    """A pooling size option as the file holds it: the number, or the list (None: a dimension kept)."""
    return list(v) if isinstance(v, (tuple, list)) else v


def _py_size(v):
    return tuple(v) if isinstance(v, list) else v


def _py_window(v):
    """A pooling window option for Python: one number when all are equal (as torch.nn's pooling layers are
    written, and C++'s ExpandingArray keeps no difference), else the tuple."""
    return v[0] if isinstance(v, list) and v and all(x == v[0] for x in v) else _py_size(v)


def _max_pool_options(m):
    if m.return_indices:
        return None  # C++'s MaxPoolNd returns no indices: a TorchScript leaf
    return {"kernel_size": _size(m.kernel_size), "stride": _size(m.stride), "padding": _size(m.padding),
            "dilation": _size(m.dilation), "ceil_mode": m.ceil_mode}


def _avg_pool_options(m):
    return {"kernel_size": _size(m.kernel_size), "stride": _size(m.stride), "padding": _size(m.padding),
            "ceil_mode": m.ceil_mode, "count_include_pad": m.count_include_pad,
            "divisor_override": getattr(m, "divisor_override", None)}


def _avg_pool_make(cls):
    def make(o, **factory):
        kw = {}
        if o.get("divisor_override") is not None:
            if cls is _nn.AvgPool1d:
                raise FxcppError("torch.nn.AvgPool1d has no divisor_override (the file's is %r)"
                                 % o["divisor_override"])
            kw["divisor_override"] = o["divisor_override"]
        return cls(_py_window(o["kernel_size"]), stride=_py_window(o["stride"]), padding=_py_window(o["padding"]),
                   ceil_mode=o["ceil_mode"], count_include_pad=o["count_include_pad"], **kw)
    return make


for _d in (1, 2, 3):
    _m = getattr(_nn, "MaxPool%dd" % _d)
    _a = getattr(_nn, "AvgPool%dd" % _d)
    _aa = getattr(_nn, "AdaptiveAvgPool%dd" % _d)
    _LEAVES["torch.nn.MaxPool%dd" % _d] = (
        _m, _max_pool_options,
        (lambda cls: lambda o, **f: cls(_py_window(o["kernel_size"]), stride=_py_window(o["stride"]),
                                        padding=_py_window(o["padding"]), dilation=_py_window(o["dilation"]),
                                        ceil_mode=o["ceil_mode"]))(_m))
    _LEAVES["torch.nn.AvgPool%dd" % _d] = (_a, _avg_pool_options, _avg_pool_make(_a))
    _LEAVES["torch.nn.AdaptiveAvgPool%dd" % _d] = (
        _aa, lambda m: {"output_size": _size(m.output_size)},
        (lambda cls: lambda o, **f: cls(_py_size(o["output_size"])))(_aa))
_LEAF_NAMES = {cls: name for name, (cls, _, _) in _LEAVES.items()}


# ---- loading ------------------------------------------------------------------

class _Reader:
    def __init__(self, path):
        self.path = path
        self.modules = {}  # path -> module built, for "shared" documents
        try:
            self.zip = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as e:
            raise FxcppError("%s: not an fxcpp file (%s)" % (path, e)) from None
        docs = [n for n in self.zip.namelist() if n.endswith("/" + _DOCUMENT)]
        if not docs:
            raise FxcppError("%s: not an fxcpp file (a zip archive without %s)" % (path, _DOCUMENT))
        self.prefix = docs[0][: -len(_DOCUMENT)]
        self.doc = json.loads(self.zip.read(docs[0]))
        if self.doc.get("format") != FORMAT:
            raise FxcppError("%s: not an fxcpp file (format %r)" % (path, self.doc.get("format")))
        if self.doc.get("version", 0) > VERSION:
            raise FxcppError("%s: format version %s is newer than this bridge (%d)"
                             % (path, self.doc["version"], VERSION))
        self._storages = {}
        self._tensors = {}
        self._torchscript = None

    def torchscript(self):
        """The module holding the file's TorchScript leaves (the file is its archive)."""
        if self._torchscript is None:
            self._torchscript = torch.jit.load(self.path, map_location="cpu")
        return self._torchscript

    def record(self, name):
        return self.zip.read(self.prefix + name)

    def storage(self, index, dtype):
        key = (index, dtype)
        if key not in self._storages:
            s = self.doc["storages"][index]
            data = bytearray(self.record(s["record"]))
            if not data:
                self._storages[key] = torch.empty(0, dtype=dtype)
            else:
                base = torch.frombuffer(data, dtype=torch.uint8)
                same = [v for (i, _), v in self._storages.items() if i == index]
                if same:  # one storage, another dtype: share the bytes
                    base = torch.empty(0, dtype=torch.uint8).set_(same[0].storage().untyped())
                self._storages[key] = base.view(dtype)
        return self._storages[key]

    def tensor(self, index):
        if index not in self._tensors:
            t = self.doc["tensors"][index]
            dtype = getattr(torch, t["dtype"])
            base = self.storage(t["storage"], dtype)
            out = base.as_strided(t["sizes"], t["strides"], t["offset"])
            if t["requires_grad"]:
                out.requires_grad_(True)
            self._tensors[index] = out
        return self._tensors[index]


def _float(v):
    return {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}[v] if isinstance(v, str) else float(v)


def _function_target(name):
    if "::" in name:
        ns, rest = name.split("::", 1)
        op, _, overload = rest.partition(".")
        packet = getattr(getattr(torch.ops, ns), op)
        return getattr(packet, overload) if overload else packet
    if name == "getattr":
        return getattr
    module, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def _type_annotation(name):
    """A node's type annotation from its printed name ("torch.Tensor", "int"): the type when it can be imported."""
    import builtins
    if isinstance(getattr(builtins, name, None), type):
        return getattr(builtins, name)
    if "." in name and "[" not in name:
        try:
            t = _python_target(name)
            if isinstance(t, type):
                return t
        except (ImportError, AttributeError, ValueError):
            pass
    return name


class _GraphBuilder:
    def __init__(self, reader, root):
        self.reader = reader
        self.root = root
        self.graph = torch.fx.Graph()
        self.env = {}
        self.constants = 0

    def constant(self, c):
        if isinstance(c, dict):
            (k, v), = c.items()
            if k == "tensor":
                name = "_tensor_constant%d" % self.constants
                self.constants += 1
                self.root.register_buffer(name, self.reader.tensor(v))
                return self.graph.get_attr(name)
            if k == "float":
                return _float(v)
            if k not in ("constant_tuple", "constant_list"):  # packed oneDNN operators of optimised / int8 modules
                raise FxcppError("%s: a constant of kind %r (an optimised or quantized module's packed kernel), "
                                 "which the bridge does not read" % (self.reader.path, k))
            items = [self.constant(x) for x in v]
            return tuple(items) if k == "constant_tuple" else items
        return c

    def arg(self, a):
        if not isinstance(a, dict):
            return a
        (k, v), = a.items()
        if k == "node":
            return self.env[v]
        if k == "float":
            return _float(v)
        if k in ("dtype", "layout", "memory_format"):
            return getattr(torch, v)
        if k == "device":
            return torch.device(v)
        if k == "list":
            return [self.arg(x) for x in v]
        if k == "tuple":
            return tuple(self.arg(x) for x in v)
        if k == "dict":
            return {key: self.arg(x) for key, x in v}
        if k == "slice":
            return slice(*[self.arg(x) for x in v])
        if k == "ellipsis":
            return Ellipsis
        if k == "constant":
            return self.constant(v)
        raise FxcppError("%s: unknown argument kind %r" % (self.reader.path, k))

    def build(self, doc):
        for n in doc["nodes"]:
            op, target, args, kwargs = n["op"], n["target"], n["args"], n["kwargs"]
            python = n.get("meta", {}).get(PYTHON_META, {}).get("string")
            python_target = None
            if python is not None:  # the node's Python form, while it is still the call save() wrote
                python = json.loads(python)
                if python.get("lowered") == {"op": op, "target": target, "args": args, "kwargs": kwargs}:
                    try:
                        python_target = _python_target(python["target"])
                    except (ImportError, AttributeError, ValueError):
                        pass  # not importable here (a function of another program's __main__): the call as saved
                    else:
                        op, args, kwargs = python["op"], python["args"], python["kwargs"]
            args = tuple(self.arg(a) for a in args)
            kwargs = {k: self.arg(v) for k, v in kwargs}
            if python_target is not None:
                target = python_target
            elif op == "call_function":
                target = _function_target(target)
            node = self.graph.create_node(op, target, args, kwargs, name=n["name"], type_expr=None)
            if "type" in n:
                node.type = _type_annotation(n["type"])
            for key, value in n.get("meta", {}).items():
                (kind, v), = value.items()
                if kind in ("string", "bool", "int") and key != PYTHON_META:
                    node.meta[key] = v
                elif kind == "float":
                    node.meta[key] = _float(v)
                elif kind == "tensor_meta":
                    node.meta[key] = _tensor_meta_from(v)
                elif kind == "tensor_meta_list":
                    node.meta[key] = tuple(_tensor_meta_from(x) for x in v)
            self.env[n["name"]] = node
        return self.graph


def _module(reader, doc, path=""):
    kind = doc["kind"]
    if kind == "shared":  # a module written before (one a branch graph shares with the root)
        if doc["path"] not in reader.modules:
            raise FxcppError("%s: module %r refers to %r, which is not written before it" % (reader.path, path, doc["path"]))
        return reader.modules[doc["path"]]
    m = _new_module(reader, doc, path)
    reader.modules[path] = m
    return m


def _new_module(reader, doc, path):
    kind = doc["kind"]
    if kind in ("cond", "while_loop"):
        raise FxcppError("%s: module %r is run-time control flow (%s), which the bridge does not read"
                         % (reader.path, path, kind))
    if kind == "torchscript":
        m = getattr(reader.torchscript(), doc["attribute"])
        m.train(doc["training"])  # a TorchScript leaf has its own flags; this one decides
        return m
    if kind == "registered":
        if doc["type"] not in _LEAVES:
            raise FxcppError("%s: module type %r is not known to the bridge" % (reader.path, doc["type"]))
        if getattr(reader, "shares_tensors", False):  # a document in memory: the tensors themselves, not copies
            m = _shell(doc)
            _share_state(m, doc, reader)
            for name, t in list(m.named_parameters()) + list(m.named_buffers()):
                if t.is_meta:
                    raise FxcppError("%s: module %r (%s) has no tensor for %r"
                                     % (reader.path, path, doc["type"], name))
            if isinstance(m, torch.nn.RNNBase):  # forward reads _flat_weights, which register_parameter leaves
                m._flat_weights = [getattr(m, w, None) for w in m._flat_weights_names]
            m.training = doc["training"]
            return m
        # Built on the meta device, then given uninitialised CPU storage (torch.nn.utils.skip_init's way): every
        # tensor is replaced below, so drawing the random initial weights (100 ms for resnet50) would be waste.
        m = _LEAVES[doc["type"]][2](doc["options"], device="meta").to_empty(device="cpu")
        state = dict(m.named_parameters())
        state.update(dict(m.named_buffers()))
        with torch.no_grad():
            for name, index in doc["parameters"] + doc["buffers"]:
                t = reader.tensor(index)
                state[name].copy_(t)
                if name in dict(m.named_parameters()):
                    state[name].requires_grad_(t.requires_grad)
        m.training = doc["training"]  # each module's own flag: train() would recurse
        return m
    m = torch.nn.Module()
    m.training = doc["training"]
    for name, index in doc["parameters"]:
        t = reader.tensor(index)
        m.register_parameter(name, t if isinstance(t, torch.nn.Parameter)  # a live one (fxcpp.to_fx): itself
                             else torch.nn.Parameter(t, requires_grad=t.requires_grad))
    for name, index in doc["buffers"]:
        m.register_buffer(name, reader.tensor(index))
    for name, child in doc["children"]:
        m.add_module(name, _module(reader, child, (path + "." if path else "") + name))
    if kind == "graph_module":
        graph = _GraphBuilder(reader, m).build(doc["graph"])
        called = {n.target for n in graph.nodes if n.op == "call_module"}
        for name, _ in list(m.named_children()):  # function leaves of nodes given back their Python form
            if name.startswith(_LEAF_PREFIX) and name not in called:
                delattr(m, name)
        gm = torch.fx.GraphModule(m, graph, doc.get("class_name", "GraphModule"))
        gm.training = doc["training"]
        return gm
    return m


_SHELLS = {}  # (type, options) -> a module of that type built on the meta device


def _shell(doc):
    """A new module of the document's registered type and options whose tensors are still meta ones (to be
    replaced): a copy of one built once per type and options, as building a torch.nn layer (its __init__, its
    reset_parameters) costs more than the copy."""
    key = (doc["type"], repr(doc["options"]))
    template = _SHELLS.get(key)
    if template is None:
        if len(_SHELLS) > 1024:
            _SHELLS.clear()
        template = _SHELLS[key] = _LEAVES[doc["type"]][2](doc["options"], device="meta")
    return _module_copy(template)


def _module_copy(t):
    """A copy of module t with its own parameter, buffer, submodule and hook tables (the tensors themselves are
    t's until replaced)."""
    m = t.__class__.__new__(t.__class__)
    d = {k: v.copy() if isinstance(v, (dict, set, list)) else v for k, v in t.__dict__.items()}
    d["_modules"] = type(d["_modules"])((k, None if c is None else _module_copy(c)) for k, c in t._modules.items())
    m.__dict__ = d
    return m


def _share_state(m, doc, reader):
    """Sets m's parameters and buffers to the reader's tensors (same storage), by qualified name."""
    for kind, names in (("parameters", doc["parameters"]), ("buffers", doc["buffers"])):
        for name, index in names:
            owner_path, _, attr = name.rpartition(".")
            owner = m.get_submodule(owner_path) if owner_path else m
            t = reader.tensor(index)
            if kind == "parameters":
                owner.register_parameter(attr, t if isinstance(t, torch.nn.Parameter)
                                         else torch.nn.Parameter(t, requires_grad=t.requires_grad))
            else:
                owner.register_buffer(attr, t)


def load(path):
    """The torch.fx.GraphModule saved in the fxcpp file at `path`."""
    reader = _Reader(path)
    if reader.doc.get("kernel_objects"):
        # Compiled kernels (fx::SaveOptions::kernel_objects) are offered to fxcpp::fused_kernel by fx::load alone.
        raise FxcppError("%s: it carries kernel objects, which fx::load runs" % path)
    return _module(reader, reader.doc["root"])


# ---- saving --------------------------------------------------------------------

class _Writer:
    def __init__(self, example_inputs=None):
        self.tensors = []
        self.tensor_ids = {}
        self.storages = []
        self.storage_ids = {}
        self.keep = []
        self.leaves = _Leaves()
        self.written = {}  # id(module) -> path, for "shared" documents
        self.example_inputs = example_inputs

    def tensor(self, t, where):
        if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.device.type != "cpu" or t.is_quantized:
            raise FxcppError("%s: only dense CPU tensors can be saved" % where)
        if id(t) in self.tensor_ids:
            return self.tensor_ids[id(t)]
        s = t.storage()
        key = (s.data_ptr(), s.nbytes())
        if key not in self.storage_ids:
            self.storage_ids[key] = len(self.storages)
            self.storages.append(self.storage_bytes(s))
        self.tensor_ids[id(t)] = len(self.tensors)
        self.keep.append(t)
        self.tensors.append({"storage": self.storage_ids[key], "dtype": str(t.dtype).replace("torch.", ""),
                             "sizes": list(t.shape), "strides": list(t.stride()), "offset": t.storage_offset(),
                             "requires_grad": bool(t.requires_grad)})
        return len(self.tensors) - 1

    def storage_bytes(self, s):
        """What the file holds of storage s: its bytes (fxcpp.convert's documents in memory hold none)."""
        raw = torch.empty(0, dtype=torch.uint8).set_(s.untyped()) if s.nbytes() else torch.empty(0, dtype=torch.uint8)
        return raw.numpy().tobytes()

    def arg(self, a, where):
        if a is None or isinstance(a, (bool, int, str)):
            return a
        if isinstance(a, float):
            return {"float": "nan" if math.isnan(a) else "inf" if a == math.inf else "-inf" if a == -math.inf else a}
        if isinstance(a, torch.fx.Node):
            return {"node": a.name}
        if isinstance(a, torch.dtype):
            return {"dtype": str(a).replace("torch.", "")}
        if isinstance(a, torch.device):
            return {"device": str(a)}
        if isinstance(a, torch.layout):
            return {"layout": str(a).replace("torch.", "")}
        if isinstance(a, torch.memory_format):
            return {"memory_format": str(a).replace("torch.", "")}
        if isinstance(a, list):
            return {"list": [self.arg(x, where) for x in a]}
        if isinstance(a, tuple):
            return {"tuple": [self.arg(x, where) for x in a]}
        if isinstance(a, dict):
            return {"dict": [[str(k), self.arg(v, where)] for k, v in a.items()]}
        if isinstance(a, slice):
            return {"slice": [self.arg(x, where) for x in (a.start, a.stop, a.step)]}
        if a is Ellipsis:
            return {"ellipsis": True}
        if isinstance(a, torch.Tensor):
            return {"constant": {"tensor": self.tensor(a, where)}}
        raise FxcppError("%s: an argument of type %s cannot be saved" % (where, type(a).__name__))

    def node(self, n, target, args, kwargs, where):
        return {"name": n.name, "op": n.op, "target": target,
                "args": [self.arg(a, where) for a in args],
                "kwargs": [[k, self.arg(v, where)] for k, v in kwargs.items()]}

    def graph(self, gm, called):
        """The graph document of gm, and the function leaves its nodes call (name -> ScriptModule)."""
        types = _node_types(gm, self.example_inputs) if self.example_inputs is not None and not called \
            else _node_types(gm, None)
        nodes, extra = [], {}
        for n in gm.graph.nodes:
            where = "node %r" % n.name
            python = None
            if n.op == "call_function":
                low = _lower_call_function(n, types, self.leaves)
                j = self.node(n, low.target, low.args, low.kwargs, where)
                j["op"] = low.op
                if low.leaf is not None:
                    extra[low.target] = low.leaf
                if _needs_python_form(n, low):
                    qualified = _python_target_name(n.target)
                    if qualified is None:
                        raise FxcppError("%s: call_function target %r cannot be saved (not importable by name)"
                                         % (where, n.target))
                    python = self.node(n, qualified, n.args, n.kwargs, where)
                    python["lowered"] = {k: j[k] for k in ("op", "target", "args", "kwargs")}
            else:
                j = self.node(n, n.target, n.args, n.kwargs, where)
            if n.type is not None:
                j["type"] = n.type if isinstance(n.type, str) else torch.fx.node._type_repr(n.type)
            meta = {k: m for k, m in ((k, _meta_value(v)) for k, v in n.meta.items() if k != PYTHON_META) if m}
            if python is not None:
                meta[PYTHON_META] = {"string": json.dumps(python, sort_keys=True)}
            if meta:
                j["meta"] = meta
            nodes.append(j)
        return {"nodes": nodes}, extra

    def module(self, m, path, called=(), leaf=False):
        """The document of m; `called`: the paths below m that a graph calls (call_module), relative to m."""
        where = "module %r" % path if path else "the root module"
        if id(m) in self.written:
            return {"kind": "shared", "path": self.written[id(m)]}
        self.written[id(m)] = path
        options = _LEAVES[_LEAF_NAMES[type(m)]][1](m) if type(m) in _LEAF_NAMES else None
        if options is not None:  # None: options C++'s class does not have (MaxPool2d's return_indices)
            return {"kind": "registered", "type": _LEAF_NAMES[type(m)], "options": options, "training": m.training,
                    "parameters": [[k, self.tensor(v, where)] for k, v in m.named_parameters()],
                    "buffers": [[k, self.tensor(v, where)] for k, v in m.named_buffers()]}
        extra = {}
        if isinstance(m, torch.fx.GraphModule):
            graph, extra = self.graph(m, bool(path))
            j = {"kind": "graph_module", "class_name": "GraphModule", "graph": graph}
            called = {n.target for n in m.graph.nodes if n.op == "call_module"}
        elif isinstance(m, torch.jit.ScriptModule) or (leaf and type(m) is not torch.nn.Module):
            return self.script_leaf(m, where)
        else:
            j = {"kind": "module"}  # a container only: its class is not needed to run the graph
        j["training"] = m.training
        j["parameters"] = [[k, self.tensor(v, where)] for k, v in m.named_parameters(recurse=False)]
        j["buffers"] = [[k, self.tensor(v, where)] for k, v in m.named_buffers(recurse=False)]
        j["children"] = [[k, self.module(c, (path + "." if path else "") + k,
                                         {t[len(k) + 1:] for t in called if t.startswith(k + ".")}, k in called)]
                         for k, c in m.named_children()]
        j["children"] += [[k, self.script_leaf(v, "node %r" % k[len(_LEAF_PREFIX):])] for k, v in extra.items()]
        return j

    def script_leaf(self, m, where):
        """A TorchScript leaf: m scripted (a torch.nn module fxcpp has no C++ class of, a quantized module ...)."""
        if isinstance(m, torch.jit.ScriptModule):
            scripted = m
        else:
            try:
                scripted = torch.jit.script(m)
            except Exception as e:
                first = str(e).strip().splitlines()[0].rstrip(":") if str(e).strip() else type(e).__name__
                raise FxcppError("%s of type %s cannot be saved: fxcpp has no C++ module of that type and "
                                 "TorchScript cannot compile it (%s)" % (where, type(m).__name__, first)) from None
        attribute = self.leaves.add(scripted)
        type_name = re.sub(r"\.___torch_mangle_\d+", "", scripted._c._type().qualified_name())
        return {"kind": "torchscript", "type_name": type_name, "attribute": attribute, "training": m.training}


def save(gm, path, example_inputs=None):
    """Writes the torch.fx.GraphModule `gm` to `path` as an fxcpp file.

    `example_inputs` (optional, a tuple): gm is run on them once so that each
    torch.* / F.* call is saved as the ATen overload its argument types select;
    without them, a call whose overload depends on the type of a node's value
    is saved by its operator name and fxcpp selects the overload at run time.
    """
    if example_inputs is not None and not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    w = _Writer(example_inputs)
    try:
        doc = {"format": FORMAT, "version": VERSION, "producer": "fxcpp_bridge.py", "root": w.module(gm, "")}
        doc["tensors"] = w.tensors
        doc["storages"] = [{"record": _STORAGE % i, "nbytes": len(b)} for i, b in enumerate(w.storages)]
        tmp = path + ".fxcpp-tmp"
        if w.leaves.modules:
            doc["torchscript"] = True
            # The TorchScript module of a file with TorchScript leaves: its attributes leaf0, leaf1 ... are them.
            holder = w.leaves.class_of("import torch\n\n\nclass Leaf(torch.nn.Module):\n"
                                       "    def forward(self) -> None:\n        return None\n")()
            for attribute, m in w.leaves.modules:
                holder.add_module(attribute, m)
            extra = {_DOCUMENT[len("extra/"):]: json.dumps(doc)}
            for i, b in enumerate(w.storages):
                extra[(_STORAGE % i)[len("extra/"):]] = b
            torch.jit.save(torch.jit.script(holder), tmp, _extra_files=extra)
        else:
            with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as z:
                z.writestr("archive/" + _DOCUMENT, json.dumps(doc))
                for i, b in enumerate(w.storages):
                    z.writestr("archive/" + _STORAGE % i, b)
                z.writestr("archive/version", "3\n")
        os.replace(tmp, path)
    finally:
        w.leaves.close()
