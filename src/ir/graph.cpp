// Graph: node creation, insertion points, erasure, copying, DCE and lint.
#include <fx/error.h>
#include <fx/graph.h>
#include <fx/target.h>

#include "ir/names.h"

#include <algorithm>
#include <new>
#include <utility>
#include <unordered_set>

namespace fx {

// ---- InsertPoint -----------------------------------------------------------

InsertPoint::InsertPoint(Graph* graph, Where where) : graph_(graph), previous_(graph->insert_) {
  graph->insert_ = where;
}

InsertPoint::InsertPoint(InsertPoint&& other) noexcept : graph_(other.graph_), previous_(other.previous_) {
  other.graph_ = nullptr;
}

InsertPoint::~InsertPoint() {
  if (graph_) graph_->insert_ = previous_;
}

// ---- iteration -------------------------------------------------------------

Graph::iterator::iterator(Node* cur, const Node* root, bool reverse) : cur_(cur), root_(root), reverse_(reverse) {
  while (cur_ && cur_ != root_ && cur_->erased_) cur_ = reverse_ ? cur_->prev_ : cur_->next_;
  if (cur_ == root_) cur_ = nullptr;
}

Graph::iterator& Graph::iterator::operator++() {
  // torch.fx _node_list.__iter__: the successor is read only now, so nodes
  // inserted after the current one are visited and nodes erased meanwhile
  // are skipped. An erased node keeps its old links (erase_node only relinks
  // its neighbours), so erasing the current node is safe too.
  do {
    cur_ = reverse_ ? cur_->prev_ : cur_->next_;
  } while (cur_ != root_ && cur_->erased_);
  if (cur_ == root_) cur_ = nullptr;
  return *this;
}

Graph::iterator Graph::NodeList::begin() const {
  return iterator(reverse_ ? graph_->root_->prev_ : graph_->root_->next_, graph_->root_, reverse_);
}

Graph::iterator Graph::NodeList::end() const { return iterator(nullptr, graph_->root_, reverse_); }

size_t Graph::NodeList::size() const { return graph_->size_; }

std::vector<Node*> Graph::NodeList::to_vector() const {
  std::vector<Node*> out;
  out.reserve(size());
  for (Node* n : *this) out.push_back(n);
  return out;
}

// ---- construction ----------------------------------------------------------

Graph::Graph()
    : root_(new Node(this, SIZE_MAX, Opcode::Placeholder, "", "")), names_(std::make_unique<detail::NameTable>()) {
  root_->prev_ = root_->next_ = root_;
  insert_ = {root_, false};
}

Graph::~Graph() {
  // Inputs may die before their users: drop the use lists without relinking.
  std::vector<Node*> all = nodes().to_vector();
  all.insert(all.end(), erased_.begin(), erased_.end());
  for (Node* n : all) n->inputs_.clear();
  for (Node* n : all) destroy_node(n);
  delete root_;
}

namespace {
constexpr size_t kNodesPerChunk = 256;
}

void* Graph::allocate_node() {
  if (spare_) return std::exchange(spare_, nullptr);
  if (chunks_.empty() || chunk_used_ == kNodesPerChunk) {
    chunks_.emplace_back(new unsigned char[kNodesPerChunk * sizeof(Node)]);
    chunk_used_ = 0;
  }
  return chunks_.back().get() + sizeof(Node) * chunk_used_++;
}

void Graph::destroy_node(Node* n) { n->~Node(); }

void Graph::link_before(Node* n, Node* before) {
  Node* p = before->prev_;
  p->next_ = n;
  n->prev_ = p;
  n->next_ = before;
  before->prev_ = n;
}

void Graph::unlink(Node* n) {
  n->prev_->next_ = n->next_;
  n->next_->prev_ = n->prev_;
}

void Graph::insert(Node* n) {
  Node* anchor = insert_.anchor;
  link_before(n, insert_.after ? anchor->next_ : anchor);
}

void Graph::check_alive(const Node* n) const {
  if (n->erased_) throw Error("Node " + n->name_ + " was erased from the graph and cannot be used");
}

InsertPoint Graph::inserting_before(Node* n) {
  if (n == nullptr) return InsertPoint(this, {root_, true});
  if (&n->graph() != this) throw Error("Node to insert before is not in graph.");
  check_alive(n);
  return InsertPoint(this, {n, false});
}

InsertPoint Graph::inserting_after(Node* n) {
  if (n == nullptr) return InsertPoint(this, {root_, false});
  if (&n->graph() != this) throw Error("Node to insert after is not in graph.");
  check_alive(n);
  return InsertPoint(this, {n, true});
}

Node* Graph::create_node(Opcode op, const std::string& target, ArgList args, Kwargs kwargs,
                         std::optional<std::string> name, std::optional<std::string> type_expr) {
  if (op == Opcode::CallFunction && target != last_checked_target_) {
    check_function_target(target);
    last_checked_target_ = target;
  }
  if (target.empty() && op != Opcode::Output)
    throw Error(std::string("create_node: a ") + to_string(op) + " node needs a target");
  if (!name && (target != last_name_target_ || last_name_target_.empty())) {
    last_name_candidate_ = detail::name_from_target(op, target);
    last_name_target_ = op == Opcode::CallFunction ? target : std::string();  // other opcodes: no cache
  }
  const std::string& candidate = name ? *name : last_name_candidate_;
  Node::check_inputs(this, candidate, args, kwargs);  // errors name the node to be
  void* slot = allocate_node();
  Node* n = new (slot) Node(this, next_id_, op, std::string(), target);
  try {
    n->args_ = std::move(args);
    n->kwargs_ = std::move(kwargs);
    n->link_uses();
    n->touch();
  } catch (...) {
    destroy_node(n);  // not linked anywhere yet: the graph is unchanged
    spare_ = slot;
    throw;
  }
  ++next_id_;
  n->name_ = unique_name(candidate);
  if (type_expr && !type_expr->empty()) n->type_ = std::make_unique<std::string>(std::move(*type_expr));
  insert(n);
  ++size_;
  return n;
}

Node* Graph::placeholder(const std::string& name, std::optional<Argument> default_value,
                         std::optional<std::string> type_expr) {
  ArgList args;
  if (default_value) args.push_back(std::move(*default_value));
  return create_node(Opcode::Placeholder, name, std::move(args), {}, std::nullopt, std::move(type_expr));
}

Node* Graph::get_attr(const std::string& qualified_name) { return create_node(Opcode::GetAttr, qualified_name); }

Node* Graph::call_function(const std::string& target, ArgList args, Kwargs kwargs) {
  return create_node(Opcode::CallFunction, target, std::move(args), std::move(kwargs));
}

Node* Graph::call_module(const std::string& module_name, ArgList args, Kwargs kwargs) {
  return create_node(Opcode::CallModule, module_name, std::move(args), std::move(kwargs));
}

Node* Graph::call_method(const std::string& method_name, ArgList args, Kwargs kwargs) {
  return create_node(Opcode::CallMethod, method_name, std::move(args), std::move(kwargs));
}

Node* Graph::output(Argument result, std::optional<std::string> type_expr) {
  return create_node(Opcode::Output, "output", {std::move(result)}, {}, std::nullopt, std::move(type_expr));
}

void Graph::add_owner(GraphModule* owner) {
  if (!owner) return;
  owning_module_ = owners_ == 0 ? owner : nullptr;  // torch.fx owning_module.setter
  ++owners_;
}

void Graph::remove_owner(GraphModule* owner) {
  if (!owner || owners_ == 0) return;
  --owners_;
  if (owning_module_ == owner) owning_module_ = nullptr;
}

std::string Graph::unique_name(const std::string& candidate) {
  return names_->create(candidate);
}

void Graph::erase_node(Node* n) {
  if (n == nullptr) throw Error("erase_node: null Node*");
  if (&n->graph() != this) throw Error("erase_node: Node " + n->name() + " does not belong to this graph");
  check_alive(n);
  if (!n->users().empty()) {
    std::string users;
    for (Node* u : n->users()) users += (users.empty() ? "" : ", ") + u->name() + ": None";
    throw Error("Tried to erase Node " + n->name() + " but it still had " + std::to_string(n->users().size()) +
                " users in the graph: {" + users + "}!");
  }
  unlink(n);
  // Drop the inputs so the nodes it read lose it as a user.
  auto none = [](Node*) { return Argument(); };
  n->set_args_kwargs(map_arg(n->args_, none), map_arg(n->kwargs_, none));
  n->erased_ = true;
  erased_.push_back(n);
  --size_;
  ++version_;
}

Node* Graph::node_copy(const Node* node, const std::function<Argument(Node*)>& arg_transform) {
  if (node == nullptr) throw Error("node_copy: null Node*");
  static const std::function<Argument(Node*)> identity = [](Node* n) -> Argument { return n; };
  const auto& fn = arg_transform ? arg_transform : identity;
  Node* copy = create_node(node->op(), node->target(), map_arg(node->args(), fn), map_arg(node->kwargs(), fn),
                           node->name(), node->type_ ? std::optional<std::string>(*node->type_) : std::nullopt);
  if (node->meta_) copy->meta_ = std::make_unique<Meta>(*node->meta_);
  return copy;
}

std::optional<Argument> Graph::graph_copy(const Graph& g, std::unordered_map<const Node*, Node*>& val_map) {
  auto lookup = [&](Node* n) -> Argument {
    auto it = val_map.find(n);
    if (it == val_map.end())
      throw Error("graph_copy: Node " + n->name() + " is used before it is copied (the source graph is not in "
                  "topological order)");
    return it->second;
  };
  for (Node* n : g.nodes()) {
    if (val_map.count(n)) continue;
    if (n->op() == Opcode::Output) return map_arg(n->args().empty() ? Argument() : n->args()[0], lookup);
    val_map[n] = node_copy(n, lookup);
  }
  return std::nullopt;
}

bool Graph::eliminate_dead_code() {
  lint();
  bool changed = false;
  for (Node* n : nodes().reversed()) {
    if (n->users().empty() && !n->is_impure()) {
      erase_node(n);
      changed = true;
    }
  }
  return changed;
}

// As torch.fx's lint: ownership, topological order, unique names (plus the
// use lists). Like torch.fx it does not count output nodes: a graph under
// construction, or one with none or two, lints fine.
void Graph::lint() const {
  std::vector<bool> seen(next_id_, false);
  std::vector<const Node*> input_of(next_id_, nullptr);  // input id -> the node whose Uses list it
  std::unordered_set<std::string_view> names;
  for (Node* n : nodes()) {
    if (&n->graph() != this) throw LintError("Node '" + n->name() + "' does not belong to this Graph!");
    if (n->erased_) throw LintError("Node '" + n->name() + "' was erased but is still in the graph");
    for (const Use& u : n->inputs_)
      if (&u.input->graph() == this && u.input->id() < next_id_) input_of[u.input->id()] = n;
    for_each_node(n->args(), n->kwargs(), [&](Node* arg) {
      if (&arg->graph() != this)
        throw LintError("Argument '" + arg->name() + "' of Node '" + n->name() +
                        "' does not belong to this Graph, but was used as an argument! If you are copying nodes "
                        "from another graph, make sure to use ``arg_transform`` on node_copy() to remap values\n" +
                        str());
      if (arg->erased_ || !seen[arg->id()])
        throw LintError("Argument '" + arg->name() + "' of Node '" + n->name() +
                        "' was used before it has been defined! Please check that Nodes in the graph are "
                        "topologically ordered\n" +
                        str());
      if (input_of[arg->id()] != n)  // O(1): a node with many inputs costs O(inputs), not O(inputs^2)
        throw LintError("Node '" + n->name() + "' uses '" + arg->name() + "' but is not among its users");
    });
    // Use lists: every Use of n is linked into its input's user list, and
    // every user listed is linked back through a Use naming n.
    for (const Use& u : n->inputs_) {
      const Users& list = u.input->users_;
      const bool linked = u.user == n && (u.prev ? u.prev->next : list.head_) == &u &&
                          (u.next ? u.next->prev : list.tail_) == &u;
      if (!linked)
        throw LintError("Node '" + n->name() + "' uses '" + u.input->name() + "' but is not among its users");
    }
    for (const Use* u = n->users_.head_; u; u = u->next) {
      if (u->input != n || u->user->erased_ || &u->user->graph() != this)
        throw LintError("Node '" + u->user->name() + "' is a user of '" + n->name() + "' but does not use it");
    }
    seen[n->id()] = true;
    if (!names.insert(n->name()).second) throw LintError("Node redefined name " + n->name() + "!");
  }
}

std::vector<Node*> Graph::find_nodes(Opcode op, const std::optional<std::string>& target) const {
  std::vector<Node*> out;
  for (Node* n : nodes())
    if (n->op() == op && (!target || n->target() == *target)) out.push_back(n);
  return out;
}

Node* Graph::output_node() const {
  for (Node* n : nodes().reversed())
    if (n->op() == Opcode::Output) return n;
  return nullptr;
}

}  // namespace fx
