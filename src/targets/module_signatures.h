#pragma once
// Internal: the forward signatures of call_module targets, for
// fx::normalize_module (see fx/normalize.h).

#include <fx/normalize.h>

#include <optional>
#include <vector>

namespace fx::detail {

/// The parameters of `module`'s forward (without self): a registered
/// signature for its dynamic type, else the torch::nn layer's Python forward;
/// nullopt for any other module.
std::optional<std::vector<ForwardParameter>> module_forward_signature(const torch::nn::Module& module);

}  // namespace fx::detail
