#pragma once
// Helpers shared by the passes' tests: modules over graphs, error texts,
// flattened outputs (golden strings: ../common/golden_string.h).

#include <fx/error.h>
#include <fx/graph_module.h>

#include "../common/error_of.h"
#include "../common/golden_string.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fx_test {

/// A GraphModule over `g` with `root` (an empty module if none).
inline std::shared_ptr<fx::GraphModule> module_of(std::shared_ptr<fx::Graph> g,
                                                  std::shared_ptr<torch::nn::Module> root = nullptr) {
  if (!root) root = std::make_shared<torch::nn::Module>("Root");
  return std::make_shared<fx::GraphModule>(root, std::move(g));
}

/// Every number of a tensor or (nested) tuple of tensors, in order, as doubles.
inline std::vector<double> flat(const c10::IValue& v) {
  std::vector<double> out;
  if (v.isTensor()) {
    at::Tensor t = v.toTensor().to(at::kDouble).contiguous().reshape(-1);
    out.assign(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) {
      auto f = flat(e);
      out.insert(out.end(), f.begin(), f.end());
    }
  }
  return out;
}

/// An eval-ready batch norm with random statistics and affine parameters
/// (folding it must move real numbers).
inline torch::nn::BatchNorm2d random_batch_norm(int64_t c) {
  torch::nn::BatchNorm2d bn(c);
  bn->running_mean.uniform_(-0.5, 0.5);
  bn->running_var.uniform_(0.5, 2.0);
  bn->weight.data().uniform_(0.5, 1.5);
  bn->bias.data().uniform_(-0.5, 0.5);
  return bn;
}

}  // namespace fx_test
