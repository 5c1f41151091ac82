#pragma once
// Goldens recorded from Python torch.fx: JSON objects whose values are
// strings (json.dump output), read without a JSON library.

#include <fx_paths.h>

#include <fstream>
#include <sstream>
#include <string>

namespace fx_test {

/// The string stored under `key` in tests/`file` (e.g. "passes/goldens/split.json"),
/// with \n, \t, \" and \\ escapes decoded; "<no golden KEY>" if absent.
inline std::string golden_string(const std::string& file, const std::string& key) {
  std::ifstream in(std::string(FX_SOURCE_DIR) + "/tests/" + file);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::string needle = "\"" + key + "\": \"";
  size_t i = text.find(needle);
  if (i == std::string::npos) return "<no golden " + key + ">";
  std::string out;
  for (i += needle.size(); i < text.size() && text[i] != '"'; ++i) {
    if (text[i] != '\\') {
      out += text[i];
      continue;
    }
    const char e = text[++i];
    out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
  }
  return out;
}

}  // namespace fx_test
