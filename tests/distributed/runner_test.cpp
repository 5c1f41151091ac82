// Pipeline and data-parallel runs on 2 and 3 ranks (threads of this
// process, Gloo over 127.0.0.1): outputs bit for bit those of one process
// on the same microbatches; a stage's error reaches rank 0 and stops the
// pipeline without a hang.
#include "dist_test_util.h"

#include <fx/optimize/optimize_for_inference.h>

namespace {

using namespace dist_test;

/// Runs `plan`'s pipeline on its ranks; rank 0 runs `inputs` (`runs` times)
/// as `microbatches`; returns rank 0's last output and every rank's times.
c10::IValue run_pipeline(const dist::PipelinePlan& plan, const std::vector<c10::IValue>& inputs, int64_t microbatches,
                         std::vector<dist::RankTimes>* times = nullptr, int runs = 1) {
  c10::IValue out;
  const int world = static_cast<int>(plan.stages.size());
  run_ranks(world, [&](int rank, std::shared_ptr<dist::ProcessGroup> g) {
    dist::PipelineRunner runner(g, plan.stages[static_cast<size_t>(rank)]);
    if (rank == 0) {
      for (int i = 0; i < runs; ++i) out = runner.run(inputs, microbatches);
      runner.stop();
    } else {
      EXPECT_TRUE(runner.serve());
    }
    auto all = dist::gather_times(*g, runner.times(), "times");
    if (rank == 0 && times) *times = all;
  });
  return out;
}

TEST(Pipeline, TwoAndThreeRanksBitForBitWithOneProcess) {
  at::NoGradGuard no_grad;
  auto gm = small_resnet();
  const at::Tensor x = images(8);
  for (int stages : {2, 3}) {
    for (int64_t m : {int64_t{1}, int64_t{4}, int64_t{3}}) {  // 3: microbatches of 3, 3 and 2
      dist::SplitOptions o;
      o.stages = stages;
      o.example_inputs = dist::split_microbatches({x}, m)[0];
      const dist::PipelinePlan plan = dist::pipeline_split(gm, o);
      std::vector<dist::RankTimes> times;
      const c10::IValue out = run_pipeline(plan, {x}, m, &times, 2);
      EXPECT_TRUE(dist::bitwise_equal(out, dist::microbatched_forward(*gm, {x}, m))) << stages << " stages, " << m;
      ASSERT_EQ(times.size(), static_cast<size_t>(stages));
      for (const auto& t : times) {
        EXPECT_EQ(t.microbatches, 2 * m) << "rank " << t.rank;
        EXPECT_GT(t.compute_ms, 0);
      }
      EXPECT_GT(times[1].bytes_in, 0);
      EXPECT_GT(times[0].bytes_in, 0);  // the outputs came back
      EXPECT_EQ(times[0].runs, 2);
    }
  }
}

TEST(Pipeline, StreamedBatchesEqualTheirOwnRuns) {
  at::NoGradGuard no_grad;
  auto gm = small_resnet();
  const std::vector<at::Tensor> batches = {images(4, 1), images(4, 2), images(5, 3)};
  dist::SplitOptions o;
  o.stages = 3;
  o.balance = dist::Balance::Flops;
  o.example_inputs = dist::split_microbatches({batches[0]}, 2)[0];
  const dist::PipelinePlan plan = dist::pipeline_split(gm, o);
  std::vector<c10::IValue> outs;
  std::vector<dist::RankTimes> times;
  run_ranks(3, [&](int rank, std::shared_ptr<dist::ProcessGroup> g) {
    dist::PipelineRunner runner(g, plan.stages[static_cast<size_t>(rank)]);
    if (rank == 0) {
      outs = runner.run_stream({{batches[0]}, {batches[1]}, {batches[2]}}, 2);
      runner.stop();
    } else {
      EXPECT_TRUE(runner.serve());
    }
    auto all = dist::gather_times(*g, runner.times(), "times");
    if (rank == 0) times = all;
  });
  ASSERT_EQ(outs.size(), 3u);
  for (size_t b = 0; b < 3; ++b)
    EXPECT_TRUE(dist::bitwise_equal(outs[b], dist::microbatched_forward(*gm, {batches[b]}, 2))) << "batch " << b;
  EXPECT_EQ(times[2].microbatches, 6);  // one stream: 3 batches x 2 microbatches
  EXPECT_EQ(times[2].runs, 1);
}

TEST(Pipeline, OptimizedStagesEqualTheSameStagesInOneProcess) {
  at::NoGradGuard no_grad;
  auto gm = small_resnet();
  const at::Tensor x = images(4);
  dist::SplitOptions o;
  o.stages = 2;
  o.balance = dist::Balance::Flops;
  o.example_inputs = dist::split_microbatches({x}, 2)[0];
  dist::PipelinePlan plan = dist::pipeline_split(gm, o);
  for (auto& s : plan.stages) s = dist::optimize_stage(s);
  const c10::IValue out = run_pipeline(plan, {x}, 2);
  std::vector<c10::IValue> outs;
  for (auto& mb : dist::split_microbatches({x}, 2)) outs.push_back(dist::run_stages(plan.stages, mb));
  EXPECT_TRUE(dist::bitwise_equal(out, dist::concat_microbatches(outs)));
  EXPECT_LT(dist::max_abs_difference(out, gm->forward({x})), 1e-4);
  // Activations cross in the kernels' layout: stage 0 restores nothing to NCHW for stage 1.
  for (const fx::Node* n : plan.stages[0].module->graph().nodes()) EXPECT_NE(n->target(), "fxcpp::restore_layout");
  // The cut falls between blocks (no fusion undone): the whole model optimised computes the same bits.
  fx::OptimizeOptions whole_options;
  whole_options.example_inputs = dist::split_microbatches({x}, 2)[0];
  auto whole = fx::optimize_for_inference(gm, whole_options);
  EXPECT_TRUE(dist::bitwise_equal(out, dist::microbatched_forward(*whole, {x}, 2)));
}

TEST(Pipeline, AStagesErrorReachesRankZeroAndStopsThePipeline) {
  at::NoGradGuard no_grad;
  // reshape to [2, 8] works for a microbatch of 2 rows only.
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* a = g->call_function("aten::relu", {x});
  fx::Node* b = g->call_function("aten::reshape", {a, fx::Argument::list({int64_t{2}, int64_t{8}})});
  g->output(g->call_function("aten::neg", {b}));
  auto gm = std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>("M"), g);
  dist::SplitOptions o;
  o.stages = 3;
  o.cuts = {1, 2};
  const dist::PipelinePlan plan = dist::pipeline_split(gm, o);
  std::vector<std::string> rank0_error(1);
  std::vector<bool> served(3, true);
  const auto start = std::chrono::steady_clock::now();
  run_ranks(3, [&](int rank, std::shared_ptr<dist::ProcessGroup> g2) {
    dist::PipelineRunner runner(g2, plan.stages[static_cast<size_t>(rank)]);
    if (rank != 0) {
      served[static_cast<size_t>(rank)] = runner.serve();
      return;
    }
    try {
      runner.run({at::ones({5, 8})}, 3);  // microbatches of 2, 2 and 1 rows
    } catch (const dist::DistributedError& e) {
      rank0_error[0] = e.what();
    }
    try {
      runner.run({at::ones({2, 8})}, 1);
      rank0_error.push_back("ran again");
    } catch (const fx::Error& e) {
      rank0_error.push_back(e.what());
    }
  });
  EXPECT_EQ(rank0_error[0].rfind("rank 1 (stage 1) failed on microbatch 2: shape '[2, 8]' is invalid for input of size 8", 0), 0u)
      << rank0_error[0];
  EXPECT_EQ(rank0_error[1], "PipelineRunner::run: the pipeline was stopped");
  EXPECT_FALSE(served[1]);
  EXPECT_FALSE(served[2]);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20.0);
}

