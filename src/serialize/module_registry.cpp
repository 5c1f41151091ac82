// The registry of module types fx::save stores by name + options + state,
// with the torch::nn layers symbolic_trace keeps as leaves and the common
// parameter-free layers registered up front.
#include "serialize/document.h"

#include <algorithm>
#include <torch/nn/functional.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/modules/rnn.h>

#include <mutex>
#include <typeindex>
#include <unordered_map>

namespace fx {

namespace {

namespace nn = torch::nn;
using json = nlohmann::json;

struct Registry {
  std::mutex mutex;
  /// Every entry ever registered: find_serializable_module hands out raw
  /// pointers, which must survive a later registration of the same type.
  std::vector<std::shared_ptr<const SerializableModuleType>> all;
  std::unordered_map<std::type_index, std::shared_ptr<const SerializableModuleType>> by_type;
  std::unordered_map<std::string, std::shared_ptr<const SerializableModuleType>> by_name;
};

template <size_t D>
std::vector<int64_t> vec(const torch::ExpandingArray<D>& a) {
  return std::vector<int64_t>(a->begin(), a->end());
}

/// The largest size option a loaded module may have: libtorch's module
/// constructors divide by some options (groups) and allocate what the others
/// imply, so a damaged file must not reach them with arbitrary numbers.
constexpr int64_t kMaxSizeOption = int64_t{1} << 24;

/// Throws unless min <= v <= kMaxSizeOption.
int64_t checked_size(int64_t v, const std::string& what, int64_t min) {
  if (v < min || v > kMaxSizeOption)
    throw Error("option " + what + " is " + std::to_string(v) + "; expected " + std::to_string(min) + " to " +
                std::to_string(kMaxSizeOption));
  return v;
}

/// The integer option `key` of j, checked (see checked_size).
int64_t size_option(const json& j, const char* key, int64_t min) {
  return checked_size(j.at(key).get<int64_t>(), std::string("'") + key + "'", min);
}

/// Throws if the weights `dims` imply would exceed 2^31 elements.
void check_weight_elements(const std::vector<int64_t>& dims, const std::string& what) {
  long double n = 1;
  for (int64_t d : dims) n *= static_cast<long double>(d);
  if (n > static_cast<long double>(int64_t{1} << 31))
    throw Error("options of " + what + " imply a weight of more than 2^31 elements");
}

template <size_t D>
torch::ExpandingArray<D> expanding(const json& j, const char* key = "", int64_t min = 0) {
  auto v = j.get<std::vector<int64_t>>();
  if (v.size() != D) throw Error("expected " + std::to_string(D) + " values, got " + std::to_string(v.size()));
  for (int64_t x : v) checked_size(x, std::string("'") + key + "'", min);
  return torch::ExpandingArray<D>(v);
}

template <size_t D>
json conv_to_json(const nn::detail::ConvNdOptions<D>& o) {
  json padding;
  if (auto* p = c10::get_if<torch::ExpandingArray<D>>(&o.padding())) padding = vec<D>(*p);
  else if (c10::holds_alternative<torch::enumtype::kValid>(o.padding())) padding = "valid";
  else padding = "same";
  return {{"in_channels", o.in_channels()}, {"out_channels", o.out_channels()},
          {"kernel_size", vec<D>(o.kernel_size())}, {"stride", vec<D>(o.stride())},
          {"padding", padding}, {"dilation", vec<D>(o.dilation())},
          {"output_padding", vec<D>(o.output_padding())}, {"groups", o.groups()},
          {"bias", o.bias()}, {"padding_mode", torch::enumtype::get_enum_name(o.padding_mode())}};
}

template <class Options, size_t D>
Options conv_from_json(const json& j) {
  const int64_t in = size_option(j, "in_channels", 1), out = size_option(j, "out_channels", 1);
  const int64_t groups = size_option(j, "groups", 1);
  if (in % groups != 0 || out % groups != 0)
    throw Error("in_channels " + std::to_string(in) + " and out_channels " + std::to_string(out) +
                " must be divisible by groups " + std::to_string(groups));
  auto kernel = expanding<D>(j.at("kernel_size"), "kernel_size", 1);
  std::vector<int64_t> dims = {in / groups, out};
  for (int64_t k : *kernel) dims.push_back(k);
  check_weight_elements(dims, "a convolution");
  Options o(in, out, kernel);
  o.stride(expanding<D>(j.at("stride"), "stride", 1)).dilation(expanding<D>(j.at("dilation"), "dilation", 1));
  o.groups(groups).bias(j.at("bias").get<bool>());
  const std::string mode = j.at("padding_mode").get<std::string>();
  if (mode == "kZeros") o.padding_mode(torch::kZeros);
  else if (mode == "kReflect") o.padding_mode(torch::kReflect);
  else if (mode == "kReplicate") o.padding_mode(torch::kReplicate);
  else if (mode == "kCircular") o.padding_mode(torch::kCircular);
  else throw Error("unknown padding_mode '" + mode + "'");
  return o;
}

/// `D` sizes of a pooling option: a list of D, or one number for all (as
/// Python's torch.nn writes `kernel_size=3`), each at least `min`.
template <size_t D>
torch::ExpandingArray<D> pool_sizes(const json& j, const char* key, int64_t min) {
  const json& v = j.at(key);
  if (v.is_number_integer())
    return torch::ExpandingArray<D>(checked_size(v.get<int64_t>(), std::string("'") + key + "'", min));
  return expanding<D>(v, key, min);
}

template <class Impl, size_t D>
SerializableModuleType max_pool_type(const std::string& name) {
  return {name,
          [](const nn::Module& m) -> json {
            const auto& o = dynamic_cast<const Impl&>(m).options;
            return {{"kernel_size", vec<D>(o.kernel_size())}, {"stride", vec<D>(o.stride())},
                    {"padding", vec<D>(o.padding())}, {"dilation", vec<D>(o.dilation())},
                    {"ceil_mode", o.ceil_mode()}};
          },
          [](const json& j) -> std::shared_ptr<nn::Module> {
            nn::MaxPoolOptions<D> o(pool_sizes<D>(j, "kernel_size", 1));
            o.stride(pool_sizes<D>(j, "stride", 1)).padding(pool_sizes<D>(j, "padding", 0));
            o.dilation(pool_sizes<D>(j, "dilation", 1)).ceil_mode(j.at("ceil_mode").get<bool>());
            return std::make_shared<Impl>(o);
          }};
}

template <class Impl, size_t D>
SerializableModuleType avg_pool_type(const std::string& name) {
  return {name,
          [](const nn::Module& m) -> json {
            const auto& o = dynamic_cast<const Impl&>(m).options;
            return {{"kernel_size", vec<D>(o.kernel_size())}, {"stride", vec<D>(o.stride())},
                    {"padding", vec<D>(o.padding())}, {"ceil_mode", o.ceil_mode()},
                    {"count_include_pad", o.count_include_pad()},
                    {"divisor_override", o.divisor_override() ? json(*o.divisor_override()) : json(nullptr)}};
          },
          [](const json& j) -> std::shared_ptr<nn::Module> {
            nn::AvgPoolOptions<D> o(pool_sizes<D>(j, "kernel_size", 1));
            o.stride(pool_sizes<D>(j, "stride", 1)).padding(pool_sizes<D>(j, "padding", 0));
            o.ceil_mode(j.at("ceil_mode").get<bool>()).count_include_pad(j.at("count_include_pad").get<bool>());
            const auto divisor = j.find("divisor_override");  // Python's AvgPool1d has none
            if (divisor != j.end() && !divisor->is_null())
              o.divisor_override(checked_size(divisor->get<int64_t>(), "'divisor_override'", 1));
            return std::make_shared<Impl>(o);
          }};
}

inline json size_json(int64_t s) { return s; }
inline json size_json(const c10::optional<int64_t>& s) { return s ? json(*s) : json(nullptr); }

/// AdaptiveAvgPoolNd: `output_size` a list of D sizes, each a number or (2-d,
/// 3-d) null for a dimension kept, or one number for all.
template <class Impl, class Options, size_t D>
SerializableModuleType adaptive_avg_pool_type(const std::string& name) {
  return {name,
          [](const nn::Module& m) -> json {
            json sizes = json::array();
            for (const auto& s : *dynamic_cast<const Impl&>(m).options.output_size()) sizes.push_back(size_json(s));
            return {{"output_size", sizes}};
          },
          [](const json& j) -> std::shared_ptr<nn::Module> {
            const json& v = j.at("output_size");
            std::vector<c10::optional<int64_t>> sizes;
            if (v.is_number_integer()) {
              sizes.assign(D, checked_size(v.get<int64_t>(), "'output_size'", 1));
            } else {
              for (const json& s : v)
                sizes.push_back(s.is_null() ? c10::optional<int64_t>()
                                            : checked_size(s.get<int64_t>(), "'output_size'", 1));
              if (sizes.size() != D)
                throw Error("option 'output_size' has " + std::to_string(sizes.size()) + " values; expected " +
                            std::to_string(D));
            }
            if constexpr (D == 1) {
              if (!sizes[0]) throw Error("option 'output_size' of a 1-d pooling cannot be null");
              return std::make_shared<Impl>(Options(*sizes[0]));
            } else {
              return std::make_shared<Impl>(Options(torch::ExpandingArrayWithOptionalElem<D>(sizes)));
            }
          }};
}

template <class Impl, size_t D>
SerializableModuleType conv_type(const std::string& name) {
  return {name, [](const nn::Module& m) { return conv_to_json<D>(dynamic_cast<const Impl&>(m).options); },
          [](const json& j) -> std::shared_ptr<nn::Module> {
            auto o = conv_from_json<nn::ConvOptions<D>, D>(j);
            const json& p = j.at("padding");
            if (p == "valid") o.padding(torch::kValid);
            else if (p == "same") o.padding(torch::kSame);
            else o.padding(expanding<D>(p, "padding", 0));
            return std::make_shared<Impl>(o);
          }};
}

template <class Impl, size_t D>
SerializableModuleType conv_transpose_type(const std::string& name) {
  return {name, [](const nn::Module& m) { return conv_to_json<D>(dynamic_cast<const Impl&>(m).options); },
          [](const json& j) -> std::shared_ptr<nn::Module> {
            auto o = conv_from_json<nn::ConvTransposeOptions<D>, D>(j);
            o.padding(expanding<D>(j.at("padding"), "padding", 0))
                .output_padding(expanding<D>(j.at("output_padding"), "output_padding", 0));
            return std::make_shared<Impl>(o);
          }};
}

template <class Impl>
SerializableModuleType batch_norm_type(const std::string& name) {
  return {name,
          [](const nn::Module& m) -> json {
            const auto& o = dynamic_cast<const Impl&>(m).options;
            return {{"num_features", o.num_features()}, {"eps", o.eps()},
                    {"momentum", o.momentum() ? json(*o.momentum()) : json(nullptr)},
                    {"affine", o.affine()}, {"track_running_stats", o.track_running_stats()}};
          },
          [](const json& j) -> std::shared_ptr<nn::Module> {
            nn::BatchNormOptions o(size_option(j, "num_features", 1));
            o.eps(j.at("eps").get<double>()).affine(j.at("affine").get<bool>());
            o.track_running_stats(j.at("track_running_stats").get<bool>());
            if (j.at("momentum").is_null()) o.momentum(c10::nullopt);
            else o.momentum(j.at("momentum").get<double>());
            return std::make_shared<Impl>(o);
          }};
}

template <class Impl, class Options>
SerializableModuleType rnn_type(const std::string& name) {
  return {name,
          [](const nn::Module& m) -> json {
            const auto& o = dynamic_cast<const Impl&>(m).options_base;
            json j = {{"input_size", o.input_size()}, {"hidden_size", o.hidden_size()},
                      {"num_layers", o.num_layers()}, {"bias", o.bias()}, {"batch_first", o.batch_first()},
                      {"dropout", o.dropout()}, {"bidirectional", o.bidirectional()}, {"proj_size", o.proj_size()}};
            if (c10::holds_alternative<torch::enumtype::kRNN_RELU>(o.mode())) j["nonlinearity"] = "relu";
            else if (c10::holds_alternative<torch::enumtype::kRNN_TANH>(o.mode())) j["nonlinearity"] = "tanh";
            return j;
          },
          [](const json& j) -> std::shared_ptr<nn::Module> {
            const int64_t input = size_option(j, "input_size", 1), hidden = size_option(j, "hidden_size", 1);
            const int64_t layers = checked_size(j.at("num_layers").get<int64_t>(), "'num_layers'", 1);
            check_weight_elements({4 * hidden, std::max(input, hidden), 2 * layers}, "a recurrent layer");
            Options o(input, hidden);
            o.num_layers(layers).bias(j.at("bias").get<bool>());
            o.batch_first(j.at("batch_first").get<bool>()).dropout(j.at("dropout").get<double>());
            o.bidirectional(j.at("bidirectional").get<bool>());
            if constexpr (std::is_same_v<Options, nn::LSTMOptions>) {
              const int64_t proj = size_option(j, "proj_size", 0);
              if (proj >= hidden) throw Error("option 'proj_size' must be smaller than 'hidden_size'");
              o.proj_size(proj);
            }
            if constexpr (std::is_same_v<Options, nn::RNNOptions>) {
              if (j.at("nonlinearity") == "relu") o.nonlinearity(torch::kReLU);
            }
            return std::make_shared<Impl>(o);
          }};
}

/// A module type whose options are default-constructible and stored whole
/// by the two functions given.
template <class Impl, class ToJson, class FromJson>
SerializableModuleType simple_type(const std::string& name, ToJson to_json, FromJson from_json) {
  return {name, [to_json](const nn::Module& m) -> json { return to_json(dynamic_cast<const Impl&>(m).options); },
          [from_json](const json& j) -> std::shared_ptr<nn::Module> { return std::make_shared<Impl>(from_json(j)); }};
}

void register_builtins(Registry& r) {
  auto add = [&](std::type_index t, SerializableModuleType e) {
    auto p = std::make_shared<const SerializableModuleType>(std::move(e));
    r.all.push_back(p);
    r.by_type[t] = p;
    r.by_name[p->name] = p;
  };
  add(typeid(nn::LinearImpl),
      simple_type<nn::LinearImpl>(
          "torch.nn.Linear",
          [](const nn::LinearOptions& o) -> json {
            return {{"in_features", o.in_features()}, {"out_features", o.out_features()}, {"bias", o.bias()}};
          },
          [](const json& j) {
            const int64_t in = size_option(j, "in_features", 0), out = size_option(j, "out_features", 0);
            check_weight_elements({in, out}, "a linear layer");
            return nn::LinearOptions(in, out).bias(j.at("bias").get<bool>());
          }));
  add(typeid(nn::Conv1dImpl), conv_type<nn::Conv1dImpl, 1>("torch.nn.Conv1d"));
  add(typeid(nn::Conv2dImpl), conv_type<nn::Conv2dImpl, 2>("torch.nn.Conv2d"));
  add(typeid(nn::Conv3dImpl), conv_type<nn::Conv3dImpl, 3>("torch.nn.Conv3d"));
  add(typeid(nn::ConvTranspose1dImpl), conv_transpose_type<nn::ConvTranspose1dImpl, 1>("torch.nn.ConvTranspose1d"));
  add(typeid(nn::ConvTranspose2dImpl), conv_transpose_type<nn::ConvTranspose2dImpl, 2>("torch.nn.ConvTranspose2d"));
  add(typeid(nn::ConvTranspose3dImpl), conv_transpose_type<nn::ConvTranspose3dImpl, 3>("torch.nn.ConvTranspose3d"));
  add(typeid(nn::BatchNorm1dImpl), batch_norm_type<nn::BatchNorm1dImpl>("torch.nn.BatchNorm1d"));
  add(typeid(nn::BatchNorm2dImpl), batch_norm_type<nn::BatchNorm2dImpl>("torch.nn.BatchNorm2d"));
  add(typeid(nn::BatchNorm3dImpl), batch_norm_type<nn::BatchNorm3dImpl>("torch.nn.BatchNorm3d"));
  add(typeid(nn::LSTMImpl), rnn_type<nn::LSTMImpl, nn::LSTMOptions>("torch.nn.LSTM"));
  add(typeid(nn::GRUImpl), rnn_type<nn::GRUImpl, nn::GRUOptions>("torch.nn.GRU"));
  add(typeid(nn::RNNImpl), rnn_type<nn::RNNImpl, nn::RNNOptions>("torch.nn.RNN"));
  add(typeid(nn::LayerNormImpl),
      simple_type<nn::LayerNormImpl>(
          "torch.nn.LayerNorm",
          [](const nn::LayerNormOptions& o) -> json {
            return {{"normalized_shape", o.normalized_shape()}, {"eps", o.eps()},
                    {"elementwise_affine", o.elementwise_affine()}};
          },
          [](const json& j) {
            auto shape = j.at("normalized_shape").get<std::vector<int64_t>>();
            for (int64_t d : shape) checked_size(d, "'normalized_shape'", 0);
            check_weight_elements(shape, "a layer norm");
            return nn::LayerNormOptions(shape)
                .eps(j.at("eps").get<double>())
                .elementwise_affine(j.at("elementwise_affine").get<bool>());
          }));
  add(typeid(nn::GroupNormImpl),
      simple_type<nn::GroupNormImpl>(
          "torch.nn.GroupNorm",
          [](const nn::GroupNormOptions& o) -> json {
            return {{"num_groups", o.num_groups()}, {"num_channels", o.num_channels()}, {"eps", o.eps()},
                    {"affine", o.affine()}};
          },
          [](const json& j) {
            const int64_t groups = size_option(j, "num_groups", 1), channels = size_option(j, "num_channels", 0);
            if (channels % groups != 0) throw Error("option 'num_channels' must be divisible by 'num_groups'");
            return nn::GroupNormOptions(groups, channels)
                .eps(j.at("eps").get<double>())
                .affine(j.at("affine").get<bool>());
          }));
  add(typeid(nn::EmbeddingImpl),
      simple_type<nn::EmbeddingImpl>(
          "torch.nn.Embedding",
          [](const nn::EmbeddingOptions& o) -> json {
            return {{"num_embeddings", o.num_embeddings()}, {"embedding_dim", o.embedding_dim()},
                    {"padding_idx", o.padding_idx() ? json(*o.padding_idx()) : json(nullptr)},
                    {"max_norm", o.max_norm() ? json(*o.max_norm()) : json(nullptr)}, {"norm_type", o.norm_type()},
                    {"scale_grad_by_freq", o.scale_grad_by_freq()}, {"sparse", o.sparse()}};
          },
          [](const json& j) {
            const int64_t n = size_option(j, "num_embeddings", 1), dim = size_option(j, "embedding_dim", 0);
            check_weight_elements({n, dim}, "an embedding");
            nn::EmbeddingOptions o(n, dim);
            if (!j.at("padding_idx").is_null()) o.padding_idx(j.at("padding_idx").get<int64_t>());
            if (!j.at("max_norm").is_null()) o.max_norm(j.at("max_norm").get<double>());
            return o.norm_type(j.at("norm_type").get<double>())
                .scale_grad_by_freq(j.at("scale_grad_by_freq").get<bool>())
                .sparse(j.at("sparse").get<bool>());
          }));
  // Parameter-free layers.
  add(typeid(nn::ReLUImpl), simple_type<nn::ReLUImpl>(
                                "torch.nn.ReLU", [](const nn::ReLUOptions& o) -> json { return {{"inplace", o.inplace()}}; },
                                [](const json& j) { return nn::ReLUOptions(j.at("inplace").get<bool>()); }));
  add(typeid(nn::DropoutImpl),
      simple_type<nn::DropoutImpl>(
          "torch.nn.Dropout",
          [](const nn::DropoutOptions& o) -> json { return {{"p", o.p()}, {"inplace", o.inplace()}}; },
          [](const json& j) { return nn::DropoutOptions(j.at("p").get<double>()).inplace(j.at("inplace").get<bool>()); }));
  add(typeid(nn::FlattenImpl),
      simple_type<nn::FlattenImpl>(
          "torch.nn.Flatten",
          [](const nn::FlattenOptions& o) -> json { return {{"start_dim", o.start_dim()}, {"end_dim", o.end_dim()}}; },
          [](const json& j) {
            return nn::FlattenOptions().start_dim(j.at("start_dim").get<int64_t>()).end_dim(j.at("end_dim").get<int64_t>());
          }));
  add(typeid(nn::SoftmaxImpl),
      simple_type<nn::SoftmaxImpl>(
          "torch.nn.Softmax", [](const nn::SoftmaxOptions& o) -> json { return {{"dim", o.dim()}}; },
          [](const json& j) { return nn::SoftmaxOptions(j.at("dim").get<int64_t>()); }));
  // Pooling (parameter-free; Python's torch.nn writes them, C++ tracing goes through them).
  add(typeid(nn::MaxPool1dImpl), max_pool_type<nn::MaxPool1dImpl, 1>("torch.nn.MaxPool1d"));
  add(typeid(nn::MaxPool2dImpl), max_pool_type<nn::MaxPool2dImpl, 2>("torch.nn.MaxPool2d"));
  add(typeid(nn::MaxPool3dImpl), max_pool_type<nn::MaxPool3dImpl, 3>("torch.nn.MaxPool3d"));
  add(typeid(nn::AvgPool1dImpl), avg_pool_type<nn::AvgPool1dImpl, 1>("torch.nn.AvgPool1d"));
  add(typeid(nn::AvgPool2dImpl), avg_pool_type<nn::AvgPool2dImpl, 2>("torch.nn.AvgPool2d"));
  add(typeid(nn::AvgPool3dImpl), avg_pool_type<nn::AvgPool3dImpl, 3>("torch.nn.AvgPool3d"));
  add(typeid(nn::AdaptiveAvgPool1dImpl),
      adaptive_avg_pool_type<nn::AdaptiveAvgPool1dImpl, nn::AdaptiveAvgPool1dOptions, 1>("torch.nn.AdaptiveAvgPool1d"));
  add(typeid(nn::AdaptiveAvgPool2dImpl),
      adaptive_avg_pool_type<nn::AdaptiveAvgPool2dImpl, nn::AdaptiveAvgPool2dOptions, 2>("torch.nn.AdaptiveAvgPool2d"));
  add(typeid(nn::AdaptiveAvgPool3dImpl),
      adaptive_avg_pool_type<nn::AdaptiveAvgPool3dImpl, nn::AdaptiveAvgPool3dOptions, 3>("torch.nn.AdaptiveAvgPool3d"));
  auto no_options = [&](std::type_index t, const std::string& name, auto make) {
    add(t, {name, [](const nn::Module&) { return json::object(); },
            [make](const json&) -> std::shared_ptr<nn::Module> { return make(); }});
  };
  no_options(typeid(nn::IdentityImpl), "torch.nn.Identity", [] { return std::make_shared<nn::IdentityImpl>(); });
  no_options(typeid(nn::SigmoidImpl), "torch.nn.Sigmoid", [] { return std::make_shared<nn::SigmoidImpl>(); });
  no_options(typeid(nn::TanhImpl), "torch.nn.Tanh", [] { return std::make_shared<nn::TanhImpl>(); });
}

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();
    register_builtins(*reg);
    return reg;
  }();
  return *r;
}

}  // namespace

void register_serializable_module(std::type_index type, SerializableModuleType entry) {
  if (entry.name.empty() || !entry.to_json || !entry.from_json)
    throw Error("register_serializable_module: the entry needs a name, to_json and from_json");
  Registry& r = registry();
  auto p = std::make_shared<const SerializableModuleType>(std::move(entry));
  std::lock_guard<std::mutex> lock(r.mutex);
  r.all.push_back(p);
  r.by_type[type] = p;
  r.by_name[p->name] = p;
}

const SerializableModuleType* find_serializable_module(const torch::nn::Module& module) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.by_type.find(typeid(module));
  return it == r.by_type.end() ? nullptr : it->second.get();
}

const SerializableModuleType* find_serializable_module(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.by_name.find(name);
  return it == r.by_name.end() ? nullptr : it->second.get();
}

}  // namespace fx
