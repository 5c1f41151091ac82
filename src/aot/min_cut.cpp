// min_cut_rematerialization_partition (functorch 1.13 partitioners.py): the
// values to save are a minimum cut between the primals and the backward.
//
// Every node becomes two vertices, node_in → node_out, joined by an edge as
// heavy as the node's output bytes (doubled when the node is not
// materialised anyway, biased towards nodes close to the backward); the
// source feeds the primals and every node that must not be recomputed, the
// backward's nodes drain to the sink. Cutting a node's edge means saving its
// output; everything upstream of a cut in backward is recomputed. The
// maximum flow is Boost.Graph's Boykov-Kolmogorov algorithm.
#include "aot/partition_util.h"
#include "aot/bool_masks.h"

#include <fx/error.h>
#include <fx/passes/cse.h>

// Boost.Graph 1.74's Boykov-Kolmogorov code trips gcc 12's -Wmaybe-uninitialized
// (edge descriptors of its search trees, set before use): a false positive in
// the library's headers, silenced for this file only (popped at its end).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>

#include <cmath>
#include <deque>
#include <unordered_map>

namespace fx {
namespace aot_impl {
namespace {

// functorch 1.13's recomputable_ops (for the nvfuser compiler, its default).
const std::unordered_set<std::string>& recomputable_ops() {
  static const std::unordered_set<std::string> ops = {
      "aten::add", "aten::sub", "aten::div", "aten::atan2", "aten::mul", "aten::max", "aten::min", "aten::pow",
      "aten::remainder", "aten::fmod", "aten::__and__", "aten::__or__", "aten::__xor__", "aten::__lshift__",
      "aten::__rshift__", "aten::eq", "aten::ne", "aten::ge", "aten::gt", "aten::le", "aten::lt", "aten::abs",
      "aten::bitwise_not", "aten::ceil", "aten::floor", "aten::frac", "aten::neg", "aten::relu", "aten::round",
      "aten::silu", "aten::trunc", "aten::log", "aten::log10", "aten::log1p", "aten::log2", "aten::lgamma",
      "aten::exp", "aten::expm1", "aten::erf", "aten::erfc", "aten::cos", "aten::acos", "aten::cosh", "aten::sin",
      "aten::asin", "aten::sinh", "aten::tan", "aten::atan", "aten::tanh", "aten::atanh", "aten::sqrt",
      "aten::rsqrt", "aten::reciprocal", "aten::sigmoid", "aten::softplus", "aten::threshold",
      "aten::threshold_backward", "aten::clamp", "aten::where", "aten::lerp", "aten::addcmul", "aten::gelu",
      "aten::gelu_backward", "aten::alias", "aten::softmax", "aten::_softmax", "aten::_softmax_backward_data",
      "aten::sum", "aten::mean", "aten::_grad_sum_to_size", "aten::sum_to_size", "aten::amax", "aten::to",
      "aten::type_as", "operator.getitem", "aten::squeeze", "aten::unsqueeze"};
  return ops;
}

// What the batch-norm recompute duplicates beyond functorch's list
// (recompute_batch_norm.cpp): more activations, and the per-channel views.
const std::unordered_set<std::string>& recompute_batch_norm_ops() {
  static const std::unordered_set<std::string> ops = {"aten::hardtanh", "aten::hardswish", "aten::leaky_relu",
                                                      "aten::elu", "aten::view"};
  return ops;
}

// Views, free to recompute (MinCutOptions::recompute_views; functorch 1.13
// recomputes only squeeze, unsqueeze and alias).
const std::unordered_set<std::string>& view_ops() {
  static const std::unordered_set<std::string> ops = {
      "aten::view",   "aten::_reshape_alias", "aten::_unsafe_view", "aten::reshape", "aten::t",
      "aten::transpose", "aten::permute",    "aten::expand",       "aten::slice",   "aten::select"};
  return ops;
}

// functorch 1.13's compute_intensive_ops: never recomputed unless a memory
// budget asks for it.
const std::unordered_set<std::string>& compute_intensive_ops() {
  static const std::unordered_set<std::string> ops = {"aten::mm", "aten::convolution", "aten::convolution_backward",
                                                      "aten::bmm", "aten::addmm", "aten::upsample_bilinear2d"};
  return ops;
}

const std::unordered_set<std::string>& random_ops() {
  static const std::unordered_set<std::string> ops = {"aten::native_dropout", "aten::rand_like", "aten::randn_like"};
  return ops;
}

// "aten::add.Tensor" → "aten::add" (functorch's get_aten_target: the overload packet).
std::string packet(const Node* n) {
  const std::string& t = n->target();
  const size_t colon = t.find("::");
  const size_t dot = t.find('.', colon == std::string::npos ? 0 : colon);
  return colon != std::string::npos && dot != std::string::npos ? t.substr(0, dot) : t;
}

bool has_meta(const Node* n) { return n->meta().count("tensor_meta") > 0; }

using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using FlowGraph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS, boost::no_property,
    boost::property<boost::edge_capacity_t, double,
                    boost::property<boost::edge_residual_capacity_t, double,
                                    boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;

class Network {
 public:
  explicit Network(size_t vertices) : g_(vertices) {}
  void edge(size_t u, size_t v, double capacity) {
    auto cap = boost::get(boost::edge_capacity, g_);
    auto rev = boost::get(boost::edge_reverse, g_);
    auto e = boost::add_edge(u, v, g_).first;
    auto r = boost::add_edge(v, u, g_).first;
    cap[e] = capacity;
    cap[r] = 0;
    rev[e] = r;
    rev[r] = e;
  }
  /// The maximum flow from s to t; then source_side() holds the vertices
  /// reachable from s in the residual graph.
  double max_flow(size_t s, size_t t) {
    const size_t n = boost::num_vertices(g_);
    std::vector<boost::default_color_type> color(n);
    std::vector<double> dist(n);
    std::vector<Traits::edge_descriptor> pred(n);
    auto index = boost::get(boost::vertex_index, g_);
    const double flow = boost::boykov_kolmogorov_max_flow(
        g_, boost::get(boost::edge_capacity, g_), boost::get(boost::edge_residual_capacity, g_),
        boost::get(boost::edge_reverse, g_), boost::make_iterator_property_map(pred.begin(), index),
        boost::make_iterator_property_map(color.begin(), index),
        boost::make_iterator_property_map(dist.begin(), index), index, s, t);
    auto residual = boost::get(boost::edge_residual_capacity, g_);
    reached_.assign(n, false);
    std::deque<size_t> queue{s};
    reached_[s] = true;
    while (!queue.empty()) {
      const size_t u = queue.front();
      queue.pop_front();
      for (auto [it, end] = boost::out_edges(u, g_); it != end; ++it) {
        const size_t v = boost::target(*it, g_);
        if (!reached_[v] && residual[*it] > 1e-9) {
          reached_[v] = true;
          queue.push_back(v);
        }
      }
    }
    return flow;
  }
  bool source_side(size_t v) const { return reached_[v]; }

