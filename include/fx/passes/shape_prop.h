#pragma once
/// \file
/// ShapeProp: runs a GraphModule node by node and records the shape, dtype,
/// strides and memory format of every value in `node->meta()["tensor_meta"]`
/// (torch.fx `torch.fx.passes.shape_prop.ShapeProp`).
///
/// Why: passes that need shapes (splitting, memory planning, fusion, lowering
/// to other runtimes) read them from tensor_meta, on any GraphModule: traced,
/// imported from TorchScript, or built by hand.
///
/// What it stores, on every node whose value holds a tensor:
///  - a tensor: fx::TensorMetadata (fx/tensor_meta.h);
///  - a tuple, list or dict holding tensors: std::vector<TensorMetadata>, the
///    tensors flattened in order, depth first (the format symbolic_trace
///    writes, so every consumer reads one format);
///  - `meta["type"]`: Python's name of the value's type, as a std::string
///    ("torch.Tensor", "tuple", "list", "int", "float", "bool", "NoneType",
///    "str", "dict", "torch.dtype", "torch.device", "object").
/// A node whose value holds no tensor (an int from size(), None) gets no
/// tensor_meta.
///
/// Two modes:
///  - propagate(inputs): runs the graph on the given values, as torch.fx does;
///  - propagate_meta(inputs): computes no data. Input tensors become tensors
///    on the meta device (at::kMeta) with the same sizes, strides, dtype and
///    requires_grad; get_attr tensors too (never read). call_function and
///    call_method run on the meta tensors; call_module runs the leaf's own
///    forward (C++ or TorchScript) on meta inputs, so its parameters are
///    passed along but never read (every kernel it reaches is a Meta kernel).
///    When an operator fails on meta (libtorch 1.13's C++ build has no Meta
///    kernel for it), the node falls back to real execution on zero-filled
///    tensors of the same metadata (get_attr inputs with their real values),
///    its results are turned back into meta tensors, and the node is listed
///    in fallback_nodes(). To make the common models fall back nowhere,
///    propagate_meta registers C++ shape functions as Meta kernels for the
///    operators that have none in libtorch 1.13 (convolution, batch norm,
///    adaptive pooling, hardtanh ... see register_meta_shape_functions()):
///    resnet18/50, mobilenet_v2/v3, densenet121, efficientnet_b0,
///    shufflenet_v2, squeezenet and alexnet run entirely on meta, in about
///    0.2 % of one real forward for resnet50 (bench/shape_prop_bench.cpp).
///
/// Differences from torch.fx (on purpose):
///  - All or nothing: if a node fails, fx::Error is thrown and no node's meta
///    changes (torch.fx has already written the nodes before the failure).
///    The message keeps torch.fx's first line ("ShapeProp error for:
///    node=... with meta=...") and adds the cause, which torch.fx only prints
///    to stderr.
///  - A node whose value holds no tensor loses a stale tensor_meta (torch.fx
///    keeps whatever an earlier run left there).
///  - memory_format is the first of contiguous_format, channels_last,
///    channels_last_3d the tensor is contiguous in; torch.fx iterates a
///    Python set of the three, so a tensor contiguous in two formats (a
///    [N, C, 1, 1] tensor) gets either one depending on the process's hashes.
///  - Tuples and lists are flattened to std::vector<TensorMetadata> (torch.fx
///    keeps the nesting and the non-tensor items); meta["type"] is a string.
///  - The meta mode and its fallback list are fxcpp's; torch.fx 1.13 only
///    runs on real data (or on FakeTensors, through Python meta kernels).
///
/// Control flow (fx/control_flow.h): a cond call propagates into both
/// branches (each a ShapeProp of its own, in the same mode, on the cond's
/// operands), so the nodes inside get tensor_meta whichever branch the
/// inputs take; the value passed on is the taken branch's. The cond node's
/// tensor_meta is the branches' when both agree, none when they differ (its
/// shape then depends on the data). A branch that raises on these operands
/// (an untaken check) keeps no tensor_meta. A loop body propagates once,
/// on (0, *carried, *operands); when it returns the carried values with the
/// metadata they came in with, its meta holds for every iteration and the
/// loop node gets tensor_meta; otherwise the body and the loop node get
/// none. Nested graphs' meta is committed with the rest: all or nothing.
///
/// Meta mode caveats: aten::group_norm on a channels_last input gives
/// contiguous strides (libtorch's composite makes non-CPU inputs contiguous
/// before the kernel; the CPU keeps channels_last). An operator that reads data (item(), nonzero) falls
/// back and computes on zeros, so data-dependent shapes are those of zero
/// inputs; a leaf module in training mode still bumps its counters
/// (BatchNorm's num_batches_tracked += 1), as it does in real mode.

#include <fx/interpreter.h>
#include <fx/meta_kernels.h>
#include <fx/passes/pass_manager.h>
#include <fx/tensor_meta.h>

#include <any>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fx {

class CondModule;
class WhileLoopModule;

/// Records the shape of every value of a GraphModule (torch.fx ShapeProp).
class ShapeProp : public Interpreter {
 public:
  /// Propagates through `module`'s graph (which it annotates).
  explicit ShapeProp(std::shared_ptr<GraphModule> module);
  ~ShapeProp() override;

