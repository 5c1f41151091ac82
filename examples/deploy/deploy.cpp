// The deployment side of an optimised model (issue 23): `fxcpp optimize
// MODEL.pt -o model.fx` once, then an application that only loads and runs
// model.fx. It links fxcpp_serialize (fx::load) and what that brings (the
// GraphModule runtime, fxcpp's oneDNN kernels, the generated kernels' runtime
// (fxcpp_kernels), fxcpp_torchscript's file checks and TorchScript leaves),
// not the optimiser's passes, the importer or the tracer; the kernels and
// packed weights are made for the CPU it runs on, at the first forward. A
// file written by `fxcpp optimize --aot` carries its generated kernels
// compiled: they run here without a compiler.
//
//   deploy MODEL.fx INPUT.pt [OUTPUT.pt]
//   deploy --torchscript MODEL.pt INPUT.pt [OUTPUT.pt]
//
// Prints the load time, the first forward's (kernels made, weights packed),
// a steady forward's, the process's peak resident memory, and every fxcpp,
// torch and oneDNN library the process mapped, with its size on disk.
// --torchscript does what a TorchScript deployment does instead, for the
// cold-start comparison of scripts/bench_cold_start.py: torch::jit::load,
// torch::jit::freeze and torch::jit::optimize_for_inference ("load"), then
// the same forwards.
#include <fx/serialize.h>
#include <fx/tensor_file.h>

#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <sys/stat.h>

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// The shared libraries of fxcpp, libtorch and oneDNN this process mapped.
std::set<std::string> mapped_libraries() {
  std::set<std::string> out;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string name = path.substr(path.rfind('/') + 1);
    if (name.rfind("libfxcpp", 0) == 0 || name.rfind("libtorch", 0) == 0 || name.rfind("libc10", 0) == 0 ||
        name.rfind("libdnnl", 0) == 0)
      out.insert(path);
  }
  return out;
}

/// This program's peak resident memory, MB: VmHWM (getrusage's ru_maxrss
/// would include the peak of whatever process exec'd this one).
double peak_resident_mb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool torchscript = argc > 1 && std::string(argv[1]) == "--torchscript";
  if (torchscript) {
    ++argv;
    --argc;
  }
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: deploy [--torchscript] MODEL INPUT.pt [OUTPUT.pt]\n");
    return 2;
  }
  try {
    torch::NoGradGuard no_grad;
    auto t0 = std::chrono::steady_clock::now();
    std::function<c10::IValue(const std::vector<c10::IValue>&)> forward;
    if (torchscript) {
      torch::jit::Module m = torch::jit::load(argv[1]);
      m.eval();
      torch::jit::Module frozen = torch::jit::freeze(m);
      auto optimized = std::make_shared<torch::jit::Module>(torch::jit::optimize_for_inference(frozen));
      forward = [optimized](const std::vector<c10::IValue>& in) { return optimized->forward(in); };
    } else {
      std::shared_ptr<fx::GraphModule> model = fx::load(argv[1]);
      forward = [model](const std::vector<c10::IValue>& in) { return model->forward(in); };
    }
    const double load_ms = ms_since(t0);
    const std::vector<c10::IValue> inputs = fx::load_inputs(argv[2]);
    t0 = std::chrono::steady_clock::now();
    c10::IValue out = forward(inputs);
    const double first_ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    out = forward(inputs);
    const double steady_ms = ms_since(t0);
    std::printf("loaded %s in %.1f ms; first forward %.1f ms, then %.1f ms; peak resident memory %.1f MB\n", argv[1],
                load_ms, first_ms, steady_ms, peak_resident_mb());
    for (const std::string& lib : mapped_libraries()) {
      struct stat st {};
      stat(lib.c_str(), &st);
      std::printf("  %-30s %8.1f MB\n", lib.substr(lib.rfind('/') + 1).c_str(),
                  static_cast<double>(st.st_size) / (1024.0 * 1024.0));
    }
    if (argc == 4) {
      fx::save_value(argv[3], out);
      std::printf("wrote %s\n", argv[3]);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "deploy: %s\n", e.what());
    return 2;
  }
}
