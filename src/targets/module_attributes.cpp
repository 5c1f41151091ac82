// module_attributes: torch::nn C++ layers' options under their Python
// attribute names, and the attributes_table of registered module types.
#include <fx/error.h>
#include <fx/module_attributes.h>

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>

#include <shared_mutex>

namespace fx {
namespace {

using AttributesFn = std::function<std::optional<ModuleAttributes>(const torch::nn::Module&)>;

struct AttributesTable {
  std::shared_mutex mutex;
  std::unordered_map<std::type_index, AttributesFn> fns;
};

AttributesTable& attributes_table() {
  static AttributesTable t;
  return t;
}

template <size_t D>
c10::IValue ints(const torch::ExpandingArray<D>& a) {
  return c10::IValue(std::vector<int64_t>(a->begin(), a->end()));
}

/// Conv padding: a tuple, or "valid" / "same" as in Python.
template <size_t D>
c10::IValue conv_padding(const torch::nn::detail::conv_padding_t<D>& p) {
  if (c10::get_if<torch::enumtype::kValid>(&p)) return c10::IValue(std::string("valid"));
  if (c10::get_if<torch::enumtype::kSame>(&p)) return c10::IValue(std::string("same"));
  return ints<D>(c10::get<torch::ExpandingArray<D>>(p));
}

std::string padding_mode(const torch::nn::detail::conv_padding_mode_t& m) {
  if (c10::get_if<torch::enumtype::kZeros>(&m)) return "zeros";
  if (c10::get_if<torch::enumtype::kReflect>(&m)) return "reflect";
  if (c10::get_if<torch::enumtype::kReplicate>(&m)) return "replicate";
  return "circular";
}

template <size_t D, class M>
bool conv(const torch::nn::Module& m, const char* type, ModuleAttributes& out) {
  auto* c = dynamic_cast<const M*>(&m);
  if (!c) return false;
  const auto& o = c->options;
  out.type = type;
  out.attributes = {{"stride", ints<D>(o.stride())},
                    {"padding", conv_padding<D>(o.padding())},
                    {"dilation", ints<D>(o.dilation())},
                    {"groups", o.groups()},
                    {"padding_mode", padding_mode(o.padding_mode())}};
  return true;
}

template <class M>
bool batch_norm(const torch::nn::Module& m, const char* type, ModuleAttributes& out) {
  auto* b = dynamic_cast<const M*>(&m);
  if (!b) return false;
  const auto& o = b->options;
  out.type = type;
  out.attributes = {{"eps", o.eps()},
                    {"momentum", o.momentum() ? c10::IValue(*o.momentum()) : c10::IValue()},
                    {"affine", o.affine()},
                    {"track_running_stats", o.track_running_stats()}};
  return true;
}

/// A layer without options: only its class name.
template <class M>
bool plain(const torch::nn::Module& m, const char* type, ModuleAttributes& out) {
  if (!dynamic_cast<const M*>(&m)) return false;
  out.type = type;
  return true;
}

std::optional<ModuleAttributes> cpp_attributes(const torch::nn::Module& m) {
  namespace nn = torch::nn;
  ModuleAttributes out;
  if (conv<1, nn::Conv1dImpl>(m, "Conv1d", out) || conv<2, nn::Conv2dImpl>(m, "Conv2d", out) ||
      conv<3, nn::Conv3dImpl>(m, "Conv3d", out) || batch_norm<nn::BatchNorm1dImpl>(m, "BatchNorm1d", out) ||
      batch_norm<nn::BatchNorm2dImpl>(m, "BatchNorm2d", out) ||
      batch_norm<nn::BatchNorm3dImpl>(m, "BatchNorm3d", out) || plain<nn::LinearImpl>(m, "Linear", out) ||
      plain<nn::SiLUImpl>(m, "SiLU", out) || plain<nn::SigmoidImpl>(m, "Sigmoid", out) ||
      plain<nn::TanhImpl>(m, "Tanh", out) || plain<nn::IdentityImpl>(m, "Identity", out)) {
  } else if (auto* r = dynamic_cast<const nn::ReLUImpl*>(&m)) {
    out = {"ReLU", {{"inplace", r->options.inplace()}}};
  } else if (auto* r6 = dynamic_cast<const nn::ReLU6Impl*>(&m)) {
    out = {"ReLU6", {{"inplace", r6->options.inplace()}}};
  } else if (auto* h = dynamic_cast<const nn::HardtanhImpl*>(&m)) {
    out = {"Hardtanh", {{"min_val", h->options.min_val()}, {"max_val", h->options.max_val()}}};
  } else if (auto* gelu = dynamic_cast<const nn::GELUImpl*>(&m)) {
    out = {"GELU", {{"approximate", gelu->options.approximate()}}};
  } else if (auto* d = dynamic_cast<const nn::DropoutImpl*>(&m)) {
    out = {"Dropout", {{"p", d->options.p()}}};
  } else if (auto* d2 = dynamic_cast<const nn::Dropout2dImpl*>(&m)) {
    out = {"Dropout2d", {{"p", d2->options.p()}}};
  } else if (auto* f = dynamic_cast<const nn::FlattenImpl*>(&m)) {
    out = {"Flatten", {{"start_dim", f->options.start_dim()}, {"end_dim", f->options.end_dim()}}};
  } else if (auto* ln = dynamic_cast<const nn::LayerNormImpl*>(&m)) {
    out = {"LayerNorm",
           {{"normalized_shape", c10::IValue(ln->options.normalized_shape())},
            {"eps", ln->options.eps()},
            {"elementwise_affine", ln->options.elementwise_affine()}}};
  } else if (auto* mp = dynamic_cast<const nn::MaxPool2dImpl*>(&m)) {
    const auto& o = mp->options;
    out = {"MaxPool2d",
           {{"kernel_size", ints<2>(o.kernel_size())},
            {"stride", ints<2>(o.stride())},
            {"padding", ints<2>(o.padding())},
            {"dilation", ints<2>(o.dilation())},
            {"ceil_mode", o.ceil_mode()}}};
  } else if (auto* ap = dynamic_cast<const nn::AvgPool2dImpl*>(&m)) {
    const auto& o = ap->options;
    out = {"AvgPool2d",
           {{"kernel_size", ints<2>(o.kernel_size())},
            {"stride", ints<2>(o.stride())},
            {"padding", ints<2>(o.padding())},
            {"ceil_mode", o.ceil_mode()},
            {"count_include_pad", o.count_include_pad()},
            {"divisor_override", o.divisor_override() ? c10::IValue(*o.divisor_override()) : c10::IValue()}}};
  } else if (auto* aap = dynamic_cast<const nn::AdaptiveAvgPool2dImpl*>(&m)) {
    c10::List<c10::optional<int64_t>> size;
    for (const auto& e : *aap->options.output_size()) size.push_back(e);
    out = {"AdaptiveAvgPool2d", {{"output_size", c10::IValue(size)}}};
  } else if (auto* sm = dynamic_cast<const nn::SoftmaxImpl*>(&m)) {
    out = {"Softmax", {{"dim", sm->options.dim()}}};
  } else {
    return std::nullopt;
  }
  out.attributes.emplace("training", m.is_training());
  return out;
}

}  // namespace

const c10::IValue& ModuleAttributes::at(const std::string& name) const {
  auto it = attributes.find(name);
  if (it == attributes.end()) throw Error(type + " has no attribute '" + name + "'");
  return it->second;
}

std::optional<ModuleAttributes> module_attributes(const torch::nn::Module& module) {
  {
    auto& t = attributes_table();
    std::shared_lock lock(t.mutex);
    auto it = t.fns.find(typeid(module));
    if (it != t.fns.end()) return it->second(module);
  }
  return cpp_attributes(module);
}

void register_module_attributes(std::type_index type, AttributesFn fn) {
  auto& t = attributes_table();
  std::unique_lock lock(t.mutex);
  t.fns[type] = std::move(fn);
}

}  // namespace fx
