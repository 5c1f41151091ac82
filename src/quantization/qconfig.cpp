// QConfig, QConfigMapping and the default mappings of torch.ao.quantization 1.13.
#include <fx/quantization/qconfig.h>

#include <fx/error.h>

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

ObserverFactory observer(const std::string& type, ObserverOptions o = {}) { return ObserverFactory{type, o}; }

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

QConfigMapping get_default_qconfig_mapping(const std::string& backend) {
  QConfigPtr q = get_default_qconfig(backend);
  QConfigMapping m;
  m.set_global(q);
  auto reuse = std::make_shared<QConfig>(*q);
  reuse->reuse_input = true;
  m.set_object_type("aten::reshape", reuse);
  auto fixed01 = std::make_shared<QConfig>(QConfig{fixed_qparams(1.0 / 256.0, 0), per_tensor_weight_observer()});
  auto fixed11 = std::make_shared<QConfig>(QConfig{fixed_qparams(2.0 / 256.0, 128), per_tensor_weight_observer()});
  for (const char* t : {"Hardsigmoid", "aten::hardsigmoid", "Sigmoid", "aten::sigmoid", "Softmax"})
    m.set_object_type(t, fixed01);
  for (const char* t : {"Tanh", "aten::tanh"}) m.set_object_type(t, fixed11);
  return m;
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

QConfigPtr per_tensor_minmax_qconfig(bool moving_average) {
  auto q = std::make_shared<QConfig>();
  q->activation = observer(moving_average ? "MovingAverageMinMaxObserver" : "MinMaxObserver");
  q->weight = per_tensor_weight_observer();
  return q;
}

}  // namespace fx::quantization
