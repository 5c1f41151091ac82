#pragma once
/// \file
/// fuse (torch.ao.quantization.quantize_fx.fuse_fx): the layer sequences
/// that quantize as one op become one module before observers go in.
///
/// Patterns (the native backend's, eval mode): Conv1d/2d/3d + BatchNorm
/// (+ ReLU), Conv + ReLU, Linear + BatchNorm1d, Linear + ReLU, where ReLU is
/// a ReLU module or aten::relu / aten::relu_ (F.relu, torch.relu) and every
/// node but the last has no other user. As in Python, the fused module
/// takes the first layer's place (same node, same name, same target) and the
/// batch norm and relu nodes go:
///  - conv + bn → a Conv2d (torch::nn::Conv2d) whose weight and bias are
///    fuse_conv_bn_eval's (W·γ/√(σ²+ε) and (b−μ)·γ/√(σ²+ε)+β, in float32 as
///    Python computes them, so weights match bitwise);
///  - ... + relu → a FusedModule "ConvReLU2d" / "LinearReLU" whose child "0"
///    is that layer and child "1" a ReLU (nni.ConvReLU2d's layout).
/// The layers of `gm` itself are never changed: the result is a new
/// GraphModule sharing the layers that were not fused.

#include <fx/graph_module.h>

#include <memory>
#include <string>
#include <vector>

namespace fx::quantization {

/// A fused layer + ReLU (torch.ao.nn.intrinsic ConvReLU2d, LinearReLU ...):
/// forward(x) = relu(child "0"(x)).
class FusedModule : public torch::nn::Module {
 public:
  /// `type` is Python's class name ("ConvReLU2d"); `first` the conv / linear layer.
  FusedModule(std::string type, std::shared_ptr<torch::nn::Module> first);
  /// relu(first(x)).
  at::Tensor forward(const at::Tensor& x);
  /// Python's class name.
  const std::string& type() const { return type_; }
  /// The conv / linear layer (child "0").
  const std::shared_ptr<torch::nn::Module>& first() const { return first_; }

 private:
  std::string type_;
  std::shared_ptr<torch::nn::Module> first_;
};

/// What fuse() did: one line per fusion, "conv1: Conv2d + BatchNorm2d + ReLU -> ConvReLU2d".
struct FuseReport {
  /// The fusions, in graph order.
  std::vector<std::string> fused;
};

/// fuse_fx(gm): a new GraphModule with the patterns above fused. Throws
/// fx::Error when a batch norm to fuse is in training mode ("Fusion only for
/// eval!", as Python); `gm` is unchanged either way.
std::shared_ptr<GraphModule> fuse(const std::shared_ptr<GraphModule>& gm, FuseReport* report = nullptr);

/// Registers FusedModule's forward and attributes (fuse() calls it).
void register_fused_modules();

}  // namespace fx::quantization
