#pragma once
// The checkpoint folders of tests/decoders/make_llama_fixture.py, made once
// per build tree (again when the script is newer). The suites of a test
// program run in parallel under ctest: a folder is made under a name of its
// own and renamed into place, so no test reads one half written.
#include "fx_paths.h"

#include <fx/error.h>

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <system_error>

namespace fx_test {

inline std::string llama_fixture(const std::string& name, const std::string& flags) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(FX_BINARY_DIR) / "decoders_fixtures" / name;
  const fs::path script = fs::path(FX_SOURCE_DIR) / "tests/decoders/make_llama_fixture.py";
  if (fs::exists(dir / "expected.pt") && fs::last_write_time(script) <= fs::last_write_time(dir / "expected.pt"))
    return dir.string();
  const fs::path tmp = dir.string() + ".tmp" + std::to_string(::getpid());
  fs::remove_all(tmp);
  const std::string cmd = "/usr/bin/python3 " + script.string() + " " + tmp.string() + " " + flags;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::error_code ec;
  fs::remove_all(dir.string() + ".old" + std::to_string(::getpid()), ec);
  if (fs::exists(dir)) fs::rename(dir, dir.string() + ".old" + std::to_string(::getpid()), ec);
  fs::rename(tmp, dir, ec);
  if (ec) fs::remove_all(tmp, ec);  // another process put its own in place first
  fs::remove_all(dir.string() + ".old" + std::to_string(::getpid()), ec);
  return dir.string();
}

/// The text of the fx::Error `f` throws, or "no error".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fx::Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace fx_test
