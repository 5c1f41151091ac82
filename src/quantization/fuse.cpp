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

struct BnState {
  at::Tensor mean, var, weight, bias;
  double eps;
};

BnState bn_state(const torch::nn::Module& bn, const ModuleAttributes& a) {
  BnState s{module_tensor(bn, "running_mean"), module_tensor(bn, "running_var"), module_tensor(bn, "weight"),
            module_tensor(bn, "bias"), a.at("eps").toDouble()};
  if (!s.mean.defined() || !s.var.defined()) throw Error("fuse: batch norm without running statistics");
  if (!s.weight.defined()) s.weight = at::ones_like(s.mean);
  if (!s.bias.defined()) s.bias = at::zeros_like(s.mean);
  return s;
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
    auto ba = module_attributes(*bn_module);
    if (first_module->is_training() || bn_module->is_training()) throw Error("fuse: Fusion only for eval!");
    const BnState s = bn_state(*bn_module, *ba);
    at::NoGradGuard no_grad;
    at::Tensor w = module_tensor(*first_module, "weight");
    at::Tensor b = module_tensor(*first_module, "bias");
    if (!b.defined()) b = at::zeros_like(s.mean);
    if (first_type == "Linear") {
      // fuse_linear_bn_weights
      at::Tensor bn_scale = s.weight * at::rsqrt(s.var + s.eps);
      base = make_linear((w * bn_scale.unsqueeze(-1)).detach(), ((b - s.mean) * bn_scale + s.bias).detach());
    } else {
      // fuse_conv_bn_weights
      at::Tensor var_rsqrt = at::rsqrt(s.var + s.eps);
      std::vector<int64_t> shape(w.dim(), 1);
      shape[0] = -1;
      at::Tensor fw = (w * (s.weight * var_rsqrt).reshape(shape)).to(w.scalar_type()).detach();
      at::Tensor fb = ((b - s.mean) * var_rsqrt * s.weight + s.bias).to(b.scalar_type()).detach();
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

bool single_user(const Node* n) { return n->users().size() == 1; }

}  // namespace

std::shared_ptr<GraphModule> fuse(const std::shared_ptr<GraphModule>& gm, FuseReport* report) {
  register_fused_modules();
  auto out = detail::copy_graph_module(gm);
  Graph& g = out->graph();
  // Python matches from the last node backwards; each node joins one match.
  std::vector<Node*> nodes = g.nodes().to_vector();
  std::vector<std::string> lines;
  std::unordered_set<Node*> taken;
  struct Match {
    Node* first;
    Node* bn;
    Node* relu;
    std::string type;
  };
  std::vector<Match> matches;
  auto first_of = [&](Node* n) -> std::string {
    const std::string t = detail::module_type(*out, n);
    return (t == "Conv1d" || t == "Conv2d" || t == "Conv3d" || t == "Linear") ? t : "";
  };
  auto is_bn_for = [&](Node* n, const std::string& first_type) {
    const std::string t = detail::module_type(*out, n);
    if (first_type == "Linear") return t == "BatchNorm1d";
    return t == "BatchNorm" + first_type.substr(4);
  };
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = *it;
    if (taken.count(n)) continue;
    Match m{nullptr, nullptr, nullptr, ""};
    Node* tail = n;
    if (detail::is_relu(*out, n) && n->args()[0].is_node()) {
      m.relu = n;
      tail = n->args()[0].to_node();
      if (!single_user(tail) || taken.count(tail)) continue;
    }
    // tail is the bn or the layer.
    if (tail->op() == Opcode::CallModule && tail->args().size() == 1 && tail->args()[0].is_node()) {
      Node* prev = tail->args()[0].to_node();
      const std::string pt = first_of(prev);
      if (!pt.empty() && is_bn_for(tail, pt) && single_user(prev) && !taken.count(prev) &&
          prev->args().size() == 1) {
        m.first = prev;
        m.bn = tail;
        m.type = pt;
      }
    }
    if (!m.first && m.relu) {
      const std::string t = first_of(tail);
      if (!t.empty() && tail->args().size() == 1) {
        m.first = tail;
        m.type = t;
      }
    }
    if (!m.first || (!m.bn && !m.relu)) continue;
    for (Node* x : {m.first, m.bn, m.relu})
      if (x) taken.insert(x);
    matches.push_back(m);
  }
  for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
    const Match& m = *it;
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
