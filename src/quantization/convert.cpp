// convert_to_reference_fx: observers → quantize/dequantize, weighted layers →
// functional calls on dequantized weights.
#include <fx/quantization/convert.h>

#include "quantization/common.h"

#include <fx/error.h>
#include <fx/module_attributes.h>
#include <fx/quantization/qat.h>

#include <unordered_map>
#include <unordered_set>

namespace fx::quantization {

namespace {

bool is_weighted_type(const std::string& t) {
  return t == "Conv1d" || t == "Conv2d" || t == "Conv3d" || t == "Linear";
}

Argument int_list(const c10::IValue& v) {
  std::vector<Argument> items;
  if (v.isInt()) {
    items.emplace_back(v.toInt());
  } else {
    for (int64_t i : v.toIntVector()) items.emplace_back(i);
  }
  return Argument::list(std::move(items));
}

/// Builds the reference graph node by node into a new graph (so that a
/// replaced layer's computing node can keep the layer's node name), editing
/// the modules of `gm`, an independent copy of the prepared module.
class Converter {
 public:
  explicit Converter(std::shared_ptr<GraphModule> gm) : gm_(std::move(gm)), g_(std::make_shared<Graph>()) {}
  void run(ConvertReport& report);

 private:
  /// Registers `value` as a root buffer named prefix + "_" + N (the first free N) and reads it.
  Node* attr(const std::string& prefix, const at::Tensor& value) {
    std::string name;
    for (int64_t i = 0;; ++i) {
      name = prefix + "_" + std::to_string(i);
      if (!taken_.count(name)) break;
    }
    taken_.insert(name);
    gm_->register_attr(name, value);
    return g_->get_attr(name);
  }
  Argument mapped(const Argument& a) const {
    return map_arg(a, [&](Node* n) -> Argument { return env_.at(n); });
  }
  Node* replace_observer(const Node* n, ObserverBase& obs);
  Node* replace_layer(const Node* n, const QConfig& q, NodeQuantization& entry);

