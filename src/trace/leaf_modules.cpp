// The leaf-module table and the pass that folds recognized calls into
// call_module nodes (see leaf_modules.h).
#include "trace/leaf_modules.h"

#include <fx/error.h>

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/rnn.h>

#include <map>
#include <optional>
#include <unordered_set>

namespace fx::trace_impl {
namespace {

using Calls = std::unordered_map<const Node*, RecordedCall>;

/// One recognized module call: what replaces the anchor node.
struct Fold {
  std::string module;
  ArgList args;
  /// Nodes the call_module replaces besides the anchor (producers of the
  /// anchor's inputs that only the pattern uses), users first.
  std::vector<Node*> chain;
  /// For modules returning nested tuples (LSTM): where output i of the
  /// anchor lives in the module's result. Empty: the anchor's value is the
  /// module's value.
  std::vector<std::vector<int64_t>> output_paths;
};

/// Reads the graph around an anchor node.
class Matcher {
 public:
  Matcher(const LeafContext& ctx, const Calls& calls) : ctx_(ctx), calls_(calls) {}

  /// The full recorded arguments of a call_function node (nullptr
  /// otherwise), with nodes replaced by earlier folds mapped to their
  /// replacements.
  const std::vector<Argument>* args_of(const Node* n) const {
    auto c = cache_.find(n);
    if (c != cache_.end()) return &c->second;
    auto it = calls_.find(n);
    if (it == calls_.end()) return nullptr;
    std::vector<Argument> args;
    args.reserve(it->second.full_args.size());
    for (const Argument& a : it->second.full_args) {
      args.push_back(map_arg(a, [this](Node* x) { return Argument(live(x)); }));
    }
    return &cache_.emplace(n, std::move(args)).first->second;
  }
  /// Records that `old` was replaced by `by`.
  void replace(const Node* old, Node* by) {
    replaced_[old] = by;
    cache_.clear();
  }
  Node* live(Node* n) const {
    for (auto it = replaced_.find(n); it != replaced_.end(); it = replaced_.find(n)) n = it->second;
    return n;
  }
  /// The leaf tensor behind a get_attr argument.
  const LeafContext::Owner* owner(const Argument& a) const {
    if (!a.is_node() || a.to_node()->op() != Opcode::GetAttr) return nullptr;
    auto it = ctx_.owners.find(a.to_node()->target());
    return it == ctx_.owners.end() ? nullptr : &it->second;
  }
  /// Whether `a` is the tensor `local` of leaf `module` (or None when the
  /// module has no such tensor).
  bool is_tensor(const Argument& a, const std::string& module, const char* local, bool defined) const {
    if (!defined) return a.is_none();
    const LeafContext::Owner* o = owner(a);
    return o != nullptr && o->module == module && o->local == local;
  }
  /// A call_function node `target` whose only user is `user`.
  const std::vector<Argument>* only_feeds(const Argument& a, const char* target, const Node* user) const {
    if (!a.is_node()) return nullptr;
    const Node* n = a.to_node();
    if (n->op() != Opcode::CallFunction || n->target() != target) return nullptr;
    if (n->users().size() != 1 || *n->users().begin() != user) return nullptr;
    return args_of(n);
  }
  at::Tensor tensor_of(const std::string& target) const { return ctx_.tensor_of(target); }

