// Fuzz target: fxcpp's own file (fx::load, issue #10). Every input must give
// a GraphModule whose graph lints and prints, or one fx::Error line naming
// the file.
// fuzz-seeds: fx
// fuzz-libs: fxcpp_serialize
#include "fuzz_target.h"

#include <fx/serialize.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fx::fuzz::TempFile file(".fx");
  const std::string& path = file.write(data, size);
  fx::fuzz::expect_result_or_error(path, [&] {
    auto gm = fx::load(path);
    gm->graph().lint();
    (void)gm->code();
  });
  return 0;
}
