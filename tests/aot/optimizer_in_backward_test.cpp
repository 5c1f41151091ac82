// AotModule::set_optimizer_in_backward: an optimizer stepped inside the
// compiled backward gives the parameters of backward() then step(), on an
// MLP and on torchvision's mobilenet_v2 where the training compiler's
// rewrites fire; no gradient is stored; updates wait while the graph still
// reads their parameter; clashing uses are refused in one line.
#include "aot_models.h"

#include <fx/aot.h>
#include <fx/fused_sgd.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>

namespace {

/// fc1 - relu - fc2 - relu - fc3.
struct InBackwardMlpImpl : torch::nn::Module {
  InBackwardMlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(6, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 16));
    fc3 = register_module("fc3", torch::nn::Linear(16, 3));
  }
  at::Tensor forward(const at::Tensor& x) { return fc3(torch::relu(fc2(torch::relu(fc1(x))))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(InBackwardMlp);

/// A learnt scale between two layers: tanh(x W1^T) * s, then W2.
struct ScaledImpl : torch::nn::Module {
  ScaledImpl() {
    w1 = register_parameter("w1", torch::randn({8, 6}) * 0.4);
    s = register_parameter("s", torch::rand({8}) + 0.5);
    w2 = register_parameter("w2", torch::randn({4, 8}) * 0.4);
  }
  at::Tensor forward(const at::Tensor& x) { return (torch::tanh(x.mm(w1.t())) * s).mm(w2.t()); }
  at::Tensor w1, s, w2;
};
TORCH_MODULE(Scaled);

double relative_error(const at::Tensor& got, const at::Tensor& want) {
  return (got - want).abs().max().template item<double>() / std::max(want.abs().max().template item<double>(), 1e-12);
}

const torch::optim::SGDOptions kOptions = torch::optim::SGDOptions(0.01).momentum(0.9).weight_decay(1e-4);

/// `steps` steps of a compiled model with the optimizer in its backward
/// against the same compiled model with backward() then step(): the same
/// parameters and buffers after each step, no .grad on the stepped model's
/// parameters; and eager libtorch's parameters after the first step.
/// Returns the stepped module.
template <class M>
std::shared_ptr<fx::AotModule> expect_steps_like_step(const std::function<M()>& make,
                                                      const std::function<at::Tensor()>& input, int steps,
                                                      fx::AotOptions options = {}) {
  torch::manual_seed(7);
  M eager = make();
  torch::manual_seed(7);
  M stepped_after = make();
  torch::manual_seed(7);
  M stepped_in = make();
  auto aot_after = fx::aot_module(stepped_after.ptr(), options);
  auto aot_in = fx::aot_module(stepped_in.ptr(), options);
  torch::optim::SGD opt_eager(eager->parameters(), kOptions);
  fx::FusedSGD opt_after(stepped_after->parameters(), kOptions);
  auto opt_in = std::make_shared<fx::FusedSGD>(stepped_in->parameters(), kOptions);
  aot_in->set_optimizer_in_backward(opt_in);
  for (int step = 0; step < steps; ++step) {
    torch::manual_seed(100 + step);
    at::Tensor x = input();
    // The same dropout masks in the three.
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    const at::Tensor generator_state = generator.get_state();
    opt_eager.zero_grad();
    eager->forward(x).pow(2).mean().backward();
    opt_eager.step();
    generator.set_state(generator_state);
    opt_after.zero_grad();
    aot_after->forward(x).pow(2).mean().backward();
    opt_after.step();
    generator.set_state(generator_state);
    aot_in->forward(x).pow(2).mean().backward();
    auto pa = stepped_after->named_parameters(), pi = stepped_in->named_parameters(), pe = eager->named_parameters();
    // Against eager: a parameter whose gradient vanishes by invariance (a
    // batch norm's shift before another batch norm, zero at the start) is
    // compared at a hundredth of the largest parameter, as aot_training_test
    // compares gradients: its update is rounding noise of the kernels.
    double largest = 0;
    for (const auto& p : pe) largest = std::max(largest, p.value().abs().max().template item<double>());
    for (const auto& p : pa) {
      EXPECT_FALSE(pi[p.key()].grad().defined()) << p.key() << " has a .grad after step " << step;
      EXPECT_LE(relative_error(pi[p.key()], p.value()), 1e-6) << p.key() << " after step " << step;
      // Eager's after the first step only: later steps start from parameters
      // that differ in the last bits, which batch norm over small maps
      // amplifies (aot_training_test measures the compiled step against eager).
      if (step > 0) continue;
      const at::Tensor& want = pe[p.key()];
      const double scale = std::max(want.abs().max().template item<double>(), 1e-2 * largest);
      EXPECT_LE((pi[p.key()] - want).abs().max().template item<double>() / scale, 1e-4)
          << p.key() << " (eager) after step " << step;
    }
    auto ba = stepped_after->named_buffers(), bi = stepped_in->named_buffers();
    for (const auto& b : ba) {
      if (b.value().is_floating_point()) {
        EXPECT_LE(relative_error(bi[b.key()], b.value()), 1e-6) << b.key() << " after step " << step;
      }
    }
  }
  const fx::OptimizerInBackwardStats stats = aot_in->optimizer_in_backward_stats();
  EXPECT_EQ(stats.steps, static_cast<size_t>(steps));
  EXPECT_EQ(stats.updates_at_gradient + stats.updates_after_reads + stats.updates_at_end,
            steps * stepped_in->parameters().size());
  return aot_in;
}

TEST(OptimizerInBackward, MlpStepsAsBackwardThenStep) {
  auto aot = expect_steps_like_step<InBackwardMlp>([] { return InBackwardMlp(); },
                                                   [] { return torch::randn({5, 6}); }, 3);
  // Each linear's input gradient (grad w) is computed before its weight's
  // (grad^T x), the last read of the weight: every update at its gradient.
  const fx::OptimizerInBackwardStats stats = aot->optimizer_in_backward_stats();
  EXPECT_EQ(stats.updates_at_gradient, 3 * 6u);
}

/// A backward compiler that schedules each node reading a graph input right
/// before its first user (as sink_recomputation moves recomputations), then
/// runs the graph: Scaled's h gradient (grad * s, a read of s) moves after
/// s's gradient (sum(grad * h)).
fx::CompiledGraph sinking_compiler(const std::shared_ptr<fx::GraphModule>& gm,
                                   const std::vector<c10::IValue>& examples) {
  std::vector<fx::Node*> nodes;
  for (fx::Node* n : gm->graph().nodes()) nodes.push_back(n);
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    fx::Node* n = *it;
    if (n->op() != fx::Opcode::CallFunction || n->users().empty()) continue;
    bool reads_input = false;
    for (fx::Node* in : n->all_input_nodes()) reads_input = reads_input || in->op() == fx::Opcode::Placeholder;
    if (!reads_input) continue;
    fx::Node* first = nullptr;
    for (fx::Node* m = n->next(); m != nullptr && first == nullptr; m = m->next())
      if (n->users().contains(m)) first = m;
    if (first != nullptr && first != n->next()) first->prepend(n);
  }
  gm->graph().lint();
  return fx::graph_module_compiler(gm, examples);
}

TEST(OptimizerInBackward, AnUpdateWaitsWhileTheGraphReadsItsParameter) {
  fx::AotOptions options;
  options.bw_compiler = sinking_compiler;
  auto aot = expect_steps_like_step<Scaled>([] { return Scaled(); }, [] { return torch::randn({5, 6}); }, 3,
                                            options);
  const fx::OptimizerInBackwardStats stats = aot->optimizer_in_backward_stats();
  EXPECT_EQ(stats.updates_after_reads, 6u);  // s and w2, once the sunk reads have run
  EXPECT_EQ(stats.updates_at_gradient, 3u);  // w1
  EXPECT_EQ(stats.updates_at_end, 0u);
}

TEST(OptimizerInBackward, MobileNetV2WhereTheTrainingRewritesFire) {
  // Batch 8 at 64x64: conv_as_matmul takes the 2x2 and 4x4 maps, and
  // fuse_kernels the batch norms' pointwise chains (issue 66's shapes).
  fx::TrainingRewrites fired;
  fx::AotOptions options;
  options.partition_fn = fx::min_cut_partition();
  options.fw_compiler = options.bw_compiler = [&fired](const std::shared_ptr<fx::GraphModule>& gm,
                                                       const std::vector<c10::IValue>& examples) {
    auto graph = std::make_shared<fx::Graph>();
    std::unordered_map<const fx::Node*, fx::Node*> map;
    graph->output(*graph->graph_copy(gm->graph(), map));
    auto copy = std::make_shared<fx::GraphModule>(gm, graph, gm->class_name());
    const fx::TrainingRewrites r = fx::rewrite_for_training(copy->graph());
    fired.conv_as_matmul += r.conv_as_matmul;
    fired.fuse_kernels += r.fuse_kernels;
    return fx::graph_module_compiler(copy, examples);
  };
  auto aot = expect_steps_like_step<fx::aot_test::MobileNetV2>([] { return fx::aot_test::MobileNetV2(10); },
                                                               [] { return torch::randn({8, 3, 64, 64}); }, 2,
                                                               options);
  EXPECT_GT(fired.conv_as_matmul, 0u);
  EXPECT_GT(fired.fuse_kernels, 0u);
  // Each convolution's input gradient reads its weight in the same node as
  // the weight's gradient; the classifier's linear reads it after.
  const fx::OptimizerInBackwardStats stats = aot->optimizer_in_backward_stats();
  EXPECT_GT(stats.updates_at_gradient, stats.updates_at_end);
}

TEST(OptimizerInBackward, ParametersItDoesNotHoldGetTheirGradient) {
  torch::manual_seed(0);
  InBackwardMlp net;
  auto aot = fx::aot_module(net.ptr());
  auto opt = std::make_shared<fx::FusedSGD>(net->fc3->parameters(), torch::optim::SGDOptions(0.1));
  aot->set_optimizer_in_backward(opt);
  const at::Tensor w3 = net->fc3->weight.clone();
  aot->forward(torch::randn({4, 6})).sum().backward();
  EXPECT_FALSE(net->fc3->weight.grad().defined());
  EXPECT_FALSE(torch::equal(net->fc3->weight, w3));
  EXPECT_TRUE(net->fc1->weight.grad().defined());
  EXPECT_TRUE(net->fc2->bias.grad().defined());
  // Removed: the next backward stores every gradient.
  aot->set_optimizer_in_backward(nullptr);
  aot->forward(torch::randn({4, 6})).sum().backward();
  EXPECT_TRUE(net->fc3->weight.grad().defined());
  EXPECT_EQ(aot->optimizer_in_backward_stats().steps, 1u);
}

TEST(OptimizerInBackward, RefusesWhatWouldLoseGradients) {
  torch::manual_seed(0);
  InBackwardMlp net;
  auto aot = fx::aot_module(net.ptr());
  auto opt = std::make_shared<fx::FusedSGD>(net->parameters(), torch::optim::SGDOptions(0.1));
  aot->set_optimizer_in_backward(opt);
  try {
    aot->register_gradient_ready_hook([](size_t, const at::Tensor&) {});
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "AotModule::register_gradient_ready_hook: an optimizer steps in this module's backward "
              "(set_optimizer_in_backward) and takes the gradients: remove it first");
  }
  const at::Tensor w1 = net->fc1->weight.clone();
  at::Tensor loss = aot->forward(torch::randn({4, 6})).sum();
  try {
    torch::autograd::grad({loss}, {net->fc1->weight});
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "AotModule: an optimizer steps in this module's backward (set_optimizer_in_backward), which runs "
                  "in a plain backward() only, not in torch.autograd.grad, backward(inputs=...) or "
                  "create_graph=True; call set_optimizer_in_backward(nullptr) first"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(torch::equal(net->fc1->weight, w1));  // nothing half-stepped
  aot->set_optimizer_in_backward(nullptr);
  fx::RemovableHandle h = aot->register_gradient_ready_hook([](size_t, const at::Tensor&) {});
  try {
    aot->set_optimizer_in_backward(opt);
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "AotModule::set_optimizer_in_backward: gradient-ready hooks are registered on this module (a "
              "DataParallelTrainer's?), and the optimizer in backward would take their gradients: remove them "
              "first");
  }
  h.remove();
  aot->set_optimizer_in_backward(opt);
}

TEST(OptimizerInBackward, FusedSgdUpdateRefusesAStranger) {
  auto opt = fx::FusedSGD({torch::zeros({3}, torch::requires_grad())}, torch::optim::SGDOptions(0.1));
  try {
    opt.update(torch::zeros({3}), torch::ones({3}));
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(std::string(e.what()), "fx::FusedSGD::update: the tensor is not one of this optimizer's parameters");
  }
}

}  // namespace
