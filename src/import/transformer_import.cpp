// torch.nn's transformer layers written out as graph nodes (issue 68).
//
// TransformerEncoderLayer.forward (1.13) first checks whether it may take its
// fast path (torch._transformer_encoder_layer_fwd, one fused operator: eval
// mode, no grad, batch_first, CPU or CUDA tensors ...), and
// MultiheadAttention.forward likewise (torch._native_multi_head_attention).
// Imported as scripted code these checks are run-time conditionals around a
// fused operator, which an optimiser cannot see into; kept as leaves, the
// layers are opaque. So the importer writes out what they compute on the
// slow path (what eager runs in training, and in eval mode whenever a check
// fails), from the scripted module's attributes and methods:
//
//  - TransformerEncoder: its layers in turn, then its norm;
//  - TransformerEncoderLayer: x + _sa_block(norm1(x)), x + _ff_block(norm2(x))
//    (norm_first) or norm1(x + _sa_block(x)), norm2(x + _ff_block(x)); the
//    blocks are the module's own scripted methods, imported as usual (linear1 /
//    linear2 / norm / dropout calls of their leaves, the activation whatever it
//    is); TransformerDecoder(Layer) has no fast path and is imported from its
//    own scripted forward;
//  - MultiheadAttention, called by one of these layers (or as the root
//    module): in_proj as aten::linear on in_proj_weight / in_proj_bias (one
//    linear when query, key and value are the same tensor), the heads split
//    (unflatten, permute / transpose), q scaled by 1/sqrt(head_dim),
//    matmul(q, kᵀ), the attention mask added (bool masks as masked_fill -inf),
//    the key padding mask likewise, softmax, dropout (when the module trains),
//    matmul with v, out_proj as aten::linear; batch_first both ways, unbatched
//    inputs when the rank is known.
//
// Parameters stay where the module has them (get_attr of
// "layers.0.self_attn.in_proj_weight"), so state dicts and training line up.
// A MultiheadAttention this file does not write out (bias_k / bias_v,
// add_zero_attn, kdim / vdim, a mask whose dtype is not known at import,
// need_weights not known at import) is imported as before: a leaf call, or
// its forward inlined when it is not a leaf. Traced files have no attributes
// to read: their layers' traced forwards are inlined, attention included;
// traced under torch.no_grad they hold the fused operators themselves, whose
// arguments say what they compute (expand_fused_transformer).
#include "import/importer.h"

#include "torchscript/leaf_module.h"

#include <torch/csrc/jit/api/function_impl.h>

#include <cmath>
#include <limits>

