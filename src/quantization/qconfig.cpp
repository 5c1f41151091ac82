// QConfig, QConfigMapping and the default mappings of torch.ao.quantization 1.13.
#include <fx/quantization/qconfig.h>

#include <fx/error.h>

#include <functional>

namespace fx::quantization {

QConfigMapping& QConfigMapping::set_global(QConfigPtr qconfig) {
  global_ = std::move(qconfig);
  return *this;
}

QConfigMapping& QConfigMapping::set_object_type(const std::string& type_or_target, QConfigPtr qconfig) {
  const std::string key =
      type_or_target.find("::") != std::string::npos ? canonical_function(type_or_target) : type_or_target;
  object_types_[key] = std::move(qconfig);
  return *this;
}

QConfigMapping& QConfigMapping::set_module_name(const std::string& name, QConfigPtr qconfig) {
  module_names_[name] = std::move(qconfig);
  return *this;
}

std::string canonical_function(const std::string& target) {
  std::string s = target;
  const size_t ns = s.find("::");
  const size_t dot = s.find('.', ns == std::string::npos ? 0 : ns + 2);
  if (ns != std::string::npos && dot != std::string::npos) s = s.substr(0, dot);
  if (s.size() > 1 && s.back() == '_' && s[s.size() - 2] != '_') s.pop_back();
  return s;
}

QConfigPtr with_weight_range(const QConfigPtr& qconfig, int64_t quant_min, int64_t quant_max) {
  if (!(-128 <= quant_min && quant_min < 0 && 0 < quant_max && quant_max <= 127))
    throw Error("with_weight_range: qint8 weights need -128 <= quant_min < 0 < quant_max <= 127, got [" +
                std::to_string(quant_min) + ", " + std::to_string(quant_max) + "]");
  if (!qconfig) return nullptr;
  auto q = std::make_shared<QConfig>(*qconfig);
  q->weight.options.quant_min = quant_min;
  q->weight.options.quant_max = quant_max;
  q->weight.options.reduce_range = false;  // the range as given, not halved again
  return q;
}

QConfigMapping QConfigMapping::with_weight_range(int64_t quant_min, int64_t quant_max) const {
  QConfigMapping m;
  m.global_ = fx::quantization::with_weight_range(global_, quant_min, quant_max);
  for (const auto& [key, q] : object_types_)
    m.object_types_[key] = fx::quantization::with_weight_range(q, quant_min, quant_max);
  for (const auto& [key, q] : module_names_)
    m.module_names_[key] = fx::quantization::with_weight_range(q, quant_min, quant_max);
  return m;
}

QConfigMapping QConfigMapping::with_weight_bits(int bits) const {
  if (bits == 8) return *this;
  if (bits == 7) return with_weight_range(kMin7BitWeight, kMax7BitWeight);
  throw Error("with_weight_bits: weights take 7 or 8 bits, got " + std::to_string(bits));
}

namespace {

/// The plain layer a fused module's qconfig falls back to.
std::string unfused_type(const std::string& type) {
  if (type == "ConvReLU1d" || type == "ConvBn1d" || type == "ConvBnReLU1d") return "Conv1d";
  if (type == "ConvReLU2d" || type == "ConvBn2d" || type == "ConvBnReLU2d") return "Conv2d";
  if (type == "ConvReLU3d" || type == "ConvBn3d" || type == "ConvBnReLU3d") return "Conv3d";
  if (type == "LinearReLU" || type == "LinearBn1d") return "Linear";
  return "";
}

}  // namespace

QConfigPtr QConfigMapping::for_module(const std::string& qualified_name, const std::string& type) const {
  if (auto it = module_names_.find(qualified_name); it != module_names_.end()) return it->second;
  if (auto it = object_types_.find(type); it != object_types_.end()) return it->second;
  const std::string base = unfused_type(type);
  if (!base.empty())
    if (auto it = object_types_.find(base); it != object_types_.end()) return it->second;
  std::string prefix = qualified_name;
  for (size_t dot = prefix.rfind('.'); dot != std::string::npos; dot = prefix.rfind('.')) {
    prefix.resize(dot);
    if (auto it = module_names_.find(prefix); it != module_names_.end()) return it->second;
  }
  return global_;
}

QConfigPtr QConfigMapping::for_function(const std::string& target) const {
  if (auto it = object_types_.find(canonical_function(target)); it != object_types_.end()) return it->second;
  return global_;
}

namespace {

ObserverFactory observer(const std::string& type, ObserverOptions o = {}) { return ObserverFactory{type, o, ""}; }

ObserverFactory per_channel_weight_observer() {
  ObserverOptions o;
  o.dtype = c10::kQInt8;
  o.qscheme = QScheme::PerChannelSymmetric;
  return observer("PerChannelMinMaxObserver", o);
}

ObserverFactory per_tensor_weight_observer() {
  ObserverOptions o;
  o.dtype = c10::kQInt8;
  o.qscheme = QScheme::PerTensorSymmetric;
  return observer("MinMaxObserver", o);
}

ObserverFactory fixed_qparams(double scale, int64_t zero_point) {
  ObserverOptions o;
  o.scale = scale;
  o.zero_point = zero_point;
  o.quant_min = 0;
  o.quant_max = 255;
  return observer("FixedQParamsObserver", o);
}

}  // namespace

QConfigPtr get_default_qconfig(const std::string& backend) {
  auto q = std::make_shared<QConfig>();
  ObserverOptions act;
  if (backend == "onednn" || backend == "fbgemm" || backend == "x86") {
    act.reduce_range = backend != "onednn";
    q->activation = observer("HistogramObserver", act);
    q->weight = per_channel_weight_observer();
  } else if (backend == "qnnpack") {
    q->activation = observer("MinMaxObserver", act);
    q->weight = per_tensor_weight_observer();
  } else {
    throw Error("backend '" + backend + "' not supported (known: onednn, fbgemm, x86, qnnpack)");
  }
  return q;
}

namespace {

/// _get_default_qconfig_mapping: `global` everywhere, "reshape" reusing its
/// input's observer, the fixed-qparams ops observed by `fixed(scale, zero_point)`.
QConfigMapping default_mapping(const QConfigPtr& global,
                               const std::function<QConfigPtr(double scale, int64_t zero_point)>& fixed) {
  QConfigMapping m;
  m.set_global(global);
  auto reuse = std::make_shared<QConfig>(*global);
  reuse->reuse_input = true;
  m.set_object_type("aten::reshape", reuse);
  const QConfigPtr fixed01 = fixed(1.0 / 256.0, 0), fixed11 = fixed(2.0 / 256.0, 128);
  for (const char* t : {"Hardsigmoid", "aten::hardsigmoid", "Sigmoid", "aten::sigmoid", "Softmax"})
    m.set_object_type(t, fixed01);
  for (const char* t : {"Tanh", "aten::tanh"}) m.set_object_type(t, fixed11);
  return m;
}

}  // namespace

QConfigMapping get_default_qconfig_mapping(const std::string& backend) {
  return default_mapping(get_default_qconfig(backend), [](double scale, int64_t zero_point) {
    return std::make_shared<QConfig>(QConfig{fixed_qparams(scale, zero_point), per_tensor_weight_observer()});
  });
}

std::string qconfig_to_string(const QConfig& q) {
  return nlohmann::json{{"activation", factory_to_json(q.activation)},
                        {"weight", factory_to_json(q.weight)},
                        {"reuse_input", q.reuse_input}}
      .dump();
}

QConfigPtr qconfig_from_string(const std::string& text) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    auto q = std::make_shared<QConfig>();
    q->activation = factory_from_json(j.at("activation"));
    q->weight = factory_from_json(j.at("weight"));
    q->reuse_input = j.at("reuse_input").get<bool>();
    return q;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("not a qconfig: ") + e.what());
  }
}

