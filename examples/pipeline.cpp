// A model cut into two pipeline stages, run by two ranks over c10d's
// ProcessGroupGloo on 127.0.0.1, and by two data-parallel ranks.
//
// The ranks are threads of this process here, each with its own process
// group: exactly what two processes (`fxcpp launch --nproc 2 -- ...`) or two
// machines (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE) would do, where each
// would call fx::distributed::rendezvous_from_env() instead.
//
// 1. pipeline_split: the model's call nodes cut into 2 stages balanced by
//    FLOPs (deterministic, so every rank computes the same cuts), each stage
//    a GraphModule whose inputs and outputs are the values crossing the cut.
// 2. PipelineRunner: rank 0 feeds 4 microbatches through stage 0 and sends
//    its activations to rank 1, which runs stage 1 and sends the outputs back.
// 3. DataParallelRunner: each rank runs the whole model on half the batch.
// Both equal one process on the same microbatches, bit for bit.
#include <fx/distributed.h>
#include <fx/fx.h>

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <iostream>
#include <thread>

namespace dist = fx::distributed;

// conv -> relu -> conv -> relu -> (+ skip) -> pool -> flatten -> linear
std::shared_ptr<fx::GraphModule> make_model() {
  torch::manual_seed(0);
  auto root = std::make_shared<torch::nn::Module>("Net");
  root->register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 16, 3).padding(1)).ptr());
  root->register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 16, 3).padding(1)).ptr());
  root->register_module("conv3", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 16, 3).padding(1)).ptr());
  root->register_module("fc", torch::nn::Linear(16, 10).ptr());
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* a = g->call_function("aten::relu", {g->call_module("conv1", {x})});
  fx::Node* b = g->call_function("aten::relu", {g->call_module("conv2", {a})});
  fx::Node* c = g->call_function("aten::add", {g->call_module("conv3", {b}), a});
  fx::Node* p = g->call_function("aten::adaptive_avg_pool2d", {c, fx::Argument::list({int64_t{1}, int64_t{1}})});
  g->output(g->call_module("fc", {g->call_function("aten::flatten", {p, int64_t{1}})}));
  return std::make_shared<fx::GraphModule>(root, g);
}

int main() {
  at::NoGradGuard no_grad;
  dist::quiet_c10d_logging();
  auto model = make_model();
  const at::Tensor batch = torch::randn({8, 3, 32, 32});
  const int64_t microbatches = 4;

  // 1. Two stages, balanced by FLOPs on one microbatch.
  dist::SplitOptions split;
  split.stages = 2;
  split.balance = dist::Balance::Flops;
  split.example_inputs = dist::split_microbatches({batch}, microbatches)[0];
  const dist::PipelinePlan plan = dist::pipeline_split(model, split);
  for (const auto& s : plan.stages) {
    std::cout << "stage " << s.index << ": " << s.nodes << " nodes, " << s.cost / 1e6 << " MFLOPs, receives (";
    for (size_t i = 0; i < s.inputs.size(); ++i) std::cout << (i ? ", " : "") << s.inputs[i];
    std::cout << ")\n";
  }

  // 2 and 3. Two ranks: a TCPStore on a free port of 127.0.0.1 (as `fxcpp launch` hosts it).
  dist::StoreServer store("127.0.0.1", 0);
  c10::IValue piped, shared;
  auto rank_main = [&](int rank) {
    dist::RendezvousOptions o;
    o.master_addr = "127.0.0.1";
    o.master_port = store.port();
    o.rank = rank;
    o.world_size = 2;
    o.store_hosted = true;
    o.timeout = std::chrono::seconds(60);
    auto group = dist::ProcessGroup::create(o);
    {
      dist::PipelineRunner runner(group, plan.stages[static_cast<size_t>(rank)]);
      if (rank == 0) {
        piped = runner.run({batch}, microbatches);
        runner.stop();
      } else {
        runner.serve();
      }
    }
    dist::DataParallelRunner data_parallel(group, model);
    if (rank == 0) {
      shared = data_parallel.run({batch});
      data_parallel.stop();
    } else {
      data_parallel.serve();
    }
  };
  std::thread rank1(rank_main, 1);
  rank_main(0);
  rank1.join();

  const bool pipeline_ok = dist::bitwise_equal(piped, dist::microbatched_forward(*model, {batch}, microbatches));
  const bool data_parallel_ok = dist::bitwise_equal(shared, dist::microbatched_forward(*model, {batch}, 2));
  std::cout << "pipeline output " << piped.toTensor().sizes() << ", bitwise equal to one process: "
            << (pipeline_ok ? "yes" : "no") << "\n";
  std::cout << "data-parallel output " << shared.toTensor().sizes() << ", bitwise equal to one process: "
            << (data_parallel_ok ? "yes" : "no") << "\n";
  return pipeline_ok && data_parallel_ok ? 0 : 1;
}
