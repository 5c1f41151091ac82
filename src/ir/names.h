#pragma once
// Internal: torch.fx's naming rules (torch.fx.graph._Namespace), in O(1).

#include <fx/node.h>

#include <string>
#include <unordered_map>
#include <unordered_set>

namespace fx::detail {

/// The name torch.fx derives from a target before making it unique:
/// "aten::add.Tensor" → "add", "operator.getitem" → "getitem",
/// "__add__" → "add", "layer1.0.conv1" → "layer1.0.conv1" (sanitised later),
/// camelCase → camel_case.
std::string name_from_target(Opcode op, const std::string& target);

/// torch.fx _snake_case: "pascalCase" → "pascal_case".
std::string snake_case(const std::string& s);

/// Makes `candidate` a valid, unused Python identifier (illegal characters
/// become '_', a leading digit gets a '_', keywords and builtins get a
/// suffix) and unique with the suffixes _1, _2 ...; records it as used.
std::string create_unique_name(const std::string& candidate, std::unordered_set<std::string>& used,
                               std::unordered_map<std::string, int64_t>& base_count);

}  // namespace fx::detail
