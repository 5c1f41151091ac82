// fuse_fx: conv/linear + batch norm (+ relu), conv/linear + relu.
#include <fx/quantization/fuse.h>

#include "quantization/common.h"

#include <fx/error.h>
#include <fx/module_attributes.h>
#include <fx/serialize.h>

#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <mutex>

namespace fx::quantization {

FusedModule::FusedModule(std::string type, std::shared_ptr<torch::nn::Module> first)
    : type_(std::move(type)), first_(std::move(first)) {
  register_module("0", first_);
  register_module("1", std::make_shared<torch::nn::ReLUImpl>());
}

at::Tensor FusedModule::forward(const at::Tensor& x) {
  const ModuleForward* f = find_module_forward(*first_);
  if (!f) throw Error(type_ + ": no forward registered for its first layer");
  std::vector<c10::IValue> args{x};
  return at::relu((*f)(*first_, args).toTensor());
}

void register_fused_modules() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_module_type<FusedModule>();
    register_module_attributes(typeid(FusedModule), [](const torch::nn::Module& m) -> std::optional<ModuleAttributes> {
      auto* f = dynamic_cast<const FusedModule*>(&m);
      if (!f) return std::nullopt;
      auto inner = module_attributes(*f->first());
      ModuleAttributes out;
      if (inner) out = *inner;
      out.type = f->type();
      out.attributes["training"] = m.is_training();
      return out;
    });
    // Saved as its type and its first layer's registry entry; the layer's
    // tensors are the module's own ("0.weight"), which fx::save stores.
    register_serializable_module(
        typeid(FusedModule),
        SerializableModuleType{
            "fxcpp.quantization.FusedModule",
            [](const torch::nn::Module& m) -> nlohmann::json {
              auto& f = dynamic_cast<const FusedModule&>(m);
              const SerializableModuleType* first = find_serializable_module(*f.first());
              if (!first)
                throw Error(f.type() + ": its layer of type " + f.first()->name() +
                            " cannot be saved: register its type with fx::register_serializable_module");
              return {{"type", f.type()}, {"first_type", first->name}, {"first", first->to_json(*f.first())}};
            },
            [](const nlohmann::json& j) -> std::shared_ptr<torch::nn::Module> {
              const std::string type = j.at("type").get<std::string>();
              if (type != "ConvReLU1d" && type != "ConvReLU2d" && type != "ConvReLU3d" && type != "LinearReLU")
                throw Error("unknown fused module type '" + type + "'");
              const SerializableModuleType* first = find_serializable_module(j.at("first_type").get<std::string>());
              if (!first) throw Error("unknown module type '" + j.at("first_type").get<std::string>() + "'");
              return std::make_shared<FusedModule>(type, first->from_json(j.at("first")));
            }});
  });
}

