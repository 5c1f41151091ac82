// summarize_model: parameters, MACs and FLOPs per node (see fx/passes/model_summary.h).
#include <fx/passes/graph_drawer.h>
#include <fx/passes/model_summary.h>

#include <cstdio>
#include <numeric>
#include <set>
#include <unordered_set>

namespace fx {

namespace {

int64_t numel(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

// The first tensor's shape of the node an argument names (empty if none).
std::vector<int64_t> arg_shape(const Node& n, size_t i) {
  if (i >= n.args().size() || !n.args()[i].is_node()) return {};
  auto metas = node_tensor_meta(*n.args()[i].to_node());
  return metas.empty() ? std::vector<int64_t>{} : metas.front().shape;
}

// "aten::add_.Tensor" → "add"; "operator.add" → "add".
std::string base_op(const std::string& target) {
  std::string s;
  const size_t ns = target.find("::");
  if (ns != std::string::npos) {
    s = target.substr(ns + 2);
    s = s.substr(0, s.find('.'));
  } else {
    const size_t dot = target.rfind('.');
    s = dot == std::string::npos ? target : target.substr(dot + 1);
  }
  if (!s.empty() && s.back() == '_') s.pop_back();
  return s;
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

const std::set<std::string>& elementwise_ops() {
  static const std::set<std::string> ops = {
      "add",   "sub",   "mul",      "div",      "relu",      "relu6",  "sigmoid", "tanh", "hardtanh",
      "hardswish", "hardsigmoid", "silu", "gelu", "clamp", "neg",  "exp",     "log",      "sqrt",
      "rsqrt", "pow",   "leaky_relu", "elu", "softmax", "log_softmax", "dropout", "max_pool2d",
      "avg_pool2d", "adaptive_avg_pool2d", "mean"};
  return ops;
}

// MACs and FLOPs of a convolution with output `out` (input `in`) and weight `w`.
void count_conv(NodeSummary& s, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                const std::vector<int64_t>& w, bool transposed) {
  if (w.empty() || w[0] == 0) return;
  const int64_t per_output = numel(w) / w[0];  // C_in/groups x kernel (C_out/groups x kernel if transposed)
  s.macs = transposed ? (in.empty() ? 0 : numel(in) * per_output) : numel(out) * per_output;
}

void count_module(const GraphModule& gm, const Node& n, NodeSummary& s, const std::vector<int64_t>& out) {
  std::shared_ptr<torch::nn::Module> m;
  try {
    m = gm.get_submodule(n.target());
  } catch (const std::exception&) {
    return;
  }
  for (const auto& p : m->parameters()) s.params += p.numel();
  const std::string& t = s.type;
  const auto own = m->named_parameters(false);  // find() points into it: keep it alive
  const at::Tensor* weight = own.find("weight");
  const std::vector<int64_t> w = weight ? weight->sizes().vec() : std::vector<int64_t>{};
  if (contains(t, "Conv") && w.size() >= 3) {
    count_conv(s, arg_shape(n, 0), out, w, contains(t, "Transpose"));
  } else if (contains(t, "Linear") && w.size() == 2) {
    s.macs = numel(out) * w[1];
  } else if (contains(t, "BatchNorm") || contains(t, "LayerNorm") || contains(t, "GroupNorm")) {
    s.flops = 2 * numel(out);
  } else if (contains(t, "ReLU") || contains(t, "Pool") || contains(t, "Sigmoid") || contains(t, "Hardswish") ||
             contains(t, "SiLU") || contains(t, "GELU") || contains(t, "Hardtanh") || contains(t, "Hardsigmoid")) {
    s.flops = numel(out);
  }
}

void count_function(const Node& n, NodeSummary& s, const std::vector<int64_t>& out) {
  const std::string op = base_op(n.target());
  if (op == "conv1d" || op == "conv2d" || op == "conv3d" || op == "convolution" || op == "_convolution") {
    bool transposed = false;
    if ((op == "convolution" || op == "_convolution") && n.args().size() > 6 &&
        n.args()[6].kind() == Argument::Kind::Bool)
      transposed = n.args()[6].to_bool();
    count_conv(s, arg_shape(n, 0), out, arg_shape(n, 1), transposed);
  } else if (op == "conv_transpose1d" || op == "conv_transpose2d" || op == "conv_transpose3d") {
    count_conv(s, arg_shape(n, 0), out, arg_shape(n, 1), true);
  } else if (op == "linear") {
    auto w = arg_shape(n, 1);
    if (w.size() == 2) s.macs = numel(out) * w[1];
  } else if (op == "addmm" || op == "baddbmm") {
    auto a = arg_shape(n, 1);
    if (!a.empty()) s.macs = numel(out) * a.back();
  } else if (op == "mm" || op == "bmm" || op == "matmul") {
    auto a = arg_shape(n, 0);
    if (!a.empty()) s.macs = numel(out) * a.back();
  } else if (op == "batch_norm" || op == "layer_norm" || op == "group_norm") {
    s.flops = 2 * numel(out);
  } else if (elementwise_ops().count(op)) {
    s.flops = numel(out);
  }
}

}  // namespace

ModelSummary summarize_model(const GraphModule& module) {
  ModelSummary summary;
  std::unordered_set<const c10::TensorImpl*> seen;
  std::unordered_set<std::string> param_names;
  for (const auto& p : module.named_parameters()) {
    param_names.insert(p.key());
    if (!seen.insert(p.value().unsafeGetTensorImpl()).second) continue;
    summary.total_params += p.value().numel();
    if (p.value().requires_grad()) summary.trainable_params += p.value().numel();
    summary.param_bytes += p.value().numel() * static_cast<int64_t>(p.value().element_size());
  }
  for (const auto& b : module.named_buffers())
    if (seen.insert(b.value().unsafeGetTensorImpl()).second)
      summary.param_bytes += b.value().numel() * static_cast<int64_t>(b.value().element_size());

  for (Node* n : module.graph().nodes()) {
    NodeSummary s;
    s.node = n;
    s.type = n->op() == Opcode::CallModule ? module_type_name(module, *n) : n->target();
    for (const TensorMetadata& m : node_tensor_meta(*n)) s.output_shapes.push_back(m.shape);
    if (s.output_shapes.empty() && n->op() != Opcode::Output) ++summary.nodes_without_shapes;
    const std::vector<int64_t> out = s.output_shapes.empty() ? std::vector<int64_t>{} : s.output_shapes.front();
    if (n->op() == Opcode::CallModule) {
      count_module(module, *n, s, out);
    } else if (n->op() == Opcode::GetAttr) {
      if (param_names.count(n->target()) && !out.empty()) s.params = numel(out);
    } else if ((n->op() == Opcode::CallFunction || n->op() == Opcode::CallMethod) && !out.empty()) {
      count_function(*n, s, out);
    }
    if (out.empty()) s.macs = 0;
    s.flops += 2 * s.macs;
    summary.total_macs += s.macs;
    summary.total_flops += s.flops;
    summary.nodes.push_back(std::move(s));
  }
  return summary;
}

std::string format_count(int64_t n) {
  const char* suffix[] = {"", " K", " M", " G", " T"};
  double v = static_cast<double>(n);
  int i = 0;
  while (std::abs(v) >= 1000 && i < 4) {
    v /= 1000;
    ++i;
  }
  char buf[32];
  if (i == 0) std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
  else std::snprintf(buf, sizeof buf, "%.2f%s", v, suffix[i]);
  return buf;
}

}  // namespace fx
