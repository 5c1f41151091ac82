#pragma once
/// \file
/// Interpreter and Transformer (torch.fx `Interpreter`, `Transformer`).
///
/// The Interpreter runs a GraphModule node by node through one virtual
/// method per opcode, so a subclass can change how any kind of node runs
/// (profiling, partial evaluation, injecting values). Values live in an Env
/// indexed by Node::id() and are freed after their last use.
///
/// Unlike torch.fx, passing more arguments than the graph has placeholders
/// is an error (torch.fx silently ignores them, which hides bugs: a caller
/// passing (x, y, z) to forward(x, y) never learns that z was dropped); set
/// allow_extra_args(true) to get torch.fx's behaviour.
///
/// Any exception inside a node is rethrown as fx::Error (the same fx::Error
/// subclass if it was one) with torch.fx's message:
/// "<original message>\n\nWhile executing <format_node>" and, when the node
/// has a stack trace, "\nOriginal traceback:\n<stack trace>".

#include <fx/graph_module.h>
#include <fx/target.h>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fx {

/// The values of nodes during interpretation (torch.fx Interpreter.env):
/// a dense table indexed by Node::id().
class Env {
 public:
  /// Whether `n` has a value.
  bool contains(const Node* n) const { return n->id() < set_.size() && set_[n->id()]; }
  /// The value of `n`; throws fx::Error naming the node if it has none.
  const c10::IValue& at(const Node* n) const {
    if (!contains(n)) missing(n);
    return values_[n->id()];
  }
  /// Sets the value of `n`.
  void set(const Node* n, c10::IValue v);
  /// Drops the value of `n` (no-op if none).
  void erase(const Node* n);
  /// How many nodes have values.
  size_t size() const { return count_; }
  /// Drops every value.
  void clear();
  /// Makes room for nodes with ids below `num_nodes` (Graph::max_node_id()).
  void reserve(size_t num_nodes);

 private:
  [[noreturn]] static void missing(const Node* n);
  std::vector<c10::IValue> values_;
  std::vector<uint8_t> set_;
  size_t count_ = 0;
};

/// Runs a GraphModule's graph node by node.
class Interpreter {
 public:
  /// Interprets `module`'s graph. With garbage_collect_values, every value is
  /// dropped right after its last use.
  explicit Interpreter(std::shared_ptr<GraphModule> module, bool garbage_collect_values = true);
  virtual ~Interpreter();

  /// Binds `args` to the placeholders in order, then runs every node; values
  /// in `initial_env` are used instead of running their nodes (partial
  /// evaluation: a placeholder given there consumes no argument). Throws
  /// fx::Error if there are more arguments than placeholders to bind them to,
  /// unless allow_extra_args(true).
  c10::IValue run(std::vector<c10::IValue> args, const Env* initial_env = nullptr);
  /// As run(), taking over `initial_env` (no copy of its values is kept).
  c10::IValue run(std::vector<c10::IValue> args, Env&& initial_env);
  /// The boxed calling convention: binds the placeholders from `args`, clears
  /// the caller's vector (so inputs can be freed as soon as they are dead),
  /// then runs.
  c10::IValue boxed_run(std::vector<c10::IValue>& args);

  /// Runs one node: fetches its argument values and calls the opcode method.
  virtual c10::IValue run_node(Node* n);
  /// Returns the next input (or the default value); throws torch.fx's
  /// "Expected positional argument for parameter y, but one was not passed in!".
  virtual c10::IValue placeholder(const std::string& target, std::vector<c10::IValue>& args, ValueKwargs& kwargs);
  /// Fetches the attribute at `target` from the module.
  virtual c10::IValue get_attr(const std::string& target, std::vector<c10::IValue>& args, ValueKwargs& kwargs);
  /// Calls the function `target`.
  virtual c10::IValue call_function(const std::string& target, std::vector<c10::IValue>& args, ValueKwargs& kwargs);
  /// Calls the submodule `target`.
  virtual c10::IValue call_module(const std::string& target, std::vector<c10::IValue>& args, ValueKwargs& kwargs);
  /// Calls method `target` on args[0].
  virtual c10::IValue call_method(const std::string& target, std::vector<c10::IValue>& args, ValueKwargs& kwargs);
  /// Returns args[0].
  virtual c10::IValue output(const std::string& target, std::vector<c10::IValue>& args, ValueKwargs& kwargs);

