"""How fxcpp_bridge.save writes a torch.fx call: a Python target as the ATen overload its arguments bind to
or as a TorchScript leaf that calls it, each node's value kind, and node meta as the file holds it.

A part of python/fxcpp_bridge.py (fxcpp.bridge), which re-exports every name here; save()'s _Writer and
load()'s _GraphBuilder use them. Not imported on its own.
"""
import importlib
import inspect
import math
import operator

import torch
import torch.fx

from ._bridge_error import FxcppError


# ---- Python targets -> what fxcpp calls --------------------------------------------
#
# symbolic_trace records Python callables: torch.* builtins (torch.cat), Python
# functions of torch.nn.functional (F.relu, boolean-dispatched F.max_pool2d),
# operator.*, getattr, and functions of other libraries that torch.fx.wrap
# kept whole (torchvision.ops.stochastic_depth). fxcpp calls ATen operators by
# name, so each becomes the one ATen overload its arguments bind to (the
# operator's TorchScript schemas; the overload-less name when the argument
# types known here leave several, which fxcpp then picks from the values), or,
# when no single operator does what the function does (F.interpolate, a
# wrapped library function), a call of a TorchScript leaf that calls it.
# The node's Python form is kept in its meta (PYTHON_META) and restored by
# load() while the node is still what save() wrote.

PYTHON_META = "fxcpp_bridge.python"
_LEAF_PREFIX = "_fxcpp_fn_"
_ALIASES = {"input": "self", "training": "train"}  # Python parameter -> ATen argument name
_DROPPABLE = {"_stacklevel"}  # Python-only parameters that do not change the result


def _qualified_name(fn):
    name = torch.fx.node._get_qualified_name(fn)
    module, _, attr = name.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError):
        found = None
    return name if found is fn else None


def _python_target(name):
    if name.startswith("torch.ops."):
        target = torch.ops
        for part in name.split(".")[2:]:
            target = getattr(target, part)
        return target
    module, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def _kind(v, types):
    """What a value is, as far as the schema matcher cares; None: unknown (a node of unknown type)."""
    if isinstance(v, torch.fx.Node):
        return types.get(v)
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, torch.Tensor):
        return "Tensor"
    if isinstance(v, (torch.dtype, torch.layout, torch.memory_format)):
        return "enum"
    if isinstance(v, torch.device):
        return "device"
    if isinstance(v, (list, tuple)):
        return "list"
    return "object"


def _value_kind(value):
    k = _kind(value, {})
    return None if k in ("object",) else k


def _fits(v, t, types):
    kind = t.kind()
    if kind == "OptionalType":
        return _kind(v, types) in ("None", None) or _fits(v, t.getElementType(), types)
    k = _kind(v, types)
    if k is None:  # a node whose type is not known: fxcpp decides from its value
        return kind not in ("NoneType",)
    if kind == "TensorType":
        return k == "Tensor"
    if kind in ("IntType", "SymIntType"):
        return k in ("int", "enum") or _scalar_attribute(v, types, False) is not None
    if kind == "FloatType":
        return k in ("float", "int") or _scalar_attribute(v, types, True) is not None
    if kind == "NumberType":
        return k in ("int", "float", "bool")
    if kind == "BoolType":
        return k == "bool"
    if kind == "StringType":
        return k == "str"
    if kind == "DeviceObjType":
        return k in ("device", "str")
    if kind == "ListType":
        if k != "list":
            return False
        return all(_fits(x, t.getElementType(), types) for x in v)
    return False


class _Types(dict):
    """Node -> kind of its value (None: unknown); `scalars`: get_attr nodes of one-element tensors -> the tensor."""

    def __init__(self):
        super().__init__()
        self.scalars = {}


def _scalar_attribute(v, types, floating):
    """The number a get_attr node of a 0-dim tensor gives a float / int argument (Python's binding takes
    such a tensor there, as convert_fx's scale and zero_point buffers; fxcpp's schema matcher does not)."""
    t = getattr(types, "scalars", {}).get(v) if isinstance(v, torch.fx.Node) else None
    if t is None or t.dim() != 0 or t.is_floating_point() != floating and not floating:
        return None
    return float(t.item()) if floating else int(t.item())


