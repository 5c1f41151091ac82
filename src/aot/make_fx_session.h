#pragma once
/// \file
/// MakeFxSession: the OpRecorder that turns the ATen calls reaching
/// PrivateUse2 during one make_fx trace into nodes of a graph.
///
/// Every call with a tracer tensor among its arguments, and every factory
/// (no tensor argument), becomes a call_function node whose target is the
/// exact overload; the operator then runs on the example values and its
/// tensor results come back as new tracer tensors. Calls on ordinary tensors
/// only run, untraced (their results are constants of the graph).
/// Writes are functionalised as fx/aot.h describes.

#include "aot/dispatch.h"
#include "aot/tracer_tensor.h"

#include <fx/graph.h>
#include <fx/graph_module.h>

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace fx::aot_impl {

/// Records one make_fx trace. Construct, add the inputs, run the function
/// inside a RecordingScope on this session, then finish() with its result.
class MakeFxSession final : public OpRecorder {
 public:
  MakeFxSession();
  ~MakeFxSession() override;

  /// A placeholder named `name` for tensor `example` (copied: the trace
  /// never writes the caller's tensor); returns the tracer to pass to the
  /// function. With requires_grad the tracer is a leaf autograd tracks.
  at::Tensor add_input(const at::Tensor& example, const std::string& name, bool requires_grad);
  /// A placeholder named `name` standing for the ordinary tensor `t` (a
  /// module's parameter or buffer): the function keeps using `t` itself
  /// (autograd sees the real leaf), the graph reads the placeholder, and
  /// operators compute with a private copy of it - made when an operator
  /// first writes it for a parameter (a leaf that requires grad, which a
  /// training step only reads: no copy of the weights per trace), at once
  /// for anything else. Before the first recorded call: placeholders come
  /// first.
  void bind(const at::Tensor& t, const std::string& name);
  /// Like add_input, but the placeholder goes right after the last one
  /// (the tangents of a joint graph, made once the forward has run).
  at::Tensor add_late_input(const at::Tensor& example, const std::string& name);
  /// The example value of a traced tensor (a tracer or a bound tensor).
  const at::Tensor& example_of(const at::Tensor& t) const;
  /// Whether `t` is a tracer of this session or a bound tensor.
  bool is_traced(const at::Tensor& t) const;
  /// The graph argument of a value the function returned (tensors, None,
  /// tuples and lists of them); throws fx::TraceError for anything else.
  Argument output_argument(const c10::IValue& value, const std::string& where);
  /// Writes the inputs' final values back (aten::copy_), adds the output
  /// node and builds the GraphModule (constants as its attributes).
  std::shared_ptr<GraphModule> finish(const Argument& output);

  void handle(const c10::OperatorHandle& op, torch::jit::Stack* stack) override;

  /// The graph being recorded.
  Graph& graph() { return *graph_; }

 private:
  struct Written;
  /// The graph argument of any boxed value of schema type `type`.
  Argument argument_of(const c10::IValue& v, const c10::TypePtr& type);
  /// The node of a tensor argument: a tracer's node or a constant's get_attr.
  Node* tensor_node(const at::Tensor& t);
  /// `v` with every tracer replaced by its example value.
  c10::IValue unwrap(const c10::IValue& v) const;
  /// Whether another live traced tensor shares the example storage of `t`.
  bool aliased(const at::Tensor& t) const;
  /// The node a traced tensor stands for now, and repointing it.
  Node* current_node(const at::Tensor& t) const;
  void set_current(const at::Tensor& t, Node* n);
  void track_storage(const at::Tensor& example, const at::Tensor& owner);
  /// Gives the bound tensor `t` its private copy before `target` writes it
  /// (a no-op for tracers and bound tensors that have one).
  void copy_on_write(const at::Tensor& t, const std::string& target);
  /// Wraps the operator's results (on the stack) as tracers of `node`.
  void wrap_results(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t base, Node* node,
                    const std::vector<Written>& written);
  at::Tensor new_tracer(const at::Tensor& example, Node* node);

  uint64_t id_;
  std::shared_ptr<Graph> graph_;
  std::shared_ptr<torch::nn::Module> root_;
  /// The inputs (tracers of add_input, bound tensors) by placeholder, in
  /// order: finish() writes back those whose value changed.
  std::vector<std::pair<Node*, at::Tensor>> inputs_;
  /// Every live tracer by the storage of its example (alias detection).
  std::unordered_map<const c10::StorageImpl*, std::vector<c10::weak_intrusive_ptr<c10::TensorImpl>>> by_storage_;
  /// Constants (ordinary tensors the function used) by TensorImpl.
  std::unordered_map<const c10::TensorImpl*, std::pair<at::Tensor, Node*>> constants_;
  /// Bound ordinary tensors (kept alive by inputs_): current node and example.
  struct Bound {
    Node* node;
    at::Tensor example;
    bool shared;  // example aliases the caller's tensor (until copy_on_write)
  };
  std::unordered_map<const c10::TensorImpl*, Bound> bound_;
  at::Tensor rng_state_;
};

}  // namespace fx::aot_impl
