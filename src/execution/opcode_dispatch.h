#pragma once
// Internal: the one switch from a node's opcode to the per-opcode method,
// shared by Interpreter::run_node and Transformer::run_node (their methods
// take and return different types: run-time values vs. new-graph arguments).

#include <fx/node.h>

#include <string>
#include <vector>

namespace fx::detail {

/// The names of node n's kwargs, in order (what a FunctionCall / MethodCall is resolved for).
inline std::vector<std::string> kwarg_names_of(const Node& n) {
  std::vector<std::string> names;
  names.reserve(n.kwargs().size());
  for (const auto& kv : n.kwargs()) names.push_back(kv.first);
  return names;
}

/// Calls self.<opcode>(target, args, kwargs) for node n's opcode.
template <class Self, class Args, class Kwargs>
auto call_opcode_method(Self& self, const Node* n, Args& args, Kwargs& kwargs) {
  switch (n->op()) {
    case Opcode::Placeholder: return self.placeholder(n->target(), args, kwargs);
    case Opcode::GetAttr: return self.get_attr(n->target(), args, kwargs);
    case Opcode::CallFunction: return self.call_function(n->target(), args, kwargs);
    case Opcode::CallModule: return self.call_module(n->target(), args, kwargs);
    case Opcode::CallMethod: return self.call_method(n->target(), args, kwargs);
    case Opcode::Output: break;
  }
  return self.output(n->target(), args, kwargs);
}

}  // namespace fx::detail
