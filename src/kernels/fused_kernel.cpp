// fxcpp::fused_kernel(Tensor[] inputs, str program) -> Tensor[]: the
// operator fuse_kernels' nodes call. Its program (program.h) names the
// kernel: the first call of a program generates the C++ (codegen.h), takes
// the object a loaded file offered for that source (kernel_objects.cpp) or
// has the kernel cache build or find it, and keeps the function for the
// process. Each call then lays out the operands as TensorIterator does for
// ATen's kernels: inputs broadcast to one iteration shape, full outputs in
// the first full input's memory format (channels-last stays channels-last),
// dimensions that are contiguous in every operand merged, and the rows (or
// pieces of rows, when nothing reduces) shared by at::parallel_for.
#include <fx/compiler/fused_kernel.h>

#include <fx/compiler/kernel_cache.h>
#include <fx/error.h>

#include "kernels/codegen.h"
#include "kernels/kernel_objects.h"
#include "kernels/program_aten.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace fx::compiler {
namespace {

using detail::KernelArgs;
using detail::KernelFn;
using detail::OutputKind;
using detail::Program;

struct LoadedKernel {
  Program program;
  KernelFn fn = nullptr;
  std::string symbol;
  KernelOrigin origin = KernelOrigin::None;
};

std::mutex& kernels_mutex() {
  static std::mutex m;
  return m;
}

std::unordered_map<std::string, std::unique_ptr<LoadedKernel>>& kernels() {
  static std::unordered_map<std::string, std::unique_ptr<LoadedKernel>> k;
  return k;
}

/// The function a loaded file's object gives `g`, or null (no object offered for its source, or one that did not
/// load: one warning line, and the caller compiles).
KernelFn from_object(const detail::GeneratedKernel& g) {
  const std::optional<KernelObject> object = detail::offered_object(kernel_source_hash(g.source));
  if (!object) return nullptr;
  try {
    return reinterpret_cast<KernelFn>(KernelCache::load_object(g.symbol, object->bytes, object->symbol));
  } catch (const std::exception& e) {
    TORCH_WARN("fxcpp::fused_kernel: ", e.what(), "; the kernel is ",
               KernelCache::compiler_available() ? "compiled from its source" : "run as ATen operators");
    return nullptr;
  }
}

const LoadedKernel& loaded(const std::string& program) {
  std::lock_guard<std::mutex> lock(kernels_mutex());
  auto& map = kernels();
  auto it = map.find(program);
  if (it != map.end()) return *it->second;
  auto k = std::make_unique<LoadedKernel>();
  k->program = detail::parse_program(program);
  const detail::GeneratedKernel g = detail::generate_kernel(program);
  k->symbol = g.symbol;
  if ((k->fn = from_object(g))) {
    k->origin = KernelOrigin::Object;
  } else if (KernelCache::compiler_available()) {
    k->fn = reinterpret_cast<KernelFn>(KernelCache::global().load({g.source, g.symbol}, detail::kernel_flags()));
    k->origin = KernelOrigin::Source;
  } else {  // k->fn stays null: run() computes the program with ATen's operators
    TORCH_WARN_ONCE("fxcpp::fused_kernel: no C++ compiler (", KernelCache::compiler(),
                    " does not run): fused kernels run as ATen operators");
    k->origin = KernelOrigin::Aten;
  }
  return *map.emplace(program, std::move(k)).first->second;
}

[[noreturn]] void fail(const std::string& symbol, const std::string& what) {
  throw Error("fxcpp::fused_kernel " + symbol + ": " + what);
}

/// The iteration order of a pointwise kernel: the first full input's memory format.
std::vector<int64_t> order_of(const std::vector<at::Tensor>& inputs, at::IntArrayRef shape, at::MemoryFormat* format) {
  std::vector<int64_t> perm(shape.size());
  for (size_t d = 0; d < perm.size(); ++d) perm[d] = static_cast<int64_t>(d);
  *format = at::MemoryFormat::Contiguous;
  for (const at::Tensor& t : inputs) {
    if (t.sizes() != shape) continue;
    if (t.dim() == 4 && !t.is_contiguous() && t.is_contiguous(at::MemoryFormat::ChannelsLast)) {
      *format = at::MemoryFormat::ChannelsLast;
      perm = {0, 2, 3, 1};
    } else if (t.dim() == 5 && !t.is_contiguous() && t.is_contiguous(at::MemoryFormat::ChannelsLast3d)) {
      *format = at::MemoryFormat::ChannelsLast3d;
      perm = {0, 2, 3, 4, 1};
    }
    break;
  }
  return perm;
}

std::vector<at::Tensor> run(const LoadedKernel& k, const std::vector<at::Tensor>& inputs) {
  const Program& p = k.program;
  if (static_cast<int>(inputs.size()) != p.inputs)
    fail(k.symbol, "expected " + std::to_string(p.inputs) + " inputs, got " + std::to_string(inputs.size()));
  std::vector<int64_t> shape;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    const bool bytes = i < p.input_types.size() && p.input_types[i] == "u8";
    const bool dtype_ok = t.defined() && (bytes ? t.scalar_type() == at::kByte || t.scalar_type() == at::kBool
                                                : t.scalar_type() == at::kFloat);
    if (!dtype_ok || !t.device().is_cpu() || t.layout() != at::kStrided)
      fail(k.symbol, "input " + std::to_string(i) + " must be a " + (bytes ? "uint8 or bool" : "float32") +
                         " CPU tensor, got " +
                         (t.defined() ? std::string(c10::toString(t.scalar_type())) + " " + t.device().str() : "None"));
    try {
      shape = i == 0 ? t.sizes().vec() : at::infer_size(shape, t.sizes());
    } catch (const std::exception&) {
      fail(k.symbol, "input " + std::to_string(i) + " of shape " + c10::str(t.sizes()) +
                         " does not broadcast with the others' " + c10::str(at::IntArrayRef(shape)));
    }
  }
  const bool scalar = shape.empty();
  if (scalar) shape = {1};
  const bool reduces = p.reduces();
  at::MemoryFormat format = at::MemoryFormat::Contiguous;
  const std::vector<int64_t> perm = reduces ? std::vector<int64_t>{} : order_of(inputs, shape, &format);
  const at::TensorOptions options = inputs[0].options().dtype(at::kFloat);  // outputs are float32 (inputs may be bytes)
  // Every operand's strides over the iteration shape, 0 where it is broadcast (arithmetic on sizes and
  // strides: no views made, a call costs what the kernel does on small tensors).
  const size_t nd0 = shape.size();
  std::vector<std::vector<int64_t>> operand_strides;
  std::vector<char*> data;
  auto add = [&](const at::Tensor& t, bool flat_row) {
    std::vector<int64_t> st(nd0, 0);
    const size_t rank = static_cast<size_t>(t.dim());
    for (size_t d = 0; d < rank; ++d) st[flat_row ? d : nd0 - rank + d] = t.size(d) == 1 ? 0 : t.stride(d);
    operand_strides.push_back(std::move(st));
    data.push_back(static_cast<char*>(t.data_ptr()));
  };
  for (const at::Tensor& t : inputs) add(t, false);
  std::vector<at::Tensor> outputs;
  std::vector<int64_t> row_shape(shape.begin(), shape.end() - 1);
  for (const auto& [v, kind] : p.outputs) {
    (void)v;
    if (kind == OutputKind::Full) {
      outputs.push_back(at::empty(scalar ? at::IntArrayRef{} : at::IntArrayRef(shape), options.memory_format(format)));
    } else {
      std::vector<int64_t> s = row_shape;
      if (kind == OutputKind::Row) s.push_back(1);
      outputs.push_back(at::empty(s, options));
    }
    add(outputs.back(), kind == OutputKind::RowFlat);
  }
  if (k.fn == nullptr) {  // no compiler here: the same values from ATen's operators
    const std::vector<at::Tensor> values = detail::run_program_on_aten(p, inputs, shape);
    for (size_t i = 0; i < outputs.size(); ++i)
      outputs[i].copy_(values[i].numel() == outputs[i].numel() ? values[i].reshape(outputs[i].sizes()) : values[i]);
    return outputs;
  }
  const size_t n_operands = operand_strides.size();
  // Iteration dimensions in the layout's order: size-1 ones dropped, neighbours contiguous in every
  // operand merged (never the row into another when the kernel reduces).
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides(n_operands);
  for (size_t i = 0; i < nd0; ++i) {
    const size_t d = perm.empty() ? i : static_cast<size_t>(perm[i]);
    const int64_t size = shape[d];
    const bool last = i == nd0 - 1;
    if (size == 1 && !(last && (reduces || sizes.empty()))) continue;
    const bool merge = !sizes.empty() && !(last && reduces) && [&] {
      for (size_t k = 0; k < n_operands; ++k)
        if (strides[k].back() != operand_strides[k][d] * size) return false;
      return true;
    }();
    if (merge) {
      sizes.back() *= size;
      for (size_t k = 0; k < n_operands; ++k) strides[k].back() = operand_strides[k][d];
    } else {
      sizes.push_back(size);
      for (size_t k = 0; k < n_operands; ++k) strides[k].push_back(operand_strides[k][d]);
    }
  }
  if (sizes.empty()) {
    sizes.push_back(1);
    for (auto& st : strides) st.push_back(0);
  }
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (numel == 0) return outputs;
  const int64_t nd = static_cast<int64_t>(sizes.size()), inner = sizes.back(), rows = numel / inner;
  std::vector<int64_t> flat(n_operands * nd);
  for (size_t k = 0; k < n_operands; ++k)
    for (int64_t d = 0; d < nd; ++d) flat[k * nd + d] = strides[k][d];
  KernelArgs args{nd, sizes.data(), flat.data(), data.data(), 1, inner};
  if (!reduces && inner > 2 * 16384) {
    const int64_t width = 16;  // a multiple of every capability's vector width
    args.chunks = inner / 16384;
    args.chunk = ((inner + args.chunks - 1) / args.chunks + width - 1) / width * width;
    args.chunks = (inner + args.chunk - 1) / args.chunk;
  }
  const int64_t items = rows * args.chunks;
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, std::min(args.chunk, inner)));
  at::parallel_for(0, items, grain, [&](int64_t begin, int64_t end) { k.fn(&args, begin, end); });
  return outputs;
}

