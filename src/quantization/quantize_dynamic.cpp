// quantize_dynamic: linear layers → libtorch's quantized::linear_dynamic on
// weights packed once by quantized::linear_prepack (onednn engine).
#include <fx/quantization/quantize_dynamic.h>

#include "quantization/common.h"

#include <fx/error.h>
#include <fx/module_attributes.h>
#include <fx/quantization/observers.h>
#include <fx/quantization/qconfig.h>
#include <fx/tensor_meta.h>

#include <ATen/core/builtin_function.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/quantized/PackedParams.h>
#include <torch/custom_class.h>

#include <mutex>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace fx::quantization {

namespace {

const char* kPackedClass = "__torch__.torch.classes.quantized.LinearPackedParamsBase";

/// Python's name of a tensor's qscheme ("torch.per_tensor_affine").
std::string qscheme_of(const at::Tensor& q) { return "torch." + c10::toString(q.qscheme()); }

std::string describe(LinearPackedParamsBase& packed) {
  auto [w, b] = packed.unpack();
  std::ostringstream os;
  os << "DynamicQuantizedLinear(in_features=" << w.size(1) << ", out_features=" << w.size(0)
     << ", dtype=torch.qint8, qscheme=" << qscheme_of(w) << ")";
  (void)b;
  return os.str();
}

/// Gives libtorch's LinearPackedParamsBase a __str__ method (it has none), so
/// that a graph holding one prints what it is, not an object address
/// (fx's printer asks custom classes for __str__). Adds a method, changes none.
void add_str_method() {
  static std::once_flag once;
  std::call_once(once, [] {
    c10::ClassTypePtr cls = torch::getCustomClass(kPackedClass);
    if (!cls || cls->findMethod("__str__")) return;
    c10::FunctionSchema schema("__str__", "", {c10::Argument("self", cls)}, {c10::Argument("", c10::StringType::get())});
    auto fn = std::make_unique<torch::jit::BuiltinOpFunction>(
        c10::QualifiedName(*cls->name(), "__str__"), std::move(schema),
        [](torch::jit::Stack& stack) {
          auto self = torch::jit::pop(stack).toCustomClass<LinearPackedParamsBase>();
          torch::jit::push(stack, describe(*self));
        },
        "DynamicQuantizedLinear(...) as Python prints the module (added by fxcpp)");
    cls->addMethod(fn.get());
    torch::registerCustomClassMethod(std::move(fn));
  });
}

/// Graphs loaded by fx::load print their packed layers too.
[[maybe_unused]] const bool kStrMethodAdded = (add_str_method(), true);

/// Switches to the onednn quantized engine for its lifetime.
class OnednnEngine {
 public:
  OnednnEngine() : previous_(at::globalContext().qEngine()) {
    const auto& engines = at::globalContext().supportedQEngines();
    if (std::find(engines.begin(), engines.end(), at::QEngine::ONEDNN) == engines.end())
      throw Error("quantize_dynamic: this libtorch has no onednn quantized engine (quantized::linear_prepack needs it)");
    at::globalContext().setQEngine(at::QEngine::ONEDNN);
  }
  ~OnednnEngine() { at::globalContext().setQEngine(previous_); }
  OnednnEngine(const OnednnEngine&) = delete;
  OnednnEngine& operator=(const OnednnEngine&) = delete;

