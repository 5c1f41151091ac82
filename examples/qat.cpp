// Quantization-aware training, torch.ao.quantization's prepare_qat_fx in C++:
// train with fake quantization so that the int8 model keeps the float
// model's accuracy, then convert and lower to oneDNN's int8 kernels as
// post-training quantization does.
//
// Trains the demo ResidualNet in float on a small synthetic task (which
// colour channel of an image is brightest), traces it, prepares it for QAT
// (conv + batch norm + relu fused into QAT layers whose batch norm stays live,
// fake quantizers where the int8 graph will quantize), fine-tunes it in the
// usual torch::optim loop, freezes the batch-norm statistics, converts and
// lowers it, and compares the float, fake-quantized and int8 accuracy.
//
//   build/examples/qat
#include <fx/examples/residual_net.h>
#include <fx/quantization/qat.h>
#include <fx/quantization/quantize.h>
#include <fx/trace.h>

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <iostream>

namespace {

/// Images whose label is their brightest channel (3 classes).
std::pair<at::Tensor, at::Tensor> batch(int64_t n) {
  at::Tensor x = at::randn({n, 3, 16, 16});
  at::Tensor labels = at::randint(0, 3, {n});
  x += at::one_hot(labels, 3).to(at::kFloat).reshape({n, 3, 1, 1}) * 0.3;
  return {x, labels};
}

double accuracy(const std::function<at::Tensor(const at::Tensor&)>& f, const at::Tensor& x, const at::Tensor& y) {
  at::NoGradGuard no_grad;
  return f(x).argmax(1).eq(y).to(at::kDouble).mean().item<double>();
}

}  // namespace

int main() {
  namespace q = fx::quantization;
  torch::manual_seed(0);
  auto model = fx::examples::ResidualNet(3, 16, 3);
  {
    torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    for (int step = 0; step < 60; ++step) {
      auto [x, y] = batch(32);
      opt.zero_grad();
      torch::nn::functional::cross_entropy(model->forward(x), y).backward();
      opt.step();
    }
  }
  auto [test_x, test_y] = batch(512);
  model->eval();
  const double fp32 = accuracy([&](const at::Tensor& x) { return model->forward(x); }, test_x, test_y);

  fx::TraceOptions trace_options;
  trace_options.dynamic_dims = {{0, 0}};  // any batch size
  auto gm = fx::symbolic_trace(model, {at::randn({1, 3, 16, 16})}, {}, trace_options);

  // 1. prepare_qat: the module in training mode, fused into QAT layers, fake quantizers inserted.
  gm->train();
  q::PrepareReport report;
  auto qat = q::prepare_qat(gm, q::get_default_qat_qconfig_mapping("onednn"), {at::randn({1, 3, 16, 16})}, &report);
  std::cout << report.observer_nodes << " fake quantizers; QAT layers:\n";
  for (const std::string& f : report.fuse.fused) std::cout << "  " << f << "\n";

  // 2. Fine-tune: the usual loop; after a few steps, keep the batch-norm statistics.
  torch::optim::SGD opt(qat->parameters(), torch::optim::SGDOptions(0.005).momentum(0.9));
  for (int step = 0; step < 30; ++step) {
    if (step == 20) q::freeze_bn_stats(*qat);
    auto [x, y] = batch(32);
    opt.zero_grad();
    torch::nn::functional::cross_entropy(qat->forward({x}).toTensor(), y).backward();
    opt.step();
  }
  qat->eval();
  q::disable_observer(*qat);  // the ranges are learnt: keep them
  const double fake = accuracy([&](const at::Tensor& x) { return qat->forward({x}).toTensor(); }, test_x, test_y);

  // 3. convert + lower: the same reference graph and oneDNN int8 kernels as post-training quantization.
  q::QuantizeReport converted;
  auto int8 = q::convert_and_lower(qat, /*lower=*/true, converted);
  std::cout << converted.summary() << "\n";
  const double int8_accuracy = accuracy([&](const at::Tensor& x) { return int8->forward({x}).toTensor(); }, test_x, test_y);
  std::cout << "top-1: float " << fp32 << ", fake-quantized " << fake << ", int8 " << int8_accuracy << "\n";
  if (fp32 < 0.8 || int8_accuracy < fp32 - 0.02 || converted.lower.int8_kernels == 0) {
    std::cerr << "unexpected result\n";
    return 1;
  }
  std::cout << "trained for int8\n";
  return 0;
}
