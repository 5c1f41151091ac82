#pragma once
// Helpers of tests/optimize: comparing outputs and counting calls.
#include <fx/graph.h>
#include <fx/onednn.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <string>
#include <vector>

namespace optimize_test {

/// Restores ATen's thread count at the end of a scope; given `n`, sets it to n first.
struct ThreadsGuard {
  ThreadsGuard() = default;
  explicit ThreadsGuard(int n) { at::set_num_threads(n); }
  ~ThreadsGuard() { at::set_num_threads(threads); }
  ThreadsGuard(const ThreadsGuard&) = delete;
  ThreadsGuard& operator=(const ThreadsGuard&) = delete;
  int threads = at::get_num_threads();
};

/// max |a - b| / max |b|.
inline double relative_error(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kFloat) - b).abs().max().item<double>() / b.abs().max().item<double>();
}

/// Call targets without overload names ("aten::mul.Tensor" → "aten::mul").
inline std::vector<std::string> call_targets(const fx::Graph& g) {
  std::vector<std::string> out;
  for (const fx::Node* n : g.nodes())
    if (n->op() == fx::Opcode::CallFunction || n->op() == fx::Opcode::CallModule)
      out.push_back(n->target().substr(0, n->target().find('.')));
  return out;
}

inline size_t count_calls(const fx::Graph& g, const std::string& target) {
  auto t = call_targets(g);
  return std::count(t.begin(), t.end(), target);
}

/// The first output of operator `op` (no overload name) called boxed with
/// `args`, every argument pushed, as the graph calls it.
inline at::Tensor call_boxed(const char* op, std::vector<c10::IValue> args) {
  c10::Dispatcher::singleton().findSchemaOrThrow(op, "").callBoxed(&args);
  return args.front().toTensor();
}

/// Whether oneDNN's ISA here is AVX-512 or newer (held at AVX2 by ctest's *_isa_AVX2 entries: no).
inline bool avx512() { return fx::onednn::has_avx512_core(); }

}  // namespace optimize_test
