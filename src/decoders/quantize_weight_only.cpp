// quantize_weight_only (include/fx/decoders/quantize_weight_only.h): linear
// layers -> fxcpp::linear_weight_only, embedding tables ->
// fxcpp::embedding_weight_only, on weights packed once, here. A table whose
// weight is a quantized layer's (a tied lm_head) reads that layer's packed
// tensors: one copy for both, as the float model had.
#include <fx/decoders/quantize_weight_only.h>

#include "decoders/linear_layer.h"
#include "passes/graph_copy.h"

#include <fx/error.h>
#include <fx/safetensors.h>

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/embedding.h>

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fx {

namespace {

using Layer = decoders::detail::LinearLayer;
using decoders::detail::linear_layer_of;

bool name_matches(const std::string& name, const std::string& pattern) {
  return name == pattern || (name.size() > pattern.size() && name.compare(0, pattern.size(), pattern) == 0 &&
                             name[pattern.size()] == '.');
}

/// An embedding table of the graph: a call_module of an Embedding without max_norm (which renormalises the
/// table in place), or aten::embedding whose weight is a get_attr node.
struct EmbeddingLayer {
  std::string name;  ///< qualified name (module, or weight attribute without ".weight")
  Argument indices;
  at::Tensor weight;
};

std::optional<EmbeddingLayer> embedding_layer_of(const GraphModule& gm, const Node* n) {
  using decoders::detail::arg_of;
  if (n->op() == Opcode::CallModule) {
    auto m = gm.get_submodule(n->target());
    const auto* e = dynamic_cast<const torch::nn::EmbeddingImpl*>(m.get());
    if (!e || e->options.max_norm() || n->args().size() != 1 || !n->kwargs().empty() || e->weight.dim() != 2)
      return std::nullopt;
    return EmbeddingLayer{n->target(), n->args()[0], e->weight};
  }
  if (n->op() != Opcode::CallFunction || n->target() != "aten::embedding") return std::nullopt;
  const auto weight = arg_of(n, 0, "weight"), indices = arg_of(n, 1, "indices");
  if (!indices || !decoders::detail::is_get_attr(weight)) return std::nullopt;
  EmbeddingLayer l{decoders::detail::layer_name_of(weight->to_node()), *indices, gm.fetch_attr(weight->to_node()->target())};
  if (!l.weight.defined() || l.weight.dim() != 2) return std::nullopt;
  return l;
}

bool matches_any(const std::string& name, const Node* n, const std::vector<std::string>& patterns) {
  for (const auto& p : patterns)
    if (name_matches(name, p) || n->name() == p) return true;
  return false;
}

/// Whether the options choose the layer `name` of node `n` (`names`, when given, and not `skip`).
bool chosen_by(const WeightOnlyOptions& o, const std::string& name, const Node* n) {
  return (o.names.empty() || matches_any(name, n, o.names)) && !matches_any(name, n, o.skip);
}

int64_t bytes_of(const at::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.numel() * t.element_size()) : 0; }

}  // namespace