 private:
  at::QEngine previous_;
};

/// The weight quantized as Python's DynamicQuantizedLinear.from_float does
/// (the qconfig's weight observer, then _quantize_weight).
at::Tensor quantize_weight(const at::Tensor& w, bool per_channel) {
  ObserverOptions o;
  o.dtype = c10::kQInt8;
  if (per_channel) {
    o.qscheme = QScheme::PerChannelSymmetric;
    PerChannelMinMaxObserver obs(o);
    obs.forward(w);
    auto [s, z] = obs.calculate_qparams();
    return at::quantize_per_channel(w, s.to(at::kDouble), z.to(at::kLong), 0, c10::kQInt8);
  }
  o.qscheme = QScheme::PerTensorSymmetric;
  MinMaxObserver obs(o);
  obs.forward(w);
  auto [s, z] = obs.calculate_qparams();
  return at::quantize_per_tensor(w, s.item<double>(), z.item<int64_t>(), c10::kQInt8);
}

c10::IValue prepack(const at::Tensor& qweight, const at::Tensor& bias) {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("quantized::linear_prepack", "");
  torch::jit::Stack stack{qweight, bias.defined() ? c10::IValue(bias) : c10::IValue()};
  op.callBoxed(&stack);
  return stack.at(0);
}

bool name_matches(const std::string& name, const std::string& pattern) {
  return name == pattern || (name.size() > pattern.size() && name.compare(0, pattern.size(), pattern) == 0 &&
                             name[pattern.size()] == '.');
}

bool any_matches(const std::vector<std::string>& keys, const std::vector<std::string>& patterns) {
  for (const auto& p : patterns)
    for (const auto& k : keys)
      if (!k.empty() && name_matches(k, p)) return true;
  return false;
}

bool is_get_attr(const Argument& a) { return a.is_node() && a.to_node()->op() == Opcode::GetAttr; }

bool is_linear_type(const std::string& t) { return t == "Linear" || t == "NonDynamicallyQuantizableLinear"; }

/// A linear layer the pass may quantize.
struct Layer {
  Argument input;
  at::Tensor weight, bias;
  std::string what;                ///< "Linear", "aten::linear"
  std::vector<std::string> keys;   ///< names options.names / skip match against
  std::vector<std::string> attrs;  ///< get_attr targets the layer reads (functional)
  const Node* transpose = nullptr;  ///< matmul(x, t(W)): the aten::t node
  const Node* bias_add = nullptr;   ///< matmul(x, t(W)) + b: the add node, computed by the layer too
  std::string label;                ///< the report's name of the layer when not what(in → out)
};

std::string tensor_shape(const at::Tensor& w) {
  return std::to_string(w.size(1)) + " → " + std::to_string(w.size(0));
}

class Quantizer {
 public:
  Quantizer(const std::shared_ptr<GraphModule>& gm, const DynamicQuantOptions& o) : gm_(gm), o_(o) {}

  std::shared_ptr<GraphModule> run(DynamicQuantReport& report);

 private:
  /// The layer `n` is, or nullopt with `why` saying why it is not one.
  std::optional<Layer> layer(const Node* n, std::string& why) const;
  /// matmul(x, aten::t(W)) [+ b] with W (and b) get_attr: a linear layer as
  /// libtorch's C++ MultiheadAttention computes its input projection.
  std::optional<Layer> matmul_layer(const Node* n, std::string& why) const;

