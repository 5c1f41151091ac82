// Fuzz target: the input / tensor file loader (fx::load_value, which runs
// fx::validate_value on what it loads). Every input must give a value whose
// tensors can be read entirely, or one fx::Error line naming the file.
// fuzz-seeds: tensors
// fuzz-libs: fxcpp_import
#include "fuzz_target.h"

#include <fx/tensor_file.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fx::fuzz::TempFile file(".pt");
  const std::string& path = file.write(data, size);
  fx::fuzz::expect_result_or_error(path, [&] { fx::fuzz::touch(fx::load_value(path)); });
  return 0;
}
