// quantize_weight_only (include/fx/decoders/quantize_weight_only.h): linear
// layers -> fxcpp::linear_weight_only on weights packed once, here.
#include <fx/decoders/quantize_weight_only.h>

#include "decoders/linear_layer.h"
#include "passes/graph_copy.h"

#include <fx/error.h>
#include <fx/safetensors.h>

#include <ATen/core/Tensor.h>

#include <optional>
#include <unordered_map>

namespace fx {

namespace {

using Layer = decoders::detail::LinearLayer;
using decoders::detail::linear_layer_of;

bool name_matches(const std::string& name, const std::string& pattern) {
  return name == pattern || (name.size() > pattern.size() && name.compare(0, pattern.size(), pattern) == 0 &&
                             name[pattern.size()] == '.');
}

bool matches_any(const Layer& l, const Node* n, const std::vector<std::string>& patterns) {
  for (const auto& p : patterns)
    if (name_matches(l.name, p) || n->name() == p) return true;
  return false;
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
  for (const Node* n : gm->graph().nodes()) {
    auto l = linear_layer_of(*gm, n);
    if (!l) continue;
    if ((!options.names.empty() && !matches_any(*l, n, options.names)) || matches_any(*l, n, options.skip)) {
      r.left.push_back(l->name + ": not chosen");
      continue;
    }
    try {
      chosen.emplace(n, Chosen{*l, decoders::pack_weight_only(l->weight, scheme)});
    } catch (const Error& e) {
      throw Error("quantize_weight_only: layer " + l->name + ": " + e.what());
    }
    // A weight read from a safetensors file lies in its mapping, which stays while any of the
    // file's tensors lives: its pages, read once to pack it, go back (read again if used again).
    r.bytes_released += static_cast<int64_t>(release_mapped_pages(l->weight));
  }
  // The packed tensors are attributes of the new module (under _weight_only., named after the layer).
  auto out = std::make_shared<GraphModule>(gm, passes_detail::copy_graph(gm->graph()), gm->class_name());
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
