// lower_to_onednn_int8: the reference quantized graph's dq → conv / linear →
// q patterns made into oneDNN int8 kernels; shape-keeping ops run on quint8.
#include <fx/quantization/lower.h>

#include "quantization/common.h"

#include <fx/error.h>
#include <fx/onednn_int8.h>

#include <ATen/ops/quantize_per_channel.h>
#include <ATen/ops/quantize_per_tensor.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace fx::quantization {
namespace {

using onednn::QuantParams;

/// "conv2d" for "aten::conv2d" / "aten::conv2d.padding"; "" for others.
std::string aten_name(const Node* n) {
  if (n->op() != Opcode::CallFunction || n->target().rfind("aten::", 0) != 0) return "";
  std::string s = n->target().substr(6);
  return s.substr(0, s.find('.'));
}

bool is_dequantize(const Node* n) {
  return (n->op() == Opcode::CallMethod && n->target() == "dequantize" && n->args().size() == 1) ||
         (aten_name(n) == "dequantize" && n->args().size() == 1);
}

class Lowering {
 public:
  Lowering(GraphModule& gm, LowerReport& report) : gm_(gm), g_(gm.graph()), report_(report) {}

  void run() {
    bool any_quantize = false;
    for (Node* n : g_.nodes())
      if (quant_params(n)) any_quantize = true;
    if (!any_quantize)
      throw Error("lower_to_onednn_int8: the graph has no quantize_per_tensor node to quint8: convert() a prepared, "
                  "calibrated module first");
    phase(&Lowering::lower_layer);
    phase(&Lowering::fuse_activation);
    phase(&Lowering::fuse_residual);
    phase(&Lowering::run_on_quint8);
    phase(&Lowering::binary_on_quint8);
    g_.eliminate_dead_code();  // the dequantize nodes the kernels no longer read
    phase(&Lowering::quantize_for_convolutions);
    g_.eliminate_dead_code();
    describe();
  }

  /// A copy of the lowered graph in which each kernel has its layer's node name ("layer1_0_conv1", as
  /// convert() gave the layer's computing node; the names were still taken in this graph).
  std::shared_ptr<Graph> renamed_copy() const {
    auto out = std::make_shared<Graph>();
    std::unordered_map<const Node*, Node*> env;
    if (auto result = out->graph_copy(g_, env)) out->output(*result);
    for (const auto& [node, name] : lowered_name_) env.at(node)->set_name(name);
    return out;
  }

 private:
  /// Runs `step` on every node of the graph as it is now, skipping those an earlier step of this
  /// phase erased (pointers of erased nodes are forgotten between phases: new nodes reuse them).
  void phase(void (Lowering::*step)(Node*)) {
    erased_.clear();
    std::vector<Node*> order(g_.nodes().begin(), g_.nodes().end());
    for (Node* n : order)
      if (!erased_.count(n)) (this->*step)(n);
  }

  // ---- reading the reference graph ----------------------------------------

  /// A scalar of a literal or a get_attr tensor argument.
  std::optional<double> scalar(const Argument& a) const {
    if (a.kind() == Argument::Kind::Double) return a.to_double();
    if (a.kind() == Argument::Kind::Int) return static_cast<double>(a.to_int());
    if (a.is_node() && a.to_node()->op() == Opcode::GetAttr) {
      at::Tensor t = gm_.fetch_attr(a.to_node()->target());
      if (t.numel() == 1) return t.item<double>();
    }
    return std::nullopt;
  }

  /// The qparams of a quantize_per_tensor(x, scale, zero_point, torch.quint8) node.
  std::optional<QuantParams> quant_params(const Node* n) const {
    if (aten_name(n) != "quantize_per_tensor" || n->args().size() != 4 || !n->kwargs().empty()) return std::nullopt;
    const ArgList& a = n->args();
    if (a[3].kind() != Argument::Kind::ScalarType || a[3].to_scalar_type() != at::kQUInt8) return std::nullopt;
    auto s = scalar(a[1]), z = scalar(a[2]);
    if (!s || !z || !(*s > 0) || *z < 0 || *z > 255) return std::nullopt;
    // The scale a quantized tensor carries: a float32 buffer's value, as a double.
    return QuantParams{*s, static_cast<int64_t>(*z)};
  }

