// The oneDNN engine, per-thread streams and scratchpads, post-ops and packed weights.
#include "onednn/context.h"
#include "onednn/silu.h"

#include <fx/error.h>

#include <utility>

#include <ATen/Parallel.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/hardswish.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/tanh.h>

#include <sys/mman.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace fx::onednn {

std::string PostOps::str() const {
  std::ostringstream os;
  if (sum) os << (residual_inplace ? "+=residual" : "+residual");
  if (activation != Activation::None) {
    if (sum) os << ", ";
    os << activation_name(activation);
    if (activation == Activation::Clip) os << "(" << alpha << ", " << beta << ")";
  }
  return os.str();
}

bool activation_from_aten(const std::string& name, const std::vector<double>& scalars,
                          const std::string& approximate, PostOps& out) {
  if (name == "relu") {
    out.activation = Activation::Relu;
  } else if (name == "relu6") {
    out.activation = Activation::Clip;
    out.alpha = 0.f;
    out.beta = 6.f;
  } else if (name == "hardtanh") {
    out.activation = Activation::Clip;
    out.alpha = scalars.size() > 0 ? static_cast<float>(scalars[0]) : -1.f;
    out.beta = scalars.size() > 1 ? static_cast<float>(scalars[1]) : 1.f;
  } else if (name == "silu") {
    out.activation = Activation::Silu;
    out.alpha = 1.f;
  } else if (name == "sigmoid") {
    out.activation = Activation::Sigmoid;
  } else if (name == "hardswish") {
    out.activation = Activation::Hardswish;
  } else if (name == "gelu" && (approximate == "none" || approximate == "tanh")) {
    out.activation = approximate == "none" ? Activation::GeluErf : Activation::GeluTanh;
  } else if (name == "tanh") {
    out.activation = Activation::Tanh;
  } else {
    return false;
  }
  return true;
}

namespace detail {

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

void* scratchpad(size_t bytes, int slot) {
  constexpr size_t kAlign = 64;
  thread_local std::vector<uint8_t> buffers[kScratchpadSlots];
  TORCH_CHECK(slot >= 0 && slot < kScratchpadSlots, "scratchpad: no slot ", slot);
  std::vector<uint8_t>& buffer = buffers[slot];
  if (buffer.size() < bytes + kAlign) buffer.resize(bytes + kAlign);
  const auto address = reinterpret_cast<uintptr_t>(buffer.data());
  return buffer.data() + (kAlign - address % kAlign) % kAlign;
}

dnnl::memory::data_type data_type(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return dnnl::memory::data_type::f32;
    case c10::ScalarType::BFloat16: return dnnl::memory::data_type::bf16;
    default: throw Error(std::string("oneDNN kernels take float or bfloat16 tensors, not ") + c10::toString(t));
  }
}

std::string sizes_str(at::IntArrayRef s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

void check_dtype(c10::ScalarType dtype, const char* what) {
  if (dtype != c10::ScalarType::Float && dtype != c10::ScalarType::BFloat16)
    throw Error(std::string(what) + ": dtype must be float32 or bfloat16, not " + c10::toString(dtype));
}

void append_activation(dnnl::post_ops& ops, const PostOps& post_ops) {
  using A = dnnl::algorithm;
  switch (post_ops.activation) {
    case Activation::None: break;
    case Activation::Relu: ops.append_eltwise(1.f, A::eltwise_relu, 0.f, 0.f); break;
    case Activation::Clip: ops.append_eltwise(1.f, A::eltwise_clip, post_ops.alpha, post_ops.beta); break;
    case Activation::Silu: ops.append_eltwise(1.f, A::eltwise_swish, 1.f, 0.f); break;
    case Activation::Sigmoid: ops.append_eltwise(1.f, A::eltwise_logistic, 0.f, 0.f); break;
    case Activation::Hardswish: ops.append_eltwise(1.f, A::eltwise_hardswish, 0.f, 0.f); break;
    case Activation::GeluErf: ops.append_eltwise(1.f, A::eltwise_gelu_erf, 0.f, 0.f); break;
    case Activation::GeluTanh: ops.append_eltwise(1.f, A::eltwise_gelu_tanh, 0.f, 0.f); break;
    case Activation::Tanh: ops.append_eltwise(1.f, A::eltwise_tanh, 0.f, 0.f); break;
  }
}

at::Tensor apply_activation(const at::Tensor& x, const PostOps& p) {
  switch (p.activation) {
    case Activation::None: return x;
    case Activation::Relu: return at::relu(x);
    case Activation::Clip: return at::clamp(x, p.alpha, p.beta);
    case Activation::Silu: return at::silu(x);
    case Activation::Sigmoid: return at::sigmoid(x);
    case Activation::Hardswish: return at::hardswish(x);
    case Activation::GeluErf: return at::gelu(x, "none");
    case Activation::GeluTanh: return at::gelu(x, "tanh");
    case Activation::Tanh: return at::tanh(x);
  }
  return x;
}

OneThread::OneThread(bool when) {
#ifdef _OPENMP
  if (!when || omp_in_parallel()) return;
  // ATen's count first: its first call on a thread sets OpenMP's from
  // at::set_num_threads' (at::internal::lazy_init_num_threads), which would
  // undo the 1 below if it came inside.
  const int threads = at::get_num_threads();
  if (threads == 1) return;
  previous_ = threads;
  omp_set_num_threads(1);  // this thread's count alone (at::set_num_threads sets every thread's)
#else
  (void)when;
#endif
}

OneThread::~OneThread() {
#ifdef _OPENMP
  if (previous_) omp_set_num_threads(previous_);
#endif
}

void apply_activation_(at::Tensor& x, const PostOps& p) {
  switch (p.activation) {
    case Activation::None: return;
    case Activation::Relu: at::relu_(x); return;
    case Activation::Clip: at::clamp_(x, p.alpha, p.beta); return;
    case Activation::Silu:
      if (x.scalar_type() == at::kFloat && x.is_non_overlapping_and_dense())
        silu_(x.data_ptr<float>(), x.numel());  // 2x ATen's silu_ (silu.h)
      else
        at::silu_(x);
      return;
    case Activation::Sigmoid: at::sigmoid_(x); return;
    case Activation::Hardswish: at::hardswish_(x); return;
    case Activation::GeluErf: at::gelu_(x, "none"); return;
    case Activation::GeluTanh: at::gelu_(x, "tanh"); return;
    case Activation::Tanh: at::tanh_(x); return;
  }
}

dnnl::primitive_attr make_attr(const PostOps& post_ops) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::post_ops ops;
  if (post_ops.sum) ops.append_sum(1.f);
  append_activation(ops, post_ops);
  attr.set_post_ops(ops);
  return attr;
}