def _bind_schema(schema, args, kwargs, types):
    """(positional, keyword) arguments of a call of `schema`, or None when they do not bind."""
    params = schema.arguments
    if any(a.name == "out" and a.kwarg_only for a in params):
        return None
    positional = [a for a in params if not a.kwarg_only]
    if len(args) > len(positional):
        return None
    bound = {}
    for a, v in zip(positional, args):
        bound[a.name] = v
    names = {a.name for a in params}
    for k, v in kwargs.items():
        if k not in names or k in bound:
            return None
        bound[k] = v
    for a in params:
        if a.name not in bound:
            if a.default_value is None and a.type.kind() != "OptionalType":
                return None
            continue
        v = bound[a.name]
        listed = a.type.getElementType() if a.type.kind() == "OptionalType" else a.type
        if a.N and isinstance(v, int) and not isinstance(v, bool) and listed.kind() == "ListType":
            # int[2] given one int, as TorchScript broadcasts it; int[1]? too (torch.mean(x, dim=-1))
            bound[a.name] = v = [v] * a.N
        if not _fits(v, a.type, types):
            return None
        if isinstance(v, torch.fx.Node) and types.get(v) == "Tensor" and a.type.kind() in ("IntType", "FloatType"):
            bound[a.name] = _scalar_attribute(v, types, a.type.kind() == "FloatType")
    # Positional while contiguous, keywords after the first gap.
    out_args, out_kwargs, gap = [], {}, False
    for a in params:
        if a.name not in bound:
            gap = True
        elif a.kwarg_only or gap:
            out_kwargs[a.name] = bound[a.name]
        else:
            out_args.append(bound[a.name])
    return tuple(out_args), out_kwargs


def _resolve_overload(name, args, kwargs, types):
    """('aten::name.overload', args, kwargs) for the overloads of `name` the call binds to, or None."""
    fits = []
    for schema in torch._C._jit_get_schemas_for_operator(name):
        b = _bind_schema(schema, args, kwargs, types)
        if b is not None:
            fits.append((schema.overload_name, b))
    if not fits:
        return None
    if len(fits) == 1:
        over, (a, k) = fits[0]
        return name + ("." + over if over else ""), a, k
    # Several overloads bind: the name without one, as written (fxcpp matches the run-time values).
    return name, tuple(args), dict(kwargs)


def _python_function_call(fn, args, kwargs, types):
    """An ATen call doing what the Python function `fn` (F.relu, F.max_pool2d ...) does, or None."""
    dispatched = torch._jit_internal.boolean_dispatched.get(fn)
    if dispatched is not None:  # F.max_pool2d(..., return_indices=b): one of two functions
        sig = inspect.signature(dispatched["if_false"])
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return None
        flag = bound.arguments.get(dispatched["arg_name"], dispatched["default"])
        if not isinstance(flag, bool):
            return None
        fn = dispatched["if_true" if flag else "if_false"]
        droppable = _DROPPABLE | {dispatched["arg_name"]}  # the function chosen says it
    else:
        droppable = _DROPPABLE
    if fn.__name__.endswith("_with_indices"):
        droppable = droppable | {"return_indices"}  # F.max_pool2d_with_indices(..., return_indices=True)
    try:
        sig = inspect.signature(fn)
        bound = sig.bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values()):
        return None
    bound.apply_defaults()
    values = dict(bound.arguments)
    defaults = {p.name: p.default for p in sig.parameters.values()}
    inplace = values.get("inplace") is True
    base = fn.__name__.lstrip("_")
    for name in ("aten::" + base + ("_" if inplace else ""),):
        for schema in torch._C._jit_get_schemas_for_operator(name):
            schema_names = {a.name: a for a in schema.arguments}
            call = {}
            ok = True
            for k, v in values.items():
                target = k if k in schema_names else _ALIASES.get(k)
                if target in schema_names and target not in call:
                    a = schema_names[target]
                    if v is None and v is defaults[k] and (a.type.kind() == "OptionalType" or a.default_value is not None):
                        continue  # Python's None default is the schema's own default (dtype=None, stride=None -> [])
                    call[target] = v
                elif k in droppable or k == "inplace" or (v is defaults[k] or
                                                          (type(v) is type(defaults[k]) and v == defaults[k])):
                    continue  # a Python-only parameter left at its default
                else:
                    ok = False
                    break
            if not ok:
                continue
            b = _bind_schema(schema, (), call, types)
            if b is not None:
                return name + ("." + schema.overload_name if schema.overload_name else ""), b[0], b[1]
    return None


