// fx::save / fx::load of resnet50 (imported from build/models/resnet50.pt;
// skipped when absent) beside torch::jit::save / torch::jit::load of the same
// model. Each iteration runs the fxcpp and the TorchScript side alternately
// in the same process, so both see the same machine state; the counters are
// the mean milliseconds of each side, their ratio and the two file sizes. The
// load benchmark also times fx::load_torchscript on the .pt (torch::jit::load
// after the file checks of import), which fx::load runs on a file's leaves,
// and the time of the CRC-32 pass over every record that fx::load now makes
// (crc_ms: what the check of issue 27 costs).
//
//   OMP_NUM_THREADS=1 build/fx_bench --benchmark_filter=Serialize
#include "fx_paths.h"
#include "torchscript/file_checks.h"

#include <fx/import.h>
#include <fx/serialize.h>

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>
#include <sys/stat.h>

namespace {

using Clock = std::chrono::steady_clock;

const std::string kModel = std::string(FX_BINARY_DIR) + "/models/resnet50.pt";
const std::string kFxFile = std::string(FX_BINARY_DIR) + "/bench_serialize.fx";
const std::string kPtFile = std::string(FX_BINARY_DIR) + "/bench_serialize.pt";

struct Model {
  torch::jit::Module jit;
  std::shared_ptr<fx::GraphModule> gm;
};

Model* model() {
  static Model* m = []() -> Model* {
    if (!std::ifstream(kModel)) return nullptr;
    auto* l = new Model;
    l->jit = fx::load_torchscript(kModel);
    l->gm = fx::import_torchscript(l->jit);
    return l;
  }();
  return m;
}

double file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<double>(st.st_size) : 0;
}

double ms(const std::function<void()>& f) {
  auto t0 = Clock::now();
  f();
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// Runs fx_side and jit_side (and checked_side, if given) alternately, one
/// of each per iteration.
void interleaved(benchmark::State& state, const std::function<void()>& fx_side,
                 const std::function<void()>& jit_side, const std::function<void()>& checked_side = nullptr) {
  at::set_num_threads(1);
  Model* m = model();
  if (!m) {
    state.SkipWithError(("no " + kModel + " (run the import model tests first)").c_str());
    return;
  }
  double fx_ms = 0, jit_ms = 0, checked_ms = 0;
  int64_t n = 0;
  for (auto _ : state) {
    fx_ms += ms(fx_side);
    jit_ms += ms(jit_side);
    if (checked_side) checked_ms += ms(checked_side);
    ++n;
  }
  if (checked_side) state.counters["checked_torchscript_ms"] = checked_ms / static_cast<double>(n);
  state.counters["fxcpp_ms"] = fx_ms / static_cast<double>(n);
  state.counters["torchscript_ms"] = jit_ms / static_cast<double>(n);
  state.counters["fxcpp_over_torchscript"] = fx_ms / jit_ms;
  state.counters["fx_file_bytes"] = file_size(kFxFile);
  state.counters["pt_file_bytes"] = file_size(kPtFile);
}

void BM_SerializeSaveResnet50(benchmark::State& state) {
  interleaved(
      state, [] { fx::save(*model()->gm, kFxFile); }, [] { model()->jit.save(kPtFile); });
}

void BM_SerializeLoadResnet50(benchmark::State& state) {
  if (model()) {
    fx::save(*model()->gm, kFxFile);
    model()->jit.save(kPtFile);
  }
  interleaved(
      state, [] { benchmark::DoNotOptimize(fx::load(kFxFile)); },
      [] { benchmark::DoNotOptimize(torch::jit::load(kPtFile)); },
      // fx::load reads a file's TorchScript leaves through fx::load_torchscript's checks.
      [] { benchmark::DoNotOptimize(fx::load_torchscript(kPtFile)); });
  if (!model()) return;
  // What the CRC-32 check of every record (issue 27) adds to fx::load: one
  // pass of libdeflate's crc32 over the bytes of every stored record, in memory.
  const uint64_t size = static_cast<uint64_t>(file_size(kFxFile));
  const std::vector<char> bytes = fx::import_detail::read_file(kFxFile, size);
  const auto records = fx::import_detail::check_zip(kFxFile, bytes.data(), size);
  double crc_ms = 0;
  uint32_t sum = 0;
  constexpr int kReps = 5;
  for (int i = 0; i < kReps; ++i)
    crc_ms += ms([&] {
      for (const auto& r : records)
        if (!r.compressed) sum ^= fx::import_detail::crc32(bytes.data() + r.data_offset, r.size);
    });
  benchmark::DoNotOptimize(sum);
  state.counters["crc_ms"] = crc_ms / kReps;
}

}  // namespace

BENCHMARK(BM_SerializeSaveResnet50)->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_SerializeLoadResnet50)->Unit(benchmark::kMillisecond)->Iterations(5);
