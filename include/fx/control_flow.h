#pragma once
/// \file
/// Structured control flow in a graph: `if` and loops whose condition or trip
/// count is only known at run time, as torch.export's torch.cond and
/// torch.while_loop keep them.
///
/// A conditional is one call_module node whose target is a CondModule; its
/// branches are GraphModules of their own (children `true_graph` and
/// `false_graph`) with explicit operands and results:
///
///     %cond_0 = call_module[target=cond_0](args = (%pred, %x, %w))
///     %y = call_function[target=operator.getitem](args = (%cond_0, 0))
///
/// Each branch graph has one placeholder per operand (in order) and returns
/// the conditional's results: the value itself when there is one, a tuple
/// when there are several, None when there are none. A loop is a call_module
/// of a WhileLoopModule, TorchScript's prim::Loop: up to `trip_count`
/// iterations while `condition` holds; its `body` graph takes (iteration,
/// *carried, *operands) and returns (condition, *carried).
///
/// Everything that runs graphs runs these: GraphModule::forward and the
/// Interpreter call them like any module (a registered module forward);
/// print_readable shows the branch and body classes; call_module nodes are
/// never removed as dead code; fx::for_each_subgraph visits every graph
/// below a GraphModule, so passes can recurse into them.

#include <fx/graph_module.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fx {

/// `if pred: true_graph(*operands) else: false_graph(*operands)` (torch.cond).
class CondModule : public torch::nn::Module {
 public:
  /// Both branches take the same operands and return the same number of results.
  CondModule(std::shared_ptr<GraphModule> true_graph, std::shared_ptr<GraphModule> false_graph,
             size_t num_results);
  /// args = (pred, *operands): pred is a bool, an int or a one-element tensor.
  c10::IValue forward(std::vector<c10::IValue> args);
  /// The branch run when the predicate holds.
  GraphModule& true_graph() const { return *true_graph_; }
  /// The branch run otherwise.
  GraphModule& false_graph() const { return *false_graph_; }
  /// How many values the conditional returns (a tuple when not 1).
  size_t num_results() const { return num_results_; }

 private:
  std::shared_ptr<GraphModule> true_graph_;
  std::shared_ptr<GraphModule> false_graph_;
  size_t num_results_;
};

/// TorchScript's prim::Loop as a module: `for i in range(trip_count) while
/// condition: (condition, *carried) = body(i, *carried, *operands)`.
class WhileLoopModule : public torch::nn::Module {
 public:
  /// `body` takes (i, *carried, *operands) and returns (condition, *carried).
  WhileLoopModule(std::shared_ptr<GraphModule> body, size_t num_carried);
  /// args = (trip_count, condition, *carried, *operands); returns the carried
  /// values after the last iteration (one value, a tuple, or None).
  c10::IValue forward(std::vector<c10::IValue> args);
  /// The loop body.
  GraphModule& body() const { return *body_; }
  /// How many values the loop carries from one iteration to the next.
  size_t num_carried() const { return num_carried_; }

 private:
  std::shared_ptr<GraphModule> body_;
  size_t num_carried_;
};

/// The GraphModules directly held by a control-flow module (branches, body);
/// empty for any other module.
std::vector<std::pair<std::string, GraphModule*>> control_flow_graphs(const torch::nn::Module& module);

/// Calls `fn(path, gm)` for every GraphModule nested below `gm` through
/// control-flow modules (not `gm` itself), depth first, inner graphs first:
/// "cond_0.true_graph", "cond_0.true_graph.loop_1.body" ...
void for_each_subgraph(GraphModule& gm, const std::function<void(const std::string& path, GraphModule& sub)>& fn);

/// How a predicate value reads as a bool: a bool, an int (non-zero), or a
/// one-element tensor. Throws fx::Error otherwise.
bool predicate_value(const c10::IValue& pred);

}  // namespace fx