  /// For dq(q) with q a quantize to quint8 (or a lowered int8 kernel): q.
  Node* quantized_source(const Argument& a) const {
    if (!a.is_node() || !is_dequantize(a.to_node())) return nullptr;
    Node* q = a.to_node()->args()[0].is_node() ? a.to_node()->args()[0].to_node() : nullptr;
    if (!q || !qparams_of(q)) return nullptr;
    return q;
  }

  /// The qparams of the quint8 value `q` computes (a quantize node, a lowered kernel, an op on quint8).
  std::optional<QuantParams> qparams_of(const Node* q) const {
    auto it = quint8_.find(q);
    if (it != quint8_.end()) return it->second;
    return quant_params(q);
  }

  /// The int8 weight (and its per-channel scales) of dq(quantize_per_channel(w, s, 0, axis 0, qint8)) or of
  /// dq(quantize_per_tensor(w, s, 0, qint8)), w a get_attr.
  bool int8_weight(const Argument& a, at::Tensor& weight, at::Tensor& scales, std::string& why) const {
    if (!a.is_node() || !is_dequantize(a.to_node()) || !a.to_node()->args()[0].is_node()) {
      why = "its weight is not quantized";
      return false;
    }
    const Node* q = a.to_node()->args()[0].to_node();
    const std::string name = aten_name(q);
    const ArgList& qa = q->args();
    if (qa.empty() || !qa[0].is_node() || qa[0].to_node()->op() != Opcode::GetAttr) {
      why = "its weight is not a constant";
      return false;
    }
    at::Tensor w = gm_.fetch_attr(qa[0].to_node()->target());
    if (name == "quantize_per_channel" && qa.size() == 5 && qa[1].is_node() && qa[2].is_node()) {
      at::Tensor s = gm_.fetch_attr(qa[1].to_node()->target()).to(at::kDouble);
      at::Tensor z = gm_.fetch_attr(qa[2].to_node()->target()).to(at::kLong);
      if (qa[3].kind() != Argument::Kind::Int || qa[3].to_int() != 0 ||
          qa[4].kind() != Argument::Kind::ScalarType || qa[4].to_scalar_type() != at::kQInt8) {
        why = "its weight is not quantized per output channel to qint8";
        return false;
      }
      if (z.ne(0).any().item<bool>()) {
        why = "its weight's zero points are not 0 (oneDNN takes symmetric weights)";
        return false;
      }
      weight = at::quantize_per_channel(w, s, z, 0, at::kQInt8).int_repr();
      scales = s.to(at::kFloat);
      return true;
    }
    if (name == "quantize_per_tensor" && qa.size() == 4 && qa[3].kind() == Argument::Kind::ScalarType &&
        qa[3].to_scalar_type() == at::kQInt8) {
      auto s = scalar(qa[1]), z = scalar(qa[2]);
      if (!s || !z || *z != 0) {
        why = "its weight's zero point is not 0 (oneDNN takes symmetric weights)";
        return false;
      }
      weight = at::quantize_per_tensor(w, *s, 0, at::kQInt8).int_repr();
      scales = at::full({w.size(0)}, *s, at::kFloat);
      return true;
    }
    why = "its weight is not quantized to qint8";
    return false;
  }