 private:
  const LeafContext& ctx_;
  const Calls& calls_;
  std::unordered_map<const Node*, Node*> replaced_;
  mutable std::unordered_map<const Node*, std::vector<Argument>> cache_;
};

bool num_eq(const Argument& a, double v) {
  return (a.kind() == Argument::Kind::Int || a.kind() == Argument::Kind::Double) && a.to_double() == v;
}
bool is_bool(const Argument& a, bool v) { return a.kind() == Argument::Kind::Bool && a.to_bool() == v; }
template <size_t D>
std::vector<int64_t> vec(const torch::ExpandingArray<D>& a) {
  return std::vector<int64_t>(a->begin(), a->end());
}

using Pattern = std::function<std::optional<Fold>(Node* anchor, const std::vector<Argument>& args, const Matcher& m)>;

/// One row of the table: a module type, and the anchor operators whose
/// pattern it recognizes.
struct LeafType {
  const char* name;
  std::function<bool(const torch::nn::Module&)> is_type;
  std::vector<std::pair<std::string, Pattern>> patterns;
};

template <class T>
std::function<bool(const torch::nn::Module&)> type_is() {
  return [](const torch::nn::Module& m) { return dynamic_cast<const T*>(&m) != nullptr; };
}

template <class T>
const T* as(const LeafContext::Owner* o) {
  return o == nullptr ? nullptr : dynamic_cast<const T*>(o->instance);
}

// ---- Linear: F::linear issues t(weight) + addmm(bias, x, ·) for 2-d input
// with bias, matmul(x, ·) [+ add_(·, bias)] otherwise.
LeafType linear_type() {
  using L = torch::nn::LinearImpl;
  // t(weight) feeding `user`: returns the module name.
  auto weight_t = [](const Argument& a, const Node* user, const Matcher& m) -> const LeafContext::Owner* {
    const std::vector<Argument>* t = m.only_feeds(a, "aten::t", user);
    if (t == nullptr) return nullptr;
    const LeafContext::Owner* o = m.owner((*t)[0]);
    return (as<L>(o) != nullptr && o->local == "weight") ? o : nullptr;
  };
  LeafType lt{"Linear", type_is<L>(), {}};
  lt.patterns.emplace_back("aten::addmm", [weight_t](Node* anchor, const std::vector<Argument>& a, const Matcher& m) {
    std::optional<Fold> f;
    const LeafContext::Owner* o = weight_t(a[2], anchor, m);
    if (o == nullptr || !m.is_tensor(a[0], o->module, "bias", true) || !num_eq(a[3], 1) || !num_eq(a[4], 1)) return f;
    f = Fold{o->module, {a[1]}, {a[2].to_node()}, {}};
    return f;
  });
  lt.patterns.emplace_back("aten::matmul", [weight_t](Node* anchor, const std::vector<Argument>& a, const Matcher& m) {
    std::optional<Fold> f;
    const LeafContext::Owner* o = weight_t(a[1], anchor, m);
    if (o == nullptr || as<L>(o)->bias.defined()) return f;
    f = Fold{o->module, {a[0]}, {a[1].to_node()}, {}};
    return f;
  });
  lt.patterns.emplace_back("aten::add_.Tensor", [weight_t](Node* anchor, const std::vector<Argument>& a,
                                                           const Matcher& m) {
    std::optional<Fold> f;
    const std::vector<Argument>* mm = m.only_feeds(a[0], "aten::matmul", anchor);
    if (mm == nullptr || !num_eq(a[2], 1)) return f;
    const LeafContext::Owner* o = weight_t((*mm)[1], a[0].to_node(), m);
    if (o == nullptr || !m.is_tensor(a[1], o->module, "bias", true)) return f;
    f = Fold{o->module, {(*mm)[0]}, {a[0].to_node(), (*mm)[1].to_node()}, {}};
    return f;
  });
  lt.patterns.emplace_back("aten::linear", [](Node*, const std::vector<Argument>& a, const Matcher& m) {
    std::optional<Fold> f;
    const LeafContext::Owner* o = m.owner(a[1]);
    const L* l = as<L>(o);
    if (l == nullptr || o->local != "weight" || !m.is_tensor(a[2], o->module, "bias", l->bias.defined())) return f;
    f = Fold{o->module, {a[0]}, {}, {}};
    return f;
  });
  return lt;
}

// ---- Conv{1,2,3}d: conv{D}d(x, weight, bias, stride, padding, dilation, groups);
// with a non-zero padding mode the input comes from a padding operator.
template <size_t D, class C>
LeafType conv_type(const char* name) {
  LeafType lt{name, type_is<C>(), {}};
  const std::string op = "aten::conv" + std::to_string(D) + "d";
  Pattern p = [](Node* anchor, const std::vector<Argument>& a, const Matcher& m) {
    std::optional<Fold> f;
    const LeafContext::Owner* o = m.owner(a[1]);
    const C* c = as<C>(o);
    if (c == nullptr || o->local != "weight" || !m.is_tensor(a[2], o->module, "bias", c->bias.defined())) return f;
    const auto& opt = c->options;
    if (a[3].to_int_list() != vec<D>(opt.stride()) || a[5].to_int_list() != vec<D>(opt.dilation()) ||
        a[6].to_int() != opt.groups())
      return f;
    const bool zeros = c10::get_if<torch::enumtype::kZeros>(&opt.padding_mode()) != nullptr;
    if (const auto* pad = c10::get_if<torch::ExpandingArray<D>>(&opt.padding())) {
      if (a[4].kind() == Argument::Kind::String) return f;
      if (zeros) {
        if (a[4].to_int_list() != vec<D>(*pad)) return f;
        f = Fold{o->module, {a[0]}, {}, {}};
        return f;
      }
      // reflect / replicate / circular: the module pads first, then convolves with padding 0.
      if (a[4].to_int_list() != std::vector<int64_t>(D, 0) || !a[0].is_node()) return f;
      Node* padder = a[0].to_node();
      if (padder->op() != Opcode::CallFunction || padder->target().find("pad") == std::string::npos ||
          padder->users().size() != 1 || *padder->users().begin() != anchor || padder->args().empty())
        return f;
      f = Fold{o->module, {padder->args()[0]}, {padder}, {}};
      return f;
    }
    if (!zeros || a[4].kind() != Argument::Kind::String) return f;
    const bool same = c10::get_if<torch::enumtype::kSame>(&opt.padding()) != nullptr;
    if (a[4].to_string() != (same ? "same" : "valid")) return f;
    f = Fold{o->module, {a[0]}, {}, {}};
    return f;
  };
  lt.patterns.emplace_back(op, p);
  lt.patterns.emplace_back(op + ".padding", p);
  return lt;
}

// ---- ConvTranspose{1,2,3}d: conv_transpose{D}d.input(x, weight, bias, stride,
// padding, output_padding, groups, dilation), forward without output_size.
template <size_t D, class C>
LeafType conv_transpose_type(const char* name) {
  LeafType lt{name, type_is<C>(), {}};
  lt.patterns.emplace_back(
      "aten::conv_transpose" + std::to_string(D) + "d.input",
      [](Node*, const std::vector<Argument>& a, const Matcher& m) {
        std::optional<Fold> f;
        const LeafContext::Owner* o = m.owner(a[1]);
        const C* c = as<C>(o);
        if (c == nullptr || o->local != "weight" || !m.is_tensor(a[2], o->module, "bias", c->bias.defined()))
          return f;
        const auto& opt = c->options;
        const auto* pad = c10::get_if<torch::ExpandingArray<D>>(&opt.padding());
        if (pad == nullptr || a[3].to_int_list() != vec<D>(opt.stride()) || a[4].to_int_list() != vec<D>(*pad) ||
            a[5].to_int_list() != vec<D>(opt.output_padding()) || a[6].to_int() != opt.groups() ||
            a[7].to_int_list() != vec<D>(opt.dilation()))
          return f;
        f = Fold{o->module, {a[0]}, {}, {}};
        return f;
      });
  return lt;
}

// ---- BatchNorm{1,2,3}d: batch_norm(x, weight, bias, running_mean, running_var,
// training, momentum, eps, cudnn_enabled).
template <class B>
LeafType batch_norm_type(const char* name) {
  LeafType lt{name, type_is<B>(), {}};
  lt.patterns.emplace_back("aten::batch_norm", [](Node*, const std::vector<Argument>& a, const Matcher& m) {
    std::optional<Fold> f;
    const LeafContext::Owner* o = nullptr;
    for (int i = 1; i <= 4 && o == nullptr; ++i) o = m.owner(a[i]);
    const B* b = as<B>(o);
    if (b == nullptr) return f;
    const auto& opt = b->options;
    if (!m.is_tensor(a[1], o->module, "weight", b->weight.defined()) ||
        !m.is_tensor(a[2], o->module, "bias", b->bias.defined()) ||
        !m.is_tensor(a[3], o->module, "running_mean", b->running_mean.defined()) ||
        !m.is_tensor(a[4], o->module, "running_var", b->running_var.defined()))
      return f;
    if (!is_bool(a[5], b->is_training() || !opt.track_running_stats()) || !num_eq(a[7], opt.eps())) return f;
    if (opt.momentum() && !num_eq(a[6], *opt.momentum())) return f;
    f = Fold{o->module, {a[0]}, {}, {}};
    return f;
  });
  return lt;
}

LeafType layer_norm_type() {
  using L = torch::nn::LayerNormImpl;
  LeafType lt{"LayerNorm", type_is<L>(), {}};
  lt.patterns.emplace_back("aten::layer_norm", [](Node*, const std::vector<Argument>& a, const Matcher& m) {
    std::optional<Fold> f;
    const LeafContext::Owner* o = m.owner(a[2]);
    if (o == nullptr) o = m.owner(a[3]);
    const L* l = as<L>(o);
    if (l == nullptr || !m.is_tensor(a[2], o->module, "weight", l->weight.defined()) ||
        !m.is_tensor(a[3], o->module, "bias", l->bias.defined()) ||
        a[1].to_int_list() != l->options.normalized_shape() || !num_eq(a[4], l->options.eps()))
      return f;
    f = Fold{o->module, {a[0]}, {}, {}};
    return f;
  });
  return lt;
}

LeafType group_norm_type() {
  using G = torch::nn::GroupNormImpl;
  LeafType lt{"GroupNorm", type_is<G>(), {}};
  lt.patterns.emplace_back("aten::group_norm", [](Node*, const std::vector<Argument>& a, const Matcher& m) {
    std::optional<Fold> f;
    const LeafContext::Owner* o = m.owner(a[2]);
    if (o == nullptr) o = m.owner(a[3]);
    const G* g = as<G>(o);
    if (g == nullptr || !m.is_tensor(a[2], o->module, "weight", g->weight.defined()) ||
        !m.is_tensor(a[3], o->module, "bias", g->bias.defined()) || a[1].to_int() != g->options.num_groups() ||
        !num_eq(a[4], g->options.eps()))
      return f;
    f = Fold{o->module, {a[0]}, {}, {}};
    return f;
  });
  return lt;
}

// ---- Embedding: embedding(weight, indices, padding_idx, scale_grad_by_freq,
// sparse), preceded by embedding_renorm_(weight, indices, ...) with max_norm.
LeafType embedding_type() {
  using E = torch::nn::EmbeddingImpl;
  LeafType lt{"Embedding", type_is<E>(), {}};
  lt.patterns.emplace_back("aten::embedding", [](Node* anchor, const std::vector<Argument>& a, const Matcher& m) {
    std::optional<Fold> f;
    std::vector<Node*> chain;
    Argument w = a[0];
    if (const std::vector<Argument>* renorm = m.only_feeds(a[0], "aten::embedding_renorm_", anchor)) {
      if ((*renorm)[1] != a[1]) return f;
      chain.push_back(a[0].to_node());
      w = (*renorm)[0];
    }
    const LeafContext::Owner* o = m.owner(w);
    const E* e = as<E>(o);
    if (e == nullptr || o->local != "weight" || e->options.max_norm().has_value() != !chain.empty()) return f;
    int64_t padding_idx = -1;
    if (e->options.padding_idx()) {
      padding_idx = *e->options.padding_idx();
      if (padding_idx < 0) padding_idx += e->weight.size(0);
    }
    if (a[2].to_int() != padding_idx || !is_bool(a[3], e->options.scale_grad_by_freq()) ||
        !is_bool(a[4], e->options.sparse()))
      return f;
    f = Fold{o->module, {a[1]}, chain, {}};
    return f;
  });
  return lt;
}

// ---- LSTM / GRU / RNN: lstm.input(x, hx, params, has_biases, num_layers,
// dropout, train, bidirectional, batch_first) and gru/rnn_tanh/rnn_relu.input.
// hx made of zero constants is what forward creates without hx: left out.
template <class R>
LeafType rnn_type(const char* name, const char* op, bool lstm) {
  LeafType lt{name, type_is<R>(), {}};
  lt.patterns.emplace_back(op, [lstm, op = std::string(op)](Node* anchor, const std::vector<Argument>& a,
                                                           const Matcher& m) {
    std::optional<Fold> f;
    if (!a[2].is_sequence() || a[2].items().empty()) return f;
    const LeafContext::Owner* o = m.owner(a[2].items()[0]);
    const R* r = as<R>(o);
    if (r == nullptr) return f;
    const auto& opt = r->options_base;
    const bool mode_ok = (op == "aten::lstm.input" && c10::get_if<torch::enumtype::kLSTM>(&opt.mode())) ||
                         (op == "aten::gru.input" && c10::get_if<torch::enumtype::kGRU>(&opt.mode())) ||
                         (op == "aten::rnn_tanh.input" && c10::get_if<torch::enumtype::kRNN_TANH>(&opt.mode())) ||
                         (op == "aten::rnn_relu.input" && c10::get_if<torch::enumtype::kRNN_RELU>(&opt.mode()));
    if (!mode_ok) return f;
    const std::vector<at::Tensor> weights = r->all_weights();
    if (weights.size() != a[2].items().size()) return f;
    for (size_t i = 0; i < weights.size(); ++i) {
      const LeafContext::Owner* wo = m.owner(a[2].items()[i]);
      if (wo == nullptr || wo->module != o->module ||
          !m.tensor_of(a[2].items()[i].to_node()->target()).is_same(weights[i]))
        return f;
    }
    if (!is_bool(a[3], opt.bias()) || a[4].to_int() != opt.num_layers() || !num_eq(a[5], opt.dropout()) ||
        !is_bool(a[6], r->is_training()) || !is_bool(a[7], opt.bidirectional()) ||
        !is_bool(a[8], opt.batch_first()))
      return f;
    // Every use of the result must be a getitem (x, (h, c) = lstm(...)).
    for (Node* u : anchor->users()) {
      if (u->op() != Opcode::CallFunction || u->target() != "operator.getitem" || u->args().size() != 2 ||
          u->args()[1].kind() != Argument::Kind::Int)
        return f;
    }
    // hx: omitted when it is the zeros forward would create itself.
    std::vector<Argument> hx = a[1].is_sequence() ? a[1].items() : std::vector<Argument>{a[1]};
    bool zeros = true;
    for (const Argument& h : hx) {
      if (!h.is_node() || h.to_node()->op() != Opcode::GetAttr || m.owner(h) != nullptr) {
        zeros = false;
        break;
      }
      at::Tensor t = m.tensor_of(h.to_node()->target());
      if (!t.defined() || t.count_nonzero().item<int64_t>() != 0) zeros = false;
    }
    ArgList args{a[0]};
    if (!zeros) args.push_back(lstm ? Argument::tuple(hx) : hx[0]);
    f = Fold{o->module, std::move(args), {}, {}};
    if (lstm) {
      f->output_paths = {{0}, {1, 0}, {1, 1}};
    } else {
      f->output_paths = {{0}, {1}};
    }
    return f;
  });
  return lt;
}

const std::vector<LeafType>& table() {
  namespace nn = torch::nn;
  static const std::vector<LeafType> t = {
      linear_type(),
      conv_type<1, nn::Conv1dImpl>("Conv1d"),
      conv_type<2, nn::Conv2dImpl>("Conv2d"),
      conv_type<3, nn::Conv3dImpl>("Conv3d"),
      conv_transpose_type<1, nn::ConvTranspose1dImpl>("ConvTranspose1d"),
      conv_transpose_type<2, nn::ConvTranspose2dImpl>("ConvTranspose2d"),
      conv_transpose_type<3, nn::ConvTranspose3dImpl>("ConvTranspose3d"),
      batch_norm_type<nn::BatchNorm1dImpl>("BatchNorm1d"),
      batch_norm_type<nn::BatchNorm2dImpl>("BatchNorm2d"),
      batch_norm_type<nn::BatchNorm3dImpl>("BatchNorm3d"),
      layer_norm_type(),
      group_norm_type(),
      embedding_type(),
      rnn_type<nn::LSTMImpl>("LSTM", "aten::lstm.input", true),
      rnn_type<nn::GRUImpl>("GRU", "aten::gru.input", false),
      rnn_type<nn::RNNImpl>("RNN", "aten::rnn_tanh.input", false),
      rnn_type<nn::RNNImpl>("RNN", "aten::rnn_relu.input", false),
  };
  return t;
}

}  // namespace

bool has_leaf_pattern(const torch::nn::Module& m) {
  for (const LeafType& lt : table()) {
    if (lt.is_type(m)) return true;
  }
  return false;
}

std::string leaf_pattern_types() {
  std::string s;
  for (const LeafType& lt : table()) {
    if (s.find(lt.name) != std::string::npos) continue;
    s += (s.empty() ? "" : ", ") + std::string(lt.name);
  }
  return s;
}

size_t fold_leaf_modules(Graph& graph, const LeafContext& ctx, const Calls& calls) {
  if (ctx.owners.empty()) return 0;
  std::unordered_map<std::string, std::vector<const Pattern*>> by_target;
  for (const LeafType& lt : table()) {
    for (const auto& p : lt.patterns) by_target[p.first].push_back(&p.second);
  }
  Matcher m(ctx, calls);
  std::unordered_set<const Node*> erased;
  std::vector<Node*> attrs_touched;
  size_t folded = 0;
  for (Node* anchor : graph.nodes().to_vector()) {
    if (erased.count(anchor) || anchor->op() != Opcode::CallFunction) continue;
    auto pit = by_target.find(anchor->target());
    if (pit == by_target.end()) continue;
    const std::vector<Argument>* cached = m.args_of(anchor);
    if (cached == nullptr) continue;
    const std::vector<Argument> current = *cached;  // folding clears the cache
    const std::vector<Argument>* args = &current;
    std::optional<Fold> fold;
    for (const Pattern* p : pit->second) {
      fold = (*p)(anchor, *args, m);
      if (fold) break;
    }
    if (!fold) continue;

    // The call_module node goes where the anchor was.
    for (const Argument& a : *args) for_each_node(a, [&](Node* n) { if (n->op() == Opcode::GetAttr) attrs_touched.push_back(n); });
    for (Node* c : fold->chain) {
      for (Node* n : c->all_input_nodes()) {
        if (n->op() == Opcode::GetAttr) attrs_touched.push_back(n);
      }
    }
    Node* call = nullptr;
    {
      auto at = graph.inserting_before(anchor);
      call = graph.call_module(fold->module, fold->args);
      auto meta = anchor->meta().find("tensor_meta");
      if (meta != anchor->meta().end()) call->meta()["tensor_meta"] = meta->second;
      m.replace(anchor, call);
      if (fold->output_paths.empty()) {
        anchor->replace_all_uses_with(call);
      } else {
        std::map<std::vector<int64_t>, Node*> items;
        for (Node* u : anchor->users().to_vector()) {
          const int64_t i = u->args()[1].to_int();
          if (i < 0 || static_cast<size_t>(i) >= fold->output_paths.size()) continue;
          const std::vector<int64_t>& path = fold->output_paths[i];
          Node* cur = call;
          std::vector<int64_t> prefix;
          for (int64_t step : path) {
            prefix.push_back(step);
            auto it = items.find(prefix);
            if (it == items.end()) {
              it = items.emplace(prefix, graph.call_function("operator.getitem", {Argument(cur), Argument(step)})).first;
            }
            cur = it->second;
          }
          cur->meta() = u->meta();
          m.replace(u, cur);
          u->replace_all_uses_with(cur);
          graph.erase_node(u);
          erased.insert(u);
        }
      }
    }
    graph.erase_node(anchor);
    erased.insert(anchor);
    for (Node* c : fold->chain) {
      graph.erase_node(c);
      erased.insert(c);
    }
    ++folded;
  }
  // get_attr nodes only the folded patterns used.
  for (Node* n : attrs_touched) {
    if (!erased.count(n) && n->users().empty()) {
      graph.erase_node(n);
      erased.insert(n);
    }
  }
  return folded;
}

}  // namespace fx::trace_impl
