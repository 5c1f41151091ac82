#pragma once
/// \file
/// Quantization-aware training (torch.ao.quantization.quantize_fx.prepare_qat_fx):
/// fake-quantized training that recovers what post-training int8 loses,
/// converted afterwards by the same convert() to the same reference graph
/// and oneDNN int8 kernels.
///
///     gm->train();
///     auto qat = fx::quantization::prepare_qat(gm, fx::quantization::get_default_qat_qconfig_mapping("onednn"), {x});
///     torch::optim::SGD opt(qat->parameters(), 0.01);
///     for (auto& [x, y] : batches) { opt.zero_grad(); loss(qat->forward({x}), y).backward(); opt.step(); }
///     qat->eval();
///     auto int8 = fx::quantization::lower_to_onednn_int8(fx::quantization::convert(qat));   // examples/qat.cpp
///
/// The layers (torch.ao.nn.qat / torch.ao.nn.intrinsic.qat): a conv or linear
/// whose weight passes through its own fake quantizer (child
/// "weight_fake_quant"), optionally with a batch norm that stays live during
/// training (child "bn": batch statistics, running statistics updated) while
/// the weight is fake-quantized as the folded weight W·γ/√(running_var+ε)
/// (ConvBn2d's `_forward_approximate`), and optionally a ReLU.

#include <fx/graph_module.h>
#include <fx/quantization/fake_quantize.h>
#include <fx/quantization/prepare.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace fx::quantization {

/// A layer of quantization-aware training: nnqat.Conv1d/2d/3d, nnqat.Linear,
/// nniqat.ConvReLU*, ConvBn*, ConvBnReLU*, LinearReLU, LinearBn1d.
class QatLayer : public torch::nn::Module {
 public:
  /// What the layer is (the float layers' configuration).
  struct Options {
    /// Python's class name: "Conv2d", "ConvReLU2d", "ConvBn2d", "ConvBnReLU2d", "Linear", "LinearReLU", "LinearBn1d" ...
    std::string type;
    /// 1, 2 or 3 for a convolution; 0 for a linear layer.
    int64_t dim = 2;
    /// in_channels / in_features, out_channels / out_features.
    int64_t in = 0, out = 0;
    /// Convolution geometry (Python's tuples); padding_string "same" / "valid" replaces padding.
    std::vector<int64_t> kernel_size, stride, padding, dilation;
    /// "same" / "valid", or empty for numeric padding.
    std::string padding_string;
    /// Convolution groups.
    int64_t groups = 1;
    /// Whether the conv / linear has its own bias.
    bool bias = true;
    /// A live batch norm after the layer, and its eps and momentum (nullopt: cumulative average).
    bool bn = false;
    /// The batch norm's eps.
    double bn_eps = 1e-5;
    /// The batch norm's momentum.
    std::optional<double> bn_momentum = 0.1;
    /// A ReLU after it all.
    bool relu = false;
  };

  /// A layer of `options` (weight, bias and batch-norm affine parameters zero,
  /// running statistics as a new batch norm's: prepare_qat and fx::load set
  /// them) with a weight fake quantizer made by `weight_fake_quant`.
  QatLayer(Options options, const ObserverFactory& weight_fake_quant);
  /// The same with the weight's fake quantizer given (fx::load's: one with
  /// the saved sizes); fx::Error naming `made_by` when it is null.
  QatLayer(Options options, std::shared_ptr<FakeQuantize> weight_fake_quant, const std::string& made_by);
  /// The fake-quantized forward (see the file comment).
  at::Tensor forward(const at::Tensor& x);
  /// Training mode; a frozen batch norm stays in eval mode (Python's `train`).
  void train(bool on = true) override;
  /// Batch norm uses and keeps its running statistics (nniqat freeze_bn_stats).
  void freeze_bn_stats();
  /// Batch norm uses batch statistics in training and updates the running ones (update_bn_stats).
  void update_bn_stats();
  /// Whether freeze_bn_stats() is in force.
  bool freeze_bn() const { return freeze_bn_; }
  /// The layer's configuration.
  const Options& options() const { return options_; }
  /// The float weight and bias the layer stands for (`to_float`): with a
  /// batch norm, folded with its running statistics (fuse_conv_bn_weights);
  /// the bias is undefined when the layer has none and no batch norm.
  std::pair<at::Tensor, at::Tensor> to_float() const;
  /// The weight's fake quantizer (child "weight_fake_quant").
  FakeQuantize& weight_fake_quant() const { return *weight_fake_quant_; }
  /// The batch norm (child "bn"), or nullptr.
  const std::shared_ptr<torch::nn::Module>& bn() const { return bn_; }
  /// The layer's weight (parameter "weight").
  at::Tensor weight;
  /// The layer's bias (parameter "bias"), undefined when Options::bias is false.
  at::Tensor bias;

 private:
  at::Tensor layer(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const;
  Options options_;
  std::shared_ptr<FakeQuantize> weight_fake_quant_;
  std::shared_ptr<torch::nn::Module> bn_;
  std::function<at::Tensor(const at::Tensor&)> bn_forward_;
  at::Tensor bn_running_var_, bn_weight_;  // the batch norm's, read by forward()
  bool freeze_bn_ = false;
};

/// Freezes the batch-norm statistics of every QAT layer of `module`
/// (torch.ao.nn.intrinsic.qat.freeze_bn_stats applied with module.apply).
void freeze_bn_stats(torch::nn::Module& module);
/// Lets every QAT layer's batch norm update its statistics again (update_bn_stats).
void update_bn_stats(torch::nn::Module& module);

/// prepare_qat_fx(gm, qconfig_mapping, example_inputs): a new GraphModule for
/// quantization-aware training. Conv / linear + batch norm (+ ReLU) and conv /
/// linear + ReLU become the fused QAT layers, other conv / linear layers plain
/// QAT layers, each with its qconfig's weight fake quantizer (layers whose
/// qconfig is nullptr, or with a padding_mode other than zeros, stay as they
/// are); then fake quantizers go where prepare() puts observers, with the same
/// node names (`activation_post_process_N`). The QAT layers hold copies of the
/// layers' tensors: training the result never changes `gm`'s layers; the
/// layers with nothing to quantize are shared with `gm`, as prepare() shares
/// them. `example_inputs` are run once in eval mode (no batch-norm or
/// observer update) to learn which values are floating-point tensors.
/// Throws fx::Error, `gm` unchanged: for a module in eval mode ("prepare_qat:
/// the module is in eval mode; call train() first: quantization-aware training
/// prepares a module for training (prepare() is for post-training
/// quantization)"), one already prepared ("prepare_qat: the module is already
/// prepared (it has observer 'activation_post_process_0')"), one already
/// quantized ("prepare_qat: the model is already quantized (node 'x' calls
/// aten::quantize_per_tensor.tensor_qparams)"), and example inputs that do not run.
std::shared_ptr<GraphModule> prepare_qat(const std::shared_ptr<GraphModule>& gm, const QConfigMapping& qconfig_mapping,
                                         const std::vector<c10::IValue>& example_inputs,
                                         PrepareReport* report = nullptr);

/// Registers the QAT layers' forward, attributes and fx::save type
/// (prepare_qat and convert call it; a program that only fx::loads a QAT
/// module calls it first).
void register_qat_modules();

}  // namespace fx::quantization
