// The packed oneDNN operators of an optimised graph (fx::optimize_for_inference)
// as documents: fx::save stores what a packed operator is made of
// (fx::onednn::PackedState: the weights in torch's layout, not the blocked
// layout oneDNN chose for the saving CPU), fx::load makes the operator again
// (fx::onednn::pack), and its kernels and packed weights are made for the
// loading CPU at the first forward of each shape. Every key is checked and
// unknown keys are refused, so a hand-edited or damaged record is one error
// naming the node, never a kernel of other attributes.
#include "serialize/document.h"

#include <fx/onednn.h>

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

}  // namespace

bool is_packed_constant(const c10::IValue& value) { return onednn::is_packed(value); }

json packed_to_json(const c10::IValue& packed, SaveContext& ctx, const std::string& where) {
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
  if (s.kind == PackedState::Kind::Conv2d) {
    out["stride"] = s.params.stride;
    out["padding"] = s.params.padding;
    out["dilation"] = s.params.dilation;
    out["groups"] = s.params.groups;
  }
  return out;
}

c10::IValue packed_from_json(const json& doc, LoadContext& ctx, const std::string& where_in) {
  const std::string where = where_in + ": packed operator";
  if (!doc.is_object()) bad_type(doc, "an object", where);
  PackedState s;
  const std::string op = get_string(doc, "op", where);
  std::set<std::string> keys = {"op", "weight", "bias", "activation", "alpha", "beta", "sum", "residual_inplace",
                                "dtype", "output_dtype"};
  if (op == "conv2d") {
    s.kind = PackedState::Kind::Conv2d;
    keys.insert({"stride", "padding", "dilation", "groups"});
  } else if (op == "linear") {
    s.kind = PackedState::Kind::Linear;
  } else {
    throw ImportError(where + ": unknown op '" + op + "' (expected conv2d or linear)");
  }
  for (const auto& item : doc.items())
    if (!keys.count(item.key())) throw ImportError(where + ": unknown attribute '" + item.key() + "' of " + op);
  s.weight = ctx.tensors.get(field(doc, "weight", where), where + ": weight");
  if (const json& bias = field(doc, "bias", where); !bias.is_null()) s.bias = ctx.tensors.get(bias, where + ": bias");
  const std::string activation = get_string(doc, "activation", where);
  if (!onednn::activation_from_name(activation, s.post_ops.activation))
    throw ImportError(where + ": unknown activation '" + activation + "'");
  s.post_ops.alpha = static_cast<float>(number(doc, "alpha", where));
  s.post_ops.beta = static_cast<float>(number(doc, "beta", where));
  s.post_ops.sum = get_bool(doc, "sum", where);
  s.post_ops.residual_inplace = get_bool(doc, "residual_inplace", where);
  s.dtype = dtype_from_name(get_string(doc, "dtype", where), where + ": dtype");
  s.output_dtype = dtype_from_name(get_string(doc, "output_dtype", where), where + ": output_dtype");
  if (s.kind == PackedState::Kind::Conv2d) {
    s.params.stride = int_pair(doc, "stride", where);
    s.params.padding = int_pair(doc, "padding", where);
    s.params.dilation = int_pair(doc, "dilation", where);
    s.params.groups = get_int(doc, "groups", where);
  }
  try {
    return onednn::pack(s);
  } catch (const ImportError&) {
    throw;
  } catch (const Error& e) {
    throw ImportError(where + ": " + e.what());
  }
}

}  // namespace fx::serialize_detail
