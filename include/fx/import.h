#pragma once
/// \file
/// TorchScript import: turns a `.pt` file saved from Python (torch.jit.script
/// or torch.jit.trace, then .save) into a GraphModule, with the graph
/// torch.fx.symbolic_trace would have given in Python.
///
///  - forward's inputs become placeholders (TorchScript's "x.1" is "x");
///  - a call of a leaf submodule's forward becomes call_module with the
///    submodule's qualified name ("layer1.0.conv1"); the leaf runs its own
///    scripted forward, on the parameters of the loaded module (shared,
///    never copied);
///  - calls of other submodules and methods (_forward_impl ...) and of
///    scripted functions (F.relu ...) are inlined, recursively;
///  - tensors read from modules become get_attr nodes; other attributes
///    (ints, bools, the training flag ...) are constants;
///  - aten operators become call_function nodes with the operator's name
///    ("aten::conv2d", "aten::add.Tensor"); Python arithmetic on ints and
///    floats becomes operator.* builtins; TupleUnpack / ListUnpack /
///    TupleIndex / __getitem__ on run-time values become operator.getitem;
///  - prim::If and prim::Loop whose condition / trip count is known at
///    import are folded or unrolled; the others stay control flow: a
///    call_module of a CondModule / WhileLoopModule whose branches and body
///    are GraphModules of their own (fx/control_flow.h), as torch.cond /
///    torch.while_loop in torch.export;
///  - with ImportOptions::example_inputs, a tensor's rank and dtype
///    (x.dim(), len(x.shape), x.dtype, x.is_floating_point()) are known at
///    import, so conditions on them fold (F.interpolate's `if input.dim() ==
///    3`, nn.LSTM's batch checks); the placeholders then guard rank and dtype
///    (fx/shape_guard.h, every dimension dynamic);
///  - a submodule used only through its tensors (F.linear(x,
///    self.proj.weight)) is not called: its tensors are get_attr nodes, even
///    when a traced file kept no forward for it; a scripted forward that is
///    overloaded (nn.LSTM's forward__0 / forward__1) is a leaf call too.

#include <fx/error.h>
#include <fx/graph_module.h>
#include <fx/torchscript.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace fx {

/// torch.fx's default rule: torch.nn (and torch.ao.nn) module types are
/// leaves, except the containers Sequential, ModuleList, ModuleDict,
/// ParameterList, ParameterDict and plain Module, and the transformer
/// layers TransformerEncoder(Layer) / TransformerDecoder(Layer), which the
/// importer writes out with their attention (docs/capture.md).
bool is_torch_nn_leaf(const torch::jit::Module& module, const std::string& type_name,
                      const std::string& qualified_name);

/// How import_torchscript builds the graph.
struct ImportOptions {
  /// Which submodules are leaves; is_torch_nn_leaf when empty.
  LeafPredicate is_leaf_module;
  /// call_function targets name the exact overload ("aten::add.Tensor");
  /// false gives the bare operator name ("aten::add").
  bool overload_names = true;
  /// Leave out trailing arguments equal to the schema's default value
  /// (aten::add(x, y) instead of aten::add(x, y, 1)).
  bool drop_default_args = true;
  /// Remove nodes whose values nobody uses and that have no side effects
  /// (sizes only read by a folded branch ...).
  bool eliminate_dead_code = true;
  /// Keep the argument checks of torch's own scripted functions (an
  /// `if len(sizes) <= 2: raise ...` inside F.adaptive_avg_pool2d) as
  /// torch._assert nodes. By default they are left out, as torch.fx records
  /// such a function as one call; checks in the model's own code
  /// (torch._assert, assert) always become torch._assert nodes.
  bool keep_torch_checks = false;
  /// Record each node's Python source position in its meta["stack_trace"].
  bool record_stack_traces = true;
  /// Unroll at most this many loop iterations in total (a guard against
  /// loops that never end).
  size_t max_unrolled_iterations = 100000;
  /// Example values of forward's inputs (self not included), as `fxcpp run`
  /// has them. Only the rank and dtype of tensors are used (meta tensors
  /// declare them without data): queries of them fold to constants, and
  /// each tensor placeholder is guarded to its rank and dtype. Sizes are
  /// never specialised: shape-dependent conditions stay conditions.
  std::vector<c10::IValue> example_inputs;
  /// With example_inputs: also take tensor sizes as known (x.size(0),
  /// x.shape), so shape-dependent conditions and loops fold or unroll too; the
  /// placeholders then guard the exact shapes (fx::ShapeGuardError for any
  /// other). Off: sizes stay run-time values and such conditions stay control
  /// flow, valid for every size.
  bool specialize_shapes = false;
};

/// Imports the TorchScript file at `path` (see load_torchscript). Errors
/// libtorch raises while the graph is built (records it reads lazily, such as
/// the debug_pkl source positions) are fx::ImportError lines naming the file.
std::shared_ptr<GraphModule> import_torchscript(const std::string& path, const ImportOptions& options = {});

/// As import_torchscript(path, options) on `module`, already loaded from
/// `path` with load_torchscript (to read its forward's schema first).
std::shared_ptr<GraphModule> import_torchscript(const torch::jit::Module& module, const std::string& path,
                                                const ImportOptions& options);

/// Imports a loaded TorchScript module. The GraphModule's leaves keep
/// references to `module`'s submodules and share its tensors.
std::shared_ptr<GraphModule> import_torchscript(const torch::jit::Module& module,
                                                const ImportOptions& options = {});

}  // namespace fx
