// Kernel objects (fused_kernel.h): a fused kernel's compiled shared object,
// carried by a saved file (fx::save with SaveOptions::kernel_objects) so that
// the file runs where no compiler does. An object is used only for the
// kernel whose C++ it was built from — this build of fxcpp must generate the
// same source for the program, which pins the generator's version and ATen's
// CPU capability — and only on a CPU that has every instruction-set
// extension its flags allowed the compiler (codegen.cpp's kernel_isa).
#include "kernels/kernel_objects.h"

#include "kernels/codegen.h"

#include <fx/compiler/kernel_cache.h>
#include <fx/error.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

namespace fx::compiler {
namespace {

std::mutex& offers_mutex() {
  static std::mutex m;
  return m;
}

std::unordered_map<std::string, KernelObject>& offers() {
  static std::unordered_map<std::string, KernelObject> o;
  return o;
}

/// The words of the first "flags" line of /proc/cpuinfo (empty when it cannot be read).
std::vector<std::string> read_cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::vector<std::string> flags;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream words(line.substr(colon + 1));
    for (std::string w; words >> w;) flags.push_back(w);
    break;
  }
  std::sort(flags.begin(), flags.end());
  return flags;
}

}  // namespace

std::string kernel_source_hash(const std::string& source) { return KernelCache::hash({source}); }

KernelObject kernel_object(const std::string& program) {
  const detail::GeneratedKernel g = detail::generate_kernel(program);
  KernelObject o;
  o.source_hash = kernel_source_hash(g.source);
  o.symbol = g.symbol;
  o.bytes = KernelCache::global().object({g.source, g.symbol}, detail::kernel_flags());
  o.compiler = KernelCache::compiler_version();
  o.isa = detail::kernel_isa();
  return o;
}

const std::vector<std::string>& cpu_isa() {
  static const std::vector<std::string> flags = read_cpu_flags();
  return flags;
}

std::string object_mismatch(const KernelObject& object) {
  const std::vector<std::string>& have = cpu_isa();
  for (const std::string& need : object.isa)
    if (!std::binary_search(have.begin(), have.end(), need))
      return "it uses " + need + ", which this CPU lacks";
  return {};
}

std::string offer_kernel_object(KernelObject object) {
  std::string why = object_mismatch(object);
  if (!why.empty()) return why;
  std::lock_guard<std::mutex> lock(offers_mutex());
  const std::string hash = object.source_hash;
  offers().insert_or_assign(hash, std::move(object));
  return {};
}

namespace detail {

std::optional<KernelObject> offered_object(const std::string& source_hash) {
  std::lock_guard<std::mutex> lock(offers_mutex());
  const auto it = offers().find(source_hash);
  if (it == offers().end()) return std::nullopt;
  return it->second;
}

}  // namespace detail
}  // namespace fx::compiler
