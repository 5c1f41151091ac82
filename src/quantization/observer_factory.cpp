// ObserverFactory (Python's `Observer.with_args(...)`): every observer and
// fake-quantizer class by name, as JSON for fx::save, and their registration
// for call_module and fx::save. Above both observers.cpp and fake_quantize.cpp:
// a factory names fake quantizers, whose observers are observers.
#include <fx/quantization/fake_quantize.h>
#include <fx/quantization/observers.h>

#include <fx/error.h>
#include <fx/graph_module.h>
#include <fx/serialize.h>

#include <mutex>

namespace fx::quantization {

std::shared_ptr<ObserverBase> ObserverFactory::operator()() const {
  if (type == "MinMaxObserver") return std::make_shared<MinMaxObserver>(options);
  if (type == "MovingAverageMinMaxObserver") return std::make_shared<MovingAverageMinMaxObserver>(options);
  if (type == "PerChannelMinMaxObserver") return std::make_shared<PerChannelMinMaxObserver>(options);
  if (type == "MovingAveragePerChannelMinMaxObserver")
    return std::make_shared<MovingAveragePerChannelMinMaxObserver>(options);
  if (type == "FakeQuantize" || type == "FusedMovingAvgObsFakeQuantize" || type == "FixedQParamsFakeQuantize")
    return make_fake_quantize(*this);
  if (type == "HistogramObserver") return std::make_shared<HistogramObserver>(options);
  if (type == "FixedQParamsObserver") return std::make_shared<FixedQParamsObserver>(options);
  throw Error("unknown observer type '" + type +
              "' (known: MinMaxObserver, MovingAverageMinMaxObserver, PerChannelMinMaxObserver, "
              "MovingAveragePerChannelMinMaxObserver, HistogramObserver, FixedQParamsObserver, FakeQuantize, "
              "FusedMovingAvgObsFakeQuantize, FixedQParamsFakeQuantize)");
}

nlohmann::json factory_to_json(const ObserverFactory& f) {
  const ObserverOptions& p = f.options;
  nlohmann::json j = {{"type", f.type},
                      {"dtype", p.dtype == c10::kQInt8 ? "qint8" : "quint8"},
                      {"qscheme", static_cast<int>(p.qscheme)},
                      {"reduce_range", p.reduce_range},
                      {"eps", p.eps},
                      {"averaging_constant", p.averaging_constant},
                      {"ch_axis", p.ch_axis},
                      {"bins", p.bins},
                      {"upsample_rate", p.upsample_rate},
                      {"scale", p.scale},
                      {"zero_point", p.zero_point}};
  if (p.quant_min) j["quant_min"] = *p.quant_min;
  if (p.quant_max) j["quant_max"] = *p.quant_max;
  if (!f.observer.empty()) j["observer"] = f.observer;
  return j;
}

ObserverFactory factory_from_json(const nlohmann::json& j) {
  ObserverFactory f;
  f.type = j.at("type").get<std::string>();
  ObserverOptions& p = f.options;
  const std::string dtype = j.at("dtype").get<std::string>();
  if (!(dtype == "qint8" || dtype == "quint8")) throw Error("unknown observer dtype '" + dtype + "'");
  p.dtype = dtype == "qint8" ? c10::kQInt8 : c10::kQUInt8;
  const int q = j.at("qscheme").get<int>();
  if (!(q >= 0 && q <= 3)) throw Error("unknown observer qscheme " + std::to_string(q));
  p.qscheme = static_cast<QScheme>(q);
  p.reduce_range = j.at("reduce_range").get<bool>();
  p.eps = j.at("eps").get<double>();
  p.averaging_constant = j.at("averaging_constant").get<double>();
  p.ch_axis = j.at("ch_axis").get<int64_t>();
  p.bins = j.at("bins").get<int64_t>();
  if (!(p.bins > 0 && p.bins <= (int64_t{1} << 20))) throw Error("observer bins out of range");
  p.upsample_rate = j.at("upsample_rate").get<int64_t>();
  if (!(p.upsample_rate > 0 && p.upsample_rate <= 4096)) throw Error("observer upsample_rate out of range");
  p.scale = j.at("scale").get<double>();
  p.zero_point = j.at("zero_point").get<int64_t>();
  if (j.contains("quant_min")) p.quant_min = j.at("quant_min").get<int64_t>();
  if (j.contains("quant_max")) p.quant_max = j.at("quant_max").get<int64_t>();
  if (j.contains("observer")) f.observer = j.at("observer").get<std::string>();
  f();  // checks the options
  return f;
}

namespace {

template <class M>
void register_one(const char* name) {
  register_module_forward(typeid(M), [](torch::nn::Module& m, std::vector<c10::IValue>& args) -> c10::IValue {
    if (args.size() != 1 || !args[0].isTensor())
      throw Error(static_cast<ObserverBase&>(dynamic_cast<M&>(m)).type_name() + ".forward() takes one tensor");
    return dynamic_cast<M&>(m).forward(args[0].toTensor());
  });
  register_serializable_module(
      typeid(M), SerializableModuleType{std::string("torch.ao.quantization.") + name,
                                        [](const torch::nn::Module& m) {
                                          auto& o = dynamic_cast<const ObserverBase&>(m);
                                          return factory_to_json(ObserverFactory{o.type_name(), o.options(), ""});
                                        },
                                        [](const nlohmann::json& j) -> std::shared_ptr<torch::nn::Module> {
                                          return factory_from_json(j)();
                                        }});
}

}  // namespace

void register_observer_modules() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_one<MinMaxObserver>("MinMaxObserver");
    register_one<MovingAverageMinMaxObserver>("MovingAverageMinMaxObserver");
    register_one<PerChannelMinMaxObserver>("PerChannelMinMaxObserver");
    register_one<MovingAveragePerChannelMinMaxObserver>("MovingAveragePerChannelMinMaxObserver");
    register_one<HistogramObserver>("HistogramObserver");
    register_one<FixedQParamsObserver>("FixedQParamsObserver");
  });
  register_fake_quantize_modules();
}

}  // namespace fx::quantization
