"""Read and write fxcpp files (fx::save / fx::load) from Python torch.fx.

Pure Python (zipfile, json, torch); no build step. The format is described
in docs/file_format.md.

    import fxcpp_bridge
    gm = fxcpp_bridge.load("model.fx")      # a torch.fx.GraphModule
    fxcpp_bridge.save(gm, "model2.fx")      # readable by fx::load in C++

load(): ATen targets become torch.ops.aten.<op>.<overload> (or the packet
when the file names no overload), builtins operator.*, registered C++ leaves
(torch.nn.Linear, Conv2d, BatchNorm2d, LSTM ...) torch.nn modules rebuilt
from their options and given the stored parameters, TorchScript leaves
attributes of the file's TorchScript module (a file with TorchScript leaves
is also their torch.jit.save archive; torch.jit.load reads it). Tensor constants inside arguments become
get_attr nodes of attributes _tensor_constant<N> (torch.fx cannot print a
tensor literal in generated code).

save(): graphs whose call_function targets are ATen ops (OpOverload or
OpOverloadPacket, e.g. from make_fx) or operator.* builtins, with plain
modules, nested GraphModules and the torch.nn leaves of the table below.
"""

import importlib
import json
import math
import operator
import zipfile

import torch
import torch.fx

FORMAT = "fxcpp"
VERSION = 2
_DOCUMENT = "extra/fxcpp.json"
_STORAGE = "extra/fxdata/%d"


class FxcppError(Exception):
    """A file that cannot be read, or a module that cannot be written."""


# ---- torch.nn leaves: registry name <-> module class and options ----------

def _conv_options(m):
    padding = m.padding if isinstance(m.padding, str) else list(m.padding)
    return {"in_channels": m.in_channels, "out_channels": m.out_channels,
            "kernel_size": list(m.kernel_size), "stride": list(m.stride), "padding": padding,
            "dilation": list(m.dilation), "output_padding": list(m.output_padding), "groups": m.groups,
            "bias": m.bias is not None, "padding_mode": "k" + m.padding_mode.capitalize()}


def _conv_make(cls, transposed):
    def make(o):
        kw = dict(in_channels=o["in_channels"], out_channels=o["out_channels"],
                  kernel_size=tuple(o["kernel_size"]), stride=tuple(o["stride"]),
                  padding=o["padding"] if isinstance(o["padding"], str) else tuple(o["padding"]),
                  dilation=tuple(o["dilation"]), groups=o["groups"], bias=o["bias"],
                  padding_mode=o["padding_mode"][1:].lower())
        if transposed:
            kw["output_padding"] = tuple(o["output_padding"])
        return cls(**kw)
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
    def make(o):
        kw = {k: o[k] for k in ("input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout",
                                "bidirectional")}
        if cls is torch.nn.LSTM:
            kw["proj_size"] = o.get("proj_size", 0)
        if cls is torch.nn.RNN:
            kw["nonlinearity"] = o.get("nonlinearity", "tanh")
        return cls(**kw)
    return make


