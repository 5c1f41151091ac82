// Fake quantizers, ported from torch/ao/quantization/fake_quantize.py (1.13).
#include <fx/quantization/fake_quantize.h>

#include <fx/error.h>
#include <fx/graph_module.h>
#include <fx/serialize.h>

#include <mutex>

namespace fx::quantization {

namespace {

bool per_channel(QScheme q) { return q == QScheme::PerChannelAffine || q == QScheme::PerChannelSymmetric; }
bool symmetric(QScheme q) { return q == QScheme::PerTensorSymmetric || q == QScheme::PerChannelSymmetric; }

/// The fake quantizer's own options: its observer's, with the name FakeQuantize reports.
ObserverFactory observer_of(const ObserverFactory& f) {
  if (f.observer.empty()) throw Error(f.type + ": no observer class given");
  return ObserverFactory{f.observer, f.options, ""};
}

}  // namespace

FakeQuantize::FakeQuantize(const ObserverFactory& factory)
    : ObserverBase(factory.type, factory.options), observer_type_(factory.observer) {
  const std::string& type = factory.type;
  if (type != "FakeQuantize" && type != "FusedMovingAvgObsFakeQuantize" && type != "FixedQParamsFakeQuantize")
    throw Error("unknown fake quantizer type '" + type + "'");
  observer_ = observer_of(factory)();
  if (as_fake_quantize(*observer_)) throw Error(type + ": its observer cannot be a fake quantizer");
  register_module("activation_post_process", observer_);
  if (const at::Tensor* t = observer_->named_buffers(false).find("min_val")) min_val_ = *t;
  if (const at::Tensor* t = observer_->named_buffers(false).find("max_val")) max_val_ = *t;
  fused_ = type == "FusedMovingAvgObsFakeQuantize";
  if (fused_ && observer_type_ != "MovingAverageMinMaxObserver" &&
      observer_type_ != "MovingAveragePerChannelMinMaxObserver")
    throw Error("FusedMovingAvgObsFakeQuantize: Fused observer+fake_quant module only works with "
                "MovingAverageMinMaxObserver (or MovingAveragePerChannelMinMaxObserver), not " + observer_type_);
  if (type == "FixedQParamsFakeQuantize" && observer_type_ != "FixedQParamsObserver")
    throw Error("FixedQParamsFakeQuantize: its observer must be a FixedQParamsObserver, not " + observer_type_);
  if (type == "FixedQParamsFakeQuantize") {
    auto [s, z] = observer_->calculate_qparams();
    scale_ = register_buffer("scale", s.to(at::kFloat));
    zero_point_ = register_buffer("zero_point", z.to(at::kInt));
  } else {
    scale_ = register_buffer("scale", at::tensor({1.0f}));
    zero_point_ = register_buffer("zero_point", at::tensor({0}, at::kInt));
  }
  // FakeQuantizeBase's flags are uint8; the fused kind's are int64 (Python registers them again).
  const auto flag = fused_ ? at::kLong : at::kByte;
  fake_quant_enabled_ = register_buffer("fake_quant_enabled", at::ones({1}, flag));
  observer_enabled_ = register_buffer("observer_enabled", at::ones({1}, flag));
}

bool FakeQuantize::is_per_channel() const { return per_channel(options_.qscheme); }

bool FakeQuantize::observer_enabled() const { return observer_enabled_.item<int64_t>() == 1; }
bool FakeQuantize::fake_quant_enabled() const { return fake_quant_enabled_.item<int64_t>() == 1; }
void FakeQuantize::enable_observer(bool on) { observer_enabled_.fill_(on ? 1 : 0); }
void FakeQuantize::enable_fake_quant(bool on) { fake_quant_enabled_.fill_(on ? 1 : 0); }

std::pair<at::Tensor, at::Tensor> FakeQuantize::calculate_qparams() { return observer_->calculate_qparams(); }
bool FakeQuantize::has_observed() const { return observer_->has_observed(); }

ObserverFactory FakeQuantize::factory() const { return ObserverFactory{type_name_, options_, observer_type_}; }

at::Tensor FakeQuantize::forward(const at::Tensor& x) {
  const int64_t ch_axis = is_per_channel() ? options_.ch_axis : -1;
  if (fused_) {
    return at::fused_moving_avg_obs_fake_quant(x, observer_enabled_, fake_quant_enabled_, min_val_, max_val_, scale_,
                                               zero_point_, options_.averaging_constant, quant_min_, quant_max_,
                                               ch_axis, is_per_channel(), symmetric(options_.qscheme));
  }
  if (observer_enabled()) {
    observer_->forward(x.detach());
    auto [s, z] = calculate_qparams();
    at::NoGradGuard no_grad;
    if (scale_.sizes() != s.sizes()) {
      scale_.resize_(s.sizes());
      zero_point_.resize_(z.sizes());
    }
    scale_.copy_(s);
    zero_point_.copy_(z);
  }
  if (!fake_quant_enabled()) return x;
  if (is_per_channel())
    return at::fake_quantize_per_channel_affine(x, scale_, zero_point_, ch_axis, quant_min_, quant_max_);
  return at::fake_quantize_per_tensor_affine(x, scale_, zero_point_, quant_min_, quant_max_);
}

std::shared_ptr<ObserverBase> make_fake_quantize(const ObserverFactory& factory) {
  return std::make_shared<FakeQuantize>(factory);
}

FakeQuantize* as_fake_quantize(torch::nn::Module& module) { return dynamic_cast<FakeQuantize*>(&module); }

namespace {

template <class F>
void each_fake_quantize(torch::nn::Module& module, F f) {
  at::NoGradGuard no_grad;
  for (const auto& m : module.modules(/*include_self=*/true))
    if (FakeQuantize* q = as_fake_quantize(*m)) f(*q);
}

}  // namespace

void enable_observer(torch::nn::Module& module) {
  each_fake_quantize(module, [](FakeQuantize& q) { q.enable_observer(true); });
}
void disable_observer(torch::nn::Module& module) {
  each_fake_quantize(module, [](FakeQuantize& q) { q.enable_observer(false); });
}
void enable_fake_quant(torch::nn::Module& module) {
  each_fake_quantize(module, [](FakeQuantize& q) { q.enable_fake_quant(true); });
}
void disable_fake_quant(torch::nn::Module& module) {
  each_fake_quantize(module, [](FakeQuantize& q) { q.enable_fake_quant(false); });
}

nlohmann::json fake_quantize_to_json(const FakeQuantize& q) {
  nlohmann::json j = factory_to_json(q.factory());
  j["qparams_size"] = q.scale().numel();
  j["min_max_size"] = q.running_min().defined() ? q.running_min().numel() : 0;
  return j;
}

std::shared_ptr<FakeQuantize> fake_quantize_from_json(const nlohmann::json& j) {
  auto q = std::make_shared<FakeQuantize>(factory_from_json(j));
  const int64_t qparams = j.at("qparams_size").get<int64_t>();
  const int64_t min_max = j.at("min_max_size").get<int64_t>();
  if (qparams < 1 || qparams > (int64_t{1} << 24) || min_max < 0 || min_max > (int64_t{1} << 24))
    throw Error("FakeQuantize: qparams_size " + std::to_string(qparams) + " / min_max_size " +
                std::to_string(min_max) + " out of range");
  if (q->is_per_channel()) {
    at::NoGradGuard no_grad;
    q->scale().resize_({qparams});
    q->zero_point().resize_({qparams});
    q->running_min().resize_({min_max});
    q->running_max().resize_({min_max});
  } else if (qparams != 1) {
    throw Error("FakeQuantize: a per-tensor fake quantizer with " + std::to_string(qparams) + " scales");
  }
  return q;
}

void register_fake_quantize_modules() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_module_forward(typeid(FakeQuantize), [](torch::nn::Module& m, std::vector<c10::IValue>& args) -> c10::IValue {
      auto& q = dynamic_cast<FakeQuantize&>(m);
      if (args.size() != 1 || !args[0].isTensor()) throw Error(q.type_name() + ".forward() takes one tensor");
      return q.forward(args[0].toTensor());
    });
    register_serializable_module(
        typeid(FakeQuantize),
        SerializableModuleType{"torch.ao.quantization.FakeQuantize",
                               [](const torch::nn::Module& m) {
                                 return fake_quantize_to_json(dynamic_cast<const FakeQuantize&>(m));
                               },
                               [](const nlohmann::json& j) -> std::shared_ptr<torch::nn::Module> {
                                 return fake_quantize_from_json(j);
                               }});
  });
}

}  // namespace fx::quantization
