// Training on two ranks over c10d's ProcessGroupGloo on 127.0.0.1: data
// parallel (DataParallelTrainer, DDP's design), then pipeline parallel
// (PipelineTrainer, 1F1B), each checked against one process.
//
// The ranks are threads of this process here, each with its own process
// group: what two processes (`fxcpp launch --nproc 2 -- ...`) or two machines
// would do, where each would call fx::distributed::rendezvous_from_env().
//
// 1. DataParallelTrainer: each rank trains the same model on its half of the
//    batch; the gradients are averaged in buckets while backward runs, so
//    after the optimizer step every rank holds the parameters one process
//    training on the whole batch would.
// 2. PipelineTrainer: the model cut into 2 stages, 4 microbatches scheduled
//    one forward one backward; the gradients equal one process accumulating
//    the same microbatches.
#include <fx/distributed.h>
#include <fx/fx.h>

#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <iostream>
#include <thread>

namespace dist = fx::distributed;

// conv -> relu -> conv -> relu -> pool -> flatten -> linear, weights from `seed`.
std::shared_ptr<fx::GraphModule> make_model(int seed) {
  torch::manual_seed(seed);
  auto root = std::make_shared<torch::nn::Module>("Net");
  root->register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 16, 3).padding(1)).ptr());
  root->register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 16, 3).padding(1)).ptr());
  root->register_module("fc", torch::nn::Linear(16, 10).ptr());
  auto g = std::make_shared<fx::Graph>();
  fx::Node* a = g->call_function("aten::relu", {g->call_module("conv1", {g->placeholder("x")})});
  fx::Node* b = g->call_function("aten::relu", {g->call_module("conv2", {a})});
  fx::Node* p = g->call_function("aten::adaptive_avg_pool2d", {b, fx::Argument::list({int64_t{1}, int64_t{1}})});
  g->output(g->call_module("fc", {g->call_function("aten::flatten", {p, int64_t{1}})}));
  return std::make_shared<fx::GraphModule>(root, g);
}

/// Runs rank_main(rank, group) on two threads, each a rank of its own process group.
void two_ranks(const std::function<void(int, std::shared_ptr<dist::ProcessGroup>)>& rank_main) {
  dist::StoreServer store("127.0.0.1", 0);  // a TCPStore on a free port, as `fxcpp launch` hosts it
  auto start = [&](int rank) {
    dist::RendezvousOptions o;
    o.master_port = store.port();
    o.rank = rank;
    o.world_size = 2;
    o.store_hosted = true;
    rank_main(rank, dist::ProcessGroup::create(o));
  };
  std::thread rank1(start, 1);
  start(0);
  rank1.join();
}

double largest_difference(fx::GraphModule& a, fx::GraphModule& b) {
  double worst = 0;
  auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) worst = std::max(worst, (pa[i] - pb[i]).abs().max().item<double>());
  return worst;
}

int main() {
  dist::quiet_c10d_logging();
  torch::manual_seed(1);
  const at::Tensor images = torch::randn({8, 3, 16, 16});
  const at::Tensor labels = torch::randint(0, 10, {8}, at::kLong);
  const int steps = 3;

  // 1. Data parallel: rank 1 starts from other weights; the trainer broadcasts rank 0's.
  std::vector<std::shared_ptr<fx::GraphModule>> replicas = {make_model(0), make_model(1)};
  two_ranks([&](int rank, std::shared_ptr<dist::ProcessGroup> group) {
    auto model = replicas[static_cast<size_t>(rank)];
    dist::DataParallelTrainer ddp(group, model);
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    for (int step = 0; step < steps; ++step) {
      sgd.zero_grad();
      const at::Tensor x = images.narrow(0, rank * 4, 4), y = labels.narrow(0, rank * 4, 4);  // this rank's half
      ddp.backward(torch::nn::functional::cross_entropy(ddp.forward({x}).toTensor(), y));
      sgd.step();
    }
    if (rank == 0)
      std::cout << "data parallel: " << ddp.bucket_parameters().size() << " gradient bucket(s), all-reduce "
                << ddp.stats().allreduce_ms << " ms in the last step\n";
  });
  auto whole_batch = make_model(0);
  torch::optim::SGD sgd(whole_batch->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < steps; ++step) {
    sgd.zero_grad();
    torch::nn::functional::cross_entropy(whole_batch->forward({images}).toTensor(), labels).backward();
    sgd.step();
  }
  const double dp_difference = largest_difference(*replicas[0], *whole_batch);
  const bool ranks_equal = largest_difference(*replicas[0], *replicas[1]) == 0;
  std::cout << "data parallel: ranks bit for bit equal: " << (ranks_equal ? "yes" : "no")
            << ", largest difference to one process on the whole batch: " << dp_difference << "\n";

  // 2. Pipeline: every rank cuts its own copy the same way (FLOPs) and trains its stage.
  const int64_t microbatches = 4;
  std::vector<std::shared_ptr<fx::GraphModule>> copies = {make_model(0), make_model(0)};
  std::vector<dist::PipelineStage> stages;
  for (int rank = 0; rank < 2; ++rank) {
    dist::SplitOptions split;
    split.stages = 2;
    split.balance = dist::Balance::Flops;
    split.example_inputs = dist::split_microbatches({images}, microbatches)[0];
    stages.push_back(dist::pipeline_split(copies[static_cast<size_t>(rank)], split).stages[static_cast<size_t>(rank)]);
  }
  two_ranks([&](int rank, std::shared_ptr<dist::ProcessGroup> group) {
    dist::PipelineTrainOptions options;
    options.microbatches = microbatches;  // schedule: 1F1B
    dist::PipelineTrainer trainer(group, stages[static_cast<size_t>(rank)], options);
    torch::optim::SGD stage_sgd(trainer.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    for (int step = 0; step < steps; ++step) {
      stage_sgd.zero_grad();
      const double loss = trainer.train_step({images}, labels);  // every rank passes the batch
      stage_sgd.step();
      if (rank == 0) std::cout << "pipeline step " << step + 1 << ": loss " << loss << "\n";
    }
  });
  auto accumulated = make_model(0);  // one process, the same microbatches, gradients accumulated
  torch::optim::SGD acc_sgd(accumulated->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < steps; ++step) {
    acc_sgd.zero_grad();
    for (int64_t i = 0; i < microbatches; ++i) {
      const at::Tensor out = accumulated->forward({images.narrow(0, i * 2, 2)}).toTensor();
      (torch::nn::functional::cross_entropy(out, labels.narrow(0, i * 2, 2)) / static_cast<double>(microbatches))
          .backward();
    }
    acc_sgd.step();
  }
  // Rank 0 trained stage 0's parameters in copies[0], rank 1 stage 1's in copies[1].
  double pipe_difference = 0;
  auto want = accumulated->named_parameters();
  for (int rank = 0; rank < 2; ++rank)
    for (const at::Tensor& p : stages[static_cast<size_t>(rank)].module->parameters())
      for (const auto& named : copies[static_cast<size_t>(rank)]->named_parameters())
        if (named.value().is_same(p))
          pipe_difference = std::max(pipe_difference, (p - want[named.key()]).abs().max().item<double>());
  std::cout << "pipeline: largest difference to one process accumulating the microbatches: " << pipe_difference << "\n";
  return ranks_equal && dp_difference < 1e-5 && pipe_difference < 1e-5 ? 0 : 1;
}
