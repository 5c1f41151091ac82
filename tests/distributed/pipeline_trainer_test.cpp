// PipelineTrainer on 2 and 3 ranks (threads of this process), GPipe and
// 1F1B: after N steps, every stage's parameters equal one process that
// accumulates the gradients of the same microbatches (a small resnet and a
// small transformer encoder); the schedules' orders and activation bounds.
#include "dist_test_util.h"

#include <fx/trace.h>

#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/normalization.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <set>

namespace {

using namespace dist_test;

/// A transformer encoder: an input projection, `layers` blocks of single-head self-attention and a GELU
/// feed-forward (post-norm, residuals), mean pooling over the sequence and a classifier.
struct EncoderImpl : torch::nn::Module {
  explicit EncoderImpl(int64_t layers = 2, int64_t d = 16, int64_t features = 8, int64_t classes = 10) : d(d) {
    embed = register_module("embed", torch::nn::Linear(features, d));
    for (int64_t l = 0; l < layers; ++l) {
      const std::string p = "l" + std::to_string(l) + "_";
      Block b;
      b.q = register_module(p + "q", torch::nn::Linear(d, d));
      b.k = register_module(p + "k", torch::nn::Linear(d, d));
      b.v = register_module(p + "v", torch::nn::Linear(d, d));
      b.o = register_module(p + "o", torch::nn::Linear(d, d));
      b.ln1 = register_module(p + "ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
      b.ff1 = register_module(p + "ff1", torch::nn::Linear(d, 2 * d));
      b.ff2 = register_module(p + "ff2", torch::nn::Linear(2 * d, d));
      b.ln2 = register_module(p + "ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
      blocks.push_back(b);
    }
    head = register_module("head", torch::nn::Linear(d, classes));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = embed(x);
    for (Block& b : blocks) {
      at::Tensor scores = at::matmul(b.q(h), b.k(h).transpose(1, 2)) / std::sqrt(static_cast<double>(d));
      h = b.ln1(h + b.o(at::matmul(at::softmax(scores, -1), b.v(h))));
      h = b.ln2(h + b.ff2(at::gelu(b.ff1(h))));
    }
    return head(h.mean(1));
  }
  struct Block {
    torch::nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr}, ff1{nullptr}, ff2{nullptr};
    torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  };
  int64_t d;
  torch::nn::Linear embed{nullptr}, head{nullptr};
  std::vector<Block> blocks;
};
TORCH_MODULE(Encoder);

constexpr int64_t kMicrobatches = 4, kMicro = 2, kTrainSteps = 3;

/// The model to train, and one microbatch of its inputs.
struct Case {
  std::string name;
  std::function<std::shared_ptr<fx::GraphModule>()> make;
  std::function<at::Tensor(int64_t rows, int seed)> inputs;
};

std::vector<Case> cases() {
  auto resnet_inputs = [](int64_t rows, int seed) { return images(rows, seed, 8); };
  auto encoder_inputs = [](int64_t rows, int seed) {
    torch::manual_seed(seed);
    return at::randn({rows, 5, 8});
  };
  return {
      {"resnet", [] { return small_resnet(0, 2); }, resnet_inputs},
      {"encoder",
       [encoder_inputs] {
         torch::manual_seed(0);
         Encoder enc(2);
         return fx::symbolic_trace(enc, {encoder_inputs(kMicro, 99)});
       },
       encoder_inputs},
  };
}

at::Tensor class_labels(int64_t n, int seed) {
  torch::manual_seed(seed);
  return at::randint(0, 10, {n}, at::kLong);
}

std::map<std::string, at::Tensor> named(const fx::GraphModule& gm) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : gm.named_parameters(true)) out[p.key()] = p.value();
  return out;
}

