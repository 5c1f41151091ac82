// The dispatcher operators fxcpp::onednn_conv2d / onednn_linear and their
// packed classes (torch.classes.fxcpp.PackedConv / PackedLinear).
#include "onednn/packed_ops.h"

#include <fx/error.h>

#include <torch/library.h>

namespace fx::onednn {
namespace {

using detail::PackedConv;
using detail::PackedLinear;

at::Tensor conv2d(const at::Tensor& input, const c10::intrusive_ptr<PackedConv>& packed,
                  const c10::optional<at::Tensor>& residual, bool blocked) {
  return packed->run(input, residual, blocked);
}

at::Tensor linear(const at::Tensor& input, const c10::intrusive_ptr<PackedLinear>& packed,
                  const c10::optional<at::Tensor>& residual) {
  return packed->run(input, residual);
}

}  // namespace

TORCH_LIBRARY(fxcpp, m) {
  m.class_<PackedConv>("PackedConv")
      .def("__str__", &PackedConv::str)
      .def_pickle([](const c10::intrusive_ptr<PackedConv>& self) { return detail::pickled(self->state()); },
                  [](detail::PickledState state) { return detail::unpickled<PackedConv>(std::move(state)); });
  m.class_<PackedLinear>("PackedLinear")
      .def("__str__", &PackedLinear::str)
      .def_pickle([](const c10::intrusive_ptr<PackedLinear>& self) { return detail::pickled(self->state()); },
                  [](detail::PickledState state) { return detail::unpickled<PackedLinear>(std::move(state)); });
  m.def("onednn_conv2d(Tensor input, __torch__.torch.classes.fxcpp.PackedConv packed, Tensor? residual=None, "
        "bool blocked=False) -> Tensor",
        &conv2d);
  m.def("onednn_matmul(Tensor self, Tensor other, bool transpose_out=False) -> Tensor", &detail::matmul);
  m.def("onednn_linear(Tensor input, __torch__.torch.classes.fxcpp.PackedLinear packed, Tensor? residual=None) -> Tensor",
        &linear);
}

void register_ops() {
  // TORCH_LIBRARY registered everything when this library was loaded; a
  // call here makes a program that uses only the packing API link it.
}

c10::IValue pack_conv2d(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, const ConvParams& params,
                        const PostOps& post_ops, c10::ScalarType dtype) {
  return c10::IValue(c10::make_intrusive<PackedConv>(weight, bias, params, post_ops, dtype));
}

c10::IValue pack_linear(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, const PostOps& post_ops,
                        c10::ScalarType dtype) {
  return c10::IValue(c10::make_intrusive<PackedLinear>(weight, bias, post_ops, dtype));
}

namespace detail {

PackedOp* find_packed_op(const c10::IValue& packed) {
  if (packed.isCustomClass()) {
    if (packed.type() == c10::getCustomClassType<c10::intrusive_ptr<PackedConv>>())
      return packed.toCustomClass<PackedConv>().get();
    if (packed.type() == c10::getCustomClassType<c10::intrusive_ptr<PackedLinear>>())
      return packed.toCustomClass<PackedLinear>().get();
  }
  return nullptr;
}

PackedOp& packed_op(const c10::IValue& packed, const char* what) {
  if (PackedOp* op = find_packed_op(packed)) return *op;
  throw Error(std::string(what) + ": not a packed oneDNN operator");
}

}  // namespace detail

using detail::packed_op;

size_t packed_bytes(const c10::IValue& packed) { return packed_op(packed, "packed_bytes").bytes(); }

void set_output_dtype(const c10::IValue& packed, c10::ScalarType dtype) {
  detail::check_dtype(dtype, "set_output_dtype");
  packed_op(packed, "set_output_dtype").set_output_dtype(dtype);
}

std::string describe(const c10::IValue& packed) { return packed_op(packed, "describe").str(); }

std::string implementation(const c10::IValue& packed, at::IntArrayRef sizes) {
  return packed_op(packed, "implementation").implementation(sizes);
}

}  // namespace fx::onednn
