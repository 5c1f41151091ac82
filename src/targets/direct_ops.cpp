// ATen's generated entry points for common operators (see direct_ops.h).
#include "targets/direct_ops.h"

#include <ATen/Operators.h>

#include <unordered_map>

namespace fx::detail {

namespace {

template <class Fn>
Fn find(const std::unordered_map<std::string, Fn>& table, const std::string& name) {
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace

UnaryFn direct_unary(const std::string& name) {
  static const std::unordered_map<std::string, UnaryFn> table = {
      {"aten::relu", &at::_ops::relu::call},
      {"aten::neg", &at::_ops::neg::call},
      {"aten::sigmoid", &at::_ops::sigmoid::call},
      {"aten::tanh", &at::_ops::tanh::call},
      {"aten::exp", &at::_ops::exp::call},
      {"aten::log", &at::_ops::log::call},
      {"aten::abs", &at::_ops::abs::call},
      {"aten::sqrt", &at::_ops::sqrt::call},
      {"aten::rsqrt", &at::_ops::rsqrt::call},
      {"aten::sin", &at::_ops::sin::call},
      {"aten::cos", &at::_ops::cos::call},
      {"aten::reciprocal", &at::_ops::reciprocal::call},
      {"aten::floor", &at::_ops::floor::call},
      {"aten::ceil", &at::_ops::ceil::call},
      {"aten::sign", &at::_ops::sign::call},
      {"aten::silu", &at::_ops::silu::call},
      {"aten::erf", &at::_ops::erf::call},
      {"aten::t", &at::_ops::t::call},
  };
  return find(table, name);
}

BinaryFn direct_binary(const std::string& name) {
  static const std::unordered_map<std::string, BinaryFn> table = {
      {"aten::mul.Tensor", &at::_ops::mul_Tensor::call},
      {"aten::div.Tensor", &at::_ops::div_Tensor::call},
      {"aten::matmul", &at::_ops::matmul::call},
      {"aten::mm", &at::_ops::mm::call},
      {"aten::bmm", &at::_ops::bmm::call},
      {"aten::maximum", &at::_ops::maximum::call},
      {"aten::minimum", &at::_ops::minimum::call},
      {"aten::eq.Tensor", &at::_ops::eq_Tensor::call},
      {"aten::ne.Tensor", &at::_ops::ne_Tensor::call},
      {"aten::lt.Tensor", &at::_ops::lt_Tensor::call},
      {"aten::le.Tensor", &at::_ops::le_Tensor::call},
      {"aten::gt.Tensor", &at::_ops::gt_Tensor::call},
      {"aten::ge.Tensor", &at::_ops::ge_Tensor::call},
      {"aten::pow.Tensor_Tensor", &at::_ops::pow_Tensor_Tensor::call},
      {"aten::remainder.Tensor", &at::_ops::remainder_Tensor::call},
      {"aten::floor_divide", &at::_ops::floor_divide::call},
      {"aten::expand_as", &at::_ops::expand_as::call},
      {"aten::type_as", &at::_ops::type_as::call},
      {"aten::view_as", &at::_ops::view_as::call},
      {"aten::reshape_as", &at::_ops::reshape_as::call},
  };
  return find(table, name);
}

BinaryAlphaFn direct_binary_alpha(const std::string& name) {
  static const std::unordered_map<std::string, BinaryAlphaFn> table = {
      {"aten::add.Tensor", &at::_ops::add_Tensor::call},
      {"aten::sub.Tensor", &at::_ops::sub_Tensor::call},
      {"aten::rsub.Tensor", &at::_ops::rsub_Tensor::call},
  };
  return find(table, name);
}

ScalarFn direct_scalar(const std::string& name) {
  static const std::unordered_map<std::string, ScalarFn> table = {
      {"aten::mul.Scalar", &at::_ops::mul_Scalar::call},
      {"aten::div.Scalar", &at::_ops::div_Scalar::call},
      {"aten::pow.Tensor_Scalar", &at::_ops::pow_Tensor_Scalar::call},
      {"aten::eq.Scalar", &at::_ops::eq_Scalar::call},
      {"aten::ne.Scalar", &at::_ops::ne_Scalar::call},
      {"aten::lt.Scalar", &at::_ops::lt_Scalar::call},
      {"aten::le.Scalar", &at::_ops::le_Scalar::call},
      {"aten::gt.Scalar", &at::_ops::gt_Scalar::call},
      {"aten::ge.Scalar", &at::_ops::ge_Scalar::call},
      {"aten::remainder.Scalar", &at::_ops::remainder_Scalar::call},
      {"aten::fmod.Scalar", &at::_ops::fmod_Scalar::call},
      {"aten::leaky_relu", &at::_ops::leaky_relu::call},
  };
  return find(table, name);
}

TwoScalarsFn direct_two_scalars(const std::string& name) {
  static const std::unordered_map<std::string, TwoScalarsFn> table = {
      {"aten::add.Scalar", &at::_ops::add_Scalar::call},
      {"aten::sub.Scalar", &at::_ops::sub_Scalar::call},
      {"aten::rsub.Scalar", &at::_ops::rsub_Scalar::call},
      {"aten::hardtanh", &at::_ops::hardtanh::call},
      {"aten::threshold", &at::_ops::threshold::call},
  };
  return find(table, name);
}

}  // namespace fx::detail
