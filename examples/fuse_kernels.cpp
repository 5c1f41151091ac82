// fuse_kernels: fxcpp's compiler turns a chain of pointwise operators and
// norms into one generated C++ kernel.
//
// A C++ module's tail as transformer blocks write it — a residual add, a
// layer norm, a GELU (tanh) and a scaled softmax — is traced, its shapes
// propagated, and fused: the graph's ATen nodes become fxcpp::fused_kernel
// nodes whose programs are printed, with the start of the C++ generated for
// the first. The fused module computes what the eager one does (checked;
// exit 1 otherwise). Kernels are compiled by the system's compiler once and
// cached (~/.cache/fxcpp/kernels); without a compiler nothing is fused.
//
//   build/examples/fuse_kernels
#include <fx/compiler/fuse_kernels.h>
#include <fx/passes/shape_prop.h>
#include <fx/trace.h>

#include <torch/torch.h>

#include <iostream>

namespace {

struct BlockTailImpl : torch::nn::Module {
  BlockTailImpl() {
    weight = register_parameter("weight", torch::randn({256}));
    bias = register_parameter("bias", torch::randn({256}));
  }
  torch::Tensor forward(torch::Tensor x, torch::Tensor residual) {
    torch::Tensor h = torch::layer_norm(x + residual, {256}, weight, bias, 1e-5);
    h = torch::gelu(h, "tanh");
    return torch::softmax(h * 0.125, -1);
  }
  torch::Tensor weight, bias;
};
TORCH_MODULE(BlockTail);

}  // namespace

int main() {
  torch::manual_seed(0);
  BlockTail model;
  const std::vector<c10::IValue> inputs = {torch::randn({4, 128, 256}), torch::randn({4, 128, 256})};
  auto gm = fx::symbolic_trace(model.ptr(), inputs);
  const torch::Tensor want = gm->forward(inputs).toTensor();
  if (!fx::compiler::can_compile_kernels()) {
    std::cout << "no C++ compiler here: fuse_kernels would leave the graph to ATen\n";
    return 0;
  }

  fx::ShapeProp(gm).propagate(inputs);  // groups are decided on shapes and dtypes
  fx::compiler::FuseReport report;
  fx::compiler::fuse_kernels(*gm, {}, &report);
  std::cout << "fused " << report.fused_nodes << " nodes into " << report.groups << " kernel(s), "
            << report.compiled << " compiled now (" << report.compile_ms << " ms), the others cached\n";
  for (const fx::compiler::FusedGroup& g : report.details)
    std::cout << "  " << g.node << ": " << g.program << "\n";
  std::cout << gm->graph().str() << "\n";
  const std::string source = fx::compiler::kernel_source(report.details.at(0).program);
  std::cout << "its C++ (" << source.size() << " bytes), the kernel's start:\n"
            << source.substr(source.find("extern \"C\""), 400) << "...\n";

  const torch::Tensor got = gm->forward(inputs).toTensor();
  const double diff = (got - want).abs().max().item<double>();
  std::cout << "max difference from eager: " << diff << "\n";
  return report.groups >= 1 && diff < 1e-5 ? 0 : 1;
}
