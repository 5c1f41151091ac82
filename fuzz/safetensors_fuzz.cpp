// Fuzz target: the safetensors reader (fx::load_safetensors). Every input
// must give tensors whose bytes can all be read, or one fx::Error line
// naming the file.
// fuzz-seeds: safetensors
// fuzz-libs: fxcpp_torchscript
#include "fuzz_target.h"

#include <fx/safetensors.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fx::fuzz::TempFile file(".safetensors");
  const std::string& path = file.write(data, size);
  fx::fuzz::expect_result_or_error(path, [&] {
    for (const auto& [name, tensor] : fx::load_safetensors(path).tensors) fx::fuzz::touch(tensor);
  });
  return 0;
}
