#pragma once
// Helpers shared by the execution-layer tests.

#include <fx/error.h>
#include <fx/graph_module.h>

#include "../common/error_of.h"

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>

namespace fx_test {

/// A GraphModule over `g` with an empty root.
inline std::shared_ptr<fx::GraphModule> module_of(std::shared_ptr<fx::Graph> g,
                                                  std::shared_ptr<torch::nn::Module> root = nullptr) {
  if (!root) root = std::make_shared<torch::nn::Module>("Root");
  return std::make_shared<fx::GraphModule>(root, std::move(g));
}

/// Whether two tensors have the same values (and shape).
inline bool same(const at::Tensor& a, const at::Tensor& b) { return a.sizes() == b.sizes() && at::allclose(a, b); }

}  // namespace fx_test
