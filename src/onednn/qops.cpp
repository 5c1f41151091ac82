// The dispatcher operators fxcpp::onednn_qconv2d / onednn_qlinear, their
// packed classes (torch.classes.fxcpp.PackedQConv / PackedQLinear) and what
// they are made of (PackedQState, pickled for torch.jit.save).
#include "onednn/qpacked_ops.h"

#include <fx/error.h>

#include <torch/library.h>

namespace fx::onednn {
namespace {

using detail::PackedQConv;
using detail::PackedQLinear;

at::Tensor qconv2d(const at::Tensor& input, const c10::intrusive_ptr<PackedQConv>& packed,
                   const c10::optional<at::Tensor>& residual) {
  return packed->run(input, residual);
}

at::Tensor qlinear(const at::Tensor& input, const c10::intrusive_ptr<PackedQLinear>& packed) {
  return packed->run(input);
}

detail::PackedQOp& packed_int8_op(const c10::IValue& packed, const char* what) {
  if (detail::PackedQOp* op = detail::find_packed_int8(packed)) return *op;
  throw Error(std::string(what) + ": not an int8 packed oneDNN operator");
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(fxcpp, m) {
  m.class_<PackedQConv>("PackedQConv")
      .def("__str__", &PackedQConv::str)
      .def_pickle([](const c10::intrusive_ptr<PackedQConv>& self) { return detail::pickled_int8(self->state()); },
                  [](detail::PickledQState state) {
                    return c10::make_intrusive<PackedQConv>(detail::unpickled_int8(state));
                  });
  m.class_<PackedQLinear>("PackedQLinear")
      .def("__str__", &PackedQLinear::str)
      .def_pickle([](const c10::intrusive_ptr<PackedQLinear>& self) { return detail::pickled_int8(self->state()); },
                  [](detail::PickledQState state) {
                    return c10::make_intrusive<PackedQLinear>(detail::unpickled_int8(state));
                  });
  m.def("onednn_qconv2d(Tensor input, __torch__.torch.classes.fxcpp.PackedQConv packed, Tensor? residual=None) -> Tensor",
        &qconv2d);
  m.def("onednn_qlinear(Tensor input, __torch__.torch.classes.fxcpp.PackedQLinear packed) -> Tensor", &qlinear);
}

c10::IValue pack_int8(const PackedQState& state) {
  if (state.kind == PackedState::Kind::Conv2d) return c10::IValue(c10::make_intrusive<PackedQConv>(state));
  return c10::IValue(c10::make_intrusive<PackedQLinear>(state));
}

bool is_packed_int8(const c10::IValue& value) { return detail::find_packed_int8(value) != nullptr; }

PackedQState packed_int8_state(const c10::IValue& packed) {
  return packed_int8_op(packed, "packed_int8_state").state();
}

std::string describe_int8(const c10::IValue& packed) { return packed_int8_op(packed, "describe_int8").str(); }

std::string int8_implementation(const c10::IValue& packed, at::IntArrayRef sizes) {
  return packed_int8_op(packed, "int8_implementation").implementation(sizes);
}

bool int8_computes_in_float(const c10::IValue& packed) {
  return packed_int8_op(packed, "int8_computes_in_float").computes_in_float();
}

namespace detail {

PackedQOp* find_packed_int8(const c10::IValue& packed) {
  if (packed.isCustomClass()) {
    if (packed.type() == c10::getCustomClassType<c10::intrusive_ptr<PackedQConv>>())
      return packed.toCustomClass<PackedQConv>().get();
    if (packed.type() == c10::getCustomClassType<c10::intrusive_ptr<PackedQLinear>>())
      return packed.toCustomClass<PackedQLinear>().get();
  }
  return nullptr;
}

PickledQState pickled_int8(const PackedQState& s) {
  std::vector<at::Tensor> tensors{s.weight, s.weight_scales};
  if (s.bias) tensors.push_back(*s.bias);
  std::vector<double> numbers;
  for (const auto* v : {&s.params.stride, &s.params.padding, &s.params.dilation})
    for (int64_t x : *v) numbers.push_back(static_cast<double>(x));
  numbers.insert(numbers.end(),
                 {static_cast<double>(s.params.groups), s.post_ops.alpha, s.post_ops.beta, s.post_ops.sum ? 1.0 : 0.0,
                  s.input.scale, static_cast<double>(s.input.zero_point), s.output.scale,
                  static_cast<double>(s.output.zero_point), s.residual.scale, static_cast<double>(s.residual.zero_point),
                  s.output_float ? 1.0 : 0.0});
  return {{s.kind == PackedState::Kind::Conv2d ? "qconv2d" : "qlinear", activation_name(s.post_ops.activation)},
          std::move(tensors), std::move(numbers)};
}

PackedQState unpickled_int8(const PickledQState& p) {
  const auto& [names, tensors, numbers] = p;
  if (names.size() != 2 || tensors.size() < 2 || tensors.size() > 3 || numbers.size() != 17)
    throw Error("int8 packed oneDNN operator: a pickled state of another form");
  PackedQState s;
  if (names[0] != "qconv2d" && names[0] != "qlinear")
    throw Error("int8 packed oneDNN operator: unknown op '" + names[0] + "'");
  s.kind = names[0] == "qconv2d" ? PackedState::Kind::Conv2d : PackedState::Kind::Linear;
  if (!activation_from_name(names[1], s.post_ops.activation))
    throw Error("int8 packed oneDNN operator: unknown activation '" + names[1] + "'");
  s.weight = tensors[0];
  s.weight_scales = tensors[1];
  if (tensors.size() == 3) s.bias = tensors[2];
  auto integer = [&](size_t i) { return static_cast<int64_t>(numbers[i]); };
  s.params.stride = {integer(0), integer(1)};
  s.params.padding = {integer(2), integer(3)};
  s.params.dilation = {integer(4), integer(5)};
  s.params.groups = integer(6);
  s.post_ops.alpha = static_cast<float>(numbers[7]);
  s.post_ops.beta = static_cast<float>(numbers[8]);
  s.post_ops.sum = numbers[9] != 0;
  s.input = {numbers[10], integer(11)};
  s.output = {numbers[12], integer(13)};
  s.residual = {numbers[14], integer(15)};
  s.output_float = numbers[16] != 0;
  return s;
}

}  // namespace detail
}  // namespace fx::onednn