  std::shared_ptr<GraphModule> gm_;
  const DynamicQuantOptions& o_;
};

std::optional<Layer> Quantizer::layer(const Node* n, std::string& why) const {
  if (n->op() == Opcode::CallModule) {
    const std::string type = detail::module_type(*gm_, n);
    bool chosen = false;
    for (const auto& t : o_.module_types) chosen |= t == type;
    if (!chosen) {
      why = type.empty() ? "module " + n->target() + " is not a known layer" : type + " is not quantized dynamically";
      if (is_linear_type(type)) why = type + " is not in options.module_types";
      return std::nullopt;
    }
    if (n->args().size() != 1 || !n->kwargs().empty()) {
      why = type + " called with " + std::to_string(n->args().size() + n->kwargs().size()) + " arguments";
      return std::nullopt;
    }
    auto m = gm_->get_submodule(n->target());
    Layer l;
    l.input = n->args()[0];
    l.weight = detail::module_tensor(*m, "weight");
    l.bias = detail::module_tensor(*m, "bias");
    l.what = type;
    l.keys = {n->target(), n->name()};
    if (!l.weight.defined() || l.weight.dim() != 2) {
      why = type + " without a 2-d weight";
      return std::nullopt;
    }
    return l;
  }
  if (n->op() == Opcode::CallFunction && canonical_function(n->target()) == "aten::matmul") return matmul_layer(n, why);
  if (n->op() != Opcode::CallFunction || canonical_function(n->target()) != "aten::linear") {
    why = "not a linear layer";
    return std::nullopt;
  }
  if (!o_.functional) {
    why = "aten::linear: options.functional is false";
    return std::nullopt;
  }
  // aten::linear(input, weight, bias=None), positionally or by keyword.
  auto arg = [&](size_t i, const char* key) -> std::optional<Argument> {
    if (i < n->args().size()) return n->args()[i];
    for (const auto& kv : n->kwargs())
      if (kv.first == key) return kv.second;
    return std::nullopt;
  };
  auto input = arg(0, "input");
  auto weight = arg(1, "weight");
  auto bias = arg(2, "bias");
  if (!input || !weight) {
    why = "aten::linear without input or weight";
    return std::nullopt;
  }
  if (!is_get_attr(*weight)) {
    why = "aten::linear: weight is not a get_attr (computed at run time)";
    return std::nullopt;
  }
  if (bias && !bias->is_none() && !is_get_attr(*bias)) {
    why = "aten::linear: bias is not a get_attr";
    return std::nullopt;
  }
  Layer l;
  l.input = *input;
  l.weight = gm_->fetch_attr(weight->to_node()->target());
  l.what = "aten::linear";
  l.keys = {n->name(), weight->to_node()->target()};
  l.attrs.push_back(weight->to_node()->target());
  if (bias && !bias->is_none()) {
    l.bias = gm_->fetch_attr(bias->to_node()->target());
    l.attrs.push_back(bias->to_node()->target());
  }
  if (l.weight.dim() != 2) {
    why = "aten::linear: weight is not 2-d";
    return std::nullopt;
  }
  return l;
}

std::optional<Layer> Quantizer::matmul_layer(const Node* n, std::string& why) const {
  why = "aten::matmul: not x @ W.t() with W a get_attr";
  if (!o_.functional || n->args().size() != 2 || !n->kwargs().empty() || !n->args()[1].is_node()) {
    if (!o_.functional) why = "aten::matmul: options.functional is false";
    return std::nullopt;
  }
  const Node* t = n->args()[1].to_node();
  if (t->op() != Opcode::CallFunction || canonical_function(t->target()) != "aten::t" || t->args().size() != 1 ||
      !is_get_attr(t->args()[0]))
    return std::nullopt;
  const at::Tensor w = gm_->fetch_attr(t->args()[0].to_node()->target());
  if (w.dim() != 2) return std::nullopt;
  // The output's rank (tensor_meta): a 1-d input is not a batch of rows.
  const TensorMetadata* m = tensor_meta_of(n);
  if (!m || m->shape.size() < 2) {
    why = m ? "aten::matmul: 1-d input" : "aten::matmul: no tensor_meta (the input's rank is unknown)";
    return std::nullopt;
  }
  const std::string wname = t->args()[0].to_node()->target();
  Layer l;
  l.input = n->args()[0];
  l.weight = w;
  l.what = "aten::matmul";
  l.keys = {n->name(), wname};
  l.attrs = {wname};
  l.transpose = t;
  // A bias added right after, to the matmul's only use.
  if (n->users().size() == 1) {
    const Node* add = *n->users().begin();
    if (add->op() == Opcode::CallFunction && canonical_function(add->target()) == "aten::add" &&
        add->args().size() == 2 && add->kwargs().empty() && add->args()[0].is_node() &&
        add->args()[0].to_node() == n && is_get_attr(add->args()[1])) {
      at::Tensor b = gm_->fetch_attr(add->args()[1].to_node()->target());
      if (b.dim() == 1 && b.size(0) == w.size(0)) {
        l.bias = b;
        l.bias_add = add;
        l.attrs.push_back(add->args()[1].to_node()->target());
      }
    }
  }
  l.label = "aten::matmul(x, W.t())" + std::string(l.bias_add ? " + b" : "") + " (" + tensor_shape(w) + ")";
  return l;
}

std::shared_ptr<GraphModule> Quantizer::run(DynamicQuantReport& report) {
  auto g = std::make_shared<Graph>();
  std::unordered_map<const Node*, Node*> env;
  auto mapped = [&](const Argument& a) { return map_arg(a, [&](Node* n) -> Argument { return env.at(n); }); };
  std::unique_ptr<OnednnEngine> engine;
  std::unordered_set<std::string> dropped;  // get_attr targets of quantized functional layers
  std::unordered_map<const Node*, Node*> absorbed;  // bias adds → the layer computing them
  std::unordered_set<const Node*> transposes;       // aten::t of quantized matmul weights
  for (const Node* n : gm_->graph().nodes()) {
    const bool computes =
        n->op() == Opcode::CallModule || n->op() == Opcode::CallFunction || n->op() == Opcode::CallMethod;
    NodeQuantization entry{n->name(), n->target(), false, ""};
    if (auto a = absorbed.find(n); a != absorbed.end()) {  // a bias add the layer before computes
      env[n] = a->second;
      entry.quantized = true;
      entry.reason = "bias of " + a->second->name();
      report.nodes.push_back(entry);
      continue;
    }
    std::optional<Layer> l;
    if (computes) l = layer(n, entry.reason);
    if (l && !o_.names.empty() && !any_matches(l->keys, o_.names)) {
      entry.reason = l->what + ": not in options.names";
      l.reset();
    }
    if (l && any_matches(l->keys, o_.skip)) {
      entry.reason = l->what + ": in options.skip";
      l.reset();
    }
    if (l && (l->weight.scalar_type() != at::kFloat || (l->bias.defined() && l->bias.scalar_type() != at::kFloat))) {
      entry.reason = l->what + ": weight or bias is not float32";
      l.reset();
    }
    if (!l) {
      env[n] = g->node_copy(n, [&](Node* in) -> Argument { return env.at(in); });
      if (computes) report.nodes.push_back(entry);
      continue;
    }
    if (!engine) engine = std::make_unique<OnednnEngine>();
    at::Tensor qweight = quantize_weight(l->weight.detach().contiguous(), o_.per_channel);
    c10::IValue packed = prepack(qweight, l->bias.defined() ? l->bias.detach() : l->bias);
    Node* q = g->create_node(Opcode::CallFunction, "quantized::linear_dynamic",
                             {mapped(l->input), Argument::from_ivalue(packed), o_.reduce_range}, {}, n->name());
    q->meta() = n->meta();
    env[n] = q;
    dropped.insert(l->attrs.begin(), l->attrs.end());
    if (l->bias_add) absorbed[l->bias_add] = q;
    if (l->transpose) transposes.insert(env.at(l->transpose));
    entry.quantized = true;
    entry.reason = (l->label.empty() ? l->what + "(" + tensor_shape(l->weight) + ")" : l->label) + ": weight qint8 " +
                   (o_.per_channel ? "torch.per_channel_symmetric" : "torch.per_tensor_symmetric") +
                   ", activations quint8 per call" + (o_.reduce_range ? " (reduce_range)" : "");
    report.nodes.push_back(entry);
    ++report.quantized_layers;
  }
  // The float weights of quantized functional layers are read by nobody now.
  for (auto it = g->nodes().to_vector(); !it.empty(); it.pop_back()) {  // last first: t before its get_attr
    Node* n = it.back();
    if (!n->users().empty()) continue;
    if (transposes.count(n) || (n->op() == Opcode::GetAttr && dropped.count(n->target()))) g->erase_node(n);
  }
  g->lint();
  // Copies only what the new graph uses (torch.fx's GraphModule(root, graph)):
  // new containers along each path, the leaf modules and tensors shared with `gm`.
  return std::make_shared<GraphModule>(gm_, g, gm_->class_name());
}

}  // namespace

