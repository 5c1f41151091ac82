#pragma once
// What the training compiler's pass tests share: copies of a partition's
// graphs to rewrite, node counts, the rewritten graph run against the
// original on the same random inputs, and the fxcpp operators a step ran.

#include <fx/graph_module.h>
#include <fx/tensor_meta.h>

#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace fx::aot_test {

/// How many nodes of `g` call `target`.
inline size_t count_target(const fx::Graph& g, const std::string& target) {
  size_t k = 0;
  for (fx::Node* n : g.nodes()) k += n->target() == target;
  return k;
}

/// A GraphModule running a copy of gm's graph (for a pass to rewrite).
inline std::shared_ptr<fx::GraphModule> graph_copy_of(const std::shared_ptr<fx::GraphModule>& gm) {
  auto g = std::make_shared<fx::Graph>();
  std::unordered_map<const fx::Node*, fx::Node*> map;
  g->output(*g->graph_copy(gm->graph(), map));
  return std::make_shared<fx::GraphModule>(gm, g, "copy");
}

/// Random inputs (torch::randn) of the shapes and layouts gm's placeholders had (tensor_meta).
inline std::vector<c10::IValue> random_placeholder_inputs(const fx::GraphModule& gm) {
  std::vector<c10::IValue> inputs;
  for (fx::Node* n : gm.graph().nodes()) {
    if (n->op() != fx::Opcode::Placeholder) continue;
    const auto& m = std::any_cast<const fx::TensorMetadata&>(n->meta().at("tensor_meta"));
    inputs.emplace_back(torch::randn(m.shape).contiguous(m.memory_format.value_or(c10::MemoryFormat::Contiguous)));
  }
  return inputs;
}

/// `got` computes what `ref` computes on the same random inputs: each
/// tensor output with ref's sizes and strides, within `rtol` of its largest value.
inline void expect_same_outputs(fx::GraphModule& ref, fx::GraphModule& got, double rtol) {
  std::vector<c10::IValue> inputs = random_placeholder_inputs(ref);
  auto want = ref.forward(inputs).toList(), have = got.forward(inputs).toList();
  ASSERT_EQ(want.size(), have.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want.get(i).isTensor(), have.get(i).isTensor()) << "output " << i;
    if (!want.get(i).isTensor()) continue;
    const at::Tensor a = have.get(i).toTensor(), b = want.get(i).toTensor();
    ASSERT_TRUE(a.defined() && b.defined()) << "output " << i;
    EXPECT_EQ(a.sizes(), b.sizes()) << "output " << i;
    EXPECT_EQ(a.strides(), b.strides()) << "output " << i;
    EXPECT_LE((a - b).abs().max().item<double>(), rtol * b.abs().max().item<double>()) << "output " << i;
  }
}

/// How many times each fxcpp:: operator ran inside `fn` (RecordFunction,
/// as the dispatcher reports every call).
inline std::map<std::string, int> fxcpp_calls(const std::function<void()>& fn) {
  static thread_local std::map<std::string, int>* calls = nullptr;
  std::map<std::string, int> counted;
  calls = &counted;
  auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& f) -> std::unique_ptr<at::ObserverContext> {
        const std::string name = f.name();
        if (calls && name.rfind("fxcpp::", 0) == 0) ++(*calls)[name];
        return nullptr;
      }).needsInputs(false));
  fn();
  at::removeCallback(handle);
  calls = nullptr;
  return counted;
}

}  // namespace fx::aot_test
