// Training through fx::aot_module (functorch's aot_module, in C++).
//
// A small conv net written with torch::nn is compiled for training: its
// forward and backward are captured together as one joint graph of ATen
// operators, split by fxcpp's min cut (batch-norm outputs and activations
// recomputed in backward rather than kept), and run as one autograd node.
// The module's own parameters get the gradients, so the usual torch::optim
// loop trains it, here on channels-last (NHWC) activations, with
// fx::FusedSGD (torch::optim::SGD updating each parameter in one pass). This example
// checks the compiled step against eager libtorch, prints the graphs' sizes
// and the memory they keep, and draws the partitioned joint graph.
#include <fx/aot.h>
#include <fx/fused_sgd.h>

#include <torch/torch.h>

#include <cmath>
#include <iostream>

struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 16, 3).padding(1).bias(false)))),
        bn1(register_module("bn1", torch::nn::BatchNorm2d(16))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1).bias(false)))),
        bn2(register_module("bn2", torch::nn::BatchNorm2d(32))),
        fc(register_module("fc", torch::nn::Linear(32, 10))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = torch::relu(bn1(conv1(x)));
    y = torch::relu(bn2(conv2(y)));
    return fc(torch::flatten(torch::adaptive_avg_pool2d(y, {1, 1}), 1));
  }
  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Conv2d conv2;
  torch::nn::BatchNorm2d bn2;
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

int main() {
  torch::manual_seed(0);
  Net eager;
  torch::manual_seed(0);
  Net net;  // the same weights

  fx::AotOptions options;
  options.partition_fn = fx::min_cut_partition();  // or fx::default_partition, fx::min_cut_rematerialization_partition
  // Python's model.to(memory_format=torch.channels_last): the step copies 4-d
  // inputs channels-last and stores the 4-d parameters so (in place, at the
  // first forward), and convolutions and batch norms run NHWC kernels.
  options.memory_format = c10::MemoryFormat::ChannelsLast;
  auto compiled = fx::aot_module(net, options);

  // SGD's options, state and checkpoints; zero_grad() sets gradients to none.
  fx::FusedSGD opt(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD opt_eager(eager->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::Tensor x = torch::randn({8, 3, 16, 16});
  torch::Tensor labels = torch::randint(0, 10, {8});
  bool ok = true;
  for (int step = 0; step < 5; ++step) {
    opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(compiled->forward(x), labels);
    loss.backward();
    opt.step();

    opt_eager.zero_grad();
    auto eager_loss = torch::nn::functional::cross_entropy(eager->forward(x), labels);
    eager_loss.backward();
    opt_eager.step();

    const double a = loss.item<double>(), b = eager_loss.item<double>();
    std::cout << "step " << step << ": loss " << a << " (eager " << b << ")\n";
    ok = ok && std::abs(a - b) <= 1e-4 * std::abs(b);
  }

  const bool nhwc = net->conv1->weight.is_contiguous(c10::MemoryFormat::ChannelsLast);
  std::cout << "conv1.weight is " << (nhwc ? "channels-last" : "NOT channels-last") << "\n";
  ok = ok && nhwc;

  const fx::AotGraphs& g = compiled->graphs();
  std::cout << "joint graph: " << g.joint.module->graph().nodes().size() << " nodes; forward "
            << g.partitioned.forward->graph().nodes().size() << ", backward "
            << g.partitioned.backward->graph().nodes().size() << "\n"
            << "saved for backward: " << g.partitioned.saved.size() << " values, "
            << g.partitioned.activation_bytes / 1024 << " KiB of activations\n";
  // functorch's own partition of the same joint graph keeps more:
  const fx::PartitionedGraphs functorch = fx::default_partition(g.joint);
  std::cout << "default_partition would keep " << functorch.activation_bytes / 1024 << " KiB\n";
  ok = ok && g.partitioned.activation_bytes < functorch.activation_bytes;

  fx::draw_joint_graph(g.partitioned, "aot_training_joint.svg");
  std::cout << "drew aot_training_joint.svg\n";
  std::cout << (ok ? "the compiled training step matches eager libtorch\n" : "MISMATCH\n");
  return ok ? 0 : 1;
}
