// MethodCall: a call_method target ("view" → aten::view with self first).
#include <fx/target.h>

#include "targets/builtin_values.h"
#include "targets/operator_call.h"
#include "targets/registry.h"
#include "targets/schema_match.h"

#include <ATen/ATen.h>
#include <c10/util/SmallVector.h>

#include <unordered_map>

namespace fx {

namespace {

using Names = std::vector<std::string>;
/// A method that is not a dispatcher operator, implemented here.
using SpecialFn = c10::IValue (*)(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs);

[[noreturn]] void bad_call(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs) {
  throw TargetError("Tensor." + method + "() got unsupported arguments " + detail::describe_call(args, names, kwargs));
}

/// The optional `dim` argument of size()/stride(): args[1] or dim=.
const c10::IValue* dim_arg(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs) {
  if (args.size() > 2 || kwargs.size() > 1 || (args.size() == 2 && !kwargs.empty())) bad_call(method, args, names, kwargs);
  const c10::IValue* dim = args.size() == 2 ? args[1] : nullptr;
  if (!kwargs.empty()) {
    if (names[0] != "dim") bad_call(method, args, names, kwargs);
    dim = kwargs[0];
  }
  if (dim && !dim->isInt() && !dim->isNone()) bad_call(method, args, names, kwargs);
  return dim && dim->isInt() ? dim : nullptr;
}

c10::IValue m_size(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs) {
  const at::Tensor& t = args[0]->toTensor();
  if (const c10::IValue* dim = dim_arg(method, args, names, kwargs)) return t.size(dim->toInt());
  return c10::List<int64_t>(t.sizes().vec());
}

c10::IValue m_stride(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs) {
  const at::Tensor& t = args[0]->toTensor();
  if (const c10::IValue* dim = dim_arg(method, args, names, kwargs)) return t.stride(dim->toInt());
  return c10::List<int64_t>(t.strides().vec());
}

void no_args(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs) {
  if (args.size() != 1 || !kwargs.empty()) bad_call(method, args, names, kwargs);
}

c10::IValue m_dim(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs) {
  no_args(method, args, names, kwargs);
  return args[0]->toTensor().dim();
}

c10::IValue m_numel(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs) {
  no_args(method, args, names, kwargs);
  return args[0]->toTensor().numel();
}

c10::IValue m_element_size(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs) {
  no_args(method, args, names, kwargs);
  return static_cast<int64_t>(args[0]->toTensor().element_size());
}

c10::IValue m_item(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs) {
  no_args(method, args, names, kwargs);
  return args[0]->toTensor().item();
}

c10::IValue m_is_contiguous(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs) {
  const at::Tensor& t = args[0]->toTensor();
  if (args.size() == 1 && kwargs.empty()) return t.is_contiguous();
  const c10::IValue* mf = args.size() == 2 ? args[1] : nullptr;
  if (kwargs.size() == 1 && names[0] == "memory_format" && args.size() == 1) mf = kwargs[0];
  if (!mf || !mf->isInt()) bad_call(method, args, names, kwargs);
  return t.is_contiguous(static_cast<c10::MemoryFormat>(mf->toInt()));
}

c10::ScalarType dtype_of_method(const std::string& m) {
  static const std::unordered_map<std::string, c10::ScalarType> table = {
      {"float", at::kFloat}, {"double", at::kDouble}, {"half", at::kHalf},   {"bfloat16", at::kBFloat16},
      {"int", at::kInt},     {"long", at::kLong},     {"short", at::kShort}, {"bool", at::kBool},
      {"byte", at::kByte},   {"char", at::kChar},     {"cfloat", at::kComplexFloat},
      {"cdouble", at::kComplexDouble}};
  return table.at(m);
}

c10::IValue m_cast(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs) {
  if (args.size() != 1) bad_call(method, args, names, kwargs);
  c10::optional<c10::MemoryFormat> mf;
  for (size_t i = 0; i < kwargs.size(); ++i) {
    if (names[i] != "memory_format" || !kwargs[i]->isInt()) bad_call(method, args, names, kwargs);
    mf = static_cast<c10::MemoryFormat>(kwargs[i]->toInt());
  }
  return args[0]->toTensor().to(dtype_of_method(method), false, false, mf);
}

c10::IValue m_cpu(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs) {
  no_args(method, args, names, kwargs);
  return args[0]->toTensor().cpu();
}

c10::IValue m_cuda(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs) {
  no_args(method, args, names, kwargs);
  return args[0]->toTensor().cuda();
}

/// Tensor.to(device | dtype | tensor, non_blocking, copy, *, memory_format), Python style.
c10::IValue m_to(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs) {
  const at::Tensor& t = args[0]->toTensor();
  c10::optional<c10::Device> device;
  c10::optional<c10::ScalarType> dtype;
  c10::optional<c10::MemoryFormat> mf;
  bool non_blocking = false, copy = false;
  int bools = 0;
  auto take = [&](const std::string& name, const c10::IValue& v) {
    if ((name.empty() || name == "other") && v.isTensor()) {
      device = v.toTensor().device();
      dtype = v.toTensor().scalar_type();
    } else if ((name.empty() || name == "device") && (v.isDevice() || v.isString())) {
      device = v.isDevice() ? v.toDevice() : c10::Device(v.toStringRef());
    } else if ((name.empty() || name == "dtype") && v.isInt()) {
      dtype = static_cast<c10::ScalarType>(v.toInt());
    } else if (name.empty() && v.isBool()) {
      (bools++ == 0 ? non_blocking : copy) = v.toBool();
    } else if (name == "non_blocking" && v.isBool()) {
      non_blocking = v.toBool();
    } else if (name == "copy" && v.isBool()) {
      copy = v.toBool();
    } else if (name == "memory_format" && v.isInt()) {
      mf = static_cast<c10::MemoryFormat>(v.toInt());
    } else if (!v.isNone()) {
      bad_call(method, args, names, kwargs);
    }
  };
  for (size_t i = 1; i < args.size(); ++i) take("", *args[i]);
  for (size_t i = 0; i < kwargs.size(); ++i) take(names[i], *kwargs[i]);
  at::TensorOptions options;
  if (device) options = options.device(*device);
  if (dtype) options = options.dtype(*dtype);
  return t.to(options, non_blocking, copy, mf);
}

/// x.__getitem__(i), x.__setitem__(i, v): operator.getitem / setitem (torch.fx records a buffer's indexing so).
c10::IValue m_getitem(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs) {
  if (args.size() != 2 || !kwargs.empty()) bad_call(method, args, names, kwargs);
  return detail::builtins::op_getitem(args);
}

c10::IValue m_setitem(const std::string& method, ValueRefs args, const Names& names, ValueRefs kwargs) {
  if (args.size() != 3 || !kwargs.empty()) bad_call(method, args, names, kwargs);
  return detail::builtins::op_setitem(args);
}

const std::unordered_map<std::string, SpecialFn>& special_methods() {
  static const std::unordered_map<std::string, SpecialFn> table = {
      {"size", m_size},         {"stride", m_stride},   {"dim", m_dim},
      {"ndimension", m_dim},    {"numel", m_numel},     {"nelement", m_numel},
      {"element_size", m_element_size},                 {"item", m_item},
      {"is_contiguous", m_is_contiguous},               {"to", m_to},
      {"cpu", m_cpu},           {"cuda", m_cuda},       {"float", m_cast},
      {"double", m_cast},       {"half", m_cast},       {"bfloat16", m_cast},
      {"int", m_cast},          {"long", m_cast},       {"short", m_cast},
      {"bool", m_cast},         {"byte", m_cast},       {"char", m_cast},
      {"cfloat", m_cast},       {"cdouble", m_cast},    {"__getitem__", m_getitem},
      {"__setitem__", m_setitem}};
  return table;
}

}  // namespace

struct MethodCall::Impl {
  std::string method;
  std::vector<std::string> kwarg_names;
  SpecialFn special = nullptr;
  std::shared_ptr<const detail::OperatorCall> op;
};

MethodCall::MethodCall(const std::string& method, std::vector<std::string> kwarg_names)
    : impl_(std::make_unique<Impl>()) {
  impl_->method = method;
  impl_->kwarg_names = std::move(kwarg_names);
  const auto& specials = special_methods();
  auto it = specials.find(method);
  if (it != specials.end()) {
    impl_->special = it->second;
    return;
  }
  const std::string op = "aten::" + method;
  if (method.empty() || method.find('.') != std::string::npos || detail::dispatcher_overloads(op).empty()) {
    std::string msg = "unknown call_method target '" + method + "': Tensor has no method of that name (no operator " +
                      op + ")";
    auto close = closest_target_names(op, 3);
    if (!close.empty()) {
      msg += "; did you mean ";
      for (size_t i = 0; i < close.size(); ++i) {
        const std::string& c = close[i];
        msg += (i ? ", " : "") + (c.rfind("aten::", 0) == 0 ? c.substr(6) : c);
      }
      msg += "?";
    }
    throw TargetError(msg);
  }
  impl_->op = detail::shared_operator_call("call_method " + method, op, std::nullopt, impl_->kwarg_names);
}

MethodCall::~MethodCall() = default;
MethodCall::MethodCall(MethodCall&&) noexcept = default;
MethodCall& MethodCall::operator=(MethodCall&&) noexcept = default;

const std::string& MethodCall::method() const { return impl_->method; }
const std::vector<std::string>& MethodCall::kwarg_names() const { return impl_->kwarg_names; }
const detail::OperatorCall* MethodCall::operator_call() const { return impl_->op.get(); }

c10::IValue MethodCall::call(std::vector<c10::IValue>& args, std::vector<c10::IValue>& kwarg_values) const {
  auto a = detail::refs_of(args);
  auto k = detail::refs_of(kwarg_values);
  c10::IValue out = call_refs(a, k);
  args.clear();
  kwarg_values.clear();
  return out;
}

c10::IValue MethodCall::call_refs(ValueRefs args, ValueRefs kwarg_values) const {
  if (args.empty()) throw Error("call_method " + impl_->method + ": no self argument (args is empty)");
  if (!args[0]->isTensor())
    throw Error("call_method " + impl_->method + ": self must be a Tensor, got " + detail::type_name(*args[0]));
  if (kwarg_values.size() != impl_->kwarg_names.size())
    throw Error("call_method " + impl_->method + ": called with " + std::to_string(kwarg_values.size()) +
                " keyword values but " + std::to_string(impl_->kwarg_names.size()) + " keyword names");
  if (impl_->special) return impl_->special(impl_->method, args, impl_->kwarg_names, kwarg_values);
  return impl_->op->call(args, kwarg_values);
}

c10::IValue call_method(const std::string& method, std::vector<c10::IValue> args, ValueKwargs kwargs) {
  std::vector<std::string> names;
  std::vector<c10::IValue> values;
  for (auto& kv : kwargs) {
    names.push_back(kv.first);
    values.push_back(std::move(kv.second));
  }
  MethodCall call(method, std::move(names));
  return call.call(args, values);
}

}  // namespace fx
