#pragma once
/// \file
/// Node: one operation in a Graph (torch.fx `Node`).
///
/// Invariants (checked by Graph::lint(), kept by every method here):
///  1. A node lives in exactly one Graph, in that graph's intrusive doubly
///     linked list; Graph::nodes() walks it in program order.
///  2. Use lists never disagree with arguments: `m` is in `n->users()`
///     exactly when `n` appears somewhere in `m->args()` or `m->kwargs()`.
///     args()/kwargs() are read-only views; every change goes through
///     set_args / set_kwargs / update_arg / update_kwarg / insert_arg /
///     replace_input_with / replace_all_uses_with, which relink the uses.
///  3. users() and all_input_nodes() are insertion ordered and hold each
///     node once, however many times it is used.
///  4. Every edit bumps the owning graph's version(), so a GraphModule can
///     tell that its compiled code is stale.
///  5. Names are unique within a graph and valid Python identifiers.

#include <fx/argument.h>
#include <fx/normalize.h>

#include <c10/util/SmallVector.h>

#include <any>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fx {

class Graph;

/// The six torch.fx opcodes.
enum class Opcode : uint8_t {
  Placeholder,   ///< a graph input; target is the parameter name
  GetAttr,       ///< fetch a parameter, buffer or constant; target is its qualified name
  CallFunction,  ///< call a free function; target is "aten::add", "operator.getitem", ...
  CallModule,    ///< call a submodule's forward; target is its qualified name
  CallMethod,    ///< call a method on args[0]; target is the method name ("view")
  Output,        ///< the graph's result, args[0]
};

/// The opcode as torch.fx spells it ("call_function").
const char* to_string(Opcode op);
/// Parses "call_function" etc.; throws fx::Error on anything else.
Opcode opcode_from_string(const std::string& op);

/// Node::meta(): free-form per-node metadata ("tensor_meta", "stack_trace" ...).
using Meta = std::map<std::string, std::any>;

/// One edge of the use graph: `user` reads the value of `input`. Uses live in
/// the user's input table and are linked into the input's user list, so both
/// directions are O(1) to update.
struct Use {
  Node* input = nullptr;
  Node* user = nullptr;
  Use* prev = nullptr;
  Use* next = nullptr;
};

/// The users of a node: an insertion-ordered range of Node*.
class Users {
 public:
  class iterator {
   public:
    using value_type = Node*;
    using difference_type = std::ptrdiff_t;
    using reference = Node*;
    using pointer = void;
    using iterator_category = std::forward_iterator_tag;
    explicit iterator(const Use* u = nullptr) : u_(u) {}
    Node* operator*() const { return u_->user; }
    iterator& operator++() {
      u_ = u_->next;
      return *this;
    }
    bool operator==(const iterator& o) const { return u_ == o.u_; }
    bool operator!=(const iterator& o) const { return u_ != o.u_; }

   private:
    const Use* u_;
  };
  iterator begin() const { return iterator(head_); }
  iterator end() const { return iterator(nullptr); }
  /// How many distinct nodes use this one (torch.fx len(node.users)).
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// Whether `n` is a user (O(users)).
  bool contains(const Node* n) const;
  /// A copy, for loops that edit the use lists.
  std::vector<Node*> to_vector() const;

 private:
  friend class Node;
  friend class Graph;
  Use* head_ = nullptr;
  Use* tail_ = nullptr;
  size_t size_ = 0;
};

/// One operation in a Graph. Created only by Graph (placeholder(),
/// call_function(), create_node() ...), destroyed by Graph::erase_node().
class Node {
 public:
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// The graph this node belongs to (torch.fx node.graph).
  Graph& graph() const { return *graph_; }
  /// The opcode.
  Opcode op() const { return op_; }
  /// The unique name, used in printing and generated code.
  const std::string& name() const { return name_; }
  /// Renames the node (torch.fx `node.name = candidate`) and returns the new
  /// name. Unlike torch.fx 1.13, whose plain attribute lets two nodes share a
  /// name (lint then fails with "Node redefined name"), the candidate is made
  /// unique in the graph's namespace as create_node does (torch.fx 2.x
  /// Node._rename): renaming to a taken name gives name_1 ... Renaming to
  /// the current name changes nothing; the old name stays reserved.
  const std::string& set_name(const std::string& candidate);
  /// What to call or fetch; meaning depends on op().
  const std::string& target() const { return target_; }
  /// Retargets the node in place (torch.fx `node.target = t`, e.g. add → mul).
  /// A call_function target is checked as create_node checks it, and for an
  /// operator the current args/kwargs must fit one of its schemas (count and
  /// keyword names; types are known only at run time): otherwise
  /// fx::TargetError naming the node, and the node is unchanged (torch.fx
  /// accepts anything and fails only when the code runs).
  void set_target(const std::string& target);
  /// The type annotation (torch.fx node.type), as generated code prints it
  /// ("torch.Tensor"); empty when the node has none.
  const std::string& type() const;
  /// Sets the type annotation; "" removes it.
  void set_type(std::string type_expr);
  /// Positional arguments (read-only: change them with set_args / update_arg).
  const ArgList& args() const { return args_; }
  /// Keyword arguments (read-only: change them with set_kwargs / update_kwarg).
  const Kwargs& kwargs() const { return kwargs_; }
  /// The nodes that use this node's value, in the order they started to.
  const Users& users() const { return users_; }
  /// The distinct nodes among args and kwargs, in order of first appearance.
  std::vector<Node*> all_input_nodes() const;
  /// A number unique within the graph, given at creation and never reused:
  /// a dense index for per-node tables (see Graph::max_node_id()).
  size_t id() const { return id_; }

