// Fuzz target: the TorchScript importer (fx::import_torchscript). Every input
// must give a GraphModule or one fx::Error line naming the file; an imported
// graph must lint and print its code. Nothing is run (a damaged model may
// legitimately compute for long).
// fuzz-seeds: torchscript
// fuzz-libs: fxcpp_import
#include "fuzz_target.h"

#include <fx/import.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fx::fuzz::TempFile file(".pt");
  const std::string& path = file.write(data, size);
  fx::fuzz::expect_result_or_error(path, [&] {
    auto gm = fx::import_torchscript(path);
    gm->graph().lint();
    if (gm->code().empty()) fx::fuzz::finding("an imported module without code");
  });
  return 0;
}
