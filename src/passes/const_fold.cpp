// Constant folding: split_const_subgraphs and run_folding (see fx/passes/const_fold.h).
#include <fx/passes/const_fold.h>

#include <fx/error.h>
#include <fx/interpreter.h>
#include <fx/target.h>

#include "targets/registry.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <unordered_map>

namespace fx {
namespace {

constexpr const char* kConstFoldPass = "split_const_subgraphs";
constexpr const char* kBaseName = "_FX_CONST_FOLDED_ATTRS";

bool takes_generator(const c10::TypePtr& t) {
  if (t->kind() == c10::TypeKind::GeneratorType) return true;
  if (auto opt = t->cast<c10::OptionalType>()) return takes_generator(opt->getElementType());
  return false;
}

/// Whether the operator `name` ("aten::rand") is random: one of its
/// overloads is tagged nondeterministic_seeded or takes a Generator, or it
/// is a dropout.
bool is_random_operator(const std::string& name) {
  static std::mutex mutex;
  static std::unordered_map<std::string, bool> cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(name);
    if (it != cache.end()) return it->second;
  }
  bool random = name.find("dropout") != std::string::npos;
  if (!random) {
    auto& dispatcher = c10::Dispatcher::singleton();
    for (const auto& o : detail::dispatcher_overloads(name)) {
      auto op = dispatcher.findSchema(c10::OperatorName(name, o));
      if (!op || !op->hasSchema()) continue;
      if (op->hasTag(at::Tag::nondeterministic_seeded)) random = true;
      for (const auto& a : op->schema().arguments())
        if (takes_generator(a.type())) random = true;
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  cache[name] = random;
  return random;
}

/// A dropout whose `train` argument is the literal false: the identity.
bool is_eval_dropout(const Node& node, const std::string& op_name) {
  if (op_name.find("dropout") == std::string::npos) return false;
  const Argument* train = find_kwarg(node.kwargs(), "train");
  if (!train && node.args().size() > 2) train = &node.args()[2];
  return train && train->kind() == Argument::Kind::Bool && !train->to_bool();
}

/// Python's get_unique_attr_name_in_module over a module's direct attributes.
bool has_attr(torch::nn::Module& m, const std::string& name) {
  if (m.named_parameters(false).contains(name)) return true;
  if (m.named_buffers(false).contains(name)) return true;
  return m.named_children().contains(name);
}

std::string unique_attr_name(torch::nn::Module& m, std::string name) {
  while (has_attr(m, name)) {
    size_t us = name.rfind('_');
    bool numbered = us != std::string::npos && us + 1 < name.size() &&
                    std::all_of(name.begin() + us + 1, name.end(), [](char c) { return std::isdigit(c); });
    if (!numbered) {
      name += "_1";
    } else {
      name = name.substr(0, us + 1) + std::to_string(std::stoll(name.substr(us + 1)) + 1);
    }
  }
  return name;
}

/// Whether a value can be written as a literal Argument (no tensors inside).
bool literal_expressible(const c10::IValue& v) {
  if (v.isNone() || v.isBool() || v.isInt() || v.isDouble() || v.isString() || v.isDevice()) return true;
  if (v.isIntList() || v.isDoubleList() || v.isBoolList()) return true;
  return false;
}

/// Runs a graph and keeps the value of every node (by id).
class RecordingInterpreter : public Interpreter {
 public:
  explicit RecordingInterpreter(std::shared_ptr<GraphModule> gm)
      : Interpreter(std::move(gm), /*garbage_collect_values=*/false) {}
  c10::IValue run_node(Node* n) override {
    c10::IValue v = Interpreter::run_node(n);
    if (values.size() <= n->id()) values.resize(module().graph().max_node_id());
    values[n->id()] = v;
    return v;
  }
  std::vector<c10::IValue> values;
};

/// Marks the constant nodes (indexed by id) given the nodes excluded so far.
std::vector<char> find_const_nodes(const Graph& g, const SkipFoldingNodeFn& skip,
                                   const std::vector<char>& excluded) {
  std::vector<char> is_const(g.max_node_id(), 0);
  for (Node* n : g.nodes()) {
    if (n->op() == Opcode::Placeholder || n->op() == Opcode::Output) continue;
    if (excluded[n->id()]) continue;
    if (n->op() != Opcode::GetAttr) {
      bool all_const = true;
      for_each_node(n->args(), n->kwargs(), [&](Node* in) { all_const = all_const && is_const[in->id()]; });
      if (!all_const) continue;
    }
    if (skip && skip(*n)) continue;
    if (!is_foldable_operation(*n)) continue;
    is_const[n->id()] = 1;
  }
  return is_const;
}

/// A graph with copies of the nodes in `nodes` (program order); `copies`
/// maps each original to its copy.
std::shared_ptr<Graph> copy_nodes(const std::vector<Node*>& nodes, std::unordered_map<const Node*, Node*>& copies) {
  auto g = std::make_shared<Graph>();
  for (Node* n : nodes) copies[n] = g->node_copy(n, [&](Node* in) -> Argument { return copies.at(in); });
  return g;
}

}  // namespace

bool is_foldable_operation(const Node& node) {
  if (node.is_impure()) return false;
  switch (node.op()) {
    case Opcode::GetAttr: return true;
    case Opcode::CallFunction: {
      auto ref = detail::parse_operator_name(node.target());
      if (!ref || !is_random_operator(ref->name)) return true;
      return is_eval_dropout(node, ref->name);
    }
    case Opcode::CallMethod: {
      const std::string& m = node.target();
      if (!m.empty() && m.back() == '_') return false;
      return !is_random_operator("aten::" + m);
    }
    default: return false;
  }
}

ConstFoldResult split_const_subgraphs(std::shared_ptr<GraphModule> gm, const SkipFoldingNodeFn& skip) {
  if (!gm) throw Error(std::string(kConstFoldPass) + ": the GraphModule is null");
  ConstFoldResult result;
  result.pass_result = {gm, false};
  Graph& g = gm->graph();
  const size_t num_ids = g.max_node_id();
  std::vector<char> excluded(num_ids, 0);
  std::vector<char> is_const = find_const_nodes(g, skip, excluded);

  std::vector<Node*> const_nodes;
  bool found_call = false;
  for (Node* n : g.nodes())
    if (is_const[n->id()]) {
      const_nodes.push_back(n);
      found_call = found_call || n->op() != Opcode::GetAttr;
    }
  if (!found_call) return result;

  // Compute every constant once, on a copy: nothing of gm changes until
  // all values are known.
  std::vector<c10::IValue> values(num_ids);
  {
    std::unordered_map<const Node*, Node*> copies;
    auto cg = copy_nodes(const_nodes, copies);
    cg->output(Argument());
    auto cgm = std::make_shared<GraphModule>(gm, cg, "ConstSubgraph");
    RecordingInterpreter interp(cgm);
    try {
      interp.run({});
    } catch (const std::exception& e) {
      throw Error(std::string(kConstFoldPass) + ": computing a constant failed: " + e.what());
    }
    for (Node* n : const_nodes) {
      Node* c = copies.at(n);
      if (c->id() < interp.values.size()) values[n->id()] = interp.values[c->id()];
    }
  }

  // The boundary: constant calls that a non-constant node uses. A boundary
  // value that is neither a tensor nor a literal is not folded; its inputs
  // become the boundary instead (values are already known).
  std::vector<Node*> boundary;
  for (;;) {
    boundary.clear();
    bool again = false;
    for (Node* n : const_nodes) {
      if (!is_const[n->id()] || n->op() == Opcode::GetAttr) continue;
      bool used_outside = false;
      for (Node* u : n->users()) used_outside = used_outside || !is_const[u->id()];
      if (!used_outside) continue;
      const c10::IValue& v = values[n->id()];
      if (!v.isTensor() && !literal_expressible(v)) {
        excluded[n->id()] = 1;
        again = true;
        continue;
      }
      boundary.push_back(n);
    }
    if (!again) break;
    is_const = find_const_nodes(g, skip, excluded);
  }
  // Keep only the constants still marked.
  const_nodes.erase(std::remove_if(const_nodes.begin(), const_nodes.end(), [&](Node* n) { return !is_const[n->id()]; }),
                    const_nodes.end());
  if (boundary.empty()) return result;

  std::vector<Node*> tensor_boundary;
  for (Node* n : boundary)
    if (values[n->id()].isTensor()) tensor_boundary.push_back(n);

  // The constant subgraph that recomputes the attributes (for run_folding).
  std::string base;
  if (!tensor_boundary.empty()) {
    std::unordered_map<const Node*, Node*> copies;
    auto cg = copy_nodes(const_nodes, copies);
    std::vector<Argument> outs;
    for (Node* n : tensor_boundary) outs.push_back(copies.at(n));
    cg->output(Argument::tuple(outs));
    cg->eliminate_dead_code();
    result.const_subgraph_module = std::make_shared<GraphModule>(gm, cg, "ConstSubgraph");
    base = unique_attr_name(*gm, kBaseName);
    for (size_t i = 0; i < tensor_boundary.size(); ++i) {
      std::string name = tensor_boundary.size() == 1 ? base : base + "." + std::to_string(i);
      result.folded_attrs.push_back({name, tensor_boundary[i]->name()});
    }
  }
  for (Node* n : const_nodes)
    if (n->op() != Opcode::GetAttr) result.folded_nodes.push_back(n->name());

  // Edit: from here on nothing can fail.
  size_t attr_index = 0;
  for (Node* n : boundary) {
    const c10::IValue& v = values[n->id()];
    if (v.isTensor()) {
      const FoldedAttr& fa = result.folded_attrs[attr_index++];
      at::Tensor t = v.toTensor();
      bool grad = t.requires_grad();
      gm->register_attr(fa.name, t.detach().requires_grad_(grad));
      Node* attr;
      {
        auto guard = g.inserting_before(n);
        attr = g.get_attr(fa.name);
      }
      n->replace_all_uses_with(attr, [&](Node* u) { return !is_const[u->id()]; });
    } else {
      Argument lit = Argument::from_ivalue(v);
      result.inlined_nodes.push_back(n->name());
      for (Node* u : n->users().to_vector()) {
        if (is_const[u->id()]) continue;
        auto f = [&](Node* in) -> Argument { return in == n ? lit : Argument(in); };
        ArgList args = map_arg(u->args(), f);
        Kwargs kwargs = map_arg(u->kwargs(), f);
        u->set_args(std::move(args));
        u->set_kwargs(std::move(kwargs));
      }
    }
  }
  for (auto it = const_nodes.rbegin(); it != const_nodes.rend(); ++it)
    if ((*it)->users().empty()) g.erase_node(*it);
  g.lint();
  result.pass_result.modified = true;
  return result;
}

bool run_folding(const ConstFoldResult& result) {
  if (!result.const_subgraph_module || result.folded_attrs.empty()) return false;
  auto gm = result.pass_result.graph_module;
  if (!gm) throw Error("run_folding: the GraphModule is null");
  c10::IValue out;
  try {
    out = result.const_subgraph_module->forward(std::vector<c10::IValue>{});
  } catch (const std::exception& e) {
    throw Error(std::string("run_folding: computing a constant failed: ") + e.what());
  }
  const auto& elems = out.toTupleRef().elements();
  if (elems.size() != result.folded_attrs.size())
    throw Error("run_folding: the constant subgraph returned " + std::to_string(elems.size()) +
                " values for " + std::to_string(result.folded_attrs.size()) + " folded attributes");
  for (const auto& e : elems)
    if (!e.isTensor()) throw Error("run_folding: the constant subgraph returned a " + e.tagKind() + ", not a Tensor");
  for (size_t i = 0; i < elems.size(); ++i) {
    at::Tensor t = elems[i].toTensor();
    bool grad = t.requires_grad();
    gm->register_attr(result.folded_attrs[i].name, t.detach().requires_grad_(grad));
  }
  return true;
}

}  // namespace fx
