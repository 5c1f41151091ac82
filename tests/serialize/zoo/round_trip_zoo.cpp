// Round-trips every model of the import zoo (python/export_models.py) through
// fx::save / fx::load: the loaded module must print the same graph, generate
// the same code and compute bitwise-equal outputs on the model's input.
//
// usage: round_trip_zoo MODELS_DIR OUT_DIR MODEL...   (the .fx files go to OUT_DIR and are removed)
#include "../same_value.h"

#include <fx/import.h>
#include <fx/serialize.h>
#include <fx/tensor_file.h>

#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

using fx::serialize_test::same_value;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: round_trip_zoo MODELS_DIR OUT_DIR MODEL...\n";
    return 2;
  }
  const std::string dir = argv[1];
  const std::string out_dir = argv[2];
  std::filesystem::create_directories(out_dir);
  int failures = 0;
  for (int i = 3; i < argc; ++i) {
    const std::string name = argv[i];
    const std::string fx_path = out_dir + "/" + name + ".fx";
    try {
      auto gm = fx::import_torchscript(dir + "/" + name + ".pt");
      fx::SaveReport report = fx::save(*gm, fx_path);
      auto loaded = fx::load(fx_path);
      std::vector<c10::IValue> inputs = fx::load_inputs(dir + "/" + name + ".input.pt");
      torch::NoGradGuard no_grad;
      const bool graph_ok = gm->graph().str() == loaded->graph().str();
      const bool code_ok = gm->code() == loaded->code();
      const bool out_ok = same_value(gm->forward(inputs), loaded->forward(inputs));
      std::cout << name << ": " << report.bytes << " bytes, " << report.storages << " storages, graph "
                << (graph_ok ? "same" : "DIFFERENT") << ", code " << (code_ok ? "same" : "DIFFERENT") << ", outputs "
                << (out_ok ? "bitwise equal" : "DIFFERENT") << std::endl;
      if (!graph_ok || !code_ok || !out_ok) ++failures;
    } catch (const std::exception& e) {
      std::cout << name << ": FAILED: " << e.what() << std::endl;
      ++failures;
    }
    std::remove(fx_path.c_str());
  }
  return failures == 0 ? 0 : 1;
}
