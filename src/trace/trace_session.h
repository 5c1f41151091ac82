#pragma once
/// \file
/// TraceSession: the OpHandler that turns the operator calls of one trace
/// into nodes of an fx::Graph.
///
/// For every call it decides: record it (a proxy or a parameter is involved),
/// run it on buffer copies (only buffers are involved), or just run it (only
/// ordinary tensors). A recorded call becomes a call_function node whose
/// target is the exact overload; the operator then runs on the example values
/// under InferenceMode and its tensor results come back as new proxies.

#include "trace/dispatch_hook.h"
#include "trace/proxy_tensor.h"

#include <fx/argument.h>
#include <fx/graph.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/nn/module.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fx::trace_impl {

/// A recorded call_function: the operator and all its arguments, defaults
/// filled in, in schema order (what leaf-module folding matches against).
struct RecordedCall {
  c10::OperatorHandle op;
  std::vector<Argument> full_args;
};

/// A tensor the graph reaches through get_attr: a root parameter or buffer,
/// or a constant the traced code used.
struct AttrTensor {
  enum class Kind { Parameter, Buffer, Constant };
  std::string name;  ///< qualified name (or _tensor_constantN)
  Kind kind = Kind::Constant;
  at::Tensor tensor;   ///< the original (kept alive for the whole trace)
  at::Tensor example;  ///< what operators compute with (a private copy once written)
  bool copied = false;  ///< example is a private copy
  Node* node = nullptr;      ///< the get_attr node, once used
  Node* current = nullptr;   ///< the node holding its current value (after in-place writes)
};

/// What recorded operators compute with.
enum class ExampleValues {
  Real,  ///< the example values (one eager forward)
  Meta,  ///< meta tensors of the same metadata; ops without a meta kernel run on zeros
};

/// Records the operator calls of one trace into a graph.
class TraceSession final : public OpHandler {
 public:
  /// Records into `graph`; `root` (may be null) provides the parameters and
  /// buffers that become get_attr nodes. With `record_factories`, operators
  /// without tensor arguments (aten::arange, aten::zeros ...) are recorded
  /// and return proxies instead of running as constants.
  TraceSession(Graph& graph, const torch::nn::Module* root, bool record_factories = false,
               ExampleValues values = ExampleValues::Real);
  ~TraceSession() override;

  /// A placeholder named `name` for `example` (a tensor, or a list/tuple of
  /// tensors); returns the proxy value to pass to the traced code.
  c10::IValue add_input(const c10::IValue& example, const std::string& name);
  /// The output argument for the value the traced code returned.
  Argument output_argument(const c10::IValue& value);

  void handle(const c10::OperatorHandle& op, torch::jit::Stack* stack) override;

  /// Every call_function node recorded, with its full arguments.
  const std::unordered_map<const Node*, RecordedCall>& calls() const { return calls_; }
  /// The constants created, in creation order.
  const std::vector<const AttrTensor*>& constants() const { return constants_; }
  /// The get_attr target → tensor table (parameters, buffers, constants).
  const AttrTensor* find_attr(const std::string& name) const;
  /// This trace's id (proxies of other traces are rejected).
  uint64_t id() const { return id_; }
  /// With ExampleValues::Meta: the operators that had no meta kernel and ran
  /// on real zero-filled values, in the order first met.
  const std::vector<std::string>& fallbacks() const { return fallbacks_; }

 private:
  struct Scan;
  void scan(const c10::IValue& v, Scan& s) const;
  void run_untraced(const c10::OperatorHandle& op, torch::jit::Stack* stack, bool substitute_buffers);
  void record(const c10::OperatorHandle& op, torch::jit::Stack* stack, bool grad_enabled);

  /// The graph argument for a tensor (node, get_attr, constant) or None.
  Argument tensor_argument(const at::Tensor& t);
  /// The graph argument for any boxed value of schema type `type`.
  Argument value_argument(const c10::IValue& v, const c10::TypePtr& type);
  /// The node a proxy stands for (creating getitem nodes on first use).
  Node* resolve(const ProxyTensorImpl& p);
  /// The attr entry of an ordinary tensor (nullptr if not a parameter/buffer
  /// and `create_constant` is false).
  AttrTensor* attr_for(const at::Tensor& t, bool create_constant);
  /// How unwrap converts tensors.
  enum class As { Example, Meta, Zeros };
  /// The example value to compute with in place of `t`.
  at::Tensor example_of(const at::Tensor& t, bool substitute_buffers, As as = As::Example);
  /// `v` with every proxy / attr tensor replaced by its example value (As::
  /// Meta: by a meta tensor of its metadata; As::Zeros: proxies by real
  /// zero-filled tensors on the trace's device).
  c10::IValue unwrap(const c10::IValue& v, bool substitute_buffers, As as = As::Example);
  /// Runs `op` on the stack's arguments (originals: as the traced code
  /// passed them) on the example values; with meta values, an operator that
  /// fails on meta runs again on zeros and its tensor results become meta.
  void compute(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::vector<c10::IValue>& originals,
               const std::string& target);
  /// Whether a traced value requires grad (for tensor_meta).
  bool requires_grad_of(const at::Tensor& t) const;

  Graph& graph_;
  uint64_t id_;
  bool record_factories_;
  ExampleValues values_;
  c10::optional<c10::Device> device_;  ///< what meta proxies report (the first input's device)
  std::vector<std::string> fallbacks_;
  std::unordered_map<const c10::TensorImpl*, std::unique_ptr<AttrTensor>> attrs_;
  std::unordered_map<std::string, AttrTensor*> attrs_by_name_;
  std::vector<const AttrTensor*> constants_;
  std::map<std::pair<const Node*, int64_t>, Node*> getitems_;
  std::unordered_map<const Node*, RecordedCall> calls_;
};

/// Whether a schema type holds tensors (Tensor, Tensor?, Tensor[] ...).
bool type_has_tensor(const c10::TypePtr& t);

/// Whether `target` (with `schema`) returns the value, not the metadata, of
/// a tensor (item(), is_nonzero, equal, a Scalar computed from data): what
/// no trace can record.
bool reads_value(const std::string& target, const c10::FunctionSchema& schema);

/// The graph argument of a boxed operator argument of schema type `type`
/// (its real_type: dtypes, layouts and memory formats come back typed);
/// tensors, also inside lists and tuples, through `tensor`.
Argument boxed_argument(const c10::IValue& v, const c10::TypePtr& type,
                        const std::function<Argument(const at::Tensor&)>& tensor);

}  // namespace fx::trace_impl