std::shared_ptr<GraphModule> quantize_weight_only(const std::shared_ptr<GraphModule>& gm,
                                                  const WeightOnlyOptions& options, WeightOnlyReport* report) {
  if (!gm) throw Error("quantize_weight_only: no module given");
  const auto& scheme = options.scheme;
  if (scheme.bits != 8 && scheme.bits != 4)
    throw Error("quantize_weight_only: bits must be 8 or 4, not " + std::to_string(scheme.bits));
  WeightOnlyReport r;
  r.kernel = decoders::weight_only_kernel(scheme.bits);
  // Pack every chosen layer before anything changes: a bad layer leaves nothing half done.
  struct Chosen {
    Layer layer;
    decoders::PackedWeightOnly packed;
  };
  std::unordered_map<const Node*, Chosen> chosen;
  // `weight` packed into `into` a block of rows at a time (about 8 MB of float32): a weight read from a
  // safetensors file lies in its mapping, which stays while any of the file's tensors lives, so each block's
  // pages, read once to pack it, go back before the next is read (read again if used again): the largest
  // weight (the head, the token table) is never resident whole.
  const auto pack_blocks = [&](const at::Tensor& weight, const decoders::PackedWeightOnly& into,
                               const std::string& what) {
    const int64_t rows = weight.size(0), block = std::max<int64_t>(1, (int64_t{8} << 20) / (4 * weight.size(1)));
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
      const int64_t c = std::min(block, rows - r0);
      decoders::PackedWeightOnly part = decoders::detail::packed_rows(into, r0, c);
      try {
        decoders::detail::pack_weight_only_into(weight.narrow(0, r0, c), part, r0);
      } catch (const Error& e) {
        throw Error("quantize_weight_only: " + what + ": " + e.what());
      }
      r.bytes_released += static_cast<int64_t>(release_mapped_pages(weight.narrow(0, r0, c)));
    }
  };
  // Siblings (layers reading one value: q / k / v, gate / up) are packed side by side into one buffer, in graph
  // order, so merge_projections stacks them without a copy (no second copy of the weights while it runs).
  std::vector<std::pair<const Node*, std::vector<std::pair<const Node*, Layer>>>> siblings;  // by input node
  for (const Node* n : gm->graph().nodes()) {
    auto l = linear_layer_of(*gm, n);
    if (!l) continue;
    if (!chosen_by(options, l->name, n)) {
      r.left.push_back(l->name + ": not chosen");
      continue;
    }
    const Node* input = l->input.is_node() ? l->input.to_node() : nullptr;
    auto group = std::find_if(siblings.begin(), siblings.end(), [&](const auto& s) {
      return input && s.first == input && s.second.front().second.weight.size(1) == l->weight.size(1);
    });
    if (group == siblings.end()) group = siblings.insert(siblings.end(), {input, {}});
    group->second.emplace_back(n, *l);
  }
  for (const auto& [input, members] : siblings) {
    (void)input;
    const Layer& first = members.front().second;
    int64_t rows = 0;
    for (const auto& m : members) rows += m.second.weight.size(0);
    decoders::PackedWeightOnly buffer;
    try {
      buffer = decoders::detail::empty_packed_weight_only(rows, first.weight.size(1), scheme);
    } catch (const Error& e) {
      throw Error("quantize_weight_only: layer " + first.name + ": " + e.what());
    }
    int64_t offset = 0;
    for (const auto& [n, l] : members) {
      const int64_t out = l.weight.size(0);
      pack_blocks(l.weight, decoders::detail::packed_rows(buffer, offset, out), "layer " + l.name);
      chosen.emplace(n, Chosen{l, decoders::detail::packed_rows(buffer, offset, out)});
      offset += out;
    }
  }
  // Embedding tables, packed as a linear layer's weight would be (rows are tokens). A table that is a chosen
  // layer's weight (tied to the head: one storage) takes that layer's packed tensors.
  struct Table {
    EmbeddingLayer table;
    decoders::PackedWeightOnly packed;
    std::string prefix;  ///< the packed tensors' attribute prefix (the layer's when shared)
    bool shared = false;
  };
  std::unordered_map<const Node*, Table> tables;
  for (const Node* n : gm->graph().nodes()) {
    auto e = options.embeddings ? embedding_layer_of(*gm, n) : std::nullopt;
    if (!e) continue;
    if (!chosen_by(options, e->name, n)) {
      r.left.push_back(e->name + ": not chosen");
      continue;
    }
    Table t{*e, {}, decoders::detail::kWeightOnlyRoot + e->name + ".", false};
    for (const auto& [ln, c] : chosen) {
      (void)ln;
      if (c.layer.weight.is_same(e->weight) ||
          (c.layer.weight.sizes() == e->weight.sizes() && c.layer.weight.strides() == e->weight.strides() &&
           c.layer.weight.data_ptr() == e->weight.data_ptr())) {
        t.packed = c.packed;
        t.prefix = decoders::detail::kWeightOnlyRoot + c.layer.name + ".";
        t.shared = true;
        break;
      }
    }
    if (!t.shared) {
      try {
        t.packed = decoders::detail::empty_packed_weight_only(e->weight.size(0), e->weight.size(1), scheme);
      } catch (const Error& err) {
        throw Error("quantize_weight_only: embedding " + e->name + ": " + err.what());
      }
      pack_blocks(e->weight, t.packed, "embedding " + e->name);
    }
    tables.emplace(n, std::move(t));
  }
  // The packed tensors are attributes of the new module (under _weight_only., named after the layer).
  auto out = std::make_shared<GraphModule>(gm, passes_detail::copy_graph(gm->graph()), gm->class_name());
  for (const auto& [n, t] : tables) {
    (void)n;
    if (t.shared) continue;
    out->register_attr(t.prefix + "data", t.packed.data);
    out->register_attr(t.prefix + "scales", t.packed.scales);
    if (t.packed.zeros.defined()) out->register_attr(t.prefix + "zeros", t.packed.zeros);
  }
  for (const auto& [n, c] : chosen) {
    const std::string prefix = decoders::detail::kWeightOnlyRoot + c.layer.name + ".";
    out->register_attr(prefix + "data", c.packed.data);
    out->register_attr(prefix + "scales", c.packed.scales);
    if (c.packed.zeros.defined()) out->register_attr(prefix + "zeros", c.packed.zeros);
    if (c.layer.bias.defined()) out->register_attr(prefix + "bias", c.layer.bias.detach());
  }
  // The graph again, each chosen layer one call under the layer's node name.
  auto g = std::make_shared<Graph>();
  std::unordered_map<Node*, Node*> env;
  auto mapped = [&](Node* in) -> Argument { return env.at(in); };
  for (Node* n : gm->graph().nodes()) {
    if (auto t = tables.find(n); t != tables.end()) {
      const Table& tb = t->second;
      Argument zeros = tb.packed.zeros.defined() ? Argument(g->get_attr(tb.prefix + "zeros")) : Argument();
      Node* e = g->create_node(Opcode::CallFunction, "fxcpp::embedding_weight_only",
                               {map_arg(tb.table.indices, mapped), g->get_attr(tb.prefix + "data"),
                                g->get_attr(tb.prefix + "scales"), zeros, int64_t{scheme.bits}, scheme.group_size,
                                tb.packed.in_features},
                               {}, n->name());
      e->meta() = n->meta();
      env[n] = e;
      ++r.embeddings;
      r.bytes_before += bytes_of(tb.table.weight);
      if (!tb.shared)
        r.bytes_after += bytes_of(tb.packed.data) + bytes_of(tb.packed.scales) + bytes_of(tb.packed.zeros);
      continue;
    }
    auto it = chosen.find(n);
    if (it == chosen.end()) {
      env[n] = g->node_copy(n, mapped);
      continue;
    }
    const Chosen& c = it->second;
    const std::string prefix = decoders::detail::kWeightOnlyRoot + c.layer.name + ".";
    Node* data = g->get_attr(prefix + "data");
    Node* scales = g->get_attr(prefix + "scales");
    Argument zeros = c.packed.zeros.defined() ? Argument(g->get_attr(prefix + "zeros")) : Argument();
    Argument bias = c.layer.bias.defined() ? Argument(g->get_attr(prefix + "bias")) : Argument();
    Node* q = g->create_node(Opcode::CallFunction, "fxcpp::linear_weight_only",
                             {map_arg(c.layer.input, mapped), data, scales, zeros, int64_t{scheme.bits},
                              scheme.group_size, c.packed.in_features, bias},
                             {}, n->name());
    q->meta() = n->meta();
    env[n] = q;
    ++r.layers;
    r.bytes_before += bytes_of(c.layer.weight);
    r.bytes_after += bytes_of(c.packed.data) + bytes_of(c.packed.scales) + bytes_of(c.packed.zeros);
  }
  g->eliminate_dead_code();  // the float weights of functional layers
  g->lint();
  out->set_graph(g);
  out->delete_all_unused_submodules();
  out->recompile();
  if (report) *report = r;
  return out;
}

}  // namespace fx