void train_pipeline_and_compare(const Case& c, int stages, dist::Schedule schedule) {
  SCOPED_TRACE(c.name + ", " + std::to_string(stages) + " stages, " + dist::to_string(schedule));
  std::vector<at::Tensor> xs, ys;
  for (int s = 0; s < kTrainSteps; ++s) {
    xs.push_back(c.inputs(kMicrobatches * kMicro, 300 + s));
    ys.push_back(class_labels(kMicrobatches * kMicro, 400 + s));
  }
  // Each rank its own model (its stage shares the model's parameters), split the same way.
  std::vector<std::shared_ptr<fx::GraphModule>> models;
  std::vector<dist::PipelineStage> my_stage;
  for (int r = 0; r < stages; ++r) {
    models.push_back(c.make());
    dist::SplitOptions split;
    split.stages = stages;
    split.balance = dist::Balance::Flops;
    split.example_inputs = {c.inputs(kMicro, 5)};
    my_stage.push_back(dist::pipeline_split(models.back(), split).stages[static_cast<size_t>(r)]);
  }
  std::vector<double> losses(static_cast<size_t>(stages));
  std::vector<int64_t> peak(static_cast<size_t>(stages));
  run_ranks(stages, [&](int rank, std::shared_ptr<dist::ProcessGroup> group) {
    dist::PipelineTrainOptions o;
    o.schedule = schedule;
    o.microbatches = kMicrobatches;
    dist::PipelineTrainer trainer(group, my_stage[static_cast<size_t>(rank)], o);
    torch::optim::SGD sgd(trainer.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    for (int s = 0; s < kTrainSteps; ++s) {
      sgd.zero_grad();
      losses[static_cast<size_t>(rank)] = trainer.train_step({xs[static_cast<size_t>(s)]}, ys[static_cast<size_t>(s)]);
      sgd.step();
    }
    peak[static_cast<size_t>(rank)] = trainer.stats().peak_microbatches_kept;
  });

  // One process: the same microbatches, gradients accumulated (loss / M each), then one step.
  auto single = c.make();
  torch::optim::SGD sgd(single->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  double last_loss = 0;
  for (int s = 0; s < kTrainSteps; ++s) {
    sgd.zero_grad();
    last_loss = 0;
    for (int64_t i = 0; i < kMicrobatches; ++i) {
      const at::Tensor out = single->forward({xs[static_cast<size_t>(s)].narrow(0, i * kMicro, kMicro)}).toTensor();
      at::Tensor loss =
          torch::nn::functional::cross_entropy(out, ys[static_cast<size_t>(s)].narrow(0, i * kMicro, kMicro)) /
          static_cast<double>(kMicrobatches);
      last_loss += loss.item<double>();
      loss.backward();
    }
    sgd.step();
  }
  const auto reference = named(*single);
  const auto initial = named(*c.make());
  size_t compared = 0;
  for (int r = 0; r < stages; ++r) {
    std::set<const void*> mine;
    for (const at::Tensor& p : my_stage[static_cast<size_t>(r)].module->parameters()) mine.insert(p.data_ptr());
    EXPECT_FALSE(mine.empty()) << "stage " << r;
    for (const auto& [name, p] : named(*models[static_cast<size_t>(r)])) {
      if (!mine.count(p.data_ptr())) continue;
      ++compared;
      const at::Tensor& want = reference.at(name);
      const double scale = std::max(want.abs().max().item<double>(), 1e-12);
      EXPECT_LT((p - want).abs().max().item<double>() / scale, 1e-5) << name << " (stage " << r << ")";
      // (A key projection's bias gets no gradient: softmax ignores a shift shared by every key.)
      if (name.find("_k.bias") == std::string::npos) {
        EXPECT_FALSE(at::equal(p, initial.at(name))) << name << " did not train";
      }
    }
    EXPECT_NEAR(losses[static_cast<size_t>(r)], last_loss, 1e-6 * std::abs(last_loss));
  }
  EXPECT_EQ(compared, reference.size());
  // Stage 0 keeps every microbatch under GPipe, at most `stages` under 1F1B.
  EXPECT_EQ(peak[0], schedule == dist::Schedule::GPipe ? kMicrobatches : std::min<int64_t>(stages, kMicrobatches));
  EXPECT_EQ(peak.back(), schedule == dist::Schedule::GPipe ? kMicrobatches : 1);
}

TEST(PipelineTrainer, TwoAndThreeStagesBothSchedulesEqualGradientAccumulation) {
  for (const Case& c : cases())
    for (int stages : {2, 3})
      for (dist::Schedule schedule : {dist::Schedule::GPipe, dist::Schedule::OneFOneB})
        train_pipeline_and_compare(c, stages, schedule);
}

std::string order(dist::Schedule s, int stage, int stages, int64_t m) {
  std::string out;
  for (const auto& a : dist::schedule_actions(s, stage, stages, m))
    out += (out.empty() ? "" : " ") + std::string(1, a.kind) + std::to_string(a.microbatch);
  return out;
}

TEST(PipelineTrainer, ScheduleOrders) {
  EXPECT_EQ(order(dist::Schedule::GPipe, 0, 3, 3), "F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(order(dist::Schedule::OneFOneB, 0, 3, 4), "F0 F1 F2 B0 F3 B1 B2 B3");
  EXPECT_EQ(order(dist::Schedule::OneFOneB, 1, 3, 4), "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(order(dist::Schedule::OneFOneB, 2, 3, 4), "F0 B0 F1 B1 F2 B2 F3 B3");
  EXPECT_EQ(order(dist::Schedule::OneFOneB, 0, 4, 2), "F0 F1 B0 B1");
  EXPECT_EQ(dist::parse_schedule("1f1b"), dist::Schedule::OneFOneB);
  try {
    dist::parse_schedule("interleaved");
    ADD_FAILURE() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(std::string(e.what()), "unknown pipeline schedule 'interleaved' (expected gpipe or 1f1b)");
  }
}

}  // namespace

namespace {

TEST(PipelineTrainer, SimulatedStepBubbleAndActivations) {
  // 4 equal stages (forward 1 ms, backward 2 ms), 8 microbatches, an infinite link: both schedules take
  // (M + S - 1) x (f + b) = 33 ms, a bubble of (S - 1) / (M + S - 1) = 3/11; GPipe keeps 8 microbatches on
  // every stage, 1F1B S - s on stage s.
  dist::TrainingSimulationInput in;
  in.forward_ms = {1, 1, 1, 1};
  in.backward_ms = {2, 2, 2, 2};
  in.microbatches = 8;
  for (dist::Schedule s : {dist::Schedule::GPipe, dist::Schedule::OneFOneB}) {
    in.schedule = s;
    const dist::TrainingSimulationResult r = dist::simulate_pipeline_training(in);
    EXPECT_DOUBLE_EQ(r.step_ms, 33.0) << dist::to_string(s);
    EXPECT_NEAR(r.bubble_fraction, 3.0 / 11.0, 1e-12) << dist::to_string(s);
    EXPECT_EQ(r.peak_microbatches_kept,
              (s == dist::Schedule::GPipe ? std::vector<int64_t>{8, 8, 8, 8} : std::vector<int64_t>{4, 3, 2, 1}));
  }
  // A link of 1 ms per message (latency) on each boundary and direction: 2 ms more per boundary crossed
  // on the critical path of the first microbatch down and the last one back up.
  in.latency_ms = 1;
  in.schedule = dist::Schedule::GPipe;
  EXPECT_DOUBLE_EQ(dist::simulate_pipeline_training(in).step_ms, 33.0 + 2 * 3);
  in.backward_ms = {2, 2};
  try {
    dist::simulate_pipeline_training(in);
    ADD_FAILURE() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(std::string(e.what()), "simulate_pipeline_training: 4 forward times but 2 backward times");
  }
}

TEST(DataParallelSimulation, RingAllReduceBehindBackward) {
  // Forward 10 ms, backward 20 ms, optimizer 2 ms; two buckets of 100 MB in all-reduce order; 2 ranks on a
  // 1 GB/s link: each bucket's ring all-reduce is 2 (N - 1) messages of 50 MB, 100 ms. Bucket 0 is ready
  // half way through backward (20 ms) and ends at 120 ms; bucket 1 (ready at 30 ms) waits for the link and
  // ends at 220 ms: 190 ms not hidden by backward, a step of 222 ms.
  dist::DataParallelSimulationInput in;
  in.forward_ms = 10, in.backward_ms = 20, in.other_ms = 2;
  in.bucket_bytes = {100e6, 100e6};
  in.ranks = 2;
  in.bandwidth = 1e9;
  dist::DataParallelSimulationResult r = dist::simulate_data_parallel_training(in);
  EXPECT_DOUBLE_EQ(r.allreduce_ms, 200.0);
  EXPECT_DOUBLE_EQ(r.exposed_ms, 190.0);
  EXPECT_DOUBLE_EQ(r.step_ms, 222.0);
  EXPECT_DOUBLE_EQ(r.speedup, 2 * 32.0 / 222.0);
  // A free link: no cost, N times the samples.
  in.bandwidth = 0;
  r = dist::simulate_data_parallel_training(in);
  EXPECT_DOUBLE_EQ(r.step_ms, 32.0);
  EXPECT_DOUBLE_EQ(r.speedup, 2.0);
  // 4 ranks, latency only (1 ms a message), one bucket ready at the end of backward: 2 x 3 messages after it.
  in.ranks = 4, in.latency_ms = 1, in.bucket_bytes = {1e6};
  r = dist::simulate_data_parallel_training(in);
  EXPECT_DOUBLE_EQ(r.exposed_ms, 6.0);
  EXPECT_DOUBLE_EQ(r.step_ms, 38.0);
  // One rank: nothing to all-reduce.
  in.ranks = 1;
  EXPECT_DOUBLE_EQ(dist::simulate_data_parallel_training(in).step_ms, 32.0);
  in.ranks = 0;
  try {
    dist::simulate_data_parallel_training(in);
    ADD_FAILURE() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(std::string(e.what()), "simulate_data_parallel_training: ranks must be at least 1");
  }
}

}  // namespace
