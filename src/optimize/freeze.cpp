// freeze_modules: known torch.nn layer calls → the ATen call they run.
#include <fx/optimize/freeze.h>

#include "optimize/freeze_attention.h"
#include "optimize/layer_folding.h"

#include <fx/graph.h>
#include <fx/module_attributes.h>

#include <torch/nn/module.h>

#include <optional>
#include <unordered_map>

namespace fx {
namespace {

/// An int or an int list of a layer attribute as a list of `n` ints
/// (kernel_size=3 → [3, 3]); nullopt for anything else.
std::optional<std::vector<int64_t>> int_pair(const c10::IValue& v, size_t n = 2) {
  if (v.isInt()) return std::vector<int64_t>(n, v.toInt());
  if (v.isIntList()) {
    auto l = v.toIntVector();
    if (l.size() == n) return l;
  }
  if (v.isList()) {  // optional ints (AdaptiveAvgPool2d's output_size), every one given
    std::vector<int64_t> l;
    for (const c10::IValue& e : v.toListRef()) {
      if (!e.isInt()) return std::nullopt;
      l.push_back(e.toInt());
    }
    if (l.size() == n) return l;
  }
  return std::nullopt;
}

/// What one layer call becomes: an ATen target and its arguments, or the
/// input itself (dropout, identity).
struct Frozen {
  std::string target;
  ArgList args;
  Kwargs kwargs;
  bool is_identity = false;

  Frozen(std::string t, ArgList a, Kwargs k = {}, bool identity = false)
      : target(std::move(t)), args(std::move(a)), kwargs(std::move(k)), is_identity(identity) {}
};

class Freezer {
 public:
  Freezer(Node* n, const torch::nn::Module& m, const ModuleAttributes& a) : n_(n), m_(m), a_(a) {}

  /// The frozen form of the call, or nullopt to leave it a call_module.
  std::optional<Frozen> freeze() {
    if (n_->args().size() != 1 || !n_->kwargs().empty() || !n_->args()[0].is_node()) return std::nullopt;
    if (!has_attributes()) return std::nullopt;
    Argument x = n_->args()[0];
    const std::string& t = a_.type;
    if (t == "Dropout" || t == "Dropout1d" || t == "Dropout2d" || t == "Dropout3d" || t == "AlphaDropout" ||
        t == "FeatureAlphaDropout") {
      return Frozen{"", {x}, {}, true};  // freeze_modules checked it is in eval mode
    }
    if (t == "Identity") return Frozen{"", {x}, {}, true};
    if (t == "Conv2d") return conv2d(x);
    if (t == "Linear") return Frozen{"aten::linear", {x, tensor("weight"), tensor("bias")}};
    if (t == "BatchNorm1d" || t == "BatchNorm2d" || t == "BatchNorm3d") return batch_norm(x);
    if (t == "LayerNorm") {
      auto shape = a_.at("normalized_shape");
      if (!shape.isIntList()) return std::nullopt;
      return Frozen{"aten::layer_norm",
                    {x, passes_detail::int_list_argument(shape.toIntVector()), tensor("weight"), tensor("bias"), a_.at("eps").toDouble()}};
    }
    if (t == "ReLU") return Frozen{"aten::relu", {x}};
    if (t == "ReLU6") return Frozen{"aten::hardtanh", {x, 0.0, 6.0}};
    if (t == "Hardtanh") return Frozen{"aten::hardtanh", {x, a_.at("min_val").toDouble(), a_.at("max_val").toDouble()}};
    if (t == "SiLU") return Frozen{"aten::silu", {x}};
    if (t == "Sigmoid") return Frozen{"aten::sigmoid", {x}};
    if (t == "Tanh") return Frozen{"aten::tanh", {x}};
    if (t == "Hardswish") return Frozen{"aten::hardswish", {x}};
    if (t == "Hardsigmoid") return Frozen{"aten::hardsigmoid", {x}};
    if (t == "GELU") return Frozen{"aten::gelu", {x}, {{"approximate", a_.at("approximate").toStringRef()}}};
    if (t == "Flatten") return Frozen{"aten::flatten", {x, a_.at("start_dim").toInt(), a_.at("end_dim").toInt()}};
    if (t == "Softmax") {
      if (!a_.at("dim").isInt()) return std::nullopt;
      return Frozen{"aten::softmax", {x, a_.at("dim").toInt()}};
    }
    if (t == "MaxPool2d") return max_pool2d(x);
    if (t == "AdaptiveAvgPool2d") {
      auto size = int_pair(a_.at("output_size"));
      if (!size) return std::nullopt;  // a None entry keeps the input's size
      return Frozen{"aten::adaptive_avg_pool2d", {x, passes_detail::int_list_argument(*size)}};
    }
    return std::nullopt;
  }