namespace {

/// FusedMovingAvgObsFakeQuantize.with_args(observer=..., quant_min, quant_max, dtype, qscheme, reduce_range).
ObserverFactory fused_fake_quant(const std::string& observer_type, c10::ScalarType dtype, QScheme qscheme,
                                 int64_t quant_min, int64_t quant_max, bool reduce_range = false) {
  ObserverOptions o;
  o.dtype = dtype;
  o.qscheme = qscheme;
  o.quant_min = quant_min;
  o.quant_max = quant_max;
  o.reduce_range = reduce_range;
  return ObserverFactory{"FusedMovingAvgObsFakeQuantize", o, observer_type};
}

/// default_weight_fake_quant: FakeQuantize of a per-tensor symmetric qint8 MovingAverageMinMaxObserver.
ObserverFactory default_weight_fake_quant() {
  ObserverOptions o;
  o.dtype = c10::kQInt8;
  o.qscheme = QScheme::PerTensorSymmetric;
  o.quant_min = -128;
  o.quant_max = 127;
  return ObserverFactory{"FakeQuantize", o, "MovingAverageMinMaxObserver"};
}

}  // namespace

QConfigPtr get_default_qat_qconfig(const std::string& backend) {
  auto q = std::make_shared<QConfig>();
  const bool reduce = backend == "fbgemm" || backend == "x86";
  if (backend != "onednn" && !reduce && backend != "qnnpack")
    throw Error("backend '" + backend + "' not supported (known: onednn, fbgemm, x86, qnnpack)");
  q->activation = fused_fake_quant("MovingAverageMinMaxObserver", c10::kQUInt8, QScheme::PerTensorAffine, 0, 255, reduce);
  q->weight = backend == "qnnpack"
                  ? fused_fake_quant("MovingAverageMinMaxObserver", c10::kQInt8, QScheme::PerTensorSymmetric, -128, 127)
                  : fused_fake_quant("MovingAveragePerChannelMinMaxObserver", c10::kQInt8,
                                     QScheme::PerChannelSymmetric, -128, 127);
  return q;
}

QConfigMapping get_default_qat_qconfig_mapping(const std::string& backend) {
  return default_mapping(get_default_qat_qconfig(backend), [](double scale, int64_t zero_point) {
    ObserverFactory f = fixed_qparams(scale, zero_point);
    f.observer = f.type;
    f.type = "FixedQParamsFakeQuantize";
    return std::make_shared<QConfig>(QConfig{f, default_weight_fake_quant()});
  });
}

QConfigPtr per_tensor_minmax_qconfig(bool moving_average) {
  auto q = std::make_shared<QConfig>();
  q->activation = observer(moving_average ? "MovingAverageMinMaxObserver" : "MinMaxObserver");
  q->weight = per_tensor_weight_observer();
  return q;
}

}  // namespace fx::quantization
