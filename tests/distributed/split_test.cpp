// pipeline_split: stages made with split_module compute the model bit for
// bit; balance by time and by FLOPs; given cuts rebuild the same split;
// stage files; microbatches; the schedule simulation.
#include "dist_test_util.h"

#include <fx/passes/shape_prop.h>
#include <fx/serialize.h>

namespace {

using namespace dist_test;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(PipelineSplit, StagesComputeTheModelBitForBit) {
  at::NoGradGuard no_grad;
  auto gm = small_resnet();
  const at::Tensor x = images(4);
  const c10::IValue expected = gm->forward({x});
  for (int stages : {1, 2, 3, 5}) {
    for (dist::Balance b : {dist::Balance::Time, dist::Balance::Flops}) {
      dist::SplitOptions o;
      o.stages = stages;
      o.balance = b;
      o.example_inputs = {x};
      const dist::PipelinePlan plan = dist::pipeline_split(gm, o);
      ASSERT_EQ(plan.stages.size(), static_cast<size_t>(stages));
      EXPECT_EQ(plan.positions, 27);
      EXPECT_EQ(plan.cuts.size(), static_cast<size_t>(stages - 1));
      EXPECT_TRUE(dist::bitwise_equal(dist::run_stages(plan.stages, {x}), expected)) << stages << " stages";
      // Names: stage 0 takes the model's inputs; each stage takes what the previous one sends.
      EXPECT_EQ(plan.stages[0].inputs, std::vector<std::string>{"x"});
      int64_t nodes = 0;
      for (int k = 0; k < stages; ++k) {
        const auto& s = plan.stages[static_cast<size_t>(k)];
        nodes += s.nodes;
        EXPECT_EQ(s.index, k);
        EXPECT_EQ(s.num_stages, stages);
        EXPECT_GE(s.nodes, 1);
        if (k > 0) {
          EXPECT_EQ(s.inputs, plan.stages[static_cast<size_t>(k - 1)].outputs);
        }
        if (k + 1 < stages) {
          EXPECT_FALSE(s.outputs.empty());
        } else {
          EXPECT_TRUE(s.outputs.empty());
        }
        EXPECT_EQ(s.model_fingerprint, plan.model_fingerprint);
      }
      EXPECT_EQ(nodes, 27);
    }
  }
}

TEST(PipelineSplit, CheapestBoundariesAmongBalancedCuts) {
  at::NoGradGuard no_grad;
  auto gm = small_resnet(0, 4);
  const at::Tensor x = images(2);
  dist::SplitOptions o;
  o.stages = 2;
  o.balance = dist::Balance::Flops;
  o.example_inputs = {x};
  o.tolerance = 0.25;
  const dist::PipelinePlan plan = dist::pipeline_split(gm, o);
  // Between residual blocks one tensor crosses; beside a residual, two.
  EXPECT_EQ(plan.stages[0].outputs.size(), 1u) << plan.stages[0].outputs.size();
  EXPECT_EQ(plan.stages[0].output_bytes, 2 * 8 * 12 * 12 * 4);
  EXPECT_LE(plan.imbalance(), 1.25);
  // FLOPs balance is deterministic: the same cuts every time.
  EXPECT_EQ(dist::pipeline_split(gm, o).cuts, plan.cuts);
}

TEST(PipelineSplit, SkipConnectionsPassThroughTheStagesBetween) {
  at::NoGradGuard no_grad;
  // y = fc(relu(relu(relu(x)))) + x: x is used by the last node only.
  auto root = std::make_shared<torch::nn::Module>("Skip");
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* h = x;
  for (int i = 0; i < 4; ++i) h = g->call_function("aten::mul", {g->call_function("aten::relu", {h}), 1.5});
  g->output(g->call_function("aten::add", {h, x}));
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  dist::SplitOptions o;
  o.stages = 3;
  o.cuts = {3, 6};
  o.example_inputs = {at::randn({2, 3})};
  const dist::PipelinePlan plan = dist::pipeline_split(gm, o);
  EXPECT_EQ(plan.stages[1].inputs, (std::vector<std::string>{"x", "relu_1"}));
  EXPECT_EQ(plan.stages[1].outputs, (std::vector<std::string>{"x", "mul_2"}));
  EXPECT_EQ(plan.stages[2].inputs, plan.stages[1].outputs);
  EXPECT_EQ(plan.balance, "given");
  const at::Tensor in = at::randn({2, 3});
  EXPECT_TRUE(dist::bitwise_equal(dist::run_stages(plan.stages, {in}), gm->forward({in})));
}

TEST(PipelineSplit, RefinedOnMeasuredStageTimes) {
  at::NoGradGuard no_grad;
  auto gm = small_resnet();
  // "Measured" times: every convolution costs 1, except those of the stem and
  // of the first block, 3 (kernels that run slower than their FLOPs say).
  auto measure = [](const std::vector<dist::PipelineStage>& stages) {
    std::vector<double> ms;
    for (const auto& s : stages) {
      double t = 0;
      for (const fx::Node* n : s.module->graph().nodes())
        if (n->op() == fx::Opcode::CallModule && n->target().find("conv") != std::string::npos)
          t += n->target().rfind("conv1", 0) == 0 || n->target().rfind("layer0", 0) == 0 ? 3.0 : 1.0;
      ms.push_back(t);
    }
    return ms;
  };
  dist::SplitOptions o;
  o.stages = 2;
  o.balance = dist::Balance::Flops;
  o.example_inputs = {images(2)};
  const dist::PipelinePlan by_flops = dist::pipeline_split(gm, o);
  const auto before = measure(by_flops.stages);
  o.measure = measure;
  o.refine_rounds = 4;
  const dist::PipelinePlan refined = dist::pipeline_split(gm, o);
  const auto after = measure(refined.stages);
  EXPECT_EQ(refined.balance, "time (measured)");
  EXPECT_LT(*std::max_element(after.begin(), after.end()), *std::max_element(before.begin(), before.end()));
  EXPECT_EQ(*std::max_element(after.begin(), after.end()), 7.0);  // {stem, layer0 conv a} | the rest: 6 | 7
  for (size_t k = 0; k < 2; ++k) EXPECT_DOUBLE_EQ(refined.stages[k].cost, after[k] * 1000.0);
  EXPECT_TRUE(dist::bitwise_equal(dist::run_stages(refined.stages, {images(2)}), gm->forward({images(2)})));
}

TEST(PipelineSplit, GivenCutsRebuildTheSameSplit) {
  at::NoGradGuard no_grad;
  auto gm = small_resnet();
  const at::Tensor x = images(2);
  dist::SplitOptions o;
  o.stages = 3;
  o.example_inputs = {x};
  const dist::PipelinePlan plan = dist::pipeline_split(gm, o);  // balanced by profiled time
  auto other = small_resnet();  // the same model, as another rank loads it
  dist::SplitOptions again;
  again.stages = 3;
  again.cuts = plan.cuts;
  again.example_inputs = {x};
  again.only_stage = 1;
  const dist::PipelinePlan rebuilt = dist::pipeline_split(other, again);
  EXPECT_EQ(rebuilt.split_id, plan.split_id);
  EXPECT_EQ(rebuilt.model_fingerprint, plan.model_fingerprint);
  EXPECT_FALSE(rebuilt.stages[0].module);
  ASSERT_TRUE(rebuilt.stages[1].module);
  EXPECT_EQ(rebuilt.stages[1].inputs, plan.stages[1].inputs);
  const auto in1 = dist::stage_inputs(plan.stages[1], plan.stages[0].module->forward({x}));
  EXPECT_TRUE(dist::bitwise_equal(rebuilt.stages[1].module->forward(in1), plan.stages[1].module->forward(in1)));
  // Another model (other weights) has another fingerprint.
  EXPECT_NE(dist::model_fingerprint(*small_resnet(7)), plan.model_fingerprint);
}

TEST(PipelineSplit, ErrorsAreOneLine) {
  auto gm = small_resnet(0, 1);  // 13 call nodes
  dist::SplitOptions o;
  o.stages = 20;
  o.example_inputs = {images(2)};
  EXPECT_EQ(error_of([&] { dist::pipeline_split(gm, o); }),
            "cannot cut a model of 13 call nodes into 20 stages (each stage needs at least one)");
  o.stages = 2;
  o.example_inputs.clear();
  EXPECT_EQ(error_of([&] { dist::pipeline_split(gm, o); }),
            "pipeline_split: example inputs (one microbatch) are needed to balance the stages");
  o.cuts = {13};
  EXPECT_EQ(error_of([&] { dist::pipeline_split(gm, o); }),
            "pipeline_split: cut positions must increase within [1, 12] (the model has 13 call nodes): a split of another model?");
  // A value that cannot cross ranks (here marked so) is never cut across.
  for (fx::Node* n : gm->graph().nodes())
    if (n->name() == "relu") n->meta()["type"] = std::string("object");
  o.cuts = {3};
  EXPECT_EQ(error_of([&] { dist::pipeline_split(gm, o); }),
            "pipeline_split: cut 3 would send relu (object) between ranks");
}

TEST(StageFiles, SaveAndLoadEachStage) {
  at::NoGradGuard no_grad;
  TempDir dir;
  auto gm = small_resnet();
  const at::Tensor x = images(2);
  dist::SplitOptions o;
  o.stages = 3;
  o.balance = dist::Balance::Flops;
  o.example_inputs = {x};
  const dist::PipelinePlan plan = dist::pipeline_split(gm, o);
  std::vector<dist::PipelineStage> loaded;
  for (const auto& s : plan.stages) {
    dist::save_stage(s, dir / ("stage_" + std::to_string(s.index) + ".fx"));
    loaded.push_back(dist::load_stage(dir / ("stage_" + std::to_string(s.index) + ".fx")));
    const auto& l = loaded.back();
    EXPECT_EQ(l.index, s.index);
    EXPECT_EQ(l.num_stages, 3);
    EXPECT_EQ(l.inputs, s.inputs);
    EXPECT_EQ(l.outputs, s.outputs);
    EXPECT_EQ(l.model_fingerprint, plan.model_fingerprint);
    EXPECT_EQ(l.split_id, plan.split_id);
    EXPECT_EQ(l.balance, "flops");
    EXPECT_DOUBLE_EQ(l.cost, s.cost);
    // The inputs' shapes travel in the file: optimize_for_inference can prepare for them.
    const auto ex = dist::stage_example_inputs(l);
    ASSERT_EQ(ex.size(), s.inputs.size());
    if (l.index > 0) {
      EXPECT_EQ(ex[0].toTensor().sizes(), (std::vector<int64_t>{2, 8, 12, 12}));
    }
  }
  EXPECT_TRUE(dist::bitwise_equal(dist::run_stages(loaded, {x}), gm->forward({x})));
  // Optimised stages compute the model too (oneDNN kernels: not bit for bit).
  std::vector<dist::PipelineStage> optimized;
  for (const auto& s : loaded) optimized.push_back(dist::optimize_stage(s));
  EXPECT_LT(dist::max_abs_difference(dist::run_stages(optimized, {x}), gm->forward({x})), 1e-4);
  // A model file that is not a stage.
  fx::save(*gm, dir / "model.fx");
  EXPECT_EQ(error_of([&] { dist::load_stage(dir / "model.fx"); }),
            dir / "model.fx" + ": not a pipeline stage file (no stage description; fxcpp pipeline-plan -o writes them)");
}

TEST(Microbatches, SplitAlongDimZeroAndConcatenate) {
  const at::Tensor x = at::arange(10).reshape({5, 2});
  const at::Tensor mask = at::ones({3, 3});  // no batch dimension: every microbatch gets it whole
  const auto mbs = dist::split_microbatches({x, mask, int64_t{4}}, 2);
  ASSERT_EQ(mbs.size(), 2u);
  EXPECT_EQ(mbs[0][0].toTensor().size(0), 3);
  EXPECT_EQ(mbs[1][0].toTensor().size(0), 2);
  EXPECT_TRUE(mbs[1][1].toTensor().equal(mask));
  EXPECT_EQ(mbs[1][2].toInt(), 4);
  const c10::IValue joined = dist::concat_microbatches(
      {c10::ivalue::Tuple::create({mbs[0][0], int64_t{1}}), c10::ivalue::Tuple::create({mbs[1][0], int64_t{1}})});
  EXPECT_TRUE(joined.toTupleRef().elements()[0].toTensor().equal(x));
  EXPECT_EQ(error_of([&] { dist::split_microbatches({x}, 6); }),
            "a batch of 5 cannot be cut into 6 microbatches (at most one per row)");
  EXPECT_EQ(error_of([&] { dist::split_microbatches({int64_t{1}}, 2); }),
            "no input is a tensor with a batch dimension (dim 0) to cut into microbatches");
}

TEST(Simulation, FillDrainSchedule) {
  dist::SimulationInput in;
  in.stage_ms = {10, 10};
  in.boundary_bytes = {0, 0};
  in.microbatches = 4;
  in.batch = 8;
  const dist::SimulationResult r = dist::simulate_pipeline(in);
  EXPECT_DOUBLE_EQ(r.batch_ms, 50);  // (M + S - 1) t
  EXPECT_NEAR(r.bubble_fraction, 1.0 / 5.0, 1e-12);  // (S - 1) / (M + S - 1)
  EXPECT_NEAR(r.speedup, 80.0 / 50.0, 1e-12);
  EXPECT_NEAR(r.steady_throughput, 8.0 / 40.0 * 1000.0, 1e-9);
  // A 1 MB boundary over 1 GB/s with 0.5 ms latency: 1.5 ms per message.
  in.boundary_bytes = {1e6, 0};
  in.bandwidth = 1e9;
  in.latency_ms = 0.5;
  const dist::SimulationResult c = dist::simulate_pipeline(in);
  EXPECT_NEAR(c.link_ms[0], 1.5, 1e-12);
  EXPECT_NEAR(c.batch_ms, 50 + 1.5 + 0.5, 1e-9);  // one transfer in the fill, the output's latency at the end
  // A link slower than the stages is the bottleneck.
  in.bandwidth = 1e7;  // 100 ms per microbatch
  EXPECT_NEAR(dist::simulate_pipeline(in).steady_ms_per_microbatch, 100.5, 1e-9);
}

}  // namespace
