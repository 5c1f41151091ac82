// Node: arguments, use lists, list position and printing of one operation.
#include <fx/error.h>
#include <fx/graph.h>
#include <fx/node.h>
#include <fx/target.h>
#include <fx/tensor_meta.h>

#include "targets/registry.h"

#include <c10/util/SmallVector.h>

#include <sstream>

#include <algorithm>
#include <ostream>
#include <unordered_set>

namespace fx {

const char* to_string(Opcode op) {
  switch (op) {
    case Opcode::Placeholder: return "placeholder";
    case Opcode::GetAttr: return "get_attr";
    case Opcode::CallFunction: return "call_function";
    case Opcode::CallModule: return "call_module";
    case Opcode::CallMethod: return "call_method";
    case Opcode::Output: return "output";
  }
  return "?";
}

Opcode opcode_from_string(const std::string& op) {
  for (Opcode o : {Opcode::Placeholder, Opcode::GetAttr, Opcode::CallFunction, Opcode::CallModule,
                   Opcode::CallMethod, Opcode::Output}) {
    if (op == to_string(o)) return o;
  }
  throw Error("unknown opcode '" + op +
              "' (expected placeholder, get_attr, call_function, call_module, call_method or output)");
}

bool Users::contains(const Node* n) const {
  for (const Use* u = head_; u; u = u->next)
    if (u->user == n) return true;
  return false;
}

std::vector<Node*> Users::to_vector() const {
  std::vector<Node*> out;
  out.reserve(size_);
  for (Node* u : *this) out.push_back(u);
  return out;
}

Node::Node(Graph* graph, size_t id, Opcode op, std::string name, std::string target)
    : graph_(graph), id_(id), op_(op), name_(std::move(name)), target_(std::move(target)) {}

Node::~Node() { unlink_uses(); }

std::vector<Node*> Node::all_input_nodes() const {
  std::vector<Node*> out;
  out.reserve(inputs_.size());
  for (const Use& u : inputs_) out.push_back(u.input);
  return out;
}

Node* Node::prev() const { return prev_ == graph_->root_ ? nullptr : prev_; }
Node* Node::next() const { return next_ == graph_->root_ ? nullptr : next_; }

void Node::touch() { ++graph_->version_; }

const std::string& Node::set_name(const std::string& candidate) {
  graph_->check_alive(this);
  if (candidate == name_) return name_;
  if (candidate.empty()) throw Error("Node " + name_ + ": set_name needs a non-empty name");
  name_ = graph_->unique_name(candidate);
  touch();
  return name_;
}

namespace {

/// Whether a call with `num_args` positional arguments and these keyword
/// names can bind to `schema` (types are unknown while nodes stand for values).
bool arity_fits(const c10::FunctionSchema& schema, size_t num_args, const Kwargs& kwargs) {
  const auto& formals = schema.arguments();
  size_t positional = 0;
  for (const auto& f : formals)
    if (!f.kwarg_only()) ++positional;
  if (num_args > positional) return false;
  for (const auto& kv : kwargs) {
    auto it = std::find_if(formals.begin(), formals.end(), [&](const c10::Argument& f) {
      return f.name() == kv.first || (f.name() == "self" && kv.first == "input");  // torch.fx's name for self
    });
    if (it == formals.end() || static_cast<size_t>(it - formals.begin()) < num_args) return false;
  }
  for (size_t i = num_args; i < formals.size(); ++i) {
    if (formals[i].default_value() || find_kwarg(kwargs, formals[i].name())) continue;
    if (formals[i].name() == "self" && find_kwarg(kwargs, "input")) continue;
    if (formals[i].type()->kind() == c10::TypeKind::OptionalType) continue;
    return false;
  }
  return true;
}

}  // namespace

void Node::set_target(const std::string& target) {
  graph_->check_alive(this);
  if (target == target_) return;
  if (target.empty() && op_ != Opcode::Output)
    throw Error(std::string("Node ") + name_ + ": a " + to_string(op_) + " node needs a target");
  if (op_ == Opcode::CallFunction) {
    try {
      check_function_target(target);
    } catch (const TargetError& e) {
      throw TargetError("Node " + name_ + ": cannot retarget to " + target + ": " + e.what());
    }
    // Revalidate the arguments against the new operator's schemas (arity and
    // keyword names: the values' types are known only when the graph runs).
    const auto overloads = detail::operator_overloads(target);
    if (!overloads.empty() &&
        std::none_of(overloads.begin(), overloads.end(),
                     [&](const c10::OperatorHandle& op) { return arity_fits(op.schema(), args_.size(), kwargs_); })) {
      std::ostringstream msg;
      msg << "Node " << name_ << ": cannot retarget to " << target << ": no overload takes " << args_.size()
          << " positional argument" << (args_.size() == 1 ? "" : "s");
      if (!kwargs_.empty()) {
        msg << " and keyword arguments";
        for (size_t i = 0; i < kwargs_.size(); ++i) msg << (i ? ", " : " ") << kwargs_[i].first;
      }
      msg << "; schemas:";
      for (const auto& op : overloads) msg << "\n  " << op.schema();
      throw TargetError(msg.str());
    }
  }
  target_ = target;
  touch();
}

const std::string& Node::type() const {
  static const std::string none;
  return type_ ? *type_ : none;
}

void Node::set_type(std::string type_expr) {
  graph_->check_alive(this);
  if (type_expr.empty()) {
    type_.reset();
  } else {
    type_ = std::make_unique<std::string>(std::move(type_expr));
  }
  touch();
}

void Node::unlink_uses() {
  for (Use& u : inputs_) {
    Users& list = u.input->users_;
    (u.prev ? u.prev->next : list.head_) = u.next;
    (u.next ? u.next->prev : list.tail_) = u.prev;
    --list.size_;
  }
  inputs_.clear();
}

void Node::link_uses() {
  // Distinct inputs in order of first appearance; a hash set only for wide nodes.
  c10::SmallVector<Node*, 8> distinct;
  std::unordered_set<Node*> seen;
  for_each_node(args_, kwargs_, [&](Node* n) {
    if (distinct.size() < 16) {
      if (std::find(distinct.begin(), distinct.end(), n) != distinct.end()) return;
      distinct.push_back(n);
      if (distinct.size() == 16) seen.insert(distinct.begin(), distinct.end());
    } else if (seen.insert(n).second) {
      distinct.push_back(n);
    }
  });
  inputs_.resize(distinct.size());  // sized once: the Use addresses stay put until the next relink
  for (size_t i = 0; i < distinct.size(); ++i) {
    Use& u = inputs_[i];
    u.input = distinct[i];
    u.user = this;
    Users& list = u.input->users_;
    u.prev = list.tail_;
    u.next = nullptr;
    (list.tail_ ? list.tail_->next : list.head_) = &u;
    list.tail_ = &u;
    ++list.size_;
  }
}

void Node::check_inputs(const Graph* graph, const std::string& name, const ArgList& args, const Kwargs& kwargs) {
  for_each_node(args, kwargs, [&](Node* n) {
    if (n == nullptr) throw Error("Node " + name + ": an argument is a null Node*");
    if (&n->graph() != graph)
      throw Error("Argument " + n->name() + " of Node " + name +
                  " does not belong to this Graph, but was used as an argument! If you are copying nodes "
                  "from another graph, make sure to use arg_transform on node_copy() to remap values");
    graph->check_alive(n);
  });
}

void Node::set_args_kwargs(ArgList args, Kwargs kwargs) {
  graph_->check_alive(this);
  // Validate before touching anything: a failed edit leaves the node as it was.
  check_inputs(graph_, name_, args, kwargs);
  unlink_uses();
  args_ = std::move(args);
  kwargs_ = std::move(kwargs);
  link_uses();
  touch();
}

void Node::set_args(ArgList args) { set_args_kwargs(std::move(args), kwargs_); }

void Node::set_kwargs(Kwargs kwargs) { set_args_kwargs(args_, std::move(kwargs)); }

void Node::update_arg(size_t idx, Argument arg) {
  if (idx >= args_.size())
    throw Error("update_arg: index " + std::to_string(idx) + " is out of range for Node " + name_ + " with " +
                std::to_string(args_.size()) + " args");
  ArgList args = args_;
  args[idx] = std::move(arg);
  set_args(std::move(args));
}

void Node::update_kwarg(const std::string& key, Argument arg) {
  Kwargs kwargs = kwargs_;
  auto it = std::find_if(kwargs.begin(), kwargs.end(), [&](const auto& kv) { return kv.first == key; });
  if (it == kwargs.end()) {
    kwargs.emplace_back(key, std::move(arg));
  } else {
    it->second = std::move(arg);
  }
  set_kwargs(std::move(kwargs));
}

void Node::insert_arg(size_t idx, Argument arg) {
  if (idx > args_.size())
    throw Error("insert_arg: index " + std::to_string(idx) + " is out of range for Node " + name_ + " with " +
                std::to_string(args_.size()) + " args");
  ArgList args = args_;
  args.insert(args.begin() + static_cast<std::ptrdiff_t>(idx), std::move(arg));
  set_args(std::move(args));
}

void Node::replace_input_with(Node* old_input, Node* new_input) {
  auto swap = [&](Node* n) -> Argument { return n == old_input ? new_input : n; };
  set_args_kwargs(map_arg(args_, swap), map_arg(kwargs_, swap));
}

std::vector<Node*> Node::replace_all_uses_with(Node* replace_with, const std::function<bool(Node*)>& delete_user_cb,
                                               bool propagate_meta) {
  graph_->check_alive(this);
  if (replace_with == nullptr) throw Error("replace_all_uses_with: Node " + name_ + " cannot be replaced by null");
  if (replace_with == this) throw Error("replace_all_uses_with: Node " + name_ + " cannot replace itself");
  if (&replace_with->graph() != graph_)
    throw Error("replace_all_uses_with: Node " + replace_with->name() + " does not belong to the graph of Node " +
                name_);
  graph_->check_alive(replace_with);
  if (propagate_meta && !replace_with->meta().empty())
    throw Error("Called node.replace_all_uses_with(replace_with, propagate_meta=True), but replace_with " +
                replace_with->name() + " already has .meta keys");
  std::vector<Node*> changed;
  for (Node* user : users_.to_vector()) {
    // Rewriting replace_with to read itself would make a cycle: never wanted.
    if (user == replace_with) continue;
    if (delete_user_cb && !delete_user_cb(user)) continue;
    user->replace_input_with(this, replace_with);
    changed.push_back(user);
  }
  if (propagate_meta) replace_with->meta() = meta();
  return changed;
}

void Node::append(Node* x) {
  graph_->check_alive(this);
  graph_->check_alive(x);
  if (&x->graph() != graph_) throw Error("Attempting to move a Node into a different Graph");
  if (x == this) return;
  next_->prepend(x);
}

void Node::prepend(Node* x) {
  graph_->check_alive(this);
  graph_->check_alive(x);
  if (&x->graph() != graph_) throw Error("Attempting to move a Node into a different Graph");
  if (x == this) return;
  Graph::unlink(x);
  Graph::link_before(x, this);
  touch();
}

std::string Node::format_node() const {
  // torch.fx prints the type annotation before the user count.
  const std::string users = (type_ ? *type_ + " " : "") + "[#users=" + std::to_string(users_.size()) + "]";
  switch (op_) {
    case Opcode::Placeholder: {
      std::string s = "%" + name_ + " : " + users + " = placeholder[target=" + target_ + "]";
      if (!args_.empty()) s += "(default=" + args_[0].str() + ")";
      return s;
    }
    case Opcode::GetAttr: return "%" + name_ + " : " + users + " = get_attr[target=" + target_ + "]";
    case Opcode::Output: return "return " + (args_.empty() ? std::string("None") : args_[0].str());
    default:
      return "%" + name_ + " : " + users + " = " + to_string(op_) + "[target=" + target_ + "](args = " +
             format_args(args_) + ", kwargs = " + format_kwargs(kwargs_) + ")";
  }
}

std::string Node::stack_trace() const {
  if (!meta_) return "";
  auto it = meta_->find("stack_trace");
  if (it == meta_->end()) return "";
  if (const auto* s = std::any_cast<std::string>(&it->second)) return *s;
  return "";
}

void Node::set_stack_trace(std::string trace) { meta()["stack_trace"] = std::move(trace); }

Meta& Node::meta() {
  if (!meta_) meta_ = std::make_unique<Meta>();
  return *meta_;
}

const Meta& Node::meta() const {
  static const Meta empty;
  return meta_ ? *meta_ : empty;
}

bool Node::is_impure() const {
  switch (op_) {
    case Opcode::Placeholder:
    case Opcode::Output:
    case Opcode::CallModule: return true;
    case Opcode::CallFunction: return is_impure_function(target_);
    // x.add_(y) writes x like aten::add_ does (torch.fx 1.13 calls every
    // call_method pure, so its DCE drops an unused in-place method call).
    // x.__setitem__(i, v) writes x (torch.fx records a buffer's x[i] = v so).
    case Opcode::CallMethod: return target_ == "__setitem__" || is_impure_function("aten::" + target_);
    default: return false;
  }
}

std::ostream& operator<<(std::ostream& os, const Node& node) { return os << node.name(); }

std::optional<ArgsKwargsPair> Node::normalized_arguments(const torch::nn::Module* root,
                                                         const NormalizeOptions& options) const {
  graph_->check_alive(this);
  if (op_ == Opcode::CallFunction) return normalize_function(target_, args_, kwargs_, options);
  if (op_ == Opcode::CallModule) {
    if (!root) throw Error("normalized_arguments of call_module node " + name_ + " needs the root module");
    return normalize_module(*root, target_, args_, kwargs_, options);
  }
  return std::nullopt;
}

const TensorMetadata* tensor_meta_of(const Node* n) {
  auto it = n->meta().find("tensor_meta");
  return it == n->meta().end() ? nullptr : std::any_cast<TensorMetadata>(&it->second);
}

}  // namespace fx
