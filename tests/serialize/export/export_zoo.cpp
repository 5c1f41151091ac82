// Driver of the export ctest entries (tests/serialize/export.cmake): for every
// model NAME, imports MODELS/NAME.pt, rewrites it (remove_dropout, then
// common subexpression elimination and dead code elimination), checks that the
// rewrite did not change its output on MODELS/NAME.input.pt, and exports it
// to OUT/NAME.pt for python/check_export.py.
//
//   export_zoo MODELS OUT NAME...
#include <fx/export.h>
#include <fx/import.h>
#include <fx/passes/cse.h>
#include <fx/passes/dead_code.h>
#include <fx/passes/remove_dropout.h>
#include <fx/tensor_file.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: export_zoo MODELS OUT NAME...\n";
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
      auto t0 = std::chrono::steady_clock::now();
      fx::export_torchscript(*gm, out + "/" + name + ".pt");
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%-20s %4zu -> %4zu nodes  dropout removed: %-3s cse: %-3s  export %.1f ms\n", name.c_str(),
                  nodes_before, gm->graph().nodes().size(), dropout ? "yes" : "no", cse ? "yes" : "no", ms);
    } catch (const std::exception& e) {
      std::printf("%-20s FAIL %s\n", name.c_str(), e.what());
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
