#pragma once
// What every fuzz target (fuzz/*_fuzz.cpp) shares: the bytes as a file (the
// loaders take paths, as the command line does), the rule "an fx::Error of
// one line or a result, anything else is a finding", and touching every
// loaded element so that a read past a storage shows under ASan.
//
// A finding aborts the process: libFuzzer then saves the input as a crash,
// the regression driver (fuzz/driver.cpp) saves it and fails its ctest entry.

#include <fx/error.h>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>
#include <unistd.h>

namespace fx::fuzz {

/// A file holding the current input: one per process, under $TMPDIR (or
/// /tmp), removed at exit; `suffix` ends its name (".pt").
class TempFile {
 public:
  explicit TempFile(const char* suffix) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/fxcpp-fuzz-" + std::to_string(::getpid()) + suffix;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  /// Writes `size` bytes (replacing the previous input); returns the path.
  const std::string& write(const uint8_t* data, size_t size) {
    FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
      std::perror(path_.c_str());
      std::abort();  // not a finding in fxcpp, but the run cannot go on
    }
    return path_;
  }

 private:
  std::string path_;
};

/// Reports a finding and aborts.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "fxcpp fuzz finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// Runs `f`. Returning, or throwing an fx::Error whose message is one line
/// starting with `path`, is fine; any other exception (or a message of more
/// lines, or one not naming the file) is a finding.
template <typename F>
void expect_result_or_error(const std::string& path, F&& f) {
  try {
    f();
  } catch (const fx::Error& e) {
    const std::string msg = e.what();
    if (msg.find('\n') != std::string::npos) finding("fx::Error of more than one line: " + msg);
    if (msg.rfind(path + ": ", 0) != 0) finding("fx::Error not naming the file: " + msg);
  } catch (const std::exception& e) {
    finding(std::string("escaped as ") + typeid(e).name() + ": " + e.what());
  } catch (...) {
    finding("escaped as a non-std exception");
  }
}

/// Sums every element of every tensor in `v` (through tuples, lists, dicts):
/// a tensor that passed validation must be safe to read entirely.
inline double touch(const c10::IValue& v) {
  double s = 0;
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || t.numel() == 0) return 0;
    // Every byte the tensor addresses, read directly (any dtype) ...
    int64_t last = t.storage_offset();
    for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
    const auto* bytes = static_cast<const unsigned char*>(t.storage().data());
    const size_t item = t.element_size();
    for (size_t i = 0; i < static_cast<size_t>(last + 1) * item; ++i) s += bytes[i];
    // ... and through a kernel for the plain number types.
    const at::ScalarType type = t.scalar_type();
    if (!t.is_quantized() && (at::isFloatingType(type) || at::isIntegralType(type, /*includeBool=*/true)))
      s += t.to(at::kDouble).sum().item<double>();
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) s += touch(e);
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) s += touch(e);
  } else if (v.isGenericDict()) {
    for (const auto& e : v.toGenericDict()) s += touch(e.value());
  }
  return s;
}

}  // namespace fx::fuzz