  /// The fusable activation applied by `u` to its first argument (recorded in `post`).
  bool activation(const Node* u, onednn::PostOps& post) const {
    if (detail::is_relu(gm_, u)) {
      post.activation = onednn::Activation::Relu;
      return true;
    }
    if (u->op() == Opcode::CallModule && u->args().size() == 1 && u->kwargs().empty()) {
      auto attrs = detail::node_module_attributes(gm_, u);
      if (!attrs) return false;
      const std::string& t = attrs->type;
      if (t == "Hardtanh") {
        const auto lo = attrs->attributes.find("min_val"), hi = attrs->attributes.find("max_val");
        if (lo == attrs->attributes.end() || hi == attrs->attributes.end()) return false;
        return onednn::activation_from_aten("hardtanh", {lo->second.toDouble(), hi->second.toDouble()}, "none", post);
      }
      static const std::unordered_map<std::string, std::string> aten = {
          {"ReLU6", "relu6"}, {"SiLU", "silu"}, {"Hardswish", "hardswish"}, {"Sigmoid", "sigmoid"}};
      auto it = aten.find(t);
      return it != aten.end() && onednn::activation_from_aten(it->second, {}, "none", post);
    }
    std::string name = aten_name(u);
    if (name.empty() || u->args().empty()) return false;
    if (name.back() == '_') name.pop_back();
    std::vector<double> scalars;
    for (size_t i = 1; i < u->args().size(); ++i) {
      auto v = scalar(u->args()[i]);
      if (!v || u->args()[i].is_node()) return false;
      scalars.push_back(*v);
    }
    if (name == "hardtanh" || name == "relu6" || name == "relu" || name == "silu" || name == "hardswish" ||
        name == "sigmoid")
      return u->kwargs().empty() && onednn::activation_from_aten(name, scalars, "none", post);
    return false;
  }

  /// The only user of `n`, or nullptr.
  static Node* only_user(const Node* n) { return n->users().size() == 1 ? *n->users().begin() : nullptr; }

  // ---- rewriting ------------------------------------------------------------

  /// Erases the nodes of `chain` nothing reads any more (last first; the others are left to DCE).
  void erase_unused(const std::vector<Node*>& chain) {
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      Node* n = *it;
      if (!n->users().empty()) continue;
      erased_.insert(n);
      quint8_.erase(n);
      states_.erase(n);
      lowered_name_.erase(n);
      g_.erase_node(n);
    }
  }

  /// Replaces the chain `chain` (first … last; last a quantize node) by `lowered`, inserted before the last.
  Node* replace(const std::vector<Node*>& chain, const std::string& target, ArgList args, QuantParams out,
                const std::string& name) {
    Node* last = chain.back();
    Node* lowered = nullptr;
    {
      InsertPoint at = g_.inserting_before(last);
      lowered = g_.call_function(target, std::move(args));
    }
    last->replace_all_uses_with(lowered);
    erase_unused(chain);
    quint8_[lowered] = out;
    lowered_name_[lowered] = name;
    return lowered;
  }

