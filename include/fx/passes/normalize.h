#pragma once
/// \file
/// Argument normalization (torch.fx `experimental/normalize.NormalizeArgs`,
/// `operator_schemas.normalize_function`).
///
/// Every call_function node calling a dispatcher operator gets its arguments
/// in the schema's canonical form: the overload the call would run is
/// resolved (with the same matching the executor uses, so "aten::add" with
/// (Tensor, Tensor, alpha=2) becomes "aten::add.Tensor"), the target is set
/// to that overload, and every schema argument is bound by name, defaults
/// filled in (self=x, other=y, alpha=2). With normalize_to_only_use_kwargs
/// (the default, as in NormalizeArgs) everything becomes a keyword;
/// otherwise the first len(args) parameters stay positional, as Python's
/// _args_kwargs_to_normalized_args_kwargs does. Why: passes that match
/// patterns or read an argument by name need one spelling per call.
/// Normalizing twice changes nothing; the normalized graph computes the same
/// values.
///
/// How the overload is chosen: from the kinds of the argument values.
/// With example inputs, the graph runs once and the real values decide.
/// Without, kinds are inferred statically: placeholders, get_attr tensors
/// and call_module results are Tensors, a call's result has the return type
/// of its resolved schema (getitem of a Tensor[] is a Tensor). A call whose
/// argument kinds cannot be inferred, or that matches no schema, is left as
/// it is (Python raises on ambiguity instead; here the executor's
/// tie-breaking is deterministic, so the overload chosen is the one that
/// would run).
///
/// Differences from torch.fx:
///  - Targets are ATen schemas, not Python signatures: names are the
///    schema's (aten::relu's `self`, where torch.relu's Python signature
///    says `input`), and the overload is explicit in the target.
///  - call_module nodes are left positional: a C++ module's forward takes
///    positional arguments only (Interpreter rejects keywords), so Python's
///    `{input: x}` form would not run. Builtins (operator.getitem ...),
///    registered C++ functions and call_method nodes are left alone, as in
///    Python.
///  - Values a trailing-varargs call packs (x.view(2, 3) spelled as
///    aten::view(x, 2, 3)) become one list argument (size=[2, 3]).
///  - The graph is rebuilt node for node (same names, same meta) and swapped
///    in only when complete, so an error leaves the module untouched.
///
/// Control flow (fx/control_flow.h): one graph; a cond / loop call has no
/// schema and is left as it is. Branches and bodies are normalized when the
/// pass runs on them (PassManager with recurse_into_subgraphs does that).

#include <fx/passes/pass_manager.h>

#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fx {

/// Options of normalize_args.
struct NormalizeArgsOptions {
  /// Bind every argument by keyword (torch.fx normalize_to_only_use_kwargs).
  bool normalize_to_only_use_kwargs = true;
  /// Inputs to run the graph on once, so that real values choose overloads.
  std::optional<std::vector<c10::IValue>> example_inputs;
};

/// Normalizes every dispatcher call_function node of `gm` (see the file
/// comment). Returns gm (its graph replaced when anything changed). Throws
/// fx::Error naming the pass if gm is null or the example run fails.
PassResult normalize_args(std::shared_ptr<GraphModule> gm, const NormalizeArgsOptions& options = {});

/// The normalized target, args and kwargs of one call_function node, or
/// nullopt if it cannot or need not be normalized. `value_of` gives an
/// example value (or one of the right kind) for each input node, nullopt
/// when unknown.
struct NormalizedCall {
  /// The target with the resolved overload ("aten::add.Tensor").
  std::string target;
  /// Positional arguments (empty with normalize_to_only_use_kwargs).
  ArgList args;
  /// Keyword arguments in schema order.
  Kwargs kwargs;
  /// The schema's return types (for inferring the kinds of users' inputs).
  std::vector<c10::TypePtr> returns;
};
/// normalize_function for one node (torch.fx operator_schemas.normalize_function).
std::optional<NormalizedCall> normalize_function(
    const Node& node, const std::function<std::optional<c10::IValue>(Node*)>& value_of,
    bool normalize_to_only_use_kwargs = true);

/// NormalizeArgs as a PassBase, for PassManager.
class NormalizeArgs : public PassBase {
 public:
  /// A pass with these options.
  explicit NormalizeArgs(NormalizeArgsOptions options = {}) : options_(std::move(options)) {}
  /// "NormalizeArgs".
  std::string name() const override { return "NormalizeArgs"; }
  /// normalize_args(gm, options).
  PassResult call(std::shared_ptr<GraphModule> gm) override { return normalize_args(std::move(gm), options_); }

 private:
  NormalizeArgsOptions options_;
};

}  // namespace fx
