// Internal helpers shared by fuse, prepare and convert.
#include "quantization/common.h"

#include "passes/graph_copy.h"

#include <fx/error.h>
#include <fx/quantization/observers.h>

#include <unordered_set>

namespace fx::quantization::detail {

std::optional<ModuleAttributes> node_module_attributes(const GraphModule& gm, const Node* n) {
  if (n->op() != Opcode::CallModule) return std::nullopt;
  std::shared_ptr<torch::nn::Module> m;
  try {
    m = gm.get_submodule(n->target());
  } catch (const Error&) {
    return std::nullopt;
  }
  return module_attributes(*m);
}

std::string module_type(const GraphModule& gm, const Node* n) {
  auto a = node_module_attributes(gm, n);
  return a ? a->type : "";
}

bool is_relu(const GraphModule& gm, const Node* n) {
  if (n->args().size() != 1) return false;
  if (n->op() == Opcode::CallFunction) return n->target() == "aten::relu" || n->target() == "aten::relu_";
  return n->op() == Opcode::CallModule && module_type(gm, n) == "ReLU";
}

at::Tensor module_tensor(const torch::nn::Module& m, const std::string& name) {
  if (const at::Tensor* p = m.named_parameters(false).find(name)) return *p;
  if (const at::Tensor* b = m.named_buffers(false).find(name)) return *b;
  return at::Tensor();
}

std::shared_ptr<GraphModule> copy_graph_module(const std::shared_ptr<GraphModule>& gm) {
  return std::make_shared<GraphModule>(gm, passes_detail::copy_graph(gm->graph()), gm->class_name());
}

bool any_training(const GraphModule& gm, std::string* which) {
  for (const Node* n : gm.graph().nodes()) {
    if (n->op() != Opcode::CallModule) continue;
    auto m = gm.get_submodule(n->target());
    if (m->is_training() && !as_observer(*m)) {
      if (which) *which = n->target();
      return true;
    }
  }
  return false;
}

namespace {

bool single_user(const Node* n) { return n->users().size() == 1; }

}  // namespace

std::vector<FusionMatch> find_fusions(const GraphModule& gm) {
  std::vector<Node*> nodes = gm.graph().nodes().to_vector();
  std::unordered_set<Node*> taken;
  std::vector<FusionMatch> matches;
  auto first_of = [&](Node* n) -> std::string {
    const std::string t = module_type(gm, n);
    return (t == "Conv1d" || t == "Conv2d" || t == "Conv3d" || t == "Linear") ? t : "";
  };
  auto is_bn_for = [&](Node* n, const std::string& first_type) {
    const std::string t = module_type(gm, n);
    if (first_type == "Linear") return t == "BatchNorm1d";
    return t == "BatchNorm" + first_type.substr(4);
  };
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = *it;
    if (taken.count(n)) continue;
    FusionMatch m;
    Node* tail = n;
    if (is_relu(gm, n) && n->args()[0].is_node()) {
      m.relu = n;
      tail = n->args()[0].to_node();
      if (!single_user(tail) || taken.count(tail)) continue;
    }
    // tail is the bn or the layer.
    if (tail->op() == Opcode::CallModule && tail->args().size() == 1 && tail->args()[0].is_node()) {
      Node* prev = tail->args()[0].to_node();
      const std::string pt = first_of(prev);
      if (!pt.empty() && is_bn_for(tail, pt) && single_user(prev) && !taken.count(prev) && prev->args().size() == 1) {
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
  return {matches.rbegin(), matches.rend()};
}

BnState bn_state(const torch::nn::Module& bn) {
  auto a = module_attributes(bn);
  BnState s{module_tensor(bn, "running_mean"), module_tensor(bn, "running_var"), module_tensor(bn, "weight"),
            module_tensor(bn, "bias"), a ? a->at("eps").toDouble() : 1e-5};
  if (!s.mean.defined() || !s.var.defined()) throw Error("fuse: batch norm without running statistics");
  if (!s.weight.defined()) s.weight = at::ones_like(s.mean);
  if (!s.bias.defined()) s.bias = at::zeros_like(s.mean);
  return s;
}

std::pair<at::Tensor, at::Tensor> fuse_conv_bn_weights(const at::Tensor& w, const at::Tensor& b_in, const BnState& s) {
  at::NoGradGuard no_grad;
  at::Tensor b = b_in.defined() ? b_in : at::zeros_like(s.mean);
  at::Tensor var_rsqrt = at::rsqrt(s.var + s.eps);
  std::vector<int64_t> shape(w.dim(), 1);
  shape[0] = -1;
  at::Tensor fw = (w * (s.weight * var_rsqrt).reshape(shape)).to(w.scalar_type()).detach();
  at::Tensor fb = ((b - s.mean) * var_rsqrt * s.weight + s.bias).to(b.scalar_type()).detach();
  return {fw, fb};
}

std::pair<at::Tensor, at::Tensor> fuse_linear_bn_weights(const at::Tensor& w, const at::Tensor& b_in, const BnState& s) {
  at::NoGradGuard no_grad;
  at::Tensor b = b_in.defined() ? b_in : at::zeros_like(s.mean);
  at::Tensor bn_scale = s.weight * at::rsqrt(s.var + s.eps);
  return {(w * bn_scale.unsqueeze(-1)).detach(), ((b - s.mean) * bn_scale + s.bias).detach()};
}

const Node* quantized_node(const GraphModule& gm) {
  for (const Node* n : gm.graph().nodes()) {
    if (n->op() != Opcode::CallFunction) continue;
    const std::string& t = n->target();
    if (t.rfind("aten::quantize_per_", 0) == 0 || t.rfind("fxcpp::onednn_q", 0) == 0 || t.rfind("quantized::", 0) == 0)
      return n;
  }
  return nullptr;
}

bool has_observers(const GraphModule& gm, std::string* which) {
  for (const Node* n : gm.graph().nodes())
    if (n->op() == Opcode::CallModule && as_observer(*gm.get_submodule(n->target()))) {
      if (which) *which = n->target();
      return true;
    }
  return false;
}

}  // namespace fx::quantization::detail