def _scalars_in(n, types):
    """Whether the node reads a get_attr 0-dim tensor (which may stand for a number, see _scalar_attribute)."""
    return any(a in types.scalars for a in n.all_input_nodes) if hasattr(types, "scalars") else False


def _builtin_name(t):
    if getattr(t, "__module__", None) == "_operator" or (callable(t) and t in vars(operator).values()):
        return "operator." + t.__name__
    if t is getattr:
        return "getattr"
    if t is torch._assert:
        return "torch._assert"
    return None


def _jit_builtin(t):
    try:
        name = torch.jit._builtins._find_builtin(t)
    except Exception:  # unhashable callables
        return None
    return name if name and name.startswith("aten::") else None


class _Lowered:
    """A call_function node as fxcpp sees it: op, target, args, kwargs (and a leaf to add)."""

    def __init__(self, op, target, args, kwargs, leaf=None):
        self.op, self.target, self.args, self.kwargs, self.leaf = op, target, args, kwargs, leaf


def _lower_call_function(n, types, leaves):
    t = n.target
    where = _CallWhere(n)  # its text (the target's qualified name: an import) only when an error is written
    if isinstance(t, torch._ops.OpOverload):
        over = t._overloadname
        name = t._schema.name + ("" if over == "default" else "." + over)
        b = _bind_schema(t._schema, n.args, n.kwargs, types) if _scalars_in(n, types) else None
        return _Lowered("call_function", name, *(b if b is not None else (n.args, n.kwargs)))
    if isinstance(t, torch._ops.OpOverloadPacket):
        r = _resolve_overload(t._qualified_op_name, n.args, n.kwargs, types) if _scalars_in(n, types) else None
        return _Lowered("call_function", *(r if r is not None else (t._qualified_op_name, n.args, n.kwargs)))
    name = _builtin_name(t)
    if name:
        return _Lowered("call_function", name, n.args, n.kwargs)
    identity = _stochastic_depth_identity(n)
    if identity is not None:
        return identity
    aten = _jit_builtin(t)
    if aten:  # torch.cat, torch.flatten, torch._C._nn.avg_pool2d ...: same names as the schema's
        r = _resolve_overload(aten, n.args, n.kwargs, types)
        if r is None:
            raise FxcppError("%s: its arguments %s bind to no schema of %s"
                             % (where, _describe_call(n.args, n.kwargs, types), aten))
        return _Lowered("call_function", r[0], r[1], r[2])
    if inspect.isfunction(t) and getattr(t, "__module__", "") in ("torch.nn.functional", "torch.functional", "torch"):
        r = _python_function_call(t, n.args, n.kwargs, types)
        if r is not None:
            return _Lowered("call_function", r[0], r[1], r[2])
    # A function no single ATen operator does: a TorchScript leaf that calls it.
    return leaves.function_leaf(n, t, where, types)


def _stochastic_depth_identity(n):
    """torchvision.ops.stochastic_depth(x, p, mode, training) where torchvision returns x itself (training False
    or p 0; p and mode valid): aten::dropout(x, p, False), the ATen operator that returns its input, which
    optimisers remove (fxcpp's remove_dropout) and which keeps a tensor's layout, or None (a TorchScript leaf)."""
    t = n.target
    if (getattr(t, "__module__", None), getattr(t, "__name__", "")) != ("torchvision.ops.stochastic_depth",
                                                                           "stochastic_depth"):
        return None
    try:
        b = inspect.signature(t).bind(*n.args, **n.kwargs)
    except TypeError:
        return None
    b.apply_defaults()
    x, p, mode, training = (b.arguments.get(k) for k in ("input", "p", "mode", "training"))
    if not isinstance(x, torch.fx.Node) or isinstance(p, bool) or not isinstance(p, (int, float)) or \
            not 0.0 <= p <= 1.0 or mode not in ("batch", "row") or not isinstance(training, bool):
        return None
    if training and p != 0.0:
        return None
    return _Lowered("call_function", "aten::dropout", (x, float(p), False), {})


