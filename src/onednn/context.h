#pragma once
// Internal: what every oneDNN kernel of fxcpp shares: the CPU engine, a
// stream and scratchpad per thread, data-type and post-op translation, and
// PackedWeights (weights reordered once per layout a kernel asks for).
#include <fx/onednn.h>

#include <ATen/core/Tensor.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fx::onednn::detail {

/// The process's CPU engine.
const dnnl::engine& engine();
/// This thread's stream on engine().
dnnl::stream& stream();
/// This thread's scratchpad of at least `bytes`, 64-byte aligned (valid
/// until the next call on this thread for the same `slot`). Slot 0 is the
/// primitives' scratchpad (execute); slots 1 to 5 hold a kernel's
/// activations and weights in a blocked layout while it runs.
void* scratchpad(size_t bytes, int slot = 0);
/// How many slots scratchpad() has.
constexpr int kScratchpadSlots = 6;
/// Buffers that live as long as one kernel call: each comes from the CPU
/// allocator (under a memory plan, the graph's arena, shared in time with the
/// graph's other temporaries) and goes back when the object dies. For the
/// training step's kernels, whose scratch (oneDNN's Winograd backward-weights
/// takes 14 MB at resnet18's batch 8) a per-thread scratchpad() would keep
/// for the life of the thread.
class CallScratch {
 public:
  /// A new buffer of at least `bytes`, 64-byte aligned, valid while this object lives.
  void* get(size_t bytes);

 private:
  std::vector<at::Tensor> buffers_;
};
/// Whether the CPU itself (not oneDNN's effective ISA) has AVX2 and FMA: what
/// fxcpp's own AVX2 kernels (SiLU, Winograd, the panel GEMM, gemv) need.
bool cpu_has_avx2_fma();

/// While alive and `when` holds, the calling thread runs the kernels it
/// makes and runs on itself alone: OpenMP's thread count for it is 1, so
/// oneDNN makes single-threaded primitives (their thread count is fixed
/// when they are made) and ATen's parallel loops stay on it. For small work,
/// where waking a second thread costs more than it saves (two threads on an
/// AMD EPYC: ~5-10 us per parallel region, as much as a squeeze-excitation
/// layer's whole convolution). Restores the count after; nothing without
/// OpenMP.
class OneThread {
 public:
  explicit OneThread(bool when);
  ~OneThread();
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int previous_ = 0;  // the thread count to restore; 0: unchanged
};

/// oneDNN's data type for f32 / bf16; throws fx::Error for others.
dnnl::memory::data_type data_type(c10::ScalarType t);
/// "[1, 3, 224, 224]": sizes (or any int list) as errors and descriptions print them.
std::string sizes_str(at::IntArrayRef s);
/// Checks dtype is float or bfloat16 (fx::Error naming `what` otherwise).
void check_dtype(c10::ScalarType dtype, const char* what);

/// Appends the activation of `post_ops` (nothing for Activation::None) as an eltwise post-op.
void append_activation(dnnl::post_ops& ops, const PostOps& post_ops);

/// The activation of `post_ops` applied by ATen (x itself for Activation::None): the
/// kernels' reference paths.
at::Tensor apply_activation(const at::Tensor& x, const PostOps& post_ops);
/// apply_activation in place (ATen's relu_, clamp_, gelu_, ...): a kernel's own output.
void apply_activation_(at::Tensor& x, const PostOps& post_ops);

/// The primitive attributes: user scratchpad, and the post-ops (sum, then
/// eltwise) of `post_ops`.
dnnl::primitive_attr make_attr(const PostOps& post_ops);

/// A tensor's memory over its data (no copy).
dnnl::memory memory_of(const dnnl::memory::desc& md, const at::Tensor& t);
/// The memory descriptor of a float / bf16 tensor's sizes and strides, as they are.
dnnl::memory::desc strided_desc(const at::Tensor& t);

/// Executes `p` with `args` and this thread's scratchpad of
/// `scratchpad_bytes` on this thread's stream, and waits.
void execute(const dnnl::primitive& p, std::unordered_map<int, dnnl::memory>& args, size_t scratchpad_bytes);
/// execute(), the primitive's scratchpad taken from `scratch` (for one call).
void execute(const dnnl::primitive& p, std::unordered_map<int, dnnl::memory>& args, size_t scratchpad_bytes,
             CallScratch& scratch);

/// An uninitialised contiguous tensor of `sizes` whose storage does not come
/// from ATen's allocator: for what a kernel makes on its first run (weights
/// read back or permuted), which must not count among the allocations of
/// the forward it happens in (the memory planner records a forward's
/// allocations and replays them by position).
at::Tensor unplanned_empty(at::IntArrayRef sizes, c10::ScalarType dtype);

/// The output of a kernel of `op`: a new tensor of `sizes` in `format`; with
/// a sum post-op, `residual` itself when post_ops allow it in place and its
/// dtype and layout fit, else a copy of it. Throws fx::Error when the
/// residual is missing or of another shape.
at::Tensor make_output(at::IntArrayRef sizes, const at::TensorOptions& options, at::MemoryFormat format,
                       const PostOps& post_ops, const c10::optional<at::Tensor>& residual, const char* op);

/// fxcpp::onednn_matmul: self @ other for [..., M, K] x [..., K, N] of equal
/// batch sizes (3-d or 4-d), strided inputs read in place; with
/// transpose_out, its transpose(-3, -2) as a contiguous tensor.
at::Tensor matmul(const at::Tensor& self, const at::Tensor& other, bool transpose_out);

