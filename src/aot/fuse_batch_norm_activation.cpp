// fuse_batch_norm_activation: the backward's batch norms with their
// activations as fxcpp::batch_norm_apply / fxcpp::batch_norm_act_backward
// (batch_norm_activation_kernel.cpp has the kernels and why).
//
// Two rewrites, the first the forward's values to the bit, the second
// ATen's gradients to ~1e-6 (its sums are accumulated in double):
//  1. The batch-norm recomputation recompute_batch_norm leaves in the
//     backward (or any graph that normalises the same way),
//         add(mul(mul(sub(x, view(mean)), view(invstd)), view(w)), view(b))
//     optionally followed by add(·, residual) and relu / hardtanh, each the
//     only user of the one before, becomes one batch_norm_apply.
//  2. native_batch_norm_backward(threshold_backward(g, a, t), x, ...,
//     train=True) and the same with hardtanh_backward(g, a, lo, hi) (the
//     masked gradient used by nothing else) become one
//     batch_norm_act_backward, whose mask is the activation's test on `a`.
//     hardtanh_backward tests hardtanh's input; where that input feeds a
//     hardtanh with the same bounds, its output is tested instead (lo < y
//     < hi exactly when lo < clamp(y, lo, hi) < hi), so rewrite 1 can fold
//     the hardtanh into the batch norm.
#include <fx/aot.h>
#include <fx/tensor_meta.h>

#include <optional>
#include <string>
#include <vector>

