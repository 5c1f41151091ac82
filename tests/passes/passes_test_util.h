#pragma once
// Helpers shared by the passes' tests: modules over graphs, error texts,
// golden strings, flattened outputs.

#include <fx/error.h>
#include <fx/graph_module.h>

#include <fx_paths.h>

#include <ATen/ATen.h>

#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace fx_test {

/// A GraphModule over `g` with `root` (an empty module if none).
inline std::shared_ptr<fx::GraphModule> module_of(std::shared_ptr<fx::Graph> g,
                                                  std::shared_ptr<torch::nn::Module> root = nullptr) {
  if (!root) root = std::make_shared<torch::nn::Module>("Root");
  return std::make_shared<fx::GraphModule>(root, std::move(g));
}

/// The message of the fx::Error `f` throws ("<no error>" if none).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fx::Error& e) {
    return e.what();
  }
  return "<no error>";
}

/// The string stored under `key` in tests/passes/goldens/`file` (a JSON
/// object whose values are strings; \n and \t escapes decoded).
inline std::string golden_string(const std::string& file, const std::string& key) {
  std::ifstream in(std::string(FX_SOURCE_DIR) + "/tests/passes/goldens/" + file);
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
    char e = text[++i];
    out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
  }
  return out;
}

/// Every number of a tensor or (nested) tuple of tensors, in order, as doubles.
inline std::vector<double> flat(const c10::IValue& v) {
  std::vector<double> out;
  if (v.isTensor()) {
    at::Tensor t = v.toTensor().to(at::kDouble).contiguous().reshape(-1);
    out.assign(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) {
      auto f = flat(e);
      out.insert(out.end(), f.begin(), f.end());
    }
  }
  return out;
}

}  // namespace fx_test
