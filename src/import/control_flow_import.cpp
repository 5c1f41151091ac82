// Run-time control flow of a TorchScript graph kept as sub-GraphModules.
//
// A prim::If whose condition is only known at run time becomes a call_module
// of a CondModule (fx/control_flow.h) with one graph per branch; a prim::Loop
// whose trip count or condition is only known at run time becomes a
// WhileLoopModule with a body graph. Each graph takes what it uses from the
// code around it as explicit operands: the TorchScript values a block reads
// but does not define are its free values; the nodes of the enclosing graph
// those values hold (also inside import-time lists and tuples) become the
// call's operands and the graph's placeholders, in order of first use.
// A node of an enclosing graph reached otherwise (a module attribute that
// forward assigned, read by a function the block calls) becomes one more
// operand and placeholder when a node of the block first uses it (local()).
//
// A list or dict built at import time ([] before a loop) that a block changes
// (append, item assignment ...) is made a run-time value first
// (prim::ListConstruct / prim::DictConstruct), so the block's changes and the
// code after it see one and the same object, as in Python.
#include "import/importer.h"

#include "torchscript/jit_targets.h"
#include "import/source_position.h"

#include <fx/control_flow.h>
#include <fx/target.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <unordered_set>

namespace fx::import_detail {

namespace jit = torch::jit;

namespace {

// Whether `v` is defined inside one of `owner`'s blocks (at any depth).
bool defined_inside(const jit::Value* v, const jit::Node* owner) {
  const jit::Node* p = v->node();
  while (p) {
    if (p == owner) return true;
    const jit::Block* b = p->owningBlock();
    if (!b) return false;
    p = b->owningNode();
  }
  return false;
}

void collect_free(const jit::Block* block, const jit::Node* owner, std::vector<const jit::Value*>& out,
                  std::unordered_set<const jit::Value*>& seen) {
  auto use = [&](const jit::Value* v) {
    if (!defined_inside(v, owner) && seen.insert(v).second) out.push_back(v);
  };
  for (const jit::Node* m : block->nodes()) {
    for (const jit::Value* v : m->inputs()) use(v);
    for (const jit::Block* inner : m->blocks()) collect_free(inner, owner, out, seen);
  }
  for (const jit::Value* v : block->outputs()) use(v);
}

// Whether a node in `block` (at any depth) changes the list or dict `v` in
// place (append, extend, insert, pop, clear, item assignment ...).
bool mutated_inside(const jit::Block* block, const jit::Value* v) {
  for (const jit::Node* m : block->nodes()) {
    if (m->maybeOperator() && m->schema().is_mutable()) {
      for (size_t i = 0; i < m->inputs().size() && i < m->schema().arguments().size(); ++i)
        if (m->input(i) == v && m->schema().is_mutable({c10::SchemaArgType::input, i})) return true;
    }
    for (const jit::Block* inner : m->blocks())
      if (mutated_inside(inner, v)) return true;
  }
  return false;
}

void collect_nodes(const Val& v, std::vector<Node*>& out, std::unordered_set<const Node*>& seen) {
  switch (v.kind) {
    case Val::Kind::Symbolic:
      if (v.symbolic.is_node() && seen.insert(v.symbolic.to_node()).second) out.push_back(v.symbolic.to_node());
      return;
    case Val::Kind::List:
    case Val::Kind::Tuple:
      for (const Val& i : *v.items) collect_nodes(i, out, seen);
      return;
    case Val::Kind::Dict:
      for (const auto& kv : *v.entries) {
        collect_nodes(kv.first, out, seen);
        collect_nodes(kv.second, out, seen);
      }
      return;
    case Val::Kind::Object:
      for (const auto& field : *v.fields) collect_nodes(field.second, out, seen);
      return;
    default:
      return;
  }
}

// Whether a node in `block` (at any depth) sets an attribute of the object `v`.
bool attribute_set_inside(const jit::Block* block, const jit::Value* v) {
  for (const jit::Node* m : block->nodes()) {
    if (m->kind() == jit::prim::SetAttr && m->input(0) == v) return true;
    for (const jit::Block* inner : m->blocks())
      if (attribute_set_inside(inner, v)) return true;
  }
  return false;
}

// A placeholder name for a TorchScript value ("h.3" → "h", "5" → "v5").
std::string value_name(const jit::Value* v, const std::string& fallback) {
  std::string name = v->hasDebugName() ? v->debugName() : fallback;
  size_t dot = name.find('.');
  if (dot != std::string::npos) name = name.substr(0, dot);
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = fallback;
  return name;
}

// A target name part for a type: "Tensor", "int", "str_Tensor" (Dict[str, Tensor]).
std::string type_suffix(const c10::TypePtr& type) {
  std::string out;
  for (char c : type->annotation_str()) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += c;
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

// "prim::ListConstruct.Tensor" / "prim::DictConstruct.Dict_str_Tensor": a new
// list (items) or dict (key, value, key, value ...) of the given type, every
// call (they are mutable: never a shared constant).
std::string construct_target(const c10::TypePtr& type) {
  static std::mutex mutex;
  static std::unordered_set<std::string> registered;
  auto list = type->cast<c10::ListType>();
  const std::string target = list ? "prim::ListConstruct." + type_suffix(list->getElementType())
                                  : "prim::DictConstruct." + type_suffix(type);
  std::lock_guard<std::mutex> lock(mutex);
  if (registered.insert(target).second) register_construct_function(target, type);
  return target;
}

}  // namespace

std::string Importer::fresh_module_name(const std::string& stem) {
  for (;;) {
    std::string name = stem + "_" + std::to_string(next_module_index_[stem]++);
    if (!root_.type()->hasAttribute(name) && !root_.type()->findMethod(name)) return name;
  }
}

Node* Importer::materialize(const jit::Value* v, Frame& f, const jit::Node* user) {
  unfreeze(v, f);  // a constant list or dict: an aggregate of constants first
  const Val aggregate = value(v, f, user);
  if (!v->type()->cast<c10::ListType>() && !v->type()->cast<c10::DictType>())
    fail(user, f, "a " + v->type()->repr_str() + " built before it is changed inside run-time control flow");
  ArgList items;
  if (aggregate.kind == Val::Kind::List) {
    for (const Val& i : *aggregate.items) items.push_back(to_argument(i, user, f));
  } else {
    for (const auto& [key, item] : *aggregate.entries) {
      items.push_back(to_argument(key, user, f));
      items.push_back(to_argument(item, user, f));
    }
  }
  Node* node = emit(construct_target(v->type()), std::move(items), {}, user, f);
  // Every name of this list or dict now means the run-time one.
  for (auto& entry : f.env) {
    const Val& e = entry.second;
    if ((e.kind == Val::Kind::List && e.items == aggregate.items) ||
        (e.kind == Val::Kind::Dict && e.entries == aggregate.entries))
      entry.second = Val::of_node(node);
  }
  return node;
}

Importer::Capture Importer::capture(const jit::Node* n, Frame& f) {
  Capture cap;
  std::unordered_set<const jit::Value*> seen_values;
  for (const jit::Block* b : n->blocks()) collect_free(b, n, cap.free, seen_values);
  std::vector<Node*> nodes;
  std::unordered_set<const Node*> seen_nodes;
  for (const jit::Value* v : cap.free) {
    const Val& val = value(v, f, n);
    if (val.kind == Val::Kind::List || val.kind == Val::Kind::Dict ||
        (val.kind == Val::Kind::Constant && (val.constant.isList() || val.constant.isGenericDict()))) {
      bool mutated = false;
      for (const jit::Block* b : n->blocks()) mutated = mutated || mutated_inside(b, v);
      if (mutated) materialize(v, f, n);
    }
    if (val.kind == Val::Kind::Object) {
      for (const jit::Block* b : n->blocks())
        if (attribute_set_inside(b, v))
          fail(n, f, "an attribute of an object of class " + class_name_of(val.class_type) +
                         " is set inside run-time control flow; set it after the branch from the branch's result");
    }
    collect_nodes(value(v, f, n), cap.operands, seen_nodes);
  }
  return cap;
}

Val Importer::substitute(const Val& v, const std::unordered_map<const Node*, Node*>& map) const {
  switch (v.kind) {
    case Val::Kind::Symbolic: {
      if (!v.symbolic.is_node()) return v;
      Val r = Val::of_node(map.at(v.symbolic.to_node()));
      r.type = v.type;
      return r;
    }
    case Val::Kind::List:
    case Val::Kind::Tuple: {
      std::vector<Val> items;
      items.reserve(v.items->size());
      for (const Val& i : *v.items) items.push_back(substitute(i, map));
      return v.kind == Val::Kind::List ? Val::of_list(std::move(items)) : Val::of_tuple(std::move(items));
    }
    case Val::Kind::Dict: {
      Val d = v;
      d.entries = std::make_shared<std::vector<std::pair<Val, Val>>>();
      for (const auto& kv : *v.entries) d.entries->emplace_back(substitute(kv.first, map), substitute(kv.second, map));
      return d;
    }
    case Val::Kind::Object: {
      Val o = v;
      o.fields = std::make_shared<std::vector<std::pair<std::string, Val>>>();
      for (const auto& field : *v.fields) o.fields->emplace_back(field.first, substitute(field.second, map));
      return o;
    }
    default:
      return v;
  }
}

Node* Importer::add_operand_placeholder(Graph& graph, Node* outer) {
  Node* last = nullptr;
  for (Node* n : graph.nodes()) {
    if (n->op() != Opcode::Placeholder) break;
    last = n;
  }
  auto at = last ? graph.inserting_after(last) : graph.inserting_before(nullptr);
  Node* p = graph.placeholder(outer->name());
  placeholder_origin_[p] = outer;
  return p;
}

Argument Importer::local(const Argument& a) {
  if (lift_scopes_.empty()) return a;
  return map_arg(a, [&](Node* n) -> Argument {
    if (&n->graph() == graph_.get()) return n;
    // Only from enclosing graphs (a node of another branch stays as it is,
    // and call_function's check names it).
    if (std::none_of(lift_scopes_.begin(), lift_scopes_.end(), [&](const LiftScope& s) { return s.parent == &n->graph(); }))
      return n;
    LiftScope& scope = lift_scopes_.back();
    auto it = scope.placeholders.find(n);
    if (it != scope.placeholders.end()) return it->second;
    Node* p = add_operand_placeholder(*graph_, n);
    scope.placeholders[n] = p;
    scope.lifted->push_back(n);
    return p;
  });
}

ArgList Importer::local(const ArgList& args) {
  ArgList out;
  out.reserve(args.size());
  for (const Argument& a : args) out.push_back(local(a));
  return out;
}

std::shared_ptr<Graph> Importer::import_block(const jit::Block* block, Frame& f, const Capture& cap,
                                              std::vector<Node*>& lifted, int64_t first_iteration) {
  auto sub = std::make_shared<Graph>();
  std::vector<Node*> leading;
  for (size_t i = 0; i < block->inputs().size(); ++i)
    leading.push_back(sub->placeholder(value_name(block->inputs()[i], i == 0 ? "i" : "carried")));
  std::unordered_map<const Node*, Node*> map;
  for (Node* op : cap.operands) {
    Node* p = sub->placeholder(op->name());
    map[op] = p;
    placeholder_origin_[p] = op;
  }
  LiftScope scope{graph_.get(), {}, &lifted};
  for (Node* op : lifted) scope.placeholders[op] = add_operand_placeholder(*sub, op);

  // Inside, the free values hold this graph's placeholders; restored after.
  std::vector<std::pair<const jit::Value*, Val>> saved;
  saved.reserve(cap.free.size());
  for (const jit::Value* v : cap.free) {
    Val outer = f.env.at(v);
    f.env[v] = substitute(outer, map);
    saved.emplace_back(v, std::move(outer));
  }
  struct Restore {
    Importer& im;
    Frame& f;
    std::shared_ptr<Graph> graph;
    std::vector<std::pair<const jit::Value*, Val>>& saved;
    ~Restore() {
      im.graph_ = graph;
      --im.subgraph_depth_;
      im.lift_scopes_.pop_back();
      for (auto& [v, val] : saved) f.env[v] = std::move(val);
    }
  } restore{*this, f, graph_, saved};
  graph_ = sub;
  ++subgraph_depth_;
  lift_scopes_.push_back(std::move(scope));

  for (size_t i = 0; i < leading.size(); ++i) bind(block->inputs()[i], Val::of_node(leading[i]), f);
  // A loop continued after unrolled iterations counts from where they stopped.
  if (first_iteration != 0)
    bind(block->inputs()[0], Val::of_node(emit("operator.add", {leading[0], first_iteration}, {}, block->owningNode(), f)), f);
  run_block(block, f);
  ArgList results;
  for (const jit::Value* v : block->outputs()) results.push_back(to_argument(value(v, f, block->return_node()), block->return_node(), f));
  if (results.size() == 1) {
    sub->output(local(results[0]));
  } else if (results.empty()) {
    sub->output(Argument());
  } else {
    sub->output(Argument::tuple(local(results)));
  }
  if (options_.eliminate_dead_code) sub->eliminate_dead_code();
  return sub;
}

void Importer::bind_results(const jit::Node* n, Node* node, Frame& f) {
  if (options_.record_stack_traces) node->set_stack_trace(stack_trace_entry(n, f.function_name));
  if (n->outputs().size() == 1) {
    bind(n->output(), Val::of_node(node), f);
    return;
  }
  const Val v = Val::of_node(node);
  for (size_t i = 0; i < n->outputs().size(); ++i) bind(n->outputs()[i], getitem(v, static_cast<int64_t>(i), n, f), f);
}

namespace {

// The i-th of a graph's `count` results (its output argument, or an item of its tuple).
const Argument& result_of(const Graph& g, size_t i, size_t count) {
  const Argument& out = g.output_node()->args().at(0);
  return count == 1 ? out : out.items().at(i);
}

bool has_side_effects(const Graph& g) {
  for (Node* n : g.nodes())
    if (n->op() != Opcode::Placeholder && n->op() != Opcode::Output && n->is_impure()) return true;
  return false;
}

}  // namespace

void Importer::emit_cond(const jit::Node* n, Frame& f, const Val& cond) {
  Capture cap = capture(n, f);
  PendingSubgraph pending;
  std::vector<Node*> lifted;
  pending.graphs.push_back(import_block(n->blocks()[0], f, cap, lifted));
  const size_t lifted_by_first = lifted.size();
  pending.graphs.push_back(import_block(n->blocks()[1], f, cap, lifted));
  // Both branches take the same inputs: the first also those only the second reads.
  for (size_t i = lifted_by_first; i < lifted.size(); ++i) add_operand_placeholder(*pending.graphs[0], lifted[i]);
  // Results both branches give as the same constant are known now (`a and
  // b` on a folded b: both branches False); a conditional whose results are
  // all such and whose branches do nothing else is left out.
  const size_t count = n->outputs().size();
  std::vector<std::optional<c10::IValue>> known(count);
  bool all_known = true;
  for (size_t i = 0; i < count; ++i) {
    const Argument& a = result_of(*pending.graphs[0], i, count);
    const Argument& b = result_of(*pending.graphs[1], i, count);
    if (!a.is_node() && !b.is_node() && a.kind() != Argument::Kind::List && a.kind() != Argument::Kind::Tuple &&
        a.kind() != Argument::Kind::Dict && a == b)
      known[i] = a.to_ivalue();
    all_known = all_known && known[i];
  }
  auto bind_known = [&] {
    for (size_t i = 0; i < count; ++i)
      if (known[i]) bind(n->outputs()[i], Val::of_constant(*known[i]), f);
  };
  if (all_known && !has_side_effects(*pending.graphs[0]) && !has_side_effects(*pending.graphs[1])) {
    bind_known();
    return;
  }
  pending.name = fresh_module_name("cond");
  pending.count = n->outputs().size();
  ArgList args{cond.symbolic};
  for (Node* op : cap.operands) args.emplace_back(op);
  for (Node* op : lifted) args.emplace_back(op);
  Node* node = graph_->call_module(pending.name, local(args));
  subgraphs_.push_back(std::move(pending));
  bind_results(n, node, f);
  bind_known();
}

void Importer::emit_loop(const jit::Node* n, Frame& f, int64_t first_iteration,
                         std::optional<std::vector<Val>> loop_inputs) {
  Capture cap = capture(n, f);
  // The loop's own inputs (trip count, condition, initial carried values),
  // read after capture: materialized lists are run-time values now.
  ArgList args;
  if (loop_inputs) {
    for (const Val& v : *loop_inputs) args.push_back(to_argument(v, n, f));
  } else {
    for (const jit::Value* v : n->inputs()) args.push_back(to_argument(value(v, f, n), n, f));
  }
  PendingSubgraph pending;
  pending.is_loop = true;
  std::vector<Node*> lifted;
  pending.graphs.push_back(import_block(n->blocks()[0], f, cap, lifted, first_iteration));
  pending.name = fresh_module_name("loop");
  pending.count = n->outputs().size();
  for (Node* op : cap.operands) args.emplace_back(op);
  for (Node* op : lifted) args.emplace_back(op);
  Node* node = graph_->call_module(pending.name, local(args));
  subgraphs_.push_back(std::move(pending));
  if (!n->outputs().empty()) bind_results(n, node, f);
}

std::shared_ptr<torch::nn::Module> Importer::attach_subgraphs(const std::shared_ptr<torch::nn::Module>& mirror) {
  // Inner graphs were finished first, so every module a graph calls is
  // registered before the GraphModule that takes it from the mirror.
  for (const PendingSubgraph& p : subgraphs_) {
    const std::string index = p.name.substr(p.name.rfind('_') + 1);
    std::shared_ptr<torch::nn::Module> module;
    if (p.is_loop) {
      auto body = std::make_shared<GraphModule>(mirror, p.graphs[0], "body_graph_" + index);
      module = std::make_shared<WhileLoopModule>(body, p.count);
    } else {
      auto t = std::make_shared<GraphModule>(mirror, p.graphs[0], "true_graph_" + index);
      auto e = std::make_shared<GraphModule>(mirror, p.graphs[1], "false_graph_" + index);
      module = std::make_shared<CondModule>(t, e, p.count);
    }
    mirror->register_module(p.name, module);
  }
  return mirror;
}

}  // namespace fx::import_detail
