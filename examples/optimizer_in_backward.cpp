// SGD stepped inside the compiled backward (PyTorch's optimizer-in-backward).
//
// An ordinary step holds every parameter's gradient at the end of backward
// (resnet18: 45 MB), then the optimizer reads them. With
// AotModule::set_optimizer_in_backward the compiled backward hands each
// gradient to the optimizer as soon as it is computed and the graph no
// longer reads that parameter; the parameter is updated there and the
// gradient freed. The loop is forward and backward only: no zero_grad(), no
// step(), no .grad. This example trains a small conv net so for five steps
// beside eager libtorch with torch::optim::SGD, and prints where the updates
// happened.
#include <fx/aot.h>
#include <fx/fused_sgd.h>

#include <torch/torch.h>

#include <cmath>
#include <iostream>

/// conv - batch norm - ReLU, twice, pooled into a linear classifier.
torch::nn::Sequential small_net() {
  using namespace torch::nn;
  return Sequential(Conv2d(Conv2dOptions(3, 16, 3).padding(1).bias(false)), BatchNorm2d(16), ReLU(),
                    Conv2d(Conv2dOptions(16, 32, 3).padding(1).bias(false)), BatchNorm2d(32), ReLU(),
                    AdaptiveAvgPool2d(1), Flatten(), Linear(32, 10));
}

int main() {
  torch::manual_seed(0);
  torch::nn::Sequential eager = small_net();
  torch::manual_seed(0);
  torch::nn::Sequential net = small_net();  // the same weights

  fx::AotOptions options;
  options.partition_fn = fx::min_cut_partition();
  auto compiled = fx::aot_module(net, options);
  const auto sgd = torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-4);
  compiled->set_optimizer_in_backward(std::make_shared<fx::FusedSGD>(net->parameters(), sgd));
  torch::optim::SGD opt_eager(eager->parameters(), sgd);

  torch::Tensor x = torch::randn({8, 3, 16, 16});
  torch::Tensor labels = torch::randint(0, 10, {8});
  bool ok = true;
  for (int step = 0; step < 5; ++step) {
    auto loss = torch::nn::functional::cross_entropy(compiled->forward(x), labels);
    loss.backward();  // the parameters are updated in here

    opt_eager.zero_grad();
    auto eager_loss = torch::nn::functional::cross_entropy(eager->forward(x), labels);
    eager_loss.backward();
    opt_eager.step();

    const double a = loss.item<double>(), b = eager_loss.item<double>();
    std::cout << "step " << step << ": loss " << a << " (eager " << b << ")\n";
    ok = ok && std::abs(a - b) <= 1e-4 * std::abs(b);
  }
  double worst = 0;
  auto mine = net->named_parameters();
  for (const auto& p : eager->named_parameters()) {
    worst = std::max(worst, (mine[p.key()] - p.value()).abs().max().item<double>());
    ok = ok && !mine[p.key()].grad().defined();  // no gradient kept
  }
  std::cout << "largest parameter difference from eager after 5 steps: " << worst << "\n";
  ok = ok && worst <= 1e-4;

  const fx::OptimizerInBackwardStats stats = compiled->optimizer_in_backward_stats();
  std::cout << stats.steps << " steps: " << stats.updates_at_gradient << " updates right after their gradient, "
            << stats.updates_after_reads << " after later reads of the parameter, " << stats.updates_at_end
            << " when the graph had returned\n";
  ok = ok && stats.steps == 5 && stats.updates_at_gradient + stats.updates_after_reads + stats.updates_at_end ==
                                     5 * net->parameters().size();
  std::cout << (ok ? "OK" : "MISMATCH") << "\n";
  return ok ? 0 : 1;
}
