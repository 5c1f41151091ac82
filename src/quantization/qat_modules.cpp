// The QAT layers of torch.ao.nn.qat / torch.ao.nn.intrinsic.qat (1.13):
// conv_fused.py's _ConvBnNd._forward_approximate, linear_fused.py's LinearBn1d,
// nnqat.Conv / Linear, ConvReLU / LinearReLU.
#include <fx/quantization/qat.h>

#include "quantization/common.h"

#include <fx/error.h>
#include <fx/module_attributes.h>
#include <fx/serialize.h>

#include <torch/nn/modules/batchnorm.h>

#include <mutex>

namespace fx::quantization {

namespace {

/// A batch norm of `o`'s, and what forward() reads of it.
struct LiveBatchNorm {
  std::shared_ptr<torch::nn::Module> module;
  std::function<at::Tensor(const at::Tensor&)> forward;
  at::Tensor running_var, weight;  // its tensors (fx::load and prepare_qat set_data them: never replaced)
};

template <class Impl>
LiveBatchNorm make_bn(const QatLayer::Options& o) {
  auto bn = std::make_shared<Impl>(
      torch::nn::BatchNormOptions(o.out).eps(o.bn_eps).momentum(o.bn_momentum ? c10::optional<double>(*o.bn_momentum)
                                                                               : c10::optional<double>())
          .affine(true)
          .track_running_stats(true));
  {
    torch::NoGradGuard no_grad;
    bn->weight.zero_();
  }
  Impl* raw = bn.get();
  return {bn, [raw](const at::Tensor& x) { return raw->forward(x); }, bn->running_var, bn->weight};
}

}  // namespace

QatLayer::QatLayer(Options options, const ObserverFactory& weight_fake_quant)
    : QatLayer(std::move(options), std::dynamic_pointer_cast<FakeQuantize>(weight_fake_quant()), weight_fake_quant.type) {}

QatLayer::QatLayer(Options options, std::shared_ptr<FakeQuantize> weight_fake_quant, const std::string& made_by)
    : options_(std::move(options)) {
  const Options& o = options_;
  if (o.dim < 0 || o.dim > 3) throw Error("QatLayer: dim must be 0 (linear) or 1-3 (conv), not " + std::to_string(o.dim));
  if (o.in <= 0 || o.out <= 0) throw Error("QatLayer " + o.type + ": in and out must be positive");
  std::vector<int64_t> shape{o.out};
  if (o.dim == 0) {
    shape.push_back(o.in);
  } else {
    if (o.groups <= 0 || o.in % o.groups != 0 || o.out % o.groups != 0)
      throw Error("QatLayer " + o.type + ": groups must divide in and out channels");
    if (static_cast<int64_t>(o.kernel_size.size()) != o.dim)
      throw Error("QatLayer " + o.type + ": kernel_size must have " + std::to_string(o.dim) + " elements");
    shape.push_back(o.in / o.groups);
    shape.insert(shape.end(), o.kernel_size.begin(), o.kernel_size.end());
  }
  weight = register_parameter("weight", at::zeros(shape));
  if (o.bias) bias = register_parameter("bias", at::zeros({o.out}));
  if (o.bn) {
    LiveBatchNorm made = o.dim <= 1   ? make_bn<torch::nn::BatchNorm1dImpl>(o)
                         : o.dim == 2 ? make_bn<torch::nn::BatchNorm2dImpl>(o)
                                      : make_bn<torch::nn::BatchNorm3dImpl>(o);
    bn_ = register_module("bn", made.module);
    bn_forward_ = std::move(made.forward);
    bn_running_var_ = made.running_var;
    bn_weight_ = made.weight;
  }
  if (!weight_fake_quant) throw Error("QatLayer " + o.type + ": its weight needs a fake quantizer, not a " + made_by);
  weight_fake_quant_ = register_module("weight_fake_quant", std::move(weight_fake_quant));
}

void QatLayer::train(bool on) {
  if (!freeze_bn_) {
    torch::nn::Module::train(on);
    return;
  }
  const bool bn_training = bn_ && bn_->is_training();
  torch::nn::Module::train(on);
  if (bn_) bn_->train(bn_training);
}

void QatLayer::freeze_bn_stats() {
  freeze_bn_ = true;
  if (bn_) bn_->train(false);
}

void QatLayer::update_bn_stats() {
  freeze_bn_ = false;
  if (bn_) bn_->train(true);
}

at::Tensor QatLayer::layer(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const {
  const Options& o = options_;
  if (o.dim == 0) return at::linear(x, w, b);
  if (!o.padding_string.empty()) {
    if (o.dim == 1) return at::conv1d(x, w, b, o.stride, o.padding_string, o.dilation, o.groups);
    if (o.dim == 2) return at::conv2d(x, w, b, o.stride, o.padding_string, o.dilation, o.groups);
    return at::conv3d(x, w, b, o.stride, o.padding_string, o.dilation, o.groups);
  }
  if (o.dim == 1) return at::conv1d(x, w, b, o.stride, o.padding, o.dilation, o.groups);
  if (o.dim == 2) return at::conv2d(x, w, b, o.stride, o.padding, o.dilation, o.groups);
  return at::conv3d(x, w, b, o.stride, o.padding, o.dilation, o.groups);
}

at::Tensor QatLayer::forward(const at::Tensor& x) {
  at::Tensor y;
  if (!bn_) {
    y = layer(x, weight_fake_quant_->forward(weight), bias);
  } else {
    at::Tensor running_std = at::sqrt(bn_running_var_ + options_.bn_eps);
    at::Tensor scale_factor = bn_weight_ / running_std;
    std::vector<int64_t> weight_shape(weight.dim(), 1), bias_shape(weight.dim(), 1);
    weight_shape[0] = -1;
    bias_shape[1] = -1;
    at::Tensor scaled_weight = weight_fake_quant_->forward(weight * scale_factor.reshape(weight_shape));
    at::Tensor zero_bias = bias.defined() ? at::zeros_like(bias, x.scalar_type())
                                          : at::zeros({options_.out}, scaled_weight.options().dtype(x.scalar_type()));
    at::Tensor out = layer(x, scaled_weight, zero_bias);
    at::Tensor orig = out / scale_factor.reshape(bias_shape);
    if (bias.defined()) orig = orig + bias.reshape(bias_shape);
    y = bn_forward_(orig);
  }
  return options_.relu ? at::relu(y) : y;
}

std::pair<at::Tensor, at::Tensor> QatLayer::to_float() const {
  at::Tensor w = weight.detach(), b = bias.defined() ? bias.detach() : at::Tensor();
  if (!bn_) return {w, b};
  detail::BnState s = detail::bn_state(*bn_);
  s.eps = options_.bn_eps;
  return options_.dim == 0 ? detail::fuse_linear_bn_weights(w, b, s) : detail::fuse_conv_bn_weights(w, b, s);
}

namespace {

template <class F>
void each_layer(torch::nn::Module& module, F f) {
  for (const auto& m : module.modules(/*include_self=*/true))
    if (auto* l = dynamic_cast<QatLayer*>(m.get())) f(*l);
}

c10::IValue int_list(const std::vector<int64_t>& v) { return c10::IValue(v); }

std::optional<ModuleAttributes> attributes(const torch::nn::Module& m) {
  auto* l = dynamic_cast<const QatLayer*>(&m);
  if (!l) return std::nullopt;
  const QatLayer::Options& o = l->options();
  ModuleAttributes a;
  a.type = o.type;
  a.attributes["training"] = m.is_training();
  if (o.dim == 0) {
    a.attributes["in_features"] = o.in;
    a.attributes["out_features"] = o.out;
    return a;
  }
  a.attributes["in_channels"] = o.in;
  a.attributes["out_channels"] = o.out;
  a.attributes["kernel_size"] = int_list(o.kernel_size);
  a.attributes["stride"] = int_list(o.stride);
  a.attributes["padding"] = o.padding_string.empty() ? int_list(o.padding) : c10::IValue(o.padding_string);
  a.attributes["dilation"] = int_list(o.dilation);
  a.attributes["groups"] = o.groups;
  a.attributes["padding_mode"] = std::string("zeros");
  return a;
}

nlohmann::json to_json(const QatLayer& l) {
  const QatLayer::Options& o = l.options();
  nlohmann::json j = {{"type", o.type},           {"dim", o.dim},
                      {"in", o.in},               {"out", o.out},
                      {"kernel_size", o.kernel_size}, {"stride", o.stride},
                      {"padding", o.padding},     {"padding_string", o.padding_string},
                      {"dilation", o.dilation},   {"groups", o.groups},
                      {"bias", o.bias},           {"bn", o.bn},
                      {"bn_eps", o.bn_eps},       {"relu", o.relu},
                      {"freeze_bn", l.freeze_bn()},
                      {"weight_fake_quant", fake_quantize_to_json(l.weight_fake_quant())}};
  j["bn_momentum"] = o.bn_momentum ? nlohmann::json(*o.bn_momentum) : nlohmann::json(nullptr);
  return j;
}

std::shared_ptr<QatLayer> from_json(const nlohmann::json& j) {
  QatLayer::Options o;
  o.type = j.at("type").get<std::string>();
  o.dim = j.at("dim").get<int64_t>();
  o.in = j.at("in").get<int64_t>();
  o.out = j.at("out").get<int64_t>();
  o.kernel_size = j.at("kernel_size").get<std::vector<int64_t>>();
  o.stride = j.at("stride").get<std::vector<int64_t>>();
  o.padding = j.at("padding").get<std::vector<int64_t>>();
  o.padding_string = j.at("padding_string").get<std::string>();
  o.dilation = j.at("dilation").get<std::vector<int64_t>>();
  o.groups = j.at("groups").get<int64_t>();
  o.bias = j.at("bias").get<bool>();
  o.bn = j.at("bn").get<bool>();
  o.bn_eps = j.at("bn_eps").get<double>();
  if (!j.at("bn_momentum").is_null()) o.bn_momentum = j.at("bn_momentum").get<double>();
  else o.bn_momentum = std::nullopt;
  o.relu = j.at("relu").get<bool>();
  if (o.in > (int64_t{1} << 24) || o.out > (int64_t{1} << 24)) throw Error("QatLayer: in / out out of range");
  // The fake quantizer with the saved sizes, so that load_state fits the saved tensors into it.
  auto l = std::make_shared<QatLayer>(o, fake_quantize_from_json(j.at("weight_fake_quant")), "FakeQuantize");
  if (j.at("freeze_bn").get<bool>()) l->freeze_bn_stats();
  return l;
}

}  // namespace

void freeze_bn_stats(torch::nn::Module& module) {
  each_layer(module, [](QatLayer& l) { l.freeze_bn_stats(); });
}

void update_bn_stats(torch::nn::Module& module) {
  each_layer(module, [](QatLayer& l) { l.update_bn_stats(); });
}

void register_qat_modules() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_observer_modules();
    register_module_forward(typeid(QatLayer), [](torch::nn::Module& m, std::vector<c10::IValue>& args) -> c10::IValue {
      auto& l = dynamic_cast<QatLayer&>(m);
      if (args.size() != 1 || !args[0].isTensor()) throw Error(l.options().type + ".forward() takes one tensor");
      return l.forward(args[0].toTensor());
    });
    register_module_attributes(typeid(QatLayer), attributes);
    register_serializable_module<QatLayer>("torch.ao.nn.qat.QatLayer", to_json, from_json);
  });
}

}  // namespace fx::quantization