  /// dq(x) → conv2d / linear(·, dq(qw), b) [→ act] → q  ⇒  onednn_qconv2d / onednn_qlinear.
  void lower_layer(Node* n) {
    const std::string name = aten_name(n);
    const bool conv = name == "conv2d";
    if (!conv && name != "linear") return;
    NodeQuantization& entry = entry_for(n, n->name());
    const ArgList& a = n->args();
    Node* src = a.empty() ? nullptr : quantized_source(a[0]);
    if (!src) return keep(entry, "its input is not quantized to quint8");
    if (!n->kwargs().empty()) return keep(entry, "keyword arguments");
    onednn::PackedQState s;
    s.kind = conv ? onednn::PackedState::Kind::Conv2d : onednn::PackedState::Kind::Linear;
    std::string why;
    if (a.size() < 2 || !int8_weight(a[1], s.weight, s.weight_scales, why)) return keep(entry, why);
    if (s.weight.dim() != (conv ? 4 : 2)) return keep(entry, "its weight is not " + std::string(conv ? "4-d" : "2-d"));
    if (a.size() > 2 && !a[2].is_none()) {
      if (!a[2].is_node() || a[2].to_node()->op() != Opcode::GetAttr) return keep(entry, "its bias is not a constant");
      s.bias = gm_.fetch_attr(a[2].to_node()->target()).to(at::kFloat);
    }
    if (conv) {
      // stride, padding, dilation: an int or [v] stands for {v, v}, as ATen's conv2d reads it.
      std::vector<int64_t>* lists[] = {&s.params.stride, &s.params.padding, &s.params.dilation};
      for (size_t i = 3; i < std::min<size_t>(a.size(), 6); ++i) {
        std::optional<std::vector<int64_t>> v = a[i].to_int_list(2);
        if (!v) return keep(entry, "padding / stride / dilation are not integers");
        *lists[i - 3] = std::move(*v);
      }
      if (a.size() > 6) {
        if (a[6].kind() != Argument::Kind::Int) return keep(entry, "groups is not an integer");
        s.params.groups = a[6].to_int();
      }
    } else if (a.size() > 3) {
      return keep(entry, "unexpected arguments");
    }
    std::vector<Node*> chain{n};
    Node* u = only_user(n);
    Node* act = nullptr;
    if (u && !quant_params(u) && activation(u, s.post_ops)) {
      act = u;
      chain.push_back(u);
      u = only_user(u);
    }
    auto out = u ? quant_params(u) : std::nullopt;
    if (!out) return keep(entry, "its output is not quantized to quint8");
    chain.push_back(u);
    s.input = *qparams_of(src);
    s.output = *out;
    c10::IValue packed;
    try {
      packed = onednn::pack_int8(s);
    } catch (const Error& e) {
      return keep(entry, e.what());
    }
    if (act) fused_into(act, n->name(), onednn::activation_name(s.post_ops.activation));
    std::string how = std::string(conv ? "int8 oneDNN convolution" : "int8 oneDNN linear") +
                      (s.post_ops.activation != onednn::Activation::None
                           ? " (" + onednn::activation_name(s.post_ops.activation) + ")"
                           : "");
    Node* lowered = replace(chain, conv ? "fxcpp::onednn_qconv2d" : "fxcpp::onednn_qlinear",
                            {Argument(src), Argument::from_ivalue(packed)}, s.output, n->name());
    states_[lowered] = s;
    entry.quantized = true;
    entry.reason = how;
    report_.int8_kernels++;
    if (onednn::int8_computes_in_float(packed)) report_.float_kernels++;
  }

  /// The lowered kernel (without activation or sum) read only through dq(kernel) = a, or nullptr.
  Node* fusable_kernel(const Argument& a) const {
    Node* k = quantized_source(a);
    if (!k) return nullptr;
    auto it = states_.find(k);
    if (it == states_.end() || it->second.post_ops.activation != onednn::Activation::None || it->second.post_ops.sum)
      return nullptr;
    if (k->users().size() != 1 || a.to_node()->users().size() != 1) return nullptr;
    return k;
  }

  /// dq(kernel) → act → q (an activation observed on its own: SiLU, ReLU6 / hardtanh, hardswish …)
  ///   ⇒  the kernel with the activation as a post-op and the q node's qparams.
  void fuse_activation(Node* n) {
    onednn::PostOps act;
    if (n->args().empty() || !activation(n, act)) return;
    Node* kernel = fusable_kernel(n->args()[0]);
    Node* u = kernel ? only_user(n) : nullptr;
    auto out = u ? quant_params(u) : std::nullopt;
    if (!out) return;
    onednn::PackedQState s = states_.at(kernel);
    s.post_ops.activation = act.activation;
    s.post_ops.alpha = act.alpha;
    s.post_ops.beta = act.beta;
    s.output = *out;
    c10::IValue packed;
    try {
      packed = onednn::pack_int8(s);
    } catch (const Error&) {
      return;
    }
    const bool conv = s.kind == onednn::PackedState::Kind::Conv2d;
    const std::string kernel_name = lowered_name_.at(kernel);
    NodeQuantization& entry = entry_for(n, n->name());
    entry.quantized = true;
    entry.reason = "fused into " + kernel_name + " (" + onednn::activation_name(act.activation) + ")";
    entry_for(kernel, kernel_name).reason += " (" + onednn::activation_name(act.activation) + ")";
    Node* lowered = replace({kernel, only_user(kernel), n, u}, conv ? "fxcpp::onednn_qconv2d" : "fxcpp::onednn_qlinear",
                            {kernel->args()[0], Argument::from_ivalue(packed)}, s.output, kernel_name);
    states_[lowered] = s;
  }

