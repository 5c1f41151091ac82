// Layout choices stay unobservable: values leaving a channels_last region get
// the memory format the unoptimised program had (see keep_layouts.h).
#include "optimize/keep_layouts.h"

#include "optimize/buffer_reuse.h"

#include <unordered_map>
#include <unordered_set>

namespace fx::passes_detail {
namespace {

/// How a node reads its tensor inputs.
enum class Reads {
  Sensitive,  ///< may depend on the layout (views, outputs, modules, unknown ops): restore first
  Follows,    ///< values independent of layout; the result is in the region too
  InPlace,    ///< like Follows, writing into its first argument (in the region iff that is)
  Sizes,      ///< reads only sizes / dtype; the result is no tensor of the region
  Convolves,  ///< fxcpp::onednn_conv2d: starts a region (channels_last output)
};

/// Ops whose values do not depend on their inputs' strides (ATen names,
/// Tensor method names, in-place forms with a trailing '_').
const std::unordered_set<std::string>& layout_free() {
  static const std::unordered_set<std::string> ops = {
      "add",     "sub",        "mul",  "div",   "relu",       "relu6",      "hardtanh",   "silu",
      "sigmoid", "hardswish",  "hardsigmoid", "gelu", "tanh",  "clamp",      "clamp_min",  "clamp_max",
      "leaky_relu", "elu",     "neg",  "exp",   "abs",        "sqrt",       "rsqrt",      "mish",
      "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "batch_norm", "mean", "cat", "dropout"};
  return ops;
}

Reads by_name(std::string name) {
  if (name == "size" || name == "dim" || name == "numel") return Reads::Sizes;
  const bool in_place = !name.empty() && name.back() == '_';
  if (in_place) name.pop_back();
  if (!layout_free().count(name)) return Reads::Sensitive;
  return in_place ? Reads::InPlace : Reads::Follows;
}

Reads reads(const Node* n) {
  if (n->op() == Opcode::CallMethod) return by_name(n->target());
  if (n->op() != Opcode::CallFunction) return Reads::Sensitive;
  const std::string& t = n->target();
  if (t == "fxcpp::onednn_conv2d") return Reads::Convolves;
  if (t == "fxcpp::max_pool2d" || t == "fxcpp::adaptive_avg_pool2d") return Reads::Follows;
  if (t == "operator.add" || t == "operator.sub" || t == "operator.mul" || t == "operator.truediv")
    return Reads::Follows;
  if (t == "operator.iadd" || t == "operator.isub" || t == "operator.imul" || t == "operator.itruediv")
    return Reads::InPlace;
  if (t == "getattr" && n->args().size() == 2 && n->args()[1].kind() == Argument::Kind::String) {
    const std::string& attr = n->args()[1].to_string();
    if (attr == "shape" || attr == "ndim" || attr == "dtype" || attr == "device") return Reads::Sizes;
  }
  const std::string aten = aten_op_name(n);
  return aten.empty() ? Reads::Sensitive : by_name(aten);
}

class LayoutKeeper {
 public:
  explicit LayoutKeeper(Graph& g) : g_(g) {}

  size_t run() {
    for (Node* n : g_.nodes().to_vector()) visit(n);
    return restored_;
  }

 private:
  void visit(Node* n) {
    const Reads r = n->op() == Opcode::Output ? Reads::Sensitive : reads(n);
    if (r == Reads::Convolves) {
      // Eager's conv2d writes in the format its input suggests: the input's
      // own, or (input in a region) the one the region's first input suggested.
      Node* input = n->args()[0].to_node();
      auto it = source_.find(input);
      source_[n] = it != source_.end() ? it->second : input;
      return;
    }
    std::vector<Node*> in_region;
    for (Node* i : n->all_input_nodes())
      if (source_.count(i)) in_region.push_back(i);
    if (in_region.empty()) return;
    switch (r) {
      case Reads::Follows:
        source_[n] = source_.at(in_region[0]);
        break;
      case Reads::InPlace:
        if (!n->args().empty() && n->args()[0].is_node() && source_.count(n->args()[0].to_node()))
          source_[n] = source_.at(n->args()[0].to_node());
        break;
      case Reads::Sizes:
      case Reads::Convolves:
        break;
      case Reads::Sensitive:
        for (Node* v : in_region) restore(v);
        break;
    }
  }

  /// Replaces every use of `v` by a copy in the unoptimised program's format.
  void restore(Node* v) {
    Node* format = format_of(source_.at(v));
    Node* restored = nullptr;
    {
      InsertPoint at = g_.inserting_after(v);
      restored = g_.call_function("fxcpp::restore_layout", {v, format});
    }
    v->replace_all_uses_with(restored);
    restored->meta() = v->meta();
    source_.erase(v);
    ++restored_;
  }

  /// fxcpp::suggest_memory_format(input), once per input, right after it
  /// (after the last placeholder for a placeholder).
  Node* format_of(Node* input) {
    auto it = formats_.find(input);
    if (it != formats_.end()) return it->second;
    Node* after = input;
    if (input->op() == Opcode::Placeholder)
      for (Node* n : g_.nodes())
        if (n->op() == Opcode::Placeholder) after = n;
    Node* f = nullptr;
    {
      InsertPoint at = g_.inserting_after(after);
      f = g_.call_function("fxcpp::suggest_memory_format", {input});
    }
    formats_[input] = f;
    return f;
  }

  Graph& g_;
  /// Each value of a channels_last region → the input of the region's first convolution.
  std::unordered_map<const Node*, Node*> source_;
  std::unordered_map<const Node*, Node*> formats_;
  size_t restored_ = 0;
};

}  // namespace

size_t keep_layouts(Graph& g) { return LayoutKeeper(g).run(); }

}  // namespace fx::passes_detail
