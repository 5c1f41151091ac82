// merge_projections (include/fx/decoders/passes.h): sibling linear layers
// reading one value — a decoder's q/k/v projections, its gate/up pair —
// become one GEMM over their weights stacked by output channel, each
// layer's output a narrow (a view) of the merged one.
//
// Why: decoding a token is one GEMV per layer, each reading its weights once
// (the bandwidth bound) plus a fixed cost per call (quantizing the
// activations, splitting the work among threads, the executor's dispatch):
// k and v of a grouped-query model are 8x smaller than q and spend most of
// their time on that fixed part. Merged, the activations are quantized once
// and the threads share one long product. The result is exact: each output
// channel's dot product reads the same weights in the same order (weight-only
// layers stack their packed rows, scales and zero points as they are; float
// layers stack their weights, so oneDNN may block the sum differently).
#include <fx/decoders/passes.h>
#include <fx/decoders/weight_only.h>

#include "decoders/linear_layer.h"
#include "passes/graph_copy.h"

#include <fx/error.h>
#include <fx/tensor_meta.h>

#include <ATen/ops/cat.h>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <tuple>
#include <vector>

namespace fx::decoders {

namespace {

/// A projection: a float linear layer, or an fxcpp::linear_weight_only node.
struct Projection {
  Node* node = nullptr;
  std::string name;  ///< the layer's qualified name ("model.layers.0.self_attn.q_proj")
  Node* input = nullptr;
  at::Tensor weight, bias;  ///< float: the weight [N, K]; either: the bias [N] or undefined
  at::Tensor data, scales, zeros;  ///< weight-only: the packed rows [N, ...], scales and zero points [N, groups]
  int64_t bits = 0, group_size = 0, in_features = 0;

