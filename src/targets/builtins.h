#pragma once
// Internal: the builtin call_function targets torch.fx graphs use —
// operator.getitem, Python arithmetic / comparisons / logic (operator.add ...)
// and getattr — with Python's semantics on ints, floats, bools, strings,
// lists and tuples, and the matching ATen operator when a Tensor is involved.

#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <string>

namespace fx::detail {

/// A builtin: positional values in, one value out (builtins take no kwargs).
using BuiltinFn = c10::IValue (*)(c10::ArrayRef<const c10::IValue*> args);

/// The implementation of builtin `name` ("operator.add"), or nullptr.
BuiltinFn find_builtin(const std::string& name);

/// Python truthiness (bool(v)); a Tensor must hold exactly one value.
bool python_truth(const c10::IValue& v);

}  // namespace fx::detail