  /// add(dq(conv), dq(r)) [→ relu] → q, conv a lowered convolution without activation whose
  /// only reader is this add  ⇒  the convolution with a residual sum post-op.
  void fuse_residual(Node* n) {
    const std::string name = aten_name(n);
    if (name != "add" && name != "add_") return;
    const ArgList& a = n->args();
    if (a.size() < 2 || a.size() > 3 || !n->kwargs().empty()) return;
    if (a.size() == 3 && !(a[2].kind() == Argument::Kind::Int && a[2].to_int() == 1)) return;
    Node* q0 = quantized_source(a[0]);
    Node* q1 = quantized_source(a[1]);
    if (!q0 || !q1) return;
    // The convolution to fuse: a lowered one without activation, read only through this add.
    Node* conv = nullptr;
    Node* residual = nullptr;
    for (auto [i, r] : {std::pair{size_t{0}, q1}, std::pair{size_t{1}, q0}}) {
      Node* c = fusable_kernel(a[i]);
      if (!c || states_.at(c).kind != onednn::PackedState::Kind::Conv2d || c == r) continue;
      conv = c;
      residual = r;
      break;
    }
    if (!conv) return;
    onednn::PackedQState s = states_.at(conv);
    std::vector<Node*> chain{conv, only_user(conv), n};
    Node* u = only_user(n);
    Node* relu = nullptr;
    if (u && detail::is_relu(gm_, u)) {
      s.post_ops.activation = onednn::Activation::Relu;
      relu = u;
      chain.push_back(u);
      u = only_user(u);
    }
    auto out = u ? quant_params(u) : std::nullopt;
    if (!out) return;
    chain.push_back(u);
    s.post_ops.sum = true;
    s.residual = *qparams_of(residual);
    s.output = *out;
    c10::IValue packed;
    try {
      packed = onednn::pack_int8(s);
    } catch (const Error&) {
      return;
    }
    const ArgList conv_args = conv->args();
    const std::string conv_name = lowered_name_.at(conv);
    if (relu) fused_into(relu, conv_name, "relu");
    Node* lowered = replace(chain, "fxcpp::onednn_qconv2d", {conv_args[0], Argument::from_ivalue(packed), residual},
                            s.output, conv_name);
    states_[lowered] = s;
    NodeQuantization& entry = entry_for(conv, conv_name);
    entry.reason += ", +residual" + std::string(s.post_ops.activation == onednn::Activation::Relu ? ", relu" : "");
    NodeQuantization& add = entry_for(n, n->name());
    add.quantized = true;
    add.reason = "fused into " + conv_name + " (residual sum)";
  }

