// What a packed operator is made of (fx::onednn::PackedState): read from a
// packed operator for fx::save, and made into one again at fx::load, where
// its kernels and packed weights are then made for the loading CPU.
#include "onednn/packed_ops.h"

#include <fx/error.h>

namespace fx::onednn {
namespace {

/// activation_name's names, by Activation value.
constexpr const char* kActivationNames[] = {"", "relu", "clip", "silu", "sigmoid", "hardswish", "gelu", "gelu_tanh",
                                            "tanh"};

}  // namespace

std::string activation_name(Activation a) { return kActivationNames[static_cast<int>(a)]; }

bool activation_from_name(const std::string& name, Activation& out) {
  for (size_t i = 0; i < std::size(kActivationNames); ++i) {
    if (name == kActivationNames[i]) {
      out = static_cast<Activation>(i);
      return true;
    }
  }
  return false;
}

bool is_packed(const c10::IValue& value) { return detail::find_packed_op(value) != nullptr; }

PackedState packed_state(const c10::IValue& packed) { return detail::packed_op(packed, "packed_state").state(); }

c10::IValue pack(const PackedState& state) {
  c10::IValue packed = state.kind == PackedState::Kind::Conv2d
                           ? pack_conv2d(state.weight, state.bias, state.params, state.post_ops, state.dtype)
                           : pack_linear(state.weight, state.bias, state.post_ops, state.dtype);
  set_output_dtype(packed, state.output_dtype);
  return packed;
}

namespace detail {

PickledState pickled(const PackedState& s) {
  return {s.kind == PackedState::Kind::Conv2d ? "conv2d" : "linear",
          s.weight,
          s.bias,
          s.params.stride,
          s.params.padding,
          s.params.dilation,
          s.params.groups,
          activation_name(s.post_ops.activation),
          s.post_ops.alpha,
          s.post_ops.beta,
          s.post_ops.sum,
          s.post_ops.residual_inplace,
          static_cast<int64_t>(s.dtype),
          static_cast<int64_t>(s.output_dtype)};
}

template <class Op>
c10::intrusive_ptr<Op> unpickled(PickledState p) {
  PackedState s;
  const std::string& op = std::get<0>(p);
  if (op != "conv2d" && op != "linear") throw Error("packed oneDNN operator: unknown op '" + op + "'");
  s.kind = op == "conv2d" ? PackedState::Kind::Conv2d : PackedState::Kind::Linear;
  s.weight = std::get<1>(p);
  s.bias = std::get<2>(p);
  s.params.stride = std::get<3>(p);
  s.params.padding = std::get<4>(p);
  s.params.dilation = std::get<5>(p);
  s.params.groups = std::get<6>(p);
  if (!activation_from_name(std::get<7>(p), s.post_ops.activation))
    throw Error("packed oneDNN operator: unknown activation '" + std::get<7>(p) + "'");
  s.post_ops.alpha = static_cast<float>(std::get<8>(p));
  s.post_ops.beta = static_cast<float>(std::get<9>(p));
  s.post_ops.sum = std::get<10>(p);
  s.post_ops.residual_inplace = std::get<11>(p);
  auto dtype = [](int64_t v) {
    if (v != static_cast<int64_t>(c10::ScalarType::Float) && v != static_cast<int64_t>(c10::ScalarType::BFloat16))
      throw Error("packed oneDNN operator: dtype " + std::to_string(v) + " is not float32 or bfloat16");
    return static_cast<c10::ScalarType>(v);
  };
  s.dtype = dtype(std::get<12>(p));
  s.output_dtype = dtype(std::get<13>(p));
  c10::IValue packed = pack(s);
  if (!packed.isCustomClass() || packed.type() != c10::getCustomClassType<c10::intrusive_ptr<Op>>())
    throw Error("packed oneDNN operator: a " + op + " state for another class");
  return packed.toCustomClass<Op>();
}

template c10::intrusive_ptr<PackedConv> unpickled<PackedConv>(PickledState);
template c10::intrusive_ptr<PackedLinear> unpickled<PackedLinear>(PickledState);

}  // namespace detail

}  // namespace fx::onednn
