// Dropout's masks drawn in bulk: fxcpp::bernoulli_ and bernoulli_as_fxcpp.
//
// libtorch's CPU dropout draws its mask with `bernoulli_(t, 1 - p)`. Without
// MKL (Debian's libtorch) ATen's kernel makes one virtual call per element
// into the default generator (CPUGeneratorImpl::random64, two outputs of
// its MT19937 engine), converts the 64 bits to a double in [0, 1) and
// compares it with p: ~6.6 ns per element on Zen 4, 0.86 ms of a 2.5 ms
// TransformerEncoderLayer training step (d 64, batch 8, 4 dropouts).
//
// fxcpp::bernoulli_ draws the very same numbers: it takes the engine out
// of the generator (under the generator's lock), runs the MT19937
// recurrence over its 624-word state in bulk, tempers each output, pairs
// them as random64 does (first output the high half), keeps the low 53
// bits as uniform_real_distribution<double> does, and writes `u < p`
// element by element in memory order (TensorIterator's order for a dense
// tensor), then puts the engine back. Same masks, same generator state
// after, so a compiled step draws what eager draws from the same seed.
//
// The recurrence, the tempering and the comparison are integer arithmetic
// written without branches, so that the compiler vectorises them; each is
// built for AVX-512, AVX2 and the baseline (GCC's target_clones: the CPU
// picks at load time) and gives the same bits on all three. Measured on an
// AMD EPYC Zen 5, 1 thread, 131072 floats (BM_Bernoulli): see the commit.
#include <fx/aot.h>
#include <fx/tensor_meta.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/core/MT19937RNGEngine.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <mutex>
#include <type_traits>
#include <vector>

