#pragma once
// Internal: ATen's generated entry points (at::_ops::<op>::call) for common
// operators, by schema name. Calling them costs exactly what eager code
// (at::add ...) costs; OperatorCall uses them on its fastest path.

#include <ATen/core/Tensor.h>

#include <string>

namespace fx::detail {

using UnaryFn = at::Tensor (*)(const at::Tensor&);
using BinaryFn = at::Tensor (*)(const at::Tensor&, const at::Tensor&);
using BinaryAlphaFn = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const at::Scalar&);
using ScalarFn = at::Tensor (*)(const at::Tensor&, const at::Scalar&);
using TwoScalarsFn = at::Tensor (*)(const at::Tensor&, const at::Scalar&, const at::Scalar&);

/// The entry point for schema `name` ("aten::relu", "aten::add.Tensor") of
/// that signature, or nullptr if there is none in the table.
UnaryFn direct_unary(const std::string& name);
BinaryFn direct_binary(const std::string& name);
BinaryAlphaFn direct_binary_alpha(const std::string& name);
ScalarFn direct_scalar(const std::string& name);
TwoScalarsFn direct_two_scalars(const std::string& name);

}  // namespace fx::detail
