// fx::load on mutated files (bounded, fixed seed): random bytes changed or the
// tail cut, and random values of the JSON document replaced by values of
// other types. Every outcome is a loaded module that runs (or fails with an
// exception), or an fx::Error; no other exception, no crash. A file whose
// bytes changed loads only when the change touched no record (then it
// computes exactly what the original did).
#include "serialize_test_util.h"

#include "../trace/trace_models.h"

#include <fx/import.h>
#include <fx/trace.h>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/api/module.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <sstream>

namespace fx {
namespace {

using json = nlohmann::json;

// FXCPP_MUTATIONS=N runs N mutants per test (a long local run); the default keeps ctest fast.
int scaled(int count) {
  const char* env = std::getenv("FXCPP_MUTATIONS");
  return env ? std::max(1, std::atoi(env)) : count;
}

struct Outcome {
  int loaded = 0, fx_errors = 0, other = 0;
  int different = 0;  ///< loaded, but computing something else than the original (with `expected`)
};

/// Loads a mutant and runs it; with `expected` (the original's output), a
/// mutant that loads must compute it exactly.
void try_load(const std::function<std::shared_ptr<GraphModule>()>& load_it, const std::vector<c10::IValue>& inputs,
              Outcome& o, const at::Tensor* expected = nullptr) {
  std::shared_ptr<GraphModule> gm;
  try {
    gm = load_it();
  } catch (const Error&) {
    ++o.fx_errors;
    return;
  } catch (const std::exception& e) {
    ++o.other;
    ADD_FAILURE() << "not an fx::Error: " << e.what();
    return;
  }
  ++o.loaded;
  try {
    torch::NoGradGuard no_grad;
    const c10::IValue out = gm->forward(inputs);
    if (expected && !(out.isTensor() && out.toTensor().equal(*expected))) ++o.different;
  } catch (const std::exception&) {
    // A mutated graph may compute nonsense or fail; it must not crash.
    if (expected) ++o.different;
  }
}

std::string saved_model(std::vector<c10::IValue>& inputs) {
  torch::manual_seed(0);
  trace_test::ComplexModel m;
  inputs = {at::randn({2, 10})};
  return save_to_string(*symbolic_trace(m, inputs));
}

TEST(LoadFuzz, MutatedBytes) {
  std::vector<c10::IValue> inputs;
  const std::string original = saved_model(inputs);
  std::mt19937 rng(7);
  Outcome o;
  const at::Tensor expected = load_from_string(original, "original.fx")->forward(inputs).toTensor();
  for (int i = 0, n = scaled(300); i < n; ++i) {
    std::string data = original;
    if (rng() % 8 == 0) {
      data.resize(rng() % data.size());
    } else {
      for (int j = 0, k = 1 + static_cast<int>(rng() % 4); j < k; ++j)
        data[rng() % data.size()] = static_cast<char>(rng() & 0xFF);
    }
    try_load([&] { return load_from_string(data, "mutant.fx"); }, inputs, o, &expected);
  }
  EXPECT_EQ(o.other, 0);
  EXPECT_GT(o.fx_errors, 0);
  EXPECT_GT(o.loaded, 0);  // bytes outside every record (alignment padding, unused header fields)
  EXPECT_EQ(o.different, 0);
}

// Changed bytes inside the tensor records alone (the mutants above seldom land
// there): each is refused by the record's CRC-32, none loads as a silently
// different model.
TEST(LoadFuzz, ChangedTensorBytesAreAlwaysRefused) {
  std::vector<c10::IValue> inputs;
  const std::string original = saved_model(inputs);
  std::vector<std::string> storages;
  for (const auto& [name, begin, end] : serialize_test::record_extents(original))
    if (name.rfind("extra/fxdata/", 0) == 0) storages.push_back(name);
  ASSERT_FALSE(storages.empty());
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> where(0.0, 1.0);
  for (int i = 0, n = scaled(200); i < n; ++i) {
    const std::string& record = storages[rng() % storages.size()];
    const std::string mutant = serialize_test::with_flipped_byte(original, record, where(rng),
                                                                  static_cast<char>(1 + rng() % 255));
    EXPECT_EQ(serialize_test::error_of([&] { load_from_string(mutant, "mutant.fx"); }),
              "mutant.fx: damaged zip archive (record 'archive/" + record + "' does not match its CRC-32)");
  }
}

/// A random JSON value of a random type.
json random_value(std::mt19937& rng) {
  switch (rng() % 9) {
    case 0: return nullptr;
    case 1: return -1;
    case 2: return int64_t{1} << 62;
    case 3: return "x";
    case 4: return json::array();
    case 5: return json::object();
    case 6: return 0.5;
    case 7: return json{{"node", "x"}};
    default: return true;
  }
}

/// Replaces one random value (leaf or not) of `doc`.
void mutate_document(json& doc, std::mt19937& rng) {
  json* at = &doc;
  for (int depth = 0; depth < 12 && (at->is_object() || at->is_array()) && !at->empty(); ++depth) {
    if (depth > 0 && rng() % 4 == 0) break;
    auto it = at->begin();
    std::advance(it, static_cast<long>(rng() % at->size()));
    at = &*it;
  }
  *at = random_value(rng);
}

std::string document_of(const std::string& bytes) {
  std::istringstream in(bytes);
  caffe2::serialize::PyTorchStreamReader reader(&in);
  auto [data, size] = reader.getRecord("extra/fxcpp.json");
  return std::string(static_cast<const char*>(data.get()), size);
}

void fuzz_documents(const std::string& original, const std::vector<c10::IValue>& inputs, int count) {
  const json doc = json::parse(document_of(original));
  std::mt19937 rng(11);
  Outcome o;
  count = scaled(count);
  for (int i = 0; i < count; ++i) {
    json mutant = doc;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) mutate_document(mutant, rng);
    const std::string data = serialize_test::with_document(original, mutant.dump());
    try_load([&] { return load_from_string(data, "mutant.fx"); }, inputs, o);
  }
  EXPECT_EQ(o.other, 0);
  EXPECT_GT(o.fx_errors, count / 2);
}

TEST(LoadFuzz, MutatedDocuments) {
  std::vector<c10::IValue> inputs;
  fuzz_documents(saved_model(inputs), inputs, 300);
}

TEST(LoadFuzz, MutatedDocumentsWithTorchScriptLeaves) {
  const std::string original = save_to_string(*import_torchscript(serialize_test::scripted_model_with_leaf()));
  fuzz_documents(original, {at::randn({2, 3})}, 60);
}

}  // namespace
}  // namespace fx
