// CSEPass: merges identical pure nodes, in program order, in place.
//
// Walk the graph once. For each node that may be merged, look its
// (opcode, target, args, kwargs) up in a hash table of earlier nodes; on a
// hit, reroute its users to the earlier node and erase it. Because users
// are rerouted as we go, a later node's args already name representatives,
// so chains of duplicates collapse in one walk (O(nodes + uses)).
#include <fx/passes/cse.h>

#include "targets/registry.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstring>
#include <mutex>
#include <unordered_map>

namespace fx {

const std::unordered_set<std::string>& get_CSE_banned_ops() {
  static const std::unordered_set<std::string> ops = {
      // torch.fx rand_ops
      "aten::dropout", "aten::_fused_dropout", "aten::_standard_gamma", "aten::bernoulli", "aten::multinomial",
      "aten::native_dropout", "aten::normal", "aten::poisson", "aten::binomial", "aten::rrelu", "aten::rand_like",
      "aten::rand", "aten::randint", "aten::randn", "aten::randperm",
      // torch.fx inplace_ops
      "aten::add_", "aten::sub_", "aten::mul_", "aten::div_", "aten::pow_", "aten::lerp_", "aten::relu_",
      "aten::sigmoid_", "aten::tanh_"};
  return ops;
}

namespace {

/// "aten::add" for "aten::add.Tensor".
std::string base_name(const std::string& target) {
  auto ref = detail::parse_operator_name(target);
  return ref ? ref->name : target;
}

/// Facts about an operator's schemas (every overload, or the one named),
/// cached per target.
struct OpFacts {
  bool random = false;     // nondeterministic_seeded, or a Generator argument
  bool may_alias = false;  // some return aliases an input (views, in-place)
  bool known = false;      // a dispatcher operator
};

const OpFacts& op_facts(const std::string& target) {
  static std::mutex mutex;
  static std::unordered_map<std::string, OpFacts> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(target);
  if (it != cache.end()) return it->second;
  OpFacts f;
  for (const c10::OperatorHandle& op : detail::operator_overloads(target)) {
    f.known = true;
    if (op.hasTag(at::Tag::nondeterministic_seeded)) f.random = true;
    for (const auto& a : op.schema().arguments()) {
      auto t = a.type();
      if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
      if (t->kind() == c10::TypeKind::GeneratorType) f.random = true;
    }
    for (const auto& r : op.schema().returns())
      if (r.alias_info()) f.may_alias = true;
  }
  return cache.emplace(target, f).first->second;
}

/// The dispatcher operator a call_function / call_method node runs ("" if none).
std::string operator_of(const Node* n) {
  if (n->op() == Opcode::CallFunction) return n->target();
  if (n->op() == Opcode::CallMethod) return "aten::" + n->target();
  return "";
}

/// Whether running `n` may write to one of its inputs.
bool mutates_input(const Node* n) {
  switch (n->op()) {
    case Opcode::CallFunction:
    case Opcode::CallMethod: {
      std::string op = operator_of(n);
      std::string base = base_name(op);
      if (!base.empty() && base.back() == '_') return true;
      return n->op() == Opcode::CallFunction ? is_impure_function(n->target()) : is_impure_function(op);
    }
    case Opcode::CallModule: return true;  // a module may write to its input
    default: return false;
  }
}

/// Whether `n`'s value may share storage with one of its inputs.
bool may_alias_input(const Node* n) {
  switch (n->op()) {
    case Opcode::CallFunction: {
      if (detail::is_builtin(n->target())) return n->target() == "operator.getitem" || n->target() == "getattr";
      const OpFacts& f = op_facts(n->target());
      return !f.known || f.may_alias;  // registered functions: unknown, assume so
    }
    case Opcode::CallMethod: {
      const OpFacts& f = op_facts("aten::" + n->target());
      return !f.known || f.may_alias;  // size, to, contiguous ...: may return self
    }
    case Opcode::CallModule: return true;
    default: return false;
  }
}

/// Structural equality of arguments with floats compared bitwise.
bool same_arg(const Argument& a, const Argument& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Argument::Kind::Double: {
      double x = a.to_double(), y = b.to_double();
      return std::memcmp(&x, &y, sizeof x) == 0;
    }
    case Argument::Kind::List:
    case Argument::Kind::Tuple: {
      const auto &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!same_arg(x[i], y[i])) return false;
      return true;
    }
    case Argument::Kind::Dict: {
      const auto &x = a.dict_items(), &y = b.dict_items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (x[i].first != y[i].first || !same_arg(x[i].second, y[i].second)) return false;
      return true;
    }
    default: return a == b;
  }
}

void hash_combine(size_t& h, size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); }

size_t hash_arg(const Argument& a) {
  size_t h = static_cast<size_t>(a.kind());
  switch (a.kind()) {
    case Argument::Kind::Bool: hash_combine(h, a.to_bool()); break;
    case Argument::Kind::Int: hash_combine(h, std::hash<int64_t>()(a.to_int())); break;
    case Argument::Kind::Double: {
      double d = a.to_double();
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      hash_combine(h, std::hash<uint64_t>()(bits));
      break;
    }
    case Argument::Kind::String: hash_combine(h, std::hash<std::string>()(a.to_string())); break;
    case Argument::Kind::Node: hash_combine(h, std::hash<const void*>()(a.to_node())); break;
    case Argument::Kind::ScalarType: hash_combine(h, static_cast<size_t>(a.to_scalar_type())); break;
    case Argument::Kind::List:
    case Argument::Kind::Tuple:
      for (const auto& x : a.items()) hash_combine(h, hash_arg(x));
      break;
    case Argument::Kind::Dict:
      for (const auto& kv : a.dict_items()) {
        hash_combine(h, std::hash<std::string>()(kv.first));
        hash_combine(h, hash_arg(kv.second));
      }
      break;
    default: break;  // equal kinds collide; same_arg decides
  }
  return h;
}

