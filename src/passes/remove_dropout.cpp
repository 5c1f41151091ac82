// remove_dropout: every dropout replaced by its input (inference graphs).
#include <fx/passes/remove_dropout.h>

#include "passes/bypass.h"

#include <torch/nn/modules/dropout.h>

#include <unordered_set>

namespace fx {

namespace {

bool is_dropout_module(const torch::nn::Module& m) {
  if (dynamic_cast<const torch::nn::DropoutImpl*>(&m) || dynamic_cast<const torch::nn::Dropout2dImpl*>(&m) ||
      dynamic_cast<const torch::nn::Dropout3dImpl*>(&m) || dynamic_cast<const torch::nn::AlphaDropoutImpl*>(&m) ||
      dynamic_cast<const torch::nn::FeatureAlphaDropoutImpl*>(&m))
    return true;
  // TorchScript leaves from import are named by their Python class.
  static const std::unordered_set<std::string> names = {"Dropout", "Dropout1d", "Dropout2d", "Dropout3d",
                                                        "AlphaDropout", "FeatureAlphaDropout"};
  return names.count(m.name()) > 0;
}

bool is_dropout_op(const std::string& name) {
  static const std::unordered_set<std::string> names = {
      "dropout", "dropout_", "feature_dropout", "feature_dropout_", "alpha_dropout", "alpha_dropout_",
      "feature_alpha_dropout", "feature_alpha_dropout_"};
  return names.count(name) > 0;
}

/// Whether `n` is a dropout; its input is args[0].
bool is_dropout(GraphModule& gm, const Node* n) {
  switch (n->op()) {
    case Opcode::CallModule: return is_dropout_module(*gm.get_submodule(n->target()));
    case Opcode::CallMethod: return is_dropout_op(n->target());
    case Opcode::CallFunction: {
      const std::string& t = n->target();
      if (t.rfind("aten::", 0) != 0) return false;
      std::string op = t.substr(6, t.find('.') == std::string::npos ? std::string::npos : t.find('.') - 6);
      return is_dropout_op(op);
    }
    default: return false;
  }
}

}  // namespace

PassResult remove_dropout(std::shared_ptr<GraphModule> gm) {
  if (!gm) throw PassError("remove_dropout: no module given");
  // Found in every graph before any edit (get_submodule may throw): nothing
  // changes on bad input.
  bool removed = passes_detail::bypass_nodes(*gm, [](GraphModule& m, const Node* n) {
    if (!is_dropout(m, n)) return false;
    if (n->args().empty() || !n->args()[0].is_node())
      throw PassError("remove_dropout: " + n->format_node() + " has no tensor input");
    return true;
  });
  return PassResult{gm, removed};
}

}  // namespace fx
