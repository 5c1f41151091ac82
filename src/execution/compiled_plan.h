#pragma once
// Internal: the compiled form of a GraphModule's graph.
//
// Compilation walks the graph once and resolves everything a run needs:
// every call_function / call_method target to its dispatcher operator (or
// builtin / registered function / built-in method), every call_module target
// to the submodule and its registered forward, every get_attr to the tensor,
// and every value to a slot of a small frame (slots are reused once their
// value is dead, so the frame holds only the live values). Each step lists
// the slots whose value it reads for the last time; they are cleared right
// after it runs. A run is a loop over compact steps reading argument pointers
// straight from slots or constants: no string, map or virtual lookup per node.

#include <fx/graph_module.h>
#include <fx/shape_guard.h>

#include "targets/operator_call.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fx::detail {

/// Where an argument value comes from at run time.
struct ValueSource {
  enum class Kind : uint8_t {
    Slot,       ///< frame[index]: the value of an earlier node
    Constant,   ///< constants[index]: a literal or a get_attr tensor
    Aggregate,  ///< aggregates[index]: a list/tuple/dict holding nodes, built per run
  };
  Kind kind = Kind::Constant;
  uint32_t index = 0;
};

/// One node of the graph, ready to run (the hot, compact part).
struct Step {
  enum class Kind : uint8_t {
    Operator,        ///< call_function of a dispatcher operator
    MethodOperator,  ///< call_method resolved to aten::<method>
    Function,        ///< other call_function (builtin, registered function)
    Method,          ///< built-in method (size, to ...)
    Module,          ///< call_module
    Output,
  };
  Kind kind = Kind::Function;
  /// The slot the result goes to.
  uint32_t out = 0;
  /// sources[args_begin, +num_args) are the args, the kwargs follow.
  uint32_t args_begin = 0;
  uint32_t num_args = 0;
  uint32_t num_kwargs = 0;
  /// frees[frees_begin, +num_frees): slots read here for the last time.
  uint32_t frees_begin = 0;
  uint32_t num_frees = 0;
  /// The operator of Operator / MethodOperator steps.
  const OperatorCall* op = nullptr;
  /// Index into the plan's cold data for this step.
  uint32_t cold = 0;
};

/// The rest of a step: what it owns, and the node for error messages.
struct StepData {
  std::unique_ptr<FunctionCall> function;
  std::unique_ptr<MethodCall> method;
  std::shared_ptr<torch::nn::Module> module;
  const ModuleForward* forward = nullptr;
  /// Valid while the graph is unchanged (a changed graph is never run).
  const Node* node = nullptr;
};

/// A graph input.
struct PlanInput {
  std::string name;
  /// nullopt if the placeholder has no users (the value is dropped at once).
  std::optional<uint32_t> slot;
  /// The placeholder's default value, if it has one.
  std::optional<c10::IValue> default_value;
  /// The shape and dtype a given value must have (meta["shape_guard"]).
  std::optional<ShapeGuard> guard;
};

/// The compiled form of one version of a GraphModule's graph.
class CompiledPlan {
 public:
  /// Compiles `module`'s current graph; throws fx::Error naming the node for
  /// a target that cannot be resolved.
  explicit CompiledPlan(GraphModule& module);
  CompiledPlan(const CompiledPlan&) = delete;
  CompiledPlan& operator=(const CompiledPlan&) = delete;

  /// Runs the plan; `inputs` are consumed.
  c10::IValue run(std::vector<c10::IValue>& inputs) const;

  /// How many slots a run's frame has (at most the number of live values).
  size_t num_slots() const { return num_slots_; }

  /// The graph and versions this plan was compiled from.
  const Graph* graph = nullptr;
  uint64_t graph_version = 0;
  uint64_t module_version = 0;

 private:
  ValueSource source_of(const Argument& arg);
  const c10::IValue& build_aggregate(const ValueSource& s, const c10::IValue* frame,
                                     std::vector<c10::IValue>& built) const;
  [[noreturn]] void rethrow_in_step(size_t step) const;

  std::vector<PlanInput> inputs_;
  std::vector<Step> steps_;
  /// Per step: the operator entry its last call resolved to, if that entry
  /// can be called directly with the step's values (checked every call).
  std::unique_ptr<std::atomic<const OperatorCall::Entry*>[]> direct_entries_;
  std::vector<StepData> step_data_;
  std::vector<ValueSource> sources_;
  std::vector<uint32_t> frees_;
  std::vector<c10::IValue> constants_;
  std::vector<Argument> aggregates_;
  /// Node id → where its value lives (for nodes inside aggregates; a slot is
  /// valid only while its node's value is live, which is when aggregates read it).
  std::vector<ValueSource> node_values_;
  uint32_t num_slots_ = 0;
  size_t max_aggregates_ = 0;
  size_t max_call_args_ = 0;
};

}  // namespace fx::detail