size_t hash_node(const Node* n) {
  size_t h = std::hash<std::string>()(n->target());
  hash_combine(h, static_cast<size_t>(n->op()));
  for (const auto& a : n->args()) hash_combine(h, hash_arg(a));
  for (const auto& kv : n->kwargs()) {
    hash_combine(h, std::hash<std::string>()(kv.first));
    hash_combine(h, hash_arg(kv.second));
  }
  return h;
}

bool same_node(const Node* a, const Node* b) {
  if (a->op() != b->op() || a->target() != b->target() || a->args().size() != b->args().size() ||
      a->kwargs().size() != b->kwargs().size())
    return false;
  for (size_t i = 0; i < a->args().size(); ++i)
    if (!same_arg(a->args()[i], b->args()[i])) return false;
  for (size_t i = 0; i < a->kwargs().size(); ++i)
    if (a->kwargs()[i].first != b->kwargs()[i].first || !same_arg(a->kwargs()[i].second, b->kwargs()[i].second))
      return false;
  return true;
}

}  // namespace

bool is_random_function(const std::string& target) {
  if (get_CSE_banned_ops().count(base_name(target)) && base_name(target).back() != '_') return true;
  return op_facts(target).random;
}

CSEPass::CSEPass(std::unordered_set<std::string> banned_ops) : banned_ops_(std::move(banned_ops)) {}

PassResult CSEPass::call(std::shared_ptr<GraphModule> gm) {
  if (!gm) throw PassError("CSEPass: no module given");
  // Refuse a broken graph before the first edit; then each graph on its own.
  for_each_graph_module(*gm, [](GraphModule& m) { m.graph().lint(); });
  merged_ = 0;
  for_each_graph_module(*gm, [&](GraphModule& m) { merged_ += merge_duplicates(m.graph()); });
  return PassResult{gm, merged_ > 0};
}

size_t CSEPass::merge_duplicates(Graph& g) const {
  size_t merged = 0;

  // What a node's target allows, decided once per (opcode, target): the
  // schema look-ups behind it take locks and build strings.
  struct TargetFacts {
    bool mutates = false;
    bool may_alias = false;
    bool mergeable = false;
  };
  std::unordered_map<std::string, TargetFacts> facts_cache;
  auto facts = [&](const Node* n) -> const TargetFacts& {
    std::string key = std::to_string(static_cast<int>(n->op())) + n->target();
    auto it = facts_cache.find(key);
    if (it != facts_cache.end()) return it->second;
    TargetFacts f;
    f.mutates = mutates_input(n);
    f.may_alias = may_alias_input(n);
    switch (n->op()) {
      case Opcode::GetAttr: f.mergeable = true; break;
      case Opcode::CallFunction: {
        const std::string base = base_name(n->target());
        if (banned_ops_.count(n->target()) || banned_ops_.count(base) || f.mutates) break;
        if (detail::is_builtin(n->target())) {
          f.mergeable = true;
          break;
        }
        f.mergeable = !get_CSE_banned_ops().count(base) && !n->is_impure() && !is_random_function(n->target());
        break;
      }
      case Opcode::CallMethod: {
        std::string op = "aten::" + n->target();
        f.mergeable = !banned_ops_.count(op) && !get_CSE_banned_ops().count(op) && !f.mutates &&
                      !is_random_function(op);
        break;
      }
      default: break;  // placeholder, output, call_module
    }
    return facts_cache.emplace(std::move(key), f).first->second;
  };

  // Values that may be mutated: every input of a mutating node, and,
  // through nodes whose value may alias an input, what they were made from.
  std::vector<uint8_t> mutated(g.max_node_id(), 0);
  std::vector<Node*> work;
  for (Node* n : g.nodes())
    if (facts(n).mutates)
      for (Node* in : n->all_input_nodes()) work.push_back(in);
  while (!work.empty()) {
    Node* v = work.back();
    work.pop_back();
    if (mutated[v->id()]) continue;
    mutated[v->id()] = 1;
    if (facts(v).may_alias)
      for (Node* in : v->all_input_nodes()) work.push_back(in);
  }
  auto mergeable = [&](const Node* n) { return !mutated[n->id()] && facts(n).mergeable; };

  std::unordered_multimap<size_t, Node*> seen;
  seen.reserve(g.nodes().size());
  for (Node* n : g.nodes()) {
    if (!mergeable(n)) continue;
    size_t h = hash_node(n);
    Node* rep = nullptr;
    auto range = seen.equal_range(h);
    for (auto it = range.first; it != range.second && !rep; ++it)
      if (same_node(it->second, n)) rep = it->second;
    if (!rep) {
      seen.emplace(h, n);
      continue;
    }
    n->replace_all_uses_with(rep);
    g.erase_node(n);
    ++merged;
  }
  return merged;
}

}  // namespace fx
