#pragma once
/// \file
/// Targets: what call_function and call_method nodes call.
///
/// A call_function target is one of
///  - an ATen (or any dispatcher) operator by name: "aten::add", or with an
///    explicit overload "aten::add.Tensor". Without an overload, the overload
///    is chosen from the argument types on the first call and cached;
///  - a builtin that torch.fx graphs need: "operator.getitem", Python
///    arithmetic and comparisons ("operator.add", "operator.lt" ...);
///  - a C++ function registered with register_function("mylib::scale", fn),
///    the counterpart of a custom op or torch.fx's wrap().
/// A call_method target names a Tensor method: "view" calls aten::view with
/// args[0] as self.

#include <fx/argument.h>
#include <fx/error.h>

#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace fx {

namespace detail {
class OperatorCall;
}

/// Keyword arguments as run-time values, in call order.
using ValueKwargs = std::vector<std::pair<std::string, c10::IValue>>;

/// A C++ function callable from a call_function node.
using Function = std::function<c10::IValue(std::vector<c10::IValue>& args, ValueKwargs& kwargs)>;

/// Registers `fn` as call_function target `name` (e.g. "mylib::scale").
/// Impure functions are kept by eliminate_dead_code even without users.
/// Registering a name twice replaces the function. One function is
/// registered in every process from the start, whatever ran before:
/// "torch._assert" (condition, message), impure, which throws the message
/// when the condition (a bool, int or one-element tensor) is false.
void register_function(const std::string& name, Function fn, bool impure = false);

/// Throws fx::TargetError unless `target` names a known call_function target;
/// the message names the target and the closest known names.
void check_function_target(const std::string& target);

/// Whether a call_function of `target` has side effects: a registered impure
/// function, an operator whose schema writes to an input (aten::add_,
/// aten::copy_; the out= overloads do not count), an in-place builtin
/// (operator.iadd, isub, imul, itruediv), torch.fx's side-effectful
/// functions (torch._assert, every profiler:: op,
/// the record_function enter/exit ops), or an operator that returns nothing
/// (aten::_assert_async: torch.fx 1.13 does not list those, fxcpp keeps them).
bool is_impure_function(const std::string& target);

/// Up to `n` known call_function target names closest to `target`.
std::vector<std::string> closest_target_names(const std::string& target, size_t n = 3);

/// Argument values of one call, read in place (borrowed, not consumed).
using ValueRefs = c10::ArrayRef<const c10::IValue*>;

/// A call_function target resolved for repeated calls. The overload is chosen
/// from the argument kinds on the first call and cached per kind signature
/// (a later call with different kinds resolves again); calls may come from
/// several threads at once. Operators whose schema is a common Tensor/Scalar
/// signature (add, mul, relu ...) are called through a typed handle, as
/// at::add is; the rest through the boxed dispatcher with schema defaults.
class FunctionCall {
 public:
  /// Resolves `target` (throws fx::TargetError if unknown). `kwarg_names` are
  /// the keyword names every call passes, in order.
  FunctionCall(const std::string& target, std::vector<std::string> kwarg_names);
  ~FunctionCall();
  FunctionCall(FunctionCall&&) noexcept;
  FunctionCall& operator=(FunctionCall&&) noexcept;

  /// Calls the target. `args` and `kwarg_values` are consumed (moved from).
  c10::IValue call(std::vector<c10::IValue>& args, std::vector<c10::IValue>& kwarg_values) const;
  /// Calls the target with values read in place: the compiled plan's path,
  /// which boxes nothing on the typed signatures.
  c10::IValue call_refs(ValueRefs args, ValueRefs kwarg_values) const;
  /// The target name.
  const std::string& target() const;
  /// The keyword names every call passes.
  const std::vector<std::string>& kwarg_names() const;
  /// Internal (for the compiled plan): the dispatcher operator behind this
  /// call, or nullptr for builtins and registered functions.
  const detail::OperatorCall* operator_call() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A call_method target resolved for repeated calls ("view" → aten::view).
/// A few methods that are not operators are built in: size, dim, numel,
/// item, to, float/double/half/int/long/bool ..., cpu, is_contiguous, stride.
class MethodCall {
 public:
  /// Resolves `method` (throws fx::TargetError if there is no such method).
  MethodCall(const std::string& method, std::vector<std::string> kwarg_names);
  ~MethodCall();
  MethodCall(MethodCall&&) noexcept;
  MethodCall& operator=(MethodCall&&) noexcept;
  /// Calls method on args[0] with the rest as arguments (consumed).
  c10::IValue call(std::vector<c10::IValue>& args, std::vector<c10::IValue>& kwarg_values) const;
  /// As call(), with values read in place.
  c10::IValue call_refs(ValueRefs args, ValueRefs kwarg_values) const;
  /// The method name.
  const std::string& method() const;
  /// The keyword names every call passes.
  const std::vector<std::string>& kwarg_names() const;
  /// Internal (for the compiled plan): the operator aten::<method> behind
  /// this call, or nullptr for the built-in methods (size, to ...).
  const detail::OperatorCall* operator_call() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// One-shot call of a call_function target (resolves every time).
c10::IValue call_function(const std::string& target, std::vector<c10::IValue> args, ValueKwargs kwargs = {});
/// One-shot call of a Tensor method on args[0].
c10::IValue call_method(const std::string& method, std::vector<c10::IValue> args, ValueKwargs kwargs = {});

}  // namespace fx