 private:
  FlowGraph g_;
  std::vector<bool> reached_;
};

}  // namespace
}  // namespace aot_impl

namespace aot_impl {

/// One min cut of `original` under `options` (the budget is handled by the caller).
PartitionedGraphs min_cut(const JointGraph& original, const MinCutOptions& options) {
  // A private copy: CSE and dead-code elimination must not edit the caller's joint graph.
  auto g = std::make_shared<Graph>();
  {
    std::unordered_map<const Node*, Node*> map;
    std::optional<Argument> out = g->graph_copy(original.module->graph(), map);
    g->output(*out);
  }
  JointGraph joint{std::make_shared<GraphModule>(std::static_pointer_cast<torch::nn::Module>(original.module), g),
                   original.num_forward_outputs};
  joint.module->graph().eliminate_dead_code();
  CSEPass().call(joint.module);
  if (options.masks_as_bool) read_random_masks_as_bool(joint.module->graph());
  Graph& graph = joint.module->graph();

  // Classify: what the backward needs (tangents and all they reach), what the forward outputs need.
  std::unordered_set<const Node*> required_bw;
  auto classify_backward = [&] {
    required_bw.clear();
    for (Node* n : graph.nodes()) {
      if (is_tangent(n)) required_bw.insert(n);
      if (required_bw.count(n))
        for (Node* u : n->users()) required_bw.insert(u);
    }
  };
  classify_backward();
  if (options.recompute_batch_norm) {
    // The forward's own nodes keep the fused batch norm; every other use
    // (the backward, and what only the backward reads, such as autograd's
    // clone of a value an in-place activation overwrites) may recompute.
    const std::unordered_set<std::string> forward = forward_node_names(joint);
    std::unordered_set<const Node*> not_forward;
    for (Node* n : graph.nodes())
      if (!forward.count(n->name())) not_forward.insert(n);
    if (add_batch_norm_recompute(graph, not_forward) > 0) classify_backward();
  }
  const std::unordered_set<std::string> fw_names = forward_node_names(joint);
  std::unordered_set<const Node*> required_fw;
  for (Node* n : graph.nodes())
    if (fw_names.count(n->name())) required_fw.insert(n);

  std::vector<Node*> order;
  for (Node* n : graph.nodes()) order.push_back(n);
  std::unordered_map<const Node*, int64_t> dist_from_bw;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = *it;
    int64_t d = 0;
    if (required_fw.count(n)) {
      d = 1000000000;
      for (Node* u : n->users()) d = std::min(d, dist_from_bw[u] + 1);
    }
    dist_from_bw[n] = d;
  }