namespace fx::import_detail {

namespace jit = torch::jit;

namespace {

constexpr const char* kTransformerPrefix = "__torch__.torch.nn.modules.transformer.";
constexpr const char* kAttentionType = "__torch__.torch.nn.modules.activation.MultiheadAttention";

bool is_class(const std::string& type_name, const char* prefix, const char* name) {
  return type_name == std::string(prefix) + name;
}

}  // namespace

bool is_transformer_layer_type(const std::string& type_name) {
  return is_class(type_name, kTransformerPrefix, "TransformerEncoderLayer") ||
         is_class(type_name, kTransformerPrefix, "TransformerDecoderLayer");
}

bool is_opened_transformer_type(const std::string& type_name) {
  return is_transformer_layer_type(type_name) || is_class(type_name, kTransformerPrefix, "TransformerEncoder") ||
         is_class(type_name, kTransformerPrefix, "TransformerDecoder");
}

bool is_attention_type(const std::string& type_name) { return type_name == kAttentionType; }

std::shared_ptr<const ModuleRef> Importer::child_module(const std::shared_ptr<const ModuleRef>& m,
                                                        const std::string& name) {
  if (!m->module.hasattr(name)) return nullptr;
  c10::IValue attr = m->module.attr(name);
  if (!attr.isObject() || !attr.toObjectRef().type()->is_module()) return nullptr;
  jit::Module child(attr.toObject());
  return std::make_shared<ModuleRef>(
      ModuleRef{child, m->path.empty() ? name : m->path + "." + name, demangled_type_name(child)});
}

Val Importer::module_tensor(const std::shared_ptr<const ModuleRef>& m, const std::string& name, const jit::Node* n,
                            Frame& f) {
  c10::IValue attr = m->module.attr(name);
  if (!attr.isTensor() || !attr.toTensor().defined()) return Val::of_constant(c10::IValue());
  Node* node = graph_->get_attr(m->path.empty() ? name : m->path + "." + name);
  if (options_.record_stack_traces) node->set_stack_trace(stack_trace_entry(n, f.function_name));
  return Val::of_node(node);
}

Val Importer::call_module_method(const std::shared_ptr<const ModuleRef>& m, const std::string& name,
                                 std::vector<Val> args, const jit::Node* n, Frame& f) {
  if (is_forward_method(name)) {
    if (auto opened = open_transformer(m, args, n, f)) return opened->at(0);
    if (is_leaf(*m)) {
      ArgList a;
      for (const Val& v : args) a.push_back(to_argument(v, n, f));
      Node* node = graph_->call_module(m->path, local(a));
      if (options_.record_stack_traces) node->set_stack_trace(stack_trace_entry(n, f.function_name));
      return Val::of_node(node);
    }
  }
  jit::Function* fn = m->module.type()->findMethod(name);
  if (!fn) fail(n, f, "module " + m->path + " (" + short_type_name(m->type_name) + ") has no method '" + name + "'");
  const auto& formals = fn->getSchema().arguments();
  // Arguments left out take their defaults (a newer torch's is_causal=False).
  for (size_t i = args.size() + 1; i < formals.size(); ++i) {
    if (!formals[i].default_value())
      fail(n, f, "module " + m->path + " (" + short_type_name(m->type_name) + "): " + name + " takes argument '" +
                     formals[i].name() + "' that the importer does not know");
    args.push_back(Val::of_constant(*formals[i].default_value()));
  }
  std::vector<Val> inputs;
  Val self;
  self.kind = Val::Kind::Module;
  self.module = m;
  inputs.push_back(self);
  for (Val& v : args) inputs.push_back(std::move(v));
  std::vector<Val> outs =
      call_graph(*jit::toGraphFunction(*fn).graph(), std::move(inputs), name, m, &f, n, m->type_name + "." + name);
  return outs.at(0);
}

Val Importer::settle_input(const Val& v, const std::string& what, const jit::Node* n, Frame& f) {
  if (v.kind != Val::Kind::Symbolic || !v.symbolic.is_node()) return v;
  const c10::TypePtr& type = v.type;
  if (!type) return v;
  const bool optional = type->kind() == c10::TypeKind::OptionalType;
  const bool flag = type->kind() == c10::TypeKind::BoolType;
  if (!optional && !flag) return v;
  std::optional<c10::IValue> meta = meta_value(v.symbolic.to_node());
  if (!meta) return v;
  if (optional && meta->isNone()) {
    // Known to be None (the example, or the default of an input not given):
    // written out without it, checked when the graph runs.
    Node* is_none = emit("aten::__is__", {v.symbolic, Argument()}, {}, n, f);
    emit("torch._assert", {Argument(is_none), Argument(what + " was None when the model was imported")}, {}, n, f);
    folded_with_example_ = true;
    return Val::of_constant(c10::IValue());
  }
  if (flag && meta->isBool()) {
    const bool b = meta->toBool();
    Node* same = emit("operator.eq", {v.symbolic, Argument(b)}, {}, n, f);
    emit("torch._assert",
         {Argument(same), Argument(what + " was " + (b ? "True" : "False") + " when the model was imported")}, {}, n, f);
    folded_with_example_ = true;
    return Val::of_constant(b);
  }
  return v;
}

std::optional<Importer::MaskInfo> Importer::mask_info(const Val& v, const std::string& what,
                                                      const std::shared_ptr<const ModuleRef>& m, const jit::Node* n,
                                                      Frame& f) {
  MaskInfo info;
  if (v.kind == Val::Kind::Constant && v.constant.isNone()) return info;
  if (v.kind != Val::Kind::Symbolic || !v.symbolic.is_node()) return std::nullopt;
  std::optional<c10::IValue> meta = meta_value(v.symbolic.to_node());
  if (!meta || !meta->isTensor() || !meta->toTensor().defined()) return std::nullopt;
  const at::Tensor& t = meta->toTensor();
  info.node = v.symbolic.to_node();
  info.dtype = t.scalar_type();
  info.rank = t.dim();
  folded_with_example_ = true;
  const bool ok = info.dtype == at::kBool || at::isFloatingType(info.dtype) ||
                  (what == "attn_mask" && info.dtype == at::kByte);
  if (!ok)
    fail(n, f, "module " + m->path + " (" + short_type_name(m->type_name) + "): " + what + " of dtype " +
                   std::string(c10::toString(info.dtype)) + " is not supported (bool or floating masks, as in eager)");
  return info;
}

std::optional<std::vector<Val>> Importer::open_transformer(const std::shared_ptr<const ModuleRef>& m,
                                                           const std::vector<Val>& args, const jit::Node* n,
                                                           Frame& f) {
  const std::string& type = m->type_name;
  if (is_attention_type(type)) {
    // Written out when a transformer layer calls it, or when it is the root;
    // elsewhere it follows the leaf rule (torch.fx's: a leaf).
    const bool in_layer = f.self && is_transformer_layer_type(f.self->type_name);
    if (!in_layer && !m->path.empty()) return std::nullopt;
    if (!m->module.hasattr("num_heads")) return std::nullopt;  // traced: its forward is inlined
    std::optional<Val> out = open_attention(m, args, n, f);
    if (!out) return std::nullopt;
    return std::vector<Val>{*out};
  }
  if (!is_opened_transformer_type(type) || is_leaf(*m)) return std::nullopt;
  auto ctx = [&] { return "module " + (m->path.empty() ? std::string("(root)") : m->path) + " (" + short_type_name(type) + ")"; };
  if (is_class(type, kTransformerPrefix, "TransformerEncoderLayer")) {
    if (!m->module.hasattr("norm_first")) return std::nullopt;  // traced: its forward is inlined
    if (!m->module.type()->findMethod("_sa_block") || !m->module.type()->findMethod("_ff_block"))
      fail(n, f, ctx() + ": the scripted layer has no _sa_block / _ff_block methods to import it by");
    if (args.size() < 1 || args.size() > 4) fail(n, f, ctx() + ": forward takes src, src_mask, src_key_padding_mask");
    Val src = args[0];
    Val mask = args.size() > 1 ? settle_input(args[1], "src_mask", n, f) : Val::of_constant(c10::IValue());
    Val kpm = args.size() > 2 ? settle_input(args[2], "src_key_padding_mask", n, f) : Val::of_constant(c10::IValue());
    mask_info(kpm, "src_key_padding_mask", m, n, f);  // eager's dtype check, when the dtype is known
    for (size_t i = 3; i < args.size(); ++i)  // a newer torch's is_causal: a hint only
      if (args[i].kind != Val::Kind::Constant) fail(n, f, ctx() + ": is_causal must be known at import");
    auto sub = [&](const char* name) {
      auto c = child_module(m, name);
      if (!c) fail(n, f, ctx() + ": no submodule " + name);
      return c;
    };
    const std::string add = options_.overload_names ? "aten::add.Tensor" : "aten::add";
    auto plus = [&](const Val& a, const Val& b) {
      return Val::of_node(emit(add, {to_argument(a, n, f), to_argument(b, n, f)}, {}, n, f));
    };
    // The layer keeps its input's rank: known once for a stack of layers
    // (computing it on meta tensors would run every leaf before).
    std::optional<int64_t> rank;
    if (src.kind == Val::Kind::Symbolic && src.symbolic.is_node()) rank = rank_of(src.symbolic.to_node());
    Val x = src;
    auto hint = [&](const Val& v) {  // a layer norm keeps the rank
      if (rank && v.kind == Val::Kind::Symbolic && v.symbolic.is_node()) rank_hints_[v.symbolic.to_node()] = *rank;
    };
    if (m->module.attr("norm_first").toBool()) {
      Val h = call_module_method(sub("norm1"), "forward", {x}, n, f);
      hint(h);
      x = plus(x, call_module_method(m, "_sa_block", {h, mask, kpm}, n, f));
      h = call_module_method(sub("norm2"), "forward", {x}, n, f);
      x = plus(x, call_module_method(m, "_ff_block", {h}, n, f));
    } else {
      x = call_module_method(sub("norm1"), "forward", {plus(x, call_module_method(m, "_sa_block", {x, mask, kpm}, n, f))},
                             n, f);
      x = call_module_method(sub("norm2"), "forward", {plus(x, call_module_method(m, "_ff_block", {x}, n, f))}, n, f);
    }
    hint(x);
    return std::vector<Val>{x};
  }
  if (is_class(type, kTransformerPrefix, "TransformerEncoder")) {
    auto layers = child_module(m, "layers");
    // Scripted: enable_nested_tensor is an attribute (a traced file keeps
    // none; its forward is inlined).
    if (!layers || !m->module.hasattr("enable_nested_tensor")) return std::nullopt;
    if (args.empty() || args.size() > 4) fail(n, f, ctx() + ": forward takes src, mask, src_key_padding_mask");
    Val x = args[0];
    Val mask = args.size() > 1 ? settle_input(args[1], "mask", n, f) : Val::of_constant(c10::IValue());
    Val kpm = args.size() > 2 ? settle_input(args[2], "src_key_padding_mask", n, f) : Val::of_constant(c10::IValue());
    mask_info(kpm, "src_key_padding_mask", m, n, f);
    for (size_t i = 3; i < args.size(); ++i)
      if (args[i].kind != Val::Kind::Constant) fail(n, f, ctx() + ": is_causal must be known at import");
    // The layers in order (a ModuleList: "0", "1" ...); the nested-tensor
    // fast path of eval mode gives the same values, padding aside.
    for (const auto& item : layers->module.named_children()) {
      auto layer = child_module(layers, item.name);
      x = call_module_method(layer, "forward", {x, mask, kpm}, n, f);
    }
    if (auto norm = child_module(m, "norm")) x = call_module_method(norm, "forward", {x}, n, f);
    return std::vector<Val>{x};
  }
  return std::nullopt;  // TransformerDecoder(Layer): its own scripted forward, inlined
}

std::optional<Val> Importer::open_attention(const std::shared_ptr<const ModuleRef>& m, const std::vector<Val>& raw,
                                            const jit::Node* n, Frame& f) {
  // forward(query, key, value, key_padding_mask=None, need_weights=True,
  //         attn_mask=None, average_attn_weights=True)
  if (raw.size() < 3 || raw.size() > 8) return std::nullopt;
  const jit::Module& mod = m->module;
  for (const char* a : {"embed_dim", "num_heads", "batch_first", "_qkv_same_embed_dim", "dropout", "add_zero_attn"})
    if (!mod.hasattr(a)) return std::nullopt;
  for (const char* a : {"bias_k", "bias_v"})
    if (mod.hasattr(a) && !mod.attr(a).isNone()) return std::nullopt;
  if (mod.attr("add_zero_attn").toBool()) return std::nullopt;
  const int64_t heads = mod.attr("num_heads").toInt();
  const int64_t embed = mod.attr("embed_dim").toInt();
  if (heads <= 0 || embed % heads != 0) return std::nullopt;
  const int64_t head_dim = embed / heads;
  // kdim / vdim other than embed_dim (q_proj_weight ...): 1.13 cannot script it.
  if (!mod.attr("_qkv_same_embed_dim").toBool()) return std::nullopt;
  const double dropout_p = mod.attr("dropout").toDouble();
  const bool training = mod.attr("training").toBool();
  auto out_proj = child_module(m, "out_proj");
  if (!out_proj) return std::nullopt;

  std::vector<Val> args = raw;
  const char* names[] = {"query", "key", "value", "key_padding_mask", "need_weights", "attn_mask", "average_attn_weights"};
  const c10::IValue defaults[] = {c10::IValue(), c10::IValue(), c10::IValue(), c10::IValue(), true, c10::IValue(), true};
  while (args.size() < 7) args.push_back(Val::of_constant(defaults[args.size()]));
  for (size_t i = 3; i < 7; ++i) args[i] = settle_input(args[i], names[i], n, f);
  for (size_t i = 7; i < args.size(); ++i)  // a newer torch's is_causal
    if (args[i].kind != Val::Kind::Constant) return std::nullopt;
  for (size_t i = 0; i < 3; ++i)
    if (args[i].kind != Val::Kind::Symbolic || !args[i].symbolic.is_node()) return std::nullopt;
  auto flag = [&](size_t i) -> std::optional<bool> {
    if (args[i].kind == Val::Kind::Constant && args[i].constant.isBool()) return args[i].constant.toBool();
    return std::nullopt;
  };
  const std::optional<bool> need_weights = flag(4), average = flag(6);
  if (!need_weights || !average) return std::nullopt;
  std::optional<MaskInfo> kpm = mask_info(args[3], "key_padding_mask", m, n, f);
  std::optional<MaskInfo> attn = mask_info(args[5], "attn_mask", m, n, f);
  if (!kpm || !attn) return std::nullopt;  // present, dtype unknown: the module's own forward
  if (kpm->node && attn->node && kpm->dtype != at::kBool)
    fail(n, f, "module " + m->path + " (MultiheadAttention): a floating key_padding_mask with an attn_mask is not "
               "supported (eager merges them as booleans or rejects them)");
  if (attn->node && attn->rank != 2 && attn->rank != 3)
    fail(n, f, "module " + m->path + " (MultiheadAttention): attn_mask's dimension " + std::to_string(attn->rank) +
                   " is not supported (2 or 3, as in eager)");

  auto op = [&](const std::string& name, const char* overload, ArgList a) { return aten_op(name, overload, std::move(a), n, f); };
  Node* query = args[0].symbolic.to_node();
  Node* key = args[1].symbolic.to_node();
  Node* value = args[2].symbolic.to_node();

  // Batched (3-D) unless the example says 2-D; checked when the graph runs
  // when the rank is not known now.
  int64_t rank = 3;
  if (std::optional<int64_t> known = rank_of(query)) {
    rank = *known;
    if (rank != 2 && rank != 3) return std::nullopt;
  } else {
    Node* dim = op("aten::dim", "", {query});
    Node* eq = emit("operator.eq", {dim, 3}, {}, n, f);
    emit("torch._assert",
         {Argument(eq), Argument("MultiheadAttention " + m->path + " was imported for batched (3-D) inputs")}, {}, n, f);
  }
  const bool batched = rank == 3;
  const bool batch_first = batched && mod.attr("batch_first").toBool();
  // To [batch, tokens, embed].
  auto to_batch_major = [&](Node* x) -> Node* {
    if (!batched) return op("aten::unsqueeze", "", {x, 0});
    return batch_first ? x : op("aten::transpose", "int", {x, 0, 1});
  };
  Attention a;
  a.xq = to_batch_major(query);
  a.xk = key == query ? a.xq : to_batch_major(key);
  a.xv = value == key ? a.xk : to_batch_major(value);
  a.w_in = to_argument(module_tensor(m, "in_proj_weight", n, f), n, f);
  a.b_in = to_argument(module_tensor(m, "in_proj_bias", n, f), n, f);
  a.w_out = to_argument(module_tensor(out_proj, "weight", n, f), n, f);
  a.b_out = to_argument(module_tensor(out_proj, "bias", n, f), n, f);
  a.heads = heads;
  a.head_dim = head_dim;
  a.attn = *attn;
  a.kpm = *kpm;
  a.unbatched = !batched;
  a.dropout = training ? dropout_p : 0.0;
  auto [out, probs] = emit_attention(a, n, f);
  if (!batched) {
    out = op("aten::squeeze", "dim", {out, 0});
  } else if (!batch_first) {
    out = op("aten::transpose", "int", {out, 0, 1});
  }
  Val weights = Val::of_constant(c10::IValue());
  if (*need_weights) {
    Node* w = probs;
    if (*average) w = op("aten::div", "Scalar", {op("aten::sum", "dim_IntList", {w, int_list({1})}), heads});
    if (!batched) w = op("aten::squeeze", "dim", {w, 0});
    weights = Val::of_node(w);
  }
  return Val::of_tuple({Val::of_node(out), weights});
}

std::optional<int64_t> Importer::rank_of(Node* x) {
  auto it = rank_hints_.find(x);
  if (it != rank_hints_.end()) return it->second;
  std::optional<c10::IValue> meta = meta_value(x);
  if (!meta || !meta->isTensor() || !meta->toTensor().defined()) return std::nullopt;
  folded_with_example_ = true;
  rank_hints_[x] = meta->toTensor().dim();
  return meta->toTensor().dim();
}

Node* Importer::aten_op(const std::string& name, const char* overload, ArgList args, const jit::Node* n, Frame& f) {
  return emit(options_.overload_names && overload[0] ? name + "." + overload : name, std::move(args), {}, n, f);
}

Argument Importer::int_list(const std::vector<int64_t>& v) {
  std::vector<Argument> items;
  for (int64_t i : v) items.emplace_back(i);
  return Argument::list(std::move(items));
}

std::pair<Node*, Node*> Importer::emit_attention(const Attention& a, const jit::Node* n, Frame& f) {
  auto op = [&](const std::string& name, const char* overload, ArgList args) {
    return aten_op(name, overload, std::move(args), n, f);
  };
  auto heads_of = [&](Node* x) {  // [N, L, E] -> [N, H, L, D]
    return op("aten::transpose", "int", {op("aten::unflatten", "int", {x, -1, int_list({a.heads, a.head_dim})}), 1, 2});
  };
  Node *q = nullptr, *k = nullptr, *v = nullptr;
  if (a.xq == a.xk && a.xk == a.xv) {
    // One linear for q, k and v: [N, L, 3E] -> [3, N, H, L, D].
    Node* qkv = op("aten::linear", "", {a.xq, a.w_in, a.b_in});
    qkv = op("aten::unflatten", "int", {qkv, -1, int_list({3, a.heads, a.head_dim})});
    qkv = op("aten::permute", "", {qkv, int_list({2, 0, 3, 1, 4})});
    q = op("aten::select", "int", {qkv, 0, 0});
    k = op("aten::select", "int", {qkv, 0, 1});
    v = op("aten::select", "int", {qkv, 0, 2});
  } else {
    // in_proj_weight's thirds (eager's _in_projection_packed computes the same).
    Node* ws = op("aten::chunk", "", {a.w_in, 3, 0});
    Node* bs = a.b_in.is_none() ? nullptr : op("aten::chunk", "", {a.b_in, 3, 0});
    auto part = [&](Node* list, int64_t i) -> Argument {
      if (!list) return Argument();
      return Argument(emit("operator.getitem", {list, i}, {}, n, f));
    };
    q = heads_of(op("aten::linear", "", {a.xq, part(ws, 0), part(bs, 0)}));
    k = heads_of(op("aten::linear", "", {a.xk, part(ws, 1), part(bs, 1)}));
    v = heads_of(op("aten::linear", "", {a.xv, part(ws, 2), part(bs, 2)}));
  }
  // Scores [N, H, L, S] of q / sqrt(head_dim) and k, as eager scales q.
  q = op("aten::div", "Scalar", {q, std::sqrt(static_cast<double>(a.head_dim))});
  Node* scores = op("aten::matmul", "", {q, op("aten::transpose", "int", {k, -2, -1})});
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (a.attn.node) {
    Node* mask = a.attn.node;
    const bool boolean = a.attn.dtype == at::kBool || a.attn.dtype == at::kByte;
    if (a.attn.dtype == at::kByte) mask = op("aten::to", "dtype", {mask, static_cast<int64_t>(at::kBool)});
    if (a.attn.rank == 3) mask = op("aten::unflatten", "int", {mask, 0, int_list({-1, a.heads})});  // [N*H, L, S] -> [N, H, L, S]
    scores = boolean ? op("aten::masked_fill", "Scalar", {scores, mask, neg_inf}) : op("aten::add", "Tensor", {scores, mask});
  }
  if (a.kpm.node) {
    Node* mask = a.kpm.node;
    if (a.unbatched) mask = op("aten::unsqueeze", "", {mask, 0});
    mask = op("aten::unsqueeze", "", {op("aten::unsqueeze", "", {mask, 1}), 1});  // [N, S] -> [N, 1, 1, S]
    scores = a.kpm.dtype == at::kBool ? op("aten::masked_fill", "Scalar", {scores, mask, neg_inf})
                                      : op("aten::add", "Tensor", {scores, mask});
  }
  Node* probs = op("aten::softmax", "int", {scores, -1});
  if (a.dropout > 0.0) probs = op("aten::dropout", "", {probs, a.dropout, true});
  Node* ctx = op("aten::matmul", "", {probs, v});
  ctx = op("aten::flatten", "using_ints", {op("aten::transpose", "int", {ctx, 1, 2}), 2});  // [N, L, E]
  return {op("aten::linear", "", {ctx, a.w_out, a.b_out}), probs};
}

// Traced under torch.no_grad in eval mode, a layer or an attention is one
// fused operator of the fast path; its arguments say all it computes, so it
// is written out the same way (without masks: those stay fused).
bool Importer::expand_fused_transformer(const jit::Node* n, Frame& f) {
  const std::string& name = n->schema().name();
  const bool layer = name == "aten::_transformer_encoder_layer_fwd";
  if (!layer && name != "aten::_native_multi_head_attention") return false;
  std::vector<Val> in;
  for (const jit::Value* v : n->inputs()) in.push_back(value(v, f, n));
  auto constant = [&](size_t i) -> const c10::IValue* {
    return i < in.size() && in[i].kind == Val::Kind::Constant ? &in[i].constant : nullptr;
  };
  auto node_at = [&](size_t i) -> Node* {
    return i < in.size() && in[i].kind == Val::Kind::Symbolic && in[i].symbolic.is_node() ? in[i].symbolic.to_node() : nullptr;
  };
  auto op = [&](const std::string& target, const char* overload, ArgList args) {
    return aten_op(target, overload, std::move(args), n, f);
  };
  // (src | query, key, value), embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, ...
  const size_t first = layer ? 1 : 3;
  const c10::IValue* embed = constant(first);
  const c10::IValue* heads = constant(first + 1);
  if (!embed || !heads || !embed->isInt() || !heads->isInt() || heads->toInt() <= 0 ||
      embed->toInt() % heads->toInt() != 0)
    return false;
  Attention a;
  a.heads = heads->toInt();
  a.head_dim = embed->toInt() / a.heads;
  a.xq = node_at(0);
  a.xk = layer ? a.xq : node_at(1);
  a.xv = layer ? a.xq : node_at(2);
  if (!a.xq || !a.xk || !a.xv) return false;
  for (size_t i = first + 2; i < first + 6; ++i)
    if (!node_at(i) && !(constant(i) && constant(i)->isNone())) return false;
  a.w_in = to_argument(in[first + 2], n, f);
  a.b_in = to_argument(in[first + 3], n, f);
  a.w_out = to_argument(in[first + 4], n, f);
  a.b_out = to_argument(in[first + 5], n, f);
  if (!layer) {
    // mask=None, need_weights, average_attn_weights, mask_type
    const c10::IValue* mask = constant(9);
    const c10::IValue* need = constant(10);
    const c10::IValue* average = constant(11);
    if (!mask || !mask->isNone() || !need || !need->isBool() || !average || !average->isBool()) return false;
    auto [out, probs] = emit_attention(a, n, f);
    Node* weights = probs;  // the fused op returns the weights even when not asked (unused)
    if (average->toBool()) weights = op("aten::div", "Scalar", {op("aten::sum", "dim_IntList", {probs, int_list({1})}), a.heads});
    bind(n->outputs()[0], Val::of_node(out), f);
    bind(n->outputs()[1], Val::of_node(weights), f);
    return true;
  }
  // use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2,
  // norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None, mask_type=None
  const c10::IValue* gelu = constant(7);
  const c10::IValue* norm_first = constant(8);
  const c10::IValue* eps = constant(9);
  if (!gelu || !gelu->isBool() || !norm_first || !norm_first->isBool() || !eps || !eps->isDouble()) return false;
  for (size_t i = 10; i < 18; ++i)
    if (!node_at(i) && !(constant(i) && constant(i)->isNone())) return false;
  if (in.size() > 18 && !(constant(18) && constant(18)->isNone())) return false;
  auto arg = [&](size_t i) { return to_argument(in[i], n, f); };
  Argument shape = int_list({embed->toInt()});
  auto norm = [&](Node* x, size_t w) { return op("aten::layer_norm", "", {x, shape, arg(w), arg(w + 1), eps->toDouble()}); };
  auto attention = [&](Node* x) {
    Attention s = a;
    s.xq = s.xk = s.xv = x;
    return emit_attention(s, n, f).first;
  };
  auto feed_forward = [&](Node* x) {
    Node* h = op("aten::linear", "", {x, arg(14), arg(15)});
    h = gelu->toBool() ? op("aten::gelu", "", {h}) : op("aten::relu", "", {h});
    return op("aten::linear", "", {h, arg(16), arg(17)});
  };
  auto plus = [&](Node* x, Node* y) { return op("aten::add", "Tensor", {x, y}); };
  Node* x = a.xq;
  if (norm_first->toBool()) {
    x = plus(x, attention(norm(x, 10)));
    x = plus(x, feed_forward(norm(x, 12)));
  } else {
    x = norm(plus(x, attention(x)), 10);
    x = norm(plus(x, feed_forward(x)), 12);
  }
  bind(n->output(), Val::of_node(x), f);
  return true;
}

}  // namespace fx::import_detail