  /// dq(x) → op → q with x's qparams, op keeping values (max pool, flatten, reshape, relu, …) ⇒ op on quint8.
  void run_on_quint8(Node* n) {
    static const std::unordered_set<std::string> exact = {
        "max_pool2d", "flatten", "reshape", "view", "relu", "relu_", "adaptive_avg_pool2d", "avg_pool2d",
        "cat", "squeeze", "unsqueeze", "permute", "transpose", "contiguous", "hardtanh", "clamp"};
    // Layers whose forward takes a quantized tensor as it is (ATen's quantized kernels).
    static const std::unordered_set<std::string> modules = {"MaxPool2d", "AdaptiveAvgPool2d", "AvgPool2d", "Flatten",
                                                            "ReLU", "ReLU6", "Hardtanh", "Identity", "Dropout"};
    const std::string name = aten_name(n);
    const bool module = n->op() == Opcode::CallModule && modules.count(detail::module_type(gm_, n));
    if (!exact.count(name) && !module) return;
    if (n->args().empty()) return;
    NodeQuantization& entry = entry_for(n, n->name());
    Node* out = only_user(n);
    auto oq = out ? quant_params(out) : std::nullopt;
    if (!oq) return keep(entry, "its output is not quantized");
    ArgList args = n->args();
    std::vector<Node*> chain{n, out};
    if (name == "cat") {
      if (args[0].kind() != Argument::Kind::List) return keep(entry, "its inputs are not a list");
      std::vector<Argument> items;
      for (const auto& item : args[0].items()) {
        Node* q = quantized_source(item);
        if (!q || !(*qparams_of(q) == *oq)) return keep(entry, "its inputs are quantized differently from its output");
        items.emplace_back(q);
      }
      args[0] = Argument::list(std::move(items));
    } else {
      Node* q = quantized_source(args[0]);
      if (!q) return keep(entry, "its input is not quantized");
      if (!(*qparams_of(q) == *oq)) return keep(entry, "its output is quantized differently from its input");
      args[0] = Argument(q);
    }
    if (name == "max_pool2d" && !module) {
      // ATen's quantized max_pool2d reads two values of each list: spell them out.
      // kernel, stride, padding, dilation (defaults: stride = kernel, 0, 1); an int or [v] is {v, v}.
      std::vector<int64_t> ints[4] = {{}, {}, {0, 0}, {1, 1}};
      for (size_t i = 1; i < std::min<size_t>(args.size(), 5); ++i) {
        std::optional<std::vector<int64_t>> v = args[i].to_int_list(2);
        if (!v) return keep(entry, "its pooling parameters are not integers");
        ints[i - 1] = std::move(*v);
      }
      if (args.size() < 2 || !n->kwargs().empty()) return keep(entry, "keyword arguments");
      auto pair = [](const std::vector<int64_t>& v) { return Argument::list({Argument(v[0]), Argument(v[1])}); };
      if (ints[1].empty()) ints[1] = ints[0];
      ArgList full{args[0], pair(ints[0]), pair(ints[1]), pair(ints[2]), pair(ints[3])};
      if (args.size() > 5) full.push_back(args[5]);
      args = std::move(full);
    }
    Node* lowered = nullptr;
    {
      InsertPoint at = g_.inserting_before(out);
      // A name of its own here (renamed_copy gives it n's): one derived from the target may block n's.
      lowered = g_.create_node(n->op(), n->target(), std::move(args), n->kwargs(), "quint8_" + n->name());
    }
    out->replace_all_uses_with(lowered);
    const std::string node_name = n->name();
    erase_unused(chain);
    quint8_[lowered] = *oq;
    lowered_name_[lowered] = node_name;
    entry.quantized = true;
    entry.reason = "runs on quint8";
  }

  /// mul / add(dq(a), dq(b)) [→ relu, for add] → q  ⇒  quantized::mul / add / add_relu (ATen's
  /// quantized kernels: broadcasting, one rounding), e.g. the squeeze-excitation scaling of
  /// EfficientNet and the residual adds not fused into a convolution.
  void binary_on_quint8(Node* n) {
    const std::string name = aten_name(n);
    if (name != "mul" && name != "add" && name != "mul_" && name != "add_") return;
    const ArgList& a = n->args();
    if (a.size() != 2 || !n->kwargs().empty()) return;
    NodeQuantization& entry = entry_for(n, n->name());
    if (entry.quantized) return;  // fused into a convolution already
    Node* qa = quantized_source(a[0]);
    Node* qb = quantized_source(a[1]);
    if (!qa || !qb) return keep(entry, "its inputs are not quantized");
    std::vector<Node*> chain{n};
    Node* u = only_user(n);
    bool relu = false;
    if (name.front() == 'a' && u && detail::is_relu(gm_, u)) {
      relu = true;
      chain.push_back(u);
      u = only_user(u);
    }
    auto out = u ? quant_params(u) : std::nullopt;
    if (!out) return keep(entry, "its output is not quantized");
    chain.push_back(u);
    const std::string target = name.front() == 'm' ? "quantized::mul" : relu ? "quantized::add_relu" : "quantized::add";
    Node* lowered = replace(chain, target, {qa, qb, out->scale, out->zero_point}, *out, n->name());
    (void)lowered;
    entry.quantized = true;
    entry.reason = std::string("runs on quint8 (") + target + ")";
  }

