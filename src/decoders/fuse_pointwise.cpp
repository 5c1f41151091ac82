// fuse_rms_norm, fuse_rotary_embedding, fuse_silu_mul
// (include/fx/decoders/passes.h): HF's RMSNorm, rotary embedding and
// SiLU-gated product as one node each. Each match starts at the pattern's
// last node and checks every step (operator, constants, single use), so a
// graph computing something else is left as it is.
#include <fx/decoders/passes.h>

#include "decoders/pattern.h"

#include <optional>

namespace fx::decoders {

namespace {

using detail::is_call;
using detail::is_int;
using detail::is_number;
using detail::meta;
using detail::only_use;

bool is_number(const Argument& a, double v) { return is_number(a) && a.to_double() == v; }

bool is_float(const Argument& a) {
  const TensorMetadata* m = meta(a);
  return m && m->dtype == at::kFloat;
}

/// x itself for a no-op aten::to.dtype(x, float32) of a float32 x.
Argument without_float_cast(const Argument& a) {
  if (is_call(a, "aten::to.dtype") && a.to_node()->args().size() == 2 &&
      a.to_node()->args()[1].kind() == Argument::Kind::ScalarType &&
      a.to_node()->args()[1].to_scalar_type() == at::kFloat && is_float(a.to_node()->args()[0]))
    return a.to_node()->args()[0];
  return a;
}

/// weight * (x * rsqrt(mean(x^2, -1, keepdim) + eps)) [with HF's casts to float32 and back].
std::optional<ArgList> rms_norm_site(Node* n) {
  if (n->op() != Opcode::CallFunction || n->target() != "aten::mul.Tensor" || n->args().size() != 2 ||
      !n->kwargs().empty())
    return {};
  for (int w = 0; w < 2; ++w) {
    const Argument& weight = n->args()[w];
    if (!weight.is_node() || weight.to_node()->op() != Opcode::GetAttr) continue;
    Argument normed = n->args()[1 - w];
    if (is_call(normed, "aten::to.dtype") && normed.to_node()->users().size() == 1)
      normed = without_float_cast(normed);
    Node* mul = only_use(normed, "aten::mul.Tensor", 2);
    if (!mul) continue;
    for (int r = 0; r < 2; ++r) {
      Node* rsqrt = only_use(mul->args()[r], "aten::rsqrt", 1);
      if (!rsqrt) continue;
      const Argument x = mul->args()[1 - r];
      Node* add = only_use(rsqrt->args()[0], "aten::add.Scalar", 2);
      Node* mean = add ? only_use(add->args()[0], "aten::mean.dim", 3) : nullptr;
      if (!mean || !is_number(add->args()[1]))
        continue;
      const auto dims = mean->args()[1].to_int_list();
      if (!dims || dims->size() != 1 || (*dims)[0] != -1 || mean->args()[2].kind() != Argument::Kind::Bool ||
          !mean->args()[2].to_bool())
        continue;
      Node* pow = only_use(mean->args()[0], "aten::pow.Tensor_Scalar", 2);
      if (!pow || !is_number(pow->args()[1], 2) || !(pow->args()[0] == x)) continue;
      const TensorMetadata* wm = meta(weight);
      const TensorMetadata* xm = meta(x);
      if (!wm || !xm || wm->dtype != at::kFloat || xm->dtype != at::kFloat || wm->shape.size() != 1 ||
          xm->shape.empty() || wm->shape[0] != xm->shape.back())
        continue;
      return ArgList{without_float_cast(x), weight, add->args()[1].to_double()};
    }
  }
  return {};
}

/// x * cos + cat([-x[..., h:], x[..., :h]], -1) * sin (HF's apply_rotary_pos_emb with rotate_half).
std::optional<ArgList> rotary_site(Node* n) {
  if (n->op() != Opcode::CallFunction || n->target() != "aten::add.Tensor" || n->args().size() != 2 ||
      !n->kwargs().empty())
    return {};
  for (int a = 0; a < 2; ++a) {
    Node* direct = only_use(n->args()[a], "aten::mul.Tensor", 2);
    Node* rotated = only_use(n->args()[1 - a], "aten::mul.Tensor", 2);
    if (!direct || !rotated) continue;
    Node* cat = only_use(rotated->args()[0], "aten::cat", 2);
    if (!cat || !is_int(cat->args()[1], -1) || !cat->args()[0].is_sequence() || cat->args()[0].items().size() != 2)
      continue;
    Node* neg = only_use(cat->args()[0].items()[0], "aten::neg", 1);
    Node* low = only_use(cat->args()[0].items()[1], "aten::narrow", 4);
    Node* high = neg ? only_use(neg->args()[0], "aten::narrow", 4) : nullptr;
    if (!low || !high || !(low->args()[0] == high->args()[0])) continue;
    const Argument x = low->args()[0];
    const TensorMetadata* xm = meta(x);
    if (!xm || xm->dtype != at::kFloat || xm->shape.size() != 4 || xm->shape[3] % 2 != 0) continue;
    const int64_t half = xm->shape[3] / 2;
    auto narrows = [&](const Node* nr, int64_t start) {
      return (is_int(nr->args()[1], -1) || is_int(nr->args()[1], 3)) && is_int(nr->args()[2], start) &&
             is_int(nr->args()[3], half);
    };
    if (!narrows(high, half) || !narrows(low, 0)) continue;
    // direct = x * cos (either order); rotated's other factor is sin.
    Argument cos;
    if (direct->args()[0] == x)
      cos = direct->args()[1];
    else if (direct->args()[1] == x)
      cos = direct->args()[0];
    else
      continue;
    const Argument sin = rotated->args()[1];
    const TensorMetadata* cm = meta(cos);
    const TensorMetadata* sm = meta(sin);
    if (!cm || !sm || cm->dtype != at::kFloat || sm->dtype != at::kFloat || cm->shape.size() != 2 ||
        sm->shape != cm->shape || cm->shape[0] != xm->shape[2] || cm->shape[1] != xm->shape[3])
      continue;
    return ArgList{x, cos, sin};
  }
  return {};
}

/// silu(gate) * up, either order, of one shape.
std::optional<ArgList> silu_mul_site(Node* n) {
  if (n->op() != Opcode::CallFunction || n->target() != "aten::mul.Tensor" || n->args().size() != 2 ||
      !n->kwargs().empty())
    return {};
  for (int s = 0; s < 2; ++s) {
    Node* silu = only_use(n->args()[s], "aten::silu", 1);
    if (!silu) continue;
    const Argument gate = silu->args()[0], up = n->args()[1 - s];
    const TensorMetadata* gm = meta(gate);
    const TensorMetadata* um = meta(up);
    if (!gm || !um || gm->dtype != at::kFloat || um->dtype != at::kFloat || gm->shape != um->shape) continue;
    return ArgList{gate, up};
  }
  return {};
}

}  // namespace

size_t fuse_rms_norm(GraphModule& gm) { return detail::replace_matches(gm, "fxcpp::rms_norm", rms_norm_site); }

size_t fuse_rotary_embedding(GraphModule& gm) { return detail::replace_matches(gm, "fxcpp::rotary_embedding", rotary_site); }

size_t fuse_silu_mul(GraphModule& gm) { return detail::replace_matches(gm, "fxcpp::silu_mul", silu_mul_site); }

}  // namespace fx::decoders
