// fx::sink_recomputation: a min cut's recomputations run where the backward
// uses them, the same values from a smaller arena.
#include "aot_models.h"
#include "graph_test_util.h"

#include <fx/aot.h>
#include <fx/graph_module.h>
#include <fx/memory_plan.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unordered_set>

namespace {

using fx::aot_test::graph_copy_of;
using fx::aot_test::random_placeholder_inputs;

/// Six conv -> batch norm -> ReLU6 blocks on a 16x16 map: the min cut
/// saves each convolution's output and recomputes the batch norm and the
/// activation in backward.
torch::nn::Sequential conv_bn_stack() {
  torch::nn::Sequential s;
  s->push_back(fx::aot_test::ConvBnRelu6(3, 16, 3));
  for (int i = 0; i < 5; ++i) s->push_back(fx::aot_test::ConvBnRelu6(16, 16, 3));
  s->push_back(torch::nn::Flatten());
  return s;
}

std::vector<fx::Node*> node_list(const fx::Graph& g) {
  std::vector<fx::Node*> out;
  for (fx::Node* n : g.nodes()) out.push_back(n);
  return out;
}

/// Runs `gm` planned: a recording forward, then a replayed one; the
/// replay's outputs.
c10::impl::GenericList run_planned(fx::GraphModule& gm, const std::vector<c10::IValue>& inputs) {
  gm.set_memory_planning(true);
  gm.forward(inputs);
  return gm.forward(inputs).toList();
}

TEST(SinkRecomputation, RecomputesWhereTheBackwardUsesItFromASmallerArena) {
  torch::manual_seed(0);
  auto net = conv_bn_stack();
  auto aot = fx::aot_module(net.ptr(), fx::AotOptions{fx::min_cut_partition()});
  aot->forward(torch::randn({4, 3, 16, 16})).sum().backward();
  const fx::PartitionedGraphs& p = aot->graphs().partitioned;
  ASSERT_GE(p.recomputed.size(), 6u * 4u) << "each block's batch norm and ReLU6 is recomputed";

  // The partition leaves every recomputation before the first node that
  // reads a tangent.
  auto before = graph_copy_of(p.backward), after = graph_copy_of(p.backward);
  const std::unordered_set<std::string> recomputed(p.recomputed.begin(), p.recomputed.end());
  auto first_backward_node = [&](const fx::Graph& g) {
    size_t i = 0;
    for (fx::Node* n : g.nodes()) {
      if (n->op() == fx::Opcode::CallFunction && !recomputed.count(n->name())) return i;
      ++i;
    }
    return i;
  };
  auto last_recomputation = [&](const fx::Graph& g) {
    size_t i = 0, last = 0;
    for (fx::Node* n : g.nodes()) {
      if (recomputed.count(n->name())) last = i;
      ++i;
    }
    return last;
  };
  EXPECT_LT(last_recomputation(before->graph()), first_backward_node(before->graph()));

  const size_t moved = fx::sink_recomputation(after->graph());
  EXPECT_GE(moved, 5u * 4u) << "all but the last block's recomputations move";
  EXPECT_GT(last_recomputation(after->graph()), first_backward_node(after->graph()));
  // Each recomputation is followed by recomputations only, up to its first user.
  const std::vector<fx::Node*> order = node_list(after->graph());
  for (size_t i = 0; i < order.size(); ++i) {
    if (!recomputed.count(order[i]->name())) continue;
    size_t j = i + 1;
    auto reads_it = [&](const fx::Node* u) {
      for (const fx::Node* in : u->all_input_nodes())
        if (in == order[i]) return true;
      return false;
    };
    while (j < order.size() && !reads_it(order[j])) {
      EXPECT_TRUE(recomputed.count(order[j]->name())) << order[i]->name() << " waits past " << order[j]->name();
      ++j;
    }
    ASSERT_LT(j, order.size()) << order[i]->name() << " has no user after it";
  }
  EXPECT_EQ(fx::sink_recomputation(after->graph()), 0u) << "a second run finds nothing to move";

  // Same values, to the bit (the same kernels on the same inputs), from an
  // arena the recomputed values no longer fill all at once.
  const std::vector<c10::IValue> inputs = random_placeholder_inputs(*before);
  const auto want = run_planned(*before, inputs), have = run_planned(*after, inputs);
  ASSERT_EQ(want.size(), have.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (!want.get(i).isTensor()) continue;
    EXPECT_TRUE(torch::equal(want.get(i).toTensor(), have.get(i).toTensor())) << "output " << i;
  }
  const size_t arena_before = before->memory_plan_stats().arena_bytes;
  const size_t arena_after = after->memory_plan_stats().arena_bytes;
  EXPECT_LT(arena_after * 10, arena_before * 6) << arena_after << " vs " << arena_before << " bytes";
}

// A forward graph (no tangents) is left as it is.
TEST(SinkRecomputation, LeavesAGraphWithoutTangentsAlone) {
  torch::manual_seed(0);
  auto net = conv_bn_stack();
  auto aot = fx::aot_module(net.ptr(), fx::AotOptions{fx::min_cut_partition()});
  aot->forward(torch::randn({2, 3, 8, 8})).sum().backward();
  auto fw = graph_copy_of(aot->forward_graph());
  const std::string code = fw->code();
  EXPECT_EQ(fx::sink_recomputation(fw->graph()), 0u);
  EXPECT_EQ(fw->code(), code);
}

// A recomputation that reads what a write changes keeps its place before
// the write; one that does not moves past it.
TEST(SinkRecomputation, NeverMovesAReadPastAWriteToWhatItReads) {
  fx::Graph g;
  fx::Node* saved = g.placeholder("relu");
  fx::Node* other = g.placeholder("other");
  fx::Node* tangent = g.placeholder("tangents_1");
  fx::Node* read_written = g.call_function("aten::mul.Tensor", {saved, 2.0});
  fx::Node* read_view = g.call_function("aten::neg", {g.call_function("aten::t", {saved})});
  fx::Node* free_read = g.call_function("aten::exp", {other});
  fx::Node* grad = g.call_function("aten::mul.Tensor", {tangent, tangent});
  fx::Node* write = g.call_function("aten::add_.Tensor", {saved, grad});
  fx::Node* use = g.call_function("aten::add.Tensor", {read_written, write});
  fx::Node* use2 = g.call_function("aten::add.Tensor", {read_view, free_read});
  g.output(fx::Argument::tuple({use, use2}));

  EXPECT_EQ(fx::sink_recomputation(g), 1u);
  std::vector<std::string> names;
  for (fx::Node* n : g.nodes()) names.push_back(n->name());
  EXPECT_EQ(names, (std::vector<std::string>{"relu", "other", "tangents_1", "mul", "t", "neg", "mul_1", "add_",
                                             "add", "exp", "add_1", "output"}));
  g.lint();
}

}  // namespace
