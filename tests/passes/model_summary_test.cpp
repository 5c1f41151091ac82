// summarize_model: parameters, MACs and FLOPs per node of the demo
// ResidualNet, computed by hand below; nodes without shapes count 0. The
// resnet50 totals (25.6 M parameters, 4.1 GMAC) are checked by the ctest
// entry draw_summary_resnet50 (tests/passes/draw.cmake).
#include "passes_test_util.h"

#include <fx/examples/residual_net.h>
#include <fx/passes/model_summary.h>
#include <fx/passes/shape_prop.h>
#include <fx/trace.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace {

const fx::NodeSummary& row(const fx::ModelSummary& s, const std::string& name) {
  for (const auto& n : s.nodes)
    if (n.node->name() == name) return n;
  throw std::runtime_error("no node " + name);
}

std::shared_ptr<fx::GraphModule> net() {
  torch::manual_seed(0);
  auto model = fx::examples::ResidualNet(3, 16, 10);
  model->eval();
  return fx::symbolic_trace(model, {at::randn({1, 3, 8, 8})});
}

TEST(ModelSummary, ResidualNetByHand) {
  auto gm = net();
  fx::ShapeProp(gm).propagate_meta({at::randn({1, 3, 8, 8})});
  const fx::ModelSummary s = summarize_model(*gm);
  // conv1: 3->16 channels, 3x3, output 1x16x8x8 = 1024 values of 3*3*3 MACs.
  EXPECT_EQ(row(s, "conv1").macs, 1024 * 27);
  EXPECT_EQ(row(s, "conv1").params, 16 * 3 * 9);
  EXPECT_EQ(row(s, "conv1").flops, 2 * 1024 * 27);
  EXPECT_EQ(row(s, "conv1").type, "torch::nn::Conv2dImpl");
  EXPECT_EQ(row(s, "conv1").output_shapes, (std::vector<std::vector<int64_t>>{{1, 16, 8, 8}}));
  // bn1: weight and bias; 2 FLOPs per value, no MACs.
  EXPECT_EQ(row(s, "bn1").params, 32);
  EXPECT_EQ(row(s, "bn1").macs, 0);
  EXPECT_EQ(row(s, "bn1").flops, 2 * 1024);
  // after max_pool2d 2x2: 16x4x4 = 256 values of 16*3*3 MACs.
  EXPECT_EQ(row(s, "max_pool2d").flops, 256);
  EXPECT_EQ(row(s, "block_conv1").macs, 256 * 144);
  EXPECT_EQ(row(s, "block_conv2").params, 16 * 16 * 9);
  EXPECT_EQ(row(s, "add").flops, 256);
  // fc: 10 outputs of 16 MACs; 16*10 + 10 parameters.
  EXPECT_EQ(row(s, "fc").macs, 160);
  EXPECT_EQ(row(s, "fc").params, 170);
  EXPECT_EQ(s.total_params, 432 + 32 + 2 * 2304 + 2 * 32 + 170);
  EXPECT_EQ(s.trainable_params, s.total_params);
  EXPECT_EQ(s.total_macs, 1024 * 27 + 2 * 256 * 144 + 160);
  EXPECT_EQ(s.nodes_without_shapes, 0);
  // parameters 5306 floats; buffers: 3 batch norms x (mean, var: 16 each; num_batches_tracked: 1 int64).
  EXPECT_EQ(s.param_bytes, 5306 * 4 + 3 * (32 * 4 + 8));
  EXPECT_EQ(fx::format_count(s.total_macs), "101.54 K");
}

TEST(ModelSummary, MatmulLinearAndMissingShapes) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* a = g->placeholder("a");
  fx::Node* b = g->placeholder("b");
  fx::Node* w = g->get_attr("w");
  fx::Node* mm = g->call_function("aten::matmul", {a, b});
  fx::Node* lin = g->call_function("aten::linear", {mm, w});
  g->output(lin);
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_parameter("w", at::ones({7, 5}));
  auto gm = fx_test::module_of(g, root);
  fx::ModelSummary none = summarize_model(*gm);
  EXPECT_EQ(none.total_macs, 0);
  EXPECT_EQ(none.nodes_without_shapes, 5);
  EXPECT_EQ(none.total_params, 35);

  fx::ShapeProp(gm).propagate({at::ones({2, 3, 4}), at::ones({4, 5})});
  fx::ModelSummary s = summarize_model(*gm);
  EXPECT_EQ(row(s, "matmul").macs, 2 * 3 * 5 * 4);  // [2,3,4] @ [4,5]: 30 outputs of 4
  EXPECT_EQ(row(s, "linear").macs, 2 * 3 * 7 * 5);  // 42 outputs of 5
  EXPECT_EQ(row(s, "w").params, 35);
  EXPECT_EQ(s.total_macs, 120 + 210);
  EXPECT_EQ(s.total_flops, 2 * (120 + 210));
  EXPECT_EQ(fx::format_count(25557032), "25.56 M");
  EXPECT_EQ(fx::format_count(999), "999");
}

}  // namespace