  /// Runs the graph on `args` and records every node's tensor_meta and type
  /// (torch.fx ShapeProp.propagate). Returns the graph's result. Throws
  /// fx::Error naming the failing node; then no node's meta has changed.
  c10::IValue propagate(std::vector<c10::IValue> args);
  /// As propagate(), computing no data: tensors in `args` (real or meta) are
  /// replaced by meta tensors of the same metadata, and so is the result.
  /// Nodes that had to run on real (zero) data are in fallback_nodes().
  c10::IValue propagate_meta(std::vector<c10::IValue> args);

  /// The nodes the last propagate_meta() ran on real zero-filled tensors
  /// because their operator failed on meta tensors, in graph order.
  const std::vector<Node*>& fallback_nodes() const { return fallback_nodes_; }
  /// Whether the run in progress (or the last one) is propagate_meta().
  bool meta_mode() const { return meta_; }

  /// Runs the node and records its value's metadata (committed to the node
  /// when the whole run succeeds).
  c10::IValue run_node(Node* n) override;
  /// In meta mode: a meta tensor with the attribute's metadata.
  c10::IValue get_attr(const std::string& target, std::vector<c10::IValue>& args, ValueKwargs& kwargs) override;
  /// In meta mode: runs on meta tensors, falling back to zeros if that fails.
  c10::IValue call_function(const std::string& target, std::vector<c10::IValue>& args,
                            ValueKwargs& kwargs) override;
  /// In meta mode: runs on meta tensors, falling back to zeros if that fails.
  c10::IValue call_method(const std::string& target, std::vector<c10::IValue>& args,
                          ValueKwargs& kwargs) override;
  /// In meta mode: the leaf's forward on meta inputs, falling back to zeros if that fails.
  c10::IValue call_module(const std::string& target, std::vector<c10::IValue>& args,
                          ValueKwargs& kwargs) override;

 private:
  struct Pending;
  c10::IValue propagate_impl(std::vector<c10::IValue> args, bool meta);
  c10::IValue run_uncommitted(std::vector<c10::IValue> args, bool meta);
  void commit();
  void clear();
  std::optional<c10::IValue> propagate_subgraph(GraphModule& sub, std::vector<c10::IValue> inputs,
                                                std::exception_ptr* failure);
  c10::IValue call_cond(const std::string& target, const CondModule& cond, std::vector<c10::IValue>& args,
                        ValueKwargs& kwargs);
  c10::IValue call_loop(const std::string& target, const WhileLoopModule& loop, std::vector<c10::IValue>& args,
                        ValueKwargs& kwargs);
  template <class Call>
  c10::IValue meta_or_fallback(std::vector<c10::IValue>& args, ValueKwargs& kwargs, Call&& call);
  c10::IValue to_real(const c10::IValue& v) const;

  bool meta_ = false;
  std::vector<Node*> fallback_nodes_;
  std::vector<Pending> pending_;
  // Branches and bodies propagated during the run, committed with it; those
  // that raised (or whose meta does not hold) lose their meta at commit.
  std::vector<std::unique_ptr<ShapeProp>> children_;
  std::vector<GraphModule*> cleared_;
  // The tensor_meta a control-flow call_module decided for its node.
  std::optional<std::any> node_meta_;
  // Meta mode: get_attr's meta copies (kept alive, so their addresses stay
  // unique) → the real attribute, which a fallback uses instead of zeros.
  std::unordered_map<const c10::TensorImpl*, std::pair<at::Tensor, at::Tensor>> real_attrs_;
};

/// The tensor_meta of a value: a TensorMetadata for a tensor, a
/// std::vector<TensorMetadata> (flattened, depth first) for a tuple, list or
/// dict holding tensors; an empty std::any if it holds no (defined) tensor.
std::any tensor_meta_of(const c10::IValue& value);

/// Python's name of the type of `value` ("torch.Tensor", "tuple", "int" ...),
/// what ShapeProp stores in meta["type"].
std::string python_type_name(const c10::IValue& value);

/// A tensor on the meta device with the sizes, strides, dtype and
/// requires_grad of `t` (t's data is never read); `t` itself if it is on
/// meta already. It is an autograd leaf exactly when `t` is, so in-place
/// operators accept or refuse it as they would `t` (a non-leaf with
/// overlapping strides, such as an expanded tensor, becomes a view of a leaf).
at::Tensor to_meta_tensor(const at::Tensor& t);

/// register_meta_shape_functions() (fx/meta_kernels.h) is declared there:
/// symbolic_trace on meta tensors uses the same kernels.

/// ShapeProp as a pass for PassManager: annotates the module and reports it
/// unmodified (only meta changes; the graph does not).
class ShapePropPass : public PassBase {
 public:
  /// Propagates `inputs`, on the meta device if `meta`.
  explicit ShapePropPass(std::vector<c10::IValue> inputs, bool meta = false)
      : inputs_(std::move(inputs)), meta_(meta) {}
  /// "ShapeProp".
  std::string name() const override { return "ShapeProp"; }
  /// Runs ShapeProp on `gm`; returns {gm, false}.
  PassResult call(std::shared_ptr<GraphModule> gm) override;

 private:
  std::vector<c10::IValue> inputs_;
  bool meta_;
};

}  // namespace fx
