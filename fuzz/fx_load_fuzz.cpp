// Fuzz target: fxcpp's own file (fx::load, issue #10). Every input must give
// a GraphModule whose graph lints and prints, or one fx::Error line naming
// the file. A file that loads must hold no record whose bytes differ from the
// CRC-32 its zip directory gives (checked here on the raw file, apart from
// fx::load's own reading): a changed weight that loads silently is a finding
// too (issue #27), not only a crash.
// fuzz-seeds: fx
// fuzz-libs: fxcpp_serialize
#include "fuzz_target.h"

#include "torchscript/file_checks.h"

#include <fx/serialize.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fx::fuzz::TempFile file(".fx");
  const std::string& path = file.write(data, size);
  fx::fuzz::expect_result_or_error(path, [&] {
    auto gm = fx::load(path);
    gm->graph().lint();
    (void)gm->code();
    const char* bytes = reinterpret_cast<const char*>(data);
    for (const auto& r : fx::import_detail::check_zip(path, bytes, size))
      if (!r.compressed && fx::import_detail::crc32(bytes + r.data_offset, r.size) != r.crc32)
        fx::fuzz::finding("loaded although record '" + r.name + "' does not match its CRC-32");
  });
  return 0;
}
