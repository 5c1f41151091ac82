// Driver of the export ctest entries (tests/serialize/export.cmake): for every
// model NAME, imports MODELS/NAME.pt, rewrites it (remove_dropout, then
// common subexpression elimination and dead code elimination), checks that the
// rewrite did not change its output on MODELS/NAME.input.pt, and exports it
// to OUT/NAME.pt for python/check_export.py.
//
//   export_zoo MODELS OUT NAME...
//   export_zoo --traced REF OUT
//
// --traced: traces the C++ ResidualNet (include/fx/examples/residual_net.h),
// rewrites every relu(a + b) to aten::_add_relu with replace_pattern, exports
// it to OUT/residual_net.pt and writes REF/residual_net.{input,output}.pt
// (the GraphModule's output, torch.load-able) for check_export.py.
#include <fx/examples/residual_net.h>
#include <fx/export.h>
#include <fx/import.h>
#include <fx/passes/cse.h>
#include <fx/passes/dead_code.h>
#include <fx/passes/remove_dropout.h>
#include <fx/passes/subgraph_rewriter.h>
#include <fx/tensor_file.h>
#include <fx/trace.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

namespace {

at::Tensor t(const c10::IValue& v) { return v.toTensor(); }

/// The --traced mode (see the top of the file).
int export_traced(const std::string& ref, const std::string& out) {
  torch::manual_seed(0);
  fx::examples::ResidualNet model;
  model->eval();
  const at::Tensor x = at::randn({2, 3, 16, 16});
  auto gm = fx::symbolic_trace(model, {x});
  auto pattern =
      fx::symbolic_trace([](std::vector<c10::IValue> a) -> c10::IValue { return at::relu(t(a[0]) + t(a[1])); }, {x, x});
  auto replacement = fx::symbolic_trace(
      [](std::vector<c10::IValue> a) -> c10::IValue { return at::_add_relu(t(a[0]), t(a[1])); }, {x, x});
  size_t rewrites = fx::replace_pattern(*gm, *pattern, *replacement).size();
  if (rewrites == 0) throw fx::Error("replace_pattern found no relu(a + b)");
  std::filesystem::create_directories(ref);
  std::filesystem::create_directories(out);
  fx::save_value(ref + "/residual_net.input.pt", x);
  fx::save_value(ref + "/residual_net.output.pt", gm->forward({x}));
  fx::export_torchscript(*gm, out + "/residual_net.pt");
  std::printf("residual_net: traced, %zu relu(a + b) rewritten, exported\n", rewrites);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--traced") {
    try {
      return export_traced(argv[2], argv[3]);
    } catch (const std::exception& e) {
      std::printf("residual_net FAIL %s\n", e.what());
      return 1;
    }
  }
  if (argc < 4) {
    std::cerr << "usage: export_zoo MODELS OUT NAME... | export_zoo --traced REF OUT\n";
    return 2;
  }
  const std::string models = argv[1], out = argv[2];
  std::filesystem::create_directories(out);
  int failures = 0;
  for (int i = 3; i < argc; ++i) {
    const std::string name = argv[i];
    try {
      auto gm = fx::import_torchscript(models + "/" + name + ".pt");
      std::vector<c10::IValue> inputs = {fx::load_value(models + "/" + name + ".input.pt")};
      at::Tensor before = gm->forward(inputs).toTensor();
      size_t nodes_before = gm->graph().nodes().size();
      bool dropout = fx::remove_dropout(gm).modified;
      bool cse = fx::CSEPass().call(gm).modified;
      fx::eliminate_dead_code(gm);
      at::Tensor after = gm->forward(inputs).toTensor();
      if (!at::equal(before, after)) throw fx::Error("the rewrite changed the output");
      using clock = std::chrono::steady_clock;
      auto ms_since = [](clock::time_point t) {
        return std::chrono::duration<double, std::milli>(clock::now() - t).count();
      };
      auto t0 = clock::now();
      fx::to_torchscript(*gm);  // timed alone: building the module, without the write
      double build_ms = ms_since(t0);
      t0 = clock::now();
      fx::export_torchscript(*gm, out + "/" + name + ".pt");
      double export_ms = ms_since(t0);
      std::printf("%-20s %4zu -> %4zu nodes  dropout removed: %-3s cse: %-3s  "
                  "to_torchscript %.1f ms, export_torchscript %.1f ms\n",
                  name.c_str(), nodes_before, gm->graph().nodes().size(), dropout ? "yes" : "no", cse ? "yes" : "no",
                  build_ms, export_ms);
    } catch (const std::exception& e) {
      std::printf("%-20s FAIL %s\n", name.c_str(), e.what());
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
