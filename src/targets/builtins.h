#pragma once
// Internal: the builtin call_function targets torch.fx graphs use —
// operator.getitem, Python arithmetic / comparisons / logic (operator.add ...)
// and getattr — with Python's semantics on ints, floats, bools, strings,
// lists and tuples, and the matching ATen operator when a Tensor is involved;
// and the operators TorchScript's interpreter implements itself, under their
// TorchScript names (aten::warn, prim::RaiseException, aten::format ...).

#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <string>
#include <vector>

namespace fx::detail {

/// A builtin: positional values in, one value out (builtins take no kwargs).
using BuiltinFn = c10::IValue (*)(c10::ArrayRef<const c10::IValue*> args);

/// The implementation of builtin `name` ("operator.add"), or nullptr.
BuiltinFn find_builtin(const std::string& name);

/// An operator TorchScript's interpreter implements itself (no Operation of
/// its own), served as a builtin under its TorchScript name.
struct ScriptBuiltin {
  const char* name;  ///< "aten::warn", "prim::RaiseException" ...
  BuiltinFn fn;      ///< its implementation
  bool impure;       ///< kept without users: it warns or raises
};

/// Every such builtin (src/targets/script_builtins.cpp).
const std::vector<ScriptBuiltin>& script_builtins();

/// Python truthiness (bool(v)); a Tensor must hold exactly one value.
bool python_truth(const c10::IValue& v);

}  // namespace fx::detail