namespace fx {
namespace {

bool is_call(const Node* n, const char* target) {
  return n != nullptr && n->op() == Opcode::CallFunction && n->target() == target && n->kwargs().empty();
}

Node* node_arg(const Node* n, size_t i) {
  return i < n->args().size() && n->args()[i].is_node() ? n->args()[i].to_node() : nullptr;
}

bool is_number(const Argument& a) { return a.kind() == Argument::Kind::Int || a.kind() == Argument::Kind::Double; }

/// The only user of `n`, or nullptr.
Node* only_user(const Node* n) { return n->users().size() == 1 ? *n->users().begin() : nullptr; }

/// `v` when it is aten::view(t, [1, C, 1, ...]) of a 1-d tensor t: t.
Node* channel_vector(Node* v) {
  if (!is_call(v, "aten::view") || v->args().size() != 2) return nullptr;
  Node* t = node_arg(v, 0);
  const std::optional<std::vector<int64_t>> shape = v->args()[1].to_int_list();
  const TensorMetadata* tm = t ? tensor_meta_of(t) : nullptr;
  if (t == nullptr || !shape || shape->size() < 2 || (tm && tm->shape.size() != 1)) return nullptr;
  for (size_t i = 0; i < shape->size(); ++i)
    if (i != 1 && (*shape)[i] != 1) return nullptr;
  return t;
}

/// The other operand of a binary `n` whose operand `self` is, when it is a channel vector.
Node* channel_operand(const Node* n, const Node* self, bool commutes) {
  if (n->args().size() != 2) return nullptr;
  if (node_arg(n, 0) == self) return channel_vector(node_arg(n, 1));
  if (commutes && node_arg(n, 1) == self) return channel_vector(node_arg(n, 0));
  return nullptr;
}

/// The bounds of relu / hardtanh node `n` as (lo, hi), or nullopt.
std::optional<std::pair<Argument, Argument>> activation_bounds(const Node* n) {
  if (is_call(n, "aten::relu") && n->args().size() == 1) return std::make_pair(Argument(0.0), Argument());
  if (is_call(n, "aten::hardtanh") && n->args().size() == 3 && is_number(n->args()[1]) && is_number(n->args()[2]))
    return std::make_pair(Argument(n->args()[1].to_double()), Argument(n->args()[2].to_double()));
  return std::nullopt;
}

/// Rewrite 1 from `sub` = sub(x, view(mean)); returns whether it rewrote.
bool fuse_apply(Graph& g, Node* sub) {
  if (!is_call(sub, "aten::sub.Tensor") || sub->args().size() != 2) return false;
  Node* x = node_arg(sub, 0);
  Node* mean = channel_vector(node_arg(sub, 1));
  if (x == nullptr || mean == nullptr) return false;
  std::vector<Node*> chain = {sub};
  Node* scaled = only_user(sub);
  Node* invstd = is_call(scaled, "aten::mul.Tensor") ? channel_operand(scaled, sub, true) : nullptr;
  if (invstd == nullptr) return false;
  chain.push_back(scaled);
  Argument weight, bias, residual, lo, hi;
  Node* end = scaled;
  if (Node* m = only_user(end); is_call(m, "aten::mul.Tensor"))
    if (Node* w = channel_operand(m, end, true)) {
      weight = Argument(w);
      chain.push_back(end = m);
    }
  if (Node* a = only_user(end); is_call(a, "aten::add.Tensor"))
    if (Node* b = channel_operand(a, end, true)) {
      bias = Argument(b);
      chain.push_back(end = a);
    }
  if (Node* a = only_user(end); is_call(a, "aten::add.Tensor") && a->args().size() == 2) {
    Node* other = node_arg(a, 0) == end ? node_arg(a, 1) : node_arg(a, 0);
    const TensorMetadata* om = other ? tensor_meta_of(other) : nullptr;
    const TensorMetadata* em = tensor_meta_of(end);
    if (other != nullptr && other != end && om && em && om->shape == em->shape && om->dtype == em->dtype) {
      residual = Argument(other);
      chain.push_back(end = a);
    }
  }
  if (Node* act = only_user(end))
    if (auto bounds = activation_bounds(act); bounds && node_arg(act, 0) == end) {
      std::tie(lo, hi) = *bounds;
      chain.push_back(end = act);
    }
  const TensorMetadata* em = tensor_meta_of(end);
  if (em == nullptr || (em->dtype != c10::kFloat && em->dtype != c10::kDouble)) return false;
  Node* fused;
  {
    auto guard = g.inserting_before(end);
    fused = g.call_function("fxcpp::batch_norm_apply",
                            {Argument(x), Argument(mean), Argument(invstd), weight, bias, residual, lo, hi});
  }
  fused->meta() = end->meta();
  end->replace_all_uses_with(fused);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) g.erase_node(*it);
  return true;
}

/// Rewrite 2 for `bn` = native_batch_norm_backward(...); returns whether it rewrote.
bool fuse_backward(Graph& g, Node* bn) {
  if (!is_call(bn, "aten::native_batch_norm_backward") || bn->args().size() != 10) return false;
  const ArgList& a = bn->args();
  if (a[7].kind() != Argument::Kind::Bool || !a[7].to_bool() || !a[5].is_node() || !a[6].is_node() ||
      !a[9].is_sequence() || a[9].items().size() != 3)
    return false;
  Node* mask = node_arg(bn, 0);
  if (mask == nullptr || only_user(mask) != bn) return false;
  Argument act, lo, hi;
  if (is_call(mask, "aten::threshold_backward") && mask->args().size() == 3 && is_number(mask->args()[2])) {
    act = mask->args()[1];
    lo = Argument(mask->args()[2].to_double());
  } else if (is_call(mask, "aten::hardtanh_backward") && mask->args().size() == 4 && is_number(mask->args()[2]) &&
             is_number(mask->args()[3])) {
    act = mask->args()[1];
    lo = Argument(mask->args()[2].to_double());
    hi = Argument(mask->args()[3].to_double());
    if (act.is_node())  // test hardtanh's output: its input may then be folded away
      for (Node* u : act.to_node()->users())
        if (auto bounds = activation_bounds(u); bounds && is_call(u, "aten::hardtanh") && node_arg(u, 0) == act.to_node() &&
                                                 bounds->first == lo && bounds->second == hi) {
          act = Argument(u);
          break;
        }
  } else {
    return false;
  }
  if (!act.is_node()) return false;
  for (const Argument& m : a[9].items())
    if (m.kind() != Argument::Kind::Bool) return false;
  Node* fused;
  {
    auto guard = g.inserting_before(bn);
    fused = g.call_function("fxcpp::batch_norm_act_backward",
                            {mask->args()[0], act, lo, hi, a[1], a[2], a[5], a[6], a[9]});
  }
  fused->meta() = bn->meta();
  bn->replace_all_uses_with(fused);
  g.erase_node(bn);
  g.erase_node(mask);
  return true;
}

}  // namespace

size_t fuse_batch_norm_activation(Graph& g, bool backward) {
  size_t fused = 0;
  std::vector<Node*> backwards, subs;
  for (Node* n : g.nodes()) {
    if (is_call(n, "aten::native_batch_norm_backward")) backwards.push_back(n);
    if (is_call(n, "aten::sub.Tensor")) subs.push_back(n);
  }
  if (backward)
    for (Node* n : backwards) fused += fuse_backward(g, n) ? 1 : 0;
  for (Node* n : subs) fused += fuse_apply(g, n) ? 1 : 0;
  g.eliminate_dead_code();
  return fused;
}

}  // namespace fx
