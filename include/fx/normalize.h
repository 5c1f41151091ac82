#pragma once
/// \file
/// Argument normalization (torch.fx `operator_schemas.normalize_function`,
/// `normalize_module`, `Node.normalized_arguments`): a call's args and kwargs
/// matched up to the target's signature, defaults filled in.
///
/// A call_function target's signature is its operator schema ("aten::add.Tensor":
/// `input, other, *, alpha=1`; `self` is called `input`, as torch.fx names
/// it). A bare operator name ("aten::add") has several overloads: those the
/// call binds to by count and name are candidates; one candidate is used, more
/// need argument types to choose (NormalizeOptions::arg_types), as in torch.fx
/// — except that a bare name is also how fxcpp spells an operator's default
/// overload (torch.fx's aten.conv2d.default prints as "aten::conv2d"), so a
/// binding default overload is taken without types.
/// A call_module target's signature is its module's forward: torch::nn
/// layers have their Python forward's parameter names (Linear: `input`;
/// LSTM: `input, hx=None`; MultiheadAttention: `query, key, value, ...`),
/// imported TorchScript torch.nn leaves their scripted forward's. Builtins
/// (operator.add ...), registered C++ functions and other modules give
/// nullopt, as torch.fx gives None.
///
/// Differences from torch.fx 1.13: Node.normalized_arguments there ignores
/// normalize_to_only_use_kwargs (fixed upstream later); here it is honoured.
/// Argument types are schema type strings ("Tensor", "int", "float[]")
/// instead of Python types; the ambiguity error lists candidate schemas in
/// TorchScript syntax.

#include <fx/argument.h>

#include <functional>
#include <optional>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace fx {

/// Normalized arguments (torch.fx ArgsKwargsPair): positional arguments, then
/// every other parameter by name, in the signature's order.
struct ArgsKwargsPair {
  ArgList args;
  Kwargs kwargs;
};

/// How normalize_function / normalize_module / Node::normalized_arguments work.
struct NormalizeOptions {
  /// Types of the positional arguments, as schema type strings ("Tensor",
  /// "int", "float", "int[]", "Tensor?"), to choose among overloads.
  std::optional<std::vector<std::string>> arg_types;
  /// Types of the keyword arguments by name, as arg_types.
  std::optional<std::vector<std::pair<std::string, std::string>>> kwarg_types;
  /// Every argument by name (args empty).
  bool normalize_to_only_use_kwargs = false;
};

/// One parameter of a module's forward.
struct ForwardParameter {
  std::string name;
  /// The default value, if the parameter has one.
  std::optional<Argument> default_value;
  /// Keyword only (after `*`).
  bool kwarg_only = false;
};

/// Tells normalize_module the forward signature of modules whose dynamic
/// type is `type`: fn returns the parameters without `self`, or nullopt when
/// the module cannot be normalized. torch::nn layers are known.
void register_module_signature(std::type_index type,
                               std::function<std::optional<std::vector<ForwardParameter>>(const torch::nn::Module&)> fn);

/// Normalizes a call of `target` (torch.fx normalize_function); nullopt if
/// the target has no schema (builtins, registered functions, unknown names)
/// or the call binds to none. Throws fx::Error if it binds to several
/// overloads and no argument types choose one.
std::optional<ArgsKwargsPair> normalize_function(const std::string& target, const ArgList& args,
                                                 const Kwargs& kwargs, const NormalizeOptions& options = {});

/// Normalizes a call of the submodule `target` of `root` (torch.fx
/// normalize_module); nullopt for modules of types without a known
/// signature. Throws fx::Error "Tried to normalize node with target T but
/// root did not have that target!" when there is no such submodule.
std::optional<ArgsKwargsPair> normalize_module(const torch::nn::Module& root, const std::string& target,
                                               const ArgList& args, const Kwargs& kwargs,
                                               const NormalizeOptions& options = {});

}  // namespace fx
