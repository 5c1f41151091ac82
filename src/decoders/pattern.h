#pragma once
// Small matchers the decoder passes (fuse_attention.cpp, fuse_pointwise.cpp)
// read a graph's patterns with: each step of a pattern checked by operator,
// constants and single use.
#include <fx/graph.h>
#include <fx/graph_module.h>
#include <fx/tensor_meta.h>

#include <functional>
#include <optional>

namespace fx::decoders::detail {

/// Whether `a` is a call_function node of `target` without kwargs.
inline bool is_call(const Argument& a, const char* target) {
  return a.is_node() && a.to_node()->op() == Opcode::CallFunction && a.to_node()->target() == target &&
         a.to_node()->kwargs().empty();
}

/// The node of `a` if it calls `target` (no kwargs) with `nargs` arguments
/// (any count when nargs is 0) and has one user: the pattern's next step.
inline Node* only_use(const Argument& a, const char* target, size_t nargs = 0) {
  if (!is_call(a, target)) return nullptr;
  Node* n = a.to_node();
  return n->users().size() == 1 && (nargs == 0 || n->args().size() == nargs) ? n : nullptr;
}

/// Whether `a` is the int constant v.
inline bool is_int(const Argument& a, int64_t v) { return a.kind() == Argument::Kind::Int && a.to_int() == v; }

/// Whether `a` is an int or double constant.
inline bool is_number(const Argument& a) {
  return a.kind() == Argument::Kind::Int || a.kind() == Argument::Kind::Double;
}

/// The tensor_meta of `a`'s node, or nullptr.
inline const TensorMetadata* meta(const Argument& a) { return a.is_node() ? tensor_meta_of(a.to_node()) : nullptr; }

/// Replaces every node `match` gives arguments for by one call_function of
/// `target` on them (inserted before it, its uses and meta taken over), then
/// removes what died; returns how many it replaced.
inline size_t replace_matches(GraphModule& gm, const char* target,
                              const std::function<std::optional<ArgList>(Node*)>& match) {
  Graph& g = gm.graph();
  size_t replaced = 0;
  for (Node* n : g.nodes().to_vector()) {
    if (n->is_erased()) continue;
    const auto args = match(n);
    if (!args) continue;
    Node* fused;
    {
      auto at = g.inserting_before(n);
      fused = g.call_function(target, *args);
    }
    n->replace_all_uses_with(fused, nullptr, /*propagate_meta=*/true);
    g.erase_node(n);
    ++replaced;
  }
  if (replaced) {
    g.eliminate_dead_code();
    g.lint();
    gm.recompile();
  }
  return replaced;
}

}  // namespace fx::decoders::detail