class _CallWhere:
    """ "node 'x': call_function target torch.foo" for an error message, written when one is."""

    def __init__(self, n):
        self.n = n

    def __str__(self):
        return "node %r: call_function target %s" % (self.n.name, _describe(self.n.target))


def _describe(t):
    name = _qualified_name(t) if callable(t) else None
    return name or repr(t)


def _describe_call(args, kwargs, types):
    def one(v):
        k = _kind(v, types)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(one(x) for x in v) + "]"
        return k or "?"
    parts = [one(a) for a in args] + ["%s=%s" % (k, one(v)) for k, v in kwargs.items()]
    return "(" + ", ".join(parts) + ")"


class _Leaves:
    """TorchScript leaves of the file: scripted torch.nn modules and function calls."""

    def __init__(self):
        self.modules = []  # (attribute, ScriptModule)
        self._tmp = None
        self._classes = {}

    def add(self, scripted):
        attribute = "leaf%d" % len(self.modules)
        self.modules.append((attribute, scripted))
        return attribute

    def close(self):
        if self._tmp is not None:
            self._tmp.cleanup()

    def function_leaf(self, n, fn, where, types):
        """A scripted module whose forward(a0, a1 ...) calls fn with the node's arguments."""
        qualified = _qualified_name(fn)
        if qualified is None:
            raise FxcppError("%s cannot be saved: not an importable function" % where)
        inputs = []

        def render(v):
            if isinstance(v, torch.fx.Node):
                if v not in inputs:
                    inputs.append(v)
                return "a%d" % inputs.index(v)
            if isinstance(v, (list, tuple)):
                items = ", ".join(render(x) for x in v)
                return ("[%s]" if isinstance(v, list) else "(%s,)" if len(v) == 1 else "(%s)") % items
            if v is None or isinstance(v, (bool, int, str)):
                return repr(v)
            if isinstance(v, float):
                return repr(v) if math.isfinite(v) else "float(%r)" % repr(v)
            if isinstance(v, torch.dtype):
                return str(v)
            raise FxcppError("%s cannot be saved: an argument of type %s" % (where, type(v).__name__))

        call = ", ".join([render(a) for a in n.args] + ["%s=%s" % (k, render(v)) for k, v in n.kwargs.items()])
        annotations = []
        for i, v in enumerate(inputs):
            k = types.get(v, "Tensor")
            annotation = {"Tensor": "torch.Tensor", "int": "int", "float": "float", "bool": "bool",
                          "list": None}.get(k)
            if annotation is None:
                raise FxcppError("%s cannot be saved: its input %r is a %s" % (where, v.name, k))
            annotations.append("a%d: %s" % (i, annotation))
        module, _, attr = qualified.rpartition(".")
        source = ("import torch\nfrom %s import %s as _fn\n\n\nclass Leaf(torch.nn.Module):\n"
                  "    def forward(self, %s):\n        return _fn(%s)\n" % (module, attr, ", ".join(annotations), call))
        try:
            cls = self.class_of(source)
            scripted = torch.jit.script(cls())
        except FxcppError:
            raise
        except Exception as e:
            first = str(e).strip().splitlines()[0].rstrip(":") if str(e).strip() else type(e).__name__
            raise FxcppError("%s cannot be saved: no ATen operator does what it does, and TorchScript cannot "
                             "compile it (%s)" % (where, first)) from None
        scripted.eval()
        return _Lowered("call_module", _LEAF_PREFIX + n.name, tuple(inputs), {}, leaf=scripted)

    def class_of(self, source):
        """The class Leaf of a module with that source (a file of its own: TorchScript reads the source)."""
        if source not in self._classes:
            import importlib.util
            import os
            import tempfile
            if self._tmp is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="fxcpp_bridge_")
            path = os.path.join(self._tmp.name, "fxcpp_leaf%d.py" % len(self._classes))
            with open(path, "w") as f:
                f.write(source)
            spec = importlib.util.spec_from_file_location("fxcpp_leaf%d" % len(self._classes), path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            self._classes[source] = mod.Leaf
        return self._classes[source]


def _node_types(gm, example_inputs):
    """Node -> kind of its value: from running gm on example_inputs, else from meta / type annotations."""
    types = _Types()
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            v = _get_attr(gm, n.target)
            if isinstance(v, torch.Tensor) and v.dim() == 0 and not v.is_quantized:
                types.scalars[n] = v
    if example_inputs is not None:
        class Recorder(torch.fx.Interpreter):
            def run_node(self, n):
                v = super().run_node(n)
                types[n] = _value_kind(v)
                return v
        with torch.no_grad():
            Recorder(gm).run(*example_inputs)
        return types
    for n in gm.graph.nodes:
        if "tensor_meta" in n.meta or isinstance(n.meta.get("val"), torch.Tensor):
            types[n] = "Tensor"
        elif n.type is torch.Tensor:
            types[n] = "Tensor"
        elif n.type in (int, float, bool, str):
            types[n] = n.type.__name__
        elif n.op == "get_attr":
            try:
                v = _get_attr(gm, n.target)
            except AttributeError:
                continue
            types[n] = _value_kind(v)
    return types


def _tensor_meta(m):
    """A torch.fx TensorMetadata as the file holds it (docs/file_format.md), or None (quantized: qparams are not kept)."""
    if m.is_quantized:
        return None
    return {"shape": list(m.shape), "dtype": str(m.dtype).replace("torch.", ""), "requires_grad": bool(m.requires_grad),
            "stride": list(m.stride),
            "memory_format": None if m.memory_format is None else str(m.memory_format).replace("torch.", ""),
            "is_quantized": False}


def _tensor_meta_from(j):
    """The torch.fx TensorMetadata of a file's tensor_meta."""
    from torch.fx.passes.shape_prop import TensorMetadata
    fmt = j.get("memory_format")
    return TensorMetadata(torch.Size(j["shape"]), getattr(torch, j["dtype"]), j["requires_grad"], tuple(j["stride"]),
                          None if fmt is None else getattr(torch, fmt), j["is_quantized"], {})


def _meta_value(v):
    """A node's meta value as the file holds it (strings, e.g. stack traces; booleans, e.g. is_wrapped; numbers;
    tensor_meta), or None."""
    from torch.fx.passes.shape_prop import TensorMetadata
    if isinstance(v, TensorMetadata):
        j = _tensor_meta(v)
        return None if j is None else {"tensor_meta": j}
    if isinstance(v, tuple) and v and all(isinstance(x, TensorMetadata) for x in v):
        items = [_tensor_meta(x) for x in v]
        return None if None in items else {"tensor_meta_list": items}
    if isinstance(v, str):
        return {"string": v}
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": v}
    if isinstance(v, float):
        return {"float": "nan" if math.isnan(v) else "inf" if v == math.inf else "-inf" if v == -math.inf else v}
    return None


def _python_target_name(t):
    if isinstance(t, torch._ops.OpOverload):
        return "torch.ops.%s.%s.%s" % (t._schema.name.split("::")[0], t._schema.name.split("::")[1], t._overloadname)
    if isinstance(t, torch._ops.OpOverloadPacket):
        return "torch.ops." + t._qualified_op_name.replace("::", ".")
    return _qualified_name(t)


def _needs_python_form(n, low):
    """Whether load() needs the node's Python form to give it back (its target is not an ATen op or builtin,
    or its arguments changed)."""
    if isinstance(n.target, torch._ops.OpOverload) and n.target._overloadname == "default":
        return True  # written without its overload name (fxcpp's name of the empty overload): read as the packet
    if isinstance(n.target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return low.args is not n.args or low.kwargs is not n.kwargs
    return not _builtin_name(n.target)


def _get_attr(m, target):
    for part in target.split("."):
        m = getattr(m, part)
    return m