dnnl::memory memory_of(const dnnl::memory::desc& md, const at::Tensor& t) {
  return dnnl::memory(md, engine(), const_cast<void*>(t.data_ptr()));
}

dnnl::memory::desc strided_desc(const at::Tensor& t) {
  return dnnl::memory::desc(dnnl::memory::dims(t.sizes().begin(), t.sizes().end()), data_type(t.scalar_type()),
                            dnnl::memory::dims(t.strides().begin(), t.strides().end()));
}

namespace {
void run(const dnnl::primitive& p, std::unordered_map<int, dnnl::memory>& args, size_t scratchpad_bytes,
         void* scratch) {
  if (scratchpad_bytes)
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 dnnl::memory(dnnl::memory::desc({static_cast<int64_t>(scratchpad_bytes)}, dnnl::memory::data_type::u8,
                                                 dnnl::memory::format_tag::a),
                              engine(), scratch));
  p.execute(stream(), args);
  stream().wait();
}
}  // namespace

void execute(const dnnl::primitive& p, std::unordered_map<int, dnnl::memory>& args, size_t scratchpad_bytes) {
  run(p, args, scratchpad_bytes, scratchpad_bytes ? scratchpad(scratchpad_bytes) : nullptr);
}

void execute(const dnnl::primitive& p, std::unordered_map<int, dnnl::memory>& args, size_t scratchpad_bytes,
             CallScratch& scratch) {
  run(p, args, scratchpad_bytes, scratchpad_bytes ? scratch.get(scratchpad_bytes) : nullptr);
}