std::string DynamicQuantReport::str() const { return format_report(nodes); }

bool is_packed_linear_params(const c10::IValue& value) {
  return value.isObject() && value.toObjectRef().type()->name() &&
         value.toObjectRef().type()->name()->qualifiedName() == kPackedClass;
}

std::string describe_packed_linear_params(const c10::IValue& value) {
  if (!is_packed_linear_params(value))
    throw Error("describe_packed_linear_params: not a packed linear layer but a " + value.type()->str());
  return describe(*value.toCustomClass<LinearPackedParamsBase>());
}

std::shared_ptr<GraphModule> quantize_dynamic(const std::shared_ptr<GraphModule>& gm,
                                              const DynamicQuantOptions& options, DynamicQuantReport* report) {
  for (const auto& t : options.module_types)
    if (!is_linear_type(t))
      throw Error("quantize_dynamic: module type '" + t +
                  "' cannot be quantized dynamically (only Linear and NonDynamicallyQuantizableLinear)");
  std::string training;
  if (detail::any_training(*gm, &training))
    throw Error("quantize_dynamic: module '" + training + "' is in training mode; call eval() first");
  add_str_method();
  DynamicQuantReport local;
  DynamicQuantReport& r = report ? *report : local;
  r = DynamicQuantReport{};
  return Quantizer(gm, options).run(r);
}

}  // namespace fx::quantization