namespace fx {
namespace {

constexpr int kN = at::MERSENNE_STATE_N;
constexpr int kM = at::MERSENNE_STATE_M;

#define FX_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default"), noinline))

inline uint32_t twist(uint32_t u, uint32_t v) {
  return (((u & at::UMASK) | (v & at::LMASK)) >> 1) ^ (static_cast<uint32_t>(-static_cast<int32_t>(v & 1)) & at::MATRIX_A);
}

/// The MT19937 recurrence over the whole state (at::mt19937's next_state).
/// The second loop reads what the first wrote 227 words back: no
/// dependence within a vector.
FX_VECTOR_CLONES void twist_state(uint32_t* __restrict s) {
  for (int i = 0; i < kN - kM; ++i) s[i] = s[i + kM] ^ twist(s[i], s[i + 1]);
  for (int i = kN - kM; i < kN - 1; ++i) s[i] = s[i + kM - kN] ^ twist(s[i], s[i + 1]);
  s[kN - 1] = s[kM - 1] ^ twist(s[kN - 1], s[0]);
}

void next_state(at::mt19937_data_pod& d) {
  twist_state(d.state_.data());
  d.left_ = kN;
  d.next_ = 0;
}

inline uint32_t temper(uint32_t y) {
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680;
  y ^= (y << 15) & 0xefc60000;
  return y ^ (y >> 18);
}

FX_VECTOR_CLONES void temper_all(const uint32_t* __restrict s, uint32_t* __restrict out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = temper(s[i]);
}

/// out[i] = the 53 low bits of (words[2i] << 32 | words[2i + 1]) < below,
/// as 0 / 1 floats.
FX_VECTOR_CLONES void compare_pairs(const uint32_t* __restrict words, int64_t n, uint64_t below, float* __restrict out) {
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = (static_cast<uint64_t>(words[2 * i] & 0x1fffffu) << 32) | words[2 * i + 1];
    out[i] = bits < below ? 1.0f : 0.0f;
  }
}

/// The next `n` outputs of the engine whose state is `d`, as n calls of
/// at::mt19937::operator() give them, and the state they leave.
void draw(at::mt19937_data_pod& d, uint32_t* out, size_t n) {
  size_t k = 0;
  while (k < n) {
    if (d.left_ == 1) {  // operator(): --left_ reaches 0, the state turns over, left_ stays N
      next_state(d);
      out[k++] = temper(d.state_[d.next_++]);
      continue;
    }
    const size_t take = std::min(static_cast<size_t>(d.left_ - 1), n - k);
    temper_all(d.state_.data() + d.next_, out + k, take);
    d.next_ += static_cast<uint32_t>(take);
    d.left_ -= static_cast<int>(take);
    k += take;
  }
}

at::Tensor& bernoulli_(at::Tensor& self, double p) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  if (!self.device().is_cpu() || self.layout() != c10::kStrided || !self.is_non_overlapping_and_dense() ||
      self.is_conj() || self.is_neg())
    return self.bernoulli_(p);  // ATen's own kernel: the same numbers, one by one
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  auto* cpu = at::check_generator<at::CPUGeneratorImpl>(generator);
  const int64_t numel = self.numel();
  constexpr int64_t kChunk = 2048;  // elements per bulk draw
  std::array<uint32_t, 2 * kChunk> words;
  // uniform_real_distribution<double>: u = (bits & (2^53 - 1)) * 2^-53, and
  // u < p exactly when those 53 bits (an integer) are < p * 2^53, that is
  // < ceil(p * 2^53) (p * 2^53 is exact: a power of two scales p).
  const uint64_t below = static_cast<uint64_t>(std::ceil(p * 9007199254740992.0));  // bits < p * 2^53
  std::lock_guard<std::mutex> lock(cpu->mutex_);
  at::mt19937 engine = cpu->engine();
  at::mt19937_data_pod state = engine.data();
  AT_DISPATCH_ALL_TYPES_AND3(at::ScalarType::Bool, at::ScalarType::BFloat16, at::ScalarType::Half, self.scalar_type(),
                             "fxcpp::bernoulli_", [&] {
                               scalar_t* out = self.data_ptr<scalar_t>();
                               for (int64_t begin = 0; begin < numel; begin += kChunk) {
                                 const int64_t n = std::min(kChunk, numel - begin);
                                 draw(state, words.data(), static_cast<size_t>(2 * n));
                                 if (std::is_same_v<scalar_t, float>) {  // (not a template: both branches compile)
                                   compare_pairs(words.data(), n, below, reinterpret_cast<float*>(out + begin));
                                   continue;
                                 }
                                 for (int64_t i = 0; i < n; ++i) {
                                   const uint64_t bits =
                                       (static_cast<uint64_t>(words[2 * i]) << 32) | words[2 * i + 1];
                                   out[begin + i] = static_cast<scalar_t>((bits & ((uint64_t{1} << 53) - 1)) < below);
                                 }
                               }
                             });
  engine.set_data(state);
  cpu->set_engine(engine);
  return self;
}

TORCH_LIBRARY_FRAGMENT(fxcpp, m) { m.def("bernoulli_(Tensor(a!) self, float p=0.5) -> Tensor(a!)", &bernoulli_); }

}  // namespace

size_t bernoulli_as_fxcpp(Graph& g) {
  std::vector<Node*> draws;
  for (Node* n : g.nodes()) {
    if (n->op() != Opcode::CallFunction || n->target() != "aten::bernoulli_.float" || n->args().size() < 2 ||
        n->args().size() > 3 || n->args()[1].kind() != Argument::Kind::Double)
      continue;
    bool default_generator = n->args().size() == 2 || n->args()[2].is_none();
    for (const auto& [name, value] : n->kwargs()) default_generator = default_generator && name == "generator" && value.is_none();
    if (default_generator) draws.push_back(n);
  }
  for (Node* n : draws) {
    Node* fast;
    {
      auto guard = g.inserting_before(n);
      fast = g.call_function("fxcpp::bernoulli_", {n->args()[0], n->args()[1]});
    }
    fast->meta() = n->meta();
    n->replace_all_uses_with(fast);
    g.erase_node(n);
  }
  return draws.size();
}

}  // namespace fx