_nn = torch.nn
_LEAVES = {
    "torch.nn.Linear": (_nn.Linear, lambda m: {"in_features": m.in_features, "out_features": m.out_features,
                                               "bias": m.bias is not None},
                        lambda o: _nn.Linear(o["in_features"], o["out_features"], bias=o["bias"])),
    "torch.nn.LayerNorm": (_nn.LayerNorm, lambda m: {"normalized_shape": list(m.normalized_shape), "eps": m.eps,
                                                     "elementwise_affine": m.elementwise_affine},
                           lambda o: _nn.LayerNorm(o["normalized_shape"], eps=o["eps"],
                                                   elementwise_affine=o["elementwise_affine"])),
    "torch.nn.GroupNorm": (_nn.GroupNorm, lambda m: {"num_groups": m.num_groups, "num_channels": m.num_channels,
                                                     "eps": m.eps, "affine": m.affine},
                           lambda o: _nn.GroupNorm(o["num_groups"], o["num_channels"], eps=o["eps"],
                                                   affine=o["affine"])),
    "torch.nn.Embedding": (_nn.Embedding, lambda m: {"num_embeddings": m.num_embeddings,
                                                     "embedding_dim": m.embedding_dim, "padding_idx": m.padding_idx,
                                                     "max_norm": m.max_norm, "norm_type": m.norm_type,
                                                     "scale_grad_by_freq": m.scale_grad_by_freq,
                                                     "sparse": m.sparse},
                           lambda o: _nn.Embedding(o["num_embeddings"], o["embedding_dim"],
                                                   padding_idx=o["padding_idx"], max_norm=o["max_norm"],
                                                   norm_type=o["norm_type"],
                                                   scale_grad_by_freq=o["scale_grad_by_freq"], sparse=o["sparse"])),
    "torch.nn.ReLU": (_nn.ReLU, lambda m: {"inplace": m.inplace}, lambda o: _nn.ReLU(inplace=o["inplace"])),
    "torch.nn.Dropout": (_nn.Dropout, lambda m: {"p": m.p, "inplace": m.inplace},
                         lambda o: _nn.Dropout(o["p"], inplace=o["inplace"])),
    "torch.nn.Flatten": (_nn.Flatten, lambda m: {"start_dim": m.start_dim, "end_dim": m.end_dim},
                         lambda o: _nn.Flatten(o["start_dim"], o["end_dim"])),
    "torch.nn.Softmax": (_nn.Softmax, lambda m: {"dim": m.dim}, lambda o: _nn.Softmax(o["dim"])),
    "torch.nn.Identity": (_nn.Identity, lambda m: {}, lambda o: _nn.Identity()),
    "torch.nn.Sigmoid": (_nn.Sigmoid, lambda m: {}, lambda o: _nn.Sigmoid()),
    "torch.nn.Tanh": (_nn.Tanh, lambda m: {}, lambda o: _nn.Tanh()),
}
for _d in (1, 2, 3):
    _c = getattr(_nn, "Conv%dd" % _d)
    _t = getattr(_nn, "ConvTranspose%dd" % _d)
    _b = getattr(_nn, "BatchNorm%dd" % _d)
    _LEAVES["torch.nn.Conv%dd" % _d] = (_c, _conv_options, _conv_make(_c, False))
    _LEAVES["torch.nn.ConvTranspose%dd" % _d] = (_t, _conv_options, _conv_make(_t, True))
    _LEAVES["torch.nn.BatchNorm%dd" % _d] = (
        _b, _bn_options,
        (lambda cls: lambda o: cls(o["num_features"], eps=o["eps"], momentum=o["momentum"], affine=o["affine"],
                                   track_running_stats=o["track_running_stats"]))(_b))
for _name, _cls in (("LSTM", _nn.LSTM), ("GRU", _nn.GRU), ("RNN", _nn.RNN)):
    _LEAVES["torch.nn." + _name] = (_cls, _rnn_options, _rnn_make(_cls))
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
    module, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(module), attr)


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
            args = tuple(self.arg(a) for a in n["args"])
            kwargs = {k: self.arg(v) for k, v in n["kwargs"]}
            target = n["target"]
            if n["op"] == "call_function":
                target = _function_target(target)
            node = self.graph.create_node(n["op"], target, args, kwargs, name=n["name"], type_expr=None)
            if "type" in n:
                node.type = n["type"]
            for key, value in n.get("meta", {}).items():
                (kind, v), = value.items()
                if kind == "string":
                    node.meta[key] = v
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
        m = _LEAVES[doc["type"]][2](doc["options"])
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
        m.register_parameter(name, torch.nn.Parameter(t, requires_grad=t.requires_grad))
    for name, index in doc["buffers"]:
        m.register_buffer(name, reader.tensor(index))
    for name, child in doc["children"]:
        m.add_module(name, _module(reader, child, (path + "." if path else "") + name))
    if kind == "graph_module":
        graph = _GraphBuilder(reader, m).build(doc["graph"])
        gm = torch.fx.GraphModule(m, graph, doc.get("class_name", "GraphModule"))
        gm.training = doc["training"]
        return gm
    return m


def load(path):
    """The torch.fx.GraphModule saved in the fxcpp file at `path`."""
    reader = _Reader(path)
    return _module(reader, reader.doc["root"])


# ---- saving --------------------------------------------------------------------

