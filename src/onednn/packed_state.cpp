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
  // A bf16 kernel saved where oneDNN has bf16 kernels, loaded where it has
  // none (AVX2): a float32 kernel of the same (bf16-exact) weights, so the
  // model runs here instead of failing at its first forward.
  const bool bf16_here = state.dtype != c10::ScalarType::BFloat16 || has_bf16_kernels();
  const c10::ScalarType dtype = bf16_here ? state.dtype : c10::ScalarType::Float;
  c10::IValue packed = state.kind == PackedState::Kind::Conv2d
                           ? pack_conv2d(state.weight, state.bias, state.params, state.post_ops, dtype)
                           : pack_linear(state.weight, state.bias, state.post_ops, dtype);
  set_output_dtype(packed, bf16_here ? state.output_dtype : c10::ScalarType::Float);
  return packed;
}

namespace detail {

PickledState pickled(const PackedState& s) {
  std::vector<at::Tensor> tensors{s.weight};
  if (s.bias) tensors.push_back(*s.bias);
  std::vector<double> numbers;
  for (const auto* v : {&s.params.stride, &s.params.padding, &s.params.dilation})
    for (int64_t x : *v) numbers.push_back(static_cast<double>(x));
  numbers.insert(numbers.end(), {static_cast<double>(s.params.groups), s.post_ops.alpha, s.post_ops.beta,
                                 s.post_ops.sum ? 1.0 : 0.0, s.post_ops.residual_inplace ? 1.0 : 0.0,
                                 static_cast<double>(s.dtype), static_cast<double>(s.output_dtype)});
  if (s.params.winograd) numbers.push_back(1.0);  // a 14th number (states of old files have 13)
  return {{s.kind == PackedState::Kind::Conv2d ? "conv2d" : "linear", activation_name(s.post_ops.activation)},
          std::move(tensors), std::move(numbers)};
}

template <class Op>
c10::intrusive_ptr<Op> unpickled(PickledState p) {
  const auto& [names, tensors, numbers] = p;
  if (names.size() != 2 || tensors.empty() || tensors.size() > 2 || (numbers.size() != 13 && numbers.size() != 14))
    throw Error("packed oneDNN operator: a pickled state of another form");
  PackedState s;
  const std::string& op = names[0];
  if (op != "conv2d" && op != "linear") throw Error("packed oneDNN operator: unknown op '" + op + "'");
  s.kind = op == "conv2d" ? PackedState::Kind::Conv2d : PackedState::Kind::Linear;
  s.weight = tensors[0];
  if (tensors.size() == 2) s.bias = tensors[1];
  auto integer = [&](size_t i) { return static_cast<int64_t>(numbers[i]); };
  s.params.stride = {integer(0), integer(1)};
  s.params.padding = {integer(2), integer(3)};
  s.params.dilation = {integer(4), integer(5)};
  s.params.groups = integer(6);
  s.params.winograd = numbers.size() == 14 && numbers[13] != 0;
  if (!activation_from_name(names[1], s.post_ops.activation))
    throw Error("packed oneDNN operator: unknown activation '" + names[1] + "'");
  s.post_ops.alpha = static_cast<float>(numbers[7]);
  s.post_ops.beta = static_cast<float>(numbers[8]);
  s.post_ops.sum = numbers[9] != 0;
  s.post_ops.residual_inplace = numbers[10] != 0;
  auto dtype = [](int64_t v) {
    if (v != static_cast<int64_t>(c10::ScalarType::Float) && v != static_cast<int64_t>(c10::ScalarType::BFloat16))
      throw Error("packed oneDNN operator: dtype " + std::to_string(v) + " is not float32 or bfloat16");
    return static_cast<c10::ScalarType>(v);
  };
  s.dtype = dtype(integer(11));
  s.output_dtype = dtype(integer(12));
  c10::IValue packed = pack(s);
  if (!packed.isCustomClass() || packed.type() != c10::getCustomClassType<c10::intrusive_ptr<Op>>())
    throw Error("packed oneDNN operator: a " + op + " state for another class");
  return packed.toCustomClass<Op>();
}

template c10::intrusive_ptr<PackedConv> unpickled<PackedConv>(PickledState);
template c10::intrusive_ptr<PackedLinear> unpickled<PackedLinear>(PickledState);

}  // namespace detail

}  // namespace fx::onednn
