// prepare_fx: fuse, then insert observers (torch/ao/quantization/fx/prepare.py, 1.13).
#include <fx/quantization/prepare.h>

#include "quantization/common.h"
#include "quantization/insert_observers.h"

#include <fx/error.h>
#include <fx/passes/shape_prop.h>
#include <fx/tensor_meta.h>

#include <functional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace fx::quantization {

namespace {

/// How an op is observed (the backend config's ObservationType).
enum class Kind {
  None,     ///< no pattern: stays float
  Compute,  ///< OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT
  Share,    ///< OUTPUT_SHARE_OBSERVER_WITH_INPUT
};

struct OpInfo {
  Kind kind = Kind::None;
  bool functional_weight = false;  ///< args[1] is a weight, args[2] a bias (aten::conv2d, aten::linear)
  bool fixed_qparams = false;      ///< needs a FixedQParamsObserver qconfig
};

const std::unordered_map<std::string, OpInfo>& module_ops() {
  static const std::unordered_map<std::string, OpInfo> table = [] {
    std::unordered_map<std::string, OpInfo> t;
    // The QAT layers (ConvBn2d ...) are prepare_qat's (fx/quantization/qat.h).
    for (const char* c : {"Conv1d", "Conv2d", "Conv3d", "ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "Linear",
                          "LinearReLU", "ConvBn1d", "ConvBn2d", "ConvBn3d", "ConvBnReLU1d", "ConvBnReLU2d",
                          "ConvBnReLU3d", "LinearBn1d", "BatchNorm2d", "BatchNorm3d", "Dropout", "LayerNorm", "ELU", "Hardswish",
                          "LeakyReLU", "PReLU", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "GroupNorm"})
      t[c] = {Kind::Compute, false, false};
    for (const char* c : {"Sigmoid", "Tanh", "Softmax", "Hardsigmoid"}) t[c] = {Kind::Compute, false, true};
    for (const char* c : {"ReLU", "ReLU6", "Hardtanh", "Identity", "MaxPool1d", "MaxPool2d", "MaxPool3d",
                          "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
                          "AdaptiveAvgPool3d"})
      t[c] = {Kind::Share, false, false};
    return t;
  }();
  return table;
}

const std::unordered_map<std::string, OpInfo>& function_ops() {
  static const std::unordered_map<std::string, OpInfo> table = [] {
    std::unordered_map<std::string, OpInfo> t;
    for (const char* c : {"aten::add", "aten::mul", "aten::matmul", "aten::dropout", "aten::layer_norm",
                          "aten::group_norm", "aten::instance_norm", "aten::elu", "aten::hardswish",
                          "aten::leaky_relu"})
      t[c] = {Kind::Compute, false, false};
    for (const char* c : {"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::linear"})
      t[c] = {Kind::Compute, true, false};
    for (const char* c : {"aten::sigmoid", "aten::tanh", "aten::hardsigmoid"}) t[c] = {Kind::Compute, false, true};
    for (const char* c :
         {"aten::relu", "aten::relu6", "aten::hardtanh", "aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d",
          "aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d", "aten::adaptive_avg_pool1d",
          "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d", "aten::flatten", "aten::mean", "aten::cat",
          "aten::stack", "aten::clamp", "aten::contiguous", "aten::detach", "aten::permute", "aten::repeat",
          "aten::repeat_interleave", "aten::reshape", "aten::view", "aten::squeeze", "aten::unsqueeze",
          "aten::transpose", "aten::upsample_nearest2d", "aten::upsample_bilinear2d"})
      t[c] = {Kind::Share, false, false};
    return t;
  }();
  return table;
}

std::string function_key(const Node* n) {
  return canonical_function(n->op() == Opcode::CallMethod ? "aten::" + n->target() : n->target());
}

OpInfo classify(const GraphModule& gm, const Node* n, std::string* label) {
  if (n->op() == Opcode::CallModule) {
    *label = detail::module_type(gm, n);
    auto it = module_ops().find(*label);
    if (label->empty()) *label = "module " + n->target();
    return it == module_ops().end() ? OpInfo{} : it->second;
  }
  *label = function_key(n);
  auto it = function_ops().find(*label);
  return it == function_ops().end() ? OpInfo{} : it->second;
}

struct Match {
  Node* root = nullptr;
  Node* last = nullptr;
  OpInfo info;
  std::string label;
};

/// A node's output as the reference graph will hold it: not a floating
/// tensor (never observed), float, or quantized to `dtype`.
struct Dtype {
  enum { None, Float, Quantized } kind = Float;
  c10::ScalarType dtype = c10::kFloat;
  bool operator==(const Dtype& o) const { return kind == o.kind && (kind != Quantized || dtype == o.dtype); }
  bool operator!=(const Dtype& o) const { return !(*this == o); }
};

bool floating_output(const Node* n) {
  const TensorMetadata* m = tensor_meta_of(n);
  return m && at::isFloatingType(m->dtype);
}

class Preparer {
 public:
  Preparer(std::shared_ptr<GraphModule> gm, const QConfigMapping& mapping) : gm_(std::move(gm)), mapping_(mapping) {}

