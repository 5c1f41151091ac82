#pragma once
// Internal: which call_function target stands for a TorchScript operator node.
//
//  - operators the c10 dispatcher knows keep their name: "aten::conv2d",
//    "aten::add.Tensor" (the overload only when asked for);
//  - Python arithmetic and comparisons on ints, floats, lists and strings
//    (aten::add.int, aten::floordiv.int, aten::eq.int, aten::__getitem__.t ...),
//    which only the TorchScript interpreter knows, become torch.fx's
//    builtins: operator.add, operator.floordiv, operator.eq, operator.getitem;
//  - operators TorchScript's interpreter implements itself (aten::warn,
//    prim::RaiseException, aten::format, aten::__is__, prim::TupleIndex ...)
//    become fxcpp's builtins of the same name (src/targets/script_builtins.cpp);
//  - any other TorchScript-only operator (aten::size, aten::dim, aten::format,
//    prim::NumToTensor ...) is registered with fx::register_function under
//    "ns::name.overload" ("aten::size.default") and runs the TorchScript
//    operator's own implementation.

#include <ATen/core/jit_type.h>

#include <string>

namespace torch::jit {
struct Node;
}  // namespace torch::jit

// The namespace is still import_detail: these helpers moved from src/import to
// src/torchscript (fxcpp_torchscript) so that fx::load needs no importer; the
// name was kept to limit churn.
namespace fx::import_detail {

/// A call_function target for a TorchScript operator node.
struct JitTarget {
  /// What runs it.
  enum class Kind { Dispatcher, Builtin, Registered };
  Kind kind;
  /// The call_function target name.
  std::string target;
};

/// Whether `type` is a Tensor or holds one (Tensor[], (Tensor, int), Tensor? ...).
bool mentions_tensor(const c10::TypePtr& type);

/// The target for `node` (which must have an operator); registers a function
/// for TorchScript-only operators. `overload_names`: keep dispatcher
/// overload names in targets.
JitTarget resolve_jit_target(const torch::jit::Node* node, bool overload_names);

/// Registers the function of a TorchScript-only operator from its target
/// name alone ("aten::append.t", "aten::format.default_3" for a vararg
/// operator called with 3 inputs), as resolve_jit_target registered it at
/// import: fx::load calls it for such targets in a fresh process. False
/// when no TorchScript operator has that name and overload.
bool register_jit_target(const std::string& target);

/// Registers a call_function target that TorchScript import registers while
/// importing, from its name: a TorchScript-only operator (register_jit_target)
/// or a run-time list / dict constructor ("prim::ListConstruct.Tensor",
/// "prim::DictConstruct.Dict_str_Tensor"), whose element types are read
/// back from the name. False when `target` is none of these (or its type
/// name is ambiguous).
bool register_import_target(const std::string& target);

/// Registers `target` as a run-time constructor of `type` (a ListType: a new
/// list of the arguments; a DictType: key, value, key, value ...), a new
/// object on every call.
void register_construct_function(const std::string& target, const c10::TypePtr& type);

/// The list or dict type a run-time constructor target builds
/// ("prim::ListConstruct.Tensor" → List[Tensor], "prim::DictConstruct.Dict_str_Tensor"
/// → Dict[str, Tensor]); nullptr for any other target (or an ambiguous name).
c10::TypePtr construct_target_type(const std::string& target);

/// Whether running `node`'s Operation needs its number of inputs pushed on
/// the stack after the inputs: vararg operators with a plain Operation
/// (aten::format, prim::Print, aten::percentFormat ...) pop it first, as
/// TorchScript's interpreter pushes it (its OPN instruction).
bool pushes_num_inputs(const torch::jit::Node& node);

}  // namespace fx::import_detail
