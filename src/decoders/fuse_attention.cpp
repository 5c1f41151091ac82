// fuse_attention (include/fx/decoders/passes.h): attention over a KV cache
// -> one fxcpp::decoder_attention node. Matched from its last matmul
// backwards, each step checked (operator, arguments, single use), so a
// graph that computes something else is left alone.
#include <fx/decoders/passes.h>

#include "decoders/pattern.h"

#include <cmath>
#include <optional>

namespace fx::decoders {

namespace {

using detail::is_call;
using detail::is_int;
using detail::is_number;
using detail::meta;

/// The node of `a` if it is a call of `target` used by nothing but the chain.
Node* single_use(const Argument& a, const char* target) { return detail::only_use(a, target); }

/// The cache a repeat_interleave(cache, r, 1) (used by the chain only) reads, or `a` itself when it is not one.
std::optional<Argument> unrepeated(const Argument& a) {
  if (!is_call(a, "aten::repeat_interleave.self_int")) return a;
  Node* n = a.to_node();
  if (n->users().size() != 1 || n->args().size() < 3 || !is_int(n->args()[2], 1)) return std::nullopt;
  return n->args()[0];
}

/// The softmax's scale: 1 / c of div.Scalar(x, c), c of mul.Scalar(x, c).
std::optional<double> scale_of(const Node* n) {
  if (n->args().size() != 2 || !n->kwargs().empty()) return std::nullopt;
  const Argument& c = n->args()[1];
  if (!is_number(c)) return std::nullopt;
  const double v = c.to_double();
  if (n->target() == "aten::div.Scalar") return v != 0 ? std::optional<double>(1.0 / v) : std::nullopt;
  return v;
}

struct Site {
  Argument q, k, v, mask;
  double scale;
};

/// The attention ending in `out` (matmul(probs, values)), or nullopt.
std::optional<Site> match(Node* out) {
  if (out->op() != Opcode::CallFunction || out->target() != "aten::matmul" || out->args().size() != 2) return {};
  Argument probs = out->args()[0];
  if (Node* to = single_use(probs, "aten::to.dtype")) {
    if (to->args().size() != 2 || !to->kwargs().empty() || to->args()[1].kind() != Argument::Kind::ScalarType ||
        to->args()[1].to_scalar_type() != at::kFloat)
      return {};
    probs = to->args()[0];
  }
  Node* softmax = single_use(probs, "aten::softmax.int");
  if (!softmax || softmax->args().size() < 2 || !is_int(softmax->args()[1], -1) || !softmax->kwargs().empty()) return {};
  if (softmax->args().size() == 3 && !softmax->args()[2].is_none() &&
      (softmax->args()[2].kind() != Argument::Kind::ScalarType || softmax->args()[2].to_scalar_type() != at::kFloat))
    return {};
  Node* fill = single_use(softmax->args()[0], "aten::masked_fill.Scalar");
  if (!fill || fill->args().size() != 3 || fill->args()[2].kind() != Argument::Kind::Double ||
      !(std::isinf(fill->args()[2].to_double()) && fill->args()[2].to_double() < 0))
    return {};
  const Argument mask = fill->args()[1];
  const TensorMetadata* m = meta(mask);
  if (!m || m->dtype != at::kBool || m->shape.size() != 2) return {};
  Node* scaled = single_use(fill->args()[0], "aten::div.Scalar");
  if (!scaled) scaled = single_use(fill->args()[0], "aten::mul.Scalar");
  const std::optional<double> scale = scaled ? scale_of(scaled) : std::nullopt;
  if (!scale) return {};
  Node* scores = single_use(scaled->args()[0], "aten::matmul");
  if (!scores || scores->args().size() != 2) return {};
  Node* kt = single_use(scores->args()[1], "aten::transpose.int");
  if (!kt || kt->args().size() != 3 ||
      !((is_int(kt->args()[1], 2) && is_int(kt->args()[2], 3)) || (is_int(kt->args()[1], -1) && is_int(kt->args()[2], -2)) ||
        (is_int(kt->args()[1], 3) && is_int(kt->args()[2], 2)) || (is_int(kt->args()[1], -2) && is_int(kt->args()[2], -1))))
    return {};
  const auto k = unrepeated(kt->args()[0]), v = unrepeated(out->args()[1]);
  if (!k || !v) return {};
  // Ranks 4 where known: [B, H, T, D] queries, [B, KV, S, D] caches.
  for (const Argument* a : {&scores->args()[0], &*k, &*v}) {
    const TensorMetadata* t = meta(*a);
    if (!t || t->shape.size() != 4 || t->dtype != at::kFloat) return {};
  }
  return Site{scores->args()[0], *k, *v, mask, *scale};
}

}  // namespace

size_t fuse_attention(GraphModule& gm) {
  return detail::replace_matches(gm, "fxcpp::decoder_attention", [](Node* n) -> std::optional<ArgList> {
    const auto site = match(n);
    if (!site) return std::nullopt;
    return ArgList{site->q, site->k, site->v, site->mask, site->scale};
  });
}

}  // namespace fx::decoders
