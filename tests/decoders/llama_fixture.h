#pragma once
// The checkpoint folders of tests/decoders/make_llama_fixture.py, made once
// per build tree (again when the script is newer). The suites of a test
// program run in parallel under ctest: a folder is made under a name of its
// own and renamed into place, so no test reads one half written.
#include "fx_paths.h"

#include <fx/error.h>
#include <fx/graph.h>
#include <fx/tensor_file.h>

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <system_error>
#include <vector>

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

/// What a fixture folder's expected.pt holds (make_llama_fixture.py).
struct LlamaExpected {
  /// The prompt's ids, and the greedy ids continuing it.
  std::vector<int64_t> prompt, greedy;
  /// Hugging Face's logits of the prompt [1, T, V].
  at::Tensor logits;
};

inline std::vector<int64_t> ids_of(const at::Tensor& t) {
  const at::Tensor c = t.flatten().contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

/// The folder `dir`'s expected.pt.
inline LlamaExpected llama_expected(const std::string& dir) {
  const auto t = fx::load_value(dir + "/expected.pt").toTupleRef().elements();
  return {ids_of(t[0].toTensor()), ids_of(t[2].toTensor()), t[1].toTensor()};
}

/// How many call_function nodes of `target` the graph has.
inline size_t count_calls(const fx::Graph& g, const std::string& target) {
  size_t n = 0;
  for (const fx::Node* node : g.nodes()) n += node->op() == fx::Opcode::CallFunction && node->target() == target;
  return n;
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
