// Node::normalized_arguments, normalize_function and normalize_module against
// Python torch.fx 1.13 (golden "normalized" of tests/core/goldens/api_fidelity.json,
// made by python/goldens/api_fidelity_goldens.py), and the cases where fxcpp
// differs on purpose (docs/torch_fx_differences.md).
#include <fx/error.h>
#include <fx/graph.h>
#include <fx/normalize.h>

#include "../common/golden_string.h"
#include "core_test_util.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>

#include <gtest/gtest.h>

namespace {

using fx::Argument;
using fx::ArgsKwargsPair;
using fx::Graph;
using fx::Node;
using fx::NormalizeOptions;

std::string fmt(const std::optional<ArgsKwargsPair>& r) {
  return r ? fx::format_args(r->args) + " " + fx::format_kwargs(r->kwargs) : "None";
}

std::shared_ptr<torch::nn::Module> make_root() {
  auto root = std::make_shared<torch::nn::Module>();
  root->register_module("lin", torch::nn::Linear(2, 2));
  root->register_module("lstm", torch::nn::LSTM(2, 2));
  root->register_module("mha", torch::nn::MultiheadAttention(4, 2));
  auto sub = std::make_shared<torch::nn::Module>();
  sub->register_module("relu", torch::nn::ReLU());
  root->register_module("sub", sub);
  return root;
}

TEST(Normalize, MatchesTorchFx) {
  auto root = make_root();
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* w = g.placeholder("w");
  std::vector<Node*> nodes = {
      g.call_function("aten::add.Tensor", {x, y}),
      g.call_function("aten::conv2d", {x, w}),
      g.call_function("aten::sum.dim_IntList", {x, Argument::list({1})}, {{"keepdim", true}}),
      g.call_function("aten::add.Tensor", {x}, {{"other", y}}),
      g.call_function("operator.add", {x, y}),
      g.call_module("lin", {x}),
      g.call_module("lstm", {x}),
      g.call_module("mha", {x, x, x}, {{"need_weights", false}}),
      g.call_module("sub.relu", {x}),
      g.call_function("aten::add.Tensor", {x, y, 2, 3}),
      g.call_function("aten::to.dtype", {x, c10::ScalarType::Half}),
      x,
  };
  std::string lines;
  for (size_t i = 0; i < nodes.size(); ++i)
    lines += std::to_string(i) + ": " + fmt(nodes[i]->normalized_arguments(root.get())) + "\n";
  NormalizeOptions only_kwargs;
  only_kwargs.normalize_to_only_use_kwargs = true;
  lines += "only_kwargs: " + fmt(fx::normalize_function("aten::conv2d", {x, w}, {{"groups", 2}}, only_kwargs)) + "\n";
  NormalizeOptions scalar;
  scalar.arg_types = std::vector<std::string>{"Tensor", "int"};
  lines += "typed_scalar: " + fmt(fx::normalize_function("aten::add", {x, 2}, {}, scalar)) + "\n";
  NormalizeOptions tensors;
  tensors.arg_types = std::vector<std::string>{"Tensor", "Tensor"};
  lines += "typed_tensor: " + fmt(fx::normalize_function("aten::add", {x, y}, {}, tensors)) + "\n";
  lines += "missing: " + fx_test::error_of([&] { g.call_module("nope", {x})->normalized_arguments(root.get()); });
  EXPECT_EQ(lines, fx_test::golden_string("core/goldens/api_fidelity.json", "normalized"));
}

// torch.fx 1.13's Node.normalized_arguments drops normalize_to_only_use_kwargs
// on the floor; fxcpp honours it (docs/torch_fx_differences.md).
TEST(Normalize, NodeHonoursOnlyKwargs) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* add = g.call_function("aten::add.Tensor", {x, y});
  NormalizeOptions o;
  o.normalize_to_only_use_kwargs = true;
  EXPECT_EQ(fmt(add->normalized_arguments(nullptr, o)), "() {input: %x, other: %y, alpha: 1}");
}

TEST(Normalize, AmbiguousOverloadsNeedTypes) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  const std::string err = fx_test::error_of([&] { fx::normalize_function("aten::add", {x, y}, {}); });
  EXPECT_EQ(err,
            "Tried to normalize arguments to aten::add but the schema match was ambiguous! Please provide argument "
            "types to the normalize_arguments() call. Available schemas:\n"
            "aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor\n"
            "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  NormalizeOptions bad;
  bad.arg_types = std::vector<std::string>{"Tensor", "NotAType"};
  EXPECT_EQ(fx_test::error_of([&] { fx::normalize_function("aten::add", {x, y}, {}, bad); }),
            "normalize: 'NotAType' is not a schema type (such as Tensor, int, float[], Tensor?)");
  // Types that fit no overload: nothing to normalize to.
  NormalizeOptions none;
  none.arg_types = std::vector<std::string>{"str", "str", "str"};
  EXPECT_EQ(fmt(fx::normalize_function("aten::add", {x, y}, {}, none)), "None");
}

TEST(Normalize, ModuleErrorsAndOtherModules) {
  auto root = make_root();
  Graph g;
  Node* x = g.placeholder("x");
  Node* lin = g.call_module("lin", {x, x});
  EXPECT_EQ(fx_test::error_of([&] { lin->normalized_arguments(root.get()); }),
            "Tried to normalize node with target lin: its arguments do not bind to forward(input)");
  EXPECT_EQ(fx_test::error_of([&] { lin->normalized_arguments(nullptr); }),
            "normalized_arguments of call_module node lin needs the root module");
  // A module that is not a torch::nn layer has no known signature (torch.fx: None).
  root->register_module("plain", std::make_shared<torch::nn::Module>());
  EXPECT_EQ(fmt(g.call_module("plain", {x})->normalized_arguments(root.get())), "None");
  // A registered signature makes any module type normalizable.
  struct Custom : torch::nn::Module {};
  root->register_module("custom", std::make_shared<Custom>());
  fx::register_module_signature(typeid(Custom), [](const torch::nn::Module&) {
    return std::optional<std::vector<fx::ForwardParameter>>({{"a", std::nullopt, false}, {"scale", Argument(2.0), true}});
  });
  EXPECT_EQ(fmt(g.call_module("custom", {x})->normalized_arguments(root.get())), "(%x,) {scale: 2.0}");
  Node* erased = g.call_function("aten::relu", {x});
  g.erase_node(erased);
  EXPECT_NE(fx_test::error_of([&] { erased->normalized_arguments(); }).find("erased"), std::string::npos);
}

}  // namespace
