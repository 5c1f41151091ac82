// freeze_attention: nn.MultiheadAttention (self-attention, batch_first) →
// the ATen ops of torch.nn.functional.multi_head_attention_forward's math.
#include "optimize/freeze_attention.h"
#include "optimize/layer_folding.h"

#include <fx/graph.h>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cmath>

namespace fx::passes_detail {
namespace {

bool is_none_or(const Node* n, size_t i, const char* kw, const std::function<bool(const Argument&)>& ok) {
  if (i < n->args().size()) return ok(n->args()[i]);
  for (const auto& [k, v] : n->kwargs())
    if (k == kw) return ok(v);
  return true;  // the default
}

bool is_none(const Argument& a) { return a.is_none(); }

at::Tensor parameter(const torch::nn::Module& m, const std::string& name) {
  const auto* p = m.named_parameters(true).find(name);
  return p ? *p : at::Tensor();
}

}  // namespace

bool freeze_attention(GraphModule& gm, Node* n, const torch::nn::Module& module, const ModuleAttributes& a) {
  auto flag = [&](const char* name, bool want) {
    auto it = a.attributes.find(name);
    return it != a.attributes.end() && it->second.isBool() && it->second.toBool() == want;
  };
  if (!flag("batch_first", true) || !flag("_qkv_same_embed_dim", true) || !flag("add_zero_attn", false)) return false;
  for (const char* none : {"bias_k", "bias_v"}) {
    auto it = a.attributes.find(none);
    if (it != a.attributes.end() && !it->second.isNone()) return false;
  }
  if (parameter(module, "bias_k").defined() || parameter(module, "bias_v").defined()) return false;
  const ArgList& args = n->args();
  if (args.size() < 3 || !args[0].is_node() || !args[1].is_node() || !args[2].is_node()) return false;
  Node* x = args[0].to_node();
  if (args[1].to_node() != x || args[2].to_node() != x) return false;
  if (!is_none_or(n, 3, "key_padding_mask", is_none) || !is_none_or(n, 5, "attn_mask", is_none)) return false;
  for (const auto& [k, v] : n->kwargs())
    if (k != "key_padding_mask" && k != "attn_mask" && k != "need_weights" && k != "average_attn_weights") return false;
  for (Node* u : n->users())
    if (u->op() != Opcode::CallFunction || u->target() != "operator.getitem" || u->args().size() != 2 ||
        u->args()[1].kind() != Argument::Kind::Int || u->args()[1].to_int() != 0)
      return false;
  const auto embed = a.attributes.find("embed_dim"), heads = a.attributes.find("num_heads");
  if (embed == a.attributes.end() || heads == a.attributes.end() || !embed->second.isInt() || !heads->second.isInt())
    return false;
  const int64_t e = embed->second.toInt(), h = heads->second.toInt();
  if (h <= 0 || e % h != 0) return false;
  const int64_t d = e / h;
  at::Tensor w_in = parameter(module, "in_proj_weight"), b_in = parameter(module, "in_proj_bias");
  at::Tensor w_out = parameter(module, "out_proj.weight"), b_out = parameter(module, "out_proj.bias");
  if (!w_in.defined() || !w_out.defined() || w_in.dim() != 2 || w_in.size(0) != 3 * e) return false;

  // 1/sqrt(head_dim) folded into the query rows of the input projection.
  at::NoGradGuard no_grad;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  at::Tensor w = w_in.detach().clone();
  w.narrow(0, 0, e).mul_(scale);
  const std::string base = "_folded." + n->name() + ".";
  gm.register_attr(base + "in_proj_weight", w);
  if (b_in.defined()) {
    at::Tensor b = b_in.detach().clone();
    b.narrow(0, 0, e).mul_(scale);
    gm.register_attr(base + "in_proj_bias", b);
  }
  gm.register_attr(base + "out_proj_weight", w_out.detach());
  if (b_out.defined()) gm.register_attr(base + "out_proj_bias", b_out.detach());

  Graph& g = n->graph();
  Node* out = nullptr;
  {
    InsertPoint at = g.inserting_before(n);
    auto attr = [&](const std::string& name, bool present) -> Argument {
      return present ? Argument(g.get_attr(base + name)) : Argument();
    };
    Node* qkv = g.call_function("aten::linear", {x, attr("in_proj_weight", true), attr("in_proj_bias", b_in.defined())});
    qkv = g.call_function("aten::unflatten", {qkv, -1, passes_detail::int_list_argument({3, h, d})});
    qkv = g.call_function("aten::permute", {qkv, passes_detail::int_list_argument({2, 0, 3, 1, 4})});  // [3, batch, heads, tokens, head_dim]
    Node* q = g.call_function("aten::select", {qkv, 0, 0});
    Node* k = g.call_function("aten::select", {qkv, 0, 1});
    Node* v = g.call_function("aten::select", {qkv, 0, 2});
    Node* scores = g.call_function("aten::matmul", {q, g.call_function("aten::transpose", {k, -2, -1})});
    Node* probs = g.call_function("aten::softmax", {scores, -1});
    Node* ctx = g.call_function("aten::matmul", {probs, v});
    ctx = g.call_function("aten::flatten", {g.call_function("aten::transpose", {ctx, 1, 2}), 2});
    out = g.call_function("aten::linear",
                          {ctx, attr("out_proj_weight", true), attr("out_proj_bias", b_out.defined())});
  }
  for (Node* u : n->users().to_vector()) {
    u->replace_all_uses_with(out);
    g.erase_node(u);
  }
  g.erase_node(n);
  return true;
}

}  // namespace fx::passes_detail
