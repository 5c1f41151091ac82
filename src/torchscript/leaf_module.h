#pragma once
// Internal: the torch::nn::Module side of an imported TorchScript module.
//
// A GraphModule holds torch::nn::Modules. Each TorchScript submodule gets a
// mirror under the same name: a JitLeafModule for leaves (its forward runs the
// scripted forward), a plain torch::nn::Module otherwise. Mirrors register the
// TorchScript module's tensors as their parameters and buffers under the same
// names: the same tensors, never copies.

#include <fx/torchscript.h>

#include <torch/csrc/jit/api/module.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

// The namespace is still import_detail: these helpers moved from src/import to
// src/torchscript (fxcpp_torchscript) so that fx::load needs no importer; the
// name was kept to limit churn.
namespace fx::import_detail {

/// A TorchScript leaf module as a torch::nn::Module: forward calls the
/// scripted forward; parameters and buffers are the scripted module's own.
///
/// A leaf may have no forward: torch.jit.trace keeps forward only for the
/// submodules that were called, and a module used only through its weights
/// (F.linear(x, self.proj.weight)) is never called. Such a leaf is fine until
/// something calls it. A scripted module whose forward is overloaded
/// (nn.LSTM: forward__0 for tensors, forward__1 for PackedSequence) runs the
/// first overload whose schema accepts the arguments, as TorchScript does.
class JitLeafModule : public torch::nn::Module {
 public:
  /// Wraps `module`, whose class name is `type_name`.
  JitLeafModule(torch::jit::Module module, const std::string& type_name);
  /// Calls the scripted forward (or the matching forward__N) with `args`
  /// (self is added), TorchScript's graph optimizer off: every call, of
  /// every instance of the class, computes what eager PyTorch computes.
  /// Throws fx::Error when the module has no forward.
  c10::IValue forward(std::vector<c10::IValue> args);
  /// The wrapped TorchScript module.
  const torch::jit::Module& jit_module() const { return module_; }
  /// Sets this mirror's mode and the TorchScript module's `training`
  /// attributes (its own and its submodules'), which its forward reads:
  /// gm->train() trains the leaves too (batch norm on batch statistics).
  void train(bool on = true) override;
  /// forward, or else the forward__N overloads, in order (empty: none).
  const std::vector<torch::jit::Function*>& forwards() const { return forwards_; }

 private:
  torch::jit::Module module_;
  std::string type_name_;
  std::vector<torch::jit::Function*> forwards_;
};

/// Whether `method` names a module's forward: "forward" or an overload
/// "forward__0", "forward__1" ... (TorchScript's names for @overload'ed forwards).
bool is_forward_method(const std::string& method);

/// Registers JitLeafModule's forward with register_module_forward (once).
void register_leaf_forward();

/// Builds the torch::nn::Module mirror of `module` (at `qualified_name`; "" for
/// the root) and all its submodules; `is_leaf` picks JitLeafModules.
std::shared_ptr<torch::nn::Module> build_module_tree(const torch::jit::Module& module,
                                                     const std::string& qualified_name,
                                                     const LeafPredicate& is_leaf);

/// The last part of a class name ("__torch__.torch.nn.modules.conv.Conv2d" → "Conv2d").
std::string short_type_name(const std::string& type_name);

}  // namespace fx::import_detail
