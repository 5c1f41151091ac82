// prepare_qat_fx: QAT fusion and module swap, then fake quantizers where
// prepare puts observers (torch/ao/quantization/fx/prepare.py, qat_swap_modules, 1.13).
#include <fx/quantization/qat.h>

#include "quantization/common.h"
#include "quantization/insert_observers.h"

#include <fx/error.h>
#include <fx/passes/shape_prop.h>

#include <unordered_set>

namespace fx::quantization {

namespace {

std::vector<int64_t> ints(const c10::IValue& v, int64_t dim) {
  if (v.isInt()) return std::vector<int64_t>(static_cast<size_t>(dim), v.toInt());
  return v.toIntVector();
}

/// Python's class name of the QAT layer: "ConvBnReLU2d", "LinearReLU", "LinearBn1d", "Conv2d" ...
std::string qat_type(const std::string& first_type, bool bn, bool relu) {
  if (first_type == "Linear") return bn ? "LinearBn1d" : relu ? "LinearReLU" : "Linear";
  return std::string("Conv") + (bn ? "Bn" : "") + (relu ? "ReLU" : "") + first_type.substr(4);
}

/// Copies `from`'s tensor values into `to`'s tensors of the same names (a new layer's).
void copy_tensors(torch::nn::Module& to, const torch::nn::Module& from, bool parameters) {
  torch::NoGradGuard no_grad;
  auto dst = parameters ? to.named_parameters(false) : to.named_buffers(false);
  for (auto& item : dst) {
    at::Tensor src = detail::module_tensor(from, item.key());
    if (!src.defined()) continue;
    item.value().set_data(src.detach().clone());
    if (parameters) item.value().set_requires_grad(src.requires_grad());
  }
}

/// The QAT layer for `first` (+ `bn`) (+ relu), or nullptr when the layer
/// cannot train quantized (a padding_mode other than zeros).
std::shared_ptr<QatLayer> make_layer(const GraphModule& gm, Node* first, Node* bn, bool relu,
                                     const std::string& first_type, const QConfig& q) {
  auto fm = gm.get_submodule(first->target());
  auto a = module_attributes(*fm);
  if (!a) return nullptr;
  if (a->attributes.count("padding_mode") && a->at("padding_mode").isString() &&
      a->at("padding_mode").toStringRef() != "zeros")
    return nullptr;
  at::Tensor w = detail::module_tensor(*fm, "weight");
  at::Tensor b = detail::module_tensor(*fm, "bias");
  if (!w.defined()) return nullptr;
  QatLayer::Options o;
  o.type = qat_type(first_type, bn != nullptr, relu);
  o.out = w.size(0);
  o.bias = b.defined();
  if (first_type == "Linear") {
    o.dim = 0;
    o.in = w.size(1);
  } else {
    o.dim = first_type[4] - '0';
    o.groups = a->at("groups").toInt();
    o.in = w.size(1) * o.groups;
    o.kernel_size = w.sizes().slice(2).vec();
    o.stride = ints(a->at("stride"), o.dim);
    o.dilation = ints(a->at("dilation"), o.dim);
    const c10::IValue& p = a->at("padding");
    if (p.isString()) o.padding_string = p.toStringRef();
    else o.padding = ints(p, o.dim);
  }
  std::shared_ptr<torch::nn::Module> bm;
  if (bn) {
    bm = gm.get_submodule(bn->target());
    auto ba = module_attributes(*bm);
    o.bn = true;
    o.bn_eps = ba->at("eps").toDouble();
    const c10::IValue momentum = ba->attributes.count("momentum") ? ba->at("momentum") : c10::IValue(0.1);
    o.bn_momentum = momentum.isNone() ? std::nullopt : std::optional<double>(momentum.toDouble());
  }
  o.relu = relu;
  auto layer = std::make_shared<QatLayer>(o, q.weight);
  copy_tensors(*layer, *fm, true);
  if (bm) {
    copy_tensors(*layer->bn(), *bm, true);
    copy_tensors(*layer->bn(), *bm, false);
  }
  layer->train(fm->is_training());
  return layer;
}

/// qat_swap_modules after fuse_fx(is_qat=True): fusion patterns and plain
/// conv / linear layers with a qconfig become QAT layers at the first layer's
/// node; the batch norm and relu nodes of a fusion go.
void swap_to_qat(GraphModule& gm, const QConfigMapping& mapping, FuseReport& report) {
  Graph& g = gm.graph();
  std::unordered_set<const Node*> swapped;
  for (const detail::FusionMatch& m : detail::find_fusions(gm)) {
    // Linear + BatchNorm1d + ReLU: Python fuses the linear and batch norm (LinearBn1d) and keeps the ReLU.
    Node* relu = m.type == "Linear" && m.bn ? nullptr : m.relu;
    const std::string type = qat_type(m.type, m.bn != nullptr, relu != nullptr);
    QConfigPtr q = mapping.for_module(m.first->target(), type);
    if (!q) continue;
    auto layer = make_layer(gm, m.first, m.bn, relu != nullptr, m.type, *q);
    if (!layer) continue;
    std::string line = m.first->name() + ": " + m.type;
    if (m.bn) line += " + " + detail::module_type(gm, m.bn);
    if (relu) line += " + ReLU";
    report.fused.push_back(line + " -> " + type);
    gm.add_submodule(m.first->target(), layer);
    Node* last = relu ? relu : m.bn ? m.bn : m.first;
    last->replace_all_uses_with(m.first);
    if (relu) g.erase_node(relu);
    if (m.bn) g.erase_node(m.bn);
    swapped.insert(m.first);
  }
  for (Node* n : g.nodes().to_vector()) {
    if (n->op() != Opcode::CallModule || swapped.count(n)) continue;
    const std::string t = detail::module_type(gm, n);
    if (t != "Conv1d" && t != "Conv2d" && t != "Conv3d" && t != "Linear") continue;
    if (dynamic_cast<QatLayer*>(gm.get_submodule(n->target()).get())) continue;
    QConfigPtr q = mapping.for_module(n->target(), t);
    if (!q || n->args().size() != 1) continue;
    if (auto layer = make_layer(gm, n, nullptr, false, t, *q)) gm.add_submodule(n->target(), layer);
  }
  gm.delete_all_unused_submodules();
  g.lint();
}

/// Runs `fn` with every module of `gm` in eval mode, then restores each one's mode.
template <class F>
void in_eval_mode(GraphModule& gm, F fn) {
  std::vector<std::pair<std::shared_ptr<torch::nn::Module>, bool>> modes;
  for (const auto& m : gm.modules(/*include_self=*/false)) modes.emplace_back(m, m->is_training());
  const bool root = gm.is_training();
  auto restore = [&] {
    gm.train(root);
    for (auto& [m, training] : modes) m->train(training);  // pre-order: a child's own mode wins
  };
  gm.eval();
  try {
    fn();
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

}  // namespace

std::shared_ptr<GraphModule> prepare_qat(const std::shared_ptr<GraphModule>& gm, const QConfigMapping& qconfig_mapping,
                                         const std::vector<c10::IValue>& example_inputs, PrepareReport* report) {
  register_qat_modules();
  register_fused_modules();
  if (!gm) throw Error("prepare_qat: no module");
  if (std::string which; detail::has_observers(*gm, &which))
    throw Error("prepare_qat: the module is already prepared (it has observer '" + which + "')");
  if (const Node* n = detail::quantized_node(*gm))
    throw Error("prepare_qat: the model is already quantized (node '" + n->name() + "' calls " + n->target() + ")");
  if (!gm->is_training())
    throw Error("prepare_qat: the module is in eval mode; call train() first: quantization-aware training prepares a "
                "module for training (prepare() is for post-training quantization)");
  PrepareReport local;
  PrepareReport& r = report ? *report : local;
  r = PrepareReport{};
  auto out = detail::copy_graph_module(gm);
  swap_to_qat(*out, qconfig_mapping, r.fuse);
  // Which values are floating-point tensors: one run in eval mode, which
  // updates no batch-norm statistics (of the copies or of gm's shared layers).
  in_eval_mode(*out, [&] {
    at::NoGradGuard no_grad;
    try {
      ShapeProp(out).propagate(example_inputs);
    } catch (const std::exception& e) {
      throw Error(std::string("prepare_qat: the example inputs do not run the model: ") + e.what());
    }
  });
  detail::insert_observers(out, qconfig_mapping, r);
  return out;
}

}  // namespace fx::quantization