std::vector<at::Tensor> fused_kernel(at::TensorList inputs, const std::string& program) {
  return run(loaded(program), inputs.vec());
}

}  // namespace

std::string kernel_source(const std::string& program) { return detail::generate_kernel(program).source; }

std::vector<at::Tensor> run_kernel(const std::string& program, const std::vector<at::Tensor>& inputs) {
  return run(loaded(program), inputs);
}

bool can_compile_kernels() { return KernelCache::compiler_available(); }

KernelOrigin kernel_origin(const std::string& program) {
  std::lock_guard<std::mutex> lock(kernels_mutex());
  const auto it = kernels().find(program);
  return it == kernels().end() ? KernelOrigin::None : it->second->origin;
}

size_t prepare_kernels(const std::vector<std::string>& programs, int jobs) {
  std::vector<KernelSource> sources;
  std::vector<std::string> todo;
  {
    std::lock_guard<std::mutex> lock(kernels_mutex());
    for (const std::string& p : programs) {
      if (kernels().count(p) || std::find(todo.begin(), todo.end(), p) != todo.end()) continue;
      const detail::GeneratedKernel g = detail::generate_kernel(p);
      if (KernelFn fn = from_object(g)) {  // a loaded file's object: nothing to compile
        auto k = std::make_unique<LoadedKernel>();
        k->program = detail::parse_program(p);
        k->symbol = g.symbol;
        k->fn = fn;
        k->origin = KernelOrigin::Object;
        kernels().emplace(p, std::move(k));
        continue;
      }
      sources.push_back({g.source, g.symbol});
      todo.push_back(p);
    }
  }
  if (todo.empty()) return 0;
  std::vector<LoadInfo> infos;
  const std::vector<void*> fns = KernelCache::global().load_all(sources, detail::kernel_flags(), jobs, &infos);
  size_t compiled = 0;
  std::lock_guard<std::mutex> lock(kernels_mutex());
  for (size_t i = 0; i < todo.size(); ++i) {
    compiled += infos[i].compiled;
    if (kernels().count(todo[i])) continue;
    auto k = std::make_unique<LoadedKernel>();
    k->program = detail::parse_program(todo[i]);
    k->symbol = sources[i].symbol;
    k->fn = reinterpret_cast<KernelFn>(fns[i]);
    k->origin = KernelOrigin::Source;
    kernels().emplace(todo[i], std::move(k));
  }
  return compiled;
}

TORCH_LIBRARY_FRAGMENT(fxcpp, m) {
  m.def("fused_kernel(Tensor[] inputs, str program) -> Tensor[]", &fused_kernel);
}

}  // namespace fx::compiler
