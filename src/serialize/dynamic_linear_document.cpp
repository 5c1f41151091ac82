// libtorch's packed dynamic linear layers (quantized::linear_dynamic's packed
// weights, made by fx::quantization::quantize_dynamic) as documents: fx::save
// stores the int8 weight (its integer values, a plain int8 tensor), its scales
// and zero points, and the float bias; fx::load quantizes and packs them
// again with quantized::linear_prepack on the onednn engine, so the loaded
// layer computes bit for bit what the saved one did. Every key is checked and
// unknown keys are refused.
#include "serialize/document.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/quantized/PackedParams.h>

#include <algorithm>
#include <set>

namespace fx::serialize_detail {
namespace {

const char* kPackedLinearClass = "__torch__.torch.classes.quantized.LinearPackedParamsBase";

/// quantized::linear_prepack on the onednn engine (then the engine that was current).
c10::IValue prepack_onednn(const at::Tensor& qweight, const c10::optional<at::Tensor>& bias) {
  at::Context& ctx = at::globalContext();
  const auto& engines = ctx.supportedQEngines();
  if (std::find(engines.begin(), engines.end(), at::QEngine::ONEDNN) == engines.end())
    throw Error("this libtorch has no onednn quantized engine");
  const at::QEngine previous = ctx.qEngine();
  ctx.setQEngine(at::QEngine::ONEDNN);
  try {
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("quantized::linear_prepack", "");
    torch::jit::Stack stack{qweight, bias ? c10::IValue(*bias) : c10::IValue()};
    op.callBoxed(&stack);
    ctx.setQEngine(previous);
    return stack.at(0);
  } catch (...) {
    ctx.setQEngine(previous);
    throw;
  }
}

}  // namespace

bool is_dynamic_linear_constant(const c10::IValue& value) {
  return value.isObject() && value.toObjectRef().type()->name() &&
         value.toObjectRef().type()->name()->qualifiedName() == kPackedLinearClass;
}

json dynamic_linear_to_json(const c10::IValue& packed, SaveContext& ctx, const std::string& where) {
  auto [w, bias] = packed.toCustomClass<LinearPackedParamsBase>()->unpack();
  const bool per_channel = w.qscheme() == at::kPerChannelAffine || w.qscheme() == at::kPerChannelSymmetric;
  if (w.scalar_type() != c10::kQInt8 || w.dim() != 2 || (!per_channel && w.qscheme() != at::kPerTensorAffine &&
                                                          w.qscheme() != at::kPerTensorSymmetric))
    throw Error(where + ": a packed dynamic linear layer with a " + c10::toString(w.scalar_type()) + " " +
                c10::toString(w.qscheme()) + " weight cannot be saved (qint8 per tensor or per channel only)");
  if (per_channel && w.q_per_channel_axis() != 0)
    throw Error(where + ": a packed dynamic linear layer quantized along axis " +
                std::to_string(w.q_per_channel_axis()) + " cannot be saved (axis 0 only)");
  at::Tensor scales = per_channel ? w.q_per_channel_scales().to(at::kDouble).contiguous()
                                  : at::full({1}, w.q_scale(), at::kDouble);
  at::Tensor zero_points = per_channel ? w.q_per_channel_zero_points().to(at::kLong).contiguous()
                                       : at::full({1}, w.q_zero_point(), at::kLong);
  return {{"weight", ctx.tensors.add(w.int_repr().contiguous(), where + " (int8 weight)")},
          {"per_channel", per_channel},
          {"scales", ctx.tensors.add(scales, where + " (weight scales)")},
          {"zero_points", ctx.tensors.add(zero_points, where + " (weight zero points)")},
          {"bias", bias ? json(ctx.tensors.add(bias->contiguous(), where + " (bias)")) : json()}};
}

c10::IValue dynamic_linear_from_json(const json& doc, LoadContext& ctx, const std::string& where_in) {
  const std::string where = where_in + ": dynamic linear layer";
  if (!doc.is_object()) bad_type(doc, "an object", where);
  const std::set<std::string> keys{"weight", "per_channel", "scales", "zero_points", "bias"};
  for (const auto& item : doc.items())
    if (!keys.count(item.key())) throw ImportError(where + ": unknown attribute '" + item.key() + "'");
  const at::Tensor w = ctx.tensors.get(field(doc, "weight", where), where + ": weight").contiguous();
  const bool per_channel = get_bool(doc, "per_channel", where);
  const at::Tensor scales = ctx.tensors.get(field(doc, "scales", where), where + ": scales");
  const at::Tensor zero_points = ctx.tensors.get(field(doc, "zero_points", where), where + ": zero_points");
  c10::optional<at::Tensor> bias;
  if (const json& b = field(doc, "bias", where); !b.is_null()) bias = ctx.tensors.get(b, where + ": bias");
  if (w.scalar_type() != at::kChar || w.dim() != 2)
    throw ImportError(where + ": weight must be a 2-d int8 tensor, got " + w.toString() + " of " +
                      std::to_string(w.dim()) + " dimensions");
  const int64_t channels = per_channel ? w.size(0) : 1;
  if (scales.scalar_type() != at::kDouble || scales.dim() != 1 || scales.size(0) != channels)
    throw ImportError(where + ": scales must be a float64 tensor of " + std::to_string(channels) + " elements");
  if (zero_points.scalar_type() != at::kLong || zero_points.dim() != 1 || zero_points.size(0) != channels)
    throw ImportError(where + ": zero_points must be an int64 tensor of " + std::to_string(channels) + " elements");
  if (bias && (bias->scalar_type() != at::kFloat || bias->dim() != 1 || bias->size(0) != w.size(0)))
    throw ImportError(where + ": bias must be a float32 tensor of " + std::to_string(w.size(0)) + " elements");
  if (!(scales > 0).all().item<bool>() || !scales.isfinite().all().item<bool>())
    throw ImportError(where + ": scales must be finite and positive");
  if ((zero_points < -128).any().item<bool>() || (zero_points > 127).any().item<bool>())
    throw ImportError(where + ": zero_points must be in [-128, 127]");
  try {
    at::Tensor qweight =
        per_channel ? at::_make_per_channel_quantized_tensor(w, scales, zero_points, 0)
                    : at::_make_per_tensor_quantized_tensor(w, scales.item<double>(), zero_points.item<int64_t>());
    return prepack_onednn(qweight, bias);
  } catch (const ImportError&) {
    throw;
  } catch (const std::exception& e) {
    throw ImportError(where + ": " + e.what());
  }
}

}  // namespace fx::serialize_detail