  void run(PrepareReport* report);

 private:
  bool is_observer_node(const Node* n) const {
    return n->op() == Opcode::CallModule && as_observer(*gm_->get_submodule(n->target()));
  }
  Dtype output_dtype(const Node* arg) const {
    if (is_observer_node(arg) && arg->args().size() == 1 && arg->args()[0].is_node())
      return output_dtype(arg->args()[0].to_node());
    auto it = dtypes_.find(arg);
    return it == dtypes_.end() ? Dtype{Dtype::None} : it->second;
  }
  Node* insert_observer(Node* after, std::shared_ptr<ObserverBase> obs) {
    const std::string name = "activation_post_process_" + std::to_string(counter_++);
    obs->train(gm_->is_training());  // fake quantizers of a module prepared for training train with it
    gm_->add_submodule(name, std::move(obs));
    auto guard = gm_->graph().inserting_after(after);
    return gm_->graph().call_module(name, {after});
  }
  Argument observe_input(Node* n, const Argument& arg, size_t index, const Match& m, const QConfig& q);
  bool share_with_input(Node* n);

  std::shared_ptr<GraphModule> gm_;
  const QConfigMapping& mapping_;
  std::unordered_map<const Node*, Dtype> dtypes_;
  int64_t counter_ = 0;
};

Argument Preparer::observe_input(Node* n, const Argument& arg, size_t index, const Match& m, const QConfig& q) {
  if (arg.is_sequence()) {
    std::vector<Argument> items;
    for (const Argument& a : arg.items()) items.push_back(observe_input(n, a, index, m, q));
    return arg.kind() == Argument::Kind::List ? Argument::list(std::move(items)) : Argument::tuple(std::move(items));
  }
  if (!arg.is_node()) return arg;
  Node* a = arg.to_node();
  const bool is_weight = m.info.functional_weight && index == 1;
  const bool is_bias = m.info.functional_weight && index == 2;
  const ObserverFactory& factory = is_weight ? q.weight : q.activation;
  Dtype target{Dtype::Quantized, factory.options.dtype};
  if (is_bias) target = Dtype{Dtype::Float};
  const Dtype have = output_dtype(a);
  const bool needs = have != target && target.kind != Dtype::Float && have.kind != Dtype::None && !q.reuse_input;
  if (!needs) return arg;
  // An observer of the same type and dtype already on this value is reused.
  for (Node* u : a->users()) {
    if (u->op() != Opcode::CallModule) continue;
    ObserverBase* o = as_observer(*gm_->get_submodule(u->target()));
    if (o && o->type_name() == factory.type && o->dtype() == target.dtype) return Argument(u);
  }
  (void)n;
  return Argument(insert_observer(a, factory()));
}

bool Preparer::share_with_input(Node* n) {
  const Argument* first = nullptr;
  for (const Argument& a : n->args())
    if (a.is_node() || a.is_sequence()) {
      first = &a;
      break;
    }
  if (!first) return false;
  Argument first_item = first->is_sequence() ? (first->items().empty() ? Argument() : first->items()[0]) : *first;
  if (!first_item.is_node()) return false;
  Node* x = first_item.to_node();
  for (int guard = 0; !is_observer_node(x); ++guard) {
    if (x->op() == Opcode::Placeholder || guard > 10000) return false;
    Node* back = nullptr;
    for (const Argument& a : x->args())
      if (a.is_node()) {
        back = a.to_node();
        break;
      }
    if (!back) return false;
    x = back;
  }
  auto shared = gm_->get_submodule(x->target());
  if (first->is_sequence()) {
    for (size_t i = 1; i < first->items().size(); ++i) {
      if (!first->items()[i].is_node()) return false;
      Node* in = first->items()[i].to_node();
      for (int guard = 0; !is_observer_node(in); ++guard) {
        if (in->args().empty() || !in->args()[0].is_node() || guard > 10000) return false;
        in = in->args()[0].to_node();
      }
      gm_->add_submodule(in->target(), shared);
    }
  }
  for (Node* u : n->users()) gm_->add_submodule(u->target(), shared);
  return true;
}

void Preparer::run(PrepareReport* report) {
  Graph& g = gm_->graph();
  std::vector<Node*> nodes = g.nodes().to_vector();
  std::unordered_map<const Node*, QConfigPtr> qconfigs;
  for (Node* n : nodes) {
    if (n->op() == Opcode::CallModule) qconfigs[n] = mapping_.for_module(n->target(), detail::module_type(*gm_, n));
    else if (n->op() == Opcode::CallFunction || n->op() == Opcode::CallMethod)
      qconfigs[n] = mapping_.for_function(n->op() == Opcode::CallMethod ? "aten::" + n->target() : n->target());
  }
  // Patterns, matched from the last node backwards (Python's find_matches).
  std::unordered_map<const Node*, Match> matches;
  std::unordered_map<const Node*, std::string> why_float;
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = *it;
    if (matches.count(n) || !qconfigs.count(n)) continue;
    if (detail::is_relu(*gm_, n) && n->args()[0].is_node()) {
      Node* a = n->args()[0].to_node();
      const std::string k = a->op() == Opcode::CallFunction ? function_key(a) : "";
      if ((k == "aten::add" || k == "aten::mul") && a->users().size() == 1 && !matches.count(a)) {
        Match m{a, n, OpInfo{Kind::Compute, false, false}, k + " + ReLU"};
        matches[a] = m;
        matches[n] = m;
        continue;
      }
    }
    Match m{n, n, {}, ""};
    m.info = classify(*gm_, n, &m.label);
    if (m.info.kind == Kind::None) {
      why_float[n] = "no quantization pattern for " + m.label;
      continue;
    }
    matches[n] = m;
  }
  // Target dtypes.
  for (Node* n : nodes) {
    if (n->op() == Opcode::Output) continue;
    if (!floating_output(n)) {
      dtypes_[n] = Dtype{Dtype::None};
      continue;
    }
    Dtype d{Dtype::Float};
    auto m = matches.find(n);
    const QConfigPtr q = qconfigs.count(n) ? qconfigs[n] : nullptr;
    if (m != matches.end() && q && n->target() != "operator.getitem") {
      if (m->second.info.fixed_qparams && q->activation.type != "FixedQParamsObserver" &&
          q->activation.type != "FixedQParamsFakeQuantize") {
        why_float[n] = "fixed-qparams op: its qconfig's activation must be a FixedQParamsObserver, not " +
                       q->activation.type;
        matches.erase(m);
      } else {
        d = Dtype{Dtype::Quantized, q->activation.options.dtype};
      }
    }
    dtypes_[n] = d;
  }
  // Observers, node by node.
  for (Node* n : nodes) {
    auto mit = matches.find(n);
    if (mit == matches.end()) continue;
    const Match m = mit->second;
    const QConfigPtr q = qconfigs[n];
    if (!q || dtypes_[n].kind != Dtype::Quantized) continue;
    n->meta()["qconfig"] = qconfig_to_string(*q);
    if (n == m.root) {
      ArgList args;
      for (size_t i = 0; i < n->args().size(); ++i) args.push_back(observe_input(n, n->args()[i], i, m, *q));
      Kwargs kwargs;
      for (const auto& kv : n->kwargs()) kwargs.emplace_back(kv.first, observe_input(n, kv.second, ~size_t(0), m, *q));
      n->set_args(std::move(args));
      n->set_kwargs(std::move(kwargs));
    }
    if (n != m.last) continue;
    Node* obs = insert_observer(n, q->activation());
    for (Node* u : std::vector<Node*>(n->users().begin(), n->users().end()))
      if (u != obs) u->replace_input_with(n, obs);
    const bool same_graph = !(n->args().size() > 0 && n->args()[0].is_node() &&
                              n->args()[0].to_node()->op() == Opcode::Placeholder);
    if ((m.info.kind == Kind::Share && same_graph) || q->reuse_input) {
      if (!share_with_input(n)) {
        obs->replace_all_uses_with(n);
        g.erase_node(obs);
      }
    }
  }
  gm_->delete_all_unused_submodules();
  g.lint();
  if (!report) return;
  std::unordered_set<const torch::nn::Module*> distinct;
  for (Node* n : g.nodes()) {
    if (is_observer_node(n)) {
      ++report->observer_nodes;
      distinct.insert(gm_->get_submodule(n->target()).get());
      continue;
    }
    if (n->op() != Opcode::CallModule && n->op() != Opcode::CallFunction && n->op() != Opcode::CallMethod) continue;
    NodeQuantization e{n->name(), n->target(), false, ""};
    auto m = matches.find(n);
    const QConfigPtr q = qconfigs.count(n) ? qconfigs[n] : nullptr;
    if (dtypes_.count(n) && dtypes_[n].kind == Dtype::None) {
      e.reason = "output is not a floating-point tensor";
    } else if (auto w = why_float.find(n); w != why_float.end()) {
      e.reason = w->second;
    } else if (!q) {
      e.reason = "qconfig is None";
    } else if (n->target() == "operator.getitem") {
      e.reason = "getitem is not quantized";
    } else if (m != matches.end()) {
      e.quantized = true;
      e.reason = m->second.info.kind == Kind::Share ? "shares its input's observer (" + m->second.label + ")"
                                                    : m->second.label;
    }
    report->nodes.push_back(e);
  }
  report->observer_modules = distinct.size();
}

}  // namespace

