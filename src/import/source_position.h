#pragma once
// Internal: where a TorchScript node came from in the Python source (the
// .pt's debug info), for error messages and node stack traces.

#include <string>

namespace torch::jit {
struct Node;
}  // namespace torch::jit

namespace fx::import_detail {

/// "resnet.py:102:8" (the .pt's debug info), or "" when the node has none.
std::string source_position(const torch::jit::Node* node);
/// The source line the node came from, trimmed ("out += identity"), or "".
std::string source_line(const torch::jit::Node* node);
/// "prim::If at resnet.py:102:8: `if x.sum() > 0:`" — the construct, its
/// position and its line, as errors name them.
std::string describe_node(const torch::jit::Node* node);
/// A Python-style stack trace entry: `File "resnet.py", line 102, in forward\n    out += identity`.
std::string stack_trace_entry(const torch::jit::Node* node, const std::string& function_name);

}  // namespace fx::import_detail
