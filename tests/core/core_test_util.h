#pragma once
// Helpers shared by the IR tests.

#include <fx/error.h>
#include <fx/graph.h>

#include "../common/error_of.h"

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

}  // namespace fx_test
