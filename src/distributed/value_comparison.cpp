// Comparing values of runs (a pipeline's output against the whole model's):
// bit for bit, or by the largest absolute difference (see process_group.h).
#include <fx/distributed/process_group.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace fx::distributed {

namespace {

bool same_scalar(const c10::IValue& a, const c10::IValue& b) {
  if (a.isNone() || b.isNone()) return a.isNone() && b.isNone();
  if (a.isInt() && b.isInt()) return a.toInt() == b.toInt();
  if (a.isBool() && b.isBool()) return a.toBool() == b.toBool();
  if (a.isDouble() && b.isDouble()) {
    const double x = a.toDouble(), y = b.toDouble();
    return std::memcmp(&x, &y, sizeof x) == 0;
  }
  if (a.isString() && b.isString()) return a.toStringRef() == b.toStringRef();
  return a.isSameIdentity(b);
}

std::vector<c10::IValue> items_of(const c10::IValue& v) {
  std::vector<c10::IValue> out;
  if (v.isTuple())
    for (const auto& e : v.toTupleRef().elements()) out.push_back(e);
  else
    for (const auto& e : v.toListRef()) out.push_back(e);
  return out;
}

}  // namespace

bool bitwise_equal(const c10::IValue& a, const c10::IValue& b) {
  if (a.isTensor() && b.isTensor()) {
    const at::Tensor& x = a.toTensor();
    const at::Tensor& y = b.toTensor();
    if (x.defined() != y.defined()) return false;
    if (!x.defined()) return true;
    if (x.scalar_type() != y.scalar_type() || x.sizes() != y.sizes()) return false;
    const at::Tensor cx = x.contiguous(), cy = y.contiguous();
    return std::memcmp(cx.data_ptr(), cy.data_ptr(), static_cast<size_t>(cx.numel()) * cx.element_size()) == 0;
  }
  if (a.isTuple() && b.isTuple()) {
    const auto& x = a.toTupleRef().elements();
    const auto& y = b.toTupleRef().elements();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!bitwise_equal(x[i], y[i])) return false;
    return true;
  }
  if (a.isList() && b.isList()) {
    const auto x = a.toListRef();
    const auto y = b.toListRef();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!bitwise_equal(x[i], y[i])) return false;
    return true;
  }
  if (a.isTensor() || b.isTensor() || a.isTuple() || b.isTuple() || a.isList() || b.isList()) return false;
  return same_scalar(a, b);
}

double max_abs_difference(const c10::IValue& a, const c10::IValue& b) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (a.isTensor() && b.isTensor()) {
    const at::Tensor& x = a.toTensor();
    const at::Tensor& y = b.toTensor();
    if (!x.defined() || !y.defined()) return x.defined() == y.defined() ? 0.0 : kInf;
    if (x.sizes() != y.sizes()) return kInf;
    if (x.numel() == 0) return 0.0;
    return (x.to(at::kDouble) - y.to(at::kDouble)).abs().max().item<double>();
  }
  auto seq = [&](const std::vector<c10::IValue>& x, const std::vector<c10::IValue>& y) {
    if (x.size() != y.size()) return kInf;
    double m = 0;
    for (size_t i = 0; i < x.size(); ++i) m = std::max(m, max_abs_difference(x[i], y[i]));
    return m;
  };
  if (a.isTuple() && b.isTuple()) return seq(items_of(a), items_of(b));
  if (a.isList() && b.isList()) return seq(items_of(a), items_of(b));
  return same_scalar(a, b) ? 0.0 : kInf;
}

}  // namespace fx::distributed
