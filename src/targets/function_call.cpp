// FunctionCall: a call_function target resolved for repeated calls.
#include <fx/target.h>

#include "targets/builtins.h"
#include "targets/operator_call.h"
#include "targets/registry.h"

namespace fx {

struct FunctionCall::Impl {
  enum class Kind { Operator, Builtin, Registered };
  std::string target;
  std::vector<std::string> kwarg_names;
  Kind kind = Kind::Operator;
  std::shared_ptr<const detail::OperatorCall> op;
  detail::BuiltinFn builtin = nullptr;
  Function fn;

  c10::IValue call_registered(std::vector<c10::IValue>& args, std::vector<c10::IValue>& kwarg_values) const {
    ValueKwargs kwargs;
    kwargs.reserve(kwarg_values.size());
    for (size_t i = 0; i < kwarg_values.size(); ++i) kwargs.emplace_back(kwarg_names[i], std::move(kwarg_values[i]));
    return fn(args, kwargs);
  }

  void check_kwargs(size_t n) const {
    if (n != kwarg_names.size())
      throw Error(target + ": called with " + std::to_string(n) + " keyword values but " +
                  std::to_string(kwarg_names.size()) + " keyword names");
  }
};

FunctionCall::FunctionCall(const std::string& target, std::vector<std::string> kwarg_names)
    : impl_(std::make_unique<Impl>()) {
  impl_->target = target;
  impl_->kwarg_names = std::move(kwarg_names);
  check_function_target(target);  // fx::TargetError with the closest names
  if (const auto* reg = detail::find_registered_function(target)) {
    impl_->kind = Impl::Kind::Registered;
    impl_->fn = reg->fn;
    return;
  }
  if (detail::is_builtin(target)) {
    impl_->kind = Impl::Kind::Builtin;
    impl_->builtin = detail::find_builtin(target);
    if (!impl_->builtin) throw TargetError("builtin call_function target '" + target + "' has no implementation");
    if (!impl_->kwarg_names.empty())
      throw TargetError(target + "() takes no keyword arguments (got '" + impl_->kwarg_names.front() + "')");
    return;
  }
  auto ref = detail::parse_operator_name(target);
  if (!ref) throw TargetError("unknown call_function target '" + target + "'");
  impl_->op = detail::shared_operator_call(
      target, ref->name, ref->has_overload ? std::optional<std::string>(ref->overload) : std::nullopt,
      impl_->kwarg_names);
}

FunctionCall::~FunctionCall() = default;
FunctionCall::FunctionCall(FunctionCall&&) noexcept = default;
FunctionCall& FunctionCall::operator=(FunctionCall&&) noexcept = default;

const std::string& FunctionCall::target() const { return impl_->target; }
const std::vector<std::string>& FunctionCall::kwarg_names() const { return impl_->kwarg_names; }
const detail::OperatorCall* FunctionCall::operator_call() const { return impl_->op.get(); }

c10::IValue FunctionCall::call(std::vector<c10::IValue>& args, std::vector<c10::IValue>& kwarg_values) const {
  impl_->check_kwargs(kwarg_values.size());
  if (impl_->kind == Impl::Kind::Registered) return impl_->call_registered(args, kwarg_values);
  auto a = detail::refs_of(args);
  auto k = detail::refs_of(kwarg_values);
  c10::IValue out = call_refs(a, k);
  args.clear();
  kwarg_values.clear();
  return out;
}

c10::IValue FunctionCall::call_refs(ValueRefs args, ValueRefs kwarg_values) const {
  switch (impl_->kind) {
    case Impl::Kind::Operator:
      return impl_->op->call(args, kwarg_values);
    case Impl::Kind::Builtin:
      impl_->check_kwargs(kwarg_values.size());
      return impl_->builtin(args);
    case Impl::Kind::Registered: {
      impl_->check_kwargs(kwarg_values.size());
      std::vector<c10::IValue> a, k;
      a.reserve(args.size());
      k.reserve(kwarg_values.size());
      for (const auto* v : args) a.push_back(*v);
      for (const auto* v : kwarg_values) k.push_back(*v);
      return impl_->call_registered(a, k);
    }
  }
  return {};
}

c10::IValue call_function(const std::string& target, std::vector<c10::IValue> args, ValueKwargs kwargs) {
  std::vector<std::string> names;
  std::vector<c10::IValue> values;
  names.reserve(kwargs.size());
  values.reserve(kwargs.size());
  for (auto& kv : kwargs) {
    names.push_back(kv.first);
    values.push_back(std::move(kv.second));
  }
  FunctionCall call(target, std::move(names));
  return call.call(args, values);
}

}  // namespace fx