  auto recomputable = [&](const std::string& p) {
    return recomputable_ops().count(p) > 0 ||
           (options.recompute_batch_norm && recompute_batch_norm_ops().count(p) > 0) ||
           (options.recompute_views && view_ops().count(p) > 0) ||
           (options.recompute_compute_intensive && compute_intensive_ops().count(p) > 0);
  };
  // A copy of an input into another layout (AotOptions::memory_format's
  // clone of the image), when nothing writes that input back: the backward
  // may redo the copy from the input, which the caller holds anyway,
  // instead of the forward keeping the copy.
  auto layout_copy_of_input = [&](const Node* n) {
    if (!options.recompute_views || n->target() != "aten::clone" || n->args().size() != 1 || !n->args()[0].is_node())
      return false;
    const Node* x = n->args()[0].to_node();
    if (!is_primal(x)) return false;
    for (const Node* u : x->users())
      if (u->target() == "aten::copy_" && u->args()[0].is_node() && u->args()[0].to_node() == x) return false;
    return true;
  };
  auto ban_recomputation = [&](const Node* n) {
    if (n->op() != Opcode::CallFunction) return false;
    if (layout_copy_of_input(n)) return false;
    if (!recomputable(packet(n))) return true;
    if (n->target() == "operator.getitem") return false;
    if (!has_meta(n)) return false;
    double inputs = 0;
    for (const Argument& a : n->args())
      if (a.is_node()) inputs += tensor_bytes(a.to_node());
    return tensor_bytes(n) * 4 < inputs;
  };
  auto fusible = [&](const Node* n) {
    const std::string p = packet(n);
    return recomputable(p) || random_ops().count(p) > 0;
  };
  auto is_materialized = [&](const Node* n) {
    if (n->op() == Opcode::Placeholder) return true;
    for (Node* u : n->users())
      if (!(fusible(n) && fusible(u))) return true;
    return false;
  };

  // Vertices: 0 source, 1 sink, then node i's _in (2 + 2i) and _out (3 + 2i).
  std::unordered_map<const Node*, size_t> index;
  for (size_t i = 0; i < order.size(); ++i) index[order[i]] = i;
  double finite_total = 1;
  for (Node* n : order) finite_total += 2.2 * tensor_bytes(n) * std::pow(1.1, 100);
  const double inf = finite_total * 16;
  const size_t source = 0, sink = 1;
  auto in_v = [&](const Node* n) { return 2 + 2 * index.at(n); };
  auto out_v = [&](const Node* n) { return 3 + 2 * index.at(n); };
  Network net(2 + 2 * order.size());
  for (Node* n : order) {
    if (n->op() == Opcode::Output) continue;
    if (required_bw.count(n)) {
      net.edge(in_v(n), sink, inf);
      continue;
    }
    if (n->op() == Opcode::Placeholder && n->target().find("primals") != std::string::npos)
      net.edge(source, in_v(n), inf);
    if (ban_recomputation(n) && required_fw.count(n)) net.edge(source, in_v(n), inf);
    double weight = inf;
    if (options.recompute_batch_norm && is_primal_alias(n)) {
      weight = 0;  // a parameter or input, or a view of one: saving it keeps no memory alive
    } else if (has_meta(n)) {
      const double d = static_cast<double>(std::max<int64_t>(std::min<int64_t>(dist_from_bw[n], 100), 1));
      weight = std::floor(tensor_bytes(n) * std::pow(1.1, d));
      if (!is_materialized(n)) weight *= 2;
    }
    net.edge(in_v(n), out_v(n), weight);
    for (Node* u : n->users()) net.edge(out_v(n), in_v(u), inf);
  }
  const double cut = net.max_flow(source, sink);
  if (cut >= inf)
    throw Error("min_cut_rematerialization_partition: no finite cut: a value the backward needs has no tensor_meta");

  std::vector<Node*> saved;
  for (Node* n : order) {
    if (n->op() == Opcode::Output || required_bw.count(n)) continue;
    if (net.source_side(in_v(n)) && !net.source_side(out_v(n))) saved.push_back(n);
  }
  return extract_forward_backward(joint, std::move(saved));
}

}  // namespace aot_impl

PartitionedGraphs min_cut_rematerialization_partition(const JointGraph& joint) {
  MinCutOptions functorch;
  functorch.recompute_batch_norm = false;
  functorch.masks_as_bool = false;
  functorch.recompute_views = false;
  return aot_impl::min_cut(joint, functorch);
}

PartitionFn min_cut_partition(MinCutOptions options) {
  return [options](const JointGraph& joint) {
    if (!options.memory_budget) return aot_impl::min_cut(joint, options);
    // The least recomputation that fits: as asked, then with batch-norm
    // recompute, then recomputing convolutions and matrix products too.
    std::vector<MinCutOptions> tries{options};
    MinCutOptions more = options;
    more.recompute_batch_norm = true;
    tries.push_back(more);
    more.recompute_compute_intensive = true;
    tries.push_back(more);
    size_t best = 0;
    for (const MinCutOptions& o : tries) {
      PartitionedGraphs p = aot_impl::min_cut(joint, o);
      best = p.activation_bytes;
      if (best <= *options.memory_budget) return p;
    }
    throw Error("min_cut_partition: the backward needs at least " + std::to_string(best) +
                " bytes of saved activations, more than the memory budget of " +
                std::to_string(*options.memory_budget) + " bytes (recomputing everything recomputable)");
  };
}

}  // namespace fx

#pragma GCC diagnostic pop
