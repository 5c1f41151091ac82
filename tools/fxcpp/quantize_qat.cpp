// fxcpp quantize MODEL --qat --train DATA.pt [--epochs N] [--batch B]
// [--optimizer sgd|adam] [--lr X] [--momentum M] [--freeze-bn-after K] [-o OUT.fx]:
// quantization-aware training of a classifier (fx::quantization::prepare_qat,
// cross-entropy on DATA.pt = torch.save((inputs, labels)), the user's epochs of
// shuffled batches), then convert and the oneDNN int8 kernels as post-training
// quantize does. Every error is one line, exit 2.
#include "quantize_io.h"

#include "model_io.h"
#include "train_io.h"

#include <fx/quantization/qat.h>

#include <torch/nn/functional/loss.h>

#include <iomanip>
#include <iostream>

namespace fx::cli {

std::shared_ptr<GraphModule> qat_train(const ModelArgs& args, fx::quantization::QuantizeReport& report) {
  namespace q = fx::quantization;
  const std::string path = args.get("train");
  set_activity("reading " + path);
  const TrainingData data = load_training_data(path);
  const c10::IValue example = c10::ivalue::Tuple::create({data.inputs.slice(0, 0, 1)});
  auto gm = import_model(args.model, nullptr, &example, false, path);
  model_inputs(*gm, example, path);
  check_labels(*gm, data, path);
  const int epochs = args.get_int("epochs", 1);
  const int batch = args.get_int("batch", 32);
  const int freeze_bn_after = args.get_int("freeze-bn-after", epochs, 0);
  gm->train();
  set_activity("preparing for quantization-aware training");
  auto qat = q::prepare_qat(gm, q::get_default_qat_qconfig_mapping("onednn").with_weight_bits(weight_bits_arg(args)),
                            {data.inputs.slice(0, 0, 1)}, &report.prepare);
  gm.reset();
  auto optimizer = make_optimizer(args, qat->parameters());
  std::cout << "quantization-aware training: " << report.prepare.fuse.fused.size() << " fused layers, "
            << report.prepare.observer_nodes << " fake quantizers; " << epochs << " epoch" << (epochs == 1 ? "" : "s")
            << " of " << data.inputs.size(0) << " samples, batch " << batch << ", " << describe_optimizer(args) << "\n";
  const int64_t n = data.inputs.size(0);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(0);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    if (epoch == freeze_bn_after) q::freeze_bn_stats(*qat);
    set_activity("epoch " + std::to_string(epoch + 1) + " of " + std::to_string(epochs));
    const auto t0 = std::chrono::steady_clock::now();
    const at::Tensor perm = at::randperm(n, g);
    double loss_sum = 0, correct = 0;
    for (int64_t i = 0; i < n; i += batch) {
      const at::Tensor idx = perm.slice(0, i, std::min<int64_t>(i + batch, n));
      const at::Tensor x = data.inputs.index_select(0, idx), y = data.labels.index_select(0, idx);
      optimizer->zero_grad();
      const at::Tensor logits = qat->forward({x}).toTensor();
      at::Tensor loss = torch::nn::functional::cross_entropy(logits, y);
      loss.backward();
      optimizer->step();
      loss_sum += loss.item<double>() * idx.size(0);
      correct += logits.argmax(1).eq(y).sum().item<double>();
    }
    std::cout << "epoch " << epoch + 1 << "/" << epochs << ": loss " << std::fixed << std::setprecision(4)
              << loss_sum / n << ", train top-1 " << std::setprecision(1) << 100 * correct / n << "%, "
              << std::setprecision(0) << ms_since(t0) << " ms" << (epoch >= freeze_bn_after ? " (batch norm frozen)" : "")
              << "\n"
              << std::defaultfloat;
  }
  report.trained_epochs = epochs;
  report.trained_samples = int64_t{epochs} * n;
  qat->eval();
  return qat;
}

}  // namespace fx::cli