  bool weight_only() const { return data.defined(); }
  int64_t out_features() const { return weight_only() ? data.size(0) : weight.size(0); }
  /// Layers merge when everything but their output channels agrees.
  auto key() const {
    const at::Tensor& w = weight_only() ? data : weight;
    return std::make_tuple(input, weight_only(), w.scalar_type(), in_features, bits, group_size, zeros.defined(),
                           bias.defined(), bias.defined() ? bias.scalar_type() : at::kFloat);
  }
};

/// The name a weight-only node's packed data attribute gives its layer (_weight_only.NAME.data), else the node's.
std::string weight_only_name(const Node* n, const Node* data) {
  const std::string t = data->target(), &head = detail::kWeightOnlyRoot, tail = ".data";
  if (t.size() > head.size() + tail.size() && t.compare(0, head.size(), head) == 0 &&
      t.compare(t.size() - tail.size(), tail.size(), tail) == 0)
    return t.substr(head.size(), t.size() - head.size() - tail.size());
  return n->name();
}

std::optional<Projection> projection_of(const GraphModule& gm, Node* n) {
  Projection p;
  p.node = n;
  if (n->op() == Opcode::CallFunction && n->target() == "fxcpp::linear_weight_only") {
    // (x, data, scales, zeros?, bits, group_size, in_features, bias?) as quantize_weight_only writes it.
    const ArgList& a = n->args();
    auto attr = [](const Argument& x) { return x.is_node() && x.to_node()->op() == Opcode::GetAttr; };
    if (a.size() != 8 || !n->kwargs().empty() || !a[0].is_node() || !attr(a[1]) || !attr(a[2]) ||
        !(a[3].is_none() || attr(a[3])) || a[4].kind() != Argument::Kind::Int || a[5].kind() != Argument::Kind::Int ||
        a[6].kind() != Argument::Kind::Int || !(a[7].is_none() || attr(a[7])))
      return std::nullopt;
    p.input = a[0].to_node();
    p.name = weight_only_name(n, a[1].to_node());
    p.data = gm.fetch_attr(a[1].to_node()->target());
    p.scales = gm.fetch_attr(a[2].to_node()->target());
    if (!a[3].is_none()) p.zeros = gm.fetch_attr(a[3].to_node()->target());
    p.bits = a[4].to_int();
    p.group_size = a[5].to_int();
    p.in_features = a[6].to_int();
    if (!a[7].is_none()) p.bias = gm.fetch_attr(a[7].to_node()->target());
    if (!p.data.defined() || p.data.dim() != 2 || !p.scales.defined() || p.scales.size(0) != p.data.size(0))
      return std::nullopt;
    return p;
  }
  const auto layer = detail::linear_layer_of(gm, n);
  if (!layer || !layer->input.is_node()) return std::nullopt;
  p.input = layer->input.to_node();
  p.name = layer->name;
  p.weight = layer->weight;
  p.bias = layer->bias;
  p.in_features = layer->weight.size(1);
  return p;
}

/// "model.layers.0.self_attn." + "q_proj_k_proj_v_proj": the members' common module and their own names.
std::string merged_name(const std::vector<Projection>& group) {
  std::string prefix = group.front().name;
  for (const Projection& p : group) {
    size_t i = 0;
    while (i < prefix.size() && i < p.name.size() && prefix[i] == p.name[i]) ++i;
    prefix.resize(i);
  }
  prefix.resize(prefix.rfind('.') == std::string::npos ? 0 : prefix.rfind('.') + 1);
  std::string joined;
  for (const Projection& p : group) joined += (joined.empty() ? "" : "_") + p.name.substr(prefix.size());
  for (char& c : joined)
    if (c == '.') c = '_';
  return prefix + joined;
}

/// True when `parts` lie one after the other in one storage, each contiguous: rows of one buffer, in order
/// (quantize_weight_only packs siblings so).
bool adjacent(const std::vector<at::Tensor>& parts) {
  for (size_t i = 0; i < parts.size(); ++i) {
    const at::Tensor& p = parts[i];
    if (!p.is_contiguous() || !p.has_storage() || !p.storage().is_alias_of(parts[0].storage()) ||
        p.sizes().slice(1) != parts[0].sizes().slice(1))
      return false;
    if (i > 0) {
      const at::Tensor& q = parts[i - 1];
      if (static_cast<const char*>(p.data_ptr()) != static_cast<const char*>(q.data_ptr()) + q.numel() * q.element_size())
        return false;
    }
  }
  return true;
}

at::Tensor stacked(const std::vector<Projection>& group, at::Tensor Projection::*member) {
  std::vector<at::Tensor> parts;
  int64_t rows = 0;
  for (const Projection& p : group) {
    parts.push_back((p.*member).detach());
    rows += parts.back().size(0);
  }
  if (adjacent(parts)) {  // already stacked in memory: a view of all of them, no copy
    std::vector<int64_t> sizes = parts.front().sizes().vec();
    sizes[0] = rows;
    return parts.front().as_strided(sizes, parts.front().strides(), parts.front().storage_offset());
  }
  if (member != &Projection::data) return at::cat(parts, 0).contiguous();
  // Packed weight-only rows: in memory a GEMV streams well (huge pages), as pack_weight_only's.
  std::vector<int64_t> sizes = parts.front().sizes().vec();
  sizes[0] = rows;
  at::Tensor out = detail::weight_stream_empty(sizes, parts.front().scalar_type());
  at::cat_out(out, parts, 0);
  return out;
}

/// The tensor_meta of `like` with its last dimension `n` (contiguous), or nothing.
void set_meta(Node* n, const Node* like, int64_t last, bool view_of_wider) {
  const TensorMetadata* m = tensor_meta_of(like);
  if (!m || m->shape.empty()) return;
  TensorMetadata t = *m;
  const int64_t own = t.shape.back();
  if (!view_of_wider) t.shape.back() = last;
  t.stride.assign(t.shape.size(), 1);
  const int64_t row = view_of_wider ? last : t.shape.back();
  for (int64_t d = static_cast<int64_t>(t.shape.size()) - 2, s = row; d >= 0; --d) {
    t.stride[d] = s;
    s *= t.shape[d];
  }
  t.memory_format = view_of_wider && own != last ? std::nullopt : std::optional(c10::MemoryFormat::Contiguous);
  n->meta()["tensor_meta"] = t;
}

}  // namespace

std::shared_ptr<GraphModule> merge_projections(const std::shared_ptr<GraphModule>& gm, size_t* merged,
                                               bool float_layers) {
  if (!gm) throw Error("merge_projections: no module given");
  // The groups, in graph order of their first member.
  std::vector<std::vector<Projection>> groups;
  {
    std::map<decltype(Projection().key()), size_t> index;
    for (Node* n : gm->graph().nodes()) {
      auto p = projection_of(*gm, n);
      if (!p || (!float_layers && !p->weight_only())) continue;
      auto [it, fresh] = index.emplace(p->key(), groups.size());
      if (fresh) groups.emplace_back();
      groups[it->second].push_back(*p);
    }
  }
  groups.erase(std::remove_if(groups.begin(), groups.end(), [](const auto& g) { return g.size() < 2; }), groups.end());
  if (merged) *merged = groups.size();
  if (groups.empty()) return gm;

  // The copy shares every tensor; the stacked weights are its new attributes.
  auto work = std::make_shared<GraphModule>(gm, passes_detail::copy_graph(gm->graph()), gm->class_name());
  Graph& g = work->graph();
  std::unordered_map<const Node*, Node*> copy_of;  // by name: the copy keeps every node's
  {
    std::unordered_map<std::string, Node*> by_name;
    for (Node* n : g.nodes()) by_name[n->name()] = n;
    for (Node* n : gm->graph().nodes()) copy_of[n] = by_name.at(n->name());
  }
  for (const auto& group : groups) {
    const Projection& first = group.front();
    const bool wo = first.weight_only();
    // A name the module already has (a layer called q_proj_k_proj_v_proj) is not overwritten: '_' until free.
    std::string name = merged_name(group);
    auto taken = [&](const std::string& n) {
      try {
        work->fetch_attr(wo ? detail::kWeightOnlyRoot + n + ".data" : n + ".weight");
        return true;
      } catch (const Error&) {
        return false;
      }
    };
    while (taken(name)) name += "_";
    const std::string attr = wo ? detail::kWeightOnlyRoot + name + "." : name + ".";
    Node* at_node = copy_of.at(first.node);
    Node* fused;
    {
      auto insert = g.inserting_before(at_node);
      Argument bias;
      if (first.bias.defined()) {
        work->register_attr(attr + "bias", stacked(group, &Projection::bias));
        bias = g.get_attr(attr + "bias");
      }
      Node* x = copy_of.at(first.input);
      if (wo) {
        work->register_attr(attr + "data", stacked(group, &Projection::data));
        work->register_attr(attr + "scales", stacked(group, &Projection::scales));
        Argument zeros;
        if (first.zeros.defined()) {
          work->register_attr(attr + "zeros", stacked(group, &Projection::zeros));
          zeros = g.get_attr(attr + "zeros");
        }
        Node* data = g.get_attr(attr + "data");
        Node* scales = g.get_attr(attr + "scales");
        fused = g.create_node(Opcode::CallFunction, "fxcpp::linear_weight_only",
                              {x, data, scales, zeros, first.bits, first.group_size, first.in_features, bias}, {}, name);
      } else {
        work->register_attr(attr + "weight", stacked(group, &Projection::weight));
        fused = g.create_node(Opcode::CallFunction, "aten::linear", {x, g.get_attr(attr + "weight"), bias}, {}, name);
      }
    }
    int64_t total = 0;
    for (const Projection& p : group) total += p.out_features();
    set_meta(fused, at_node, total, /*view_of_wider=*/false);
    int64_t offset = 0;
    for (const Projection& p : group) {
      Node* old = copy_of.at(p.node);
      Node* part;
      {
        auto insert = g.inserting_before(at_node);
        part = g.create_node(Opcode::CallFunction, "aten::narrow", {fused, int64_t{-1}, offset, p.out_features()}, {},
                             old->name() + "_part");
      }
      part->meta() = old->meta();
      set_meta(part, old, total, /*view_of_wider=*/true);
      old->replace_all_uses_with(part);
      offset += p.out_features();
    }
    for (const Projection& p : group) g.erase_node(copy_of.at(p.node));
  }
  g.eliminate_dead_code();  // the members' own weights
  g.lint();
  // A module of exactly what the graph reads: the members' weights go with the old one.
  auto out = std::make_shared<GraphModule>(work, work->graph_ptr(), gm->class_name());
  out->recompile();
  return out;
}

}  // namespace fx::decoders
