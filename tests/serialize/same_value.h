#pragma once
// Bitwise equality of run-time values, for the round-trip checks (the
// GoogleTest cases and the zoo program, which does not link GoogleTest).
#include <ATen/ATen.h>

namespace fx::serialize_test {

/// Whether two run-time values are bitwise equal (tensors by at::equal,
/// through tuples and lists; NaNs in the same places count as equal).
inline bool same_value(const c10::IValue& a, const c10::IValue& b) {
  if (a.isTensor() && b.isTensor()) {
    const at::Tensor& x = a.toTensor();
    const at::Tensor& y = b.toTensor();
    if (x.sizes() != y.sizes() || x.scalar_type() != y.scalar_type()) return false;
    if (x.is_floating_point())
      return at::equal(x.isnan(), y.isnan()) && at::equal(x.masked_fill(x.isnan(), 0), y.masked_fill(y.isnan(), 0));
    return at::equal(x, y);
  }
  if (a.isTuple() && b.isTuple()) {
    const auto& x = a.toTupleRef().elements();
    const auto& y = b.toTupleRef().elements();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!same_value(x[i], y[i])) return false;
    return true;
  }
  if (a.isList() && b.isList()) {
    auto x = a.toListRef();
    auto y = b.toListRef();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!same_value(x[i], y[i])) return false;
    return true;
  }
  return a == b;
}

}  // namespace fx::serialize_test
