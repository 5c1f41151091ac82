// freeze_modules on a layer whose configuration cannot be read (issue 24:
// a torch.jit.trace export keeps a Conv2d's weight, not its stride): the
// call stays a call_module, as freeze.h promises, instead of failing.
#include <fx/graph.h>
#include <fx/module_attributes.h>
#include <fx/optimize/freeze.h>

#include "passes_test_util.h"

#include <gtest/gtest.h>

namespace {

/// A layer that says it is a Conv2d but knows only some of its attributes.
struct PartialConv : torch::nn::Module {
  PartialConv() { register_parameter("weight", at::randn({4, 3, 3, 3})); }
  std::unordered_map<std::string, c10::IValue> known;
};

TEST(FreezeModules, ALayerWithoutItsConfigurationStaysACallModule) {
  fx::register_module_attributes(typeid(PartialConv), [](const torch::nn::Module& m) {
    fx::ModuleAttributes a{"Conv2d", static_cast<const PartialConv&>(m).known};
    a.attributes.emplace("training", false);
    return std::optional<fx::ModuleAttributes>(a);
  });
  auto root = std::make_shared<torch::nn::Module>("Root");
  auto conv = std::make_shared<PartialConv>();
  root->register_module("conv", conv);
  auto g = std::make_shared<fx::Graph>();
  g->output(g->call_module("conv", {g->placeholder("x")}));
  auto gm = fx_test::module_of(g, root);
  const std::string before = gm->graph().str();
  // Only the weights (what a traced Conv2d keeps): unchanged.
  EXPECT_FALSE(fx::freeze_modules(gm).modified);
  EXPECT_EQ(gm->graph().str(), before);
  // With the configuration it freezes.
  conv->known = {{"stride", c10::IValue(std::vector<int64_t>{1, 1})},
                 {"padding", c10::IValue(std::vector<int64_t>{1, 1})},
                 {"dilation", c10::IValue(std::vector<int64_t>{1, 1})},
                 {"groups", int64_t(1)},
                 {"padding_mode", std::string("zeros")}};
  EXPECT_TRUE(fx::freeze_modules(gm).modified);
  EXPECT_EQ(gm->graph().output_node()->args()[0].to_node()->target(), "aten::conv2d");
}

}  // namespace