  /// quantize_per_tensor(x, s, z, quint8) read only by int8 convolutions  ⇒  fxcpp::onednn_quantize(x, s, z):
  /// quantized straight into channels_last by one oneDNN reorder (what the convolutions read).
  void quantize_for_convolutions(Node* n) {
    auto qp = quant_params(n);
    if (!qp || n->users().empty()) return;
    for (const Node* u : n->users())
      if (u->target() != "fxcpp::onednn_qconv2d") return;
    Node* lowered = nullptr;
    {
      InsertPoint at = g_.inserting_before(n);
      lowered = g_.create_node(Opcode::CallFunction, "fxcpp::onednn_quantize",
                               {n->args()[0], qp->scale, qp->zero_point}, {}, "quint8_" + n->name());
    }
    const std::string name = n->name();
    n->replace_all_uses_with(lowered);
    erase_unused({n});
    quint8_[lowered] = *qp;
    lowered_name_[lowered] = name;
  }

  // ---- the report -------------------------------------------------------------

  NodeQuantization& entry_for(const Node* n, const std::string& name) {
    auto it = entries_.find(name);
    if (it != entries_.end()) return it->second;
    order_.push_back(name);
    NodeQuantization& e = entries_[name];
    e.node = name;
    e.target = n->target();
    e.reason = "float";
    return e;
  }

  /// Reports `n` (an activation, not erased yet) as fused into the kernel named `kernel`.
  void fused_into(const Node* n, const std::string& kernel, const std::string& what) {
    NodeQuantization& e = entry_for(n, n->name());
    e.quantized = true;
    e.reason = "fused into " + kernel + " (" + what + ")";
  }

  void keep(NodeQuantization& entry, const std::string& why) {
    entry.quantized = false;
    entry.reason = "kept float: " + why;
  }

  void describe() {
    for (const std::string& name : order_) report_.nodes.push_back(entries_.at(name));
  }

  GraphModule& gm_;
  Graph& g_;
  LowerReport& report_;
  std::unordered_set<const Node*> erased_;
  std::unordered_map<const Node*, QuantParams> quint8_;
  std::unordered_map<const Node*, onednn::PackedQState> states_;
  std::unordered_map<const Node*, std::string> lowered_name_;
  std::unordered_map<std::string, NodeQuantization> entries_;
  std::vector<std::string> order_;
};

}  // namespace

std::string LowerReport::str() const { return format_report(nodes); }

std::shared_ptr<GraphModule> lower_to_onednn_int8(const std::shared_ptr<GraphModule>& reference,
                                                  LowerReport* report) {
  if (!reference) throw Error("lower_to_onednn_int8: no module");
  std::string training;
  if (detail::any_training(*reference, &training))
    throw Error("lower_to_onednn_int8: module '" + training + "' is in training mode; call eval() first");
  onednn::register_ops();
  auto work = detail::copy_graph_module(reference);
  LowerReport local;
  Lowering lowering(*work, report ? *report : local);
  lowering.run();
  // A module of its own holding only what the lowered graph reads (not the float weights).
  return std::make_shared<GraphModule>(work, lowering.renamed_copy(), reference->class_name());
}

}  // namespace fx::quantization