/// A buffer of `bytes` for packed weights on transparent huge pages
/// (2 MiB-aligned, MADV_HUGEPAGE) when they are large (≥ 1 MiB), else
/// nullptr: kernels streaming megabytes of weights per call miss the TLB
/// on every 4 KiB page otherwise.
std::shared_ptr<void> weight_buffer(size_t bytes);

/// An uninitialised buffer of `bytes` of its own mapping, its pages made
/// present in one call (MADV_POPULATE_WRITE; transparent huge pages from
/// 1 MiB, as weight_buffer) rather than one page fault per 4 KiB page as it
/// is first written: a fault costs ~10 us in a virtual machine, and a model's
/// weights are tens of thousands of pages (docs/ship.md, what a load costs).
/// For buffers written whole right away (weights read from a file, packed
/// weights). Throws std::bad_alloc.
std::shared_ptr<void> prefaulted_buffer(size_t bytes);

/// An uninitialised buffer of `bytes`: weight_buffer's huge pages when it
/// gives them, else 64-byte aligned heap memory. Throws std::bad_alloc.
std::shared_ptr<void> aligned_buffer(size_t bytes);

/// A plain (row-major) f32 or int8 weight, reordered into the layouts kernels ask for.
/// The process's WeightsPackedHook (fx/onednn.h), called by PackedWeights
/// with the plain tensor it drops.
std::atomic<WeightsPackedHook>& weights_packed_hook();

/// The first layout is made from the plain tensor, which is then dropped
/// (and handed to the WeightsPackedHook); later layouts (another input shape
/// may pick another kernel) are reordered from the first. Thread-safe.
class PackedWeights {
 public:
  /// `plain` is contiguous f32 or int8 (torch.int8) with oneDNN dims `dims` and format `tag`.
  /// `keep_plain`: keep the plain tensor after the first layout is made
  /// (a Winograd layout can only be made from it, and not read back).
  PackedWeights(at::Tensor plain, dnnl::memory::dims dims, dnnl::memory::format_tag tag, bool keep_plain = false);
  /// The weights in layout `md` (made on first request).
  dnnl::memory get(const dnnl::memory::desc& md);
  /// Bytes held by the packed copies.
  size_t bytes() const;
  /// The weights in the plain layout (f32 or int8, `sizes`): the plain tensor while
  /// it is kept, else read back from the first packed copy by a reorder
  /// (exact: a bf16 copy gives the bf16 values as f32).
  at::Tensor plain(at::IntArrayRef sizes) const;

 private:
  mutable std::shared_mutex mutex_;
  at::Tensor plain_;
  dnnl::memory::desc plain_md_;
  std::vector<std::pair<dnnl::memory::desc, dnnl::memory>> packed_;
  std::vector<std::shared_ptr<void>> buffers_;  // the huge-page buffers of large packed copies
  bool keep_plain_;
};

/// A small thread-safe cache of kernels by key (input shape and layout).
template <class Key, class Value>
class KernelCache {
 public:
  /// Unbounded (capacity 0), or keeping the `capacity` most recently made
  /// values: a new one evicts the oldest (alive while a caller still holds it).
  explicit KernelCache(size_t capacity = 0) : capacity_(capacity) {}

  /// The value for `key`, made by make() on first use.
  template <class Make>
  std::shared_ptr<const Value> get(const Key& key, Make&& make) {
    {
      std::shared_lock lock(mutex_);
      for (const auto& e : entries_)
        if (e.first == key) return e.second;
    }
    auto value = std::make_shared<const Value>(make());
    std::unique_lock lock(mutex_);
    for (const auto& e : entries_)
      if (e.first == key) return e.second;
    entries_.emplace_back(key, value);
    if (capacity_ && entries_.size() > capacity_) entries_.erase(entries_.begin());
    return value;
  }

  /// Calls f(value) for every value held.
  template <class F>
  void for_each(F&& f) const {
    std::shared_lock lock(mutex_);
    for (const auto& e : entries_) f(*e.second);
  }

 private:
  size_t capacity_;
  mutable std::shared_mutex mutex_;
  std::vector<std::pair<Key, std::shared_ptr<const Value>>> entries_;
};

/// A copy of `src` with the canonical strides of `format` (contiguous or
/// channels_last). A float / bfloat16 4-d tensor goes through a oneDNN
/// reorder (cached per sizes and strides): ATen's copy between NCHW and
/// channels_last took 0.14 ms for a [1, 3, 224, 224] image at one thread
/// (1.45 ms at batch 8), the reorder 0.025 ms (0.26). Anything else:
/// ATen's copy.
at::Tensor copy_in_format(const at::Tensor& src, at::MemoryFormat format);

/// A float 4-d NCHW or channels_last tensor quantized to quint8 (channels_last) by one
/// oneDNN reorder, cached per sizes, layout, scale and zero point (fxcpp::onednn_quantize;
/// ATen's quantize_per_tensor is a scalar loop in Debian's build: 3.9 ms for [1, 96, 112, 112]
/// at one thread). Another tensor: aten::quantize_per_tensor.
at::Tensor quantize_u8(const at::Tensor& input, double scale, int64_t zero_point);
/// A quint8 tensor's real values: a 4-d channels_last one as a float channels_last tensor by
/// one oneDNN reorder, cached as quantize_u8's; another: Tensor.dequantize().
at::Tensor dequantize_u8(const at::Tensor& input);

}  // namespace fx::onednn::detail
