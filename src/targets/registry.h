#pragma once
// Internal: the tables behind target names — registered C++ functions,
// builtins, and an index of the dispatcher's operators. The IR asks these
// when a call_function node is created; execution asks them when it runs.

#include <fx/target.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <string>
#include <vector>

namespace fx::detail {

/// A C++ function registered with fx::register_function.
struct RegisteredFunction {
  Function fn;
  bool impure = false;
};

/// The function registered under `name`, or nullptr. The pointer stays
/// valid until the name is registered again.
const RegisteredFunction* find_registered_function(const std::string& name);

/// Whether `name` is a builtin target ("operator.getitem", "operator.add", "getattr" ...).
bool is_builtin(const std::string& name);
/// Every builtin target name.
const std::vector<std::string>& builtin_names();

/// A call_function target split into its parts: "aten::add.Tensor" →
/// {"aten::add", "Tensor"}; "aten::add" → {"aten::add", ""}.
struct OperatorRef {
  std::string name;
  std::string overload;
  bool has_overload = false;
};
/// Splits "ns::name[.overload]"; nullopt if `target` has no "::".
std::optional<OperatorRef> parse_operator_name(const std::string& target);

/// The overload names the dispatcher knows for operator `name` ("aten::add"
/// → {"Tensor", "Scalar", "out", ...}); empty if it knows none.
std::vector<std::string> dispatcher_overloads(const std::string& name);

/// The dispatcher operators (with schemas) a call_function target may run:
/// the named overload of "aten::add.Tensor", or every overload but the out=
/// ones of "aten::add". Empty for builtins, registered functions, unknown names.
std::vector<c10::OperatorHandle> operator_overloads(const std::string& target);

/// Whether an overload name is an out= variant ("out", "Scalar_out").
bool is_out_overload(const std::string& overload);

}  // namespace fx::detail
