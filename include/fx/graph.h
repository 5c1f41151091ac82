#pragma once
/// \file
/// Graph: an ordered list of Nodes (torch.fx `Graph`).
///
/// A Graph owns its nodes. New nodes go to the current insertion point: the
/// end of the graph unless an InsertPoint guard (inserting_before /
/// inserting_after) says otherwise. Names are made unique in O(1) with
/// torch.fx's rules. Every edit bumps version(), which GraphModule uses to
/// recompile lazily. See node.h for the invariants lint() checks.

#include <fx/node.h>

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace fx {

class Graph;
class GraphModule;
namespace detail {
class NameTable;
}

/// RAII insertion point: while alive, new nodes of the graph are inserted
/// where it says; its destructor restores the previous point (nestable).
class [[nodiscard]] InsertPoint {
 public:
  InsertPoint(InsertPoint&& other) noexcept;
  InsertPoint(const InsertPoint&) = delete;
  InsertPoint& operator=(const InsertPoint&) = delete;
  InsertPoint& operator=(InsertPoint&&) = delete;
  ~InsertPoint();

 private:
  friend class Graph;
  struct Where {
    Node* anchor;  // nullptr: the graph's end
    bool after;
  };
  InsertPoint(Graph* graph, Where where);
  Graph* graph_;
  Where previous_;
};

/// The code torch.fx's python_code() generates for a graph.
struct PythonCode {
  /// The whole text, as GraphModule.code shows it.
  std::string src;
};

/// An ordered list of nodes; the IR of fxcpp.
class Graph {
 public:
  /// Iterates over nodes in program order (or reverse), as torch.fx's
  /// _node_list does: the successor is read when the iterator advances, so
  /// nodes erased during the loop (the current one or any other) are
  /// skipped and nodes inserted after the current one are visited.
  class iterator {
   public:
    using value_type = Node*;
    using difference_type = std::ptrdiff_t;
    using reference = Node*;
    using pointer = void;
    using iterator_category = std::forward_iterator_tag;
    iterator(Node* cur, const Node* root, bool reverse);
    Node* operator*() const { return cur_; }
    iterator& operator++();
    bool operator==(const iterator& o) const { return cur_ == o.cur_; }
    bool operator!=(const iterator& o) const { return cur_ != o.cur_; }

   private:
    Node* cur_;
    const Node* root_;
    bool reverse_;
  };
  /// A view of the graph's nodes (torch.fx graph.nodes): iterable,
  /// reversible, with size(); not indexable, like torch.fx's _node_list.
  class NodeList {
   public:
    iterator begin() const;
    iterator end() const;
    /// The same nodes, last first (torch.fx reversed(graph.nodes)).
    NodeList reversed() const { return NodeList(graph_, !reverse_); }
    size_t size() const;
    bool empty() const { return size() == 0; }
    /// A copy, for loops that edit the graph beyond the current node.
    std::vector<Node*> to_vector() const;

   private:
    friend class Graph;
    NodeList(const Graph* g, bool reverse) : graph_(g), reverse_(reverse) {}
    const Graph* graph_;
    bool reverse_;
  };

  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// The nodes in program order.
  NodeList nodes() const { return NodeList(this, false); }

  /// Adds an input named `name` (made unique if taken); a default value
  /// makes the argument optional when the graph runs. type_expr annotates
  /// it in generated code (`def forward(self, x : torch.Tensor)`).
  Node* placeholder(const std::string& name, std::optional<Argument> default_value = std::nullopt,
                    std::optional<std::string> type_expr = std::nullopt);
  /// Fetches the parameter, buffer or attribute at `qualified_name`.
  Node* get_attr(const std::string& qualified_name);
  /// Calls a function: an ATen operator ("aten::add", "aten::add.Tensor"), a
  /// builtin ("operator.getitem") or a registered C++ function. Unknown
  /// targets throw fx::TargetError naming the closest known names.
  Node* call_function(const std::string& target, ArgList args = {}, Kwargs kwargs = {});
  /// Calls the forward of the submodule at `module_name`.
  Node* call_module(const std::string& module_name, ArgList args = {}, Kwargs kwargs = {});
  /// Calls method `method_name` on args[0] ("view", "size" ...).
  Node* call_method(const std::string& method_name, ArgList args = {}, Kwargs kwargs = {});
  /// Marks `result` as the graph's output; type_expr becomes the return
  /// annotation of generated code (`-> torch.Tensor`).
  Node* output(Argument result, std::optional<std::string> type_expr = std::nullopt);
  /// Creates a node of any opcode at the insertion point. `name` defaults to
  /// one derived from the target (add, add_1, layer1_0_conv1 ...); type_expr
  /// is torch.fx's type_expr (Node::type()).
  Node* create_node(Opcode op, const std::string& target, ArgList args = {}, Kwargs kwargs = {},
                    std::optional<std::string> name = std::nullopt,
                    std::optional<std::string> type_expr = std::nullopt);

  /// New nodes go right before `n` until the guard dies (nullptr: the graph's start).
  InsertPoint inserting_before(Node* n = nullptr);
  /// New nodes go right after `n` until the guard dies (nullptr: the graph's end).
  /// As in torch.fx, each new node goes directly after `n`, so several
  /// nodes created under one guard end up in reverse order of creation.
  InsertPoint inserting_after(Node* n = nullptr);

  /// Removes `n`; throws fx::Error (and changes nothing) while it has users.
  void erase_node(Node* n);
  /// Copies `node` (of any graph) to the insertion point, mapping its input
  /// nodes with arg_transform (by default the identity, as in torch.fx: only
  /// right for a node of this graph). Name, type and meta are copied.
  Node* node_copy(const Node* node, const std::function<Argument(Node*)>& arg_transform = nullptr);
  /// Copies every node of `g` except its output into this graph; val_map
  /// maps g's nodes to the copies (pre-filled entries are used as is).
  /// Returns g's output value mapped, or nullopt if g has no output.
  std::optional<Argument> graph_copy(const Graph& g, std::unordered_map<const Node*, Node*>& val_map);
  /// Removes nodes without users that are not impure, last first; returns
  /// whether anything changed.
  bool eliminate_dead_code();
  /// Checks the invariants of node.h; throws fx::LintError naming the node.
  void lint() const;

  /// Nodes with opcode `op` (and `target`, if given), in program order.
  std::vector<Node*> find_nodes(Opcode op, const std::optional<std::string>& target = std::nullopt) const;
  /// The output node, or nullptr.
  Node* output_node() const;

  /// torch.fx print_tabular(): opcode / name / target / args / kwargs columns.
  std::string tabular() const;
  /// Prints tabular() to `os` (stdout by default).
  void print_tabular(std::ostream& os) const;
  void print_tabular() const;
  /// The forward function torch.fx would generate for this graph. With
  /// verbose (what print_readable uses), each run of nodes with the same
  /// stack trace is preceded by torch.fx's summary comment
  /// ("# File: m.py:4, code: y = x + 1"), or "# No stacktrace found for
  /// following nodes" once a node without one follows.
  PythonCode python_code(const std::string& root_module = "self", bool verbose = false) const;
  /// torch.fx str(graph): "graph():" then one format_node() line per node.
  std::string str() const;

  /// The GraphModule built on this graph (torch.fx graph.owning_module), or
  /// nullptr if none or several are: a non-owning back-pointer, cleared when
  /// that module dies. As in torch.fx, once a second module has used the
  /// graph it stays nullptr.
  GraphModule* owning_module() const { return owning_module_; }
  /// Called by GraphModule when it starts (owner != nullptr) using this graph.
  void add_owner(GraphModule* owner);
  /// Called by GraphModule when it stops using this graph.
  void remove_owner(GraphModule* owner);

  /// Increases with every edit of the graph or its nodes.
  uint64_t version() const { return version_; }
  /// One more than the largest Node::id() ever given in this graph.
  size_t max_node_id() const { return next_id_; }

 private:
  friend class Node;
  friend class InsertPoint;
  std::string unique_name(const std::string& candidate);
  /// Throws fx::Error if `n` was erased.
  void check_alive(const Node* n) const;
  void insert(Node* n);
  static void link_before(Node* n, Node* before);
  static void unlink(Node* n);

  /// Memory for one more node: nodes live in chunks owned by the graph (they
  /// are only freed with it, erased ones included), so creating one is a bump.
  void* allocate_node();
  void destroy_node(Node* n);

  Node* root_;  // sentinel of the circular node list
  std::vector<std::unique_ptr<unsigned char[]>> chunks_;
  size_t chunk_used_ = 0;   // nodes handed out from chunks_.back()
  void* spare_ = nullptr;   // a slot given back by a failed create_node
  size_t size_ = 0;
  size_t next_id_ = 0;
  uint64_t version_ = 0;
  InsertPoint::Where insert_{nullptr, false};
  std::vector<Node*> erased_;  // owned; kept so that stale Node* never dangle
  std::unique_ptr<detail::NameTable> names_;
  GraphModule* owning_module_ = nullptr;
  size_t owners_ = 0;
  std::string last_checked_target_;  // call_function target validated last (chains repeat targets)
  std::string last_name_target_;     // the target whose name candidate was derived last ...
  std::string last_name_candidate_;  // ... and that candidate
};

/// Prints graph.str().
std::ostream& operator<<(std::ostream& os, const Graph& graph);

}  // namespace fx