void detail::insert_observers(const std::shared_ptr<GraphModule>& gm, const QConfigMapping& mapping,
                              PrepareReport& report) {
  Preparer(gm, mapping).run(&report);
}

std::string format_report(const std::vector<NodeQuantization>& nodes) {
  std::ostringstream os;
  for (const NodeQuantization& n : nodes)
    os << n.node << "  " << n.target << "  " << (n.quantized ? "quantized" : "float") << "  " << n.reason << "\n";
  return os.str();
}

std::string PrepareReport::str() const { return format_report(nodes); }

QConfigPtr node_qconfig(const Node* n) {
  auto it = n->meta().find("qconfig");
  if (it == n->meta().end()) return nullptr;
  const auto* text = std::any_cast<std::string>(&it->second);
  return text ? qconfig_from_string(*text) : nullptr;
}

std::shared_ptr<GraphModule> prepare(const std::shared_ptr<GraphModule>& gm, const QConfigMapping& qconfig_mapping,
                                     const std::vector<c10::IValue>& example_inputs, PrepareReport* report) {
  register_observer_modules();
  register_fused_modules();
  if (std::string which; detail::has_observers(*gm, &which))
    throw Error("prepare: the module is already prepared (it has observer '" + which + "')");
  std::string training;
  if (detail::any_training(*gm, &training))
    throw Error("prepare: module '" + training +
                "' is in training mode; call eval() first: post-training quantization needs inference batch norm "
                "and dropout");
  PrepareReport local;
  PrepareReport& r = report ? *report : local;
  r = PrepareReport{};
  auto out = fuse(gm, &r.fuse);
  try {
    ShapeProp(out).propagate(example_inputs);
  } catch (const std::exception& e) {
    throw Error(std::string("prepare: the example inputs do not run the model: ") + e.what());
  }
  detail::insert_observers(out, qconfig_mapping, r);
  return out;
}

}  // namespace fx::quantization
