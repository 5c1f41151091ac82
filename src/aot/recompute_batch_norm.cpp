// Offer the backward a cheap way to recompute batch-norm outputs and the
// pointwise chain after them (activations, residual adds) from what it saves
// anyway: the idea of in-place activated batch norm (Rota Bulò et al., 2018).
//
// A training-mode aten::native_batch_norm's backward reads its input x (the
// convolution's output) and the batch statistics (mean, invstd: one value
// per channel). Its output y is
//     y = (x - mean) * invstd * weight + bias
// a handful of pointwise operators on x and per-channel vectors. This pass
// adds that decomposition, y', next to every such batch norm, copies the
// pointwise operators that follow y (relu, hardtanh, add ...) as duplicates
// reading y' (and each other), and points the backward's uses of y and of
// those operators at the duplicates. The forward still computes y with the
// fused kernel; the min cut then chooses, by bytes, between saving y and the
// activations (what functorch 1.13 saves) and recomputing them in backward
// from x, which the batch norm's backward needs anyway: for conv nets about
// half the activation memory.
#include "aot/partition_util.h"

#include <fx/tensor_meta.h>

#include <unordered_map>

namespace fx::aot_impl {
namespace {

/// Pointwise operators cheap to recompute whose duplicates may follow y'.
bool duplicable(const Node* n) {
  static const std::unordered_set<std::string> ops = {
      "aten::relu",  "aten::hardtanh", "aten::clamp",   "aten::add.Tensor", "aten::sigmoid", "aten::silu",
      "aten::gelu",  "aten::mul.Tensor", "aten::hardswish", "aten::leaky_relu", "aten::elu",  "aten::tanh"};
  return n->op() == Opcode::CallFunction && ops.count(n->target()) > 0 && n->meta().count("tensor_meta") > 0;
}

/// The getitem user of a tuple node taking element `i`, or nullptr.
Node* element(Node* tuple, int64_t i) {
  for (Node* u : tuple->users())
    if (u->target() == "operator.getitem" && u->args().size() == 2 && u->args()[1].to_int() == i) return u;
  return nullptr;
}

}  // namespace

size_t add_batch_norm_recompute(Graph& g, const std::unordered_set<const Node*>& backward) {
  std::vector<Node*> batch_norms;
  for (Node* n : g.nodes())
    if (n->target() == "aten::native_batch_norm" && n->args().size() >= 8 && n->args()[5].kind() == Argument::Kind::Bool &&
        n->args()[5].to_bool())
      batch_norms.push_back(n);
  std::unordered_map<const Node*, Node*> dup;  // forward node → its recomputable duplicate
  size_t added = 0;
  for (Node* bn : batch_norms) {
    Node* y = element(bn, 0);
    Node* mean = element(bn, 1);
    Node* invstd = element(bn, 2);
    const TensorMetadata* ym = y ? tensor_meta_of(y) : nullptr;
    if (y == nullptr || mean == nullptr || invstd == nullptr || ym == nullptr || ym->shape.size() < 2) continue;
    const Argument x = bn->args()[0], w = bn->args()[1], b = bn->args()[2];
    // Per-channel vectors viewed as [1, C, 1, ...] to broadcast over x.
    std::vector<Argument> shape(ym->shape.size(), Argument(int64_t{1}));
    shape[1] = Argument(ym->shape[1]);
    // Right after the last of y, mean and invstd.
    Node* after = bn;
    int seen = 0;
    for (Node* n = bn->next(); n != nullptr && seen < 3; n = n->next()) {
      if (n == y || n == mean || n == invstd) {
        after = n;
        ++seen;
      }
    }
    const TensorMetadata* mm = tensor_meta_of(mean);
    if (seen < 3 || mm == nullptr) continue;
    TensorMetadata vm = *mm;
    vm.shape.assign(ym->shape.size(), 1);
    vm.shape[1] = ym->shape[1];
    vm.stride.assign(vm.shape.size(), 1);
    Node* out;
    {
      auto guard = g.inserting_before(after->next());
      auto channel = [&](const Argument& v) {
        Node* view = g.call_function("aten::view", {v, Argument::list(shape)});
        view->meta()["tensor_meta"] = vm;
        return Argument(view);
      };
      auto pointwise = [&](const char* op, Argument a, Argument c) {
        Node* n = g.call_function(op, {std::move(a), std::move(c)});
        n->meta()["tensor_meta"] = *ym;
        return n;
      };
      out = pointwise("aten::mul.Tensor", Argument(pointwise("aten::sub.Tensor", x, channel(Argument(mean)))),
                      channel(Argument(invstd)));
      if (!w.is_none()) out = pointwise("aten::mul.Tensor", Argument(out), channel(w));
      if (!b.is_none()) out = pointwise("aten::add.Tensor", Argument(out), channel(b));
    }
    out->meta()["tensor_meta"] = *ym;
    added += 1;
    dup[y] = out;
  }
  if (dup.empty()) return 0;
  // Duplicate the pointwise chains that follow, in program order.
  for (Node* n : g.nodes()) {
    if (dup.count(n) || !duplicable(n) || backward.count(n)) continue;
    bool reads_dup = false;
    for_each_node(n->args(), n->kwargs(), [&](Node* in) { reads_dup = reads_dup || dup.count(in) > 0; });
    if (!reads_dup) continue;
    Node* copy;
    {
      auto guard = g.inserting_after(n);
      copy = g.node_copy(n, [&](Node* in) { return Argument(dup.count(in) ? dup.at(in) : in); });
    }
    dup[n] = copy;
  }
  // The backward reads the duplicates; the graph's outputs keep the fused
  // kernel's values (the output node is in no forward set: its forward
  // results would otherwise come from the decomposition, and differ from
  // eager's in the last bits).
  for (auto& [orig, copy] : dup) {
    std::vector<Node*> users(orig->users().begin(), orig->users().end());
    for (Node* u : users)
      if (backward.count(u) && u->op() != Opcode::Output) u->replace_input_with(const_cast<Node*>(orig), copy);
  }
  g.eliminate_dead_code();
  return added;
}

}  // namespace fx::aot_impl
