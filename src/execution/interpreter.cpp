// Interpreter: runs a GraphModule's graph node by node (torch.fx semantics).
#include <fx/interpreter.h>

#include "execution/node_error.h"
#include "execution/opcode_dispatch.h"

#include <fx/error.h>
#include <fx/shape_guard.h>


namespace fx {

// ---- Env ---------------------------------------------------------------------

void Env::missing(const Node* n) {
  throw Error("no value for node " + n->name() + " in the interpreter's environment");
}

void Env::reserve(size_t num_nodes) {
  if (num_nodes > values_.size()) {
    values_.resize(num_nodes);
    set_.resize(num_nodes, 0);
  }
}

void Env::set(const Node* n, c10::IValue v) {
  const size_t id = n->id();
  if (id >= values_.size()) reserve(std::max<size_t>(id + 1, values_.size() * 2));
  if (!set_[id]) {
    set_[id] = 1;
    ++count_;
  }
  values_[id] = std::move(v);
}

void Env::erase(const Node* n) {
  const size_t id = n->id();
  if (id < set_.size() && set_[id]) {
    set_[id] = 0;
    values_[id] = c10::IValue();
    --count_;
  }
}

void Env::clear() {
  values_.clear();
  set_.clear();
  count_ = 0;
}

// ---- per-graph-version cache --------------------------------------------------

/// What the interpreter resolves once per graph version: last uses, and per
/// node the resolved targets (created on first use).
struct Interpreter::Cache {
  const Graph* graph = nullptr;
  uint64_t version = 0;
  std::vector<Node*> placeholders;
  /// Per placeholder: the guard its argument is checked against.
  std::vector<std::optional<ShapeGuard>> guards;
  /// By node id: the values whose last use is that node.
  std::vector<std::vector<const Node*>> last_uses;

  std::vector<std::unique_ptr<FunctionCall>> functions;
  std::vector<std::unique_ptr<MethodCall>> methods;
  std::vector<std::shared_ptr<torch::nn::Module>> modules;
  std::vector<const ModuleForward*> forwards;
  std::vector<std::optional<c10::IValue>> attrs;
};

namespace {

/// Whether the run-time kwargs carry exactly the names the call was resolved for.
inline bool same_names(const std::vector<std::string>& names, const ValueKwargs& kwargs) {
  if (names.size() != kwargs.size()) return false;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] != kwargs[i].first) return false;
  return true;
}

/// Pointers to a call's values, on the stack for the usual few.
struct RefArray {
  RefArray(const std::vector<c10::IValue>& args, const ValueKwargs& kwargs) {
    const size_t n = args.size() + kwargs.size();
    ptrs = n <= 8 ? inline_ptrs : (heap.resize(n), heap.data());
    size_t i = 0;
    for (const auto& v : args) ptrs[i++] = &v;
    for (const auto& kv : kwargs) ptrs[i++] = &kv.second;
    num_args = args.size();
    num_kwargs = kwargs.size();
  }
  ValueRefs args() const { return ValueRefs(ptrs, num_args); }
  ValueRefs kwargs() const { return ValueRefs(ptrs + num_args, num_kwargs); }
  const c10::IValue* inline_ptrs[8];
  std::vector<const c10::IValue*> heap;
  const c10::IValue** ptrs;
  size_t num_args, num_kwargs;
};

}  // namespace

Interpreter::Interpreter(std::shared_ptr<GraphModule> module, bool garbage_collect_values)
    : module_(std::move(module)), garbage_collect_values_(garbage_collect_values) {
  if (!module_) throw Error("Interpreter: module is null");
}

Interpreter::~Interpreter() = default;

Interpreter::Cache& Interpreter::cache() {
  const Graph& g = module_->graph();
  if (cache_ && cache_->graph == &g && cache_->version == g.version()) return *cache_;
  auto c = std::make_unique<Cache>();
  c->graph = &g;
  c->version = g.version();
  const size_t n = g.max_node_id();
  c->last_uses.resize(n);
  c->functions.resize(n);
  c->methods.resize(n);
  c->modules.resize(n);
  c->forwards.resize(n, nullptr);
  c->attrs.resize(n);
  std::vector<bool> seen(n, false);
  for (Node* node : g.nodes().reversed()) {
    for (Node* input : node->all_input_nodes()) {
      if (!seen[input->id()]) {
        seen[input->id()] = true;
        c->last_uses[node->id()].push_back(input);
      }
    }
  }
  for (Node* node : g.nodes()) {
    if (node->op() != Opcode::Placeholder) continue;
    c->placeholders.push_back(node);
    const ShapeGuard* guard = shape_guard_of(*node);
    c->guards.push_back(guard ? std::optional<ShapeGuard>(*guard) : std::nullopt);
  }
  cache_ = std::move(c);
  return *cache_;
}

// ---- running -------------------------------------------------------------------