  std::shared_ptr<GraphModule> gm_;
  std::shared_ptr<Graph> g_;
  std::unordered_map<const Node*, Node*> env_;
  std::unordered_set<std::string> taken_;
};

Node* Converter::replace_observer(const Node* n, ObserverBase& obs) {
  Node* input = env_.at(n->args()[0].to_node());
  const std::string base = n->args()[0].to_node()->name();
  auto [scale, zero_point] = obs.calculate_qparams();
  Node* q = nullptr;
  const QScheme qs = obs.options().qscheme;
  if (qs == QScheme::PerTensorAffine || qs == QScheme::PerTensorSymmetric) {
    Node* s = attr(base + "_scale", at::scalar_tensor(scale.item<float>(), at::kFloat));
    Node* z = attr(base + "_zero_point", at::scalar_tensor(zero_point.item<int64_t>(), at::kLong));
    q = g_->call_function("aten::quantize_per_tensor.tensor_qparams", {input, s, z, obs.dtype()});
  } else {
    Node* s = attr(base + "_scale", scale.to(at::kDouble));
    Node* z = attr(base + "_zero_point", zero_point.to(at::kLong));
    q = g_->call_function("aten::quantize_per_channel", {input, s, z, obs.options().ch_axis, obs.dtype()});
  }
  return g_->call_method("dequantize", {q});
}

/// The weight observer of a QAT layer as convert_fx runs it: a copy of the
/// layer's own weight fake quantizer (its moving min / max), fed the folded
/// float weight once more, as Python's convert runs `weight_fake_quant(float_module.weight)`.
std::shared_ptr<ObserverBase> qat_weight_observer(const QatLayer& layer, const at::Tensor& w) {
  const FakeQuantize& trained = layer.weight_fake_quant();
  auto copy = std::dynamic_pointer_cast<FakeQuantize>(make_fake_quantize(trained.factory()));
  {
    at::NoGradGuard no_grad;
    auto dst = copy->named_buffers(true);
    for (const auto& b : trained.named_buffers(true)) {
      at::Tensor* t = dst.find(b.key());
      t->resize_(b.value().sizes());
      t->copy_(b.value());
    }
  }
  at::NoGradGuard no_grad;
  copy->forward(w);
  return copy;
}

namespace {

/// `w` clamped to the real range of the integers its observer allows,
/// [(quant_min - zp) * scale, (quant_max - zp) * scale] per channel, where
/// that range is narrower than its dtype's (a custom or reduced range: 7-bit
/// weights), so that quantize_per_channel gives only integers in it, as
/// torch.ao's _clamp_weights does for eager modules (Python 1.13's FX
/// reference modules do not: a QAT model whose moving-average range
/// trails its weights converts to weights beyond it). Else `w` itself.
at::Tensor clamped_to_observer_range(const at::Tensor& w, const ObserverBase& obs, const at::Tensor& scale,
                                     const at::Tensor& zero_point, bool per_channel) {
  const bool signed_int = obs.dtype() == c10::kQInt8;
  if (obs.quant_min() <= (signed_int ? -128 : 0) && obs.quant_max() >= (signed_int ? 127 : 255)) return w;
  std::vector<int64_t> shape(static_cast<size_t>(w.dim()), 1);
  if (per_channel && w.dim() > 0) shape[static_cast<size_t>(obs.options().ch_axis)] = -1;
  const at::Tensor s = scale.to(at::kFloat).reshape(per_channel ? at::IntArrayRef(shape) : at::IntArrayRef{});
  const at::Tensor z = zero_point.to(at::kFloat).reshape(per_channel ? at::IntArrayRef(shape) : at::IntArrayRef{});
  return at::clamp(w, (obs.quant_min() - z) * s, (obs.quant_max() - z) * s);
}

}  // namespace

Node* Converter::replace_layer(const Node* n, const QConfig& q, NodeQuantization& entry) {
  auto module = gm_->get_submodule(n->target());
  auto outer = module_attributes(*module);
  if (n->args().size() != 1 || !n->kwargs().empty()) return nullptr;
  std::shared_ptr<torch::nn::Module> inner = module;
  bool relu = false;
  std::optional<ModuleAttributes> a;
  at::Tensor w, b;
  std::shared_ptr<ObserverBase> wobs;
  if (auto* l = dynamic_cast<QatLayer*>(module.get())) {
    // to_float(): the batch norm folded in with its running statistics.
    std::tie(w, b) = l->to_float();
    a = outer;
    a->type = l->options().dim == 0 ? "Linear" : "Conv" + std::to_string(l->options().dim) + "d";
    relu = l->options().relu;
    wobs = qat_weight_observer(*l, w);
  } else {
    if (auto* f = dynamic_cast<FusedModule*>(module.get())) {
      inner = f->first();
      relu = true;
    }
    a = module_attributes(*inner);
    if (!a || !is_weighted_type(a->type)) return nullptr;
    if (a->type != "Linear" && a->attributes.count("padding_mode") &&
        a->at("padding_mode").toStringRef() != "zeros") {
      entry.reason = a->type + " with padding_mode '" + a->at("padding_mode").toStringRef() + "': weight kept float";
      return nullptr;
    }
    w = detail::module_tensor(*inner, "weight").detach();
    b = detail::module_tensor(*inner, "bias");
    wobs = q.weight();
    wobs->forward(w);
  }
  auto [ws, wz] = wobs->calculate_qparams();
  const bool per_channel = wobs->options().qscheme == QScheme::PerChannelSymmetric ||
                           wobs->options().qscheme == QScheme::PerChannelAffine;
  w = clamped_to_observer_range(w, *wobs, ws, wz, per_channel);
  const std::string target = n->target();
  gm_->add_submodule(target, std::make_shared<torch::nn::Module>());
  // In the order the graph reads them (fx::load registers them so: a saved
  // and loaded module saves to the same bytes).
  gm_->register_attr(target + ".weight", w);
  gm_->register_attr(target + ".weight_scale", per_channel ? ws.to(at::kDouble) : ws.reshape({}).to(at::kFloat));
  gm_->register_attr(target + ".weight_zero_point", per_channel ? wz.to(at::kLong) : wz.reshape({}).to(at::kLong));
  if (b.defined()) gm_->register_attr(target + ".bias", b.detach());
  Node* wn = g_->get_attr(target + ".weight");
  Node* sn = g_->get_attr(target + ".weight_scale");
  Node* zn = g_->get_attr(target + ".weight_zero_point");
  Node* qw = per_channel
                 ? g_->call_function("aten::quantize_per_channel", {wn, sn, zn, wobs->options().ch_axis, wobs->dtype()})
                 : g_->call_function("aten::quantize_per_tensor.tensor_qparams", {wn, sn, zn, wobs->dtype()});
  Node* dqw = g_->call_method("dequantize", {qw});
  Argument bias = b.defined() ? Argument(g_->get_attr(target + ".bias")) : Argument();
  const Argument x = mapped(n->args()[0]);
  Node* last = nullptr;
  const std::string layer_name = n->name();
  if (a->type == "Linear") {
    last = g_->create_node(Opcode::CallFunction, "aten::linear", {x, dqw, bias}, {}, layer_name);
  } else {
    const c10::IValue& p = a->at("padding");
    const std::string op = "aten::conv" + a->type.substr(4, 2);
    Argument padding = p.isString() ? Argument(p.toStringRef()) : int_list(p);
    last = g_->create_node(Opcode::CallFunction, p.isString() ? op + ".padding" : op,
                           {x, dqw, bias, int_list(a->at("stride")), padding, int_list(a->at("dilation")),
                            a->at("groups").toInt()},
                           {}, layer_name);
  }
  if (relu) last = g_->call_function("aten::relu", {last});
  entry.quantized = true;
  entry.reason = (outer ? outer->type : a->type) + ": weight " + (wobs->dtype() == c10::kQInt8 ? "qint8 " : "quint8 ") +
                 qscheme_name(wobs->options().qscheme);
  return last;
}

void Converter::run(ConvertReport& report) {
  const Graph& old = gm_->graph();
  for (const auto& kv : gm_->named_buffers(false)) taken_.insert(kv.key());
  for (const auto& kv : gm_->named_parameters(false)) taken_.insert(kv.key());
  for (const auto& kv : gm_->named_children()) taken_.insert(kv.key());
  for (const Node* n : old.nodes()) {
    if (n->op() == Opcode::CallModule) {
      if (ObserverBase* obs = as_observer(*gm_->get_submodule(n->target()))) {
        env_[n] = replace_observer(n, *obs);
        ++report.activation_quantize_nodes;
        continue;
      }
    }
    const bool computes =
        n->op() == Opcode::CallModule || n->op() == Opcode::CallFunction || n->op() == Opcode::CallMethod;
    NodeQuantization entry{n->name(), n->target(), false, ""};
    QConfigPtr q = computes ? node_qconfig(n) : nullptr;
    Node* replaced = nullptr;
    if (computes && q && n->op() == Opcode::CallModule) replaced = replace_layer(n, *q, entry);
    if (replaced) {
      ++report.quantized_weights;
      env_[n] = replaced;
    } else {
      env_[n] = g_->node_copy(n, [&](Node* in) -> Argument { return env_.at(in); });
    }
    if (!computes) continue;
    if (!q) {
      entry.reason = "not quantized by prepare";
    } else if (!replaced && entry.reason.empty()) {
      entry.quantized = true;
      entry.reason = "between dequantize and quantize";
    }
    report.nodes.push_back(entry);
  }
  gm_->set_graph(g_);
  gm_->delete_all_unused_submodules();
  g_->lint();
}

}  // namespace

std::string ConvertReport::str() const { return format_report(nodes); }

std::shared_ptr<GraphModule> convert(const std::shared_ptr<GraphModule>& prepared, ConvertReport* report) {
  register_observer_modules();
  register_fused_modules();
  register_qat_modules();
  bool any = false;
  for (const Node* n : prepared->graph().nodes()) {
    if (n->op() != Opcode::CallModule) continue;
    ObserverBase* obs = as_observer(*prepared->get_submodule(n->target()));
    if (!obs) continue;
    any = true;
    if (!obs->has_observed()) {
      const std::string observed = n->args().empty() || !n->args()[0].is_node() ? "?" : n->args()[0].to_node()->name();
      throw Error("convert: observer '" + n->target() + "' (observing '" + observed +
                  "') saw no data: calibrate the prepared module (call forward on sample inputs) before convert");
    }
  }
  if (!any) throw Error("convert: the module has no observers: prepare() it first");
  std::string training;
  if (detail::any_training(*prepared, &training))
    throw Error("convert: module '" + training + "' is in training mode; call eval() first");
  ConvertReport local;
  ConvertReport& r = report ? *report : local;
  r = ConvertReport{};
  auto out = detail::copy_graph_module(prepared);
  // Node meta (the qconfig) is copied with the graph.
  Converter(out).run(r);
  return out;
}

}  // namespace fx::quantization
