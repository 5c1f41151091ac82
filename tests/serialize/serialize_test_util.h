#pragma once
// Shared by the tests of fx::save / fx::load: round trips and the checks
// that a loaded module is the saved one (printed graph, code, outputs).
#include "../common/error_of.h"
#include "same_value.h"

#include <fx/serialize.h>

#include <caffe2/serialize/inline_container.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/module.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace fx::serialize_test {

/// Saves to memory and loads back.
inline std::shared_ptr<GraphModule> round_trip(const GraphModule& gm, SaveReport* report = nullptr) {
  return load_from_string(save_to_string(gm, {}, report), "mem.fx");
}

/// The loaded module prints, generates code and computes as the saved one.
inline void expect_same_module(GraphModule& saved, GraphModule& loaded, const std::vector<c10::IValue>& inputs) {
  EXPECT_EQ(saved.graph().str(), loaded.graph().str());
  EXPECT_EQ(saved.code(), loaded.code());
  EXPECT_EQ(saved.print_readable(), loaded.print_readable());
  EXPECT_EQ(saved.is_training(), loaded.is_training());
  torch::NoGradGuard no_grad;
  c10::IValue a = saved.forward(inputs);
  c10::IValue b = loaded.forward(inputs);
  EXPECT_TRUE(same_value(a, b));
}

/// A scripted model (x * self.scale.s + self.b) whose submodule has a
/// torch.nn class name, so that import keeps it as a TorchScript leaf.
inline torch::jit::Module scripted_model_with_leaf() {
  torch::jit::Module leaf("__torch__.torch.nn.modules.activation.Scale");
  leaf.register_parameter("s", at::full({3}, 2.0), false);
  leaf.define("def forward(self, x):\n  return x * self.s\n");
  torch::jit::Module root("__torch__.Net");
  root.register_module("scale", leaf);
  root.register_buffer("b", at::arange(3, at::kFloat));
  root.define("def forward(self, x):\n  return self.scale.forward(x) + self.b\n");
  return root;
}

/// A zip written by libtorch's writer with the given records.
inline std::string archive(const std::vector<std::pair<std::string, std::string>>& records) {
  std::string out;
  {
    caffe2::serialize::PyTorchStreamWriter w([&](const void* d, size_t n) {
      out.append(static_cast<const char*>(d), n);
      return n;
    });
    for (const auto& [name, data] : records) w.writeRecord(name, data.data(), data.size());
    w.writeEndOfFile();
  }
  return out;
}

/// The document inside a saved file.
inline nlohmann::json document_of(const std::string& bytes) {
  std::istringstream in(bytes);
  caffe2::serialize::PyTorchStreamReader reader(&in);
  auto [data, size] = reader.getRecord("extra/fxcpp.json");
  return nlohmann::json::parse(std::string(static_cast<const char*>(data.get()), size));
}

/// Where each stored record of the zip `bytes` lies: name (with the
/// archive's folder) -> [offset, offset + size), read with libtorch's reader.
inline std::vector<std::tuple<std::string, size_t, size_t>> record_extents(const std::string& bytes) {
  std::istringstream in(bytes);
  caffe2::serialize::PyTorchStreamReader reader(&in);
  std::vector<std::tuple<std::string, size_t, size_t>> out;
  for (const std::string& name : reader.getAllRecords()) {
    const size_t offset = reader.getRecordOffset(name);
    auto [data, size] = reader.getRecord(name);
    out.emplace_back(name, offset, offset + size);
  }
  return out;
}

/// `bytes` with the byte at fraction `at` of record `name` xor-ed with `mask`.
inline std::string with_flipped_byte(std::string bytes, const std::string& name, double at = 0.5, char mask = 0x10) {
  for (const auto& [record, begin, end] : record_extents(bytes)) {
    if (record != name) continue;
    bytes[begin + static_cast<size_t>(static_cast<double>(end - begin - 1) * at)] ^= mask;
    return bytes;
  }
  ADD_FAILURE() << "no record " << name;
  return bytes;
}

/// The file `bytes` with its document replaced (the other records kept).
inline std::string with_document(const std::string& bytes, const std::string& text) {
  std::istringstream in(bytes);
  caffe2::serialize::PyTorchStreamReader reader(&in);
  std::string out;
  caffe2::serialize::PyTorchStreamWriter w([&](const void* d, size_t n) {
    out.append(static_cast<const char*>(d), n);
    return n;
  });
  for (const std::string& name : reader.getAllRecords()) {
    if (name == "version" || name == ".data/version") continue;
    if (name == "extra/fxcpp.json") {
      w.writeRecord(name, text.data(), text.size());
    } else {
      auto [data, size] = reader.getRecord(name);
      w.writeRecord(name, data.get(), size);
    }
  }
  w.writeEndOfFile();
  return out;
}

/// The fx::Error text `f` throws (tests/common/error_of.h).
using fx_test::error_of;

}  // namespace fx::serialize_test