TEST(DataParallel, TwoAndThreeRanksBitForBitWithOneProcess) {
  at::NoGradGuard no_grad;
  auto gm = small_resnet();
  const at::Tensor x = images(7);
  for (int world : {2, 3}) {
    c10::IValue out;
    std::vector<dist::RankTimes> times;
    std::vector<std::shared_ptr<fx::GraphModule>> copies;  // each rank its own copy (made here: the RNG is global)
    for (int r = 0; r < world; ++r) copies.push_back(small_resnet());
    run_ranks(world, [&](int rank, std::shared_ptr<dist::ProcessGroup> g) {
      dist::DataParallelRunner runner(g, copies[static_cast<size_t>(rank)]);
      if (rank == 0) {
        out = runner.run({x});
        out = runner.run({x});
        runner.stop();
      } else {
        EXPECT_TRUE(runner.serve());
      }
      auto all = dist::gather_times(*g, runner.times(), "times");
      if (rank == 0) times = all;
    });
    EXPECT_TRUE(dist::bitwise_equal(out, dist::microbatched_forward(*gm, {x}, world))) << world << " ranks";
    EXPECT_EQ(out.toTensor().size(0), 7);
    for (const auto& t : times) EXPECT_EQ(t.microbatches, 2) << "rank " << t.rank;
  }
}

}  // namespace
