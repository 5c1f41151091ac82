// Mutated files (bounded, fixed seed): load_value / import_torchscript on
// good files with a few bytes changed or the tail cut. Every outcome is a
// load whose tensors are safe to compute on, or an fx::Error; no other
// exception, no crash.
#include "corrupt_files.h"

#include <fx/import.h>
#include <fx/tensor_file.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <unistd.h>

namespace {

using fx::testing::corrupt_path;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Touches every element of every tensor: reads past a storage would show
// under ASan, and a crash here fails the test program.
double touch(const c10::IValue& v) {
  double s = 0;
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.defined() && t.numel() > 0) s += t.to(at::kDouble).sum().item<double>();
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) s += touch(e);
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) s += touch(e);
  }
  return s;
}

// FXCPP_MUTATIONS=N scales the runs (a long local run); the default keeps ctest fast.
int scaled(int count) {
  const char* env = std::getenv("FXCPP_MUTATIONS");
  return env ? std::max(1, std::atoi(env)) : count;
}

// FXCPP_MUTATION_SEED=S replaces the fixed seed 12 (long local runs).
unsigned seed() {
  const char* env = std::getenv("FXCPP_MUTATION_SEED");
  return env ? static_cast<unsigned>(std::strtoul(env, nullptr, 10)) : 12u;
}

struct Outcome {
  int loaded = 0, fx_errors = 0, other = 0;
};

// `count` mutants of `original`: 1-4 random bytes set to random values, or
// (one in eight) the file cut at a random length.
template <typename F>
Outcome mutate(const std::string& original, int count, unsigned seed, const std::string& path, F&& use) {
  std::mt19937 rng(seed);
  Outcome o;
  for (int i = 0; i < count; ++i) {
    std::string data = original;
    if (rng() % 8 == 0) {
      data.resize(rng() % data.size());
    } else {
      const int k = 1 + static_cast<int>(rng() % 4);
      for (int j = 0; j < k; ++j) data[rng() % data.size()] = static_cast<char>(rng() & 0xFF);
    }
    {
      std::ofstream(path, std::ios::binary | std::ios::trunc)
          .write(data.data(), static_cast<std::streamsize>(data.size()));
    }
    if (std::getenv("FXCPP_MUTATIONS_TRACE")) std::fprintf(stderr, "mutant %d\n", i);
    try {
      use(path);
      ++o.loaded;
    } catch (const fx::Error& e) {
      ++o.fx_errors;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "mutant " << i << ": " << e.what();
    } catch (const std::exception& e) {
      ++o.other;
      ADD_FAILURE() << "mutant " << i << " escaped as " << typeid(e).name() << ": " << e.what();
    }
  }
  std::remove(path.c_str());
  return o;
}

TEST(MutatedFiles, TensorFiles) {
  const std::string good = read_all(corrupt_path("good.input.pt"));
  ASSERT_FALSE(good.empty());
  const std::string path = std::string(FX_BINARY_DIR) + "/mutant_" + std::to_string(getpid()) + ".input.pt";
  Outcome o = mutate(good, scaled(2000), seed(), path, [](const std::string& p) { touch(fx::load_value(p)); });
  EXPECT_EQ(o.other, 0);
  EXPECT_GT(o.fx_errors, 0);
  EXPECT_GT(o.loaded, 0);
  RecordProperty("loaded", o.loaded);
  RecordProperty("fx_errors", o.fx_errors);  // bytes inside tensor data change values, not validity
}

TEST(MutatedFiles, TorchScriptFiles) {
  const std::string good = read_all(corrupt_path("linear.pt"));
  ASSERT_FALSE(good.empty());
  const std::vector<c10::IValue> inputs = fx::load_inputs(corrupt_path("linear.input.pt"));
  const std::string path = std::string(FX_BINARY_DIR) + "/mutant_" + std::to_string(getpid()) + ".pt";
  Outcome o = mutate(good, scaled(500), seed(), path, [&](const std::string& p) {
    auto gm = fx::import_torchscript(p);
    try {
      touch(gm->forward(inputs));
    } catch (const fx::Error&) {
    } catch (const c10::Error&) {  // a mutated model may compute something else; it must not crash
    }
  });
  EXPECT_EQ(o.other, 0);
  EXPECT_GT(o.fx_errors, 0);
  RecordProperty("loaded", o.loaded);
  RecordProperty("fx_errors", o.fx_errors);
}

}  // namespace