void* CallScratch::get(size_t bytes) {
  // c10's CPU allocator aligns to 64 bytes (c10::gAlignment).
  buffers_.push_back(at::empty({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, at::TensorOptions().dtype(at::kByte)));
  return buffers_.back().data_ptr();
}

at::Tensor make_output(at::IntArrayRef sizes, const at::TensorOptions& options, at::MemoryFormat format,
                       const PostOps& post_ops, const c10::optional<at::Tensor>& residual, const char* op) {
  if (!post_ops.sum) return at::empty(sizes, options.memory_format(format));
  if (!residual || !residual->defined() || residual->sizes() != sizes) {
    std::ostringstream os;
    os << op << ": the residual must have the output's shape " << sizes << ", got ";
    if (residual && residual->defined()) os << residual->sizes(); else os << "None";
    throw Error(os.str());
  }
  const at::Tensor& r = *residual;
  if (post_ops.residual_inplace && r.scalar_type() == options.dtype() && r.is_contiguous(format)) return r;
  at::Tensor out = at::empty(sizes, options.memory_format(format));
  out.copy_(r);
  return out;
}

std::shared_ptr<void> weight_buffer(size_t bytes) {
  // Large weights on transparent huge pages (THP is often "madvise" only):
  // a kernel that streams megabytes of weights per call (ResNet's last
  // stage at batch 1: 4-9.4 MB per convolution) misses the TLB on every
  // 4 KiB page otherwise.
  constexpr size_t huge = size_t(2) << 20;
  if (bytes < huge / 2) return nullptr;
  const size_t rounded = (bytes + huge - 1) / huge * huge;
  std::shared_ptr<void> buffer(std::aligned_alloc(huge, rounded), std::free);
  if (!buffer) throw std::bad_alloc();
  madvise(buffer.get(), rounded, MADV_HUGEPAGE);  // a hint: without THP, plain pages
  return buffer;
}

PackedWeights::PackedWeights(at::Tensor plain, dnnl::memory::dims dims, dnnl::memory::format_tag tag,
                             bool keep_plain)
    : plain_(std::move(plain)),
      plain_md_(dims, plain_.scalar_type() == at::kChar ? dnnl::memory::data_type::s8 : dnnl::memory::data_type::f32,
                tag),
      keep_plain_(keep_plain) {}

std::atomic<WeightsPackedHook>& weights_packed_hook() {
  static std::atomic<WeightsPackedHook> hook{nullptr};
  return hook;
}

dnnl::memory PackedWeights::get(const dnnl::memory::desc& md) {
  {
    std::shared_lock lock(mutex_);
    for (const auto& p : packed_)
      if (p.first == md) return p.second;
  }
  std::unique_lock lock(mutex_);
  for (const auto& p : packed_)
    if (p.first == md) return p.second;
  const size_t bytes = md.get_size();
  dnnl::memory packed;
  // Written whole by the reorder below: prefaulted from 64 KiB (huge pages from 1 MiB).
  if (std::shared_ptr<void> buffer = bytes >= (size_t(64) << 10) ? prefaulted_buffer(bytes) : nullptr) {
    packed = dnnl::memory(md, engine(), buffer.get());
    buffers_.push_back(std::move(buffer));
  } else {
    packed = dnnl::memory(md, engine());
  }
  dnnl::memory source = plain_.defined() ? memory_of(plain_md_, plain_) : packed_.front().second;
  dnnl::stream s(engine());
  dnnl::reorder(source, packed).execute(s, source, packed);
  s.wait();
  packed_.emplace_back(md, packed);
  at::Tensor released;
  if (!keep_plain_) released = std::exchange(plain_, at::Tensor());  // later layouts are made from the first
  lock.unlock();
  if (released.defined())
    if (WeightsPackedHook hook = weights_packed_hook().load()) hook(released);
  return packed;
}

std::shared_ptr<void> prefaulted_buffer(size_t bytes) {
  constexpr size_t page = size_t(4) << 10, huge = size_t(2) << 20;
  const size_t unit = bytes >= huge / 2 ? huge : page;
  const size_t rounded = (std::max<size_t>(bytes, 1) + unit - 1) / unit * unit;
  // Huge pages need a 2 MiB-aligned start: map a unit more and unmap what lies outside.
  const size_t mapped = unit == huge ? rounded + huge : rounded;
  void* m = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  char* p = static_cast<char*>(m);
  if (unit == huge) {
    const uintptr_t start = reinterpret_cast<uintptr_t>(m);
    p = reinterpret_cast<char*>((start + huge - 1) / huge * huge);
    const size_t head = static_cast<size_t>(p - static_cast<char*>(m));
    if (head) munmap(m, head);
    if (huge - head) munmap(p + rounded, huge - head);
  }
  // Both hints: without THP plain pages; a kernel before 5.14 (no
  // MADV_POPULATE_WRITE) faults the pages in as they are written.
  if (unit == huge) madvise(p, rounded, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_WRITE
  madvise(p, rounded, MADV_POPULATE_WRITE);
#endif
  return std::shared_ptr<void>(p, [rounded](void* q) { munmap(q, rounded); });
}

std::shared_ptr<void> aligned_buffer(size_t bytes) {
  if (std::shared_ptr<void> huge = weight_buffer(bytes)) return huge;
  std::shared_ptr<void> buffer(std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64)), std::free);
  if (!buffer) throw std::bad_alloc();
  return buffer;
}

at::Tensor unplanned_empty(at::IntArrayRef sizes, c10::ScalarType dtype) {
  std::shared_ptr<void> buffer = aligned_buffer(c10::multiply_integers(sizes) * c10::elementSize(dtype));
  void* data = buffer.get();
  return at::from_blob(data, sizes, [buffer](void*) {}, at::TensorOptions().dtype(dtype));
}

at::Tensor PackedWeights::plain(at::IntArrayRef sizes) const {
  std::shared_lock lock(mutex_);
  if (plain_.defined()) return plain_;
  const bool int8 = plain_md_.data_type() == dnnl::memory::data_type::s8;
  at::Tensor out = unplanned_empty(sizes, int8 ? at::kChar : at::kFloat);
  dnnl::memory source = packed_.front().second;
  dnnl::memory target = memory_of(plain_md_, out);
  dnnl::stream s(engine());
  dnnl::reorder(source, target).execute(s, source, target);
  s.wait();
  return out;
}

size_t PackedWeights::bytes() const {
  std::shared_lock lock(mutex_);
  size_t n = 0;
  for (const auto& p : packed_) n += p.first.get_size();
  return n;
}

}  // namespace detail

WeightsPackedHook set_weights_packed_hook(WeightsPackedHook hook) { return detail::weights_packed_hook().exchange(hook); }

}  // namespace fx::onednn
