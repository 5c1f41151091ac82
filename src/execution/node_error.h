#pragma once
// Internal: torch.fx's error context for a failing node.

#include <fx/node.h>

#include <string>

namespace fx::detail {

/// Must be called inside a catch block: rethrows the exception being handled
/// as fx::Error (or the same fx::Error subclass) whose message is torch.fx's:
/// "<original message>\n\nWhile executing <format_node>", followed by
/// "\nOriginal traceback:\n<stack trace>" when the node has one.
[[noreturn]] void rethrow_while_executing(const Node& node);

/// The message of the exception being handled, without a c10 backtrace.
/// Must be called inside a catch block.
std::string current_exception_message();

}  // namespace fx::detail