namespace {

using detail::module_tensor;

std::vector<int64_t> int_values(const c10::IValue& v) {
  if (v.isInt()) return {v.toInt()};
  return v.toIntVector();
}

/// A new torch::nn ConvNd with `a`'s configuration and the given weight and bias.
template <size_t D, class Impl>
std::shared_ptr<torch::nn::Module> make_conv(const ModuleAttributes& a, const at::Tensor& w, const at::Tensor& b) {
  const int64_t groups = a.at("groups").toInt();
  torch::nn::ConvOptions<D> o(w.size(1) * groups, w.size(0), torch::ExpandingArray<D>(w.sizes().slice(2).vec()));
  o.stride(torch::ExpandingArray<D>(int_values(a.at("stride"))));
  o.dilation(torch::ExpandingArray<D>(int_values(a.at("dilation"))));
  o.groups(groups).bias(true);
  const c10::IValue& p = a.at("padding");
  if (p.isString()) {
    if (p.toStringRef() == "same") o.padding(torch::kSame);
    else o.padding(torch::kValid);
  } else {
    o.padding(torch::ExpandingArray<D>(int_values(p)));
  }
  const std::string mode = a.attributes.count("padding_mode") ? a.at("padding_mode").toStringRef() : "zeros";
  if (mode == "reflect") o.padding_mode(torch::kReflect);
  else if (mode == "replicate") o.padding_mode(torch::kReplicate);
  else if (mode == "circular") o.padding_mode(torch::kCircular);
  auto conv = std::make_shared<Impl>(o);
  torch::NoGradGuard no_grad;
  conv->weight.set_data(w);
  conv->bias.set_data(b);
  conv->eval();
  return conv;
}

std::shared_ptr<torch::nn::Module> make_linear(const at::Tensor& w, const at::Tensor& b) {
  auto linear = std::make_shared<torch::nn::LinearImpl>(torch::nn::LinearOptions(w.size(1), w.size(0)).bias(true));
  torch::NoGradGuard no_grad;
  linear->weight.set_data(w);
  linear->bias.set_data(b);
  linear->eval();
  return linear;
}

/// The fused module for `first` (+ `bn`) (+ relu), or nullptr when `first`
/// cannot be rebuilt (an unknown layer).
std::shared_ptr<torch::nn::Module> fused_module(GraphModule& gm, Node* first, Node* bn, bool relu,
                                                const std::string& first_type) {
  auto first_module = gm.get_submodule(first->target());
  std::shared_ptr<torch::nn::Module> base = first_module;
  if (bn) {
    auto bn_module = gm.get_submodule(bn->target());
    auto fa = module_attributes(*first_module);
    if (first_module->is_training() || bn_module->is_training()) throw Error("fuse: Fusion only for eval!");
    const detail::BnState s = detail::bn_state(*bn_module);
    at::Tensor w = module_tensor(*first_module, "weight");
    at::Tensor b = module_tensor(*first_module, "bias");
    if (first_type == "Linear") {
      auto [fw, fb] = detail::fuse_linear_bn_weights(w, b, s);
      base = make_linear(fw, fb);
    } else {
      auto [fw, fb] = detail::fuse_conv_bn_weights(w, b, s);
      if (first_type == "Conv1d") base = make_conv<1, torch::nn::Conv1dImpl>(*fa, fw, fb);
      else if (first_type == "Conv2d") base = make_conv<2, torch::nn::Conv2dImpl>(*fa, fw, fb);
      else base = make_conv<3, torch::nn::Conv3dImpl>(*fa, fw, fb);
    }
  }
  if (!relu) return base;
  std::string type = first_type == "Linear" ? "LinearReLU" : "ConvReLU" + first_type.substr(4);
  auto fused = std::make_shared<FusedModule>(type, base);
  if (!first_module->is_training()) fused->eval();
  return fused;
}

}  // namespace

std::shared_ptr<GraphModule> fuse(const std::shared_ptr<GraphModule>& gm, FuseReport* report) {
  register_fused_modules();
  auto out = detail::copy_graph_module(gm);
  Graph& g = out->graph();
  std::vector<std::string> lines;
  const std::vector<detail::FusionMatch> matches = detail::find_fusions(*out);
  for (const detail::FusionMatch& m : matches) {
    auto module = fused_module(*out, m.first, m.bn, m.relu != nullptr, m.type);
    std::string line = m.first->name() + ": " + m.type;
    Node* last = m.first;
    if (m.bn) {
      line += " + " + detail::module_type(*out, m.bn);
      last = m.bn;
    }
    if (m.relu) {
      line += " + ReLU";
      last = m.relu;
    }
    const auto a = module_attributes(*module);
    line += " -> " + (a ? a->type : std::string("?"));
    lines.push_back(line);
    out->add_submodule(m.first->target(), module);
    last->replace_all_uses_with(m.first);
    if (m.relu) g.erase_node(m.relu);
    if (m.bn) g.erase_node(m.bn);
  }
  if (!matches.empty()) out->delete_all_unused_submodules();
  g.lint();
  if (report) report->fused = std::move(lines);
  return out;
}

}  // namespace fx::quantization
