// The packed oneDNN operators of an optimised graph (fx::optimize_for_inference)
// as documents: fx::save stores what a packed operator is made of
// (fx::onednn::PackedState: the weights in torch's layout, not the blocked
// layout oneDNN chose for the saving CPU), fx::load makes the operator again
// (fx::onednn::pack), and its kernels and packed weights are made for the
// loading CPU at the first forward of each shape. Every key is checked and
// unknown keys are refused, so a hand-edited or damaged record is one error
// naming the node, never a kernel of other attributes. int8 operators
// (fx::onednn::PackedQState: ops "qconv2d" / "qlinear") keep their int8
// weight, per-channel weight scales and the quantization of input, output
// and residual.
#include "serialize/document.h"

#include <fx/onednn.h>
#include <fx/onednn_int8.h>

#include <set>

namespace fx::serialize_detail {
namespace {

using onednn::PackedState;

const char* kind_name(PackedState::Kind k) { return k == PackedState::Kind::Conv2d ? "conv2d" : "linear"; }

std::vector<int64_t> int_pair(const json& doc, const char* key, const std::string& where) {
  const json& a = get_array(doc, key, where);
  if (a.size() != 2) throw ImportError(where + ": " + key + " must have 2 integers, got " + std::to_string(a.size()));
  return {as_int(a[0], where + ": " + key), as_int(a[1], where + ": " + key)};
}

double number(const json& doc, const char* key, const std::string& where) {
  const json& v = field(doc, key, where);
  if (!v.is_number()) bad_type(v, "a number", where + ": " + key);
  return v.get<double>();
}

/// The activation, its alpha / beta and the sum flag of a packed operator's document.
onednn::PostOps post_ops(const json& doc, const std::string& where) {
  onednn::PostOps p;
  const std::string activation = get_string(doc, "activation", where);
  if (!onednn::activation_from_name(activation, p.activation))
    throw ImportError(where + ": unknown activation '" + activation + "'");
  p.alpha = static_cast<float>(number(doc, "alpha", where));
  p.beta = static_cast<float>(number(doc, "beta", where));
  p.sum = get_bool(doc, "sum", where);
  return p;
}

json qparams_json(const onednn::QuantParams& q) { return json::array({q.scale, q.zero_point}); }

onednn::QuantParams qparams(const json& doc, const char* key, const std::string& where) {
  const json& a = get_array(doc, key, where);
  if (a.size() != 2 || !a[0].is_number())
    throw ImportError(where + ": " + key + " must be [scale, zero_point]");
  return {a[0].get<double>(), as_int(a[1], where + ": " + key)};
}

json conv_params(const onednn::ConvParams& p) {
  json out = {{"stride", p.stride}, {"padding", p.padding}, {"dilation", p.dilation}, {"groups", p.groups}};
  if (p.winograd) out["winograd"] = true;  // absent: false (files before it have none)
  return out;
}

onednn::ConvParams conv_params(const json& doc, const std::string& where) {
  onednn::ConvParams p;
  p.stride = int_pair(doc, "stride", where);
  p.padding = int_pair(doc, "padding", where);
  p.dilation = int_pair(doc, "dilation", where);
  p.groups = get_int(doc, "groups", where);
  if (doc.contains("winograd")) p.winograd = get_bool(doc, "winograd", where);
  return p;
}

json int8_to_json(const c10::IValue& packed, SaveContext& ctx, const std::string& where) {
  const onednn::PackedQState s = onednn::packed_int8_state(packed);
  const bool conv = s.kind == PackedState::Kind::Conv2d;
  json out = {{"op", conv ? "qconv2d" : "qlinear"},
              {"weight", ctx.tensors.add(s.weight, where + " (int8 weight)")},
              {"weight_scales", ctx.tensors.add(s.weight_scales, where + " (weight scales)")},
              {"bias", s.bias ? json(ctx.tensors.add(*s.bias, where + " (packed bias)")) : json()},
              {"activation", onednn::activation_name(s.post_ops.activation)},
              {"alpha", s.post_ops.alpha},
              {"beta", s.post_ops.beta},
              {"sum", s.post_ops.sum},
              {"input", qparams_json(s.input)},
              {"output", qparams_json(s.output)},
              {"residual", qparams_json(s.residual)},
              {"output_float", s.output_float}};
  if (conv) out.update(conv_params(s.params));
  return out;
}

c10::IValue int8_from_json(const json& doc, LoadContext& ctx, const std::string& where, const std::string& op) {
  onednn::PackedQState s;
  std::set<std::string> keys = {"op",    "weight", "weight_scales", "bias",     "activation",  "alpha", "beta",
                                "sum",   "input",  "output",        "residual", "output_float"};
  s.kind = op == "qconv2d" ? PackedState::Kind::Conv2d : PackedState::Kind::Linear;
  if (s.kind == PackedState::Kind::Conv2d) keys.insert({"stride", "padding", "dilation", "groups"});
  for (const auto& item : doc.items())
    if (!keys.count(item.key())) throw ImportError(where + ": unknown attribute '" + item.key() + "' of " + op);
  s.weight = ctx.tensors.get(field(doc, "weight", where), where + ": weight");
  s.weight_scales = ctx.tensors.get(field(doc, "weight_scales", where), where + ": weight_scales");
  if (const json& bias = field(doc, "bias", where); !bias.is_null()) s.bias = ctx.tensors.get(bias, where + ": bias");
  s.post_ops = post_ops(doc, where);
  s.input = qparams(doc, "input", where);
  s.output = qparams(doc, "output", where);
  s.residual = qparams(doc, "residual", where);
  s.output_float = get_bool(doc, "output_float", where);
  if (s.kind == PackedState::Kind::Conv2d) s.params = conv_params(doc, where);
  try {
    return onednn::pack_int8(s);
  } catch (const Error& e) {
    throw ImportError(where + ": " + e.what());
  }
}

}  // namespace

bool is_packed_constant(const c10::IValue& value) { return onednn::is_packed(value) || onednn::is_packed_int8(value); }

json packed_to_json(const c10::IValue& packed, SaveContext& ctx, const std::string& where) {
  if (onednn::is_packed_int8(packed)) return int8_to_json(packed, ctx, where);
  const PackedState s = onednn::packed_state(packed);
  json out = {{"op", kind_name(s.kind)},
              {"weight", ctx.tensors.add(s.weight, where + " (packed weight)")},
              {"bias", s.bias ? json(ctx.tensors.add(*s.bias, where + " (packed bias)")) : json()},
              {"activation", onednn::activation_name(s.post_ops.activation)},
              {"alpha", s.post_ops.alpha},
              {"beta", s.post_ops.beta},
              {"sum", s.post_ops.sum},
              {"residual_inplace", s.post_ops.residual_inplace},
              {"dtype", dtype_name(s.dtype)},
              {"output_dtype", dtype_name(s.output_dtype)}};
  if (s.kind == PackedState::Kind::Conv2d) out.update(conv_params(s.params));
  return out;
}

c10::IValue packed_from_json(const json& doc, LoadContext& ctx, const std::string& where_in) {
  const std::string where = where_in + ": packed operator";
  if (!doc.is_object()) bad_type(doc, "an object", where);
  PackedState s;
  const std::string op = get_string(doc, "op", where);
  if (op == "qconv2d" || op == "qlinear") return int8_from_json(doc, ctx, where, op);
  std::set<std::string> keys = {"op", "weight", "bias", "activation", "alpha", "beta", "sum", "residual_inplace",
                                "dtype", "output_dtype"};
  if (op == "conv2d") {
    s.kind = PackedState::Kind::Conv2d;
    keys.insert({"stride", "padding", "dilation", "groups", "winograd"});
  } else if (op == "linear") {
    s.kind = PackedState::Kind::Linear;
  } else {
    throw ImportError(where + ": unknown op '" + op + "' (expected conv2d, linear, qconv2d or qlinear)");
  }
  for (const auto& item : doc.items())
    if (!keys.count(item.key())) throw ImportError(where + ": unknown attribute '" + item.key() + "' of " + op);
  s.weight = ctx.tensors.get(field(doc, "weight", where), where + ": weight");
  if (const json& bias = field(doc, "bias", where); !bias.is_null()) s.bias = ctx.tensors.get(bias, where + ": bias");
  s.post_ops = post_ops(doc, where);
  s.post_ops.residual_inplace = get_bool(doc, "residual_inplace", where);
  s.dtype = dtype_from_name(get_string(doc, "dtype", where), where + ": dtype");
  s.output_dtype = dtype_from_name(get_string(doc, "output_dtype", where), where + ": output_dtype");
  if (s.kind == PackedState::Kind::Conv2d) s.params = conv_params(doc, where);
  try {
    return onednn::pack(s);
  } catch (const ImportError&) {
    throw;
  } catch (const Error& e) {
    throw ImportError(where + ": " + e.what());
  }
}

}  // namespace fx::serialize_detail