 private:
  /// Whether the layer has every attribute its frozen form reads: a
  /// module whose configuration cannot be read (a leaf whose forward is not
  /// one ATen call on its input) stays a call_module.
  bool has_attributes() const {
    static const std::unordered_map<std::string, std::vector<const char*>> needs = {
        {"Conv2d", {"padding_mode", "padding", "stride", "dilation", "groups"}},
        {"BatchNorm1d", {"track_running_stats", "momentum", "eps"}},
        {"BatchNorm2d", {"track_running_stats", "momentum", "eps"}},
        {"BatchNorm3d", {"track_running_stats", "momentum", "eps"}},
        {"LayerNorm", {"normalized_shape", "eps"}},
        {"Hardtanh", {"min_val", "max_val"}},
        {"GELU", {"approximate"}},
        {"Flatten", {"start_dim", "end_dim"}},
        {"Softmax", {"dim"}},
        {"MaxPool2d", {"kernel_size", "stride", "padding", "dilation", "ceil_mode"}},
        {"AdaptiveAvgPool2d", {"output_size"}},
    };
    auto it = needs.find(a_.type);
    if (it == needs.end()) return true;
    for (const char* name : it->second)
      if (!a_.attributes.count(name)) return false;
    return true;
  }

  /// get_attr of the module's tensor `name`, or None when it has none (bias=False).
  Argument tensor(const std::string& name) {
    const auto* p = m_.named_parameters(false).find(name);
    const auto* b = p ? nullptr : m_.named_buffers(false).find(name);
    if ((p == nullptr || !p->defined()) && (b == nullptr || !b->defined())) return Argument();
    InsertPoint at = n_->graph().inserting_before(n_);
    return n_->graph().get_attr(n_->target() + "." + name);
  }

  std::optional<Frozen> conv2d(const Argument& x) {
    if (a_.at("padding_mode").toStringRef() != "zeros") return std::nullopt;
    std::optional<std::vector<int64_t>> padding;
    const c10::IValue& p = a_.at("padding");
    if (p.isString())
      padding = p.toStringRef() == "valid" ? std::optional<std::vector<int64_t>>({0, 0}) : std::nullopt;
    else
      padding = int_pair(p);
    auto stride = int_pair(a_.at("stride")), dilation = int_pair(a_.at("dilation"));
    if (!padding || !stride || !dilation) return std::nullopt;
    return Frozen{"aten::conv2d",
                  {x, tensor("weight"), tensor("bias"), passes_detail::int_list_argument(*stride), passes_detail::int_list_argument(*padding), passes_detail::int_list_argument(*dilation),
                   a_.at("groups").toInt()}};
  }

  std::optional<Frozen> batch_norm(const Argument& x) {
    if (!a_.at("track_running_stats").toBool()) return std::nullopt;  // normalizes with batch statistics
    const c10::IValue& momentum = a_.at("momentum");
    return Frozen{"aten::batch_norm",
                  {x, tensor("weight"), tensor("bias"), tensor("running_mean"), tensor("running_var"), false,
                   momentum.isDouble() ? momentum.toDouble() : 0.1, a_.at("eps").toDouble(), true}};
  }

  std::optional<Frozen> max_pool2d(const Argument& x) {
    auto k = int_pair(a_.at("kernel_size")), s = int_pair(a_.at("stride")), p = int_pair(a_.at("padding")),
         d = int_pair(a_.at("dilation"));
    if (!k || !s || !p || !d) return std::nullopt;
    return Frozen{"aten::max_pool2d", {x, passes_detail::int_list_argument(*k), passes_detail::int_list_argument(*s), passes_detail::int_list_argument(*p), passes_detail::int_list_argument(*d), a_.at("ceil_mode").toBool()}};
  }

  Node* n_;
  const torch::nn::Module& m_;
  const ModuleAttributes& a_;
};

}  // namespace

PassResult freeze_modules(std::shared_ptr<GraphModule> gm) {
  if (!gm) throw PassError("freeze_modules: no module given");
  Graph& g = gm->graph();
  g.lint();
  // Check every layer first (training mode throws): nothing changes on error.
  std::vector<std::pair<Node*, ModuleAttributes>> calls;
  for (Node* n : g.nodes()) {
    if (n->op() != Opcode::CallModule) continue;
    auto m = gm->get_submodule(n->target());
    auto a = module_attributes(*m);
    if (!a) continue;
    const std::string& t = a->type;
    auto training = a->attributes.find("training");
    if ((t.rfind("BatchNorm", 0) == 0 || t.find("Dropout") != std::string::npos) &&
        (training == a->attributes.end() || !training->second.isBool() || training->second.toBool()))
      throw PassError("freeze_modules: " + n->format_node() + " calls a " + t +
                      " in training mode; call eval() on the module before freezing it");
    calls.emplace_back(n, std::move(*a));
  }
  bool modified = false;
  for (auto& [n, a] : calls) {
    auto m = gm->get_submodule(n->target());
    if (a.type == "MultiheadAttention") {
      modified |= passes_detail::freeze_attention(*gm, n, *m, a);
      continue;
    }
    Freezer f(n, *m, a);
    std::optional<Frozen> frozen = f.freeze();
    if (!frozen) continue;
    Node* replacement = nullptr;
    if (frozen->is_identity) {
      replacement = frozen->args[0].to_node();
    } else {
      InsertPoint at = g.inserting_before(n);
      replacement = g.call_function(frozen->target, std::move(frozen->args), std::move(frozen->kwargs));
      replacement->meta() = n->meta();
    }
    n->replace_all_uses_with(replacement);
    g.erase_node(n);
    modified = true;
  }
  if (modified) {
    g.eliminate_dead_code();
    g.lint();
  }
  return PassResult{gm, modified};
}

}  // namespace fx
