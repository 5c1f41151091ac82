// default_partition and the graph extraction both partitioners use
// (functorch 1.13 partitioners.py).
#include "aot/partition_util.h"

#include <fx/error.h>
#include <fx/tensor_meta.h>

#include <c10/core/ScalarType.h>

#include <algorithm>
#include <unordered_map>

namespace fx {
namespace aot_impl {

bool is_primal(const Node* n) {
  return n->op() == Opcode::Placeholder && n->target().find("tangents") == std::string::npos;
}

bool is_tangent(const Node* n) {
  return n->op() == Opcode::Placeholder && n->target().find("tangents") != std::string::npos;
}

void forward_backward_outputs(const JointGraph& joint, std::vector<Argument>& forward,
                              std::vector<Argument>& backward) {
  Node* out = joint.module->graph().output_node();
  if (out == nullptr || out->args().empty() || !out->args()[0].is_sequence())
    throw Error("aot: the joint graph must end in an output of one flat list");
  const auto& items = out->args()[0].items();
  if (joint.num_forward_outputs > items.size())
    throw Error("aot: the joint graph has " + std::to_string(items.size()) + " outputs, fewer than its " +
                std::to_string(joint.num_forward_outputs) + " forward outputs");
  forward.assign(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(joint.num_forward_outputs));
  backward.assign(items.begin() + static_cast<std::ptrdiff_t>(joint.num_forward_outputs), items.end());
}

std::shared_ptr<Graph> extract_graph(const Graph& joint, const std::vector<Node*>& inputs,
                                     const std::vector<Argument>& outputs,
                                     const std::function<bool(const Node*)>& skip) {
  auto g = std::make_shared<Graph>();
  // nullptr: the value cannot be computed from the inputs.
  std::unordered_map<const Node*, Node*> env;
  for (Node* in : inputs) {
    Node* ph = g->placeholder(in->name());
    ph->meta() = in->meta();
    env[in] = ph;
  }
  for (Node* n : joint.nodes()) {
    if (env.count(n)) continue;
    switch (n->op()) {
      case Opcode::Placeholder:
        env[n] = nullptr;
        break;
      case Opcode::CallFunction: {
        bool valid = !(skip && skip(n));
        for_each_node(n->args(), n->kwargs(), [&](Node* x) { valid = valid && env.at(x) != nullptr; });
        env[n] = valid ? g->node_copy(n, [&](Node* x) { return Argument(env.at(x)); }) : nullptr;
        break;
      }
      case Opcode::GetAttr:
        env[n] = g->node_copy(n);
        break;
      default:
        break;
    }
  }
  std::vector<Argument> outs;
  for (const Argument& a : outputs) {
    if (!a.is_node()) {
      outs.push_back(a);
      continue;
    }
    auto it = env.find(a.to_node());
    if (it == env.end() || it->second == nullptr)
      throw Error("aot: node " + a.to_node()->name() + " couldn't be computed from the partition's inputs");
    outs.emplace_back(it->second);
  }
  g->output(Argument::list(std::move(outs)));
  g->eliminate_dead_code();
  g->lint();
  return g;
}

std::unordered_set<std::string> forward_node_names(const JointGraph& joint) {
  std::vector<Argument> fwd, bwd;
  forward_backward_outputs(joint, fwd, bwd);
  std::vector<Node*> primals;
  for (Node* n : joint.module->graph().nodes())
    if (is_primal(n)) primals.push_back(n);
  std::shared_ptr<Graph> forward_only = extract_graph(joint.module->graph(), primals, fwd);
  std::unordered_set<std::string> names;
  for (Node* n : forward_only->nodes())
    if (n->op() != Opcode::Output) names.insert(n->name());
  return names;
}

PartitionedGraphs extract_forward_backward(const JointGraph& joint, std::vector<Node*> saved) {
  std::vector<Argument> fwd, bwd;
  forward_backward_outputs(joint, fwd, bwd);
  std::vector<Node*> primals, tangents;
  for (Node* n : joint.module->graph().nodes()) {
    if (is_primal(n)) primals.push_back(n);
    if (is_tangent(n)) tangents.push_back(n);
  }
  // A write that does not depend on the tangents happened in the forward
  // (dropout's bernoulli_, a buffer's copy_ back): the backward must not
  // repeat it, even where it could (its inputs saved).
  std::unordered_set<const Node*> after_tangents(tangents.begin(), tangents.end());
  for (Node* n : joint.module->graph().nodes()) {
    if (after_tangents.count(n))
      for (Node* u : n->users()) after_tangents.insert(u);
  }
  auto forward_write = [&](const Node* n) { return n->is_impure() && !after_tangents.count(n); };
  auto build = [&](std::shared_ptr<Graph>& fw, std::shared_ptr<Graph>& bw) {
    std::vector<Argument> fw_out = fwd;
    for (Node* s : saved) fw_out.emplace_back(s);
    std::vector<Node*> bw_in = saved;
    bw_in.insert(bw_in.end(), tangents.begin(), tangents.end());
    fw = extract_graph(joint.module->graph(), primals, fw_out);
    bw = extract_graph(joint.module->graph(), bw_in, bwd, forward_write);
  };
  std::shared_ptr<Graph> fw, bw;
  build(fw, bw);
  // Saved values the backward does not read are not saved after all.
  std::unordered_set<std::string> unused;
  for (Node* n : bw->nodes())
    if (n->op() == Opcode::Placeholder && n->users().empty()) unused.insert(n->name());
  saved.erase(std::remove_if(saved.begin(), saved.end(), [&](Node* s) { return unused.count(s->name()) > 0; }),
              saved.end());
  build(fw, bw);
  PartitionedGraphs out;
  const auto root = std::static_pointer_cast<torch::nn::Module>(joint.module);
  out.forward = std::make_shared<GraphModule>(root, fw);
  out.backward = std::make_shared<GraphModule>(root, bw);
  out.joint = joint.module;
  std::unordered_set<const Node*> from_tangents;
  for (Node* n : bw->nodes()) {
    if (n->op() == Opcode::Placeholder && is_tangent(n)) from_tangents.insert(n);
    if (from_tangents.count(n))
      for (Node* u : n->users()) from_tangents.insert(u);
  }
  for (Node* n : bw->nodes())
    if (n->op() == Opcode::CallFunction && !from_tangents.count(n)) out.recomputed.push_back(n->name());
  for (Node* s : saved) {
    out.saved.push_back(s->name());
    const auto bytes = static_cast<size_t>(tensor_bytes(s));
    out.saved_bytes += bytes;
    if (!is_primal_alias(s)) out.activation_bytes += bytes;
  }
  return out;
}

bool is_primal_alias(const Node* n) {
  static const std::unordered_set<std::string> views = {
      "aten::t", "aten::view", "aten::_reshape_alias", "aten::expand", "aten::permute", "aten::transpose.int",
      "aten::unsqueeze", "aten::squeeze.dim", "aten::select.int", "aten::slice.Tensor", "aten::detach", "aten::alias"};
  for (int depth = 0; depth < 64; ++depth) {
    if (is_primal(n)) return true;
    if (n->op() != Opcode::CallFunction || !views.count(n->target()) || n->args().empty() || !n->args()[0].is_node())
      return false;
    n = n->args()[0].to_node();
  }
  return false;
}

double tensor_bytes(const Node* n) {
  const TensorMetadata* m = tensor_meta_of(n);
  if (m == nullptr) return 0;
  double numel = 1;
  for (int64_t s : m->shape) numel *= static_cast<double>(s);
  return numel * static_cast<double>(c10::elementSize(m->dtype));
}

}  // namespace aot_impl

PartitionedGraphs default_partition(const JointGraph& joint) {
  using namespace aot_impl;
  const std::unordered_set<std::string> names = forward_node_names(joint);
  std::vector<Node*> saved;
  std::unordered_set<const Node*> seen;
  auto save = [&](Node* n) {
    if (seen.insert(n).second) saved.push_back(n);
  };
  for (Node* n : joint.module->graph().nodes()) {
    if (!names.count(n->name())) continue;
    // A tuple cannot be saved: its getitem users are.
    if (n->op() == Opcode::CallFunction && !n->meta().count("tensor_meta")) {
      bool all_getitem = true;
      for (Node* u : n->users()) all_getitem = all_getitem && u->target() == "operator.getitem";
      if (all_getitem && !n->users().empty()) {
        for (Node* u : n->users()) save(u);
        continue;
      }
    }
    save(n);
  }
  return extract_forward_backward(joint, std::move(saved));
}

}  // namespace fx
