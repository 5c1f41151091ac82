// Export to TorchScript: trace a small C++ model, rewrite its graph with a
// pass (every relu(a + b) becomes the fused aten::_add_relu), write it with
// fx::export_torchscript and run the file with stock torch::jit::load — the
// way an edited graph reaches Python (torch.jit.load), mobile, or any
// TorchScript runtime.
//
//   build/examples/export_torchscript [OUT.pt]
#include <ATen/ATen.h>
#include <fx/export.h>
#include <fx/fx.h>
#include <fx/passes/subgraph_rewriter.h>
#include <fx/trace.h>

#include <torch/csrc/jit/serialization/import.h>
#include <torch/nn/modules/linear.h>

#include <cstdio>
#include <iostream>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::cout << (ok ? "  ok    " : "  FAIL  ") << what << "\n";
  failures += ok ? 0 : 1;
}

at::Tensor t(const c10::IValue& v) { return v.toTensor(); }

/// A two-layer MLP with a residual: plain torch::nn code.
struct MlpImpl : torch::nn::Module {
  MlpImpl()
      : fc1(register_module("fc1", torch::nn::Linear(8, 8))), fc2(register_module("fc2", torch::nn::Linear(8, 4))) {}
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = at::relu(fc1(x) + x);  // relu(a + b): rewritten below
    return fc2(h).softmax(-1);
  }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Mlp);

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "export_torchscript_example.pt";
  torch::manual_seed(0);
  Mlp model;
  const at::Tensor x = at::randn({3, 8});

  // 1. Trace, then rewrite relu(a + b) → _add_relu(a, b).
  auto gm = fx::symbolic_trace(model, {x});
  auto pattern =
      fx::symbolic_trace([](std::vector<c10::IValue> a) -> c10::IValue { return at::relu(t(a[0]) + t(a[1])); }, {x, x});
  auto replacement = fx::symbolic_trace(
      [](std::vector<c10::IValue> a) -> c10::IValue { return at::_add_relu(t(a[0]), t(a[1])); }, {x, x});
  check(fx::replace_pattern(*gm, *pattern, *replacement).size() == 1, "one relu(a + b) rewritten");
  std::cout << "rewritten graph:\n" << gm->code() << "\n";

  // 2. Export: fc1 / fc2 (torch::nn::Linear leaves) become aten::linear on
  //    the submodules' parameters; the write is atomic.
  fx::export_torchscript(*gm, path);
  std::cout << "wrote " << path << "\n";

  // 3. Load with stock TorchScript and compare.
  torch::jit::Module loaded = torch::jit::load(path);
  std::cout << "TorchScript graph of the file:\n" << *loaded.get_method("forward").graph() << "\n";
  const at::Tensor want = gm->forward(x);
  const at::Tensor got = loaded.forward({x}).toTensor();
  check(at::allclose(got, want, 1e-6, 1e-6), "torch::jit::load(file).forward == GraphModule::forward (max diff " +
                                                  std::to_string((got - want).abs().max().item<double>()) + ")");
  check(at::allclose(got, model->forward(x), 1e-6, 1e-6), "... == the eager C++ model");
  bool fused = loaded.get_method("forward").graph()->toString().find("aten::_add_relu") != std::string::npos;
  check(fused, "the exported graph holds the rewrite (aten::_add_relu)");

  // 4. What cannot be exported is an error naming the node, and no file.
  fx::register_function("mylib::twice", [](std::vector<c10::IValue>& a, fx::ValueKwargs&) -> c10::IValue {
    return t(a[0]) * 2;
  });
  auto g = std::make_shared<fx::Graph>();
  g->output(g->call_function("mylib::twice", {g->placeholder("x")}));
  fx::GraphModule custom(std::make_shared<torch::nn::Module>(), g);
  std::remove((path + ".bad").c_str());
  try {
    fx::export_torchscript(custom, path + ".bad");
    check(false, "a C++ function is not exportable");
  } catch (const fx::ExportError& e) {
    std::cout << "  " << e.what() << "\n";
    std::FILE* f = std::fopen((path + ".bad").c_str(), "rb");
    check(f == nullptr, "no file after a failed export");
    if (f != nullptr) std::fclose(f);
  }
  std::remove(path.c_str());
  std::cout << (failures == 0 ? "all checks passed\n" : "FAILED\n");
  return failures == 0 ? 0 : 1;
}
