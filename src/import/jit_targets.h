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

#include <ATen/core/jit_type_base.h>

#include <string>

namespace torch::jit {
struct Node;
}  // namespace torch::jit

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

/// Whether running `node`'s Operation needs its number of inputs pushed on
/// the stack after the inputs: vararg operators with a plain Operation
/// (aten::format, prim::Print, aten::percentFormat ...) pop it first, as
/// TorchScript's interpreter pushes it (its OPN instruction).
bool pushes_num_inputs(const torch::jit::Node& node);

/// Registers "torch._assert" (condition, message): throws the message when the
/// condition is false, as torch._assert does. Impure, so never eliminated.
void register_assert_function();

}  // namespace fx::import_detail