c10::IValue Interpreter::run(std::vector<c10::IValue> args, const Env* initial_env) {
  return run_impl(std::move(args), initial_env ? *initial_env : Env());
}

c10::IValue Interpreter::run(std::vector<c10::IValue> args, Env&& initial_env) {
  return run_impl(std::move(args), std::move(initial_env));
}

c10::IValue Interpreter::boxed_run(std::vector<c10::IValue>& args) {
  Cache& c = cache();
  Env env;
  size_t next = 0;
  for (Node* p : c.placeholders) {
    if (next < args.size()) {
      if (const auto& guard = c.guards[next])
        check_shape_guard(*guard, args[next], "Interpreter.boxed_run()", p->target());
      env.set(p, std::move(args[next++]));
    } else if (!p->args().empty()) {
      env.set(p, p->args()[0].to_ivalue());
    } else {
      args.clear();
      try {
        throw Error("Expected positional argument for parameter " + p->target() + ", but one was not passed in!");
      } catch (...) {
        detail::rethrow_while_executing(*p);
      }
    }
  }
  const size_t given = args.size();
  args.clear();  // the caller's references are gone: inputs die with their last use
  if (given > next && !allow_extra_args_) {
    std::string names;
    for (size_t i = 0; i < c.placeholders.size(); ++i) names += (i ? ", " : "") + c.placeholders[i]->target();
    throw Error("boxed_run() got " + std::to_string(given) + " arguments but the graph has " +
                std::to_string(c.placeholders.size()) + " placeholders (" + names +
                "); call allow_extra_args(true) to ignore extras as torch.fx does");
  }
  return run_impl({}, std::move(env));
}

c10::IValue Interpreter::run_impl(std::vector<c10::IValue> args, Env env) {
  Cache& c = cache();
  env_ = std::move(env);
  env_.reserve(module_->graph().max_node_id());

  std::vector<const Node*> consuming;  // placeholders that take an argument
  for (Node* p : c.placeholders)
    if (!env_.contains(p)) consuming.push_back(p);
  if (args.size() > consuming.size() && !allow_extra_args_) {
    std::string names;
    for (size_t i = 0; i < consuming.size(); ++i) names += (i ? ", " : "") + consuming[i]->target();
    throw Error("run() got " + std::to_string(args.size()) + " argument" + (args.size() == 1 ? "" : "s") +
                " but the graph has " + std::to_string(consuming.size()) + " placeholder" +
                (consuming.size() == 1 ? "" : "s") + " (" + names +
                "); call allow_extra_args(true) to ignore extras as torch.fx does");
  }
  args_iter_ = std::move(args);
  next_arg_ = 0;

  struct Reset {
    Interpreter* self;
    ~Reset() {
      self->current_ = nullptr;
      self->args_iter_.clear();
      self->next_arg_ = 0;
    }
  } reset{this};

  size_t placeholder_index = 0;
  for (Node* node : module_->graph().nodes()) {
    const std::optional<ShapeGuard>* guard = nullptr;
    if (node->op() == Opcode::Placeholder) guard = &c.guards[placeholder_index++];
    if (env_.contains(node)) continue;  // given in initial_env: partial evaluation
    const size_t args_before = next_arg_;
    try {
      c10::IValue value = run_node(node);
      env_.set(node, std::move(value));
    } catch (...) {
      current_ = nullptr;
      detail::rethrow_while_executing(*node);
    }
    current_ = nullptr;
    // An argument (not a default value) must match the traced shape.
    if (guard && *guard && next_arg_ > args_before)
      check_shape_guard(**guard, env_.at(node), "Interpreter.run()", node->target());
    if (garbage_collect_values_)
      for (const Node* dead : c.last_uses[node->id()]) env_.erase(dead);
    if (node->op() == Opcode::Output) return env_.at(node);
  }
  return c10::IValue();
}

c10::IValue Interpreter::run_node(Node* n) {
  current_ = n;
  auto [args, kwargs] = fetch_args_kwargs_from_env(n);
  c10::IValue out = detail::call_opcode_method(*this, n, args, kwargs);
  args.clear();  // the values die here, as they would in torch.fx
  spare_args_ = std::move(args);  // keep the capacity for the next node
  return out;
}

// ---- opcode methods ---------------------------------------------------------------

c10::IValue Interpreter::placeholder(const std::string& target, std::vector<c10::IValue>& args, ValueKwargs&) {
  if (!target.empty() && target[0] == '*') {  // *args: everything left
    c10::impl::GenericList rest(c10::AnyType::get());
    for (; next_arg_ < args_iter_.size(); ++next_arg_) rest.push_back(std::move(args_iter_[next_arg_]));
    return rest;
  }
  if (next_arg_ < args_iter_.size()) return std::move(args_iter_[next_arg_++]);
  if (!args.empty()) return args[0];
  throw Error("Expected positional argument for parameter " + target + ", but one was not passed in!");
}