class _Writer:
    def __init__(self):
        self.tensors = []
        self.tensor_ids = {}
        self.storages = []
        self.storage_ids = {}
        self.keep = []

    def tensor(self, t, where):
        if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.device.type != "cpu":
            raise FxcppError("%s: only dense CPU tensors can be saved" % where)
        if id(t) in self.tensor_ids:
            return self.tensor_ids[id(t)]
        s = t.storage()
        key = (s.data_ptr(), s.nbytes())
        if key not in self.storage_ids:
            self.storage_ids[key] = len(self.storages)
            raw = torch.empty(0, dtype=torch.uint8).set_(s.untyped()) if s.nbytes() else torch.empty(0, dtype=torch.uint8)
            self.storages.append(raw.numpy().tobytes())
        self.tensor_ids[id(t)] = len(self.tensors)
        self.keep.append(t)
        self.tensors.append({"storage": self.storage_ids[key], "dtype": str(t.dtype).replace("torch.", ""),
                             "sizes": list(t.shape), "strides": list(t.stride()), "offset": t.storage_offset(),
                             "requires_grad": bool(t.requires_grad)})
        return len(self.tensors) - 1

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

    @staticmethod
    def target(n):
        t = n.target
        if n.op != "call_function":
            return t
        if isinstance(t, torch._ops.OpOverload):
            over = t._overloadname
            return t._schema.name + ("" if over == "default" else "." + over)
        if isinstance(t, torch._ops.OpOverloadPacket):
            return t._qualified_op_name
        if getattr(t, "__module__", None) == "_operator" or t in vars(operator).values():
            return "operator." + t.__name__
        raise FxcppError("node %r: call_function target %r cannot be saved (ATen ops and operator.* only)"
                         % (n.name, t))

    def graph(self, g):
        nodes = []
        for n in g.nodes:
            where = "node %r" % n.name
            j = {"name": n.name, "op": n.op, "target": self.target(n),
                 "args": [self.arg(a, where) for a in n.args],
                 "kwargs": [[k, self.arg(v, where)] for k, v in n.kwargs.items()]}
            if n.type is not None:
                j["type"] = n.type if isinstance(n.type, str) else torch.fx.node._type_repr(n.type)
            meta = {k: {"string": v} for k, v in n.meta.items() if isinstance(v, str)}
            if meta:
                j["meta"] = meta
            nodes.append(j)
        return {"nodes": nodes}

    def module(self, m, path):
        where = "module %r" % path if path else "the root module"
        if type(m) in _LEAF_NAMES:
            name = _LEAF_NAMES[type(m)]
            return {"kind": "registered", "type": name, "options": _LEAVES[name][1](m), "training": m.training,
                    "parameters": [[k, self.tensor(v, where)] for k, v in m.named_parameters()],
                    "buffers": [[k, self.tensor(v, where)] for k, v in m.named_buffers()]}
        if isinstance(m, torch.fx.GraphModule):
            j = {"kind": "graph_module", "class_name": "GraphModule", "graph": self.graph(m.graph)}
        elif type(m) is torch.nn.Module:
            j = {"kind": "module"}
        else:
            raise FxcppError("%s of type %s cannot be saved" % (where, type(m).__name__))
        j["training"] = m.training
        j["parameters"] = [[k, self.tensor(v, where)] for k, v in m.named_parameters(recurse=False)]
        j["buffers"] = [[k, self.tensor(v, where)] for k, v in m.named_buffers(recurse=False)]
        j["children"] = [[k, self.module(c, (path + "." if path else "") + k)] for k, c in m.named_children()]
        return j


def save(gm, path):
    """Writes the torch.fx.GraphModule `gm` to `path` as an fxcpp file."""
    w = _Writer()
    doc = {"format": FORMAT, "version": VERSION, "producer": "fxcpp_bridge.py", "root": w.module(gm, "")}
    doc["tensors"] = w.tensors
    doc["storages"] = [{"record": _STORAGE % i, "nbytes": len(b)} for i, b in enumerate(w.storages)]
    tmp = path + ".fxcpp-tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr("archive/" + _DOCUMENT, json.dumps(doc))
        for i, b in enumerate(w.storages):
            z.writestr("archive/" + _STORAGE % i, b)
        z.writestr("archive/version", "3\n")
    import os
    os.replace(tmp, path)