  /// The previous node in the graph, nullptr for the first.
  Node* prev() const;
  /// The next node in the graph, nullptr for the last.
  Node* next() const;
  /// Moves `x` (of the same graph) to right after this node (torch.fx Node.append).
  void append(Node* x);
  /// Moves `x` (of the same graph) to right before this node (torch.fx Node.prepend).
  void prepend(Node* x);

  /// Replaces all positional arguments and relinks uses.
  void set_args(ArgList args);
  /// Replaces all keyword arguments and relinks uses.
  void set_kwargs(Kwargs kwargs);
  /// Replaces args()[idx]; throws fx::Error when idx is out of range.
  void update_arg(size_t idx, Argument arg);
  /// Sets (or adds, at the end) the keyword argument `key`.
  void update_kwarg(const std::string& key, Argument arg);
  /// Inserts `arg` at position idx (0 <= idx <= args().size()).
  void insert_arg(size_t idx, Argument arg);
  /// Replaces every occurrence of `old_input` in args and kwargs by `new_input`.
  void replace_input_with(Node* old_input, Node* new_input);
  /// Makes every user of this node use `replace_with` instead; returns the
  /// users that changed. Users for which delete_user_cb returns false are
  /// left alone. `replace_with` itself is never rewritten to use itself (the
  /// self-reference trap of inserting f(n) after n and rerouting n's users
  /// is impossible). With propagate_meta, this node's meta is copied to
  /// replace_with, which must have none yet.
  std::vector<Node*> replace_all_uses_with(
      Node* replace_with, const std::function<bool(Node*)>& delete_user_cb = nullptr,
      bool propagate_meta = false);

  /// torch.fx format_node: "%add : [#users=1] = call_function[target=aten::add](args = (%x, %y), kwargs = {})".
  std::string format_node() const;

  /// Free-form metadata ("tensor_meta", "stack_trace", "val" ...).
  Meta& meta();
  const Meta& meta() const;
  /// meta["stack_trace"] as a string ("" when unset).
  std::string stack_trace() const;
  /// Sets meta["stack_trace"].
  void set_stack_trace(std::string trace);

  /// Whether Graph::erase_node() removed this node (its Node* stays valid
  /// until the graph dies, but it can no longer be edited or used).
  bool is_erased() const { return erased_; }

  /// Whether dead code elimination must keep this node even without users:
  /// placeholders, output, call_module, and calls whose schema writes to an
  /// input (aten::add_, aten::copy_ ..., and call_method add_ ...) or
  /// functions registered as impure.
  bool is_impure() const;

  /// torch.fx normalized_arguments: this call's args and kwargs matched up to
  /// its target's signature, defaults filled in (see fx/normalize.h);
  /// nullopt for other opcodes and targets without a known signature.
  /// `root` resolves call_module targets (fx::Error if it is null then).
  std::optional<ArgsKwargsPair> normalized_arguments(const torch::nn::Module* root = nullptr,
                                                     const NormalizeOptions& options = {}) const;

 private:
  friend class Graph;
  Node(Graph* graph, size_t id, Opcode op, std::string name, std::string target);
  ~Node();
  /// Sets args and kwargs together, unlinking the old uses and linking the new.
  void set_args_kwargs(ArgList args, Kwargs kwargs);
  /// Throws fx::Error (naming node `name`) unless every Node* inside is a
  /// live node of `graph`.
  static void check_inputs(const Graph* graph, const std::string& name, const ArgList& args, const Kwargs& kwargs);
  void unlink_uses();
  void link_uses();
  void touch();

  Graph* graph_;
  size_t id_;
  Opcode op_;
  std::string name_;
  std::string target_;
  std::unique_ptr<std::string> type_;  // most nodes have none: a pointer keeps Node small
  ArgList args_;
  Kwargs kwargs_;
  c10::SmallVector<Use, 2> inputs_;  // one per distinct input node; linked into input->users_
  Users users_;
  std::unique_ptr<Meta> meta_;  // made on first use: most nodes of large graphs have none
  Node* prev_ = nullptr;  // the graph's sentinel at the ends
  Node* next_ = nullptr;
  bool erased_ = false;   // erased nodes stay allocated until the graph dies
};

/// Prints node->name() (Python repr of a Node).
std::ostream& operator<<(std::ostream& os, const Node& node);

}  // namespace fx