c10::IValue Interpreter::get_attr(const std::string& target, std::vector<c10::IValue>&, ValueKwargs&) {
  if (current_ && current_->op() == Opcode::GetAttr && current_->target() == target && cache_) {
    auto& slot = cache_->attrs[current_->id()];
    if (!slot) slot = fetch_attr(target);
    return *slot;
  }
  return fetch_attr(target);
}

c10::IValue Interpreter::call_function(const std::string& target, std::vector<c10::IValue>& args,
                                       ValueKwargs& kwargs) {
  if (current_ && current_->op() == Opcode::CallFunction && cache_ &&
      (&current_->target() == &target || current_->target() == target)) {
    auto& fn = cache_->functions[current_->id()];
    if (!fn) fn = std::make_unique<FunctionCall>(target, detail::kwarg_names_of(*current_));
    if (same_names(fn->kwarg_names(), kwargs)) {
      RefArray refs(args, kwargs);
      return fn->call_refs(refs.args(), refs.kwargs());
    }
  }
  return fx::call_function(target, args, kwargs);
}

c10::IValue Interpreter::call_method(const std::string& target, std::vector<c10::IValue>& args,
                                     ValueKwargs& kwargs) {
  if (current_ && current_->op() == Opcode::CallMethod && cache_ &&
      (&current_->target() == &target || current_->target() == target)) {
    auto& m = cache_->methods[current_->id()];
    if (!m) m = std::make_unique<MethodCall>(target, detail::kwarg_names_of(*current_));
    if (same_names(m->kwarg_names(), kwargs)) {
      RefArray refs(args, kwargs);
      return m->call_refs(refs.args(), refs.kwargs());
    }
  }
  return fx::call_method(target, args, kwargs);
}

c10::IValue Interpreter::call_module(const std::string& target, std::vector<c10::IValue>& args,
                                     ValueKwargs& kwargs) {
  if (!kwargs.empty())
    throw Error("call_module '" + target +
                "' has keyword arguments, but a C++ module's forward takes positional arguments only");
  std::shared_ptr<torch::nn::Module> sub;
  const ModuleForward* forward = nullptr;
  const bool cached = current_ && current_->op() == Opcode::CallModule && current_->target() == target && cache_;
  if (cached && cache_->modules[current_->id()]) {
    sub = cache_->modules[current_->id()];
    forward = cache_->forwards[current_->id()];
  } else {
    sub = module_->get_submodule(target);
    forward = find_module_forward(*sub);
    if (!forward) {
      const torch::nn::Module& m = *sub;  // typeid of a plain reference: nothing evaluated twice
      throw Error("no forward is registered for module '" + target + "' of type " +
                  c10::demangle(typeid(m).name()) +
                  "; register it with fx::register_module_type<ItsImplClass>() or fx::register_module_forward()");
    }
    if (cached) {
      cache_->modules[current_->id()] = sub;
      cache_->forwards[current_->id()] = forward;
    }
  }
  return (*forward)(*sub, args);
}

c10::IValue Interpreter::output(const std::string&, std::vector<c10::IValue>& args, ValueKwargs&) {
  return args.empty() ? c10::IValue() : std::move(args[0]);
}

// ---- helpers -------------------------------------------------------------------------

std::pair<std::vector<c10::IValue>, ValueKwargs> Interpreter::fetch_args_kwargs_from_env(Node* n) {
  std::pair<std::vector<c10::IValue>, ValueKwargs> out;
  out.first = std::move(spare_args_);
  out.first.clear();
  out.first.reserve(n->args().size());
  for (const Argument& a : n->args()) {
    if (a.is_node()) {
      const Node* x = a.to_node();
      if (env_.contains(x)) {
        out.first.push_back(env_.at(x));
        continue;
      }
    }
    out.first.push_back(map_nodes_to_values(a, n));
  }
  if (!n->kwargs().empty()) {
    out.second.reserve(n->kwargs().size());
    for (const auto& kv : n->kwargs()) out.second.emplace_back(kv.first, map_nodes_to_values(kv.second, n));
  }
  return out;
}

c10::IValue Interpreter::map_nodes_to_values(const Argument& arg, Node* n) {
  auto load = [&](Node* x) -> c10::IValue {
    if (!env_.contains(x))
      throw Error("Node " + n->name() + " referenced nonexistent value " + x->name() +
                  "! Run Graph.lint() to diagnose such issues");
    return env_.at(x);
  };
  switch (arg.kind()) {
    case Argument::Kind::Node:
      return load(arg.to_node());
    case Argument::Kind::None:
      return c10::IValue();
    case Argument::Kind::Int:
      return arg.to_int();
    case Argument::Kind::Double:
      return arg.to_double();
    case Argument::Kind::Bool:
      return arg.to_bool();
    default:
      return arg.to_ivalue(load);
  }
}

c10::IValue Interpreter::fetch_attr(const std::string& target) { return module_->fetch_attr(target); }

}  // namespace fx
