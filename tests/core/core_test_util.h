#pragma once
// Helpers shared by the IR tests.

#include <fx/error.h>
#include <fx/graph.h>

#include <functional>
#include <string>
#include <vector>

namespace fx_test {

/// The names of g's nodes, in order.
inline std::vector<std::string> node_names(const fx::Graph& g) {
  std::vector<std::string> out;
  for (fx::Node* n : g.nodes()) out.push_back(n->name());
  return out;
}

/// The message of the fx::Error `f` throws ("<no error>" if none).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fx::Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace fx_test