  /// The values of n's args and kwargs, looked up in the env.
  std::pair<std::vector<c10::IValue>, ValueKwargs> fetch_args_kwargs_from_env(Node* n);
  /// `arg` with every node replaced by its value; `n` is the node being run
  /// (named in errors).
  c10::IValue map_nodes_to_values(const Argument& arg, Node* n);
  /// The tensor or module attribute at `target` of the module.
  c10::IValue fetch_attr(const std::string& target);

  /// The module being interpreted.
  GraphModule& module() const { return *module_; }
  /// The values computed so far.
  Env& env() { return env_; }
  /// The node being run (nullptr outside run()).
  Node* current_node() const { return current_; }
  /// Accept (and ignore) more arguments than placeholders, as torch.fx does.
  void allow_extra_args(bool allow) { allow_extra_args_ = allow; }

 protected:
  std::shared_ptr<GraphModule> module_;
  Env env_;
  bool garbage_collect_values_;

 private:
  struct Cache;
  Cache& cache();
  c10::IValue run_impl(std::vector<c10::IValue> args, Env env);
  std::unique_ptr<Cache> cache_;
  std::vector<c10::IValue> args_iter_;
  std::vector<c10::IValue> spare_args_;  // run_node's argument vector, reused
  size_t next_arg_ = 0;
  Node* current_ = nullptr;
  bool allow_extra_args_ = false;
};

/// Builds a new GraphModule by interpreting a module's graph symbolically:
/// every opcode method returns the Argument (usually a new Node) that stands
/// for the value in the new graph. Override a method to rewrite those nodes.
class Transformer {
 public:
  explicit Transformer(std::shared_ptr<GraphModule> module);
  virtual ~Transformer();

  /// Runs the transformation and returns the new module (same root attributes).
  std::shared_ptr<GraphModule> transform();

  /// Maps one node of the old graph into the new one. Like torch.fx 1.13,
  /// no meta is copied onto the new node (tensor_meta may no longer hold
  /// after an override); only the stack trace is kept, as torch.fx keeps it
  /// under fx.traceback.override_stack_trace.
  virtual Argument run_node(Node* n);
  /// A new placeholder (default value: args[0], if any).
  virtual Argument placeholder(const std::string& target, const ArgList& args, const Kwargs& kwargs);
  /// A new get_attr node with the same target.
  virtual Argument get_attr(const std::string& target, const ArgList& args, const Kwargs& kwargs);
  /// A new call_function node.
  virtual Argument call_function(const std::string& target, const ArgList& args, const Kwargs& kwargs);
  /// A new call_module node with the same target.
  virtual Argument call_module(const std::string& target, const ArgList& args, const Kwargs& kwargs);
  /// A new call_method node.
  virtual Argument call_method(const std::string& target, const ArgList& args, const Kwargs& kwargs);
  /// The value the new graph returns: args[0].
  virtual Argument output(const std::string& target, const ArgList& args, const Kwargs& kwargs);

  /// The graph being built.
  Graph& new_graph() { return *new_graph_; }
  /// The module being transformed.
  GraphModule& module() const { return *module_; }
  /// The old node being mapped.
  Node* current_node() const { return current_; }

 protected:
  std::shared_ptr<GraphModule> module_;
  std::shared_ptr<Graph> new_graph_;

 private:
  std::unordered_map<const Node*, Argument> env_;
  Node* current_ = nullptr;
};

}  // namespace fx
