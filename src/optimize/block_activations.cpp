// block_activations: runs of oneDNN convolutions hand each other their
// activations in nChw8c below AVX-512 (see block_activations.h).
#include "optimize/block_activations.h"

#include <fx/tensor_meta.h>

#include <ATen/ops/empty.h>

#include <functional>
#include <unordered_map>
#include <unordered_set>

namespace fx::passes_detail {
namespace {

/// Output pixels from which a blocked convolution pays (28x28: resnet18's second stage; see the header).
constexpr int64_t kMinBlockedPixels = 28 * 28;

bool calls(const Node* n, const char* target) { return n->op() == Opcode::CallFunction && n->target() == target; }

/// The 4-d float value `n` makes, with channels a multiple of 8 (else null).
const TensorMetadata* blockable(const Node* n) {
  const TensorMetadata* m = tensor_meta_of(n);
  if (!m || m->dtype != at::kFloat || m->shape.size() != 4 || m->shape[1] % 8 != 0 || m->shape[1] == 0) return nullptr;
  return m;
}

/// Its input (args[0]), and its residual (args[2]) when it has one.
Node* input_of(const Node* n) {
  const ArgList& a = n->args();
  return !a.empty() && a[0].is_node() ? a[0].to_node() : nullptr;
}
Node* residual_of(const Node* n) {
  const ArgList& a = n->args();
  return a.size() > 2 && a[2].is_node() ? a[2].to_node() : nullptr;
}

/// A convolution or max pool this pass may rewrite: its arguments as lower_to_onednn makes them.
bool candidate(const Node* n) {
  const bool conv = calls(n, "fxcpp::onednn_conv2d");
  if (!conv && !calls(n, "fxcpp::max_pool2d")) return false;
  if (!n->kwargs().empty() || !input_of(n) || !blockable(n)) return false;
  return !conv || n->args().size() <= 3;
}

TensorMetadata meta_of_sizes(std::vector<int64_t> sizes, const TensorMetadata& like, at::MemoryFormat format) {
  return TensorMetadata::from_tensor(
      at::empty(sizes, at::TensorOptions().dtype(like.dtype).device(at::kMeta).memory_format(format)),
      like.requires_grad);
}

}  // namespace

size_t block_activations(Graph& g) {
  std::unordered_set<Node*> blocked;
  for (Node* n : g.nodes())
    if (candidate(n)) blocked.insert(n);
  // Unblock what reads an unblocked value, until nothing changes (the set only shrinks).
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = blocked.begin(); it != blocked.end();) {
      Node* n = *it;
      Node* x = input_of(n);
      bool ok = blocked.count(x) > 0;
      if (calls(n, "fxcpp::onednn_conv2d")) {
        const TensorMetadata* in = tensor_meta_of(x);
        ok = ok || (in && in->shape.size() == 4 && in->shape[1] < 8);
        Node* r = residual_of(n);
        ok = ok && (!r || blocked.count(r) > 0);
      }
      if (ok) {
        ++it;
      } else {
        it = blocked.erase(it);
        changed = true;
      }
    }
  }
  // Readers of a blocked value that take it blocked.
  auto reads_blocked = [&](const Node* user, const Node* v) {
    if (!blocked.count(const_cast<Node*>(user))) return false;
    return input_of(user) == v || residual_of(user) == v;
  };
  // Each run of blocked kernels (connected by blocked reads) stays only if
  // it pays: a convolution of it writes kMinBlockedPixels, and more values
  // cross from kernel to kernel blocked than leave it through
  // from_blocked (efficientnet_b0's stem and first depthwise convolution,
  // read back for the squeeze-excitation block, did not: 1.14x ORT's time at
  // batch 8 against 0.85x channels_last).
  std::unordered_map<Node*, Node*> parent;
  std::function<Node*(Node*)> root = [&](Node* n) { return parent[n] == n ? n : parent[n] = root(parent[n]); };
  for (Node* n : blocked) parent[n] = n;
  for (Node* n : blocked)
    for (Node* v : {input_of(n), residual_of(n)})
      if (v && blocked.count(v)) parent[root(n)] = root(v);
  struct Tally {
    size_t crossings = 0, exits = 0;
    bool pixels = false;
  };
  std::unordered_map<Node*, Tally> tally;
  for (Node* n : blocked) {
    Tally& t = tally[root(n)];
    bool exits = false;
    for (Node* u : n->users()) {
      if (reads_blocked(u, n)) ++t.crossings;
      else exits = true;
    }
    t.exits += exits;
    const std::vector<int64_t>& s = tensor_meta_of(n)->shape;
    t.pixels |= calls(n, "fxcpp::onednn_conv2d") && s[2] * s[3] >= kMinBlockedPixels;
  }
  for (auto it = blocked.begin(); it != blocked.end();) {
    const Tally& t = tally[root(*it)];
    if (t.pixels && t.crossings > t.exits) ++it;
    else it = blocked.erase(it);
  }
  size_t convs = 0;
  for (Node* n : blocked) convs += calls(n, "fxcpp::onednn_conv2d");
  if (convs == 0) return 0;

  for (Node* n : g.nodes().to_vector()) {
    if (!blocked.count(n)) continue;
    const TensorMetadata plain = *tensor_meta_of(n);
    if (calls(n, "fxcpp::onednn_conv2d")) {
      ArgList a = n->args();
      if (a.size() < 3) a.resize(3);  // residual None
      a.push_back(true);              // blocked=True
      n->set_args(std::move(a));
    }
    std::vector<int64_t> sizes = plain.shape;
    n->meta()["tensor_meta"] =
        meta_of_sizes({sizes[0], sizes[1] / 8, sizes[2], sizes[3], 8}, plain, at::MemoryFormat::Contiguous);
    bool others = false;
    for (Node* u : n->users()) others |= !reads_blocked(u, n);
    if (!others) continue;
    Node* back;
    {
      auto guard = g.inserting_after(n);
      back = g.call_function("fxcpp::from_blocked", {n});
    }
    back->meta()["tensor_meta"] = meta_of_sizes(plain.shape, plain, at::MemoryFormat::ChannelsLast);
    n->replace_all_uses_with(back, [&](Node* u) { return !reads_blocked(u, n); });
  }
  return convs;
}

}  // namespace fx::passes_detail
